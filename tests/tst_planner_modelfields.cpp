// The model format's newer fields in the planner and the validation scaler: QK-norm's and
// the q/k/v biases' parameters in each device's weights, the sliding window's attention in
// the step time and the model FLOPs, and scaledEngineModel's refusals of what the engine
// does not execute yet (by name), with norm_eps, the q/k/v biases and QK-norm passed to the engine.
#include "BuiltinSpecs.h"
#include "CostModel.h"
#include "EmulatedHardware.h"
#include "ModelStateMemory.h"
#include "OpConventions.h"
#include "ScaledCase.h"

#include <QTest>

using namespace shardscope;

namespace {

ModelSpec qwen3Like()
{
    ModelSpec m = BuiltinSpecs::instance().model("llama-3-8b");
    m.name = "qwen3-like";
    m.layers = 8;
    return m;
}

Problem problemOn(const ModelSpec& m, int seq, bool flash)
{
    Problem p;
    p.model = m;
    p.cluster.node = BuiltinSpecs::instance().node("p5.48xlarge");
    p.cluster.nodes = 1;
    p.training.global_batch = 64;
    p.training.seq_len = seq;
    p.training.flash_attention = flash;
    return p;
}

Layout layoutOf(const Problem& p, int tp)
{
    FieldErrors errors;
    Layout l = parseLayout("tp=" + std::to_string(tp), errors);
    resolveDataParallel(l, p.cluster.devices(), errors);
    for (const FieldError& e : validate(l, p.model, p.cluster, p.training))
        errors.push_back(e);
    if (!errors.empty())
        qFatal("bad test layout: %s", joinErrors(errors).c_str());
    return l;
}

double weightBytes(const ModelSpec& m, int tp)
{
    const Problem p = problemOn(m, 2048, true);
    return CostModel::evaluate(p, layoutOf(p, tp)).memory_bytes.weights;
}

} // namespace

class TstPlannerModelFields : public QObject {
    Q_OBJECT
private slots:
    // A device holds its tp share of the q/k/v biases and the whole QK-norm weights (replicated).
    void newParametersInTheWeights()
    {
        const double perParameter = stateBytesPerParameter(Precision::BF16Mixed, Optimizer::AdamW, {}).weights;
        const ModelSpec plain = qwen3Like();
        ModelSpec qkNorm = plain, qkvBias = plain;
        qkNorm.qk_norm = true;
        qkvBias.qkv_bias = true;
        for (const int tp : {1, 2, 4}) {
            const double base = weightBytes(plain, tp);
            QCOMPARE(weightBytes(qkNorm, tp) - base, 8 * 2 * 128 * perParameter);
            QCOMPARE(weightBytes(qkvBias, tp) - base, 8.0 * (4096 + 2 * 1024) / tp * perParameter);
        }
        // The device's share times tp is the model's own count of them (tp = 1: all of it).
        QCOMPARE(weightBytes(qkvBias, 1) - weightBytes(plain, 1),
                 double(parameterCount(qkvBias) - parameterCount(plain)) * perParameter);
    }

