#include "ScaledCase.h"
#include "CostModel.h"
#include "EmulatedHardware.h"

#include <algorithm>
#include <cmath>

namespace shardscope {

std::string validationRunName(const Problem& full, const Layout& layout)
{
    return full.model.name + " on " + std::to_string(full.cluster.nodes) + " x " + full.cluster.node.name + " " +
           toString(layout) + " (scaled)";
}

ScaledCase scaledValidationCase(const Problem& full, const Layout& fullLayout, int steps, const CostModelParams& fullTerms)
{
    ScaledCase out;
    std::vector<std::string>& notes = out.adaptations;
    Layout l = fullLayout;
    auto s = [](auto v) { return std::to_string(v); };

    // What the engine executes.
    if (l.cp > 1) {
        notes.push_back("cp=" + s(l.cp) + " folded into dp: the engine has no context parallelism");
        l.dp *= l.cp;
        l.cp = 1;
    }
    if (l.schedule == PipelineSchedule::Interleaved) {
        notes.push_back("interleaved v=" + s(l.virtual_stages) + " run as 1f1b: the engine executes gpipe and 1f1b");
        l.schedule = PipelineSchedule::OneFOneB;
        l.virtual_stages = 1;
    }
    if (l.offload != Offload::None) {
        notes.push_back("optimizer offload kept on the device: the engine does not emulate the host");
        l.offload = Offload::None;
    }
    // Few enough devices for one worker thread each on this machine.
    const std::int64_t before = l.devices();
    while (l.devices() > kMaxValidationDevices && l.dp > 2) {
        l.dp /= 2;
    }
    while (l.devices() > kMaxValidationDevices && l.pp > 2)
        l.pp /= 2;
    while (l.devices() > kMaxValidationDevices && l.tp > 2)
        l.tp /= 2;
    while (l.devices() > kMaxValidationDevices && l.dp > 1)
        l.dp /= 2;
    if (l.devices() != before)
        notes.push_back(s(before) + " devices reduced to " + s(l.devices()) + " (dp " + s(fullLayout.dp) + " -> " +
                        s(l.dp) + ", tp " + s(fullLayout.tp) + " -> " + s(l.tp) + ", pp " + s(fullLayout.pp) + " -> " +
                        s(l.pp) + ")");
    if (l.zero_group > 0 && (l.zero_group >= l.dp || l.dp % l.zero_group != 0)) {
        notes.push_back("ZeRO shard group " + s(l.zero_group) + " widened to the whole dp group of " + s(l.dp));
        l.zero_group = 0;
    }
    if (l.sequence_parallel && l.tp == 1)
        l.sequence_parallel = false;
    l.micro_batch = std::min(l.micro_batch, 2);

    // An engine-sized GPT with the layout's divisibility: 2 layers per stage, 2 heads per
    // tensor-parallel rank of 16 dimensions, a vocabulary tp divides, 2 micro-batches per
    // pipeline stage and step.
    ValidationCase& c = out.validation;
    engine::TrainRequest& r = c.request;
    r.model.layers = 2 * l.pp;
    r.model.heads = std::max(4, 2 * l.tp);
    r.model.hidden = 16 * r.model.heads;
    r.model.vocab = 64 * l.tp;
    r.model.seq = 32;
    r.batch = l.dp * l.micro_batch * std::max(2, 2 * l.pp);
    r.steps = steps;
    r.layout = l;
    r.recompute = l.recompute;
    r.precision = l.devices() > 1 || full.training.precision == Precision::FP32 ? engine::PrecisionMode::FP32
                                                                                : engine::PrecisionMode::BF16Mixed;
    if (full.training.precision != Precision::FP32 && r.precision == engine::PrecisionMode::FP32)
        notes.push_back("trained in fp32: the emulated cluster computes in fp32");
    if (full.model.family != ModelFamily::DecoderOnly || full.model.mlp != MlpKind::Gelu ||
        full.model.kv_heads != full.model.heads || full.model.norm != NormKind::LayerNorm)
        notes.push_back(full.model.name + " trains as a GPT-2-shaped model (learned positions, LayerNorm, GeLU, MHA): "
                        "the engine's model");

    // The chip scaled so that the small model fills the same fraction of its memory as the
    // full model does on the real chip.
    const ChipSpec& chip = full.cluster.node.chip;
    if (!(chip.hbm_bytes > 0) || !(chip.hbm_bytes_per_second > 0))
        throw InputError("the plan's chip " + chip.name + " has no memory figures to scale");
    out.full_prediction = CostModel(full, fullTerms).evaluate(fullLayout);
    const Prediction& fullPrediction = out.full_prediction;
    const double fraction = fullPrediction.memory_bytes.total() / fullPrediction.memory_bytes.capacity;
    engine::DeviceProfile unit = engine::profileFromChip(chip, 1.0);
    const engine::LinkSpec noLinks;
    const Problem small = emulatedProblem(r.model, r.batch, r.precision, unit, noLinks, int(l.devices()));
    const Prediction smallPrediction =
        CostModel(small, engineCostModelParams(unit, noLinks, r.bucket_bytes, defaultCostModelParams())).evaluate(l);
    const double needed = smallPrediction.memory_bytes.total() - smallPrediction.memory_bytes.reserve;
    out.memory_scale = std::clamp(needed / std::max(1e-9, fraction) / unit.memory_bytes, 1e-12, 1.0);
    c.profile = engine::profileFromChip(chip, out.memory_scale);

    // The node type's links, scaled like the device; nodes of the plan's size (capped).
    const NodeType& node = full.cluster.node;
    r.links.intra_bytes_per_second = node.intra_link_bytes_per_second / chip.devices_per_chip * out.memory_scale;
    r.links.inter_bytes_per_second =
        node.inter_node_bytes_per_second > 0 ? node.inter_node_bytes_per_second / node.devicesPerNode() * out.memory_scale
                                             : r.links.intra_bytes_per_second;
    r.links.node_devices = std::min<int>(node.devicesPerNode(), int(l.devices()));
    c.name = validationRunName(full, fullLayout);
    return out;
}

} // namespace shardscope
