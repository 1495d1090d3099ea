#include "Schema.h"

namespace shardscope {

const std::vector<std::vector<const char*>>& schemaSteps()
{
    static const std::vector<std::vector<const char*>> steps{
        // 0 -> 1: entries and key/value metadata
        {"CREATE TABLE entries (name TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('model','chip','node')),"
         " builtin INTEGER NOT NULL, display_name TEXT NOT NULL DEFAULT '', document TEXT NOT NULL,"
         " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
         "CREATE INDEX entries_kind ON entries(kind)",
         "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"},
        // 1 -> 2: saved plans (a problem, a layout and its prediction as JSON)
        {"CREATE TABLE plans (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, created_at TEXT NOT NULL,"
         " software_version TEXT NOT NULL, document TEXT NOT NULL)"},
        // 2 -> 3: host measurements (engine device profiles of this machine) and the history
        // of validation runs (planner prediction vs engine measurement)
        {"CREATE TABLE host_profiles (host_id TEXT NOT NULL, threads INTEGER NOT NULL, measured_at TEXT NOT NULL,"
         " document TEXT NOT NULL, PRIMARY KEY (host_id, threads))",
         "CREATE TABLE validation_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL,"
         " software_version TEXT NOT NULL, name TEXT NOT NULL, document TEXT NOT NULL)"},
        // 3 -> 4: named cost-model profiles (calibrations the planner can use on request)
        {"CREATE TABLE cost_profiles (name TEXT PRIMARY KEY, created_at TEXT NOT NULL, document TEXT NOT NULL)"},
        // 4 -> 5: the plans table goes. No ShardScope ever wrote to it (plans are files, which
        // carry their whole request); the backup taken before migrating keeps it.
        {"DROP TABLE plans"},
    };
    return steps;
}

} // namespace shardscope
