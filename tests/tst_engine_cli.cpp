// shardscope-cli train end to end: the real executable with a private catalog.
// Bad arguments exit 2 naming the option; a run prints per-step lines and the
// summary; --json is a shardscope.measurement/1 document; running out of the
// emulated device's memory exits 1 with the device, category and bytes.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#ifndef SHARDSCOPE_CLI_PATH
#error "SHARDSCOPE_CLI_PATH must name the shardscope-cli executable"
#endif

namespace {

struct Run {
    int exitCode = -1;
    QByteArray out, err;
    QByteArray describe() const { return "exit " + QByteArray::number(exitCode) + "\nstdout:\n" + out.left(3000) + "\nstderr:\n" + err; }
};

const QStringList kSmall{"--layers", "1", "--hidden", "16", "--heads", "2", "--vocab", "12", "--seq", "8",
                         "--batch", "4", "--steps", "5", "--threads", "1"};

} // namespace

class TstEngineCli : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

    Run cli(const QStringList& args)
    {
        QProcess p;
        p.start(QStringLiteral(SHARDSCOPE_CLI_PATH), QStringList{"--db", dir_.filePath("catalog.sqlite"), "train"} + args);
        Run r;
        if (!p.waitForFinished(120000))
            return r;
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = p.readAllStandardOutput();
        r.err = p.readAllStandardError();
        return r;
    }

    static QStringList with(QStringList args, const QString& option, const QString& value)
    {
        const qsizetype i = args.indexOf(option);
        if (i >= 0)
            args[i + 1] = value;
        else
            args << option << value;
        return args;
    }

