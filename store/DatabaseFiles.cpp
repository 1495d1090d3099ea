#include "DatabaseFiles.h"

#include <QDateTime>
#include <QFile>

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
    for (const char* suffix : kCompanionSuffixes)
        if (QFile::exists(path + QLatin1String(suffix)))
            QFile::rename(path + QLatin1String(suffix), aside + QLatin1String(suffix));
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
