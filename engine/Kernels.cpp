// Kernels: compute, charge and (in bf16) round, one call per operation; see Kernels.h.
#include "Kernels.h"

#include "OpConventions.h"
#include "RelativePosition.h"
#include "OpsEncoder.h"

#include <algorithm>

namespace shardscope::engine {

using Eigen::Index;

namespace {

template <class T> using MapM = Eigen::Map<Mat<T>>;
template <class T> using CMapM = Eigen::Map<const Mat<T>>;
template <class T> using MapV = Eigen::Map<Vec<T>>;
template <class T> using CMapV = Eigen::Map<const Vec<T>>;

template <class T> MapM<T> mat(T* p, std::int64_t r, std::int64_t c) { return MapM<T>(p, Index(r), Index(c)); }
template <class T> CMapM<T> cmat(const T* p, std::int64_t r, std::int64_t c) { return CMapM<T>(p, Index(r), Index(c)); }
template <class T> MapV<T> vec(T* p, std::int64_t n) { return MapV<T>(p, Index(n)); }
template <class T> CMapV<T> cvec(const T* p, std::int64_t n) { return CMapV<T>(p, Index(n)); }

constexpr double kStat = 4;  // fp32 statistics

} // namespace

template <class T>
Kernels<T>::Kernels(EmulatedDevice& device, PrecisionMode precision)
    : dev_(device), compute_(precision == PrecisionMode::FP32 ? DataType::FP32 : DataType::BF16),
      e_(precision == PrecisionMode::FP32 ? 4 : 2), gb_(e_)
{
}

template <class T>
void Kernels<T>::round(T* x, std::int64_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        if (bf16())
            round_to_bf16(dev_.pool(), x, count);
    } else {
        (void)x;
        (void)count;
    }
}

template <class T>
void Kernels<T>::matmulForward(T* out, const T* inp, const T* w, const T* bias, const T* residual, std::int64_t IC,
                               std::int64_t OC, std::int64_t N)
{
    const Mat<T> none;
    const Vec<T> noBias;
    if (residual)
        matmul_forward<T>(pool(), mat(out, OC, N), cmat(inp, IC, N), cmat(w, IC, OC),
                          bias ? CVecRef<T>(cvec(bias, OC)) : CVecRef<T>(noBias), cmat(residual, OC, N));
    else
        matmul_forward<T>(pool(), mat(out, OC, N), cmat(inp, IC, N), cmat(w, IC, OC),
                          bias ? CVecRef<T>(cvec(bias, OC)) : CVecRef<T>(noBias), none);
    const double ic = double(IC), oc = double(OC), n = double(N);
    dev_.charge(KernelKind::Matmul,
                {2 * ic * oc * n, ic * oc * e_ + ic * n * e_ + (bias ? oc * e_ : 0) + (residual ? oc * n * e_ : 0),
                 oc * n * e_},
                compute_);
    // A fused residual epilogue's arithmetic (with the bias, 2 per output) as element-wise work;
    // a bias alone rides on the product's accumulators (bytes only).
    if (residual)
        dev_.charge(KernelKind::Elementwise, {(bias ? ops::kBiasResidualAdd : 1) * oc * n, 0, 0}, compute_);
    round(out, OC * N);
}

template <class T>
void Kernels<T>::matmulBackward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, std::int64_t IC,
                                std::int64_t OC, std::int64_t N, bool accumulate)
{
    Vec<T> noBias;
    if (accumulate) {
        // dX += W dY as the GEMM's accumulating form (beta 1), then the weight and bias gradients.
        gemm<T>(pool(), mat(dinp, IC, N), cmat(w, IC, OC), false, cmat(dout, OC, N), false, true);
        gemm<T>(pool(), mat(dw, IC, OC), cmat(inp, IC, N), false, cmat(dout, OC, N), true, true);
        if (dbias) {
            MapV<T> db = vec(dbias, OC);
            const CMapM<T> dy = cmat(dout, OC, N);
            pool().parallelFor(OC, 16, [&](std::int64_t r0, std::int64_t r1) {
                db.segment(Index(r0), Index(r1 - r0)) += dy.middleRows(Index(r0), Index(r1 - r0)).rowwise().sum();
            });
        }
    } else if (dbias) {
        MapV<T> db = vec(dbias, OC);
        matmul_backward<T>(pool(), mat(dinp, IC, N), mat(dw, IC, OC), db, cmat(dout, OC, N), cmat(inp, IC, N),
                           cmat(w, IC, OC));
    } else {
        matmul_backward<T>(pool(), mat(dinp, IC, N), mat(dw, IC, OC), noBias, cmat(dout, OC, N), cmat(inp, IC, N),
                           cmat(w, IC, OC));
    }
    // Two kernels, as cuBLAS/NKI run them: dgrad dX = W dY, wgrad dW += X dY^T (+ the bias gradient).
    // The weight and bias gradients are read and written at their own width (gb_).
    const double ic = double(IC), oc = double(OC), n = double(N), b = dbias ? oc * gb_ : 0;
    dev_.charge(KernelKind::Matmul,
                {2 * ic * oc * n, ic * oc * e_ + oc * n * e_ + (accumulate ? ic * n * e_ : 0), ic * n * e_}, compute_);
    dev_.charge(KernelKind::Matmul, {2 * ic * oc * n, ic * n * e_ + oc * n * e_ + ic * oc * gb_ + b, ic * oc * gb_ + b},
                compute_);
    round(dinp, IC * N);
}

