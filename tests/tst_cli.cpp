// shardscope-cli end to end: the real executable run with QProcess against a
// private catalog database in a QTemporaryDir. Exit codes (0 ok, 2 bad usage or
// input), the key parts of error messages, JSON output, and the catalog's
// import/export/remove round trip and all-or-nothing bundles.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include <map>
#include <memory>
#include <utility>

#include <signal.h>
#include <sys/stat.h>

#ifndef SHARDSCOPE_CLI_PATH
#error "SHARDSCOPE_CLI_PATH must name the shardscope-cli executable"
#endif
#ifndef SHARDSCOPE_PROJECT_VERSION
#error "SHARDSCOPE_PROJECT_VERSION must hold the CMake project version"
#endif
#if !defined(SHARDSCOPE_PACKAGE_VERSION) || !defined(SHARDSCOPE_GIT_SHA) || !defined(SHARDSCOPE_GIT_DATE)
#error "SHARDSCOPE_PACKAGE_VERSION, SHARDSCOPE_GIT_SHA and SHARDSCOPE_GIT_DATE must come from cmake/BuildVersion.cmake"
#endif

namespace {

struct RunResult {
    bool finished = false;
    QProcess::ExitStatus status = QProcess::CrashExit;
    int exitCode = -1;
    QByteArray out;
    QByteArray err;

    // For failure messages: everything we know about the run.
    QByteArray describe() const
    {
        return "exit code " + QByteArray::number(exitCode) + (finished ? "" : " (did not finish)") +
               (status == QProcess::NormalExit ? "" : " (crashed)") + "\n--- stdout:\n" + out.left(2000) +
               "\n--- stderr:\n" + err.left(2000);
    }
};

// A plain model document (gpt2-small's shape) that the catalog accepts.
QJsonObject modelDocument(const QString& name)
{
    return QJsonObject{
        {"schema", "shardscope.model/1"},
        {"name", name},
        {"display_name", "Test model " + name},
        {"family", "decoder"},
        {"layers", 12},
        {"hidden", 768},
        {"heads", 12},
        {"kv_heads", 12},
        {"head_dim", 64},
        {"ffn_hidden", 3072},
        {"mlp", "gelu"},
        {"vocab", 50257},
        {"max_seq", 1024},
        {"positions", "learned"},
        {"norm", "layernorm"},
        {"bias", true},
        {"tied_embeddings", true},
        {"final_norm", true},
        {"embedding_norm", false},
        {"pooler", false},
    };
}

QByteArray compact(const QJsonObject& o) { return QJsonDocument(o).toJson(QJsonDocument::Compact); }

} // namespace

class TstCli : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<QTemporaryDir> dir_;

    QString dbPath() const { return dir_->filePath(QStringLiteral("catalog.sqlite")); }
    QString file(const QString& name) const { return dir_->filePath(name); }

    // Runs shardscope-cli with `--db <temp db>` first (unless withDb is false).
    // $SHARDSCOPE_DB and $XDG_DATA_HOME point into the temp dir as well, so that
    // even a run without --db can never touch the user's real catalog.
    RunResult run(const QStringList& args, bool withDb = true) const
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SHARDSCOPE_DB"), file(QStringLiteral("env-default.sqlite")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), file(QStringLiteral("xdg-data")));
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), file(QStringLiteral("xdg-config")));
        p.setProcessEnvironment(env);
        p.setWorkingDirectory(dir_->path());
        QStringList all;
        if (withDb)
            all << QStringLiteral("--db") << dbPath();
        all << args;
        p.start(QStringLiteral(SHARDSCOPE_CLI_PATH), all);
        RunResult r;
        if (!p.waitForStarted(-1)) {
            r.err = "could not start " SHARDSCOPE_CLI_PATH ": " + p.errorString().toUtf8();
            return r;
        }
        // Safety net only (no timing is asserted): a hung CLI fails instead of blocking the suite.
        r.finished = p.waitForFinished(120'000);
        if (!r.finished) {
            p.kill();
            p.waitForFinished(-1);
        }
        r.status = p.exitStatus();
        r.exitCode = r.finished && r.status == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = p.readAllStandardOutput();
        r.err = p.readAllStandardError();
        return r;
    }

    bool writeFile(const QString& path, const QByteArray& content) const
    {
        QFile f(path);
        return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(content) == content.size();
    }

    static QString substitute(QString s, const QString& dir) { return s.replace(QStringLiteral("@DIR@"), dir); }

