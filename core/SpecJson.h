// JSON documents for every spec: "schema": "shardscope.<kind>/1".
// Writers emit SI base units; readers also accept quantities with units.
// Readers validate fully and report every problem with its field path.
#pragma once

#include "FieldError.h"
#include "HardwareSpec.h"
#include "Layout.h"
#include "ModelSpec.h"
#include "Problem.h"
#include "TrainingSpec.h"

#include <QJsonObject>

#include <functional>
#include <optional>
#include <string>

namespace shardscope {

inline constexpr int kSpecSchemaVersion = 1;

// Model documents also carry the derived "parameters" and "flops_per_token"
// (forward, at max_seq); readers ignore them (they are recomputed).
QJsonObject toJson(const ModelSpec& model);
QJsonObject toJson(const ChipSpec& chip);
// A node names its chip; the chip's own document is separate.
QJsonObject toJson(const NodeType& node);
QJsonObject toJson(const TrainingSpec& training);
QJsonObject toJson(const Layout& layout);
QJsonObject toJson(const Problem& problem);  // model and node inline

// Each reader returns a value only when the document has no problem at all.
std::optional<ModelSpec> modelFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);
std::optional<ChipSpec> chipFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);
// Resolves the node's "chip" name (or an inline chip object) through `findChip`.
using ChipLookup = std::function<std::optional<ChipSpec>(const std::string& name)>;
std::optional<NodeType> nodeFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors,
                                     const ChipLookup& findChip);
std::optional<TrainingSpec> trainingFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);
std::optional<Layout> layoutFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);
std::optional<Problem> problemFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);

// A model's "rope_scaling" object ({"type", "factor", ...}, Hugging Face's keys with rope_type
// spelled "type"), its problems under `path`.
RopeScaling ropeScalingFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);

// The kind named by a document's schema tag ("model", "chip", "node", ...), or empty.
std::string schemaKind(const QJsonObject& json);

} // namespace shardscope
