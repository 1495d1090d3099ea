// GptModel on an EmulatedDevice: parameter count against the published GPT-2
// figure and core's ModelSpec formula; the allocator's peak bytes per category
// against the sizes the layout implies (written out here from Gpt.h's table);
// a whole-model gradient check in double precision; recomputation changes
// memory and FLOPs but not the gradients; FLOPs against core's formula;
// out of memory reported by the run, which the process survives; seeds.
#include "Bf16.h"
#include "Gpt.h"
#include "ModelSpec.h"
#include "Trainer.h"
#include "Units.h"

#include <QTest>

#include <cmath>
#include <vector>

using namespace shardscope;
using namespace shardscope::engine;

Q_DECLARE_METATYPE(shardscope::engine::PrecisionMode)
Q_DECLARE_METATYPE(shardscope::Recompute)

namespace {

DeviceProfile roomyProfile(double capacity = 1e12)
{
    DeviceProfile p;
    p.name = "test";
    p.memory_bytes = capacity;
    p.peak_flops_fp32 = 1e12;
    p.peak_flops_bf16 = 4e12;
    p.memory_bytes_per_second = 1e11;
    return p;
}

ModelSpec specOf(const GptConfig& c)
{
    ModelSpec m;
    m.name = "engine-gpt";
    m.family = ModelFamily::DecoderOnly;
    m.layers = c.layers;
    m.hidden = c.hidden;
    m.heads = c.heads;
    m.kv_heads = c.heads;
    m.head_dim = c.hidden / c.heads;
    m.ffn_hidden = 4 * c.hidden;
    m.mlp = MlpKind::Gelu;
    m.vocab = c.vocab;
    m.max_seq = c.seq;
    m.positions = PositionKind::Learned;
    m.norm = NormKind::LayerNorm;
    m.bias = true;
    m.tied_embeddings = true;
    m.final_norm = true;
    return m;
}

// Deterministic tokens for a batch.
void tokens(int B, int T, int V, std::uint64_t seed, std::vector<int>& in, std::vector<int>& tg)
{
    MarkovSource src(V, seed);
    in.resize(size_t(B) * T);
    tg.resize(size_t(B) * T);
    src.batch(0, B, T, in.data(), tg.data());
}

} // namespace

class TstEngineGpt : public QObject {
    Q_OBJECT

private slots:
    void parameterCount()
    {
        // GPT-2 small (124M): 124,439,808 parameters with its 1024-position table (Radford et al. 2019,
        // as counted by HF transformers with the tied head).
        QCOMPARE(engine::parameterCount(GptConfig{12, 768, 12, 50257, 1024}), std::int64_t(124'439'808));
        for (const GptConfig& c : {GptConfig{12, 768, 12, 50257, 64}, GptConfig{6, 384, 6, 50257, 256},
                                   GptConfig{2, 16, 2, 37, 8}})
            QCOMPARE(engine::parameterCount(c), shardscope::parameterCount(specOf(c)));
        EmulatedDevice d(0, roomyProfile());
        GptModel<float> m(GptConfig{3, 24, 4, 50, 7}, ModelOptions{}, d);
        QCOMPARE(m.parameterCount(), engine::parameterCount(GptConfig{3, 24, 4, 50, 7}));
        std::int64_t sum = 0;
        for (const ParameterTensor& t : m.tensors())
            sum += t.count;
        QCOMPARE(sum, m.parameterCount());
    }

    void invalidConfigsAreNamed()
    {
        const FieldErrors e = validate(GptConfig{2, 64, 5, 10, 8});
        QCOMPARE(e.size(), size_t(1));
        QCOMPARE(e[0].path, std::string("heads"));
        QVERIFY(e[0].message.find("does not divide hidden 64") != std::string::npos);
        QCOMPARE(validate(GptConfig{0, 64, 4, 0, 8}).size(), size_t(2));  // layers and vocab
        EmulatedDevice d(0, roomyProfile());
        QVERIFY_THROWS_EXCEPTION(InputError, GptModel<float>(GptConfig{2, 64, 5, 10, 8}, ModelOptions{}, d));
    }

