// Naive reference kernels (see OpsBlocksReference.h): loops over scalars, written for
// clarity only; the tests compare the fast kernels of OpsBlocks.cpp against these.
// Dimension legend as OpsBlocks.h: B, Tq, Tk, NH, NKV, hd; F the gated MLP's hidden size.
#include "OpsBlocksReference.h"

#include <algorithm>
#include <cmath>

namespace shardscope::engine::reference {

using Eigen::Index;

template <class T>
void rmsnorm_forward(MatRef<T> out, VecRef<T> rstd, CMatRef<T> inp, CVecRef<T> weight, double eps)
{
    const Index C = inp.rows();
    for (Index n = 0; n < inp.cols(); ++n) {
        T ms = 0;
        for (Index c = 0; c < C; ++c)
            ms += inp(c, n) * inp(c, n);
        ms /= T(C);
        const T rs = T(1) / std::sqrt(ms + T(eps));
        for (Index c = 0; c < C; ++c)
            out(c, n) = inp(c, n) * rs * weight(c);
        rstd(n) = rs;
    }
}

template <class T>
void rmsnorm_backward(MatRef<T> dinp, VecRef<T> dweight, CMatRef<T> dout, CMatRef<T> inp, CVecRef<T> weight,
                      CVecRef<T> rstd)
{
    const Index C = inp.rows();
    for (Index n = 0; n < inp.cols(); ++n) {
        // y_c = w_c x_c rs with rs = (mean(x^2) + eps)^(-1/2), d rs / d x_j = -rs^3 x_j / C:
        // dx_j = rs g_j - rs^3 x_j / C * sum_c g_c x_c, g = w * dout.
        T gx = 0;
        for (Index c = 0; c < C; ++c)
            gx += weight(c) * dout(c, n) * inp(c, n);
        const T rs = rstd(n);
        for (Index c = 0; c < C; ++c) {
            dinp(c, n) += rs * weight(c) * dout(c, n) - rs * rs * rs * inp(c, n) * gx / T(C);
            dweight(c) += dout(c, n) * inp(c, n) * rs;
        }
    }
}

template <class T>
void relu_forward(VecRef<T> out, CVecRef<T> inp)
{
    for (Index i = 0; i < inp.size(); ++i)
        out(i) = inp(i) > T(0) ? inp(i) : T(0);
}

template <class T>
void relu_backward(VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout)
{
    for (Index i = 0; i < inp.size(); ++i)
        dinp(i) = inp(i) > T(0) ? dout(i) : T(0);
}

namespace {

constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kA = 0.044715;

template <class T>
T sigmoid(T x)
{
    return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T gelu(T x)
{
    return T(0.5) * x * (T(1) + std::tanh(T(kC) * (x + T(kA) * x * x * x)));
}

template <class T>
T geluGrad(T x)
{
    const T th = std::tanh(T(kC) * (x + T(kA) * x * x * x));
    return T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * T(kC) * (T(1) + T(3 * kA) * x * x);
}

} // namespace

template <class T>
void gated_forward(MatRef<T> out, CMatRef<T> inp, GateKind kind)
{
    const Index F = out.rows();
    for (Index n = 0; n < out.cols(); ++n)
        for (Index f = 0; f < F; ++f) {
            const T g = inp(f, n), u = inp(F + f, n);
            out(f, n) = (kind == GateKind::SiLU ? g * sigmoid(g) : gelu(g)) * u;
        }
}

template <class T>
void gated_backward(MatRef<T> dinp, CMatRef<T> inp, CMatRef<T> dout, GateKind kind)
{
    const Index F = dout.rows();
    for (Index n = 0; n < dout.cols(); ++n)
        for (Index f = 0; f < F; ++f) {
            const T g = inp(f, n), u = inp(F + f, n), dy = dout(f, n);
            T act, grad;
            if (kind == GateKind::SiLU) {
                const T sg = sigmoid(g);
                act = g * sg;
                grad = sg + g * sg * (T(1) - sg);
            } else {
                act = gelu(g);
                grad = geluGrad(g);
            }
            dinp(f, n) = grad * u * dy;
            dinp(F + f, n) = act * dy;
        }
}

namespace {

// Each element pair on its own: angle, cosine and sine recomputed for every head.
template <class T>
void rotate(RowsRef<T> x, const int* positions, int heads, int hd, double base, double sign)
{
    const int half = hd / 2;
    for (Index n = 0; n < x.cols(); ++n)
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < half; ++i) {
                const double angle = sign * double(positions[n]) * std::pow(base, -2.0 * double(i) / double(hd));
                const Index r1 = Index(h) * hd + i, r2 = r1 + half;
                const T x1 = x(r1, n), x2 = x(r2, n);
                x(r1, n) = x1 * T(std::cos(angle)) - x2 * T(std::sin(angle));
                x(r2, n) = x2 * T(std::cos(angle)) + x1 * T(std::sin(angle));
            }
}

} // namespace

template <class T>
void rope_forward(RowsRef<T> x, const int* positions, int heads, int hd, double base)
{
    rotate<T>(x, positions, heads, hd, base, 1.0);
}

template <class T>
void rope_backward(RowsRef<T> dx, const int* positions, int heads, int hd, double base)
{
    rotate<T>(dx, positions, heads, hd, base, -1.0);
}

template <class T>
void attention_probs_forward(MatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, const AttentionShape& s)
{
    const int R = s.NH / s.NKV;
    const T scale = T(s.scoreScale());
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h) {
            const int g = h / R;
            const Index a0 = (Index(b) * s.NH + h) * s.Tq;  // first column of this head's (Tk, Tq) block
            for (int t1 = 0; t1 < s.Tq; ++t1) {
                const int live = s.causal ? t1 + 1 : s.Tk;  // keys lo <= t2 < live are visible
                const int lo = s.window > 0 ? std::max(0, t1 - s.window + 1) : 0;
                // The scaled scores, written into att first; then exp(score - max) / sum.
                T mx = -INFINITY;
                for (int t2 = lo; t2 < live; ++t2) {
                    T dot = 0;
                    for (int d = 0; d < s.hd; ++d)
                        dot += q(Index(h) * s.hd + d, Index(b) * s.Tq + t1) * k(Index(g) * s.hd + d, Index(b) * s.Tk + t2);
                    att(t2, a0 + t1) = dot * scale;
                    mx = std::max(mx, att(t2, a0 + t1));
                }
                T sum = 0;
                for (int t2 = lo; t2 < live; ++t2)
                    sum += (att(t2, a0 + t1) = std::exp(att(t2, a0 + t1) - mx));
                for (int t2 = 0; t2 < s.Tk; ++t2)
                    att(t2, a0 + t1) = t2 >= lo && t2 < live ? att(t2, a0 + t1) / sum : T(0);
            }
        }
}

