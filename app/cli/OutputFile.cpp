#include "OutputFile.h"

#include <QFileInfo>
#include <QSaveFile>

#include <stdexcept>

namespace shardscope::cli {

void writeOutputFile(const std::string& path, const QByteArray& bytes, const std::string& option)
{
    const QString name = QString::fromStdString(path);
    const QFileInfo info(name);
    if (info.exists() && !info.isFile()) {
        const char* what = info.isDir() ? "a directory" : "not a regular file (a FIFO, socket or device)";
        throw std::runtime_error(option + ": " + path + " is " + what + "; it is left as it is, nothing written");
    }
    QSaveFile f(name);
    if (!f.open(QIODevice::WriteOnly))
        throw std::runtime_error(option + ": cannot write " + path + ": " + f.errorString().toStdString());
    if (f.write(bytes) != bytes.size() || !f.flush()) {
        const std::string why = f.errorString().toStdString();
        f.cancelWriting();
        throw std::runtime_error(option + ": cannot write " + path + ": " + why + " (the old file, if any, is kept)");
    }
    if (!f.commit())
        throw std::runtime_error(option + ": cannot write " + path + ": " + f.errorString().toStdString() +
                                 " (the old file, if any, is kept)");
}

} // namespace shardscope::cli
