#include "ScaledCase.h"
#include "CostModel.h"
#include "EmulatedHardware.h"
#include "TrainingObjective.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardscope {

std::string validationRunName(const Problem& full, const Layout& layout)
{
    return full.model.name + " on " + std::to_string(full.cluster.nodes) + " x " + full.cluster.node.name + " " +
           toString(layout) + " (scaled)";
}

namespace {

// Multi-head latent attention at engine size: the RoPE part 4 wide, the no-RoPE query/key part and
// the value head in their ratios to it (DeepSeek-V3's 128 / 64 / 128: 8, 4, 8), the q and kv ranks
// in their ratios to the hidden size (even, at least 4; a model without q compression keeps none);
// the scores' YaRN factor as the model's (mscale^2, HF DeepseekV3Attention.scaling with
// yarn_get_mscale(factor, mscale_all_dim), transformers models/deepseek_v3/modular_deepseek_v3.py
// @ 000c33f; Megatron-LM's MLA softmax_scale, multi_latent_attention.py @ d98e8a64). The RoPE
// frequencies stay unscaled: 32 tokens are far inside the original context.
void scaleMla(const ModelSpec& m, engine::ModelConfig& c)
{
    const MlaSpec& a = m.mla;
    const int P = 4;
    auto even = [&](double ratio) { return std::max(4, 2 * int(std::lround(ratio * c.hidden / 2))); };
    c.mla.qk_rope_head_dim = P;
    c.mla.qk_nope_head_dim = std::max(2, int(std::lround(double(P) * a.qk_nope_head_dim / a.qk_rope_head_dim)));
    c.mla.v_head_dim = std::max(2, int(std::lround(double(P) * a.v_head_dim / a.qk_rope_head_dim)));
    c.mla.q_lora_rank = a.q_lora_rank > 0 ? even(double(a.q_lora_rank) / m.hidden) : 0;
    c.mla.kv_lora_rank = even(double(a.kv_lora_rank) / m.hidden);
    c.head_dim = c.mla.qkHeadDim();
    c.kv_heads = c.heads;
    const RopeScaling& r = m.rope_scaling;
    if (r.type != RopeScalingKind::None && r.mscale_all_dim > 0 && r.factor > 1) {
        const double mscale = 0.1 * r.mscale_all_dim * std::log(r.factor) + 1.0;
        c.mla.softmax_mscale = mscale * mscale;
    }
}

// How group-limited routing was scaled with the experts (engine/ModelConfig.cpp scaledMoe).
std::string scaledGroupsNote(const MoeSpec& full, const engine::MoeConfig& scaled)
{
    if (full.expert_groups == 0 ||
        (scaled.expert_groups == full.expert_groups && scaled.group_top_k == full.group_top_k))
        return "";
    if (scaled.expert_groups == 0)
        return "; group-limited routing (top " + std::to_string(full.group_top_k) + " of " +
               std::to_string(full.expert_groups) + " groups) has no choice left at this size: routed without groups";
    return "; group-limited routing's top " + std::to_string(full.group_top_k) + " of " +
           std::to_string(full.expert_groups) + " groups scaled to top " + std::to_string(scaled.group_top_k) +
           " of " + std::to_string(scaled.expert_groups);
}

} // namespace

