// The files of one SQLite database — the main file and its -wal, -shm and -journal
// companions — moved or copied as a unit, never deleted: what the user had stays on disk.
#pragma once

#include <QString>

namespace shardscope {

// UTC now as a file-name tag: "20261201T101500123Z" (sortable, no ':' for other file systems).
QString fileTimeTag();

// False when `path` exists with bytes that do not start with SQLite's file header: a file
// SQLite must not even open, because closing it would delete its -wal and -shm.
bool hasSqliteHeaderOrIsEmpty(const QString& path);

// Renames `path` to `aside` and each companion file beside it (aside-wal, ...). Returns
// false, having moved nothing (or moved it all back), when any of them cannot be moved.
bool moveDatabaseFiles(const QString& path, const QString& aside);

// Copies the main file byte for byte to `copy` (which must not exist). The caller makes
// the main file complete first (a WAL checkpoint), so the companions are not needed.
bool copyDatabaseFile(const QString& path, const QString& copy);

} // namespace shardscope
