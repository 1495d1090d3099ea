// Framework exporters (planner/FrameworkExport.h): golden files for at least two layouts
// per framework, compared byte for byte, the figures in them checked against the
// models' published shapes (Llama 2 paper Table 1 / Hugging Face config.json, GPT-3
// paper Table 2.1), a table of layouts each framework refuses with the feature named,
// and shardscope-cli export end to end.
//
// Golden files live in tests/golden/export. After an intended change of an exporter,
// regenerate them with
//     SHARDSCOPE_UPDATE_GOLDEN=1 ctest --test-dir build -R tst_planner_export
// and review the diff.
#include "BuiltinSpecs.h"
#include "FrameworkExport.h"
#include "HfConfigImport.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#ifndef SHARDSCOPE_GOLDEN_DIR
#error "SHARDSCOPE_GOLDEN_DIR must name tests/golden/export"
#endif
#ifndef SHARDSCOPE_HF_DATA_DIR
#error "SHARDSCOPE_HF_DATA_DIR must name tests/data/hf"
#endif
#ifndef SHARDSCOPE_CLI_PATH
#error "SHARDSCOPE_CLI_PATH must name the shardscope-cli executable"
#endif

using namespace shardscope;

Q_DECLARE_METATYPE(shardscope::ExportFormat)

namespace {

struct Case {
    const char* model;
    const char* node;
    int nodes;
    int global_batch;
    int seq;
    Precision precision;
    MainGrads main_grads = MainGrads::Default;
};

// The first line that differs, for a readable failure.
QByteArray firstDifference(const QByteArray& expected, const QByteArray& actual)
{
    const QList<QByteArray> e = expected.split('\n');
    const QList<QByteArray> a = actual.split('\n');
    for (qsizetype i = 0; i < std::max(e.size(), a.size()); ++i) {
        const QByteArray el = i < e.size() ? e[i] : QByteArray("<end of file>");
        const QByteArray al = i < a.size() ? a[i] : QByteArray("<end of output>");
        if (el != al)
            return "line " + QByteArray::number(i + 1) + "\n  expected: " + el + "\n  actual:   " + al;
    }
    return "identical";
}

struct CliRun {
    int exitCode = -1;
    QByteArray out;
    QByteArray err;
};

} // namespace

