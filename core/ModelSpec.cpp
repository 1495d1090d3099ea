#include "ModelSpec.h"
#include "ModelEnums.h"

#include <span>

namespace shardscope {

namespace {

using i64 = std::int64_t;

i64 normParams(const ModelSpec& m)
{
    // LayerNorm: scale and shift; RMSNorm: scale only.
    return m.norm == NormKind::LayerNorm ? 2 * i64(m.hidden) : i64(m.hidden);
}

bool gated(MlpKind k) { return k == MlpKind::SwiGlu || k == MlpKind::GeGlu; }

// Q, K, V and output projections (+ biases). Cross attention has the same shapes.
i64 attentionParams(const ModelSpec& m)
{
    const i64 h = m.hidden, q = m.qDim(), kv = m.kvDim();
    i64 p = h * q + 2 * h * kv + q * h;
    if (m.bias)
        p += q + 2 * kv + h;
    return p;
}

// One expert (or the dense MLP).
i64 mlpParams(const ModelSpec& m)
{
    const i64 h = m.hidden, f = m.ffn_hidden;
    const i64 matrices = gated(m.mlp) ? 3 : 2;
    i64 p = matrices * h * f;
    if (m.bias)
        p += (matrices - 1) * f + h;
    return p;
}

i64 routerParams(const ModelSpec& m) { return m.moe.enabled() ? i64(m.hidden) * m.moe.experts : 0; }

i64 mlpBlockParams(const ModelSpec& m)
{
    const i64 experts = m.moe.enabled() ? m.moe.experts : 1;
    return experts * mlpParams(m) + routerParams(m);
}

i64 activeMlpBlockParams(const ModelSpec& m)
{
    const i64 experts = m.moe.enabled() ? m.moe.top_k : 1;
    return experts * mlpParams(m) + routerParams(m);
}

} // namespace

ParameterBreakdown parameterBreakdown(const ModelSpec& m)
{
    ParameterBreakdown b;
    const i64 h = m.hidden;
    const bool encDec = m.family == ModelFamily::EncoderDecoder;
    const int stacks = encDec ? 2 : 1;

    b.embeddings = i64(m.vocab) * h;
    if (m.positions == PositionKind::Learned)
        b.embeddings += i64(m.position_table > 0 ? m.position_table : m.max_seq) * h;
    if (m.positions == PositionKind::Relative)
        b.embeddings += i64(stacks) * m.relative_buckets * m.heads;  // one table per stack (T5)
    b.embeddings += i64(m.token_types) * h;
    if (m.embedding_norm)
        b.embeddings += normParams(m);

    // A layer: self attention + MLP block, each with its norm.
    b.encoder_layer = attentionParams(m) + mlpBlockParams(m) + 2 * normParams(m);
    if (encDec)
        b.decoder_layer = b.encoder_layer + attentionParams(m) + normParams(m);  // + cross attention
    b.layers_total = i64(m.layers) * b.encoder_layer + i64(encDec ? m.decoder_layers : 0) * b.decoder_layer;

    b.final_norms = m.final_norm ? stacks * normParams(m) : 0;
    b.lm_head = m.tied_embeddings ? 0 : i64(m.vocab) * h;
    b.pooler = m.pooler ? h * h + h : 0;
    b.total = b.embeddings + b.layers_total + b.final_norms + b.lm_head + b.pooler;

    const i64 inactivePerLayer = mlpBlockParams(m) - activeMlpBlockParams(m);
    b.active_per_token = b.total - i64(m.totalLayers()) * inactivePerLayer;
    return b;
}

std::int64_t parameterCount(const ModelSpec& m) { return parameterBreakdown(m).total; }

std::int64_t forwardFlopsPerToken(const ModelSpec& m, int seq)
{
    const i64 h = m.hidden, q = m.qDim(), kv = m.kvDim(), f = m.ffn_hidden, s = seq;
    const i64 projections = 2 * (h * q + 2 * h * kv + q * h);
    const i64 scores = 2 * s * q + 2 * s * q;  // Q K^T and (softmax) V, full sequence
    const i64 experts = m.moe.enabled() ? m.moe.top_k : 1;
    const i64 mlp = experts * 2 * (gated(m.mlp) ? 3 : 2) * h * f + 2 * routerParams(m);
    const i64 layer = projections + scores + mlp;

    i64 flops = i64(m.layers) * layer;
    if (m.family == ModelFamily::EncoderDecoder)
        flops += i64(m.decoder_layers) * (layer + projections + scores);  // + cross attention
    flops += 2 * h * m.vocab;  // logits
    return flops;
}

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
    if (m.name.empty())
        add("name", "must not be empty");
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
    }
    return errors;
}

const char* toString(ModelFamily v) { return enumToString<ModelFamily>(kModelFamilyNames, v); }
const char* toString(MlpKind v) { return enumToString<MlpKind>(kMlpKindNames, v); }
const char* toString(PositionKind v) { return enumToString<PositionKind>(kPositionKindNames, v); }
const char* toString(NormKind v) { return enumToString<NormKind>(kNormKindNames, v); }

} // namespace shardscope
