// Kernels: the engine's operations as a device runs them. Each call computes (the
// ops of Ops.h and OpsBlocks.h on the device's KernelPool), charges its own cost
// to the device (FLOPs by core/OpConventions.h, bytes from the shapes) and, in
// bf16 modes, rounds what it stores to bf16; so the model reads one line per
// operation, as llm.c's train_gpt2.c does.
//
// Costs. FLOPs: 2 per multiply-add for products, the per-element conventions for the
// rest. Bytes: device bytes of each tensor read and written once; e per element of an
// activation, weight or gradient (4 in fp32, 2 in the bf16 modes); fp32 statistics
// (norm mean/rstd, per-token losses, the vocabulary softmax) 4. Epilogues fused into a
// product (bias, residual add) add bytes only, to the product. Attention is counted over
// the full (Tk, Tq) square per head, causal or not (Megatron's convention, which the
// planner uses too); under a sliding window, min(Tk, window) keys per query (core's
// attentionKeys).
//
// Buffers are raw pointers into device allocations, column-major as in Ops.h:
// activations (rows, N) with token n in column n; weights (in, out).
#pragma once

#include "Device.h"
#include "ModelConfig.h"
#include "OpsBlocks.h"

#include <cstdint>

namespace shardscope::engine {

// Attention operands in separate buffers: q the rows [0, qd) of a (qRows, B*Tq) buffer, k and v
// the rows [0, kvd) and [kvd, 2 kvd) of a (kvRows, B*Tk) buffer. A fused self-attention qkv is
// {qkv, qd + 2 kvd, qkv + qd, qd + 2 kvd}; T5's cross-attention {q, qd, kv, 2 kvd} (the decoder's
// queries, the encoder output's keys and values).
template <class T>
struct AttentionOperands {
    const T* q;
    std::int64_t qRows;
    const T* kv;
    std::int64_t kvRows;
};

template <class T>
class Kernels {
public:
    Kernels(EmulatedDevice& device, PrecisionMode precision);

    EmulatedDevice& device() { return dev_; }
    KernelPool& pool() { return dev_.pool(); }
    DataType compute() const { return compute_; }
    double elementBytes() const { return e_; }   // device bytes of a stored tensor element
    // The weight gradients' width that wgrad reads and writes: elementBytes(), or 4 with bf16-mixed's
    // fp32 main gradients (Megatron's gradient_accumulation_fusion: wgrad accumulates into the fp32
    // main_grad), as the planner's GemmCost charges it.
    void setGradientBytes(double bytes) { gb_ = bytes; }
    bool bf16() const { return compute_ == DataType::BF16; }

    // out (OC, N) = w^T inp + bias [+ residual]; bias, residual may be null.
    void matmulForward(T* out, const T* inp, const T* w, const T* bias, const T* residual, std::int64_t IC,
                       std::int64_t OC, std::int64_t N);
    // dinp (IC, N) overwritten (+= when `accumulate`: the dgrad GEMM's C += A B, no extra pass);
    // dw (IC, OC) +=; dbias (OC) += when not null.
    void matmulBackward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, std::int64_t IC,
                        std::int64_t OC, std::int64_t N, bool accumulate = false);

    // out (C, N) = norm(inp); LayerNorm caches mean and rstd (N each), RMSNorm rstd only
    // (mean may be null); bias null for RMSNorm. inpRows: inp's column stride when it is a row
    // block of a taller buffer (MLA's latents in the down projection's output); 0: C.
    void normForward(NormKind kind, T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, std::int64_t C,
                     std::int64_t N, double eps, std::int64_t inpRows = 0);
    // dinp (C, N) += (the residual stream); dw, db +=. inpRows: the column stride of inp and dinp
    // (both row blocks of taller buffers); 0: C.
    void normBackward(NormKind kind, T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean,
                      const T* rstd, std::int64_t C, std::int64_t N, std::int64_t inpRows = 0);

