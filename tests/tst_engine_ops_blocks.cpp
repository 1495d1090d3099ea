// The block kinds' ops (engine/OpsBlocks.h) against independent references:
// - the naive scalar kernels of OpsBlocksReference.h (float, random inputs of odd shapes,
//   1 and 2 kernel threads): fast == naive up to fp32 reordering;
// - central finite differences in double precision: every backward is the derivative of
//   its forward. The scalar checked is sum(R .* out) for a fixed random R, so the analytic
//   gradient is backward(dout = R); accumulating gradients start from random values and
//   overwritten ones from garbage, so both rules are checked;
// - the existing multi-head attention of Ops.h (GQA with NKV = NH is MHA), the algebra of
//   the rotation (RoPE backward is its inverse; scores depend on relative positions only),
//   causal masking, and bitwise independence of the thread count;
// - ring attention (context parallelism): the block kernels against their naive
//   references, and a whole ring of cp devices (load-balanced chunks, K/V blocks visiting,
//   log-sum-exp merges, dK/dV summed for their owners) against the plain attention of the
//   whole sequence;
// - T5's relative position buckets against values worked out by hand from Hugging Face's
//   formula, the relative bias added to the scores (unscaled, as T5 does) against a naive
//   softmax, the bias table's gradient by finite differences, and the cross-attention kernels
//   on separate q and [k v] buffers (Kernels) against the naive reference;
// - QK-norm (Qwen3) on a fused qkv (Kernels) against the naive RMSNorm of each head vector;
// - BERT's own ops (OpsEncoder.h: tanh, token-type embedding) and the cross-entropy's ignored
//   targets (the masked LM's unmasked positions) against naive loops written out here.
#include "Kernels.h"
#include "OpConventions.h"
#include "Ops.h"
#include "EngineTestDevice.h"
#include "OpsBlocks.h"
#include "OpsBlocksReference.h"
#include "OpsEncoder.h"
#include "Random.h"
#include "RelativePosition.h"

#include <QTest>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace shardscope::engine;

namespace {

template <class T>
Mat<T> randomMat(Eigen::Index r, Eigen::Index c, std::uint64_t seed, double scale = 1.0)
{
    Rng rng(seed);
    Mat<T> m(r, c);
    for (Eigen::Index j = 0; j < c; ++j)
        for (Eigen::Index i = 0; i < r; ++i)
            m(i, j) = T(rng.normal() * scale);
    return m;
}
template <class T>
Vec<T> randomVec(Eigen::Index n, std::uint64_t seed, double scale = 1.0)
{
    return randomMat<T>(n, 1, seed, scale);
}

std::vector<int> randomPositions(Eigen::Index n, int below, std::uint64_t seed)
{
    Rng rng(seed);
    std::vector<int> p(static_cast<size_t>(n));
    for (int& x : p)
        x = int(rng.below(std::uint32_t(below)));
    return p;
}

// max |a - b| / max(1, max |b|): relative to the reference's scale.
template <class A, class B>
double relDiff(const A& a, const B& b)
{
    const double scale = std::max(1.0, double(b.cwiseAbs().maxCoeff()));
    return double((a - b).cwiseAbs().maxCoeff()) / scale;
}

// Central differences of loss() with respect to every element of x, compared to `analytic`.
// Returns the largest |numeric - analytic| / max(1, |numeric|).
double fdCheck(Eigen::Ref<Mat<double>> x, const Mat<double>& analytic, const std::function<double()>& loss,
               double h = 1e-5)
{
    if (analytic.rows() != x.rows() || analytic.cols() != x.cols())
        return std::numeric_limits<double>::infinity();
    double worst = 0;
    for (Eigen::Index j = 0; j < x.cols(); ++j)
        for (Eigen::Index i = 0; i < x.rows(); ++i) {
            const double old = x(i, j);
            x(i, j) = old + h;
            const double lp = loss();
            x(i, j) = old - h;
            const double lm = loss();
            x(i, j) = old;
            const double numeric = (lp - lm) / (2 * h);
            worst = std::max(worst, std::fabs(numeric - analytic(i, j)) / std::max(1.0, std::fabs(numeric)));
        }
    return worst;
}

constexpr double kFdTol = 1e-7;     // double precision, h = 1e-5: truncation ~1e-10
constexpr double kFloatTol = 2e-5;  // fast vs naive in float: reordered sums
constexpr double kGarbage = 1e3;    // what overwritten outputs hold before the call

// q, k and v as row blocks of bigger matrices (one padding row above and below), as the
// fused qkv of a model holds them: the kernels must honour the outer stride.
template <class T>
struct AttentionData {
    AttentionShape s;
    Mat<T> qStore, kvStore;  // (1 + NH*hd + 1, B*Tq), (1 + 2*NKV*hd + 1, B*Tk)
    AttentionData(const AttentionShape& shape, std::uint64_t seed, double scale = 1.0) : s(shape)
    {
        qStore = randomMat<T>(qRows() + 2, Eigen::Index(s.B) * s.Tq, seed, scale);
        kvStore = randomMat<T>(kvRows() + vRows() + 2, Eigen::Index(s.B) * s.Tk, seed + 1);
    }
    Eigen::Index qRows() const { return Eigen::Index(s.NH) * s.hd; }
    Eigen::Index kvRows() const { return Eigen::Index(s.NKV) * s.hd; }
    Eigen::Index vRows() const { return Eigen::Index(s.NKV) * s.valueDim(); }    // (MLA: v of its own head size)
    Eigen::Index outRows() const { return Eigen::Index(s.NH) * s.valueDim(); }
    auto q() { return qStore.middleRows(1, qRows()); }
    auto k() { return kvStore.middleRows(1, kvRows()); }
    auto v() { return kvStore.middleRows(1 + kvRows(), vRows()); }
};

// The gradients of q, k, v, in stores of the same padded layout, and the outputs.
template <class T>
struct AttentionGrads {
    Mat<T> dqStore, dkvStore, datt;
    explicit AttentionGrads(const AttentionData<T>& d)
        : dqStore(Mat<T>::Constant(d.qStore.rows(), d.qStore.cols(), T(kGarbage))),
          dkvStore(Mat<T>::Constant(d.kvStore.rows(), d.kvStore.cols(), T(kGarbage))),
          datt(Mat<T>::Constant(d.s.Tk, d.s.probColumns(), T(kGarbage)))
    {
    }
    auto dq(const AttentionData<T>& d) { return dqStore.middleRows(1, d.qRows()); }
    auto dk(const AttentionData<T>& d) { return dkvStore.middleRows(1, d.kvRows()); }
    auto dv(const AttentionData<T>& d) { return dkvStore.middleRows(1 + d.kvRows(), d.vRows()); }
    // The padding rows are untouched.
    bool paddingIntact() const
    {
        return (dqStore.row(0).array() == T(kGarbage)).all() &&
               (dqStore.row(dqStore.rows() - 1).array() == T(kGarbage)).all() &&
               (dkvStore.row(0).array() == T(kGarbage)).all() &&
               (dkvStore.row(dkvStore.rows() - 1).array() == T(kGarbage)).all();
    }
};

AttentionShape shape(int B, int Tq, int Tk, int NH, int NKV, int hd, bool causal)
{
    AttentionShape s;
    s.B = B;
    s.Tq = Tq;
    s.Tk = Tk;
    s.NH = NH;
    s.NKV = NKV;
    s.hd = hd;
    s.causal = causal;
    return s;
}


// Forward (att, out) of the fast kernels.
template <class T>
void attentionForward(KernelPool& pool, AttentionData<T>& d, Mat<T>& att, Mat<T>& out)
{
    att.resize(d.s.Tk, d.s.probColumns());
    out.resize(d.outRows(), Eigen::Index(d.s.B) * d.s.Tq);
    attention_probs_forward<T>(pool, att, d.q(), d.k(), d.s);
    attention_values_forward<T>(pool, out, att, d.v(), d.s);
}

} // namespace

Q_DECLARE_METATYPE(shardscope::engine::AttentionShape)
Q_DECLARE_METATYPE(shardscope::engine::GateKind)

class TstEngineOpsBlocks : public QObject {
    Q_OBJECT

    static void threadRows()
    {
        QTest::addColumn<int>("threads");
        QTest::newRow("1 thread") << 1;
        QTest::newRow("2 threads") << 2;
    }

private slots:
    // ------------------------------------------------------------ RMSNorm

