// A catalog made by the previous schema (4), as ShardScope 0.1.0 wrote it
// (tests/data/catalog-schema-v4.sql: a user model, cost profile p1, a host profile and a
// validation run), opened by this store: migrated to the current schema, the old file kept
// byte for byte beside it, every record still there with its content, and a second open
// neither migrates nor backs up again.
#include "Schema.h"
#include "SpecJson.h"
#include "Store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

using namespace shardscope;

namespace {

QByteArray fileBytes(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Runs `work` on a raw Qt Sql connection to `path`, outside the store.
template <class Work>
void withRawConnection(const QString& path, Work work)
{
    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "raw");
        db.setDatabaseName(path);
        QVERIFY(db.open());
        work(db);
        db.close();
    }
    QSqlDatabase::removeDatabase("raw");
}

// What `sqlite3 FILE < dump.sql` does: every statement of the dump in order. The dump has
// one statement per line (its JSON documents are compact) and "--" comment lines.
void loadDump(const QString& dumpPath, const QString& path)
{
    QFile dump(dumpPath);
    QVERIFY2(dump.open(QIODevice::ReadOnly), qPrintable(dumpPath));
    const QList<QByteArray> lines = dump.readAll().split('\n');
    withRawConnection(path, [&](QSqlDatabase& db) {
        QSqlQuery q(db);
        int statements = 0;
        for (const QByteArray& line : lines) {
            if (line.isEmpty() || line.startsWith("--"))
                continue;
            QVERIFY2(line.endsWith(';'), line.left(80).constData());
            QVERIFY2(q.exec(QString::fromUtf8(line)), qPrintable(q.lastError().text()));
            ++statements;
        }
        QVERIFY(statements > 50);
    });
}

// One text column of the first row of `sql` on a raw connection to `path`.
QString rawValue(const QString& path, const QString& sql)
{
    QString value;
    withRawConnection(path, [&](QSqlDatabase& db) {
        QSqlQuery q(db);
        QVERIFY2(q.exec(sql) && q.next(), qPrintable(sql));
        value = q.value(0).toString();
    });
    return value;
}

QJsonObject json(const QString& text) { return QJsonDocument::fromJson(text.toUtf8()).object(); }

} // namespace

class TstStoreMigration : public QObject {
    Q_OBJECT
private slots:
    void schema4CatalogMigratesWithABackup()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        loadDump(QStringLiteral(SHARDSCOPE_SCHEMA_V4_DUMP), path);
        QCOMPARE(rawValue(path, "PRAGMA user_version"), QString("4"));
        const QByteArray before = fileBytes(path);
        QVERIFY(!before.isEmpty());