    // One device holding the whole model (tp = pp = 1) holds exactly its parameters, MoE blocks,
    // dense first layers and shared experts included (no expert parallelism yet).
    void moeWeightsAreTheModelsCount()
    {
        const double perParameter = stateBytesPerParameter(Precision::BF16Mixed, Optimizer::AdamW, {}).weights;
        ModelSpec m = BuiltinSpecs::instance().model("mixtral-8x7b");
        m.layers = 8;
        m.moe.ffn_hidden = 2048;
        QCOMPARE(weightBytes(m, 1), double(parameterCount(m)) * perParameter);
        m.moe.dense_layers = 2;
        m.moe.shared_experts = 2;
        m.moe.shared_ffn_hidden = 1024;
        QCOMPARE(weightBytes(m, 1), double(parameterCount(m)) * perParameter);
        m.moe.dense_layers = 0;
        m.moe.layer_interval = 2;
        QCOMPARE(weightBytes(m, 1), double(parameterCount(m)) * perParameter);
        // GPT-OSS's biased experts and router and its sinks, likewise.
        m.bias = true;
        m.attention_sinks = true;
        QCOMPARE(weightBytes(m, 1), double(parameterCount(m)) * perParameter);
        m.bias = false;
        m.attention_sinks = false;
        // A stage of dense layers only holds less than one of MoE layers.
        m.moe.layer_interval = 1;
        m.moe.dense_layers = 4;
        const Problem p = problemOn(m, 2048, true);
        FieldErrors errors;
        Layout l = parseLayout("pp=2", errors);
        resolveDataParallel(l, p.cluster.devices(), errors);
        QVERIFY(errors.empty());
        const Prediction split = CostModel::evaluate(p, l);
        QCOMPARE(split.memory_stage, 1);  // the MoE layers' stage
    }

