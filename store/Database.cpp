#include "Database.h"
#include "DatabaseFiles.h"
#include "Schema.h"
#include "StoreError.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QSqlError>
#include <QSqlQuery>
#include <QStorageInfo>
#include <QThread>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <unistd.h>

namespace shardscope {

namespace {

// SQLite's primary result codes (sqlite3.h). Qt passes SQLite's code as the native error
// code, extended or not, so only its low byte is compared.
enum SqliteCode : int {
    kSqlitePerm = 3,
    kSqliteBusy = 5,
    kSqliteLocked = 6,
    kSqliteReadOnly = 8,
    kSqliteIoErr = 10,
    kSqliteCorrupt = 11,
    kSqliteFull = 13,
    kSqliteCantOpen = 14,
    kSqliteNotADb = 26,
};

int primaryCode(const QSqlError& e)
{
    bool ok = false;
    const int code = e.nativeErrorCode().toInt(&ok);
    return ok ? (code & 0xff) : 0;
}

bool isBusy(const QSqlError& e) { return primaryCode(e) == kSqliteBusy || primaryCode(e) == kSqliteLocked; }

// Why `path` (a folder or a file) cannot be written, or empty when it can. access() is
// asked rather than the mode bits: a read-only mount refuses even root.
std::string notWritable(const QString& path)
{
    if (::access(QFile::encodeName(path).constData(), W_OK) == 0)
        return {};
    return std::strerror(errno);
}

std::string seconds(int ms) { return QString::number(ms / 1000.0, 'g', 3).toStdString() + " s"; }

} // namespace

Database::Database(const QString& path, DatabaseOptions options) : path_(path), options_(std::move(options))
{
    // Qt Sql names connections process-wide: one name per Database, so two may be open at once.
    static std::atomic<int> counter{0};
    connection_ = QStringLiteral("shardscope-store-%1").arg(counter.fetch_add(1));
    try {
        openOrRecover();
    } catch (...) {
        closeConnection();  // the destructor does not run for a constructor that throws
        throw;
    }
}

Database::~Database() { closeConnection(); }

void Database::closeConnection()
{
    {
        QSqlDatabase db = QSqlDatabase::database(connection_, false);
        if (db.isOpen())
            db.close();
    }
    QSqlDatabase::removeDatabase(connection_);
}

QSqlDatabase Database::connection() const { return QSqlDatabase::database(connection_); }

void Database::fail(const std::string& what) const { throw StoreError("catalog " + path_.toStdString() + ": " + what); }

void Database::failOn(const QSqlError& error, const std::string& doing) const
{
    const std::string file = "catalog " + path_.toStdString();
    const std::string sqlite = " (SQLite: " + error.text().toStdString() + ")";
    const QString folder = QFileInfo(path_).absolutePath();
    const int code = primaryCode(error);
    if (code == kSqliteBusy || code == kSqliteLocked)
        throw StoreError(file + " is in use by another process (still locked after waiting " +
                             seconds(options_.busy_timeout_ms) + " while " + doing +
                             "); it was left as it is: try again when the other ShardScope has finished",
                         StoreError::Kind::Busy);
    // A full disk surfaces as SQLITE_FULL on a write, but as an I/O error when growing the
    // -shm of a WAL file; asking the file system tells the two apart from a broken disk.
    const QStorageInfo storage(folder);
    if (code == kSqliteFull || (code == kSqliteIoErr && storage.isValid() && storage.bytesAvailable() == 0))
        throw StoreError(file + ": the disk holding " + folder.toStdString() + " is full, while " + doing + sqlite +
                             "; the catalog was left unchanged: free some space and try again",
                         StoreError::Kind::DiskFull);
    if (code == kSqliteReadOnly || code == kSqliteCantOpen || code == kSqlitePerm || code == kSqliteIoErr) {
        // SQLite writes its -wal, -shm or -journal beside the file: the folder must be writable too.
        if (const std::string why = notWritable(folder); !why.empty())
            throw StoreError(file + ": its folder " + folder.toStdString() + " cannot be written (" + why +
                                 "), while " + doing + sqlite +
                                 "; the catalog was left unchanged. Make the folder writable or choose another "
                                 "file with --db PATH",
                             StoreError::Kind::ReadOnly);
        if (QFileInfo::exists(path_))
            if (const std::string why = notWritable(path_); !why.empty())
                throw StoreError(file + " cannot be written (" + why + "), while " + doing + sqlite +
                                     "; it was left unchanged. Make it writable or choose another file with --db PATH",
                                 StoreError::Kind::ReadOnly);
    }
    throw StoreError(file + ": " + doing + " failed" + sqlite + "; the catalog was left unchanged");
}

void Database::exec(const QString& sql) const
{
    QSqlQuery q(connection());
    if (!q.exec(sql))
        failOn(q.lastError(), "running " + sql.left(120).toStdString());
}

void Database::run(QSqlQuery& q) const
{
    if (!q.exec())
        failOn(q.lastError(), "running " + q.lastQuery().left(120).toStdString());
}

void Database::inTransaction(const std::function<void()>& work)
{
    // IMMEDIATE: the write lock is taken now, waiting for another writer up to the busy
    // timeout. A deferred transaction that reads first and writes later would instead fail
    // at its first write, without waiting, whenever another process wrote in between.
    exec(QStringLiteral("BEGIN IMMEDIATE"));
    auto rollback = [&] {
        QSqlQuery q(connection());
        q.exec(QStringLiteral("ROLLBACK"));
    };
    try {
        work();
    } catch (...) {
        rollback();
        throw;
    }
    QSqlQuery commit(connection());
    if (!commit.exec(QStringLiteral("COMMIT"))) {
        const QSqlError error = commit.lastError();
        rollback();
        failOn(error, "committing a transaction (nothing of it was written)");
    }
}

int Database::schemaVersion() const
{
    QSqlQuery q(connection());
    if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next())
        failOn(q.lastError(), "reading its schema version");
    return q.value(0).toInt();
}