engine::ModelConfig scaledEngineModel(const ModelSpec& m, const Layout& l)
{
    if (m.attention_sinks)
        throw InputError(m.name + ": attention_sinks are not executed by the engine yet: no validation run");
    // Multi-token prediction (ModelSpec.h MtpSpec) runs in the engine's executor (ModelConfig.h); what it
    // does not execute is named here rather than validating another model than the plan's.
    if (m.mtp.enabled() && l.cp > 1)
        throw InputError(m.name + ": multi-token prediction under context parallelism (cp " + std::to_string(l.cp) +
                         ") is not executed by the engine: no validation run");
    if (m.mtp.enabled() && l.schedule == PipelineSchedule::Interleaved && l.virtual_stages > 1)
        throw InputError(m.name + ": multi-token prediction under the interleaved pipeline schedule is not executed by "
                         "the engine: no validation run");
    if (m.mtp.enabled() && m.positions != PositionKind::Rotary)
        throw InputError(m.name + ": multi-token prediction with " + std::string(toString(m.positions)) +
                         " positions is not executed by the engine (rotary only): no validation run");
    if (m.sliding_window.enabled() && l.cp > 1)
        throw InputError(m.name + ": sliding_window attention under context parallelism (cp " + std::to_string(l.cp) +
                         ") is not executed by the engine: no validation run");
    const bool encDec = m.family == ModelFamily::EncoderDecoder;
    if (encDec && m.positions != PositionKind::Relative)
        throw InputError(m.name + ": an encoder-decoder with " + toString(m.positions) +
                         " positions is not executed by the engine (T5's relative position bias is): no validation run");
    if (!encDec && m.positions != PositionKind::Learned && m.positions != PositionKind::Rotary)
        throw InputError(m.name + ": " + toString(m.positions) +
                         " positions are not executed by the engine yet: no validation run");
    engine::ModelConfig c;
    const int tp = std::max(1, l.tp);
    // All-to-all CP splits a device's query and key/value heads over cp (core's
    // allToAllCpSplitsHeads): the heads come in multiples of tp x cp then.
    const int split = l.cp_comm == CpComm::A2A && l.cp > 1 ? tp * l.cp : tp;
    const int ratio = std::clamp(m.kv_heads > 0 ? m.heads / m.kv_heads : 1, 1, 4);
    if (ratio == 1) {
        c.heads = (std::max(4, 2 * tp) + split - 1) / split * split;
        c.kv_heads = c.heads;
    } else {
        // Megatron-LM splits the query groups over tp: at least tp of them.
        const int groups = std::max(m.kv_heads == 1 ? 1 : 2, tp);
        c.kv_heads = (groups + split - 1) / split * split;
        c.heads = c.kv_heads * ratio;
    }
    c.head_dim = 16;
    c.hidden = 16 * c.heads;
    // The MLP keeps the model's width ratio (GPT 4, Llama 3 70B 3.5), rounded to what tp divides.
    const double width = m.hidden > 0 ? double(m.ffn_hidden) / m.hidden : 4.0;
    const int step = 2 * tp;
    c.ffn_hidden = std::max(step, int(std::lround(width * c.hidden / step)) * step);
    // 2 layers per stage; interleaved with v > 2, v (one per model chunk: pp v must divide them).
    const int chunks = l.schedule == PipelineSchedule::Interleaved ? std::max(1, l.virtual_stages) : 1;
    c.layers = l.pp * std::max(2, chunks);
    // An uneven split (scaledValidationCase): the ends' own counts, 2 on every other stage.
    // The embedding / loss counted as a layer: 2 per rank counted, so the ends hold 1.
    if (const PipelineLayerLayout* custom = l.layerLayout())
        c.layers = custom->transformerLayers();  // (scaledValidationCase scales it stage by stage)
    else if (l.splitAccountsForEnds())
        c.layers = 2 * l.pp - l.endLayers();
    else if (l.unevenPipeline())
        c.layers = (l.first_stage_layers > 0 ? l.first_stage_layers : 2) +
                   (l.last_stage_layers > 0 ? l.last_stage_layers : 2) + 2 * (l.pp - 2);
    c.vocab = 64 * tp;
    // 32 tokens, or the next multiple of 2 cp: context parallelism cuts each sequence into 2 cp chunks.
    const int cpChunks = 2 * std::max(1, l.cp);
    c.seq = (32 + cpChunks - 1) / cpChunks * cpChunks;
    c.mlp = m.mlp;
    c.norm = m.norm;
    c.norm_eps = m.norm_eps;
    c.positions = m.positions;
    c.rope_base = m.rope_base;
    c.bias = m.bias;
    c.qkv_bias = !m.bias && m.qkv_bias;  // Qwen2: q, k and v only
    c.qk_norm = m.qk_norm;               // Qwen3
    if (m.sliding_window.enabled()) {
        // The window keeps its share of the model's longest sequence (Mistral 7B v0.1: 4096 of
        // 32768, 4 of the 32 tokens here), at least 2 keys and at most half the sequence so that
        // the band is narrower than causal attention; a sliding layer of the model's first
        // layers stays one (GPT-OSS alternates from layer 0).
        const double share = m.max_seq > 0 ? double(m.sliding_window.size) / m.max_seq : 0.5;
        c.sliding_window.size = std::clamp(int(std::lround(share * c.seq)), 2, c.seq / 2);
        if (!m.sliding_window.layers.empty())
            for (int i = 0; i < c.layers; ++i)
                if (m.slidingLayer(i))
                    c.sliding_window.layers.push_back(i);
        if (!m.sliding_window.layers.empty() && c.sliding_window.layers.empty())
            c.sliding_window = {};  // none of the scaled layers slides
    }
    c.tied_embeddings = m.tied_embeddings;
    c.mtp.layers = m.mtp.layers;  // the model's depths and weight (ModelConfig.h MtpConfig)
    c.mtp.loss_scale = m.mtp.loss_scale;
    if (m.mla.enabled())
        scaleMla(m, c);
    // MoE: the model's router, top-k, shared experts and width ratios on a few experts (at least
    // 2 per ep rank; engine::scaledMoe).
    c.moe = engine::scaledMoe(m, c.hidden, c.layers, l.ep);
    // An encoder trains as BERT does (TrainingObjective.h): bidirectional, post-norm when it has
    // no final norm, its token types, embedding norm and pooler, the masked-LM objective.
    const bool encoder = maskedLanguageModel(m);
    c.causal = !encoder;
    c.post_norm = postNorm(m);
    c.token_types = encoder ? m.token_types : 0;
    c.embedding_norm = m.embedding_norm;
    c.masked_lm = encoder;
    c.pooler = encoder && m.pooler;
    if (encDec) {  // T5: 2 encoder and 2 decoder layers (one pipeline stage), the model's buckets
        c.encoder_decoder = true;
        c.decoder_layers = c.layers;
        c.relative_buckets = m.relative_buckets;
        c.norm_eps = 1e-6;  // T5's layer_norm_epsilon (HF T5Config's default; ModelSpec has no eps)
    }
    return c;
}