template <class T>
void Kernels<T>::normForward(NormKind kind, T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b,
                             std::int64_t C, std::int64_t N, double eps, std::int64_t inpRows)
{
    const double c = double(C), n = double(N);
    const ops::ElementFlops f = ops::norm(kind);
    const Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>> in(inp, Index(C), Index(N),
                                                                 Eigen::OuterStride<>(Index(inpRows > 0 ? inpRows : C)));
    if (kind == NormKind::LayerNorm) {
        layernorm_forward<T>(pool(), mat(out, C, N), vec(mean, N), vec(rstd, N), in, cvec(w, C),
                             cvec(b, C), eps);
        dev_.charge(KernelKind::LayerNorm, {f.forward * c * n, c * n * e_ + 2 * c * e_, c * n * e_ + 2 * n * kStat},
                    compute_);
    } else {
        rmsnorm_forward<T>(pool(), mat(out, C, N), vec(rstd, N), in, cvec(w, C), eps);
        dev_.charge(KernelKind::LayerNorm, {f.forward * c * n, c * n * e_ + c * e_, c * n * e_ + n * kStat}, compute_);
    }
    round(out, C * N);
}

template <class T>
void Kernels<T>::normBackward(NormKind kind, T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w,
                              const T* mean, const T* rstd, std::int64_t C, std::int64_t N, std::int64_t inpRows)
{
    const double c = double(C), n = double(N);
    const ops::ElementFlops f = ops::norm(kind);
    const Eigen::OuterStride<> ld(Index(inpRows > 0 ? inpRows : C));
    Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>> din(dinp, Index(C), Index(N), ld);
    const Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>> in(inp, Index(C), Index(N), ld);
    if (kind == NormKind::LayerNorm) {
        layernorm_backward<T>(pool(), din, vec(dw, C), vec(db, C), cmat(dout, C, N), in,
                              cvec(w, C), cvec(mean, N), cvec(rstd, N));
        dev_.charge(KernelKind::LayerNorm,
                    {f.backward * c * n, 3 * c * n * e_ + 2 * n * kStat + 3 * c * e_, c * n * e_ + 2 * c * e_},
                    compute_);
    } else {
        rmsnorm_backward<T>(pool(), din, vec(dw, C), cmat(dout, C, N), in, cvec(w, C), cvec(rstd, N));
        dev_.charge(KernelKind::LayerNorm,
                    {f.backward * c * n, 3 * c * n * e_ + n * kStat + 2 * c * e_, c * n * e_ + c * e_}, compute_);
    }
    if (inpRows > 0 && inpRows != C) {
        for (std::int64_t k = 0; k < N; ++k)
            round(dinp + k * inpRows, C);
    } else {
        round(dinp, C * N);
    }
}

template <class T>
void Kernels<T>::qkNormForward(NormKind kind, T* x, T* pre, T* mean, T* rstd, const T* w, const T* b,
                               std::int64_t rows, int NH, int NKV, int hd, std::int64_t N, double eps)
{
    const std::int64_t heads = NH + NKV, qk = heads * hd;
    for (std::int64_t n = 0; n < N; ++n)
        std::copy_n(x + n * rows, qk, pre + n * qk);
    MapM<T> out = mat(x, rows, N);
    CMapM<T> in = cmat(pre, qk, N);
    const bool ln = kind == NormKind::LayerNorm;
    for (std::int64_t j = 0; j < heads; ++j) {  // head j: a (hd, N) block with the q or k weights
        const std::int64_t at = j < NH ? 0 : hd;
        auto o = out.middleRows(Index(j * hd), hd);
        auto i = in.middleRows(Index(j * hd), hd);
        if (ln)
            layernorm_forward<T>(pool(), o, vec(mean + j * N, N), vec(rstd + j * N, N), i, cvec(w + at, hd),
                                 cvec(b + at, hd), eps);
        else
            rmsnorm_forward<T>(pool(), o, vec(rstd + j * N, N), i, cvec(w + at, hd), eps);
    }
    // As normForward charges it over the (NH + NKV) N head vectors of hd (the kept input is the
    // product's output: the norm writes a tensor of its own).
    const double c = double(hd), n = double(heads * N), params = (ln ? 2.0 : 1.0) * 2 * c;
    dev_.charge(KernelKind::LayerNorm,
                {ops::norm(kind).forward * c * n, c * n * e_ + params * e_, c * n * e_ + (ln ? 2 : 1) * n * kStat},
                compute_);
    if (bf16())
        for (std::int64_t t = 0; t < N; ++t)
            round(x + t * rows, qk);
}

