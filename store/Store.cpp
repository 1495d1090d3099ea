#include "Store.h"

#include <QDir>
#include <QStandardPaths>

namespace shardscope {

QString Store::defaultPath()
{
    const QByteArray env = qgetenv("SHARDSCOPE_DB");
    if (!env.isEmpty())
        return QString::fromLocal8Bit(env);
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (dir.isEmpty())
        dir = QDir::homePath() + QStringLiteral("/.local/share/shardscope");
    return dir + QStringLiteral("/catalog.sqlite");
}

} // namespace shardscope
