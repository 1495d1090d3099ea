#include "DatabaseFiles.h"

#include <QDateTime>
#include <QFile>

#include <vector>

namespace shardscope {

namespace {

// A rollback journal (-journal) is what a crashed write left behind in the default journal
// mode; -wal and -shm are WAL mode's. Whichever exists belongs to the main file.
constexpr const char* kCompanionSuffixes[] = {"-wal", "-shm", "-journal"};

} // namespace

QString fileTimeTag()
{
    return QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMddTHHmmsszzz")) + QLatin1Char('Z');
}

bool hasSqliteHeaderOrIsEmpty(const QString& path)
{
    static constexpr char kHeader[] = "SQLite format 3";  // 16 bytes with its '\0'
    QFile f(path);
    if (!f.exists() || f.size() == 0)
        return true;
    if (!f.open(QIODevice::ReadOnly))
        return true;  // unreadable: let SQLite report why
    return f.read(sizeof kHeader) == QByteArray(kHeader, sizeof kHeader);
}

bool moveDatabaseFiles(const QString& path, const QString& aside)
{
    if (!QFile::rename(path, aside))
        return false;
    // A companion left behind would be read as the new file's own log: all move, or none.
    std::vector<const char*> moved;
    for (const char* suffix : kCompanionSuffixes) {
        if (!QFile::exists(path + QLatin1String(suffix)))
            continue;
        if (!QFile::rename(path + QLatin1String(suffix), aside + QLatin1String(suffix))) {
            for (const char* back : moved)
                QFile::rename(aside + QLatin1String(back), path + QLatin1String(back));
            QFile::rename(aside, path);
            return false;
        }
        moved.push_back(suffix);
    }
    return true;
}

bool copyDatabaseFile(const QString& path, const QString& copy)
{
    if (QFile::exists(copy))
        return false;
    if (QFile::copy(path, copy))
        return true;
    QFile::remove(copy);  // a partial copy (disk full) is no backup
    return false;
}

} // namespace shardscope
