// The engine's ops (engine/Ops.h) against two independent references:
// - the naive scalar kernels of OpsReference.h (float, random inputs, 1 and 2
//   kernel threads): fast == naive up to fp32 reordering;
// - central finite differences in double precision: every backward is the
//   derivative of its forward. The scalar checked is sum(R .* out) for a fixed
//   random R, so the analytic gradient is backward(dout = R).
#include "GemmIsa.h"
#include "Ops.h"
#include "OpsKernels.h"
#include "OpsReference.h"
#include "Random.h"
#include "Bf16.h"

#include <QTest>

#include <cmath>
#include <functional>
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

Eigen::VectorXi randomTokens(Eigen::Index n, int vocab, std::uint64_t seed)
{
    Rng rng(seed);
    Eigen::VectorXi t(n);
    for (Eigen::Index i = 0; i < n; ++i)
        t(i) = int(rng.below(std::uint32_t(vocab)));
    return t;
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

constexpr double kFdTol = 1e-7;   // double precision, h = 1e-5: truncation ~1e-10
constexpr double kFloatTol = 2e-5;  // fast vs naive in float: reordered sums

} // namespace

class TstEngineOps : public QObject {
    Q_OBJECT

private slots:
    void gemmMatchesNaive_data()
    {
        QTest::addColumn<int>("threads");
        QTest::addColumn<bool>("transA");
        QTest::addColumn<bool>("transB");
        QTest::addColumn<bool>("accumulate");
        for (int threads : {1, 2})
            for (bool ta : {false, true})
                for (bool tb : {false, true})
                    for (bool acc : {false, true})
                        QTest::newRow(qPrintable(QString("threads=%1 %2%3%4").arg(threads).arg(ta ? "At" : "A")
                                                     .arg(tb ? "Bt" : "B").arg(acc ? " +=" : " =")))
                            << threads << ta << tb << acc;
    }
    void gemmMatchesNaive()
    {
        QFETCH(int, threads);
        QFETCH(bool, transA);
        QFETCH(bool, transB);
        QFETCH(bool, accumulate);
        KernelPool pool(threads);
        // Both split directions: a tall product (rows split) and a wide one (columns split).
        for (auto [M, N, K] : {std::array{131, 67, 75}, std::array{45, 143, 96}, std::array{5, 3, 2}}) {
            const Mat<float> a = transA ? randomMat<float>(K, M, 1) : randomMat<float>(M, K, 1);
            const Mat<float> b = transB ? randomMat<float>(N, K, 2) : randomMat<float>(K, N, 2);
            const Mat<float> c0 = randomMat<float>(M, N, 3);
            Mat<float> c = c0;
            gemm<float>(pool, c, a, transA, b, transB, accumulate);
            Mat<double> expected(M, N);
            for (int i = 0; i < M; ++i)
                for (int j = 0; j < N; ++j) {
                    double acc = accumulate ? double(c0(i, j)) : 0.0;
                    for (int k = 0; k < K; ++k)
                        acc += double(transA ? a(k, i) : a(i, k)) * double(transB ? b(j, k) : b(k, j));
                    expected(i, j) = acc;
                }
            QVERIFY2(relDiff(c.cast<double>(), expected) < kFloatTol, qPrintable(QString::number(M)));
        }
    }

    // The same bits on every thread count (the engine's bf16 runs reproduce themselves across
    // thread counts): products large enough to split, rows (tall) and columns (wide), with the
    // sizes that leave one trailing row or column to a thread (GEMV in Eigen, summed in another
    // order) and row blocks that change Eigen's row kernels (3, 2 and 1 packets).
    void gemmIsTheSameOnEveryThreadCount()
    {
        KernelPool one(1), two(2), three(3), four(4);
        for (auto [M, N, K] : {std::array{131, 67, 300}, std::array{45, 9, 700}, std::array{45, 17, 700},
                               std::array{97, 33, 500}, std::array{16 * 3 + 1, 40, 600}, std::array{40, 200, 257},
                               std::array{300, 257, 64}})
            for (bool transA : {false, true})
                for (bool transB : {false, true}) {
                    const Mat<float> a = transA ? randomMat<float>(K, M, 1) : randomMat<float>(M, K, 1);
                    const Mat<float> b = transB ? randomMat<float>(N, K, 2) : randomMat<float>(K, N, 2);
                    Mat<float> reference = Mat<float>::Zero(M, N);
                    gemm<float>(one, reference, a, transA, b, transB, false);
                    for (KernelPool* pool : {&two, &three, &four}) {
                        Mat<float> c = Mat<float>::Zero(M, N);
                        gemm<float>(*pool, c, a, transA, b, transB, false);
                        QVERIFY2(c == reference, qPrintable(QString("%1x%2x%3 %4%5, %6 threads: max diff %7")
                                                               .arg(M).arg(N).arg(K)
                                                               .arg(transA ? "At" : "A").arg(transB ? "Bt" : "B")
                                                               .arg(pool->threads())
                                                               .arg((c - reference).cwiseAbs().maxCoeff())));
                    }
                }
    }

