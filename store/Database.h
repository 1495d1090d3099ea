// Database: one SQLite file (Qt Sql, QSQLITE) with its schema kept current.
//
// - Created on first open (with its folder).
// - A file that is not a valid database is moved aside (NAME.corrupt-<time>, with its
//   -wal/-shm/-journal) and a fresh one created; notices() says so.
// - A file with a newer schema, or another program's SQLite database, is refused and left
//   byte for byte as it was.
// - An older schema is migrated forward in one transaction, after a byte copy of the file
//   is kept beside it (NAME.schema-v<old>-<time>.bak); notices() says where.
// - WAL mode; work() runs a unit of writes as one transaction.
// Used from the thread that opened it (Qt Sql connections belong to one thread).
#pragma once

#include <QSqlDatabase>
#include <QString>

#include <functional>
#include <utility>
#include <string>
#include <vector>

class QSqlQuery;

namespace shardscope {

class Database {
public:
    // Throws StoreError when the file cannot be used (see above).
    explicit Database(const QString& path);
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    const QString& path() const { return path_; }
    const std::vector<std::string>& notices() const { return notices_; }
    void addNotice(std::string notice) { notices_.push_back(std::move(notice)); }
    int schemaVersion() const;

    QSqlDatabase connection() const;
    // Runs one statement; throws StoreError naming the file and the statement.
    void exec(const QString& sql) const;
    // Runs a prepared statement with its bound values; throws StoreError naming the file.
    void run(QSqlQuery& query) const;
    // Runs `work` in one transaction: committed when it returns, rolled back when it throws.
    void inTransaction(const std::function<void()>& work);

private:
    void openOrRecover();
    void moveAside();
    void refuseUnusable(int version) const;
    // Returns the backup's path.
    QString backUp(int version);
    void migrate(int from, const QString& backup);
    [[noreturn]] void fail(const std::string& what) const;

    QString path_;
    QString connection_;
    std::vector<std::string> notices_;
};

} // namespace shardscope
