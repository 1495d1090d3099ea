// The GPT's operations, forward and backward, written out by hand (after
// llm.c's train_gpt2.c, in Eigen). Each op is a pair
//   xxx_forward(out, cache..., inp, weights...)
//   xxx_backward(dinp, dweight, dbias, dout, cache..., inp, weights...)
// Gradients of weights and biases are ACCUMULATED (+=) into buffers zeroed once
// per step, so micro-batches add up. Gradients of inputs are OVERWRITTEN (=),
// except layernorm_backward, whose input is the residual stream: it adds to it.
//
// What this does not do: allocate (every buffer comes from the caller), know
// about devices, precision or accounting (the model does that), or choose shapes
// (a tensor-parallel shard is just a smaller C, OC or NH).
//
// Dimension legend: B batch, T sequence, N = B*T tokens, C channels (hidden),
// OC output channels, V vocabulary, NH heads, hs = C / NH head size.
// Layout: Eigen's default column-major. Activations are (C, N) with token
// n = b*T + t in column n; weights are (in, out), so out = W^T * in.
// Attention probabilities are (T, T*B*NH): the (T, T) block of head h of
// sequence b starts at column (b*NH + h)*T and holds att(t2, t1) = weight of
// key t2 for query t1 (zero above the diagonal: t2 > t1).
//
// Every op is templated on the scalar (float for training, double for the
// finite-difference tests) and explicitly instantiated for both in Ops.cpp.
// Parallel parts split the output into disjoint blocks over the KernelPool.
#pragma once

#include "AdamW.h"
#include "KernelPool.h"

#include <Eigen/Core>

#include <cstdint>

namespace shardscope::engine {

template <class T> using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T> using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T> using MatRef = Eigen::Ref<Mat<T>>;
template <class T> using CMatRef = Eigen::Ref<const Mat<T>>;
template <class T> using VecRef = Eigen::Ref<Vec<T>>;
template <class T> using CVecRef = Eigen::Ref<const Vec<T>>;
using TokenRef = Eigen::Ref<const Eigen::VectorXi>;  // token ids, length N

// c (M, N) = op(a) * op(b), or += when `accumulate`; op is a transpose when the flag says so.
// Split over the larger of M and N across the pool; each block is one Eigen GEMM.
template <class T>
void gemm(KernelPool& pool, MatRef<T> c, CMatRef<T> a, bool transA, CMatRef<T> b, bool transB, bool accumulate);

// out (OC, N) = weight^T (OC, IC) * inp (IC, N) + bias (OC) [+ residual (OC, N)].
// bias may be empty (size 0); residual may be empty (0 columns) or alias nothing else.
template <class T>
void matmul_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> inp, CMatRef<T> weight, CVecRef<T> bias,
                    CMatRef<T> residual);
// dinp (IC, N) = weight * dout (overwritten); dweight (IC, OC) += inp * dout^T;
// dbias (OC) += row sums of dout (skipped when empty). The residual's gradient is dout itself.
template <class T>
void matmul_backward(KernelPool& pool, MatRef<T> dinp, MatRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout,
                     CMatRef<T> inp, CMatRef<T> weight);

// out (C, N) = (inp - mean) * rstd * weight + bias per column; caches mean, rstd (N),
// rstd = 1 / sqrt(var + eps) (GPT-2's 1e-5 by default; some models use 1e-6 or 1e-12).
inline constexpr double kLayerNormEps = 1e-5;
template <class T>
void layernorm_forward(KernelPool& pool, MatRef<T> out, VecRef<T> mean, VecRef<T> rstd, CMatRef<T> inp,
                       CVecRef<T> weight, CVecRef<T> bias, double eps = kLayerNormEps);
// dinp (C, N) += ..., dweight (C) +=, dbias (C) +=.
template <class T>
void layernorm_backward(KernelPool& pool, MatRef<T> dinp, VecRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout,
                        CMatRef<T> inp, CVecRef<T> weight, CVecRef<T> mean, CVecRef<T> rstd);

