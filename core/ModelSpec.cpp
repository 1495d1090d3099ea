#include "ModelSpec.h"
#include "CheckedMath.h"
#include "ModelEnums.h"

#include <algorithm>
#include <cstdio>
#include <span>

namespace shardscope {

namespace {

// Every count is computed with overflow checks: the ranges validate() accepts per field
// still allow products past int64 (10,000 layers of hidden 2^20 with 2^14 heads of 2^14).
using Count = CheckedCount;

Count normParams(const ModelSpec& m)
{
    // LayerNorm: scale and shift; RMSNorm: scale only.
    return m.norm == NormKind::LayerNorm ? Count(2) * m.hidden : Count(m.hidden);
}

bool gated(MlpKind k) { return k == MlpKind::SwiGlu || k == MlpKind::GeGlu; }

// heads x head_dim as a count (the int qDim() and kvDim() are in range after validate()).
Count qDim(const ModelSpec& m) { return Count(m.heads) * m.head_dim; }
Count kvDim(const ModelSpec& m) { return Count(m.kv_heads) * m.head_dim; }

// Multi-head latent attention (ModelSpec.h, MlaSpec), as DeepseekV3Attention builds it
// (transformers models/deepseek_v3/modular_deepseek_v3.py @ 000c33f; attention_bias false, which
// validate() requires): q_a_proj h x q_lora_rank, q_b_proj q_lora_rank x heads*(nope + rope) --
// or q_proj h x heads*(nope + rope) without q_lora_rank --, kv_a_proj_with_mqa h x (kv_lora_rank
// + rope), kv_b_proj kv_lora_rank x heads*(nope + v), o_proj heads*v x h: the matrices, each
// used once per token (its forward FLOPs are 2 per weight).
Count mlaMatrixParams(const ModelSpec& m)
{
    const MlaSpec& a = m.mla;
    const Count h = m.hidden, heads = m.heads, qk = Count(a.qkHeadDim());
    const Count query = a.q_lora_rank > 0 ? h * a.q_lora_rank + Count(a.q_lora_rank) * heads * qk : h * heads * qk;
    const Count keyValue = h * (Count(a.kv_lora_rank) + a.qk_rope_head_dim) +
                           Count(a.kv_lora_rank) * heads * (Count(a.qk_nope_head_dim) + a.v_head_dim);
    return query + keyValue + heads * a.v_head_dim * h;
}

// ... and the latent norms q_a_layernorm (q_lora_rank) and kv_a_layernorm (kv_lora_rank), of
// the model's norm kind.
Count mlaAttentionParams(const ModelSpec& m)
{
    auto norm = [&](int n) { return m.norm == NormKind::LayerNorm ? Count(2) * n : Count(n); };
    return mlaMatrixParams(m) + (m.mla.q_lora_rank > 0 ? norm(m.mla.q_lora_rank) : Count(0)) + norm(m.mla.kv_lora_rank);
}

// Q, K, V and output projections (+ biases; Qwen2: on q, k and v only), and QK-norm's two
// weight vectors over head_dim (Qwen3: q_norm and k_norm, transformers
// models/qwen3/modeling_qwen3.py @ 000c33f). Cross attention has the same shapes.
Count attentionParams(const ModelSpec& m)
{
    if (m.mla.enabled())
        return mlaAttentionParams(m);
    const Count h = m.hidden, q = qDim(m), kv = kvDim(m);
    Count p = h * q + Count(2) * h * kv + q * h;
    if (m.bias)
        p += q + Count(2) * kv + h;
    else if (m.qkv_bias)
        p += q + Count(2) * kv;
    if (m.qk_norm)
        p += Count(2) * (m.norm == NormKind::LayerNorm ? Count(2) * m.head_dim : Count(m.head_dim));
    if (m.attention_sinks)
        p += m.heads;  // GptOssAttention.sinks (transformers models/gpt_oss/modeling_gpt_oss.py @ 00d4b3d)
    return p;
}

// One MLP of inner size f: the dense MLP, an expert, a shared expert.
Count mlpParams(const ModelSpec& m, Count f)
{
    const Count h = m.hidden;
    const Count matrices = gated(m.mlp) ? 3 : 2;
    Count p = matrices * h * f;
    if (m.bias)
        p += (matrices - 1) * f + h;
    return p;
}

// The router: h x experts (+ a bias with the linear biases, GPT-OSS), and DeepSeek-V3's score
// correction bias, one per expert (e_score_correction_bias: a buffer in transformers, a Parameter
// in DeepSeek's inference/model.py @ 9b4e978 Gate.bias; stored in the checkpoint either way).
Count routerParams(const ModelSpec& m)
{
    if (!m.moe.enabled())
        return Count(0);
    return Count(m.hidden) * m.moe.experts + (m.bias ? Count(m.moe.experts) : Count(0)) +
           (m.moe.score_correction_bias ? Count(m.moe.experts) : Count(0));
}

Count sharedExpertParams(const ModelSpec& m)
{
    return Count(m.moe.shared_experts) * mlpParams(m, Count(m.moe.shared_ffn_hidden));
}

Count denseMlpParams(const ModelSpec& m) { return mlpParams(m, Count(m.ffn_hidden)); }

// An MoE block: every routed expert, the shared ones and the router; `active`: the top k only.
Count moeBlockParams(const ModelSpec& m, bool active)
{
    const Count experts = active ? m.moe.top_k : m.moe.experts;
    return experts * mlpParams(m, Count(m.expertFfn())) + sharedExpertParams(m) + routerParams(m);
}

struct CheckedBreakdown {
    Count embeddings, encoder_layer, decoder_layer, layers_total, final_norms, lm_head, pooler, total, active_per_token;
    Count mtp, mtp_layer, mtp_active;
    bool overflowed() const
    {
        for (const Count& c : {embeddings, encoder_layer, decoder_layer, layers_total, final_norms, lm_head, pooler,
                               total, active_per_token, mtp, mtp_layer, mtp_active})
            if (c.overflowed())
                return true;
        return false;
    }
};

CheckedBreakdown checkedBreakdown(const ModelSpec& m)
{
    CheckedBreakdown b;
    const Count h = m.hidden;
    const bool encDec = m.family == ModelFamily::EncoderDecoder;
    const int stacks = encDec ? 2 : 1;

    b.embeddings = Count(m.vocab) * h;
    if (m.positions == PositionKind::Learned)
        b.embeddings += Count(m.position_table > 0 ? m.position_table : m.max_seq) * h;
    if (m.positions == PositionKind::Relative)
        b.embeddings += Count(stacks) * m.relative_buckets * m.heads;  // one table per stack (T5)
    b.embeddings += Count(m.token_types) * h;
    if (m.embedding_norm)
        b.embeddings += normParams(m);

    // A layer: self attention + MLP block, each with its norm; encoder_layer is one with the MoE
    // block when there is one (a dense layer of a model with both has denseMlp instead).
    const Count moeLayers = m.moeLayers(0, m.layers);
    const Count denseLayers = Count(m.layers) - moeLayers;
    const Count attentionAndNorms = attentionParams(m) + Count(2) * normParams(m);
    const Count mlpBlock = m.moe.enabled() ? moeBlockParams(m, false) : denseMlpParams(m);
    b.encoder_layer = attentionAndNorms + mlpBlock;
    if (encDec)
        b.decoder_layer = b.encoder_layer + attentionParams(m) + normParams(m);  // + cross attention
    b.layers_total = moeLayers * b.encoder_layer + denseLayers * (attentionAndNorms + denseMlpParams(m)) +
                     Count(encDec ? m.decoder_layers : 0) * b.decoder_layer;

    b.final_norms = m.final_norm ? Count(stacks) * normParams(m) : Count(0);
    b.lm_head = m.tied_embeddings ? Count(0) : Count(m.vocab) * h;
    b.pooler = m.pooler ? h * h + h : Count(0);
    b.total = b.embeddings + b.layers_total + b.final_norms + b.lm_head + b.pooler;

    // Each MoE block: the routed experts a token does not use.
    const Count inactivePerBlock = m.moe.enabled() ? moeBlockParams(m, false) - moeBlockParams(m, true) : Count(0);
    const Count moeBlocks = moeLayers + Count(encDec && m.moe.enabled() ? m.decoder_layers : 0);
    b.active_per_token = b.total - moeBlocks * inactivePerBlock;

    // MTP (MtpSpec): enorm, hnorm and the final norm, eh_proj (2h x h, no bias) and a layer of the
    // last layer's kind; the embedding and the head are shared (counted once, above).
    if (m.mtp.enabled()) {
        const bool lastMoe = m.moeLayer(m.layers - 1);
        const Count layer = attentionAndNorms + (lastMoe ? moeBlockParams(m, false) : denseMlpParams(m));
        b.mtp_layer = Count(3) * normParams(m) + Count(2) * h * h + layer;
        b.mtp = Count(m.mtp.layers) * b.mtp_layer;
        b.mtp_active = b.mtp - (lastMoe ? Count(m.mtp.layers) * inactivePerBlock : Count(0));
    }
    return b;
}

// Forward FLOPs per token of one layer of the main stack (decoder-only or encoder layer):
// with the MoE block or the dense MLP, full or sliding attention.
Count layerForwardFlops(const ModelSpec& m, int seq, bool moeBlock, bool sliding)
{
    const Count h = m.hidden, q = qDim(m), kv = kvDim(m), f = m.ffn_hidden;
    const Count projections = Count(2) * (m.mla.enabled() ? mlaMatrixParams(m) : h * q + Count(2) * h * kv + q * h);
    // Q K^T (queries and keys of head_dim) and (softmax) V (values of head_dim, MLA's v_head_dim)
    // over the keys each query sees: the full sequence, or the window.
    const Count qPlusV = q + Count(m.heads) * (m.mla.enabled() ? m.mla.v_head_dim : m.head_dim);
    const Count scores = Count(2) * attentionKeys(m, seq, sliding) * qPlusV;
    const Count matrices = gated(m.mlp) ? 3 : 2;
    const Count denseMlp = Count(2) * matrices * h * f;
    // An MoE block: the top k routed experts, the shared experts and the router.
    const Count moeMlp = Count(m.moe.top_k) * 2 * matrices * h * m.expertFfn() +
                         Count(m.moe.shared_experts) * 2 * matrices * h * m.moe.shared_ffn_hidden +
                         Count(2) * h * m.moe.experts;
    return projections + scores + (moeBlock ? moeMlp : denseMlp);
}

Count checkedForwardFlops(const ModelSpec& m, int seq)
{
    const Count h = m.hidden;
    // Sliding windows are decoder-only (validate()): the encoder-decoder path never sees one; a
    // sliding layer saves the same scores with either block.
    const int sliding = m.slidingLayers(0, m.layers);
    const int moeLayers = m.moeLayers(0, m.layers);
    Count flops = Count(moeLayers) * layerForwardFlops(m, seq, true, false) +
                  Count(m.layers - moeLayers) * layerForwardFlops(m, seq, false, false) +
                  Count(sliding) * (layerForwardFlops(m, seq, false, true) - layerForwardFlops(m, seq, false, false));
    if (m.family == ModelFamily::EncoderDecoder) {
        // + cross attention: its projections and scores once more (a layer's less its MLP).
        const Count layer = layerForwardFlops(m, seq, m.moe.enabled(), false);
        const Count cross =
            layerForwardFlops(m, seq, false, false) - Count(2) * (gated(m.mlp) ? 3 : 2) * h * m.ffn_hidden;
        flops += Count(m.decoder_layers) * (layer + cross);
    }
    flops += Count(2) * h * m.vocab;  // logits
    return flops;
}

// MTP (MtpSpec; ModelSpec.h mtpForwardFlopsPerToken): per module the layer of the last layer's
// kind, eh_proj, the three norms as Megatron counts them (3h multiply-adds) and the logits again.
Count checkedMtpFlops(const ModelSpec& m, int seq)
{
    if (!m.mtp.enabled())
        return Count(0);
    const Count h = m.hidden;
    const int last = m.layers - 1;
    const Count module = layerForwardFlops(m, seq, m.moeLayer(last), m.slidingLayer(last)) +
                         Count(2) * (Count(2) * h * h + Count(3) * h) + Count(2) * h * m.vocab;
    return Count(m.mtp.layers) * module;
}

[[noreturn]] void throwOverflow(const ModelSpec& m, const char* what)
{
    throw InputError("model " + m.name + ": the " + what +
                     " overflows a 64-bit integer (more than 9.2e18); check layers, hidden, heads, head_dim and "
                     "ffn_hidden");
}

} // namespace

bool ModelSpec::slidingLayer(int index) const
{
    if (!sliding_window.enabled())
        return false;
    const std::vector<int>& list = sliding_window.layers;
    return list.empty() || std::binary_search(list.begin(), list.end(), index);
}

int ModelSpec::slidingLayers(int first, int count) const
{
    if (!sliding_window.enabled() || count <= 0)
        return 0;
    const std::vector<int>& list = sliding_window.layers;
    if (list.empty())
        return count;
    return int(std::lower_bound(list.begin(), list.end(), first + count) - std::lower_bound(list.begin(), list.end(), first));
}

bool ModelSpec::moeLayer(int index) const
{
    if (!moe.enabled() || index < moe.dense_layers)
        return false;
    const int interval = std::max(1, moe.layer_interval);
    return (index - moe.dense_layers + 1) % interval == 0;
}

int ModelSpec::moeLayers(int first, int count) const
{
    if (!moe.enabled() || count <= 0)
        return 0;
    // MoE layers before layer n: those at dense + interval - 1, dense + 2 interval - 1, ...
    const int interval = std::max(1, moe.layer_interval);
    auto before = [&](int n) { return n <= moe.dense_layers ? 0 : (n - moe.dense_layers) / interval; };
    return before(first + count) - before(first);
}

std::int64_t attentionKeys(const ModelSpec& m, int seq, bool sliding)
{
    return sliding && m.sliding_window.enabled() ? std::min(seq, m.sliding_window.size) : seq;
}

ParameterBreakdown parameterBreakdown(const ModelSpec& m)
{
    const CheckedBreakdown c = checkedBreakdown(m);
    if (c.overflowed())
        throwOverflow(m, "parameter count");
    ParameterBreakdown b;
    b.embeddings = c.embeddings.value();
    b.encoder_layer = c.encoder_layer.value();
    b.decoder_layer = c.decoder_layer.value();
    b.layers_total = c.layers_total.value();
    b.final_norms = c.final_norms.value();
    b.lm_head = c.lm_head.value();
    b.pooler = c.pooler.value();
    b.total = c.total.value();
    b.active_per_token = c.active_per_token.value();
    b.mtp = c.mtp.value();
    b.mtp_layer = c.mtp_layer.value();
    b.mtp_active = c.mtp_active.value();
    return b;
}

std::int64_t parameterCount(const ModelSpec& m) { return parameterBreakdown(m).total; }

std::int64_t forwardFlopsPerToken(const ModelSpec& m, int seq)
{
    const Count flops = checkedForwardFlops(m, seq);
    if (flops.overflowed())
        throwOverflow(m, "FLOP count per token");
    return flops.value();
}

std::int64_t mtpForwardFlopsPerToken(const ModelSpec& m, int seq)
{
    const Count flops = checkedMtpFlops(m, seq);
    if (flops.overflowed())
        throwOverflow(m, "multi-token prediction FLOP count per token");
    return flops.value();
}

bool countsFit(const ModelSpec& m, int seq)
{
    return !checkedBreakdown(m).overflowed() && !checkedForwardFlops(m, seq).overflowed() &&
           !checkedMtpFlops(m, seq).overflowed();
}

namespace {

template <class Add>
void validateRopeScaling(const ModelSpec& m, Add& add)
{
    const RopeScaling& r = m.rope_scaling;
    if (!r.enabled())
        return;
    if (m.positions != PositionKind::Rotary) {
        add("rope_scaling", "applies to rotary positions only (positions is \"" + std::string(toString(m.positions)) + "\")");
        return;
    }
    // transformers src/transformers/modeling_rope_utils.py @ 0044e3b (_validate_*_parameters): every kind
    // needs factor >= 1; llama3 also the two frequency factors and the original length.
    if (!(r.factor >= 1 && r.factor <= 1e6))
        add("rope_scaling.factor", "must be between 1 and 1e6 (got " + std::to_string(r.factor) + ")");
    if (r.original_max_position_embeddings < 0 || r.original_max_position_embeddings > (1 << 24))
        add("rope_scaling.original_max_position_embeddings", "is out of range [1, 16777216]");
    if (r.type == RopeScalingKind::Llama3) {
        if (r.original_max_position_embeddings <= 0)
            add("rope_scaling.original_max_position_embeddings", "is required for llama3 scaling");
        if (!(r.low_freq_factor > 0))
            add("rope_scaling.low_freq_factor", "is required for llama3 scaling (> 0)");
        else if (!(r.high_freq_factor > r.low_freq_factor))
            add("rope_scaling.high_freq_factor", "must exceed low_freq_factor " + std::to_string(r.low_freq_factor));
    } else if (r.low_freq_factor != 0 || r.high_freq_factor != 0) {
        add("rope_scaling.low_freq_factor", "applies to llama3 scaling only");
    }
    if (r.type != RopeScalingKind::Yarn && (r.beta_fast != 0 || r.beta_slow != 0 || r.attention_factor != 0))
        add("rope_scaling.beta_fast", "beta_fast, beta_slow and attention_factor apply to yarn scaling only");
    if (r.type == RopeScalingKind::Yarn && r.beta_fast != 0 && r.beta_slow != 0 && !(r.beta_fast > r.beta_slow))
        add("rope_scaling.beta_fast", "must exceed beta_slow " + std::to_string(r.beta_slow));
    if (r.type != RopeScalingKind::Yarn && !r.truncate)
        add("rope_scaling.truncate", "applies to yarn scaling only");
    if (r.type != RopeScalingKind::Yarn && (r.mscale != 0 || r.mscale_all_dim != 0))
        add("rope_scaling.mscale", "mscale and mscale_all_dim apply to yarn scaling only");
    if (r.mscale < 0 || r.mscale_all_dim < 0)
        add("rope_scaling.mscale", "mscale and mscale_all_dim must not be negative");
    if (r.beta_fast < 0 || r.beta_slow < 0 || r.attention_factor < 0)
        add("rope_scaling.beta_fast", "beta_fast, beta_slow and attention_factor must not be negative");
}

template <class Add>
void validateMoe(const ModelSpec& m, Add& add)
{
    const MoeSpec& e = m.moe;
    auto within = [&](const char* field, int v, int lo, int hi) {
        if (v < lo || v > hi)
            add(field, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    };
    within("moe.ffn_hidden", e.ffn_hidden, 0, 1 << 22);
    within("moe.shared_experts", e.shared_experts, 0, 4096);
    within("moe.shared_ffn_hidden", e.shared_ffn_hidden, 0, 1 << 22);
    within("moe.layer_interval", e.layer_interval, 1, 10000);
    if (e.shared_experts > 0 && e.shared_ffn_hidden == 0)
        add("moe.shared_ffn_hidden", "is required with shared experts");
    if (e.shared_experts == 0 && e.shared_ffn_hidden > 0)
        add("moe.shared_ffn_hidden", "without shared experts: set moe.shared_experts");
    if (e.dense_layers < 0 || e.dense_layers >= m.layers)
        add("moe.dense_layers", std::to_string(e.dense_layers) + " leaves no MoE layer among the " +
                                    std::to_string(m.layers) + " layers");
    else if (e.dense_layers + e.layer_interval > m.layers)
        add("moe.layer_interval", std::to_string(e.layer_interval) + " leaves no MoE layer after the " +
                                      std::to_string(e.dense_layers) + " dense ones");
    if (m.family != ModelFamily::DecoderOnly && (e.dense_layers > 0 || e.layer_interval > 1))
        add("moe.dense_layers", "dense layers and layer intervals apply to decoder-only models (every layer of an "
                                "encoder or encoder-decoder has the MoE block)");
    if (e.capacity_factor < 0 || e.capacity_factor > 1000 || (e.capacity_factor > 0 && e.capacity_factor < 1e-6))
        add("moe.capacity_factor", "must be > 0 (or 0: dropless)");
    if (e.aux_loss_coeff < 0 || e.aux_loss_coeff > 1000)
        add("moe.aux_loss_coeff", "must be between 0 and 1000");
    // Group-limited routing: equal groups, the top k drawn from group_top_k of them (DeepSeek's
    // n_group / topk_group; transformers' router views the experts as n_group x E/n_group).
    if (e.expert_groups != 0 || e.group_top_k != 0) {
        if (e.expert_groups < 1 || e.expert_groups > e.experts || (e.experts > 0 && e.experts % e.expert_groups != 0))
            add("moe.expert_groups", std::to_string(e.expert_groups) + " must divide the " + std::to_string(e.experts) +
                                         " experts into equal groups");
        else if (e.group_top_k < 1 || e.group_top_k > e.expert_groups)
            add("moe.group_top_k", std::to_string(e.group_top_k) + " must be between 1 and expert_groups " +
                                       std::to_string(e.expert_groups));
        else if (std::int64_t(e.group_top_k) * (e.experts / e.expert_groups) < e.top_k)
            add("moe.group_top_k", std::to_string(e.group_top_k) + " groups of " +
                                       std::to_string(e.experts / e.expert_groups) + " experts hold fewer than top_k " +
                                       std::to_string(e.top_k));
    }
    if (e.routed_scaling < 0 || e.routed_scaling > 1000)
        add("moe.routed_scaling", "must be between 0 and 1000");
}

// MLA (MlaSpec): ranks from 1 to hidden (a bottleneck wider than the model compresses nothing),
// the per-head sizes, and what the attention kind excludes: its own q/k/v shapes replace biases,
// QK-norm, sinks and grouped KV heads; the decoupled key needs rotary positions.
template <class Add>
void validateMla(const ModelSpec& m, Add& add)
{
    const MlaSpec& a = m.mla;
    if (a == MlaSpec{})
        return;
    auto within = [&](const char* field, int v, int lo, int hi, const char* why) {
        if (v < lo || v > hi) {
            add(field, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" + why);
            return false;
        }
        return true;
    };
    const char* rankWhy = " (at most hidden: a low-rank bottleneck no wider than the model)";
    if (a.kv_lora_rank <= 0)
        add("mla.kv_lora_rank", std::to_string(a.kv_lora_rank) + " must be at least 1: multi-head latent attention "
                                                                  "needs its key-value latent");
    else
        within("mla.kv_lora_rank", a.kv_lora_rank, 1, m.hidden, rankWhy);
    if (a.q_lora_rank != 0)
        within("mla.q_lora_rank", a.q_lora_rank, 1, m.hidden, " (or null: no query compression)");
    within("mla.qk_nope_head_dim", a.qk_nope_head_dim, 1, 1 << 14, "");
    if (within("mla.qk_rope_head_dim", a.qk_rope_head_dim, 2, 1 << 14, "") && a.qk_rope_head_dim % 2 != 0)
        add("mla.qk_rope_head_dim", std::to_string(a.qk_rope_head_dim) + " is odd: RoPE rotates pairs of dimensions");
    within("mla.v_head_dim", a.v_head_dim, 1, 1 << 14, "");
    if (m.head_dim != a.qkHeadDim())
        add("head_dim", std::to_string(m.head_dim) + " differs from mla.qk_nope_head_dim + mla.qk_rope_head_dim " +
                            std::to_string(a.qkHeadDim()) + " (the query and key width per head)");
    if (m.kv_heads != m.heads)
        add("kv_heads", std::to_string(m.kv_heads) + " differs from heads " + std::to_string(m.heads) +
                            ": MLA expands its latent into keys and values for every head");
    if (m.family != ModelFamily::DecoderOnly)
        add("mla", "multi-head latent attention applies to decoder-only models");
    if (m.positions != PositionKind::Rotary)
        add("mla", "needs rotary positions (its qk_rope_head_dim key is rotated)");
    if (m.bias || m.qkv_bias)
        add("bias", "biases with multi-head latent attention are not in the model format");
    if (m.qk_norm)
        add("qk_norm", "does not apply to multi-head latent attention (its latents have their own norms)");
    if (m.attention_sinks)
        add("attention_sinks", "with multi-head latent attention are not in the model format");
}

template <class Add>
void validateSlidingWindow(const ModelSpec& m, Add& add)
{
    const SlidingWindow& w = m.sliding_window;
    if (w.size == 0 && w.layers.empty())
        return;
    if (m.family != ModelFamily::DecoderOnly) {
        add("sliding_window", "applies to decoder-only models only");
        return;
    }
    if (w.size < 1 || w.size > (1 << 24))
        add("sliding_window.size", std::to_string(w.size) + " is out of range [1, 16777216]");
    for (size_t i = 0; i < w.layers.size(); ++i) {
        const int layer = w.layers[i];
        if (layer < 0 || layer >= m.layers) {
            add("sliding_window.layers", "layer " + std::to_string(layer) + " is not one of the model's " +
                                             std::to_string(m.layers) + " layers (0 to " + std::to_string(m.layers - 1) + ")");
            return;
        }
        if (i > 0 && layer <= w.layers[i - 1]) {
            add("sliding_window.layers", "must be strictly increasing (" + std::to_string(w.layers[i - 1]) + " then " +
                                             std::to_string(layer) + ")");
            return;
        }
    }
}

// MTP (MtpSpec): 1 to 64 depths (DeepSeek-V3 trains with 1), a positive loss weight up to 10
// (the report's 0.3 and 0.1, Megatron's default 0.1), on a decoder-only model.
template <class Add>
void validateMtp(const ModelSpec& m, Add& add)
{
    const MtpSpec& t = m.mtp;
    if (t == MtpSpec{})
        return;
    if (t.layers < 1 || t.layers > 64)
        add("mtp.layers",
            std::to_string(t.layers) + " is out of range [1, 64] (leave mtp out: no multi-token prediction)");
    if (!(t.loss_scale > 0 && t.loss_scale <= 10)) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", t.loss_scale);
        add("mtp.loss_scale", std::string(text) + " is out of range (0, 10]: the MTP losses' weight");
    }
    if (m.family != ModelFamily::DecoderOnly)
        add("mtp", "multi-token prediction applies to decoder-only models");
}

} // namespace

FieldErrors validate(const ModelSpec& m, const std::string& path)
{
    FieldErrors errors;
    auto add = [&](const std::string& field, const std::string& message) {
        errors.push_back({path + "." + field, message});
    };
    // Bounds keep every derived count inside int64 and reject typos such as 1e30 layers.
    auto range = [&](const char* field, int value, int lo, int hi) {
        if (value < lo || value > hi) {
            add(field, std::to_string(value) + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
            return false;
        }
        return true;
    };
    if (const std::string problem = nameProblem(m.name); !problem.empty())
        add("name", problem);
    range("layers", m.layers, 1, 10000);
    if (m.family == ModelFamily::EncoderDecoder)
        range("decoder_layers", m.decoder_layers, 1, 10000);
    else if (m.decoder_layers != 0)
        add("decoder_layers", "only an encoder-decoder model has decoder layers");
    const bool hiddenOk = range("hidden", m.hidden, 1, 1 << 20);
    const bool headsOk = range("heads", m.heads, 1, 1 << 14);
    const bool kvOk = range("kv_heads", m.kv_heads, 1, 1 << 14);
    range("head_dim", m.head_dim, 1, 1 << 14);
    range("ffn_hidden", m.ffn_hidden, 1, 1 << 22);
    range("vocab", m.vocab, 1, 1 << 24);
    range("max_seq", m.max_seq, 1, 1 << 24);
    range("position_table", m.position_table, 0, 1 << 24);
    range("token_types", m.token_types, 0, 1 << 16);
    range("relative_buckets", m.relative_buckets, 0, 1 << 16);
    if (headsOk && kvOk && m.heads % m.kv_heads != 0)
        add("heads", std::to_string(m.heads) + " is not divisible by kv_heads " + std::to_string(m.kv_heads));
    if (hiddenOk && headsOk && m.heads > m.hidden)
        add("heads", std::to_string(m.heads) + " exceeds hidden " + std::to_string(m.hidden));
    if (m.positions == PositionKind::Learned && m.position_table > 0 && m.position_table < m.max_seq)
        add("position_table", std::to_string(m.position_table) + " rows cannot cover max_seq " +
                                  std::to_string(m.max_seq));
    if (m.positions == PositionKind::Relative && m.relative_buckets <= 0)
        add("relative_buckets", "relative positions need at least one bucket");
    if (m.moe.enabled() || m.moe.top_k != 0) {
        if (m.moe.experts < 1 || m.moe.experts > 4096)
            add("moe.experts", std::to_string(m.moe.experts) + " is out of range [1, 4096]");
        else if (m.moe.top_k < 1 || m.moe.top_k > m.moe.experts)
            add("moe.top_k", std::to_string(m.moe.top_k) + " must be between 1 and experts " +
                                 std::to_string(m.moe.experts));
        validateMoe(m, add);
    }
    if (!(m.norm_eps > 0 && m.norm_eps < 1))
        add("norm_eps", std::to_string(m.norm_eps) + " is out of range (0, 1)");
    if (m.bias && m.qkv_bias)
        add("bias", "biases on every linear layer already include q, k and v: \"qkv\" is for q, k and v only");
    validateRopeScaling(m, add);
    validateSlidingWindow(m, add);
    validateMla(m, add);
    validateMtp(m, add);
    // Every field in range can still multiply past int64: only then are the counts checked.
    if (errors.empty()) {
        if (checkedBreakdown(m).overflowed())
            add("layers", "the parameter count overflows a 64-bit integer (more than 9.2e18): layers, hidden, "
                          "heads x head_dim and ffn_hidden are too large together");
        else if (checkedForwardFlops(m, m.max_seq).overflowed())
            add("max_seq", "the FLOP count per token at max_seq " + std::to_string(m.max_seq) +
                               " overflows a 64-bit integer (more than 9.2e18)");
    }
    return errors;
}

const char* toString(ModelFamily v) { return enumToString<ModelFamily>(kModelFamilyNames, v); }
const char* toString(MlpKind v) { return enumToString<MlpKind>(kMlpKindNames, v); }
const char* toString(PositionKind v) { return enumToString<PositionKind>(kPositionKindNames, v); }
const char* toString(NormKind v) { return enumToString<NormKind>(kNormKindNames, v); }
const char* toString(RopeScalingKind v) { return enumToString<RopeScalingKind>(kRopeScalingKindNames, v); }
const char* toString(MoeRouter v) { return enumToString<MoeRouter>(kMoeRouterNames, v); }

} // namespace shardscope