    void rmsnormMatchesNaive_data() { threadRows(); }
    void rmsnormMatchesNaive()
    {
        QFETCH(int, threads);
        KernelPool pool(threads);
        const int C = 37, N = 23;
        const double eps = 1e-6;
        const Mat<float> inp = randomMat<float>(C, N, 1, 3.0), dout = randomMat<float>(C, N, 2);
        const Vec<float> w = randomVec<float>(C, 3);
        Mat<float> out(C, N), outRef(C, N);
        Vec<float> rstd(N), rstdRef(N);
        rmsnorm_forward<float>(pool, out, rstd, inp, w, eps);
        reference::rmsnorm_forward<float>(outRef, rstdRef, inp, w, eps);
        QVERIFY(relDiff(out, outRef) < kFloatTol);
        QVERIFY(relDiff(rstd, rstdRef) < kFloatTol);
        // rstd is 1 / sqrt(mean(x^2) + eps), no mean subtracted.
        const double ms = inp.col(5).cast<double>().squaredNorm() / C;
        QVERIFY(std::fabs(double(rstd(5)) * std::sqrt(ms + eps) - 1) < 1e-5);

        Mat<float> dinp = randomMat<float>(C, N, 4), dinpRef = dinp;  // both accumulate
        Vec<float> dw = randomVec<float>(C, 5), dwRef = dw;
        rmsnorm_backward<float>(pool, dinp, dw, dout, inp, w, rstd);
        reference::rmsnorm_backward<float>(dinpRef, dwRef, dout, inp, w, rstd);
        QVERIFY(relDiff(dinp, dinpRef) < kFloatTol);
        QVERIFY(relDiff(dw, dwRef) < kFloatTol);
    }

    void rmsnormBackwardIsItsDerivative()
    {
        KernelPool pool(2);
        const int C = 7, N = 5;
        const double eps = 1e-5;
        Mat<double> inp = randomMat<double>(C, N, 1, 2.0), w = randomMat<double>(C, 1, 2);
        const Mat<double> R = randomMat<double>(C, N, 3);
        auto loss = [&] {
            Mat<double> out(C, N);
            Vec<double> rstd(N);
            rmsnorm_forward<double>(pool, out, rstd, inp, w.col(0), eps);
            return (out.array() * R.array()).sum();
        };
        Mat<double> out(C, N);
        Vec<double> rstd(N);
        // rstd = 1 / sqrt(mean(x^2) + eps), with an eps large enough to matter.
        rmsnorm_forward<double>(pool, out, rstd, inp, w.col(0), 0.5);
        for (int n = 0; n < N; ++n)
            QVERIFY(std::fabs(rstd(n) - 1 / std::sqrt(inp.col(n).squaredNorm() / C + 0.5)) < 1e-15);
        QVERIFY(relDiff(out.col(1), Vec<double>(inp.col(1).cwiseProduct(w.col(0)) * rstd(1))) < 1e-15);
        // With unit weights every output column has a root mean square of 1 (up to eps).
        rmsnorm_forward<double>(pool, out, rstd, inp, Vec<double>::Ones(C), eps);
        for (int n = 0; n < N; ++n)
            QVERIFY(std::fabs(std::sqrt(out.col(n).squaredNorm() / C) - 1) < 1e-4);
        rmsnorm_forward<double>(pool, out, rstd, inp, w.col(0), eps);
        // Accumulation: dinp and dweight add to what they hold.
        const Mat<double> dinp0 = randomMat<double>(C, N, 4);
        const Vec<double> dw0 = randomVec<double>(C, 5);
        Mat<double> dinp = dinp0;
        Vec<double> dw = dw0;
        rmsnorm_backward<double>(pool, dinp, dw, R, inp, w.col(0), rstd);
        QVERIFY(fdCheck(inp, dinp - dinp0, loss) < kFdTol);
        QVERIFY(fdCheck(w, dw - dw0, loss) < kFdTol);
        // A second call adds the same again.
        const Mat<double> dinp1 = dinp;
        const Vec<double> dw1 = dw;
        rmsnorm_backward<double>(pool, dinp, dw, R, inp, w.col(0), rstd);
        QVERIFY(relDiff(Mat<double>(dinp - dinp1), Mat<double>(dinp1 - dinp0)) < 1e-12);
        QVERIFY(relDiff(Vec<double>(dw - dw1), Vec<double>(dw1 - dw0)) < 1e-12);
    }

    // ------------------------------------------------------------ ReLU

    void reluMatchesNaiveAndDerivative()
    {
        KernelPool pool(2);
        const int n = 10000;  // several 4096-element blocks
        Vec<float> x = randomVec<float>(n, 1, 3.0);
        x(17) = 0.0f;  // relu'(0) is taken as 0
        const Vec<float> dout = randomVec<float>(n, 2);
        Vec<float> y(n), yRef(n), dx(n), dxRef(n);
        relu_forward<float>(pool, y, x);
        reference::relu_forward<float>(yRef, x);
        QCOMPARE(y, yRef);  // exact: no arithmetic
        QCOMPARE(y(17), 0.0f);
        QVERIFY((y.array() >= 0).all() && (y.array() == x.array() || y.array() == 0).all());
        dx.setConstant(float(kGarbage));
        relu_backward<float>(pool, dx, x, dout);
        reference::relu_backward<float>(dxRef, x, dout);
        QCOMPARE(dx, dxRef);
        QCOMPARE(dx(17), 0.0f);
        // In place (dinp aliases dout).
        Vec<float> inPlace = dout;
        relu_backward<float>(pool, inPlace, x, inPlace);
        QCOMPARE(inPlace, dxRef);

        // Finite differences away from the kink.
        Mat<double> xd = randomMat<double>(40, 1, 3);
        for (Eigen::Index i = 0; i < xd.rows(); ++i)
            xd(i, 0) += xd(i, 0) > 0 ? 0.1 : -0.1;
        const Vec<double> R = randomVec<double>(40, 4);
        auto loss = [&] {
            Vec<double> o(40);
            relu_forward<double>(pool, o, xd.col(0));
            return o.dot(R);
        };
        Vec<double> dxd(40);
        relu_backward<double>(pool, dxd, xd.col(0), R);
        QVERIFY(fdCheck(xd, dxd, loss) < kFdTol);
        QVERIFY((dxd.array() == 0).count() > 5 && (dxd.array() == 0).count() < 35);
    }

    // ------------------------------------------------------------ BERT-style encoders

    void tanhMatchesNaiveAndDerivative()
    {
        KernelPool pool(2);
        const int n = 9000;
        const Vec<float> x = randomVec<float>(n, 21, 2.0), dout = randomVec<float>(n, 22);
        Vec<float> y(n), dx(n);
        tanh_forward<float>(pool, y, x);
        dx.setConstant(float(kGarbage));
        tanh_backward<float>(pool, dx, y, dout);
        for (Eigen::Index i = 0; i < n; ++i) {
            const float t = std::tanh(x(i));
            QCOMPARE(y(i), t);
            QCOMPARE(dx(i), (1.0f - t * t) * dout(i));
        }
        Vec<float> inPlace = x;  // out aliases inp, dinp aliases dout
        tanh_forward<float>(pool, inPlace, inPlace);
        QCOMPARE(inPlace, y);
        Vec<float> dInPlace = dout;
        tanh_backward<float>(pool, dInPlace, y, dInPlace);
        QCOMPARE(dInPlace, dx);
        Mat<double> xd = randomMat<double>(30, 1, 23, 1.5);
        const Vec<double> R = randomVec<double>(30, 24);
        auto loss = [&] {
            Vec<double> o(30);
            tanh_forward<double>(pool, o, xd.col(0));
            return o.dot(R);
        };
        Vec<double> o(30), dxd(30);
        tanh_forward<double>(pool, o, xd.col(0));
        tanh_backward<double>(pool, dxd, o, R);
        QVERIFY(fdCheck(xd, dxd, loss) < kFdTol);
    }

    void tokenTypeEmbeddingMatchesNaiveAndDerivative()
    {
        KernelPool pool(2);
        const Eigen::Index C = 7, N = 23, types = 3;
        const std::vector<int> ids = randomPositions(N, int(types), 31);
        const Mat<float> wtt = randomMat<float>(C, types, 32), base = randomMat<float>(C, N, 33);
        Mat<float> out = base;
        token_type_forward<float>(pool, out, wtt, ids.data());
        for (Eigen::Index n = 0; n < N; ++n)
            for (Eigen::Index c = 0; c < C; ++c)
                QCOMPARE(out(c, n), base(c, n) + wtt(c, ids[size_t(n)]));  // added to what is there
        const Mat<float> dout = randomMat<float>(C, N, 34);
        const Mat<float> dwtt0 = randomMat<float>(C, types, 35);
        Mat<float> dwtt = dwtt0, naive = dwtt0;
        token_type_backward<float>(dwtt, dout, ids.data());
        for (Eigen::Index n = 0; n < N; ++n)
            for (Eigen::Index c = 0; c < C; ++c)
                naive(c, ids[size_t(n)]) += dout(c, n);
        QCOMPARE(dwtt, naive);  // accumulated, in token order: bitwise
        // Every type used, and the derivative of sum(R .* out) with respect to the table.
        Mat<double> wd = randomMat<double>(C, types, 36);
        const Mat<double> R = randomMat<double>(C, N, 37);
        auto loss = [&] {
            Mat<double> o = Mat<double>::Zero(C, N);
            token_type_forward<double>(pool, o, wd, ids.data());
            return (o.array() * R.array()).sum();
        };
        Mat<double> dwd = Mat<double>::Zero(C, types);
        token_type_backward<double>(dwd, R, ids.data());
        QVERIFY(fdCheck(wd, dwd, loss) < kFdTol);
        for (Eigen::Index t = 0; t < types; ++t)
            QVERIFY(dwd.col(t).cwiseAbs().sum() > 0);
    }