    // Tall products (a vocabulary head's) run in row chunks of kGemmRowChunk, multiples of 48, so
    // that Eigen's pack of op(a) stays small: the same bits on every thread count still, the chunk
    // left with one row joined to the one before (not Eigen's GEMV), and the naive product's values.
    void tallGemmIsChunkedWithTheSameBits()
    {
        using detail::kGemmRowChunk;
        QCOMPARE(kGemmRowChunk % 48, std::int64_t(0));
        KernelPool one(1), two(2), three(3);
        for (const int M : {int(kGemmRowChunk) + 1, 2 * int(kGemmRowChunk) + 49})
            for (bool transA : {false, true}) {
                const int N = 17, K = 64;
                const Mat<float> a = transA ? randomMat<float>(K, M, 1) : randomMat<float>(M, K, 1);
                const Mat<float> b = randomMat<float>(K, N, 2);
                Mat<float> reference = Mat<float>::Zero(M, N);
                gemm<float>(one, reference, a, transA, b, false, false);
                const Mat<double> exact = (transA ? Mat<double>(a.cast<double>().transpose()) : a.cast<double>()) *
                                          b.cast<double>();
                QVERIFY(relDiff(reference.cast<double>(), exact) < kFloatTol);
                for (KernelPool* pool : {&two, &three}) {
                    Mat<float> c = Mat<float>::Zero(M, N);
                    gemm<float>(*pool, c, a, transA, b, false, false);
                    QVERIFY2(c == reference, qPrintable(QString("%1 rows, %2 threads").arg(M).arg(pool->threads())));
                }
            }
    }