template <class T>
void attention_values_forward(MatRef<T> out, CMatRef<T> att, CRowsRef<T> v, const AttentionShape& s)
{
    const int R = s.NH / s.NKV;
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h) {
            const int g = h / R;
            const Index a0 = (Index(b) * s.NH + h) * s.Tq;
            for (int t1 = 0; t1 < s.Tq; ++t1)
                for (int d = 0; d < s.valueDim(); ++d) {
                    T acc = 0;
                    for (int t2 = 0; t2 < s.Tk; ++t2)
                        acc += att(t2, a0 + t1) * v(Index(g) * s.valueDim() + d, Index(b) * s.Tk + t2);
                    out(Index(h) * s.valueDim() + d, Index(b) * s.Tq + t1) = acc;
                }
        }
}

template <class T>
void attention_backward(RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt, CMatRef<T> dout,
                        CMatRef<T> att, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v, const AttentionShape& s)
{
    const int R = s.NH / s.NKV;
    const T scale = T(s.scoreScale());
    dq.setZero();
    dk.setZero();
    dv.setZero();
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h) {
            const int g = h / R;
            const Index a0 = (Index(b) * s.NH + h) * s.Tq;
            for (int t1 = 0; t1 < s.Tq; ++t1) {
                const Index nq = Index(b) * s.Tq + t1;
                // d probs into datt, and dv (summed over the group's heads).
                for (int t2 = 0; t2 < s.Tk; ++t2) {
                    const Index nk = Index(b) * s.Tk + t2;
                    T dp = 0;
                    for (int d = 0; d < s.valueDim(); ++d) {
                        const T dy = dout(Index(h) * s.valueDim() + d, nq);
                        dp += v(Index(g) * s.valueDim() + d, nk) * dy;
                        dv(Index(g) * s.valueDim() + d, nk) += att(t2, a0 + t1) * dy;
                    }
                    datt(t2, a0 + t1) = dp;
                }
                // softmax backward: dscore_j = p_j (dp_j - sum_k p_k dp_k); masked keys have p = 0.
                T dot = 0;
                for (int t2 = 0; t2 < s.Tk; ++t2)
                    dot += att(t2, a0 + t1) * datt(t2, a0 + t1);
                for (int t2 = 0; t2 < s.Tk; ++t2) {
                    const Index nk = Index(b) * s.Tk + t2;
                    const bool masked = (s.causal && t2 > t1) || (s.window > 0 && t1 - t2 >= s.window);
                    const T ds = masked ? T(0) : att(t2, a0 + t1) * (datt(t2, a0 + t1) - dot) * scale;
                    datt(t2, a0 + t1) = ds;
                    for (int d = 0; d < s.hd; ++d) {
                        dq(Index(h) * s.hd + d, nq) += ds * k(Index(g) * s.hd + d, nk);
                        dk(Index(g) * s.hd + d, nk) += ds * q(Index(h) * s.hd + d, nq);
                    }
                }
            }
        }
}

