// The block kinds beyond GPT-2's, forward and backward, by the rules of Ops.h
// (column-major (C, N) activations, token n = b*T + t in column n, weight and
// bias gradients ACCUMULATED, input gradients OVERWRITTEN unless said otherwise,
// no allocation, templated on the scalar and instantiated for float and double).
//
//   RMSNorm        Zhang & Sennrich 2019 (Llama, Mistral, T5): x * rstd * w, no mean, no bias
//   ReLU           max(0, x) (OPT, T5 v1.0)
//   gated MLPs     Shazeer 2020, "GLU Variants Improve Transformer": SwiGLU = silu(gate) * up
//                  (Llama), GeGLU = gelu_tanh(gate) * up (T5 v1.1, Gemma)
//   RoPE           Su et al. 2021 (RoFormer), the rotate-half pairing of GPT-NeoX, HF Llama
//                  and Megatron-LM's default (dimension i pairs with i + hd/2)
//   attention      grouped-query (Ainslie et al. 2023): NH query heads share NKV key/value
//                  heads, query head h reading kv head h / (NH / NKV); MHA is NKV = NH and
//                  MQA NKV = 1. Head size hd is independent of the hidden size. Causal
//                  (decoders) or bidirectional (encoders, cross-attention with Tq != Tk).
//   ring attention context parallelism (Megatron-LM's cp, Transformer Engine's
//                  AttnFuncWithCPAndKVP2P, Liu et al. 2023 "Ring Attention"): a device's queries
//                  meet one key/value block per ring step; each step's softmax is normalised over
//                  its own block and the partial results are merged exactly by log-sum-exp.
#pragma once

#include "Ops.h"

#include <cmath>

namespace shardscope::engine {

// A strided view of rows of a bigger matrix (q, k and v are row blocks of the fused qkv).
template <class T> using RowsRef = Eigen::Ref<Mat<T>, 0, Eigen::OuterStride<>>;
template <class T> using CRowsRef = Eigen::Ref<const Mat<T>, 0, Eigen::OuterStride<>>;

// ---------------------------------------------------------------- RMSNorm

// out (C, N) = inp * rstd * weight per column, rstd (N) = 1 / sqrt(mean(inp^2) + eps), cached.
template <class T>
void rmsnorm_forward(KernelPool& pool, MatRef<T> out, VecRef<T> rstd, CMatRef<T> inp, CVecRef<T> weight, double eps);
// dinp (C, N) += (it is the residual stream, as layernorm_backward), dweight (C) +=.
template <class T>
void rmsnorm_backward(KernelPool& pool, MatRef<T> dinp, VecRef<T> dweight, CMatRef<T> dout, CMatRef<T> inp,
                      CVecRef<T> weight, CVecRef<T> rstd);

// ---------------------------------------------------------------- activations

template <class T>
void relu_forward(KernelPool& pool, VecRef<T> out, CVecRef<T> inp);
// dinp = (inp > 0) * dout (overwritten; may alias dout).
template <class T>
void relu_backward(KernelPool& pool, VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout);

enum class GateKind { SiLU, GeLU };
// inp (2F, N): rows [0, F) the gate, [F, 2F) the up projection (a tensor-parallel shard
// holds its own F columns of each, in the same order). out (F, N) = act(gate) * up.
template <class T>
void gated_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> inp, GateKind kind);
// dinp (2F, N) overwritten from dout (F, N).
template <class T>
void gated_backward(KernelPool& pool, MatRef<T> dinp, CMatRef<T> inp, CMatRef<T> dout, GateKind kind);

