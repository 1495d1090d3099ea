// The fast kernels of OpsBlocks.h: vectorised array expressions and Eigen GEMM blocks
// (through OpsKernels.h, so a portable build multiplies at the CPU's widest level), split
// over the device's KernelPool into disjoint blocks of the output. The loops of
// OpsBlocksReference.cpp compute the same things one scalar at a time; tests hold the two
// equal. No allocation: intermediate values live in fixed-size chunks on the stack.
//
// Dimension legend: B sequences, Tq / Tk query / key tokens per sequence, N = B*T tokens,
// C channels, F the gated MLP's hidden size (this shard's), NH query heads, NKV key/value
// heads (NH % NKV == 0, group size R = NH / NKV), hd head size.
//
// Every split depends only on the shapes and fixed grains, and each block is computed the
// same way whoever runs it, so results are bitwise independent of the thread count.
#include "OpsBlocks.h"

#include "OpsKernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace shardscope::engine {

using Eigen::Index;

using detail::blockGemm;
using detail::kChunk;
using detail::kGeluA;
using detail::kGeluC;
using detail::softmaxColumn;

namespace {

// Key columns per block of attention_backward's dk/dv pass: fixed, so that the products
// (and their summation order) do not depend on the thread count.
constexpr Index kKeyBlock = 64;

void checkAttentionShape(const AttentionShape& s, const char* what)
{
    if (s.B < 1 || s.Tq < 1 || s.Tk < 1 || s.NH < 1 || s.NKV < 1 || s.hd < 1 || s.vd < 0)
        throw std::invalid_argument(std::string(what) + ": sizes must be positive");
    if (s.NH % s.NKV != 0)
        throw std::invalid_argument(std::string(what) + ": NH must be a multiple of NKV");
    if (s.causal && s.Tq != s.Tk)
        throw std::invalid_argument(std::string(what) + ": causal attention needs Tq == Tk");
    if (s.window < 0 || (s.window > 0 && !s.causal))
        throw std::invalid_argument(std::string(what) +
                                    ": a sliding window needs causal attention and a positive size");
}

template <class M>
void checkShape(const M& m, Index rows, Index cols, const char* what, const char* name)
{
    if (m.rows() != rows || m.cols() != cols)
        throw std::invalid_argument(std::string(what) + ": " + name + " has the wrong shape");
}

} // namespace

// ---------------------------------------------------------------- RMSNorm

template <class T>
void rmsnorm_forward(KernelPool& pool, MatRef<T> out, VecRef<T> rstd, CMatRef<T> inp, CVecRef<T> weight, double eps)
{
    const Index C = inp.rows(), N = inp.cols();
    checkShape(out, C, N, "rmsnorm_forward", "out");
    if (rstd.size() != N || weight.size() != C)
        throw std::invalid_argument("rmsnorm_forward: rstd or weight has the wrong size");
    const T e = T(eps);
    pool.parallelFor(N, 4, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            const auto x = inp.col(n).array();
            const T rs = T(1) / std::sqrt(x.square().mean() + e);
            out.col(n).array() = x * rs * weight.array();
            rstd(n) = rs;
        }
    });
}

template <class T>
void rmsnorm_backward(KernelPool& pool, MatRef<T> dinp, VecRef<T> dweight, CMatRef<T> dout, CMatRef<T> inp,
                      CVecRef<T> weight, CVecRef<T> rstd)
{
    const Index C = inp.rows(), N = inp.cols();
    checkShape(dinp, C, N, "rmsnorm_backward", "dinp");
    checkShape(dout, C, N, "rmsnorm_backward", "dout");
    if (rstd.size() != N || weight.size() != C || dweight.size() != C)
        throw std::invalid_argument("rmsnorm_backward: rstd, weight or dweight has the wrong size");
    // dinp: with xhat = x * rstd and g = weight * dout, dx = rstd * (g - xhat * mean(g * xhat)).
    pool.parallelFor(N, 4, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            const T rs = rstd(n);
            const auto xhat = inp.col(n).array() * rs;
            const auto g = weight.array() * dout.col(n).array();
            const T gxMean = (g * xhat).mean();
            dinp.col(n).array() += rs * (g - xhat * gxMean);
        }
    });
    // dweight: rows split over threads, each summed over N in order.
    pool.parallelFor(C, 16, [&](std::int64_t r0, std::int64_t r1) {
        const Index nr = r1 - r0;
        auto dw = dweight.segment(r0, nr);
        for (Index n = 0; n < N; ++n)
            dw.array() += dout.col(n).segment(r0, nr).array() * inp.col(n).segment(r0, nr).array() * rstd(n);
    });
}

