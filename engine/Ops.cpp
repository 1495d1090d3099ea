// The fast kernels: Eigen GEMMs and vectorised array expressions, split over
// the device's KernelPool. The loops in OpsReference.cpp compute the same
// things one scalar at a time; tests hold the two equal.
#include "Ops.h"

#include "Bf16.h"
#include "OpsKernels.h"
#include "Random.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <type_traits>

namespace shardscope::engine {

using Eigen::Index;

using detail::blockGemm;
using detail::kChunk;
using detail::kGeluA;
using detail::kGeluC;
using detail::kGemmRowChunk;
using detail::kParallelGemmMacs;
using detail::softmaxColumn;

template <class T>
void gemm(KernelPool& pool, MatRef<T> c, CMatRef<T> a, bool transA, CMatRef<T> b, bool transB, bool accumulate)
{
    const Index M = c.rows(), N = c.cols();
    const Index K = transA ? a.rows() : a.cols();
    if ((transA ? a.cols() : a.rows()) != M || (transB ? b.rows() : b.cols()) != N ||
        (transB ? b.cols() : b.rows()) != K)
        throw std::invalid_argument("gemm: shapes do not match");
    if (M == 0 || N == 0)
        return;
    if (K == 0) {
        if (!accumulate)
            c.setZero();
        return;
    }
    // One block: rows [r0, r0+nr) and columns [c0, c0+nc) of c, with the rows of op(a) and
    // the columns of op(b) it needs.
    auto block = [&](Index r0, Index nr, Index c0, Index nc) {
        for (Index r = r0; r < r0 + nr; r += kGemmRowChunk) {
            // (A last chunk shorter than 48 rows joins the one before: one row would be Eigen's
            // GEMV, a few with tiny K and N its coefficient-based product, each summing in another
            // order than the GEBP kernel that a thread block ending there would meet.)
            const Index rows = r0 + nr - r < kGemmRowChunk + 48 ? r0 + nr - r : kGemmRowChunk;
            blockGemm<T>(c.block(r, c0, rows, nc), transA ? a.block(0, r, K, rows) : a.block(r, 0, rows, K), transA,
                         transB ? b.block(c0, 0, nc, K) : b.block(0, c0, K, nc), transB, accumulate);
            if (rows != kGemmRowChunk)
                break;
        }
    };
    // Split so that every thread count gives the same bits as one thread: each element of c must
    // meet the same Eigen kernel. Row blocks are multiples of 48, three AVX-512 float packets (and
    // so of every smaller ISA's and of double's): Eigen's GEBP takes rows three packets at a time,
    // then two, then one, then singly, each with its own accumulation order, so a block boundary
    // elsewhere changes the kernel rows meet. And the last row or column never runs alone: a
    // one-column (or one-row) block is Eigen's GEMV, which sums in yet another order. (Split over
    // n - 1 units, the part that ends at n - 1 takes the last one too.)
    auto split = [&](Index n, std::int64_t grain, auto&& run) {
        pool.parallelFor(n - 1, grain, [&](std::int64_t b0, std::int64_t b1) { run(b0, (b1 == n - 1 ? n : b1) - b0); });
    };
    if (pool.threads() == 1 || double(M) * double(N) * double(K) < kParallelGemmMacs) {
        block(0, M, 0, N);
    } else if (N >= M) {
        split(N, 8, [&](Index c0, Index nc) { block(0, M, c0, nc); });
    } else {
        split(M, 48, [&](Index r0, Index nr) { block(r0, nr, 0, N); });
    }
}

// ---------------------------------------------------------------- matmul

template <class T>
void matmul_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> inp, CMatRef<T> weight, CVecRef<T> bias,
                    CMatRef<T> residual)
{
    gemm<T>(pool, out, weight, true, inp, false, false);
    const bool hasBias = bias.size() > 0, hasResidual = residual.cols() > 0;
    if (!hasBias && !hasResidual)
        return;
    pool.parallelFor(out.cols(), 8, [&](std::int64_t n0, std::int64_t n1) {
        auto o = out.middleCols(n0, n1 - n0);
        if (hasBias)
            o.colwise() += bias;
        if (hasResidual)
            o += residual.middleCols(n0, n1 - n0);
    });
}