ScaledCase scaledValidationCase(const Problem& full, const Layout& fullLayout, int steps, const CostModelParams& fullTerms,
                                int maxDevices)
{
    if (maxDevices < 1)
        throw InputError("max-devices: " + std::to_string(maxDevices) + " must be at least 1");
    ScaledCase out;
    std::vector<std::string>& notes = out.adaptations;
    Layout l = fullLayout;
    auto s = [](auto v) { return std::to_string(v); };

    // Few enough devices for the engine here (a worker thread each; over MPI ranks, more). An HSDP plan keeps
    // dp >= 4: two shard groups of two.
    const std::int64_t before = l.devices();
    const bool hsdpPlan = l.zero_stage > 0 && l.zero_group > 0 && l.zero_group < l.dp;
    const int dpFloor = hsdpPlan && l.dp >= 4 ? 4 : 2;
    while (l.devices() > maxDevices && l.dp > dpFloor) {
        l.dp /= 2;
    }
    while (l.devices() > maxDevices && l.pp > 2)
        l.pp /= 2;
    while (l.devices() > maxDevices && l.cp > 2)
        l.cp /= 2;
    while (l.devices() > maxDevices && l.tp > 2)
        l.tp /= 2;
    while (l.devices() > maxDevices && l.dp > 1)
        l.dp /= 2;
    if (l.devices() != before)
        notes.push_back(s(before) + " devices reduced to " + s(l.devices()) + " (dp " + s(fullLayout.dp) + " -> " +
                        s(l.dp) + ", tp " + s(fullLayout.tp) + " -> " + s(l.tp) + ", pp " + s(fullLayout.pp) + " -> " +
                        s(l.pp) + ", cp " + s(fullLayout.cp) + " -> " + s(l.cp) + ")");
    // MoE: ep (x etp) must still divide the scaled stage's devices (tp x cp x dp): the largest
    // divisor of the plan's ep that does.
    if (full.model.moe.enabled() && l.expertDataParallel() == 0) {
        const std::int64_t grid = std::int64_t(l.tp) * l.cp * l.dp;
        int ep = l.ep;
        while (ep > 1 && (fullLayout.ep % ep != 0 || grid % (std::int64_t(ep) * l.expertTensorParallel()) != 0))
            --ep;
        l.ep = ep;
        if (l.etp > 0 && grid % (std::int64_t(l.ep) * l.etp) != 0)
            l.etp = 0;  // as tp
        notes.push_back("ep " + s(fullLayout.ep) + " reduced to " + s(l.ep) + " (ep x etp divides the scaled tp x cp x dp)");
    }
    // A shard group smaller than dp (HSDP) stays one: the largest divisor of the scaled dp that
    // leaves at least two replicas and is no larger than the plan's group; only when dp is too
    // small for two groups of two is it widened to the whole dp group.
    if (l.zero_group > 0 && (l.zero_group >= l.dp || l.dp % l.zero_group != 0)) {
        const bool hsdp = fullLayout.zero_group > 0 && fullLayout.zero_group < fullLayout.dp;
        int g = 0;
        for (int d = std::min(l.zero_group, l.dp / 2); hsdp && d >= 2; --d)
            if (l.dp % d == 0) {
                g = d;
                break;
            }
        if (g > 0) {
            notes.push_back("ZeRO shard group " + s(l.zero_group) + " reduced to " + s(g) + " (" + s(l.dp / g) +
                            " replicas, HSDP as planned)");
            l.zero_group = g;
        } else {
            notes.push_back("ZeRO shard group " + s(l.zero_group) + " widened to the whole dp group of " + s(l.dp));
            l.zero_group = 0;
        }
    }
    // MoE: HSDP's replicas must also divide the scaled expert-data-parallel group (core's rule,
    // Megatron-LM's distributed-optimizer instances): the smallest larger shard group that leaves
    // them dividing it, else the whole dp group.
    if (full.model.moe.enabled() && l.zero_stage > 0 && l.zero_group > 0 && l.zero_group < l.dp &&
        l.expertDataParallel() % (l.dp / l.zero_group) != 0) {
        int g = 0;
        for (int d = l.zero_group + 1; d < l.dp && g == 0; ++d)
            if (l.dp % d == 0 && l.expertDataParallel() % (l.dp / d) == 0)
                g = d;
        notes.push_back("ZeRO shard group " + s(l.zero_group) +
                        (g > 0 ? " widened to " + s(g) + " (" + s(l.dp / g) + " replicas, HSDP as planned)"
                               : " widened to the whole dp group of " + s(l.dp)) +
                        ": the replicas must divide the expert-data-parallel group of " + s(l.expertDataParallel()));
        l.zero_group = g;
    }
    if (l.sequence_parallel && l.tp == 1)
        l.sequence_parallel = false;
    // Megatron's combined 1F1B (ep_comm_overlap) runs as its schedule: the extra warm-up forward,
    // each steady-state forward beside another micro-batch's backward (TrainingLoop.h); the emulated
    // device does one thing at a time, so it hides nothing under the other compute and is priced so
    // (EmulatedHardware.cpp: ep_overlap 0). Without an all-to-all left there is nothing to overlap.
    if (l.ep_comm_overlap && l.ep == 1) {
        l.ep_comm_overlap = false;
        notes.push_back("ep_comm_overlap dropped with ep reduced to 1: no all-to-all left to overlap");
    }
    l.micro_batch = std::min(l.micro_batch, 2);
    // Block recomputation of some of a chunk's layers keeps that shape on the scaled model's
    // chunks (1 to 3 layers): their first layer, or every layer when the plan recomputes a
    // whole chunk.
    // The engine rebuilds every named module (engine/ModelExecutor.cpp validate) in pre-norm
    // decoder layers.
    if (const unsigned named = fullLayout.recomputedModules() & ~unsigned(kRecomputeCoreAttn);
        named != 0 && (postNorm(full.model) || full.model.family == ModelFamily::EncoderDecoder))
        throw InputError("recomputation of " + recomputeModulesToString(named) +
                         " is executed by the engine in pre-norm decoder layers only: no validation run");
    if (fullLayout.recompute_layers > 0) {
        // Uniform groups of several layers keep that shape: the scaled chunk's layers recomputed
        // as one group (engine::ModelExecutor rebuilds a group whole in its last layer's backward).
        if (fullLayout.recompute_method == RecomputeMethod::Uniform && fullLayout.recompute_layers > 1)
            notes.push_back("uniform recomputation in groups of " + s(fullLayout.recompute_layers) +
                            " layers scaled to groups of the scaled chunk's layers");
        if (fullLayout.recompute_method == RecomputeMethod::Block) {
            const int chunkLayers = fullLayout.stageLayers(full.model.totalLayers(), fullLayout.pp > 2 ? 1 : 0) /
                                    fullLayout.virtual_stages;
            const bool some = fullLayout.recompute_layers < chunkLayers;
            notes.push_back("block recomputation of " + s(fullLayout.recompute_layers) + " of " + s(chunkLayers) +
                            " layers per chunk scaled to " + (some ? "the first layer of each chunk" : "every layer"));
            l.recompute_layers = some ? 1 : 0;
            l.recompute_method = some ? RecomputeMethod::Block : RecomputeMethod::Uniform;
        }
    }
    // An uneven pipeline split keeps its shape at engine size: each end stage that the plan makes
    // lighter (heavier) than the even share holds 1 (3) layers, every other stage 2. The engine
    // runs uneven splits with one chunk per stage only.
    if (const PipelineLayerLayout* custom = fullLayout.layerLayout()) {
        // An explicit layout keeps its shape at engine size as the uneven split does: a stage holds
        // 1, 2 or 3 layers as it holds fewer, as many or more than most stages do (with fewer
        // stages, the ends keep theirs and the rest hold 2), the embedding first, the MTP layers
        // and the loss last. The engine runs it with one chunk per stage.
        if (l.schedule == PipelineSchedule::Interleaved)
            throw InputError("an explicit pipeline layout (pipeline_layout=" + custom->text() +
                             ") with the interleaved schedule is not executed by the engine yet: no validation run");
        const int pp = fullLayout.pp;
        std::vector<int> counts(static_cast<size_t>(pp));
        for (int stage = 0; stage < pp; ++stage)
            counts[size_t(stage)] = custom->stageLayers(pp, stage);
        int common = counts.front(), most = 0;
        for (int n : counts)
            if (const int k = int(std::count(counts.begin(), counts.end(), n)); k > most || (k == most && n > common)) {
                most = k;
                common = n;
            }
        auto scaled = [&](int stage) { return counts[size_t(stage)] < common ? 1 : counts[size_t(stage)] > common ? 3 : 2; };
        l.pipeline_layout = nullptr;
        if (l.pp > 1) {
            std::string text = "E";
            for (int stage = 0; stage < l.pp; ++stage) {
                const int n = l.pp == pp ? scaled(stage) : stage == 0 ? scaled(0) : stage == l.pp - 1 ? scaled(pp - 1) : 2;
                text += std::string(size_t(n), 't') + (stage + 1 < l.pp ? "|" : "");
            }
            text += std::string(size_t(full.model.mtp.enabled() ? full.model.mtp.layers : 0), 'm') + "L";
            std::string why;
            l.pipeline_layout = internPipelineLayerLayout(*PipelineLayerLayout::parse(text, why));
            notes.push_back("pipeline layout " + custom->text() + " scaled to " + text);
        } else {
            notes.push_back("pipeline layout " + custom->text() + " on one stage at engine size");
        }
    } else if (fullLayout.splitAccountsForEnds()) {
        if (l.schedule == PipelineSchedule::Interleaved)
            throw InputError("a pipeline split counting the embedding or loss as a layer "
                             "(account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split) with the "
                             "interleaved schedule is not executed by the engine yet: no validation run");
        if (l.pp < 2)  // one stage at engine size: it holds the embedding and the loss anyway
            l.account_for_embedding_in_pipeline_split = l.account_for_loss_in_pipeline_split = false;
    } else if (fullLayout.unevenPipeline()) {
        if (l.schedule == PipelineSchedule::Interleaved)
            throw InputError("an uneven pipeline split with the interleaved schedule is not executed by the engine "
                             "yet: no validation run");
        const int layers = full.model.totalLayers(), pp = fullLayout.pp;
        auto scaledEnd = [&](int n) { return n == 0 ? 0 : n * pp < layers ? 1 : n * pp > layers ? 3 : 2; };
        l.first_stage_layers = scaledEnd(fullLayout.first_stage_layers);
        l.last_stage_layers = scaledEnd(fullLayout.last_stage_layers);
        if (l.pp < 2) {
            l.first_stage_layers = l.last_stage_layers = 0;
        } else if (l.pp != pp || l.first_stage_layers != fullLayout.first_stage_layers ||
                   l.last_stage_layers != fullLayout.last_stage_layers) {
            notes.push_back("pipeline split " + s(fullLayout.first_stage_layers) + " / even / " +
                            s(fullLayout.last_stage_layers) + " layers at the ends scaled to " +
                            s(l.first_stage_layers) + " / 2 / " + s(l.last_stage_layers));
        }
    }

    // The plan's model, block by block, at engine size with the layout's divisibility:
    // 2 layers per stage (v when interleaved with v > 2), heads of 16 dimensions, key/value
    // heads tp divides (the full model's query-group ratio, up to 4), its MLP-to-hidden ratio,
    // a vocabulary tp divides, 2 micro-batches per pipeline stage and step (a multiple of pp,
    // as the interleaved schedule needs).
    ValidationCase& c = out.validation;
    engine::TrainRequest& r = c.request;
    r.model = scaledEngineModel(full.model, l);
    // Activation offload keeps its shape at engine size: the first layer of the scaled stage when
    // the plan offloads some of its layers, every layer when it offloads them all.
    if (fullLayout.offload_activations > 0) {
        const int fullLayers = fullLayout.stageLayers(full.model.totalLayers(), 0), layers = r.model.layers / l.pp;
        l.offload_activations = fullLayout.offload_activations >= fullLayers ? layers : 1;
        if (l.offload_activations != fullLayout.offload_activations)
            notes.push_back("activation offload of " + s(fullLayout.offload_activations) + " of " + s(fullLayers) +
                            " layers scaled to " + s(l.offload_activations) + " of " + s(layers));
    }
    if (r.model.moe.enabled() && (r.model.moe.experts != full.model.moe.experts || r.model.moe.top_k != full.model.moe.top_k))
        notes.push_back(s(full.model.moe.experts) + " routed experts (top " + s(full.model.moe.top_k) + ") scaled to " +
                        s(r.model.moe.experts) + " (top " + s(r.model.moe.top_k) + "), each expert's width in its ratio "
                        "to the hidden size" + scaledGroupsNote(full.model.moe, r.model.moe));
    else if (const std::string groups = r.model.moe.enabled() ? scaledGroupsNote(full.model.moe, r.model.moe) : "";
             !groups.empty())
        notes.push_back(groups.substr(2));  // (without the leading "; ")
    r.batch = l.dp * l.micro_batch * std::max(2, 2 * l.pp);
    r.steps = steps;
    r.layout = l;
    // The emulated device computes in fp32 or bf16 (engine::PrecisionMode): an FP8/FP4 recipe's
    // quantized GEMMs and casts cannot be run, so such a plan is not validated as something else.
    if (quantizedRecipe(full.training.precision))
        throw InputError(std::string("the plan trains with the ") + toString(full.training.precision) +
                         " recipe; the emulated device computes fp32 or bf16 only (validate the plan with "
                         "--precision bf16)");
    // bf16-autocast also gathers the updated parameters in fp32 (TrainingSpec.h); the engine's bf16
    // mixed mode gathers them in bf16, so the comparison would be of another run.
    if (full.training.precision == Precision::BF16Autocast)
        throw InputError("the plan trains with bf16-autocast (fp32 gradient accumulation and ZeRO-1 collectives); "
                         "the emulated device's bf16 mode gathers its parameters in bf16 (validate the plan with "
                         "--precision bf16)");
    r.precision = full.training.precision == Precision::FP32 ? engine::PrecisionMode::FP32
                                                             : engine::PrecisionMode::BF16Mixed;
    // The plan's gradients: fp32 main grads (the default) or bf16, run as priced.
    r.fp32_gradients = r.precision == engine::PrecisionMode::BF16Mixed && gradientType(full.training) == DataType::FP32;

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
    Problem small = emulatedProblem(r.model, r.batch, r.precision, r.fp32_gradients, unit, noLinks,
                                    int(l.devices()));
    // MoE with the copies exchanged: the scaled run's tiny micro-batches route unevenly (the suite
    // measures the busiest rank at 1.3-1.5x the mean), so its memory is sized for the most copies
    // a rank can receive: every token of its ep group sending min(k, E / ep) of its k copies to
    // it, ep min(k, E/ep) / k times the mean.
    if (const engine::MoeConfig& e = r.model.moe; e.enabled() && (l.ep > 1 || l.expertTensorParallel() > 1)) {
        const double most = double(l.ep) * std::min(e.top_k, e.experts / l.ep) / e.top_k;
        small.training.moe_imbalance = std::clamp(most, 1.0, 64.0);
        char text[160];
        std::snprintf(text, sizeof text,
                      "memory sized for the busiest expert-parallel rank at its most possible load (%.2fx the mean: "
                      "small micro-batches route unevenly)",
                      small.training.moe_imbalance);
        notes.push_back(text);
    }
    const Prediction smallPrediction =
        CostModel(small, engineCostModelParams(unit, noLinks, r.bucket_bytes, defaultCostModelParams())).evaluate(l);
    const double needed = smallPrediction.memory_bytes.total() - smallPrediction.memory_bytes.reserve;
    out.memory_scale = std::clamp(needed / std::max(1e-9, fraction) / unit.memory_bytes, 1e-12, 1.0);
    c.profile = engine::profileFromChip(chip, out.memory_scale);
    // The host side of optimizer offload, scaled like the device: its share of the node's host
    // link, and the host memory bandwidth the plan's terms price the offloaded step at.
    c.profile.host_link_bytes_per_second =
        full.cluster.node.host_link_bytes_per_second / chip.devices_per_chip * out.memory_scale;
    c.profile.host_memory_bytes_per_second = fullTerms.host_memory_bytes_per_second * out.memory_scale;

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
