// Catalog: the SQLite database of models, chips and node types (built-in and
// the user's own), plus saved plans. One file in the user's data folder.
//
// - Created on first open and seeded from the built-in JSON in resources/.
// - Schema versioned with PRAGMA user_version and migrated forward; a file with
//   a newer schema is refused, never rewritten.
// - A file that is not a valid database is moved aside (NAME.corrupt-<time>)
//   and a fresh catalog created; notices() says so.
// - WAL mode; every write is one transaction, so an import is all-or-nothing.
// A Catalog is used from the thread that opened it (QtSql connections are per thread).
#pragma once

#include "FieldError.h"
#include "HardwareSpec.h"
#include "HostProfile.h"
#include "ModelSpec.h"

#include <QJsonObject>
#include <QString>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

class QSqlQuery;

namespace shardscope {

enum class EntryKind { Model, Chip, Node };
const char* toString(EntryKind kind);
std::optional<EntryKind> entryKindFromString(const std::string& text);  // "model"/"models", ...

struct CatalogEntry {
    EntryKind kind = EntryKind::Model;
    std::string name;
    std::string display_name;
    bool builtin = false;
    QJsonObject document;  // normalized document (derived figures included for models)
};

// Failures that are not the user's input: I/O, a database we must not touch.
class CatalogError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Catalog {
public:
    static constexpr int kSchemaVersion = 4;

    // Opens (creating, recovering or migrating) the catalog at `path`.
    // Throws CatalogError when the file has a newer schema or cannot be used.
    explicit Catalog(const QString& path);
    ~Catalog();
    Catalog(const Catalog&) = delete;
    Catalog& operator=(const Catalog&) = delete;

    // $SHARDSCOPE_DB, else <AppDataLocation>/catalog.sqlite.
    static QString defaultPath();

    const QString& path() const { return path_; }
    // What happened on open that the user should know (a corrupt file moved aside, a migration).
    const std::vector<std::string>& notices() const { return notices_; }
    int schemaVersion() const;

    std::vector<CatalogEntry> list(std::optional<EntryKind> kind = std::nullopt) const;
    std::optional<CatalogEntry> find(const std::string& name) const;
    // Like find(), but throws InputError naming the missing entry (with near matches).
    CatalogEntry entry(const std::string& name) const;

    // Resolve specs by name; throw InputError naming what is missing (with near matches).
    ModelSpec model(const std::string& name) const;
    ChipSpec chip(const std::string& name) const;
    NodeType node(const std::string& name) const;
    std::optional<ChipSpec> findChip(const std::string& name) const;

    // Imports one entry document or a "shardscope.catalog/1" bundle of entries,
    // all-or-nothing: on any problem, throws InputError listing every field error
    // and leaves the catalog unchanged. Existing user entries of the same name are
    // replaced only when `replace` is true; built-ins are never replaced.
    std::vector<std::string> importDocument(const QJsonObject& document, bool replace = false);
    // What importDocument would refuse, without writing anything (for editors that check as you type).
    FieldErrors checkImport(const QJsonObject& document, bool replace = false) const;
    // Removes a user entry; built-ins and entries other entries depend on are refused.
    void remove(const std::string& name);

    // The stored measurement of this host at a thread count, if any.
    std::optional<HostProfile> hostProfile(const std::string& host_id, int threads) const;
    std::vector<HostProfile> hostProfiles() const;
    // Stores (or replaces) a measurement, in one transaction.
    void storeHostProfile(const HostProfile& profile);

    // Run history: validation documents (planner prediction vs engine measurement).
    struct ValidationRun {
        int id = 0;
        std::string created_at;        // ISO 8601, UTC
        std::string software_version;
        std::string name;
        QJsonObject document;          // "shardscope.validation/1"
    };
    int storeValidationRun(const std::string& name, const QJsonObject& document);

    // Named cost-model profiles (fitted efficiency terms, "shardscope.costmodel/1"): opt-in
    // alternatives to the built-in default, which is never changed.
    void storeCostProfile(const std::string& name, const QJsonObject& document);
    std::optional<QJsonObject> costProfile(const std::string& name) const;
    std::vector<std::string> costProfileNames() const;
    std::vector<ValidationRun> validationRuns(int limit = 100) const;  // newest first

private:
    void openOrRecover();
    void migrate(int from);
    void seedBuiltins();
    void exec(const QString& sql) const;
    // Runs `work` in one transaction: committed when it returns, rolled back when it throws.
    void inTransaction(const std::function<void()>& work);
    // Runs a prepared statement with its bound values; throws CatalogError naming the catalog.
    void run(class QSqlQuery& query) const;
    CatalogEntry entryFromRow(const QSqlQuery& q) const;
    std::string nearMatches(const std::string& name, std::optional<EntryKind> kind) const;

    QString path_;
    QString connection_;
    std::vector<std::string> notices_;
};

} // namespace shardscope