template <class T>
void matmul_backward(KernelPool& pool, MatRef<T> dinp, MatRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout,
                     CMatRef<T> inp, CMatRef<T> weight)
{
    gemm<T>(pool, dinp, weight, false, dout, false, false);   // (IC, OC) * (OC, N)
    gemm<T>(pool, dweight, inp, false, dout, true, true);     // (IC, N) * (N, OC)
    if (dbias.size() == 0)
        return;
    // Rows of dout split over threads; each row summed over N in order.
    pool.parallelFor(dout.rows(), 16, [&](std::int64_t r0, std::int64_t r1) {
        dbias.segment(r0, r1 - r0) += dout.middleRows(r0, r1 - r0).rowwise().sum();
    });
}

// ---------------------------------------------------------------- layernorm

template <class T>
void layernorm_forward(KernelPool& pool, MatRef<T> out, VecRef<T> mean, VecRef<T> rstd, CMatRef<T> inp,
                       CVecRef<T> weight, CVecRef<T> bias, double eps)
{
    const T e = T(eps);
    pool.parallelFor(inp.cols(), 4, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            const auto x = inp.col(n).array();
            const T m = x.mean();
            const T var = (x - m).square().mean();  // biased variance, as PyTorch's LayerNorm
            const T rs = T(1) / std::sqrt(var + e);
            out.col(n).array() = (x - m) * rs * weight.array() + bias.array();
            mean(n) = m;
            rstd(n) = rs;
        }
    });
}

template <class T>
void layernorm_backward(KernelPool& pool, MatRef<T> dinp, VecRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout,
                        CMatRef<T> inp, CVecRef<T> weight, CVecRef<T> mean, CVecRef<T> rstd)
{
    // dinp: with xhat = (x - mean) * rstd and g = weight * dout,
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). Columns split over threads.
    pool.parallelFor(inp.cols(), 4, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            const T m = mean(n), rs = rstd(n);
            const auto xhat = (inp.col(n).array() - m) * rs;
            const auto g = weight.array() * dout.col(n).array();
            const T gMean = g.mean();
            const T gxMean = (g * xhat).mean();
            dinp.col(n).array() += rs * (g - gMean - xhat * gxMean);
        }
    });
    // dweight, dbias: rows split over threads, each summed over N in order.
    pool.parallelFor(inp.rows(), 16, [&](std::int64_t r0, std::int64_t r1) {
        const Index nr = r1 - r0;
        auto dw = dweight.segment(r0, nr);
        auto db = dbias.segment(r0, nr);
        for (Index n = 0; n < inp.cols(); ++n) {
            const auto d = dout.col(n).segment(r0, nr).array();
            dw.array() += d * (inp.col(n).segment(r0, nr).array() - mean(n)) * rstd(n);
            db.array() += d;
        }
    });
}

// ---------------------------------------------------------------- attention

template <class T>
void attention_probs_forward(KernelPool& pool, MatRef<T> att, CMatRef<T> qkv, int B, int T_, int NH)
{
    const Index C = qkv.rows() / 3, hs = C / NH;
    const T scale = T(1) / std::sqrt(T(hs));
    pool.parallelFor(std::int64_t(B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH;
            const auto q = qkv.block(h * hs, b * T_, hs, T_);
            const auto k = qkv.block(C + h * hs, b * T_, hs, T_);
            auto S = att.middleCols(i * T_, T_);  // (T, T): S(t2, t1) for key t2, query t1
            blockGemm<T>(S, k, true, q, false, false);
            for (Index t1 = 0; t1 < T_; ++t1) {
                softmaxColumn(S.col(t1).head(t1 + 1), scale);  // keys t2 <= t1
                S.col(t1).tail(T_ - t1 - 1).setZero();
            }
        }
    });
}

template <class T>
void attention_values_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> att, CMatRef<T> qkv, int B, int T_,
                              int NH)
{
    const Index C = qkv.rows() / 3, hs = C / NH;
    pool.parallelFor(std::int64_t(B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH;
            const auto v = qkv.block(2 * C + h * hs, b * T_, hs, T_);
            blockGemm<T>(out.block(h * hs, b * T_, hs, T_), v, false, att.middleCols(i * T_, T_), false, false);
        }
    });
}