    // The masked LM predicts only its masked positions: a negative target has no loss and no gradient.
    void crossEntropyIgnoresNegativeTargets()
    {
        KernelPool pool(2);
        const Eigen::Index V = 11, N = 9;
        const Mat<double> logits = randomMat<double>(V, N, 41, 2.0);
        std::vector<int> tg = randomPositions(N, int(V), 42);
        for (size_t n : {1u, 4u, 5u})
            tg[n] = -1;
        const Eigen::Map<const Eigen::VectorXi> targets(tg.data(), N);
        Mat<double> probs = logits;
        Vec<double> losses(N);
        softmax_crossentropy_forward<double>(pool, probs, losses, targets);
        Mat<double> dlogits(V, N);
        crossentropy_softmax_backward<double>(pool, dlogits, probs, targets, 0.25);
        for (Eigen::Index n = 0; n < N; ++n) {
            const Vec<double> e = (logits.col(n).array() - logits.col(n).maxCoeff()).exp();
            const Vec<double> p = e / e.sum();
            QVERIFY(relDiff(probs.col(n), p) < 1e-14);  // the softmax is computed for every column
            if (tg[size_t(n)] < 0) {
                QCOMPARE(losses(n), 0.0);
                QVERIFY((dlogits.col(n).array() == 0).all());
            } else {
                QVERIFY(std::fabs(losses(n) + std::log(p(tg[size_t(n)]))) < 1e-12);
                Vec<double> expected = p * 0.25;
                expected(tg[size_t(n)]) -= 0.25;
                QVERIFY(relDiff(dlogits.col(n), expected) < 1e-14);
            }
        }
    }

    // ------------------------------------------------------------ gated MLPs

    void gatedMatchesNaive_data()
    {
        QTest::addColumn<GateKind>("kind");
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("F");
        for (GateKind kind : {GateKind::SiLU, GateKind::GeLU})
            for (int threads : {1, 2})
                for (int F : {37, 300})  // 300: crosses the 256-value stack chunk
                    QTest::newRow(qPrintable(QStringLiteral("%1 threads=%2 F=%3")
                                                 .arg(kind == GateKind::SiLU ? "SwiGLU" : "GeGLU")
                                                 .arg(threads)
                                                 .arg(F)))
                        << kind << threads << F;
    }
    void gatedMatchesNaive()
    {
        QFETCH(GateKind, kind);
        QFETCH(int, threads);
        QFETCH(int, F);
        KernelPool pool(threads);
        const int N = 23;
        const Mat<float> inp = randomMat<float>(2 * F, N, 1, 3.0), dout = randomMat<float>(F, N, 2);
        Mat<float> out(F, N), outRef(F, N);
        gated_forward<float>(pool, out, inp, kind);
        reference::gated_forward<float>(outRef, inp, kind);
        QVERIFY(relDiff(out, outRef) < kFloatTol);
        Mat<float> dinp = Mat<float>::Constant(2 * F, N, float(kGarbage)), dinpRef(2 * F, N);
        gated_backward<float>(pool, dinp, inp, dout, kind);
        reference::gated_backward<float>(dinpRef, inp, dout, kind);
        QVERIFY(relDiff(dinp, dinpRef) < kFloatTol);
    }

    void gatedActivationsAreSiluAndGelu()
    {
        KernelPool pool(1);
        // GeGLU with up = 1 is Ops.h's tanh GeLU of the gate.
        const int F = 50, N = 3;
        Mat<double> inp(2 * F, N);
        inp.topRows(F) = randomMat<double>(F, N, 1, 3.0);
        inp.bottomRows(F).setOnes();
        Mat<double> out(F, N), gelu(F, N);
        gated_forward<double>(pool, out, inp, GateKind::GeLU);
        const Mat<double> gate = inp.topRows(F);
        gelu_forward<double>(pool, Eigen::Map<Vec<double>>(gelu.data(), F * N),
                             Eigen::Map<const Vec<double>>(gate.data(), F * N));
        QVERIFY(relDiff(out, gelu) < 1e-14);
        // SwiGLU: silu(g) * u = g * sigmoid(g) * u, by value.
        Mat<double> probe(6, 1), o(3, 1);
        probe << 0.0, 1.0, -30.0, 5.0, 2.0, 1.0;  // gates 0, 1, -30; ups 5, 2, 1
        gated_forward<double>(pool, o, probe, GateKind::SiLU);
        QCOMPARE(o(0, 0), 0.0);
        QVERIFY(std::fabs(o(1, 0) - 2.0 / (1.0 + std::exp(-1.0))) < 1e-15);
        QVERIFY(std::fabs(o(2, 0)) < 1e-11);
        // Very negative gates stay finite in float (exp(-g) overflows to inf: silu -> 0).
        Mat<float> big(2, 1), ob(1, 1), db(2, 1);
        big << -200.0f, 3.0f;
        gated_forward<float>(pool, ob, big, GateKind::SiLU);
        QCOMPARE(std::fabs(ob(0, 0)), 0.0f);
        gated_backward<float>(pool, db, big, Mat<float>::Ones(1, 1), GateKind::SiLU);
        QVERIFY(db.allFinite());
    }

    void gatedBackwardIsItsDerivative_data()
    {
        QTest::addColumn<GateKind>("kind");
        QTest::newRow("SwiGLU") << GateKind::SiLU;
        QTest::newRow("GeGLU") << GateKind::GeLU;
    }
    void gatedBackwardIsItsDerivative()
    {
        QFETCH(GateKind, kind);
        KernelPool pool(2);
        const int F = 5, N = 4;
        Mat<double> inp = randomMat<double>(2 * F, N, 1, 2.0);
        const Mat<double> R = randomMat<double>(F, N, 2);
        auto loss = [&] {
            Mat<double> out(F, N);
            gated_forward<double>(pool, out, inp, kind);
            return (out.array() * R.array()).sum();
        };
        Mat<double> dinp = Mat<double>::Constant(2 * F, N, kGarbage);  // overwritten
        gated_backward<double>(pool, dinp, inp, R, kind);
        QVERIFY(fdCheck(inp, dinp, loss) < kFdTol);
    }

    // ------------------------------------------------------------ RoPE

    void ropeMatchesNaive_data()
    {
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("hd");
        QTest::addColumn<double>("base");
        for (int threads : {1, 2}) {
            QTest::newRow(qPrintable(QStringLiteral("threads=%1 heads=6 hd=6").arg(threads)))
                << threads << 6 << 6 << 10000.0;
            QTest::newRow(qPrintable(QStringLiteral("threads=%1 heads=2 hd=64 base=5e5").arg(threads)))
                << threads << 2 << 64 << 500000.0;
        }
    }
    void ropeMatchesNaive()
    {
        QFETCH(int, threads);
        QFETCH(int, heads);
        QFETCH(int, hd);
        QFETCH(double, base);
        KernelPool pool(threads);
        const int N = 23, rows = heads * hd;
        const std::vector<int> pos = randomPositions(N, 5000, 7);
        // The key rows of a fused (q, k, v): rotated in place, the other rows untouched.
        const Mat<float> qkv0 = randomMat<float>(3 * rows, N, 1);
        Mat<float> qkv = qkv0, qkvRef = qkv0;
        rope_forward<float>(pool, qkv.middleRows(rows, rows), pos.data(), heads, hd, base);
        reference::rope_forward<float>(qkvRef.middleRows(rows, rows), pos.data(), heads, hd, base);
        QVERIFY(relDiff(qkv, qkvRef) < kFloatTol);
        QVERIFY(relDiff(qkv, qkv0) > 0.1);  // it did rotate
        QCOMPARE(Mat<float>(qkv.topRows(rows)), Mat<float>(qkv0.topRows(rows)));
        QCOMPARE(Mat<float>(qkv.bottomRows(rows)), Mat<float>(qkv0.bottomRows(rows)));
        rope_backward<float>(pool, qkv.middleRows(rows, rows), pos.data(), heads, hd, base);
        reference::rope_backward<float>(qkvRef.middleRows(rows, rows), pos.data(), heads, hd, base);
        QVERIFY(relDiff(qkv, qkvRef) < kFloatTol);
        QVERIFY(relDiff(qkv, qkv0) < 1e-4);  // back where it started (float angles up to 5000 rad)
    }

