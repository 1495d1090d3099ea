// Naive reference kernels (see OpsReference.h): loops over scalars, written for
// clarity only; the tests compare the fast kernels of Ops.cpp against these.
#include "OpsReference.h"

#include <cmath>
#include <vector>

namespace shardscope::engine::reference {

using Eigen::Index;

template <class T>
void matmul_forward(MatRef<T> out, CMatRef<T> inp, CMatRef<T> weight, CVecRef<T> bias, CMatRef<T> residual)
{
    for (Index n = 0; n < inp.cols(); ++n)
        for (Index o = 0; o < weight.cols(); ++o) {
            T acc = bias.size() ? bias(o) : T(0);
            for (Index i = 0; i < inp.rows(); ++i)
                acc += weight(i, o) * inp(i, n);
            out(o, n) = acc + (residual.cols() ? residual(o, n) : T(0));
        }
}

template <class T>
void matmul_backward(MatRef<T> dinp, MatRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout, CMatRef<T> inp,
                     CMatRef<T> weight)
{
    for (Index n = 0; n < inp.cols(); ++n)
        for (Index i = 0; i < inp.rows(); ++i) {
            T acc = 0;
            for (Index o = 0; o < weight.cols(); ++o)
                acc += weight(i, o) * dout(o, n);
            dinp(i, n) = acc;
        }
    for (Index i = 0; i < inp.rows(); ++i)
        for (Index o = 0; o < weight.cols(); ++o)
            for (Index n = 0; n < inp.cols(); ++n)
                dweight(i, o) += inp(i, n) * dout(o, n);
    if (dbias.size())
        for (Index o = 0; o < dout.rows(); ++o)
            for (Index n = 0; n < dout.cols(); ++n)
                dbias(o) += dout(o, n);
}

template <class T>
void layernorm_forward(MatRef<T> out, VecRef<T> mean, VecRef<T> rstd, CMatRef<T> inp, CVecRef<T> weight,
                       CVecRef<T> bias, double eps)
{
    const Index C = inp.rows();
    for (Index n = 0; n < inp.cols(); ++n) {
        T m = 0;
        for (Index c = 0; c < C; ++c)
            m += inp(c, n);
        m /= T(C);
        T var = 0;
        for (Index c = 0; c < C; ++c)
            var += (inp(c, n) - m) * (inp(c, n) - m);
        var /= T(C);
        const T rs = T(1) / std::sqrt(var + T(eps));
        for (Index c = 0; c < C; ++c)
            out(c, n) = (inp(c, n) - m) * rs * weight(c) + bias(c);
        mean(n) = m;
        rstd(n) = rs;
    }
}

template <class T>
void layernorm_backward(MatRef<T> dinp, VecRef<T> dweight, VecRef<T> dbias, CMatRef<T> dout, CMatRef<T> inp,
                        CVecRef<T> weight, CVecRef<T> mean, CVecRef<T> rstd)
{
    const Index C = inp.rows();
    for (Index n = 0; n < inp.cols(); ++n) {
        T gMean = 0, gxMean = 0;
        for (Index c = 0; c < C; ++c) {
            const T xhat = (inp(c, n) - mean(n)) * rstd(n);
            const T g = weight(c) * dout(c, n);
            gMean += g;
            gxMean += g * xhat;
        }
        gMean /= T(C);
        gxMean /= T(C);
        for (Index c = 0; c < C; ++c) {
            const T xhat = (inp(c, n) - mean(n)) * rstd(n);
            const T g = weight(c) * dout(c, n);
            dinp(c, n) += rstd(n) * (g - gMean - xhat * gxMean);
            dweight(c) += dout(c, n) * xhat;
            dbias(c) += dout(c, n);
        }
    }
}

template <class T>
void attention_forward(MatRef<T> out, MatRef<T> att, CMatRef<T> qkv, int B, int T_, int NH)
{
    const Index C = qkv.rows() / 3, hs = C / NH;
    const T scale = T(1) / std::sqrt(T(hs));
    for (Index b = 0; b < B; ++b)
        for (Index h = 0; h < NH; ++h) {
            const Index a0 = (b * NH + h) * T_;  // first column of this head's (T, T) block
            for (Index t1 = 0; t1 < T_; ++t1) {
                // scores of query t1 over keys t2 <= t1
                T mx = -INFINITY;
                std::vector<T> s(size_t(t1 + 1));
                for (Index t2 = 0; t2 <= t1; ++t2) {
                    T dot = 0;
                    for (Index d = 0; d < hs; ++d)
                        dot += qkv(h * hs + d, b * T_ + t1) * qkv(C + h * hs + d, b * T_ + t2);
                    s[size_t(t2)] = dot * scale;
                    mx = std::max(mx, s[size_t(t2)]);
                }
                T sum = 0;
                for (Index t2 = 0; t2 <= t1; ++t2)
                    sum += (s[size_t(t2)] = std::exp(s[size_t(t2)] - mx));
                for (Index t2 = 0; t2 < T_; ++t2)
                    att(t2, a0 + t1) = t2 <= t1 ? s[size_t(t2)] / sum : T(0);
                for (Index d = 0; d < hs; ++d) {
                    T acc = 0;
                    for (Index t2 = 0; t2 <= t1; ++t2)
                        acc += att(t2, a0 + t1) * qkv(2 * C + h * hs + d, b * T_ + t2);
                    out(h * hs + d, b * T_ + t1) = acc;
                }
            }
        }
}

template <class T>
void attention_backward(MatRef<T> dqkv, CMatRef<T> dout, CMatRef<T> att, CMatRef<T> qkv, int B, int T_, int NH)
{
    const Index C = qkv.rows() / 3, hs = C / NH;
    const T scale = T(1) / std::sqrt(T(hs));
    dqkv.setZero();
    for (Index b = 0; b < B; ++b)
        for (Index h = 0; h < NH; ++h) {
            const Index a0 = (b * NH + h) * T_;
            for (Index t1 = 0; t1 < T_; ++t1) {
                // d probs and dV
                std::vector<T> dp(size_t(t1 + 1), T(0));
                for (Index t2 = 0; t2 <= t1; ++t2)
                    for (Index d = 0; d < hs; ++d) {
                        const T dy = dout(h * hs + d, b * T_ + t1);
                        dp[size_t(t2)] += qkv(2 * C + h * hs + d, b * T_ + t2) * dy;
                        dqkv(2 * C + h * hs + d, b * T_ + t2) += att(t2, a0 + t1) * dy;
                    }
                // softmax backward: dscore_j = p_j (dp_j - sum_k p_k dp_k)
                T dot = 0;
                for (Index t2 = 0; t2 <= t1; ++t2)
                    dot += att(t2, a0 + t1) * dp[size_t(t2)];
                for (Index t2 = 0; t2 <= t1; ++t2) {
                    const T ds = att(t2, a0 + t1) * (dp[size_t(t2)] - dot) * scale;
                    for (Index d = 0; d < hs; ++d) {
                        dqkv(h * hs + d, b * T_ + t1) += ds * qkv(C + h * hs + d, b * T_ + t2);
                        dqkv(C + h * hs + d, b * T_ + t2) += ds * qkv(h * hs + d, b * T_ + t1);
                    }
                }
            }
        }
}

namespace {
constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kA = 0.044715;
} // namespace

template <class T>
void gelu_forward(VecRef<T> out, CVecRef<T> inp)
{
    for (Index i = 0; i < inp.size(); ++i) {
        const T x = inp(i);
        out(i) = T(0.5) * x * (T(1) + std::tanh(T(kC) * (x + T(kA) * x * x * x)));
    }
}

template <class T>
void gelu_backward(VecRef<T> dinp, CVecRef<T> inp, CVecRef<T> dout)
{
    for (Index i = 0; i < inp.size(); ++i) {
        const T x = inp(i);
        const T u = T(kC) * (x + T(kA) * x * x * x);
        const T th = std::tanh(u);
        const T du = T(kC) * (T(1) + T(3 * kA) * x * x);
        dinp(i) = (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * du) * dout(i);
    }
}

template <class T>
void softmax_crossentropy_forward(MatRef<T> probs, VecRef<T> losses, CMatRef<T> logits, const TokenRef& targets)
{
    for (Index n = 0; n < logits.cols(); ++n) {
        T mx = -INFINITY;
        for (Index v = 0; v < logits.rows(); ++v)
            mx = std::max(mx, logits(v, n));
        T sum = 0;
        for (Index v = 0; v < logits.rows(); ++v)
            sum += std::exp(logits(v, n) - mx);
        for (Index v = 0; v < logits.rows(); ++v)
            probs(v, n) = std::exp(logits(v, n) - mx) / sum;
        losses(n) = -std::log(probs(targets(n), n));
    }
}

template <class T>
void crossentropy_softmax_backward(MatRef<T> dlogits, CMatRef<T> probs, const TokenRef& targets, T dloss)
{
    for (Index n = 0; n < probs.cols(); ++n)
        for (Index v = 0; v < probs.rows(); ++v)
            dlogits(v, n) = (probs(v, n) - (v == targets(n) ? T(1) : T(0))) * dloss;
}

template <class T>
void adamw_update(T* params, const T* grads, T* m, T* v, std::int64_t count, const AdamWSettings& s, bool decay,
                  int step, double grad_scale)
{
    for (std::int64_t i = 0; i < count; ++i) {
        const double g = double(grads[i]) * grad_scale;
        const double mi = s.beta1 * double(m[i]) + (1 - s.beta1) * g;
        const double vi = s.beta2 * double(v[i]) + (1 - s.beta2) * g * g;
        const double mhat = mi / (1 - std::pow(s.beta1, step));
        const double vhat = vi / (1 - std::pow(s.beta2, step));
        const double w = double(params[i]);
        params[i] = T(w - s.lr * (mhat / (std::sqrt(vhat) + s.eps) + (decay ? s.weight_decay * w : 0.0)));
        m[i] = T(mi);
        v[i] = T(vi);
    }
}

#define SHARDSCOPE_ENGINE_REFERENCE(T)                                                                            \
    template void matmul_forward<T>(MatRef<T>, CMatRef<T>, CMatRef<T>, CVecRef<T>, CMatRef<T>);                   \
    template void matmul_backward<T>(MatRef<T>, MatRef<T>, VecRef<T>, CMatRef<T>, CMatRef<T>, CMatRef<T>);        \
    template void layernorm_forward<T>(MatRef<T>, VecRef<T>, VecRef<T>, CMatRef<T>, CVecRef<T>, CVecRef<T>,       \
                                       double);                                                                   \
    template void layernorm_backward<T>(MatRef<T>, VecRef<T>, VecRef<T>, CMatRef<T>, CMatRef<T>, CVecRef<T>,      \
                                        CVecRef<T>, CVecRef<T>);                                                  \
    template void attention_forward<T>(MatRef<T>, MatRef<T>, CMatRef<T>, int, int, int);                          \
    template void attention_backward<T>(MatRef<T>, CMatRef<T>, CMatRef<T>, CMatRef<T>, int, int, int);            \
    template void gelu_forward<T>(VecRef<T>, CVecRef<T>);                                                         \
    template void gelu_backward<T>(VecRef<T>, CVecRef<T>, CVecRef<T>);                                            \
    template void softmax_crossentropy_forward<T>(MatRef<T>, VecRef<T>, CMatRef<T>, const TokenRef&);             \
    template void crossentropy_softmax_backward<T>(MatRef<T>, CMatRef<T>, const TokenRef&, T);                    \
    template void adamw_update<T>(T*, const T*, T*, T*, std::int64_t, const AdamWSettings&, bool, int, double);

SHARDSCOPE_ENGINE_REFERENCE(float)
SHARDSCOPE_ENGINE_REFERENCE(double)

} // namespace shardscope::engine::reference
