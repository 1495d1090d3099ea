// SpecCatalog: the models, chips and node types of the database — the built-in ones
// (seeded from BuiltinSpecs, never replaced or removed) and the user's own.
// Imports are all-or-nothing: one transaction, and nothing is written while any field
// of any entry is wrong.
#pragma once

#include "SpecLookup.h"

#include <QJsonObject>

#include <string>
#include <vector>

class QSqlQuery;

namespace shardscope {

class Database;

class SpecCatalog final : public SpecLookup {
public:
    // Seeds the built-ins when the compiled-in specs changed since the last open.
    explicit SpecCatalog(Database& db);

    std::vector<CatalogEntry> list(std::optional<EntryKind> kind = std::nullopt) const override;
    std::optional<CatalogEntry> find(const std::string& name) const override;

    // Imports one entry document or a "shardscope.catalog/1" bundle of entries,
    // all-or-nothing: on any problem, throws InputError listing every field error
    // and leaves the catalog unchanged. Existing user entries of the same name are
    // replaced only when `replace` is true; built-ins are never replaced.
    std::vector<std::string> importDocument(const QJsonObject& document, bool replace = false);
    // What importDocument would refuse, without writing anything (for editors that check as you type).
    FieldErrors checkImport(const QJsonObject& document, bool replace = false) const;
    // Removes a user entry; built-ins and entries other entries depend on are refused.
    void remove(const std::string& name);

private:
    void seedBuiltins();
    std::vector<ParsedEntry> checkedEntries(const QJsonObject& document, bool replace, FieldErrors& errors) const;
    void insert(const CatalogEntry& entry, const QString& now);

    Database& db_;
};

} // namespace shardscope
