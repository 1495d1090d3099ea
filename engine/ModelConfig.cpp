// ModelConfig: validation, description, the parameter table and its initialisation.
#include "ModelConfig.h"

#include "Random.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace shardscope::engine {

std::string describe(const ModelConfig& c)
{
    std::ostringstream s;
    if (c.encoder_decoder)
        s << "T5 style encoder-decoder (" << c.layers << " encoder + " << c.decoder_layers
          << " decoder layers, cross-attention), ";
    s << (c.layerNorm() ? "LayerNorm" : "RMSNorm") << ", " << toString(c.mlp) << " MLP, ";
    if (c.learnedPositions())
        s << "learned positions";
    else if (c.positions == PositionKind::Relative)
        s << "relative position bias (" << c.relative_buckets << " buckets to distance " << c.relative_max_distance
          << ", one table per stack, unscaled scores)";
    else
        s << "RoPE base " << c.rope_base;
    const int nkv = c.kvHeads();
    if (nkv == c.heads)
        s << ", MHA " << c.heads << " heads";
    else if (nkv == 1)
        s << ", MQA " << c.heads << " heads";
    else
        s << ", GQA " << c.heads << "/" << nkv;
    s << " x " << c.headDim() << ", " << (c.tied_embeddings ? "tied" : "untied") << " head, "
      << (c.bias ? "biases" : c.qkv_bias ? "biases on q, k and v only" : "no biases")
      << (c.encoder_decoder ? "" : c.causal ? "" : ", bidirectional")
      << (c.encoder_decoder && c.tied_embeddings ? ", decoder output scaled by hidden^-0.5 before the head" : "");
    if (c.qk_norm)
        s << ", QK-norm";
    if (const MlaConfig& a = c.mla; a.enabled()) {
        s << ", MLA (";
        if (a.q_lora_rank > 0)
            s << "q rank " << a.q_lora_rank << ", ";
        s << "kv rank " << a.kv_lora_rank << ", q/k " << a.qk_nope_head_dim << " + RoPE " << a.qk_rope_head_dim
          << ", v " << a.v_head_dim;
        if (a.softmax_mscale != 1)
            s << ", scores x " << a.softmax_mscale;
        s << ")";
    }
    if (c.sliding_window.enabled()) {
        s << ", sliding window " << c.sliding_window.size;
        if (!c.sliding_window.layers.empty()) {
            s << " on layers";
            for (size_t i = 0; i < c.sliding_window.layers.size(); ++i)
                s << (i == 0 ? " " : ",") << c.sliding_window.layers[i];
        }
    }
    // BERT's blocks, by name.
    if (c.post_norm)
        s << ", post-norm layers";
    if (c.token_types > 0)
        s << ", " << c.token_types << (c.token_types == 1 ? " token type" : " token types");
    if (c.embedding_norm)
        s << ", embedding norm";
    if (c.masked_lm)
        s << ", masked-LM head";
    if (c.pooler)
        s << ", pooler + next-sentence head";
    if (c.moe.enabled()) {
        const MoeConfig& m = c.moe;
        s << ", MoE " << m.experts << " experts x " << c.expertFfn() << " top-" << m.top_k << " ("
          << shardscope::toString(m.router) << " router";
        if (m.shared_experts > 0)
            s << ", " << m.shared_experts << " shared x " << m.shared_ffn;
        if (m.dense_layers > 0 || m.layer_interval > 1)
            s << ", from layer " << m.dense_layers << " every " << m.layer_interval;
        if (m.aux_loss_coeff > 0)
            s << ", aux loss " << m.aux_loss_coeff;
        if (m.score_correction_bias)
            s << ", score-correction bias";
        if (m.expert_groups > 0)
            s << ", top " << m.group_top_k << " of " << m.expert_groups << " expert groups";
        if (m.routed_scaling > 0)
            s << ", scaling " << m.routed_scaling;
        if (m.capacity_factor > 0)
            s << ", capacity factor " << m.capacity_factor << ")";
        else
            s << ", dropless)";
    }
    if (c.mtp.enabled())
        s << ", MTP " << c.mtp.layers << (c.mtp.layers == 1 ? " depth" : " depths") << " (loss x " << c.mtp.loss_scale
          << ")";
    return s.str();
}