template <class T>
void Kernels<T>::qkNormBackward(NormKind kind, T* dx, T* scratch, T* dw, T* db, const T* pre, const T* w,
                                const T* mean, const T* rstd, std::int64_t rows, int NH, int NKV, int hd,
                                std::int64_t N)
{
    const std::int64_t heads = NH + NKV, qk = heads * hd;
    MapM<T> d = mat(dx, rows, N), dy = mat(scratch, hd, N);
    CMapM<T> in = cmat(pre, qk, N);
    const bool ln = kind == NormKind::LayerNorm;
    for (std::int64_t j = 0; j < heads; ++j) {
        const std::int64_t at = j < NH ? 0 : hd;
        auto dj = d.middleRows(Index(j * hd), hd);
        dy = dj;  // the norms add the input's gradient to dinp: it starts from 0
        dj.setZero();
        auto i = in.middleRows(Index(j * hd), hd);
        if (ln)
            layernorm_backward<T>(pool(), dj, vec(dw + at, hd), vec(db + at, hd), dy, i, cvec(w + at, hd),
                                  cvec(mean + j * N, N), cvec(rstd + j * N, N));
        else
            rmsnorm_backward<T>(pool(), dj, vec(dw + at, hd), dy, i, cvec(w + at, hd), cvec(rstd + j * N, N));
    }
    const double c = double(hd), n = double(heads * N), params = 2 * c;
    const ops::ElementFlops f = ops::norm(kind);
    if (ln)
        dev_.charge(KernelKind::LayerNorm,
                    {f.backward * c * n, 3 * c * n * e_ + 2 * n * kStat + 3 * params * e_,
                     c * n * e_ + 2 * params * e_},
                    compute_);
    else
        dev_.charge(KernelKind::LayerNorm,
                    {f.backward * c * n, 3 * c * n * e_ + n * kStat + 2 * params * e_, c * n * e_ + params * e_},
                    compute_);
    if (bf16())
        for (std::int64_t t = 0; t < N; ++t)
            round(dx + t * rows, qk);
}

template <class T>
void Kernels<T>::activate(MlpKind kind, T* out, const T* inp, std::int64_t F, std::int64_t N)
{
    switch (kind) {
    case MlpKind::Gelu:
        gelu_forward<T>(pool(), vec(out, F * N), cvec(inp, F * N));
        break;
    case MlpKind::Relu:
        relu_forward<T>(pool(), vec(out, F * N), cvec(inp, F * N));
        break;
    case MlpKind::SwiGlu:
    case MlpKind::GeGlu:
        gated_forward<T>(pool(), mat(out, F, N), cmat(inp, 2 * F, N),
                         kind == MlpKind::SwiGlu ? GateKind::SiLU : GateKind::GeLU);
        break;
    }
}

template <class T>
void Kernels<T>::activationForward(MlpKind kind, T* out, const T* inp, std::int64_t F, std::int64_t N)
{
    const double fn = double(F) * double(N);
    activate(kind, out, inp, F, N);
    const double in = (kind == MlpKind::SwiGlu || kind == MlpKind::GeGlu) ? 2 * fn : fn;
    dev_.charge(KernelKind::Gelu, {ops::mlpActivation(kind).forward * fn, in * e_, fn * e_}, compute_);
    round(out, F * N);
}

template <class T>
void Kernels<T>::weightedActivationForward(MlpKind kind, T* out, const T* inp, const T* w, std::int64_t F,
                                           std::int64_t N)
{
    const double fn = double(F) * double(N);
    activate(kind, out, inp, F, N);
    scale_columns<T>(pool(), mat(out, F, N), w);
    const double in = (kind == MlpKind::SwiGlu || kind == MlpKind::GeGlu) ? 2 * fn : fn;
    dev_.charge(KernelKind::Gelu,
                {(ops::mlpActivation(kind).forward + ops::kRouterWeight.forward) * fn, in * e_ + double(N) * kStat,
                 fn * e_},
                compute_);
    round(out, F * N);
}

template <class T>
void Kernels<T>::activationBackward(MlpKind kind, T* dinp, const T* inp, const T* dout, std::int64_t F,
                                    std::int64_t N)
{
    const double fn = double(F) * double(N);
    const bool gatedKind = kind == MlpKind::SwiGlu || kind == MlpKind::GeGlu;
    differentiate(kind, dinp, inp, dout, F, N);
    const double in = gatedKind ? 2 * fn : fn;
    dev_.charge(KernelKind::Gelu, {ops::mlpActivation(kind).backward * fn, (in + fn) * e_, in * e_}, compute_);
    round(dinp, std::int64_t(in));
}

template <class T>
void Kernels<T>::weightedActivationBackward(MlpKind kind, T* dinp, T* dw, const T* inp, const T* w, T* dout,
                                            std::int64_t F, std::int64_t N)
{
    const double fn = double(F) * double(N);
    const bool gatedKind = kind == MlpKind::SwiGlu || kind == MlpKind::GeGlu;
    // The weights' gradient from the unscaled output gradient, then the activation's through w.
    activation_column_dots<T>(pool(), dw, cmat(inp, gatedKind ? 2 * F : F, N), cmat(dout, F, N), gatedKind,
                              kind == MlpKind::GeGlu ? GateKind::GeLU : GateKind::SiLU, kind == MlpKind::Relu);
    scale_columns<T>(pool(), mat(dout, F, N), w);
    differentiate(kind, dinp, inp, dout, F, N);
    const double in = gatedKind ? 2 * fn : fn;
    const ops::ElementFlops f = ops::mlpActivation(kind);
    dev_.charge(KernelKind::Gelu,
                {(f.backward + f.forward + ops::kRouterWeight.backward) * fn,
                 (in + fn) * e_ + double(N) * kStat, in * e_ + double(N) * kStat},
                compute_);
    round(dinp, std::int64_t(in));
}

