#include "FrameworkExport.h"
#include "export/ExportCommon.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardscope {

namespace exportdetail {
// One per framework, in planner/export/.
ExportResult exportMegatron(const Problem& problem, const Layout& layout);
ExportResult exportDeepSpeed(const Problem& problem, const Layout& layout);
ExportResult exportNeuronX(const Problem& problem, const Layout& layout);
ExportResult exportFsdp(const Problem& problem, const Layout& layout);
ExportResult exportTorchtitan(const Problem& problem, const Layout& layout);
ExportResult exportMegatronBridge(const Problem& problem, const Layout& layout);
ExportResult exportMaxText(const Problem& problem, const Layout& layout);
ExportResult exportNxdTraining(const Problem& problem, const Layout& layout);

bool isCudaOrRocmGpu(const ChipSpec& chip) { return chip.vendor == "NVIDIA" || chip.vendor == "AMD"; }
bool isTrainium(const ChipSpec& chip) { return chip.vendor == "AWS" && chip.name.rfind("trainium", 0) == 0; }

Figures figures(const Problem& p, const Layout& l)
{
    Figures f;
    f.devices_per_node = p.cluster.node.devicesPerNode();
    f.nodes = p.cluster.nodes;
    f.devices = p.cluster.devices();
    f.micro_batches = microBatchesPerStep(l, p.training);
    f.replica_batch = l.dp > 0 ? p.training.global_batch / l.dp : 0;
    f.shard_group = l.zeroGroupSize();
    f.partial_shard = l.zero_stage > 0 && f.shard_group < l.dp;
    f.pipelined = l.pp > 1;
    return f;
}

void refuseMegatronOverlaps(Refusals& refuse, const Layout& l)
{
    if (l.tp_comm_overlap)
        refuse.add("tp_comm_overlap=on", "it is Megatron-LM's --tp-comm-overlap (Transformer Engine userbuffers)");
    if (l.overlap_param_gather)
        refuse.add("overlap_param_gather=on", "it is Megatron-LM's --overlap-param-gather of the distributed optimizer");
    if (l.ep_comm_overlap)
        refuse.add("ep_comm_overlap=on", "it is Megatron-LM's --overlap-moe-expert-parallel-comm (one micro-batch's "
                                         "expert all-to-all under another's compute)");
}

void refuseMultiTokenPrediction(Refusals& refuse, const ModelSpec& m, const std::string& why)
{
    if (m.mtp.enabled())
        refuse.add("multi-token prediction (" + std::to_string(m.mtp.layers) + " MTP layer" +
                       (m.mtp.layers > 1 ? "s" : "") + ")",
                   why);
}

void refuseMoeDispatcher(Refusals& refuse, const Layout& l, const std::string& why)
{
    if (l.moe_dispatcher != MoeDispatcher::AllToAll)
        refuse.add(std::string("the ") + toString(l.moe_dispatcher) + " MoE token dispatcher (moe_dispatcher=" +
                       toString(l.moe_dispatcher) + ")",
                   why);
}

void refuseAllToAllCp(Refusals& refuse, const Layout& l, const std::string& why)
{
    if (l.cp > 1 && l.cp_comm == CpComm::A2A)
        refuse.add("all-to-all context parallelism (cp_comm=a2a)", why);
}

void refuseExpertParallel(Refusals& refuse, const Layout& l, const std::string& why)
{
    if (l.ep > 1)
        refuse.add("expert parallelism (ep=" + str(l.ep) + ")", why);
    if (l.etp > 0 && l.etp != l.tp)
        refuse.add("expert tensor parallelism (etp=" + str(l.etp) + " with tp=" + str(l.tp) + ")", why);
}

std::string expertGridNote(const ModelSpec& m, const Layout& l)
{
    const int etp = l.expertTensorParallel();
    return "Experts: " + str(m.moe.experts) + " routed experts over ep " + str(l.ep) + " (" +
           str(m.moe.experts / l.ep) + " per rank), each expert's matrices over etp " + str(etp) +
           "; expert data-parallel size " + str(l.expertDataParallel()) + " = tp " + str(l.tp) + " x cp " +
           str(l.cp) + " x dp " + str(l.dp) + " / (ep " + str(l.ep) + " x etp " + str(etp) + ").";
}

std::string modelFieldFeatures(const ModelSpec& m)
{
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
    if (m.qkv_bias && !m.bias)
        add("biases on q, k and v");
    if (m.qk_norm)
        add("QK-norm");
    if (m.sliding_window.enabled())
        add("a sliding window of " + str(m.sliding_window.size));
    if (m.attention_sinks)
        add("attention sinks");
    if (m.positions == PositionKind::Rotary && m.rope_scaling.enabled())
        add(std::string("RoPE scaling ") + toString(m.rope_scaling.type));
    // Llama 2 and 3 train with 1e-5 (their Hugging Face configs' rms_norm_eps); the exports that
    // build a Llama write no other epsilon.
    if (m.norm_eps != 1e-5)
        add("norm_eps " + num(m.norm_eps));
    if (m.moe.enabled())
        add("mixture of experts");
    if (m.mla.enabled())
        add("multi-head latent attention");
    return out;
}

std::string modelBuildNote(const ModelSpec& m)
{
    const std::string fields = modelFieldFeatures(m);
    if (fields.empty())
        return {};
    return "These settings do not describe the model: build " + m.name + " from its own Hugging Face config (" +
           fields + "), which carries them.";
}

// What keeps a model from being a Llama (RMSNorm, SwiGLU, RoPE, no biases, dense), empty when it is one.
std::string nonLlamaFeatures(const ModelSpec& m)
{
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
    if (m.family != ModelFamily::DecoderOnly)
        add(std::string("family ") + toString(m.family));
    if (m.mlp != MlpKind::SwiGlu)
        add(std::string("mlp ") + toString(m.mlp));
    if (m.norm != NormKind::RmsNorm)
        add(std::string("norm ") + toString(m.norm));
    if (m.positions != PositionKind::Rotary)
        add(std::string("positions ") + toString(m.positions));
    if (m.bias)
        add("biases");
    if (const std::string fields = modelFieldFeatures(m); !fields.empty())
        add(fields);
    if (m.head_dim * m.heads != m.hidden)
        add("head_dim x heads != hidden");
    return out;
}

void refuseUnevenPipeline(Refusals& refuse, const Layout& l, const char* why)
{
    if (l.splitAccountsForEnds())
        refuse.add(std::string("a pipeline split counting ") +
                       (l.account_for_embedding_in_pipeline_split && l.account_for_loss_in_pipeline_split
                            ? "the embedding and the loss as layers (account_for_embedding_in_pipeline_split=on, "
                              "account_for_loss_in_pipeline_split=on)"
                        : l.account_for_embedding_in_pipeline_split
                            ? "the embedding as a layer (account_for_embedding_in_pipeline_split=on)"
                            : "the loss as a layer (account_for_loss_in_pipeline_split=on)"),
                   why);
    else if (const PipelineLayerLayout* custom = l.layerLayout())
        refuse.add("an explicit pipeline layout (pipeline_layout=" + custom->text() + ")", why);
    else if (l.unevenPipeline())
        refuse.add("an uneven pipeline split (first_stage_layers=" + str(l.first_stage_layers) +
                       ", last_stage_layers=" + str(l.last_stage_layers) + ")",
                   why);
}

void refusePartialRecompute(Refusals& refuse, const Layout& l, const char* why)
{
    if (l.recompute_layers > 0)
        refuse.add(std::string("recompute_method=") + toString(l.recompute_method) +
                       ",recompute_layers=" + str(l.recompute_layers),
                   why);
}

void refuseModuleRecomputeAndOffload(Refusals& refuse, const Layout& l, const char* modulesWhy, const char* offloadWhy)
{
    if (l.recompute_modules != 0)
        refuse.add("recompute_modules=" + recomputeModulesToString(l.recompute_modules), modulesWhy);
    if (l.offload_activations > 0)
        refuse.add("offload_activations=" + str(l.offload_activations), offloadWhy);
}

std::string problemLine(const Problem& p)
{
    return p.model.name + " on " + str(p.cluster.nodes) + " x " + p.cluster.node.name + " (" +
           str(p.cluster.devices()) + " devices), global batch " + str(p.training.global_batch) + " x " +
           str(p.training.seq_len) + " tokens";
}

std::string str(std::int64_t v) { return std::to_string(v); }

std::string num(double v)
{
    if (v == std::floor(v) && std::fabs(v) < 1e15)
        return std::to_string(std::int64_t(v));  // 500000, not 5e+05
    char text[32];
    for (int digits = 1; digits <= 17; ++digits) {
        std::snprintf(text, sizeof text, "%.*g", digits, v);
        if (std::strtod(text, nullptr) == v)
            break;
    }
    return text;
}

std::string torchrunCommand(const Figures& f, bool quoted)
{
    const char* q = quoted ? "\"" : "";
    return "torchrun --nnodes " + str(f.nodes) + " --nproc_per_node " + str(f.devices_per_node) + " --node_rank " + q +
           "$NODE_RANK" + q + " --master_addr " + q + "$MASTER_ADDR" + q + " --master_port 29500";
}

std::string pyBool(bool v) { return v ? "True" : "False"; }

std::string commentLines(const std::vector<std::string>& lines)
{
    std::string out;
    for (const std::string& line : lines) {
        out += line.empty() ? "#" : "# ";
        out += line;
        out += '\n';
    }
    return out;
}
} // namespace exportdetail