bool ModelConfig::moeLayer(int index) const
{
    if (mtp.enabled() && index >= layers)  // an MTP depth's layer: the last layer's kind
        index = layers - 1;
    // core/ModelSpec.cpp ModelSpec::moeLayer: from dense_layers on, the last of every interval.
    if (!moe.enabled() || index < moe.dense_layers)
        return false;
    const int interval = std::max(1, moe.layer_interval);
    return (index - moe.dense_layers + 1) % interval == 0;
}

MoeConfig scaledMoe(const ModelSpec& spec, int hidden, int layers, int ep)
{
    MoeConfig c;
    const MoeSpec& m = spec.moe;
    if (!m.enabled())
        return c;
    ep = std::max(1, ep);
    const int experts = std::min(m.experts, std::max(8, 2 * ep));
    c.experts = (experts + ep - 1) / ep * ep;
    c.top_k = std::max(1, std::min(m.top_k, c.experts / 2));
    auto width = [&](int f) {
        const double ratio = spec.hidden > 0 ? double(f) / spec.hidden : 1.0;
        return std::max(2, int(std::lround(ratio * hidden / 2)) * 2);
    };
    c.expert_ffn = width(spec.expertFfn());
    c.shared_experts = m.shared_experts;
    c.shared_ffn = m.shared_experts > 0 ? width(m.shared_ffn_hidden) : 0;
    c.dense_layers = std::min(m.dense_layers, std::max(0, std::min(1, layers - 1)));
    c.layer_interval = std::max(1, std::min(m.layer_interval, layers - c.dense_layers));
    c.router = m.router;
    c.capacity_factor = m.capacity_factor;
    c.aux_loss_coeff = m.aux_loss_coeff;
    c.score_correction_bias = m.score_correction_bias;
    c.routed_scaling = m.routed_scaling;
    // Group-limited routing keeps its shape on the scaled experts: k = g x picks as in DeepSeek-V3
    // (8 = 4 groups x 2), each group at least twice the picks, so a choice within it remains, and
    // fewer groups chosen than there are (g < G), so a choice among them remains.
    // For each group count (most first), the groups chosen keep the model's share of them, and the
    // picks per chosen group are the model's, as many as the scaled top-k leaves.
    if (m.expert_groups > 0 && m.group_top_k > 0) {
        for (int G = std::min(m.expert_groups, c.experts); G >= 2; --G) {
            if (c.experts % G != 0)
                continue;
            const int chosen = std::clamp(int(std::lround(double(m.group_top_k) * G / m.expert_groups)), 1, G - 1);
            const int picks = std::max(1, std::min(m.top_k / m.group_top_k, c.top_k / chosen));
            if (c.experts / G < 2 * picks)
                continue;
            c.expert_groups = G;
            c.group_top_k = chosen;
            c.top_k = chosen * picks;
            break;
        }
    }
    return c;
}

int ModelConfig::windowOf(int index) const
{
    if (!sliding_window.enabled())
        return 0;
    if (mtp.enabled() && index >= layers)  // an MTP depth's layer: the last layer's kind
        index = layers - 1;
    const std::vector<int>& list = sliding_window.layers;
    return list.empty() || std::binary_search(list.begin(), list.end(), index) ? sliding_window.size : 0;
}