// ---------------------------------------------------------------- activations

template <class T>
void relu_forward(KernelPool& pool, VecRef<T> out, CVecRef<T> inp)
{
    if (out.size() != inp.size())
        throw std::invalid_argument("relu_forward: out and inp differ in size");
    pool.parallelFor(inp.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
        out.segment(i0, i1 - i0) = inp.segment(i0, i1 - i0).cwiseMax(T(0));
    });
}

template <class T>
void relu_backward(KernelPool& pool, VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout)
{
    if (dinp.size() != inp.size() || dout.size() != inp.size())
        throw std::invalid_argument("relu_backward: sizes differ");
    pool.parallelFor(inp.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
        const Index n = i1 - i0;
        // Elementwise, so dinp may alias dout.
        dinp.segment(i0, n).array() = (inp.segment(i0, n).array() > T(0)).select(dout.segment(i0, n).array(), T(0));
    });
}

template <class T>
void gated_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> inp, GateKind kind)
{
    const Index F = out.rows(), N = out.cols();
    checkShape(inp, 2 * F, N, "gated_forward", "inp");
    pool.parallelFor(N, 4, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            const auto g = inp.col(n).head(F).array();
            const auto u = inp.col(n).tail(F).array();
            if (kind == GateKind::SiLU)
                out.col(n).array() = g / (T(1) + (-g).exp()) * u;
            else
                out.col(n).array() = T(0.5) * g * (T(1) + (T(kGeluC) * (g + T(kGeluA) * g * g * g)).tanh()) * u;
        }
    });
}

template <class T>
void gated_backward(KernelPool& pool, MatRef<T> dinp, CMatRef<T> inp, CMatRef<T> dout, GateKind kind)
{
    const Index F = dout.rows(), N = dout.cols();
    checkShape(inp, 2 * F, N, "gated_backward", "inp");
    checkShape(dinp, 2 * F, N, "gated_backward", "dinp");
    pool.parallelFor(N, 4, [&](std::int64_t n0, std::int64_t n1) {
        Eigen::Array<T, kChunk, 1> sg;  // sigmoid(g) or tanh(u) of one chunk, on the stack
        for (Index n = n0; n < n1; ++n)
            for (Index c0 = 0; c0 < F; c0 += kChunk) {
                const Index m = std::min<Index>(kChunk, F - c0);
                const auto g = inp.col(n).segment(c0, m).array();
                const auto u = inp.col(n).segment(F + c0, m).array();
                const auto dy = dout.col(n).segment(c0, m).array();
                auto dg = dinp.col(n).segment(c0, m).array();
                auto du = dinp.col(n).segment(F + c0, m).array();
                auto s = sg.head(m);
                if (kind == GateKind::SiLU) {
                    // silu = g * s, silu' = s * (1 + g * (1 - s)), s = sigmoid(g).
                    s = T(1) / (T(1) + (-g).exp());
                    du = g * s * dy;
                    dg = s * (T(1) + g * (T(1) - s)) * u * dy;
                } else {
                    s = (T(kGeluC) * (g + T(kGeluA) * g * g * g)).tanh();
                    du = T(0.5) * g * (T(1) + s) * dy;
                    dg = (T(0.5) * (T(1) + s) +
                          T(0.5) * g * (T(1) - s * s) * T(kGeluC) * (T(1) + T(3 * kGeluA) * g * g)) *
                         u * dy;
                }
            }
    });
}