    // A portable build's per-level kernels (GemmIsa.h), every level this CPU supports: GEMM
    // blocks inside larger matrices (column strides larger than the rows) and the softmax, in
    // float and double.
    void levelKernelsMatchNaive()
    {
        const std::vector<isa::LevelKernels> levels = isa::supportedLevelKernels();
        if (levels.empty())
            QSKIP("a native build (SHARDSCOPE_NATIVE=ON) or a CPU without AVX2: no per-level kernels");
        if (qEnvironmentVariableIsEmpty("SHARDSCOPE_ENGINE_ISA"))
            QCOMPARE(QByteArray(isa::levelKernels().level), QByteArray(levels.front().level));
        const int M = 37, N = 29, K = 41, pad = 5;
        for (const isa::LevelKernels& level : levels)
            for (bool transA : {false, true})
                for (bool transB : {false, true})
                    for (bool accumulate : {false, true}) {
                        const Mat<double> a = transA ? randomMat<double>(K + pad, M, 1) : randomMat<double>(M + pad, K, 1);
                        const Mat<double> b = transB ? randomMat<double>(N + pad, K, 2) : randomMat<double>(K + pad, N, 2);
                        const Mat<double> c0 = randomMat<double>(M + pad, N, 3);
                        Mat<double> expected = c0;
                        for (int i = 0; i < M; ++i)
                            for (int j = 0; j < N; ++j) {
                                double acc = accumulate ? c0(i, j) : 0.0;
                                for (int k = 0; k < K; ++k)
                                    acc += (transA ? a(k, i) : a(i, k)) * (transB ? b(j, k) : b(k, j));
                                expected(i, j) = acc;
                            }
                        Mat<double> c64 = c0;
                        level.f64({c64.data(), c64.rows(), a.data(), a.rows(), b.data(), b.rows(), M, N, K, transA,
                                   transB, accumulate});
                        Mat<float> c32 = c0.cast<float>();
                        const Mat<float> a32 = a.cast<float>(), b32 = b.cast<float>();
                        level.f32({c32.data(), c32.rows(), a32.data(), a32.rows(), b32.data(), b32.rows(), M, N, K,
                                   transA, transB, accumulate});
                        const QString what = QStringLiteral("%1 %2%3%4").arg(QLatin1String(level.level),
                            transA ? "At" : "A", transB ? "Bt" : "B", accumulate ? " +=" : " =");
                        QVERIFY2(relDiff(c64, expected) < 1e-12, qPrintable(what));
                        QVERIFY2(relDiff(c32.cast<double>(), expected) < kFloatTol, qPrintable(what));
                        // The padding rows below the block are untouched.
                        QCOMPARE(c64.bottomRows(pad), c0.bottomRows(pad));
                    }
        // The softmax of a long column (a vocabulary's logits), with a scale (attention's).
        const Vec<double> x = randomVec<double>(5003, 4, 3.0);
        for (const isa::LevelKernels& level : levels)
            for (double scale : {1.0, 0.125}) {
                const double mx = x.maxCoeff();
                const Vec<double> e = ((x.array() - mx) * scale).exp().matrix();
                const Vec<double> expected = e / e.sum();
                Vec<double> y64 = x;
                double max64 = 0, sum64 = 0;
                level.softmax64(y64.data(), y64.size(), scale, &max64, &sum64);
                Vec<float> y32 = x.cast<float>();
                float max32 = 0, sum32 = 0;
                level.softmax32(y32.data(), y32.size(), float(scale), &max32, &sum32);
                const QString what = QStringLiteral("%1 softmax scale %2").arg(QLatin1String(level.level)).arg(scale);
                QVERIFY2(relDiff(y64, expected) < 1e-12, qPrintable(what));
                QVERIFY2(relDiff(y32.cast<double>(), expected) < kFloatTol, qPrintable(what));
                QCOMPARE(max64, mx);
                QVERIFY2(std::abs(sum64 / e.sum() - 1) < 1e-12, qPrintable(what));
                QVERIFY2(std::abs(double(sum32) / e.sum() - 1) < kFloatTol, qPrintable(what));
            }
    }

    void matmulMatchesNaive_data()
    {
        QTest::addColumn<int>("threads");
        QTest::newRow("1 thread") << 1;
        QTest::newRow("2 threads") << 2;
    }
    void matmulMatchesNaive()
    {
        QFETCH(int, threads);
        KernelPool pool(threads);
        const int IC = 72, OC = 96, N = 80;
        const Mat<float> inp = randomMat<float>(IC, N, 1), w = randomMat<float>(IC, OC, 2, 0.1);
        const Vec<float> bias = randomVec<float>(OC, 3);
        const Mat<float> residual = randomMat<float>(OC, N, 4), dout = randomMat<float>(OC, N, 5);
        Mat<float> out(OC, N), outRef(OC, N);
        matmul_forward<float>(pool, out, inp, w, bias, residual);
        reference::matmul_forward<float>(outRef, inp, w, bias, residual);
        QVERIFY(relDiff(out, outRef) < kFloatTol);

        Mat<float> dinp(IC, N), dinpRef(IC, N);
        Mat<float> dw = randomMat<float>(IC, OC, 6), dwRef = dw;  // accumulates onto what is there
        Vec<float> db = randomVec<float>(OC, 7), dbRef = db;
        matmul_backward<float>(pool, dinp, dw, db, dout, inp, w);
        reference::matmul_backward<float>(dinpRef, dwRef, dbRef, dout, inp, w);
        QVERIFY(relDiff(dinp, dinpRef) < kFloatTol);
        QVERIFY(relDiff(dw, dwRef) < kFloatTol);
        QVERIFY(relDiff(db, dbRef) < kFloatTol);
    }