// The router weights of a MoE layer's copies, applied in the experts' activation as Megatron-LM
// does (moe/experts.py @ d98e8a64: permuted_probs into the activation, fused_bias_swiglu.py
// weighted_bias_swiglu_impl): x (F, N) column n *= w[n].
template <class T>
void scale_columns(KernelPool& pool, MatRef<T> x, const T* w);
// The weights' gradient: dw[n] = sum_f act(inp)[f, n] dout[f, n] (overwritten), the activation
// evaluated again from its input (inp (F, N); gated: (2F, N) [gate | up] with `gated` set, its
// gate's kind). Each column summed in order: the same bits on any thread count.
template <class T>
void activation_column_dots(KernelPool& pool, T* dw, CMatRef<T> inp, CMatRef<T> dout, bool gated, GateKind gate,
                            bool relu);

// ---------------------------------------------------------------- rotary positions

// In place on x (heads*hd, N): for each head and token n, the pair (i, i + hd/2),
// i < hd/2, rotates by angle positions[n] * base^(-2i/hd). positions: N values
// (the token's place in its sequence; under context parallelism not n % T).
template <class T>
void rope_forward(KernelPool& pool, RowsRef<T> x, const int* positions, int heads, int hd, double base);
// The gradient through the rotation: dx rotated by the opposite angle, in place.
template <class T>
void rope_backward(KernelPool& pool, RowsRef<T> dx, const int* positions, int heads, int hd, double base);

// ---------------------------------------------------------------- grouped-query attention

struct AttentionShape {
    int B = 1;        // sequences
    int Tq = 1;       // query tokens per sequence
    int Tk = 1;       // key/value tokens per sequence (== Tq for self-attention)
    int NH = 1;       // query heads (this shard's)
    int NKV = 1;      // key/value heads (this shard's); NH % NKV == 0
    int hd = 1;       // head size
    bool causal = true;  // key t2 > query t1 masked (needs Tq == Tk)
    double scale = 0;    // the scores' factor; 0: 1/sqrt(hd). T5 scales none (1; its init absorbs it)
    // Sliding window (Mistral, GPT-OSS; causal only): query t1 sees keys t2 in (t1 - window, t1],
    // itself and the window - 1 before it; 0: every key up to it.
    int window = 0;
    // Value head size (multi-head latent attention: v_head_dim, while q and k have hd =
    // qk_nope_head_dim + qk_rope_head_dim); 0: hd. The values, the output and their gradients
    // have vd rows per head.
    int vd = 0;
    int valueDim() const { return vd > 0 ? vd : hd; }
    Eigen::Index probColumns() const { return Eigen::Index(B) * NH * Tq; }
    // Keys a query is charged for: Tk (Megatron's full-square convention, causal or not), the
    // window when it is shorter (core's attentionKeys).
    double countedKeys() const { return window > 0 && window < Tk ? double(window) : double(Tk); }
    double scoreScale() const { return scale > 0 ? scale : 1.0 / std::sqrt(double(hd)); }
};

// T5's relative position bias (Raffel et al. 2020, Section 2.1; RelativePosition.h): head h's
// score of key t2 for query t1 gains table[h * count + buckets[t1 * Tk + t2]] before the softmax.
// table (NH, count) holds this shard's heads, head-major; buckets (Tq, Tk), the same for every b.
template <class T>
struct ScoreBias {
    const T* table = nullptr;
    const int* buckets = nullptr;
    int count = 0;
};

// att (Tk, B*NH*Tq): the block of (b, h) starts at column (b*NH + h)*Tq and holds
// att(t2, t1) = softmax over t2 of q_h(t1) . k_g(t2) * scale [+ bias], g = h / (NH/NKV);
// zero where masked. q (NH*hd, B*Tq), k (NKV*hd, B*Tk). bias: T5's, when given.
template <class T>
void attention_probs_forward(KernelPool& pool, MatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, const AttentionShape& s,
                             const ScoreBias<T>& bias = {});
// out (NH*vd, B*Tq): head h's rows = v_g * att_h. v (NKV*vd, B*Tk) (vd = s.valueDim()).
template <class T>
void attention_values_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> att, CRowsRef<T> v,
                              const AttentionShape& s);