std::vector<ParameterTensor> parameterTable(const ModelConfig& cfg)
{
    std::vector<ParameterTensor> tensors;
    const std::int64_t C = cfg.hidden, V = cfg.vocab, T = cfg.seq, qd = cfg.qDim(), kvd = cfg.kvDim(),
                       F = cfg.ffn(), Fin = cfg.gated() ? 2 * F : F;
    auto add = [&](std::string name, std::int64_t count, bool decay, TensorRole role, int layer) {
        const std::int64_t offset = tensors.empty() ? 0 : tensors.back().offset + tensors.back().count;
        tensors.push_back({std::move(name), offset, count, decay, role, layer});
    };
    add("wte", C * V, true, TensorRole::TokenEmbedding, -1);
    if (cfg.learnedPositions())
        add("wpe", C * T, true, TensorRole::PositionEmbedding, -1);
    const std::int64_t relb = std::int64_t(cfg.heads) * cfg.relative_buckets;
    if (cfg.encoder_decoder)
        add("enc.relb", relb, true, TensorRole::RelativeBias, -1);
    if (cfg.token_types > 0)
        add("wtt", C * cfg.token_types, true, TensorRole::TokenTypeEmbedding, -1);
    if (cfg.embedding_norm) {
        add("embnw", C, false, TensorRole::NormWeight, -1);
        if (cfg.layerNorm())
            add("embnb", C, false, TensorRole::NormBias, -1);
    }
    // Layer l's tensors named h (an MTP depth's layer is l = L + d, named "mtp<d>.").
    auto addLayer = [&](const std::string& h, int l, bool decoder) {
        add(h + "ln1w", C, false, TensorRole::NormWeight, l);
        if (cfg.layerNorm())
            add(h + "ln1b", C, false, TensorRole::NormBias, l);
        if (const MlaConfig& a = cfg.mla; a.enabled()) {  // multi-head latent attention (MlaConfig)
            const std::int64_t NH = cfg.heads, Q = a.q_lora_rank, R = a.kv_lora_rank;
            add(h + "mladw", C * a.downRows(), true, TensorRole::MlaDownWeight, l);
            auto latentNorm = [&](const char* name, std::int64_t rank) {
                add(h + name + "w", rank, false, TensorRole::MlaNormWeight, l);
                if (cfg.layerNorm())
                    add(h + name + "b", rank, false, TensorRole::MlaNormBias, l);
            };
            if (Q > 0)
                latentNorm("mlaqn", Q);
            latentNorm("mlakvn", R);
            add(h + "mlaqw", (Q > 0 ? Q : C) * NH * a.qkHeadDim(), true, TensorRole::MlaQUpWeight, l);
            add(h + "mlakvw", R * NH * (a.qk_nope_head_dim + a.v_head_dim), true, TensorRole::MlaKvUpWeight, l);
        } else {
            add(h + "qkvw", C * (qd + 2 * kvd), true, TensorRole::QkvWeight, l);
            if (cfg.qkvBias())
                add(h + "qkvb", qd + 2 * kvd, false, TensorRole::QkvBias, l);
            if (cfg.qk_norm) {
                add(h + "qknw", 2 * std::int64_t(cfg.headDim()), false, TensorRole::QkNormWeight, l);
                if (cfg.layerNorm())
                    add(h + "qknb", 2 * std::int64_t(cfg.headDim()), false, TensorRole::QkNormBias, l);
            }
        }
        add(h + "attprojw", std::int64_t(cfg.valueDim()) * C, true, TensorRole::AttnProjWeight, l);
        if (cfg.bias)
            add(h + "attprojb", C, false, TensorRole::AttnProjBias, l);
        if (decoder) {
            add(h + "lnxw", C, false, TensorRole::CrossNormWeight, l);
            if (cfg.layerNorm())
                add(h + "lnxb", C, false, TensorRole::CrossNormBias, l);
            add(h + "crossqw", C * qd, true, TensorRole::CrossQWeight, l);
            add(h + "crosskvw", C * 2 * kvd, true, TensorRole::CrossKvWeight, l);
            add(h + "crossprojw", qd * C, true, TensorRole::CrossProjWeight, l);
        }
        add(h + "ln2w", C, false, TensorRole::NormWeight, l);
        if (cfg.layerNorm())
            add(h + "ln2b", C, false, TensorRole::NormBias, l);
        if (!decoder && cfg.moeLayer(l)) {  // the MoE block (MoeMlp.h's weights)
            const std::int64_t E = cfg.moe.experts, Fe = cfg.expertFfn(), Fs = cfg.sharedFfn();
            const std::int64_t gate = cfg.gated() ? 2 : 1;
            add(h + "router", C * E, true, TensorRole::RouterWeight, l);
            if (cfg.moe.score_correction_bias)
                add(h + "expbias", E, false, TensorRole::ExpertBias, l);
            add(h + "expin", E * C * gate * Fe, true, TensorRole::ExpertInWeight, l);
            add(h + "expout", E * Fe * C, true, TensorRole::ExpertOutWeight, l);
            if (Fs > 0) {
                add(h + "shin", C * gate * Fs, true, TensorRole::SharedInWeight, l);
                add(h + "shout", Fs * C, true, TensorRole::SharedOutWeight, l);
            }
            return;
        }
        add(h + "fcw", C * Fin, true, TensorRole::MlpInWeight, l);
        if (cfg.bias)
            add(h + "fcb", Fin, false, TensorRole::MlpInBias, l);
        add(h + "fcprojw", F * C, true, TensorRole::MlpOutWeight, l);
        if (cfg.bias)
            add(h + "fcprojb", C, false, TensorRole::MlpOutBias, l);
        };
    for (int l = 0; l < cfg.totalLayers(); ++l) {
        const bool decoder = l >= cfg.layers;
        if (decoder && l == cfg.layers) {  // the encoder's final norm, the decoder's bias table
            add("enc.lnfw", C, false, TensorRole::EncoderNormWeight, -1);
            if (cfg.layerNorm())
                add("enc.lnfb", C, false, TensorRole::EncoderNormBias, -1);
            add("dec.relb", relb, true, TensorRole::RelativeBias, -2);
        }
        std::string h = decoder ? "d" : "h";
        h += std::to_string(decoder ? l - cfg.layers : l);
        h += '.';
        addLayer(h, l, decoder);
    }
    if (cfg.finalNorm()) {
        add("lnfw", C, false, TensorRole::NormWeight, -1);
        if (cfg.layerNorm())
            add("lnfb", C, false, TensorRole::NormBias, -1);
    }
    // Multi-token prediction: each depth's layer (the last layer's kind), then its enorm, hnorm,
    // eh_proj and final norm (Megatron's MultiTokenPredictionLayer modules).
    for (int d = 0; d < cfg.mtp.layers; ++d) {
        std::string h = "mtp";
        h += std::to_string(d);
        h += '.';
        const int l = cfg.mtpLayer(d);
        addLayer(h, l, false);
        for (const char* norm : {"mtpen", "mtphn", "mtplnf"}) {
            if (std::string(norm) == "mtplnf")
                add(h + "mtpehw", 2 * C * C, true, TensorRole::MtpProjWeight, l);
            add(h + norm + "w", C, false, TensorRole::MtpNormWeight, l);
            if (cfg.layerNorm())
                add(h + norm + "b", C, false, TensorRole::MtpNormBias, l);
        }
    }
    if (cfg.pooler) {
        add("poolw", C * C, true, TensorRole::PoolerWeight, -1);
        add("poolb", C, false, TensorRole::PoolerBias, -1);
    }
    if (cfg.masked_lm) {  // BertLMPredictionHead: transform (dense, GeLU, norm), then the output bias
        add("mlmw", C * C, true, TensorRole::MlmDenseWeight, -1);
        add("mlmb", C, false, TensorRole::MlmDenseBias, -1);
        add("mlmnw", C, false, TensorRole::NormWeight, -1);
        if (cfg.layerNorm())
            add("mlmnb", C, false, TensorRole::NormBias, -1);
        add("mlmbias", V, false, TensorRole::MlmOutputBias, -1);
    }
    if (cfg.pooler) {
        add("nspw", C * 2, true, TensorRole::NspWeight, -1);
        add("nspb", 2, false, TensorRole::NspBias, -1);
    }
    if (!cfg.tied_embeddings)
        add("lm_head", C * V, true, TensorRole::LmHead, -1);
    return tensors;
}