// Causal multi-head self-attention in two halves, so that selective recomputation
// can redo the first alone. qkv (3C, N): rows [0,C) queries, [C,2C) keys, [2C,3C)
// values, head h at rows h*hs within each.
// att (T, T*B*NH) = causal softmax(K^T Q / sqrt(hs)) per (b, h).
template <class T>
void attention_probs_forward(KernelPool& pool, MatRef<T> att, CMatRef<T> qkv, int B, int T_, int NH);
// out (C, N): head h's rows [h*hs, (h+1)*hs) = V_h * att_h.
template <class T>
void attention_values_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> att, CMatRef<T> qkv, int B, int T_,
                              int NH);
// dqkv (3C, N) overwritten; datt (T, T*B*NH) is scratch (overwritten).
template <class T>
void attention_backward(KernelPool& pool, MatRef<T> dqkv, MatRef<T> datt, CMatRef<T> dout, CMatRef<T> att,
                        CMatRef<T> qkv, int B, int T_, int NH);

// GeLU, tanh approximation (Hendrycks & Gimpel 2016, as in GPT-2), elementwise on flat arrays.
template <class T>
void gelu_forward(KernelPool& pool, VecRef<T> out, CVecRef<T> inp);
// dinp = gelu'(inp) * dout (overwritten; dinp may alias dout).
template <class T>
void gelu_backward(KernelPool& pool, VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout);

// out (C, N) column b*T+t = wte (C, V) column tokens[b*T+t] + wpe (C, T) column t.
template <class T>
void encoder_forward(MatRef<T> out, const TokenRef& tokens, CMatRef<T> wte, CMatRef<T> wpe, int B, int T_);
// dwte +=, dwpe += (sequential: scatter-adds into shared columns, in token order).
template <class T>
void encoder_backward(MatRef<T> dwte, MatRef<T> dwpe, CMatRef<T> dout, const TokenRef& tokens, int B, int T_);

// probs (V, N) = softmax of logits per column, IN PLACE (logits in, probs out);
// losses (N) = -log probs[target]; a negative target is ignored (loss 0 and, backward, a zero
// column: PyTorch's ignore_index, the masked-LM objective's unmasked positions).
template <class T>
void softmax_crossentropy_forward(KernelPool& pool, MatRef<T> logits_to_probs, VecRef<T> losses,
                                  const TokenRef& targets);
// dlogits (V, N) = (probs - onehot(target)) * dloss, overwritten; dlogits may alias probs.
template <class T>
void crossentropy_softmax_backward(KernelPool& pool, MatRef<T> dlogits, CMatRef<T> probs, const TokenRef& targets,
                                   T dloss);

// AdamW (Loshchilov & Hutter 2019) on one parameter tensor of `count` values,
// step `step` >= 1 (bias correction 1 - beta^step uses the optimizer step, not a
// per-tensor counter). grad_scale multiplies the gradient (global-norm clipping).
// master: fp32 master weights (bf16-mixed) or null; when set, master is updated
// and params = RNE(master). Otherwise params are updated and rounded by `rounding`;
// stochastic rounding draws hash64(seed, step, index_offset + i).
// clear_grads: the gradients' own storage, or null; when set, each gradient is zeroed as soon
// as it is read, so the next step accumulates from zero without another pass over memory
// (on one device the update is memory-bound: a separate clearing pass costs a quarter of it).
template <class T>
void adamw_update(KernelPool& pool, T* params, const T* grads, T* m, T* v, T* master, std::int64_t count,
                  const AdamWSettings& s, bool decay, int step, double grad_scale, WeightRounding rounding,
                  std::uint64_t seed, std::uint64_t index_offset, T* clear_grads = nullptr);

// Sum of squares, in double, summed in fixed 4096-element chunks whatever the
// thread count, so the global norm is bitwise reproducible.
template <class T>
double sum_of_squares(KernelPool& pool, const T* x, std::int64_t count);

// x = RNE-to-bf16(x) elementwise (bf16 storage emulation; float only).
void round_to_bf16(KernelPool& pool, float* x, std::int64_t count);

} // namespace shardscope::engine
