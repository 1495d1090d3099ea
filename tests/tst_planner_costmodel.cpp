// The cost model against published closed forms, in the settings they assume:
// Megatron's FLOPs (eq. 3), Korthikanti's activation memory (all five settings),
// the ZeRO model-state table, bubble fractions, ring collective times; and the
// model's own invariants: every figure is the sum of its named terms, memory and
// time respond to the layout the way the physics says.
#include "ActivationMemory.h"
#include "AttentionKernels.h"
#include "Collectives.h"
#include "CostModel.h"
#include "CostModelParams.h"
#include "ModelStateMemory.h"
#include "MoeDispatch.h"
#include "TrainingObjective.h"

#include <random>
#include <numeric>
#include <QJsonArray>
#include <QJsonObject>
#include <QTest>

#include <bit>
#include <cmath>
#include <map>

using namespace shardscope;

namespace {

// Megatron's setting: learned positions, tied embeddings, biases, LayerNorm, 4h GeLU, V = 51200.
ModelSpec megatronGpt(int layers, int hidden, int heads, int vocab = 51200)
{
    ModelSpec m;
    m.name = "gpt";
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = heads;
    m.head_dim = hidden / heads;
    m.ffn_hidden = 4 * hidden;
    m.vocab = vocab;
    m.max_seq = 2048;
    return m;
}

// A DGX A100 80GB node as in the catalog ([P1], [V1]).
NodeType dgxA100()
{
    NodeType n;
    n.name = "dgx-a100-80gb";
    n.chip.name = "a100-80gb";
    n.chip.vendor = "NVIDIA";
    n.chip.peak_flops_bf16 = 312e12;
    n.chip.hbm_bytes = 80e9;
    n.chip.hbm_bytes_per_second = 2039e9;
    n.chips_per_node = 8;
    n.intra_topology = Topology::Switch;
    n.intra_link_bytes_per_second = 300e9;
    n.inter_node_bytes_per_second = 200e9;
    n.price_per_node_hour_usd = 30;
    return n;
}

// A DGX H100 node as in the catalog (h100-sxm: 989.4 TFLOP/s BF16 dense, 80 GB, 3.35 TB/s).
NodeType dgxH100()
{
    NodeType n = dgxA100();
    n.name = "dgx-h100";
    n.chip.name = "h100-sxm";
    n.chip.peak_flops_bf16 = 989.4e12;
    n.chip.hbm_bytes_per_second = 3350e9;
    n.intra_link_bytes_per_second = 450e9;
    n.inter_node_bytes_per_second = 400e9;
    return n;
}

// The value of the named term of a figure (0 when absent).
double termValue(const std::vector<Term>& terms, const char* figure, const std::string& nameStart)
{
    double sum = 0;
    for (const Term& t : terms)
        if (t.figure == figure && t.name.rfind(nameStart, 0) == 0)
            sum += t.value;
    return sum;
}

// The same GPT with a Mixtral-style MoE block in every layer: 8 experts, top 2, each expert's
// inner size the dense one's.
ModelSpec moeGpt(int layers, int hidden, int heads)
{
    ModelSpec m = megatronGpt(layers, hidden, heads);
    m.name = "moe-gpt";
    m.moe.experts = 8;
    m.moe.top_k = 2;
    return m;
}

Problem problem(const ModelSpec& m, int nodes, int batch, int seq = 2048)
{
    Problem p;
    p.model = m;
    p.cluster.node = dgxA100();
    p.cluster.nodes = nodes;
    p.training.global_batch = batch;
    p.training.seq_len = seq;
    return p;
}

Layout layout(const char* text, const Problem& p)
{
    FieldErrors errors;
    Layout l = parseLayout(text, errors);
    resolveDataParallel(l, p.cluster.devices(), errors);
    for (const FieldError& e : validate(l, p.model, p.cluster, p.training))
        errors.push_back(e);
    if (!errors.empty())
        qFatal("bad test layout %s: %s", text, joinErrors(errors).c_str());
    return l;
}

bool near(double a, double b, double rel) { return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)); }

// "path: message" of the first rule a layout text breaks against a problem ("" when none).
std::string firstBrokenRule(const char* text, const Problem& p)
{
    FieldErrors parsed;
    const Layout l = parseLayout(text, parsed);
    const FieldErrors e = validate(l, p.model, p.cluster, p.training);
    return e.empty() ? std::string() : e.front().path + ": " + e.front().message;
}

} // namespace

