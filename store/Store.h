// Store: the user's database file, opened once, and the two views of it — the spec
// catalog (models, chips, node types) and the run store (validation runs, cost-model
// profiles, host profiles) — over the one connection, so that a command or the GUI opens,
// recovers and migrates the file exactly once.
#pragma once

#include "Database.h"
#include "RunStore.h"
#include "SpecCatalog.h"

#include <QString>

#include <string>
#include <utility>
#include <vector>

namespace shardscope {

class Store {
public:
    // Opens (creating, recovering or migrating) the file at `path`; throws StoreError
    // when it has a newer schema or cannot be used (store/Database.h).
    explicit Store(const QString& path, DatabaseOptions options = {})
        : db_(path, std::move(options)), specs_(db_), runs_(db_) {}
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // $SHARDSCOPE_DB, else <AppDataLocation>/catalog.sqlite.
    static QString defaultPath();

    const QString& path() const { return db_.path(); }
    // What happened on open that the user should know (a corrupt file moved aside, a
    // migration and its backup, a user entry shadowing a built-in).
    const std::vector<std::string>& notices() const { return db_.notices(); }
    int schemaVersion() const { return db_.schemaVersion(); }

    SpecCatalog& specs() { return specs_; }
    const SpecCatalog& specs() const { return specs_; }
    RunStore& runs() { return runs_; }
    const RunStore& runs() const { return runs_; }

private:
    Database db_;  // first: the views use it from their constructors on
    SpecCatalog specs_;
    RunStore runs_;
};

} // namespace shardscope
