// SpecLookup: models, chips and node types by name. Implemented by the compiled-in specs
// (BuiltinSpecs, no database) and by the user's catalog (store/SpecCatalog), so that code
// which only resolves names — the planner's calibration cases, the CLI's arguments — takes
// whichever it is given and never needs a database of its own.
#pragma once

#include "CatalogDocument.h"
#include "HardwareSpec.h"
#include "ModelSpec.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

class SpecLookup {
public:
    virtual ~SpecLookup() = default;

    // Entries of one kind (or all), models first, then chips, then node types.
    virtual std::vector<CatalogEntry> list(std::optional<EntryKind> kind = std::nullopt) const = 0;
    virtual std::optional<CatalogEntry> find(const std::string& name) const = 0;

    // Like find(), but throws InputError naming the missing entry (with near matches).
    CatalogEntry entry(const std::string& name) const;
    // Resolve specs by name; throw InputError naming what is missing (with near matches).
    ModelSpec model(const std::string& name) const;
    ChipSpec chip(const std::string& name) const;
    NodeType node(const std::string& name) const;
    std::optional<ChipSpec> findChip(const std::string& name) const;

protected:
    SpecLookup() = default;
    SpecLookup(const SpecLookup&) = default;
    SpecLookup& operator=(const SpecLookup&) = default;
};

} // namespace shardscope