    // Multi-head latent attention (DeepSeek-V3's; planner/MlaCost.h): one device at tp = 1 holds
    // exactly the model's count; under tp the down projections and their norms stay whole on
    // every rank (Megatron's 'duplicated' linear_q_down_proj / linear_kv_down_proj) and the rest
    // is split by heads. DeepSeek-V3 itself, its correction biases included, likewise.
    void mlaWeightsAndActivations()
    {
        const double perParameter = stateBytesPerParameter(Precision::BF16Mixed, Optimizer::AdamW, {}).weights;
        ModelSpec m = qwen3Like();
        m.name = "mla-like";
        m.kv_heads = m.heads;  // 32
        m.mla = {512, 256, 64, 32, 64};
        m.head_dim = 96;
        QVERIFY2(validate(m).empty(), joinErrors(validate(m)).c_str());
        QCOMPARE(weightBytes(m, 1), double(parameterCount(m)) * perParameter);
        const double h = 4096, heads = 32;
        const double duplicated = h * 512 + 512 + h * (256 + 32) + 256;           // q_a, its norm, kv_a, its norm
        const double split = 512 * heads * 96 + 256 * heads * (64 + 64) + heads * 64 * h;  // q_b, kv_b, o
        ModelSpec dense = m;
        dense.mla = {};
        dense.head_dim = 1;  // MHA of 32 heads of 1: q, k, v, o of 32 wide
        for (const int tp : {1, 2, 4})  // 8 layers; the rest of the model is the same in both
            QCOMPARE(weightBytes(m, tp) - weightBytes(dense, tp),
                     8.0 * (duplicated + split / tp - 4.0 * h * 32 / tp) * perParameter);
        QCOMPARE(double(parameterCount(m)) - double(parameterCount(dense)),
                 8.0 * (duplicated + split) - 8.0 * (4.0 * h * 32));

        // Activations: the MHA count's Q, K, V and output (4 q + 4 kv bytes a token) give way to
        // MLA's latents (2 (2Q + R + P + R)) and Q, K (192-wide here 96), V and output (64).
        ModelSpec mha = m;
        mha.mla = {};  // the same heads and head_dim 96 as plain MHA
        const Problem pm = problemOn(m, 2048, true), ph = problemOn(mha, 2048, true);
        FieldErrors errors;
        Layout l = parseLayout("tp=2,mb=1", errors);
        resolveDataParallel(l, pm.cluster.devices(), errors);
        QVERIFY(errors.empty());
        const double tokens = 2048, q = heads * 96 / 2, v = heads * 64 / 2;
        const double mlaBytes = 2 * (2 * 512 + (256 + 32) + 256) + 2 * (2 * q + 2 * v);
        const double mhaBytes = 4 * q + 4 * q;
        // (And the two latent norms' fp32 statistics, RMSNorm: one per token each.)
        const double latentStatistics = 2 * 4.0;
        const Prediction a = CostModel::evaluate(pm, l), b = CostModel::evaluate(ph, l);
        QCOMPARE(a.memory_bytes.activations - b.memory_bytes.activations,
                 8 * tokens * (mlaBytes - mhaBytes + latentStatistics));
        // Model FLOPs: core's count (MLA's projections, Q K^T over 96 and P V over 64 per head).
        QCOMPARE(a.model_flops_per_step, 3.0 * 64 * tokens * double(forwardFlopsPerToken(m, 2048)));
        // Vector FLOPs (core/OpConventions.h): RoPE on the rank's 16 heads' 32-wide parts and the
        // shared 32-wide key (not on 2 x 16 heads of 96), the latent norms over 512 + 256, and the
        // optimizer over the parameters the device holds; 16 micro-batches on each of 8 devices.
        // The shared key's gradient sums the rank's 16 heads' 32-wide parts (15 x 32 adds).
        const ops::ElementFlops rope = ops::kRope, rms = ops::norm(NormKind::RmsNorm);
        const double rotated = 16 * 32 + 32 - (q + q), normed = 512 + 256, keySum = 15 * 32;
        const double perMicroBatch = 8 * tokens * ((rope.forward + rope.backward) * rotated +
                                                   (rms.forward + rms.backward) * normed + ops::kGradientAdd * keySum);
        const double heldParameters = (weightBytes(m, 2) - weightBytes(mha, 2)) / perParameter;
        QCOMPARE(a.vector_flops_per_step - b.vector_flops_per_step,
                 8 * (16 * perMicroBatch + (ops::kAdamW + ops::kSquaredNorm) * heldParameters));

        // ZeRO-3 gathers the largest projection at once, twice: with a small MLP, MLA's o_proj
        // (16 x 64 -> 4096 on each of tp 2) rather than the MHA count's q, k, v (4096 x 3 x 1536).
        ModelSpec thinMla = m, thinMha = mha;
        thinMla.ffn_hidden = thinMha.ffn_hidden = 512;
        Layout z3 = parseLayout("tp=2,zero=3,mb=1", errors);
        resolveDataParallel(z3, pm.cluster.devices(), errors);
        QVERIFY(errors.empty());
        const double buffersMla = CostModel::evaluate(problemOn(thinMla, 2048, true), z3).memory_bytes.buffers;
        const double buffersMha = CostModel::evaluate(problemOn(thinMha, 2048, true), z3).memory_bytes.buffers;
        QCOMPARE(buffersMha - buffersMla, 2 * (h * 3 * q - h * v) * perParameter);

        // Context parallelism passes K (96 per head) and V (64 per head) blocks, not 2 x 96: at
        // cp 2 the MLA model sends (96 + 64) / (2 x 96) of the MHA model's ring bytes.
        Layout cp2 = parseLayout("tp=2,cp=2,mb=1", errors);
        resolveDataParallel(cp2, pm.cluster.devices(), errors);
        QVERIFY(errors.empty());
        const double ringMla = CostModel::evaluate(pm, cp2).comm_bytes.cp, ringMha = CostModel::evaluate(ph, cp2).comm_bytes.cp;
        QVERIFY(ringMha > 0);
        QCOMPARE(ringMla / ringMha, (96.0 + 64) / (2 * 96));

        const ModelSpec deepseek = BuiltinSpecs::instance().model("deepseek-v3");
        // The published 671B and, trained with it, the MTP module (tst_store_catalog counts it by hand).
        QCOMPARE(weightBytes(deepseek, 1), (671'026'419'200.0 + 11'610'068'224.0) * perParameter);
    }