std::int64_t parameterCount(const ModelConfig& c)
{
    const std::vector<ParameterTensor> t = parameterTable(c);
    return t.empty() ? 0 : t.back().offset + t.back().count;
}

FieldErrors validate(const ModelConfig& c, const std::string& prefix)
{
    FieldErrors errors;
    auto range = [&](const char* field, int v, int lo, int hi) {
        if (v < lo || v > hi)
            errors.push_back({prefix + field, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                                                  std::to_string(hi) + "]"});
        return v >= lo && v <= hi;
    };
    range("layers", c.layers, 1, 1024);
    const bool hiddenOk = range("hidden", c.hidden, 1, 1 << 16);
    const bool headsOk = range("heads", c.heads, 1, 1 << 12);
    range("vocab", c.vocab, 1, 1 << 22);
    range("seq", c.seq, 1, 1 << 16);
    const bool kvOk = range("kv_heads", c.kv_heads, 0, 1 << 12);
    range("head_dim", c.head_dim, 0, 1 << 12);
    range("ffn_hidden", c.ffn_hidden, 0, 1 << 20);
    if (hiddenOk && headsOk && c.head_dim == 0 && c.hidden % c.heads != 0)
        errors.push_back({prefix + "heads", std::to_string(c.heads) + " does not divide hidden " +
                                                std::to_string(c.hidden) + " (give head_dim)"});
    if (headsOk && kvOk && c.kv_heads > 0 && c.heads % c.kv_heads != 0)
        errors.push_back({prefix + "kv_heads", std::to_string(c.kv_heads) + " does not divide heads " +
                                                   std::to_string(c.heads)});
    if (c.positions == PositionKind::Rotary && c.headDim() % 2 != 0)
        errors.push_back({prefix + "head_dim", "rotary positions need an even head size, not " +
                                                   std::to_string(c.headDim())});
    if (c.encoder_decoder) {
        range("decoder_layers", c.decoder_layers, 1, 1024);
        if (c.positions != PositionKind::Relative)
            errors.push_back({prefix + "positions", std::string(toString(c.positions)) +
                                                        " positions in an encoder-decoder are not executed by the engine "
                                                        "(T5's relative position bias is)"});
        else if (range("relative_buckets", c.relative_buckets, 4, 1 << 12))
            range("relative_max_distance", c.relative_max_distance, c.relative_buckets / 2, 1 << 20);
        if (c.qkvBias())
            errors.push_back({prefix + (c.bias ? "bias" : "qkv_bias"), "biases on an encoder-decoder's linear layers "
                                                                       "are not executed by the engine (T5 has none)"});
    } else {
        if (c.decoder_layers != 0)
            errors.push_back({prefix + "decoder_layers", "only an encoder-decoder model has decoder layers"});
        if (c.positions == PositionKind::Relative)
            errors.push_back({prefix + "positions", "relative position buckets are executed in the encoder-decoder "
                                                    "(T5) only"});
    }
    if (const MlaConfig& a = c.mla; a.enabled() || a.q_lora_rank != 0 || a.v_head_dim != 0) {
        range("mla.kv_lora_rank", a.kv_lora_rank, 1, 1 << 16);
        range("mla.q_lora_rank", a.q_lora_rank, 0, 1 << 16);
        range("mla.qk_nope_head_dim", a.qk_nope_head_dim, 1, 1 << 12);
        range("mla.v_head_dim", a.v_head_dim, 1, 1 << 12);
        if (range("mla.qk_rope_head_dim", a.qk_rope_head_dim, 2, 1 << 12) && a.qk_rope_head_dim % 2 != 0)
            errors.push_back({prefix + "mla.qk_rope_head_dim", "RoPE needs an even size, not " +
                                                                   std::to_string(a.qk_rope_head_dim)});
        if (!(a.softmax_mscale > 0))
            errors.push_back({prefix + "mla.softmax_mscale", "must be positive"});
        if (c.head_dim != a.qkHeadDim())
            errors.push_back({prefix + "head_dim", std::to_string(c.head_dim) + ": with MLA the query and key head "
                                                   "size is qk_nope_head_dim + qk_rope_head_dim = " +
                                                   std::to_string(a.qkHeadDim())});
        if (c.kvHeads() != c.heads)
            errors.push_back({prefix + "kv_heads", "MLA expands its latent to every head: kv_heads = heads"});
        if (c.encoder_decoder || c.post_norm || !c.causal || c.masked_lm)
            errors.push_back({prefix + "mla", "multi-head latent attention is executed in causal pre-norm decoders only"});
        if (c.positions != PositionKind::Rotary)
            errors.push_back({prefix + "positions", "MLA's decoupled RoPE key needs rotary positions"});
        if (c.bias || c.qkv_bias || c.qk_norm)
            errors.push_back({prefix + "mla", "MLA's projections have no biases and no QK-norm (DeepSeek-V2/V3): "
                                              "bias, qkv_bias and qk_norm off"});
        if (c.sliding_window.enabled())
            errors.push_back({prefix + "sliding_window", "a sliding window with MLA is not executed by the engine"});
    }
    if (c.qk_norm && (c.encoder_decoder || c.post_norm))
        errors.push_back({prefix + "qk_norm",
                          std::string("QK-norm in ") + (c.encoder_decoder ? "an encoder-decoder" : "post-norm layers") +
                              " is not executed by the engine (Qwen3's pre-norm decoder layers are)"});
    if (const SlidingWindow& w = c.sliding_window; w.size != 0 || !w.layers.empty()) {
        range("sliding_window.size", w.size, 1, 1 << 16);
        if (!c.causal || c.encoder_decoder || c.post_norm)
            errors.push_back({prefix + "sliding_window",
                              "a sliding window is executed in causal pre-norm decoders only"});
        for (size_t i = 0; i < w.layers.size(); ++i) {
            if (w.layers[i] < 0 || w.layers[i] >= c.totalLayers())
                errors.push_back({prefix + "sliding_window.layers", "layer " + std::to_string(w.layers[i]) +
                                                                        " is not one of the model's " +
                                                                        std::to_string(c.totalLayers())});
            if (i > 0 && w.layers[i] <= w.layers[i - 1])
                errors.push_back({prefix + "sliding_window.layers", "must be strictly increasing"});
        }
    }
    if (c.bias && c.qkv_bias)
        errors.push_back({prefix + "qkv_bias", "biases on every linear layer (bias) already include q, k and v: "
                                               "qkv_bias is for q, k and v only"});
    if (c.positions == PositionKind::Rotary && !(c.rope_base > 1))
        errors.push_back({prefix + "rope_base", "must be greater than 1"});
    if (!(c.norm_eps > 0) || !(c.norm_eps < 1))
        errors.push_back({prefix + "norm_eps", "must be in (0, 1)"});
    // BERT's blocks: the segment ids and the next-sentence labels come with the masked-LM batches.
    range("token_types", c.token_types, 0, 1 << 16);
    if (c.token_types > 0 && !c.masked_lm)
        errors.push_back({prefix + "token_types", "segment embeddings come with the masked-LM objective's sentence "
                                                  "pairs: set masked_lm"});
    if (c.pooler && !c.masked_lm)
        errors.push_back({prefix + "pooler", "the pooler is trained by the next-sentence head of the masked-LM "
                                             "objective: set masked_lm"});
    if (c.masked_lm && c.causal)
        errors.push_back({prefix + "causal", "a masked-LM objective needs bidirectional attention (causal false)"});
    if (c.masked_lm && c.vocab < 2)
        errors.push_back({prefix + "vocab", "a masked-LM objective needs a [MASK] id besides the data's: at least 2"});
    if (c.pooler && c.seq < 2)
        errors.push_back({prefix + "seq", "the next-sentence head needs two segments: at least 2 tokens"});
    if (const MoeConfig& m = c.moe; m.enabled() || m.top_k != 0 || m.shared_experts != 0) {
        const bool expertsOk = range("moe.experts", m.experts, 1, 1 << 16);
        if (expertsOk && (m.top_k < 1 || m.top_k > m.experts))
            errors.push_back({prefix + "moe.top_k", std::to_string(m.top_k) + " is not between 1 and the " +
                                                        std::to_string(m.experts) + " experts"});
        range("moe.expert_ffn", m.expert_ffn, 0, 1 << 20);
        range("moe.shared_experts", m.shared_experts, 0, 1 << 12);
        if (m.shared_experts > 0)
            range("moe.shared_ffn", m.shared_ffn, 1, 1 << 20);
        else if (m.shared_ffn != 0)
            errors.push_back({prefix + "moe.shared_ffn", "without shared experts: set moe.shared_experts"});
        range("moe.layer_interval", m.layer_interval, 1, 1 << 10);
        if (range("moe.dense_layers", m.dense_layers, 0, 1 << 10) && expertsOk) {
            bool any = false;
            for (int l = 0; l < c.layers && !any; ++l)
                any = c.moeLayer(l);
            if (!any)
                errors.push_back({prefix + "moe.dense_layers", "dense layers " + std::to_string(m.dense_layers) +
                                                                   " and interval " + std::to_string(m.layer_interval) +
                                                                   " leave no MoE layer among the " +
                                                                   std::to_string(c.layers)});
        }
        if (!(m.capacity_factor >= 0 && m.capacity_factor <= 1e6))
            errors.push_back({prefix + "moe.capacity_factor", "must be > 0 (or 0: dropless)"});
        if (!(m.aux_loss_coeff >= 0 && m.aux_loss_coeff <= 1000))
            errors.push_back({prefix + "moe.aux_loss_coeff", "must be between 0 and 1000"});
        if (!(m.routed_scaling >= 0 && m.routed_scaling <= 1000))
            errors.push_back({prefix + "moe.routed_scaling", "must be between 0 and 1000"});
        if (m.expert_groups != 0 || m.group_top_k != 0) {
            // As the router checks them (OpsMoe.cpp): G divides E, g in [1, G], k between g and
            // the experts of g groups.
            const bool groupsOk = range("moe.expert_groups", m.expert_groups, 1, 64) && expertsOk &&
                                  m.experts % m.expert_groups == 0;
            if (!groupsOk && m.expert_groups >= 1 && m.expert_groups <= 64)
                errors.push_back({prefix + "moe.expert_groups", std::to_string(m.expert_groups) +
                                                                    " groups do not divide the " +
                                                                    std::to_string(m.experts) + " experts"});
            if (groupsOk && range("moe.group_top_k", m.group_top_k, 1, m.expert_groups) &&
                (m.top_k < m.group_top_k || m.top_k > m.group_top_k * (m.experts / m.expert_groups)))
                errors.push_back({prefix + "moe.group_top_k", "top " + std::to_string(m.top_k) +
                                                                  " must be between the " +
                                                                  std::to_string(m.group_top_k) +
                                                                  " chosen groups and the experts they hold (" +
                                                                  std::to_string(m.group_top_k *
                                                                                 (m.experts / m.expert_groups)) +
                                                                  ")"});
        }
        if (m.score_correction_bias && (m.router == MoeRouter::Softmax || m.router == MoeRouter::SoftmaxNorm))
            errors.push_back({prefix + "moe.score_correction_bias", "steers a sigmoid router's choice (DeepSeek-V3's "
                                                                    "noaux_tc), not a softmax router's"});
        if (c.encoder_decoder || c.post_norm)
            errors.push_back({prefix + "moe", std::string("MoE blocks are executed in pre-norm decoder and encoder ") +
                                                  "layers only, not " +
                                                  (c.encoder_decoder ? "an encoder-decoder" : "post-norm layers")});
        if (c.bias || c.qkv_bias)
            errors.push_back({prefix + (c.bias ? "bias" : "qkv_bias"),
                              "linear biases with MoE blocks (GPT-OSS's router and expert biases) are not executed by "
                              "the engine"});
    }
    if (const MtpConfig& t = c.mtp; t.enabled() || t.layers != 0) {
        // Megatron-LM's MultiTokenPredictionBlock: GPT (decoder) models; the rolled embedding takes
        // rolled learned positions there, which the engine does not execute.
        if (range("mtp.layers", t.layers, 1, 64) && t.layers >= c.seq)
            errors.push_back({prefix + "mtp.layers", std::to_string(t.layers) + " depths leave no target in a "
                                                         "sequence of " + std::to_string(c.seq) + " tokens"});
        if (!(t.loss_scale > 0 && t.loss_scale <= 10))
            errors.push_back({prefix + "mtp.loss_scale", "must be in (0, 10]: the MTP losses' weight"});
        if (c.encoder_decoder || c.post_norm || !c.causal || c.masked_lm)
            errors.push_back({prefix + "mtp", "multi-token prediction is executed in causal pre-norm decoders only"});
        if (c.positions != PositionKind::Rotary)
            errors.push_back({prefix + "positions", "multi-token prediction with " + std::string(toString(c.positions)) +
                                                        " positions is not executed by the engine (rotary only)"});
    }
    return errors;
}

