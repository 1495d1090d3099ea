// The mixture-of-experts operations (engine/OpsMoe.h) against definitions written out here
// independently and against their own finite differences (double): the router's choice and
// weights (softmax and sigmoid, Megatron-LM d98e8a64 moe_utils.py), the load-balancing loss
// (Switch Transformer: balanced routing gives exactly the coefficient), the permutation by
// expert, dispatch and combine.
#include "Device.h"
#include "EngineTestDevice.h"
#include "Kernels.h"
#include "MoeMlp.h"
#include "OpsMoe.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

using namespace shardscope::engine;

namespace {

std::vector<double> randomValues(size_t n, unsigned seed, double scale = 1.0)
{
    std::mt19937 gen(seed);
    std::normal_distribution<double> d(0.0, scale);
    std::vector<double> v(n);
    for (double& x : v)
        x = d(gen);
    return v;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }


// One token's MLP of the given kind, written out: x (C) -> W_in (C, Fin) -> act -> W_out (F, C).
std::vector<double> naiveMlp(shardscope::MlpKind kind, const double* x, const double* win, const double* wout, int C,
                             int F)
{
    const bool gated = kind == shardscope::MlpKind::SwiGlu || kind == shardscope::MlpKind::GeGlu;
    const int Fin = gated ? 2 * F : F;
    std::vector<double> h(static_cast<size_t>(Fin), 0.0), a(static_cast<size_t>(F)), y(static_cast<size_t>(C), 0.0);
    for (int j = 0; j < Fin; ++j)
        for (int i = 0; i < C; ++i)
            h[size_t(j)] += win[size_t(j) * C + i] * x[i];
    auto gelu = [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); };
    for (int j = 0; j < F; ++j) {
        if (kind == shardscope::MlpKind::Gelu)
            a[size_t(j)] = gelu(h[size_t(j)]);
        else if (kind == shardscope::MlpKind::Relu)
            a[size_t(j)] = std::max(0.0, h[size_t(j)]);
        else if (kind == shardscope::MlpKind::SwiGlu)
            a[size_t(j)] = h[size_t(j)] * sigmoid(h[size_t(j)]) * h[size_t(F + j)];  // [gate | up]
        else
            a[size_t(j)] = gelu(h[size_t(j)]) * h[size_t(F + j)];
    }
    for (int c = 0; c < C; ++c)
        for (int j = 0; j < F; ++j)
            y[size_t(c)] += wout[size_t(c) * F + j] * a[size_t(j)];
    return y;
}

// The largest difference between an analytic gradient and central differences of f, relative
// to the gradient's largest value (entries near zero would otherwise measure rounding only).
template <class F>
double fdError(std::vector<double>& x, const std::vector<double>& analytic, F f)
{
    double worst = 0, scale = 0;
    for (double g : analytic)
        scale = std::max(scale, std::fabs(g));
    const double h = 1e-5;
    for (size_t i = 0; i < x.size(); ++i) {
        const double keep = x[i];
        x[i] = keep + h;
        const double up = f();
        x[i] = keep - h;
        const double down = f();
        x[i] = keep;
        const double numeric = (up - down) / (2 * h);
        worst = std::max(worst, std::fabs(numeric - analytic[i]));
    }
    return scale > 0 ? worst / scale : worst;
}

} // namespace

class TstEngineOpsMoe : public QObject {
    Q_OBJECT

private slots:
    void routerChoosesTheTopKWithTiesToTheLowerIndex()
    {
        const RouterSpec softmax{4, 2, RouterScore::Softmax, 1.0};
        const std::vector<double> logits{1, 3, 3, 0,   // token 0: experts 1 and 2 tie
                                         0, -1, 2, 5};  // token 1: 3 then 2
        std::vector<int> idx(4);
        std::vector<double> w(4);
        router_topk_forward<double>(softmax, logits.data(), 2, nullptr, idx.data(), w.data());
        QCOMPARE(idx, (std::vector<int>{1, 2, 3, 2}));
        QCOMPARE(w[0], 0.5);
        QCOMPARE(w[1], 0.5);
        QVERIFY(std::fabs(w[2] - 1 / (1 + std::exp(-3.0))) < 1e-15);  // softmax of (5, 2)

        // DeepSeek-V3's expert bias steers the choice only: expert 0 wins with +10, its weight
        // is still its own sigmoid share, times the routed scaling factor.
        const RouterSpec sigmoidSpec{4, 2, RouterScore::Sigmoid, 2.5};
        const std::vector<double> bias{10, 0, 0, 0};
        router_topk_forward<double>(sigmoidSpec, logits.data(), 2, bias.data(), idx.data(), w.data());
        QCOMPARE(idx[0], 0);
        QCOMPARE(idx[1], 1);
        const double s0 = sigmoid(1), s1 = sigmoid(3);
        QVERIFY(std::fabs(w[0] - 2.5 * s0 / (s0 + s1 + 1e-20)) < 1e-15);
        QVERIFY(std::fabs(w[0] + w[1] - 2.5) < 1e-14);
    }