    // Fused attention computes only the band: a sliding window shortens the step; unfused
    // attention computes the whole matrix and masks it. The model FLOPs count W keys either way.
    void slidingWindowAttention()
    {
        const int seq = 8192, window = 1024;
        ModelSpec full = qwen3Like(), sliding = full;
        sliding.max_seq = seq;
        full.max_seq = seq;
        sliding.sliding_window = {window, {}};
        for (const bool flash : {true, false}) {
            const Problem a = problemOn(full, seq, flash), b = problemOn(sliding, seq, flash);
            const Prediction pa = CostModel::evaluate(a, layoutOf(a, 1)), pb = CostModel::evaluate(b, layoutOf(b, 1));
            if (flash) {
                // The band's keys, W - W^2 / 2s, meet the causal half s / 2 at W = s: no saving
                // there, and less time the narrower the window.
                ModelSpec wide = sliding, middle = sliding;
                wide.sliding_window.size = seq;
                middle.sliding_window.size = 4096;
                const Problem w = problemOn(wide, seq, flash), mid = problemOn(middle, seq, flash);
                const double wideTime = CostModel::evaluate(w, layoutOf(w, 1)).time_s.compute;
                const double middleTime = CostModel::evaluate(mid, layoutOf(mid, 1)).time_s.compute;
                QCOMPARE(wideTime, pa.time_s.compute);
                QVERIFY(pb.time_s.compute < middleTime && middleTime < wideTime);
            } else {
                QCOMPARE(pb.time_s.compute, pa.time_s.compute);
            }
            const double tokens = 64.0 * seq;
            QCOMPARE(pa.model_flops_per_step - pb.model_flops_per_step,
                     3 * tokens * 8 * 4.0 * (seq - window) * full.qDim());
        }
        // Half the layers sliding save half as much model FLOPs.
        ModelSpec alternate = sliding;
        alternate.sliding_window.layers = {0, 2, 4, 6};
        QCOMPARE(forwardFlopsPerToken(full, seq) - forwardFlopsPerToken(alternate, seq),
                 (forwardFlopsPerToken(full, seq) - forwardFlopsPerToken(sliding, seq)) / 2);
    }