    // QK-norm (Qwen3): the norm over hd of each query head (weight w[0, hd), bias b[0, hd)) and
    // each key head (w[hd, 2 hd), b[hd, 2 hd)) in rows [0, (NH + NKV) hd) of x (rows, N), in place;
    // pre ((NH + NKV) hd, N) keeps the input, mean and rstd ((NH + NKV) N, head j's at j N) the
    // statistics (mean null for RMSNorm, b too). One kernel over the (NH + NKV) N head vectors.
    void qkNormForward(NormKind kind, T* x, T* pre, T* mean, T* rstd, const T* w, const T* b, std::int64_t rows,
                       int NH, int NKV, int hd, std::int64_t N, double eps);
    // The same rows of dx (rows, N): the output's gradient on entry, the input's on exit;
    // scratch (hd, N); dw, db (2 hd) +=.
    void qkNormBackward(NormKind kind, T* dx, T* scratch, T* dw, T* db, const T* pre, const T* w, const T* mean,
                        const T* rstd, std::int64_t rows, int NH, int NKV, int hd, std::int64_t N);

    // The MLP's activation: inp (F, N), or (2F, N) [gate | up] for gated kinds; out (F, N).
    void activationForward(MlpKind kind, T* out, const T* inp, std::int64_t F, std::int64_t N);
    // dinp (F or 2F, N) overwritten from dout (F, N); for ungated kinds dinp may alias dout.
    void activationBackward(MlpKind kind, T* dinp, const T* inp, const T* dout, std::int64_t F, std::int64_t N);
    // A MoE layer's experts (Megatron-LM's weighted activation): out (F, N) = w[n] act(inp), the
    // copies' router weights w (N values, fp32 as the router's) applied in the same kernel.
    void weightedActivationForward(MlpKind kind, T* out, const T* inp, const T* w, std::int64_t F, std::int64_t N);
    // From dout (F, N), overwritten on the way (scaled by w): dw (N) overwritten with
    // sum_f act(inp) dout, dinp (F or 2F, N) overwritten (ungated kinds: may alias dout).
    void weightedActivationBackward(MlpKind kind, T* dinp, T* dw, const T* inp, const T* w, T* dout, std::int64_t F,
                                    std::int64_t N);

    // RoPE in place on rows [row0, row0 + heads*hd) of x (rows, N).
    void ropeForward(T* x, std::int64_t rows, std::int64_t row0, int heads, int hd, const int* positions,
                     std::int64_t N, double base);
    void ropeBackward(T* dx, std::int64_t rows, std::int64_t row0, int heads, int hd, const int* positions,
                      std::int64_t N, double base);

    // Self-attention on a fused qkv (qd + 2 kvd, N): q rows [0, qd), k [qd, qd + kvd), v after.
    // att (Tk, B*NH*Tq) as OpsBlocks.h; out (qd, N).
    void attentionProbs(T* att, const T* qkv, const AttentionShape& s);
    void attentionValues(T* out, const T* att, const T* qkv, const AttentionShape& s);
    // dqkv (qd + 2 kvd, N) overwritten; datt scratch.
    void attentionBackward(T* dqkv, T* datt, const T* dout, const T* att, const T* qkv, const AttentionShape& s);

    // Ring attention (context parallelism, OpsBlocks.h) over one visiting block. att is the
    // device's (attRows = T, B*NH*Tq) probabilities, the block at rows [row0, row0 + s.Tk); q
    // comes from the fused qkv (qd + 2 kvd, B*Tq), k and v from a packed block kv (2 kvd, B*Tk)
    // [k rows | v rows]. Costs as the single-device kernels charge them, for this (Tk, Tq)
    // square: summed over the ring's steps they are the whole sequence's. The merges, the final
    // renormalisation and delta are the softmax's bookkeeping, counted with the products
    // (fused, as the softmax is): bytes only.
    void ringAttentionProbs(T* att, std::int64_t attRows, std::int64_t row0, T* lse, const T* qkv, const T* kv,
                            const AttentionShape& s, const int* qpos, const int* kpos);
    void ringAttentionValues(T* out, const T* att, std::int64_t attRows, std::int64_t row0, const T* kv,
                             const AttentionShape& s);
    void ringAttentionMerge(T* out, T* lse, const T* part, const T* part_lse, const AttentionShape& s);
    // Every block of att renormalised by its step's lse (steps blocks of B*NH*Tq), then rounded.
    void ringAttentionFinish(T* att, std::int64_t attRows, const T* step_lse, const T* lse, int steps,
                             const AttentionShape& s);
    void ringAttentionDelta(T* delta, const T* dout, const T* out, const AttentionShape& s);
    // dq: the q rows of dqkv (qd + 2 kvd, B*Tq) +=; dkv (2 kvd, B*Tk) [dk | dv] +=; datt scratch (Tk, B*NH*Tq).
    void ringAttentionBackward(T* dqkv, T* dkv, T* datt, const T* dout, const T* att, std::int64_t attRows,
                               std::int64_t row0, const T* delta, const T* qkv, const T* kv, const AttentionShape& s);