template <class T>
void scale_columns(KernelPool& pool, MatRef<T> x, const T* w)
{
    pool.parallelFor(x.cols(), 8, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n)
            x.col(n) *= w[n];
    });
}

template <class T>
void activation_column_dots(KernelPool& pool, T* dw, CMatRef<T> inp, CMatRef<T> dout, bool gated, GateKind gate,
                            bool relu)
{
    const Index F = dout.rows(), N = dout.cols();
    checkShape(inp, gated ? 2 * F : F, N, "activation_column_dots", "inp");
    pool.parallelFor(N, 4, [&](std::int64_t n0, std::int64_t n1) {
        Eigen::Array<T, kChunk, 1> a;  // the activation of one chunk, on the stack
        for (Index n = n0; n < n1; ++n) {
            T dot = 0;
            for (Index c0 = 0; c0 < F; c0 += kChunk) {
                const Index m = std::min<Index>(kChunk, F - c0);
                const auto x = inp.col(n).segment(c0, m).array();
                auto act = a.head(m);
                if (relu)
                    act = x.max(T(0));
                else if (gated && gate == GateKind::SiLU)
                    act = x / (T(1) + (-x).exp());
                else
                    act = T(0.5) * x * (T(1) + (T(kGeluC) * (x + T(kGeluA) * x * x * x)).tanh());
                if (gated)
                    act *= inp.col(n).segment(F + c0, m).array();
                const auto dy = dout.col(n).segment(c0, m).array();
                for (Index i = 0; i < m; ++i)
                    dot += act[i] * dy[i];
            }
            dw[n] = dot;
        }
    });
}

// ---------------------------------------------------------------- rotary positions

namespace {

// Rotates every (i, i + hd/2) pair of every head of every column by sign * positions[n] *
// base^(-2i/hd). The angle, its cosine and sine are computed in double once per (token, i)
// and shared by the heads.
template <class T>
void rotate(KernelPool& pool, RowsRef<T> x, const int* positions, int heads, int hd, double base, double sign,
            const char* what)
{
    if (heads < 1 || hd < 2 || hd % 2 != 0)
        throw std::invalid_argument(std::string(what) + ": heads must be positive and hd even");
    if (x.rows() != Index(heads) * hd)
        throw std::invalid_argument(std::string(what) + ": x must have heads * hd rows");
    if (x.cols() > 0 && !positions)
        throw std::invalid_argument(std::string(what) + ": no positions");
    const Index half = hd / 2;
    // The frequencies base^(-2i/hd), the same for every token: once per call (std::pow was a
    // third of a small model's rotation), on the stack for heads of up to 2 kMaxHalf values.
    constexpr Index kMaxHalf = 128;
    std::array<double, kMaxHalf> frequencies;
    auto frequency = [&](Index i) { return std::pow(base, -2.0 * double(i) / double(hd)); };
    for (Index i = 0; i < std::min(half, kMaxHalf); ++i)
        frequencies[size_t(i)] = frequency(i);
    pool.parallelFor(x.cols(), 4, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n) {
            const double p = double(positions[n]);
            T* col = x.col(n).data();
            for (Index i = 0; i < half; ++i) {
                const double angle = sign * p * (i < kMaxHalf ? frequencies[size_t(i)] : frequency(i));
                const T c = T(std::cos(angle)), s = T(std::sin(angle));
                for (Index h = 0; h < heads; ++h) {
                    T* a = col + h * hd + i;
                    T* b = a + half;
                    const T x1 = *a, x2 = *b;
                    *a = x1 * c - x2 * s;
                    *b = x2 * c + x1 * s;
                }
            }
        }
    });
}

} // namespace

template <class T>
void rope_forward(KernelPool& pool, RowsRef<T> x, const int* positions, int heads, int hd, double base)
{
    rotate<T>(pool, x, positions, heads, hd, base, 1.0, "rope_forward");
}

