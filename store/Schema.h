// The database schema, one migration step per version (PRAGMA user_version): step i takes
// a file from version i to i + 1. Steps are only ever appended; a released step never changes,
// because files made with it exist.
#pragma once

#include <vector>

namespace shardscope {

inline constexpr int kSchemaVersion = 5;

// The SQL statements of each step, kSchemaVersion steps in all.
const std::vector<std::vector<const char*>>& schemaSteps();

} // namespace shardscope
