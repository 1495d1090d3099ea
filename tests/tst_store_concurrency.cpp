// The store under contention and failure, the cases of issue 19 where a user's catalog was
// lost or answered obscurely: a healthy catalog locked by another process is waited for and
// then reported in use, never moved aside; a full disk and a read-only folder are named and
// leave the file untouched; two processes and an open "GUI" connection write at once and see
// each other's writes with no -wal or -shm removed; 20 processes creating one catalog at once
// all succeed; a negative schema version and a dropped table or column are refused by name.
// The second processes are tests/store_writer (SHARDSCOPE_STORE_WRITER). The disk cases mount
// a small tmpfs, which needs root; without it they are skipped, saying why.
#include "Schema.h"
#include "Store.h"
#include "StoreError.h"

#include <QDir>
#include <QFile>
#include <QJsonObject>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <QThread>

#include <atomic>
#include <memory>
#include <thread>
#include <unistd.h>

using namespace shardscope;

namespace {

QByteArray fileBytes(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Files a move-aside would have left in `dir`.
QStringList asideFiles(const QString& dir) { return QDir(dir).entryList({"*.corrupt-*"}, QDir::Files); }

void makeCatalog(const QString& path, const std::string& run = "kept")
{
    Store store(path);
    store.runs().storeValidationRun(run, QJsonObject{{"kept", true}});
}

// Runs statements on a raw connection to `path` named `name`, outside the store; the
// connection stays open (holding whatever lock it took) until closeRaw(name).
void openRaw(const QString& path, const QString& name, const QStringList& statements)
{
    QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", name);
    db.setDatabaseName(path);
    QVERIFY(db.open());
    QSqlQuery q(db);
    for (const QString& s : statements)
        QVERIFY2(q.exec(s), qPrintable(s + ": " + q.lastError().text()));
}

void closeRaw(const QString& name)
{
    {
        QSqlDatabase db = QSqlDatabase::database(name, false);
        db.close();
    }
    QSqlDatabase::removeDatabase(name);
}

int rawCount(const QString& path, const QString& sql)
{
    int n = -1;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "count");
        db.setDatabaseName(path);
        if (db.open()) {
            QSqlQuery q(db);
            if (q.exec(sql) && q.next())
                n = q.value(0).toInt();
        }
        db.close();
    }
    QSqlDatabase::removeDatabase("count");
    return n;
}

// A small tmpfs mounted on a temporary folder (root only), unmounted at the end.
class SmallDisk {
public:
    explicit SmallDisk(const QString& size)
    {
        if (::geteuid() == 0)
            mounted_ = QProcess::execute("mount", {"-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir_.path()}) == 0;
    }
    ~SmallDisk()
    {
        if (mounted_)
            QProcess::execute("umount", {dir_.path()});
    }
    bool mounted() const { return mounted_; }
    QString path(const QString& name) const { return dir_.filePath(name); }
    QString folder() const { return dir_.path(); }
    bool remountReadOnly() { return QProcess::execute("mount", {"-o", "remount,ro", dir_.path()}) == 0; }
    bool remountWritable() { return QProcess::execute("mount", {"-o", "remount,rw", dir_.path()}) == 0; }
    // Writes zeros until the disk refuses more; returns the filler's path.
    QString fill() const
    {
        const QString filler = dir_.filePath("filler");
        QFile f(filler);
        if (f.open(QIODevice::WriteOnly)) {
            const QByteArray block(4096, '\0');
            while (f.write(block) == block.size() && f.flush()) {
            }
        }
        return filler;
    }

private:
    QTemporaryDir dir_;
    bool mounted_ = false;
};

std::unique_ptr<QProcess> startWriter(const QString& path, int count, const QString& name, bool import = false,
                                      int waitMs = 0)
{
    auto p = std::make_unique<QProcess>();
    QStringList args{path, QString::number(count), name};
    if (import)
        args << "--import";
    if (waitMs > 0)
        args << "--wait-ms" << QString::number(waitMs);
    p->start(QStringLiteral(SHARDSCOPE_STORE_WRITER), args);
    return p;
}

} // namespace

class TstStoreConcurrency : public QObject {
    Q_OBJECT
private slots:
    // Another process holds a healthy catalog locked (a write in rollback-journal mode, or
    // a WAL file in exclusive locking mode) for longer than the store waits: the open says
    // "in use by another process", announces its wait once, moves nothing, and the lock
    // holder's commit still succeeds.
    void lockedCatalogIsInUseNotCorrupt_data()
    {
        QTest::addColumn<QStringList>("lock");
        QTest::newRow("rollback journal, write transaction")
            << QStringList{"PRAGMA journal_mode=DELETE", "BEGIN EXCLUSIVE",
                           "INSERT INTO validation_runs (created_at, software_version, name, document)"
                           " VALUES ('now', 'x', 'holder', '{}')"};
        QTest::newRow("WAL, exclusive locking mode")
            << QStringList{"PRAGMA locking_mode=EXCLUSIVE", "BEGIN EXCLUSIVE",
                           "INSERT INTO validation_runs (created_at, software_version, name, document)"
                           " VALUES ('now', 'x', 'holder', '{}')"};
    }
    void lockedCatalogIsInUseNotCorrupt()
    {
        QFETCH(QStringList, lock);
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        makeCatalog(path);
        openRaw(path, "holder", lock);
        int waits = 0;
        try {
            Store store(path, DatabaseOptions{300, [&](const std::string& m) {
                                                  ++waits;
                                                  QVERIFY2(QString::fromStdString(m).contains("waiting"), m.c_str());
                                              }});
            QFAIL("a locked catalog must not open");
        } catch (const StoreError& e) {
            QVERIFY2(QString(e.what()).contains("is in use by another process"), e.what());
            QCOMPARE(e.kind(), StoreError::Kind::Busy);
        }
        QCOMPARE(waits, 1);
        QVERIFY2(asideFiles(dir.path()).isEmpty(), qPrintable(asideFiles(dir.path()).join(", ")));
        {
            QSqlQuery q(QSqlDatabase::database("holder"));
            QVERIFY2(q.exec("COMMIT"), qPrintable(q.lastError().text()));
        }
        closeRaw("holder");
        Store store(path);
        QCOMPARE(store.runs().validationRuns().size(), size_t(2));  // "kept" and the holder's
        QVERIFY(store.notices().empty());
    }