Database::Health Database::openAndCheck(std::string& why)
{
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection_);
    db.setDatabaseName(path_);
    // Short slices of waiting, so that the wait can be announced and bounded here; the
    // whole timeout applies to every statement once the file is open.
    const int slice = std::min(options_.busy_timeout_ms, 250);
    db.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=%1").arg(slice));
    if (!db.open())
        failOn(db.lastError(), "opening it");
    // The first read: a file that is not a database fails here. Busy is not damage: the
    // file is healthy and another process is writing it, so wait and ask again.
    QDeadlineTimer deadline(options_.busy_timeout_ms);
    bool announced = false;
    for (;;) {
        QSqlQuery check(db);
        if (check.exec(QStringLiteral("PRAGMA quick_check")) && check.next()) {
            const QString verdict = check.value(0).toString();
            check.finish();
            exec(QStringLiteral("PRAGMA busy_timeout = %1").arg(options_.busy_timeout_ms));
            if (verdict == QLatin1String("ok"))
                return Health::Healthy;
            why = "quick_check found damage: " + verdict.left(200).toStdString();
            return Health::NotADatabase;
        }
        const QSqlError error = check.lastError();
        check.finish();
        const int code = primaryCode(error);
        if (code == kSqliteNotADb || code == kSqliteCorrupt) {
            why = "SQLite says: " + error.text().toStdString();
            return Health::NotADatabase;
        }
        if (!isBusy(error) || deadline.hasExpired())
            failOn(error, "opening it");
        if (!announced && options_.on_wait)
            options_.on_wait("catalog " + path_.toStdString() + " is in use by another process; waiting up to " +
                             seconds(options_.busy_timeout_ms) + "...");
        announced = true;
        QThread::msleep(20);
    }
}