    void matmulBackwardIsItsDerivative()
    {
        KernelPool pool(2);
        const int IC = 5, OC = 7, N = 6;
        Mat<double> inp = randomMat<double>(IC, N, 1), w = randomMat<double>(IC, OC, 2);
        Mat<double> bias = randomMat<double>(OC, 1, 3), residual = randomMat<double>(OC, N, 4);
        const Mat<double> R = randomMat<double>(OC, N, 5);
        auto loss = [&] {
            Mat<double> out(OC, N);
            matmul_forward<double>(pool, out, inp, w, bias.col(0), residual);
            return (out.array() * R.array()).sum();
        };
        Mat<double> dinp(IC, N), dw = Mat<double>::Zero(IC, OC);
        Vec<double> db = Vec<double>::Zero(OC);
        matmul_backward<double>(pool, dinp, dw, db, R, inp, w);
        QVERIFY(fdCheck(inp, dinp, loss) < kFdTol);
        QVERIFY(fdCheck(w, dw, loss) < kFdTol);
        QVERIFY(fdCheck(bias, db, loss) < kFdTol);
        QVERIFY(fdCheck(residual, R, loss) < kFdTol);  // the residual's gradient is dout itself
    }

    void layernormMatchesNaive()
    {
        KernelPool pool(2);
        const int C = 48, N = 37;
        const Mat<float> inp = randomMat<float>(C, N, 1, 3.0), dout = randomMat<float>(C, N, 2);
        const Vec<float> w = randomVec<float>(C, 3), b = randomVec<float>(C, 4);
        Mat<float> out(C, N), outRef(C, N);
        Vec<float> mean(N), rstd(N), meanRef(N), rstdRef(N);
        layernorm_forward<float>(pool, out, mean, rstd, inp, w, b);
        reference::layernorm_forward<float>(outRef, meanRef, rstdRef, inp, w, b);
        QVERIFY(relDiff(out, outRef) < kFloatTol);
        QVERIFY(relDiff(mean, meanRef) < kFloatTol);
        QVERIFY(relDiff(rstd, rstdRef) < kFloatTol);
        // An explicit eps reaches the variance: rstd = 1 / sqrt(var + eps), on a small-variance input.
        {
            const Mat<float> small = randomMat<float>(C, N, 8, 0.05);
            Mat<float> o(C, N), oRef(C, N);
            Vec<float> m(N), r(N), mRef(N), rRef(N), rDefault(N);
            layernorm_forward<float>(pool, o, m, r, small, w, b, 1e-2);
            reference::layernorm_forward<float>(oRef, mRef, rRef, small, w, b, 1e-2);
            QVERIFY(relDiff(o, oRef) < kFloatTol);
            QVERIFY(relDiff(r, rRef) < kFloatTol);
            const double var = (small.col(0).cast<double>().array() - small.col(0).cast<double>().mean()).square().mean();
            QVERIFY(std::fabs(double(r(0)) - 1.0 / std::sqrt(var + 1e-2)) < 1e-5 * double(r(0)));
            layernorm_forward<float>(pool, o, m, rDefault, small, w, b);
            QVERIFY(std::fabs(double(rDefault(0)) - 1.0 / std::sqrt(var + kLayerNormEps)) < 1e-5 * double(rDefault(0)));
        }

        Mat<float> dinp = randomMat<float>(C, N, 5), dinpRef = dinp;  // accumulates
        Vec<float> dw = randomVec<float>(C, 6), dwRef = dw, db = randomVec<float>(C, 7), dbRef = db;
        layernorm_backward<float>(pool, dinp, dw, db, dout, inp, w, mean, rstd);
        reference::layernorm_backward<float>(dinpRef, dwRef, dbRef, dout, inp, w, mean, rstd);
        QVERIFY(relDiff(dinp, dinpRef) < kFloatTol);
        QVERIFY(relDiff(dw, dwRef) < kFloatTol);
        QVERIFY(relDiff(db, dbRef) < kFloatTol);
    }