template <class T>
void attention_backward(KernelPool& pool, MatRef<T> dqkv, MatRef<T> datt, CMatRef<T> dout, CMatRef<T> att,
                        CMatRef<T> qkv, int B, int T_, int NH)
{
    const Index C = qkv.rows() / 3, hs = C / NH;
    const T scale = T(1) / std::sqrt(T(hs));
    pool.parallelFor(std::int64_t(B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH;
            const auto q = qkv.block(h * hs, b * T_, hs, T_);
            const auto k = qkv.block(C + h * hs, b * T_, hs, T_);
            const auto v = qkv.block(2 * C + h * hs, b * T_, hs, T_);
            const auto dy = dout.block(h * hs, b * T_, hs, T_);
            const auto S = att.middleCols(i * T_, T_);
            auto dS = datt.middleCols(i * T_, T_);
            blockGemm<T>(dqkv.block(2 * C + h * hs, b * T_, hs, T_), dy, false, S, true, false);  // dV (hs, T)
            blockGemm<T>(dS, v, true, dy, false, false);  // d probs (T, T)
            // Softmax backward per query column, then the 1/sqrt(hs) of the scores.
            for (Index t1 = 0; t1 < T_; ++t1) {
                const auto p = S.col(t1).head(t1 + 1).array();
                auto d = dS.col(t1).head(t1 + 1);
                const T dot = (p * d.array()).sum();
                d.array() = p * (d.array() - dot) * scale;
                dS.col(t1).tail(T_ - t1 - 1).setZero();
            }
            blockGemm<T>(dqkv.block(h * hs, b * T_, hs, T_), k, false, dS, false, false);      // dQ (hs, T)
            blockGemm<T>(dqkv.block(C + h * hs, b * T_, hs, T_), q, false, dS, true, false);  // dK (hs, T)
        }
    });
}

// ---------------------------------------------------------------- gelu

template <class T>
void gelu_forward(KernelPool& pool, VecRef<T> out, CVecRef<T> inp)
{
    pool.parallelFor(inp.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
        const auto x = inp.segment(i0, i1 - i0).array();
        out.segment(i0, i1 - i0).array() = T(0.5) * x * (T(1) + (T(kGeluC) * (x + T(kGeluA) * x * x * x)).tanh());
    });
}

template <class T>
void gelu_backward(KernelPool& pool, VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout)
{
    pool.parallelFor(inp.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
        Eigen::Array<T, kChunk, 1> th;  // tanh(u) of one chunk, on the stack
        for (Index c0 = i0; c0 < i1; c0 += kChunk) {
            const Index n = std::min<Index>(kChunk, i1 - c0);
            const auto x = inp.segment(c0, n).array();
            auto t = th.head(n);
            t = (T(kGeluC) * (x + T(kGeluA) * x * x * x)).tanh();
            const auto grad = T(0.5) * (T(1) + t) +
                              T(0.5) * x * (T(1) - t * t) * T(kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
            dinp.segment(c0, n).array() = grad * dout.segment(c0, n).array();
        }
    });
}

// ---------------------------------------------------------------- encoder

template <class T>
void encoder_forward(MatRef<T> out, const TokenRef& tokens, CMatRef<T> wte, CMatRef<T> wpe, int B, int T_)
{
    for (Index b = 0; b < B; ++b)
        for (Index t = 0; t < T_; ++t) {
            const Index n = b * T_ + t;
            assert(tokens(n) >= 0 && tokens(n) < wte.cols());
            out.col(n) = wte.col(tokens(n)) + wpe.col(t);
        }
}

template <class T>
void encoder_backward(MatRef<T> dwte, MatRef<T> dwpe, CMatRef<T> dout, const TokenRef& tokens, int B, int T_)
{
    for (Index b = 0; b < B; ++b)
        for (Index t = 0; t < T_; ++t) {
            const Index n = b * T_ + t;
            dwte.col(tokens(n)) += dout.col(n);
            dwpe.col(t) += dout.col(n);
        }
}

// ---------------------------------------------------------------- softmax + cross-entropy