    void memoryPeaksAreExact_data()
    {
        QTest::addColumn<PrecisionMode>("precision");
        QTest::addColumn<Recompute>("recompute");
        for (PrecisionMode p : {PrecisionMode::FP32, PrecisionMode::BF16Mixed, PrecisionMode::BF16RNE, PrecisionMode::BF16SR})
            for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
                QTest::newRow(qPrintable(QString("%1 recompute=%2").arg(toString(p)).arg(shardscope::toString(r))))
                    << p << r;
    }
    void memoryPeaksAreExact()
    {
        QFETCH(PrecisionMode, precision);
        QFETCH(Recompute, recompute);
        const std::int64_t L = 3, C = 16, NH = 4, V = 37, T = 8, B = 3, N = B * T;
        const GptConfig cfg{int(L), int(C), int(NH), int(V), int(T)};
        // P from GPT-2's parameterisation, written out: embeddings, 12 tensors per layer, final norm.
        const std::int64_t P = V * C + T * C + L * (C + C + C * 3 * C + 3 * C + C * C + C + C + C + C * 4 * C + 4 * C +
                                                    4 * C * C + C) + 2 * C;
        const double e = precision == PrecisionMode::FP32 ? 4 : 2;
        const double master = precision == PrecisionMode::BF16Mixed ? 4 : 0;

        // Saved activations, element counts: per layer ln1, qkv, atty, att, res2, ln2, fch, fch_gelu, res3.
        const std::int64_t att = NH * T * T * B;
        const std::int64_t perLayer = C * N + 3 * C * N + C * N + att + C * N + C * N + 4 * C * N + 4 * C * N + C * N;
        const std::int64_t global = C * N + C * N;  // encoded, lnf
        // fp32 whatever the precision: the norms' statistics, the vocabulary softmax, the losses.
        const std::int64_t globalStats = V * N + 3 * N;
        std::int64_t tensors = 0, stats = 0;
        switch (recompute) {
        case Recompute::None: tensors = L * perLayer + global; stats = L * 4 * N + globalStats; break;
        case Recompute::Selective: tensors = L * (perLayer - att) + att + global; stats = L * 4 * N + globalStats; break;
        case Recompute::Full: tensors = L * C * N + (perLayer - C * N) + global; stats = 4 * N + globalStats; break;
        }
        const std::int64_t workspace = C * N + C * N + 3 * C * N + 4 * C * N + att;

        EmulatedDevice d(0, roomyProfile());
        ModelOptions o;
        o.batch = int(B);
        o.precision = precision;
        o.recompute = recompute;
        {
            GptModel<float> m(cfg, o, d);
            std::vector<int> in, tg;
            tokens(int(B), int(T), int(V), 5, in, tg);
            m.forward(in.data(), tg.data());
            m.zeroGrad();
            m.backward();
            m.update(AdamWSettings{}, 1.0, 1);
        }
        const DeviceAllocator& a = d.allocator();
        QCOMPARE(a.peakBytes(MemoryCategory::Weights), double(P) * e);
        QCOMPARE(a.peakBytes(MemoryCategory::Gradients), double(P) * e);
        QCOMPARE(a.peakBytes(MemoryCategory::Optimizer), double(P) * (8 + master));
        QCOMPARE(a.peakBytes(MemoryCategory::Activations), double(tensors) * e + double(stats) * 4);
        QCOMPARE(a.peakBytes(MemoryCategory::Workspace), double(workspace) * e);
        QCOMPARE(a.peakTotalBytes(), double(P) * (2 * e + 8 + master) + double(tensors) * e + double(stats) * 4 +
                                         double(workspace) * e);
        QCOMPARE(a.usedBytes(), 0.0);  // everything returned when the model went away
    }