    void layernormBackwardIsItsDerivative()
    {
        KernelPool pool(1);
        const int C = 6, N = 4;
        Mat<double> inp = randomMat<double>(C, N, 1, 2.0), w = randomMat<double>(C, 1, 2), b = randomMat<double>(C, 1, 3);
        const Mat<double> R = randomMat<double>(C, N, 4);
        auto loss = [&] {
            Mat<double> out(C, N);
            Vec<double> mean(N), rstd(N);
            layernorm_forward<double>(pool, out, mean, rstd, inp, w.col(0), b.col(0));
            return (out.array() * R.array()).sum();
        };
        Mat<double> out(C, N);
        Vec<double> mean(N), rstd(N);
        layernorm_forward<double>(pool, out, mean, rstd, inp, w.col(0), b.col(0));
        // The output's columns have mean b-ish and the normalised part mean 0, variance 1.
        const Mat<double> xhat = (out - b.col(0).replicate(1, N)).array() / w.col(0).replicate(1, N).array();
        QVERIFY(std::fabs(xhat.col(0).mean()) < 1e-9);
        QVERIFY(std::fabs(xhat.col(0).squaredNorm() / C - 1) < 1e-4);  // eps = 1e-5 in the variance
        Mat<double> dinp = Mat<double>::Zero(C, N);
        Vec<double> dw = Vec<double>::Zero(C), db = Vec<double>::Zero(C);
        layernorm_backward<double>(pool, dinp, dw, db, R, inp, w.col(0), mean, rstd);
        QVERIFY(fdCheck(inp, dinp, loss) < kFdTol);
        QVERIFY(fdCheck(w, dw, loss) < kFdTol);
        QVERIFY(fdCheck(b, db, loss) < kFdTol);
    }

    void attentionMatchesNaive_data()
    {
        QTest::addColumn<int>("threads");
        QTest::newRow("1 thread") << 1;
        QTest::newRow("2 threads") << 2;
    }
    void attentionMatchesNaive()
    {
        QFETCH(int, threads);
        KernelPool pool(threads);
        const int B = 3, T = 9, NH = 4, C = 32, N = B * T;
        const Mat<float> qkv = randomMat<float>(3 * C, N, 1), dout = randomMat<float>(C, N, 2);
        Mat<float> att(T, T * B * NH), attRef(T, T * B * NH), out(C, N), outRef(C, N);
        attention_probs_forward<float>(pool, att, qkv, B, T, NH);
        attention_values_forward<float>(pool, out, att, qkv, B, T, NH);
        reference::attention_forward<float>(outRef, attRef, qkv, B, T, NH);
        QVERIFY(relDiff(att, attRef) < kFloatTol);
        QVERIFY(relDiff(out, outRef) < kFloatTol);
        // Causal: nothing above the diagonal; every query's weights sum to 1.
        for (int i = 0; i < B * NH; ++i)
            for (int t1 = 0; t1 < T; ++t1) {
                QCOMPARE(att.middleCols(i * T, T).col(t1).tail(T - t1 - 1).cwiseAbs().sum(), 0.0f);
                QVERIFY(std::fabs(att.middleCols(i * T, T).col(t1).sum() - 1.0f) < 1e-5f);
            }
        Mat<float> dqkv(3 * C, N), dqkvRef(3 * C, N), datt(T, T * B * NH);
        attention_backward<float>(pool, dqkv, datt, dout, att, qkv, B, T, NH);
        reference::attention_backward<float>(dqkvRef, dout, attRef, qkv, B, T, NH);
        QVERIFY(relDiff(dqkv, dqkvRef) < kFloatTol);
    }

    void attentionBackwardIsItsDerivative()
    {
        KernelPool pool(2);
        const int B = 2, T = 5, NH = 2, C = 6, N = B * T;
        Mat<double> qkv = randomMat<double>(3 * C, N, 1);
        const Mat<double> R = randomMat<double>(C, N, 2);
        auto loss = [&] {
            Mat<double> att(T, T * B * NH), out(C, N);
            attention_probs_forward<double>(pool, att, qkv, B, T, NH);
            attention_values_forward<double>(pool, out, att, qkv, B, T, NH);
            return (out.array() * R.array()).sum();
        };
        Mat<double> att(T, T * B * NH), out(C, N), dqkv(3 * C, N), datt(T, T * B * NH);
        attention_probs_forward<double>(pool, att, qkv, B, T, NH);
        attention_backward<double>(pool, dqkv, datt, R, att, qkv, B, T, NH);
        QVERIFY(fdCheck(qkv, dqkv, loss) < kFdTol);
        // Causality: changing the last token's key and value changes only the last output.
        Mat<double> before(C, N), after(C, N);
        attention_values_forward<double>(pool, before, att, qkv, B, T, NH);
        qkv.block(C, T - 1, 2 * C, 1).array() += 1.0;
        attention_probs_forward<double>(pool, att, qkv, B, T, NH);
        attention_values_forward<double>(pool, after, att, qkv, B, T, NH);
        QCOMPARE(Mat<double>(after.leftCols(T - 1)), Mat<double>(before.leftCols(T - 1)));
        QVERIFY((after.col(T - 1) - before.col(T - 1)).cwiseAbs().maxCoeff() > 1e-3);
    }