template <class T>
void Kernels<T>::differentiate(MlpKind kind, T* dinp, const T* inp, const T* dout, std::int64_t F, std::int64_t N)
{
    switch (kind) {
    case MlpKind::Gelu:
        gelu_backward<T>(pool(), vec(dinp, F * N), cvec(inp, F * N), cvec(dout, F * N));
        break;
    case MlpKind::Relu:
        relu_backward<T>(pool(), vec(dinp, F * N), cvec(inp, F * N), cvec(dout, F * N));
        break;
    case MlpKind::SwiGlu:
    case MlpKind::GeGlu:
        gated_backward<T>(pool(), mat(dinp, 2 * F, N), cmat(inp, 2 * F, N), cmat(dout, F, N),
                          kind == MlpKind::SwiGlu ? GateKind::SiLU : GateKind::GeLU);
        break;
    }
}

template <class T>
void Kernels<T>::rope(bool backward, T* x, std::int64_t rows, std::int64_t row0, int heads, int hd,
                      const int* positions, std::int64_t N, double base)
{
    MapM<T> all = mat(x, rows, N);
    if (backward)
        rope_backward<T>(pool(), all.middleRows(Index(row0), Index(heads) * hd), positions, heads, hd, base);
    else
        rope_forward<T>(pool(), all.middleRows(Index(row0), Index(heads) * hd), positions, heads, hd, base);
    const double elems = double(heads) * hd * double(N);
    const double flops = backward ? ops::kRope.backward : ops::kRope.forward;
    dev_.charge(KernelKind::Elementwise, {flops * elems, elems * e_, elems * e_}, compute_);
    if (bf16())
        for (std::int64_t n = 0; n < N; ++n)
            round(x + n * rows + row0, std::int64_t(heads) * hd);
}

template <class T>
void Kernels<T>::ropeForward(T* x, std::int64_t rows, std::int64_t row0, int heads, int hd, const int* positions,
                             std::int64_t N, double base)
{
    rope(false, x, rows, row0, heads, hd, positions, N, base);
}

template <class T>
void Kernels<T>::ropeBackward(T* dx, std::int64_t rows, std::int64_t row0, int heads, int hd, const int* positions,
                              std::int64_t N, double base)
{
    rope(true, dx, rows, row0, heads, hd, positions, N, base);
}

namespace {

// The rows of a fused [q | k | v] column: q and k of hd per head, v of vd (MLA: v_head_dim), and
// the attention output's (vd per query head). kv: a [k | v] block's rows.
struct QkvRows {
    std::int64_t qd, kvd, vvd, od, rows, kv;
};
QkvRows qkvRows(const AttentionShape& s)
{
    const std::int64_t qd = std::int64_t(s.NH) * s.hd, kvd = std::int64_t(s.NKV) * s.hd;
    const std::int64_t vvd = std::int64_t(s.NKV) * s.valueDim(), od = std::int64_t(s.NH) * s.valueDim();
    return {qd, kvd, vvd, od, qd + kvd + vvd, kvd + vvd};
}

} // namespace

template <class T>
void Kernels<T>::attentionProbs(T* att, const T* qkv, const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk;
    CMapM<T> all = cmat(qkv, r.rows, N);
    attention_probs_forward<T>(pool(), mat(att, s.Tk, s.probColumns()), all.topRows(Index(r.qd)),
                               all.middleRows(Index(r.qd), Index(r.kvd)), s);
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(s.probColumns());
    dev_.charge(KernelKind::Attention, {2 * s.countedKeys() * double(r.qd) * n,
                                        (double(r.qd) * n + double(r.kvd) * nk) * e_,
                                        probs * e_}, compute_);
    round(att, s.Tk * std::int64_t(s.probColumns()));
}

template <class T>
void Kernels<T>::attentionValues(T* out, const T* att, const T* qkv, const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk;
    CMapM<T> all = cmat(qkv, r.rows, N);
    attention_values_forward<T>(pool(), mat(out, r.od, N), cmat(att, s.Tk, s.probColumns()),
                                all.middleRows(Index(r.qd + r.kvd), Index(r.vvd)), s);
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(s.probColumns());
    dev_.charge(KernelKind::Attention, {2 * s.countedKeys() * double(r.od) * n, probs * e_ + double(r.vvd) * nk * e_,
                                        double(r.od) * n * e_}, compute_);
    round(out, r.od * N);
}

template <class T>
void Kernels<T>::attentionBackward(T* dqkv, T* datt, const T* dout, const T* att, const T* qkv,
                                   const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk;
    CMapM<T> all = cmat(qkv, r.rows, N);
    MapM<T> dall = mat(dqkv, r.rows, N);
    attention_backward<T>(pool(), dall.topRows(Index(r.qd)), dall.middleRows(Index(r.qd), Index(r.kvd)),
                          dall.middleRows(Index(r.qd + r.kvd), Index(r.vvd)), mat(datt, s.Tk, s.probColumns()),
                          cmat(dout, r.od, N), cmat(att, s.Tk, s.probColumns()), all.topRows(Index(r.qd)),
                          all.middleRows(Index(r.qd), Index(r.kvd)), all.middleRows(Index(r.qd + r.kvd), Index(r.vvd)),
                          s);
    // Four products (dV, dP over v's size, dQ, dK over q's) over the square; reads q, k, v, dout
    // and the probabilities.
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(s.probColumns());
    const double qkvBytes = (double(r.qd) * n + double(r.kv) * nk) * e_;
    dev_.charge(KernelKind::Attention, {4 * s.countedKeys() * double(r.qd + r.od) * n,
                                        qkvBytes + double(r.od) * n * e_ + probs * e_,
                                        qkvBytes + probs * e_}, compute_);
    round(dqkv, r.rows * N);
}