    // Attention on separate operands (AttentionOperands), with T5's relative bias when given and
    // the shape's score scale: the same products and costs as the fused-qkv calls above. The bias
    // add and, in relativeBiasBackward, the table's gradient run inside the fused attention kernel
    // (as the softmax does): bytes of the table only, their FLOPs counted with the products.
    void attentionProbs(T* att, const AttentionOperands<T>& x, const AttentionShape& s, const ScoreBias<T>& bias);
    void attentionValues(T* out, const T* att, const AttentionOperands<T>& x, const AttentionShape& s);
    // dq (rows [0, qd) of dqRows), dkv ([dk | dv] rows [0, 2 kvd) of dkvRows) overwritten; datt scratch,
    // left as attention_backward leaves it (what relativeBiasBackward reads).
    void attentionBackward(T* dq, std::int64_t dqRows, T* dkv, std::int64_t dkvRows, T* datt, const T* dout,
                           const T* att, const AttentionOperands<T>& x, const AttentionShape& s);
    // dtable (NH, bias.count) += the scores' gradient summed per (head, bucket), from datt.
    void relativeBiasBackward(T* dtable, const T* datt, const ScoreBias<T>& bias, const AttentionShape& s);
    // Multi-head latent attention (ModelExecutor's MLA block): the attention operands assembled
    // from the up projections, and their gradients taken apart again. NH heads; q (NH (Nd + Pd), N)
    // from the q up projection, kv (NH (Nd + Vd), N) from kv_b ([k_nope | v] per head), kpe (Pd, N)
    // the shared RoPE key (rotated): qkv (NH (2 (Nd + Pd) + Vd), N) = [q | k | v] with key head h =
    // [k_nope_h | kpe] and value head h = v_h. Copies: bytes only.
    void mlaAssemble(T* qkv, const T* q, const T* kv, const T* kpe, int NH, int Nd, int Pd, int Vd, std::int64_t N);
    // The reverse, from dqkv: dq (NH (Nd + Pd), N), dkv (NH (Nd + Vd), N), and dkpe (Pd, N) = the sum
    // over the heads of their keys' RoPE parts ((NH - 1) Pd adds per token: the broadcast's gradient).
    void mlaDisassemble(T* dq, T* dkv, T* dkpe, const T* dqkv, int NH, int Nd, int Pd, int Vd, std::int64_t N);
    // Rows [srcRow0, srcRow0 + rows) of each of the N columns of src (srcRows, N) into rows
    // [dstRow0, ...) of dst (dstRows, N): multi-token prediction's concatenation [enorm | hnorm]
    // before eh_proj and its split in backward, and eh_proj's output pieces of the tp ranks put
    // together along the hidden dimension (Megatron's gather_from_tensor_model_parallel_region)
    // and taken apart again. A copy: bytes only.
    void copyRows(T* dst, std::int64_t dstRows, std::int64_t dstRow0, const T* src, std::int64_t srcRows,
                  std::int64_t srcRow0, std::int64_t rows, std::int64_t N);
    // x (count values) *= factor: T5's d_model^-0.5 before the tied head (and its gradient's).
    void scale(T* x, std::int64_t count, double factor);

    // out (C, N) = red + bias + residual (bias may be null): the epilogue of a row-split
    // product after its tensor-parallel reduction.
    void biasResidual(T* out, const T* red, const T* bias, const T* residual, std::int64_t C, std::int64_t N);