void Database::openOrRecover()
{
    const QFileInfo info(path_);
    if (!QDir().mkpath(info.absolutePath()))
        throw StoreError("cannot create the folder " + info.absolutePath().toStdString() + " for the catalog",
                         StoreError::Kind::ReadOnly);
    if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE")))
        throw StoreError("the Qt SQLite driver (QSQLITE) is not installed: install libqt6sql6-sqlite");

    // Not a database at all: moved aside before SQLite opens it, so that its companions
    // (which SQLite deletes when it closes such a file) go with it intact.
    if (!hasSqliteHeaderOrIsEmpty(path_))
        moveAside("it does not start with SQLite's file header");
    std::string why;
    if (openAndCheck(why) == Health::NotADatabase) {
        closeConnection();
        moveAside(why);
        if (openAndCheck(why) == Health::NotADatabase)
            fail("is unusable even after recreating it (" + why + ")");
    }

    const int version = schemaVersion();
    refuseUnusable(version);
    // Before anything writes: switching to WAL rewrites the header, and the backup must be
    // the file as the older ShardScope left it.
    const QString backup = version > 0 && version < kSchemaVersion ? backUp(version) : QString();
    exec(QStringLiteral("PRAGMA journal_mode=WAL"));
    exec(QStringLiteral("PRAGMA foreign_keys=ON"));
    migrate(version, backup);
    checkTables();
}

void Database::moveAside(const std::string& why)
{
    // Keep the damaged file for the user; never delete it.
    const QString aside = path_ + QStringLiteral(".corrupt-") + fileTimeTag();
    if (!moveDatabaseFiles(path_, aside)) {
        const QString folder = QFileInfo(path_).absolutePath();
        const std::string readOnly = notWritable(folder);
        throw StoreError("catalog " + path_.toStdString() + " is not a valid database (" + why +
                             ") and could not be moved aside to " + aside.toStdString() +
                             (readOnly.empty() ? std::string() : ": its folder cannot be written (" + readOnly + ")") +
                             "; it was left unchanged",
                         readOnly.empty() ? StoreError::Kind::Other : StoreError::Kind::ReadOnly);
    }
    notices_.push_back("catalog " + path_.toStdString() + " was not a valid database (" + why +
                       "); it was moved to " + aside.toStdString() + " and a new catalog was created");
}

void Database::refuseUnusable(int version) const
{
    if (version > kSchemaVersion)
        throw StoreError("catalog " + path_.toStdString() + " has schema version " + std::to_string(version) +
                         ", newer than this ShardScope supports (" + std::to_string(kSchemaVersion) +
                         "); it was left unchanged. Use a newer ShardScope or another file (--db PATH).");
    // PRAGMA user_version is a signed 32-bit field that no ShardScope sets below 0.
    if (version < 0)
        throw StoreError("catalog " + path_.toStdString() + " has schema version " + std::to_string(version) +
                         ", which no ShardScope writes (another program changed it?); it was left unchanged. "
                         "Choose another file with --db PATH.");
    if (version == 0) {
        // The version again with the tables, in one statement (one snapshot): another process
        // may have created the catalog since `version` was read, and its tables with its
        // version are ours, not another program's (20 processes starting at once hit this).
        QSqlQuery q(connection());
        if (!q.exec(QStringLiteral("SELECT (SELECT user_version FROM pragma_user_version), "
                                   "(SELECT count(*) FROM sqlite_master)")) ||
            !q.next())
            failOn(q.lastError(), "reading its tables");
        if (q.value(0).toInt() == 0 && q.value(1).toInt() > 0)
            throw StoreError("catalog " + path_.toStdString() +
                             " is an SQLite database of another program; it was left unchanged. "
                             "Choose another file with --db PATH.");
    }
}