class TstPlannerExport : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<QTemporaryDir> dir_;
    const SpecLookup* catalog_ = &BuiltinSpecs::instance();  // the built-in specs, no database

    // "hf:Qwen3-8B": the model imported from tests/data/hf/Qwen3-8B/config.json (the fields a
    // Llama lacks: qkv bias, QK-norm, sliding window, MoE); otherwise a built-in spec.
    static ModelSpec model(const char* name)
    {
        const QString text = QString::fromUtf8(name);
        if (!text.startsWith(QLatin1String("hf:")))
            return BuiltinSpecs::instance().model(name);
        const QString path = QStringLiteral(SHARDSCOPE_HF_DATA_DIR "/") + text.mid(3) + "/config.json";
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly))
            qFatal("cannot read %s", qPrintable(path));
        FieldErrors errors;
        const auto m = modelFromHfConfig(QJsonDocument::fromJson(f.readAll()).object(),
                                         {text.mid(3).toLower().toStdString(), {}, path.toStdString()}, errors);
        if (!m)
            qFatal("%s: %s", qPrintable(path), joinErrors(errors).c_str());
        return *m;
    }

    Problem problem(const Case& c) const
    {
        Problem p;
        p.model = model(c.model);
        p.cluster.node = catalog_->node(c.node);
        p.cluster.nodes = c.nodes;
        p.training.global_batch = c.global_batch;
        p.training.seq_len = c.seq;
        p.training.precision = c.precision;
        p.training.main_grads = c.main_grads;
        return p;
    }

    static Layout layout(const char* text, const Problem& p)
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

    // DeepSpeed's cases are priced with its own bf16 default, bf16 gradients (DeepSpeedExport.cpp).
    ExportResult exported(ExportFormat format, Case c, const char* layoutText) const
    {
        if (format == ExportFormat::DeepSpeed && c.main_grads == MainGrads::Default)
            c.main_grads = MainGrads::BF16;
        const Problem p = problem(c);
        return exportSettings(format, p, layout(layoutText, p));
    }

    CliRun cli(const QStringList& args) const
    {
        QProcess process;
        process.setWorkingDirectory(dir_->path());
        process.start(QStringLiteral(SHARDSCOPE_CLI_PATH),
                      QStringList{QStringLiteral("--db"), dir_->filePath(QStringLiteral("cli.sqlite"))} + args);
        CliRun r;
        if (!process.waitForStarted(-1) || !process.waitForFinished(120'000))
            return r;
        r.exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
        r.out = process.readAllStandardOutput();
        r.err = process.readAllStandardError();
        return r;
    }

    QString planFile() const { return dir_->filePath(QStringLiteral("plan.json")); }

private slots:
    void initTestCase()
    {
        dir_ = std::make_unique<QTemporaryDir>();
        QVERIFY(dir_->isValid());
    }

    void golden_data()
    {
        QTest::addColumn<ExportFormat>("format");
        QTest::addColumn<QString>("file");
        QTest::addColumn<QByteArray>("model");
        QTest::addColumn<QByteArray>("node");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("seq");
        QTest::addColumn<int>("precision");
        QTest::addColumn<QByteArray>("layout");
        const int bf16 = int(Precision::BF16Mixed), fp16 = int(Precision::FP16Mixed), fp32 = int(Precision::FP32),
                  fp8 = int(Precision::FP8Tensorwise), rowwise = int(Precision::FP8Rowwise), mxfp8 = int(Precision::MXFP8),
                  nvfp4 = int(Precision::NVFP4), blockwise = int(Precision::FP8Blockwise);

        QTest::newRow("megatron llama-2-70b p5 tp8 pp4 interleaved selective zero1")
            << ExportFormat::Megatron << "megatron-llama-2-70b-p5-interleaved.txt" << QByteArray("llama-2-70b")
            << QByteArray("p5.48xlarge") << 64 << 1024 << 4096 << bf16
            << QByteArray("tp=8,pp=4,sp=on,zero=1,mb=1,schedule=interleaved,v=5,recompute=selective");
        QTest::newRow("megatron gpt3-175b a100 tp8 pp16 full fp16")
            << ExportFormat::Megatron << "megatron-gpt3-175b-a100-full.txt" << QByteArray("gpt3-175b")
            << QByteArray("dgx-a100-80gb") << 128 << 1536 << 2048 << fp16
            << QByteArray("tp=8,pp=16,mb=1,recompute=full");
        QTest::newRow("megatron mixtral-8x7b p5 tp4 sp")
            << ExportFormat::Megatron << "megatron-mixtral-8x7b-p5.txt" << QByteArray("mixtral-8x7b")
            << QByteArray("p5.48xlarge") << 8 << 512 << 4096 << bf16
            << QByteArray("tp=4,sp=on,zero=1,mb=1,recompute=selective");
        // Imported from Hugging Face configs: the fields a Llama lacks, each with its own option.
        QTest::newRow("megatron qwen2-7b p5 tp4 qkv bias")
            << ExportFormat::Megatron << "megatron-qwen2-7b-p5-qkv-bias.txt" << QByteArray("hf:Qwen2-7B")
            << QByteArray("p5.48xlarge") << 4 << 256 << 4096 << bf16
            << QByteArray("tp=4,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron qwen3-8b p5 tp4 qk-norm")
            << ExportFormat::Megatron << "megatron-qwen3-8b-p5-qk-norm.txt" << QByteArray("hf:Qwen3-8B")
            << QByteArray("p5.48xlarge") << 4 << 256 << 4096 << bf16
            << QByteArray("tp=4,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron mistral-7b p5 tp4 sliding window")
            << ExportFormat::Megatron << "megatron-mistral-7b-p5-sliding-window.txt" << QByteArray("hf:Mistral-7B-v0.1")
            << QByteArray("p5.48xlarge") << 4 << 256 << 8192 << bf16
            << QByteArray("tp=4,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron mixtral-8x7b hf p5 tp4 moe")
            << ExportFormat::Megatron << "megatron-mixtral-8x7b-hf-p5-moe.txt" << QByteArray("hf:Mixtral-8x7B-v0.1")
            << QByteArray("p5.48xlarge") << 8 << 512 << 4096 << bf16
            << QByteArray("tp=4,sp=on,zero=1,mb=1,recompute=selective");
        // DeepSeek-V3: MLA (--multi-latent-attention and its ranks), YaRN with mscale, the shared
        // expert, the correction bias, group-limited routing and the routed scaling.
        QTest::newRow("megatron deepseek-v3 hf p5 tp8 mla moe")
            << ExportFormat::Megatron << "megatron-deepseek-v3-p5-mla.txt" << QByteArray("hf:DeepSeek-V3")
            << QByteArray("p5.48xlarge") << 32 << 1024 << 4096 << bf16
            << QByteArray("tp=8,sp=on,zero=1,mb=1,recompute=full");
        QTest::newRow("megatron-bridge deepseek-v3 p5 tp8 mla moe")
            << ExportFormat::MegatronBridge << "megatron-bridge-deepseek-v3-p5-mla.py" << QByteArray("deepseek-v3")
            << QByteArray("p5.48xlarge") << 32 << 1024 << 4096 << bf16
            << QByteArray("tp=8,sp=on,zero=1,mb=1,recompute=full");
        QTest::newRow("megatron-bridge qwen3-30b-a3b p5 tp4 moe qk-norm")
            << ExportFormat::MegatronBridge << "megatron-bridge-qwen3-30b-a3b-p5-moe.py" << QByteArray("hf:Qwen3-30B-A3B")
            << QByteArray("p5.48xlarge") << 8 << 512 << 4096 << bf16
            << QByteArray("tp=4,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("deepspeed gpt3-13b p4d zero3 mics8 full")
            << ExportFormat::DeepSpeed << "deepspeed-gpt3-13b-zero3-mics.json" << QByteArray("gpt3-13b")
            << QByteArray("p4d.24xlarge") << 16 << 1024 << 2048 << bf16
            << QByteArray("zero=3,zero_group=8,mb=2,recompute=full");
        QTest::newRow("deepspeed llama-2-7b p5 autotp2 zero2 offload")
            << ExportFormat::DeepSpeed << "deepspeed-llama-2-7b-autotp-offload.json" << QByteArray("llama-2-7b")
            << QByteArray("p5.48xlarge") << 4 << 256 << 4096 << bf16 << QByteArray("tp=2,zero=2,mb=1,offload=optimizer");
        QTest::newRow("deepspeed gpt3-6.7b p4d pp4 zero1 full fp16")
            << ExportFormat::DeepSpeed << "deepspeed-gpt3-6.7b-pipeline.json" << QByteArray("gpt3-6.7b")
            << QByteArray("p4d.24xlarge") << 4 << 512 << 2048 << fp16 << QByteArray("pp=4,zero=1,mb=1,recompute=full");
        QTest::newRow("neuronx llama-2-70b trn1 tp8 pp4 interleaved selective")
            << ExportFormat::NeuronX << "neuronx-llama-2-70b-trn1-pipeline.txt" << QByteArray("llama-2-70b")
            << QByteArray("trn1.32xlarge") << 32 << 1024 << 4096 << bf16
            << QByteArray("tp=8,pp=4,sp=on,zero=1,mb=1,schedule=interleaved,v=5,recompute=selective");
        QTest::newRow("neuronx llama-2-7b trn1 tp8 zero1 full")
            << ExportFormat::NeuronX << "neuronx-llama-2-7b-trn1-tp-zero1.txt" << QByteArray("llama-2-7b")
            << QByteArray("trn1.32xlarge") << 4 << 1024 << 4096 << bf16
            << QByteArray("tp=8,sp=on,zero=1,mb=1,recompute=full");
        QTest::newRow("neuronx llama-3-70b trn1 tp32 kv replication")
            << ExportFormat::NeuronX << "neuronx-llama-3-70b-trn1-kv-replicator.txt" << QByteArray("llama-3-70b")
            << QByteArray("trn1.32xlarge") << 32 << 1024 << 4096 << bf16
            << QByteArray("tp=32,pp=8,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("fsdp llama-2-7b p4d full shard full recompute")
            << ExportFormat::Fsdp << "fsdp-llama-2-7b-full-shard.txt" << QByteArray("llama-2-7b")
            << QByteArray("p4d.24xlarge") << 8 << 512 << 4096 << bf16 << QByteArray("zero=3,mb=2,recompute=full");
        QTest::newRow("fsdp gpt3-1.3b p5 hsdp zero2 selective fp16")
            << ExportFormat::Fsdp << "fsdp-gpt3-1.3b-hsdp-zero2.txt" << QByteArray("gpt3-1.3b")
            << QByteArray("p5.48xlarge") << 4 << 512 << 2048 << fp16
            << QByteArray("zero=2,zero_group=8,mb=4,recompute=selective");
        QTest::newRow("fsdp gpt2-small p4d no shard fp32")
            << ExportFormat::Fsdp << "fsdp-gpt2-small-no-shard.txt" << QByteArray("gpt2-small")
            << QByteArray("p4d.24xlarge") << 1 << 64 << 1024 << fp32 << QByteArray("zero=0,mb=8");
        QTest::newRow("fsdp llama-3-70b p5 tp8 sp pp4 interleaved cp2 zero3")
            << ExportFormat::Fsdp << "fsdp-llama-3-70b-tp-pp-cp.txt" << QByteArray("llama-3-70b")
            << QByteArray("p5.48xlarge") << 32 << 512 << 8192 << bf16
            << QByteArray("tp=8,sp=on,pp=4,schedule=interleaved,v=2,cp=2,zero=3,mb=1,recompute=full");
        QTest::newRow("torchtitan llama-3-8b p5 tp2 cp2 fsdp full")
            << ExportFormat::Torchtitan << "torchtitan-llama-3-8b-tp-cp.py" << QByteArray("llama-3-8b")
            << QByteArray("p5.48xlarge") << 4 << 256 << 8192 << bf16
            << QByteArray("tp=2,sp=on,cp=2,zero=3,mb=1,recompute=full");
        QTest::newRow("torchtitan llama-3-70b p5 tp8 pp4 interleaved zero2 fp8-rowwise")
            << ExportFormat::Torchtitan << "torchtitan-llama-3-70b-pipeline-fp8.py" << QByteArray("llama-3-70b")
            << QByteArray("p5.48xlarge") << 32 << 1024 << 8192 << rowwise
            << QByteArray("tp=8,sp=on,pp=4,schedule=interleaved,v=2,zero=2,zero_group=4,mb=1,recompute=full");
        // FP8/FP4 recipes: per-tensor current scaling with the bf16 first and last layers and the
        // fp8 weights as the model's (distributed optimizer), blockwise, MXFP8 and NVFP4 on B200.
        QTest::newRow("megatron llama-3-8b p5 tp2 zero1 fp8")
            << ExportFormat::Megatron << "megatron-llama-3-8b-p5-fp8.txt" << QByteArray("llama-3-8b")
            << QByteArray("p5.48xlarge") << 2 << 256 << 8192 << fp8 << QByteArray("tp=2,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron llama-3-8b p5 tp2 fp8-blockwise")
            << ExportFormat::Megatron << "megatron-llama-3-8b-p5-fp8-blockwise.txt" << QByteArray("llama-3-8b")
            << QByteArray("p5.48xlarge") << 2 << 256 << 8192 << blockwise
            << QByteArray("tp=2,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron llama-3-70b b200 tp4 pp2 mxfp8")
            << ExportFormat::Megatron << "megatron-llama-3-70b-b200-mxfp8.txt" << QByteArray("llama-3-70b")
            << QByteArray("p6-b200.48xlarge") << 4 << 256 << 8192 << mxfp8
            << QByteArray("tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron llama-3-70b b200 tp4 pp2 nvfp4")
            << ExportFormat::Megatron << "megatron-llama-3-70b-b200-nvfp4.txt" << QByteArray("llama-3-70b")
            << QByteArray("p6-b200.48xlarge") << 4 << 256 << 8192 << nvfp4
            << QByteArray("tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron-bridge llama-3-70b b200 tp4 pp2 mxfp8")
            << ExportFormat::MegatronBridge << "megatron-bridge-llama-3-70b-b200-mxfp8.py" << QByteArray("llama-3-70b")
            << QByteArray("p6-b200.48xlarge") << 4 << 256 << 8192 << mxfp8
            << QByteArray("tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective");
        QTest::newRow("megatron-bridge llama-2-70b p5 tp8 pp4 interleaved selective zero1")
            << ExportFormat::MegatronBridge << "megatron-bridge-llama-2-70b-p5-interleaved.py"
            << QByteArray("llama-2-70b") << QByteArray("p5.48xlarge") << 64 << 1024 << 4096 << bf16
            << QByteArray("tp=8,pp=4,sp=on,zero=1,mb=1,schedule=interleaved,v=5,recompute=selective");
        QTest::newRow("megatron-bridge gpt3-13b p5 megatron-fsdp hsdp full fp16")
            << ExportFormat::MegatronBridge << "megatron-bridge-gpt3-13b-fsdp.py" << QByteArray("gpt3-13b")
            << QByteArray("p5.48xlarge") << 8 << 512 << 2048 << fp16
            << QByteArray("tp=2,zero=3,zero_group=8,mb=2,recompute=full");
        QTest::newRow("maxtext llama-3-70b v5p one slice fsdp tp4 full")
            << ExportFormat::MaxText << "maxtext-llama-3-70b-v5p.yml" << QByteArray("llama-3-70b")
            << QByteArray("tpu-v5p-host") << 64 << 1024 << 8192 << bf16 << QByteArray("tp=4,zero=3,mb=1,recompute=full");
        QTest::newRow("maxtext llama-2-7b v5e two slices hsdp selective")
            << ExportFormat::MaxText << "maxtext-llama-2-7b-v5e-two-slices.yml" << QByteArray("llama-2-7b")
            << QByteArray("tpu-v5e-host") << 64 << 1024 << 4096 << bf16
            << QByteArray("zero=3,zero_group=256,mb=1,recompute=selective");
        QTest::newRow("nxd-training llama-3-70b trn1 tp32 pp8 cp2 selective")
            << ExportFormat::NxdTraining << "nxd-training-llama-3-70b-trn1-cp.yaml" << QByteArray("llama-3-70b")
            << QByteArray("trn1.32xlarge") << 16 << 1024 << 8192 << bf16
            << QByteArray("tp=32,pp=8,cp=2,sp=on,zero=1,mb=1,recompute=selective");
        QTest::newRow("nxd-training llama-2-7b trn1 tp8 zero1 full")
            << ExportFormat::NxdTraining << "nxd-training-llama-2-7b-trn1-tp-zero1.yaml" << QByteArray("llama-2-7b")
            << QByteArray("trn1.32xlarge") << 4 << 1024 << 4096 << bf16
            << QByteArray("tp=8,sp=on,zero=1,mb=1,recompute=full");
    }

    void golden()
    {
        QFETCH(ExportFormat, format);
        QFETCH(QString, file);
        QFETCH(QByteArray, model);
        QFETCH(QByteArray, node);
        QFETCH(int, nodes);
        QFETCH(int, batch);
        QFETCH(int, seq);
        QFETCH(int, precision);
        QFETCH(QByteArray, layout);
        const Case c{model.constData(), node.constData(), nodes, batch, seq, Precision(precision)};
        const ExportResult r = exported(format, c, layout.constData());
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QByteArray actual = QByteArray::fromStdString(r.text);

        const QString path = QDir(QStringLiteral(SHARDSCOPE_GOLDEN_DIR)).filePath(file);
        if (qEnvironmentVariableIntValue("SHARDSCOPE_UPDATE_GOLDEN") == 1) {
            QFile out(path);
            QVERIFY2(out.open(QIODevice::WriteOnly | QIODevice::Truncate), qPrintable(path));
            QCOMPARE(out.write(actual), actual.size());
            qInfo("updated %s", qPrintable(path));
            return;
        }
        QFile in(path);
        QVERIFY2(in.open(QIODevice::ReadOnly), qPrintable(path + " is missing (SHARDSCOPE_UPDATE_GOLDEN=1 writes it)"));
        const QByteArray expected = in.readAll();
        QVERIFY2(actual == expected, qPrintable(file + ": " + firstDifference(expected, actual)));
    }

    // main_grads as each framework writes it: fp32 (the default) nothing for Megatron-LM and
    // Megatron-Bridge, --grad-reduce-in-bf16 / grad_reduce_in_fp32 False for bf16; FSDP2's
    // reduce_dtype; DeepSpeed's grad_accum_dtype under ZeRO-1 only; MaxText's grad_dtype; refused by
    // name where a framework cannot run it (torchtitan's float32-only reduce, NxD's zero1 rule).
    void mainGradsExports()
    {
        const Case fp32{"llama-2-7b", "p4d.24xlarge", 2, 256, 4096, Precision::BF16Mixed};
        Case bf16 = fp32;
        bf16.main_grads = MainGrads::BF16;
        auto text = [&](ExportFormat format, const Case& c, const char* l) {
            const ExportResult r = exported(format, c, l);
            if (!r.ok())
                qWarning("%s", r.refusals.front().c_str());
            return r.ok() ? QString::fromStdString(r.text) : QString();
        };
        auto refusals = [&](ExportFormat format, const Case& c, const char* l) {
            QString all;
            for (const std::string& refusal : exported(format, c, l).refusals)
                all += QString::fromStdString(refusal) + "\n";
            return all;
        };
        const char* z1 = "dp=8,tp=2,zero=1,mb=1";
        const char* z3 = "dp=16,zero=3,mb=1";
        QVERIFY(!text(ExportFormat::Megatron, fp32, z1).contains("grad-reduce-in-bf16"));
        QVERIFY(!text(ExportFormat::Megatron, fp32, z1).isEmpty());
        QVERIFY(text(ExportFormat::Megatron, bf16, z1).contains("--grad-reduce-in-bf16\n"));
        const QString bridge = text(ExportFormat::MegatronBridge, bf16, z1);
        QVERIFY(bridge.contains("cfg.mixed_precision = get_mixed_precision_config(\"bf16_mixed\")\n"));
        QVERIFY(bridge.contains("cfg.mixed_precision.grad_reduce_in_fp32 = False\n"));
        QVERIFY(bridge.contains("cfg.ddp.grad_reduce_in_fp32 = False\n"));
        QVERIFY(!text(ExportFormat::MegatronBridge, fp32, z1).contains("grad_reduce_in_fp32"));
        QVERIFY(text(ExportFormat::Fsdp, fp32, z3).contains("reduce_dtype=torch.float32)"));
        QVERIFY(text(ExportFormat::Fsdp, bf16, z3).contains("reduce_dtype=torch.bfloat16)"));
        Case titan = fp32;  // (torchtitan builds its registry's llama3 flavors)
        titan.model = "llama-3-8b";
        QVERIFY(text(ExportFormat::Torchtitan, titan, z3).contains("mixed_precision_reduce = \"float32\""));
        titan.main_grads = MainGrads::BF16;
        QVERIFY(refusals(ExportFormat::Torchtitan, titan, z3).contains("torchtitan: bf16 gradients (main_grads bf16)"));
        Case dsFp32 = fp32;  // explicitly: exported() prices DeepSpeed's cases with its bf16 default
        dsFp32.main_grads = MainGrads::FP32;
        const QJsonObject ds =
            QJsonDocument::fromJson(text(ExportFormat::DeepSpeed, dsFp32, "dp=16,zero=1,mb=1").toUtf8()).object();
        QCOMPARE(ds["data_types"].toObject()["grad_accum_dtype"].toString(), QString("fp32"));
        QCOMPARE(ds["communication_data_type"].toString(), QString("fp32"));
        QVERIFY(!text(ExportFormat::DeepSpeed, bf16, z3).contains("grad_accum_dtype"));
        QVERIFY(refusals(ExportFormat::DeepSpeed, dsFp32, z3)
                    .contains("deepspeed: fp32 gradients (main_grads fp32) with ZeRO-3"));
        QVERIFY(!text(ExportFormat::MaxText, fp32, z3).contains("grad_dtype"));
        QVERIFY(text(ExportFormat::MaxText, bf16, z3).contains("grad_dtype: \"bfloat16\"\n"));
        // Trainium: NxD Training's mixed_precision accumulates fp32 gradients under zero1 only.
        const Case trn{"llama-2-7b", "trn1.32xlarge", 4, 1024, 4096, Precision::BF16Mixed};
        Case trnBf16 = trn;
        trnBf16.main_grads = MainGrads::BF16;
        const char* trnZ1 = "tp=8,sp=on,zero=1,mb=1,recompute=full";
        const char* trnZ0 = "tp=8,sp=on,mb=1,recompute=full";
        QVERIFY(!text(ExportFormat::NxdTraining, trn, trnZ1).isEmpty());
        QVERIFY(!text(ExportFormat::NxdTraining, trnBf16, trnZ0).isEmpty());
        QVERIFY(refusals(ExportFormat::NxdTraining, trn, trnZ0).contains("fp32 gradients without ZeRO-1"));
        QVERIFY(refusals(ExportFormat::NxdTraining, trnBf16, trnZ1)
                    .contains("bf16 gradients (main_grads bf16) with ZeRO-1"));
        QVERIFY(refusals(ExportFormat::NeuronX, trnBf16, trnZ1).contains("neuronx: bf16 gradients (main_grads bf16)"));
    }

    // The figures inside the exports, against the published shapes and the batch arithmetic.
    void megatronLlama70bFigures()
    {
        const Case c{"llama-2-70b", "p5.48xlarge", 64, 1024, 4096, Precision::BF16Mixed};
        const ExportResult r =
            exported(ExportFormat::Megatron, c, "tp=8,pp=4,sp=on,zero=1,mb=1,schedule=interleaved,v=5,recompute=selective");
        QVERIFY(r.ok());
        const QString t = QString::fromStdString(r.text);
        // Llama 2 70B: 80 layers, d_model 8192, 64 heads, 8 KV heads (GQA), FFN 28672, RoPE, RMSNorm, SwiGLU.
        for (const char* expected :
             {"--num-layers 80\n", "--hidden-size 8192\n", "--num-attention-heads 64\n", "--group-query-attention\n",
              "--num-query-groups 8\n", "--ffn-hidden-size 28672\n", "--position-embedding-type rope\n",
              "--normalization RMSNorm\n", "--swiglu\n", "--disable-bias-linear\n",
              "--untie-embeddings-and-output-weights\n",
              // 80 layers / (pp 4 x v 5) = 4 layers per model chunk.
              "--num-layers-per-virtual-pipeline-stage 4\n", "--tensor-model-parallel-size 8\n",
              "--pipeline-model-parallel-size 4\n", "--sequence-parallel\n", "--use-distributed-optimizer\n",
              "--recompute-granularity selective\n", "--micro-batch-size 1\n", "--global-batch-size 1024\n", "--bf16\n",
              "export CUDA_DEVICE_MAX_CONNECTIONS=1", "--nnodes 64 --nproc_per_node 8"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // Selective recomputation takes no --recompute-method in Megatron.
        QVERIFY(!t.contains(QLatin1String("--recompute-method")));
        QVERIFY(t.contains(QLatin1String("= dp 16.")));  // 512 / (8 x 4 x 1)
        // The gradients' reduction overlapped with the backward, as the cost model prices it; the
        // parameter gather and tp overlap only when the layout asks for them.
        QVERIFY(t.contains(QLatin1String("--overlap-grad-reduce\n")));
        QVERIFY(!t.contains(QLatin1String("--overlap-param-gather")) && !t.contains(QLatin1String("--tp-comm-overlap")));
    }

    // What validate_args and TransformerConfig of Megatron-LM d98e8a64 need: CUDA_DEVICE_MAX_CONNECTIONS
    // whenever tp > 1 or cp > 1 before Blackwell, dropout 0 passed when the plan has none (the
    // defaults are 0.1), the model's RoPE base, the attention kernel by --attention-backend.
    void megatronCurrentArguments()
    {
        Problem p = problem(Case{"llama-3-8b", "p5.48xlarge", 2, 64, 8192, Precision::BF16Mixed});
        p.training.dropout = false;
        p.training.flash_attention = true;
        const ExportResult r = exportSettings(ExportFormat::Megatron, p, layout("tp=2,cp=2,zero=1", p));
        QVERIFY(r.ok());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected : {"export CUDA_DEVICE_MAX_CONNECTIONS=1", "--rotary-base 500000\n",
                                     "--hidden-dropout 0\n", "--attention-dropout 0\n", "--attention-backend auto\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        QVERIFY(!t.contains(QLatin1String("--use-flash-attn")));  // parsed, but read nowhere
        // Blackwell lifts the CUDA_DEVICE_MAX_CONNECTIONS requirement; dropout left at its default.
        Problem b = problem(Case{"llama-3-8b", "p6-b200.48xlarge", 2, 64, 8192, Precision::BF16Mixed});
        const ExportResult rb = exportSettings(ExportFormat::Megatron, b, layout("tp=2,cp=2,zero=1", b));
        QVERIFY(rb.ok());
        QVERIFY(!QString::fromStdString(rb.text).contains(QLatin1String("CUDA_DEVICE_MAX_CONNECTIONS")));
        QVERIFY(!QString::fromStdString(rb.text).contains(QLatin1String("--hidden-dropout")));
        QVERIFY(QString::fromStdString(rb.text).contains(QLatin1String("--attention-backend unfused\n")));
        // tp = cp = 1: no requirement either.
        const ExportResult r1 = exportSettings(ExportFormat::Megatron, p, layout("tp=1,cp=1,pp=2,zero=1", p));
        QVERIFY(r1.ok() && r1.text.find("CUDA_DEVICE_MAX_CONNECTIONS") == std::string::npos);
    }

    // What Megatron-LM refused at 307dcf37 and runs at d98e8a64, each with its own flags.
    void megatronRunsWhatItNowCan_data()
    {
        QTest::addColumn<QByteArray>("model");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<QByteArray>("layoutText");
        QTest::addColumn<QStringList>("expected");
        QTest::addColumn<QStringList>("absent");
        QTest::newRow("ZeRO-3: Megatron-FSDP") << QByteArray("llama-2-7b") << 4 << QByteArray("zero=3")
            << QStringList{"--use-megatron-fsdp\n", "--data-parallel-sharding-strategy optim_grads_params\n",
                           "--ckpt-format fsdp_dtensor\n", "--use-distributed-optimizer\n",
                           "unset CUDA_DEVICE_MAX_CONNECTIONS"}
            << QStringList{"export CUDA_DEVICE_MAX_CONNECTIONS=1"};
        QTest::newRow("ZeRO-2 with tp: Megatron-FSDP, no CUDA_DEVICE_MAX_CONNECTIONS=1")
            << QByteArray("llama-2-7b") << 4 << QByteArray("tp=2,zero=2")
            << QStringList{"--data-parallel-sharding-strategy optim_grads\n", "unset CUDA_DEVICE_MAX_CONNECTIONS"}
            << QStringList{"export CUDA_DEVICE_MAX_CONNECTIONS=1"};
        QTest::newRow("shard group < dp") << QByteArray("llama-2-7b") << 4 << QByteArray("zero=1,zero_group=8")
            << QStringList{"--use-distributed-optimizer\n", "--num-distributed-optimizer-instances 4\n"}
            << QStringList{"--use-megatron-fsdp"};
        QTest::newRow("optimizer offload") << QByteArray("llama-2-7b") << 4 << QByteArray("zero=1,offload=optimizer")
            << QStringList{"--optimizer-cpu-offload\n", "--use-precision-aware-optimizer\n"} << QStringList{};
        QTest::newRow("interleaved at pp 2") << QByteArray("llama-2-7b") << 4
            << QByteArray("pp=2,schedule=interleaved,v=2")
            << QStringList{"--num-layers-per-virtual-pipeline-stage 8\n"} << QStringList{};
        QTest::newRow("tp a multiple of the KV heads") << QByteArray("llama-2-70b") << 64 << QByteArray("tp=16")
            << QStringList{"--tensor-model-parallel-size 16\n", "--num-query-groups 8\n"} << QStringList{};
    }
    void megatronRunsWhatItNowCan()
    {
        QFETCH(QByteArray, model);
        QFETCH(int, nodes);
        QFETCH(QByteArray, layoutText);
        QFETCH(QStringList, expected);
        QFETCH(QStringList, absent);
        const Case c{model.constData(), "p5.48xlarge", nodes, 256, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::Megatron, c, layoutText.constData());
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const QString& e : expected)
            QVERIFY2(t.contains(e), qPrintable(e));
        for (const QString& e : absent)
            QVERIFY2(!t.contains(e), qPrintable(e));
    }

    // Megatron's overlap options export as its own flags (validate_args: --tp-comm-overlap needs
    // --sequence-parallel, --overlap-param-gather needs the distributed optimizer and
    // --overlap-grad-reduce); frameworks without them refuse them by name.
    void megatronOverlapFlags()
    {
        const Case c{"llama-2-70b", "p5.48xlarge", 64, 1024, 4096, Precision::BF16Mixed};
        const char* text = "tp=8,pp=4,sp=on,zero=1,mb=1,tp_comm_overlap=on,overlap_param_gather=on";
        const ExportResult r = exported(ExportFormat::Megatron, c, text);
        QVERIFY(r.ok());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected : {"--tp-comm-overlap\n", "--overlap-grad-reduce\n", "--overlap-param-gather\n",
                                     "--sequence-parallel\n", "--use-distributed-optimizer\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        const ExportResult d = exported(ExportFormat::DeepSpeed, c, text);
        QVERIFY(!d.ok());
        QString refusals;
        for (const std::string& line : d.refusals)
            refusals += QString::fromStdString(line) + QLatin1Char('\n');
        QVERIFY2(refusals.contains("tp_comm_overlap=on") && refusals.contains("overlap_param_gather=on"),
                 qPrintable(refusals));
    }

    // An explicit pipeline layout (Megatron-LM arguments.py @ d98e8a64 --pipeline-model-parallel-layout;
    // Megatron-Bridge's TransformerConfig field, deepseek_llm_pretrain.py @ c8101293): DeepSeek-V3 over
    // pp 8 x v 2 as the B200 recipe lays it out. Megatron takes v from the layout and allows no
    // virtual-stage argument beside it; every exporter without such a layout refuses it by name.
    void explicitPipelineLayout()
    {
        const Case c{"deepseek-v3", "p6-b200.48xlarge", 32, 4096, 4096, Precision::MXFP8, MainGrads::BF16};
        const char* text = "dp=32,tp=1,pp=8,zero=1,mb=1,recompute=selective,recompute_modules=mla_up_proj+mlp,ep=32,"
                           "moe_dispatcher=deepep,ep_comm_overlap=on,pipeline_layout=Et*4|(t*4|)*14tmL";
        const ExportResult r = exported(ExportFormat::Megatron, c, text);
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected : {"--pipeline-model-parallel-size 8\n", "--pipeline-model-parallel-layout 'Et*4|(t*4|)*14tmL'\n",
                                     "--num-layers 61\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        for (const char* absent : {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                                   "pipeline-num-layers", "--account-for"})
            QVERIFY2(!t.contains(QLatin1String(absent)), absent);
        const ExportResult bridge = exported(ExportFormat::MegatronBridge, c, text);
        QVERIFY2(bridge.ok(), bridge.refusals.empty() ? "" : bridge.refusals.front().c_str());
        const QString b = QString::fromStdString(bridge.text);
        QVERIFY(b.contains(QLatin1String("        pipeline_model_parallel_layout=\"Et*4|(t*4|)*14tmL\",\n")));
        QVERIFY(b.contains(QLatin1String("        virtual_pipeline_model_parallel_size=2,\n")));
        QVERIFY(!b.contains("num_layers_in_first_pipeline_stage"));
        // The others cannot place layers so: refused, the layout named.
        const Case llama{"llama-2-7b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed};
        const char* spelled = "tp=2,pp=4,mb=1,pipeline_layout=Et*7|t*9|t*9|t*7L";
        for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Fsdp, ExportFormat::MaxText}) {
            const ExportResult refused = exported(f, llama, spelled);
            QVERIFY(!refused.ok());
            QString all;
            for (const std::string& line : refused.refusals)
                all += QString::fromStdString(line) + QLatin1Char('\n');
            QVERIFY2(all.contains(QLatin1String("pipeline_layout=Et*7|t*9|t*9|t*7L")), qPrintable(all));
        }
        // torchtitan lightens the two end stages only: a layout that is such a split exports, one
        // whose middle stages differ does not.
        const Case llama3{"llama-3-8b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed};
        const ExportResult titanEnds = exported(ExportFormat::Torchtitan, llama3, "tp=2,pp=4,zero=3,mb=1,pipeline_layout=Et*7|t*9|t*9|t*7L");
        QVERIFY2(titanEnds.ok(), titanEnds.refusals.empty() ? "" : titanEnds.refusals.front().c_str());
        QVERIFY(QString::fromStdString(titanEnds.text).contains("pipeline_parallel_layers_per_stage=9,"));
        const ExportResult titanMiddle = exported(ExportFormat::Torchtitan, llama3, "tp=2,pp=4,zero=3,mb=1,pipeline_layout=Et*6|t*10|t*9|t*7L");
        QVERIFY(!titanMiddle.ok());
        QVERIFY2(QString::fromStdString(titanMiddle.refusals.front()).contains("pipeline_layout=Et*6|t*10|t*9|t*7L"),
                 titanMiddle.refusals.front().c_str());
        const ExportResult llamaMegatron = exported(ExportFormat::Megatron, llama, spelled);
        QVERIFY(llamaMegatron.ok());
        QVERIFY(QString::fromStdString(llamaMegatron.text).contains("--pipeline-model-parallel-layout 'Et*7|t*9|t*9|t*7L'\n"));
    }

    // Uneven pipeline splits as Megatron-LM names them (d98e8a64 arguments.py): the first and
    // last stage's layer counts; with interleaving, the virtual stages per rank (validate_args
    // asks for --num-virtual-stages-per-pipeline-rank when the split is uneven).
    void megatronUnevenPipeline()
    {
        const Case c{"llama-3-405b", "p5.48xlarge", 128, 2048, 8192, Precision::BF16Mixed};
        const ExportResult r =
            exported(ExportFormat::Megatron, c, "tp=8,pp=16,sp=on,zero=1,mb=1,first_stage_layers=7,last_stage_layers=7");
        QVERIFY(r.ok());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected : {"--pipeline-model-parallel-size 16\n", "--decoder-first-pipeline-num-layers 7\n",
                                     "--decoder-last-pipeline-num-layers 7\n", "--num-layers 126\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        const Case small{"llama-2-7b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed};
        const ExportResult v = exported(ExportFormat::Megatron, small,
                                        "tp=2,pp=4,mb=1,schedule=interleaved,v=2,first_stage_layers=6,last_stage_layers=6");
        QVERIFY(v.ok());
        const QString tv = QString::fromStdString(v.text);
        QVERIFY(tv.contains("--num-virtual-stages-per-pipeline-rank 2\n"));
        QVERIFY(!tv.contains("--num-layers-per-virtual-pipeline-stage"));
        // An even split says nothing about the ends.
        const ExportResult e = exported(ExportFormat::Megatron, small, "tp=2,pp=4,mb=1");
        QVERIFY(!QString::fromStdString(e.text).contains("pipeline-num-layers"));
    }

    // The embedding and the loss counted as layers (arguments.py @ d98e8a64:
    // --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split): Llama 3
    // 405B's 126 + 2 over 16 stages of 8, the ends with 7; with v = 2 the virtual stages per rank.
    // Megatron-Bridge sets TransformerConfig's fields of the same names on cfg.model; torchtitan
    // lightens its first and last virtual stage by one layer each, which is this split.
    void pipelineSplitCountingEnds()
    {
        const Case c{"llama-3-405b", "p5.48xlarge", 128, 2048, 8192, Precision::BF16Mixed};
        const char* ends = "tp=8,pp=16,sp=on,zero=1,mb=1,account_for_embedding_in_pipeline_split=on,"
                           "account_for_loss_in_pipeline_split=on";
        const ExportResult r = exported(ExportFormat::Megatron, c, ends);
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected : {"--pipeline-model-parallel-size 16\n", "--account-for-embedding-in-pipeline-split\n",
                                     "--account-for-loss-in-pipeline-split\n", "--num-layers 126\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        QVERIFY(!t.contains("pipeline-num-layers"));
        const ExportResult v = exported(ExportFormat::Megatron, c,
                                        "tp=8,pp=16,sp=on,zero=1,mb=1,schedule=interleaved,v=2,"
                                        "account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on");
        QVERIFY2(v.ok(), v.refusals.empty() ? "" : v.refusals.front().c_str());
        QVERIFY(QString::fromStdString(v.text).contains("--num-virtual-stages-per-pipeline-rank 2\n"));
        QVERIFY(!QString::fromStdString(v.text).contains("--num-layers-per-virtual-pipeline-stage"));
        // The loss alone: one flag.
        const Case small{"llama-2-7b", "p5.48xlarge", 3, 512, 2048, Precision::BF16Mixed};  // 33 over 3
        const ExportResult loss = exported(ExportFormat::Megatron, small, "tp=2,pp=3,mb=1,account_for_loss_in_pipeline_split=on");
        QVERIFY2(loss.ok(), loss.refusals.empty() ? "" : loss.refusals.front().c_str());
        QVERIFY(QString::fromStdString(loss.text).contains("--account-for-loss-in-pipeline-split\n"));
        QVERIFY(!QString::fromStdString(loss.text).contains("--account-for-embedding"));

        const ExportResult bridge = exported(ExportFormat::MegatronBridge, c, ends);
        QVERIFY2(bridge.ok(), bridge.refusals.empty() ? "" : bridge.refusals.front().c_str());
        const QString b = QString::fromStdString(bridge.text);
        QVERIFY(b.contains(QLatin1String("        account_for_embedding_in_pipeline_split=True,\n")));
        QVERIFY(b.contains(QLatin1String("        account_for_loss_in_pipeline_split=True,\n")));
        const ExportResult plain = exported(ExportFormat::MegatronBridge, c, "tp=8,pp=16,sp=on,zero=1,mb=1,"
                                                                             "first_stage_layers=7,last_stage_layers=7");
        QVERIFY(!QString::fromStdString(plain.text).contains("account_for"));
        QVERIFY(QString::fromStdString(plain.text).contains("        num_layers_in_first_pipeline_stage=7,\n"));
        QVERIFY(QString::fromStdString(plain.text).contains("        num_layers_in_last_pipeline_stage=7,\n"));
        QVERIFY(!b.contains("num_layers_in_first_pipeline_stage"));

        // torchtitan: layers per stage 4 (128 / 32 virtual stages), one less on the first and the last.
        const ExportResult titan = exported(ExportFormat::Torchtitan, c,
                                            "tp=8,sp=on,pp=16,schedule=interleaved,v=2,zero=3,mb=1,"
                                            "account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on");
        QVERIFY2(titan.ok(), titan.refusals.empty() ? "" : titan.refusals.front().c_str());
        const QString tt = QString::fromStdString(titan.text);
        for (const char* expected : {"pipeline_parallel_layers_per_stage=4,", "pipeline_parallel_first_stage_less_layers=1,",
                                     "pipeline_parallel_last_stage_less_layers=1,"})
            QVERIFY2(tt.contains(QLatin1String(expected)), expected);
    }

    // Full recomputation of some layers as Megatron-LM names it (TransformerConfig @ d98e8a64:
    // recompute_method uniform|block, recompute_num_layers); every layer: uniform 1.
    void megatronPartialRecomputation()
    {
        const Case c{"llama-2-7b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed};
        const QString block = QString::fromStdString(
            exported(ExportFormat::Megatron, c, "tp=2,pp=4,mb=1,recompute=full,recompute_method=block,recompute_layers=3")
                .text);
        QVERIFY(block.contains("--recompute-granularity full\n"));
        QVERIFY(block.contains("--recompute-method block\n"));
        QVERIFY(block.contains("--recompute-num-layers 3\n"));
        const QString all = QString::fromStdString(exported(ExportFormat::Megatron, c, "tp=2,pp=4,mb=1,recompute=full").text);
        QVERIFY(all.contains("--recompute-method uniform\n") && all.contains("--recompute-num-layers 1\n"));
        const ExportResult d =
            exported(ExportFormat::DeepSpeed, c, "pp=4,mb=1,recompute=full,recompute_method=uniform,recompute_layers=2");
        QVERIFY(!d.ok());
        QVERIFY2(d.refusals.front().find("recompute_method=uniform,recompute_layers=2") != std::string::npos,
                 d.refusals.front().c_str());
    }

    // Recomputed modules (TransformerConfig.recompute_modules, --recompute-modules with nargs "+")
    // and activation offload (--cpu-offloading-num-layers; cpu_offloading set by validate_args) as
    // Megatron-LM @ d98e8a64 takes them; the Bridge recipe sets the same fields on cfg.model.
    void megatronRecomputeModulesAndOffload()
    {
        const Case oss{"hf:gpt-oss-120b", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        const char* modules = "ep=8,etp=1,zero=1,mb=1,recompute=selective,recompute_modules=layernorm+moe_act";
        const QString m = QString::fromStdString(exported(ExportFormat::Megatron, oss, modules).text);
        QVERIFY2(m.contains("--recompute-granularity selective\n") && m.contains("--recompute-modules moe_act layernorm\n"),
                 qPrintable(m));
        QVERIFY(m.contains("--moe-grouped-gemm"));  // (moe_act needs it)
        const Case llama{"llama-2-7b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed};
        const QString o = QString::fromStdString(exported(ExportFormat::Megatron, llama, "tp=2,mb=1,offload_activations=6").text);
        QVERIFY2(o.contains("--cpu-offloading-num-layers 6\n") && !o.contains("--cpu-offloading\n"), qPrintable(o));
        QVERIFY(!o.contains("--recompute-granularity"));
        const ExportResult b = exported(ExportFormat::MegatronBridge, llama,
                                        "tp=2,mb=1,recompute=selective,recompute_modules=core_attn+mlp");
        QVERIFY2(b.ok(), b.refusals.empty() ? "" : b.refusals.front().c_str());
        QVERIFY2(QString::fromStdString(b.text).contains("recompute_modules=[\"core_attn\", \"mlp\"]"), b.text.c_str());
        const QString bo = QString::fromStdString(exported(ExportFormat::MegatronBridge, llama, "tp=2,mb=1,offload_activations=6").text);
        QVERIFY2(bo.contains("cpu_offloading=True") && bo.contains("cpu_offloading_num_layers=6") &&
                     bo.contains("cpu_offloading_weights=False"),
                 qPrintable(bo));
        // Selective recomputation alone stays Megatron's default (core_attn), no list written.
        const QString plain = QString::fromStdString(exported(ExportFormat::Megatron, llama, "tp=2,mb=1,recompute=selective").text);
        QVERIFY(plain.contains("--recompute-granularity selective\n") && !plain.contains("--recompute-modules"));
    }

    void deepspeedBatchArithmetic()
    {
        const Case c{"gpt3-13b", "p4d.24xlarge", 16, 1024, 2048, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::DeepSpeed, c, "zero=3,zero_group=8,mb=2,recompute=full");
        QVERIFY(r.ok());
        QVERIFY(!r.notes_in_text);
        QJsonParseError error;
        const QJsonObject ds = QJsonDocument::fromJson(QByteArray::fromStdString(r.text), &error).object();
        QCOMPARE(error.error, QJsonParseError::NoError);
        const int micro = ds["train_micro_batch_size_per_gpu"].toInt();
        const int accumulation = ds["gradient_accumulation_steps"].toInt();
        // train_batch_size = micro x accumulation x data-parallel ranks (128 GPUs, no model parallelism).
        QCOMPARE(ds["train_batch_size"].toInt(), 1024);
        QCOMPARE(micro, 2);
        QCOMPARE(micro * accumulation * 128, 1024);
        const QJsonObject zero = ds["zero_optimization"].toObject();
        QCOMPARE(zero["stage"].toInt(), 3);
        QCOMPARE(zero["mics_shard_size"].toInt(), 8);
        QVERIFY(ds["bf16"].toObject()["enabled"].toBool());
        QVERIFY(ds.contains("activation_checkpointing"));
        bool micsNote = false;
        for (const std::string& n : r.notes)
            micsNote = micsNote || n.find("16 groups") != std::string::npos;  // 128 ranks / 8
        QVERIFY(micsNote);

        // AutoTP: DeepSpeedConfig counts every rank (no mpu yet), so train_batch_size is left for
        // it to derive, and _batch_assertion holds: micro x accumulation x all ranks.
        const Case t{"llama-2-7b", "p5.48xlarge", 4, 256, 4096, Precision::BF16Mixed};
        const ExportResult a = exported(ExportFormat::DeepSpeed, t, "tp=2,zero=1,mb=1");
        QVERIFY(a.ok());
        const QJsonObject autotp = QJsonDocument::fromJson(QByteArray::fromStdString(a.text)).object();
        QVERIFY(!autotp.contains("train_batch_size"));
        QCOMPARE(autotp["tensor_parallel"].toObject()["autotp_size"].toInt(), 2);
        const int dp = 32 / 2;
        QCOMPARE(autotp["train_micro_batch_size_per_gpu"].toInt() * autotp["gradient_accumulation_steps"].toInt() * dp,
                 256);
    }

    void neuronxKvReplication()
    {
        // Llama 3 70B has 8 KV heads; tp 32 replicates each 4 times, as NxD's 70B script does.
        const Case c{"llama-3-70b", "trn1.32xlarge", 32, 1024, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::NeuronX, c, "tp=32,pp=8,sp=on,zero=1,mb=1,recompute=selective");
        QVERIFY(r.ok());
        const QString t = QString::fromStdString(r.text);
        QVERIFY(t.contains(QLatin1String("--kv_replicator 4\n")));
        QVERIFY(t.contains(QLatin1String("--qkv_linear 1\n")));
        // 1024 NeuronCores / (32 x 8) = dp 4: 256 sequences per replica, 256 micro-batches of 1.
        QVERIFY(t.contains(QLatin1String("--train_batch_size 256\n")));
        QVERIFY(t.contains(QLatin1String("--num_microbatches 256\n")));
        QVERIFY(t.contains(QLatin1String("--nproc_per_node 32")));
        QVERIFY(t.contains(QLatin1String("num_key_value_heads 8")));
    }

    // FSDP2: the (dp_replicate, dp_shard) mesh and whether blocks reshard after forward, per ZeRO
    // stage and shard group (fully_shard: a 2D mesh shards over the 2nd dim, replicates over the 1st).
    void fsdpStrategies_data()
    {
        QTest::addColumn<QByteArray>("layout");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QString>("reshard");
        QTest::newRow("zero 0: DDP") << QByteArray("zero=0") << "(1, 32, 1, 1, 1)" << "False";
        QTest::newRow("zero 2") << QByteArray("zero=2") << "(1, 1, 32, 1, 1)" << "False";
        QTest::newRow("zero 3") << QByteArray("zero=3") << "(1, 1, 32, 1, 1)" << "True";
        QTest::newRow("zero 3, group = dp") << QByteArray("zero=3,zero_group=32") << "(1, 1, 32, 1, 1)" << "True";
        QTest::newRow("zero 3, group 8 of 32") << QByteArray("zero=3,zero_group=8") << "(1, 4, 8, 1, 1)" << "True";
        QTest::newRow("zero 2, group 16 of 32") << QByteArray("zero=2,zero_group=16") << "(1, 2, 16, 1, 1)" << "False";
        // 32 GPUs = pp 2 x dp 4 x cp 2 x tp 2.
        QTest::newRow("zero 3 with tp, pp, cp") << QByteArray("tp=2,pp=2,cp=2,zero=3") << "(2, 1, 4, 2, 2)" << "True";
    }

    void fsdpStrategies()
    {
        QFETCH(QByteArray, layout);
        QFETCH(QString, mesh);
        QFETCH(QString, reshard);
        const Case c{"llama-2-7b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::Fsdp, c, layout.constData());
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        QVERIFY2(t.contains("        " + mesh + ",\n"), qPrintable(t));
        QVERIFY(t.contains("RESHARD_AFTER_FORWARD = " + reshard + "\n"));
        QVERIFY(t.contains(QLatin1String("fully_shard(block, mesh=dp_mesh")));
        QVERIFY(!t.contains(QLatin1String("FullyShardedDataParallel")));  // FSDP1, deprecated
        QCOMPARE(t.contains(QLatin1String("parallelize_module(block, mesh[\"tp\"]")), layout.contains("tp=2"));
        QCOMPARE(t.contains(QLatin1String("Schedule1F1B(stages[0]")), layout.contains("pp=2"));
        QCOMPARE(t.contains(QLatin1String("context_parallel(mesh[\"cp\"]")), layout.contains("cp=2"));
    }

    // torchtitan: the flavor chosen by shape, the degrees and the token budget, as trainer.py derives
    // gradient accumulation from them.
    void torchtitanFigures()
    {
        const Case c{"llama-3-70b", "p5.48xlarge", 32, 1024, 8192, Precision::BF16Mixed};
        const ExportResult r =
            exported(ExportFormat::Torchtitan, c, "tp=8,sp=on,pp=4,schedule=interleaved,v=2,zero=3,mb=1,recompute=full");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        // 256 GPUs / (tp 8 x pp 4) = dp 8; 1024 / (8 x 1) = 128 micro-batches; 80 / (4 x 2) = 10 layers per stage.
        for (const char* expected :
             {"model_registry(\"70B\")", "data_parallel_shard_degree=8,\n", "data_parallel_replicate_degree=1,\n",
              "tensor_parallel_degree=8,\n", "pipeline_parallel_schedule=\"Interleaved1F1B\",\n",
              "pipeline_parallel_layers_per_stage=10,\n", "pipeline_parallel_first_stage_less_layers=0,\n",
              "num_pp_microbatches=128,\n", "num_tokens_per_microbatch_per_dp_rank = 8192\n",
              "num_tokens_per_train_step = 8388608\n", "disable_cuda_graphs = True", "FullAC.Config()",
              "--nnodes 32 --nproc_per_node 8"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // trainer.py: accumulation = tokens per step / (micro-batch tokens x pp micro-batches x dp) = 1.
        QCOMPARE(8388608 / (8192 * 128 * 8), 1);
        // Llama 2 is not a torchtitan flavor.
        const ExportResult l2 = exported(ExportFormat::Torchtitan, {"llama-2-7b", "p5.48xlarge", 4, 256, 4096,
                                                                    Precision::BF16Mixed}, "zero=3,recompute=full");
        QVERIFY(!l2.ok());
        QVERIFY(QString::fromStdString(l2.refusals.front()).contains("the model llama-2-7b"));
    }

    // MaxText: ICI axes fill a slice, DCN axes multiply to the slices; the batch arithmetic of types.py.
    void maxtextMesh()
    {
        // 64 v5e hosts x 8 chips = 512 chips, slices of 256 (the ICI domain): 2 slices.
        const Case c{"llama-2-7b", "tpu-v5e-host", 64, 1024, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::MaxText, c, "tp=2,zero=3,zero_group=128,mb=2,recompute=full");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        // dp = 512 / 2 = 256 = data 2 x fsdp 128; the 2 slices take the data axis.
        for (const char* expected :
             {"ici_data_parallelism: 1\n", "dcn_data_parallelism: 2\n", "ici_fsdp_parallelism: 128\n",
              "dcn_fsdp_parallelism: 1\n", "ici_tensor_parallelism: 2\n", "hardware: \"tpu\"\n",
              "remat_policy: \"full\"\n", "base_num_kv_heads: 32\n", "rope_max_timescale: 10000\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // global = int(devices x per_device) x accumulation: 1024 / (256 x 2) = 2 micro-batches.
        QVERIFY(t.contains(QLatin1String("per_device_batch_size: 1\n")));
        QVERIFY(t.contains(QLatin1String("gradient_accumulation_steps: 2\n")));
        QCOMPARE(512 * 1 * 2, 1024);
        // tp 4 over 256 chips: a quarter sequence per chip and micro-step.
        const ExportResult q = exported(ExportFormat::MaxText, c, "tp=4,zero=3,mb=1,recompute=full");
        QVERIFY(q.ok());
        QVERIFY(QString::fromStdString(q.text).contains(QLatin1String("per_device_batch_size: 0.25\n")));
    }

    // NeuronX Distributed takes --context_parallel_size; mixed precision as AWS's launchers pass it.
    void neuronxContextParallelAndPrecision()
    {
        const Case c{"llama-3-8b", "trn1.32xlarge", 4, 1024, 8192, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::NeuronX, c, "tp=8,cp=2,sp=on,zero=1,mb=1,recompute=selective");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        QVERIFY(t.contains(QLatin1String("--context_parallel_size 2\n")));
        QVERIFY(t.contains(QLatin1String("--use_mix_precision\n")));
        QVERIFY(t.contains(QLatin1String("--use_gpu_compatible_precision 1\n")));
        QVERIFY(!t.contains(QLatin1String("XLA_DOWNCAST_BF16")));  // tp_zero1_llama3_8B_hf_pretrain.sh exports none
        // 128 NeuronCores / (tp 8 x cp 2) = dp 8; 1024 / 8 = 128 accumulation steps.
        QVERIFY(t.contains(QLatin1String("= dp 8;")));
        QVERIFY(t.contains(QLatin1String("--grad_accum_usteps 128\n")));
    }

    // DeepSpeed Ulysses for cp: sequence_parallel_size and data_parallel_size, the batch over dp;
    // the plan priced as Ulysses (cp_comm=a2a), a ring plan refused by name.
    void deepspeedUlysses()
    {
        const Case c{"llama-2-7b", "p5.48xlarge", 4, 512, 8192, Precision::BF16Mixed};
        const ExportResult ring = exported(ExportFormat::DeepSpeed, c, "cp=4,zero=3,mb=1,recompute=full");
        QVERIFY(!ring.ok());
        QCOMPARE(ring.refused.front().feature, std::string("context parallelism as a K/V ring (cp_comm=p2p)"));
        const ExportResult r = exported(ExportFormat::DeepSpeed, c, "cp=4,zero=3,mb=1,recompute=full,cp_comm=a2a");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QJsonObject ds = QJsonDocument::fromJson(QByteArray::fromStdString(r.text)).object();
        QCOMPARE(ds["sequence_parallel_size"].toInt(), 4);
        QCOMPARE(ds["data_parallel_size"].toInt(), 8);  // 32 GPUs / cp 4
        QCOMPARE(ds["train_batch_size"].toInt(),
                 ds["train_micro_batch_size_per_gpu"].toInt() * ds["gradient_accumulation_steps"].toInt() * 8);
        // Ulysses splits heads: GPT-3 13B's 40 heads over cp 16 do not divide.
        const ExportResult odd = exported(ExportFormat::DeepSpeed, {"gpt3-13b", "p5.48xlarge", 2, 64, 8192,
                                                                    Precision::BF16Mixed}, "cp=16,zero=3,mb=1");
        QVERIFY(!odd.ok());
        QVERIFY(std::any_of(odd.refusals.begin(), odd.refusals.end(),
                            [](const std::string& x) { return x.find("cp=16) over 40 attention heads") != std::string::npos; }));
    }

    // cp_comm=a2a (Ulysses) in every exporter: Megatron's --cp-comm-type a2a (TransformerConfig.cp_comm_type
    // for Megatron-Bridge), MaxText's context_parallel_strategy ulysses; the ring-only frameworks refuse it.
    void allToAllContextParallelism()
    {
        const Case c{"llama-2-7b", "p5.48xlarge", 4, 512, 8192, Precision::BF16Mixed};
        const char* a2a = "tp=2,sp=on,cp=4,zero=1,mb=1,recompute=full,cp_comm=a2a";
        const ExportResult megatron = exported(ExportFormat::Megatron, c, a2a);
        QVERIFY2(megatron.ok(), megatron.refusals.empty() ? "" : megatron.refusals.front().c_str());
        QVERIFY(QString::fromStdString(megatron.text).contains(QLatin1String("--cp-comm-type a2a\n")));
        const ExportResult ringMegatron = exported(ExportFormat::Megatron, c, "tp=2,sp=on,cp=4,zero=1,mb=1,recompute=full");
        QVERIFY(ringMegatron.ok() && !QString::fromStdString(ringMegatron.text).contains(QLatin1String("cp-comm-type")));
        const ExportResult bridge = exported(ExportFormat::MegatronBridge, c, a2a);
        QVERIFY2(bridge.ok(), bridge.refusals.empty() ? "" : bridge.refusals.front().c_str());
        QVERIFY(QString::fromStdString(bridge.text).contains(QLatin1String("cp_comm_type=\"a2a\"")));
        const ExportResult maxtext = exported(ExportFormat::MaxText, c, "cp=4,zero=3,mb=1,recompute=full,cp_comm=a2a");
        QVERIFY2(maxtext.ok(), maxtext.refusals.empty() ? "" : maxtext.refusals.front().c_str());
        QVERIFY(QString::fromStdString(maxtext.text).contains(QLatin1String("context_parallel_strategy: \"ulysses\"\n")));
        for (ExportFormat ringOnly : {ExportFormat::Torchtitan, ExportFormat::Fsdp}) {
            const ExportResult r = exported(ringOnly, c, "tp=2,sp=on,cp=4,zero=3,mb=1,recompute=full,cp_comm=a2a");
            QVERIFY(!r.ok());
            QCOMPARE(r.refused.front().feature, std::string("all-to-all context parallelism (cp_comm=a2a)"));
        }
    }

    // GPT-OSS through Megatron-LM: attention sinks, sliding window on alternate layers, YaRN,
    // MoE with its own expert size, each with the option arguments.py (d98e8a64) names.
    void megatronGptOssFields()
    {
        const Case c{"hf:gpt-oss-120b", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        // Biased experts: Megatron splits them only with etp 1 (megatronMoeRefusals).
        const ExportResult r = exported(ExportFormat::Megatron, c, "tp=8,sp=on,etp=1,zero=1,mb=1,recompute=selective");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        const ModelSpec m = model("hf:gpt-oss-120b");
        QVERIFY(m.bias);
        QVERIFY(t.contains("--expert-tensor-parallel-size 1\n"));
        QVERIFY(m.attention_sinks && m.sliding_window.enabled() && !m.sliding_window.layers.empty());
        QVERIFY(t.contains("--softmax-type learnable\n"));
        // 128-token window (the config's sliding_window): 127 keys back and the query itself.
        QVERIFY2(t.contains("--window-size " + QString::number(m.sliding_window.size - 1) + ",0\n"), qPrintable(t));
        // layer_types "sliding_attention", "full_attention", ... over 36 layers: 1 = SWA.
        QVERIFY2(t.contains("--window-attn-skip-freq '[1]*1+[0]*1+"), qPrintable(t));
        QVERIFY(t.contains("--position-embedding-type yarn\n"));
        QVERIFY(t.contains("--rotary-scaling-factor 32\n"));
        QVERIFY(t.contains("--yarn-original-max-position-embeddings 4096\n"));
        QVERIFY(t.contains("--no-yarn-correction-range-round-to-int\n"));
        QVERIFY(t.contains("--num-experts 128\n") && t.contains("--moe-router-topk 4\n"));
        QVERIFY(t.contains("--moe-ffn-hidden-size 2880\n"));
        QVERIFY(t.contains("--norm-epsilon 1e-05\n"));
    }

    // Expert parallelism through Megatron-LM: ep and etp from the layout, the MoE options from the
    // model (Mixtral's config: 8 experts, top 2, router_aux_loss_coef 0.02, 14336 per expert), each
    // an option of arguments.py (d98e8a64).
    void megatronExpertParallel()
    {
        const Case c{"hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::Megatron, c, "tp=4,sp=on,ep=8,etp=1,zero=1,mb=1");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected :
             {"--expert-model-parallel-size 8\n", "--expert-tensor-parallel-size 1\n", "--num-experts 8\n",
              "--moe-router-topk 2\n", "--moe-ffn-hidden-size 14336\n", "--moe-aux-loss-coeff 0.02\n",
              "--moe-router-load-balancing-type aux_loss\n", "--moe-grouped-gemm\n",
              "--moe-token-dispatcher-type alltoall\n", "--sequence-parallel\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // Dropless, no dense layers, no shared expert, softmax over the top 2: none of their options.
        for (const char* absent : {"--moe-expert-capacity-factor", "--moe-token-drop-policy", "--moe-layer-freq",
                                   "--moe-shared-expert-intermediate-size", "--moe-router-pre-softmax",
                                   "--moe-router-score-function", "--moe-router-force-load-balancing"})
            QVERIFY2(!t.contains(QLatin1String(absent)), absent);
        // 32 devices per stage (tp 4 x dp 16) over ep 8 x etp 1: 4 expert replicas.
        QVERIFY2(t.contains(QLatin1String("# Experts: 8 routed experts over ep 8 (1 per rank), each expert's matrices over "
                                          "etp 1; expert data-parallel size 8 = tp 4 x cp 1 x dp 16 / (ep 8 x etp 1).")),
                 qPrintable(t));
        // etp left out is tp (Megatron's default), written out.
        const ExportResult asTp = exported(ExportFormat::Megatron, c, "tp=4,sp=on,ep=4,zero=1,mb=1");
        QVERIFY(asTp.ok());
        QVERIFY(QString::fromStdString(asTp.text).contains(QLatin1String("--expert-tensor-parallel-size 4\n")));
        QVERIFY(QString::fromStdString(asTp.text).contains(QLatin1String("--expert-model-parallel-size 4\n")));
        // A capacity factor: the factor and the drop policy; no load-balancing loss: "none".
        Problem p = problem(c);
        p.model.moe.capacity_factor = 1.25;
        p.model.moe.aux_loss_coeff = 0;
        const ExportResult capped = exportSettings(ExportFormat::Megatron, p, layout("tp=4,sp=on,ep=8,zero=1,mb=1", p));
        QVERIFY2(capped.ok(), capped.refusals.empty() ? "" : capped.refusals.front().c_str());
        const QString ct = QString::fromStdString(capped.text);
        for (const char* expected : {"--moe-expert-capacity-factor 1.25\n", "--moe-token-drop-policy probs\n",
                                     "--moe-router-load-balancing-type none\n", "--moe-aux-loss-coeff 0\n"})
            QVERIFY2(ct.contains(QLatin1String(expected)), expected);
        // A dense model writes no expert options.
        const ExportResult dense = exported(ExportFormat::Megatron, {"llama-2-7b", "p5.48xlarge", 4, 256, 4096,
                                                                      Precision::BF16Mixed}, "tp=4,sp=on,zero=1");
        QVERIFY(dense.ok() && !QString::fromStdString(dense.text).contains(QLatin1String("expert")));
    }

    // Megatron-Bridge: the same settings as GPTModelProvider / MLAModelProvider fields.
    void megatronBridgeExpertParallel()
    {
        const Case c{"hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        Problem p = problem(c);
        p.model.moe.capacity_factor = 2;
        const ExportResult r = exportSettings(ExportFormat::MegatronBridge, p, layout("tp=4,sp=on,ep=8,etp=1,zero=1,mb=1", p));
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected :
             {"        expert_model_parallel_size=8,\n", "        expert_tensor_parallel_size=1,\n",
              "        num_moe_experts=8,\n", "        moe_router_topk=2,\n", "        moe_ffn_hidden_size=14336,\n",
              "        moe_aux_loss_coeff=0.02,\n", "        moe_router_load_balancing_type=\"aux_loss\",\n",
              "        moe_expert_capacity_factor=2,\n", "        moe_token_drop_policy=\"probs\",\n",
              "        moe_grouped_gemm=True,\n", "        moe_token_dispatcher_type=\"alltoall\",\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // DeepSeek-V3 with ep over a pipeline: MLAModelProvider with both sizes.
        const Case ds{"deepseek-v3", "p5.48xlarge", 32, 1024, 4096, Precision::BF16Mixed};
        const char* grid = "tp=2,sp=on,pp=8,first_stage_layers=5,last_stage_layers=2,ep=8,etp=1,zero=1,mb=1,recompute=full";
        const ExportResult deep = exported(ExportFormat::MegatronBridge, ds, grid);
        QVERIFY2(deep.ok(), deep.refusals.empty() ? "" : deep.refusals.front().c_str());
        const QString d = QString::fromStdString(deep.text);
        for (const char* expected : {"cfg.model = MLAModelProvider(\n", "        expert_model_parallel_size=8,\n",
                                     "        expert_tensor_parallel_size=1,\n", "        pipeline_model_parallel_size=8,\n",
                                     "        num_moe_experts=256,\n"})
            QVERIFY2(d.contains(QLatin1String(expected)), expected);
        // DeepSeek-V3's built-in has no load-balancing loss (the bias balances it): "none".
        QVERIFY(d.contains(QLatin1String("        moe_router_load_balancing_type=\"none\",\n")));
    }

    // What Megatron Core refuses for MoE, by name.
    void megatronMoeRefusals()
    {
        const Case c{"hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        Problem p = problem(c);
        const Layout l = layout("tp=4,sp=on,ep=8,zero=1,mb=1", p);  // etp = tp = 4
        // Top 1 renormalised over itself: TransformerConfig asks for the pre-softmax router.
        p.model.moe.top_k = 1;
        ExportResult r = exportSettings(ExportFormat::Megatron, p, l);
        QCOMPARE(r.refused.size(), size_t(1));
        QCOMPARE(r.refused[0].feature, std::string("top-1 routing renormalised over the one chosen expert (router softmax_norm)"));
        p.model.moe.router = MoeRouter::Softmax;  // a softmax over all experts: --moe-router-pre-softmax
        r = exportSettings(ExportFormat::Megatron, p, l);
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        QVERIFY(QString::fromStdString(r.text).contains(QLatin1String("--moe-router-pre-softmax\n")));
        // Biases in MoE with etp 4: "Bias in Moe is only supported when ETP==1"; etp 1 runs.
        p = problem(c);
        p.model.bias = true;
        for (ExportFormat format : {ExportFormat::Megatron, ExportFormat::MegatronBridge}) {
            r = exportSettings(format, p, l);
            QCOMPARE(r.refused.size(), size_t(1));
            QCOMPARE(r.refused[0].feature, std::string("biases in a mixture-of-experts model with etp=4"));
            QVERIFY(exportSettings(format, p, layout("tp=4,sp=on,ep=8,etp=1,zero=1,mb=1", p)).ok());
        }
    }

    // DeepSpeed AutoEP: the expert_parallel section for ep > 1 (deepspeed/module_inject/auto_ep_config.py
    // @ edaa7221), nothing for ep 1.
    void deepspeedAutoEp()
    {
        const Case c{"hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::DeepSpeed, c, "ep=8,zero=2,mb=1,recompute=full");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QJsonObject ds = QJsonDocument::fromJson(QByteArray::fromStdString(r.text)).object();
        const QJsonObject ep = ds["expert_parallel"].toObject();
        QCOMPARE(ep["enabled"].toBool(), true);
        QCOMPARE(ep["autoep_size"].toInt(), 8);
        QCOMPARE(ep["expert_tensor_parallel_size"].toInt(), 1);
        QCOMPARE(ds["train_batch_size"].toInt(), 512);
        bool noted = false;
        for (const std::string& n : r.notes)
            noted |= n.find("expert data-parallel size 8 = tp 1 x cp 1 x dp 64 / (ep 8 x etp 1)") != std::string::npos;
        QVERIFY(noted);
        const ExportResult replicated = exported(ExportFormat::DeepSpeed, c, "zero=2,mb=1,recompute=full");
        QVERIFY(replicated.ok());
        QVERIFY(!QJsonDocument::fromJson(QByteArray::fromStdString(replicated.text)).object().contains("expert_parallel"));
    }

    // MaxText's MoE blocks (mixtral, qwen3_moe) and its expert axis, out of the fsdp axis.
    void maxtextMoe()
    {
        const Case qwen{"hf:Qwen3-30B-A3B", "tpu-v5p-host", 16, 256, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::MaxText, qwen, "ep=8,zero=3,mb=1,recompute=full");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        // Qwen3-30B-A3B's config: 128 experts, top 8, moe_intermediate_size 768, QK-norm, 1e-6,
        // router_aux_loss_coef 0.001 (MaxText's weight: / 8).
        for (const char* expected :
             {"decoder_block: \"qwen3_moe\"\n", "num_experts: 128\n", "num_experts_per_tok: 8\n", "base_mlp_dim: 768\n",
              "base_moe_mlp_dim: 768\n", "use_qk_norm: true\n", "normalization_layer_epsilon: 1e-06\n",
              "load_balance_loss_weight: 0.000125\n", "capacity_factor: -1.0  # dropless\n", "head_dim: 128\n",
              // 64 devices: fsdp 8 x expert 8, no data axis left
              "ici_data_parallelism: 1\n", "ici_fsdp_parallelism: 8\n", "ici_expert_parallelism: 8\n",
              "dcn_expert_parallelism: 1\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // Mixtral: the mixtral block, 0.02 / 2; ep 1 leaves the expert axis at 1.
        const Case mixtral{"hf:Mixtral-8x7B-v0.1", "tpu-v5p-host", 16, 256, 4096, Precision::BF16Mixed};
        const ExportResult x = exported(ExportFormat::MaxText, mixtral, "zero=3,mb=1,recompute=full");
        QVERIFY2(x.ok(), x.refusals.empty() ? "" : x.refusals.front().c_str());
        const QString xt = QString::fromStdString(x.text);
        for (const char* expected : {"decoder_block: \"mixtral\"\n", "num_experts: 8\n", "num_experts_per_tok: 2\n",
                                     "base_mlp_dim: 14336\n", "load_balance_loss_weight: 0.01\n",
                                     "ici_fsdp_parallelism: 64\n", "ici_expert_parallelism: 1\n"})
            QVERIFY2(xt.contains(QLatin1String(expected)), expected);
        QVERIFY(!xt.contains(QLatin1String("use_qk_norm")));
        // Refused by name: a router MaxText's get_topk does not compute, a capacity factor.
        Problem p = problem(mixtral);
        p.model.moe.router = MoeRouter::Softmax;
        p.model.moe.capacity_factor = 1.5;
        const ExportResult bad = exportSettings(ExportFormat::MaxText, p, layout("zero=3,mb=1", p));
        QCOMPARE(bad.refused.size(), size_t(2));
        QCOMPARE(bad.refused[0].feature, std::string("the router softmax"));
        QCOMPARE(bad.refused[1].feature, std::string("a capacity factor of 1.5"));
    }

    // The MoE token dispatcher (moe_dispatcher): Megatron-LM's --moe-token-dispatcher-type, with
    // --moe-flex-dispatcher-backend for DeepEP and HybridEP (transformer_config.py @ d98e8a64), the same
    // two fields for Megatron-Bridge; torchtitan and DeepSpeed refuse what they cannot write, by name.
    void moeTokenDispatcher()
    {
        const Case c{"hf:Qwen3-30B-A3B", "p5.48xlarge", 2, 1024, 4096, Precision::BF16Mixed};
        Problem p = problem(c);
        struct Row {
            const char* dispatcher;
            const char* megatron;
            const char* bridge;
        };
        for (const Row& row : {Row{"alltoall", "--moe-token-dispatcher-type alltoall\n",
                                   "moe_token_dispatcher_type=\"alltoall\""},
                               Row{"allgather", "--moe-token-dispatcher-type allgather\n",
                                   "moe_token_dispatcher_type=\"allgather\""},
                               Row{"deepep", "--moe-token-dispatcher-type flex\n    --moe-flex-dispatcher-backend deepep\n",
                                   "moe_flex_dispatcher_backend=\"deepep\""},
                               Row{"hybridep", "--moe-token-dispatcher-type flex\n    --moe-flex-dispatcher-backend hybridep\n",
                                   "moe_flex_dispatcher_backend=\"hybridep\""}}) {
            const Layout l = layout((std::string("ep=16,zero=1,mb=1,moe_dispatcher=") + row.dispatcher).c_str(), p);
            const ExportResult megatron = exportSettings(ExportFormat::Megatron, p, l);
            QVERIFY2(megatron.ok(), megatron.refusals.empty() ? "" : megatron.refusals.front().c_str());
            QVERIFY2(QString::fromStdString(megatron.text).contains(QLatin1String(row.megatron)), row.dispatcher);
            QVERIFY(QString::fromStdString(megatron.text).contains(QLatin1String("moe-flex-dispatcher-backend")) ==
                    flexDispatcher(l.moe_dispatcher));
            const ExportResult bridge = exportSettings(ExportFormat::MegatronBridge, p, l);
            QVERIFY2(bridge.ok(), bridge.refusals.empty() ? "" : bridge.refusals.front().c_str());
            QVERIFY2(QString::fromStdString(bridge.text).contains(QLatin1String(row.bridge)), row.dispatcher);
            if (flexDispatcher(l.moe_dispatcher))
                QVERIFY(QString::fromStdString(bridge.text).contains(QLatin1String("moe_token_dispatcher_type=\"flex\"")));
            // (Megatron's deprecated --moe-enable-deepep is not written.)
            QVERIFY(!QString::fromStdString(megatron.text).contains(QLatin1String("enable-deepep")));
        }
        p.model.moe.aux_loss_coeff = 0;  // (torchtitan has no auxiliary loss)
        // torchtitan writes DeepEP and HybridEP as model_registry's moe_comm_backend (torchtitanDeepEpHybridEp).
        for (const char* dispatcher : {"deepep", "hybridep"}) {
            const ExportResult titan = exportSettings(
                ExportFormat::Torchtitan, p, layout((std::string("ep=16,zero=3,mb=1,moe_dispatcher=") + dispatcher).c_str(), p));
            QVERIFY2(titan.ok(), titan.refusals.empty() ? "" : titan.refusals.front().c_str());
            QVERIFY2(QString::fromStdString(titan.text)
                         .contains(QString("model_registry(\"30B-A3B\", moe_comm_backend=\"%1\")\n").arg(dispatcher)),
                     titan.text.c_str());
        }
        const ExportResult titanGather =
            exportSettings(ExportFormat::Torchtitan, p, layout("ep=16,zero=3,mb=1,moe_dispatcher=allgather", p));
        QVERIFY(!titanGather.ok() && titanGather.refused.front().reason.find("no allgather dispatcher") != std::string::npos);
        const ExportResult deepspeed =
            exportSettings(ExportFormat::DeepSpeed, p, layout("ep=16,zero=2,mb=1,moe_dispatcher=hybridep", p));
        QVERIFY(!deepspeed.ok());
        QVERIFY(std::any_of(deepspeed.refused.begin(), deepspeed.refused.end(), [](const auto& x) {
            return x.feature == "the hybridep MoE token dispatcher (moe_dispatcher=hybridep)";
        }));

        // The overlapped all-to-all (ep_comm_overlap=on): Megatron-LM's option, Megatron-Bridge's
        // CommOverlapConfig field (which sets the model's), refused by name elsewhere.
        const Layout overlapped = layout("ep=16,zero=1,mb=1,ep_comm_overlap=on", p);
        QVERIFY(overlapped.ep_comm_overlap);
        const ExportResult megatronOverlap = exportSettings(ExportFormat::Megatron, p, overlapped);
        QVERIFY(megatronOverlap.ok());
        QVERIFY(QString::fromStdString(megatronOverlap.text).contains(QLatin1String("--overlap-moe-expert-parallel-comm")));
        QVERIFY(!QString::fromStdString(exportSettings(ExportFormat::Megatron, p, layout("ep=16,zero=1,mb=1", p)).text)
                     .contains(QLatin1String("overlap-moe-expert")));
        const ExportResult bridgeOverlap = exportSettings(ExportFormat::MegatronBridge, p, overlapped);
        QVERIFY(bridgeOverlap.ok());
        QVERIFY2(QString::fromStdString(bridgeOverlap.text)
                     .contains(QLatin1String("cfg.comm_overlap = CommOverlapConfig(overlap_moe_expert_parallel_comm=True)")),
                 bridgeOverlap.text.c_str());
        const ExportResult titanOverlap = exportSettings(ExportFormat::Torchtitan, p, layout("ep=16,zero=3,mb=1,ep_comm_overlap=on", p));
        QVERIFY(std::any_of(titanOverlap.refused.begin(), titanOverlap.refused.end(), [](const auto& x) {
            return x.feature == "ep_comm_overlap=on" && x.reason.find("--overlap-moe-expert-parallel-comm") != std::string::npos;
        }));
    }

    // torchtitan's qwen3 MoE flavors with expert_parallel_degree (b5bcd76c): Qwen3-30B-A3B's shapes
    // (config.json) are the 30B-A3B flavor's; without a load-balancing loss (torchtitan has none) the
    // flavor's expert-bias balancing is switched off.
    void torchtitanMoe()
    {
        const Case c{"hf:Qwen3-30B-A3B", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        Problem p = problem(c);
        p.model.moe.aux_loss_coeff = 0;
        const ExportResult r = exportSettings(ExportFormat::Torchtitan, p, layout("tp=2,sp=on,ep=16,etp=1,zero=3,mb=1,recompute=full", p));
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected :
             {"from torchtitan.models.qwen3 import model_registry\n",
              "from torchtitan.models.qwen3.config_registry import qwen3_30b_a3b\n", "    config = qwen3_30b_a3b()\n",
              "    config.model_spec = model_registry(\"30B-A3B\")\n",
              "    for layer in config.model_spec.model.layers:\n        layer.moe.load_balance_coeff = None\n",
              "    config.hf_assets_path = \"./assets/hf/Qwen3-30B-A3B\"\n", "        data_parallel_shard_degree=32,\n",
              "        tensor_parallel_degree=2,\n", "        expert_parallel_degree=16,\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // 64 ranks: dp_shard 32 x tp 2 = 64 over ep 16: efsdp 4.
        QVERIFY2(t.contains(QLatin1String("torchtitan: efsdp = dp_shard x cp x tp / ep = 4.")), qPrintable(t));
        QVERIFY(!t.contains(QLatin1String("llama")));
        // With ep > 1 CUDA graphs are switched off: qwen3_30b_a3b leaves them on, and trainer.py
        // (_validate_cuda_graphs @ b5bcd76c) refuses them over the all-to-all dispatcher, which
        // synchronizes with the host.
        QVERIFY2(t.contains(QLatin1String("    config.training.disable_cuda_graphs = True  # CUDA graphs refuse "
                                          "host-synchronizing EP dispatchers\n")),
                 qPrintable(t));
        QVERIFY(t.contains(QLatin1String("CUDA graphs are off (training.disable_cuda_graphs)")));
        QVERIFY(!t.contains(QLatin1String("moe_comm_backend")));  // the standard all-to-all: the default
        // ep 1 (experts over tp, torchtitan's default): the degree written as 1, CUDA graphs kept.
        const ExportResult one = exportSettings(ExportFormat::Torchtitan, p, layout("tp=2,sp=on,zero=3,mb=1", p));
        QVERIFY2(one.ok(), one.refusals.empty() ? "" : one.refusals.front().c_str());
        QVERIFY(QString::fromStdString(one.text).contains(QLatin1String("        expert_parallel_degree=1,\n")));
        QVERIFY(!QString::fromStdString(one.text).contains(QLatin1String("disable_cuda_graphs")));
        // A dense llama3 recipe writes no expert degree.
        const ExportResult dense = exported(ExportFormat::Torchtitan, {"llama-3-8b", "p5.48xlarge", 4, 256, 8192,
                                                                        Precision::BF16Mixed}, "tp=2,sp=on,zero=3,mb=1");
        QVERIFY(dense.ok() && !QString::fromStdString(dense.text).contains(QLatin1String("expert")));
    }

    // torchtitan's DeepEP and HybridEP dispatchers (b5bcd76c): the family's model_registry(flavor,
    // moe_comm_backend="deepep" | "hybridep"), which make_token_dispatcher_config (models/common/
    // config_utils.py) turns into DeepEPTokenDispatcher / HybridEPTokenDispatcher configs, HybridEP in
    // its blocking default (non_blocking_capacity_factor None); CUDA graphs off with ep > 1 (trainer.py
    // _validate_cuda_graphs). Refused by name: either without expert parallelism
    // (update_ep_token_dispatcher_config) and on AMD GPUs (deep_ep is CUDA-only).
    void torchtitanDeepEpHybridEp()
    {
        Problem qwen = problem({"hf:Qwen3-30B-A3B", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed});
        qwen.model.moe.aux_loss_coeff = 0;
        const ExportResult deepep = exportSettings(
            ExportFormat::Torchtitan, qwen, layout("tp=2,sp=on,ep=16,etp=1,zero=3,mb=1,recompute=full,moe_dispatcher=deepep", qwen));
        QVERIFY2(deepep.ok(), deepep.refusals.empty() ? "" : deepep.refusals.front().c_str());
        const QString d = QString::fromStdString(deepep.text);
        for (const char* expected :
             {"    config.model_spec = model_registry(\"30B-A3B\", moe_comm_backend=\"deepep\")\n",
              "        expert_parallel_degree=16,\n",
              "    config.training.disable_cuda_graphs = True  # CUDA graphs refuse host-synchronizing EP dispatchers\n",
              // 4096 tokens a micro-batch over cp 1 x tp 2.
              "DeepEPTokenDispatcher", "2048 tokens per rank", "as the DeepEP one does."})
            QVERIFY2(d.contains(QLatin1String(expected)), expected);
        QVERIFY(!d.contains(QLatin1String("hybridep")) && !d.contains(QLatin1String("non_blocking_capacity_factor=")));

        // DeepSeek-V3 without MTP (the 671B flavor) on its uneven pipeline, HybridEP over ep 8: one
        // comment for both reasons CUDA graphs are off; 2 x 4096 tokens per rank.
        const Case c{"deepseek-v3", "p5.48xlarge", 32, 1024, 4096, Precision::BF16Mixed};
        Problem noMtp = problem(c);
        noMtp.model.mtp = MtpSpec{};
        const ExportResult hybrid = exportSettings(
            ExportFormat::Torchtitan, noMtp,
            layout("dp=16,pp=16,first_stage_layers=3,last_stage_layers=2,ep=8,zero=2,mb=2,recompute=full,"
                   "moe_dispatcher=hybridep",
                   noMtp));
        QVERIFY2(hybrid.ok(), hybrid.refusals.empty() ? "" : hybrid.refusals.front().c_str());
        const QString h = QString::fromStdString(hybrid.text);
        for (const char* expected :
             {"    config.model_spec = model_registry(\"671B\", moe_comm_backend=\"hybridep\")\n",
              "    config.training.disable_cuda_graphs = True  # CUDA graphs refuse pipeline parallelism and "
              "host-synchronizing EP dispatchers\n",
              "HybridEPTokenDispatcher", "in its blocking mode", "8192 tokens per rank", "as the blocking HybridEP one does."})
            QVERIFY2(h.contains(QLatin1String(expected)), expected);
        QVERIFY(!h.contains(QLatin1String("non_blocking_capacity_factor=")));
        // With its MTP layer (no pipeline) and on gpt-oss under cp, the argument joins the others.
        const ExportResult mtp = exported(ExportFormat::Torchtitan, c, "ep=8,zero=3,mb=1,recompute=full,moe_dispatcher=hybridep");
        QVERIFY2(mtp.ok(), mtp.refusals.empty() ? "" : mtp.refusals.front().c_str());
        QVERIFY2(QString::fromStdString(mtp.text)
                     .contains(QLatin1String("model_registry(\"671B\", num_mtp_layers=1, moe_comm_backend=\"hybridep\")\n")),
                 mtp.text.c_str());
        Problem oss = problem({"hf:gpt-oss-120b", "p5.48xlarge", 8, 512, 8192, Precision::BF16Mixed});
        oss.model.moe.aux_loss_coeff = 0;
        const ExportResult ossHybrid =
            exportSettings(ExportFormat::Torchtitan, oss, layout("dp=32,cp=2,ep=8,zero=3,mb=1,moe_dispatcher=hybridep", oss));
        QVERIFY2(ossHybrid.ok(), ossHybrid.refusals.empty() ? "" : ossHybrid.refusals.front().c_str());
        const QString g = QString::fromStdString(ossHybrid.text);
        QVERIFY2(g.contains(QLatin1String("model_registry(\"120b\", attn_backend=\"flex\", moe_comm_backend=\"hybridep\")\n")),
                 qPrintable(g));
        QVERIFY(g.contains(QLatin1String("4096 tokens per rank")));  // 8192 over cp 2

        // Without expert parallelism: Megatron runs DeepEP over etp x ep = tp 2 and HybridEP at ep 1;
        // torchtitan's update_ep_token_dispatcher_config refuses both.
        const Layout deepepNoEp = layout("tp=2,sp=on,zero=3,mb=1,recompute=full,moe_dispatcher=deepep", qwen);
        const ExportResult noEp = exportSettings(ExportFormat::Torchtitan, qwen, deepepNoEp);
        QVERIFY(!noEp.ok());
        QCOMPARE(noEp.refused.size(), size_t(1));
        QCOMPARE(noEp.refused.front().feature, std::string("the deepep MoE token dispatcher without expert parallelism (ep=1)"));
        QVERIFY2(noEp.refused.front().reason.find("DeepEPTokenDispatcher requires expert_parallel_degree > 1") !=
                     std::string::npos,
                 noEp.refused.front().reason.c_str());
        const ExportResult hybridNoEp =
            exportSettings(ExportFormat::Torchtitan, qwen, layout("zero=3,mb=1,recompute=full,moe_dispatcher=hybridep", qwen));
        QVERIFY(!hybridNoEp.ok());
        QCOMPARE(hybridNoEp.refused.size(), size_t(1));
        QCOMPARE(hybridNoEp.refused.front().feature,
                 std::string("the hybridep MoE token dispatcher without expert parallelism (ep=1)"));
        QVERIFY(hybridNoEp.refused.front().reason.find("HybridEPTokenDispatcher requires") != std::string::npos);

        // On AMD GPUs: deep_ep is CUDA-only; the all-to-all is exported there.
        // (One node: the catalog's MI300X node has no published inter-node bandwidth.)
        Problem amd = problem({"hf:Qwen3-30B-A3B", "mi300x-8", 1, 512, 4096, Precision::BF16Mixed});
        amd.model.moe.aux_loss_coeff = 0;
        for (const char* dispatcher : {"deepep", "hybridep"}) {
            const ExportResult r = exportSettings(
                ExportFormat::Torchtitan, amd,
                layout((std::string("tp=2,sp=on,ep=8,etp=1,zero=3,mb=1,recompute=full,moe_dispatcher=") + dispatcher).c_str(), amd));
            QVERIFY(!r.ok());
            QCOMPARE(r.refused.size(), size_t(1));
            QCOMPARE(r.refused.front().feature,
                     std::string("the ") + dispatcher + " MoE token dispatcher on AMD Instinct MI300X");
            QVERIFY2(r.refused.front().reason.find("CUDA-only") != std::string::npos, r.refused.front().reason.c_str());
        }
        const ExportResult amdAllToAll =
            exportSettings(ExportFormat::Torchtitan, amd, layout("tp=2,sp=on,ep=8,etp=1,zero=3,mb=1,recompute=full", amd));
        QVERIFY2(amdAllToAll.ok(), amdAllToAll.refusals.empty() ? "" : amdAllToAll.refusals.front().c_str());
    }

    // torchtitan's deepseek_v3 and gpt_oss flavors (b5bcd76c): DeepSeek-V3 is the 671B flavor (MLA,
    // 3 dense layers, a shared expert, sigmoid routing in groups); its correction bias keeps the
    // flavor's expert-bias balancing, its norm eps 1e-6 replaces RMSNorm.Config's 1e-5 default on
    // every norm; 61 layers over 16 stages as 3 + 14 x 4 + 2 are layers_per_stage 4 with the first
    // stage one and the last two layers lighter (pipeline_parallel.py's input/output weights).
    void torchtitanDeepSeekAndGptOss()
    {
        const Case c{"deepseek-v3", "p5.48xlarge", 32, 1024, 4096, Precision::BF16Mixed};
        const char* pipelined = "dp=16,pp=16,first_stage_layers=3,last_stage_layers=2,ep=8,zero=2,mb=2,recompute=full";
        // The built-in trains with multi-token prediction, which torchtitan's MTPDecoder refuses
        // under pipeline parallelism (models/deepseek_v3/mtp.py @ b5bcd76c): refused by name.
        const ExportResult withMtp = exported(ExportFormat::Torchtitan, c, pipelined);
        QVERIFY(!withMtp.ok());
        QVERIFY(std::any_of(withMtp.refused.begin(), withMtp.refused.end(), [](const auto& x) {
            return x.feature == "multi-token prediction with pipeline parallelism (pp=16)";
        }));
        Problem noMtp = problem(c);
        noMtp.model.mtp = MtpSpec{};
        const ExportResult r = exportSettings(ExportFormat::Torchtitan, noMtp, layout(pipelined, noMtp));
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected :
             {"from torchtitan.models.deepseek_v3 import model_registry\n",
              "from torchtitan.models.deepseek_v3.config_registry import deepseek_v3_671b\n",
              "    config = deepseek_v3_671b()\n", "    config.model_spec = model_registry(\"671B\")\n",
              "    for layer in config.model_spec.model.layers:\n        layer.attention_norm.eps = 1e-06\n"
              "        layer.ffn_norm.eps = 1e-06\n        layer.attention.q_norm.eps = 1e-06\n"
              "        layer.attention.kv_norm.eps = 1e-06\n    config.model_spec.model.norm.eps = 1e-06\n",
              "        pipeline_parallel_layers_per_stage=4,\n", "        pipeline_parallel_first_stage_less_layers=1,\n",
              "        pipeline_parallel_last_stage_less_layers=2,\n", "        expert_parallel_degree=8,\n",
              "4 layers per stage (first 3, last 2)", "load_balance_coeff's default 1e-3"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        QVERIFY(!t.contains(QLatin1String("load_balance_coeff = None")));
        // Without the correction bias the balancing is off on the MoE layers only (the dense first
        // three have no layer.moe).
        Problem p = problem(c);
        p.model.moe.score_correction_bias = false;
        const ExportResult off = exportSettings(ExportFormat::Torchtitan, p, layout("ep=8,zero=3,mb=1", p));
        QVERIFY2(off.ok(), off.refusals.empty() ? "" : off.refusals.front().c_str());
        QVERIFY2(QString::fromStdString(off.text).contains(QLatin1String(
                     "    for layer in config.model_spec.model.layers:\n        if layer.moe is not None:\n"
                     "            layer.moe.load_balance_coeff = None\n")),
                 off.text.c_str());
        // Without pipeline parallelism the MTP layer and its loss weight are written (0.3: the
        // built-in's, DeepSeek-V3's for its first 10T tokens).
        for (const char* expected : {"from torchtitan.models.deepseek_v3.mtp import MTPLoss\n",
                                     "    config.model_spec = model_registry(\"671B\", num_mtp_layers=1)\n",
                                     "    config.loss = MTPLoss.Config(\n        global_vocab_size="
                                     "decoder_vocab_size(config.model_spec),\n        mtp_scale=0.3,\n    )\n"})
            QVERIFY2(QString::fromStdString(off.text).contains(QLatin1String(expected)), expected);
        // A dense model with MLA: torchtitan's dense flavors are llama3's (grouped-query attention).
        p = problem(c);
        p.model.moe = MoeSpec{};
        const ExportResult dense = exportSettings(ExportFormat::Torchtitan, p, layout("zero=3,mb=1", p));
        QVERIFY(!dense.ok());
        QVERIFY(std::any_of(dense.refused.begin(), dense.refused.end(),
                            [](const auto& x) { return x.feature == "multi-head latent attention"; }));
        // DeepSeek-V3 with another top-k is no flavor: refused by name, the flavors listed.
        p = problem(c);
        p.model.moe.top_k = 6;
        const ExportResult noFlavor = exportSettings(ExportFormat::Torchtitan, p,
                                                     layout("dp=16,pp=16,first_stage_layers=3,last_stage_layers=2,zero=3", p));
        QVERIFY(!noFlavor.ok());
        QVERIFY2(QString::fromStdString(noFlavor.refusals.front()).contains("deepseek_v3 671B"),
                 noFlavor.refusals.front().c_str());
        // End stages heavier than the middle ones cannot be written as "less" layers.
        const ExportResult heavy = exportSettings(ExportFormat::Torchtitan, noMtp,
                                                  layout("pp=4,first_stage_layers=16,last_stage_layers=15,zero=3", noMtp));
        QVERIFY(!heavy.ok());
        QCOMPARE(heavy.refused.front().feature, std::string("end stages heavier than the middle ones (16 + ... + 15)"));
        // With virtual stages only the first and last chunk could be lighter: refused (Llama 3 405B).
        const ExportResult chunks = exported(ExportFormat::Torchtitan, {"llama-3-405b", "p5.48xlarge", 64, 1024, 8192,
                                                                        Precision::BF16Mixed},
                                             "tp=8,sp=on,pp=4,schedule=interleaved,v=2,first_stage_layers=30,"
                                             "last_stage_layers=32,zero=3,mb=1");
        QVERIFY(!chunks.ok());
        QCOMPARE(chunks.refused.front().feature, std::string("an uneven pipeline split with v=2"));

        // gpt-oss-120b without its HF auxiliary loss is the gpt_oss 120b flavor; under cp its
        // default varlen attention is refused by torchtitan, so the recipe asks for flex.
        p = problem({"hf:gpt-oss-120b", "p5.48xlarge", 8, 512, 8192, Precision::BF16Mixed});
        const ExportResult aux = exportSettings(ExportFormat::Torchtitan, p, layout("dp=32,cp=2,ep=8,zero=3,mb=1", p));
        QVERIFY(!aux.ok());
        QCOMPARE(aux.refused.front().feature, std::string("an auxiliary load-balancing loss (aux_loss_coeff 0.9)"));
        p.model.moe.aux_loss_coeff = 0;
        const ExportResult oss = exportSettings(ExportFormat::Torchtitan, p, layout("dp=32,cp=2,ep=8,zero=3,mb=1", p));
        QVERIFY2(oss.ok(), oss.refusals.empty() ? "" : oss.refusals.front().c_str());
        const QString g = QString::fromStdString(oss.text);
        for (const char* expected :
             {"from torchtitan.models.gpt_oss.config_registry import gpt_oss_120b\n",
              "    config.model_spec = model_registry(\"120b\", attn_backend=\"flex\")\n",
              "        layer.moe.load_balance_coeff = None\n", "        context_parallel_degree=2,\n"})
            QVERIFY2(g.contains(QLatin1String(expected)), expected);
        QVERIFY(!g.contains(QLatin1String("norm.eps")));  // 1e-5 is the flavor's own
        const ExportResult noCp = exportSettings(ExportFormat::Torchtitan, p, layout("dp=64,ep=8,zero=3,mb=1", p));
        QVERIFY(noCp.ok() && QString::fromStdString(noCp.text).contains(QLatin1String("model_registry(\"120b\")\n")));
        // torchtitan needs tp to divide the KV heads (decoder.py): gpt-oss has 8.
        const ExportResult tp16 = exportSettings(ExportFormat::Torchtitan, p, layout("dp=4,tp=16,sp=on,zero=3,mb=1", p));
        QVERIFY(!tp16.ok());
    }

    // NxD Training's Mixtral (hf_mixtral, examples/conf/hf_mixtral_8x7b*_config.yaml @ 9169aa03):
    // expert_model_parallel_size = ep with each expert over the whole tp group, the moe block from
    // the model (dropless without a capacity factor, the router's renormalisation, its loss weight).
    void nxdTrainingMixtral()
    {
        const Case c{"mixtral-8x7b", "trn1.32xlarge", 8, 128, 4096, Precision::BF16Mixed};
        Problem p = problem(c);
        p.model.moe.aux_loss_coeff = 0.02;
        const ExportResult r =
            exportSettings(ExportFormat::NxdTraining, p, layout("tp=8,sp=on,pp=4,ep=4,zero=1,mb=1,recompute=selective", p));
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected :
             {"name: hf_mixtral\n", "  expert_model_parallel_size: 4\n", "  moe:\n    num_experts: 8\n    frequency: 1\n",
              "    capacity_factor: 0.0\n    dropless: True\n", "    top_k: 2\n", "    router_aux_loss_coef: 0.02\n",
              "    normalize_top_k_affinities: True\n", "MixtralConfig config.json with hidden_size 4096, intermediate_size 14336",
              "NxD: expert data parallel = world / (tp x pp x ep) = 2."})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        // A capacity factor drops tokens: dropless off.
        p.model.moe.capacity_factor = 1.25;
        const ExportResult capped = exportSettings(ExportFormat::NxdTraining, p, layout("tp=8,sp=on,pp=4,ep=4,zero=1,mb=1,recompute=selective", p));
        QVERIFY2(capped.ok(), capped.refusals.empty() ? "" : capped.refusals.front().c_str());
        QVERIFY(QString::fromStdString(capped.text).contains(QLatin1String("    capacity_factor: 1.25\n    dropless: False\n")));
        // Sigmoid routing is not RouterTopK's softmax.
        p.model.moe.router = MoeRouter::SigmoidNorm;
        const ExportResult sigmoid = exportSettings(ExportFormat::NxdTraining, p, layout("tp=8,sp=on,pp=4,zero=1,mb=1,recompute=selective", p));
        QVERIFY(!sigmoid.ok());
        QCOMPARE(sigmoid.refused.front().feature, std::string("the router sigmoid-norm"));
        // A dense Llama is still hf_llama, without an expert degree.
        const ExportResult llama = exported(ExportFormat::NxdTraining, {"llama-2-7b", "trn1.32xlarge", 4, 128, 4096,
                                                                         Precision::BF16Mixed}, "tp=8,zero=1,recompute=full");
        QVERIFY(llama.ok());
        QVERIFY(QString::fromStdString(llama.text).contains(QLatin1String("name: hf_llama\n")));
        QVERIFY(!QString::fromStdString(llama.text).contains(QLatin1String("expert")));
    }

    // What Megatron Core has no setting for is refused by name, never dropped.
    void megatronModelFieldRefusals()
    {
        const Case c{"hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        Problem p = problem(c);
        const Layout l = layout("tp=4,sp=on,zero=1,mb=1", p);
        p.model.rope_scaling.type = RopeScalingKind::Dynamic;
        p.model.rope_scaling.factor = 2;
        p.model.moe.router = MoeRouter::Sigmoid;  // top 2, not renormalised
        const ExportResult r = exportSettings(ExportFormat::Megatron, p, l);
        QVERIFY(r.text.empty());
        QCOMPARE(r.refusals.size(), size_t(2));
        QCOMPARE(r.refused[0].feature, std::string("dynamic (NTK) RoPE scaling"));
        QCOMPARE(r.refused[1].feature, std::string("sigmoid routing without renormalisation (top_k 2)"));
        // YaRN: Megatron-LM has the options; the Bridge export writes none.
        const Case oss{"hf:gpt-oss-120b", "p5.48xlarge", 8, 512, 4096, Precision::BF16Mixed};
        // (etp 1: GPT-OSS's biased experts run only unsplit, megatronMoeRefusals.)
        const ExportResult bridge = exported(ExportFormat::MegatronBridge, oss, "tp=8,sp=on,etp=1,zero=1,mb=1");
        QVERIFY(!bridge.ok());
        QCOMPARE(bridge.refused.front().feature, std::string("YaRN RoPE scaling"));
    }

    // Each framework refuses what it cannot express, with the feature named.
    void refused_data()
    {
        QTest::addColumn<ExportFormat>("format");
        QTest::addColumn<QByteArray>("model");
        QTest::addColumn<QByteArray>("node");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("precision");
        QTest::addColumn<QByteArray>("layout");
        QTest::addColumn<QString>("feature");
        const int bf16 = int(Precision::BF16Mixed), fp8 = int(Precision::FP8Tensorwise), fp32 = int(Precision::FP32);
        const auto M = ExportFormat::Megatron, D = ExportFormat::DeepSpeed, N = ExportFormat::NeuronX,
                   F = ExportFormat::Fsdp, T = ExportFormat::Torchtitan, B = ExportFormat::MegatronBridge,
                   X = ExportFormat::MaxText, Y = ExportFormat::NxdTraining;
        const QByteArray llama7 = "llama-2-7b", llama70 = "llama-2-70b", p5 = "p5.48xlarge", trn1 = "trn1.32xlarge";

        QTest::newRow("megatron: GPipe")
            << M << llama7 << p5 << 4 << bf16 << QByteArray("pp=4,schedule=gpipe") << "the GPipe schedule";
        QTest::newRow("megatron: encoder-decoder")
            << M << QByteArray("t5-large") << p5 << 1 << bf16 << QByteArray("tp=1") << "family encoder-decoder";
        QTest::newRow("megatron: Trainium") << M << llama7 << trn1 << 1 << bf16 << QByteArray("tp=8")
                                            << "megatron: AWS Trainium (Trn1) devices are not supported";

        QTest::newRow("deepspeed: context parallelism with AutoTP")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("tp=2,cp=2")
            << "deepspeed: context parallelism (cp=2) with AutoTP";
        QTest::newRow("deepspeed: sequence parallelism")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("tp=2,sp=on") << "sequence parallelism (sp=on)";
        QTest::newRow("deepspeed: ZeRO-2 with pipeline")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("pp=2,zero=2") << "ZeRO-2 with pipeline parallelism";
        QTest::newRow("deepspeed: interleaved")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("pp=4,schedule=interleaved,v=2") << "the interleaved schedule";
        QTest::newRow("deepspeed: tp with pp")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("tp=2,pp=2") << "tensor parallelism (tp=2) together with";
        QTest::newRow("deepspeed: ZeRO-1 shard group")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("zero=1,zero_group=8") << "a ZeRO-1 shard group of 8";
        QTest::newRow("deepspeed: selective recomputation")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("recompute=selective") << "selective recomputation";
        QTest::newRow("deepspeed: uneven pipeline split")
            << D << llama7 << p5 << 4 << bf16 << QByteArray("pp=2,first_stage_layers=17")
            << "deepspeed: an uneven pipeline split (first_stage_layers=17, last_stage_layers=0)";
        QTest::newRow("deepspeed: embedding and loss counted in the pipeline split")
            << D << llama7 << p5 << 4 << bf16
            << QByteArray("pp=2,account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on")
            << "deepspeed: a pipeline split counting the embedding and the loss as layers "
               "(account_for_embedding_in_pipeline_split=on, account_for_loss_in_pipeline_split=on)";
        QTest::newRow("neuronx: embedding and loss counted in the pipeline split")
            << N << llama7 << trn1 << 4 << bf16
            << QByteArray("tp=8,pp=2,account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on,"
                          "recompute=full")
            << "neuronx: a pipeline split counting the embedding and the loss as layers";
        QTest::newRow("maxtext: uneven pipeline split")
            << X << llama7 << p5 << 4 << bf16 << QByteArray("pp=2,first_stage_layers=17")
            << "maxtext: an uneven pipeline split (first_stage_layers=17, last_stage_layers=0)";
        QTest::newRow("neuronx: uneven pipeline split")
            << N << llama7 << trn1 << 4 << bf16 << QByteArray("tp=8,pp=2,first_stage_layers=17,recompute=full")
            << "neuronx: an uneven pipeline split";
        QTest::newRow("deepspeed: fp8") << D << llama7 << p5 << 4 << fp8 << QByteArray("zero=1") << "fp8 precision";

        QTest::newRow("neuronx: GPT-3 architecture")
            << N << QByteArray("gpt3-13b") << trn1 << 4 << bf16 << QByteArray("tp=8,recompute=full")
            << "the architecture of gpt3-13b (mlp gelu, norm layernorm, positions learned, biases)";
        QTest::newRow("neuronx: ZeRO-3")
            << N << llama7 << trn1 << 4 << bf16 << QByteArray("tp=8,zero=3,recompute=full") << "neuronx: ZeRO-3";
        QTest::newRow("neuronx: no recomputation")
            << N << llama7 << trn1 << 4 << bf16 << QByteArray("tp=8") << "no activation recomputation";
        QTest::newRow("neuronx: fp32") << N << llama7 << trn1 << 4 << fp32 << QByteArray("tp=8,recompute=full")
                                       << "neuronx: fp32 precision";
        QTest::newRow("neuronx: GPU") << N << llama7 << p5 << 4 << bf16 << QByteArray("tp=8,recompute=full")
                                      << "NVIDIA H100";

        QTest::newRow("fsdp: tensor parallelism, not a Llama")
            << F << QByteArray("gpt3-13b") << p5 << 4 << bf16 << QByteArray("tp=8,zero=3")
            << "fsdp: tensor parallelism (tp=8) for gpt3-13b (mlp gelu, norm layernorm, positions learned, biases)";
        QTest::newRow("fsdp: context parallelism without ZeRO")
            << F << llama7 << p5 << 4 << bf16 << QByteArray("cp=2,zero=0") << "context parallelism (cp=2) without ZeRO";
        QTest::newRow("fsdp: ZeRO-1") << F << llama7 << p5 << 4 << bf16 << QByteArray("zero=1") << "fsdp: ZeRO-1";
        QTest::newRow("fsdp: optimizer offload")
            << F << llama7 << p5 << 4 << bf16 << QByteArray("zero=3,offload=optimizer") << "optimizer-only offload";
        QTest::newRow("fsdp: fp8") << F << llama7 << p5 << 4 << fp8 << QByteArray("zero=3") << "fsdp: fp8 precision";

        const QByteArray llama3 = "llama-3-8b", v5p = "tpu-v5p-host";
        QTest::newRow("torchtitan: ZeRO-1") << T << llama3 << p5 << 4 << bf16 << QByteArray("zero=1")
                                            << "torchtitan: ZeRO-1 (optimizer states only)";
        QTest::newRow("torchtitan: selective recomputation")
            << T << llama3 << p5 << 4 << bf16 << QByteArray("zero=3,recompute=selective")
            << "selective recomputation (the core attention only)";
        QTest::newRow("torchtitan: fp16") << T << llama3 << p5 << 4 << int(Precision::FP16Mixed) << QByteArray("zero=3")
                                          << "torchtitan: fp16 precision";
        QTest::newRow("torchtitan: fp8 (per-tensor)") << T << llama3 << p5 << 4 << fp8 << QByteArray("zero=3")
                                                      << "torchtitan: fp8 precision";
        QTest::newRow("torchtitan: mxfp8") << T << llama3 << QByteArray("p6-b200.48xlarge") << 4
                                           << int(Precision::MXFP8) << QByteArray("zero=3") << "torchtitan: mxfp8 precision";
        QTest::newRow("megatron: fp8-rowwise") << M << llama7 << p5 << 4 << int(Precision::FP8Rowwise)
                                               << QByteArray("tp=8") << "megatron: fp8-rowwise precision";
        QTest::newRow("megatron-bridge: fp8-rowwise") << B << llama7 << p5 << 4 << int(Precision::FP8Rowwise)
                                                      << QByteArray("tp=8") << "megatron-bridge: fp8-rowwise precision";
        QTest::newRow("maxtext: fp8") << X << llama7 << p5 << 4 << fp8 << QByteArray("zero=3")
                                      << "maxtext: fp8 precision";
        QTest::newRow("torchtitan: cp without ZeRO") << T << llama3 << p5 << 4 << bf16 << QByteArray("cp=2,zero=0")
                                                     << "context parallelism (cp=2) without ZeRO";
        QTest::newRow("torchtitan: TPU") << T << llama3 << v5p << 4 << bf16 << QByteArray("zero=3")
                                         << "torchtitan: Google Cloud TPU v5p devices are not supported";
        QTest::newRow("megatron-bridge: GPipe")
            << B << llama7 << p5 << 4 << bf16 << QByteArray("pp=4,schedule=gpipe") << "megatron-bridge: the GPipe schedule";
        QTest::newRow("megatron-bridge: encoder-decoder")
            << B << QByteArray("t5-large") << p5 << 1 << bf16 << QByteArray("tp=1") << "family encoder-decoder";
        QTest::newRow("maxtext: ZeRO-2") << X << llama7 << v5p << 4 << bf16 << QByteArray("zero=2") << "maxtext: ZeRO-2";
        QTest::newRow("maxtext: 1F1B") << X << llama7 << v5p << 4 << bf16 << QByteArray("pp=2,zero=0")
                                       << "the 1f1b schedule";
        QTest::newRow("maxtext: GPT-3") << X << QByteArray("gpt3-1.3b") << v5p << 4 << bf16 << QByteArray("zero=3")
                                        << "the architecture of gpt3-1.3b";
        QTest::newRow("maxtext: Trainium") << X << llama7 << trn1 << 4 << bf16 << QByteArray("tp=8,zero=3")
                                           << "maxtext: AWS Trainium (Trn1) devices are not supported";
        QTest::newRow("nxd-training: ZeRO-3") << Y << llama7 << trn1 << 4 << bf16
                                              << QByteArray("tp=8,zero=3,recompute=full") << "nxd-training: ZeRO-3";
        QTest::newRow("nxd-training: GPipe") << Y << llama70 << trn1 << 16 << bf16
                                             << QByteArray("tp=32,pp=4,schedule=gpipe,zero=1,recompute=full")
                                             << "the GPipe schedule";
        QTest::newRow("nxd-training: GPU") << Y << llama7 << p5 << 4 << bf16 << QByteArray("tp=8,zero=1,recompute=full")
                                           << "NVIDIA H100";

        // The model fields a Llama lacks, imported from Hugging Face configs: refused by name
        // where the framework has no setting for them.
        const QByteArray qwen2 = "hf:Qwen2-7B", qwen3 = "hf:Qwen3-8B", mistral = "hf:Mistral-7B-v0.1",
                         mixtral = "hf:Mixtral-8x7B-v0.1", llama31 = "hf:Llama-3.1-8B";
        QTest::newRow("torchtitan: QK-norm") << T << qwen3 << p5 << 4 << bf16 << QByteArray("zero=3")
                                             << "torchtitan: QK-norm is not expressible (torchtitan has no QK-norm in its llama3 model)";
        QTest::newRow("torchtitan: qkv bias") << T << qwen2 << p5 << 4 << bf16 << QByteArray("zero=3")
                                              << "torchtitan: biases on q, k and v";
        QTest::newRow("torchtitan: sliding window") << T << mistral << p5 << 4 << bf16 << QByteArray("zero=3")
                                                    << "torchtitan: a sliding window of 4096";
        QTest::newRow("torchtitan: MoE") << T << mixtral << p5 << 4 << bf16 << QByteArray("zero=3")
                                         << "torchtitan: the MoE model mixtral-8x7b-v0.1 is not expressible";
        QTest::newRow("torchtitan: aux loss") << T << QByteArray("hf:Qwen3-30B-A3B") << p5 << 8 << bf16
                                              << QByteArray("zero=3")
                                              << "an auxiliary load-balancing loss (aux_loss_coeff 0.001)";
        QTest::newRow("neuronx: QK-norm") << N << qwen3 << trn1 << 4 << bf16 << QByteArray("tp=8,recompute=full")
                                          << "QK-norm, norm_eps 1e-06";
        QTest::newRow("nxd-training: qkv bias") << Y << qwen2 << trn1 << 4 << bf16
                                                << QByteArray("tp=4,zero=1,recompute=full") << "biases on q, k and v";
        QTest::newRow("maxtext: sliding window") << X << mistral << v5p << 4 << bf16 << QByteArray("zero=3")
                                                 << "the architecture of mistral-7b-v0.1 (a sliding window of 4096)";
        QTest::newRow("maxtext: RoPE scaling") << X << llama31 << v5p << 4 << bf16 << QByteArray("zero=3")
                                               << "RoPE scaling llama3";
        QTest::newRow("fsdp: tensor parallelism, QK-norm") << F << qwen3 << p5 << 4 << bf16 << QByteArray("tp=4,zero=3")
                                                          << "fsdp: tensor parallelism (tp=4) for qwen3-8b (QK-norm";
        // Multi-head latent attention (DeepSeek-V3): Megatron-LM and Megatron-Bridge have it; the
        // others refuse it by name.
        const QByteArray deepseek = "deepseek-v3";
        QTest::newRow("maxtext: MLA") << X << deepseek << v5p << 64 << bf16 << QByteArray("zero=3")
                                      << "multi-head latent attention";
        QTest::newRow("neuronx: MLA") << N << deepseek << trn1 << 32 << bf16 << QByteArray("tp=32,sp=on,recompute=full")
                                      << "multi-head latent attention";
        QTest::newRow("nxd-training: MLA") << Y << deepseek << trn1 << 32 << bf16
                                           << QByteArray("tp=32,sp=on,zero=1,recompute=full") << "multi-head latent attention";
        // Its multi-token prediction (1 MTP layer): Megatron-LM, Megatron-Bridge and torchtitan
        // (without pp and cp) have it; the others refuse it by name.
        const char* mtp = "multi-token prediction (1 MTP layer) is not expressible";
        QTest::newRow("maxtext: MTP") << X << deepseek << v5p << 64 << bf16 << QByteArray("zero=3")
                                      << QString("maxtext: ") + mtp + " (the export writes no MaxText";
        QTest::newRow("neuronx: MTP") << N << deepseek << trn1 << 32 << bf16 << QByteArray("tp=32,sp=on,recompute=full")
                                      << QString("neuronx: ") + mtp;
        QTest::newRow("nxd-training: MTP") << Y << deepseek << trn1 << 32 << bf16
                                           << QByteArray("tp=32,sp=on,zero=1,recompute=full")
                                           << QString("nxd-training: ") + mtp;
        QTest::newRow("deepspeed: MTP") << D << deepseek << p5 << 32 << bf16 << QByteArray("zero=3")
                                        << QString("deepspeed: ") + mtp;
        QTest::newRow("fsdp: MTP") << F << deepseek << p5 << 32 << bf16 << QByteArray("zero=3")
                                   << QString("fsdp: ") + mtp;
        QTest::newRow("fsdp: tensor parallelism, MLA") << F << deepseek << p5 << 32 << bf16 << QByteArray("tp=8,sp=on,zero=3")
                                                       << "multi-head latent attention";
        // Expert parallelism: Megatron-LM, Megatron-Bridge and DeepSpeed (AutoEP) have it; the
        // others refuse ep (and an etp other than tp) by name, beside the MoE model itself.
        const QByteArray v5pHost = "tpu-v5p-host";
        QTest::newRow("deepspeed: etp with AutoEP") << D << mixtral << p5 << 8 << bf16 << QByteArray("ep=8,etp=2,zero=2")
                                                    << "deepspeed: expert tensor parallelism (etp=2) is not expressible";
        QTest::newRow("deepspeed: etp without ep") << D << mixtral << p5 << 8 << bf16 << QByteArray("etp=2,zero=2")
                                                   << "expert tensor parallelism (etp=2 with tp=1) without expert parallelism";
        QTest::newRow("deepspeed: ep with pipeline") << D << mixtral << p5 << 8 << bf16 << QByteArray("pp=2,ep=8,zero=1")
                                                     << "expert parallelism (ep=8) with pipeline parallelism";
        QTest::newRow("deepspeed: ep with Ulysses") << D << mixtral << p5 << 8 << bf16 << QByteArray("cp=2,ep=8,zero=3")
                                                    << "expert parallelism (ep=8) with Ulysses (cp=2)";
        QTest::newRow("deepspeed: AutoEP and the expert bias")
            << D << QByteArray("hf:DeepSeek-V3") << p5 << 32 << bf16 << QByteArray("ep=8,zero=2")
            << "the routers' score-correction bias (auxiliary-loss-free balancing)";
        QTest::newRow("fsdp: ep") << F << mixtral << p5 << 8 << bf16 << QByteArray("ep=8,zero=3")
                                  << "fsdp: expert parallelism (ep=8) is not expressible";
        QTest::newRow("fsdp: etp") << F << mixtral << p5 << 8 << bf16 << QByteArray("etp=2,zero=3")
                                   << "fsdp: expert tensor parallelism (etp=2 with tp=1)";
        QTest::newRow("torchtitan: ep with etp = tp") << T << QByteArray("hf:Qwen3-30B-A3B") << p5 << 8 << bf16
                                                      << QByteArray("tp=2,sp=on,ep=8,zero=3")
                                                      << "expert tensor parallelism (etp=2) with ep=8";
        QTest::newRow("torchtitan: ep over dp_replicate") << T << QByteArray("hf:Qwen3-30B-A3B") << p5 << 8 << bf16
                                                          << QByteArray("ep=8,zero=0")
                                                          << "expert parallelism (ep=8) beyond dp_shard x cp x tp = 1";
        QTest::newRow("torchtitan: etp without ep") << T << QByteArray("hf:Qwen3-30B-A3B") << p5 << 8 << bf16
                                                    << QByteArray("tp=2,sp=on,etp=1,zero=3")
                                                    << "expert tensor parallelism (etp=1 with tp=2) without ep";
        QTest::newRow("maxtext: ep without ZeRO-3") << X << mixtral << v5pHost << 16 << bf16 << QByteArray("ep=8,zero=1")
                                                    << "maxtext: expert parallelism (ep=8) without ZeRO-3 over all 64";
        QTest::newRow("maxtext: ep with a shard group")
            << X << mixtral << v5pHost << 16 << bf16 << QByteArray("ep=8,zero=3,zero_group=16")
            << "expert parallelism (ep=8) without ZeRO-3 over all 64 data-parallel ranks";
        QTest::newRow("maxtext: etp") << X << mixtral << v5pHost << 16 << bf16 << QByteArray("tp=2,sp=on,etp=1,zero=3")
                                      << "maxtext: expert tensor parallelism (etp=1 with tp=2)";
        QTest::newRow("maxtext: aux loss over 2-sequence micro-batches")
            << X << mixtral << v5pHost << 16 << bf16 << QByteArray("zero=3,mb=2")
            << "a load-balancing loss over micro-batches of 2 sequences";
        QTest::newRow("maxtext: DeepSeek-V3") << X << QByteArray("deepseek-v3") << v5pHost << 64 << bf16
                                              << QByteArray("ep=8,zero=3")
                                              << "DeepSeek routing (correction bias, groups or routed scaling)";
        QTest::newRow("neuronx: ep") << N << mixtral << trn1 << 4 << bf16 << QByteArray("tp=8,sp=on,ep=4,recompute=full")
                                     << "neuronx: expert parallelism (ep=4) is not expressible";
        QTest::newRow("nxd-training: etp") << Y << mixtral << trn1 << 4 << bf16
                                           << QByteArray("tp=8,sp=on,ep=4,etp=1,zero=1,recompute=full")
                                           << "nxd-training: expert tensor parallelism (etp=1) other than tp=8";
        QTest::newRow("nxd-training: ep with tp 4 on trn1") << Y << mixtral << trn1 << 4 << bf16
                                                            << QByteArray("tp=4,sp=on,ep=4,zero=1,recompute=full")
                                                            << "nxd-training: expert parallelism (ep=4) with tp=4 on Trainium1";
        QTest::newRow("nxd-training: DeepSeek-V3") << Y << QByteArray("deepseek-v3") << trn1 << 32 << bf16
                                                   << QByteArray("tp=32,sp=on,ep=4,zero=1,recompute=full")
                                                   << "nxd-training: 1 shared expert(s)";
        // gpt-oss-120b is torchtitan's gpt_oss 120b flavor but for the HF config's auxiliary loss.
        QTest::newRow("torchtitan: gpt-oss aux loss") << T << QByteArray("hf:gpt-oss-120b") << p5 << 8 << bf16
                                                      << QByteArray("zero=3")
                                                      << "torchtitan: an auxiliary load-balancing loss (aux_loss_coeff 0.9)";
        // Selective recomputation of named modules and activation offload: Megatron Core's only.
        const QByteArray modules("recompute=selective,recompute_modules=core_attn+mlp"), offload("offload_activations=4");
        QTest::newRow("deepspeed: recompute modules") << D << llama7 << p5 << 4 << bf16 << modules
                                                      << "deepspeed: recompute_modules=core_attn+mlp";
        QTest::newRow("deepspeed: activation offload") << D << llama7 << p5 << 4 << bf16 << offload
                                                       << "deepspeed: offload_activations=4";
        QTest::newRow("fsdp: recompute modules") << F << llama7 << p5 << 4 << bf16 << modules
                                                 << "fsdp: recompute_modules=core_attn+mlp";
        QTest::newRow("fsdp: activation offload") << F << llama7 << p5 << 4 << bf16 << offload
                                                  << "fsdp: offload_activations=4";
        QTest::newRow("torchtitan: recompute modules") << T << llama7 << p5 << 4 << bf16 << modules
                                                       << "torchtitan: recompute_modules=core_attn+mlp";
        QTest::newRow("torchtitan: activation offload") << T << llama7 << p5 << 4 << bf16 << offload
                                                        << "torchtitan: offload_activations=4";
        QTest::newRow("maxtext: recompute modules") << X << llama7 << v5p << 4 << bf16
                                                    << QByteArray("zero=3,recompute=selective,recompute_modules=mlp")
                                                    << "maxtext: recompute_modules=mlp";
        QTest::newRow("neuronx: activation offload") << N << llama7 << trn1 << 4 << bf16
                                                     << QByteArray("tp=8,offload_activations=4")
                                                     << "neuronx: offload_activations=4";
        QTest::newRow("nxd-training: recompute modules") << Y << llama7 << trn1 << 4 << bf16
                                                         << QByteArray("tp=8,recompute=selective,recompute_modules=mlp")
                                                         << "nxd-training: recompute_modules=mlp";
        // bf16-autocast is NeuronX Distributed's precision: the GPU frameworks refuse it by name.
        const int autocast = int(Precision::BF16Autocast);
        for (const auto& [format, layoutText] : {std::pair{M, "tp=8"}, std::pair{B, "tp=8"}, std::pair{D, "zero=1"},
                                                 std::pair{F, "zero=3"}, std::pair{T, "zero=3"}})
            QTest::newRow((std::string(toString(format)) + ": bf16-autocast").c_str())
                << format << llama7 << p5 << 4 << autocast << QByteArray(layoutText)
                << QString(toString(format)) + ": bf16-autocast precision";
        QTest::newRow("maxtext: bf16-autocast") << X << llama7 << v5p << 4 << autocast << QByteArray("zero=3")
                                                << "maxtext: bf16-autocast precision";
        // NxD Training's autocast is for its HF Llama models (config_overview.rst), not Mixtral.
        QTest::newRow("nxd-training: bf16-autocast with MoE")
            << Y << QByteArray("mixtral-8x7b") << trn1 << 4 << autocast
            << QByteArray("tp=8,sp=on,pp=4,ep=4,zero=1,mb=1,recompute=selective")
            << "nxd-training: bf16-autocast precision with a mixture-of-experts model";
    }

    // NxD Training writes precision.type 'autocast' for bf16-autocast; the NxD scripts take it with
    // --use_gpu_compatible_precision 1 (what their benchmarks' "Autocast:BF16+FP32Optimizer" ran).
    void neuronxAutocast()
    {
        const Case c{"llama-2-7b", "trn1.32xlarge", 4, 128, 4096, Precision::BF16Autocast};
        const ExportResult nxdt = exported(ExportFormat::NxdTraining, c, "tp=8,sp=on,zero=1,mb=1,recompute=selective");
        QVERIFY2(nxdt.ok(), nxdt.refusals.empty() ? "" : nxdt.refusals.front().c_str());
        QVERIFY(nxdt.text.find("precision:\n  type: 'autocast'\n") != std::string::npos);
        const ExportResult nxd = exported(ExportFormat::NeuronX, c, "tp=8,sp=on,zero=1,mb=1,recompute=selective");
        QVERIFY2(nxd.ok(), nxd.refusals.empty() ? "" : nxd.refusals.front().c_str());
        QVERIFY(nxd.text.find("--use_gpu_compatible_precision 1") != std::string::npos);
        Case bf16 = c;
        bf16.precision = Precision::BF16Mixed;
        QVERIFY(exported(ExportFormat::NxdTraining, bf16, "tp=8,sp=on,zero=1,mb=1,recompute=selective").text.find(
                    "type: 'mixed_precision'") != std::string::npos);
    }

    // torchtitan's llama3 flavors apply Llama 3.1's RoPE scaling (models/llama3/__init__.py @
    // b5bcd76c): a Llama 3 built-in switches it off on every layer, Llama 3.1 keeps it, other
    // llama3 factors are written out.
    void torchtitanRope()
    {
        const Case llama3{"llama-3-8b", "p5.48xlarge", 4, 256, 8192, Precision::BF16Mixed};
        const char* layout = "tp=2,sp=on,zero=3,mb=1,recompute=full";
        const QString off = QString::fromStdString(exported(ExportFormat::Torchtitan, llama3, layout).text);
        QVERIFY2(off.contains(QLatin1String("    for layer in config.model_spec.model.layers:\n"
                                            "        layer.attention.rope.scaling = \"none\"\n")),
                 qPrintable(off));
        QVERIFY(off.contains(QLatin1String("which llama-3-8b (Llama 3) has not")));
        const Case llama31{"hf:Llama-3.1-8B", "p5.48xlarge", 4, 256, 8192, Precision::BF16Mixed};
        const ExportResult kept = exported(ExportFormat::Torchtitan, llama31, layout);
        QVERIFY2(kept.ok(), kept.refusals.empty() ? "" : kept.refusals.front().c_str());
        QVERIFY(!QString::fromStdString(kept.text).contains(QLatin1String("layer.attention.rope")));
        QVERIFY(QString::fromStdString(kept.text).contains(QLatin1String("its RoPE scaling (Llama 3.1's: llama, factor 8)")));
        // Another llama3 factor: written on every layer.
        Problem p = problem(llama31);
        p.model.rope_scaling.factor = 32;
        const ExportResult other = exportSettings(ExportFormat::Torchtitan, p, this->layout(layout, p));
        QVERIFY2(other.ok(), other.refusals.empty() ? "" : other.refusals.front().c_str());
        for (const char* line : {"layer.attention.rope.scaling_factor = 32\n", "layer.attention.rope.low_freq_factor = 1\n",
                                 "layer.attention.rope.high_freq_factor = 4\n",
                                 "layer.attention.rope.original_max_position_embeddings = 8192\n"})
            QVERIFY2(QString::fromStdString(other.text).contains(QLatin1String(line)), line);
    }

    // Megatron-LM's MLA and DeepSeek routing options, each from the model (arguments.py @ d98e8a64).
    void megatronDeepseek()
    {
        const Case c{"deepseek-v3", "p5.48xlarge", 32, 1024, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(ExportFormat::Megatron, c, "tp=8,sp=on,zero=1,mb=1,recompute=full");
        QVERIFY2(r.ok(), r.refusals.empty() ? "" : r.refusals.front().c_str());
        const QString t = QString::fromStdString(r.text);
        for (const char* expected :
             {"--multi-latent-attention\n", "--qk-layernorm\n", "--position-embedding-type rope\n", "--q-lora-rank 1536\n", "--kv-lora-rank 512\n", "--qk-head-dim 128\n",
              "--qk-pos-emb-head-dim 64\n", "--v-head-dim 128\n", "--rope-type yarn\n", "--rotary-scaling-factor 40\n",
              "--mscale 1\n", "--mscale-all-dim 1\n", "--num-experts 256\n", "--moe-router-topk 8\n",
              "--moe-ffn-hidden-size 2048\n", "--moe-shared-expert-intermediate-size 2048\n",
              "--moe-layer-freq '[0]*3+[1]*58'\n", "--moe-router-score-function sigmoid\n",
              "--moe-router-enable-expert-bias\n", "--moe-router-num-groups 8\n", "--moe-router-group-topk 4\n",
              "--moe-router-topk-scaling-factor 2.5\n", "--norm-epsilon 1e-06\n"})
            QVERIFY2(t.contains(QLatin1String(expected)), expected);
        QVERIFY(!t.contains(QLatin1String("--kv-channels")));  // MLA has its own head sizes
        QVERIFY(!t.contains(QLatin1String("--group-query-attention")));
        // q_lora_rank null: no --q-lora-rank (Megatron's None, one q projection).
        Problem p = problem(c);
        p.model.mla.q_lora_rank = 0;
        const char* mla = "tp=8,sp=on,zero=1,mb=1,recompute=full";
        const ExportResult plain = exportSettings(ExportFormat::Megatron, p, layout(mla, p));
        QVERIFY(plain.ok());
        QVERIFY(!QString::fromStdString(plain.text).contains(QLatin1String("--q-lora-rank")));
        // YaRN at other betas than MLATransformerConfig's fixed ones: refused by name.
        p.model.rope_scaling.beta_fast = 16;
        const ExportResult betas = exportSettings(ExportFormat::Megatron, p, layout(mla, p));
        QVERIFY(!betas.ok());
        QVERIFY2(QString::fromStdString(betas.refusals.front()).contains("Megatron's MLA keeps 4096, 32 and 1"),
                 betas.refusals.front().c_str());
        // Megatron-Bridge's MLAModelProvider takes them as fields, and q_lora_rank None (its
        // field's default is 512).
        const ExportResult bridge = exportSettings(ExportFormat::MegatronBridge, p, layout(mla, p));
        QVERIFY2(bridge.ok(), bridge.refusals.empty() ? "" : bridge.refusals.front().c_str());
        const QString b = QString::fromStdString(bridge.text);
        for (const char* expected : {"cfg.model = MLAModelProvider(\n", "        beta_fast=16,\n", "        beta_slow=1,\n",
                                     "        original_max_position_embeddings=4096,\n", "        q_lora_rank=None,\n",
                                     "        qk_layernorm=True,\n", "        rope_type=\"yarn\",\n"})
            QVERIFY2(b.contains(QLatin1String(expected)), expected);
        QVERIFY(!b.contains(QLatin1String("kv_channels")));
    }

    void refused()
    {
        QFETCH(ExportFormat, format);
        QFETCH(QByteArray, model);
        QFETCH(QByteArray, node);
        QFETCH(int, nodes);
        QFETCH(int, precision);
        QFETCH(QByteArray, layout);
        QFETCH(QString, feature);
        const Case c{model.constData(), node.constData(), nodes, 512, 2048, Precision(precision)};
        const ExportResult r = exported(format, c, layout.constData());
        QVERIFY(!r.ok());
        QVERIFY(r.text.empty());
        QString all;
        for (const std::string& refusal : r.refusals)
            all += QString::fromStdString(refusal) + "\n";
        QVERIFY2(all.contains(feature), qPrintable(all));
        const QString prefix = QString::fromLatin1(toString(format)) + ": ";
        for (const std::string& refusal : r.refusals)
            QVERIFY2(QString::fromStdString(refusal).startsWith(prefix), refusal.c_str());
        // The same refusals, feature and reason apart (export --json).
        QCOMPARE(r.refused.size(), r.refusals.size());
        for (size_t i = 0; i < r.refused.size(); ++i) {
            QVERIFY(!r.refused[i].feature.empty() && !r.refused[i].reason.empty());
            QVERIFY(r.refusals[i].find(r.refused[i].feature) != std::string::npos);
            QVERIFY(r.refusals[i].find(r.refused[i].reason) != std::string::npos);
        }
    }

    // Every feature at once, like validate(): the planner's best layout for Llama 2 70B on trn1.
    void everyRefusalReported()
    {
        const Case c{"llama-2-70b", "trn1.32xlarge", 32, 1024, 4096, Precision::BF16Mixed};
        const ExportResult r = exported(
            ExportFormat::DeepSpeed, c,
            "dp=8,tp=4,pp=4,cp=8,sp=on,zero=3,zero_group=1,mb=2,schedule=interleaved,v=5,recompute=selective");
        // device, the cp ring, cp with AutoTP, sp, tp with pp, AutoTP with ZeRO-3, ZeRO-3 with pp,
        // interleaved, selective.
        QCOMPARE(r.refusals.size(), size_t(9));
    }

    // Megatron's "Expert data parallel size should be divisible by partial DistOpt shard factor"
    // (parallel_state.py @ d98e8a64) is core's layout rule: every exporter refuses such a plan as an
    // invalid layout, naming it. (64 devices: dp 16 x tp 4; ep 8 x etp 4 leaves edp 2 for 4 replicas.)
    void expertDpVsOptimizerInstancesIsALayoutRule()
    {
        const Problem p = problem({"mixtral-8x7b", "p5.48xlarge", 8, 512, 2048, Precision::BF16Mixed});
        FieldErrors errors;
        const Layout l = parseLayout("dp=16,tp=4,sp=on,ep=8,zero=1,zero_group=4", errors);
        QVERIFY(errors.empty());
        for (const ExportFormat f : {ExportFormat::Megatron, ExportFormat::MegatronBridge}) {
            const ExportResult r = exportSettings(f, p, l);
            QVERIFY(!r.ok());
            QCOMPARE(r.refusals.size(), size_t(1));
            QCOMPARE(r.refusals.front(), std::string(toString(f)) +
                                             ": layout.zero_group: 4 ZeRO replicas (dp 16 / zero_group 4) do not "
                                             "divide the expert-data-parallel group edp = tp x cp x dp / (ep x etp) = 2");
        }
        // With a shard group of 8 the 2 replicas divide it: exported.
        const Layout two = parseLayout("dp=16,tp=4,sp=on,ep=8,zero=1,zero_group=8", errors);
        const ExportResult ok = exportSettings(ExportFormat::Megatron, p, two);
        QVERIFY2(ok.ok(), ok.refusals.empty() ? "" : ok.refusals.front().c_str());
        QVERIFY(ok.text.find("--num-distributed-optimizer-instances 2") != std::string::npos);
    }

    void invalidLayoutIsRefused()
    {
        Problem p = problem({"llama-2-7b", "p5.48xlarge", 4, 512, 2048, Precision::BF16Mixed});
        Layout l;
        l.dp = 32;
        l.tp = 3;  // does not divide 32 heads, nor the device count
        const ExportResult r = exportSettings(ExportFormat::Megatron, p, l);
        QVERIFY(!r.ok());
        QVERIFY(r.refusals.front().rfind("megatron: layout.", 0) == 0);
    }

    void formatNames()
    {
        QCOMPARE(exportFormatChoices(),
                 std::string("megatron|deepspeed|neuronx|fsdp|torchtitan|megatron-bridge|maxtext|nxd-training"));
        for (ExportFormat f : exportFormats())
            QCOMPARE(exportFormatFromString(toString(f)), std::optional<ExportFormat>(f));
        QCOMPARE(exportFormats().size(), size_t(8));
        QCOMPARE(std::string(exportFileExtension(ExportFormat::DeepSpeed)), std::string("json"));
        QCOMPARE(std::string(exportFileExtension(ExportFormat::MaxText)), std::string("yaml"));
        QCOMPARE(std::string(exportFileExtension(ExportFormat::Torchtitan)), std::string("py"));
        QCOMPARE(exportFormatFromString("Megatron"), std::nullopt);
    }

    // shardscope-cli export end to end on a small saved plan.
    void cliExport()
    {
        // (bf16 gradients: DeepSpeed's ZeRO-2 keeps them so.)
        const CliRun plan = cli({"plan", "--model", "gpt2-small", "--node-type", "p4d.24xlarge", "--nodes", "1",
                                 "--global-batch", "64", "--seq", "1024", "--main-grads", "bf16", "--out", planFile()});
        QVERIFY2(plan.exitCode == 0, plan.err.constData());

        const CliRun fsdp = cli({"export", "--plan", planFile(), "--format", "fsdp", "--layout", "zero=3,mb=2"});
        QVERIFY2(fsdp.exitCode == 0, fsdp.err.constData());
        QVERIFY(fsdp.out.contains("RESHARD_AFTER_FORWARD = True\n"));
        QVERIFY(fsdp.out.contains("GRADIENT_ACCUMULATION_STEPS = 4"));  // 64 / (8 ranks x 2)

        // --out writes the same text; DeepSpeed's notes go to stderr, the file stays JSON.
        const QString out = dir_->filePath(QStringLiteral("ds_config.json"));
        const CliRun ds = cli({"export", "--plan", planFile(), "--format", "deepspeed", "--layout", "zero=2,mb=2",
                               "--out", out});
        QVERIFY2(ds.exitCode == 0, ds.err.constData());
        QVERIFY(ds.out.isEmpty());
        QVERIFY(ds.err.contains("note: train_batch_size 64"));
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject json = QJsonDocument::fromJson(file.readAll()).object();
        QCOMPARE(json["zero_optimization"].toObject()["stage"].toInt(), 2);
        QCOMPARE(json["gradient_accumulation_steps"].toInt(), 4);
    }

    // export --json: the documented keys, the same whether the framework runs the layout or not.
    void cliExportJson()
    {
        if (!QFile::exists(planFile()))
            QSKIP("needs the plan written by cliExport");
        const QStringList keys{"schema", "format", "layout", "runs", "file_extension", "settings", "notes", "refusals"};
        const CliRun ok = cli({"export", "--plan", planFile(), "--format", "deepspeed", "--layout", "zero=2,mb=2", "--json"});
        QCOMPARE(ok.exitCode, 0);
        const QJsonObject o = QJsonDocument::fromJson(ok.out).object();
        QCOMPARE(QStringList(o.keys()).size(), keys.size());
        for (const QString& k : keys)
            QVERIFY2(o.contains(k), qPrintable(k));
        QCOMPARE(o["schema"].toString(), QStringLiteral("shardscope.export/1"));
        QCOMPARE(o["format"].toString(), QStringLiteral("deepspeed"));
        QVERIFY(o["runs"].toBool());
        QCOMPARE(o["file_extension"].toString(), QStringLiteral("json"));
        QCOMPARE(QJsonDocument::fromJson(o["settings"].toString().toUtf8()).object()["gradient_accumulation_steps"].toInt(), 4);
        QVERIFY(o["notes"].toArray().first().toString().startsWith("train_batch_size 64"));
        QVERIFY(o["refusals"].toArray().isEmpty());

        const CliRun no = cli({"export", "--plan", planFile(), "--format", "maxtext", "--layout", "zero=2,mb=2", "--json"});
        QCOMPARE(no.exitCode, 2);
        const QJsonObject n = QJsonDocument::fromJson(no.out).object();
        for (const QString& k : keys)
            QVERIFY2(n.contains(k), qPrintable(k));
        QVERIFY(!n["runs"].toBool());
        QVERIFY(n["settings"].toString().isEmpty());
        const QJsonArray refusals = n["refusals"].toArray();
        QCOMPARE(refusals.size(), 2);  // an A100 GPU is NVIDIA: ZeRO-2 and gpt2's architecture
        QStringList features;
        for (const QJsonValue& v : refusals) {
            const QJsonObject e = v.toObject();
            QVERIFY(!e["reason"].toString().isEmpty());
            QVERIFY(e["message"].toString().startsWith("maxtext: " + e["feature"].toString()));
            features << e["feature"].toString();
        }
        QVERIFY2(features.contains("ZeRO-2"), qPrintable(features.join(';')));
    }

    void cliRefusesByName()
    {
        if (!QFile::exists(planFile()))
            QSKIP("needs the plan written by cliExport");
        const CliRun refused = cli({"export", "--plan", planFile(), "--format", "fsdp", "--layout", "tp=2,zero=3"});
        QCOMPARE(refused.exitCode, 2);
        QVERIFY(refused.out.isEmpty());
        QVERIFY2(refused.err.contains("fsdp: tensor parallelism (tp=2) for gpt2-small"), refused.err.constData());

        const CliRun badFormat = cli({"export", "--plan", planFile(), "--format", "jax"});
        QCOMPARE(badFormat.exitCode, 2);
        QVERIFY(badFormat.err.contains("megatron|deepspeed|neuronx|fsdp|torchtitan|megatron-bridge|maxtext|nxd-training"));

        const CliRun noPlan = cli({"export", "--format", "megatron"});
        QCOMPARE(noPlan.exitCode, 2);
        QVERIFY(noPlan.err.contains("--plan"));

        const CliRun badLayout = cli({"export", "--plan", planFile(), "--format", "megatron", "--layout", "tp=5"});
        QCOMPARE(badLayout.exitCode, 2);
        QVERIFY(badLayout.err.contains("layout.tp"));
    }
};

QTEST_GUILESS_MAIN(TstPlannerExport)
#include "tst_planner_export.moc"