template <class T>
void rope_backward(KernelPool& pool, RowsRef<T> dx, const int* positions, int heads, int hd, double base)
{
    // The rotation is orthogonal: its transpose, the gradient's map, is the opposite rotation.
    rotate<T>(pool, dx, positions, heads, hd, base, -1.0, "rope_backward");
}

// ---------------------------------------------------------------- grouped-query attention

template <class T>
void attention_probs_forward(KernelPool& pool, MatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, const AttentionShape& s,
                             const ScoreBias<T>& bias)
{
    checkAttentionShape(s, "attention_probs_forward");
    const Index hd = s.hd, Tq = s.Tq, Tk = s.Tk, NH = s.NH, R = s.NH / s.NKV;
    checkShape(att, Tk, s.probColumns(), "attention_probs_forward", "att");
    checkShape(q, NH * hd, Index(s.B) * Tq, "attention_probs_forward", "q");
    checkShape(k, Index(s.NKV) * hd, Index(s.B) * Tk, "attention_probs_forward", "k");
    const T scale = T(s.scoreScale());
    pool.parallelFor(std::int64_t(s.B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH, g = h / R;
            const auto qh = q.block(h * hd, b * Tq, hd, Tq);
            const auto kg = k.block(g * hd, b * Tk, hd, Tk);
            auto S = att.middleCols(i * Tq, Tq);  // (Tk, Tq): S(t2, t1) for key t2, query t1
            blockGemm<T>(S, kg, true, qh, false, false);
            if (bias.table) {  // added before the softmax scales the column: divided by the scale here
                const T* row = bias.table + h * bias.count;
                for (Index t1 = 0; t1 < Tq; ++t1)
                    for (Index t2 = 0; t2 < Tk; ++t2)
                        S(t2, t1) += row[bias.buckets[t1 * Tk + t2]] / scale;
            }
            for (Index t1 = 0; t1 < Tq; ++t1) {
                if (s.causal) {
                    const Index lo = s.window > 0 ? std::max<Index>(0, t1 - s.window + 1) : 0;
                    softmaxColumn(S.col(t1).segment(lo, t1 + 1 - lo), scale);  // keys lo <= t2 <= t1
                    S.col(t1).head(lo).setZero();
                    S.col(t1).tail(Tk - t1 - 1).setZero();
                } else {
                    softmaxColumn(S.col(t1), scale);
                }
            }
        }
    });
}

namespace {

// out = v_g * att_h per (b, h), for the whole attention and for one ring block alike.
template <class T>
void valuesForward(KernelPool& pool, MatRef<T> out, CRowsRef<T> att, CRowsRef<T> v, const AttentionShape& s,
                   const char* op)
{
    const Index vd = s.valueDim(), Tq = s.Tq, Tk = s.Tk, NH = s.NH, R = s.NH / s.NKV;
    checkShape(out, NH * vd, Index(s.B) * Tq, op, "out");
    checkShape(att, Tk, s.probColumns(), op, "att");
    checkShape(v, Index(s.NKV) * vd, Index(s.B) * Tk, op, "v");
    pool.parallelFor(std::int64_t(s.B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH, g = h / R;
            blockGemm<T>(out.block(h * vd, b * Tq, vd, Tq), v.block(g * vd, b * Tk, vd, Tk), false,
                         att.middleCols(i * Tq, Tq), false, false);
        }
    });
}

} // namespace

template <class T>
void attention_values_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> att, CRowsRef<T> v,
                              const AttentionShape& s)
{
    checkAttentionShape(s, "attention_values_forward");
    valuesForward<T>(pool, out, att, v, s, "attention_values_forward");
}

