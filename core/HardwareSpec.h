// ChipSpec, NodeType, ClusterSpec: the hardware side of a problem.
// Figures are in SI base units; 0 means "not published" (the catalog leaves a
// figure out rather than inventing it), and code that needs one reports it.
#pragma once

#include "FieldError.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardscope {

enum class DataType { FP32, BF16, FP16, FP8, FP4 };

struct ChipSpec {
    std::string name;             // "trainium1"
    std::string vendor;           // "AWS"
    std::string display_name;     // "AWS Trainium (Trn1)"
    double peak_flops_fp32 = 0;   // dense FLOP/s per chip
    double peak_flops_bf16 = 0;
    double peak_flops_fp16 = 0;   // 0: same as bf16
    double peak_flops_fp8 = 0;
    double peak_flops_fp4 = 0;    // dense FP4 (NVFP4 GEMMs)
    double hbm_bytes = 0;         // per chip
    double hbm_bytes_per_second = 0;
    int devices_per_chip = 1;     // units of parallelism sharing the chip's HBM (Trainium: NeuronCores)
    // The FP8/FP4 training recipes the chip runs, by their --precision names ("fp8", "mxfp8", ...;
    // TrainingSpec.h), as its frameworks check them (with a source); empty: none.
    std::vector<std::string> low_precision_recipes;
    std::map<std::string, std::string> sources;  // field path -> source

    double peakFlops(DataType type) const;        // 0 when not published
    bool runsRecipe(const std::string& precision) const;
    double hbmBytesPerDevice() const { return hbm_bytes / devices_per_chip; }
    bool operator==(const ChipSpec&) const = default;
};

enum class Topology { Ring, Torus2D, Torus3D, Switch, FullyConnected };

struct NodeType {
    std::string name;             // "trn1.32xlarge"
    std::string display_name;
    ChipSpec chip;                // resolved from the catalog by name
    int chips_per_node = 0;
    Topology intra_topology = Topology::Switch;
    double intra_link_bytes_per_second = 0;   // per chip, one direction, scale-up link
    int scale_up_chips = 0;                   // chips reachable over the scale-up link (0: chips_per_node)
    double inter_node_bytes_per_second = 0;   // per node, one direction; 0: not published
    double host_link_bytes_per_second = 0;    // per chip to host memory (PCIe), one direction; 0: not published
    double price_per_node_hour_usd = 0;       // 0: not published
    std::string price_kind;                   // "on-demand", "capacity-block", ...
    std::map<std::string, std::string> sources;

    int devicesPerNode() const { return chips_per_node * chip.devices_per_chip; }
    int scaleUpChips() const { return scale_up_chips > 0 ? scale_up_chips : chips_per_node; }
    bool operator==(const NodeType&) const = default;
};

struct ClusterSpec {
    NodeType node;
    int nodes = 1;

    std::int64_t devices() const { return std::int64_t(nodes) * node.devicesPerNode(); }
    std::int64_t chips() const { return std::int64_t(nodes) * node.chips_per_node; }
    bool operator==(const ClusterSpec&) const = default;
};

FieldErrors validate(const ChipSpec& chip, const std::string& path = "chip");
FieldErrors validate(const NodeType& node, const std::string& path = "node");
FieldErrors validate(const ClusterSpec& cluster, const std::string& path = "cluster");

const char* toString(DataType v);
const char* toString(Topology v);

} // namespace shardscope