// Ring attention pieces: the same one scalar at a time, masking by position key by key.
template <class T>
void attention_block_probs_forward(RowsRef<T> att, VecRef<T> lse, CRowsRef<T> q, CRowsRef<T> k,
                                   const AttentionShape& s, const int* qpos, const int* kpos)
{
    const int R = s.NH / s.NKV;
    const T scale = T(s.scoreScale());
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h) {
            const int g = h / R;
            const Index a0 = (Index(b) * s.NH + h) * s.Tq;
            for (int t1 = 0; t1 < s.Tq; ++t1) {
                auto visible = [&](int t2) { return !s.causal || kpos[t2] <= qpos[t1]; };
                T mx = -INFINITY;
                for (int t2 = 0; t2 < s.Tk; ++t2) {
                    T dot = 0;
                    for (int d = 0; d < s.hd; ++d)
                        dot += q(Index(h) * s.hd + d, Index(b) * s.Tq + t1) * k(Index(g) * s.hd + d, Index(b) * s.Tk + t2);
                    att(t2, a0 + t1) = dot * scale;
                    if (visible(t2))
                        mx = std::max(mx, att(t2, a0 + t1));
                }
                T sum = 0;
                for (int t2 = 0; t2 < s.Tk; ++t2)
                    if (visible(t2))
                        sum += std::exp(att(t2, a0 + t1) - mx);
                for (int t2 = 0; t2 < s.Tk; ++t2)
                    att(t2, a0 + t1) = visible(t2) ? std::exp(att(t2, a0 + t1) - mx) / sum : T(0);
                lse(a0 + t1) = sum > 0 ? mx + std::log(sum) : -INFINITY;
            }
        }
}

template <class T>
void attention_block_values_forward(MatRef<T> out, CRowsRef<T> att, CRowsRef<T> v, const AttentionShape& s)
{
    const int R = s.NH / s.NKV;
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h) {
            const Index a0 = (Index(b) * s.NH + h) * s.Tq;
            for (int t1 = 0; t1 < s.Tq; ++t1)
                for (int d = 0; d < s.valueDim(); ++d) {
                    T acc = 0;
                    for (int t2 = 0; t2 < s.Tk; ++t2)
                        acc += att(t2, a0 + t1) * v(Index(h / R) * s.valueDim() + d, Index(b) * s.Tk + t2);
                    out(Index(h) * s.valueDim() + d, Index(b) * s.Tq + t1) = acc;
                }
        }
}

template <class T>
void attention_block_merge(MatRef<T> out, VecRef<T> lse, CMatRef<T> part, CVecRef<T> part_lse, const AttentionShape& s)
{
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h)
            for (int t1 = 0; t1 < s.Tq; ++t1) {
                const Index c = (Index(b) * s.NH + h) * s.Tq + t1;
                const T a = lse(c), p = part_lse(c);
                if (p == -INFINITY)
                    continue;
                // log(e^a + e^p), and each side's weight in the merged softmax.
                const T merged = a == -INFINITY ? p : std::max(a, p) + std::log(T(1) + std::exp(-std::fabs(a - p)));
                const T wa = a == -INFINITY ? T(0) : std::exp(a - merged), wp = std::exp(p - merged);
                for (int d = 0; d < s.valueDim(); ++d) {
                    T& o = out(Index(h) * s.valueDim() + d, Index(b) * s.Tq + t1);
                    o = wa * o + wp * part(Index(h) * s.valueDim() + d, Index(b) * s.Tq + t1);
                }
                lse(c) = merged;
            }
}

template <class T>
void attention_block_renormalize(RowsRef<T> att, CVecRef<T> block_lse, CVecRef<T> lse, const AttentionShape& s)
{
    for (Index c = 0; c < s.probColumns(); ++c)
        for (int t2 = 0; t2 < s.Tk; ++t2)
            att(t2, c) = block_lse(c) == -INFINITY ? T(0) : att(t2, c) * std::exp(block_lse(c) - lse(c));
}

template <class T>
void attention_delta(VecRef<T> delta, CMatRef<T> dout, CMatRef<T> out, const AttentionShape& s)
{
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h)
            for (int t1 = 0; t1 < s.Tq; ++t1) {
                T acc = 0;
                for (int d = 0; d < s.valueDim(); ++d)
                    acc += dout(Index(h) * s.valueDim() + d, Index(b) * s.Tq + t1) *
                           out(Index(h) * s.valueDim() + d, Index(b) * s.Tq + t1);
                delta((Index(b) * s.NH + h) * s.Tq + t1) = acc;
            }
}