template <class T>
void softmax_crossentropy_forward(KernelPool& pool, MatRef<T> logits_to_probs, VecRef<T> losses,
                                  const TokenRef& targets)
{
    pool.parallelFor(logits_to_probs.cols(), 1, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            auto col = logits_to_probs.col(n);
            const bool ignored = targets(n) < 0;  // PyTorch's ignore_index: no loss, no gradient
            const T target = ignored ? T(0) : col(targets(n));
            const auto [mx, sum] = softmaxColumn(col, T(1));
            // -log p[target] from the logits, exact even where p underflows.
            losses(n) = ignored ? T(0) : std::log(sum) - (target - mx);
        }
    });
}

template <class T>
void crossentropy_softmax_backward(KernelPool& pool, MatRef<T> dlogits, CMatRef<T> probs, const TokenRef& targets,
                                   T dloss)
{
    pool.parallelFor(probs.cols(), 1, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            if (targets(n) < 0) {
                dlogits.col(n).setZero();
                continue;
            }
            dlogits.col(n) = probs.col(n) * dloss;
            dlogits(targets(n), n) -= dloss;
        }
    });
}

// ---------------------------------------------------------------- optimizer

template <class T>
void adamw_update(KernelPool& pool, T* params, const T* grads, T* m, T* v, T* master, std::int64_t count,
                  const AdamWSettings& s, bool decay, int step, double grad_scale, WeightRounding rounding,
                  std::uint64_t seed, std::uint64_t index_offset, T* clear_grads)
{
    if (clear_grads && clear_grads != grads)
        throw std::invalid_argument("adamw_update: clear_grads must be the gradients' own storage");
    if (step < 1)
        throw std::invalid_argument("adamw_update: step counts from 1");
    const T b1 = T(s.beta1), b2 = T(s.beta2);
    const T c1 = T(1.0 / (1.0 - std::pow(s.beta1, step)));  // bias corrections by optimizer step
    const T c2 = T(1.0 / (1.0 - std::pow(s.beta2, step)));
    const T lr = T(s.lr), eps = T(s.eps), wd = decay ? T(s.weight_decay) : T(0), gs = T(grad_scale);
    if (!std::is_same_v<T, float> && (master || rounding != WeightRounding::None))
        throw std::invalid_argument("adamw_update: bf16 weights need float");

    pool.parallelFor(count, 4096, [&](std::int64_t i0, std::int64_t i1) {
        if (!master && rounding == WeightRounding::None) {
            // Plain fp32/fp64: chunks small enough to stay in L1 across the three passes.
            for (std::int64_t c0 = i0; c0 < i1; c0 += kChunk) {
                const Index n = std::min<Index>(kChunk, i1 - c0);
                Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> mm(m + c0, n), vv(v + c0, n), p(params + c0, n);
                Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> g(grads + c0, n);
                mm = b1 * mm + (T(1) - b1) * gs * g;
                vv = b2 * vv + (T(1) - b2) * (gs * g).square();
                p -= lr * ((mm * c1) / ((vv * c2).sqrt() + eps) + wd * p);
                if (clear_grads)
                    std::fill_n(clear_grads + c0, n, T(0));  // the chunk is still in L1
            }
            return;
        }
        if constexpr (std::is_same_v<T, float>) {
            for (std::int64_t i = i0; i < i1; ++i) {
                const float g = gs * grads[i];
                m[i] = b1 * m[i] + (1.0f - b1) * g;
                v[i] = b2 * v[i] + (1.0f - b2) * g * g;
                float w = master ? master[i] : params[i];
                w -= lr * ((m[i] * c1) / (std::sqrt(v[i] * c2) + eps) + wd * w);
                if (master) {
                    master[i] = w;
                    params[i] = roundToBf16NearestEven(w);
                } else if (rounding == WeightRounding::Bf16NearestEven) {
                    params[i] = roundToBf16NearestEven(w);
                } else if (rounding == WeightRounding::Bf16Stochastic) {
                    const auto r = std::uint16_t(hash64(seed, std::uint64_t(step), index_offset + std::uint64_t(i)));
                    params[i] = roundToBf16Stochastic(w, r);
                } else {
                    params[i] = w;
                }
                if (clear_grads)
                    clear_grads[i] = 0.0f;
            }
        }
    });
}