namespace {

// The attention backward's two passes, shared by the whole attention and a ring block:
// pass 1 per (b, h): d probs = V_g^T dout into datt, softmaxBack(dS, P, column index) turns it
// into the scores' gradient in place, then dq (=, or += when `accumulate`) = k_g dS; pass 2 per
// (b, g, block of kKeyBlock keys): dk and dv over the group's R query heads in order (the first
// overwriting unless `accumulate`). Every split depends on shapes only: bitwise the same on any
// thread count.
template <class T, class SoftmaxBack>
void backwardPasses(KernelPool& pool, RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt, CMatRef<T> dout,
                    CRowsRef<T> att, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v, const AttentionShape& s,
                    const char* op, bool accumulate, SoftmaxBack&& softmaxBack)
{
    const Index hd = s.hd, vd = s.valueDim(), Tq = s.Tq, Tk = s.Tk, NH = s.NH, NKV = s.NKV, R = s.NH / s.NKV;
    const Index Nq = Index(s.B) * Tq, Nk = Index(s.B) * Tk;
    checkShape(dq, NH * hd, Nq, op, "dq");
    checkShape(q, NH * hd, Nq, op, "q");
    checkShape(dout, NH * vd, Nq, op, "dout");
    checkShape(dk, NKV * hd, Nk, op, "dk");
    checkShape(dv, NKV * vd, Nk, op, "dv");
    checkShape(k, NKV * hd, Nk, op, "k");
    checkShape(v, NKV * vd, Nk, op, "v");
    checkShape(att, Tk, s.probColumns(), op, "att");
    checkShape(datt, Tk, s.probColumns(), op, "datt");

    pool.parallelFor(std::int64_t(s.B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH, g = h / R;
            const auto kg = k.block(g * hd, b * Tk, hd, Tk);
            const auto vg = v.block(g * vd, b * Tk, vd, Tk);
            const auto dy = dout.block(h * vd, b * Tq, vd, Tq);
            const auto P = att.middleCols(i * Tq, Tq);
            auto dS = datt.middleCols(i * Tq, Tq);
            blockGemm<T>(dS, vg, true, dy, false, false);  // d probs (Tk, Tq)
            for (Index t1 = 0; t1 < Tq; ++t1)
                softmaxBack(dS.col(t1), P.col(t1), i * Tq + t1, t1);
            blockGemm<T>(dq.block(h * hd, b * Tq, hd, Tq), kg, false, dS, false, accumulate);  // dq (hd, Tq)
        }
    });

    const Index keyBlocks = (Tk + kKeyBlock - 1) / kKeyBlock;
    pool.parallelFor(std::int64_t(s.B) * NKV * keyBlocks, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index kb = i % keyBlocks, bg = i / keyBlocks, b = bg / NKV, g = bg % NKV;
            const Index t0 = kb * kKeyBlock, nt = std::min(kKeyBlock, Tk - t0);
            auto dkg = dk.block(g * hd, b * Tk + t0, hd, nt);
            auto dvg = dv.block(g * vd, b * Tk + t0, vd, nt);
            for (Index j = 0; j < R; ++j) {
                const Index h = g * R + j, col = (b * NH + h) * Tq;
                const auto qh = q.block(h * hd, b * Tq, hd, Tq);
                const auto dy = dout.block(h * vd, b * Tq, vd, Tq);
                // (hd, Tq) * (Tq, nt): the keys' rows of this head's (Tk, Tq) blocks, transposed.
                blockGemm<T>(dkg, qh, false, datt.block(t0, col, nt, Tq), true, accumulate || j > 0);
                blockGemm<T>(dvg, dy, false, att.block(t0, col, nt, Tq), true, accumulate || j > 0);
            }
        }
    });
}

} // namespace

