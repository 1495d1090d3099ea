// Activation memory of one transformer layer per micro-batch, after Korthikanti
// et al., "Reducing Activation Recomputation in Large Transformer Models" (2022),
// Section 4, generalised from MHA + 4h GeLU MLP to GQA, gated MLPs and any FFN
// size, with 16-bit activations and 1-byte dropout masks:
//   attention: 3 sbh (input, out-proj dropout mask, out) ... split as below
//   - outside the TP region (divided by t only with sequence parallelism):
//       2 LayerNorm inputs 4sbh, attention and MLP inputs 2sbh + 2sbh, 2 dropout masks 2sbh = 10 sbh
//   - inside the TP region (divided by t): Q 2sbq, K 2sb.kv, V 2sb.kv, attention output 2sbq,
//       MLP: GeLU input and output 2sbf + 2sbf (gated: gate, up, product 6sbf)
//   - attention scores (dropped by selective recomputation): softmax out 2as^2b,
//       dropout mask as^2b, dropout out 2as^2b = 5 a s^2 b
// With q = kv = h and f = 4h this is exactly s b h (34 + 5 a s / h) (the paper's eq. 1).
// Beyond the paper: the norms' fp32 statistics (LayerNorm: mean and 1/std per token, RMSNorm:
// 1/rms), which its count leaves out as small; kept apart, in bytes, so the paper's figure stays.
// QK-norm (Qwen3) keeps its inputs, the projected Q and K (2sbq + 2sb.kv), and one statistic per
// head and token for each.
#pragma once

namespace shardscope {

struct LayerActivationShape {
    double tokens = 0;        // s x b on this device's sequence shard (s / cp)
    double keys = 0;          // s: every query attends over the full sequence
    double hidden = 0;        // h
    double q_dim_local = 0;   // heads x head_dim / t
    double kv_dim_local = 0;  // KV heads held by the device x head_dim (replicated heads count fully)
    double heads_local = 0;   // a / t
    double ffn_local = 0;     // f / t (x experts routed per token for MoE)
    bool gated_mlp = false;
    bool cross_attention = false;  // decoder layer of an encoder-decoder
    bool dropout = true;      // masks kept (1 byte each): sbh per residual branch, a s^2 b on the scores
    double tp = 1;
    bool sequence_parallel = false;
    int norm_statistics = 2;  // fp32 values per token and norm: 2 (LayerNorm), 1 (RMSNorm)
    bool qk_norm = false;     // a norm over head_dim on every query and key head
    double head_dim = 0;      // (for QK-norm's statistics)
};

struct LayerActivationBytes {
    double outside_tp = 0;  // norms, residual inputs, dropout masks (split by SP)
    double inside_tp = 0;   // Q, K, V, projections, MLP intermediates
    double scores = 0;      // attention probabilities and their dropout (selective recompute drops them)
    double input = 0;       // the layer input alone (what full recomputation keeps)
    double statistics = 0;  // the norms' fp32 statistics, bytes whatever the precision (not in all())

    double all() const { return outside_tp + inside_tp + scores; }
};

inline LayerActivationBytes layerActivationBytes(const LayerActivationShape& s)
{
    LayerActivationBytes a;
    const double sp = s.sequence_parallel ? s.tp : 1.0;
    const double sbh = s.tokens * s.hidden;
    const double attentionBlocks = s.cross_attention ? 2.0 : 1.0;
    // Outside: 2 norm inputs, block inputs, dropout masks (1 byte): 10 sbh (+ 5 sbh per cross attention);
    // without dropout 8 sbh (+ 4 sbh).
    const double masks = s.dropout ? 1.0 : 0.0;
    a.outside_tp = (8.0 + 2 * masks + (s.cross_attention ? 4.0 + masks : 0.0)) * sbh / sp;
    const double attention = 4.0 * s.tokens * s.q_dim_local + 4.0 * s.tokens * s.kv_dim_local;
    const double mlp = (s.gated_mlp ? 6.0 : 4.0) * s.tokens * s.ffn_local;
    a.inside_tp = attentionBlocks * attention + mlp;
    // Softmax output (2 bytes), and with dropout its mask (1) and output (2).
    a.scores = attentionBlocks * (s.dropout ? 5.0 : 2.0) * s.heads_local * s.tokens * s.keys;
    a.input = 2.0 * sbh / sp;
    a.statistics = (s.cross_attention ? 3.0 : 2.0) * s.norm_statistics * 4.0 * s.tokens / sp;
    if (s.qk_norm && s.head_dim > 0) {
        a.inside_tp += attentionBlocks * (2.0 * s.tokens * s.q_dim_local + 2.0 * s.tokens * s.kv_dim_local);
        const double headsNormed = (s.q_dim_local + s.kv_dim_local) / s.head_dim;
        a.statistics += attentionBlocks * s.norm_statistics * 4.0 * s.tokens * headsNormed;
    }
    return a;
}

} // namespace shardscope
