// The files of one SQLite database — the main file and its -wal and -shm companions —
// moved or copied as a unit, never deleted: what the user had stays on disk.
#pragma once

#include <QString>

namespace shardscope {

// UTC now as a file-name tag: "20261201T101500123Z" (sortable, no ':' for other file systems).
QString fileTimeTag();

// Renames `path` to `aside` and each companion file beside it (aside-wal, ...). Returns
// false, having moved nothing, when the main file cannot be moved.
bool moveDatabaseFiles(const QString& path, const QString& aside);


} // namespace shardscope