    // The lock is released while the store waits: it opens and sees the holder's write.
    void waitsForAShortLock()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        makeCatalog(path);
        std::atomic<bool> locked{false};
        std::thread holder([&] {
            openRaw(path, "short-holder",
                    {"PRAGMA journal_mode=DELETE", "BEGIN EXCLUSIVE",
                     "INSERT INTO validation_runs (created_at, software_version, name, document)"
                     " VALUES ('now', 'x', 'holder', '{}')"});
            locked = true;
            QThread::msleep(600);
            QSqlQuery(QSqlDatabase::database("short-holder")).exec("COMMIT");
            closeRaw("short-holder");
        });
        while (!locked)
            QThread::msleep(5);
        int waits = 0;
        {
            Store store(path, DatabaseOptions{20'000, [&](const std::string&) { ++waits; }});
            QCOMPARE(store.runs().validationRuns().front().name, std::string("holder"));
        }
        holder.join();
        QCOMPARE(waits, 1);
        QVERIFY(asideFiles(dir.path()).isEmpty());
    }

    // A full disk: the open or the first write fails naming the full disk, nothing is moved
    // aside, and once there is space again the catalog has everything it had.
    void fullDiskLeavesTheCatalog()
    {
        SmallDisk disk("4m");
        if (!disk.mounted())
            QSKIP("mounting a small tmpfs needs root");
        const QString path = disk.path("catalog.sqlite");
        makeCatalog(path);
        const QString filler = disk.fill();
        try {
            Store store(path);
            for (int i = 0; i < 200; ++i)  // more than the few KiB the filler may have left
                store.runs().storeValidationRun("more", QJsonObject{{"text", QString(2000, 'x')}});
            QFAIL("writing to a full disk must fail");
        } catch (const StoreError& e) {
            QCOMPARE(e.kind(), StoreError::Kind::DiskFull);
            QVERIFY2(QString(e.what()).contains("is full"), e.what());
        }
        QVERIFY(asideFiles(disk.folder()).isEmpty());
        QVERIFY(QFile::remove(filler));
        Store store(path);
        QVERIFY(store.notices().empty());
        const auto runs = store.runs().validationRuns(1000);
        QVERIFY(!runs.empty());
        QCOMPARE(runs.back().name, std::string("kept"));  // the oldest run, from before the disk filled
    }

    // A catalog on a read-only file system: the error says the folder cannot be written,
    // not "not a valid database", and the file stays where and what it was.
    void readOnlyFolderIsNamed()
    {
        SmallDisk disk("4m");
        if (!disk.mounted())
            QSKIP("mounting a read-only tmpfs needs root (as root, mode bits do not stop writes)");
        const QString path = disk.path("catalog.sqlite");
        makeCatalog(path);
        const QByteArray before = fileBytes(path);
        QVERIFY(disk.remountReadOnly());
        try {
            Store store(path);
            QFAIL("a catalog in a read-only folder must not open for writing");
        } catch (const StoreError& e) {
            QCOMPARE(e.kind(), StoreError::Kind::ReadOnly);
            QVERIFY2(QString(e.what()).contains("cannot be written"), e.what());
            QVERIFY2(!QString(e.what()).contains("not a valid database"), e.what());
        }
        QCOMPARE(fileBytes(path), before);
        QVERIFY(disk.remountWritable());
        QVERIFY(asideFiles(disk.folder()).isEmpty());
        Store store(path);
        QCOMPARE(store.runs().validationRuns().front().name, std::string("kept"));
    }

    // The GUI's connection stays open while two CLI processes write: every write of each
    // is visible to the others, and the open connection's -wal and -shm stay on disk.
    void twoProcessesAndAnOpenConnectionWrite()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        Store gui(path);
        gui.runs().storeValidationRun("gui", QJsonObject{});
        auto a = startWriter(path, 40, "a");
        auto b = startWriter(path, 40, "b");
        for (int i = 0; i < 40; ++i)
            gui.runs().storeValidationRun("gui", QJsonObject{{"i", i}});
        for (QProcess* p : {a.get(), b.get()}) {
            QVERIFY(p->waitForFinished(120'000));
            QVERIFY2(p->exitStatus() == QProcess::NormalExit && p->exitCode() == 0, p->readAllStandardError().constData());
        }
        QVERIFY(QFile::exists(path + "-wal"));
        QVERIFY(QFile::exists(path + "-shm"));
        QCOMPARE(gui.runs().validationRuns(1000).size(), size_t(121));
        // A process started now sees them all too (and adds none).
        auto reader = startWriter(path, 0, "reader");
        QVERIFY(reader->waitForFinished(60'000));
        QCOMPARE(reader->readAllStandardOutput().trimmed(), QByteArray("121"));
        QVERIFY(asideFiles(dir.path()).isEmpty());
    }

    // 20 processes start at once on a catalog that does not exist yet: one creates and
    // seeds it, the others wait and find it; every import and run lands.
    void twentyProcessesCreateOneCatalog()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("new/catalog.sqlite");
        std::vector<std::unique_ptr<QProcess>> writers;
        // (They wait up to 60 s, not the store's default 10: on a 2-core machine under the rest of
        // the suite, 20 processes seeding and importing in turn can take longer than 10 s.)
        for (int i = 0; i < 20; ++i)
            writers.push_back(startWriter(path, 1, QStringLiteral("w%1").arg(i), true, 60'000));
        for (auto& p : writers) {
            QVERIFY(p->waitForFinished(120'000));
            QVERIFY2(p->exitStatus() == QProcess::NormalExit && p->exitCode() == 0, p->readAllStandardError().constData());
        }
        Store store(path);
        QCOMPARE(store.runs().validationRuns(1000).size(), size_t(20));
        for (int i = 0; i < 20; ++i)
            QVERIFY(store.specs().find(QStringLiteral("w%1-model").arg(i).toStdString()));
        QVERIFY(store.specs().find("gpt2-small"));
        QVERIFY(asideFiles(dir.filePath("new")).isEmpty());
    }

    void negativeSchemaVersionRefused()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        makeCatalog(path);
        openRaw(path, "raw", {"PRAGMA user_version = -1"});
        closeRaw("raw");
        const QByteArray before = fileBytes(path);
        try {
            Store store(path);
            QFAIL("a negative schema version must be refused");
        } catch (const StoreError& e) {
            QVERIFY2(QString(e.what()).contains("schema version -1"), e.what());
        }
        QCOMPARE(fileBytes(path), before);
    }

    void droppedTableOrColumnNamed_data()
    {
        QTest::addColumn<QString>("change");
        QTest::addColumn<QString>("named");
        QTest::newRow("table") << "DROP TABLE validation_runs" << "table validation_runs is missing";
        QTest::newRow("column") << "ALTER TABLE host_profiles DROP COLUMN measured_at"
                                << "table host_profiles has no column measured_at";
    }
    void droppedTableOrColumnNamed()
    {
        QFETCH(QString, change);
        QFETCH(QString, named);
        QTemporaryDir dir;
        const QString path = dir.filePath("catalog.sqlite");
        makeCatalog(path);
        openRaw(path, "raw", {change});
        closeRaw("raw");
        try {
            Store store(path);
            QFAIL("a catalog without a table or column of its schema must be refused");
        } catch (const StoreError& e) {
            QVERIFY2(QString(e.what()).contains(named), e.what());
            QCOMPARE(e.kind(), StoreError::Kind::Damaged);
        }
        QVERIFY(asideFiles(dir.path()).isEmpty());
        QCOMPARE(rawCount(path, "SELECT count(*) FROM entries WHERE builtin = 1") > 0, true);
    }
};

QTEST_GUILESS_MAIN(TstStoreConcurrency)
#include "tst_store_concurrency.moc"
