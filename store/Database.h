// Database: one SQLite file (Qt Sql, QSQLITE) with its schema kept current.
//
// - Created on first open (with its folder). Creation and migration run in one exclusive
//   transaction, so that several processes starting at once on a file that does not exist
//   yet create it once (the others wait, then find it current).
// - A file is moved aside (NAME.corrupt-<time>, with its -wal/-shm/-journal) and a fresh one
//   created only when it is not a database: it lacks SQLite's header, SQLite says so, or
//   quick_check finds damage. notices() says so.
// - Anything else that stops the open leaves every file as it was and throws StoreError
//   with its kind: another process holding the file locked past the wait (Busy: "in use by
//   another process"), a full disk, a read-only file or folder, a file that claims the
//   current schema but lacks a table or column (named), a newer schema, a negative schema
//   version, or another program's SQLite database.
// - An older schema is migrated forward in one transaction, after a byte copy of the file
//   is kept beside it (NAME.schema-v<old>-<time>.bak); notices() says where.
// - WAL mode; inTransaction() runs a unit of writes as one immediate transaction (the write
//   lock taken at its start, waiting for other writers up to the busy timeout).
// Used from the thread that opened it (Qt Sql connections belong to one thread).
#pragma once

#include <QSqlDatabase>
#include <QString>

#include <functional>
#include <utility>
#include <string>
#include <vector>

class QSqlError;
class QSqlQuery;

namespace shardscope {

struct DatabaseOptions {
    // How long a statement waits for another process that holds the file locked (a long
    // write, a GUI in the middle of a transaction) before the store says it is in use.
    int busy_timeout_ms = 10'000;
    // Called once, when opening finds the file locked and starts to wait (the CLI can say
    // "waiting..." instead of hanging silently). May be empty.
    std::function<void(const std::string& message)> on_wait;
};

class Database {
public:
    // Throws StoreError when the file cannot be used (see above).
    explicit Database(const QString& path, DatabaseOptions options = {});
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    const QString& path() const { return path_; }
    const std::vector<std::string>& notices() const { return notices_; }
    void addNotice(std::string notice) { notices_.push_back(std::move(notice)); }
    // PRAGMA user_version; throws StoreError when it cannot be read.
    int schemaVersion() const;

    QSqlDatabase connection() const;
    // Runs one statement; throws StoreError naming the file and the statement.
    void exec(const QString& sql) const;
    // Runs a prepared statement with its bound values; throws StoreError naming the file.
    void run(QSqlQuery& query) const;
    // Runs `work` in one transaction: committed when it returns, rolled back when it throws.
    void inTransaction(const std::function<void()>& work);

private:
    enum class Health { Healthy, NotADatabase };
    Health openAndCheck(std::string& why);
    void closeConnection();
    void openOrRecover();
    void moveAside(const std::string& why);
    void refuseUnusable(int version) const;
    void checkTables() const;
    // Returns the backup's path.
    QString backUp(int version);
    void migrate(int seenBeforeOpen, const QString& backup);
    [[noreturn]] void fail(const std::string& what) const;
    // Throws StoreError for a failed SQLite call: busy, disk full and read-only are named
    // as such (with the folder or disk concerned); `doing` says what was attempted.
    [[noreturn]] void failOn(const QSqlError& error, const std::string& doing) const;

    QString path_;
    QString connection_;
    DatabaseOptions options_;
    std::vector<std::string> notices_;
};

} // namespace shardscope