private slots:
    void init()
    {
        dir_ = std::make_unique<QTemporaryDir>();
        QVERIFY2(dir_->isValid(), qPrintable(dir_->errorString()));
    }
    void cleanup() { dir_.reset(); }

    void help_data()
    {
        QTest::addColumn<QString>("option");
        QTest::newRow("--help") << QStringLiteral("--help");
        QTest::newRow("-h") << QStringLiteral("-h");
    }

    void help()
    {
        QFETCH(QString, option);
        const RunResult r = run({option});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QString out = QString::fromUtf8(r.out);
        for (const char* word : {"demo", "catalog list", "catalog show", "catalog import", "catalog export",
                                 "catalog remove", "--db", "--version"})
            QVERIFY2(out.contains(QLatin1String(word)), qPrintable(QStringLiteral("help lacks \"%1\":\n%2")
                                                                        .arg(QLatin1String(word), out)));
        QVERIFY2(r.err.isEmpty(), r.describe().constData());
    }

    void version()
    {
        QVERIFY2(QRegularExpression(QStringLiteral("^\\d+\\.\\d+\\.\\d+"))
                     .match(QStringLiteral(SHARDSCOPE_PROJECT_VERSION))
                     .hasMatch(),
                 "SHARDSCOPE_PROJECT_VERSION is not a version number");
        // In a git checkout: PROJECT_VERSION+git<commits>.g<sha>, and the commit named after it.
        const QByteArray sha = SHARDSCOPE_GIT_SHA;
        const QByteArray expected = sha.isEmpty() ? QByteArray("shardscope-cli " SHARDSCOPE_PROJECT_VERSION)
                                                  : "shardscope-cli " SHARDSCOPE_PACKAGE_VERSION " (commit " + sha +
                                                        ", " SHARDSCOPE_GIT_DATE ")";
        if (!sha.isEmpty())
            QVERIFY2(QRegularExpression(QStringLiteral("^%1\\+git\\d+\\.g%2$")
                                            .arg(QRegularExpression::escape(QStringLiteral(SHARDSCOPE_PROJECT_VERSION)),
                                                 QString::fromLatin1(sha)))
                         .match(QStringLiteral(SHARDSCOPE_PACKAGE_VERSION))
                         .hasMatch(),
                     SHARDSCOPE_PACKAGE_VERSION);
        const RunResult r = run({QStringLiteral("--version")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        QCOMPARE(r.out, expected + "\n");
        QVERIFY2(r.err.isEmpty(), r.describe().constData());
        // --version needs no database: none may be created.
        QVERIFY(!QFile::exists(dbPath()));
    }

    // Per-command help: that command's options only, with defaults and an example, whichever
    // way it is asked for.
    void commandHelp_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("usage");        // the first line starts with it
        QTest::addColumn<QStringList>("contains"); // plain substrings
        QTest::addColumn<QStringList>("lacks");    // other commands' options
        QTest::newRow("plan --help") << QStringList{"plan", "--help"} << "Usage: shardscope-cli plan --model"
                                     << QStringList{"--objective throughput|time|cost", "(default: throughput)",
                                                    "--top K", "(default: 10)", "--out FILE", "(required)",
                                                    "Example:\n  shardscope-cli plan --model"}
                                     << QStringList{"--suite", "catalog import", "--format", "--node-types"};
        QTest::newRow("help plan") << QStringList{"help", "plan"} << "Usage: shardscope-cli plan --model"
                                   << QStringList{"--objective", "(default: 10)"} << QStringList{"--suite"};
        QTest::newRow("sweep -h: its own default top") << QStringList{"sweep", "-h"} << "Usage: shardscope-cli sweep"
                                                      << QStringList{"--top K", "(default: 1)", "--quiet"}
                                                      << QStringList{"--out FILE", "(default: 10)"};
        QTest::newRow("export -h") << QStringList{"export", "-h"} << "Usage: shardscope-cli export --plan"
                                   << QStringList{"--format megatron|deepspeed|neuronx|fsdp|torchtitan|megatron-bridge|maxtext|nxd-training",
                                                 "--json", "Examples:"}
                                   << QStringList{"--objective", "--suite"};
        QTest::newRow("catalog list --help")
            << QStringList{"catalog", "list", "--help"} << "Usage: shardscope-cli catalog list"
            << QStringList{"--kind models|chips|nodes", "--names", "--json"} << QStringList{"--replace", "--out"};
        QTest::newRow("help catalog list") << QStringList{"help", "catalog", "list"}
                                           << "Usage: shardscope-cli catalog list" << QStringList{"--kind"}
                                           << QStringList{"--replace"};
        QTest::newRow("catalog --help: the verbs")
            << QStringList{"catalog", "--help"} << "Usage: shardscope-cli catalog VERB"
            << QStringList{"catalog list", "catalog show NAME", "catalog import", "catalog export", "catalog remove"}
            << QStringList{"--objective"};
        QTest::newRow("validate --help") << QStringList{"validate", "--help"} << "Usage: shardscope-cli validate --suite"
                                         << QStringList{"--device NAME[:scale]", "(default: trainium1:0.001)"}
                                         << QStringList{"--objective"};
    }

    void commandHelp()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, usage);
        QFETCH(QStringList, contains);
        QFETCH(QStringList, lacks);
        const RunResult r = run(args);
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        QVERIFY2(r.err.isEmpty(), r.describe().constData());
        const QString out = QString::fromUtf8(r.out);
        QVERIFY2(out.startsWith(usage), qPrintable(out));
        for (const QString& c : contains)
            QVERIFY2(out.contains(c), qPrintable(QStringLiteral("help lacks \"%1\":\n%2").arg(c, out)));
        for (const QString& l : lacks)
            QVERIFY2(!out.contains(l), qPrintable(QStringLiteral("help has \"%1\":\n%2").arg(l, out)));
        // The global help is shorter than any one command's options would make it.
        QVERIFY2(!out.contains(QLatin1String("Commands:")), qPrintable(out));
        // Help needs no database.
        QVERIFY(!QFile::exists(dbPath()));
    }

    // Issue 16: a MoE plan's table shows the expert grid (ep, etp) per layout; a dense one's is as before.
    void planTableShowsTheExpertGrid()
    {
        const RunResult moe = run({"plan", "--model", "mixtral-8x7b", "--node-type", "p5.48xlarge", "--nodes", "1",
                                   "--global-batch", "64", "--seq", "1024", "--flash-attention", "--fix", "ep=8", "--top",
                                   "2"});
        QVERIFY2(moe.finished && moe.exitCode == 0, moe.err.constData());
        const QList<QByteArray> lines = moe.out.split('\n');
        const auto header = std::find_if(lines.begin(), lines.end(), [](const QByteArray& l) { return l.contains("tokens/s"); });
        QVERIFY(header != lines.end());
        QVERIFY2(header->contains("   cp   ep etp sp"), header->constData());
        QVERIFY2((header + 1)->simplified().split(' ').value(5) == "8", (header + 1)->constData());  // # dp tp pp cp ep
        const RunResult dense = run({"plan", "--model", "gpt3-1.3b", "--node-type", "p5.48xlarge", "--nodes", "1",
                                     "--global-batch", "64", "--seq", "1024", "--top", "1"});
        QVERIFY2(dense.finished && dense.exitCode == 0, dense.err.constData());
        QVERIFY(!dense.out.contains(" ep etp "));
    }

    // cp_comm=a2a is not a column: the table's plans with all-to-all context parallelism are named.
    void planTableNamesAllToAllContextParallelism()
    {
        const RunResult a2a = run({"plan", "--model", "llama-2-7b", "--node-type", "p5.48xlarge", "--nodes", "1",
                                   "--global-batch", "16", "--seq", "8192", "--flash-attention", "--fix",
                                   "cp=4,cp_comm=a2a", "--top", "2"});
        QVERIFY2(a2a.finished && a2a.exitCode == 0, a2a.err.constData());
        QVERIFY2(a2a.out.contains("all-to-all context parallelism (cp_comm=a2a, Ulysses) in plans 1, 2;"),
                 a2a.out.constData());
        const RunResult ring = run({"plan", "--model", "llama-2-7b", "--node-type", "p5.48xlarge", "--nodes", "1",
                                    "--global-batch", "16", "--seq", "8192", "--flash-attention", "--fix", "cp=4",
                                    "--top", "2"});
        QVERIFY2(ring.finished && ring.exitCode == 0, ring.err.constData());
        QVERIFY(!ring.out.contains("cp_comm=a2a"));
    }

    void helpFormsAgree()
    {
        const RunResult a = run({QStringLiteral("plan"), QStringLiteral("--help")});
        const RunResult b = run({QStringLiteral("help"), QStringLiteral("plan")});
        const RunResult c = run({QStringLiteral("plan"), QStringLiteral("--model"), QStringLiteral("x"),
                                 QStringLiteral("-h")});
        QVERIFY2(a.exitCode == 0 && b.exitCode == 0 && c.exitCode == 0, (a.describe() + b.describe()).constData());
        QCOMPARE(a.out, b.out);
        QCOMPARE(a.out, c.out);
    }

    // The names catalog list --names prints are exactly the entries (what completion offers).
    void catalogNames()
    {
        const RunResult names = run({QStringLiteral("catalog"), QStringLiteral("list"), QStringLiteral("--names"),
                                     QStringLiteral("--kind"), QStringLiteral("nodes")});
        const RunResult json = run({QStringLiteral("catalog"), QStringLiteral("list"), QStringLiteral("--json"),
                                    QStringLiteral("--kind"), QStringLiteral("nodes")});
        QVERIFY2(names.exitCode == 0 && json.exitCode == 0, (names.describe() + json.describe()).constData());
        QStringList expected;
        for (const QJsonValue& v : QJsonDocument::fromJson(json.out).array())
            expected << v.toObject().value(QLatin1String("name")).toString();
        QVERIFY(expected.contains(QLatin1String("trn1.32xlarge")));
        QCOMPARE(QString::fromUtf8(names.out).split(QLatin1Char('\n'), Qt::SkipEmptyParts), expected);
    }

    void badUsageOrInput_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QByteArray>("inputFile");       // written to @DIR@/input.json when not empty
        QTest::addColumn<QStringList>("stderrPatterns"); // regular expressions, case-insensitive

        const QByteArray none;
        QTest::newRow("no command") << QStringList{} << none << QStringList{"command", "usage"};
        QTest::newRow("unknown command") << QStringList{"frobnicate"} << none << QStringList{"frobnicate"};
        QTest::newRow("misspelt command: did you mean")
            << QStringList{"plann"} << none << QStringList{"unknown command \"plann\"", "did you mean plan\\?"};
        QTest::newRow("misspelt option: did you mean")
            << QStringList{"plan", "--objectiv", "time"} << none
            << QStringList{"unknown option --objectiv for plan", "did you mean --objective\\?", "plan --help"};
        QTest::newRow("misspelt catalog verb: did you mean")
            << QStringList{"catalog", "lst"} << none << QStringList{"\"lst\"", "did you mean list\\?"};
        QTest::newRow("help for an unknown command")
            << QStringList{"help", "validat"} << none << QStringList{"validat", "did you mean validate\\?"};
        QTest::newRow("an option of another catalog verb")
            << QStringList{"catalog", "list", "--replace"} << none << QStringList{"--replace for catalog list"};
        QTest::newRow("misspelt global option")
            << QStringList{"--verison"} << none << QStringList{"--verison", "did you mean --version\\?"};
        QTest::newRow("unknown top-level option")
            << QStringList{"--frobnicate"} << none << QStringList{"--frobnicate"};
        QTest::newRow("unknown catalog option")
            << QStringList{"catalog", "list", "--frobnicate"} << none << QStringList{"--frobnicate"};
        QTest::newRow("unknown demo option") << QStringList{"demo", "--frobnicate"} << none
                                             << QStringList{"--frobnicate"};
        QTest::newRow("catalog without verb") << QStringList{"catalog"} << none << QStringList{"usage"};
        QTest::newRow("unknown catalog verb")
            << QStringList{"catalog", "frobnicate"} << none << QStringList{"frobnicate"};
        QTest::newRow("show without name") << QStringList{"catalog", "show"} << none << QStringList{"usage"};
        QTest::newRow("show with an extra argument")
            << QStringList{"catalog", "show", "gpt2-small", "extra"} << none << QStringList{"extra"};
        QTest::newRow("list with a bad kind")
            << QStringList{"catalog", "list", "--kind", "bogus"} << none << QStringList{"--kind", "bogus"};
        QTest::newRow("show unknown name")
            << QStringList{"catalog", "show", "no-such-model"} << none << QStringList{"no-such-model"};
        QTest::newRow("show misspelt gpt2-smal suggests gpt2-small")
            << QStringList{"catalog", "show", "gpt2-smal"} << none << QStringList{"gpt2-smal(?!l)", "gpt2-small"};
        QTest::newRow("show misspelt llama-3-8 suggests llama-3-8b")
            << QStringList{"catalog", "show", "llama-3-8"} << none << QStringList{"llama-3-8(?!b)", "llama-3-8b"};
        QTest::newRow("show misspelt trn1.32xlarg suggests trn1.32xlarge")
            << QStringList{"catalog", "show", "trn1.32xlarg"} << none
            << QStringList{"trn1\\.32xlarg(?!e)", "trn1\\.32xlarge"};
        QTest::newRow("export unknown name")
            << QStringList{"catalog", "export", "no-such-model"} << none << QStringList{"no-such-model"};
        QTest::newRow("import missing file")
            << QStringList{"catalog", "import", "@DIR@/missing.json"} << none << QStringList{"missing\\.json"};
        QTest::newRow("import truncated JSON")
            << QStringList{"catalog", "import", "@DIR@/input.json"}
            << QByteArray("{\n  \"schema\": \"shardscope.model/1\",\n  \"name\": \"cut\",\n  \"layers\": 12,\n")
            << QStringList{"input\\.json", "\\bline\\b"};
        QTest::newRow("import JSON that is not an object")
            << QStringList{"catalog", "import", "@DIR@/input.json"} << QByteArray("[1, 2, 3]\n")
            << QStringList{"input\\.json", "object"};
        QJsonObject huge = modelDocument(QStringLiteral("huge-model"));
        huge.insert(QStringLiteral("layers"), 1e30);
        QTest::newRow("import model with layers 1e30")
            << QStringList{"catalog", "import", "@DIR@/input.json"} << compact(huge) << QStringList{"layers"};
        QTest::newRow("import over a built-in")
            << QStringList{"catalog", "import", "@DIR@/input.json"} << compact(modelDocument(QStringLiteral("gpt2-small")))
            << QStringList{"gpt2-small", "built.?in"};
        QTest::newRow("import over a built-in with --replace")
            << QStringList{"catalog", "import", "@DIR@/input.json", "--replace"}
            << compact(modelDocument(QStringLiteral("gpt2-small"))) << QStringList{"gpt2-small", "built.?in"};
        QTest::newRow("import a model named like a built-in chip")
            << QStringList{"catalog", "import", "@DIR@/input.json", "--replace"}
            << compact(modelDocument(QStringLiteral("trainium1"))) << QStringList{"trainium1"};
        QTest::newRow("remove a built-in")
            << QStringList{"catalog", "remove", "gpt2-small"} << none << QStringList{"gpt2-small", "built.?in"};
        QTest::newRow("remove unknown name")
            << QStringList{"catalog", "remove", "no-such-model"} << none << QStringList{"no-such-model"};
        QTest::newRow("demo --nodes abc") << QStringList{"demo", "--nodes", "abc"} << none
                                          << QStringList{"--nodes", "abc"};
        QTest::newRow("demo --nodes 0 out of range") << QStringList{"demo", "--nodes", "0"} << none
                                                     << QStringList{"--nodes"};
        QTest::newRow("demo --nodes 1.5 not an integer") << QStringList{"demo", "--nodes", "1.5"} << none
                                                         << QStringList{"--nodes", "1\\.5"};
        // Issue 19: an option given twice, and integers written as anything but decimal digits.
        QTest::newRow("demo --nodes twice") << QStringList{"demo", "--nodes", "1", "--nodes", "2"} << none
                                            << QStringList{"--nodes given twice", "\"1\" and \"2\""};
        QTest::newRow("demo --nodes=1 --nodes 2") << QStringList{"demo", "--nodes=1", "--nodes", "2"} << none
                                                  << QStringList{"--nodes given twice"};
        for (const char* text : {"0x10", "+2", " 2", "2 ", "2e0", "1.0", "inf"})
            QTest::newRow(qPrintable(QString("demo --nodes \"%1\" not an integer").arg(text)))
                << QStringList{"demo", "--nodes", text} << none
                << QStringList{"--nodes", QRegularExpression::escape(QString("\"%1\" is not an integer").arg(text))};
        QTest::newRow("demo --tokens 0x1p40 not a number")
            << QStringList{"demo", "--tokens", "0x1p40"} << none << QStringList{"--tokens", "not a number"};
        QTest::newRow("demo --model unknown") << QStringList{"demo", "--model", "gpt9-huge"} << none
                                              << QStringList{"gpt9-huge"};
        QTest::newRow("option missing its value")
            << QStringList{"catalog", "export", "gpt2-small", "--out"} << none << QStringList{"--out"};
        const QStringList predict{"predict", "--model", "llama-2-70b", "--node-type", "trn1.32xlarge", "--nodes", "4",
                                  "--global-batch", "1024", "--seq", "4096", "--layout"};
        QTest::newRow("validate: nothing to validate") << QStringList{"validate"} << none << QStringList{"--suite"};
        QTest::newRow("validate: unknown profile")
            << QStringList{"validate", "--suite", "--profile", "gpu"} << none << QStringList{"--profile"};
        QTest::newRow("validate: direct case the engine cannot shard")
            << QStringList{"validate", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "96", "--seq", "32",
                           "--batch", "8", "--layout", "tp=3"}
            << none << QStringList{"tp"};
        QTest::newRow("validate: full-size case without nodes or devices")
            << QStringList{"validate", "--model", "llama-2-7b", "--node-type", "trn1.32xlarge", "--global-batch", "256",
                           "--seq", "4096", "--layout", "tp=8"}
            << none << QStringList{"--devices"};
        QTest::newRow("validate: devices not a whole number of nodes")
            << QStringList{"validate", "--model", "llama-2-7b", "--node-type", "trn1.32xlarge", "--devices", "60",
                           "--global-batch", "256", "--seq", "4096", "--layout", "tp=8"}
            << none << QStringList{"devices", "32 devices each"};
        QTest::newRow("calibrate: a holdout without a fit")
            << QStringList{"calibrate", "--holdout", "0.3"} << none << QStringList{"--holdout", "--fit"};
        QTest::newRow("calibrate: a device for the published runs")
            << QStringList{"calibrate", "--device", "trainium1:0.001"} << none << QStringList{"--device", "--engine"};
        // FP8/FP4 recipes (issue 15): a name that is not one, a chip that does not run the recipe
        // (named with what it runs), and the emulated device's refusal to validate a quantized plan.
        QTest::newRow("predict: unknown precision")
            << (predict + QStringList{"tp=8", "--precision", "fp8-tensorwise"}) << none
            << QStringList{"--precision", "fp8-delayed", "fp8-blockwise", "fp8-rowwise", "mxfp8", "nvfp4"};
        QTest::newRow("predict: fp8 on Trainium")
            << (predict + QStringList{"tp=8", "--precision", "fp8"}) << none
            << QStringList{"training\\.precision", "fp8 is not a training recipe of trainium1", "use bf16"};
        QTest::newRow("predict: mxfp8 on H100")
            << QStringList{"predict", "--model", "llama-3-8b", "--node-type", "p5.48xlarge", "--nodes", "1",
                           "--global-batch", "64", "--seq", "8192", "--precision", "mxfp8", "--layout", "tp=8"}
            << none
            << QStringList{"mxfp8 is not a training recipe of h100-sxm \\(its FP8/FP4 recipes: fp8, fp8-delayed, "
                           "fp8-blockwise, fp8-rowwise\\)"};
        QTest::newRow("predict: fp8 on A100")
            << QStringList{"predict", "--model", "gpt3-13b", "--node-type", "p4d.24xlarge", "--nodes", "1",
                           "--global-batch", "64", "--seq", "2048", "--precision", "fp8-delayed", "--layout", "tp=8"}
            << none << QStringList{"fp8-delayed is not a training recipe of a100-40gb"};
        QTest::newRow("validate: an mxfp8 plan on the emulated device")
            << QStringList{"validate", "--model", "llama-2-7b", "--node-type", "p6-b200.48xlarge", "--nodes", "1",
                           "--global-batch", "256", "--seq", "4096", "--precision", "mxfp8", "--layout", "tp=8"}
            << none << QStringList{"mxfp8 recipe", "emulated device computes fp32 or bf16"};
        QTest::newRow("predict: tp does not divide heads")
            << (predict + QStringList{"tp=3"}) << none << QStringList{"layout.tp", "heads 64"};
        QTest::newRow("predict: devices do not add up")
            << (predict + QStringList{"dp=2,tp=8,pp=2"}) << none << QStringList{"layout.dp", "128 devices"};
        QTest::newRow("predict: batch not divisible")
            << (predict + QStringList{"tp=8,pp=2,mb=3"}) << none << QStringList{"layout.mb", "global batch 1024"};
        QTest::newRow("predict: unknown layout key")
            << (predict + QStringList{"tp=8,pipeline=2"}) << none << QStringList{"layout.pipeline"};
        // Issue 19: products of layout fields in range overflowed an int (SIGFPE, exit 136) or
        // int64 (a wrong device count); now each is refused by name.
        const QStringList smallPredict{"predict", "--model", "gpt2-small", "--node-type", "trn1.32xlarge", "--nodes",
                                       "1", "--global-batch", "32", "--seq", "1024", "--layout"};
        QTest::newRow("predict: pp x v overflows an int")
            << (smallPredict + QStringList{"pp=65536,v=65536,schedule=interleaved"}) << none
            << QStringList{"layout\\.v", "pp x v = 65536 x 65536 = 4294967296", "overflows"};
        QTest::newRow("predict: tp x cp overflows an int")
            << (smallPredict + QStringList{"tp=65536,cp=65536,sp=on"}) << none
            << QStringList{"layout\\.dp", "4294967296"};
        QTest::newRow("predict: dp x tp x pp x cp overflows int64")
            << (smallPredict + QStringList{"dp=1000000,tp=1000000,pp=1000000,cp=1000000"}) << none
            << QStringList{"layout\\.dp", "more than 9\\.2e18", "overflows"};
        // Issue 19: llama-3-8b with layers 10000, hidden 1048576 and 16384 heads of dim 16384
        // (each in range) imported and showed negative parameters.
        QJsonObject overflowing = modelDocument(QStringLiteral("llama-overflow"));
        for (const auto& [key, value] : {std::pair("layers", 10000), std::pair("hidden", 1048576),
                                         std::pair("heads", 16384), std::pair("kv_heads", 8),
                                         std::pair("head_dim", 16384), std::pair("ffn_hidden", 14336),
                                         std::pair("vocab", 128256), std::pair("max_seq", 8192)})
            overflowing.insert(QLatin1String(key), value);
        QTest::newRow("import a model whose counts overflow int64")
            << QStringList{"catalog", "import", "@DIR@/input.json"} << compact(overflowing)
            << QStringList{"llama-overflow|model\\.", "overflows a 64-bit integer"};
        QTest::newRow("predict: missing --seq")
            << QStringList{"predict", "--model", "llama-2-70b", "--node-type", "trn1.32xlarge", "--nodes", "4",
                           "--global-batch", "1024", "--layout", "tp=8"}
            << none << QStringList{"--seq"};
        QTest::newRow("predict: network not published")
            << QStringList{"predict", "--model", "llama-2-7b", "--node-type", "mi300x-8", "--nodes", "2",
                           "--global-batch", "64", "--seq", "4096", "--layout", "tp=8"}
            << none << QStringList{"inter_node_bytes_per_second", "not published"};
    }

    void badUsageOrInput()
    {
        QFETCH(QStringList, args);
        QFETCH(QByteArray, inputFile);
        QFETCH(QStringList, stderrPatterns);
        if (!inputFile.isEmpty())
            QVERIFY(writeFile(file(QStringLiteral("input.json")), inputFile));
        for (QString& a : args)
            a = substitute(a, dir_->path());

        const RunResult r = run(args);
        QVERIFY2(r.exitCode == 2, r.describe().constData());
        const QString err = QString::fromUtf8(r.err);
        for (const QString& pattern : stderrPatterns) {
            const QRegularExpression re(pattern, QRegularExpression::CaseInsensitiveOption);
            QVERIFY2(re.isValid(), qPrintable(pattern));
            QVERIFY2(re.match(err).hasMatch(),
                     qPrintable(QStringLiteral("stderr does not match /%1/:\n%2").arg(pattern, err)));
        }
        // Errors go to stderr, never as normal output.
        QVERIFY2(!r.out.contains("imported") && !r.out.contains("removed"), r.describe().constData());
    }

    // Progress goes to stderr only on a terminal (script(1) gives the CLI a pseudo-terminal),
    // never with --quiet or into a pipe; stdout is the same either way.
    void progressOnlyOnATerminal()
    {
        if (QStandardPaths::findExecutable(QStringLiteral("script")).isEmpty())
            QSKIP("script(1) (bsdutils) is not installed");
        const QStringList validate{"validate", "--layers", "1", "--hidden", "16", "--heads", "2", "--vocab", "16",
                                   "--seq", "8", "--batch", "2", "--layout", "dp=1", "--steps", "1"};
        auto onTerminal = [&](const QStringList& extra) {
            QStringList words{QStringLiteral(SHARDSCOPE_CLI_PATH), QStringLiteral("--db"), dbPath()};
            words << validate << extra;
            for (QString& w : words)
                w = QLatin1Char('\'') + w + QLatin1Char('\'');
            QProcess p;
            p.start(QStringLiteral("script"), {"-qfec", words.join(QLatin1Char(' ')), "/dev/null"});
            const bool finished = p.waitForFinished(120'000);
            return std::make_pair(finished && p.exitCode() == 0, p.readAllStandardOutput());
        };
        const auto [ok, terminal] = onTerminal({});
        QVERIFY2(ok, terminal.constData());
        QVERIFY2(terminal.contains("validate: training direct"), terminal.constData());
        QVERIFY2(terminal.contains("\r\033[K"), terminal.constData());  // the line is cleared again
        const auto [okQuiet, quiet] = onTerminal({QStringLiteral("--quiet")});
        QVERIFY2(okQuiet, quiet.constData());
        QVERIFY2(!quiet.contains("validate: training"), quiet.constData());
        QVERIFY2(quiet.contains("weights_bytes"), quiet.constData());
        const RunResult piped = run(validate);
        QVERIFY2(piped.exitCode == 0, piped.describe().constData());
        QVERIFY2(!piped.err.contains("validate:"), piped.describe().constData());
    }

    // Ctrl-C stops the suite between cases: exit 130, nothing printed, nothing stored.
    void interruptStoresNothing()
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_DATA_HOME"), file(QStringLiteral("xdg-data")));
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(SHARDSCOPE_CLI_PATH), {"--db", dbPath(), "validate", "--suite"});
        QVERIFY(p.waitForStarted());
        // Once the catalog exists the suite is running (the handler is installed before it).
        for (int i = 0; i < 200 && !QFile::exists(dbPath()); ++i)
            QTest::qWait(50);
        QTest::qWait(500);
        QVERIFY2(p.state() == QProcess::Running, "validate --suite ended before it could be interrupted");
        ::kill(pid_t(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(120'000));
        const QByteArray err = p.readAllStandardError();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 130);
        QVERIFY2(err.contains("interrupted"), err.constData());
        QVERIFY2(p.readAllStandardOutput().isEmpty(), err.constData());
        const RunResult history = run({QStringLiteral("history"), QStringLiteral("--json")});
        QVERIFY2(history.exitCode == 0, history.describe().constData());
        QCOMPARE(QJsonDocument::fromJson(history.out).array().size(), 0);
    }

    // Issue 19: a plan file whose saved layout has pp=65536, v=65536 crashed predict, export,
    // report and validate with SIGFPE; each now refuses it with exit 2, naming layout.v.
    void overflowingLayoutInAPlanFile()
    {
        const QString plan = file(QStringLiteral("plan.json"));
        const RunResult made = run({"plan", "--model", "gpt2-small", "--node-type", "trn1.32xlarge", "--nodes", "1",
                                    "--global-batch", "32", "--seq", "1024", "--top", "1", "--out", plan});
        QVERIFY2(made.exitCode == 0, made.describe().constData());
        QFile f(plan);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
        f.close();
        // Every saved layout of the plan: the best one and those of the alternatives and fronts.
        auto overflow = [](QJsonValue saved) {
            QJsonObject p = saved.toObject();
            QJsonObject layout = p.value("layout").toObject();
            layout["pp"] = 65536;
            layout["v"] = 65536;
            layout["schedule"] = "interleaved";
            p["layout"] = layout;
            p["layout_text"] = "pp=65536,v=65536,schedule=interleaved";
            return p;
        };
        QVERIFY(doc.value("best").toObject().contains("layout"));
        doc["best"] = overflow(doc.value("best"));
        for (const char* list : {"alternatives", "pareto", "pareto_time_cost"}) {
            QJsonArray plans = doc.value(list).toArray();
            for (qsizetype i = 0; i < plans.size(); ++i)
                plans[i] = overflow(plans[i]);
            doc[list] = plans;
        }
        QVERIFY(writeFile(plan, QJsonDocument(doc).toJson()));
        const QString report = file(QStringLiteral("report.html"));
        for (const QStringList& args : {QStringList{"predict", "--plan", plan},
                                        QStringList{"export", "--plan", plan, "--format", "megatron"},
                                        QStringList{"report", "--plan", plan, "--out", report},
                                        QStringList{"validate", "--plan", plan}}) {
            const RunResult r = run(args);
            QVERIFY2(r.exitCode == 2, qPrintable(args.front() + ": " + QString::fromUtf8(r.describe())));
            QVERIFY2(r.err.contains("layout.v") && r.err.contains("overflows"),
                     qPrintable(args.front() + ": " + QString::fromUtf8(r.err)));
        }
        QVERIFY(!QFile::exists(report));
    }

    void demo()
    {
        const RunResult r = run({QStringLiteral("demo")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        QVERIFY2(r.out.contains("174,604,259,328"), r.describe().constData());  // GPT-3 175B, exact
        QVERIFY2(r.out.contains("trn1.32xlarge"), r.describe().constData());
        QVERIFY2(r.err.isEmpty(), r.describe().constData());
        // The database named by --db was used (created), not $SHARDSCOPE_DB.
        QVERIFY(QFile::exists(dbPath()));
        QVERIFY(!QFile::exists(file(QStringLiteral("env-default.sqlite"))));
    }

    void demoOptions_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QStringList>("expected");
        QTest::newRow("llama-3-8b on the default node")
            << QStringList{"demo", "--model", "llama-3-8b"} << QStringList{"8,030,261,248", "trn1.32xlarge"};
        QTest::newRow("gpt3-175b on 8 p5.48xlarge")
            << QStringList{"demo", "--node-type", "p5.48xlarge", "--nodes", "8"}
            << QStringList{"174,604,259,328", "8 x p5.48xlarge"};
    }

    void demoOptions()
    {
        QFETCH(QStringList, args);
        QFETCH(QStringList, expected);
        const RunResult r = run(args);
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        for (const QString& e : expected)
            QVERIFY2(QString::fromUtf8(r.out).contains(e), qPrintable(e + QStringLiteral(" missing\n") +
                                                                      QString::fromUtf8(r.describe())));
    }

    // The prediction document's contract (issue: shardscope.prediction/1 keys), and a layout
    // that does not fit still predicted with its reason (exit 0).
    void predictJson_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<bool>("feasible");
        QTest::newRow("NxD Llama-2-70B layout") << QStringLiteral("dp=4,tp=32,pp=8,sp=on,zero=1,recompute=selective")
                                                << true;
        QTest::newRow("pure data parallel does not fit") << QStringLiteral("dp=1024") << false;
    }
    void predictJson()
    {
        QFETCH(QString, layout);
        QFETCH(bool, feasible);
        const RunResult r = run({"predict", "--model", "llama-2-70b", "--node-type", "trn1.32xlarge", "--nodes", "32",
                                 "--global-batch", "1024", "--seq", "4096", "--layout", layout, "--json"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(o.value("schema").toString(), QStringLiteral("shardscope.prediction/1"));
        QCOMPARE(o.value("feasible").toBool(), feasible);
        QCOMPARE(o.value("reason").toString().isEmpty(), feasible);
        for (const char* key : {"weights", "gradients", "optimizer", "activations", "buffers", "reserve", "total",
                                "capacity"})
            QVERIFY2(o.value("memory_bytes").toObject().value(key).toDouble() >= 0 &&
                         o.value("memory_bytes").toObject().contains(key), key);
        QCOMPARE(o.value("memory_bytes").toObject().value("capacity").toDouble(), 16.0 * (1 << 30));
        double sum = 0;
        const QJsonObject t = o.value("time_s").toObject();
        for (const char* key : {"compute", "recompute", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "bubble",
                                "optimizer", "offload"}) {
            QVERIFY2(t.contains(key), key);
            sum += t.value(key).toDouble();
        }
        QVERIFY(std::fabs(sum - t.value("step").toDouble()) <= 1e-9 * sum);
        // Overlapped communication is reported beside the step, not in it.
        const QJsonObject hidden = t.value("hidden").toObject();
        for (const char* key : {"tp_comm", "cp_comm", "dp_comm"})
            QVERIFY2(hidden.contains(key) && hidden.value(key).toDouble() >= 0, key);
        for (const char* key : {"tokens_per_s", "mfu", "hfu", "flops_per_step", "time_to_train_s", "cost_to_train_usd"})
            QVERIFY2(o.value(key).toDouble() > 0, key);
        QVERIFY(o.value("mfu").toDouble() < 1);
        // 1024 sequences x 4096 tokens per step.
        QVERIFY(std::fabs(o.value("tokens_per_s").toDouble() * t.value("step").toDouble() - 1024.0 * 4096) < 1e-3);
    }

    // Every FP8/FP4 recipe by its name (issue 15), on B200 (which runs them all): predict --json names
    // it in the problem and its terms in the ledger (the casts, and the quantized weight copies as the
    // weights themselves under ZeRO-1 where the recipe keeps them so); plan accepts it too.
    void quantizedRecipesByName_data()
    {
        QTest::addColumn<QString>("precision");
        for (const char* name : {"fp8", "fp8-delayed", "fp8-blockwise", "fp8-rowwise", "mxfp8", "nvfp4"})
            QTest::newRow(name) << QString::fromLatin1(name);
    }
    void quantizedRecipesByName()
    {
        QFETCH(QString, precision);
        const QStringList problem{"--model", "llama-3-8b", "--node-type", "p6-b200.48xlarge", "--nodes", "1",
                                  "--global-batch", "64", "--seq", "8192", "--flash-attention", "--precision", precision};
        const RunResult r = run(QStringList{"predict"} + problem + QStringList{"--layout", "tp=2,sp=on,zero=1", "--json"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(o.value("problem").toObject().value("training").toObject().value("precision").toString(), precision);
        double casts = 0, copies = 0, replaced = 0, weights = 0;
        for (const QJsonValue& v : o.value("ledger").toObject().value("terms").toArray()) {
            const QJsonObject t = v.toObject();
            const QString name = t.value("name").toString();
            if (name.startsWith("FP8/FP4 recipe: linear layers' inputs"))
                casts += t.value("value").toDouble();
            if (name == "FP8/FP4 recipe: quantized weight copies")
                copies += t.value("value").toDouble();
            if (name.startsWith("FP8/FP4 recipe: linear layers' bf16 weights"))
                replaced += t.value("value").toDouble();
            if (t.value("figure").toString() == "memory_bytes.weights")
                weights += t.value("value").toDouble();
        }
        QVERIFY(casts > 0);
        // torchao's rowwise caches no quantized weight; blockwise keeps the bf16 weights beside its copies.
        QCOMPARE(copies > 0, precision != "fp8-rowwise");
        QCOMPARE(replaced < 0, precision == "fp8" || precision == "fp8-delayed" || precision == "mxfp8" || precision == "nvfp4");
        QVERIFY(std::fabs(weights - o.value("memory_bytes").toObject().value("weights").toDouble()) <= 1e-6 * weights);
        const RunResult plan = run(QStringList{"plan"} + problem + QStringList{"--top", "1"});
        QVERIFY2(plan.exitCode == 0, plan.describe().constData());
        QVERIFY2(plan.out.contains(", " + precision.toUtf8() + " recipe, objective"), plan.describe().constData());
        const RunResult text = run(QStringList{"predict"} + problem + QStringList{"--layout", "tp=2,sp=on,zero=1"});
        QVERIFY2(text.out.contains("8192 tokens, " + precision.toUtf8() + " recipe\n"), text.describe().constData());
    }

    // predict --framework prices the layers' element-wise work with that framework's kernels (issue 15):
    // Llama-3-8B under FSDP on one p5.48xlarge is slower than with Megatron's fused kernels, the
    // ledger names the term with its framework, and --json says which framework priced it.
    void predictFramework()
    {
        const QStringList problem{"predict", "--model", "llama-3-8b", "--node-type", "p5.48xlarge", "--nodes", "1",
                                  "--global-batch", "32", "--seq", "8192", "--flash-attention", "--no-dropout",
                                  "--layout", "zero=3,mb=1", "--json"};
        auto elementwise = [](const QJsonObject& o) {
            for (const QJsonValue& v : o.value("ledger").toObject().value("terms").toArray())
                if (v.toObject().value("name").toString().startsWith("element-wise ops"))
                    return v.toObject();
            return QJsonObject();
        };
        const RunResult base = run(problem);
        QVERIFY2(base.exitCode == 0, base.describe().constData());
        const RunResult fsdp = run(problem + QStringList{"--framework", "fsdp"});
        QVERIFY2(fsdp.exitCode == 0, fsdp.describe().constData());
        const QJsonObject a = QJsonDocument::fromJson(base.out).object(), b = QJsonDocument::fromJson(fsdp.out).object();
        QVERIFY(a.value("framework").isNull());
        QCOMPARE(b.value("framework").toString(), QString("fsdp"));
        QCOMPARE(elementwise(a).value("name").toString(), QString("element-wise ops, forward and backward"));
        QVERIFY(elementwise(b).value("name").toString().contains("fsdp"));
        // Only that term moves: the compute time grows by exactly its difference (the ratio of passes
        // itself is derived by hand in tst_planner_framework), and MFU falls with the step time.
        const double ea = elementwise(a).value("value").toDouble(), eb = elementwise(b).value("value").toDouble();
        const QJsonObject ta = a.value("time_s").toObject(), tb = b.value("time_s").toObject();
        QVERIFY(eb > ea);
        QVERIFY(std::fabs((tb.value("compute").toDouble() - ta.value("compute").toDouble()) - (eb - ea)) < 1e-9 * eb);
        QCOMPARE(tb.value("optimizer").toDouble(), ta.value("optimizer").toDouble());
        QVERIFY(std::fabs(b.value("mfu").toDouble() / a.value("mfu").toDouble() -
                          ta.value("step").toDouble() / tb.value("step").toDouble()) < 1e-12);
        const RunResult bad = run(problem + QStringList{"--framework", "pytorch"});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains("--framework"), bad.describe().constData());
    }

    // predict --json carries the cost ledger (issue 15): the terms behind each figure and the
    // collectives behind the bytes, so a user can audit a figure: the terms of each figure sum to it
    // and the time terms to the step, the collectives' bytes to the bytes by kind.
    void predictJsonCarriesTheLedger_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::newRow("dp") << QStringLiteral("dp=16,mb=1");
        QTest::newRow("tp+sp") << QStringLiteral("tp=8,sp=on");
        QTest::newRow("pp interleaved") << QStringLiteral("tp=4,pp=4,schedule=interleaved,v=2,sp=on,zero=1");
        QTest::newRow("cp") << QStringLiteral("tp=4,cp=4,sp=on");
        QTest::newRow("ZeRO-3") << QStringLiteral("zero=3,recompute=full");
        QTest::newRow("offload") << QStringLiteral("tp=2,zero=1,offload=optimizer");
    }
    void predictJsonCarriesTheLedger()
    {
        QFETCH(QString, layout);
        const RunResult r = run({"predict", "--model", "llama-3-8b", "--node-type", "p5.48xlarge", "--nodes", "2",
                                 "--global-batch", "64", "--seq", "8192", "--flash-attention", "--layout", layout,
                                 "--json"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonObject ledger = o.value("ledger").toObject();
        const QJsonArray terms = ledger.value("terms").toArray(), collectives = ledger.value("collectives").toArray();
        QVERIFY(terms.size() >= 20);
        QVERIFY(!collectives.isEmpty());
        QVERIFY(!o.contains("terms"));  // --explain's list stays where it was, only with --explain
        std::map<QString, double> sums;
        double timeTerms = 0;
        for (const QJsonValue& v : terms) {
            const QJsonObject term = v.toObject();
            for (const char* key : {"figure", "name", "formula"})
                QVERIFY2(!term.value(key).toString().isEmpty(), key);
            QVERIFY(term.value("value").isDouble());
            sums[term.value("figure").toString()] += term.value("value").toDouble();
            if (term.value("figure").toString().startsWith("time_s."))
                timeTerms += term.value("value").toDouble();
        }
        auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)); };
        const QJsonObject t = o.value("time_s").toObject(), mem = o.value("memory_bytes").toObject();
        for (const char* key : {"compute", "recompute", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "bubble", "optimizer",
                                "offload"})
            QVERIFY2(near(sums[QStringLiteral("time_s.") + key], t.value(key).toDouble()), key);
        for (const char* key : {"weights", "gradients", "optimizer", "activations", "buffers", "reserve"})
            QVERIFY2(near(sums[QStringLiteral("memory_bytes.") + key], mem.value(key).toDouble()), key);
        QVERIFY(near(timeTerms, t.value("step").toDouble()));

        std::map<QString, double> byKind, byDimension, exposed, hidden;
        for (const QJsonValue& v : collectives) {
            const QJsonObject c = v.toObject();
            for (const char* key : {"dimension", "kind", "placement", "what"})
                QVERIFY2(!c.value(key).toString().isEmpty(), key);
            QVERIFY(QStringList({"intra_domain", "inter_domain"}).contains(c.value("placement").toString()));
            const QJsonObject overlap = c.value("overlap").toObject();
            QVERIFY(c.value("calls").toDouble() > 0 && c.value("bytes").toDouble() > 0);
            QVERIFY(near(overlap.value("exposed_s").toDouble() + overlap.value("hidden_s").toDouble(),
                         c.value("time_s").toDouble()) || c.value("time_s").toDouble() == 0);
            byKind[c.value("kind").toString()] += c.value("bytes").toDouble();
            const QString dimension = c.value("dimension").toString();
            byDimension[dimension == "embedding_group" || dimension == "all_devices" ? "dp" : dimension] +=
                c.value("bytes").toDouble();
            exposed[dimension] += overlap.value("exposed_s").toDouble();
            hidden[dimension] += overlap.value("hidden_s").toDouble();
        }
        const QJsonObject bytes = o.value("comm_bytes").toObject(), kinds = bytes.value("by_kind").toObject();
        for (const char* kind : {"all_reduce", "reduce_scatter", "all_gather", "send_recv"})
            QVERIFY2(near(byKind[kind], kinds.value(kind).toDouble()), kind);
        for (const char* dimension : {"tp", "cp", "pp", "dp"})
            QVERIFY2(near(byDimension[dimension], bytes.value(dimension).toDouble()), dimension);
        // One stage sets every time at pp = 1: its collectives' exposed and hidden time are the figures.
        const QJsonObject stages = ledger.value("stages").toObject();
        if (o.value("layout").toObject().value("pp").toInt() == 1) {
            for (const char* key : {"time", "dp_comm", "bytes"})
                QCOMPARE(stages.value(key).toInt(-1), 0);
            const QJsonObject h = t.value("hidden").toObject();
            QVERIFY(near(exposed["tp"], t.value("tp_comm").toDouble()));
            QVERIFY(near(hidden["tp"], h.value("tp_comm").toDouble()));
            QVERIFY(near(hidden["cp"], h.value("cp_comm").toDouble()));
            QVERIFY(std::fabs(exposed["dp"] - t.value("dp_comm").toDouble()) <= 1e-9 * t.value("dp_comm").toDouble() + 1e-15);
            QVERIFY(near(hidden["dp"], h.value("dp_comm").toDouble()));
        }
    }

    // A run that compared nothing lists as failed, with the reason, not as a 0.0% error.
    void historyNamesAFailedRun()
    {
        const QString db = file("failed-history.sqlite");
        const RunResult r = run({"--db", db, "validate", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab",
                                 "96", "--seq", "32", "--batch", "8", "--layout", "dp=2,offload_activations=1", "--steps",
                                 "1"});
        QVERIFY2(r.out.contains("could not compare"), r.describe().constData());
        const RunResult history = run({"--db", db, "history"});
        QVERIFY2(history.exitCode == 0, history.describe().constData());
        QVERIFY2(history.out.contains("1 case, failed: layout.offload_activations:"), history.describe().constData());
        QVERIFY2(history.out.contains("no host link"), history.describe().constData());
        QVERIFY2(!history.out.contains("|error| 0.0%"), history.describe().constData());
    }

    void validateDirectCase()
    {
        // Nothing stored yet: --from-history says what to run first.
        const RunResult empty = run({"--db", file("empty-history.sqlite"), "calibrate", "--from-history"}, false);
        QCOMPARE(empty.exitCode, 2);
        QVERIFY2(empty.err.contains("validate --suite"), empty.describe().constData());
        // Options of another mode are refused by name, not ignored.
        const RunResult mixed = run({"calibrate", "--from-history", "--device", "trainium1:0.001"});
        QCOMPARE(mixed.exitCode, 2);
        QVERIFY2(mixed.err.contains("--device"), mixed.describe().constData());
        const RunResult both = run({"calibrate", "--from-history", "--engine"});
        QCOMPARE(both.exitCode, 2);
        const RunResult r = run({"validate", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "96", "--seq",
                                 "32", "--batch", "8", "--layout", "dp=2,zero=1", "--steps", "2", "--json"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonObject doc = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(doc.value("schema").toString(), QStringLiteral("shardscope.validation/1"));
        const QJsonObject weights =
            doc.value("cases").toArray().first().toObject().value("metrics").toObject().value("weights_bytes").toObject();
        QCOMPARE(weights.value("predicted").toDouble(), weights.value("measured").toDouble());
        // Stored in the history.
        const RunResult history = run({"history", "--json"});
        QVERIFY2(history.exitCode == 0, history.describe().constData());
        QCOMPARE(QJsonDocument::fromJson(history.out).array().size(), 1);
        // An unknown cost-model profile is refused by name before anything runs.
        const RunResult unknown = run({"validate", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "96",
                                       "--seq", "32", "--batch", "8", "--layout", "dp=2", "--cost-model", "nosuch"});
        QCOMPARE(unknown.exitCode, 2);
        QVERIFY2(unknown.err.contains("nosuch"), unknown.describe().constData());
        // The stored run is priced again from its request, without the engine.
        const RunResult refit = run({"calibrate", "--from-history", "--holdout", "0", "--json", "--save", "fitted-here"});
        QVERIFY2(refit.exitCode == 0, refit.describe().constData());
        const QJsonObject fit = QJsonDocument::fromJson(refit.out).object();
        QCOMPARE(fit.value("fit_cases").toInt(), 1);
        QCOMPARE(fit.value("holdout_cases").toInt(), 0);
        QVERIFY(fit.value("device_step_time").toObject().value("fit_median_after").toDouble() <
                fit.value("device_step_time").toObject().value("fit_median_before").toDouble());
        // Validating with the fitted profile: its terms price the case, the document names it.
        const RunResult again = run({"validate", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "96",
                                     "--seq", "32", "--batch", "8", "--layout", "dp=2,zero=1", "--steps", "2",
                                     "--cost-model", "fitted-here", "--json"});
        QVERIFY2(again.exitCode == 0, again.describe().constData());
        const QJsonObject againDoc = QJsonDocument::fromJson(again.out).object();
        QCOMPARE(againDoc.value("cost_model").toString(), QStringLiteral("fitted-here"));
        const double fittedError = std::fabs(againDoc.value("cases").toArray().first().toObject().value("metrics")
                                                 .toObject().value("device_step_time_s").toObject().value("rel_error").toDouble());
        const double defaultError = std::fabs(doc.value("cases").toArray().first().toObject().value("metrics")
                                                  .toObject().value("device_step_time_s").toObject().value("rel_error").toDouble());
        QVERIFY2(fittedError < defaultError, qPrintable(QString("%1 vs %2").arg(fittedError).arg(defaultError)));
    }

    // The published-run fit with rows held out of it: every third row (0.3), reported apart.
    void calibrateWithHoldout()
    {
        const RunResult r = run({"calibrate", "--fit", "--terms", "dp_overlap", "--holdout", "0.3", "--json"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonObject doc = QJsonDocument::fromJson(r.out).object();
        const QJsonObject holdout = doc.value("holdout").toObject();
        const int rows = int(doc.value("cases").toArray().size());
        QCOMPARE(holdout.value("cases").toArray().size(), qsizetype(rows / 3));
        QVERIFY(holdout.value("median_before").toDouble() > 0 && holdout.value("median_after").toDouble() > 0);
        QVERIFY(holdout.value("worst_after").toDouble() >= holdout.value("median_after").toDouble());

        // Without --terms, the shipped procedure (dense terms on the dense rows, then the experts'
        // terms on the MoE rows): issue 15's goal, the held-out rows within 7% median (it was 7.9%
        // when the dense terms were also fitted to the MoE rows).
        const RunResult shipped = run({"calibrate", "--fit", "--holdout", "0.3", "--json"});
        QVERIFY2(shipped.exitCode == 0, shipped.describe().constData());
        const QJsonObject heldOut = QJsonDocument::fromJson(shipped.out).object().value("holdout").toObject();
        QVERIFY2(heldOut.value("median_after").toDouble() <= 0.07,
                 qPrintable(QString::number(heldOut.value("median_after").toDouble())));
    }

    // The issue's direct form: a catalog model, a layout and a device count, scaled down like a plan.
    void validateFullSizeModel()
    {
        const RunResult r = run({"validate", "--model", "llama-2-7b", "--node-type", "trn1.32xlarge", "--devices", "64",
                                 "--global-batch", "256", "--seq", "4096", "--layout", "tp=8,pp=2,zero=1,mb=1,recompute=full",
                                 "--steps", "2", "--json"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonObject doc = QJsonDocument::fromJson(r.out).object();
        const QJsonObject c = doc.value("cases").toArray().first().toObject();
        QVERIFY2(!c.contains("error"), qPrintable(c.value("error").toString()));
        QVERIFY(c.value("name").toString().contains("llama-2-7b"));
        QVERIFY(doc.value("adaptations").toArray().size() >= 1);  // 64 devices reduced, GPT-2-shaped, fp32
        const QJsonObject metrics = c.value("metrics").toObject();
        // Exact (bytes: up to the two fp64 loss and norm scalars a ring of 16 splits unevenly).
        for (const char* exact : {"weights_bytes", "activations_bytes", "flops", "comm_bytes"})
            QVERIFY2(std::fabs(metrics.value(exact).toObject().value("predicted").toDouble() -
                               metrics.value(exact).toObject().value("measured").toDouble()) <= 16,
                     exact);
    }

    void predictReadable()
    {
        const RunResult r = run({"predict", "--model", "gpt3-175b", "--node-type", "p5.48xlarge", "--nodes", "16",
                                 "--global-batch", "1536", "--seq", "2048", "--layout", "tp=8,pp=8,sp=on,zero=1",
                                 "--explain"});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        for (const char* text : {"step time", "memory per device", "MFU", "time_s.bubble", "memory_bytes.activations"})
            QVERIFY2(r.out.contains(text), text);
        // --explain lists the collectives behind the bytes too (tp=8 over NVLink, pp=8 sends, ZeRO-1).
        QVERIFY2(r.out.contains("collectives per step"), r.out.constData());
        for (const char* row : {"tp   reduce_scatter  intra_domain", "pp   send_recv       inter_domain",
                                "dp   reduce_scatter  inter_domain", "dp   all_gather      inter_domain"})
            QVERIFY2(r.out.contains(row), row);
        // The MFU conventions, each named.
        for (const char* text : {"(Megatron/Korthikanti)", "(PaLM: 6N + 12 L H Q T)", "(causal-aware"})
            QVERIFY2(r.out.contains(text), text);
        QVERIFY2(r.out.contains("ZeRO-1 shard group: 2 devices (zero_group 2 x cp 1)"), r.out.constData());
    }

    // zero_group counts dp replicas: the shard group spans zero_group x cp devices. A group of one
    // device is taken from a user, said to shard nothing; group 1 at cp 4 shards over the cp group.
    void predictNamesTheShardGroup()
    {
        const QStringList problem{"predict", "--model", "gpt3-175b", "--node-type", "p5.48xlarge", "--nodes", "16",
                                  "--global-batch", "1536", "--seq", "2048", "--layout"};
        const RunResult one = run(problem + QStringList{"tp=8,pp=8,zero=1,zero_group=1"});
        QVERIFY2(one.exitCode == 0, one.describe().constData());
        QVERIFY2(one.out.contains("ZeRO-1 shard group: 1 device (zero_group 1 x cp 1): shards nothing"),
                 one.out.constData());
        const RunResult cp = run(problem + QStringList{"tp=8,pp=4,cp=4,zero=3,zero_group=1"});
        QVERIFY2(cp.exitCode == 0, cp.describe().constData());
        QVERIFY2(cp.out.contains("ZeRO-3 shard group: 4 devices (zero_group 1 x cp 4)\n"), cp.out.constData());
        // --json: the three conventions under their own keys, each defined.
        const RunResult json = run(problem + QStringList{"tp=8,pp=8", "--json"});
        const QJsonObject o = QJsonDocument::fromJson(json.out).object();
        for (const char* key : {"mfu", "mfu_palm", "mfu_causal"}) {
            QVERIFY2(o.value(key).toDouble() > 0.1 && o.value(key).toDouble() < 1, key);
            QVERIFY2(o.value("mfu_conventions").toObject().value(key).toString().size() > 20, key);
        }
        QVERIFY(o.value("mfu_causal").toDouble() < o.value("mfu").toDouble());
    }

    void listJson()
    {
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("list"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        QJsonParseError pe;
        const QJsonDocument doc = QJsonDocument::fromJson(r.out, &pe);
        QVERIFY2(pe.error == QJsonParseError::NoError, qPrintable(pe.errorString()));
        QVERIFY(doc.isArray());
        QMap<QString, int> kinds;
        QSet<QString> names;
        for (const QJsonValue& v : doc.array()) {
            QVERIFY(v.isObject());
            const QJsonObject o = v.toObject();
            QVERIFY2(o.value(QLatin1String("name")).isString() && !o.value(QLatin1String("name")).toString().isEmpty(),
                     compact(o).constData());
            QVERIFY2(o.value(QLatin1String("kind")).isString(), compact(o).constData());
            QVERIFY2(o.value(QLatin1String("builtin")).isBool(), compact(o).constData());
            QVERIFY2(o.value(QLatin1String("builtin")).toBool(), compact(o).constData());  // fresh catalog
            ++kinds[o.value(QLatin1String("kind")).toString()];
            const QString name = o.value(QLatin1String("name")).toString();
            QVERIFY2(!names.contains(name), qPrintable(QStringLiteral("duplicate name ") + name));
            names.insert(name);
        }
        QVERIFY2(kinds.value(QStringLiteral("model")) >= 27, qPrintable(QString::number(kinds.value(QStringLiteral("model")))));
        QVERIFY2(kinds.value(QStringLiteral("chip")) >= 13, qPrintable(QString::number(kinds.value(QStringLiteral("chip")))));
        QVERIFY2(kinds.value(QStringLiteral("node")) >= 14, qPrintable(QString::number(kinds.value(QStringLiteral("node")))));
        QCOMPARE(kinds.size(), 3);  // nothing but models, chips and nodes
        for (const char* n : {"gpt2-small", "llama-3-8b", "mixtral-8x7b", "trn1.32xlarge", "p5.48xlarge",
                              "tpu-v5p-host", "gaudi3-8"})
            QVERIFY2(names.contains(QLatin1String(n)), n);
    }

    void listKindJson_data()
    {
        QTest::addColumn<QString>("kindOption");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<int>("minimum");
        QTest::newRow("models") << QStringLiteral("models") << QStringLiteral("model") << 27;
        QTest::newRow("chips") << QStringLiteral("chips") << QStringLiteral("chip") << 13;
        QTest::newRow("nodes") << QStringLiteral("nodes") << QStringLiteral("node") << 14;
    }

    void listKindJson()
    {
        QFETCH(QString, kindOption);
        QFETCH(QString, kind);
        QFETCH(int, minimum);
        const RunResult all = run({QStringLiteral("catalog"), QStringLiteral("list"), QStringLiteral("--json")});
        QVERIFY2(all.exitCode == 0, all.describe().constData());
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("list"), QStringLiteral("--kind"),
                                 kindOption, QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QJsonDocument doc = QJsonDocument::fromJson(r.out);
        QVERIFY(doc.isArray());
        QSet<QString> names;
        for (const QJsonValue& v : doc.array()) {
            QCOMPARE(v.toObject().value(QLatin1String("kind")).toString(), kind);
            names.insert(v.toObject().value(QLatin1String("name")).toString());
        }
        QVERIFY2(names.size() >= minimum, qPrintable(QString::number(names.size())));
        // Exactly the entries of that kind in the full list.
        QSet<QString> expected;
        for (const QJsonValue& v : QJsonDocument::fromJson(all.out).array())
            if (v.toObject().value(QLatin1String("kind")).toString() == kind)
                expected.insert(v.toObject().value(QLatin1String("name")).toString());
        QCOMPARE(names, expected);
    }

    void listText()
    {
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("list")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QString out = QString::fromUtf8(r.out);
        QVERIFY2(QRegularExpression(QStringLiteral("(^|\\n)gpt2-small\\s+model\\b.*124,439,808"))
                     .match(out)
                     .hasMatch(),
                 qPrintable(out));
        QVERIFY2(QRegularExpression(QStringLiteral("(^|\\n)trn1\\.32xlarge\\s+node\\b")).match(out).hasMatch(),
                 qPrintable(out));
    }

    void showJson_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("parameters");
        QTest::newRow("llama-3-8b") << QStringLiteral("llama-3-8b") << qint64(8030261248);
        QTest::newRow("gpt2-small") << QStringLiteral("gpt2-small") << qint64(124439808);
        QTest::newRow("gpt3-175b") << QStringLiteral("gpt3-175b") << qint64(174604259328);
    }

    void showJson()
    {
        QFETCH(QString, name);
        QFETCH(qint64, parameters);
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("show"), name, QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        QJsonParseError pe;
        const QJsonDocument doc = QJsonDocument::fromJson(r.out, &pe);
        QVERIFY2(pe.error == QJsonParseError::NoError && doc.isObject(), r.describe().constData());
        const QJsonObject o = doc.object();
        QCOMPARE(o.value(QLatin1String("name")).toString(), name);
        QVERIFY(o.value(QLatin1String("parameters")).isDouble());
        QCOMPARE(o.value(QLatin1String("parameters")).toInteger(), parameters);
        QVERIFY2(o.value(QLatin1String("flops_per_token")).toDouble() > 0, compact(o).constData());
    }

    void showText()
    {
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("show"), QStringLiteral("llama-3-8b")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        QVERIFY2(r.out.contains("llama-3-8b"), r.describe().constData());
        QVERIFY2(QRegularExpression(QStringLiteral("parameters\\s+8,030,261,248"))
                     .match(QString::fromUtf8(r.out))
                     .hasMatch(),
                 r.describe().constData());
    }

    // --out never replaces what is not a regular file (a FIFO, a device, a directory) and keeps
    // the old file when the new one cannot be written.
    void outRefusesNonRegularFiles()
    {
        const QString fifo = file(QStringLiteral("fifo"));
        QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);
        const QString folder = file(QStringLiteral("folder"));
        QVERIFY(QDir().mkpath(folder));
        const QString plan = file(QStringLiteral("plan.json"));
        const RunResult planned = run({"plan", "--model", "llama-2-7b", "--node-type", "p5.48xlarge", "--nodes", "1",
                                       "--global-batch", "64", "--seq", "2048", "--top", "1", "--out", plan});
        QVERIFY2(planned.exitCode == 0, planned.describe().constData());
        const QStringList commands[] = {
            {"catalog", "export", "gpt2-small", "--out"},
            {"plan", "--model", "gpt2-small", "--node-type", "trn1.32xlarge", "--nodes", "1", "--global-batch", "32",
             "--seq", "1024", "--top", "1", "--out"},
            {"export", "--plan", plan, "--format", "megatron", "--layout", "dp=8,zero=1", "--out"},
        };
        for (const QStringList& command : commands)
            for (const QString& target : {fifo, folder, QStringLiteral("/dev/full")}) {
                const RunResult r = run(command + QStringList{target});
                QVERIFY2(r.exitCode == 1, r.describe().constData());
                QVERIFY2(r.err.contains("--out: " + target.toUtf8()) && r.err.contains("nothing written"),
                         r.describe().constData());
            }
        QVERIFY(QFileInfo(fifo).exists() && !QFileInfo(fifo).isFile());  // still a FIFO
        QVERIFY(QFileInfo(folder).isDir() && QDir(folder).isEmpty());
        // A regular file is replaced whole.
        const QString target = file(QStringLiteral("model.json"));
        QVERIFY(writeFile(target, "old"));
        const RunResult ok = run({"catalog", "export", "gpt2-small", "--out", target});
        QVERIFY2(ok.exitCode == 0, ok.describe().constData());
        QFile f(target);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(QJsonDocument::fromJson(f.readAll()).isObject());
    }

    void importShowReplaceExportRemove()
    {
        const QStringList catalog{QStringLiteral("catalog")};
        const RunResult shown = run(catalog + QStringList{"show", "gpt2-small", "--json"});
        QVERIFY2(shown.exitCode == 0, shown.describe().constData());
        QJsonObject doc = QJsonDocument::fromJson(shown.out).object();
        QCOMPARE(doc.value(QLatin1String("parameters")).toInteger(), qint64(124439808));
        doc.insert(QStringLiteral("name"), QStringLiteral("my-gpt2"));
        const QString input = file(QStringLiteral("my-gpt2.json"));
        QVERIFY(writeFile(input, QJsonDocument(doc).toJson()));

        const RunResult imported = run(catalog + QStringList{"import", input});
        QVERIFY2(imported.exitCode == 0, imported.describe().constData());
        QVERIFY2(imported.out.contains("my-gpt2"), imported.describe().constData());

        const RunResult mine = run(catalog + QStringList{"show", "my-gpt2", "--json"});
        QVERIFY2(mine.exitCode == 0, mine.describe().constData());
        const QJsonObject mineDoc = QJsonDocument::fromJson(mine.out).object();
        QCOMPARE(mineDoc.value(QLatin1String("name")).toString(), QStringLiteral("my-gpt2"));
        QCOMPARE(mineDoc.value(QLatin1String("parameters")).toInteger(), qint64(124439808));

        // Listed as a user entry.
        const RunResult listed = run(catalog + QStringList{"list", "--kind", "models", "--json"});
        bool found = false;
        for (const QJsonValue& v : QJsonDocument::fromJson(listed.out).array())
            if (v.toObject().value(QLatin1String("name")).toString() == QLatin1String("my-gpt2")) {
                found = true;
                QCOMPARE(v.toObject().value(QLatin1String("builtin")).toBool(true), false);
            }
        QVERIFY2(found, listed.describe().constData());

        const RunResult again = run(catalog + QStringList{"import", input});
        QVERIFY2(again.exitCode == 2, again.describe().constData());
        QVERIFY2(again.err.contains("--replace"), again.describe().constData());
        QVERIFY2(again.err.contains("my-gpt2"), again.describe().constData());

        const RunResult replaced = run(catalog + QStringList{"import", input, "--replace"});
        QVERIFY2(replaced.exitCode == 0, replaced.describe().constData());

        const QString exported = file(QStringLiteral("exported.json"));
        const RunResult ex = run(catalog + QStringList{"export", "my-gpt2", "--out", exported});
        QVERIFY2(ex.exitCode == 0, ex.describe().constData());
        QFile f(exported);
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(f.errorString()));
        QJsonParseError pe;
        const QJsonDocument exportedDoc = QJsonDocument::fromJson(f.readAll(), &pe);
        QVERIFY2(pe.error == QJsonParseError::NoError && exportedDoc.isObject(), qPrintable(pe.errorString()));
        QCOMPARE(exportedDoc.object().value(QLatin1String("name")).toString(), QStringLiteral("my-gpt2"));
        QCOMPARE(exportedDoc.object().value(QLatin1String("layers")).toInt(), 12);

        // Export to stdout parses too.
        const RunResult toStdout = run(catalog + QStringList{"export", "my-gpt2"});
        QVERIFY2(toStdout.exitCode == 0, toStdout.describe().constData());
        QCOMPARE(QJsonDocument::fromJson(toStdout.out).object().value(QLatin1String("name")).toString(),
                 QStringLiteral("my-gpt2"));

        const RunResult removed = run(catalog + QStringList{"remove", "my-gpt2"});
        QVERIFY2(removed.exitCode == 0, removed.describe().constData());
        const RunResult gone = run(catalog + QStringList{"show", "my-gpt2"});
        QVERIFY2(gone.exitCode == 2, gone.describe().constData());
        QVERIFY2(gone.err.contains("my-gpt2"), gone.describe().constData());

        // The built-in it was copied from is untouched.
        const RunResult original = run(catalog + QStringList{"show", "gpt2-small", "--json"});
        QVERIFY2(original.exitCode == 0, original.describe().constData());
        QCOMPARE(QJsonDocument::fromJson(original.out).object(), QJsonDocument::fromJson(shown.out).object());
    }

    void importBundleIsAllOrNothing()
    {
        QJsonObject bad = modelDocument(QStringLiteral("bad-model"));
        bad.insert(QStringLiteral("heads"), 48);
        bad.insert(QStringLiteral("kv_heads"), 5);
        bad.insert(QStringLiteral("head_dim"), 16);  // 48 x 16 = hidden 768: kv_heads is the only problem
        const QJsonObject bundle{
            {"schema", "shardscope.catalog/1"},
            {"entries", QJsonArray{modelDocument(QStringLiteral("ok-model")), bad}},
        };
        const QString input = file(QStringLiteral("bundle.json"));
        QVERIFY(writeFile(input, QJsonDocument(bundle).toJson()));

        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("import"), input});
        QVERIFY2(r.exitCode == 2, r.describe().constData());
        QVERIFY2(r.err.contains("entries[1]"), r.describe().constData());
        QVERIFY2(r.err.contains("kv_heads"), r.describe().constData());
        QVERIFY2(!r.err.contains("entries[0]"), r.describe().constData());  // the valid entry is not blamed

        for (const QString& name : {QStringLiteral("ok-model"), QStringLiteral("bad-model")}) {
            const RunResult shown = run({QStringLiteral("catalog"), QStringLiteral("show"), name});
            QVERIFY2(shown.exitCode == 2, qPrintable(name + QStringLiteral(" was imported:\n") +
                                                     QString::fromUtf8(shown.describe())));
        }
    }

    void importValidBundle()
    {
        const QJsonObject bundle{
            {"schema", "shardscope.catalog/1"},
            {"entries", QJsonArray{modelDocument(QStringLiteral("first-model")),
                                   modelDocument(QStringLiteral("second-model"))}},
        };
        const QString input = file(QStringLiteral("bundle.json"));
        QVERIFY(writeFile(input, QJsonDocument(bundle).toJson()));
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("import"), input});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        for (const QString& name : {QStringLiteral("first-model"), QStringLiteral("second-model")}) {
            const RunResult shown =
                run({QStringLiteral("catalog"), QStringLiteral("show"), name, QStringLiteral("--json")});
            QVERIFY2(shown.exitCode == 0, shown.describe().constData());
            QCOMPARE(QJsonDocument::fromJson(shown.out).object().value(QLatin1String("parameters")).toInteger(),
                     qint64(124439808));  // same shape as gpt2-small
        }
    }

    void corruptDatabaseIsMovedAside()
    {
        QVERIFY(writeFile(dbPath(), "this is not sqlite"));
        const RunResult r = run({QStringLiteral("catalog"), QStringLiteral("list")});
        QVERIFY2(r.exitCode == 0, r.describe().constData());
        const QString err = QString::fromUtf8(r.err).toLower();
        QVERIFY2(err.contains(QLatin1String("corrupt")) || err.contains(QLatin1String("moved")),
                 r.describe().constData());
        QVERIFY2(r.out.contains("gpt2-small"), r.describe().constData());  // a fresh, seeded catalog

        const QString base = QFileInfo(dbPath()).fileName();
        const QStringList aside =
            QDir(dir_->path()).entryList({base + QStringLiteral(".corrupt-*")}, QDir::Files | QDir::Hidden);
        QVERIFY2(aside.size() == 1, qPrintable(QDir(dir_->path()).entryList().join(QLatin1Char(' '))));
        QFile moved(dir_->filePath(aside.first()));
        QVERIFY(moved.open(QIODevice::ReadOnly));
        QCOMPARE(moved.readAll(), QByteArray("this is not sqlite"));  // kept intact for the user

        // The next run finds a good database: nothing more to report.
        const RunResult next = run({QStringLiteral("catalog"), QStringLiteral("list")});
        QVERIFY2(next.exitCode == 0, next.describe().constData());
        QVERIFY2(!QString::fromUtf8(next.err).contains(QLatin1String("corrupt"), Qt::CaseInsensitive),
                 next.describe().constData());
    }
};

QTEST_GUILESS_MAIN(TstCli)
#include "tst_cli.moc"
