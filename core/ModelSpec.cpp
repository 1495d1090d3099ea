#include "ModelSpec.h"
#include "CheckedMath.h"
#include "ModelEnums.h"

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

// Q, K, V and output projections (+ biases). Cross attention has the same shapes.
Count attentionParams(const ModelSpec& m)
{
    const Count h = m.hidden, q = qDim(m), kv = kvDim(m);
    Count p = h * q + Count(2) * h * kv + q * h;
    if (m.bias)
        p += q + Count(2) * kv + h;
    return p;
}

// One expert (or the dense MLP).
Count mlpParams(const ModelSpec& m)
{
    const Count h = m.hidden, f = m.ffn_hidden;
    const Count matrices = gated(m.mlp) ? 3 : 2;
    Count p = matrices * h * f;
    if (m.bias)
        p += (matrices - 1) * f + h;
    return p;
}

Count routerParams(const ModelSpec& m) { return m.moe.enabled() ? Count(m.hidden) * m.moe.experts : Count(0); }

Count mlpBlockParams(const ModelSpec& m)
{
    const Count experts = m.moe.enabled() ? m.moe.experts : 1;
    return experts * mlpParams(m) + routerParams(m);
}

Count activeMlpBlockParams(const ModelSpec& m)
{
    const Count experts = m.moe.enabled() ? m.moe.top_k : 1;
    return experts * mlpParams(m) + routerParams(m);
}

struct CheckedBreakdown {
    Count embeddings, encoder_layer, decoder_layer, layers_total, final_norms, lm_head, pooler, total, active_per_token;
    bool overflowed() const
    {
        for (const Count& c : {embeddings, encoder_layer, decoder_layer, layers_total, final_norms, lm_head, pooler,
                               total, active_per_token})
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

    // A layer: self attention + MLP block, each with its norm.
    b.encoder_layer = attentionParams(m) + mlpBlockParams(m) + Count(2) * normParams(m);
    if (encDec)
        b.decoder_layer = b.encoder_layer + attentionParams(m) + normParams(m);  // + cross attention
    b.layers_total = Count(m.layers) * b.encoder_layer + Count(encDec ? m.decoder_layers : 0) * b.decoder_layer;

    b.final_norms = m.final_norm ? Count(stacks) * normParams(m) : Count(0);
    b.lm_head = m.tied_embeddings ? Count(0) : Count(m.vocab) * h;
    b.pooler = m.pooler ? h * h + h : Count(0);
    b.total = b.embeddings + b.layers_total + b.final_norms + b.lm_head + b.pooler;

    const Count inactivePerLayer = mlpBlockParams(m) - activeMlpBlockParams(m);
    b.active_per_token = b.total - Count(m.totalLayers()) * inactivePerLayer;
    return b;
}

Count checkedForwardFlops(const ModelSpec& m, int seq)
{
    const Count h = m.hidden, q = qDim(m), kv = kvDim(m), f = m.ffn_hidden, s = seq;
    const Count projections = Count(2) * (h * q + Count(2) * h * kv + q * h);
    const Count scores = Count(2) * s * q + Count(2) * s * q;  // Q K^T and (softmax) V, full sequence
    const Count experts = m.moe.enabled() ? m.moe.top_k : 1;
    const Count mlp = experts * 2 * (gated(m.mlp) ? 3 : 2) * h * f + Count(2) * routerParams(m);
    const Count layer = projections + scores + mlp;

    Count flops = Count(m.layers) * layer;
    if (m.family == ModelFamily::EncoderDecoder)
        flops += Count(m.decoder_layers) * (layer + projections + scores);  // + cross attention
    flops += Count(2) * h * m.vocab;  // logits
    return flops;
}

[[noreturn]] void throwOverflow(const ModelSpec& m, const char* what)
{
    throw InputError("model " + m.name + ": the " + what +
                     " overflows a 64-bit integer (more than 9.2e18); check layers, hidden, heads, head_dim and "
                     "ffn_hidden");
}

} // namespace

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

bool countsFit(const ModelSpec& m, int seq)
{
    return !checkedBreakdown(m).overflowed() && !checkedForwardFlops(m, seq).overflowed();
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
    }
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

} // namespace shardscope
