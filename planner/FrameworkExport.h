// FrameworkExport: a plan's layout as the launch settings of a real distributed
// training framework, so that a plan can leave this desktop:
//   Megatron-LM        command-line arguments (a bash array) and the torchrun line
//   DeepSpeed          a ds_config.json
//   NeuronX Distributed the arguments of its Llama training scripts (Trainium)
//   PyTorch FSDP2      a Python module: fully_shard on a DeviceMesh, with TP, PP and CP
//   torchtitan         a Python recipe: a function returning a Trainer.Config
//   Megatron-Bridge    a Python recipe: a function returning a ConfigContainer
//   MaxText            a YAML config with ici_*/dcn_* mesh axes (TPU and GPU)
//   NxD Training       a YAML config for neuronx-distributed-training (Trainium)
// and the launch line.
//
// What each framework cannot express is refused with a message that names the
// feature ("deepspeed: context parallelism (cp=4) is not expressible (...)"); a
// layout feature is never dropped silently. Every refusal is reported at once, as
// validate() does for fields. The option names, and the sources they were looked up
// in, are listed at the top of each exporter (planner/export/*.cpp).
//
// Plain C++ and QtCore (JSON); the texts are deterministic, so they are kept in
// golden files (tests/golden/export).
#pragma once

#include "Layout.h"
#include "Problem.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

enum class ExportFormat { Megatron, DeepSpeed, NeuronX, Fsdp, Torchtitan, MegatronBridge, MaxText, NxdTraining };

// One refused feature, as export --json reports it.
struct ExportRefusal {
    std::string feature;  // "context parallelism (cp=4)", "NVIDIA H100 devices", "layout.tp"
    std::string reason;   // why the framework cannot run it, with the source that says so
    bool operator==(const ExportRefusal&) const = default;
};

struct ExportResult {
    std::string text;                  // the settings, ready to save; empty when refused
    std::vector<std::string> refusals; // "<format>: <feature> is not expressible (<why>)", one per feature
    std::vector<ExportRefusal> refused;  // the same refusals, feature and reason apart
    // What the user must still do or know. Text formats carry these as comments as well;
    // JSON cannot, so a caller shows them beside it.
    std::vector<std::string> notes;
    bool notes_in_text = true;

    bool ok() const { return refusals.empty(); }
};

// The layout must be complete (dp resolved). A layout that breaks validate() for the
// problem is refused with the field errors.
ExportResult exportSettings(ExportFormat format, const Problem& problem, const Layout& layout);

// Whether the framework can run the layout (its exporter refuses nothing).
bool frameworkRuns(ExportFormat format, const Problem& problem, const Layout& layout);
// Every export format, in the order of exportFormatChoices().
const std::vector<ExportFormat>& exportFormats();
// The formats whose framework can run the layout.
std::vector<ExportFormat> frameworksThatRun(const Problem& problem, const Layout& layout);

const char* toString(ExportFormat format);             // "megatron", "deepspeed", "neuronx", "fsdp", ...
std::optional<ExportFormat> exportFormatFromString(const std::string& text);
// "megatron|deepspeed|neuronx|fsdp|torchtitan|megatron-bridge|maxtext|nxd-training"
std::string exportFormatChoices();
// The file name extension of the settings: "sh", "json", "py" or "yaml".
const char* exportFileExtension(ExportFormat format);

} // namespace shardscope
