// The store's spec catalog and its database: creation and seeding, published parameter
// counts of the built-in models, sources for every hardware figure, migration, recovery
// from a corrupt file, refusal of newer or foreign databases, read-only built-ins,
// all-or-nothing imports, host profiles in the run store; the built-in specs without a
// database resolve the same names.
#include "BuiltinSpecs.h"
#include "JsonReader.h"
#include "MalformedDocuments.h"
#include "Schema.h"
#include "SpecJson.h"
#include "Store.h"
#include "StoreError.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <set>

using namespace shardscope;

namespace {

QJsonObject parse(const QByteArray& text)
{
    FieldErrors errors;
    const QJsonObject o = parseJsonObject(text, "test", errors);
    if (!errors.empty())
        qFatal("%s", joinErrors(errors).c_str());
    return o;
}

// Runs raw SQL on a file without going through the store, to build old or foreign databases.
void rawSql(const QString& path, const QStringList& statements)
{
    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "raw");
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        for (const QString& s : statements)
            QVERIFY2(q.exec(s), qPrintable(s));
    }
    QSqlDatabase::removeDatabase("raw");
}

QByteArray fileBytes(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

size_t countKind(const SpecLookup& c, EntryKind k) { return c.list(k).size(); }

} // namespace

class TstStoreCatalog : public QObject {
    Q_OBJECT
private slots:
    void createdAndSeeded()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("sub/folder/catalog.sqlite");  // folders are created
        Store store(path);
        SpecCatalog& c = store.specs();
        QVERIFY(QFile::exists(path));
        QCOMPARE(store.schemaVersion(), kSchemaVersion);
        QVERIFY(store.notices().empty());
        QVERIFY(countKind(c, EntryKind::Model) >= 27);
        QVERIFY(countKind(c, EntryKind::Chip) >= 13);
        QVERIFY(countKind(c, EntryKind::Node) >= 14);
        for (const char* name :
             {"gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-1.3b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b",
              "bert-base", "bert-large", "roberta-large", "t5-base", "t5-large", "t5-3b", "t5-11b", "llama-2-7b",
              "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3-405b", "mixtral-8x7b",
              "mixtral-8x22b", "deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"}) {
            const auto e = c.find(name);
            QVERIFY2(e && e->kind == EntryKind::Model && e->builtin, name);
        }
        for (const char* name : {"trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "p4d.24xlarge", "p4de.24xlarge",
                                 "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "tpu-v4-host", "tpu-v5e-host",
                                 "tpu-v5p-host", "mi300x-8", "gaudi2-8", "gaudi3-8"}) {
            const auto e = c.find(name);
            QVERIFY2(e && e->kind == EntryKind::Node && e->builtin, name);
            c.node(name);  // resolves its chip
        }
        // Reopening neither duplicates nor reseeds.
        const size_t before = c.list().size();
        Store again(path);
        QCOMPARE(again.specs().list().size(), before);
        QVERIFY(again.notices().empty());
    }

    void builtinModelsHavePublishedCounts_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("parameters");
        // Hugging Face model cards / num_parameters() of the reference checkpoints.
        QTest::newRow("gpt2-small") << "gpt2-small" << qint64(124'439'808);
        QTest::newRow("gpt2-medium") << "gpt2-medium" << qint64(354'823'168);
        QTest::newRow("gpt2-large") << "gpt2-large" << qint64(774'030'080);
        QTest::newRow("gpt2-xl") << "gpt2-xl" << qint64(1'557'611'200);
        QTest::newRow("bert-base") << "bert-base" << qint64(109'482'240);
        QTest::newRow("bert-large") << "bert-large" << qint64(335'141'888);
        QTest::newRow("roberta-large") << "roberta-large" << qint64(355'359'744);
        QTest::newRow("t5-base") << "t5-base" << qint64(222'903'552);
        QTest::newRow("t5-large") << "t5-large" << qint64(737'668'096);
        QTest::newRow("t5-3b") << "t5-3b" << qint64(2'851'598'336);
        QTest::newRow("t5-11b") << "t5-11b" << qint64(11'307'321'344);
        QTest::newRow("llama-2-7b") << "llama-2-7b" << qint64(6'738'415'616);
        QTest::newRow("llama-2-13b") << "llama-2-13b" << qint64(13'015'864'320);
        QTest::newRow("llama-2-70b") << "llama-2-70b" << qint64(68'976'648'192);
        QTest::newRow("llama-3-8b") << "llama-3-8b" << qint64(8'030'261'248);
        QTest::newRow("llama-3-70b") << "llama-3-70b" << qint64(70'553'706'496);
        QTest::newRow("llama-3-405b") << "llama-3-405b" << qint64(405'853'388'800);
        QTest::newRow("mixtral-8x7b") << "mixtral-8x7b" << qint64(46'702'792'704);
        // Issue 16's mixtures of experts (sources: tests/data/hf/README.md, the entries' "source").
        QTest::newRow("mixtral-8x22b") << "mixtral-8x22b" << qint64(140'620'634'112);
        QTest::newRow("deepseek-v3") << "deepseek-v3" << qint64(671'026'419'200);
        QTest::newRow("qwen3-30b-a3b") << "qwen3-30b-a3b" << qint64(30'532'122'624);
        QTest::newRow("qwen3-235b-a22b") << "qwen3-235b-a22b" << qint64(235'093'634'560);
        QTest::newRow("gpt-oss-120b") << "gpt-oss-120b" << qint64(116'829'156'672);
    }
    void builtinModelsHavePublishedCounts()
    {
        QFETCH(QString, name);
        QFETCH(qint64, parameters);
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        QCOMPARE(qint64(parameterCount(c.model(name.toStdString()))), parameters);
        QCOMPARE(qint64(c.find(name.toStdString())->document.value("parameters").toDouble()), parameters);
    }

    // DeepSeek-V3's MTP module (D = 1), counted by hand from the architecture (h 7168, MLA ranks
    // 1536 / 512, heads 128 of 128 + 64 / 128, 256 experts of 2048 top 8 and 1 shared): outside the
    // published 671B and 37B, which stay as they are.
    void deepseekV3MtpModule()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        const ModelSpec ds = c.model("deepseek-v3");
        QCOMPARE(ds.mtp.layers, 1);
        QCOMPARE(ds.mtp.loss_scale, 0.3);
        const qint64 h = 7168, heads = 128;
        const qint64 mlaMatrices = h * 1536 + 1536 * heads * 192 + h * (512 + 64) + 512 * heads * (128 + 128) +
                                   heads * 128 * h;
        const qint64 attention = mlaMatrices + 1536 + 512;  // + q_a and kv_a norms
        const qint64 expert = 3 * h * 2048, router = h * 256 + 256;  // + the score correction bias
        const qint64 layer = attention + 2 * h + 256 * expert + expert + router;
        const qint64 module = layer + 3 * h + 2 * h * h;  // enorm, hnorm, final norm; eh_proj
        QCOMPARE(module, qint64(11'610'068'224));
        const ParameterBreakdown b = parameterBreakdown(ds);
        QCOMPARE(qint64(b.mtp_layer), module);
        QCOMPARE(qint64(b.mtp), module);
        QCOMPARE(qint64(b.mtp_active), module - 248 * expert);
        QCOMPARE(qint64(b.total), qint64(671'026'419'200));
        QCOMPARE(qint64(b.active_per_token), qint64(37'552'297'472));
        const QJsonObject doc = c.find("deepseek-v3")->document;
        QCOMPARE(qint64(doc.value("parameters").toDouble()), qint64(671'026'419'200));
        QCOMPARE(qint64(doc.value("active_parameters").toDouble()), qint64(37'552'297'472));
        QCOMPARE(qint64(doc.value("mtp_parameters").toDouble()), module);
        // Forward FLOPs per token at 4096 as Megatron-LM counts them: the MoE layer (MLA
        // projections, causal-free scores over 4096 keys, 8 + 1 experts, router), eh_proj and the
        // three norms, and the logits once more.
        const qint64 s = 4096;
        const qint64 layerFlops = 2 * mlaMatrices + 2 * s * heads * (192 + 128) + 9 * 2 * expert + 2 * h * 256;
        QCOMPARE(qint64(mtpForwardFlopsPerToken(ds, int(s))),
                 layerFlops + 2 * (2 * h * h + 3 * h) + 2 * h * 129280);
    }

    void everyHardwareFigureHasASource()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        const std::set<std::string> derivedOrNames{"schema", "name", "vendor", "display_name", "chip", "sources",
                                                   "price_kind", "devices_per_node", "intra_topology_note"};
        for (EntryKind kind : {EntryKind::Chip, EntryKind::Node}) {
            for (const CatalogEntry& e : c.list(kind)) {
                const QJsonObject sources = e.document.value("sources").toObject();
                for (auto it = e.document.begin(); it != e.document.end(); ++it) {
                    const std::string key = it.key().toStdString();
                    if (derivedOrNames.count(key))
                        continue;
                    if (it.value().isObject()) {  // peak_flops.<type>
                        const QJsonObject inner = it.value().toObject();
                        for (auto jt = inner.begin(); jt != inner.end(); ++jt) {
                            const QString field = it.key() + "." + jt.key();
                            QVERIFY2(sources.contains(field), qPrintable(QString::fromStdString(e.name) + ": " + field));
                        }
                    } else {
                        QVERIFY2(sources.contains(it.key()),
                                 qPrintable(QString::fromStdString(e.name) + ": " + it.key()));
                    }
                }
            }
        }
        // Dense figures only: Trainium's 190 TFLOP/s and the H100's 989.4, not the sparse 1,979.
        QCOMPARE(c.chip("trainium1").peak_flops_bf16, 190e12);
        QCOMPARE(c.chip("h100-sxm").peak_flops_bf16, 989.4e12);
        QCOMPARE(c.node("trn1.32xlarge").devicesPerNode(), 32);
        QCOMPARE(c.node("p5.48xlarge").intra_link_bytes_per_second, 450e9);  // 900 GB/s bidirectional
        QCOMPARE(c.node("trn1.32xlarge").inter_node_bytes_per_second, 100e9);  // 800 Gbps
        QCOMPARE(c.node("mi300x-8").inter_node_bytes_per_second, 0.0);      // not published: absent
    }

    void builtinsAreReadOnly()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        QVERIFY_THROWS_EXCEPTION(InputError, c.remove("gpt2-small"));
        QJsonObject doc = parse(malformed::validModel("gpt2-small"));
        QVERIFY_THROWS_EXCEPTION(InputError, c.importDocument(doc, true));
        QCOMPARE(qint64(parameterCount(c.model("gpt2-small"))), qint64(124'439'808));
    }

    void userEntriesImportReplaceRemove()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        const size_t before = c.list().size();
        const auto names = c.importDocument(parse(malformed::validModel("mine")));
        QCOMPARE(names, std::vector<std::string>{"mine"});
        QVERIFY(!c.find("mine")->builtin);
        QCOMPARE(c.list().size(), before + 1);
        try {
            c.importDocument(parse(malformed::validModel("mine")));
            QFAIL("a second import without replace must fail");
        } catch (const InputError& e) {
            QVERIFY(QString(e.what()).contains("--replace"));
        }
        QJsonObject bigger = parse(malformed::validModel("mine"));
        bigger["layers"] = 24;
        c.importDocument(bigger, true);
        QCOMPARE(c.model("mine").layers, 24);
        c.remove("mine");
        QVERIFY(!c.find("mine"));
        QCOMPARE(c.list().size(), before);
        QVERIFY_THROWS_EXCEPTION(InputError, c.remove("mine"));
    }

    void bundleWithChipAndNode()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        const QJsonObject bundle = parse(R"({"schema":"shardscope.catalog/1","entries":[
            {"schema":"shardscope.node/1","name":"my-node","chip":"my-chip","chips_per_node":4,
             "intra_topology":"ring","intra_link_bytes_per_second":"100 GB/s","inter_node_bytes_per_second":"400 Gbps"},
            {"schema":"shardscope.chip/1","name":"my-chip","peak_flops":{"bf16":"100 TFLOP/s"},
             "hbm_bytes":"24 GiB","hbm_bytes_per_second":"1 TB/s"}]})");
        const auto names = c.importDocument(bundle);
        QCOMPARE(names.size(), size_t(2));
        const NodeType n = c.node("my-node");
        QCOMPARE(n.chip.peak_flops_bf16, 100e12);
        QCOMPARE(n.inter_node_bytes_per_second, 50e9);
        // A chip in use cannot be removed before its node types.
        try {
            c.remove("my-chip");
            QFAIL("removing a chip in use must fail");
        } catch (const InputError& e) {
            QVERIFY(QString(e.what()).contains("my-node"));
        }
        c.remove("my-node");
        c.remove("my-chip");
    }

    void importIsAllOrNothing()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        const size_t before = c.list().size();
        const QByteArray bundle = "{\"schema\":\"shardscope.catalog/1\",\"entries\":[" + malformed::validModel("ok-1") +
                                  "," + malformed::replaced("kv_heads", "5") + "]}";
        try {
            c.importDocument(parse(bundle));
            QFAIL("a bundle with one bad entry must fail");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("entries[1].heads"), e.what());
        }
        QCOMPARE(c.list().size(), before);
        QVERIFY(!c.find("ok-1"));
    }

    void malformedImportsChangeNothing_data() { malformed::addRows(); }
    void malformedImportsChangeNothing()
    {
        QFETCH(QByteArray, text);
        QFETCH(QString, path);
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        const size_t before = c.list().size();
        FieldErrors errors;
        const QJsonObject json = parseJsonObject(text, "file", errors);
        if (errors.empty()) {
            try {
                c.importDocument(json);
                QFAIL("import must fail");
            } catch (const InputError& e) {
                errors = e.errors();
            }
        }
        QVERIFY(!errors.empty());
        bool named = false;
        for (const FieldError& e : errors)
            named |= QString::fromStdString(e.path).contains(path.section('.', -1));
        QVERIFY2(named, joinErrors(errors).c_str());
        QCOMPARE(c.list().size(), before);
    }

    void migratesFromVersion1()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("old.sqlite");
        const QString doc = QString::fromUtf8(malformed::validModel("kept-model")).simplified();
        rawSql(path, {"CREATE TABLE entries (name TEXT PRIMARY KEY, kind TEXT NOT NULL, builtin INTEGER NOT NULL,"
                      " display_name TEXT NOT NULL DEFAULT '', document TEXT NOT NULL, created_at TEXT NOT NULL,"
                      " updated_at TEXT NOT NULL)",
                      "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                      "INSERT INTO entries VALUES ('kept-model', 'model', 0, '', '" + doc + "', 'then', 'then')",
                      "PRAGMA user_version = 1"});
        Store store(path);
        SpecCatalog& c = store.specs();
        QCOMPARE(store.schemaVersion(), kSchemaVersion);
        QVERIFY(c.find("kept-model") && !c.find("kept-model")->builtin);
        QCOMPARE(c.model("kept-model").layers, 12);
        QVERIFY(c.find("gpt2-small"));
        QVERIFY(!store.notices().empty());
        QVERIFY(QString::fromStdString(store.notices().front()).contains("upgraded from schema version 1"));
    }

    void hostProfilesStoredPerHostAndThreads()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("c.sqlite");
        HostProfile p;
        p.host_id = "machine-1/cpu-x";
        p.cpu = "CPU X";
        p.threads = 2;
        p.gemm_flops_fp32 = 2.1e11;
        p.memory_bytes_per_second = 3.0e10;
        p.kernel_overhead_s = 2.8e-6;
        p.memory_bytes = 24e9;
        p.measured_at = "2026-11-29T16:00:00Z";
        {
            Store store(path);
            RunStore& runs = store.runs();
            QVERIFY(!runs.hostProfile(p.host_id, 2));
            runs.storeHostProfile(p);
            HostProfile one = p;
            one.threads = 1;
            one.gemm_flops_fp32 = 1.0e11;
            runs.storeHostProfile(one);
        }
        Store store(path);
        RunStore& c = store.runs();  // survives reopening
        const auto stored = c.hostProfile(p.host_id, 2);
        QVERIFY(stored.has_value());
        QVERIFY(*stored == p);
        QCOMPARE(c.hostProfile(p.host_id, 1)->gemm_flops_fp32, 1.0e11);
        QVERIFY(!c.hostProfile("another-machine", 2));
        // Measuring again replaces the figures.
        HostProfile again = p;
        again.gemm_flops_fp32 = 2.3e11;
        c.storeHostProfile(again);
        QCOMPARE(c.hostProfile(p.host_id, 2)->gemm_flops_fp32, 2.3e11);
        QCOMPARE(c.hostProfiles().size(), size_t(2));
        HostProfile bad = p;
        bad.gemm_flops_fp32 = 0;
        QVERIFY_THROWS_EXCEPTION(InputError, c.storeHostProfile(bad));
    }

    void migratesFromVersion2()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("v2.sqlite");
        rawSql(path, {"CREATE TABLE entries (name TEXT PRIMARY KEY, kind TEXT NOT NULL, builtin INTEGER NOT NULL,"
                      " display_name TEXT NOT NULL DEFAULT '', document TEXT NOT NULL, created_at TEXT NOT NULL,"
                      " updated_at TEXT NOT NULL)",
                      "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                      "CREATE TABLE plans (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
                      " created_at TEXT NOT NULL, software_version TEXT NOT NULL, document TEXT NOT NULL)",
                      "INSERT INTO plans (name, created_at, software_version, document) VALUES ('kept', 'then', '0.1.0', '{}')",
                      "PRAGMA user_version = 2"});
        {
            Store store(path);
            QCOMPARE(store.schemaVersion(), kSchemaVersion);
            QVERIFY(QString::fromStdString(store.notices().front()).contains("upgraded from schema version 2"));
        }
        // The unused plans table is gone from the catalog (schema 5), and kept in the backup.
        const QStringList backups = QDir(dir.path()).entryList({"v2.sqlite.schema-v2-*.bak"}, QDir::Files);
        QCOMPARE(backups.size(), 1);
        for (const auto& [file, hasPlans] : {std::pair(path, false), std::pair(dir.filePath(backups.front()), true)}) {
            QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "check");
            db.setDatabaseName(file);
            QVERIFY(db.open());
            {
                QSqlQuery q(db);
                QCOMPARE(q.exec("SELECT name FROM plans") && q.next(), hasPlans);
                if (hasPlans)
                    QCOMPARE(q.value(0).toString(), QString("kept"));
                QCOMPARE(q.exec("SELECT count(*) FROM host_profiles") && q.next(), !hasPlans);
                QCOMPARE(q.exec("SELECT count(*) FROM validation_runs") && q.next(), !hasPlans);
            }
            db.close();
            db = QSqlDatabase();
            QSqlDatabase::removeDatabase("check");
        }
    }

    void corruptFileMovedAside()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        const QByteArray garbage = QByteArray("this is not sqlite, just a text file\n").repeated(200);
        {
            QFile f(path);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(garbage);
            for (const char* companion : {"-wal", "-journal"}) {  // companion files go with it, intact
                QFile side(path + companion);
                QVERIFY(side.open(QIODevice::WriteOnly));
                side.write(QByteArray("its ") + companion);
            }
        }
        Store store(path);
        SpecCatalog& c = store.specs();
        QCOMPARE(store.notices().size(), size_t(1));
        QVERIFY(QString::fromStdString(store.notices().front()).contains("moved to"));
        QVERIFY(c.find("gpt2-small"));
        const QStringList aside = QDir(dir.path()).entryList({"catalog.sqlite.corrupt-*Z"}, QDir::Files);  // not its companions
        QCOMPARE(aside.size(), 1);
        QCOMPARE(fileBytes(dir.filePath(aside.front())), garbage);  // the user's file is kept, intact
        for (const char* companion : {"-wal", "-journal"}) {
            QCOMPARE(fileBytes(dir.filePath(aside.front() + companion)), QByteArray("its ") + companion);
            QVERIFY(!QFile::exists(path + companion) || fileBytes(path + companion) != QByteArray("its ") + companion);
        }
    }

    void newerSchemaRefused()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("future.sqlite");
        rawSql(path, {"CREATE TABLE entries (name TEXT)", "PRAGMA user_version = 99"});
        const QByteArray before = fileBytes(path);
        try {
            Store store(path);
            QFAIL("a newer schema must be refused");
        } catch (const StoreError& e) {
            QVERIFY2(QString(e.what()).contains("newer"), e.what());
            QVERIFY(QString(e.what()).contains("99"));
        }
        QCOMPARE(fileBytes(path), before);
    }

    void foreignDatabaseRefused()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("other.sqlite");
        rawSql(path, {"CREATE TABLE invoices (id INTEGER)", "INSERT INTO invoices VALUES (1)"});
        const QByteArray before = fileBytes(path);
        QVERIFY_THROWS_EXCEPTION(StoreError, Store store(path));
        QCOMPARE(fileBytes(path), before);
    }

    void nearMatchesSuggested()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        SpecCatalog& c = store.specs();
        try {
            c.model("llama-3-8");
            QFAIL("unknown model must throw");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("llama-3-8b"), e.what());
        }
        QVERIFY_THROWS_EXCEPTION(InputError, c.node("gpt2-small"));  // a model is not a node type
    }

    // Without a database, the compiled-in specs resolve the same names to the same documents
    // as a fresh catalog's built-ins, with the same errors and suggestions.
    void builtinSpecsMatchTheSeededCatalog()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        const BuiltinSpecs& builtins = BuiltinSpecs::instance();
        const std::vector<CatalogEntry> seeded = store.specs().list();
        const std::vector<CatalogEntry> compiled = builtins.list();
        QCOMPARE(compiled.size(), seeded.size());
        for (size_t i = 0; i < seeded.size(); ++i) {
            QCOMPARE(compiled[i].name, seeded[i].name);  // the same order as well
            QVERIFY(compiled[i].builtin);
            QVERIFY2(compiled[i].document == seeded[i].document, seeded[i].name.c_str());
        }
        QVERIFY(builtins.node("trn1.32xlarge") == store.specs().node("trn1.32xlarge"));
        try {
            builtins.model("llama-3-8");
            QFAIL("unknown model must throw");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("did you mean: llama-3-8b"), e.what());
        }
        QVERIFY(!builtins.findChip("trn1.32xlarge"));  // a node type is not a chip
        QCOMPARE(builtins.sha256().size(), size_t(64));
    }
};

QTEST_GUILESS_MAIN(TstStoreCatalog)
#include "tst_store_catalog.moc"