void Database::checkTables() const
{
    // Every table and column the current schema has, from the schema's own steps run on
    // an empty in-memory database: a file at the current version that lacks one was
    // changed by hand or by another program, and each query on it would fail obscurely.
    static const std::set<std::pair<QString, QString>> expected = [] {
        std::set<std::pair<QString, QString>> columns;
        const QString name = QStringLiteral("shardscope-schema-reference");
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
            db.setDatabaseName(QStringLiteral(":memory:"));
            if (db.open()) {
                QSqlQuery q(db);
                for (const auto& step : schemaSteps())
                    for (const char* sql : step)
                        q.exec(QString::fromLatin1(sql));
                q.exec(QStringLiteral("SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
                                      " WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"));
                while (q.next())
                    columns.emplace(q.value(0).toString(), q.value(1).toString());
            }
            db.close();
        }
        QSqlDatabase::removeDatabase(name);
        return columns;
    }();
    if (expected.empty())
        fail("the expected schema could not be built in memory (is the Qt SQLite driver complete?)");
    QSqlQuery q(connection());
    if (!q.exec(QStringLiteral("SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
                               " WHERE m.type = 'table'")))
        failOn(q.lastError(), "reading its tables");
    std::set<std::pair<QString, QString>> present;
    std::set<QString> tables;
    while (q.next()) {
        present.emplace(q.value(0).toString(), q.value(1).toString());
        tables.insert(q.value(0).toString());
    }
    std::string missing;
    std::set<QString> reported;
    for (const auto& [table, column] : expected) {
        if (present.count({table, column}))
            continue;
        if (!tables.count(table)) {
            if (reported.insert(table).second)
                missing += (missing.empty() ? "" : ", ") + ("table " + table).toStdString() + " is missing";
        } else {
            missing += (missing.empty() ? "" : ", ") + ("table " + table + " has no column " + column).toStdString();
        }
    }
    if (!missing.empty())
        throw StoreError("catalog " + path_.toStdString() + " says it has schema version " +
                             std::to_string(kSchemaVersion) + ", but " + missing +
                             " (changed by another program?); it was left unchanged. Restore it from a backup "
                             "or choose another file with --db PATH.",
                         StoreError::Kind::Damaged);
}

QString Database::backUp(int version)
{
    // A file in WAL mode may hold committed pages only in its -wal: fold them into the main
    // file so that a copy of the main file alone is the whole catalog. TRUNCATE also empties
    // the -wal, so nothing is left that the copy lacks. (busy = 1 means another connection
    // kept part of the log: copying then would lose data, so nothing is migrated.)
    QSqlQuery q(connection());
    if (!q.exec(QStringLiteral("PRAGMA wal_checkpoint(TRUNCATE)")) || !q.next())
        failOn(q.lastError(), "folding its -wal into the file before the backup for the upgrade from schema version " +
                                  std::to_string(version));
    if (q.value(0).toInt() != 0)
        throw StoreError("catalog " + path_.toStdString() + " is in use by another process, so it cannot be backed "
                             "up before upgrading it from schema version " + std::to_string(version) +
                             "; it was left unchanged: try again when the other ShardScope has finished",
                         StoreError::Kind::Busy);
    q.finish();
    const QString backup = path_ + QStringLiteral(".schema-v%1-").arg(version) + fileTimeTag() + QStringLiteral(".bak");
    if (!copyDatabaseFile(path_, backup))
        fail("cannot write the backup " + backup.toStdString() + " before upgrading from schema version " +
             std::to_string(version) + " (disk full?); it was left unchanged");
    return backup;
}

void Database::migrate(int seenBeforeOpen, const QString& backup)
{
    if (seenBeforeOpen >= kSchemaVersion)
        return;
    int from = seenBeforeOpen;
    inTransaction([&] {
        // Read again under the write lock: another process may have created or migrated the
        // file since it was first read, and running the steps twice would fail ("table
        // entries already exists").
        from = schemaVersion();
        refuseUnusable(from);
        for (int v = from; v < kSchemaVersion; ++v)
            for (const char* sql : schemaSteps()[size_t(v)])
                exec(QString::fromLatin1(sql));
        if (from < kSchemaVersion)
            exec(QStringLiteral("PRAGMA user_version = %1").arg(kSchemaVersion));
    });
    if (from > 0 && from < kSchemaVersion)
        notices_.push_back("catalog " + path_.toStdString() + " was upgraded from schema version " +
                           std::to_string(from) + " to " + std::to_string(kSchemaVersion) +
                           "; the previous file was kept as " + backup.toStdString());
}

} // namespace shardscope