template <class T>
void attention_backward(KernelPool& pool, RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt,
                        CMatRef<T> dout, CMatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v,
                        const AttentionShape& s)
{
    checkAttentionShape(s, "attention_backward");
    const T scale = T(s.scoreScale());
    const Index Tk = s.Tk;
    // Softmax backward per query column over its unmasked keys, then the scores' scale.
    backwardPasses<T>(pool, dq, dk, dv, datt, dout, att, q, k, v, s, "attention_backward", false,
                      [&](auto dcol, const auto& pcol, Index, Index t1) {
                          const Index live = s.causal ? t1 + 1 : Tk;
                          const Index lo = s.window > 0 ? std::max<Index>(0, t1 - s.window + 1) : 0;
                          const auto p = pcol.segment(lo, live - lo).array();
                          auto d = dcol.segment(lo, live - lo);
                          const T dot = (p * d.array()).sum();
                          d.array() = p * (d.array() - dot) * scale;
                          dcol.head(lo).setZero();
                          dcol.tail(Tk - live).setZero();
                      });
}

// ---------------------------------------------------------------- ring attention (context parallelism)

namespace {

void checkBlockShape(const AttentionShape& s, const char* what)
{
    if (s.B < 1 || s.Tq < 1 || s.Tk < 1 || s.NH < 1 || s.NKV < 1 || s.hd < 1)
        throw std::invalid_argument(std::string(what) + ": sizes must be positive");
    if (s.NH % s.NKV != 0)
        throw std::invalid_argument(std::string(what) + ": NH must be a multiple of NKV");
    if (s.window != 0)
        throw std::invalid_argument(std::string(what) + ": ring attention with a sliding window is not executed");
}

} // namespace

template <class T>
void attention_block_probs_forward(KernelPool& pool, RowsRef<T> att, VecRef<T> lse, CRowsRef<T> q, CRowsRef<T> k,
                                   const AttentionShape& s, const int* qpos, const int* kpos)
{
    checkBlockShape(s, "attention_block_probs_forward");
    const Index hd = s.hd, Tq = s.Tq, Tk = s.Tk, NH = s.NH, R = s.NH / s.NKV;
    checkShape(att, Tk, s.probColumns(), "attention_block_probs_forward", "att");
    checkShape(q, NH * hd, Index(s.B) * Tq, "attention_block_probs_forward", "q");
    checkShape(k, Index(s.NKV) * hd, Index(s.B) * Tk, "attention_block_probs_forward", "k");
    if (lse.size() != s.probColumns())
        throw std::invalid_argument("attention_block_probs_forward: lse has the wrong size");
    for (Index t = 1; t < Tk; ++t)
        if (kpos[t] < kpos[t - 1])
            throw std::invalid_argument("attention_block_probs_forward: key positions must be ascending");
    const T scale = T(s.scoreScale());
    pool.parallelFor(std::int64_t(s.B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH, g = h / R;
            const auto qh = q.block(h * hd, b * Tq, hd, Tq);
            const auto kg = k.block(g * hd, b * Tk, hd, Tk);
            auto S = att.middleCols(i * Tq, Tq);  // (Tk, Tq)
            blockGemm<T>(S, kg, true, qh, false, false);
            for (Index t1 = 0; t1 < Tq; ++t1) {
                // Ascending key positions: the keys this query sees are a prefix of the block.
                const Index live = s.causal ? Index(std::upper_bound(kpos, kpos + Tk, qpos[t1]) - kpos) : Tk;
                if (live == 0) {
                    S.col(t1).setZero();
                    lse(i * Tq + t1) = -std::numeric_limits<T>::infinity();
                    continue;
                }
                const auto [mx, sum] = softmaxColumn(S.col(t1).head(live), scale);
                S.col(t1).tail(Tk - live).setZero();
                lse(i * Tq + t1) = mx * scale + std::log(sum);
            }
        }
    });
}

template <class T>
void attention_block_values_forward(KernelPool& pool, MatRef<T> out, CRowsRef<T> att, CRowsRef<T> v,
                                    const AttentionShape& s)
{
    checkBlockShape(s, "attention_block_values_forward");
    valuesForward<T>(pool, out, att, v, s, "attention_block_values_forward");
}