    void wholeModelGradientCheck()
    {
        // Double precision, every parameter, central differences.
        const GptConfig cfg{2, 8, 2, 11, 5};
        EmulatedDevice d(0, roomyProfile());
        ModelOptions o;
        o.batch = 2;
        o.init_std = 0.3;  // gradients well away from zero everywhere
        o.seed = 3;
        GptModel<double> m(cfg, o, d);
        std::vector<int> in, tg;
        tokens(2, 5, 11, 9, in, tg);
        m.forward(in.data(), tg.data());
        m.zeroGrad();
        m.backward();
        const std::int64_t P = m.parameterCount();
        const std::vector<double> analytic(m.grads(), m.grads() + P);
        double* w = m.params();
        double worst = 0, largest = 0;
        const double h = 1e-5;
        for (std::int64_t i = 0; i < P; ++i) {
            const double old = w[i];
            w[i] = old + h;
            const double lp = m.forward(in.data(), tg.data());
            w[i] = old - h;
            const double lm = m.forward(in.data(), tg.data());
            w[i] = old;
            const double numeric = (lp - lm) / (2 * h);
            worst = std::max(worst, std::fabs(numeric - analytic[size_t(i)]) / std::max(1e-3, std::fabs(numeric)));
            largest = std::max(largest, std::fabs(numeric));
        }
        QVERIFY2(worst < 1e-5, qPrintable(QString("worst relative error %1").arg(worst)));
        QVERIFY(largest > 1e-2);  // the check saw real gradients
        // Every tensor receives gradient (wiring: tied head, positions, every layer).
        for (const ParameterTensor& t : m.tensors()) {
            double s = 0;
            for (std::int64_t i = 0; i < t.count; ++i)
                s += std::fabs(analytic[size_t(t.offset + i)]);
            QVERIFY2(s > 0, t.name.c_str());
        }
    }