class TstPlannerCostModel : public QObject {
    Q_OBJECT
private slots:
    // Narayanan et al. eq. 3 (full recomputation): F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
    void megatronFlopsPerIteration_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("hidden");
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("batch");
        QTest::newRow("7.5B") << 36 << 4096 << 32 << 512;
        QTest::newRow("145.6B") << 80 << 12288 << 96 << 2304;
    }
    void megatronFlopsPerIteration()
    {
        QFETCH(int, layers);
        QFETCH(int, hidden);
        QFETCH(int, heads);
        QFETCH(int, batch);
        const Problem p = problem(megatronGpt(layers, hidden, heads), 16, batch);
        const Prediction pr = CostModel::evaluate(p, layout("tp=8,recompute=full", p));
        const double B = batch, s = 2048, l = layers, h = hidden, V = 51200;
        const double F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
        QVERIFY2(near(pr.hardware_flops_per_step, F, 1e-12), qPrintable(QString::number(pr.hardware_flops_per_step)));
        // Without recomputation the layers count 72 instead of 96; logits 6 B s h V either way.
        const double F72 = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
        QVERIFY(near(pr.model_flops_per_step, F72, 1e-12));
        const Prediction none = CostModel::evaluate(p, layout("tp=8,recompute=none", p));
        QVERIFY(near(none.hardware_flops_per_step, F72, 1e-12));
        QVERIFY(near(pr.mfu / pr.hfu, F72 / F, 1e-12));
    }

    // Korthikanti et al. Table 2, bytes per layer, for MHA with f = 4h.
    void activationMemoryFormulas_data()
    {
        QTest::addColumn<QString>("setting");
        QTest::newRow("no parallelism") << "none";
        QTest::newRow("tensor parallel") << "tp";
        QTest::newRow("tensor + sequence parallel") << "tp+sp";
        QTest::newRow("tensor + sequence parallel, selective") << "tp+sp+selective";
        QTest::newRow("full recomputation") << "full";
    }
    void activationMemoryFormulas()
    {
        QFETCH(QString, setting);
        const double s = 2048, b = 4, h = 12288, a = 96;
        const double t = setting == "none" || setting == "full" ? 1 : 8;
        LayerActivationShape shape;
        shape.tokens = s * b;
        shape.keys = s;
        shape.hidden = h;
        shape.q_dim_local = h / t;
        shape.kv_dim_local = h / t;
        shape.heads_local = a / t;
        shape.ffn_local = 4 * h / t;
        shape.tp = t;
        shape.sequence_parallel = setting.contains("sp");
        const LayerActivationBytes act = layerActivationBytes(shape);
        double expected = 0, got = act.all();
        if (setting == "none")
            expected = s * b * h * (34 + 5 * a * s / h);
        else if (setting == "tp")
            expected = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
        else if (setting == "tp+sp")
            expected = s * b * h / t * (34 + 5 * a * s / h);
        else if (setting == "tp+sp+selective") {
            expected = s * b * h / t * 34;
            got = act.all() - act.scores;
        } else {
            expected = 2 * s * b * h;
            got = act.input;
        }
        QCOMPARE(got, expected);
        // Without dropout no masks are kept: 2 sbh fewer outside (the two residual masks),
        // and the scores keep only the softmax output, 2 a s^2 b of 5.
        shape.dropout = false;
        const LayerActivationBytes plain = layerActivationBytes(shape);
        const double sp = shape.sequence_parallel ? t : 1;
        QCOMPARE(plain.outside_tp, act.outside_tp - 2 * s * b * h / sp);
        QCOMPARE(plain.scores, act.scores * 2 / 5);
        QCOMPARE(plain.inside_tp, act.inside_tp);
    }

    // The cost model's activation memory is that per-layer figure x layers x in-flight micro-batches.
    void activationMemoryInTheModel()
    {
        const ModelSpec m = megatronGpt(48, 8192, 64);
        const Problem p = problem(m, 64, 512);
        const double s = 2048, b = 1, h = 8192, a = 64, t = 8, V = 51200;
        // 1F1B, 4 stages: the first stage keeps p = 4 micro-batches of its 12 layers; TP+SP selective.
        const Prediction pr = CostModel::evaluate(p, layout("tp=8,pp=4,sp=on,recompute=selective", p));
        QCOMPARE(pr.memory_stage, 0);
        // (+ the two LayerNorms' fp32 mean and 1/std per token of the sequence shard)
        const double perLayer = s * b * h / t * 34 + 2 * 2 * 4 * s * b / t;
        // (+ one layer's attention scores again while that layer's attention is recomputed)
        const double recomputedScores = 5 * a * s * s * b / t;
        QVERIFY(near(pr.memory_bytes.activations, 4 * 12 * perLayer + recomputedScores, 1e-12));
        // Interleaved with v = 2 multiplies the first stage's by 1 + (p - 1)/(p v).
        const Prediction il = CostModel::evaluate(p, layout("tp=8,pp=4,sp=on,recompute=selective,schedule=interleaved,v=2", p));
        QVERIFY(near(il.memory_bytes.activations, 4 * 12 * perLayer * (1 + 3.0 / 8) + recomputedScores, 1e-12));
        // GPipe keeps every micro-batch: m = 512 / 16.
        const Prediction gp = CostModel::evaluate(p, layout("tp=8,pp=4,sp=on,recompute=selective,schedule=gpipe", p));
        // The last stage keeps the head's activations per micro-batch too: the final norm's input and
        // output (16-bit, sequence shard) with its statistics, the fp32 softmax over the vocabulary
        // shard, the fp32 losses. Under GPipe, 32 of them make it the most loaded stage.
        const double head = 2 * s * b * h / t * 2 + 2 * 4 * s * b / t + 4 * s * b * V / t + 4 * s * b;
        QCOMPARE(gp.memory_stage, 3);
        QVERIFY(near(gp.memory_bytes.activations, 32 * (12 * perLayer + head) + recomputedScores, 1e-12));
        // One stage: all of it.
        const Problem one = problem(megatronGpt(4, 8192, 64), 1, 8);
        const Prediction pr1 = CostModel::evaluate(one, layout("tp=8,sp=on,recompute=selective", one));
        QVERIFY(near(pr1.memory_bytes.activations, 4 * perLayer + recomputedScores + head, 1e-12));
    }

    // The backward's two GEMMs each at their own roofline (GemmPricer::both): compute-bound, the
    // layer matmuls' backward is twice the forward (twice its FLOPs, two launches); with a few tokens
    // a micro-batch the weight gradients are memory-bound, and reading and writing them in fp32
    // (Megatron's main_grad) instead of bf16 costs 2 x 2 bytes more per weight and micro-batch:
    // m x layers x 4 B x the 12 h^2 weights of a GPT layer (QKV 3h^2, projection h^2, MLP 8h^2) / HBM BW.
    void backwardGemmsAtTheirOwnRoofline()
    {
        const ModelSpec m = megatronGpt(4, 1024, 16);
        auto backwardAndForward = [&](int seq, MainGrads grads) {
            Problem p = problem(m, 1, 8, seq);
            p.training.main_grads = grads;
            const std::vector<Term> terms = CostModel(p, defaultCostModelParams()).explain(layout("dp=8,mb=1", p));
            return std::pair{termValue(terms, "time_s.compute", "layer matmuls, backward"),
                             termValue(terms, "time_s.compute", "layer matmuls, forward")};
        };
        const auto [bigBackward, bigForward] = backwardAndForward(2048, MainGrads::Default);
        QVERIFY2(near(bigBackward, 2 * bigForward, 1e-12), qPrintable(QString::number(bigBackward / bigForward)));
        const auto [fp32Backward, smallForward] = backwardAndForward(16, MainGrads::FP32);
        const auto [bf16Backward, sameForward] = backwardAndForward(16, MainGrads::BF16);
        QCOMPARE(smallForward, sameForward);
        QVERIFY(fp32Backward > 2 * smallForward);
        const double h = 1024, layers = 4, microBatches = 1;
        const double expected = microBatches * layers * 2 * (4 - 2) * 12 * h * h / dgxA100().chip.hbm_bytes_per_second;
        QVERIFY2(near(fp32Backward - bf16Backward, expected, 1e-9),
                 qPrintable(QString("%1 vs %2").arg(fp32Backward - bf16Backward).arg(expected)));
    }

    // Rajbhandari et al. (bf16 gradients): (2 + 2 + K) P, 2P + 2P + K P/d, 2P + (2 + K) P/d,
    // (2 + 2 + K) P/d with K = 12; with fp32 main gradients (the default) 4 bytes in place of 2.
    void zeroStatesPerDevice_data()
    {
        QTest::addColumn<int>("stage");
        QTest::addColumn<int>("grads");
        QTest::addColumn<double>("bytesPerParameter");
        const int bf16 = int(MainGrads::BF16), fp32 = int(MainGrads::Default);
        QTest::newRow("none") << 0 << bf16 << 16.0;
        QTest::newRow("ZeRO-1") << 1 << bf16 << 4 + 12.0 / 64;
        QTest::newRow("ZeRO-2") << 2 << bf16 << 2 + 14.0 / 64;
        QTest::newRow("ZeRO-3") << 3 << bf16 << 16.0 / 64;
        QTest::newRow("none, fp32 grads") << 0 << fp32 << 18.0;
        QTest::newRow("ZeRO-1, fp32 grads") << 1 << fp32 << 6 + 12.0 / 64;
        QTest::newRow("ZeRO-2, fp32 grads") << 2 << fp32 << 2 + 16.0 / 64;
        QTest::newRow("ZeRO-3, fp32 grads") << 3 << fp32 << 18.0 / 64;
    }
    void zeroStatesPerDevice()
    {
        QFETCH(int, stage);
        QFETCH(int, grads);
        QFETCH(double, bytesPerParameter);
        const ModelSpec m = megatronGpt(36, 4096, 32);
        Problem p = problem(m, 8, 512);  // 64 devices, dp = 64
        p.training.main_grads = MainGrads(grads);
        const QString text = QString("zero=%1").arg(stage);
        const Prediction pr = CostModel::evaluate(p, layout(text.toLatin1().constData(), p));
        const MemoryBreakdown& mb = pr.memory_bytes;
        const double states = mb.weights + mb.gradients + mb.optimizer;
        QVERIFY2(near(states, bytesPerParameter * double(parameterCount(m)), 1e-12),
                 qPrintable(QString::number(states / double(parameterCount(m)))));
    }

    // T5 (t5-base's shape): every parameter core counts is held, the two relative bias tables
    // included (split over tp by heads, as the engine holds them: tp ranks together hold each once);
    // pipeline stages and context parallelism are refused by name (Megatron-LM trains T5 without them).
    void encoderDecoderStatesAndRefusals()
    {
        ModelSpec m = megatronGpt(12, 768, 12, 32128);
        m.name = "t5";
        m.family = ModelFamily::EncoderDecoder;
        m.decoder_layers = 12;
        m.ffn_hidden = 3072;
        m.head_dim = 64;
        m.mlp = MlpKind::Relu;
        m.norm = NormKind::RmsNorm;
        m.positions = PositionKind::Relative;
        m.relative_buckets = 32;
        m.bias = false;
        m.max_seq = 512;
        QCOMPARE(parameterCount(m), std::int64_t(222'903'552));  // HF's t5-base num_parameters()
        const Problem p = problem(m, 1, 64, 512);
        const Prediction dp = CostModel::evaluate(p, layout("zero=0", p));
        QCOMPARE(dp.memory_bytes.weights, 2.0 * double(parameterCount(m)));
        // tp = 4: each rank a quarter of every matrix and table, the norms whole.
        const Prediction tp = CostModel::evaluate(p, layout("tp=4", p));
        const double norms = (12 * 2 + 12 * 3 + 2) * 768.0;
        QCOMPARE(tp.memory_bytes.weights, 2.0 * ((double(parameterCount(m)) - norms) / 4 + norms));
        FieldErrors errors;
        Layout pp = parseLayout("pp=2,dp=4", errors);
        const FieldErrors refused = validate(pp, p.model, p.cluster, p.training);
        QCOMPARE(refused.size(), size_t(1));
        QCOMPARE(refused[0].path, std::string("layout.pp"));
        Layout cp = parseLayout("cp=2,dp=4", errors);
        QCOMPARE(validate(cp, p.model, p.cluster, p.training)[0].path, std::string("layout.cp"));
    }

    // An encoder trains BERT's pretraining heads (TrainingObjective.h): BERT base holds BertModel's
    // 109,482,240 parameters plus the masked-LM and next-sentence heads, 110,106,428 in all, and its
    // model FLOPs add the transform per token and the pooler with its head per sequence.
    void encoderTrainsItsPretrainingHeads()
    {
        ModelSpec m = megatronGpt(12, 768, 12, 30522);
        m.name = "bert-base";
        m.family = ModelFamily::EncoderOnly;
        m.max_seq = 512;
        m.token_types = 2;
        m.embedding_norm = true;
        m.final_norm = false;
        m.pooler = true;
        QCOMPARE(parameterCount(m), std::int64_t(109'482'240));
        QCOMPARE(pretrainingParameterCount(m), std::int64_t(110'106'428));
        const Problem p = problem(m, 1, 8, 512);
        const Prediction pr = CostModel::evaluate(p, layout("dp=8,mb=1", p));
        const MemoryBreakdown& mb = pr.memory_bytes;
        // bf16 mixed with fp32 main gradients, no ZeRO: 2 + 4 + 12 bytes, whole on each of dp 8.
        QCOMPARE(mb.weights + mb.gradients + mb.optimizer, 18.0 * 110'106'428);
        const double tokens = 8.0 * 512, h = 768;
        const double forward = double(forwardFlopsPerToken(m, 512)) * tokens + 2 * h * h * tokens + (2 * h * h + 4 * h) * 8;
        QVERIFY2(near(pr.model_flops_per_step, 3 * forward, 1e-12), qPrintable(QString::number(pr.model_flops_per_step)));
        // Over tp (no SP) each rank runs the replicated transform and pooler: hardware FLOPs count the copies.
        const Prediction tp = CostModel::evaluate(p, layout("dp=2,tp=4,mb=4", p));
        QVERIFY(near(tp.model_flops_per_step, 3 * forward, 1e-12));
        QVERIFY(near(tp.hardware_flops_per_step - tp.model_flops_per_step,
                     3 * 3 * (2 * h * h * tokens + (2 * h * h + 4 * h) * 8), 1e-12));
        const Prediction sp = CostModel::evaluate(p, layout("dp=2,tp=4,mb=4,sp=on", p));
        QVERIFY(near(sp.hardware_flops_per_step - sp.model_flops_per_step, 3 * 3 * (2 * h * h + 4 * h) * 8, 1e-12));
    }

    // Bubble fraction of the ideal time: (p - 1)/m for GPipe and 1F1B, (p - 1)/(v m) interleaved.
    // A tiny vocabulary makes all stages equal, the setting of the formula.
    void bubbleFractions_data()
    {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<double>("v");
        QTest::newRow("1f1b") << "1f1b" << 1.0;
        QTest::newRow("gpipe") << "gpipe" << 1.0;
        QTest::newRow("interleaved v=2") << "interleaved,v=2" << 2.0;
        QTest::newRow("interleaved v=4") << "interleaved,v=4" << 4.0;
    }
    void bubbleFractions()
    {
        QFETCH(QString, schedule);
        QFETCH(double, v);
        const Problem p = problem(megatronGpt(32, 4096, 32, 8), 8, 2048);
        const QString text = "tp=1,pp=4,mb=1,schedule=" + schedule;  // dp = 16, m = 128
        const Prediction pr = CostModel::evaluate(p, layout(text.toLatin1().constData(), p));
        const TimeBreakdown& t = pr.time_s;
        const double ideal = t.compute + t.recompute + t.tp_comm + t.cp_comm;
        QCOMPARE(pr.micro_batches, 128);
        QVERIFY2(near(t.bubble / ideal, 3.0 / (v * 128), 1e-3), qPrintable(QString::number(t.bubble / ideal)));
    }

    // formulas.md, "Collectives": ring alpha-beta times.
    void ringCollectives()
    {
        const double n = 8, S = 1e9, beta = 100e9, alpha = 5e-6;
        LinkModel link;
        link.intra_bytes_per_second = beta;
        link.intra_latency_s = alpha;
        link.domain_devices = 8;
        const GroupPlacement g = placeGroup(n, 1, 8);
        QVERIFY(!g.crossesDomains());
        QCOMPARE(allReduceTime(g, S, link), 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / beta);
        QCOMPARE(reduceScatterTime(g, S, link), (n - 1) * alpha + (n - 1) / n * S / beta);
        QCOMPARE(allGatherTime(g, S, link), (n - 1) * alpha + (n - 1) / n * S / beta);
        QCOMPARE(sendRecvTime(false, S, link), alpha + S / beta);
        QCOMPARE(allReduceTime(placeGroup(1, 1, 8), S, link), 0.0);
        // A launch cost is paid once per call: an all-reduce is one call, RS + AG are two.
        const double launch = 7e-6;
        link.launch_s = launch;
        QCOMPARE(allReduceTime(g, S, link), launch + 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / beta);
        QCOMPARE(reduceScatterTime(g, S, link) + allGatherTime(g, S, link), allReduceTime(g, S, link) + launch);
        QCOMPARE(sendRecvTime(false, S, link), launch + alpha + S / beta);
        QCOMPARE(allReduceTime(placeGroup(1, 1, 8), S, link), 0.0);
    }

    // Across nodes: hierarchical = RS inside + all-reduce of S/k across + AG inside;
    // flat ring = one ring at the slowest hop.
    void collectivesAcrossNodes()
    {
        LinkModel link;
        link.intra_bytes_per_second = 200e9;
        link.inter_bytes_per_second = 20e9;
        link.intra_latency_s = 5e-6;
        link.inter_latency_s = 2e-5;
        link.domain_devices = 8;
        const double S = 4e9;
        const GroupPlacement g = placeGroup(64, 1, 8);  // 8 per node, 8 nodes
        QCOMPARE(g.members_per_domain, 8.0);
        QCOMPARE(g.domains, 8.0);
        link.hierarchical = true;
        const double rsIntra = 7 * 5e-6 + 7.0 / 8 * S / 200e9;
        const double arInter = 2 * 7 * 2e-5 + 2 * 7.0 / 8 * (S / 8) / 20e9;
        QVERIFY(near(allReduceTime(g, S, link), 2 * rsIntra + arInter, 1e-12));
        link.hierarchical = false;
        QVERIFY(near(allReduceTime(g, S, link), 2 * 63 * 2e-5 + 2 * 63.0 / 64 * S / 20e9, 1e-12));
        // A group strided past the node: one member per node.
        const GroupPlacement dp = placeGroup(16, 8, 8);
        QCOMPARE(dp.members_per_domain, 1.0);
        QCOMPARE(dp.domains, 16.0);

        // NCCL's rings over every NIC (multi_nic_rings): the 8 members of a node cross through 8 NICs
        // at once, 8 x 20 GB/s = 160 GB/s, below the 200 GB/s scale-up link.
        link.multi_nic_rings = true;
        QVERIFY(near(allReduceTime(g, S, link), 2 * 63 * 2e-5 + 2 * 63.0 / 64 * S / 160e9, 1e-12));
        // 4 members per node (stride 2): 4 NICs, 80 GB/s; one per node: its own share, as before.
        const GroupPlacement half = placeGroup(32, 2, 8);
        QCOMPARE(half.members_per_domain, 4.0);
        QVERIFY(near(reduceScatterTime(half, S, link), 31 * 2e-5 + 31.0 / 32 * S / 80e9, 1e-12));
        QVERIFY(near(allGatherTime(dp, S, link), 15 * 2e-5 + 15.0 / 16 * S / 20e9, 1e-12));
        // Never faster than the scale-up link every member's share of every ring runs through.
        link.intra_bytes_per_second = 100e9;
        QVERIFY(near(allGatherTime(g, S, link), 63 * 2e-5 + 63.0 / 64 * S / 100e9, 1e-12));
        // The hierarchical variant already runs k cross-domain rings side by side: unchanged.
        link.intra_bytes_per_second = 200e9;
        link.hierarchical = true;
        QVERIFY(near(allReduceTime(g, S, link), 2 * rsIntra + arInter, 1e-12));
        // nccl-tests' bus bandwidth (doc/PERFORMANCE.md): without latency, the bottleneck link's rate.
        link.hierarchical = false;
        link.inter_latency_s = 0;
        QVERIFY(near(allReduceBusBandwidth(64, S / allReduceTime(g, S, link)), 160e9, 1e-12));
        QVERIFY(near(ringHalfBusBandwidth(64, S / allGatherTime(g, S, link)), 160e9, 1e-12));
        QCOMPARE(allReduceBusBandwidth(1, 1e9), 0.0);
    }

    // The cost model's data-parallel rings with NCCL's multi-NIC rings (network.multi_nic_rings): a
    // dp group filling two DGX A100 nodes crosses with all 8 NICs of a node, 8 x 200/8 GB/s x 0.8
    // (below the 300 x 0.8 GB/s NVLink share), instead of one NIC's 25 x 0.8; latency unchanged.
    void multiNicRingsInTheCostModel()
    {
        const Problem p = problem(megatronGpt(4, 4096, 32), 2, 16);
        const Layout l = layout("dp=16,mb=1,zero=0", p);
        const CostModelParams nics = defaultCostModelParams();
        QVERIFY(nics.multi_nic_rings);  // the shipped profile: NCCL's rings (cost-model.json says why)
        CostModelParams perDevice = nics;
        perDevice.multi_nic_rings = false;
        auto bucketTime = [&](const CostModelParams& params, double& grads, double& buckets) {
            const CostLedger ledger = CostModel(p, params).ledger(l);
            for (const Collective& c : ledger.collectives)
                if (c.dimension == CommDimension::Dp && c.kind == CommKind::AllReduce && c.calls >= 1) {
                    grads = c.bytes / (2 * 15.0 / 16);
                    buckets = c.calls;
                    return c.time_s();
                }
            return -1.0;
        };
        double grads = 0, buckets = 0;
        const double flat = bucketTime(perDevice, grads, buckets);
        const double latency = 2 * 15 * 2e-5;
        QVERIFY(near(flat, buckets * latency + 2 * 15.0 / 16 * grads / (25e9 * 0.8), 1e-12));
        QVERIFY(near(bucketTime(nics, grads, buckets), buckets * latency + 2 * 15.0 / 16 * grads / (200e9 * 0.8), 1e-12));
        // A tp=8 layout's dp group has one member per node: its own NIC either way.
        const Layout tp8 = layout("dp=2,tp=8,mb=1,zero=0", p);
        QCOMPARE(CostModel(p, nics).evaluate(tp8).time_s.dp_comm, CostModel(p, perDevice).evaluate(tp8).time_s.dp_comm);
    }

    // Every figure of the prediction is the sum of its named terms.
    void termsSumToFigures_data()
    {
        QTest::addColumn<QString>("layoutText");
        QTest::newRow("3D + ZeRO-1 + selective") << "tp=8,pp=4,sp=on,zero=1,recompute=selective";
        QTest::newRow("interleaved + full") << "tp=8,pp=4,schedule=interleaved,v=2,recompute=full";
        QTest::newRow("ZeRO-3 data parallel") << "zero=3,mb=2,recompute=full";
        QTest::newRow("context parallel") << "tp=8,cp=2,sp=on";
        QTest::newRow("Megatron overlaps") << "tp=8,pp=2,sp=on,zero=1,tp_comm_overlap=on,overlap_param_gather=on";
    }
    void termsSumToFigures()
    {
        QFETCH(QString, layoutText);
        const Problem p = problem(megatronGpt(32, 4096, 32), 8, 512);
        const CostModel model(p);
        const Layout l = layout(layoutText.toLatin1().constData(), p);
        const Prediction pr = model.evaluate(l);
        std::map<std::string, double> sums;
        for (const Term& t : model.explain(l))
            sums[t.figure] += t.value;
        const TimeBreakdown& t = pr.time_s;
        const MemoryBreakdown& m = pr.memory_bytes;
        const std::map<std::string, double> figures{
            {"time_s.compute", t.compute},     {"time_s.recompute", t.recompute},
            {"time_s.tp_comm", t.tp_comm},     {"time_s.cp_comm", t.cp_comm},
            {"time_s.pp_comm", t.pp_comm},     {"time_s.dp_comm", t.dp_comm},
            {"time_s.bubble", t.bubble},       {"time_s.optimizer", t.optimizer},
            {"memory_bytes.weights", m.weights}, {"memory_bytes.gradients", m.gradients},
            {"memory_bytes.optimizer", m.optimizer}, {"memory_bytes.activations", m.activations},
            {"memory_bytes.buffers", m.buffers}, {"memory_bytes.reserve", m.reserve}};
        for (const auto& [figure, value] : figures)
            QVERIFY2(near(sums[figure], value, 1e-9) || (value == 0 && std::fabs(sums[figure]) < 1e-15),
                     qPrintable(QString("%1: terms %2, figure %3").arg(figure.c_str()).arg(sums[figure]).arg(value)));
        QVERIFY(near(pr.step_time_s, t.sum(), 1e-12));
    }

    // The ledger is the prediction: every figure is the sum of its terms (to the last bit: the
    // evaluation sets each figure as the sum of the terms it adds), the step the sum of the time
    // terms, the bytes by kind and dimension the sums of the collectives', and where one stage sets
    // every time (pp = 1) each communication figure is its collectives' exposed time.
    void ledgerIsThePrediction_data()
    {
        QTest::addColumn<QString>("layoutText");
        QTest::addColumn<bool>("flash");
        QTest::addColumn<bool>("moe");
        QTest::newRow("dp") << "mb=1" << false << false;
        QTest::newRow("tp+sp") << "tp=8,sp=on,mb=2" << false << false;
        QTest::newRow("tp+sp, tp-comm-overlap") << "tp=8,sp=on,tp_comm_overlap=on,zero=1,overlap_param_gather=on" << false << false;
        QTest::newRow("pp interleaved") << "tp=4,pp=4,schedule=interleaved,v=2,sp=on,zero=1" << false << false;
        QTest::newRow("cp") << "tp=4,cp=4,sp=on" << true << false;
        QTest::newRow("ZeRO-3") << "zero=3,mb=2,recompute=full" << false << false;
        QTest::newRow("ZeRO-3 HSDP") << "zero=3,zero_group=8,tp=2" << false << false;
        QTest::newRow("ZeRO-2") << "zero=2,tp=2,pp=2" << false << false;
        QTest::newRow("offload") << "zero=1,offload=optimizer,tp=2" << false << false;
        // MoE (issue 16): experts over ep (in a node and across nodes), etp apart from tp, ZeRO on
        // the experts' own edp group, the all-to-all under another micro-batch (ep_comm_overlap).
        QTest::newRow("moe ep in a node") << "ep=8,mb=2" << false << true;
        QTest::newRow("moe ep across nodes, tp") << "tp=2,sp=on,ep=8,zero=1" << false << true;
        QTest::newRow("moe etp apart, ZeRO-3") << "tp=2,sp=on,ep=4,etp=1,zero=3" << true << true;
        QTest::newRow("moe pp, full recompute") << "tp=2,sp=on,pp=2,ep=2,zero=2,recompute=full" << false << true;
        QTest::newRow("moe overlap") << "ep=8,ep_comm_overlap=on,zero=1" << false << true;
        // Recomputed modules and activation offload (their terms in the ledger, the figures their sums).
        QTest::newRow("moe recompute modules")
            << "tp=2,sp=on,ep=4,recompute=selective,recompute_modules=layernorm+moe_act+moe" << true
            << true;
        QTest::newRow("dense recompute modules, pp") << "tp=2,sp=on,pp=4,recompute=selective,recompute_modules=core_attn+mlp"
                                                     << false << false;
        QTest::newRow("activation offload") << "tp=8,sp=on,mb=1,offload_activations=5" << true << false;
    }
    void ledgerIsThePrediction()
    {
        QFETCH(QString, layoutText);
        QFETCH(bool, flash);
        QFETCH(bool, moe);
        Problem p = problem(moe ? moeGpt(32, 4096, 32) : megatronGpt(32, 4096, 32), 8, 512);
        p.cluster.node.host_link_bytes_per_second = 32e9;  // (offload needs a published host link)
        p.training.flash_attention = flash;
        const CostModel model(p);
        const Layout l = layout(layoutText.toLatin1().constData(), p);
        CostLedger ledger;
        const Prediction pr = model.evaluate(l, &ledger);
        QCOMPARE(model.evaluate(l).step_time_s, pr.step_time_s);  // recording changes nothing
        {
            CostLedger again = ledger;  // a ledger passed again is filled afresh, not appended to
            model.evaluate(l, &again);
            QCOMPARE(again.terms.size(), ledger.terms.size());
            QCOMPARE(again.collectives.size(), ledger.collectives.size());
        }

        const TimeBreakdown& t = pr.time_s;
        const MemoryBreakdown& mem = pr.memory_bytes;
        const std::map<Figure, double> figures{
            {Figure::Compute, t.compute},     {Figure::Recompute, t.recompute}, {Figure::TpComm, t.tp_comm},
            {Figure::CpComm, t.cp_comm},      {Figure::PpComm, t.pp_comm},      {Figure::DpComm, t.dp_comm},
            {Figure::EpComm, t.ep_comm},
            {Figure::Bubble, t.bubble},       {Figure::Optimizer, t.optimizer}, {Figure::Offload, t.offload},
            {Figure::Weights, mem.weights},   {Figure::Gradients, mem.gradients},
            {Figure::OptimizerStates, mem.optimizer}, {Figure::Activations, mem.activations},
            {Figure::Buffers, mem.buffers},   {Figure::Reserve, mem.reserve},
            {Figure::HostActivations, mem.host_activations}};
        QCOMPARE(int(figures.size()), kFigureCount);
        double step = 0;
        for (const auto& [figure, value] : figures) {
            QVERIFY2(ledger.figure(figure) == value, figureKey(figure));
            if (isTimeFigure(figure))
                step += ledger.figure(figure);
        }
        QVERIFY(near(step, pr.step_time_s, 1e-12));
        double timeTerms = 0;
        for (const LedgerTerm& term : ledger.terms)
            timeTerms += isTimeFigure(term.figure) ? term.value : 0.0;
        QVERIFY(near(timeTerms, pr.step_time_s, 1e-12));

        // Bytes by kind and by dimension: the collectives' sums.
        std::map<CommKind, double> byKind;
        std::map<CommDimension, double> byDimension;
        std::map<CommDimension, double> exposed, hidden;
        for (const Collective& c : ledger.collectives) {
            byKind[c.kind] += c.bytes;
            byDimension[c.dimension] += c.bytes;
            exposed[c.dimension] += c.exposed_s;
            hidden[c.dimension] += c.hidden_s;
            QVERIFY2(c.calls > 0 && c.bytes > 0, c.what);
            QVERIFY2(c.exposed_s >= 0 && c.hidden_s >= 0, c.what);
        }
        const CommBytes& b = pr.comm_bytes;
        QVERIFY(b.total() > 0);
        QVERIFY(near(byKind[CommKind::AllReduce], b.all_reduce, 1e-12));
        QVERIFY(near(byKind[CommKind::ReduceScatter], b.reduce_scatter, 1e-12));
        QVERIFY(near(byKind[CommKind::AllGather], b.all_gather, 1e-12));
        QVERIFY(near(byKind[CommKind::SendRecv], b.send_recv, 1e-12));
        QVERIFY(near(byKind[CommKind::AllToAll], b.all_to_all, 1e-12) || (b.all_to_all == 0 && !moe));
        QVERIFY(near(byDimension[CommDimension::Ep], b.ep, 1e-12) || (b.ep == 0 && l.ep == 1));
        QCOMPARE(b.all_to_all > 0, l.ep > 1);
        QVERIFY(near(byDimension[CommDimension::Tp], b.tp, 1e-12));
        QVERIFY(near(byDimension[CommDimension::Cp], b.cp, 1e-12));
        QVERIFY(near(byDimension[CommDimension::Pp], b.pp, 1e-12));
        QVERIFY(near(byDimension[CommDimension::Dp] + byDimension[CommDimension::ExpertDp] +
                         byDimension[CommDimension::EmbeddingGroup] + byDimension[CommDimension::AllDevices],
                     b.dp, 1e-12));

        if (l.pp == 1) {  // one stage: the collectives listed are the ones that set the time
            QCOMPARE(ledger.time_stage, 0);
            QCOMPARE(ledger.bytes_stage, 0);
            QVERIFY(near(exposed[CommDimension::Tp], t.tp_comm, 1e-12) || (t.tp_comm == 0 && exposed[CommDimension::Tp] == 0));
            QVERIFY(near(hidden[CommDimension::Tp], t.hidden.tp_comm, 1e-12) || t.hidden.tp_comm == 0);
            const double dpExposed = exposed[CommDimension::Dp] + exposed[CommDimension::ExpertDp];
            QVERIFY(near(dpExposed, t.dp_comm, 1e-9) || (t.dp_comm == 0 && dpExposed < 1e-15));
            QVERIFY(near(hidden[CommDimension::Dp] + hidden[CommDimension::ExpertDp], t.hidden.dp_comm, 1e-12));
            QVERIFY(near(exposed[CommDimension::Ep], t.ep_comm, 1e-12) || (t.ep_comm == 0 && exposed[CommDimension::Ep] == 0));
            QVERIFY(near(hidden[CommDimension::Ep], t.hidden.ep_comm, 1e-12) || t.hidden.ep_comm == 0);
            QCOMPARE(t.hidden.ep_comm > 0, l.ep_comm_overlap);
            QVERIFY(near(hidden[CommDimension::Cp], t.hidden.cp_comm, 1e-12) || t.hidden.cp_comm == 0);
            const double merges = termValue(model.explain(l), "time_s.cp_comm", "CP ring: partial results merged");
            QVERIFY(near(exposed[CommDimension::Cp] + merges, t.cp_comm, 1e-12) || t.cp_comm == 0);
        } else {
            QVERIFY(near(exposed[CommDimension::Pp], t.pp_comm, 1e-12));  // the same sends on every stage
        }

        // The ZeRO rule's bytes against the model states it shards (bf16 weights and gradients,
        // ring volumes of formulas.md): n - 1 of n shards of the stage's parameters move.
        const double n = double(l.dp) * l.cp, shard = l.zero_stage > 0 ? double(l.zeroGroupSize()) * l.cp : 1.0;
        double dpAllGather = 0, dpReduceScatter = 0, dpAllReduce = 0;
        for (const Collective& c : ledger.collectives)
            if (c.dimension == CommDimension::Dp)
                (c.kind == CommKind::AllGather ? dpAllGather : c.kind == CommKind::ReduceScatter ? dpReduceScatter : dpAllReduce) +=
                    c.bytes;
        if (l.pp == 1 && !moe) {  // (MoE: the experts' own group, expertParallelism())
            const double m = pr.micro_batches;
            const double stageGradients = l.zero_stage >= 2 ? mem.gradients * shard : mem.gradients;
            const double stageWeights = l.zero_stage == 3 ? mem.weights * shard : mem.weights;
            switch (l.zero_stage) {
            case 0: QVERIFY(near(dpAllReduce, 2 * (n - 1) / n * stageGradients, 1e-12)); break;
            case 3:
                QVERIFY(near(dpAllGather, m * 2 * (shard - 1) / shard * stageWeights, 1e-12));
                QVERIFY(near(dpReduceScatter, m * (shard - 1) / shard * stageGradients, 1e-12));
                break;
            default:
                QVERIFY(near(dpAllGather, (shard - 1) / shard * stageWeights, 1e-12));
                break;
            }
            const double replicas = n / shard;  // HSDP: the owned shard all-reduced across the groups
            if (l.zero_stage > 0)
                QVERIFY(replicas > 1 ? near(dpAllReduce, 2 * (replicas - 1) / replicas * stageGradients / shard, 1e-12)
                                     : dpAllReduce == 0);
        }
    }

    // Issue 16: expert parallelism with Megatron-LM's semantics, figures derived by hand. A GPT of
    // 32 layers, h 4096, with 8 GeLU experts of f 16384 (top 2) in every layer, on 8 DGX H100
    // (64 GPUs), batch 512 x 2048.
    void expertParallelism()
    {
        Problem p = problem(moeGpt(32, 4096, 32), 8, 512);
        p.cluster.node = dgxH100();
        const CostModel model(p);
        const CostModelParams& prm = defaultCostModelParams();
        const double h = 4096, f = 16384, L = 32, s = 2048, k = 2;
        const double expert = 2 * h * f + f + h;  // fc1, fc2 and their biases
        const StateBytesPerParameter bytes = stateBytesPerParameter(p.training);
        const double perParam = bytes.weights + bytes.gradients + bytes.optimizer;

        // ep=8, tp=1: one expert per GPU, the ep group one node.
        const Layout ep8 = layout("ep=8", p);
        QCOMPARE(ep8.expertDataParallel(), 8);
        CostLedger ledger;
        const Prediction a = model.evaluate(ep8, &ledger);
        QVERIFY(near(a.memory_bytes.experts, L * 1 * expert * perParam, 1e-12));
        // The routing is a term of its own: per micro-batch and MoE layer, forward and backward, the
        // fitted fixed overhead plus the permutations' launches (2 kernels: one local expert) and
        // their traffic (the T k copies before the dispatch and after the combine, read and written).
        double routing = -1;
        for (const LedgerTerm& term : ledger.terms)
            if (std::string(term.name).rfind("MoE routing", 0) == 0)
                routing = term.value;
        const double permuted = 2 * (2 * s * k) * h * 2 / p.cluster.node.chip.hbm_bytes_per_second;
        QVERIFY2(near(routing, 8 * L * 2 * (prm.moe_layer_overhead_s + 2 * prm.kernel_overhead_s + permuted), 1e-9),
                 qPrintable(QString::number(routing)));
        // Expert gradients all-reduced over edp = 8 (ring volume 2 (n - 1)/n), nothing else on edp.
        double edpBytes = 0;
        for (const Collective& c : ledger.collectives)
            if (c.dimension == CommDimension::ExpertDp) {
                QCOMPARE(c.kind, CommKind::AllReduce);
                QCOMPARE(c.placement, CommPlacement::InterDomain);  // stride 8: one member per node
                edpBytes += c.bytes;
            }
        QVERIFY(near(edpBytes, 2.0 * 7 / 8 * L * expert * bytes.gradients, 1e-12));
        // The all-to-all: per micro-batch and MoE layer 2 forward and 2 backward calls, each handing
        // over the 2048 tokens' 2 copies of h bf16 values, and the copies' router weights (fp32)
        // forward and their gradients backward; m = 512 / 64 = 8.
        const double payload = s * k * h * 2, calls = 8 * L * 4, weights = s * k * 4.0;
        QVERIFY(near(a.comm_bytes.all_to_all, calls * payload + 8 * L * 2 * weights, 1e-12));
        // ... and on ep besides, the copies per expert (8 int64) gathered before each forward dispatch.
        QVERIFY(near(a.comm_bytes.ep, a.comm_bytes.all_to_all + 8 * L * (7.0 / 8 * 8 * 8 * 8), 1e-12));
        // In one node: 7 of 8 shares over NVLink (450 GB/s x efficiency), one latency.
        const double intraBw = 450e9 * prm.intra_link_efficiency, interBw = 400e9 * prm.inter_node_efficiency / 8;
        auto inNodeCall = [&](double bytes) {
            return prm.collective_launch_s + prm.intra_latency_s + 7.0 / 8 * bytes / intraBw;
        };
        const double inNode = inNodeCall(payload);
        // (+ the copies per expert gathered once per forward: a ring all-gather of 8 x 8 int64.)
        const double countsGather = prm.collective_launch_s + 7 * prm.intra_latency_s + 7.0 / 8 * (8 * 8 * 8.0) / intraBw;
        QVERIFY2(near(a.time_s.ep_comm, calls * inNode + 8 * L * 2 * inNodeCall(weights) + 8 * L * countsGather, 1e-9),
                 qPrintable(QString::number(a.time_s.ep_comm)));
        QCOMPARE(a.time_s.hidden.ep_comm, 0.0);

        // ep=4: twice the experts per GPU, twice their states.
        const Prediction b = model.evaluate(layout("ep=4", p));
        QVERIFY(near(b.memory_bytes.experts, 2 * a.memory_bytes.experts, 1e-12));
        // No ep: every GPU holds all 8 experts, and no all-to-all.
        const Prediction none = model.evaluate(layout("dp=64", p));
        QVERIFY(near(none.memory_bytes.experts, 8 * a.memory_bytes.experts, 1e-12));
        QCOMPARE(none.comm_bytes.all_to_all, 0.0);
        QCOMPARE(none.time_s.ep_comm, 0.0);
        // The same model FLOPs whatever the experts' placement.
        QCOMPARE(none.model_flops_per_step, a.model_flops_per_step);

        // tp=2 (sp), ep=8 with etp = tp: the ep group at stride 2 spans 16 GPUs, two nodes: 3 peers
        // in the node, 4 in the other, the network share slower; tokens per GPU are the sequence
        // shard (1024); dp = 32, so m = 16.
        const Layout wide = layout("tp=2,sp=on,ep=8", p);
        const double wideCalls = 16 * L * 4;
        const Prediction c = model.evaluate(wide);
        const double wideLoad = (s / 2) * k * h * 2, wideWeights = (s / 2) * k * 4.0;
        auto crossingCall = [&](double bytes) {
            return prm.collective_launch_s + std::max(prm.intra_latency_s + 3.0 / 8 * bytes / intraBw,
                                                      prm.inter_latency_s + 4.0 / 8 * bytes / interBw);
        };
        const double crossing = crossingCall(wideLoad);
        // (The counts' gather over the 16 devices of etp x ep: one flat ring across the two nodes,
        // crossing as NCCL's rings do, through the 8 NICs of a node at once.)
        QVERIFY(prm.multi_nic_rings);
        const double wideCounts = prm.collective_launch_s + 15 * prm.inter_latency_s +
                                  15.0 / 16 * (16 * 8 * 8.0) / std::min(intraBw, 8 * interBw);
        QVERIFY2(near(c.time_s.ep_comm,
                      wideCalls * crossing + 16 * L * 2 * crossingCall(wideWeights) + 16 * L * wideCounts, 1e-9),
                 qPrintable(QString::number(c.time_s.ep_comm)));
        QVERIFY(near(c.comm_bytes.all_to_all, wideCalls * wideLoad + 16 * L * 2 * wideWeights, 1e-12));
        // ... and the routed copies gathered and scattered over etp = 2: R = 1024 x 2 x 2 copies,
        // with their router weights (fp32) once per forward.
        CostLedger wideLedger;
        model.evaluate(wide, &wideLedger);
        double etpGather = 0;
        for (const Collective& c2 : wideLedger.collectives)
            if (c2.dimension == CommDimension::Tp && c2.kind == CommKind::AllGather &&
                std::string(c2.what).rfind("MoE", 0) == 0)
                etpGather += c2.bytes;
        QVERIFY(near(etpGather, 16 * L * 0.5 * (1024 * k * 2) * (2 * h * 2 + 4.0), 1e-12));

        // A busier rank (1.5x the mean) takes longer in its experts and its all-to-all; the
        // bytes (a dropless count) stay.
        Problem skewed = p;
        skewed.training.moe_imbalance = 1.5;
        const Prediction d = CostModel(skewed).evaluate(ep8);
        QCOMPARE(d.comm_bytes.all_to_all, a.comm_bytes.all_to_all);
        QVERIFY(d.time_s.ep_comm > 1.4 * a.time_s.ep_comm);
        QVERIFY(d.time_s.compute > a.time_s.compute);
        QVERIFY(d.memory_bytes.activations > a.memory_bytes.activations);

        // Overlapped with another micro-batch's compute: all but one micro-batch's share hides.
        const Prediction e = model.evaluate(layout("ep=8,ep_comm_overlap=on", p));
        QVERIFY(e.time_s.hidden.ep_comm > 0);
        QVERIFY(near(e.time_s.ep_comm + e.time_s.hidden.ep_comm, a.time_s.ep_comm, 1e-9));
        QVERIFY(e.time_s.hidden.ep_comm <= 7.0 / 8 * (calls * inNode + 8 * L * 2 * inNodeCall(weights)) * (1 + 1e-9));
    }

    // The flex dispatchers' expectation (MoeDispatch.h) against a brute-force count: every k-subset of
    // E experts (top-k picks distinct experts, uniformly under force-balanced routing), the experts
    // laid out in `bins` equal bins (nodes, or GPUs), the distinct bins each subset touches averaged.
    void flexNodeCrossings_data()
    {
        QTest::addColumn<int>("experts");
        QTest::addColumn<int>("topK");
        QTest::addColumn<int>("bins");
        QTest::newRow("16 experts, top 2, 2 nodes") << 16 << 2 << 2;
        QTest::newRow("16 experts, top 4, 4 nodes") << 16 << 4 << 4;
        QTest::newRow("16 experts, top 4, 16 GPUs") << 16 << 4 << 16;
        QTest::newRow("20 experts, top 8, 5 nodes") << 20 << 8 << 5;
        QTest::newRow("12 experts, top 12, 3 nodes") << 12 << 12 << 3;
        QTest::newRow("8 experts, top 1, 8 GPUs") << 8 << 1 << 8;
    }
    void flexNodeCrossings()
    {
        QFETCH(int, experts);
        QFETCH(int, topK);
        QFETCH(int, bins);
        const int binSize = experts / bins;
        double touched = 0, subsets = 0, localTouched = 0;
        for (unsigned mask = 0; mask < (1u << experts); ++mask) {
            if (std::popcount(mask) != topK)
                continue;
            unsigned hit = 0;
            for (int e = 0; e < experts; ++e)
                if (mask & (1u << e))
                    hit |= 1u << (e / binSize);
            touched += std::popcount(hit);
            localTouched += (hit & 1u) ? 1 : 0;  // bin 0: the sender's own
            ++subsets;
        }
        QVERIFY(near(expectedBinsTouched(experts, topK, bins), touched / subsets, 1e-12));
        // The remote crossings: the touched bins less the local one's share.
        const FlexSends f = flexSends(experts, topK, bins, bins, 1);
        QVERIFY(near(f.network, touched / subsets - localTouched / subsets, 1e-12) || (bins == 1 && f.network == 0));
    }
    // ... and with independent picks, the limit of many experts, N (1 - (1 - 1/N)^k).
    void flexNodeCrossingsLimit()
    {
        for (const double nodes : {2.0, 4.0, 8.0}) {
            const double independent = nodes * (1 - std::pow(1 - 1 / nodes, 8));
            QVERIFY(near(expectedBinsTouched(1 << 20, 8, nodes), independent, 1e-4));
            // (Fewer experts, fewer repeats in a bin: more bins touched than independent picks.)
            QVERIFY(expectedBinsTouched(64, 8, nodes) > independent);
        }
    }

    // Group-limited routing (Megatron-LM moe_utils.py group_limited_topk @ d98e8a64): the chance a
    // token touches a bin of experts, against Megatron's selection run on random scores (force-balanced
    // routing): DeepSeek-V3's 256 experts in 8 groups, top 4 groups, top 8, over ep 32 on 4 nodes
    // (a node: 2 whole groups; a GPU: 8 experts of a group). Without groups: the uniform figure.
    void groupLimitedRouting()
    {
        const int experts = 256, groups = 8, groupTopK = 4, topK = 8, perGroup = experts / groups;
        std::mt19937 rng(11);
        std::uniform_real_distribution<double> uniform(0.0, 1.0);
        const int trials = 40000;
        int nodeHits = 0, gpuHits = 0;
        std::vector<double> score(experts);
        std::vector<int> order(groups), candidates;
        for (int t = 0; t < trials; ++t) {
            for (double& x : score)
                x = uniform(rng);
            std::vector<double> groupScore(groups);
            for (int g = 0; g < groups; ++g) {
                std::vector<double> members(score.begin() + g * perGroup, score.begin() + (g + 1) * perGroup);
                std::partial_sort(members.begin(), members.begin() + topK / groupTopK, members.end(), std::greater<>());
                groupScore[size_t(g)] = std::accumulate(members.begin(), members.begin() + topK / groupTopK, 0.0);
            }
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + groupTopK, order.end(),
                              [&](int a, int b) { return groupScore[size_t(a)] > groupScore[size_t(b)]; });
            candidates.clear();
            for (int g = 0; g < groupTopK; ++g)
                for (int e = order[size_t(g)] * perGroup; e < (order[size_t(g)] + 1) * perGroup; ++e)
                    candidates.push_back(e);
            std::partial_sort(candidates.begin(), candidates.begin() + topK, candidates.end(),
                              [&](int a, int b) { return score[size_t(a)] > score[size_t(b)]; });
            bool node = false, gpu = false;
            for (int i = 0; i < topK; ++i) {
                node = node || candidates[size_t(i)] < experts / 4;
                gpu = gpu || candidates[size_t(i)] < experts / 32;
            }
            nodeHits += node ? 1 : 0;
            gpuHits += gpu ? 1 : 0;
        }
        const double p = binTouchedProbability(experts, topK, experts / 4, groups, groupTopK);
        const double q = binTouchedProbability(experts, topK, experts / 32, groups, groupTopK);
        QCOMPARE(p, 1.0 - 15.0 / 70.0);  // 1 - C(6, 4) / C(8, 4)
        QVERIFY2(std::fabs(p - double(nodeHits) / trials) < 0.02, qPrintable(QString::number(double(nodeHits) / trials)));
        QVERIFY2(std::fabs(q - double(gpuHits) / trials) < 0.02, qPrintable(QString::number(double(gpuHits) / trials)));
        // Fewer node crossings than ungrouped routing (0.90 of a node's chance there).
        QVERIFY(p < binTouchedProbability(experts, topK, experts / 4) - 0.1);
        QCOMPARE(binTouchedProbability(experts, topK, experts / 4, 0, 0), binTouchedProbability(experts, topK, experts / 4));
        // A bin that splits groups unevenly (3 nodes do not divide 8 groups): the ungrouped figure.
        QCOMPARE(binTouchedProbability(experts, topK, experts / 3.0, groups, groupTopK),
                 binTouchedProbability(experts, topK, experts / 3.0));
        const FlexSends grouped = flexSends(experts, topK, 32, 4, 8, groups, groupTopK);
        QVERIFY(near(grouped.network, 3 * p, 1e-12));
    }

    // The token dispatchers' bytes by link, derived by hand: the MoE GPT of expertParallelism (8
    // experts, top 2, h 4096) on 8 DGX H100, tp 2 (sp), ep 8 with etp 2: the etp x ep group is 16
    // neighbours, two nodes of 8. T_moe = 2048 / 2 = 1024 tokens, m = 512 / 32 = 16, 32 layers.
    void dispatcherBytesByLink()
    {
        Problem p = problem(moeGpt(32, 4096, 32), 8, 512);
        p.cluster.node = dgxH100();
        const CostModel model(p);
        const CostModelParams& prm = defaultCostModelParams();
        const double h = 4096, T = 1024, m = 16, L = 32, token = h * 2;
        // DeepEP: a node holds 4 of the 8 experts, a token misses it with C(4, 2)/C(8, 2) = 6/28, so
        // it crosses to the other node with p = 22/28 = 11/14; a GPU's ep rank holds 1 expert, hit with
        // q = 1 - C(7, 2)/C(8, 2) = 1 - 21/28 = 1/4: over NVLink 7 x 1/4 to its own node's GPUs and as
        // much forwarded for its rail peer in the other node, 3.5 sends per token.
        const double network = 11.0 / 14, nvlink = 3.5;
        const FlexSends f = flexSends(8, 2, 8, 2, 8);
        QVERIFY(near(f.network, network, 1e-12) && near(f.nvlink, nvlink, 1e-12));
        // Per step: forward and backward, dispatch and combine each (2 x 2 calls a layer), the
        // forward's dispatch with a top-k index (int64) and weight (fp32) per flex top-k (etp x k = 4).
        const double metadata = 4 * 12.0, perToken = 4 * token + metadata;
        CostLedger ledger;
        const Prediction deepep = model.evaluate(layout("tp=2,sp=on,ep=8,moe_dispatcher=deepep", p), &ledger);
        double inter = 0, intra = 0;
        for (const Collective& c : ledger.collectives)
            if (c.dimension == CommDimension::Ep && c.kind == CommKind::AllToAll)
                (c.placement == CommPlacement::InterDomain ? inter : intra) += c.bytes;
        QVERIFY(near(inter, m * L * T * network * perToken, 1e-12));
        QVERIFY(near(intra, m * L * T * nvlink * perToken, 1e-12));
        QVERIFY(near(deepep.comm_bytes.all_to_all, inter + intra, 1e-12));
        // No etp gather or scatter: the etp GPUs are in the flex group.
        for (const Collective& c : ledger.collectives)
            QVERIFY(!(c.dimension == CommDimension::Tp && std::string(c.what).rfind("MoE: routed", 0) == 0));
        // Time: a call as long as the busier link (here the NIC, 400 GB/s over 8 GPUs x efficiency).
        const double intraBw = 450e9 * prm.intra_link_efficiency, interBw = 400e9 * prm.inter_node_efficiency / 8;
        auto call = [&](double bytes) {
            return prm.collective_launch_s + std::max(prm.inter_latency_s + network * T * bytes / interBw,
                                                      prm.intra_latency_s + nvlink * T * bytes / intraBw);
        };
        const double wideCounts = prm.collective_launch_s + 15 * prm.inter_latency_s +
                                  15.0 / 16 * (16 * 8 * 8.0) / std::min(intraBw, 8 * interBw);
        QVERIFY2(near(deepep.time_s.ep_comm, m * L * (call(token + metadata) + 3 * call(token) + wideCounts), 1e-9),
                 qPrintable(QString::number(deepep.time_s.ep_comm)));
        // Against the alltoall dispatcher's 2 copies a token, 4 of 8 ep peers in the other node.
        const Prediction alltoall = model.evaluate(layout("tp=2,sp=on,ep=8", p));
        QVERIFY(deepep.time_s.ep_comm < alltoall.time_s.ep_comm);

        // HybridEP: the same sends, with a probability (fp32) per expert of the receiving node (1
        // expert per ep rank x 8 GPUs), and the routing map (a byte per token and etp x E columns)
        // gathered over the 16 GPUs before each forward's dispatch.
        CostLedger hybridLedger;
        model.evaluate(layout("tp=2,sp=on,ep=8,moe_dispatcher=hybridep", p), &hybridLedger);
        double hybridInter = 0, mapGather = 0;
        for (const Collective& c : hybridLedger.collectives) {
            if (c.dimension == CommDimension::Ep && c.kind == CommKind::AllToAll &&
                c.placement == CommPlacement::InterDomain)
                hybridInter += c.bytes;
            if (c.dimension == CommDimension::Ep && c.kind == CommKind::AllGather)
                mapGather += c.bytes;
        }
        QVERIFY(near(hybridInter, m * L * T * network * (4 * token + 8 * 4.0), 1e-12));
        QVERIFY(near(mapGather, m * L * 15.0 / 16 * (16 * T * 2 * 8), 1e-12));

        // allgather: every token of the 16 gathered (15/16 of the buffer sent) and reduce-scattered
        // back each pass; the forward gathers the routing map (E bools) and probabilities (E bf16) too.
        CostLedger gatherLedger;
        const Prediction allgather = model.evaluate(layout("tp=2,sp=on,ep=8,moe_dispatcher=allgather", p), &gatherLedger);
        double gathered = 0, scattered = 0;
        for (const Collective& c : gatherLedger.collectives)
            if (c.dimension == CommDimension::Ep) {
                QCOMPARE(c.placement, CommPlacement::InterDomain);
                (c.kind == CommKind::AllGather ? gathered : scattered) += c.kind == CommKind::AllToAll ? 0 : c.bytes;
            }
        const double buffer = 16 * T * token;
        QVERIFY(near(gathered, m * L * 15.0 / 16 * (2 * buffer + 16 * T * 8 * 3), 1e-12));
        QVERIFY(near(scattered, m * L * 15.0 / 16 * 2 * buffer, 1e-12));
        QCOMPARE(allgather.comm_bytes.all_to_all, 0.0);
        // ... and the gathered tokens held in the global buffer while the layer runs.
        QVERIFY(allgather.memory_bytes.buffers > alltoall.memory_bytes.buffers);
        // The explanation names the dispatcher.
        QVERIFY(termValue(model.explain(layout("tp=2,sp=on,ep=8,moe_dispatcher=deepep", p)), "time_s.ep_comm",
                          "MoE token dispatch and combine (deepep") > 0);
    }

    // The dispatchers' rules against a problem (Megatron-LM's, core/Layout.cpp).
    void dispatcherRules()
    {
        Problem moe = problem(moeGpt(32, 4096, 32), 8, 512);
        moe.cluster.node = dgxH100();
        QCOMPARE(firstBrokenRule("dp=32,tp=2,sp=on,ep=8,moe_dispatcher=hybridep", moe), std::string());
        QVERIFY(firstBrokenRule("dp=64,moe_dispatcher=deepep", moe).find("needs etp x ep > 1") != std::string::npos);
        QVERIFY(firstBrokenRule("dp=64,ep=8,ep_comm_overlap=on,moe_dispatcher=allgather", moe)
                    .find("moe_dispatcher: the allgather") != std::string::npos);
        const Problem dense = problem(megatronGpt(32, 4096, 32), 8, 512);
        QVERIFY(firstBrokenRule("dp=64,moe_dispatcher=allgather", dense).find("needs a mixture-of-experts model") !=
                std::string::npos);
        // An NVLink domain of 16 GPUs: DeepEP's NVLink forwarding stops at 8 peers.
        Problem wide = moe;
        wide.cluster.node.chips_per_node = 16;
        wide.cluster.nodes = 4;
        QVERIFY(firstBrokenRule("dp=64,ep=8,etp=2,moe_dispatcher=deepep", wide).find("use moe_dispatcher=hybridep") !=
                std::string::npos);
        QCOMPARE(firstBrokenRule("dp=64,ep=8,etp=2,moe_dispatcher=hybridep", wide), std::string());
        QCOMPARE(firstBrokenRule("dp=64,ep=4,etp=2,moe_dispatcher=deepep", wide), std::string());  // 8: one NVLink node
    }

    // Megatron's --tp-comm-overlap: each layer's SP collectives pipelined with its GEMMs keep
    // one chunk in tp exposed, or what the GEMMs cannot cover; nothing else changes.
    void tpCommOverlapHidesBehindTheGemms()
    {
        const Problem p = problem(megatronGpt(32, 4096, 32), 8, 512);
        const CostModel model(p);
        const Layout plain = layout("tp=8,pp=2,sp=on,zero=1", p);
        Layout overlapped = plain;
        overlapped.tp_comm_overlap = true;
        const Prediction a = model.evaluate(plain), b = model.evaluate(overlapped);
        QVERIFY(b.time_s.tp_comm < a.time_s.tp_comm);
        // At least one chunk of every layer collective stays exposed (a / tp bounds it below,
        // embedding and head collectives included in a).
        QVERIFY(b.time_s.tp_comm >= a.time_s.tp_comm / plain.tp);
        QCOMPARE(b.time_s.compute, a.time_s.compute);
        QCOMPARE(b.memory_bytes.total(), a.memory_bytes.total());
        QCOMPARE(b.comm_bytes.total(), a.comm_bytes.total());  // the same bytes, hidden
        double hidden = 0;
        for (const Term& t : model.explain(overlapped))
            if (t.figure == "time_s.tp_comm" && t.value < 0)
                hidden -= t.value;
        QVERIFY(near(hidden, a.time_s.tp_comm - b.time_s.tp_comm, 1e-9));
        // Megatron requires sequence parallelism for it.
        Layout noSp = layout("tp=8,pp=2,zero=1", p);
        noSp.tp_comm_overlap = true;
        QVERIFY(!validate(noSp).empty());
    }

    // --overlap-param-gather: the distributed optimizer's parameter all-gather moves from the
    // backward window into the next step's first forward, so it hides behind its own compute.
    void overlapParamGatherHasItsOwnWindow()
    {
        const Problem p = problem(megatronGpt(24, 2048, 16), 8, 64);
        const CostModel model(p);
        const Layout plain = layout("zero=1", p);  // 64-way data parallel: gathers matter
        Layout overlapped = plain;
        overlapped.overlap_param_gather = true;
        const Prediction a = model.evaluate(plain), b = model.evaluate(overlapped);
        QVERIFY2(b.time_s.dp_comm < a.time_s.dp_comm,
                 qPrintable(QString("%1 vs %2").arg(b.time_s.dp_comm).arg(a.time_s.dp_comm)));
        QCOMPARE(b.comm_bytes.total(), a.comm_bytes.total());
        for (int zero : {0, 3}) {
            Layout bad = layout(zero == 0 ? "zero=0" : "zero=3", p);
            bad.overlap_param_gather = true;
            QVERIFY(!validate(bad).empty());
        }
        // The layout grammar names them; they survive text and JSON.
        FieldErrors errors;
        const Layout parsed = parseLayout("dp=8,tp=8,sp=on,zero=1,tp_comm_overlap=on,overlap_param_gather=on", errors);
        QVERIFY(errors.empty() && parsed.tp_comm_overlap && parsed.overlap_param_gather);
        QVERIFY(toString(parsed).find(",tp_comm_overlap=on,overlap_param_gather=on") != std::string::npos);
        QVERIFY(toString(plain).find("overlap") == std::string::npos);  // off: the text is as before
    }

    // Issue 15's implementation terms: gradients reduced after the backward (Megatron-LM of 2021)
    // hide nothing; the fixed host work of a step is one term of the optimizer figure; the share
    // of the measured matmul rate a step sustains scales the GEMMs of chips with a measurement.
    // All three survive the profile's JSON.
    void implementationTerms()
    {
        const Problem p = problem(megatronGpt(24, 2048, 16), 8, 64);
        const Layout l = layout("zero=0", p);  // 64-way data parallel, bucketed all-reduce
        CostModelParams overlapped = defaultCostModelParams();
        overlapped.step_overhead_s = 0;
        CostModelParams after = overlapped;
        after.overlap_grad_reduce = false;
        const Prediction a = CostModel(p, overlapped).evaluate(l), b = CostModel(p, after).evaluate(l);
        QVERIFY(a.time_s.hidden.dp_comm > 0);
        QCOMPARE(b.time_s.hidden.dp_comm, 0.0);
        QVERIFY(near(b.time_s.dp_comm, a.time_s.dp_comm + a.time_s.hidden.dp_comm, 1e-12));
        QCOMPARE(b.comm_bytes.total(), a.comm_bytes.total());

        CostModelParams host = overlapped;
        host.step_overhead_s = 0.05;
        const Prediction c = CostModel(p, host).evaluate(l);
        QVERIFY(near(c.time_s.optimizer, a.time_s.optimizer + 0.05, 1e-12));
        QVERIFY(near(c.step_time_s, a.step_time_s + 0.05, 1e-12));
        QVERIFY(near(termValue(CostModel(p, host).explain(l), "time_s.optimizer", "fixed host work per step"), 0.05,
                     1e-15));

        // A100 80GB: its measured 271.2 TFLOP/s of 312, times the sustained share.
        const ChipSpec& chip = p.cluster.node.chip;
        CostModelParams slower = overlapped;
        slower.measured_matmul_sustained_fraction = 0.5;
        QVERIFY(near(slower.matmulEfficiency(chip), 0.5 * overlapped.matmulEfficiency(chip) /
                                                        overlapped.measured_matmul_sustained_fraction, 1e-12));
        QVERIFY(CostModel(p, slower).evaluate(l).time_s.compute > a.time_s.compute);

        FieldErrors errors;
        after.step_overhead_s = 0.05;
        after.measured_matmul_sustained_fraction = 0.5;
        QVERIFY(costModelParamsFromJson(toJson(after), "p", errors) == after);
        QVERIFY(errors.empty());
    }

    // (gui18) The hidden (overlapped) seconds per kind: for each collective, exposed + hidden is
    // its whole time, the time it takes when nothing hides it.
    void hiddenPlusExposedIsTheCollectivesTime()
    {
        const Problem p = problem(megatronGpt(24, 2048, 16), 8, 64);
        CostModelParams noOverlap = defaultCostModelParams();
        noOverlap.dp_overlap = 0;
        CostModelParams overlap = noOverlap;
        overlap.dp_overlap = 0.8;
        const CostModel whole(p, noOverlap), hiding(p, overlap);
        // DP/ZeRO: without an overlap window all of it is exposed; with one, part of it moves to
        // the hidden lane and none is lost (pp=2: the tied embedding's all-reduce stays exposed).
        for (const char* text : {"zero=0", "zero=1", "zero=1,overlap_param_gather=on", "zero=2", "zero=3",
                                 "pp=2,zero=1"}) {
            const Layout l = layout(text, p);
            const Prediction a = whole.evaluate(l), b = hiding.evaluate(l);
            QCOMPARE(a.time_s.hidden.dp_comm, 0.0);
            QVERIFY2(b.time_s.hidden.dp_comm > 0, text);
            QVERIFY2(near(b.time_s.dp_comm + b.time_s.hidden.dp_comm, a.time_s.dp_comm, 1e-12),
                     qPrintable(QString("%1: %2 + %3 vs %4")
                                    .arg(text)
                                    .arg(b.time_s.dp_comm)
                                    .arg(b.time_s.hidden.dp_comm)
                                    .arg(a.time_s.dp_comm)));
            QCOMPARE(b.step_time_s, b.time_s.sum());  // the hidden lane is not on the critical path
        }
        // TP/SP: tp-comm-overlap moves the chunks the GEMMs cover into the hidden lane.
        const Layout plain = layout("tp=8,pp=2,sp=on,zero=1", p);
        Layout overlapped = plain;
        overlapped.tp_comm_overlap = true;
        const Prediction a = whole.evaluate(plain), b = whole.evaluate(overlapped);
        QCOMPARE(a.time_s.hidden.tp_comm, 0.0);
        QVERIFY(b.time_s.hidden.tp_comm > 0);
        QVERIFY(near(b.time_s.tp_comm + b.time_s.hidden.tp_comm, a.time_s.tp_comm, 1e-12));

        // CP: each ring step's send/recv hides behind that step's attention. The transfer takes
        // as long on a slower chip; only the split between the lanes moves. On a chip 1000x
        // slower every transfer hides: what stays exposed is the partial-result merges.
        Problem slowChip = problem(megatronGpt(8, 4096, 32), 2, 64);
        Problem fastChip = slowChip;
        slowChip.cluster.node.chip.peak_flops_bf16 /= 1000;
        const Layout cp = layout("cp=4,tp=4,mb=1", fastChip);
        const CostModel fastModel(fastChip), slowModel(slowChip);
        const Prediction fast = fastModel.evaluate(cp), slow = slowModel.evaluate(cp);
        auto merges = [&](const CostModel& model) {
            return termValue(model.explain(cp), "time_s.cp_comm", "CP ring: partial results merged");
        };
        const double slowTransfer = slow.time_s.cp_comm - merges(slowModel) + slow.time_s.hidden.cp_comm;
        const double fastTransfer = fast.time_s.cp_comm - merges(fastModel) + fast.time_s.hidden.cp_comm;
        QVERIFY(near(slow.time_s.cp_comm, merges(slowModel), 1e-12));
        QVERIFY(fast.time_s.cp_comm - merges(fastModel) > 0);  // the fast chip's attention cannot cover it
        QVERIFY(fast.time_s.hidden.cp_comm < slow.time_s.hidden.cp_comm);
        QVERIFY2(near(fastTransfer, slowTransfer, 1e-12), qPrintable(QString("%1 vs %2").arg(fastTransfer).arg(slowTransfer)));
        // The whole transfer moves the ring's bytes, no faster than the fastest link (300 GB/s
        // NVLink; latency and the link's efficiency only add).
        QCOMPARE(fast.comm_bytes.cp, slow.comm_bytes.cp);
        QVERIFY2(slowTransfer >= fast.comm_bytes.cp / fastChip.cluster.node.intra_link_bytes_per_second,
                 qPrintable(QString("%1 s for %2 bytes").arg(slowTransfer).arg(fast.comm_bytes.cp)));
    }

    // formulas.md, "Communication volume per step, Megatron-style", as bytes one device sends.
    void communicationVolumes()
    {
        const ModelSpec m = megatronGpt(8, 4096, 32);
        const Problem p = problem(m, 2, 64);  // 16 devices
        const double P = double(parameterCount(m)), b = 1, s = 2048, h = 4096;
        // Data parallel: an all-reduce of the gradients, 2 (n - 1)/n x 4 bytes x P (fp32 main gradients,
        // the default), x 2 bytes with bf16 gradients.
        const Prediction dp = CostModel::evaluate(p, layout("dp=16,mb=4", p));
        // (+ the step's loss and gradient norm, two fp64 scalars, all-reduced over every device).
        const double scalars = 2 * 15.0 / 16 * 16;
        QVERIFY(near(dp.comm_bytes.dp, 2 * 15.0 / 16 * 4 * P + scalars, 1e-12));
        Problem bf16Grads = p;
        bf16Grads.training.main_grads = MainGrads::BF16;
        const Prediction dp2 = CostModel::evaluate(bf16Grads, layout("dp=16,mb=4", bf16Grads));
        QVERIFY(near(dp2.comm_bytes.dp, 2 * 15.0 / 16 * 2 * P + scalars, 1e-12));
        QCOMPARE(dp.comm_bytes.all_reduce, dp.comm_bytes.dp);
        QCOMPARE(dp.comm_bytes.tp + dp.comm_bytes.pp + dp.comm_bytes.cp, 0.0);
        // ZeRO-3 with one micro-batch (bf16 gradients): all-gather before forward and backward,
        // reduce-scatter: 1.5x.
        const Prediction z3 = CostModel::evaluate(bf16Grads, layout("dp=16,zero=3,mb=4", bf16Grads));
        QCOMPARE(z3.micro_batches, 1);
        QVERIFY(near(z3.comm_bytes.dp - scalars, 1.5 * (dp2.comm_bytes.dp - scalars), 1e-12));
        // By kind: two all-gathers of the weights and one reduce-scatter of the gradients.
        QVERIFY(near(z3.comm_bytes.all_gather, 2 * z3.comm_bytes.reduce_scatter, 1e-12));
        // fp32 main gradients: the reduce-scatter at 4 bytes, (n - 1)/n x 4 P, the gathers of bf16
        // weights unchanged: the all-gathers' bytes equal the reduce-scatter's.
        const Prediction z3f = CostModel::evaluate(p, layout("dp=16,zero=3,mb=4", p));
        QVERIFY(near(z3f.comm_bytes.reduce_scatter, 15.0 / 16 * 4 * P, 1e-12));
        QVERIFY(near(z3f.comm_bytes.all_gather, z3.comm_bytes.all_gather, 1e-12));
        QVERIFY(near(z3.comm_bytes.all_gather + z3.comm_bytes.reduce_scatter + z3.comm_bytes.all_reduce,
                     z3.comm_bytes.total(), 1e-12));
        // Tensor parallel: 2 all-reduces of b s h per layer forward and 2 backward (+ the embedding's).
        const Prediction tp = CostModel::evaluate(p, layout("tp=4,dp=4,mb=1", p));
        const double perAllReduce = 2 * 3.0 / 4 * b * s * h * 2;
        // (+ the vocab-parallel cross-entropy's fp32 statistics: 3 per token, all-reduced).
        const double statistics = 2 * 3.0 / 4 * 3 * b * s * 4;
        QVERIFY(near(tp.comm_bytes.tp, tp.micro_batches * (2 * (2 * 8 + 1) * perAllReduce + statistics), 1e-12));
        // Sequence parallel: RS + AG in place of each all-reduce, and each column-parallel linear
        // (2 per layer, and the head) all-gathers its input again in backward.
        const Prediction sp = CostModel::evaluate(p, layout("tp=4,dp=4,sp=on,mb=1", p));
        // The norms' gradients (2 LayerNorms of 2h per layer and the final one) are all-reduced
        // over tp once per step; all the rest is reduce-scatters and all-gathers.
        const double gradientBytes = dp.memory_bytes.gradients / P;
        const double norms = 2 * 3.0 / 4 * (8 * 2 + 1) * 2 * h * gradientBytes;
        QVERIFY(near(sp.comm_bytes.tp, tp.comm_bytes.tp + sp.micro_batches * (2 * 8 + 1) * perAllReduce / 2 + norms,
                     1e-12));
        QVERIFY(near(sp.comm_bytes.all_reduce - sp.comm_bytes.dp, sp.micro_batches * statistics + norms, 1e-12));
        // Pipeline: a middle stage sends b s h per micro-batch forward and the same backward; an
        // end stage sends one direction and all-reduces the tied embedding's gradients with the
        // other end (V h x the gradients' 4 bytes, half of it sent). The busiest device is counted.
        const Prediction pp = CostModel::evaluate(p, layout("pp=4,dp=4,mb=1", p));
        const double sends = pp.micro_batches * b * s * h * 2;
        const double embedding = double(m.vocab) * h * gradientBytes;
        QVERIFY(embedding > sends);  // here the ends are the busiest
        QVERIFY(near(pp.comm_bytes.pp, sends, 1e-12));
        const double stageGradients = pp.comm_bytes.dp - embedding;
        QVERIFY(stageGradients > 0);
        // With a longer pipeline of micro-batches the middle stages are the busiest.
        const Prediction longer = CostModel::evaluate(problem(m, 2, 1024), layout("pp=4,dp=4,mb=1", p));
        const double longerSends = longer.micro_batches * b * s * h * 2;
        QVERIFY(longerSends > embedding);
        QVERIFY(near(longer.comm_bytes.pp, 2 * longerSends, 1e-12));
        QVERIFY(longer.comm_bytes.dp < stageGradients);
        // ... and their data-parallel traffic is their own layers' gradients (no embedding).
        const double layerParams = double(parameterCount(m) - parameterCount(megatronGpt(7, 4096, 32)));
        QVERIFY(near(longer.comm_bytes.dp, 2 * 3.0 / 4 * 2 * layerParams * gradientBytes + scalars, 1e-12));
        // With sequence parallelism the pipeline message is scattered over tp; with two stages
        // each device sends one direction only.
        const Prediction ppsp = CostModel::evaluate(p, layout("pp=2,tp=4,dp=2,sp=on,mb=1", p));
        QVERIFY(near(ppsp.comm_bytes.pp, ppsp.micro_batches * b * s * h * 2 / 4, 1e-12));
        // Context parallel, Transformer Engine's ring (AttnFuncWithCPAndKVP2P): per layer and
        // micro-batch the forward sends the local K/V block (b s/cp x 2 h x 2 bytes) cp - 1 times,
        // the backward K/V and then dK/dV, 2 (cp - 1) blocks; all point to point. A full
        // recomputation runs the forward's ring again. Gradients are reduced over dp x cp.
        const Prediction cp = CostModel::evaluate(p, layout("cp=4,dp=4,mb=1", p));
        const double block = b * s / 4 * 2 * h * 2;
        QVERIFY(near(cp.comm_bytes.cp, cp.micro_batches * 8 * 3 * 3 * block, 1e-12));
        QCOMPARE(cp.comm_bytes.send_recv, cp.comm_bytes.cp);
        QVERIFY(near(cp.comm_bytes.dp, dp.comm_bytes.dp, 1e-12));
        const Prediction cpFull = CostModel::evaluate(p, layout("cp=4,dp=4,mb=1,recompute=full", p));
        QVERIFY(near(cpFull.comm_bytes.cp, cpFull.micro_batches * 8 * 4 * 3 * block, 1e-12));
    }

    void layoutPhysics()
    {
        const Problem p = problem(megatronGpt(96, 12288, 96), 64, 1536);  // 512 A100s
        const CostModel model(p);
        auto eval = [&](const char* text) { return model.evaluate(layout(text, p)); };
        // Recomputation trades memory for time.
        const Prediction none = eval("tp=8,pp=8,sp=on,recompute=none");
        const Prediction sel = eval("tp=8,pp=8,sp=on,recompute=selective");
        const Prediction full = eval("tp=8,pp=8,sp=on,recompute=full");
        QVERIFY(none.memory_bytes.activations > sel.memory_bytes.activations);
        QVERIFY(sel.memory_bytes.activations > full.memory_bytes.activations);
        QVERIFY(none.step_time_s < sel.step_time_s && sel.step_time_s < full.step_time_s);
        QCOMPARE(none.time_s.recompute, 0.0);
        // ZeRO shards states and costs traffic.
        const Prediction z0 = eval("tp=8,pp=8,sp=on,zero=0,recompute=selective");
        const Prediction z1 = eval("tp=8,pp=8,sp=on,zero=1,recompute=selective");
        QVERIFY(z1.memory_bytes.optimizer < z0.memory_bytes.optimizer / 7);
        // More pipeline stages, more bubble for the same micro-batch count.
        QVERIFY(eval("tp=8,pp=16,sp=on,recompute=selective").time_s.bubble > sel.time_s.bubble);
        // GPT-3 without any sharding cannot fit: 16 bytes x 175B per device.
        const Prediction dense = eval("dp=512,recompute=full");
        QVERIFY(!dense.feasible);
        QCOMPARE(dense.reason, Infeasibility::OutOfMemory);
        QVERIFY(dense.memory_bytes.total() > dense.memory_bytes.capacity);
        // Time and cost to train follow from throughput.
        QVERIFY(near(sel.time_to_train_s, p.training.tokens_to_train / sel.tokens_per_s, 1e-12));
        QVERIFY(near(sel.cost_to_train_usd, sel.time_to_train_s / 3600 * 64 * 30, 1e-12));
    }

    // A ring over part of a 2D torus uses 2 of each chip's 4 links; a switch gives the full bandwidth;
    // a fully connected mesh only the links to the group's members.
    void topologyShapesIntraNodeBandwidth_data()
    {
        QTest::addColumn<int>("topology");
        QTest::addColumn<double>("fraction");
        QTest::newRow("switch") << int(Topology::Switch) << 1.0;
        QTest::newRow("2D torus") << int(Topology::Torus2D) << 0.5;
        QTest::newRow("fully connected, 4 of 8") << int(Topology::FullyConnected) << 3.0 / 7;
    }
    void topologyShapesIntraNodeBandwidth()
    {
        QFETCH(int, topology);
        QFETCH(double, fraction);
        Problem p = problem(megatronGpt(8, 4096, 32), 1, 8);
        p.cluster.node.intra_topology = Topology(topology);
        const CostModel model(p);
        const Prediction pr = model.evaluate(layout("tp=4,recompute=none", p));
        const CostModelParams& prm = model.params();
        const double n = 4, S = 2048.0 * 4096 * 2;  // b s h bytes, mb = 1
        const double beta = 300e9 * prm.intra_link_efficiency * fraction;
        const double ar = 2 * (n - 1) * prm.intra_latency_s + 2 * (n - 1) / n * S / beta;
        // fwd + bwd, 2 per layer + embedding and head; the cross-entropy's fp32 statistics (3 per token).
        const double stats = 2 * (n - 1) * prm.intra_latency_s + 2 * (n - 1) / n * (3 * 2048 * 4.0) / beta;
        const double perMicroBatch = 2 * (2 * 8 + 1) * ar + stats;
        QVERIFY2(near(pr.time_s.tp_comm, pr.micro_batches * perMicroBatch, 1e-12),
                 qPrintable(QString("%1 vs %2").arg(pr.time_s.tp_comm).arg(pr.micro_batches * perMicroBatch)));
    }

    void trainiumSharesChipMemory()
    {
        Problem p = problem(megatronGpt(32, 4096, 32), 1, 32);
        p.cluster.node.chip.devices_per_chip = 2;
        p.cluster.node.chip.hbm_bytes = 32.0 * (1 << 30);
        p.cluster.node.chips_per_node = 16;
        const Prediction pr = CostModel::evaluate(p, layout("tp=32,sp=on,recompute=selective", p));
        QCOMPARE(pr.memory_bytes.capacity, 16.0 * (1 << 30));
    }

    void offloadNeedsAPublishedHostLink()
    {
        Problem p = problem(megatronGpt(32, 4096, 32), 8, 512);
        const Prediction missing = CostModel::evaluate(p, layout("zero=1,offload=optimizer", p));
        QVERIFY(!missing.feasible);
        QCOMPARE(missing.reason, Infeasibility::MissingHardwareFigure);
        p.cluster.node.host_link_bytes_per_second = 32e9;
        const Prediction ok = CostModel::evaluate(p, layout("zero=1,offload=optimizer", p));
        QVERIFY(ok.feasible);
        QCOMPARE(ok.memory_bytes.optimizer, 0.0);
        QVERIFY(ok.time_s.offload > 0);
        // On the device only the zeroing of the held gradients is left: one write of them, at HBM
        // bandwidth (the norm and AdamW run on the host); without offload, the whole step is there.
        const Prediction kept = CostModel::evaluate(p, layout("zero=1", p));
        QVERIFY(ok.time_s.optimizer > 0 && ok.time_s.optimizer < kept.time_s.optimizer);
        // (+ the fixed host work of every step, step_overhead_s.)
        const double zeroing = ok.memory_bytes.gradients / p.cluster.node.chip.hbm_bytes_per_second +
                               defaultCostModelParams().step_overhead_s;  // its held gradients
        QVERIFY2(std::fabs(ok.time_s.optimizer - zeroing) <= 1e-9 * zeroing + 1e-12,
                 qPrintable(QString("%1 vs %2").arg(ok.time_s.optimizer).arg(zeroing)));
    }

    void flashAttentionDropsScores()
    {
        Problem p = problem(megatronGpt(32, 4096, 32), 8, 512, 2048);
        const Prediction plain = CostModel::evaluate(p, layout("tp=8,sp=on", p));
        p.training.flash_attention = true;
        const Prediction flash = CostModel::evaluate(p, layout("tp=8,sp=on", p));
        QVERIFY(flash.memory_bytes.activations < plain.memory_bytes.activations);
        QVERIFY(flash.step_time_s < plain.step_time_s);
        QCOMPARE(flash.model_flops_per_step, plain.model_flops_per_step);  // MFU keeps Megatron's convention
    }

    // The published rates (FlashAttention-3 paper, arXiv:2407.08608, Figs. 5-6, H100 SXM5 BF16)
    // as the cost model reads them: the points exactly, power-law segments between them, the first
    // segment's exponent below the shortest, flat beyond the longest; a causal backward from the
    // unmasked one at the forward's causal/unmasked ratio.
    void attentionRatesFromThePublishedFigures()
    {
        ChipSpec h100;
        h100.name = "h100-sxm";
        h100.peak_flops_bf16 = 989.4e12;
        const std::optional<AttentionRates> causal = attentionRates(h100, 128, true);
        QVERIFY(causal);
        QCOMPARE(causal->kernel, std::string("flashattention-3"));
        QVERIFY(near(causal->forward.at(512), 292e12, 1e-12));
        QVERIFY(near(causal->forward.at(2048), 521e12, 1e-12));
        QVERIFY(near(causal->forward.at(16384), 616e12, 1e-12));
        QVERIFY(near(causal->forward.at(65536), 616e12, 1e-12));
        QVERIFY(near(causal->forward.at(std::sqrt(512.0 * 1024)), std::sqrt(292.0 * 423) * 1e12, 1e-12));
        QVERIFY(near(causal->forward.at(256), 292e12 * 292 / 423, 1e-12));
        QVERIFY(near(causal->backward.at(512), 316e12 * 292 / 467, 1e-12));
        QVERIFY(near(causal->backward.at(16384), 561e12 * 616 / 648, 1e-12));
        const std::optional<AttentionRates> plain = attentionRates(h100, 128, false);
        QVERIFY(near(plain->forward.at(1024), 565e12, 1e-12));
        QVERIFY(near(plain->backward.at(4096), 542e12, 1e-12));
        // Head dim 64: its own backward series, the nearest forward (128).
        const std::optional<AttentionRates> hd64 = attentionRates(h100, 64, false);
        QVERIFY(near(hd64->backward.at(512), 272e12, 1e-12));
        QVERIFY(near(hd64->forward.at(512), 467e12, 1e-12));
        // No published rate: no curve (GEMM pricing).
        ChipSpec trn1;
        trn1.name = "trainium1";
        QVERIFY(!attentionRates(trn1, 128, true));
        ChipSpec a100;
        a100.name = "a100-80gb";
        QVERIFY(!attentionRates(a100, 128, true));
        // A damaged table is refused with the series named.
        FieldErrors errors;
        attentionKernelsFromJson(QJsonObject{{"schema", "shardscope.attention/1"},
                                             {"kernels", QJsonArray{QJsonObject{
                                                             {"name", "k"}, {"source", "s"},
                                                             {"chips", QJsonArray{"h100-sxm"}},
                                                             {"series", QJsonArray{QJsonObject{
                                                                            {"pass", "forward"}, {"mask", "causal"},
                                                                            {"head_dim", 128}, {"source", "s"},
                                                                            {"seq_len", QJsonArray{1024, 512}},
                                                                            {"tflops", QJsonArray{1, 2}}}}}}}}},
                                 "t", errors);
        QCOMPARE(errors.size(), size_t(1));
        QCOMPARE(errors.front().path, std::string("t.kernels[0].series[0].tflops"));
    }

    // Fused attention on a chip with published rates runs at the rate of its key length; under
    // context parallelism every ring step runs on an s/cp block, at that block's (lower) rate,
    // with a launch per step.
    void fusedAttentionAtItsPublishedRate()
    {
        ModelSpec m = megatronGpt(8, 4096, 32);
        m.max_seq = 8192;
        m.positions = PositionKind::Rotary;
        Problem p = problem(m, 2, 64, 8192);
        p.cluster.node = dgxH100();
        p.training.flash_attention = true;
        const CostModel model(p);
        QVERIFY(model.attentionRates());
        const double overhead = model.params().kernel_overhead_s, s = 8192, hd = 128, heads = 32;
        auto forwardTerm = [&](const char* text) {
            const Layout l = layout(text, p);
            return termValue(model.explain(l), "time_s.compute", "attention core, forward") /
                   model.evaluate(l).micro_batches / 8;
        };
        // tp=8: 4 heads per device, the causal half of the s x s scores, at 602 TFLOP/s (8k).
        const double flops = 4 * (heads / 8) * s * (s / 2) * hd;
        QVERIFY(near(forwardTerm("tp=8,dp=2,mb=1"), flops / 602e12 + overhead, 1e-12));
        // tp=4, cp=4: the same heads x 2, a quarter of the queries, 4 steps on 2k blocks (521 TFLOP/s).
        const double cpFlops = 4 * (heads / 4) * (s / 4) * (s / 2) * hd;
        QVERIFY(near(forwardTerm("tp=4,cp=4,mb=1"), cpFlops / 521e12 + 4 * overhead, 1e-12));
        // Backward: 2.5x the forward's FLOPs at the backward rate.
        const Layout l = layout("tp=8,dp=2,mb=1", p);
        const double backward = termValue(model.explain(l), "time_s.compute", "attention core, backward") /
                                model.evaluate(l).micro_batches / 8;
        QVERIFY(near(backward, 2.5 * flops / (559e12 * 602 / 646) + overhead, 1e-12));
    }

    // Each ring step after the first merges its partial result (TE: the log-sum-exp correction of
    // the output forward; dQ accumulated and the dK/dV partial added backward): memory-bound
    // kernels in the attention's stream, counted in cp_comm.
    void contextParallelRingMerges()
    {
        Problem p = problem(megatronGpt(8, 4096, 32), 2, 64);
        p.training.flash_attention = true;
        const CostModel model(p);
        const Layout l = layout("cp=4,tp=4,mb=1", p);
        const Prediction pr = model.evaluate(l);
        const double merges = termValue(model.explain(l), "time_s.cp_comm", "CP ring: partial results merged");
        const double b = 1, s = 2048, c = 4, q = 4096 / 4.0, kv = 4096 / 4.0, bytes = 2, hbm = 2039e9;
        const double out = b * s / c * q * bytes, block = b * s / c * 2 * kv * bytes;
        const double overhead = model.params().kernel_overhead_s;
        const double perLayer = (c - 1) * (overhead + 3 * out / hbm) + (c - 1) * (2 * overhead + 3 * (out + block) / hbm);
        QVERIFY(near(merges, pr.micro_batches * 8 * perLayer, 1e-12));
        QVERIFY(pr.time_s.cp_comm >= merges);
    }

    // All-to-all CP (cp_comm=a2a, TE's AttnFuncWithCPAndQKVOA2A): q, k, v all-to-all'd before the
    // attention and its output after it, their gradients likewise backward, each moving (cp - 1)/cp
    // of the device's tensor, exposed; the attention one call at the full key length (each device
    // heads / cp of the heads over the whole sequence); no ring steps, no merges.
    void contextParallelAllToAll()
    {
        ModelSpec m = megatronGpt(8, 4096, 32);
        m.max_seq = 8192;
        m.positions = PositionKind::Rotary;
        Problem p = problem(m, 2, 64, 8192);
        p.cluster.node = dgxH100();
        p.training.flash_attention = true;
        const CostModel model(p);
        const CostModelParams& prm = model.params();
        const Layout a2a = layout("tp=2,cp=4,mb=1,cp_comm=a2a", p), ring = layout("tp=2,cp=4,mb=1", p);
        QCOMPARE(a2a.cp_comm, CpComm::A2A);
        CostLedger ledger;
        const Prediction pr = model.evaluate(a2a, &ledger);
        const double b = 1, s = 8192, c = 4, L = 8, bytes = 2, mbs = pr.micro_batches;
        // tp 2: 16 heads of 128 per device for q, k, v (MHA) and the output.
        const double qkv = b * s / c * 3 * 2048 * bytes, out = b * s / c * 2048 * bytes;
        QVERIFY(near(pr.comm_bytes.all_to_all, mbs * L * 2 * (qkv + out) * (c - 1) / c, 1e-12));
        QCOMPARE(pr.comm_bytes.send_recv, 0.0);  // no ring, and one stage
        bool seen = false;
        for (const Collective& k : ledger.collectives)
            if (k.dimension == CommDimension::Cp) {
                QCOMPARE(k.kind, CommKind::AllToAll);
                QCOMPARE(k.placement, CommPlacement::IntraDomain);  // cp 4 x tp 2 in one node
                QCOMPARE(k.calls, mbs * L * 2 * 2);
                seen = true;
            }
        QVERIFY(seen);
        // In one node: 3 of 4 shares over NVLink, one latency and one launch per all-to-all.
        const double bw = 450e9 * prm.intra_link_efficiency;
        auto allToAll = [&](double x) { return prm.collective_launch_s + prm.intra_latency_s + 3 * (x / c) / bw; };
        QVERIFY2(near(pr.time_s.cp_comm, mbs * L * 2 * (allToAll(qkv) + allToAll(out)), 1e-9),
                 qPrintable(QString::number(pr.time_s.cp_comm)));
        QCOMPARE(pr.time_s.hidden.cp_comm, 0.0);
        QCOMPARE(termValue(model.explain(a2a), "time_s.cp_comm", "CP ring: partial results merged"), 0.0);
        // The attention: the same FLOPs as the ring's at the 8k key length's 602 TFLOP/s, one launch.
        const double flops = 4 * (32 / 2) * (s / c) * (s / 2) * 128;
        const double forward = termValue(model.explain(a2a), "time_s.compute", "attention core, forward") / mbs / L;
        QVERIFY(near(forward, flops / 602e12 + prm.kernel_overhead_s, 1e-12));
        const Prediction pring = model.evaluate(ring);
        QCOMPARE(pring.comm_bytes.all_to_all, 0.0);
        QVERIFY(pring.comm_bytes.send_recv > 0);
        // Memory is the ring's (the same q, k, v and output elements kept, split the other way)
        // plus the fused kernel's head-split output, which TE's a2a saves beside the all-to-all'd
        // copy the out-projection keeps: b s/c x 2048 values of 2 bytes a layer, one micro-batch
        // in flight (pp 1).
        QVERIFY2(near(pr.memory_bytes.activations, pring.memory_bytes.activations + L * out, 1e-12),
                 qPrintable(QString::number(pr.memory_bytes.activations - pring.memory_bytes.activations)));
        // Unfused (the scores kept): the backward needs no output, the ring's memory exactly.
        Problem unfusedProblem = p;
        unfusedProblem.training.flash_attention = false;
        const CostModel unfused(unfusedProblem);
        QCOMPARE(unfused.evaluate(a2a).memory_bytes.activations, unfused.evaluate(ring).memory_bytes.activations);
        // GQA with 8 KV heads at tp 2: 4 per device split over cp 4, but not over cp 8.
        ModelSpec gqa = m;
        gqa.kv_heads = 8;
        Problem pg = problem(gqa, 2, 64, 8192);
        FieldErrors errors;
        Layout l8 = parseLayout("tp=2,cp=8,mb=1,cp_comm=a2a", errors);
        resolveDataParallel(l8, pg.cluster.devices(), errors);
        errors = validate(l8, pg.model, pg.cluster, pg.training);
        QCOMPARE(errors.size(), size_t(1));
        QCOMPARE(errors.front().path, std::string("layout.cp_comm"));
        QVERIFY2(errors.front().message.find("16 query and 4 key/value heads") != std::string::npos,
                 errors.front().message.c_str());
        QVERIFY(validate(layout("tp=2,cp=4,mb=1,cp_comm=a2a", pg), pg.model, pg.cluster, pg.training).empty());
    }

    // MFU in three conventions (core/Prediction.h): Megatron/Korthikanti's counts the full s x s
    // scores; PaLM's 6N + 12 L H Q T (N without the embeddings); the causal-aware one halves a
    // causal self-attention's scores.
    void mfuConventions()
    {
        const ModelSpec m = megatronGpt(96, 12288, 96);
        const Problem p = problem(m, 16, 512);
        const Prediction pr = CostModel::evaluate(p, layout("tp=8,pp=8,mb=1", p));
        const double s = 2048, L = 96, h = 12288, V = 51200;
        const double megatron = double(forwardFlopsPerToken(m, 2048));
        // [M21] eq. 3 without the recomputed forward, per token: 24 l h^2 (1 + s/(6h) + V/(16 l h)).
        QVERIFY(near(3 * megatron, 72 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)), 1e-3));
        const ParameterBreakdown params = parameterBreakdown(m);
        const double palm = 6 * double(params.total - params.embeddings) + 12 * L * 96 * 128 * s;
        const double causal = 3 * (megatron - 2 * s * h * L);
        QVERIFY(near(pr.mfu_palm / pr.mfu, palm / (3 * megatron), 1e-12));
        QVERIFY(near(pr.mfu_causal / pr.mfu, causal / (3 * megatron), 1e-12));
        QVERIFY(pr.mfu_causal < pr.mfu_palm && pr.mfu_palm < pr.mfu);
        // An encoder (no mask) has the same causal-aware and Megatron figures.
        ModelSpec bert = megatronGpt(24, 1024, 16);
        bert.family = ModelFamily::EncoderOnly;
        bert.max_seq = 512;
        const Problem pb = problem(bert, 1, 64, 512);
        const Prediction eb = CostModel::evaluate(pb, layout("dp=8,mb=1", pb));
        QCOMPARE(eb.mfu_causal, eb.mfu);
    }

    // Uneven pipeline splits (Megatron-LM's --decoder-first/last-pipeline-num-layers; Llama 3 405B:
    // 126 layers over 16 stages as 7 + 14 x 8 + 7): the stage counts and first layers, Megatron's
    // rules (transformer_config.py "Uneven PP"), and the cost model on the stages that hold them.
    void unevenPipelineSplit()
    {
        ModelSpec m = megatronGpt(126, 16384, 128);
        m.kv_heads = 8;
        m.ffn_hidden = 53248;
        m.vocab = 128256;
        m.tied_embeddings = false;
        m.bias = false;
        m.norm = NormKind::RmsNorm;
        m.mlp = MlpKind::SwiGlu;
        m.positions = PositionKind::Rotary;
        Problem p = problem(m, 128, 1024, 2048);
        const Layout l = layout("tp=8,pp=16,first_stage_layers=7,last_stage_layers=7,mb=1", p);
        QCOMPARE(l.stageLayers(126, 0), 7);
        QCOMPARE(l.stageLayers(126, 1), 8);
        QCOMPARE(l.stageLayers(126, 14), 8);
        QCOMPARE(l.stageLayers(126, 15), 7);
        QCOMPARE(l.stageFirstLayer(126, 1), 7);
        QCOMPARE(l.stageFirstLayer(126, 15), 7 + 14 * 8);
        // The rules, each refusal naming the key.
        auto refusal = [&](const char* text) {
            FieldErrors errors;
            Layout bad = parseLayout(text, errors);
            resolveDataParallel(bad, p.cluster.devices(), errors);
            const FieldErrors rules = validate(bad, p.model, p.cluster, p.training);
            return rules.empty() ? std::string() : rules.front().path;
        };
        QCOMPARE(refusal("tp=8,pp=16,first_stage_layers=8,last_stage_layers=7"), std::string("layout.first_stage_layers"));
        QCOMPARE(refusal("tp=8,pp=16"), std::string("layout.pp"));  // 126 is not a multiple of 16
        QCOMPARE(refusal("tp=8,pp=16,first_stage_layers=7,last_stage_layers=7,schedule=interleaved,v=2,mb=1"),
                 std::string("layout.first_stage_layers"));  // 7 layers are not 2 chunks
        QCOMPARE(refusal("tp=8,pp=1,first_stage_layers=7"), std::string("layout.first_stage_layers"));
        QCOMPARE(refusal("tp=8,pp=2,first_stage_layers=60,last_stage_layers=60"), std::string("layout.first_stage_layers"));
        QCOMPARE(refusal("tp=8,pp=2,first_stage_layers=63,last_stage_layers=63"), std::string());
        QCOMPARE(refusal("tp=8,pp=2,first_stage_layers=66"), std::string());  // the last takes the other 60

        // The middle stages hold the most parameters (8 layers against 7 + the embedding or the
        // head): their gradients are what data parallelism all-reduces, 2 (n - 1)/n x 4 bytes each (fp32).
        const Prediction pr = CostModel::evaluate(p, l);
        // (Per device: the matrices split over tp = 8, the two RMSNorms' h weights replicated.)
        const double h = 16384, layer = (h * h + 2 * h * 1024 + h * h + 3 * h * 53248) / 8 + 2 * h;
        const double dpGroup = double(l.dp), scalars = 2 * (p.cluster.devices() - 1.0) / p.cluster.devices() * 16;
        QVERIFY(near(pr.comm_bytes.dp, 2 * (dpGroup - 1) / dpGroup * 4 * 8 * layer + scalars, 1e-9));
        // ... and the second stage the most memory: 8 layers with p - 1 = 15 micro-batches in flight
        // against the first stage's 7 with 16.
        QCOMPARE(pr.memory_stage, 1);
        // A model of 128 layers split evenly (8 per stage) has the same middle stages: the step's
        // compute (the slowest stage's) is no less than the uneven one's.
        ModelSpec even = m;
        even.layers = 128;
        const Problem pe = problem(even, 128, 1024, 2048);
        const Prediction evenSplit = CostModel::evaluate(pe, layout("tp=8,pp=16,mb=1", pe));
        QVERIFY(evenSplit.time_s.compute >= pr.time_s.compute);
        QVERIFY(near(evenSplit.comm_bytes.dp, pr.comm_bytes.dp, 1e-9) || evenSplit.comm_bytes.dp > pr.comm_bytes.dp);
    }

    // Megatron-LM's account_for_embedding/loss_in_pipeline_split: 14 layers + 2 over pp 4 split as
    // 3 + 4 + 4 + 3 (v = 1), the same stages as first_stage_layers=3,last_stage_layers=3, so the same
    // prediction; with v = 2 the chunks are 1 + 2 | 2 + 2 | 2 + 2 | 2 + 1. With a small vocabulary the
    // ends' embedding and head weigh little: a middle stage's 4 layers set the step, as the 4 of
    // any stage of 16 layers split evenly (which add the head to the last stage's 4).
    void pipelineSplitCountingEnds()
    {
        ModelSpec m = megatronGpt(14, 4096, 32);
        m.vocab = 1024;
        const Problem p = problem(m, 1, 64);
        const Layout ends = layout("dp=2,pp=4,mb=1,account_for_embedding_in_pipeline_split=on,"
                                   "account_for_loss_in_pipeline_split=on", p);
        const Layout counts = layout("dp=2,pp=4,mb=1,first_stage_layers=3,last_stage_layers=3", p);
        for (int stage = 0; stage < 4; ++stage)
            QCOMPARE(ends.stageLayers(14, stage), stage == 0 || stage == 3 ? 3 : 4);
        const Prediction a = CostModel::evaluate(p, ends), b = CostModel::evaluate(p, counts);
        QCOMPARE(a.step_time_s, b.step_time_s);
        QCOMPARE(a.memory_bytes.total(), b.memory_bytes.total());
        ModelSpec even = m;
        even.layers = 16;
        const Problem pe = problem(even, 1, 64);
        const CostModel endsModel(p), evenModel(pe);
        const auto ea = endsModel.explain(ends), ee = evenModel.explain(layout("dp=2,pp=4,mb=1", pe));
        const double layerMatmuls = termValue(ea, "time_s.compute", "layer matmuls, forward");
        QVERIFY(layerMatmuls > 0);
        QVERIFY(near(layerMatmuls, termValue(ee, "time_s.compute", "layer matmuls, forward"), 1e-12));
        // The even split's last stage adds the head to its 4 layers; the middle stage has none.
        QVERIFY(a.time_s.compute < evenModel.evaluate(layout("dp=2,pp=4,mb=1", pe)).time_s.compute);

        // Interleaved: chunks of 2, the first of stage 0 and the last of stage 3 with 1; block
        // recomputation of 1 layer per chunk recomputes 2 of stage 0's 3 layers, 2 of a middle's 4.
        const Layout v2 = layout("dp=2,pp=4,mb=1,schedule=interleaved,v=2,recompute=full,recompute_method=block,"
                                 "recompute_layers=1,account_for_embedding_in_pipeline_split=on,"
                                 "account_for_loss_in_pipeline_split=on", p);
        QCOMPARE(v2.chunkLayers(14, 0, 0), 1);
        QCOMPARE(v2.chunkLayers(14, 0, 1), 2);
        QCOMPARE(v2.chunkLayers(14, 3, 1), 1);
        QCOMPARE(v2.recomputedShare(14, 0), 2.0 / 3);
        QCOMPARE(v2.recomputedShare(14, 1), 2.0 / 4);
        QCOMPARE(v2.recomputedShare(14, 3), 2.0 / 3);
        QCOMPARE(v2.checkpointShare(14, 0), 2.0 / 3);
        // The middle stage's forward, and half of it recomputed: 1.5 x its 4 layers' forward GEMMs.
        const auto ev = endsModel.explain(v2);
        QVERIFY(near(termValue(ev, "time_s.compute", "layer matmuls, forward"), layerMatmuls, 1e-12));
    }

    // Megatron-LM's --pipeline-model-parallel-layout (pipeline_parallel_layer_layout.py @ d98e8a64):
    // the string's chunks, their stages (chunk k on rank k % pp) and layer offsets, its rules, and
    // the cost model on it: a layout that spells out an even or a first/last split prices as that split.
    void explicitPipelineLayout()
    {
        std::string why;
        // Megatron-Bridge's DeepSeek-V3 layout for (pp 8, vp 2) and (pp 16, vp 1) (deepseek_v3.py @ c8101293).
        const std::optional<PipelineLayerLayout> ds = PipelineLayerLayout::parse("Et*4|(t*4|)*14tmL", why);
        QVERIFY2(ds, why.c_str());
        QCOMPARE(ds->chunkCount(), 16);
        QCOMPARE(ds->transformerLayers(), 61);
        QCOMPARE(ds->mtpLayers(), 1);
        QVERIFY(ds->chunk(0).embedding && ds->chunk(0).layers == 4 && !ds->chunk(0).loss);
        QVERIFY(ds->chunk(15).loss && ds->chunk(15).layers == 1 && ds->chunk(15).mtp_layers == 1);
        QCOMPARE(ds->stageLayers(8, 0), 8);  // chunks 0 and 8
        QCOMPARE(ds->stageLayers(8, 3), 8);
        QCOMPARE(ds->stageLayers(8, 7), 5);  // chunks 7 (4) and 15 (1)
        QCOMPARE(ds->chunkFirstLayer(8, 0, 1), 4 + 7 * 4);
        QCOMPARE(ds->chunkFirstLayer(8, 7, 1), 60);
        QCOMPARE(ds->stageLayers(16, 0), 4);
        QCOMPARE(ds->stageLayers(16, 15), 1);
        QVERIFY(ds->problems(8, 61, 1).empty());
        QVERIFY(ds->problems(16, 61, 1).empty());
        // The argument's help example ("E|(t|)*3,m|m||L") and parse_str_to_list's ("Ettt|(tt|)*29,m|L").
        const std::optional<PipelineLayerLayout> help = PipelineLayerLayout::parse("E|(t|)*3,m|m||L", why);
        QVERIFY2(help, why.c_str());
        QCOMPARE(help->text(), std::string("E|(t|)*3m|m||L"));
        QCOMPARE(help->chunkCount(), 8);  // E, t, t, t, m, m, (empty), L
        QCOMPARE(help->chunk(4).mtp_layers, 1);
        QCOMPARE(help->chunk(6).layers + help->chunk(6).mtp_layers, 0);
        const std::optional<PipelineLayerLayout> doc = PipelineLayerLayout::parse("Ettt|(tt|)*29,m|L", why);
        QVERIFY2(doc, why.c_str());
        QCOMPARE(doc->chunkCount(), 32);
        QCOMPARE(doc->transformerLayers(), 61);
        QCOMPARE(doc->chunk(30).mtp_layers, 1);
        QVERIFY(doc->chunk(31).loss && doc->chunk(31).layers == 0);
        // Its MTP layer sits on rank 14 of 16 (Megatron's standalone MTP): not modelled, named.
        QVERIFY(!doc->problems(16, 61, 1).empty());
        QVERIFY(QString::fromStdString(doc->problems(16, 61, 1).front()).contains("standalone"));
        for (const char* bad : {"(tt|", "tt)", "t*", "(tt)", "Ex", "((t)*2)*2", "t*99999999", "(t*1000|)*1000000", ""}) {
            why.clear();
            QVERIFY2(!PipelineLayerLayout::parse(bad, why), bad);
            QVERIFY2(!why.empty(), bad);
        }

        // A MoE model with dense first layers, 16 layers over pp = 4.
        ModelSpec m = moeGpt(16, 2048, 16);
        m.moe.dense_layers = 3;
        const Problem p = problem(m, 2, 64);
        // v = 1: "Et*3|t*5|t*5|t*3L" is first_stage_layers=3,last_stage_layers=3.
        const Layout counts = layout("dp=4,pp=4,mb=1,ep=4,first_stage_layers=3,last_stage_layers=3", p);
        const Layout spelled = layout("dp=4,pp=4,mb=1,ep=4,pipeline_layout=Et*3|t*5|t*5|t*3L", p);
        QCOMPARE(spelled.virtual_stages, 1);
        QCOMPARE(spelled.schedule, PipelineSchedule::OneFOneB);
        for (int stage = 0; stage < 4; ++stage) {
            QCOMPARE(spelled.stageLayers(16, stage), counts.stageLayers(16, stage));
            QCOMPARE(spelled.stageFirstLayer(16, stage), counts.stageFirstLayer(16, stage));
        }
        const Prediction a = CostModel::evaluate(p, counts), b = CostModel::evaluate(p, spelled);
        QCOMPARE(b.step_time_s, a.step_time_s);
        QCOMPARE(b.memory_bytes.total(), a.memory_bytes.total());
        QCOMPARE(b.comm_bytes.dp, a.comm_bytes.dp);
        // v = 2 from the chunk count, interleaved: chunks of 2 are the even interleaved split.
        const Layout even = layout("dp=4,pp=4,mb=1,ep=4,schedule=interleaved,v=2", p);
        const Layout evenSpelled = layout("dp=4,pp=4,mb=1,ep=4,pipeline_layout=Ett|(tt|)*6ttL", p);
        QCOMPARE(evenSpelled.virtual_stages, 2);
        QCOMPARE(evenSpelled.schedule, PipelineSchedule::Interleaved);
        const Prediction c = CostModel::evaluate(p, even), d = CostModel::evaluate(p, evenSpelled);
        QCOMPARE(d.step_time_s, c.step_time_s);
        QCOMPARE(d.memory_bytes.total(), c.memory_bytes.total());
        // Interleaved chunks lie apart in the model: stage 0 of "Et|t*3|t*3|t*3|t*2|t*2|t|tL" holds
        // layers 0 and 10-11, so one of its three is dense (the 3 dense layers are 0-2), and its
        // chunks weigh 1 and 2 layers in the schedule's in-flight activations.
        const Layout apart = layout("dp=4,pp=4,mb=1,ep=4,pipeline_layout=Et|t*3|t*3|t*3|t*2|t*2|t|tL", p);
        std::vector<std::pair<int, int>> runs;
        apart.forEachStageRun(16, 0, [&](int first, int n) { runs.emplace_back(first, n); });
        QCOMPARE(runs, (std::vector<std::pair<int, int>>{{0, 1}, {10, 2}}));
        QCOMPARE(apart.stageLayers(16, 0), 3);
        QCOMPARE(apart.chunkLayers(16, 3, 1), 1);
        QCOMPARE(apart.fullChunkLayers(16, 1), 3);
        QCOMPARE(apart.middleStage(16), 1);  // stages 1 (3 + 2) and 2 (3 + 1): the first holds more

        // The rules, each refusal naming its key.
        auto refusal = [&](const char* text) {
            FieldErrors errors;
            Layout bad = parseLayout(text, errors);
            resolveDataParallel(bad, p.cluster.devices(), errors);
            for (const FieldError& e : validate(bad, p.model, p.cluster, p.training))
                errors.push_back(e);
            return errors.empty() ? std::string() : errors.front().path;
        };
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=Et*3|t*5|t*5|t*2L"), std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=t*3E|t*5|t*5|t*3L"), std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=Et*3|t*5|t*5|t*3mL"), std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=Et*3|t*13L"), std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=Et*8||t*8|L"), std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,first_stage_layers=3,pipeline_layout=Et*3|t*5|t*5|t*3L"),
                 std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,schedule=interleaved,v=4,pipeline_layout=Ett|(tt|)*6ttL"), std::string("layout.v"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=Et*3|t*5(|t*5|t*3L"), std::string("layout.pipeline_layout"));
        QCOMPARE(refusal("pp=4,mb=1,ep=4,pipeline_layout=Et*3|t*5|t*5|t*3L"), std::string());
    }

    // Full recomputation of some layers (Megatron-LM's --recompute-method block|uniform with
    // --recompute-num-layers): block N recomputes the first N layers of each chunk and keeps the
    // others' activations; uniform N keeps one checkpoint per group of N and recomputes all.
    // FP8/FP4 recipes (QuantizationRecipe.h), on a DGX H100 with the catalog's FP8 figures and the
    // default terms (measured FP8 MAMF 1402.6 TFLOP/s, HBM 3.35 TB/s, 5 us per launch): the linear
    // layers' GEMMs at the FP8 rate, the attention core and the head as in bf16, the casts as
    // memory-bound passes, the linear inputs kept in 1 byte, the quantized weight copies in memory.
    void fp8Recipes()
    {
        Problem p = problem(megatronGpt(4, 4096, 32), 1, 8);
        p.cluster.node = dgxH100();
        p.cluster.node.chip.peak_flops_fp8 = 1978.9e12;
        p.cluster.node.chip.low_precision_recipes = {"fp8", "fp8-delayed", "fp8-blockwise", "fp8-rowwise"};
        const Layout l = layout("dp=8,mb=1,recompute=none", p);
        const CostModel bf16(p);
        Problem q = p;
        q.training.precision = Precision::FP8Delayed;  // every layer quantized
        QVERIFY(validate(q).empty());
        const CostModel fp8(q);
        const auto b = bf16.explain(l), f = fp8.explain(l);
        const double L = 4, T = 2048, h = 4096, ff = 4 * h, hbm = 3350e9, launch = 5e-6;
        // The layer GEMMs at the measured FP8 rate, times the share of it a training step sustains,
        // on the shape curve (compute-bound at these shapes).
        const double rate = 1402.6e12 * defaultCostModelParams().measured_matmul_sustained_fraction;
        auto gemm = [&](double M, double N, double K) {
            const double n = std::min({M, N, K});
            return 2 * M * N * K / (rate * n / (n + 128)) + launch;
        };
        const double layerFwd = gemm(T, 3 * h, h) + gemm(T, h, h) + gemm(T, ff, h) + gemm(T, h, ff);
        QVERIFY(near(termValue(f, "time_s.compute", "layer matmuls, forward"), L * layerFwd, 1e-12));
        // Outside the linear layers: bf16 as before.
        QCOMPARE(termValue(f, "time_s.compute", "attention core"), termValue(b, "time_s.compute", "attention core"));
        QCOMPARE(termValue(f, "time_s.compute", "logits and loss"), termValue(b, "time_s.compute", "logits and loss"));
        // Delayed scaling: one fused cast reading bf16 and writing two fp8 copies, 2 + 2 bytes per
        // element, one launch per tensor. Forward inputs QKV h, out-projection h, FC1 h, FC2 4h per
        // token; backward output gradients 3h, h, 4h, h.
        const double fwdCasts = 4 * T * (h + h + h + ff) / hbm + 4 * launch;
        const double bwdCasts = 4 * T * (3 * h + h + ff + h) / hbm + 4 * launch;
        const double casts = L * (fwdCasts + bwdCasts);
        QVERIFY(near(termValue(f, "time_s.compute", "FP8/FP4 recipe: linear layers' inputs"), casts, 1e-12));
        // The weights once per step (12 h^2 per layer, 4 matrices).
        QVERIFY(near(termValue(f, "time_s.compute", "FP8/FP4 recipe: weights quantized"),
                     L * (4 * 12 * h * h / hbm + 4 * launch), 1e-12));
        QCOMPARE(termValue(b, "time_s.compute", "FP8/FP4 recipe"), 0.0);
        // Memory: the rowwise + columnwise copies of every linear weight (2 bytes per parameter) ...
        QVERIFY(near(termValue(f, "memory_bytes.weights", "FP8/FP4 recipe"), L * 12 * h * h * 2, 1e-12));
        QCOMPARE(termValue(f, "memory_bytes.weights", "weights"), termValue(b, "memory_bytes.weights", "weights"));
        QCOMPARE(fp8.evaluate(l).memory_bytes.optimizer, bf16.evaluate(l).memory_bytes.optimizer);
        QCOMPARE(fp8.evaluate(l).memory_bytes.gradients, bf16.evaluate(l).memory_bytes.gradients);
        // ... and the linear layers' inputs kept in 1 byte instead of 2: QKV and FC1 inputs h, the
        // attention output h (unfused: one tensor), the FC2 input 4h per token.
        const double stored = termValue(b, "memory_bytes.activations", "stored"), stored8 = termValue(f, "memory_bytes.activations", "stored");
        QVERIFY(near(stored - stored8, L * T * (h + h + h + ff), 1e-12));
        // Fused attention keeps its bf16 output for its own backward: the out-projection's fp8 copy is kept beside it.
        Problem pf = p, qf = q;
        pf.training.flash_attention = qf.training.flash_attention = true;
        const double flashSaving = termValue(CostModel(pf).explain(l), "memory_bytes.activations", "stored") -
                                   termValue(CostModel(qf).explain(l), "memory_bytes.activations", "stored");
        QVERIFY(near(flashSaving, L * T * (h - h + h + ff), 1e-12));
        // Per-tensor current scaling ("fp8", Megatron-Bridge's recipe): an amax pass more (6 bytes, two
        // launches per tensor), and the first and last layers in bf16: half of these 4 layers.
        Problem cs = q;
        cs.training.precision = Precision::FP8Tensorwise;
        const auto c = CostModel(cs).explain(l);
        QVERIFY(near(termValue(c, "time_s.compute", "layer matmuls, forward"),
                     0.5 * L * layerFwd + 0.5 * termValue(b, "time_s.compute", "layer matmuls, forward"), 1e-12));
        const double fwdCurrent = 6 * T * (h + h + h + ff) / hbm + 4 * 2 * launch;
        const double bwdCurrent = 6 * T * (3 * h + h + ff + h) / hbm + 4 * 2 * launch;
        QVERIFY(near(termValue(c, "time_s.compute", "FP8/FP4 recipe: linear layers' inputs"),
                     0.5 * L * (fwdCurrent + bwdCurrent), 1e-12));
        QVERIFY(near(termValue(c, "memory_bytes.weights", "FP8/FP4 recipe"), 0.5 * L * 12 * h * h * 2, 1e-12));
        QVERIFY(near(stored - termValue(c, "memory_bytes.activations", "stored"), 0.5 * L * T * (h + h + h + ff), 1e-12));
        // Over two stages (layers 0-1 and 2-3) each stage has one bf16 end layer: the first stage's
        // copies are those of its one quantized layer.
        const Layout pp2 = layout("dp=4,pp=2,mb=1,recompute=none", p);
        const CostModel csModel(cs);
        QCOMPARE(csModel.evaluate(pp2).memory_stage, 0);
        QVERIFY(near(termValue(csModel.explain(pp2), "memory_bytes.weights", "FP8/FP4 recipe"), 1 * 12 * h * h * 2, 1e-12));
        // A one-layer model keeps its only layer in bf16: nothing quantized, nothing counted twice.
        Problem one = cs;
        one.model = megatronGpt(1, 4096, 32);
        const auto single = CostModel(one).explain(layout("dp=8,mb=1,recompute=none", one));
        QCOMPARE(termValue(single, "memory_bytes.weights", "FP8/FP4 recipe"), 0.0);
        QCOMPARE(termValue(single, "time_s.compute", "FP8/FP4 recipe"), 0.0);

        // MXFP8 (Blackwell): E8M0 scales per 32 elements, no amax pass; the input kept in 1 + 1/32 bytes.
        Problem mx = q;
        mx.training.precision = Precision::MXFP8;
        const QuantizationRecipe r = quantizationRecipe(Precision::MXFP8);
        QCOMPARE(r.stored_input_bytes, 1.0 + 1.0 / 32);
        QCOMPARE(r.activation_cast_bytes, 2.0 + 2 * (1.0 + 1.0 / 32));
        QCOMPARE(quantizationRecipe(Precision::NVFP4).stored_input_bytes, 0.5 + 1.0 / 16);
        QCOMPARE(quantizationRecipe(Precision::NVFP4).gemm_type, DataType::FP4);
        // torchao's rowwise keeps the bf16 input (saved in high precision) and caches no weight.
        const QuantizationRecipe rowwise = quantizationRecipe(Precision::FP8Rowwise);
        QCOMPARE(rowwise.stored_input_bytes, 2.0);
        QCOMPARE(rowwise.weight_copy_bytes, 0.0);
        QVERIFY(!quantizationRecipe(Precision::BF16Mixed).quantized);
        // A chip that does not run the recipe is named with the recipes it runs.
        const FieldErrors errors = validate(mx);
        QCOMPARE(errors.size(), size_t(1));
        QCOMPARE(errors[0].path, std::string("training.precision"));
        QCOMPARE(errors[0].message, std::string("mxfp8 is not a training recipe of h100-sxm (its FP8/FP4 recipes: fp8, "
                                                "fp8-delayed, fp8-blockwise, fp8-rowwise)"));
        Problem a100 = problem(megatronGpt(4, 4096, 32), 1, 8);
        a100.training.precision = Precision::FP8Delayed;
        QCOMPARE(validate(a100).at(0).message,
                 std::string("fp8-delayed is not a training recipe of a100-80gb (it trains no FP8 or FP4 recipe: use bf16)"));
    }

    void partialRecomputation()
    {
        const Problem p = problem(megatronGpt(8, 4096, 32), 2, 64);
        const CostModel model(p);
        auto stored = [&](const char* text) {
            return termValue(model.explain(layout(text, p)), "memory_bytes.activations", "stored for backward");
        };
        const char* base = "dp=16,mb=1";  // one stage of 8 layers
        const std::string none = std::string(base), full = none + ",recompute=full";
        const std::string block = full + ",recompute_method=block,recompute_layers=4";
        const std::string groups = full + ",recompute_method=uniform,recompute_layers=2";
        const Prediction pf = model.evaluate(layout(full.c_str(), p));
        const Prediction pb = model.evaluate(layout(block.c_str(), p));
        const Prediction pu = model.evaluate(layout(groups.c_str(), p));
        // 4 of the stage's 8 layers recomputed: half the time, half the recomputed FLOPs.
        QVERIFY(near(pb.time_s.recompute, 0.5 * pf.time_s.recompute, 1e-12));
        QVERIFY(near(pb.hardware_flops_per_step - pb.model_flops_per_step,
                     0.5 * (pf.hardware_flops_per_step - pf.model_flops_per_step), 1e-12));
        // ... and per layer half a checkpoint and half the activations: the mean of full and none.
        QVERIFY(near(stored(block.c_str()), 0.5 * (stored(full.c_str()) + stored(none.c_str())), 1e-12));
        // Uniform groups of 2: every layer recomputed, 4 checkpoints of b s h bytes instead of 8
        // (one micro-batch in flight without a pipeline).
        QVERIFY(near(pu.time_s.recompute, pf.time_s.recompute, 1e-12));
        const double input = 1 * 2048 * 4096 * 2.0;
        QVERIFY(near(stored(full.c_str()) - stored(groups.c_str()), 4 * input, 1e-12));
        // ... while the group being recomputed holds both its layers' activations: one layer more
        // than full recomputation's working set (all of a layer: (none - full) / 8 + its input).
        auto working = [&](const std::string& text) {
            return termValue(model.explain(layout(text.c_str(), p)), "memory_bytes.activations", "working set");
        };
        QVERIFY(near(working(groups) - working(full), (stored(none.c_str()) - stored(full.c_str())) / 8 + input, 1e-12));
        // The rules: a count needs recompute=full, block needs a count no larger than the chunk's layers.
        FieldErrors errors;
        const Layout selective = parseLayout("dp=16,recompute=selective,recompute_layers=2", errors);
        QCOMPARE(validate(selective, p.model, p.cluster, p.training).front().path, std::string("layout.recompute_layers"));
        const Layout tooMany = parseLayout("pp=2,dp=8,recompute=full,recompute_method=block,recompute_layers=5", errors);
        QCOMPARE(validate(tooMany, p.model, p.cluster, p.training).size(), size_t(1));  // 4 layers per stage
        QCOMPARE(validate(tooMany, p.model, p.cluster, p.training).front().path, std::string("layout.recompute_layers"));
        const Layout noCount = parseLayout("pp=2,dp=8,recompute=full,recompute_method=block", errors);
        QCOMPARE(validate(noCount, p.model, p.cluster, p.training).front().path, std::string("layout.recompute_method"));
        QVERIFY(errors.empty());
        const std::string text = toString(layout(block.c_str(), p)), suffix = ",recompute_method=block,recompute_layers=4";
        QCOMPARE(text.substr(text.size() - suffix.size()), suffix);
    }

    // Selective recomputation of named modules (Megatron-LM's --recompute-modules,
    // transformer_config.py @ d98e8a64): what each discards, computed by hand from the module's
    // source, and the time it adds.
    void recomputeModules()
    {
        // 4 MoE layers of 8 experts (top 2), LayerNorm, 4h GeLU, bias: one stage, dp = 8, one
        // micro-batch of 2048 tokens in flight; fused attention.
        Problem p = problem(moeGpt(4, 4096, 32), 1, 8);
        p.training.flash_attention = true;
        const CostModel model(p);
        const double T = 2048, h = 4096, f = 4 * 4096.0, layers = 4, k = 2;
        const std::string selective = "dp=8,mb=1,recompute=selective";
        auto term = [&](const std::string& text, const char* figure, const char* name) {
            return termValue(model.explain(layout(text.c_str(), p)), figure, name);
        };
        auto stored = [&](const std::string& text) {
            return model.evaluate(layout(text.c_str(), p)).memory_bytes.activations -
                   term(text, "memory_bytes.activations", "working set");
        };
        // moe_act (moe/experts.py: the activation's output, FC2's input, discarded): f bf16 values for
        // each of the T k routed copies, per MoE layer.
        const std::string moeAct = selective + ",recompute_modules=moe_act";
        const double expertsActivation = layers * 2.0 * f * T * k;
        QCOMPARE(term(moeAct, "memory_bytes.activations", "discarded: experts' activation outputs"), -expertsActivation);
        // (With core_attn kept among them, the rest of what is stored is selective's.)
        QVERIFY(near(stored(selective) - stored(selective + ",recompute_modules=core_attn+moe_act"), expertsActivation,
                     1e-12));
        // Its time: the activation rebuilt from the pre-activation (read f, write f) per copy, m = 1.
        const CostModelParams& prm = model.params();
        const double hbm = p.cluster.node.chip.hbm_bytes_per_second;
        QVERIFY(near(term(moeAct, "time_s.recompute", "recomputed experts' activation"),
                     layers * (prm.elementwise_traffic_factor * 2.0 * (f + f) * T * k / hbm + prm.kernel_overhead_s), 1e-12));
        QCOMPARE(model.evaluate(layout(moeAct.c_str(), p)).time_s.recompute,
                 term(moeAct, "time_s.recompute", "recomputed experts' activation"));
        // layernorm (transformer_layer.py): in Megatron's TE spec a MoE layer's pre-MLP norm is a
        // module of its own (its output into the router and the dispatch, 2 T h bytes, and its fp32
        // mean and 1/std per token); the input norm is fused into the QKV linear layer.
        const std::string norms = selective + ",recompute_modules=layernorm";
        const double preMlpNorm = layers * (2.0 * T * h + 2 * 4.0 * T);
        QCOMPARE(term(norms, "memory_bytes.activations", "discarded: outputs of the norms"), -preMlpNorm);
        // A dense model's norms are all fused: nothing to discard, nothing to recompute.
        const Problem dense = problem(megatronGpt(4, 4096, 32), 1, 8);
        const CostModel denseModel(dense);
        const Prediction plain = denseModel.evaluate(layout("dp=8,recompute=selective", dense));
        const Prediction normed =
            denseModel.evaluate(layout("dp=8,recompute=selective,recompute_modules=core_attn+layernorm", dense));
        QCOMPARE(normed.memory_bytes.activations, plain.memory_bytes.activations);
        QCOMPARE(normed.step_time_s, plain.step_time_s);
        // mlp (transformer_layer.py, checkpointed with its fused pre-MLP norm): the norm's output
        // and statistics, the 4h GeLU's input and output (2 T f + 2 T f bytes) of every dense layer.
        const Prediction mlp =
            denseModel.evaluate(layout("dp=8,recompute=selective,recompute_modules=core_attn+mlp", dense));
        const double denseMlp = 2.0 * T * h + 2 * 4.0 * T + 4.0 * T * f;  // per layer
        // Discarded from every layer, one layer's live again during its backward with the MLP's
        // output, which the checkpoint's forward makes again (2 T h bytes).
        QVERIFY(near(plain.memory_bytes.activations - mlp.memory_bytes.activations,
                     (layers - 1) * denseMlp - 2.0 * T * h, 1e-12));
        // ... its matmuls again: 2 T h f x 2 per layer and device, in the hardware FLOPs.
        QVERIFY(near(mlp.hardware_flops_per_step - plain.hardware_flops_per_step, 8 * layers * 2.0 * T * 2 * h * f, 1e-12));
        // moe (moe_layer.py): the whole MoE layer checkpointed; it holds moe_act's discard and more,
        // and runs the dispatch again (here ep = 1: no all-to-all).
        const std::string whole = selective + ",recompute_modules=moe";
        QVERIFY(-term(whole, "memory_bytes.activations", "discarded: everything the MoE layers keep") > expertsActivation);
        QCOMPARE(term(selective + ",recompute_modules=moe+moe_act", "memory_bytes.activations", "discarded: experts'"), 0.0);
        // The modules are named in the text form in Megatron's order and parsed back.
        QCOMPARE(toString(layout((selective + ",recompute_modules=moe_act+layernorm").c_str(), p))
                     .substr(toString(layout(selective.c_str(), p)).size()),
                 std::string(",recompute_modules=moe_act+layernorm"));
    }

    // An MLA model's up projections (multi_latent_attention.py: Q, K after RoPE and V discarded) and
    // its input norm, a module of its own in Megatron's MLA spec.
    // Multi-token prediction on the last stage: its FLOPs in the model-FLOP count as Megatron-LM
    // counts them, one more head pass per module in its own term, eh_proj and the norms in theirs,
    // and the module's states: an MoE layer like the others plus eh_proj (2h x h / tp) and three
    // norms.
    void multiTokenPrediction()
    {
        const int h = 2048, seq = 2048, batch = 64;
        ModelSpec plain = moeGpt(8, h, 16);
        ModelSpec mtp = plain;
        mtp.mtp.layers = 1;
        mtp.mtp.loss_scale = 0.3;
        QVERIFY(validate(mtp).empty());
        const Problem pp = problem(plain, 1, batch, seq), pm = problem(mtp, 1, batch, seq);
        const char* text = "tp=2,pp=2,sp=on,mb=1,recompute=none";
        const Prediction a = CostModel::evaluate(pp, layout(text, pp));
        const Prediction b = CostModel::evaluate(pm, layout(text, pm));
        // Per token forward: one more MoE layer (what a ninth layer adds to the count), eh_proj
        // 2 x 2h x h, the three norms as 3h multiply-adds, the logits 2 h V once more.
        ModelSpec nine = plain;
        nine.layers = 9;
        const double layer = double(forwardFlopsPerToken(nine, seq) - forwardFlopsPerToken(plain, seq));
        const double module = layer + 4.0 * h * h + 6.0 * h + 2.0 * h * 51200;
        QCOMPARE(double(mtpForwardFlopsPerToken(mtp, seq)), module);
        QVERIFY(near(b.model_flops_per_step - a.model_flops_per_step, 3 * module * batch * seq, 1e-12));
        QVERIFY(b.step_time_s > a.step_time_s);

        const CostModel withMtp(pm);
        const auto terms = withMtp.explain(layout(text, pm));
        const double head = termValue(terms, "time_s.compute", "logits and loss");
        const double mtpHead = termValue(terms, "time_s.compute", "multi-token prediction: logits and loss");
        QVERIFY(head > 0);
        QVERIFY(near(mtpHead, head, 1e-12));  // one module: one more pass of the same head
        const auto plainTerms = CostModel(pp).explain(layout(text, pp));
        QVERIFY(near(head, termValue(plainTerms, "time_s.compute", "logits and loss"), 1e-12));
        QVERIFY(termValue(terms, "time_s.compute", "multi-token prediction: eh_proj and norms") > 0);

        // States on one stage (pp=1): the MTP model holds what a 9-layer model does, plus eh_proj
        // and the three LayerNorms (2h each).
        const char* one = "tp=2,sp=on,mb=1,recompute=none";
        const Problem p9 = problem(nine, 1, batch, seq);
        const double weightsMtp = termValue(CostModel(pm).explain(layout(one, pm)), "memory_bytes.weights", "weights");
        const double weights9 = termValue(CostModel(p9).explain(layout(one, p9)), "memory_bytes.weights", "weights");
        const double bytes = stateBytesPerParameter(pm.training).weights;
        QVERIFY(near(weightsMtp - weights9, (3.0 * 2 * h + 2.0 * h * h / 2) * bytes, 1e-9));

        // Untied and pipelined: the last stage embeds the rolled tokens with its own copy of the word
        // embedding (V/tp x h more than the plain model's last stage, the module besides), whose
        // gradient is all-reduced with the first stage's over the embedding group (Megatron-LM's
        // GPTModel where mtp_process, finalize_model_grads.py @ d98e8a64); the plain untied model has none.
        // (Rotary positions: the first stage holds no position table, the last is the busier.)
        ModelSpec untied = plain, untiedMtp = mtp;
        untied.tied_embeddings = untiedMtp.tied_embeddings = false;
        untied.positions = untiedMtp.positions = PositionKind::Rotary;
        const Problem pu = problem(untied, 1, batch, seq), pum = problem(untiedMtp, 1, batch, seq);
        const char* piped = "tp=2,pp=2,sp=on,mb=1,recompute=none";
        const auto plainPiped = CostModel(pu).explain(layout(piped, pu));
        const auto mtpPiped = CostModel(pum).explain(layout(piped, pum));
        QCOMPARE(termValue(plainPiped, "time_s.dp_comm", "tied embedding gradients"), 0.0);
        QVERIFY(termValue(mtpPiped, "time_s.dp_comm", "tied embedding gradients") > 0);
        // (The depth's MoE layer on a device: what a ninth layer adds on one stage.)
        auto weightsOf = [&](const ModelSpec& m, const char* text) {
            const Problem q = problem(m, 1, batch, seq);
            return termValue(CostModel(q).explain(layout(text, q)), "memory_bytes.weights", "weights");
        };
        const double moeLayer = weightsOf(nine, one) - weightsOf(plain, one);
        const double lastStageExtra = weightsOf(untiedMtp, piped) - weightsOf(untied, piped);
        // (The plain model's busiest device is its first stage, with more micro-batches in flight: the
        // last stage's final norm, 2h, is the MTP model's difference too.)
        QVERIFY(near(lastStageExtra, moeLayer + (3.0 * 2 * h + 2.0 * h * h / 2 + 51200.0 / 2 * h + 2.0 * h) * bytes, 1e-9));
    }

    void recomputeMlaModules()
    {
        ModelSpec m = megatronGpt(4, 2048, 16);
        m.name = "mla-gpt";
        m.head_dim = 192;
        m.mla.q_lora_rank = 1536;
        m.mla.kv_lora_rank = 512;
        m.mla.qk_nope_head_dim = 128;
        m.mla.qk_rope_head_dim = 64;
        m.mla.v_head_dim = 128;
        Problem p = problem(m, 1, 8);
        p.training.flash_attention = true;
        const CostModel model(p);
        const double T = 2048, heads = 16, layers = 4;
        auto freed = [&](const char* modules, const char* name) {
            const std::string text = std::string("dp=8,recompute=selective,recompute_modules=") + modules;
            return -termValue(model.explain(layout(text.c_str(), p)), "memory_bytes.activations", name);
        };
        // 2 bytes x (Q: heads (nope + rope), K: the same, V: heads x v_head_dim) per token and layer.
        QCOMPARE(freed("mla_up_proj", "discarded: MLA's Q, K"), layers * T * 2.0 * (2 * heads * 192 + heads * 128));
        QCOMPARE(freed("layernorm", "discarded: outputs of the norms"), layers * (2.0 * T * 2048 + 2 * 4.0 * T));
    }

    // Bad input: each named.
    void recomputeModulesRules()
    {
        const Problem dense = problem(megatronGpt(4, 4096, 32), 1, 8);
        FieldErrors errors;
        parseLayout("dp=8,recompute=selective,recompute_modules=core_attn+attn", errors);
        QCOMPARE(errors.size(), size_t(1));
        QCOMPARE(errors[0].path, std::string("layout.recompute_modules"));
        QVERIFY2(errors[0].message.find("unknown module \"attn\"") == 0, errors[0].message.c_str());
        errors.clear();
        parseLayout("dp=8,recompute=selective,recompute_modules=mlp+mlp", errors);
        QCOMPARE(errors.at(0).message, std::string("module \"mlp\" named twice"));
        QCOMPARE(firstBrokenRule("dp=8,recompute=selective,recompute_modules=mla_up_proj", dense),
                 std::string("layout.recompute_modules: mla_up_proj recomputes multi-latent attention's up "
                             "projections; gpt has no MLA"));
        QCOMPARE(firstBrokenRule("dp=8,recompute=selective,recompute_modules=moe_act", dense),
                 std::string("layout.recompute_modules: moe_act recomputes the routed experts' activation; gpt has no "
                             "routed experts"));
        const Problem moe = problem(moeGpt(4, 4096, 32), 1, 8);
        QCOMPARE(firstBrokenRule("dp=8,recompute=selective,recompute_modules=shared_experts", moe),
                 std::string("layout.recompute_modules: shared_experts recomputes the shared experts; moe-gpt has none"));
        QCOMPARE(firstBrokenRule("dp=8,recompute=selective,recompute_modules=mlp", moe),
                 std::string("layout.recompute_modules: mlp recomputes the dense layers' MLP; every layer of moe-gpt is "
                             "a MoE layer"));
        QCOMPARE(firstBrokenRule("dp=8,recompute=full,recompute_modules=moe_act", moe),
                 std::string("layout.recompute_modules: recomputed modules (moe_act) need recompute=selective "
                             "(Megatron-LM's --recompute-granularity selective)"));
        QCOMPARE(firstBrokenRule("dp=8,recompute=selective,recompute_modules=moe_act+layernorm", moe), std::string());
    }

    // Activation offload of N layers to the host (Megatron-LM's --cpu-offloading-num-layers,
    // Transformer Engine's cpu_offload.py): the layers' stored bytes in host memory, the copies over
    // the host link under the next layer's compute.
    void activationOffload()
    {
        Problem p = problem(megatronGpt(8, 4096, 32), 1, 8);
        p.cluster.node.host_link_bytes_per_second = 16e9;  // a slow link: the copies show
        const CostModel model(p);
        const Layout none = layout("dp=8,mb=1", p), two = layout("dp=8,mb=1,offload_activations=2", p);
        // One layer's stored bytes: the 8-layer model's less the 4-layer one's (same head), over 4.
        Problem half = p;
        half.model.layers = 4;
        auto stored = [](const CostModel& cm, const Layout& l) {
            return termValue(cm.explain(l), "memory_bytes.activations", "stored for backward");
        };
        const double layerBytes = (stored(model, none) - stored(CostModel(half), none)) / 4;
        const Prediction a = model.evaluate(none), b = model.evaluate(two);
        const std::vector<Term> offloaded = model.explain(two);
        QVERIFY(near(b.memory_bytes.host_activations, 2 * layerBytes, 1e-12));
        QCOMPARE(termValue(offloaded, "memory_bytes.host_activations", "offloaded layers"), b.memory_bytes.host_activations);
        QCOMPARE(termValue(offloaded, "memory_bytes.activations", "moved to the host"), -b.memory_bytes.host_activations);
        QCOMPARE(a.memory_bytes.host_activations, 0.0);
        // Device memory: two layers less (TE holds at most layers - N sets: a reload never adds).
        QVERIFY(near(a.memory_bytes.activations - b.memory_bytes.activations, 2 * layerBytes, 1e-12));
        // With one kept layer, seven less; and nothing overlaps: every copy out and back exposed.
        const Prediction seven = model.evaluate(layout("dp=8,mb=1,offload_activations=7", p));
        QVERIFY(near(a.memory_bytes.activations - seven.memory_bytes.activations, 7 * layerBytes, 1e-12));
        // Each copy hides behind one layer's forward (out) or backward (back), the rest exposed: two
        // layers' copies out and back at most, less one layer's forward and backward at least.
        const double copy = layerBytes / 16e9, layerCompute = a.time_s.compute / 8;
        QVERIFY(b.time_s.offload <= 2 * 2 * copy * (1 + 1e-12));
        QVERIFY(b.time_s.offload >= 2 * 2 * copy - 2 * layerCompute);
        QVERIFY(2 * 2 * copy - 2 * layerCompute > 0);  // (the link is slow enough for the bound to say something)
        QVERIFY(near(b.step_time_s - a.step_time_s, b.time_s.offload, 1e-9));
        QVERIFY(near(seven.time_s.offload, 7 * 2 * copy, 1e-9));
        // The rules: fewer layers than the stage's, pp = 1, no recomputation, a host link.
        auto rule = [&](const char* text) { return firstBrokenRule(text, p); };
        QCOMPARE(rule("dp=8,offload_activations=8"),
                 std::string("layout.offload_activations: 8 offloaded layers: must be fewer than the 8 layers on the "
                             "stage (Megatron-LM offloads layers less than num_layers)"));
        QVERIFY(rule("dp=4,pp=2,offload_activations=2")
                    .starts_with("layout.offload_activations: activation offload does not run with pipeline parallelism"));
        QVERIFY(rule("dp=8,recompute=selective,offload_activations=2")
                    .starts_with("layout.offload_activations: activation offload does not run with recomputation"));
        Problem noLink = p;
        noLink.cluster.node.host_link_bytes_per_second = 0;
        const Prediction unlinked = CostModel(noLink).evaluate(two);
        QCOMPARE(unlinked.reason, Infeasibility::MissingHardwareFigure);
        // (The figure is named: the catalog field to fill in.)
        QVERIFY(unlinked.missing_figure && std::string(unlinked.missing_figure).find("host_link_bytes_per_second") !=
                                               std::string::npos);
        QCOMPARE(model.evaluate(two).missing_figure, nullptr);
    }
};

QTEST_GUILESS_MAIN(TstPlannerCostModel)
#include "tst_planner_costmodel.moc"