namespace {

template <class T> using RowsMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;

// Rows [row0, row0 + rows) of a column-major (allRows, cols) buffer.
template <class T>
RowsMap<T> rowBlock(T* p, std::int64_t allRows, std::int64_t row0, std::int64_t rows, std::int64_t cols)
{
    return RowsMap<T>(p + row0, Index(rows), Index(cols), Eigen::OuterStride<>(Index(allRows)));
}
template <class T>
RowsMap<T> rowBlock(const T* p, std::int64_t allRows, std::int64_t row0, std::int64_t rows, std::int64_t cols)
{
    return rowBlock<T>(const_cast<T*>(p), allRows, row0, rows, cols);
}

} // namespace

template <class T>
void Kernels<T>::ringAttentionProbs(T* att, std::int64_t attRows, std::int64_t row0, T* lse, const T* qkv,
                                    const T* kv, const AttentionShape& s, const int* qpos, const int* kpos)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk, cols = s.probColumns();
    attention_block_probs_forward<T>(pool(), rowBlock<T>(att, attRows, row0, s.Tk, cols), vec(lse, cols),
                                     rowBlock<T>(qkv, r.rows, 0, r.qd, N), rowBlock<T>(kv, r.kv, 0, r.kvd, Nk), s,
                                     qpos, kpos);
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(cols);
    dev_.charge(KernelKind::Attention, {2 * s.countedKeys() * double(r.qd) * n,
                                        (double(r.qd) * n + double(r.kvd) * nk) * e_,
                                        probs * e_ + double(cols) * kStat}, compute_);
}

template <class T>
void Kernels<T>::ringAttentionValues(T* out, const T* att, std::int64_t attRows, std::int64_t row0, const T* kv,
                                     const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk, cols = s.probColumns();
    attention_block_values_forward<T>(pool(), mat(out, r.od, N), rowBlock<T>(att, attRows, row0, s.Tk, cols),
                                      rowBlock<T>(kv, r.kv, r.kvd, r.vvd, Nk), s);
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(cols);
    dev_.charge(KernelKind::Attention, {2 * s.countedKeys() * double(r.od) * n, probs * e_ + double(r.vvd) * nk * e_,
                                        double(r.od) * n * e_}, compute_);
}

template <class T>
void Kernels<T>::ringAttentionMerge(T* out, T* lse, const T* part, const T* part_lse, const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, cols = s.probColumns();
    attention_block_merge<T>(pool(), mat(out, r.od, N), vec(lse, cols), cmat(part, r.od, N), cvec(part_lse, cols), s);
    const double on = double(r.od) * double(N), c = double(cols);
    dev_.charge(KernelKind::Attention, {0, 2 * on * e_ + 2 * c * kStat, on * e_ + c * kStat}, compute_);
}

template <class T>
void Kernels<T>::ringAttentionFinish(T* att, std::int64_t attRows, const T* step_lse, const T* lse, int steps,
                                     const AttentionShape& s)
{
    const std::int64_t cols = s.probColumns();
    for (int i = 0; i < steps; ++i)
        attention_block_renormalize<T>(pool(), rowBlock<T>(att, attRows, std::int64_t(i) * s.Tk, s.Tk, cols),
                                       cvec(step_lse + std::int64_t(i) * cols, cols), cvec(lse, cols), s);
    const double probs = double(attRows) * double(cols), c = double(cols);
    dev_.charge(KernelKind::Attention, {0, probs * e_ + (steps + 1) * c * kStat, probs * e_}, compute_);
    round(att, attRows * cols);
}

template <class T>
void Kernels<T>::ringAttentionDelta(T* delta, const T* dout, const T* out, const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, cols = s.probColumns();
    attention_delta<T>(pool(), vec(delta, cols), cmat(dout, r.od, N), cmat(out, r.od, N), s);
    dev_.charge(KernelKind::Attention, {0, 2 * double(r.od) * double(N) * e_, double(cols) * kStat}, compute_);
}

template <class T>
void Kernels<T>::ringAttentionBackward(T* dqkv, T* dkv, T* datt, const T* dout, const T* att, std::int64_t attRows,
                                       std::int64_t row0, const T* delta, const T* qkv, const T* kv,
                                       const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk, cols = s.probColumns();
    attention_block_backward<T>(pool(), rowBlock<T>(dqkv, r.rows, 0, r.qd, N), rowBlock<T>(dkv, r.kv, 0, r.kvd, Nk),
                                rowBlock<T>(dkv, r.kv, r.kvd, r.vvd, Nk), mat(datt, s.Tk, cols), cmat(dout, r.od, N),
                                rowBlock<T>(att, attRows, row0, s.Tk, cols), cvec(delta, cols),
                                rowBlock<T>(qkv, r.rows, 0, r.qd, N), rowBlock<T>(kv, r.kv, 0, r.kvd, Nk),
                                rowBlock<T>(kv, r.kv, r.kvd, r.vvd, Nk), s);
    // The four products over this block's square, as attentionBackward charges them.
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(cols);
    const double qkvBytes = (double(r.qd) * n + double(r.kv) * nk) * e_;
    dev_.charge(KernelKind::Attention, {4 * s.countedKeys() * double(r.qd + r.od) * n,
                                        qkvBytes + double(r.od) * n * e_ + probs * e_ + double(cols) * kStat,
                                        qkvBytes}, compute_);
}