const char* toString(PrecisionMode p)
{
    switch (p) {
    case PrecisionMode::FP32: return "fp32";
    case PrecisionMode::BF16Mixed: return "bf16-mixed";
    case PrecisionMode::BF16RNE: return "bf16-rne";
    case PrecisionMode::BF16SR: return "bf16-sr";
    }
    return "?";
}

std::optional<PrecisionMode> precisionFromString(const std::string& text)
{
    for (PrecisionMode p : {PrecisionMode::FP32, PrecisionMode::BF16Mixed, PrecisionMode::BF16RNE, PrecisionMode::BF16SR})
        if (text == toString(p))
            return p;
    return std::nullopt;
}

std::optional<Recompute> recomputeFromString(const std::string& text)
{
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
        if (text == shardscope::toString(r))
            return r;
    return std::nullopt;
}

template <class T>
void initializeParameters(const std::vector<ParameterTensor>& tensors, std::uint64_t seed, double init_std,
                          int layers, T* w)
{
    // One stream in table order, so that a shard's values do not depend on the layout.
    Rng rng(mix64(seed ^ 0x5EEDF00Dull));
    const double residualStd = init_std / std::sqrt(2.0 * layers);
    for (const ParameterTensor& t : tensors) {
        T* p = w + t.offset;
        switch (t.role) {
        case TensorRole::NormWeight:
        case TensorRole::EncoderNormWeight:
        case TensorRole::CrossNormWeight:
        case TensorRole::QkNormWeight:
        case TensorRole::MlaNormWeight:
        case TensorRole::MtpNormWeight:
            std::fill(p, p + t.count, T(1));
            break;
        case TensorRole::NormBias:
        case TensorRole::EncoderNormBias:
        case TensorRole::CrossNormBias:
        case TensorRole::QkNormBias:
        case TensorRole::MlaNormBias:
        case TensorRole::MtpNormBias:
        case TensorRole::QkvBias:
        case TensorRole::AttnProjBias:
        case TensorRole::MlpInBias:
        case TensorRole::MlpOutBias:
        case TensorRole::PoolerBias:
        case TensorRole::MlmDenseBias:
        case TensorRole::MlmOutputBias:
        case TensorRole::NspBias:
        case TensorRole::ExpertBias:
            std::fill(p, p + t.count, T(0));
            break;
        default: {
            const bool residual = t.role == TensorRole::AttnProjWeight || t.role == TensorRole::MlpOutWeight ||
                                  t.role == TensorRole::CrossProjWeight || t.role == TensorRole::ExpertOutWeight ||
                                  t.role == TensorRole::SharedOutWeight;
            const double sd = residual ? residualStd : init_std;
            for (std::int64_t i = 0; i < t.count; ++i)
                p[i] = T(rng.normal() * sd);
        }
        }
    }
}

template void initializeParameters<float>(const std::vector<ParameterTensor>&, std::uint64_t, double, int, float*);
template void initializeParameters<double>(const std::vector<ParameterTensor>&, std::uint64_t, double, int, double*);

} // namespace shardscope::engine
