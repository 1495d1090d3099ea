// Catalog documents: one model, chip or node-type document, or a "shardscope.catalog/1"
// bundle of them, read into typed entries ready to keep. Shared by the compiled-in specs
// (BuiltinSpecs) and the user's spec catalog (store/SpecCatalog), so that both read the
// same files the same way and report the same field paths.
#pragma once

#include "FieldError.h"
#include "SpecJson.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// An entry read from a document, with the path its problems are reported under.
struct ParsedEntry {
    CatalogEntry entry;
    std::string path;  // "entries[2]", "model", "chips.json: entries[0]"
};

// The entry documents of a bundle, or the single document, each with its path.
using EntryDocuments = std::vector<std::pair<QJsonObject, std::string>>;
EntryDocuments entryDocuments(const QJsonObject& document, FieldErrors& errors);

// Reads every document; chips first, so that node types in the same set of documents can
// name them. A node's chip that is not among them comes from `lookup`.
std::vector<ParsedEntry> parseEntries(const EntryDocuments& documents, FieldErrors& errors, const ChipLookup& lookup);

} // namespace shardscope