template <class T>
void Kernels<T>::biasResidual(T* out, const T* red, const T* bias, const T* residual, std::int64_t C, std::int64_t N)
{
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t i = 0; i < C; ++i)
            out[n * C + i] = (red[n * C + i] + (bias ? bias[i] : T(0))) + residual[n * C + i];
    const double c = double(C), n = double(N);
    dev_.charge(KernelKind::Elementwise, {(bias ? ops::kBiasResidualAdd : 1) * c * n,
                                          2 * c * n * e_ + (bias ? c * e_ : 0), c * n * e_}, compute_);
    round(out, C * N);
}

template <class T>
void Kernels<T>::softmaxCrossEntropy(T* probs, T* losses, const int* targets, std::int64_t V, std::int64_t N)
{
    const Eigen::Map<const Eigen::VectorXi> tg(targets, Index(N));
    softmax_crossentropy_forward<T>(pool(), mat(probs, V, N), vec(losses, N), tg);
    chargeCrossEntropy(false, V, N);
}

template <class T>
void Kernels<T>::softmaxCrossEntropyBackward(T* probs, const int* targets, std::int64_t V, std::int64_t N, T dloss)
{
    const Eigen::Map<const Eigen::VectorXi> tg(targets, Index(N));
    crossentropy_softmax_backward<T>(pool(), mat(probs, V, N), cmat(probs, V, N), tg, dloss);
    chargeCrossEntropy(true, V, N);
    round(probs, V * N);
}

template <class T>
void Kernels<T>::embeddingForward(T* out, const T* wte, const T* wpe, bool addPositions, const int* tokens,
                                  const int* positions, std::int64_t C, std::int64_t N, int lo, int rows)
{
    for (std::int64_t n = 0; n < N; ++n) {
        T* col = out + n * C;
        const int tok = tokens[n];
        const bool own = tok >= lo && tok < lo + rows;
        const T* emb = wte + std::int64_t(own ? tok - lo : 0) * C;
        const T* pos = wpe && addPositions ? wpe + std::int64_t(positions[n]) * C : nullptr;
        for (std::int64_t i = 0; i < C; ++i)
            col[i] = (own ? emb[i] : T(0)) + (pos ? pos[i] : T(0));
    }
    const double cn = double(C) * double(N);
    dev_.charge(KernelKind::Embedding,
                {wpe ? ops::kEmbedding.forward * cn : 0, (wpe ? 2 : 1) * cn * e_ + double(N) * 4, cn * e_}, compute_);
}

template <class T>
void Kernels<T>::embeddingBackward(T* dwte, T* dwpe, const T* dout, const int* tokens, const int* positions,
                                   std::int64_t C, std::int64_t N, int lo, int rows)
{
    for (std::int64_t n = 0; n < N; ++n) {
        const T* d = dout + n * C;
        const int tok = tokens[n];
        if (dwpe) {
            T* pos = dwpe + std::int64_t(positions[n]) * C;
            for (std::int64_t i = 0; i < C; ++i)
                pos[i] += d[i];
        }
        if (tok >= lo && tok < lo + rows) {
            T* emb = dwte + std::int64_t(tok - lo) * C;
            for (std::int64_t i = 0; i < C; ++i)
                emb[i] += d[i];
        }
    }
    const double cn = double(C) * double(N), tables = dwpe ? 2 : 1;
    dev_.charge(KernelKind::Embedding, {tables * cn, (1 + tables) * cn * e_, tables * cn * e_}, compute_);
}

template <class T>
void Kernels<T>::tokenTypeForward(T* out, const T* wtt, int types, bool add, const int* ids, std::int64_t C,
                                  std::int64_t N)
{
    if (add)
        token_type_forward<T>(pool(), mat(out, C, N), cmat(wtt, C, types), ids);
    const double cn = double(C) * double(N);
    dev_.charge(KernelKind::Embedding, {ops::kTokenTypeEmbedding.forward * cn, 2 * cn * e_ + double(N) * 4, cn * e_},
                compute_);
    round(out, C * N);
}

template <class T>
void Kernels<T>::tokenTypeBackward(T* dwtt, int types, const T* dout, const int* ids, std::int64_t C, std::int64_t N)
{
    token_type_backward<T>(mat(dwtt, C, types), cmat(dout, C, N), ids);
    const double cn = double(C) * double(N);
    dev_.charge(KernelKind::Embedding, {ops::kTokenTypeEmbedding.backward * cn, 2 * cn * e_, cn * e_}, compute_);
}