    void geluMatchesNaiveAndDerivative()
    {
        KernelPool pool(2);
        const int n = 10000;  // several 4096-element blocks and a partial 256-element chunk
        const Vec<float> x = randomVec<float>(n, 1, 3.0), dout = randomVec<float>(n, 2);
        Vec<float> y(n), yRef(n), dx(n), dxRef(n);
        gelu_forward<float>(pool, y, x);
        reference::gelu_forward<float>(yRef, x);
        QVERIFY(relDiff(y, yRef) < kFloatTol);
        gelu_backward<float>(pool, dx, x, dout);
        reference::gelu_backward<float>(dxRef, x, dout);
        QVERIFY(relDiff(dx, dxRef) < kFloatTol);
        // In place (dinp aliases dout), as the model uses it.
        Vec<float> inPlace = dout;
        gelu_backward<float>(pool, inPlace, x, inPlace);
        QVERIFY(relDiff(inPlace, dxRef) < kFloatTol);
        // GeLU(0) = 0, GeLU(x) -> x for large x, -> 0 for very negative x.
        Vec<double> probe(3), out(3);
        probe << 0.0, 10.0, -10.0;
        gelu_forward<double>(pool, out, probe);
        QCOMPARE(out(0), 0.0);
        QVERIFY(std::fabs(out(1) - 10.0) < 1e-9 && std::fabs(out(2)) < 1e-9);

        Mat<double> xd = randomMat<double>(50, 1, 3, 2.0);
        const Vec<double> R = randomVec<double>(50, 4);
        auto loss = [&] {
            Vec<double> o(50);
            gelu_forward<double>(pool, o, xd.col(0));
            return o.dot(R);
        };
        Vec<double> dxd(50);
        gelu_backward<double>(pool, dxd, xd.col(0), R);
        QVERIFY(fdCheck(xd, dxd, loss) < kFdTol);
    }

    void softmaxCrossEntropyMatchesNaiveAndDerivative()
    {
        KernelPool pool(2);
        const int V = 300, N = 17;
        const Mat<float> logits = randomMat<float>(V, N, 1, 4.0);
        const Eigen::VectorXi targets = randomTokens(N, V, 2);
        Mat<float> probs = logits, probsRef(V, N);
        Vec<float> losses(N), lossesRef(N);
        softmax_crossentropy_forward<float>(pool, probs, losses, targets);
        reference::softmax_crossentropy_forward<float>(probsRef, lossesRef, logits, targets);
        QVERIFY(relDiff(probs, probsRef) < kFloatTol);
        QVERIFY(relDiff(losses, lossesRef) < kFloatTol);
        Mat<float> dlogits = probs, dlogitsRef(V, N);  // in place over probs, as the model does
        crossentropy_softmax_backward<float>(pool, dlogits, dlogits, targets, 1.0f / N);
        reference::crossentropy_softmax_backward<float>(dlogitsRef, probsRef, targets, 1.0f / N);
        QVERIFY(relDiff(dlogits, dlogitsRef) < kFloatTol);

        // Mean loss in double against finite differences; huge logits stay finite.
        Mat<double> x = randomMat<double>(7, 5, 3, 3.0);
        x(2, 1) = 800;  // exp would overflow without the max subtraction
        const Eigen::VectorXi tg = randomTokens(5, 7, 4);
        auto loss = [&] {
            Mat<double> p = x;
            Vec<double> l(5);
            softmax_crossentropy_forward<double>(pool, p, l, tg);
            return l.mean();
        };
        QVERIFY(std::isfinite(loss()));
        Mat<double> p = x, d(7, 5);
        Vec<double> l(5);
        softmax_crossentropy_forward<double>(pool, p, l, tg);
        crossentropy_softmax_backward<double>(pool, d, p, tg, 1.0 / 5);
        QVERIFY(fdCheck(x, d, loss) < kFdTol);
    }