namespace {
struct FormatName {
    ExportFormat format;
    const char* name;
    const char* extension;
};
constexpr std::array kFormats{
    FormatName{ExportFormat::Megatron, "megatron", "sh"},
    FormatName{ExportFormat::DeepSpeed, "deepspeed", "json"},
    FormatName{ExportFormat::NeuronX, "neuronx", "sh"},
    FormatName{ExportFormat::Fsdp, "fsdp", "py"},
    FormatName{ExportFormat::Torchtitan, "torchtitan", "py"},
    FormatName{ExportFormat::MegatronBridge, "megatron-bridge", "py"},
    FormatName{ExportFormat::MaxText, "maxtext", "yaml"},
    FormatName{ExportFormat::NxdTraining, "nxd-training", "yaml"},
};
} // namespace

ExportResult exportSettings(ExportFormat format, const Problem& problem, const Layout& layout)
{
    const FieldErrors errors = validate(layout, problem.model, problem.cluster, problem.training);
    if (!errors.empty()) {
        ExportResult refused;
        for (const FieldError& e : errors) {
            refused.refusals.push_back(std::string(toString(format)) + ": " + e.text());
            refused.refused.push_back({e.path, e.message});
        }
        return refused;
    }
    ExportResult result;
    switch (format) {
    case ExportFormat::Megatron: result = exportdetail::exportMegatron(problem, layout); break;
    case ExportFormat::DeepSpeed: result = exportdetail::exportDeepSpeed(problem, layout); break;
    case ExportFormat::NeuronX: result = exportdetail::exportNeuronX(problem, layout); break;
    case ExportFormat::Fsdp: result = exportdetail::exportFsdp(problem, layout); break;
    case ExportFormat::Torchtitan: result = exportdetail::exportTorchtitan(problem, layout); break;
    case ExportFormat::MegatronBridge: result = exportdetail::exportMegatronBridge(problem, layout); break;
    case ExportFormat::MaxText: result = exportdetail::exportMaxText(problem, layout); break;
    case ExportFormat::NxdTraining: result = exportdetail::exportNxdTraining(problem, layout); break;
    }
    if (!result.ok()) {
        result.text.clear();
        result.notes.clear();
    }
    return result;
}