    // Group-limited routing (Megatron-LM moe_utils.py group_limited_topk @ d98e8a64): the groups
    // scored by the sum of their best k / g scores, the top k among the best g groups' experts;
    // the load-balancing loss counts the plain top k (compute_routing_scores_for_aux_loss).
    void groupLimitedRoutingChoosesWithinTheBestGroups()
    {
        // Plain top 2 of {5, 0, 4, 3.9} is {0, 2}; the groups {0, 1} and {2, 3} score 5 and 7.9:
        // the token takes experts 2 and 3.
        RouterSpec grouped{4, 2, RouterScore::Softmax, 1.0};
        grouped.groups = 2;
        grouped.group_top_k = 1;
        const std::vector<double> logits{5, 0, 4, 3.9};
        std::vector<int> idx(2);
        std::vector<double> w(2);
        router_topk_forward<double>(grouped, logits.data(), 1, nullptr, idx.data(), w.data());
        QCOMPARE(idx, (std::vector<int>{2, 3}));
        QVERIFY(std::fabs(w[0] - 1 / (1 + std::exp(-0.1))) < 1e-15);  // softmax over the chosen two
        QCOMPARE(tokensPerExpertForAuxLoss<double>(grouped, logits.data(), 1),
                 (std::vector<std::int64_t>{1, 0, 1, 0}));
        // A NaN logit (a diverging run) still counts K distinct experts, every count in range.
        const std::vector<double> nan{std::nan(""), 1, std::nan(""), 2};
        const std::vector<std::int64_t> counted = tokensPerExpertForAuxLoss<double>(grouped, nan.data(), 1);
        QCOMPARE(std::accumulate(counted.begin(), counted.end(), std::int64_t(0)), std::int64_t(2));
        QVERIFY(std::all_of(counted.begin(), counted.end(), [](std::int64_t c) { return c == 0 || c == 1; }));

        // Against a direct transcription of Megatron's steps, every score kind, random logits.
        const int E = 16, G = 4, g = 2, K = 4, N = 64;
        const std::vector<double> many = randomValues(size_t(E * N), 41), bias = randomValues(size_t(E), 42, 0.3);
        for (int kind = 0; kind < 3; ++kind) {
            RouterSpec r{E, K, kind == 2 ? RouterScore::Sigmoid : RouterScore::Softmax, 1.0, kind != 1};
            r.groups = G;
            r.group_top_k = g;
            const double* b = kind == 2 ? bias.data() : nullptr;
            std::vector<int> got(static_cast<size_t>(N * K));
            std::vector<double> gw(static_cast<size_t>(N * K));
            router_topk_forward<double>(r, many.data(), N, b, got.data(), gw.data());
            for (int n = 0; n < N; ++n) {
                const double* l = many.data() + n * E;
                // Megatron's scores for the choice: logits (softmax after the top-k), the softmax
                // (use_pre_softmax), sigmoid + bias.
                double m = *std::max_element(l, l + E), z = 0;
                for (int e = 0; e < E; ++e)
                    z += std::exp(l[e] - m);
                std::vector<double> score(static_cast<size_t>(E));
                for (int e = 0; e < E; ++e)
                    score[size_t(e)] = kind == 0 ? l[e] : kind == 1 ? std::exp(l[e] - m) / z : sigmoid(l[e]) + bias[size_t(e)];
                auto order = [&](std::vector<int> ids, const std::vector<double>& v) {
                    std::stable_sort(ids.begin(), ids.end(), [&](int a, int c) { return v[size_t(a)] > v[size_t(c)]; });
                    return ids;
                };
                std::vector<double> groupScore(static_cast<size_t>(G));
                for (int j = 0; j < G; ++j) {
                    std::vector<int> members;
                    for (int e = j * (E / G); e < (j + 1) * (E / G); ++e)
                        members.push_back(e);
                    const std::vector<int> best = order(members, score);
                    for (int p = 0; p < K / g; ++p)
                        groupScore[size_t(j)] += score[size_t(best[size_t(p)])];
                }
                std::vector<int> groups(static_cast<size_t>(G));
                std::iota(groups.begin(), groups.end(), 0);
                groups = order(groups, groupScore);
                std::vector<int> allowed;
                for (int e = 0; e < E; ++e)
                    if (std::find(groups.begin(), groups.begin() + g, e / (E / G)) != groups.begin() + g)
                        allowed.push_back(e);
                const std::vector<int> chosen = order(allowed, score);
                for (int k = 0; k < K; ++k)
                    QCOMPARE(got[size_t(n * K + k)], chosen[size_t(k)]);
            }
        }

        // Settings Megatron's TransformerConfig refuses, and k beyond the chosen groups' experts.
        auto spec = [](int groups, int groupTopK, int k) {
            RouterSpec r{8, k, RouterScore::Softmax, 1.0};
            r.groups = groups;
            r.group_top_k = groupTopK;
            return r;
        };
        const std::vector<double> zeros(8, 0.0);
        std::vector<int> i8(8);
        std::vector<double> w8(8);
        for (const RouterSpec& bad : {spec(3, 1, 2), spec(4, 5, 4), spec(4, 1, 4), spec(4, 2, 1)})
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument, router_topk_forward<double>(bad, zeros.data(), 1, nullptr,
                                                                                         i8.data(), w8.data()));
        try {
            router_topk_forward<double>(spec(3, 1, 2), zeros.data(), 1, nullptr, i8.data(), w8.data());
        } catch (const std::invalid_argument& e) {
            QVERIFY2(std::string(e.what()).find("3 expert groups must divide the 8 experts") != std::string::npos,
                     e.what());
        }
    }

    void softmaxWeightsAreTheFullSoftmaxRenormalised()
    {
        // Megatron's top-k-then-softmax equals Mixtral's softmax-then-renormalise.
        const int E = 8, K = 2, N = 5;
        const std::vector<double> logits = randomValues(E * N, 3);
        std::vector<int> idx(K * N);
        std::vector<double> w(K * N);
        router_topk_forward<double>({E, K, RouterScore::Softmax, 1.0}, logits.data(), N, nullptr, idx.data(), w.data());
        for (int n = 0; n < N; ++n) {
            const double* l = logits.data() + n * E;
            std::vector<double> p(E);
            double sum = 0;
            for (int e = 0; e < E; ++e)
                sum += (p[size_t(e)] = std::exp(l[e]));
            std::vector<int> byScore(E);
            std::iota(byScore.begin(), byScore.end(), 0);
            std::stable_sort(byScore.begin(), byScore.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
            const double chosen = p[size_t(byScore[0])] + p[size_t(byScore[1])];
            for (int k = 0; k < K; ++k) {
                QCOMPARE(idx[size_t(n * K + k)], byScore[size_t(k)]);
                QVERIFY(std::fabs(w[size_t(n * K + k)] - p[size_t(byScore[size_t(k)])] / chosen) < 1e-14);
            }
        }
    }

    void unnormalisedWeightsAreTheScoresThemselves()
    {
        // Megatron's use_pre_softmax: the softmax over all E, its top-k as they are; sigmoid: s_k.
        const int E = 5, K = 2, N = 3;
        const std::vector<double> logits = randomValues(E * N, 5);
        std::vector<int> idx(K * N);
        std::vector<double> w(K * N);
        router_topk_forward<double>({E, K, RouterScore::Softmax, 1.0, false}, logits.data(), N, nullptr, idx.data(), w.data());
        for (int n = 0; n < N; ++n) {
            double sum = 0;
            for (int e = 0; e < E; ++e)
                sum += std::exp(logits[size_t(n * E + e)]);
            for (int k = 0; k < K; ++k)
                QVERIFY(std::fabs(w[size_t(n * K + k)] - std::exp(logits[size_t(n * E + idx[size_t(n * K + k)])]) / sum) < 1e-15);
        }
        router_topk_forward<double>({E, K, RouterScore::Sigmoid, 2.0, false}, logits.data(), N, nullptr, idx.data(), w.data());
        for (int c = 0; c < K * N; ++c)
            QVERIFY(std::fabs(w[size_t(c)] - 2.0 * sigmoid(logits[size_t((c / K) * E + idx[size_t(c)])])) < 1e-15);
    }

    void routerGradientsMatchFiniteDifferences_data()
    {
        QTest::addColumn<int>("score");
        QTest::addColumn<int>("topK");
        QTest::addColumn<double>("scaling");
        QTest::addColumn<bool>("normalize");
        QTest::addRow("softmax top-2") << int(RouterScore::Softmax) << 2 << 1.0 << true;
        QTest::addRow("softmax top-1") << int(RouterScore::Softmax) << 1 << 1.0 << true;
        QTest::addRow("softmax top-2 not normalised") << int(RouterScore::Softmax) << 2 << 1.0 << false;
        QTest::addRow("sigmoid top-3 scaled") << int(RouterScore::Sigmoid) << 3 << 2.5 << true;
        QTest::addRow("sigmoid top-1") << int(RouterScore::Sigmoid) << 1 << 1.0 << true;
        QTest::addRow("sigmoid top-2 not normalised") << int(RouterScore::Sigmoid) << 2 << 1.0 << false;
    }
    void routerGradientsMatchFiniteDifferences()
    {
        QFETCH(int, score);
        QFETCH(int, topK);
        QFETCH(double, scaling);
        QFETCH(bool, normalize);
        const RouterSpec r{6, topK, RouterScore(score), scaling, normalize};
        const int N = 4;
        std::vector<double> logits = randomValues(size_t(r.experts * N), 11, 2.0);
        const std::vector<double> g = randomValues(size_t(topK * N), 12);  // dL/dw
        std::vector<int> idx(size_t(topK * N));
        std::vector<double> w(size_t(topK * N)), dlogits(logits.size());
        router_topk_forward<double>(r, logits.data(), N, nullptr, idx.data(), w.data());
        router_topk_backward<double>(r, logits.data(), N, idx.data(), w.data(), g.data(), dlogits.data());
        const std::vector<int> choice = idx;
        auto loss = [&] {
            std::vector<int> i2(idx.size());
            std::vector<double> w2(w.size());
            router_topk_forward<double>(r, logits.data(), N, nullptr, i2.data(), w2.data());
            if (i2 != choice)
                throw std::logic_error("a finite difference changed the choice");
            return std::inner_product(g.begin(), g.end(), w2.begin(), 0.0);
        };
        const double err = fdError(logits, dlogits, loss);
        QVERIFY2(err < 1e-7, qPrintable(QString::number(err)));
        // Experts not chosen get no gradient from the weights (but for the softmax over all E).
        if (r.score == RouterScore::Softmax && !normalize)
            return;
        for (int n = 0; n < N; ++n)
            for (int e = 0; e < r.experts; ++e)
                if (std::find(choice.begin() + n * topK, choice.begin() + (n + 1) * topK, e) == choice.begin() + (n + 1) * topK)
                    QCOMPARE(dlogits[size_t(n * r.experts + e)], 0.0);
    }

    void balancedRoutingCostsExactlyTheCoefficient()
    {
        // Switch Transformer (Fedus et al. 2021, eq. 4): with uniform probabilities and every
        // expert receiving N K / E copies the loss is coeff * E * sum_e (1/E)(1/E) = coeff.
        const int E = 4, K = 2, N = 6;
        const std::vector<double> logits(size_t(E * N), 0.7);  // equal logits: p = 1/E
        const std::vector<std::int64_t> balanced(size_t(E), N * K / E);
        for (RouterScore s : {RouterScore::Softmax, RouterScore::Sigmoid}) {
            const double loss = aux_loss_forward_backward<double>({E, K, s, 1.0}, logits.data(), N, balanced, 0.01, 1.0, nullptr);
            QVERIFY(std::fabs(loss - 0.01) < 1e-15);
        }
    }

    void auxLossMatchesMegatronsFormulaAndItsGradient_data()
    {
        QTest::addColumn<int>("score");
        QTest::addRow("softmax") << int(RouterScore::Softmax);
        QTest::addRow("sigmoid") << int(RouterScore::Sigmoid);
    }
    void auxLossMatchesMegatronsFormulaAndItsGradient()
    {
        QFETCH(int, score);
        const RouterSpec r{5, 2, RouterScore(score), 1.0};
        const int N = 7;
        std::vector<double> logits = randomValues(size_t(r.experts * N), 21, 1.5);
        std::vector<int> idx(size_t(r.top_k * N));
        std::vector<double> w(idx.size());
        router_topk_forward<double>(r, logits.data(), N, nullptr, idx.data(), w.data());
        const std::vector<std::int64_t> counts = tokensPerExpert(idx.data(), N, r.top_k, r.experts);
        QCOMPARE(std::accumulate(counts.begin(), counts.end(), std::int64_t(0)), std::int64_t(N * r.top_k));
        // Megatron: sum(probs.sum(dim=0) * tokens_per_expert) * E * coeff / (topk * T * T).
        std::vector<double> column(size_t(r.experts), 0.0);
        for (int n = 0; n < N; ++n) {
            const double* l = logits.data() + n * r.experts;
            std::vector<double> p(size_t(r.experts));
            double sum = 0;
            for (int e = 0; e < r.experts; ++e)
                sum += (p[size_t(e)] = r.score == RouterScore::Softmax ? std::exp(l[e]) : sigmoid(l[e]));
            for (int e = 0; e < r.experts; ++e)
                column[size_t(e)] += p[size_t(e)] / sum;
        }
        double expected = 0;
        for (int e = 0; e < r.experts; ++e)
            expected += column[size_t(e)] * double(counts[size_t(e)]);
        expected *= r.experts * 0.02 / (r.top_k * double(N) * N);
        std::vector<double> dlogits(logits.size(), 0.0);
        const double loss = aux_loss_forward_backward<double>(r, logits.data(), N, counts, 0.02, 3.0, dlogits.data());
        QVERIFY(std::fabs(loss - expected) < 1e-15);
        auto f = [&] { return 3.0 * aux_loss_forward_backward<double>(r, logits.data(), N, counts, 0.02, 1.0, nullptr); };
        const double err = fdError(logits, dlogits, f);
        QVERIFY2(err < 1e-7, qPrintable(QString::number(err)));
    }

    void permutationSortsCopiesByExpertThenToken()
    {
        // 3 tokens, top-2 of 3 experts: copies (n, k) -> expert.
        const std::vector<int> idx{2, 0,   1, 2,   2, 1};
        const MoePermutation p = permuteByExpert(idx.data(), 3, 2, 3);
        QCOMPARE(p.offsets, (std::vector<std::int64_t>{0, 1, 3, 6}));
        QCOMPARE(p.order, (std::vector<std::int64_t>{1, 2, 5, 0, 3, 4}));
        for (size_t s = 0; s < p.order.size(); ++s)
            QCOMPARE(p.slot[size_t(p.order[s])], std::int64_t(s));
        QCOMPARE(tokensPerExpert(idx.data(), 3, 2, 3), (std::vector<std::int64_t>{1, 2, 3}));
    }

    void dispatchAndCombineAreExactAndDifferentiate()
    {
        const int C = 3, N = 5, K = 2, E = 4;
        std::vector<double> logits = randomValues(size_t(E * N), 31, 2.0);
        std::vector<int> idx(size_t(K * N));
        std::vector<double> w(idx.size());
        router_topk_forward<double>({E, K, RouterScore::Softmax, 1.0}, logits.data(), N, nullptr, idx.data(), w.data());
        const MoePermutation p = permuteByExpert(idx.data(), N, K, E);
        std::vector<double> x = randomValues(size_t(C * N), 32);
        // "Experts": expert e scales its tokens by (e + 1), so the combine sees each copy's expert.
        auto experts = [&](const std::vector<double>& in) {
            std::vector<double> out(in.size());
            for (int e = 0; e < E; ++e)
                for (std::int64_t s = p.offsets[size_t(e)]; s < p.offsets[size_t(e) + 1]; ++s)
                    for (int i = 0; i < C; ++i)
                        out[size_t(s * C + i)] = (e + 1) * in[size_t(s * C + i)];
            return out;
        };
        auto forward = [&](std::vector<double>& y) {
            std::vector<double> d(size_t(C * N * K));
            moe_dispatch_forward<double>(p, K, x.data(), C, d.data());
            const std::vector<double> eo = experts(d);
            y.assign(size_t(C * N), 0.0);
            moe_combine_forward<double>(p, K, eo.data(), w.data(), C, N, y.data());
            return eo;
        };
        std::vector<double> y;
        const std::vector<double> eo = forward(y);
        for (int n = 0; n < N; ++n)
            for (int i = 0; i < C; ++i) {
                double expected = 0;
                for (int k = 0; k < K; ++k)
                    expected += w[size_t(n * K + k)] * (idx[size_t(n * K + k)] + 1) * x[size_t(n * C + i)];
                QVERIFY(std::fabs(y[size_t(n * C + i)] - expected) < 1e-14);
            }
        // Backward of L = <G, y>: combine, the experts' scale, dispatch.
        const std::vector<double> G = randomValues(y.size(), 33);
        std::vector<double> deo(eo.size()), dw(w.size()), dx(x.size(), 0.0);
        moe_combine_backward<double>(p, K, G.data(), eo.data(), w.data(), C, N, deo.data(), dw.data());
        const std::vector<double> dd = experts(deo);  // the experts are linear and diagonal
        moe_dispatch_backward<double>(p, K, dd.data(), C, dx.data());
        auto loss = [&] {
            std::vector<double> y2;
            forward(y2);
            return std::inner_product(G.begin(), G.end(), y2.begin(), 0.0);
        };
        QVERIFY(fdError(x, dx, loss) < 1e-8);
        QVERIFY(fdError(w, dw, loss) < 1e-8);
    }

    // The whole block in double: its output against the MLPs written out token by token, and
    // every gradient (input, router, experts, shared experts, through the load-balancing loss
    // too) against finite differences of <G, y> + a aux.
    void moeBlockMatchesItsDefinitionAndFiniteDifferences_data()
    {
        QTest::addColumn<int>("mlp");
        QTest::addColumn<int>("score");
        QTest::addColumn<int>("shared");
        QTest::addRow("swiglu softmax, shared") << int(shardscope::MlpKind::SwiGlu) << int(RouterScore::Softmax) << 4;
        QTest::addRow("gelu softmax") << int(shardscope::MlpKind::Gelu) << int(RouterScore::Softmax) << 0;
        QTest::addRow("swiglu sigmoid, shared") << int(shardscope::MlpKind::SwiGlu) << int(RouterScore::Sigmoid) << 3;
    }
    void moeBlockMatchesItsDefinitionAndFiniteDifferences()
    {
        QFETCH(int, mlp);
        QFETCH(int, score);
        QFETCH(int, shared);
        MoeShape shape;
        shape.hidden = 6;
        shape.ffn = 5;
        shape.shared_ffn = shared;
        shape.mlp = shardscope::MlpKind(mlp);
        shape.router = {4, 2, RouterScore(score), score == int(RouterScore::Sigmoid) ? 2.5 : 1.0};
        shape.aux_loss_coeff = 0.05;
        const int C = 6, F = 5, E = 4, K = 2, N = 7;
        const std::int64_t Fin = shape.ffnIn(), Fsin = shape.sharedIn();
        std::vector<double> x = randomValues(size_t(C * N), 41), router = randomValues(size_t(C * E), 42, 1.5),
                            ein = randomValues(size_t(E * C * Fin), 43, 0.5), eout = randomValues(size_t(E * F * C), 44, 0.5),
                            sin = randomValues(size_t(C * Fsin), 45, 0.5), sout = randomValues(size_t(shared * C), 46, 0.5);
        QCOMPARE(shape.parameters(), std::int64_t(router.size() + ein.size() + eout.size() + sin.size() + sout.size()));
        EmulatedDevice device(0, kernelTestProfile(), 1);
        Kernels<double> k(device, shardscope::engine::PrecisionMode::FP32);
        MoeMlp<double> block(k, shape);
        auto weights = [&] {
            return MoeWeights<double>{router.data(), ein.data(), eout.data(), shared ? sin.data() : nullptr,
                                      shared ? sout.data() : nullptr};
        };
        std::vector<double> y(size_t(C * N));
        const double aux = block.forward(y.data(), x.data(), weights(), N);
        QVERIFY(aux > 0);
        QCOMPARE(std::accumulate(block.tokensPerExpert().begin(), block.tokensPerExpert().end(), std::int64_t(0)),
                 std::int64_t(N * K));
        // Token by token: the router, its top-k, the chosen experts' MLPs, the shared MLP.
        std::vector<int> idx(static_cast<size_t>(K));
        std::vector<double> w(static_cast<size_t>(K));
        for (int n = 0; n < N; ++n) {
            const double* xn = x.data() + n * C;
            std::vector<double> logits(static_cast<size_t>(E), 0.0);
            for (int e = 0; e < E; ++e)
                for (int i = 0; i < C; ++i)
                    logits[size_t(e)] += router[size_t(e * C + i)] * xn[i];
            router_topk_forward<double>(shape.router, logits.data(), 1, nullptr, idx.data(), w.data());
            std::vector<double> expected(static_cast<size_t>(C), 0.0);
            for (int kk = 0; kk < K; ++kk) {
                const std::vector<double> out = naiveMlp(shape.mlp, xn, ein.data() + size_t(idx[size_t(kk)]) * C * Fin,
                                                         eout.data() + size_t(idx[size_t(kk)]) * F * C, C, F);
                for (int c = 0; c < C; ++c)
                    expected[size_t(c)] += w[size_t(kk)] * out[size_t(c)];
            }
            if (shared) {
                const std::vector<double> out = naiveMlp(shape.mlp, xn, sin.data(), sout.data(), C, shared);
                for (int c = 0; c < C; ++c)
                    expected[size_t(c)] += out[size_t(c)];
            }
            for (int c = 0; c < C; ++c)
                QVERIFY(std::fabs(y[size_t(n * C + c)] - expected[size_t(c)]) < 1e-12);
        }
        // Gradients of L = <G, y> + 0.7 aux.
        const std::vector<double> G = randomValues(y.size(), 47);
        std::vector<double> dx(x.size()), drouter(router.size(), 0.0), dein(ein.size(), 0.0), deout(eout.size(), 0.0),
            dsin(sin.size(), 0.0), dsout(sout.size(), 0.0);
        block.backward(dx.data(), G.data(), weights(),
                       {drouter.data(), dein.data(), deout.data(), shared ? dsin.data() : nullptr,
                        shared ? dsout.data() : nullptr},
                       0.7);
        const std::vector<std::int64_t> counts = block.tokensPerExpert();
        auto loss = [&] {
            std::vector<double> y2(y.size());
            const double a = block.forward(y2.data(), x.data(), weights(), N);
            if (block.tokensPerExpert() != counts)
                throw std::logic_error("a finite difference changed the routing");
            return std::inner_product(G.begin(), G.end(), y2.begin(), 0.0) + 0.7 * a;
        };
        QVERIFY2(fdError(x, dx, loss) < 1e-7, "input");
        QVERIFY2(fdError(router, drouter, loss) < 1e-7, "router");
        QVERIFY2(fdError(ein, dein, loss) < 1e-7, "expert_in");
        QVERIFY2(fdError(eout, deout, loss) < 1e-7, "expert_out");
        if (shared) {
            QVERIFY2(fdError(sin, dsin, loss) < 1e-7, "shared_in");
            QVERIFY2(fdError(sout, dsout, loss) < 1e-7, "shared_out");
        }
        // Charged like the dense MLP: 2 FLOPs a multiply-add over the copies each expert took.
        QVERIFY(device.counters().flops[size_t(KernelKind::Matmul)] > 0);
    }

    // Capacity mode (Megatron-LM's moe_expert_capacity_factor, drop policy "probs", d98e8a64
    // moe_utils.py apply_router_token_dropping): each expert keeps at most ceil(N K / E x factor)
    // copies, those of the largest weights; the dropped ones add nothing, the kept weights are
    // not renormalised; the gradients of that function match finite differences.
    void capacityDropsTheLowestWeightsPastTheCapacity()
    {
        MoeShape shape;
        shape.hidden = 5;
        shape.ffn = 4;
        shape.mlp = shardscope::MlpKind::SwiGlu;
        shape.router = {4, 2, RouterScore::Softmax, 1.0};
        shape.aux_loss_coeff = 0.05;
        shape.capacity_factor = 0.5;
        const int C = 5, F = 4, E = 4, K = 2, N = 9;
        const std::int64_t capacity = 3;  // ceil(9 x 2 / 4 x 0.5) = ceil(2.25)
        const std::int64_t Fin = shape.ffnIn();
        std::vector<double> x = randomValues(size_t(C * N), 51), router = randomValues(size_t(C * E), 52, 1.5),
                            ein = randomValues(size_t(E * C * Fin), 53, 0.5), eout = randomValues(size_t(E * F * C), 54, 0.5);
        EmulatedDevice device(0, kernelTestProfile(), 1);
        Kernels<double> k(device, shardscope::engine::PrecisionMode::FP32);
        MoeMlp<double> block(k, shape);
        const MoeWeights<double> w{router.data(), ein.data(), eout.data(), nullptr, nullptr, nullptr};
        MoeSaved<double> saved;
        std::vector<double> y(size_t(C * N));
        block.forward(saved, y.data(), x.data(), w, N);
        // The definition: every token's choice, then per expert the copies by weight, the first kept.
        std::vector<int> idx(size_t(N * K));
        std::vector<double> weights(size_t(N * K));
        for (int n = 0; n < N; ++n) {
            std::vector<double> logits(static_cast<size_t>(E), 0.0);
            for (int e = 0; e < E; ++e)
                for (int i = 0; i < C; ++i)
                    logits[size_t(e)] += router[size_t(e * C + i)] * x[size_t(n * C + i)];
            router_topk_forward<double>(shape.router, logits.data(), 1, nullptr, idx.data() + n * K,
                                        weights.data() + n * K);
        }
        std::vector<bool> keep(size_t(N * K), true);
        std::int64_t dropped = 0;
        for (int e = 0; e < E; ++e) {
            std::vector<int> mine;
            for (int c = 0; c < N * K; ++c)
                if (idx[size_t(c)] == e)
                    mine.push_back(c);
            std::sort(mine.begin(), mine.end(), [&](int a, int b) { return weights[size_t(a)] > weights[size_t(b)]; });
            for (size_t i = size_t(capacity); i < mine.size(); ++i, ++dropped)
                keep[size_t(mine[i])] = false;
            QCOMPARE(saved.kept[size_t(e)], std::min<std::int64_t>(capacity, std::int64_t(mine.size())));
            QCOMPARE(saved.counts[size_t(e)], std::int64_t(mine.size()));  // the router's choice, for the aux loss
        }
        QVERIFY2(dropped > 0, "the seed routes more copies to some expert than it takes");
        QCOMPARE(saved.dropped, dropped);
        for (int n = 0; n < N; ++n) {
            std::vector<double> expected(static_cast<size_t>(C), 0.0);
            for (int kk = 0; kk < K; ++kk) {
                const int c = n * K + kk;
                if (!keep[size_t(c)])
                    continue;
                const std::vector<double> out = naiveMlp(shape.mlp, x.data() + n * C, ein.data() + size_t(idx[size_t(c)]) * C * Fin,
                                                         eout.data() + size_t(idx[size_t(c)]) * F * C, C, F);
                for (int i = 0; i < C; ++i)
                    expected[size_t(i)] += weights[size_t(c)] * out[size_t(i)];
            }
            for (int i = 0; i < C; ++i)
                QVERIFY(std::fabs(y[size_t(n * C + i)] - expected[size_t(i)]) < 1e-12);
        }
        const std::vector<double> G = randomValues(y.size(), 55);
        std::vector<double> dx(x.size()), drouter(router.size(), 0.0), dein(ein.size(), 0.0), deout(eout.size(), 0.0);
        block.backward(saved, dx.data(), G.data(), w, {drouter.data(), dein.data(), deout.data(), nullptr, nullptr}, 0.7);
        const std::vector<std::int64_t> kept = saved.kept;
        auto loss = [&] {
            MoeSaved<double> again;
            std::vector<double> y2(y.size());
            const double a = block.forward(again, y2.data(), x.data(), w, N);
            if (again.kept != kept || again.perm.order != saved.perm.order)
                throw std::logic_error("a finite difference changed the routing or the drops");
            return std::inner_product(G.begin(), G.end(), y2.begin(), 0.0) + 0.7 * a;
        };
        QVERIFY2(fdError(x, dx, loss) < 1e-7, "input");
        QVERIFY2(fdError(router, drouter, loss) < 1e-7, "router");
        QVERIFY2(fdError(ein, dein, loss) < 1e-7, "expert_in");
        QVERIFY2(fdError(eout, deout, loss) < 1e-7, "expert_out");
    }

    void badRouterSettingsAreNamed()
    {
        const std::vector<double> logits(8, 0.0);
        std::vector<int> idx(8);
        std::vector<double> w(8), bias(4, 0.0);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, router_topk_forward<double>({4, 5, RouterScore::Softmax, 1.0},
                                                                                     logits.data(), 2, nullptr, idx.data(), w.data()));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, router_topk_forward<double>({4, 0, RouterScore::Softmax, 1.0},
                                                                                     logits.data(), 2, nullptr, idx.data(), w.data()));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, router_topk_forward<double>({4, 2, RouterScore::Softmax, 1.0},
                                                                                     logits.data(), 2, bias.data(), idx.data(), w.data()));
        try {
            router_topk_forward<double>({4, 5, RouterScore::Softmax, 1.0}, logits.data(), 2, nullptr, idx.data(), w.data());
        } catch (const std::invalid_argument& e) {
            QVERIFY(std::string(e.what()).find("top_k 5 must be in [1, experts 4]") != std::string::npos);
        }
        const std::vector<int> outside{0, 4};
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, tokensPerExpert(outside.data(), 1, 2, 4));
    }
};

QTEST_APPLESS_MAIN(TstEngineOpsMoe)
#include "tst_engine_ops_moe.moc"
