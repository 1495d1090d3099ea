#include "Database.h"
#include "DatabaseFiles.h"
#include "Schema.h"
#include "StoreError.h"

#include <QDir>
#include <QFileInfo>
#include <QSqlError>
#include <QSqlQuery>

#include <atomic>

namespace shardscope {

Database::Database(const QString& path) : path_(path)
{
    // Qt Sql names connections process-wide: one name per Database, so two may be open at once.
    static std::atomic<int> counter{0};
    connection_ = QStringLiteral("shardscope-store-%1").arg(counter.fetch_add(1));
    openOrRecover();
}

Database::~Database()
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

void Database::exec(const QString& sql) const
{
    QSqlQuery q(connection());
    if (!q.exec(sql))
        fail(q.lastError().text().toStdString() + " (in: " + sql.toStdString() + ")");
}

void Database::run(QSqlQuery& q) const
{
    if (!q.exec())
        fail(q.lastError().text().toStdString());
}

void Database::inTransaction(const std::function<void()>& work)
{
    QSqlDatabase db = connection();
    if (!db.transaction())
        fail("cannot start a transaction: " + db.lastError().text().toStdString());
    try {
        work();
    } catch (...) {
        db.rollback();
        throw;
    }
    if (!db.commit()) {
        const std::string message = db.lastError().text().toStdString();
        db.rollback();
        fail(message);
    }
}

int Database::schemaVersion() const
{
    QSqlQuery q(connection());
    if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next())
        return -1;
    return q.value(0).toInt();
}

void Database::openOrRecover()
{
    const QFileInfo info(path_);
    if (!QDir().mkpath(info.absolutePath()))
        throw StoreError("cannot create the folder " + info.absolutePath().toStdString() + " for the catalog");
    if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE")))
        throw StoreError("the Qt SQLite driver (QSQLITE) is not installed: install libqt6sql6-sqlite");

    // Not a database at all: moved aside before SQLite opens it, so that its companions
    // (which SQLite deletes when it closes such a file) go with it intact.
    if (!hasSqliteHeaderOrIsEmpty(path_))
        moveAside();
    for (int attempt = 0; attempt < 2; ++attempt) {
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection_);
            db.setDatabaseName(path_);
            if (!db.open())
                throw StoreError("cannot open catalog " + path_.toStdString() + ": " +
                                 db.lastError().text().toStdString());
            // A file that is not a database fails here, on the first read.
            QSqlQuery check(db);
            const bool healthy = check.exec(QStringLiteral("PRAGMA quick_check")) && check.next() &&
                                 check.value(0).toString() == QLatin1String("ok");
            check.finish();
            if (healthy)
                break;
            db.close();
        }
        QSqlDatabase::removeDatabase(connection_);
        if (attempt == 1)
            throw StoreError("catalog " + path_.toStdString() + " is unusable even after recreating it");
        moveAside();
    }

    const int version = schemaVersion();
    refuseUnusable(version);
    // Before anything writes: switching to WAL rewrites the header, and the backup must be
    // the file as the older ShardScope left it.
    const QString backup = version > 0 && version < kSchemaVersion ? backUp(version) : QString();
    exec(QStringLiteral("PRAGMA journal_mode=WAL"));
    exec(QStringLiteral("PRAGMA foreign_keys=ON"));
    if (version < kSchemaVersion)
        migrate(version, backup);
}

void Database::moveAside()
{
    // Keep the damaged file for the user; never delete it.
    const QString aside = path_ + QStringLiteral(".corrupt-") + fileTimeTag();
    if (!moveDatabaseFiles(path_, aside))
        throw StoreError("catalog " + path_.toStdString() + " is not a valid database and could not be moved aside");
    notices_.push_back("catalog " + path_.toStdString() + " was not a valid database; it was moved to " +
                       aside.toStdString() + " and a new catalog was created");
}

void Database::refuseUnusable(int version) const
{
    if (version > kSchemaVersion)
        throw StoreError("catalog " + path_.toStdString() + " has schema version " + std::to_string(version) +
                         ", newer than this ShardScope supports (" + std::to_string(kSchemaVersion) +
                         "); it was left unchanged. Use a newer ShardScope or another file (--db PATH).");
    if (version == 0) {
        QSqlQuery q(connection());
        if (q.exec(QStringLiteral("SELECT count(*) FROM sqlite_master")) && q.next() && q.value(0).toInt() > 0)
            throw StoreError("catalog " + path_.toStdString() +
                             " is an SQLite database of another program; it was left unchanged. "
                             "Choose another file with --db PATH.");
    }
}

QString Database::backUp(int version)
{
    // A file in WAL mode may hold committed pages only in its -wal: fold them into the main
    // file so that a copy of the main file alone is the whole catalog. TRUNCATE also empties
    // the -wal, so nothing is left that the copy lacks. (busy = 1 means another connection
    // kept part of the log: copying then would lose data, so nothing is migrated.)
    QSqlQuery q(connection());
    if (!q.exec(QStringLiteral("PRAGMA wal_checkpoint(TRUNCATE)")) || !q.next() || q.value(0).toInt() != 0)
        fail("cannot back up the file before upgrading it from schema version " + std::to_string(version) +
             " (another program is using it?); it was left unchanged");
    q.finish();
    const QString backup = path_ + QStringLiteral(".schema-v%1-").arg(version) + fileTimeTag() + QStringLiteral(".bak");
    if (!copyDatabaseFile(path_, backup))
        fail("cannot write the backup " + backup.toStdString() + " before upgrading from schema version " +
             std::to_string(version) + " (disk full?); it was left unchanged");
    return backup;
}

void Database::migrate(int from, const QString& backup)
{
    inTransaction([&] {
        for (int v = from; v < kSchemaVersion; ++v)
            for (const char* sql : schemaSteps()[size_t(v)])
                exec(QString::fromLatin1(sql));
        exec(QStringLiteral("PRAGMA user_version = %1").arg(kSchemaVersion));
    });
    if (from > 0)
        notices_.push_back("catalog " + path_.toStdString() + " was upgraded from schema version " +
                           std::to_string(from) + " to " + std::to_string(kSchemaVersion) +
                           "; the previous file was kept as " + backup.toStdString());
}

} // namespace shardscope
