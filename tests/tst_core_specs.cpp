// Units, layout strings and the field-level validation of layouts, hardware,
// training settings and problems.
#include "BuiltinSpecs.h"
#include "HardwareSpec.h"
#include "Layout.h"
#include "ModelSpec.h"
#include "Problem.h"
#include "SpecJson.h"
#include "Units.h"

#include <QJsonArray>
#include <QTest>

using namespace shardscope;

namespace {

bool hasError(const FieldErrors& errors, const std::string& path, const std::string& fragment)
{
    for (const FieldError& e : errors)
        if (e.path == path && e.message.find(fragment) != std::string::npos)
            return true;
    return false;
}

QString dump(const FieldErrors& errors) { return QString::fromStdString(joinErrors(errors)); }

// Llama-2-70B-like model on trn1.32xlarge nodes (32 NeuronCores each sharing 16 chips' HBM).
Problem llama70bOnTrn1(int nodes)
{
    Problem p;
    ModelSpec& m = p.model;
    m.name = "llama-2-70b";
    m.layers = 80;
    m.hidden = 8192;
    m.heads = 64;
    m.kv_heads = 8;
    m.head_dim = 128;
    m.ffn_hidden = 28672;
    m.mlp = MlpKind::SwiGlu;
    m.vocab = 32000;
    m.max_seq = 4096;
    m.positions = PositionKind::Rotary;
    m.norm = NormKind::RmsNorm;
    m.bias = false;
    m.tied_embeddings = false;
    ChipSpec chip;
    chip.name = "trainium1";
    chip.peak_flops_bf16 = 190e12;
    chip.hbm_bytes = 32.0 * (1 << 30);
    chip.hbm_bytes_per_second = 820.0 * (1 << 30);
    chip.devices_per_chip = 2;
    p.cluster.node.name = "trn1.32xlarge";
    p.cluster.node.chip = chip;
    p.cluster.node.chips_per_node = 16;
    p.cluster.node.intra_topology = Topology::Torus2D;
    p.cluster.node.intra_link_bytes_per_second = 384.0 * (1 << 30);
    p.cluster.node.inter_node_bytes_per_second = 800e9 / 8;
    p.cluster.nodes = nodes;
    p.training.global_batch = 1024;
    p.training.seq_len = 4096;
    return p;
}

} // namespace