template <class T>
void Kernels<T>::tanhForward(T* x, std::int64_t n)
{
    tanh_forward<T>(pool(), vec(x, n), cvec(x, n));
    dev_.charge(KernelKind::Elementwise, {ops::kTanh.forward * double(n), double(n) * e_, double(n) * e_}, compute_);
    round(x, n);
}

template <class T>
void Kernels<T>::tanhBackward(T* dx, const T* out, std::int64_t n)
{
    tanh_backward<T>(pool(), vec(dx, n), cvec(out, n), cvec(dx, n));
    dev_.charge(KernelKind::Elementwise, {ops::kTanh.backward * double(n), 2 * double(n) * e_, double(n) * e_},
                compute_);
    round(dx, n);
}

template <class T>
void Kernels<T>::accumulate(T* dst, const T* src, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i)
        dst[i] += src[i];
    dev_.charge(KernelKind::Elementwise, {double(n), 2 * double(n) * e_, double(n) * e_}, compute_);
    round(dst, n);
}

template <class T>
void Kernels<T>::zero(T* x, std::int64_t count, double element_bytes)
{
    std::fill(x, x + count, T(0));
    chargeZero(count, element_bytes);
}

template <class T>
void Kernels<T>::chargeZero(std::int64_t count, double element_bytes)
{
    dev_.charge(KernelKind::Elementwise, {0, 0, double(count) * (element_bytes > 0 ? element_bytes : e_)}, compute_);
}

template <class T>
void Kernels<T>::chargeCopy(std::int64_t count)
{
    dev_.charge(KernelKind::Elementwise, {0, double(count) * e_, double(count) * e_}, compute_);
}

template <class T>
void Kernels<T>::chargeCrossEntropy(bool backward, std::int64_t V, std::int64_t N)
{
    const double vn = double(V) * double(N);
    if (backward)
        dev_.charge(KernelKind::Softmax, {ops::kSoftmaxCrossEntropy.backward * vn, vn * kStat, vn * e_}, compute_);
    else
        dev_.charge(KernelKind::Softmax,
                    {ops::kSoftmaxCrossEntropy.forward * vn, vn * e_, vn * kStat + double(N) * kStat}, compute_);
}

template <class T>
void Kernels<T>::chargeSquaredNorm(std::int64_t count, double grad_bytes)
{
    const double g = grad_bytes > 0 ? grad_bytes : e_;
    dev_.charge(KernelKind::Optimizer, {ops::kSquaredNorm * double(count), double(count) * g, 0}, compute_);
}

template <class T>
void Kernels<T>::chargeAdamW(std::int64_t count, bool master, double grad_bytes)
{
    // Per parameter: read weight, gradient, m, v (+ master), write weight, m, v (+ master).
    const double p = double(count), ms = master ? 4 : 0, g = grad_bytes > 0 ? grad_bytes : e_;
    dev_.charge(KernelKind::Optimizer, {ops::kAdamW * p, p * (e_ + g + 8 + ms), p * (e_ + 8 + ms)}, compute_);
}

// ---------------------------------------------------------------- attention on separate operands (T5)

template <class T>
void Kernels<T>::attentionProbs(T* att, const AttentionOperands<T>& x, const AttentionShape& s,
                                const ScoreBias<T>& bias)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk;
    attention_probs_forward<T>(pool(), mat(att, s.Tk, s.probColumns()), rowBlock(x.q, x.qRows, 0, r.qd, N),
                               rowBlock(x.kv, x.kvRows, 0, r.kvd, Nk), s, bias);
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(s.probColumns());
    const double table = bias.table ? double(s.NH) * bias.count * e_ : 0;
    dev_.charge(KernelKind::Attention,
                {2 * s.countedKeys() * double(r.qd) * n,
                 (double(r.qd) * n + double(r.kvd) * nk) * e_ + table, probs * e_},
                compute_);
    round(att, s.Tk * std::int64_t(s.probColumns()));
}

template <class T>
void Kernels<T>::attentionValues(T* out, const T* att, const AttentionOperands<T>& x, const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk;
    attention_values_forward<T>(pool(), mat(out, r.od, N), cmat(att, s.Tk, s.probColumns()),
                                rowBlock(x.kv, x.kvRows, r.kvd, r.vvd, Nk), s);
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(s.probColumns());
    dev_.charge(KernelKind::Attention, {2 * s.countedKeys() * double(r.od) * n, probs * e_ + double(r.vvd) * nk * e_,
                                        double(r.od) * n * e_}, compute_);
    round(out, r.od * N);
}