template <class T>
double sum_of_squares(KernelPool& pool, const T* x, std::int64_t count)
{
    // 64 fixed slices, each summed in 4096-element chunks in order; then the
    // slices in order. Independent of the thread count by construction.
    constexpr int kSlices = 64;
    constexpr std::int64_t kSumChunk = 4096;
    std::array<double, kSlices> partial{};
    pool.parallelFor(kSlices, 1, [&](std::int64_t s0, std::int64_t s1) {
        for (std::int64_t s = s0; s < s1; ++s) {
            const std::int64_t begin = count * s / kSlices, end = count * (s + 1) / kSlices;
            double acc = 0;
            for (std::int64_t c0 = begin; c0 < end; c0 += kSumChunk) {
                const std::int64_t n = std::min(kSumChunk, end - c0);
                acc += double(Eigen::Map<const Vec<T>>(x + c0, n).squaredNorm());
            }
            partial[size_t(s)] = acc;
        }
    });
    double total = 0;
    for (double p : partial)
        total += p;
    return total;
}

void round_to_bf16(KernelPool& pool, float* x, std::int64_t count)
{
    pool.parallelFor(count, 4096, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i)
            x[i] = roundToBf16NearestEven(x[i]);
    });
}

// ---------------------------------------------------------------- instantiations

#define SHARDSCOPE_ENGINE_OPS(T)                                                                                  \
    template void gemm<T>(KernelPool&, MatRef<T>, CMatRef<T>, bool, CMatRef<T>, bool, bool);                      \
    template void matmul_forward<T>(KernelPool&, MatRef<T>, CMatRef<T>, CMatRef<T>, CVecRef<T>, CMatRef<T>);      \
    template void matmul_backward<T>(KernelPool&, MatRef<T>, MatRef<T>, VecRef<T>, CMatRef<T>, CMatRef<T>,        \
                                     CMatRef<T>);                                                                 \
    template void layernorm_forward<T>(KernelPool&, MatRef<T>, VecRef<T>, VecRef<T>, CMatRef<T>, CVecRef<T>,      \
                                       CVecRef<T>, double);                                                       \
    template void layernorm_backward<T>(KernelPool&, MatRef<T>, VecRef<T>, VecRef<T>, CMatRef<T>, CMatRef<T>,     \
                                        CVecRef<T>, CVecRef<T>, CVecRef<T>);                                      \
    template void attention_probs_forward<T>(KernelPool&, MatRef<T>, CMatRef<T>, int, int, int);                  \
    template void attention_values_forward<T>(KernelPool&, MatRef<T>, CMatRef<T>, CMatRef<T>, int, int, int);     \
    template void attention_backward<T>(KernelPool&, MatRef<T>, MatRef<T>, CMatRef<T>, CMatRef<T>, CMatRef<T>,    \
                                        int, int, int);                                                           \
    template void gelu_forward<T>(KernelPool&, VecRef<T>, CVecRef<T>);                                            \
    template void gelu_backward<T>(KernelPool&, VecRef<T>, CVecRef<T>, CVecRef<T>);                               \
    template void encoder_forward<T>(MatRef<T>, const TokenRef&, CMatRef<T>, CMatRef<T>, int, int);               \
    template void encoder_backward<T>(MatRef<T>, MatRef<T>, CMatRef<T>, const TokenRef&, int, int);               \
    template void softmax_crossentropy_forward<T>(KernelPool&, MatRef<T>, VecRef<T>, const TokenRef&);            \
    template void crossentropy_softmax_backward<T>(KernelPool&, MatRef<T>, CMatRef<T>, const TokenRef&, T);       \
    template void adamw_update<T>(KernelPool&, T*, const T*, T*, T*, T*, std::int64_t, const AdamWSettings&,      \
                                  bool, int, double, WeightRounding, std::uint64_t, std::uint64_t, T*);          \
    template double sum_of_squares<T>(KernelPool&, const T*, std::int64_t);

SHARDSCOPE_ENGINE_OPS(float)
SHARDSCOPE_ENGINE_OPS(double)

} // namespace shardscope::engine
