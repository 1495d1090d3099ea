#include "DatabaseFiles.h"

#include <QDateTime>
#include <QFile>

namespace shardscope {

namespace {

// WAL mode's log and shared-memory index belong to the main file.
constexpr const char* kCompanionSuffixes[] = {"-wal", "-shm"};

} // namespace

QString fileTimeTag()
{
    return QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMddTHHmmsszzz")) + QLatin1Char('Z');
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

} // namespace shardscope
