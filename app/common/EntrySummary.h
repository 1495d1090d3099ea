// One-line and multi-line descriptions of catalog entries for people,
// shared by the CLI tables and the GUI's catalog page.
#pragma once

#include "SpecLookup.h"

#include <string>
#include <utility>
#include <vector>

namespace shardscope {

// "decoder, 32 layers, hidden 4096, GQA 32/8, SwiGLU, 8,030,261,248 parameters"; a mixture of
// experts adds its experts and the parameters a token uses: "..., MoE 8 experts top-2,
// 46,702,792,704 parameters (12,879,925,248 active)"
std::string summarize(const ModelSpec& model);
// "bf16 190 TFLOP/s, 32.0 GiB HBM at 880 GB/s, 2 devices per chip"
std::string summarize(const ChipSpec& chip);
// "16 x trainium1 (32 devices), torus2d 412 GB/s per chip, 100 GB/s per node, $21.50/h"
std::string summarize(const NodeType& node);
// Any entry, resolved through the catalog it came from.
std::string summarize(const SpecLookup& specs, const CatalogEntry& entry);

// Field/value rows for a detailed view, with units and sources.
std::vector<std::pair<std::string, std::string>> describe(const ModelSpec& model);
std::vector<std::pair<std::string, std::string>> describe(const ChipSpec& chip);
std::vector<std::pair<std::string, std::string>> describe(const NodeType& node);

} // namespace shardscope