    void encoderBackwardIsItsDerivative()
    {
        const int C = 4, V = 6, T = 3, B = 2, N = B * T;
        Mat<double> wte = randomMat<double>(C, V, 1), wpe = randomMat<double>(C, T, 2);
        const Eigen::VectorXi tokens = (Eigen::VectorXi(N) << 1, 4, 1, 0, 5, 1).finished();  // token 1 three times
        const Mat<double> R = randomMat<double>(C, N, 3);
        auto loss = [&] {
            Mat<double> out(C, N);
            encoder_forward<double>(out, tokens, wte, wpe, B, T);
            return (out.array() * R.array()).sum();
        };
        Mat<double> dwte = Mat<double>::Zero(C, V), dwpe = Mat<double>::Zero(C, T);
        encoder_backward<double>(dwte, dwpe, R, tokens, B, T);
        QVERIFY(fdCheck(wte, dwte, loss) < kFdTol);
        QVERIFY(fdCheck(wpe, dwpe, loss) < kFdTol);
        QCOMPARE(dwte.col(2).cwiseAbs().sum(), 0.0);  // token 2 never appears
    }

    void adamwMatchesNaive()
    {
        KernelPool pool(2);
        const int n = 9000;
        Vec<float> w = randomVec<float>(n, 1), g = randomVec<float>(n, 2), m = randomVec<float>(n, 3, 0.1),
                   v = randomVec<float>(n, 4, 0.1).cwiseAbs();
        Vec<float> wRef = w, mRef = m, vRef = v;
        const AdamWSettings s{1e-2, 0.9, 0.95, 1e-8, 0.1};
        adamw_update<float>(pool, w.data(), g.data(), m.data(), v.data(), nullptr, n, s, true, 7, 0.5,
                            WeightRounding::None, 1, 0);
        reference::adamw_update<float>(wRef.data(), g.data(), mRef.data(), vRef.data(), n, s, true, 7, 0.5);
        QVERIFY(relDiff(w, wRef) < kFloatTol);
        QVERIFY(relDiff(m, mRef) < kFloatTol);
        QVERIFY(relDiff(v, vRef) < kFloatTol);
    }