    void scaledEngineModelRefusesByName_data()
    {
        QTest::addColumn<int>("field");
        QTest::addColumn<QString>("named");
        QTest::newRow("sliding window under cp") << 2 << "sliding_window attention under context parallelism";
        QTest::newRow("attention sinks") << 3 << "attention_sinks are not executed by the engine yet";
        // MTP is executed (mtpReachesTheEngine), not under context parallelism.
        QTest::newRow("multi-token prediction under cp") << 4 << "qwen3-like: multi-token prediction under context "
                                                                 "parallelism (cp 2) is not executed by the engine";
    }
    void scaledEngineModelRefusesByName()
    {
        QFETCH(int, field);
        QFETCH(QString, named);
        ModelSpec m = qwen3Like();
        if (field == 2)
            m.sliding_window = {4096, {}};
        m.attention_sinks = field == 3;
        if (field == 4)
            m.mtp = {2, 0.1};
        Layout l;
        l.cp = field == 2 || field == 4 ? 2 : 1;
        try {
            scaledEngineModel(m, l);
            QFAIL("not refused");
        } catch (const InputError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(named), e.what());
        }
    }

    // Multi-token prediction is executed (issue 16): the scaled model keeps the depths and their weight,
    // and the engine's parameter table counts what core counts for the model and its MTP modules.
    void mtpReachesTheEngine()
    {
        ModelSpec m = qwen3Like();
        m.mtp = {2, 0.3};
        const engine::ModelConfig c = scaledEngineModel(m, Layout{});
        QCOMPARE(c.mtp.layers, 2);
        QCOMPARE(c.mtp.loss_scale, 0.3);
        const ParameterBreakdown b = parameterBreakdown(engineModelSpec(c));
        QVERIFY(b.mtp > 0);
        QCOMPARE(engine::parameterCount(c), b.total + b.mtp);
        // DeepSeek-V3's blocks: the depth's layer is the last layer's kind (MLA + MoE).
        const engine::ModelConfig d = scaledEngineModel(BuiltinSpecs::instance().model("deepseek-v3"), Layout{});
        QCOMPARE(d.mtp.layers, 1);
        QVERIFY(d.moeLayer(d.mtpLayer(0)));
        const ParameterBreakdown db = parameterBreakdown(engineModelSpec(d));
        QCOMPARE(engine::parameterCount(d), db.total + db.mtp);
    }

    // Multi-head latent attention is executed (issue 16): the scaled model has it, without q
    // compression when the model has none, and the same count as core's.
    void mlaReachesTheEngine()
    {
        ModelSpec m = qwen3Like();
        m.qk_norm = false;
        m.kv_heads = m.heads;
        m.mla = {0, 256, 64, 32, 64};
        m.head_dim = 96;
        QVERIFY2(validate(m).empty(), joinErrors(validate(m)).c_str());
        const engine::ModelConfig c = scaledEngineModel(m, Layout{});
        QVERIFY(c.mla.enabled());
        QCOMPARE(c.mla.q_lora_rank, 0);
        QCOMPARE(c.mla.qk_rope_head_dim, 4);
        QCOMPARE(c.mla.qk_nope_head_dim, 8);  // 64 : 32
        QCOMPARE(c.mla.v_head_dim, 8);
        QCOMPARE(c.mla.softmax_mscale, 1.0);  // no YaRN
        QVERIFY(engine::validate(c).empty());
        QCOMPARE(engine::parameterCount(c), parameterCount(engineModelSpec(c)));
    }

    // Biases on q, k and v only (Qwen2) are executed: the scaled model keeps them, and only them.
    void qkvBiasReachesTheEngine()
    {
        ModelSpec m = qwen3Like();
        m.qkv_bias = true;
        const engine::ModelConfig c = scaledEngineModel(m, Layout{});
        QVERIFY(c.qkv_bias);
        QVERIFY(!c.bias);
        QVERIFY(!scaledEngineModel(qwen3Like(), Layout{}).qkv_bias);
    }

    // QK-norm (Qwen3) is executed: the scaled model has it, and the same count as core's.
    void qkNormReachesTheEngine()
    {
        ModelSpec m = qwen3Like();
        m.qk_norm = true;
        const engine::ModelConfig c = scaledEngineModel(m, Layout{});
        QVERIFY(c.qk_norm);
        QCOMPARE(engine::parameterCount(c), parameterCount(engineModelSpec(c)));
        QCOMPARE(engine::parameterCount(c) - engine::parameterCount(scaledEngineModel(qwen3Like(), Layout{})),
                 std::int64_t(c.layers) * 2 * c.headDim());  // q_norm and k_norm, RMSNorm: hd each
    }

    // A sliding window keeps its share of the longest sequence: Mistral 7B v0.1's 4096 of its
    // 32768 positions (its config.json, tests/data/hf/Mistral-7B-v0.1) is 4 of the engine's 32
    // tokens; GPT-OSS's alternation keeps the sliding layers of the model's first ones.
    void slidingWindowReachesTheEngine()
    {
        ModelSpec m = qwen3Like();
        m.max_seq = 32768;
        m.sliding_window = {4096, {}};
        const engine::ModelConfig c = scaledEngineModel(m, Layout{});
        QCOMPARE(c.seq, 32);
        QCOMPARE(c.sliding_window.size, 32 * 4096 / 32768);
        QVERIFY(c.sliding_window.layers.empty());
        m.sliding_window.layers = {0, 2, 4, 6};
        const engine::ModelConfig alternating = scaledEngineModel(m, Layout{});
        QCOMPARE(alternating.sliding_window.layers, std::vector<int>({0}));  // 2 layers: the first slides
        QCOMPARE(engineModelSpec(alternating).sliding_window, alternating.sliding_window);
    }

    void normEpsReachesTheEngine()
    {
        ModelSpec m = qwen3Like();
        m.norm_eps = 1e-6;
        QCOMPARE(scaledEngineModel(m, Layout{}).norm_eps, 1e-6);
    }
};

QTEST_GUILESS_MAIN(TstPlannerModelFields)
#include "tst_planner_modelfields.moc"