    void recomputationKeepsGradients()
    {
        const GptConfig cfg{3, 16, 4, 23, 6};
        std::vector<int> in, tg;
        tokens(2, 6, 23, 4, in, tg);
        std::vector<std::vector<double>> grads;
        std::vector<double> losses;
        for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
            EmulatedDevice d(0, roomyProfile(), 2);
            ModelOptions o;
            o.batch = 2;
            o.recompute = r;
            o.init_std = 0.2;
            GptModel<double> m(cfg, o, d);
            losses.push_back(m.forward(in.data(), tg.data()));
            m.zeroGrad();
            m.backward();
            grads.emplace_back(m.grads(), m.grads() + m.parameterCount());
        }
        for (size_t k = 1; k < grads.size(); ++k) {
            QCOMPARE(losses[k], losses[0]);
            double diff = 0;
            for (size_t i = 0; i < grads[0].size(); ++i)
                diff = std::max(diff, std::fabs(grads[k][i] - grads[0][i]));
            QVERIFY2(diff < 1e-12, qPrintable(QString("mode %1: %2").arg(k).arg(diff)));
        }
    }

    void flopsMatchCoreFormula_data()
    {
        QTest::addColumn<Recompute>("recompute");
        QTest::newRow("none") << Recompute::None;
        QTest::newRow("selective") << Recompute::Selective;
        QTest::newRow("full") << Recompute::Full;
    }
    void flopsMatchCoreFormula()
    {
        QFETCH(Recompute, recompute);
        const GptConfig cfg{2, 32, 4, 41, 12};
        const int B = 3;
        const double N = B * cfg.seq;
        // Products of one step: forward + backward (twice the forward) = 3x core's forward FLOPs;
        // full recomputation adds the layers' forward again (all but the logits), selective the
        // attention core: scores and attention over V (2 x 2*T*C per token and layer).
        const double forward = double(forwardFlopsPerToken(specOf(cfg), cfg.seq)) * N;
        const double layersForward = forward - 2.0 * cfg.hidden * cfg.vocab * N;
        double expected = 3 * forward;
        if (recompute == Recompute::Full)
            expected += layersForward;
        if (recompute == Recompute::Selective)
            expected += double(cfg.layers) * 2 * 2.0 * cfg.seq * cfg.hidden * N;
        EmulatedDevice d(0, roomyProfile());
        ModelOptions o;
        o.batch = B;
        o.recompute = recompute;
        GptModel<float> m(cfg, o, d);
        std::vector<int> in, tg;
        tokens(B, cfg.seq, cfg.vocab, 1, in, tg);
        m.forward(in.data(), tg.data());
        m.zeroGrad();
        m.backward();
        m.update(AdamWSettings{}, 1.0, 1);
        const DeviceCounters& c = d.counters();
        QCOMPARE(c.flops[size_t(KernelKind::Matmul)] + c.flops[size_t(KernelKind::Attention)], expected);
        QVERIFY(d.clockSeconds() > 0);
        QVERIFY(c.bytes_read > 0 && c.bytes_written > 0);
    }

    void bf16ModesStoreBf16Values()
    {
        const GptConfig cfg{2, 16, 2, 19, 6};
        for (PrecisionMode p : {PrecisionMode::BF16Mixed, PrecisionMode::BF16RNE, PrecisionMode::BF16SR}) {
            EmulatedDevice d(0, roomyProfile());
            ModelOptions o;
            o.batch = 2;
            o.precision = p;
            GptModel<float> m(cfg, o, d);
            std::vector<int> in, tg;
            tokens(2, 6, 19, 2, in, tg);
            m.forward(in.data(), tg.data());
            m.zeroGrad();
            m.backward();
            m.update(AdamWSettings{1e-2, 0.9, 0.95, 1e-8, 0.1}, 1.0, 1);
            for (std::int64_t i = 0; i < m.parameterCount(); ++i) {
                QCOMPARE(m.params()[i], roundToBf16NearestEven(m.params()[i]));
                QCOMPARE(m.grads()[i], roundToBf16NearestEven(m.grads()[i]));
            }
        }
    }

    void sameSeedSameLosses()
    {
        TrainRequest r;
        r.model = GptConfig{2, 32, 4, 29, 16};
        r.batch = 4;
        r.steps = 6;
        r.seed = 42;
        auto losses = [&](const TrainRequest& req, int threads) {
            EmulatedDevice d(0, roomyProfile(), threads);
            const auto src = makeTokenSource(req);
            return runTraining(req, *src, d).losses();
        };
        const std::vector<double> a = losses(r, 2);
        QCOMPARE(a.size(), size_t(6));
        QCOMPARE(losses(r, 2), a);  // bitwise
        r.precision = PrecisionMode::BF16SR;
        const std::vector<double> sr = losses(r, 2);
        QCOMPARE(losses(r, 2), sr);
        r.precision = PrecisionMode::FP32;
        r.seed = 43;
        QVERIFY(losses(r, 2) != a);
    }

    void outOfMemoryIsReportedAndSurvived()
    {
        TrainRequest r;
        r.model = GptConfig{2, 32, 4, 29, 16};
        r.batch = 4;
        r.steps = 2;
        const double P = double(engine::parameterCount(r.model));
        // Weights and gradients fit (8P bytes), AdamW's two moments (8P more) do not.
        EmulatedDevice d(7, roomyProfile(12 * P));
        const auto src = makeTokenSource(r);
        const Measurement m = runTraining(r, *src, d);
        QVERIFY(m.error.has_value());
        QCOMPARE(m.error->device, 7);
        const QString msg = QString::fromStdString(m.error->message);
        QVERIFY2(msg.contains("device 7 (test)") && msg.contains("optimizer") && msg.contains("requested") &&
                     msg.contains("free"),
                 qPrintable(msg));
        QVERIFY2(msg.contains(QString::fromStdString(formatCount(std::int64_t(8 * P)))), qPrintable(msg));
        QVERIFY(m.steps.empty());
        QCOMPARE(m.devices.size(), size_t(1));
        QCOMPARE(m.devices[0].memory_peak_bytes[size_t(MemoryCategory::Weights)], 4 * P);
        QCOMPARE(d.allocator().usedBytes(), 0.0);
        // The same device runs a model that fits.
        r.model = GptConfig{1, 8, 2, 29, 4};
        const Measurement ok = runTraining(r, *src, d);
        QVERIFY(!ok.error);
        QCOMPARE(ok.steps.size(), size_t(2));
    }
};

QTEST_GUILESS_MAIN(TstEngineGpt)
#include "tst_engine_gpt.moc"