    void ropePairsRotateHalf()
    {
        KernelPool pool(1);
        const int heads = 2, hd = 4;
        // Column 0 at position 1: head 1's dimension 0 pairs with its dimension 2 (i + hd/2)
        // at angle 1 * base^0 = 1. Column 1 at position 1: head 0's dimension 1 pairs with 3
        // at angle base^(-2/4) = 0.01. Column 2 at position 0: unchanged.
        Mat<double> x = Mat<double>::Zero(heads * hd, 3);
        x(4, 0) = 1.0;
        x(1, 1) = 1.0;
        x.col(2) = randomVec<double>(heads * hd, 1);
        const Mat<double> x0 = x;
        const int pos[3] = {1, 1, 0};
        rope_forward<double>(pool, x, pos, heads, hd, 10000.0);
        Vec<double> e0 = Vec<double>::Zero(heads * hd), e1 = Vec<double>::Zero(heads * hd);
        e0(4) = std::cos(1.0);
        e0(6) = std::sin(1.0);
        e1(1) = std::cos(0.01);
        e1(3) = std::sin(0.01);
        QVERIFY(relDiff(x.col(0), e0) < 1e-15);
        QVERIFY(relDiff(x.col(1), e1) < 1e-15);
        QCOMPARE(Vec<double>(x.col(2)), Vec<double>(x0.col(2)));
        // Odd head sizes have no pairing.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, rope_forward<double>(pool, x, pos, 2, 3, 10000.0));
    }

    void ropeScoresDependOnRelativePosition()
    {
        // q(m) . k(n) after rotation depends on m - n only (RoFormer eq. 16).
        KernelPool pool(1);
        const int hd = 8;
        const Mat<double> q = randomMat<double>(hd, 1, 1), k = randomMat<double>(hd, 1, 2);
        auto score = [&](int m, int n) {
            Mat<double> qr = q, kr = k;
            rope_forward<double>(pool, qr, &m, 1, hd, 10000.0);
            rope_forward<double>(pool, kr, &n, 1, hd, 10000.0);
            return qr.col(0).dot(kr.col(0));
        };
        QVERIFY(std::fabs(score(3, 1) - score(10, 8)) < 1e-12);
        QVERIFY(std::fabs(score(3, 1) - score(503, 501)) < 1e-10);
        QVERIFY(std::fabs(score(3, 1) - score(1, 3)) > 1e-3);  // but not symmetric
    }

    void ropeBackwardIsInverseAndDerivative()
    {
        KernelPool pool(2);
        const int heads = 3, hd = 6, N = 9;
        const std::vector<int> pos = randomPositions(N, 100, 3);
        Mat<double> x = randomMat<double>(heads * hd, N, 1);
        // backward after forward returns the input; the norm is kept.
        Mat<double> y = x;
        rope_forward<double>(pool, y, pos.data(), heads, hd, 10000.0);
        QVERIFY(relDiff(y, x) > 0.1);
        QVERIFY(std::fabs(y.norm() - x.norm()) < 1e-12 * x.norm());
        rope_backward<double>(pool, y, pos.data(), heads, hd, 10000.0);
        QVERIFY(relDiff(y, x) < 1e-13);
        // The gradient of sum(R .* rope(x)).
        const Mat<double> R = randomMat<double>(heads * hd, N, 2);
        auto loss = [&] {
            Mat<double> o = x;
            rope_forward<double>(pool, o, pos.data(), heads, hd, 10000.0);
            return (o.array() * R.array()).sum();
        };
        Mat<double> dx = R;
        rope_backward<double>(pool, dx, pos.data(), heads, hd, 10000.0);
        QVERIFY(fdCheck(x, dx, loss) < kFdTol);
    }

    // ------------------------------------------------------------ grouped-query attention

    void attentionMatchesNaive_data()
    {
        QTest::addColumn<AttentionShape>("s");
        QTest::addColumn<int>("threads");
        for (int threads : {1, 2}) {
            const QString t = QStringLiteral(" threads=%1").arg(threads);
            QTest::newRow(qPrintable("GQA NH=6 NKV=2 causal" + t)) << shape(2, 7, 7, 6, 2, 6, true) << threads;
            QTest::newRow(qPrintable("MQA NH=4 NKV=1 causal" + t)) << shape(2, 9, 9, 4, 1, 6, true) << threads;
            QTest::newRow(qPrintable("GQA bidirectional Tq=5 Tk=9" + t)) << shape(2, 5, 9, 6, 2, 6, false) << threads;
            QTest::newRow(qPrintable("MHA bidirectional Tk=70" + t)) << shape(2, 3, 70, 2, 2, 4, false) << threads;
            QTest::newRow(qPrintable("MQA causal T=70" + t)) << shape(1, 70, 70, 4, 1, 6, true) << threads;
            // MLA's shapes: q/k heads of 6, values of 4, the scores' own scale.
            AttentionShape mla = shape(2, 9, 9, 4, 4, 6, true);
            mla.vd = 4;
            mla.scale = 0.7;
            QTest::newRow(qPrintable("MLA hd=6 vd=4 scale 0.7 causal" + t)) << mla << threads;
            // Sliding windows (Mistral): narrower than T, of one key, and wider than T (all causal keys).
            for (int window : {3, 1, 80}) {
                AttentionShape w = shape(2, 9, 9, 6, 2, 6, true);
                w.window = window;
                QTest::newRow(qPrintable(QStringLiteral("GQA causal sliding window %1").arg(window) + t))
                    << w << threads;
            }
        }
    }
    void attentionMatchesNaive()
    {
        QFETCH(AttentionShape, s);
        QFETCH(int, threads);
        KernelPool pool(threads);
        AttentionData<float> d(s, 1);
        const Mat<float> dout = randomMat<float>(d.outRows(), Eigen::Index(s.B) * s.Tq, 3);
        Mat<float> att, out;
        attentionForward(pool, d, att, out);
        Mat<float> attRef(s.Tk, s.probColumns()), outRef(d.outRows(), Eigen::Index(s.B) * s.Tq);
        reference::attention_probs_forward<float>(attRef, d.q(), d.k(), s);
        reference::attention_values_forward<float>(outRef, attRef, d.v(), s);
        QVERIFY(relDiff(att, attRef) < kFloatTol);
        QVERIFY(relDiff(out, outRef) < kFloatTol);

        AttentionGrads<float> g(d), gRef(d);
        attention_backward<float>(pool, g.dq(d), g.dk(d), g.dv(d), g.datt, dout, att, d.q(), d.k(), d.v(), s);
        reference::attention_backward<float>(gRef.dq(d), gRef.dk(d), gRef.dv(d), gRef.datt, dout, attRef, d.q(),
                                             d.k(), d.v(), s);
        QVERIFY(relDiff(g.dq(d), gRef.dq(d)) < kFloatTol);
        QVERIFY(relDiff(g.dk(d), gRef.dk(d)) < kFloatTol);
        QVERIFY(relDiff(g.dv(d), gRef.dv(d)) < kFloatTol);
        QVERIFY(g.paddingIntact());
        QVERIFY(g.dq(d).cwiseAbs().maxCoeff() < 100);  // no garbage left
        QVERIFY(g.dk(d).cwiseAbs().maxCoeff() < 100 && g.dv(d).cwiseAbs().maxCoeff() < 100);
    }