template <class T>
void attention_block_merge(KernelPool& pool, MatRef<T> out, VecRef<T> lse, CMatRef<T> part, CVecRef<T> part_lse,
                           const AttentionShape& s)
{
    checkBlockShape(s, "attention_block_merge");
    const Index vd = s.valueDim(), Tq = s.Tq, NH = s.NH;
    checkShape(out, NH * vd, Index(s.B) * Tq, "attention_block_merge", "out");
    checkShape(part, NH * vd, Index(s.B) * Tq, "attention_block_merge", "part");
    if (lse.size() != s.probColumns() || part_lse.size() != s.probColumns())
        throw std::invalid_argument("attention_block_merge: lse has the wrong size");
    const T inf = std::numeric_limits<T>::infinity();
    pool.parallelFor(std::int64_t(s.B) * NH, 1, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i) {
            const Index b = i / NH, h = i % NH;
            for (Index t1 = 0; t1 < Tq; ++t1) {
                const Index c = i * Tq + t1;
                const T a = lse(c), p = part_lse(c);
                if (p == -inf)
                    continue;  // the block had nothing for this query
                const T hi = std::max(a, p), lo = std::min(a, p);
                const T merged = hi + std::log1p(std::exp(lo - hi));
                const T wa = a == -inf ? T(0) : std::exp(a - merged), wp = std::exp(p - merged);
                auto o = out.col(b * Tq + t1).segment(h * vd, vd);
                o = wa * o + wp * part.col(b * Tq + t1).segment(h * vd, vd);
                lse(c) = merged;
            }
        }
    });
}

template <class T>
void attention_block_renormalize(KernelPool& pool, RowsRef<T> att, CVecRef<T> block_lse, CVecRef<T> lse,
                                 const AttentionShape& s)
{
    checkBlockShape(s, "attention_block_renormalize");
    checkShape(att, s.Tk, s.probColumns(), "attention_block_renormalize", "att");
    if (lse.size() != s.probColumns() || block_lse.size() != s.probColumns())
        throw std::invalid_argument("attention_block_renormalize: lse has the wrong size");
    const T inf = std::numeric_limits<T>::infinity();
    pool.parallelFor(s.probColumns(), 16, [&](std::int64_t c0, std::int64_t c1) {
        for (Index c = c0; c < c1; ++c)
            if (block_lse(c) != -inf)  // (a masked column is zero already)
                att.col(c) *= std::exp(block_lse(c) - lse(c));
    });
}

template <class T>
void attention_delta(KernelPool& pool, VecRef<T> delta, CMatRef<T> dout, CMatRef<T> out, const AttentionShape& s)
{
    checkBlockShape(s, "attention_delta");
    const Index vd = s.valueDim(), Tq = s.Tq, NH = s.NH;
    checkShape(out, NH * vd, Index(s.B) * Tq, "attention_delta", "out");
    checkShape(dout, NH * vd, Index(s.B) * Tq, "attention_delta", "dout");
    if (delta.size() != s.probColumns())
        throw std::invalid_argument("attention_delta: delta has the wrong size");
    pool.parallelFor(s.probColumns(), 16, [&](std::int64_t c0, std::int64_t c1) {
        for (Index c = c0; c < c1; ++c) {
            const Index i = c / Tq, t1 = c % Tq, b = i / NH, h = i % NH;
            delta(c) = dout.col(b * Tq + t1).segment(h * vd, vd).dot(out.col(b * Tq + t1).segment(h * vd, vd));
        }
    });
}

template <class T>
void attention_block_backward(KernelPool& pool, RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt,
                              CMatRef<T> dout, CRowsRef<T> att, CVecRef<T> delta, CRowsRef<T> q, CRowsRef<T> k,
                              CRowsRef<T> v, const AttentionShape& s)
{
    checkBlockShape(s, "attention_block_backward");
    if (delta.size() != s.probColumns())
        throw std::invalid_argument("attention_block_backward: delta has the wrong size");
    const T scale = T(s.scoreScale());
    // dS = att o (V^T dout - delta) / sqrt(hd), with delta = rowsum(dout o out) of the merged
    // output (FlashAttention's); masked entries have att = 0, so dS is zero there. dq, dk, dv +=.
    backwardPasses<T>(pool, dq, dk, dv, datt, dout, att, q, k, v, s, "attention_block_backward", true,
                      [&](auto dcol, const auto& pcol, Index c, Index) {
                          dcol.array() = pcol.array() * (dcol.array() - delta(c)) * scale;
                      });
}