    // Vocabulary softmax and cross-entropy on one device (logits (V, N) in, probs out, in place).
    void softmaxCrossEntropy(T* logits_to_probs, T* losses, const int* targets, std::int64_t V, std::int64_t N);
    // dlogits = (probs - onehot) * dloss, in place on probs.
    void softmaxCrossEntropyBackward(T* probs, const int* targets, std::int64_t V, std::int64_t N, T dloss);

    // Token (+ position) embedding of N tokens into out (C, N), vocab-parallel: this rank holds
    // vocabulary rows [lo, lo + rows) of wte (C, rows), other tokens read 0 (summed over tp
    // afterwards); wpe (C, T), when the model has one, added at positions[n] if addPositions
    // (one tp rank adds them; every rank is charged the same kernel).
    void embeddingForward(T* out, const T* wte, const T* wpe, bool addPositions, const int* tokens,
                          const int* positions, std::int64_t C, std::int64_t N, int lo, int rows);
    // dwte += and dwpe += (when not null) from dout (C, N), in token order (the same sums on any layout).
    void embeddingBackward(T* dwte, T* dwpe, const T* dout, const int* tokens, const int* positions, std::int64_t C,
                           std::int64_t N, int lo, int rows);
    // BERT-style encoders (OpsEncoder.h). Token types: out (C, N) += wtt (C, types) column
    // ids[n] when `add` (one tp rank adds them, as the positions; every rank is charged);
    // backward dwtt += in token order.
    void tokenTypeForward(T* out, const T* wtt, int types, bool add, const int* ids, std::int64_t C, std::int64_t N);
    void tokenTypeBackward(T* dwtt, int types, const T* dout, const int* ids, std::int64_t C, std::int64_t N);
    // The pooler's tanh on n values in place, and its gradient from the output (dx in place on dy).
    void tanhForward(T* x, std::int64_t n);
    void tanhBackward(T* dx, const T* out, std::int64_t n);
    // dst += src (n values): a ZeRO shard's reduced gradient into the accumulated one.
    void accumulate(T* dst, const T* src, std::int64_t n);
    // count values of x set to 0 (the gradients, between steps). element_bytes: the values' stored
    // width when not a tensor element's (fp32 main gradients in bf16 modes); 0: elementBytes().
    void zero(T* x, std::int64_t count, double element_bytes = 0);
    // The cost of zero() alone, for values a fused pass has already cleared.
    void chargeZero(std::int64_t count, double element_bytes = 0);
    // A device-side gather into a contiguous block (context parallelism's K/V messages): charged bytes.
    void chargeCopy(std::int64_t count);
    // The vocabulary softmax with cross-entropy when its reductions are all-reduced over tp
    // (the model runs the pieces between the collectives): its cost, forward or backward.
    void chargeCrossEntropy(bool backward, std::int64_t V, std::int64_t N);
    // The optimizer's passes: the gradient norm's over `count` owned gradients, AdamW's over
    // `count` parameters (fp32 master weights read and written too when `master`).
    // grad_bytes: the gradients' width (0: elementBytes()).
    void chargeSquaredNorm(std::int64_t count, double grad_bytes = 0);
    void chargeAdamW(std::int64_t count, bool master, double grad_bytes = 0);
    void charge(KernelKind kind, const KernelCost& cost) { dev_.charge(kind, cost, compute_); }
    // bf16 store emulation of x (count values); nothing in fp32. The kernel that wrote x
    // charged the bf16 write: this pass costs the device nothing.
    void round(T* x, std::int64_t count);

private:
    // The activation and its gradient alone (no charge, no rounding).
    void activate(MlpKind kind, T* out, const T* inp, std::int64_t F, std::int64_t N);
    void differentiate(MlpKind kind, T* dinp, const T* inp, const T* dout, std::int64_t F, std::int64_t N);
    void rope(bool backward, T* x, std::int64_t rows, std::int64_t row0, int heads, int hd, const int* positions,
              std::int64_t N, double base);

    EmulatedDevice& dev_;
    DataType compute_;
    double e_;
    double gb_;
};

extern template class Kernels<float>;
extern template class Kernels<double>;

} // namespace shardscope::engine