    void relativeBucketsAreT5s()
    {
        // HF's _relative_position_bucket, 32 buckets, max_distance 128, evaluated by hand.
        // Bidirectional (encoder): 16 buckets a side, 8 exact; keys after the query in 16..31.
        const int enc[][2] = {{0, 0}, {-1, 1}, {-7, 7}, {-8, 8}, {-20, 10}, {-127, 15}, {-128, 15}, {-1000, 15},
                              {1, 17}, {7, 23}, {20, 26}, {500, 31}};
        for (const auto& [relative, bucket] : enc)
            QCOMPARE(relativePositionBucket(relative, true, 32, 128), bucket);
        // Causal (decoder): 32 buckets for keys at or before the query, 16 exact; later keys: 0.
        const int dec[][2] = {{5, 0}, {0, 0}, {-3, 3}, {-15, 15}, {-16, 16}, {-40, 23}, {-127, 31}, {-200, 31}};
        for (const auto& [relative, bucket] : dec)
            QCOMPARE(relativePositionBucket(relative, false, 32, 128), bucket);
        // The (Tq, Tk) table: entry t1 * Tk + t2 is the bucket of t2 - t1.
        const std::vector<int> table = relativePositionBuckets(3, 4, true, 32, 128);
        QCOMPARE(table.size(), size_t(12));
        QCOMPARE(table[1 * 4 + 3], relativePositionBucket(2, true, 32, 128));
        QCOMPARE(table[2 * 4 + 0], relativePositionBucket(-2, true, 32, 128));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, relativePositionBuckets(2, 2, true, 2, 128));
    }

    void relativeBiasMatchesNaive_data()
    {
        QTest::addColumn<bool>("causal");
        QTest::newRow("encoder: bidirectional buckets") << false;
        QTest::newRow("decoder: causal buckets") << true;
    }
    void relativeBiasMatchesNaive()
    {
        // softmax over keys of q . k (no 1/sqrt(hd), T5) + table[h, bucket(key - query)], masked.
        QFETCH(bool, causal);
        AttentionShape s = shape(2, 6, 6, 4, 2, 3, causal);
        s.scale = 1;
        const int nb = 8;
        KernelPool pool(2);
        AttentionData<double> d(s, 21);
        const Mat<double> table = randomMat<double>(nb, s.NH, 22);  // column h: head h's row of the (NH, nb) table
        const std::vector<int> buckets = relativePositionBuckets(s.Tq, s.Tk, !causal, nb, 16);
        const ScoreBias<double> bias{table.data(), buckets.data(), nb};
        Mat<double> att(s.Tk, s.probColumns());
        attention_probs_forward<double>(pool, att, d.q(), d.k(), s, bias);
        double worst = 0;
        for (int b = 0; b < s.B; ++b)
            for (int h = 0; h < s.NH; ++h)
                for (int t1 = 0; t1 < s.Tq; ++t1) {
                    const int g = h / (s.NH / s.NKV);
                    std::vector<double> z(size_t(s.Tk), -INFINITY);
                    double mx = -INFINITY, sum = 0;
                    for (int t2 = 0; t2 < s.Tk; ++t2) {
                        if (causal && t2 > t1)
                            continue;
                        const double qk = (d.q().block(h * s.hd, b * s.Tq + t1, s.hd, 1).array() *
                                           d.k().block(g * s.hd, b * s.Tk + t2, s.hd, 1).array()).sum();
                        z[size_t(t2)] = qk + table(relativePositionBucket(t2 - t1, !causal, nb, 16), h);
                        mx = std::max(mx, z[size_t(t2)]);
                    }
                    for (double v : z)
                        sum += std::exp(v - mx);
                    for (int t2 = 0; t2 < s.Tk; ++t2)
                        worst = std::max(worst, std::fabs(att(t2, (b * s.NH + h) * s.Tq + t1) -
                                                          std::exp(z[size_t(t2)] - mx) / sum));
                }
        QVERIFY2(worst < 1e-14, qPrintable(QString::number(worst)));
    }

    void relativeBiasBackwardIsItsDerivative_data() { relativeBiasMatchesNaive_data(); }
    void relativeBiasBackwardIsItsDerivative()
    {
        // d/d table of sum(R .* out): relative_bias_backward of the scores' gradient; q, k, v too.
        QFETCH(bool, causal);
        AttentionShape s = shape(2, 5, 5, 4, 2, 3, causal);
        s.scale = 1;
        const int nb = 6;
        KernelPool pool(2);
        AttentionData<double> d(s, 31, 0.5);
        Mat<double> table = randomMat<double>(nb, s.NH, 32);
        const std::vector<int> buckets = relativePositionBuckets(s.Tq, s.Tk, !causal, nb, 12);
        const ScoreBias<double> bias{table.data(), buckets.data(), nb};
        const Mat<double> R = randomMat<double>(d.qRows(), Eigen::Index(s.B) * s.Tq, 33);
        auto forward = [&](Mat<double>& att, Mat<double>& out) {
            att.resize(s.Tk, s.probColumns());
            out.resize(d.qRows(), Eigen::Index(s.B) * s.Tq);
            attention_probs_forward<double>(pool, att, d.q(), d.k(), s, bias);
            attention_values_forward<double>(pool, out, att, d.v(), s);
        };
        auto loss = [&] {
            Mat<double> att, out;
            forward(att, out);
            return (out.array() * R.array()).sum();
        };
        Mat<double> att, out;
        forward(att, out);
        AttentionGrads<double> g(d);
        attention_backward<double>(pool, g.dq(d), g.dk(d), g.dv(d), g.datt, R, att, d.q(), d.k(), d.v(), s);
        Mat<double> dtable = randomMat<double>(nb, s.NH, 34);  // accumulated into
        const Mat<double> before = dtable;
        relative_bias_backward<double>(pool, dtable.data(), g.datt, bias, s);
        QVERIFY(fdCheck(table, dtable - before, loss) < kFdTol);
        QVERIFY((dtable - before).cwiseAbs().maxCoeff() > 1e-3);  // the check saw real gradients
        QVERIFY(fdCheck(d.q(), g.dq(d), loss) < kFdTol);
        QVERIFY(fdCheck(d.k(), g.dk(d), loss) < kFdTol);
        QVERIFY(fdCheck(d.v(), g.dv(d), loss) < kFdTol);
    }

    void crossAttentionOnSeparateBuffersMatchesNaive()
    {
        // T5's cross-attention: q (qd, B*Tq) of the decoder, [k | v] (2 kvd, B*Tk) of the encoder,
        // bidirectional, through the Kernels calls the executor makes; against the naive reference.
        const AttentionShape s = shape(2, 5, 5, 4, 2, 3, false);
        EmulatedDevice dev(0, kernelTestProfile(), 2);
        Kernels<double> k(dev, PrecisionMode::FP32);
        const Eigen::Index qd = Eigen::Index(s.NH) * s.hd, kvd = Eigen::Index(s.NKV) * s.hd, N = Eigen::Index(s.B) * s.Tq;
        const Mat<double> q = randomMat<double>(qd, N, 41), kv = randomMat<double>(2 * kvd, N, 42);
        const Mat<double> dout = randomMat<double>(qd, N, 43);
        Mat<double> att(s.Tk, s.probColumns()), out(qd, N), datt(s.Tk, s.probColumns());
        Mat<double> dq = Mat<double>::Constant(qd, N, kGarbage), dkv = Mat<double>::Constant(2 * kvd, N, kGarbage);
        const AttentionOperands<double> x{q.data(), qd, kv.data(), 2 * kvd};
        k.attentionProbs(att.data(), x, s, {});
        k.attentionValues(out.data(), att.data(), x, s);
        k.attentionBackward(dq.data(), qd, dkv.data(), 2 * kvd, datt.data(), dout.data(), att.data(), x, s);
        Mat<double> attRef(s.Tk, s.probColumns()), outRef(qd, N), dattRef(s.Tk, s.probColumns());
        Mat<double> dqRef(qd, N), dkvRef(2 * kvd, N);
        reference::attention_probs_forward<double>(attRef, q, kv.topRows(kvd), s);
        reference::attention_values_forward<double>(outRef, attRef, kv.bottomRows(kvd), s);
        reference::attention_backward<double>(dqRef, dkvRef.topRows(kvd), dkvRef.bottomRows(kvd), dattRef, dout, attRef,
                                              q, kv.topRows(kvd), kv.bottomRows(kvd), s);
        QVERIFY(relDiff(att, attRef) < 1e-13);
        QVERIFY(relDiff(out, outRef) < 1e-13);
        QVERIFY(relDiff(dq, dqRef) < 1e-13);
        QVERIFY(relDiff(dkv, dkvRef) < 1e-13);
        // Charged as the fused self-attention: 2 + 2 products forward, 8 backward per (Tk, Tq, qd).
        QCOMPARE(dev.counters().flops[size_t(KernelKind::Attention)], 12.0 * s.Tk * double(qd) * double(N));
    }

    void slidingWindowMasksKeysBeforeTheBand()
    {
        // Window 3: query t1 sees keys t1 - 2 .. t1 (transformers' kv_idx > q_idx - sliding_window,
        // causal), every other probability exactly 0, each column summing to 1.
        AttentionShape s = shape(1, 6, 6, 2, 1, 4, true);
        s.window = 3;
        KernelPool pool(1);
        AttentionData<double> d(s, 7);
        Mat<double> att, out;
        attentionForward(pool, d, att, out);
        for (Eigen::Index c = 0; c < s.probColumns(); ++c) {
            const int t1 = int(c % s.Tq);
            for (int t2 = 0; t2 < s.Tk; ++t2) {
                const bool visible = t2 <= t1 && t1 - t2 < 3;
                QVERIFY2(visible ? att(t2, c) > 0 : att(t2, c) == 0,
                         qPrintable(QString("key %1 query %2").arg(t2).arg(t1)));
            }
            QVERIFY(std::fabs(att.col(c).sum() - 1) < 1e-14);
        }
        // A bidirectional window is refused by name.
        AttentionShape bidirectional = s;
        bidirectional.causal = false;
        Mat<double> att2(s.Tk, s.probColumns());
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 attention_probs_forward<double>(pool, att2, d.q(), d.k(), bidirectional));
    }

    void qkNormOnFusedQkvMatchesNaive()
    {
        // QK-norm (Qwen3) through the Kernels calls the executor makes, on a fused qkv (qd + 2 kvd, N):
        // each query head (q's weight) and key head (k's) normalised over hd, v untouched; the
        // backward turns the q and k rows' output gradient into the input's. Against the naive
        // RMSNorm of OpsBlocksReference.h applied to each (head, token) vector on its own.
        const int NH = 4, NKV = 2, hd = 6, N = 7;
        const Eigen::Index qd = NH * hd, kvd = NKV * hd, rows = qd + 2 * kvd, qk = qd + kvd;
        const double eps = 1e-6;
        EmulatedDevice dev(0, kernelTestProfile(), 2);
        Kernels<double> k(dev, PrecisionMode::FP32);
        const Mat<double> in = randomMat<double>(rows, N, 51, 2.0), dout = randomMat<double>(rows, N, 52);
        const Vec<double> w = randomVec<double>(2 * hd, 53);
        Mat<double> x = in, pre = Mat<double>::Constant(qk, N, kGarbage);
        Vec<double> rstd = Vec<double>::Constant((NH + NKV) * N, kGarbage);
        const shardscope::NormKind rms = shardscope::NormKind::RmsNorm;
        k.qkNormForward(rms, x.data(), pre.data(), nullptr, rstd.data(), w.data(), nullptr, rows, NH, NKV, hd, N, eps);
        QVERIFY(pre == in.topRows(qk));                  // the input kept for backward
        QVERIFY(x.bottomRows(kvd) == in.bottomRows(kvd));  // v untouched
        Mat<double> dx = dout, scratch(hd, N);
        Vec<double> dw = randomVec<double>(2 * hd, 54), dwRef = dw;
        k.qkNormBackward(rms, dx.data(), scratch.data(), dw.data(), nullptr, pre.data(), w.data(), nullptr, rstd.data(),
                         rows, NH, NKV, hd, N);
        Mat<double> outRef = in, dxRef = dout;
        for (int j = 0; j < NH + NKV; ++j)
            for (int n = 0; n < N; ++n) {
                const Mat<double> v = in.block(j * hd, n, hd, 1), dy = dout.block(j * hd, n, hd, 1);
                const Vec<double> wj = w.segment(j < NH ? 0 : hd, hd);
                Mat<double> o(hd, 1), dv = Mat<double>::Zero(hd, 1);
                Vec<double> rs(1), dwj = Vec<double>::Zero(hd);
                reference::rmsnorm_forward<double>(o, rs, v, wj, eps);
                reference::rmsnorm_backward<double>(dv, dwj, dy, v, wj, rs);
                outRef.block(j * hd, n, hd, 1) = o;
                dxRef.block(j * hd, n, hd, 1) = dv;
                dwRef.segment(j < NH ? 0 : hd, hd) += dwj;
                QVERIFY(std::fabs(rstd(j * N + n) - rs(0)) < 1e-14);
            }
        QVERIFY(relDiff(x, outRef) < 1e-13);
        QVERIFY(relDiff(dx, dxRef) < 1e-13);  // v rows: their gradient as it came
        QVERIFY(relDiff(dw, dwRef) < 1e-13);
        // Charged as a norm over the (NH + NKV) N head vectors, forward and backward.
        const shardscope::ops::ElementFlops f = shardscope::ops::norm(rms);
        QCOMPARE(dev.counters().flops[size_t(KernelKind::LayerNorm)], (f.forward + f.backward) * double(qk) * N);
    }

    void attentionBackwardIsItsDerivative_data()
    {
        QTest::addColumn<AttentionShape>("s");
        QTest::newRow("GQA NH=4 NKV=2 causal") << shape(2, 4, 4, 4, 2, 3, true);
        QTest::newRow("MQA NH=3 NKV=1 causal") << shape(1, 5, 5, 3, 1, 4, true);
        QTest::newRow("GQA bidirectional Tq=3 Tk=5") << shape(2, 3, 5, 4, 2, 2, false);
        QTest::newRow("MHA bidirectional Tq=4 Tk=2") << shape(1, 4, 2, 2, 2, 3, false);
        AttentionShape mla = shape(2, 4, 4, 2, 2, 5, true);
        mla.vd = 3;
        mla.scale = 0.8;
        QTest::newRow("MLA hd=5 vd=3 scale 0.8 causal") << mla;
    }
    void attentionBackwardIsItsDerivative()
    {
        QFETCH(AttentionShape, s);
        KernelPool pool(2);
        AttentionData<double> d(s, 11);
        const Mat<double> R = randomMat<double>(d.outRows(), Eigen::Index(s.B) * s.Tq, 12);
        auto loss = [&] {
            Mat<double> att, out;
            attentionForward(pool, d, att, out);
            return (out.array() * R.array()).sum();
        };
        Mat<double> att, out;
        attentionForward(pool, d, att, out);
        AttentionGrads<double> g(d);  // dq, dk, dv, datt start as garbage: all overwritten
        attention_backward<double>(pool, g.dq(d), g.dk(d), g.dv(d), g.datt, R, att, d.q(), d.k(), d.v(), s);
        QVERIFY(fdCheck(d.q(), g.dq(d), loss) < kFdTol);
        QVERIFY(fdCheck(d.k(), g.dk(d), loss) < kFdTol);
        QVERIFY(fdCheck(d.v(), g.dv(d), loss) < kFdTol);
        QVERIFY(g.paddingIntact());
    }

    void groupedWithAllHeadsIsMultiHead()
    {
        // NKV = NH on a fused qkv (3C, N) is Ops.h's causal multi-head attention.
        KernelPool pool(2);
        const int B = 2, T = 9, NH = 4, hs = 8, C = NH * hs, N = B * T;
        const Mat<float> qkv = randomMat<float>(3 * C, N, 1), dout = randomMat<float>(C, N, 2);
        Mat<float> att(T, T * B * NH), out(C, N), dqkv(3 * C, N), datt(T, T * B * NH);
        attention_probs_forward<float>(pool, att, qkv, B, T, NH);
        attention_values_forward<float>(pool, out, att, qkv, B, T, NH);
        attention_backward<float>(pool, dqkv, datt, dout, att, qkv, B, T, NH);

        const AttentionShape s = shape(B, T, T, NH, NH, hs, true);
        Mat<float> att2(T, s.probColumns()), out2(C, N), dqkv2(3 * C, N), datt2(T, s.probColumns());
        attention_probs_forward<float>(pool, att2, qkv.topRows(C), qkv.middleRows(C, C), s);
        attention_values_forward<float>(pool, out2, att2, qkv.bottomRows(C), s);
        attention_backward<float>(pool, dqkv2.topRows(C), dqkv2.middleRows(C, C), dqkv2.bottomRows(C), datt2, dout,
                                  att2, qkv.topRows(C), qkv.middleRows(C, C), qkv.bottomRows(C), s);
        QVERIFY(relDiff(att2, att) < 1e-6);
        QVERIFY(relDiff(out2, out) < 1e-6);
        QVERIFY(relDiff(dqkv2, dqkv) < 1e-6);
        QVERIFY(dqkv.cwiseAbs().maxCoeff() > 0.1);  // a real comparison, not of zeros
    }

    void causalMasksFutureKeysBidirectionalDoesNot()
    {
        KernelPool pool(2);
        // Causal: att is exactly zero above the diagonal, each column sums to 1, and a change
        // of the last token's key and value changes only the last token's output.
        {
            const AttentionShape s = shape(2, 8, 8, 6, 2, 6, true);
            AttentionData<double> d(s, 1);
            Mat<double> att, before, after;
            attentionForward(pool, d, att, before);
            for (int i = 0; i < s.B * s.NH; ++i)
                for (int t1 = 0; t1 < s.Tq; ++t1) {
                    const auto col = att.middleCols(i * s.Tq, s.Tq).col(t1);
                    for (int t2 = t1 + 1; t2 < s.Tk; ++t2)
                        QCOMPARE(col(t2), 0.0);
                    QVERIFY((col.head(t1 + 1).array() > 0).all());
                    QVERIFY(std::fabs(col.sum() - 1) < 1e-12);
                }
            const int last = s.Tk - 1;  // of sequence 0
            d.k().col(last).array() += 1.0;
            d.v().col(last).array() += 1.0;
            attentionForward(pool, d, att, after);
            QCOMPARE(Mat<double>(after.leftCols(last)), Mat<double>(before.leftCols(last)));
            QVERIFY((after.col(last) - before.col(last)).cwiseAbs().maxCoeff() > 1e-3);
            QCOMPARE(Mat<double>(after.rightCols(s.Tq)), Mat<double>(before.rightCols(s.Tq)));  // sequence 1
            // Causal attention needs Tq == Tk; NH must be a multiple of NKV.
            Mat<double> bad(5, shape(2, 8, 5, 6, 2, 6, true).probColumns());
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                     attention_probs_forward<double>(pool, bad, d.q(), d.k(), shape(2, 8, 5, 6, 2, 6, true)));
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                     attention_probs_forward<double>(pool, att, d.q(), d.k(), shape(2, 8, 8, 6, 4, 6, true)));
        }
        // Bidirectional with Tq != Tk: every key is seen by every query.
        {
            const AttentionShape s = shape(2, 3, 7, 4, 1, 6, false);
            AttentionData<double> d(s, 2);
            Mat<double> att, before, after;
            attentionForward(pool, d, att, before);
            QCOMPARE(att.rows(), Eigen::Index(7));
            QCOMPARE(att.cols(), Eigen::Index(2 * 4 * 3));
            QVERIFY((att.array() > 0).all());
            for (Eigen::Index c = 0; c < att.cols(); ++c)
                QVERIFY(std::fabs(att.col(c).sum() - 1) < 1e-12);
            d.k().col(s.Tk - 1).array() += 1.0;  // the last key of sequence 0
            attentionForward(pool, d, att, after);
            QVERIFY((after.col(0) - before.col(0)).cwiseAbs().maxCoeff() > 1e-3);  // its first query
            QCOMPARE(Mat<double>(after.rightCols(s.Tq)), Mat<double>(before.rightCols(s.Tq)));  // sequence 1
        }
    }

    void attentionSoftmaxIsStable()
    {
        // Scores of order 1e4: exp would overflow without subtracting the max.
        KernelPool pool(2);
        const AttentionShape s = shape(2, 6, 6, 4, 2, 4, true);
        AttentionData<double> d(s, 5, 300.0);
        d.kvStore *= 30.0;
        Mat<double> att, out;
        attentionForward(pool, d, att, out);
        QVERIFY(att.allFinite() && out.allFinite());
        Mat<double> attRef(s.Tk, s.probColumns());
        reference::attention_probs_forward<double>(attRef, d.q(), d.k(), s);
        QVERIFY(relDiff(att, attRef) < 1e-9);
        AttentionData<float> f(s, 5, 300.0);
        f.kvStore *= 30.0f;
        Mat<float> attF, outF;
        attentionForward(pool, f, attF, outF);
        QVERIFY(attF.allFinite() && outF.allFinite());
        for (Eigen::Index c = 0; c < attF.cols(); ++c)
            QVERIFY(std::fabs(attF.col(c).sum() - 1.0f) < 1e-5f);
    }

    // ------------------------------------------------------------ threads

    void resultsDoNotDependOnThreadCount()
    {
        // Every op on a pool of 1 and of 2 threads, bitwise; the shapes split over both threads.
        KernelPool one(1), two(2);
        const int C = 37, N = 23;
        const Mat<float> x = randomMat<float>(C, N, 1, 2.0), dout = randomMat<float>(C, N, 2);
        const Vec<float> w = randomVec<float>(C, 3);
        {
            Mat<float> o1(C, N), o2(C, N), dx1 = randomMat<float>(C, N, 4), dx2 = dx1;
            Vec<float> r1(N), r2(N), dw1 = randomVec<float>(C, 5), dw2 = dw1;
            rmsnorm_forward<float>(one, o1, r1, x, w, 1e-6);
            rmsnorm_forward<float>(two, o2, r2, x, w, 1e-6);
            QCOMPARE(o2, o1);
            QCOMPARE(r2, r1);
            rmsnorm_backward<float>(one, dx1, dw1, dout, x, w, r1);
            rmsnorm_backward<float>(two, dx2, dw2, dout, x, w, r1);
            QCOMPARE(dx2, dx1);
            QCOMPARE(dw2, dw1);
        }
        {
            const Vec<float> v = randomVec<float>(10000, 6), dv = randomVec<float>(10000, 7);
            Vec<float> a(10000), b(10000);
            relu_forward<float>(one, a, v);
            relu_forward<float>(two, b, v);
            QCOMPARE(b, a);
            relu_backward<float>(one, a, v, dv);
            relu_backward<float>(two, b, v, dv);
            QCOMPARE(b, a);
        }
        for (GateKind kind : {GateKind::SiLU, GateKind::GeLU}) {
            const int F = 300;
            const Mat<float> inp = randomMat<float>(2 * F, N, 8), dy = randomMat<float>(F, N, 9);
            Mat<float> o1(F, N), o2(F, N), d1(2 * F, N), d2(2 * F, N);
            gated_forward<float>(one, o1, inp, kind);
            gated_forward<float>(two, o2, inp, kind);
            QCOMPARE(o2, o1);
            gated_backward<float>(one, d1, inp, dy, kind);
            gated_backward<float>(two, d2, inp, dy, kind);
            QCOMPARE(d2, d1);
        }
        {
            const std::vector<int> pos = randomPositions(N, 4096, 10);
            Mat<float> a = randomMat<float>(36, N, 11), b = a;
            rope_forward<float>(one, a, pos.data(), 6, 6, 10000.0);
            rope_forward<float>(two, b, pos.data(), 6, 6, 10000.0);
            QCOMPARE(b, a);
            rope_backward<float>(one, a, pos.data(), 6, 6, 10000.0);
            rope_backward<float>(two, b, pos.data(), 6, 6, 10000.0);
            QCOMPARE(b, a);
        }
        for (const AttentionShape& s : {shape(2, 9, 9, 6, 2, 6, true), shape(1, 70, 70, 4, 1, 6, true),
                                        shape(2, 5, 130, 4, 2, 6, false)}) {
            AttentionData<float> d(s, 12);
            const Mat<float> dy = randomMat<float>(d.qRows(), Eigen::Index(s.B) * s.Tq, 13);
            Mat<float> att1, out1, att2, out2;
            attentionForward(one, d, att1, out1);
            attentionForward(two, d, att2, out2);
            QCOMPARE(att2, att1);
            QCOMPARE(out2, out1);
            AttentionGrads<float> g1(d), g2(d);
            attention_backward<float>(one, g1.dq(d), g1.dk(d), g1.dv(d), g1.datt, dy, att1, d.q(), d.k(), d.v(), s);
            attention_backward<float>(two, g2.dq(d), g2.dk(d), g2.dv(d), g2.datt, dy, att1, d.q(), d.k(), d.v(), s);
            QCOMPARE(g2.dqStore, g1.dqStore);
            QCOMPARE(g2.dkvStore, g1.dkvStore);
            QCOMPARE(g2.datt, g1.datt);
        }
    }

    // ---------------------------------------------------------------- ring attention

    void ringAttentionPiecesMatchNaive()
    {
        KernelPool pool(2);
        // 3 query and 5 key tokens per sequence, GQA 4/2, positions interleaved so that some
        // queries see part of the block, some all of it and some none.
        const AttentionShape s = shape(2, 3, 5, 4, 2, 8, true);
        AttentionData<float> d(s, 11);
        const std::vector<int> qpos{0, 5, 9}, kpos{1, 2, 5, 6, 8};
        Mat<float> attStore = Mat<float>::Constant(s.Tk + 2, s.probColumns(), kGarbage), attRefStore = attStore;
        Vec<float> lse(s.probColumns()), lseRef(s.probColumns());
        auto att = attStore.middleRows(1, s.Tk);
        auto attRef = attRefStore.middleRows(1, s.Tk);
        attention_block_probs_forward<float>(pool, att, lse, d.q(), d.k(), s, qpos.data(), kpos.data());
        reference::attention_block_probs_forward<float>(attRef, lseRef, d.q(), d.k(), s, qpos.data(), kpos.data());
        QVERIFY(relDiff(Mat<float>(att), Mat<float>(attRef)) < 1e-6);
        QCOMPARE(lse(0), -std::numeric_limits<float>::infinity());  // query at 0 sees no key of the block
        QCOMPARE(lseRef(0), -std::numeric_limits<float>::infinity());
        QVERIFY(std::isfinite(lse(1)) && std::fabs(lse(1) - lseRef(1)) < 1e-5);
        for (Eigen::Index c = 1; c < s.probColumns(); c += 3)
            QVERIFY(std::fabs(lse(c) - lseRef(c)) < 1e-5);

        const Eigen::Index N = Eigen::Index(s.B) * s.Tq;
        Mat<float> out(d.qRows(), N), outRef(d.qRows(), N);
        attention_block_values_forward<float>(pool, out, att, d.v(), s);
        reference::attention_block_values_forward<float>(outRef, attRef, d.v(), s);
        QVERIFY(relDiff(out, outRef) < 1e-6);

        // Merge into a running partial whose lse is finite, -inf, or mixed.
        Mat<float> run = randomMat<float>(d.qRows(), N, 12), runRef = run;
        Vec<float> runLse = randomVec<float>(s.probColumns(), 13), runLseRef;
        runLse(2) = -std::numeric_limits<float>::infinity();
        runLseRef = runLse;
        attention_block_merge<float>(pool, run, runLse, out, lse, s);
        reference::attention_block_merge<float>(runRef, runLseRef, outRef, lseRef, s);
        QVERIFY(relDiff(run, runRef) < 1e-6);
        QVERIFY(relDiff(runLse.tail(s.probColumns() - 1), runLseRef.tail(s.probColumns() - 1)) < 1e-6);

        attention_block_renormalize<float>(pool, att, lse, runLse, s);
        reference::attention_block_renormalize<float>(attRef, lseRef, runLseRef, s);
        QVERIFY(relDiff(Mat<float>(att), Mat<float>(attRef)) < 1e-6);
        QVERIFY((attStore.row(0).array() == float(kGarbage)).all());  // rows outside the block untouched

        const Mat<float> dout = randomMat<float>(d.qRows(), N, 14);
        Vec<float> delta(s.probColumns()), deltaRef(s.probColumns());
        attention_delta<float>(pool, delta, dout, run, s);
        reference::attention_delta<float>(deltaRef, dout, runRef, s);
        QVERIFY(relDiff(delta, deltaRef) < 1e-6);

        // Backward accumulates into dq, dk, dv.
        AttentionData<float> g0(s, 15);
        Mat<float> dqS = g0.qStore, dkvS = g0.kvStore, dqRefS = dqS, dkvRefS = dkvS;
        Mat<float> datt(s.Tk, s.probColumns()), dattRef(s.Tk, s.probColumns());
        const Eigen::Index kv = d.kvRows();
        attention_block_backward<float>(pool, dqS.middleRows(1, d.qRows()), dkvS.middleRows(1, kv),
                                        dkvS.middleRows(1 + kv, kv), datt, dout, att, delta, d.q(), d.k(), d.v(), s);
        reference::attention_block_backward<float>(dqRefS.middleRows(1, d.qRows()), dkvRefS.middleRows(1, kv),
                                                   dkvRefS.middleRows(1 + kv, kv), dattRef, dout, attRef, deltaRef,
                                                   d.q(), d.k(), d.v(), s);
        QVERIFY(relDiff(dqS, dqRefS) < 1e-5);
        QVERIFY(relDiff(dkvS, dkvRefS) < 1e-5);
        QVERIFY(relDiff(datt, dattRef) < 1e-5);
    }

    void ringAttentionEqualsPlainAttention_data()
    {
        QTest::addColumn<int>("cp");
        QTest::addColumn<int>("NKV");
        QTest::addColumn<bool>("causal");
        QTest::newRow("cp=2, MHA, causal") << 2 << 4 << true;
        QTest::newRow("cp=4, GQA 4/2, causal") << 4 << 2 << true;
        QTest::newRow("cp=3, MQA, causal") << 3 << 1 << true;
        QTest::newRow("cp=2, GQA 4/2, bidirectional") << 2 << 2 << false;
    }
    // The ring of Megatron-LM's context parallelism (Transformer Engine's AttnFuncWithCPAndKVP2P),
    // emulated in one thread: the sequence cut into 2 cp chunks, rank r holding chunks r and
    // 2cp-1-r; in step i rank r computes against the K/V block of rank (r - i) mod cp. The
    // merged outputs, final probabilities and gradients equal the single-device attention.
    void ringAttentionEqualsPlainAttention()
    {
        QFETCH(int, cp);
        QFETCH(int, NKV);
        QFETCH(bool, causal);
        using M = Mat<double>;
        KernelPool pool(2);
        const int B = 2, NH = 4, hd = 8, chunk = 3, T = 2 * cp * chunk, Tl = T / cp;
        const AttentionShape full = shape(B, T, T, NH, NKV, hd, causal);
        AttentionData<double> d(full, 21);
        M att, out;
        attentionForward(pool, d, att, out);
        const M dout = randomMat<double>(d.qRows(), Eigen::Index(B) * T, 22);
        AttentionGrads<double> g(d);
        attention_backward<double>(pool, g.dq(d), g.dk(d), g.dv(d), g.datt, dout, att, d.q(), d.k(), d.v(), full);

        // Each rank's tokens: positions of chunks r and 2cp-1-r, and its local columns.
        const size_t n = size_t(cp);
        std::vector<std::vector<int>> pos(n);
        for (int r = 0; r < cp; ++r)
            for (int c : {r, 2 * cp - 1 - r})
                for (int j = 0; j < chunk; ++j)
                    pos[size_t(r)].push_back(c * chunk + j);
        auto local = [&](const M& m, int r) {  // (rows, B*T) -> (rows, B*Tl)
            M l(m.rows(), Eigen::Index(B) * Tl);
            for (int b = 0; b < B; ++b)
                for (int j = 0; j < Tl; ++j)
                    l.col(b * Tl + j) = m.col(Eigen::Index(b) * T + pos[size_t(r)][size_t(j)]);
            return l;
        };
        const M q = d.q(), k = d.k(), v = d.v();
        std::vector<M> qs, ks, vs, outs(n), atts(n), dqs(n), dks(n), dvs(n);
        for (int r = 0; r < cp; ++r) {
            qs.push_back(local(q, r));
            ks.push_back(local(k, r));
            vs.push_back(local(v, r));
        }
        const AttentionShape blk = shape(B, Tl, Tl, NH, NKV, hd, causal);
        const Eigen::Index cols = blk.probColumns(), Nl = Eigen::Index(B) * Tl;
        for (int r = 0; r < cp; ++r) {
            M& a = atts[size_t(r)];
            a.resize(T, cols);
            M& o = outs[size_t(r)];
            o.resize(d.qRows(), Nl);
            M part(d.qRows(), Nl);
            Vec<double> lse(cols), partLse(cols);
            std::vector<Vec<double>> stepLse;
            for (int i = 0; i < cp; ++i) {
                const int owner = (r - i + cp) % cp;
                auto rows = a.middleRows(Eigen::Index(i) * Tl, Tl);
                attention_block_probs_forward<double>(pool, rows, i == 0 ? lse : partLse, qs[size_t(r)],
                                                      ks[size_t(owner)], blk, pos[size_t(r)].data(),
                                                      pos[size_t(owner)].data());
                attention_block_values_forward<double>(pool, i == 0 ? o : part, rows, vs[size_t(owner)], blk);
                if (i > 0)
                    attention_block_merge<double>(pool, o, lse, part, partLse, blk);
                stepLse.push_back(i == 0 ? lse : partLse);
            }
            for (int i = 0; i < cp; ++i)
                attention_block_renormalize<double>(pool, a.middleRows(Eigen::Index(i) * Tl, Tl), stepLse[size_t(i)],
                                                    lse, blk);
        }
        for (int r = 0; r < cp; ++r) {
            dqs[size_t(r)] = M::Zero(d.qRows(), Nl);
            dks[size_t(r)] = M::Zero(d.kvRows(), Nl);
            dvs[size_t(r)] = M::Zero(d.kvRows(), Nl);
        }
        for (int r = 0; r < cp; ++r) {
            const M dl = local(dout, r);
            Vec<double> delta(cols);
            attention_delta<double>(pool, delta, dl, outs[size_t(r)], blk);
            M datt(Tl, cols);
            for (int i = 0; i < cp; ++i) {
                const int owner = (r - i + cp) % cp;  // dK, dV go back to the block's owner
                attention_block_backward<double>(pool, dqs[size_t(r)], dks[size_t(owner)], dvs[size_t(owner)], datt, dl,
                                                 atts[size_t(r)].middleRows(Eigen::Index(i) * Tl, Tl), delta,
                                                 qs[size_t(r)], ks[size_t(owner)], vs[size_t(owner)], blk);
            }
        }
        const M dq = g.dq(d), dk = g.dk(d), dv = g.dv(d);
        for (int r = 0; r < cp; ++r) {
            QVERIFY2(relDiff(outs[size_t(r)], local(out, r)) < 1e-12, qPrintable(QString("out, rank %1").arg(r)));
            QVERIFY2(relDiff(dqs[size_t(r)], local(dq, r)) < 1e-12, qPrintable(QString("dq, rank %1").arg(r)));
            QVERIFY2(relDiff(dks[size_t(r)], local(dk, r)) < 1e-12, qPrintable(QString("dk, rank %1").arg(r)));
            QVERIFY2(relDiff(dvs[size_t(r)], local(dv, r)) < 1e-12, qPrintable(QString("dv, rank %1").arg(r)));
            // The stored probabilities are the single device's: step i's rows are the owner's keys.
            for (int i = 0; i < cp; ++i) {
                const int owner = (r - i + cp) % cp;
                for (int b = 0; b < B; ++b)
                    for (int h = 0; h < NH; ++h)
                        for (int t1 = 0; t1 < Tl; ++t1)
                            for (int t2 = 0; t2 < Tl; ++t2) {
                                const double got = atts[size_t(r)](Eigen::Index(i) * Tl + t2, (Eigen::Index(b) * NH + h) * Tl + t1);
                                const double want = att(pos[size_t(owner)][size_t(t2)],
                                                        (Eigen::Index(b) * NH + h) * T + pos[size_t(r)][size_t(t1)]);
                                QVERIFY(std::fabs(got - want) < 1e-12);
                            }
            }
        }
    }

};

QTEST_GUILESS_MAIN(TstEngineOpsBlocks)
#include "tst_engine_ops_blocks.moc"