// dq, dk, dv overwritten (dk, dv summed over the query heads of their group; dv and dout have
// vd rows per head);
// datt (Tk, B*NH*Tq) is scratch, overwritten: it is left holding the gradient of the scaled
// scores times the scale (what relative_bias_backward sums, divided by it).
template <class T>
void attention_backward(KernelPool& pool, RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt,
                        CMatRef<T> dout, CMatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v,
                        const AttentionShape& s);

// ---------------------------------------------------------------- ring attention (context parallelism)
//
// One device holds Tq = T/cp query tokens of each of B sequences; a visiting block holds Tk
// key/value tokens of each sequence (another device's, Tk = T/cp). qpos (Tq) and kpos (Tk) are
// the tokens' positions in their sequence (the same for every b); kpos must be ascending (a
// block is chunks in order, Megatron-LM's load-balanced split), so the keys a causal query sees
// in a block are a prefix of it: key t2 is masked for query t1 when kpos[t2] > qpos[t1]. The
// shape's causal flag selects the mask; Tq == Tk is not required. Probability blocks are row
// blocks of the device's full (T, B*NH*Tq) probabilities, column layout as above.
// Forward, per step: attention_block_probs_forward, attention_block_values_forward, then
// attention_block_merge (the first step's output and lse are the running ones); after the last
// step attention_block_renormalize turns each stored block into the final probabilities.
// Backward, per step: attention_block_backward, with delta from attention_delta once.

// att (Tk, B*NH*Tq) = the block's own softmax of q . k / sqrt(hd) (zero where masked; a query
// with no key left in the block: all zero); lse (B*NH*Tq) = log sum exp of its unmasked scaled
// scores, -inf when none is left.
template <class T>
void attention_block_probs_forward(KernelPool& pool, RowsRef<T> att, VecRef<T> lse, CRowsRef<T> q, CRowsRef<T> k,
                                   const AttentionShape& s, const int* qpos, const int* kpos);
// out (NH*hd, B*Tq) = the block's partial output: head h's rows = v_g * att_h (overwritten).
template <class T>
void attention_block_values_forward(KernelPool& pool, MatRef<T> out, CRowsRef<T> att, CRowsRef<T> v,
                                    const AttentionShape& s);
// The exact merge of a block's partial (part, part_lse) into the running (out, lse):
// lse' = max + log1p(exp(min - max)) (Transformer Engine's flash_attn_fwd_softmax_lse_correction),
// out = out exp(lse - lse') + part exp(part_lse - lse'); a -inf side contributes nothing.
template <class T>
void attention_block_merge(KernelPool& pool, MatRef<T> out, VecRef<T> lse, CMatRef<T> part, CVecRef<T> part_lse,
                           const AttentionShape& s);
// att (Tk, B*NH*Tq) *= exp(block_lse - lse) per column: the block's final probabilities.
template <class T>
void attention_block_renormalize(KernelPool& pool, RowsRef<T> att, CVecRef<T> block_lse, CVecRef<T> lse,
                                 const AttentionShape& s);
// delta (B*NH*Tq) = sum over the head's hd rows of dout * out (FlashAttention-2's D = rowsum(dO o O),
// which equals the softmax backward's sum over all keys of att * d att).
template <class T>
void attention_delta(KernelPool& pool, VecRef<T> delta, CMatRef<T> dout, CMatRef<T> out, const AttentionShape& s);
// One block's backward from the final probabilities att (Tk, B*NH*Tq): dq (NH*hd, B*Tq) +=,
// dk, dv (NKV*hd, B*Tk) += (summed over the group's query heads); datt (Tk, B*NH*Tq) scratch.
template <class T>
void attention_block_backward(KernelPool& pool, RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt,
                              CMatRef<T> dout, CRowsRef<T> att, CVecRef<T> delta, CRowsRef<T> q, CRowsRef<T> k,
                              CRowsRef<T> v, const AttentionShape& s);

} // namespace shardscope::engine