        {
            Store store(path);
            QCOMPARE(store.schemaVersion(), kSchemaVersion);
            QCOMPARE(kSchemaVersion, 5);
            QCOMPARE(store.notices().size(), size_t(1));
            const QString notice = QString::fromStdString(store.notices().front());
            QVERIFY2(notice.contains("upgraded from schema version 4 to 5"), qPrintable(notice));

            // The backup: named after the old version, where the notice says, the old file exactly.
            const QStringList backups = QDir(dir.path()).entryList({"catalog.sqlite.schema-v4-*.bak"}, QDir::Files);
            QCOMPARE(backups.size(), 1);
            const QString backup = dir.filePath(backups.front());
            QVERIFY2(notice.contains(backup), qPrintable(notice));
            QCOMPARE(fileBytes(backup), before);

            // The user's model.
            const auto mine = store.specs().find("my-tiny-gpt");
            QVERIFY(mine && !mine->builtin);
            QCOMPARE(mine->display_name, std::string("My tiny GPT"));
            QCOMPARE(store.specs().model("my-tiny-gpt").layers, 6);
            QVERIFY(mine->document == json(rawValue(backup, "SELECT document FROM entries WHERE name = 'my-tiny-gpt'")));
            QVERIFY(store.specs().find("gpt2-small")->builtin);

            // The cost profile, typed, with every term it was saved with.
            QCOMPARE(store.runs().costProfileNames(), std::vector<std::string>{"p1"});
            const CostModelParams p1 = store.runs().costModelParamsNamed("p1");
            QCOMPARE(p1.name, std::string("p1"));
            QVERIFY(toJson(p1) == json(rawValue(backup, "SELECT document FROM cost_profiles WHERE name = 'p1'")));

            // The host profile.
            const std::vector<HostProfile> hosts = store.runs().hostProfiles();
            QCOMPARE(hosts.size(), size_t(1));
            const QJsonObject hostDoc = json(rawValue(backup, "SELECT document FROM host_profiles"));
            QCOMPARE(hosts.front().host_id, std::string("fixture-machine-id/Intel(R) Xeon(R) Processor"));
            QCOMPARE(hosts.front().threads, 1);
            QCOMPARE(hosts.front().gemm_flops_fp32, hostDoc.value("gemm_flops_fp32").toDouble());
            QCOMPARE(hosts.front().memory_bytes_per_second, hostDoc.value("memory_bytes_per_second").toDouble());
            QCOMPARE(hosts.front().kernel_overhead_s, hostDoc.value("kernel_overhead_s").toDouble());
            QCOMPARE(hosts.front().measured_at, hostDoc.value("measured_at").toString().toStdString());
            QVERIFY(hosts.front().gemm_flops_fp32 > 0);
            QVERIFY(store.runs().hostProfile(hosts.front().host_id, 1) == hosts.front());

            // The validation run.
            const auto runs = store.runs().validationRuns();
            QCOMPARE(runs.size(), size_t(1));
            QCOMPARE(runs.front().id, 1);
            QCOMPARE(runs.front().software_version, std::string("0.1.0"));
            QCOMPARE(runs.front().name, rawValue(backup, "SELECT name FROM validation_runs").toStdString());
            QVERIFY(runs.front().document == json(rawValue(backup, "SELECT document FROM validation_runs")));
            QCOMPARE(runs.front().document.value("cases").toArray().size(), 1);
            // A new run continues the numbering.
            QCOMPARE(store.runs().storeValidationRun("after", runs.front().document), 2);
        }
        // Schema 5 has no plans table.
        QCOMPARE(rawValue(path, "SELECT count(*) FROM sqlite_master WHERE name = 'plans'"), QString("0"));

        // A second open finds the current schema: nothing to say, nothing backed up again.
        {
            Store again(path);
            QVERIFY(again.notices().empty());
            QCOMPARE(again.schemaVersion(), kSchemaVersion);
            QCOMPARE(again.runs().validationRuns().size(), size_t(2));
        }
        QCOMPARE(QDir(dir.path()).entryList({"*.bak"}, QDir::Files).size(), 1);
    }

    // A schema-4 catalog in WAL mode whose last write is still only in its -wal (another
    // connection keeps the file open, so nothing checkpointed it): the backup holds that write.
    void backupIncludesWhatIsOnlyInTheWal()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        loadDump(QStringLiteral(SHARDSCOPE_SCHEMA_V4_DUMP), path);
        {
            QSqlDatabase other = QSqlDatabase::addDatabase("QSQLITE", "other");
            other.setDatabaseName(path);
            QVERIFY(other.open());
            {
                QSqlQuery q(other);
                QVERIFY(q.exec("PRAGMA journal_mode=WAL"));
                QVERIFY(q.exec("PRAGMA wal_autocheckpoint=0"));
                QVERIFY(q.exec("INSERT INTO validation_runs (created_at, software_version, name, document)"
                               " VALUES ('then', '0.1.0', 'only-in-wal', '{}')"));
            }
            QVERIFY(QFileInfo(path + "-wal").size() > 0);
            {
                Store store(path);
                QCOMPARE(store.schemaVersion(), kSchemaVersion);
                QCOMPARE(store.runs().validationRuns().front().name, std::string("only-in-wal"));
            }
            other.close();
        }
        QSqlDatabase::removeDatabase("other");
        const QStringList backups = QDir(dir.path()).entryList({"catalog.sqlite.schema-v4-*.bak"}, QDir::Files);
        QCOMPARE(backups.size(), 1);
        QCOMPARE(rawValue(dir.filePath(backups.front()), "SELECT name FROM validation_runs ORDER BY id DESC"),
                 QString("only-in-wal"));
        QCOMPARE(rawValue(dir.filePath(backups.front()), "PRAGMA user_version"), QString("4"));
    }
};

QTEST_GUILESS_MAIN(TstStoreMigration)
#include "tst_store_migration.moc"