bool frameworkRuns(ExportFormat format, const Problem& problem, const Layout& layout)
{
    return exportSettings(format, problem, layout).ok();
}

const std::vector<ExportFormat>& exportFormats()
{
    static const std::vector<ExportFormat> all = [] {
        std::vector<ExportFormat> v;
        for (const FormatName& f : kFormats)
            v.push_back(f.format);
        return v;
    }();
    return all;
}

std::vector<ExportFormat> frameworksThatRun(const Problem& problem, const Layout& layout)
{
    std::vector<ExportFormat> out;
    for (ExportFormat f : exportFormats())
        if (frameworkRuns(f, problem, layout))
            out.push_back(f);
    return out;
}

const char* toString(ExportFormat format)
{
    for (const FormatName& f : kFormats)
        if (f.format == format)
            return f.name;
    return "?";
}

std::optional<ExportFormat> exportFormatFromString(const std::string& text)
{
    for (const FormatName& f : kFormats)
        if (text == f.name)
            return f.format;
    return std::nullopt;
}

const char* exportFileExtension(ExportFormat format)
{
    for (const FormatName& f : kFormats)
        if (f.format == format)
            return f.extension;
    return "txt";
}

std::string exportFormatChoices()
{
    std::string out;
    for (const FormatName& f : kFormats) {
        if (!out.empty())
            out += '|';
        out += f.name;
    }
    return out;
}

} // namespace shardscope