class TstCoreSpecs : public QObject {
    Q_OBJECT
private slots:
    void quantities_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("kind");
        QTest::addColumn<double>("expected");
        const int bytes = int(QuantityKind::Bytes), rate = int(QuantityKind::BytesPerSecond),
                  flops = int(QuantityKind::FlopsPerSecond);
        QTest::newRow("GiB") << "32 GiB" << bytes << 34359738368.0;
        QTest::newRow("GB") << "80 GB" << bytes << 80e9;
        QTest::newRow("plain number") << "1024" << bytes << 1024.0;
        QTest::newRow("GiB/s") << "820 GiB/s" << rate << 820.0 * 1073741824.0;
        QTest::newRow("Gbps is bits") << "800 Gbps" << rate << 1e11;
        QTest::newRow("bidi is halved") << "900 GB/s bidi" << rate << 4.5e11;
        QTest::newRow("uni as is") << "448 GB/s uni" << rate << 448e9;
        QTest::newRow("TB/s") << "2.9 TB/s" << rate << 2.9e12;
        QTest::newRow("TFLOP/s") << "190 TFLOP/s" << flops << 1.9e14;
        QTest::newRow("PFLOP/s") << "2.25 PFLOP/s" << flops << 2.25e15;
    }
    void quantities()
    {
        QFETCH(QString, text);
        QFETCH(int, kind);
        QFETCH(double, expected);
        const ParsedQuantity q = parseQuantity(text.toStdString(), QuantityKind(kind));
        QVERIFY2(q.error.empty(), q.error.c_str());
        QCOMPARE(q.value, expected);
    }

    void badQuantities_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("fragment");
        QTest::newRow("unknown unit") << "32 parsecs" << int(QuantityKind::Bytes) << "unknown unit";
        QTest::newRow("no number") << "GB" << int(QuantityKind::Bytes) << "not a size";
        QTest::newRow("rate for bytes") << "1 TFLOP/s" << int(QuantityKind::Bytes) << "unknown unit";
        QTest::newRow("bidi on bytes") << "32 GiB bidi" << int(QuantityKind::Bytes) << "bandwidth";
        QTest::newRow("infinite") << "inf GB/s" << int(QuantityKind::BytesPerSecond) << "finite";
        // Issue 19: strtod read these as numbers.
        QTest::newRow("hexadecimal") << "0x10 GiB" << int(QuantityKind::Bytes) << "decimal number";
        QTest::newRow("hexadecimal alone") << "0x10" << int(QuantityKind::Bytes) << "decimal number";
        QTest::newRow("plus sign") << "+8 GiB" << int(QuantityKind::Bytes) << "decimal number";
        QTest::newRow("leading space") << " 8 GiB" << int(QuantityKind::Bytes) << "spaces around";
        QTest::newRow("trailing space") << "8 GiB " << int(QuantityKind::Bytes) << "spaces around";
        QTest::newRow("nan") << "nan TB/s" << int(QuantityKind::BytesPerSecond) << "finite";
    }
    void badQuantities()
    {
        QFETCH(QString, text);
        QFETCH(int, kind);
        QFETCH(QString, fragment);
        const ParsedQuantity q = parseQuantity(text.toStdString(), QuantityKind(kind));
        QVERIFY2(q.error.find(fragment.toStdString()) != std::string::npos, q.error.c_str());
    }

    void formatting()
    {
        QCOMPARE(QString::fromStdString(formatCount(124439808)), QString("124,439,808"));
        QCOMPARE(QString::fromStdString(formatCount(-1000)), QString("-1,000"));
        QCOMPARE(QString::fromStdString(formatBytes(34359738368.0)), QString("32.0 GiB"));
        QCOMPARE(QString::fromStdString(formatSi(1.9e14, "FLOP/s")), QString("190 TFLOP/s"));
        QCOMPARE(QString::fromStdString(formatDuration(3 * 86400.0)), QString("3 d"));
        // No scientific notation, and nothing is "0 us".
        QCOMPARE(QString::fromStdString(formatDuration(1150 * 86400.0)), QString("1150 d"));
        QCOMPARE(QString::fromStdString(formatDuration(0)), QString("0 s"));
    }

    void parseLayoutString()
    {
        FieldErrors errors;
        const Layout l = parseLayout("dp=8,tp=8,pp=4,cp=1,sp=on,zero=1,zero_group=0,mb=2,schedule=interleaved,v=2,"
                                     "recompute=selective,offload=none",
                                     errors);
        QVERIFY2(errors.empty(), qPrintable(dump(errors)));
        QCOMPARE(l.dp, 8);
        QCOMPARE(l.tp, 8);
        QCOMPARE(l.pp, 4);
        QVERIFY(l.sequence_parallel);
        QCOMPARE(l.zero_stage, 1);
        QCOMPARE(l.micro_batch, 2);
        QCOMPARE(l.schedule, PipelineSchedule::Interleaved);
        QCOMPARE(l.virtual_stages, 2);
        QCOMPARE(l.recompute, Recompute::Selective);
        // The printed form parses back to the same layout.
        FieldErrors again;
        QVERIFY(parseLayout(toString(l), again) == l);
        QVERIFY(again.empty());
    }

    // Issue 19: "tp=2,tp=4" silently kept the last; integers in text are decimal only.
    void parseLayoutRefusesDuplicatesAndNonDecimal_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("key twice") << "tp=2,tp=4" << "layout.tp: given twice (\"tp=2\" and \"tp=4\")";
        QTest::newRow("key twice with spaces") << "tp=2, pp=2 , tp = 2" << "layout.tp: given twice";
        QTest::newRow("hexadecimal") << "tp=0x10" << "layout.tp: \"0x10\" is not an integer";
        QTest::newRow("plus sign") << "tp=+8" << "layout.tp: \"+8\" is not an integer";
        QTest::newRow("inner space") << "tp=8 8" << "layout.tp: \"8 8\" is not an integer";
        QTest::newRow("long value cut") << "tp=" + QString(100'000, '9') << "(100000 bytes)";
    }
    void parseLayoutRefusesDuplicatesAndNonDecimal()
    {
        QFETCH(QString, text);
        QFETCH(QString, expected);
        FieldErrors errors;
        parseLayout(text.toStdString(), errors);
        const QString all = QString::fromStdString(joinErrors(errors));
        QVERIFY2(all.contains(expected), qPrintable(all));
        QVERIFY2(all.size() < 500, qPrintable(all.left(500)));
    }

    void parseLayoutDefaultsAndFill()
    {
        FieldErrors errors;
        Layout l = parseLayout("tp=8,pp=2", errors);
        QVERIFY(errors.empty());
        QCOMPARE(l.dp, 0);  // to be filled
        QCOMPARE(l.cp, 1);
        QCOMPARE(l.schedule, PipelineSchedule::OneFOneB);
        QCOMPARE(l.recompute, Recompute::None);
        resolveDataParallel(l, 2048, errors);
        QVERIFY(errors.empty());
        QCOMPARE(l.dp, 128);
        Layout odd = parseLayout("tp=3", errors);
        resolveDataParallel(odd, 32, errors);
        QVERIFY(hasError(errors, "layout.dp", "does not divide the 32 devices"));
    }

    void parseLayoutErrors()
    {
        FieldErrors errors;
        parseLayout("tp=eight,pipeline=2,schedule=zigzag,sp=maybe,dp", errors);
        QVERIFY(hasError(errors, "layout.tp", "not an integer"));
        QVERIFY(hasError(errors, "layout.pipeline", "unknown key"));
        QVERIFY(hasError(errors, "layout.schedule", "zigzag"));
        QVERIFY(hasError(errors, "layout.sp", "maybe"));
        QVERIFY(hasError(errors, "layout", "not key=value"));
        QCOMPARE(errors.size(), size_t(5));
    }

    void layoutRules_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("fragment");
        // 4 trn1.32xlarge = 128 devices, Llama-2-70B (64 heads, 8 KV heads, 80 layers), batch 1024, seq 4096.
        QTest::newRow("tp vs heads") << "dp=4,tp=3,pp=1,cp=1" << "layout.tp" << "3 does not divide heads 64";
        QTest::newRow("device count") << "dp=2,tp=8,pp=2" << "layout.dp" << "does not equal the cluster's 128 devices";
        QTest::newRow("pp vs layers") << "dp=4,tp=1,pp=32" << "layout.pp" << "does not divide the 80 layers";
        QTest::newRow("batch") << "dp=128,mb=3" << "layout.mb" << "does not divide the global batch 1024";
        QTest::newRow("interleaved needs v") << "dp=16,tp=8,schedule=interleaved,pp=1" << "layout.schedule"
                                             << "needs pp >= 2";
        QTest::newRow("v without interleaving") << "dp=16,tp=4,pp=2,v=2" << "layout.v" << "schedule=interleaved";
        QTest::newRow("sp needs tp") << "dp=128,sp=on" << "layout.sp" << "needs tp > 1";
        QTest::newRow("zero group") << "dp=128,zero=3,zero_group=3" << "layout.zero_group" << "does not divide dp 128";
        QTest::newRow("zero group needs zero") << "dp=128,zero_group=8" << "layout.zero_group" << "zero >= 1";
        // Megatron-LM's distributed-optimizer instances split the expert-data-parallel group too
        // (parallel_state.py @ d98e8a64): edp = 128 / 64 = 2 devices for 32 replicas.
        QTest::newRow("zero group vs edp") << "dp=128,etp=64,zero=1,zero_group=4" << "layout.zero_group"
                                           << "32 ZeRO replicas (dp 128 / zero_group 4) do not divide the "
                                              "expert-data-parallel group edp = tp x cp x dp / (ep x etp) = 2";
        QTest::newRow("zero stage") << "dp=128,zero=4" << "layout.zero" << "not a ZeRO stage";
        QTest::newRow("offload needs zero") << "dp=128,offload=optimizer" << "layout.offload" << "zero >= 1";
        QTest::newRow("ep needs moe") << "dp=128,ep=2" << "layout.ep" << "llama-2-70b has no routed experts";
        QTest::newRow("ep vs dp x cp") << "dp=4,tp=8,pp=4,sp=on,ep=3" << "layout.ep"
                                       << "ep 3 does not divide dp x cp = 4 x 1 = 4";
        QTest::newRow("ep x etp vs stage") << "dp=4,tp=8,pp=4,sp=on,ep=4,etp=16" << "layout.ep"
                                           << "ep x etp = 4 x 16 = 64 does not divide tp x cp x dp = 8 x 1 x 4 = 32";
    }
    void layoutRules()
    {
        QFETCH(QString, layout);
        QFETCH(QString, path);
        QFETCH(QString, fragment);
        const Problem p = llama70bOnTrn1(4);
        FieldErrors parseErrors;
        const Layout l = parseLayout(layout.toStdString(), parseErrors);
        QVERIFY(parseErrors.empty());
        const FieldErrors errors = validate(l, p.model, p.cluster, p.training);
        QVERIFY2(hasError(errors, path.toStdString(), fragment.toStdString()), qPrintable(dump(errors)));
    }

    void legalLayouts_data()
    {
        QTest::addColumn<QString>("layout");
        // The NxD Llama-2-70B runs: TP=32 on one trn1.32xlarge (KV heads replicated 4x), PP=8.
        QTest::newRow("tp32 pp4 kv replicated") << "dp=1,tp=32,pp=4,sp=on,zero=1,recompute=selective";
        QTest::newRow("interleaved") << "dp=4,tp=8,pp=4,schedule=interleaved,v=2,mb=1";
        QTest::newRow("hsdp") << "dp=128,zero=3,zero_group=32,mb=2";
        QTest::newRow("context parallel") << "dp=2,tp=8,pp=2,cp=4,sp=on";
    }
    void legalLayouts()
    {
        QFETCH(QString, layout);
        const Problem p = llama70bOnTrn1(4);
        FieldErrors errors;
        const Layout l = parseLayout(layout.toStdString(), errors);
        const FieldErrors rules = validate(l, p.model, p.cluster, p.training);
        QVERIFY2(errors.empty() && rules.empty(), qPrintable(dump(rules)));
    }

    // Issue 16: ep and etp, Megatron's semantics; the printed form names them only when set.
    void expertParallelLayouts()
    {
        Problem p = llama70bOnTrn1(4);  // 128 devices
        p.model.moe.experts = 8;
        p.model.moe.top_k = 2;
        p.model.moe.ffn_hidden = 14336;
        FieldErrors errors;
        Layout l = parseLayout("dp=16,tp=4,pp=2,sp=on,ep=8,etp=2", errors);
        QVERIFY2(errors.empty(), qPrintable(dump(errors)));
        QCOMPARE(l.ep, 8);
        QCOMPARE(l.expertTensorParallel(), 2);
        QCOMPARE(l.expertDataParallel(), 4 * 16 / (8 * 2));
        QVERIFY2(validate(l, p.model, p.cluster, p.training).empty(),
                 qPrintable(dump(validate(l, p.model, p.cluster, p.training))));
        QVERIFY(QString::fromStdString(toString(l)).endsWith(",ep=8,etp=2"));
        FieldErrors again;
        QVERIFY(parseLayout(toString(l), again) == l && again.empty());
        std::optional<Layout> fromJson = layoutFromJson(toJson(l), "layout", again);
        QVERIFY(fromJson && *fromJson == l);
        // Without ep/etp the printed form and the JSON are as before.
        const Layout plain = parseLayout("dp=128", errors);
        QVERIFY(!QString::fromStdString(toString(plain)).contains("ep="));
        QVERIFY(!toJson(plain).contains("ep") && !toJson(plain).contains("etp"));
        QCOMPARE(plain.expertTensorParallel(), 1);
        QCOMPARE(plain.expertDataParallel(), 128);

        auto refused = [&](const char* text, const char* path, const char* fragment) {
            FieldErrors e;
            const Layout bad = parseLayout(text, e);
            const FieldErrors rules = e.empty() ? validate(bad, p.model, p.cluster, p.training) : e;
            return hasError(rules, path, fragment) ? QString() : dump(rules);
        };
        QCOMPARE(refused("dp=16,tp=8,sp=on,ep=16", "layout.ep", "ep 16 does not divide the 8 routed experts"), QString());
        QCOMPARE(refused("dp=32,tp=4,sp=on,etp=3", "layout.ep", "ep x etp = 1 x 3 = 3 does not divide"), QString());
        QCOMPARE(refused("dp=32,tp=4,ep=2", "layout.sp", "trained with sequence parallelism"), QString());
        QCOMPARE(refused("dp=32,tp=4,sp=on,ep=0", "layout.ep", "0 is out of range"), QString());
        QCOMPARE(refused("dp=32,tp=4,sp=on,etp=-1", "layout.etp", "out of range [0 (as tp)"), QString());
        p.model.moe.ffn_hidden = 1000;
        QCOMPARE(refused("dp=16,tp=8,sp=on,etp=16", "layout.etp", "etp 16 does not divide the routed experts' ffn_hidden 1000"),
                 QString());
    }

    // Megatron-LM's account_for_embedding/loss_in_pipeline_split (transformer_block.py @ d98e8a64
    // get_num_layers_to_build): 94 layers + the embedding + the loss = 96 over pp 8 x v 4 chunks of
    // 3, the first chunk of stage 0 and the last of stage 7 with 2 (Qwen3-235B-A22B's recipe).
    void pipelineSplitCountingEnds()
    {
        Problem p = llama70bOnTrn1(4);  // 128 devices
        p.model.layers = 94;
        FieldErrors errors;
        const Layout l = parseLayout("dp=8,tp=2,pp=8,sp=on,schedule=interleaved,v=4,"
                                     "account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on",
                                     errors);
        QVERIFY2(errors.empty(), qPrintable(dump(errors)));
        QVERIFY(l.account_for_embedding_in_pipeline_split && l.account_for_loss_in_pipeline_split && l.unevenPipeline());
        QVERIFY2(validate(l, p.model, p.cluster, p.training).empty(),
                 qPrintable(dump(validate(l, p.model, p.cluster, p.training))));
        QCOMPARE(l.stageLayers(94, 0), 11);
        QCOMPARE(l.stageLayers(94, 1), 12);
        QCOMPARE(l.stageLayers(94, 6), 12);
        QCOMPARE(l.stageLayers(94, 7), 11);
        int total = 0;
        for (int stage = 0; stage < 8; ++stage)
            total += l.stageLayers(94, stage);
        QCOMPARE(total, 94);
        QCOMPARE(l.stageFirstLayer(94, 1), 11);
        QCOMPARE(l.stageFirstLayer(94, 7), 11 + 6 * 12);
        QCOMPARE(l.chunkLayers(94, 0, 0), 2);
        QCOMPARE(l.chunkLayers(94, 0, 1), 3);
        QCOMPARE(l.chunkLayers(94, 0, 3), 3);
        QCOMPARE(l.chunkLayers(94, 4, 0), 3);
        QCOMPARE(l.chunkLayers(94, 7, 2), 3);
        QCOMPARE(l.chunkLayers(94, 7, 3), 2);
        QCOMPARE(l.fullChunkLayers(94, 0), 3);
        // Printed and written only when set, read back the same.
        QVERIFY(QString::fromStdString(toString(l))
                    .endsWith(",account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on"));
        FieldErrors again;
        QVERIFY(parseLayout(toString(l), again) == l && again.empty());
        const QJsonObject json = toJson(l);
        QVERIFY(json.value("account_for_embedding_in_pipeline_split").toBool() &&
                json.value("account_for_loss_in_pipeline_split").toBool());
        std::optional<Layout> fromJson = layoutFromJson(json, "layout", again);
        QVERIFY(fromJson && *fromJson == l);
        const Layout plain = parseLayout("dp=128", errors);
        QVERIFY(!QString::fromStdString(toString(plain)).contains("account_for"));
        QVERIFY(!toJson(plain).contains("account_for_embedding_in_pipeline_split") &&
                !toJson(plain).contains("account_for_loss_in_pipeline_split"));
        // The loss alone: 94 + 1 = 95 over pp 5 of 19 (v = 1), the last stage 18.
        Problem five = p;
        five.cluster.nodes = 5;  // 160 devices
        const Layout loss = parseLayout("dp=16,tp=2,pp=5,sp=on,account_for_loss_in_pipeline_split=on", errors);
        QVERIFY2(validate(loss, five.model, five.cluster, five.training).empty(),
                 qPrintable(dump(validate(loss, five.model, five.cluster, five.training))));
        QCOMPARE(loss.stageLayers(94, 0), 19);
        QCOMPARE(loss.stageLayers(94, 4), 18);
        QCOMPARE(loss.stageFirstLayer(94, 4), 4 * 19);

        auto refused = [&](const char* text, const char* path, const char* fragment) {
            FieldErrors e;
            const Layout bad = parseLayout(text, e);
            const FieldErrors rules = e.empty() ? validate(bad, p.model, p.cluster, p.training) : e;
            return hasError(rules, path, fragment) ? QString() : dump(rules);
        };
        QCOMPARE(refused("dp=8,tp=2,pp=8,sp=on,account_for_embedding_in_pipeline_split=on,first_stage_layers=11",
                         "layout.account_for_embedding_in_pipeline_split", "cannot be set at the same time"),
                 QString());
        QCOMPARE(refused("dp=8,tp=2,pp=8,sp=on,account_for_embedding_in_pipeline_split=on",
                         "layout.account_for_embedding_in_pipeline_split", "= 95 are not divisible by pp = 8"),
                 QString());
        QCOMPARE(refused("dp=8,tp=2,pp=8,sp=on,schedule=interleaved,v=8,account_for_embedding_in_pipeline_split=on,"
                         "account_for_loss_in_pipeline_split=on",
                         "layout.account_for_embedding_in_pipeline_split", "the 12 layers on each pipeline rank"),
                 QString());
        QCOMPARE(refused("dp=8,tp=2,pp=8,sp=on,account_for_loss_in_pipeline_split=maybe",
                         "layout.account_for_loss_in_pipeline_split", "unknown value \"maybe\""),
                 QString());
        p.model.layers = 6;  // 8 counted over 8 stages: the first and the last would hold none
        QCOMPARE(refused("dp=8,tp=2,pp=8,sp=on,account_for_embedding_in_pipeline_split=on,"
                         "account_for_loss_in_pipeline_split=on",
                         "layout.account_for_embedding_in_pipeline_split", "would hold no transformer layer"),
                 QString());
    }

    void everyProblemReported()
    {
        // Several rules broken at once are all reported.
        const Problem p = llama70bOnTrn1(4);
        FieldErrors errors;
        const Layout l = parseLayout("dp=3,tp=3,pp=3,mb=5", errors);
        const FieldErrors rules = validate(l, p.model, p.cluster, p.training);
        QVERIFY(hasError(rules, "layout.dp", "27"));
        QVERIFY(hasError(rules, "layout.tp", "heads 64"));
        QVERIFY(hasError(rules, "layout.pp", "80 layers"));
        QVERIFY(hasError(rules, "layout.mb", "global batch 1024"));
    }

    void contextParallelDividesSequence()
    {
        Problem p = llama70bOnTrn1(4);
        p.training.seq_len = 4000;
        FieldErrors errors;
        const Layout l = parseLayout("dp=8,tp=8,cp=2,sp=on", errors);
        QVERIFY(validate(l, p.model, p.cluster, p.training).empty());  // 4000 = 2 x 2000, and 16 x 250
        const Layout bad = parseLayout("dp=2,tp=1,cp=64", errors);
        QVERIFY(hasError(validate(bad, p.model, p.cluster, p.training), "layout.cp",
                         "does not divide the sequence length 4000"));
        const Layout badSp = parseLayout("dp=1,tp=32,cp=4,sp=on", errors);
        QVERIFY(hasError(validate(badSp, p.model, p.cluster, p.training), "layout.sp", "tp x cp = 128"));
    }

    void trainiumDevicesShareChips()
    {
        const Problem p = llama70bOnTrn1(1);
        QCOMPARE(p.cluster.node.devicesPerNode(), 32);
        QCOMPARE(qint64(p.cluster.devices()), qint64(32));
        QCOMPARE(p.cluster.node.chip.hbmBytesPerDevice(), 16.0 * (1 << 30));
        FieldErrors errors;
        // TP=32 on one trn1.32xlarge is legal: the unit of parallelism is the NeuronCore.
        const Layout l = parseLayout("dp=1,tp=32", errors);
        QVERIFY(validate(l, p.model, p.cluster, p.training).empty());
    }

    void clusterNeedsPublishedNetwork()
    {
        Problem p = llama70bOnTrn1(2);
        p.cluster.node.inter_node_bytes_per_second = 0;  // not published
        QVERIFY(hasError(validate(p.cluster), "cluster.node.inter_node_bytes_per_second", "not published"));
        p.cluster.nodes = 1;
        QVERIFY(validate(p.cluster).empty());  // one node needs no network
    }

    void hardwareValidation()
    {
        ChipSpec c;
        c.name = "broken";
        c.hbm_bytes = -1;
        c.devices_per_chip = 0;
        const FieldErrors errors = validate(c);
        QVERIFY(hasError(errors, "chip.hbm_bytes", "out of range"));
        QVERIFY(hasError(errors, "chip.hbm_bytes_per_second", "required"));
        QVERIFY(hasError(errors, "chip.devices_per_chip", "out of range"));
        QVERIFY(hasError(errors, "chip.peak_flops", "at least one"));
    }

    void problemValidation()
    {
        Problem p = llama70bOnTrn1(1);
        p.model.positions = PositionKind::Learned;
        p.training.seq_len = 8192;
        p.training.global_batch = 0;
        p.training.precision = Precision::FP8Tensorwise;  // the test chip runs no FP8 recipe
        const FieldErrors errors = validate(p);
        QVERIFY2(hasError(errors, "training.seq_len", "learned position table of 4096"), qPrintable(dump(errors)));
        QVERIFY(hasError(errors, "training.global_batch", "out of range"));
        QVERIFY(hasError(errors, "training.precision", "fp8 is not a training recipe of"));
        // A chip that lists the recipe but publishes no peak for its data type.
        p.cluster.node.chip.low_precision_recipes = {"nvfp4"};
        p.training.precision = Precision::NVFP4;
        QVERIFY(hasError(validate(p), "training.precision", "nvfp4 peak is not published"));
    }

    // The catalog's FP8/FP4 facts (chips.json, sources in it): which chips run which recipe, B200's
    // FP4 peak; the chip document round-trips them and refuses a name that is not a recipe.
    void lowPrecisionRecipes()
    {
        const SpecLookup& specs = BuiltinSpecs::instance();
        auto chip = [&](const char* name) { return specs.chip(name); };
        const std::vector<std::string> hopper{"fp8", "fp8-delayed", "fp8-blockwise", "fp8-rowwise"};
        QCOMPARE(chip("h100-sxm").low_precision_recipes, hopper);
        QCOMPARE(chip("h200-sxm").low_precision_recipes, hopper);
        std::vector<std::string> blackwell = hopper;
        blackwell.insert(blackwell.end(), {"mxfp8", "nvfp4"});
        QCOMPARE(chip("b200-sxm").low_precision_recipes, blackwell);
        QCOMPARE(chip("b200-sxm").peak_flops_fp4, 9000e12);
        QCOMPARE(chip("b200-sxm").peakFlops(DataType::FP4), 9000e12);
        for (const char* none : {"a100-40gb", "a100-80gb", "trainium1", "trainium2", "tpu-v4", "tpu-v5e", "gaudi2"}) {
            QVERIFY2(chip(none).low_precision_recipes.empty(), none);
            QVERIFY2(chip(none).sources.count("low_precision_recipes") || std::string(none).rfind("tpu", 0) == 0 ||
                         std::string(none).rfind("a100", 0) == 0,
                     none);
        }
        QVERIFY(chip("b200-sxm").sources.count("peak_flops.fp4"));
        FieldErrors errors;
        const QJsonObject json = toJson(chip("b200-sxm"));
        const std::optional<ChipSpec> back = chipFromJson(json, "chip", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QCOMPARE(*back, chip("b200-sxm"));
        QJsonObject bad = json;
        bad.insert("low_precision_recipes", QJsonArray{"fp8", "bf16"});
        QVERIFY(!chipFromJson(bad, "chip", errors));
        QVERIFY(hasError(errors, "chip.low_precision_recipes", "entry 1 is not an FP8/FP4 recipe"));
        errors.clear();
        bad.insert("low_precision_recipes", QJsonArray{"mxfp8", "mxfp8"});
        QVERIFY(!chipFromJson(bad, "chip", errors));
        QVERIFY(hasError(errors, "chip.low_precision_recipes", "\"mxfp8\" is listed twice"));
    }
};

QTEST_GUILESS_MAIN(TstCoreSpecs)
#include "tst_core_specs.moc"