    void adamwClearsTheGradientsItReads()
    {
        // The fused clear changes nothing of the update, zeroes exactly the gradients read, in
        // the fp32 and in the bf16-rounding paths; another buffer than the gradients is refused.
        KernelPool pool(2);
        const int n = 9000;
        const AdamWSettings s{1e-2, 0.9, 0.95, 1e-8, 0.1};
        for (WeightRounding r : {WeightRounding::None, WeightRounding::Bf16NearestEven}) {
            Vec<float> w = randomVec<float>(n, 1), g = randomVec<float>(n + 1, 2), m = randomVec<float>(n, 3, 0.1),
                       v = randomVec<float>(n, 4, 0.1).cwiseAbs();
            Vec<float> w2 = w, g2 = g, m2 = m, v2 = v;
            const float last = g(n);
            adamw_update<float>(pool, w.data(), g.data(), m.data(), v.data(), nullptr, n, s, true, 3, 0.5, r, 1, 0);
            adamw_update<float>(pool, w2.data(), g2.data(), m2.data(), v2.data(), nullptr, n, s, true, 3, 0.5, r, 1, 0,
                                g2.data());
            QCOMPARE(relDiff(w2, w), 0.0);
            QCOMPARE(relDiff(m2, m), 0.0);
            QCOMPARE(relDiff(v2, v), 0.0);
            QCOMPARE(double(g2.head(n).cwiseAbs().maxCoeff()), 0.0);
            QCOMPARE(g2(n), last);  // one past the range: untouched
        }
        Vec<float> w = randomVec<float>(8, 1), g = randomVec<float>(8, 2), m = Vec<float>::Zero(8), v = m, other = g;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 adamw_update<float>(pool, w.data(), g.data(), m.data(), v.data(), nullptr, 8, s, true,
                                                     1, 1.0, WeightRounding::None, 1, 0, other.data()));
    }

    void adamwBiasCorrectionCountsSteps()
    {
        // At step 1 from zero moments the bias-corrected update is lr * g / (|g| + eps),
        // i.e. lr in magnitude whatever the gradient's scale.
        KernelPool pool(1);
        Vec<double> w = Vec<double>::Zero(3), g(3), m = Vec<double>::Zero(3), v = Vec<double>::Zero(3);
        g << 1e-3, -5.0, 200.0;
        const AdamWSettings s{0.01, 0.9, 0.999, 1e-12, 0.0};
        adamw_update<double>(pool, w.data(), g.data(), m.data(), v.data(), nullptr, 3, s, false, 1, 1.0,
                             WeightRounding::None, 1, 0);
        for (int i = 0; i < 3; ++i)
            QVERIFY(std::fabs(w(i) + 0.01 * (g(i) > 0 ? 1 : -1)) < 1e-9);
        // Decoupled weight decay on a zero gradient: w -= lr * wd * w (after the moments' 0/0-free update).
        Vec<double> w2 = Vec<double>::Constant(1, 2.0), g2 = Vec<double>::Zero(1), m2 = Vec<double>::Zero(1),
                    v2 = Vec<double>::Zero(1);
        const AdamWSettings s2{0.1, 0.9, 0.999, 1e-8, 0.5};
        adamw_update<double>(pool, w2.data(), g2.data(), m2.data(), v2.data(), nullptr, 1, s2, true, 3, 1.0,
                             WeightRounding::None, 1, 0);
        QVERIFY(std::fabs(w2(0) - (2.0 - 0.1 * 0.5 * 2.0)) < 1e-12);
    }

    void adamwBf16Rounding()
    {
        KernelPool pool(2);
        const int n = 5000;
        const Vec<float> g = randomVec<float>(n, 2);
        Vec<float> w0 = randomVec<float>(n, 1);
        for (float& x : w0)
            x = roundToBf16NearestEven(x);
        const AdamWSettings s{1e-3, 0.9, 0.95, 1e-8, 0.0};
        auto run = [&](WeightRounding r, std::uint64_t seed, Vec<float>* master) {
            Vec<float> w = w0, m = Vec<float>::Zero(n), v = Vec<float>::Zero(n);
            adamw_update<float>(pool, w.data(), g.data(), m.data(), v.data(), master ? master->data() : nullptr, n, s,
                                false, 1, 1.0, r, seed, 0);
            return w;
        };
        const Vec<float> exact = run(WeightRounding::None, 1, nullptr);
        const Vec<float> rne = run(WeightRounding::Bf16NearestEven, 1, nullptr);
        for (int i = 0; i < n; ++i)
            QCOMPARE(rne(i), roundToBf16NearestEven(exact(i)));
        Vec<float> master = w0;
        const Vec<float> mixed = run(WeightRounding::None, 1, &master);
        QVERIFY(relDiff(master, exact) < 1e-7);
        for (int i = 0; i < n; ++i)
            QCOMPARE(mixed(i), roundToBf16NearestEven(exact(i)));
        // Stochastic: every value is one of the two bf16 neighbours, reproducible under a seed.
        const Vec<float> sr1 = run(WeightRounding::Bf16Stochastic, 7, nullptr);
        QCOMPARE(run(WeightRounding::Bf16Stochastic, 7, nullptr), sr1);
        QVERIFY(run(WeightRounding::Bf16Stochastic, 8, nullptr) != sr1);
        int roundedUp = 0;
        for (int i = 0; i < n; ++i) {
            QCOMPARE(sr1(i), roundToBf16NearestEven(sr1(i)));  // a bf16 value
            QVERIFY(std::fabs(sr1(i) - exact(i)) <= std::fabs(exact(i)) * 0x1p-7f);
            roundedUp += std::fabs(sr1(i)) > std::fabs(exact(i));
        }
        QVERIFY(roundedUp > n / 5 && roundedUp < 4 * n / 5);
        // Whole-update determinism does not depend on the number of threads.
        KernelPool one(1);
        Vec<float> w = w0, m = Vec<float>::Zero(n), v = Vec<float>::Zero(n);
        adamw_update<float>(one, w.data(), g.data(), m.data(), v.data(), nullptr, n, s, false, 1, 1.0,
                            WeightRounding::Bf16Stochastic, 7, 0);
        QCOMPARE(w, sr1);
    }

    void sumOfSquaresIsThreadIndependent()
    {
        const int n = 100003;
        const Vec<float> x = randomVec<float>(n, 9);
        KernelPool one(1), two(2);
        const double a = sum_of_squares<float>(one, x.data(), n), b = sum_of_squares<float>(two, x.data(), n);
        QCOMPARE(a, b);  // bitwise
        QVERIFY(std::fabs(a - x.cast<double>().squaredNorm()) < 1e-4 * a);
    }
};

QTEST_GUILESS_MAIN(TstEngineOps)
#include "tst_engine_ops.moc"