template <class T>
void attention_block_backward(RowsRef<T> dq, RowsRef<T> dk, RowsRef<T> dv, MatRef<T> datt, CMatRef<T> dout,
                              CRowsRef<T> att, CVecRef<T> delta, CRowsRef<T> q, CRowsRef<T> k, CRowsRef<T> v,
                              const AttentionShape& s)
{
    const int R = s.NH / s.NKV;
    const T scale = T(s.scoreScale());
    for (int b = 0; b < s.B; ++b)
        for (int h = 0; h < s.NH; ++h) {
            const int g = h / R;
            const Index a0 = (Index(b) * s.NH + h) * s.Tq;
            for (int t1 = 0; t1 < s.Tq; ++t1) {
                const Index nq = Index(b) * s.Tq + t1;
                for (int t2 = 0; t2 < s.Tk; ++t2) {
                    const Index nk = Index(b) * s.Tk + t2;
                    const T p = att(t2, a0 + t1);
                    T dp = 0;
                    for (int d = 0; d < s.valueDim(); ++d) {
                        const T dy = dout(Index(h) * s.valueDim() + d, nq);
                        dp += v(Index(g) * s.valueDim() + d, nk) * dy;
                        dv(Index(g) * s.valueDim() + d, nk) += p * dy;
                    }
                    const T ds = p * (dp - delta(a0 + t1)) * scale;
                    datt(t2, a0 + t1) = ds;
                    for (int d = 0; d < s.hd; ++d) {
                        dq(Index(h) * s.hd + d, nq) += ds * k(Index(g) * s.hd + d, nk);
                        dk(Index(g) * s.hd + d, nk) += ds * q(Index(h) * s.hd + d, nq);
                    }
                }
            }
        }
}

#define SHARDSCOPE_ENGINE_BLOCKS_REFERENCE(T)                                                                     \
    template void rmsnorm_forward<T>(MatRef<T>, VecRef<T>, CMatRef<T>, CVecRef<T>, double);                       \
    template void rmsnorm_backward<T>(MatRef<T>, VecRef<T>, CMatRef<T>, CMatRef<T>, CVecRef<T>, CVecRef<T>);      \
    template void relu_forward<T>(VecRef<T>, CVecRef<T>);                                                         \
    template void relu_backward<T>(VecRef<T>, CVecRef<T>, CVecRef<T>);                                            \
    template void gated_forward<T>(MatRef<T>, CMatRef<T>, GateKind);                                              \
    template void gated_backward<T>(MatRef<T>, CMatRef<T>, CMatRef<T>, GateKind);                                 \
    template void rope_forward<T>(RowsRef<T>, const int*, int, int, double);                                      \
    template void rope_backward<T>(RowsRef<T>, const int*, int, int, double);                                     \
    template void attention_probs_forward<T>(MatRef<T>, CRowsRef<T>, CRowsRef<T>, const AttentionShape&);         \
    template void attention_values_forward<T>(MatRef<T>, CMatRef<T>, CRowsRef<T>, const AttentionShape&);         \
    template void attention_backward<T>(RowsRef<T>, RowsRef<T>, RowsRef<T>, MatRef<T>, CMatRef<T>, CMatRef<T>,    \
                                        CRowsRef<T>, CRowsRef<T>, CRowsRef<T>, const AttentionShape&);          \
    template void attention_block_probs_forward<T>(RowsRef<T>, VecRef<T>, CRowsRef<T>, CRowsRef<T>,              \
                                                   const AttentionShape&, const int*, const int*);                \
    template void attention_block_values_forward<T>(MatRef<T>, CRowsRef<T>, CRowsRef<T>, const AttentionShape&);  \
    template void attention_block_merge<T>(MatRef<T>, VecRef<T>, CMatRef<T>, CVecRef<T>, const AttentionShape&);  \
    template void attention_block_renormalize<T>(RowsRef<T>, CVecRef<T>, CVecRef<T>, const AttentionShape&);      \
    template void attention_delta<T>(VecRef<T>, CMatRef<T>, CMatRef<T>, const AttentionShape&);                   \
    template void attention_block_backward<T>(RowsRef<T>, RowsRef<T>, RowsRef<T>, MatRef<T>, CMatRef<T>,          \
                                              CRowsRef<T>, CVecRef<T>, CRowsRef<T>, CRowsRef<T>, CRowsRef<T>,     \
                                              const AttentionShape&);

SHARDSCOPE_ENGINE_BLOCKS_REFERENCE(float)
SHARDSCOPE_ENGINE_BLOCKS_REFERENCE(double)

} // namespace shardscope::engine::reference