// ---------------------------------------------------------------- instantiations

#define SHARDSCOPE_ENGINE_OPS_BLOCKS(T)                                                                           \
    template void rmsnorm_forward<T>(KernelPool&, MatRef<T>, VecRef<T>, CMatRef<T>, CVecRef<T>, double);          \
    template void rmsnorm_backward<T>(KernelPool&, MatRef<T>, VecRef<T>, CMatRef<T>, CMatRef<T>, CVecRef<T>,      \
                                      CVecRef<T>);                                                                \
    template void relu_forward<T>(KernelPool&, VecRef<T>, CVecRef<T>);                                            \
    template void relu_backward<T>(KernelPool&, VecRef<T>, CVecRef<T>, CVecRef<T>);                               \
    template void gated_forward<T>(KernelPool&, MatRef<T>, CMatRef<T>, GateKind);                                 \
    template void gated_backward<T>(KernelPool&, MatRef<T>, CMatRef<T>, CMatRef<T>, GateKind);                    \
    template void scale_columns<T>(KernelPool&, MatRef<T>, const T*);                                             \
    template void activation_column_dots<T>(KernelPool&, T*, CMatRef<T>, CMatRef<T>, bool, GateKind, bool);       \
    template void rope_forward<T>(KernelPool&, RowsRef<T>, const int*, int, int, double);                         \
    template void rope_backward<T>(KernelPool&, RowsRef<T>, const int*, int, int, double);                        \
    template void attention_probs_forward<T>(KernelPool&, MatRef<T>, CRowsRef<T>, CRowsRef<T>,                    \
                                             const AttentionShape&, const ScoreBias<T>&);                         \
    template void attention_values_forward<T>(KernelPool&, MatRef<T>, CMatRef<T>, CRowsRef<T>,                   \
                                              const AttentionShape&);                                             \
    template void attention_backward<T>(KernelPool&, RowsRef<T>, RowsRef<T>, RowsRef<T>, MatRef<T>, CMatRef<T>,   \
                                        CMatRef<T>, CRowsRef<T>, CRowsRef<T>, CRowsRef<T>, const AttentionShape&);   \
    template void attention_block_probs_forward<T>(KernelPool&, RowsRef<T>, VecRef<T>, CRowsRef<T>, CRowsRef<T>,  \
                                                   const AttentionShape&, const int*, const int*);                \
    template void attention_block_values_forward<T>(KernelPool&, MatRef<T>, CRowsRef<T>, CRowsRef<T>,             \
                                                    const AttentionShape&);                                       \
    template void attention_block_merge<T>(KernelPool&, MatRef<T>, VecRef<T>, CMatRef<T>, CVecRef<T>,             \
                                           const AttentionShape&);                                                \
    template void attention_block_renormalize<T>(KernelPool&, RowsRef<T>, CVecRef<T>, CVecRef<T>,                 \
                                                 const AttentionShape&);                                          \
    template void attention_delta<T>(KernelPool&, VecRef<T>, CMatRef<T>, CMatRef<T>, const AttentionShape&);      \
    template void attention_block_backward<T>(KernelPool&, RowsRef<T>, RowsRef<T>, RowsRef<T>, MatRef<T>,         \
                                              CMatRef<T>, CRowsRef<T>, CVecRef<T>, CRowsRef<T>, CRowsRef<T>,      \
                                              CRowsRef<T>, const AttentionShape&);

SHARDSCOPE_ENGINE_OPS_BLOCKS(float)
SHARDSCOPE_ENGINE_OPS_BLOCKS(double)

} // namespace shardscope::engine