private slots:
    void badArgumentsNameTheField_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("field");
        QTest::newRow("heads do not divide hidden") << with(kSmall, "--heads", "5") << "--heads";
        QTest::newRow("zero hidden") << with(kSmall, "--hidden", "0") << "--hidden";
        QTest::newRow("zero batch") << with(kSmall, "--batch", "0") << "--batch";
        QTest::newRow("zero steps") << with(kSmall, "--steps", "0") << "--steps";
        QTest::newRow("missing layers") << QStringList(kSmall.mid(2)) << "--layers";
        QTest::newRow("missing data file") << with(kSmall, "--data", dir_.filePath("nope.txt")) << "--data";
        QTest::newRow("bytes need 256 tokens") << with(with(kSmall, "--data", QStringLiteral(SHARDSCOPE_CLI_PATH)), "--vocab", "12") << "--vocab";
        QTest::newRow("unknown precision") << with(kSmall, "--precision", "fp16") << "--precision";
        QTest::newRow("unknown recompute") << with(kSmall, "--recompute", "some") << "--recompute";
        QTest::newRow("scale above 1") << with(kSmall, "--device", "trainium1:2") << "--device";
        QTest::newRow("unknown chip") << with(kSmall, "--device", "nosuchchip") << "nosuchchip";
        QTest::newRow("not a number") << with(kSmall, "--seq", "eight") << "--seq";
        QTest::newRow("unknown layout key") << with(kSmall, "--layout", "dp=2,xp=2") << "layout.xp";
        QTest::newRow("tp does not divide heads") << with(kSmall, "--layout", "tp=4") << "layout.tp";
        QTest::newRow("devices disagree with the layout") << with(with(kSmall, "--layout", "dp=2,tp=2"), "--devices", "2")
                                                          << "--devices";
        QTest::newRow("devices not filled by tp") << with(with(kSmall, "--layout", "tp=2"), "--devices", "3") << "layout.dp";
        QTest::newRow("tp does not divide kv heads")
            << with(with(with(kSmall, "--kv-heads", "1"), "--devices", "2"), "--layout", "tp=2") << "kv_heads 1";  // the layout's rule: the model's field
        QTest::newRow("unknown mlp") << with(kSmall, "--mlp", "swish") << "--mlp";
        QTest::newRow("odd head size with rope") << with(with(kSmall, "--positions", "rotary"), "--head-dim", "7")
                                                 << "--head-dim";
        QTest::newRow("unknown node type") << with(with(kSmall, "--devices", "2"), "--node-type", "nosuchnode") << "nosuchnode";
        QTest::newRow("token types without --encoder") << with(kSmall, "--token-types", "2") << "--token-types";
        QTest::newRow("top-k above the experts") << with(with(kSmall, "--experts", "2"), "--top-k", "3") << "--top-k";
        QTest::newRow("top-k without experts") << with(kSmall, "--top-k", "1") << "--experts";
        QTest::newRow("ep does not divide the experts")
            << with(with(with(kSmall, "--experts", "3"), "--devices", "2"), "--layout", "dp=2,ep=2") << "layout.ep";
        QTest::newRow("ep on a dense model") << with(with(kSmall, "--devices", "2"), "--layout", "dp=2,ep=2") << "layout.ep";
        QTest::newRow("negative capacity factor") << with(with(kSmall, "--experts", "4"), "--capacity-factor", "-1")
                                       << "--capacity-factor";
        QTest::newRow("unknown router") << with(with(kSmall, "--experts", "4"), "--router", "topk") << "--router";
        // Multi-token prediction: its weight needs depths; learned positions and cp are not executed.
        QTest::newRow("mtp loss scale without depths") << with(kSmall, "--mtp-loss-scale", "0.3") << "--mtp-layers";
        QTest::newRow("mtp with learned positions") << with(kSmall, "--mtp-layers", "1") << "--positions";
        QTest::newRow("mtp under cp")
            << with(with(with(with(kSmall, "--mtp-layers", "1"), "--positions", "rotary"), "--devices", "2"), "--layout",
                    "cp=2")
            << "layout.cp";
        QTest::newRow("masked LM on bytes needs a [MASK] id")
            << with(with(QStringList(kSmall) << "--encoder", "--data", QStringLiteral(SHARDSCOPE_CLI_PATH)), "--vocab", "256")
            << "[MASK]";
    }
    void badArgumentsNameTheField()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, field);
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 2, r.describe());
        QVERIFY2(r.err.contains(field.toUtf8()), r.describe());
    }

    void trainsAndReports()
    {
        const Run r = cli(with(kSmall, "--recompute", "full"));
        QVERIFY2(r.exitCode == 0, r.describe());
        QVERIFY2(r.out.contains("device: host, measured"), r.describe());
        QVERIFY2(r.out.contains("step 1/5  loss ") && r.out.contains("step 5/5  loss "), r.describe());
        QVERIFY2(r.out.contains("peak memory: weights") && r.out.contains("workspace"), r.describe());
        QVERIFY2(r.out.contains("FLOPs per step:") && r.out.contains("achieved"), r.describe());
        QVERIFY2(r.out.contains("source entropy"), r.describe());
    }

    // Llama's blocks, tensor-parallel over 2 devices, in bf16 mixed precision: trained as itself.
    void llamaBlocksTrainOnACluster()
    {
        const QStringList args{"--layers", "2", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "48",
                               "--mlp", "swiglu", "--norm", "rmsnorm", "--positions", "rotary", "--rope-base",
                               "500000", "--no-bias", "--untied", "--vocab", "16", "--seq", "8", "--batch", "4",
                               "--steps", "3", "--devices", "2", "--layout", "tp=2,sp=on", "--precision", "bf16-mixed",
                               "--json"};
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonObject model = o["model"].toObject();
        QCOMPARE(model["blocks"].toString(),
                 QString("RMSNorm, swiglu MLP, RoPE base 500000, GQA 4/2 x 8, untied head, no biases"));
        // P = 2 V C (untied) + 2 layers x (2 C + C (32 + 2*16) + 32 C + C 96 + 48 C) + C
        const double C = 32, V = 16;
        QCOMPARE(model["parameters"].toDouble(), 2 * V * C + 2 * (2 * C + C * 64 + 32 * C + C * 96 + 48 * C) + C);
        const QJsonArray devices = o["devices"].toArray();
        QCOMPARE(devices.size(), 2);
        // bf16 weights: each tp rank holds 2 bytes per local parameter, and the tp collectives move bf16.
        for (const QJsonValue& v : devices) {
            const QJsonObject d = v.toObject();
            QVERIFY(d["memory_peak_bytes"].toObject()["weights"].toDouble() < 2.0 * model["parameters"].toDouble());
            QVERIFY(d["comm_bytes"].toObject()["all_gather"].toDouble() > 0);
        }
        QCOMPARE(o["losses"].toArray().size(), 3);
    }

    // Issue 14's blocks from the command line: Qwen2's q/k/v biases, Qwen3's QK-norm and Mistral's
    // sliding window on Llama's, tensor-parallel over 2 devices: trained as described.
    void catalogBlocksTrainOnACluster()
    {
        const QStringList args{"--layers", "2", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "48",
                               "--mlp", "swiglu", "--norm", "rmsnorm", "--positions", "rotary", "--bias", "qkv",
                               "--qk-norm", "--sliding-window", "3", "--untied", "--vocab", "16", "--seq", "8",
                               "--batch", "4", "--steps", "3", "--devices", "2", "--layout", "tp=2,sp=on", "--json"};
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject model = QJsonDocument::fromJson(r.out).object()["model"].toObject();
        QCOMPARE(model["blocks"].toString(), QString("RMSNorm, swiglu MLP, RoPE base 10000, GQA 4/2 x 8, untied head, "
                                                     "biases on q, k and v only, QK-norm, sliding window 3"));
        QCOMPARE(model["qkv_bias"].toBool(), true);
        QCOMPARE(model["qk_norm"].toBool(), true);
        QCOMPARE(model["sliding_window"].toInt(), 3);
        // The Llama count above plus, per layer, the q/k/v biases (32 + 2 x 16) and QK-norm's 2 x 8.
        const double C = 32, V = 16;
        QCOMPARE(model["parameters"].toDouble(),
                 2 * V * C + 2 * (2 * C + C * 64 + 32 * C + C * 96 + 48 * C + 64 + 2 * 8) + C);
        // --no-bias and --bias qkv contradict each other: refused by name.
        const Run bad = cli({"--layers", "2", "--hidden", "32", "--heads", "4", "--vocab", "16", "--seq", "8",
                             "--batch", "4", "--steps", "1", "--no-bias", "--bias", "qkv"});
        QVERIFY2(bad.exitCode != 0 && bad.err.contains("--no-bias"), bad.describe());
    }

    // T5's blocks (encoder-decoder, relative position bias, cross-attention), tensor-parallel over 2
    // devices with sequence parallelism: trained as itself, and its parameters core's count.
    void t5BlocksTrainOnACluster()
    {
        const QStringList args{"--layers", "2", "--decoder-layers", "2", "--hidden", "32", "--heads", "4",
                               "--mlp", "relu", "--norm", "rmsnorm", "--positions", "relative", "--relative-buckets",
                               "8", "--no-bias", "--vocab", "16", "--seq", "8", "--batch", "4", "--steps", "3",
                               "--devices", "2", "--layout", "tp=2,sp=on", "--json"};
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject model = QJsonDocument::fromJson(r.out).object()["model"].toObject();
        QCOMPARE(model["family"].toString(), QString("encoder-decoder"));
        QVERIFY2(model["blocks"].toString().startsWith("T5 style encoder-decoder (2 encoder + 2 decoder layers"),
                 qPrintable(model["blocks"].toString()));
        // V C + 2 tables of 4 x 8 + 2 x (2 C + 4 C^2 + 8 C^2) + 2 x (3 C + 8 C^2 + 8 C^2) + 2 C (final norms)
        const double C = 32, V = 16;
        QCOMPARE(model["parameters"].toDouble(),
                 V * C + 2 * 32 + 2 * (2 * C + 12 * C * C) + 2 * (3 * C + 16 * C * C) + 2 * C);
        // Relative buckets without the decoder: refused by name.
        const Run bad = cli({"--layers", "2", "--hidden", "32", "--heads", "4", "--positions", "relative", "--vocab",
                             "16", "--seq", "8", "--batch", "4", "--steps", "1"});
        QVERIFY2(bad.exitCode != 0 && bad.err.contains("positions"), bad.describe());
    }

    // BERT's blocks and objective on a pipeline of tensor-parallel stages: trained as itself.
    void encoderTrainsOnACluster()
    {
        const QStringList args{"--layers", "2", "--hidden", "32", "--heads", "4", "--encoder", "--vocab", "24",
                               "--seq", "16", "--batch", "4", "--steps", "3", "--devices", "4", "--layout",
                               "tp=2,pp=2,sp=on,mb=2", "--json"};
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonObject model = o["model"].toObject();
        QCOMPARE(model["blocks"].toString(),
                 QString("LayerNorm, gelu MLP, learned positions, MHA 4 heads x 8, tied head, biases, bidirectional, "
                         "post-norm layers, 2 token types, embedding norm, masked-LM head, pooler + next-sentence head"));
        // P = BertModel (V C + T C + 2 C + 2 C, 2 layers of 12 C^2 + 13 C, pooler C^2 + C) + the heads
        // (transform C^2 + C, its norm 2 C, output bias V, next-sentence 2 C + 2).
        const double C = 32, V = 24, T = 16;
        const double bertModel = V * C + T * C + 2 * C + 2 * C + 2 * (12 * C * C + 13 * C) + C * C + C;
        QCOMPARE(model["parameters"].toDouble(), bertModel + C * C + C + 2 * C + V + 2 * C + 2);
        QCOMPARE(o["devices"].toArray().size(), 4);
        QCOMPARE(o["losses"].toArray().size(), 3);
        const Run text = cli(args.mid(0, args.size() - 1));
        QVERIFY2(text.exitCode == 0, text.describe());
        QVERIFY2(text.out.contains("masked LM: cross-entropy on 2 of 16 positions a sequence, + next-sentence loss"),
                 text.describe());
    }

    // Issue 16's contract: train ... --experts E --top-k K [--shared-experts S], here with the
    // experts on 4 ep ranks: the model is core's count, every token's K copies are routed and
    // counted, and each device's all-to-all bytes are the copies it dispatches and combines.
    void moeTrainsWithExpertParallelism()
    {
        const QStringList args{"--layers", "2", "--hidden", "32", "--heads", "4", "--mlp", "swiglu", "--norm",
                               "rmsnorm", "--positions", "rotary", "--experts", "4", "--top-k", "2",
                               "--shared-experts", "1", "--shared-ffn", "16", "--expert-ffn", "24", "--aux-loss-coeff",
                               "0.01", "--vocab", "16", "--seq", "8", "--batch", "8", "--steps", "3", "--devices", "4",
                               "--layout", "dp=4,ep=4", "--json"};
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonObject model = o["model"].toObject();
        QVERIFY2(model["blocks"].toString().endsWith("MoE 4 experts x 24 top-2 (softmax-norm router, 1 shared x 16, "
                                                     "aux loss 0.01, dropless)"),
                 qPrintable(model["blocks"].toString()));
        // P = V C (tied) + 2 layers x (2 norms C + qkv and projection 4 C^2 + router C E + E experts 3 C 24
        //     + the shared expert 3 C 16) + the final norm C
        const double C = 32, V = 16, E = 4;
        QCOMPARE(model["parameters"].toDouble(), V * C + 2 * (2 * C + 4 * C * C + C * E + E * 3 * C * 24 + 3 * C * 16) + C);
        QCOMPARE(model["moe"].toObject()["experts"].toInt(), 4);
        QCOMPARE(o["layout"].toObject()["ep"].toInt(), 4);
        // 3 steps x 8 sequences x 8 tokens x 2 copies x 2 MoE layers.
        double copies = 0;
        for (const QJsonValue& v : o["moe"].toObject()["tokens_per_expert"].toArray())
            copies += v.toDouble();
        QCOMPARE(copies, 3.0 * 8 * 8 * 2 * 2);
        QVERIFY(o["moe"].toObject()["max_over_mean"].toDouble() >= 1.0);
        // Per device and step: 2 micro-batches of 8 tokens, 2 layers, 4 x N K C x 4 bytes each and
        // the copies' router weights, N K fp32 out and their gradients back.
        for (const QJsonValue& v : o["devices"].toArray())
            QCOMPARE(v.toObject()["comm_bytes"].toObject()["all_to_all"].toDouble(),
                     3.0 * 2 * 2 * (4 * C + 2) * 8 * 2 * 4);
        const Run text = cli(args.mid(0, args.size() - 1));
        QVERIFY2(text.exitCode == 0 && text.out.contains("experts' load: token copies per expert"), text.describe());
    }

    // Issue 16: train ... --mtp-layers D [--mtp-loss-scale X] (DeepSeek-V3's multi-token prediction) on a
    // cluster with tp, sp and pp: the model is core's count with the depth's modules, and the measurement
    // reports the MTP loss apart from the main one, every step, in the JSON and the text.
    void mtpTrainsAndReportsItsLoss()
    {
        const QStringList args{"--layers", "2", "--hidden", "32", "--heads", "4", "--ffn", "48", "--mlp", "swiglu",
                               "--norm", "rmsnorm", "--positions", "rotary", "--no-bias", "--untied", "--mtp-layers",
                               "1", "--mtp-loss-scale", "0.3", "--vocab", "16", "--seq", "8", "--batch", "8", "--steps",
                               "20", "--lr", "0.01", "--devices", "4", "--layout", "tp=2,pp=2,sp=on,mb=2", "--json"};
        const Run r = cli(args);
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonObject model = o["model"].toObject();
        QCOMPARE(model["mtp"].toObject()["layers"].toInt(), 1);
        QCOMPARE(model["mtp"].toObject()["loss_scale"].toDouble(), 0.3);
        // P = 2 V C (untied) + 2 layers x (2 norms C + qkv and projection 4 C^2 + SwiGLU 3 C F) + the final
        //     norm C + the depth: its layer, enorm, hnorm and its final norm (3 C) and eh_proj (2 C^2)
        const double C = 32, V = 16, F = 48, layer = 2 * C + 4 * C * C + 3 * C * F;
        QCOMPARE(model["parameters"].toDouble(), 2 * V * C + 2 * layer + C + layer + 3 * C + 2 * C * C);
        const QJsonArray losses = o["losses"].toArray(), mtp = o["mtp_losses"].toArray();
        QCOMPARE(mtp.size(), losses.size());
        QCOMPARE(mtp.size(), 20);
        // Near ln V at the start (a cross-entropy over 16 tokens), lower after 20 steps, and not the main loss.
        QVERIFY(std::fabs(mtp[0].toDouble() - std::log(V)) < 0.3);
        QVERIFY(mtp[19].toDouble() < mtp[0].toDouble() - 0.05);
        QVERIFY(mtp[0].toDouble() != losses[0].toDouble());
        const Run text = cli(args.mid(0, args.size() - 1));
        QVERIFY2(text.exitCode == 0 && text.out.contains("mtp loss"), text.describe());
    }

    void jsonMeasurement()
    {
        const Run r = cli(with(with(kSmall, "--device", "trainium1:0.001"), "--precision", "bf16-sr") << "--json");
        QVERIFY2(r.exitCode == 0, r.describe());
        QJsonParseError error;
        const QJsonObject o = QJsonDocument::fromJson(r.out, &error).object();
        QVERIFY2(error.error == QJsonParseError::NoError, r.describe());
        QCOMPARE(o["schema"].toString(), QString("shardscope.measurement/1"));
        // 1 layer, C = 16, V = 12, T = 8: 12*16 + 8*16 + (12*256 + 13*16) + 2*16
        QCOMPARE(o["model"].toObject()["parameters"].toDouble(), 3632.0);
        QCOMPARE(o["layout"].toObject()["precision"].toString(), QString("bf16-sr"));
        QCOMPARE(o["losses"].toArray().size(), 5);
        const QJsonObject d = o["devices"].toArray()[0].toObject();
        QCOMPARE(d["memory_peak_bytes"].toObject()["weights"].toDouble(), 2.0 * 3632);  // bf16
        QCOMPARE(d["memory_peak_bytes"].toObject()["optimizer"].toDouble(), 8.0 * 3632);
        QCOMPARE(d["profile"].toObject()["name"].toString(), QString("trainium1:0.001"));
        // One NeuronCore (half a 32 GiB chip) scaled by 0.001.
        QVERIFY(std::fabs(d["memory_capacity_bytes"].toDouble() - 16.0 * (1 << 30) * 0.001) < 1);
        QVERIFY(d["device_step_time_s"].toDouble() > 0);
        QVERIFY(d.contains("comm_bytes") && d.contains("flops") && d.contains("wall_step_time_s"));
        QVERIFY(o["wall_seconds"].toDouble() > 0);
    }

    void clusterRunReportsEveryDevice()
    {
        // dp=2 x tp=2 with ZeRO-1 on 4 devices, 2 per node: the document has one entry per
        // device with its mesh position, and the per-device figures the planner predicts.
        const Run r = cli(with(with(with(kSmall, "--devices", "4"), "--layout", "tp=2,zero=1,sp=on,recompute=full"),
                               "--node-devices", "2") << "--json");
        QVERIFY2(r.exitCode == 0, r.describe());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonObject layout = o["layout"].toObject();
        QCOMPARE(layout["dp"].toInt(), 2);
        QCOMPARE(layout["tp"].toInt(), 2);
        QCOMPARE(layout["zero"].toInt(), 1);
        QCOMPARE(layout["sp"].toBool(), true);
        QCOMPARE(layout["recompute"].toString(), QString("full"));
        QCOMPARE(layout["links"].toObject()["node_devices"].toInt(), 2);
        const QJsonArray devices = o["devices"].toArray();
        QCOMPARE(devices.size(), 4);
        for (int i = 0; i < 4; ++i) {
            const QJsonObject d = devices[i].toObject();
            QCOMPARE(d["id"].toInt(), i);
            QCOMPARE(d["mesh"].toObject()["tp"].toInt(), i % 2);
            QCOMPARE(d["mesh"].toObject()["dp"].toInt(), i / 2);
            QCOMPARE(d["mesh"].toObject()["node"].toInt(), i / 2);
            const QJsonObject sent = d["comm_bytes"].toObject();
            QVERIFY2(sent["all_reduce"].toDouble() > 0 && sent["reduce_scatter"].toDouble() > 0 &&
                         sent["all_gather"].toDouble() > 0, r.describe());
            QCOMPARE(sent["send_recv"].toDouble(), 0.0);
            QCOMPARE(d["comm_bytes_received"].toObject()["reduce_scatter"].toDouble(), sent["reduce_scatter"].toDouble());
            // ZeRO-1 over dp = 2: optimizer states are half of 8 bytes per local parameter,
            // the weights 4 bytes per local parameter: equal.
            const QJsonObject resident = d["memory_resident_bytes"].toObject();
            QCOMPARE(resident["optimizer"].toDouble(), resident["weights"].toDouble());
            QCOMPARE(d["device_step_times_s"].toArray().size(), 5);
        }
        QCOMPARE(o["losses"].toArray().size(), 5);
        const Run text = cli(with(with(with(kSmall, "--devices", "2"), "--layout", "pp=2"), "--layers", "2"));
        QVERIFY2(text.exitCode == 0, text.describe());
        QVERIFY2(text.out.contains("cluster: 2 devices") && text.out.contains("device 1 (tp 0, dp 0, pp 1, node 0)") &&
                     text.out.contains("send_recv"), text.describe());
    }

    void outOfMemoryExitsOneAndSaysWhy()
    {
        // 16 GiB x 1e-6 = 17 kB per device: the weights fit (14.5 kB), the gradients do not.
        const Run r = cli(with(kSmall, "--device", "trainium1:0.000001"));
        QVERIFY2(r.exitCode == 1, r.describe());
        QVERIFY2(r.err.contains("out of memory") && r.err.contains("gradients") && r.err.contains("requested") &&
                     r.err.contains("free") && r.err.contains("device 0 (trainium1:1e-06)"),
                 r.describe());
        QVERIFY2(r.out.contains("peak memory: weights 14.2 KiB"), r.describe());
        const Run j = cli(with(kSmall, "--device", "trainium1:0.000001") << "--json");
        QCOMPARE(j.exitCode, 1);
        const QJsonObject o = QJsonDocument::fromJson(j.out).object();
        QVERIFY2(o["error"].toObject()["message"].toString().contains("gradients"), j.describe());
        QCOMPARE(o["error"].toObject()["device"].toInt(), 0);
        QCOMPARE(o["error"].toObject()["kind"].toString(), QString("out_of_memory"));
    }

    // A million-token vocabulary on a 17 kB device: refused from the weights' size before the
    // synthetic chain is built (which takes a minute at this size), in text and JSON.
    void weightsThatCannotFitAreRefusedBeforeTheData()
    {
        const QStringList big = with(with(kSmall, "--vocab", "1000001"), "--device", "trainium1:0.000001");
        const Run r = cli(big);
        QVERIFY2(r.exitCode == 1, r.describe());
        QVERIFY2(r.err.contains("out of memory before the run") && r.err.contains("16,003,456 parameters"),
                 r.describe());
        QVERIFY2(!r.out.contains("data: "), r.describe());  // the source was never built
        const Run j = cli(QStringList(big) << "--json");
        QCOMPARE(j.exitCode, 1);
        QCOMPARE(QJsonDocument::fromJson(j.out).object()["error"].toObject()["kind"].toString(), QString("out_of_memory"));
    }

    // A diverging run (the issue's `--lr 10`) exits 1 and says so; --divergence-factor 0 lets it finish.
    void divergenceExitsOneAndSaysSo()
    {
        const Run r = cli(with(with(kSmall, "--lr", "10"), "--steps", "8"));
        QVERIFY2(r.exitCode == 1, r.describe());
        QVERIFY2(r.err.contains("diverged") && r.err.contains("lower learning rate"), r.describe());
        const Run j = cli(with(with(kSmall, "--lr", "10"), "--steps", "8") << "--json");
        QCOMPARE(j.exitCode, 1);
        QCOMPARE(QJsonDocument::fromJson(j.out).object()["error"].toObject()["kind"].toString(), QString("diverged"));
        const Run on = cli(with(with(with(kSmall, "--lr", "10"), "--steps", "8"), "--divergence-factor", "0"));
        QVERIFY2(on.exitCode == 0 && on.out.contains("step 8/8"), on.describe());
    }
};

QTEST_GUILESS_MAIN(TstEngineCli)
#include "tst_engine_cli.moc"