template <class T>
void Kernels<T>::attentionBackward(T* dq, std::int64_t dqRows, T* dkv, std::int64_t dkvRows, T* datt, const T* dout,
                                   const T* att, const AttentionOperands<T>& x, const AttentionShape& s)
{
    const QkvRows r = qkvRows(s);
    const std::int64_t N = std::int64_t(s.B) * s.Tq, Nk = std::int64_t(s.B) * s.Tk;
    attention_backward<T>(pool(), rowBlock(dq, dqRows, 0, r.qd, N), rowBlock(dkv, dkvRows, 0, r.kvd, Nk),
                          rowBlock(dkv, dkvRows, r.kvd, r.vvd, Nk), mat(datt, s.Tk, s.probColumns()),
                          cmat(dout, r.od, N), cmat(att, s.Tk, s.probColumns()), rowBlock(x.q, x.qRows, 0, r.qd, N),
                          rowBlock(x.kv, x.kvRows, 0, r.kvd, Nk), rowBlock(x.kv, x.kvRows, r.kvd, r.vvd, Nk), s);
    // As the fused call: four products over the square.
    const double n = double(N), nk = double(Nk), probs = double(s.Tk) * double(s.probColumns());
    const double qkvBytes = (double(r.qd) * n + double(r.kv) * nk) * e_;
    dev_.charge(KernelKind::Attention, {4 * s.countedKeys() * double(r.qd + r.od) * n,
                                        qkvBytes + double(r.od) * n * e_ + probs * e_,
                                        qkvBytes + probs * e_}, compute_);
    for (std::int64_t c = 0; c < N; ++c)
        round(dq + c * dqRows, r.qd);
    for (std::int64_t c = 0; c < Nk; ++c)
        round(dkv + c * dkvRows, r.kv);
}

template <class T>
void Kernels<T>::relativeBiasBackward(T* dtable, const T* datt, const ScoreBias<T>& bias, const AttentionShape& s)
{
    relative_bias_backward<T>(pool(), dtable, cmat(datt, s.Tk, s.probColumns()), bias, s);
    const double table = double(s.NH) * bias.count * e_;
    dev_.charge(KernelKind::Attention, {0, table, table}, compute_);  // accumulated: rounded with the gradients
}

template <class T>
void Kernels<T>::mlaAssemble(T* qkv, const T* q, const T* kv, const T* kpe, int NH, int Nd, int Pd, int Vd,
                             std::int64_t N)
{
    const std::int64_t qk = Nd + Pd, qd = std::int64_t(NH) * qk, kvIn = Nd + Vd, rows = 2 * qd + std::int64_t(NH) * Vd;
    pool().parallelFor(N, 16, [&](std::int64_t n0, std::int64_t n1) {
        for (std::int64_t n = n0; n < n1; ++n) {
            T* col = qkv + n * rows;
            std::copy_n(q + n * qd, qd, col);
            const T* kvCol = kv + n * NH * kvIn;
            for (int h = 0; h < NH; ++h) {
                std::copy_n(kvCol + h * kvIn, Nd, col + qd + h * qk);                       // k_nope_h
                std::copy_n(kpe + n * Pd, Pd, col + qd + h * qk + Nd);                      // the shared RoPE key
                std::copy_n(kvCol + h * kvIn + Nd, Vd, col + 2 * qd + std::int64_t(h) * Vd);  // v_h
            }
        }
    });
    const double n = double(N);
    dev_.charge(KernelKind::Elementwise,
                {0, (double(qd) + double(NH) * kvIn + Pd) * n * e_, double(rows) * n * e_}, compute_);
}

template <class T>
void Kernels<T>::mlaDisassemble(T* dq, T* dkv, T* dkpe, const T* dqkv, int NH, int Nd, int Pd, int Vd, std::int64_t N)
{
    const std::int64_t qk = Nd + Pd, qd = std::int64_t(NH) * qk, kvIn = Nd + Vd, rows = 2 * qd + std::int64_t(NH) * Vd;
    pool().parallelFor(N, 16, [&](std::int64_t n0, std::int64_t n1) {
        for (std::int64_t n = n0; n < n1; ++n) {
            const T* col = dqkv + n * rows;
            std::copy_n(col, qd, dq + n * qd);
            T* kvCol = dkv + n * NH * kvIn;
            T* pe = dkpe + n * Pd;
            for (int h = 0; h < NH; ++h) {
                std::copy_n(col + qd + h * qk, Nd, kvCol + h * kvIn);
                std::copy_n(col + 2 * qd + std::int64_t(h) * Vd, Vd, kvCol + h * kvIn + Nd);
                const T* k = col + qd + h * qk + Nd;
                for (int i = 0; i < Pd; ++i)  // in head order: the same sum on any layout
                    pe[i] = h == 0 ? k[i] : pe[i] + k[i];
            }
        }
    });
    const double n = double(N);
    dev_.charge(KernelKind::Elementwise,
                {ops::kGradientAdd * double(NH - 1) * Pd * n, double(rows) * n * e_,
                 (double(qd) + double(NH) * kvIn + Pd) * n * e_},
                compute_);
    round(dkpe, Pd * N);
}

template <class T>
void Kernels<T>::copyRows(T* dst, std::int64_t dstRows, std::int64_t dstRow0, const T* src, std::int64_t srcRows,
                          std::int64_t srcRow0, std::int64_t rows, std::int64_t N)
{
    pool().parallelFor(N, 64, [&](std::int64_t n0, std::int64_t n1) {
        for (std::int64_t n = n0; n < n1; ++n)
            std::copy_n(src + n * srcRows + srcRow0, rows, dst + n * dstRows + dstRow0);
    });
    chargeCopy(rows * N);
}

template <class T>
void Kernels<T>::scale(T* x, std::int64_t count, double factor)
{
    const T f = T(factor);
    for (std::int64_t i = 0; i < count; ++i)
        x[i] *= f;
    dev_.charge(KernelKind::Elementwise, {ops::kScale * double(count), double(count) * e_, double(count) * e_}, compute_);
    round(x, count);
}

template class Kernels<float>;
template class Kernels<double>;

} // namespace shardscope::engine
