// BuiltinSpecs: the models, chips and node types compiled into the program
// (resources/catalog/*.json), read once on first use. Everything that only needs the
// built-in specs — the planner's calibration cases, benchmarks, tests — resolves names here
// without a database; the user's catalog (store/SpecCatalog) seeds itself from the same entries.
#pragma once

#include "SpecLookup.h"

#include <string>
#include <vector>

namespace shardscope {

class BuiltinSpecs final : public SpecLookup {
public:
    // Parsed on the first call; throws std::runtime_error if the compiled-in data is invalid
    // (a build defect, not the user's input). Safe to use from any thread.
    static const BuiltinSpecs& instance();

    std::vector<CatalogEntry> list(std::optional<EntryKind> kind = std::nullopt) const override;
    std::optional<CatalogEntry> find(const std::string& name) const override;

    // Every entry in the order of the files (chips.json, models.json, nodes.json).
    const std::vector<CatalogEntry>& entries() const { return entries_; }
    // SHA-256 (hex) of the files' names and bytes: changes exactly when the data does, so a
    // catalog reseeds its built-ins only then.
    const std::string& sha256() const { return sha256_; }

private:
    BuiltinSpecs();

    std::vector<CatalogEntry> entries_;
    std::string sha256_;
};

} // namespace shardscope
