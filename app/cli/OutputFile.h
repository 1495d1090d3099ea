// Writing a command's --out file without ever losing what was there: the bytes go to a
// temporary file beside the target, are flushed and checked, then renamed over it
// (QSaveFile), so a full disk or an interrupted write leaves the old file whole. A target
// that exists and is not a regular file (a FIFO, a device such as /dev/full, a directory)
// is refused by name rather than replaced by a regular file.
#pragma once

#include <QByteArray>

#include <string>

namespace shardscope::cli {

// Throws std::runtime_error "OPTION: cannot write PATH: <the system's reason>".
void writeOutputFile(const std::string& path, const QByteArray& bytes, const std::string& option = "--out");

} // namespace shardscope::cli
