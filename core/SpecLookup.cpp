#include "SpecLookup.h"
#include "NameSuggestions.h"

#include <stdexcept>
#include <utility>

namespace shardscope {

namespace {

const char* noun(EntryKind kind)
{
    switch (kind) {
    case EntryKind::Model: return "model";
    case EntryKind::Chip: return "chip";
    case EntryKind::Node: return "node type";
    }
    return "entry";
}

[[noreturn]] void throwMissing(const SpecLookup& specs, const std::string& name, std::optional<EntryKind> kind)
{
    std::vector<std::string> known;
    for (const CatalogEntry& e : specs.list(kind))
        known.push_back(e.name);
    throw InputError("no " + std::string(kind ? noun(*kind) : "entry") + " named " + quotedValue(name) + " in the catalog" +
                     didYouMean(name, known));
}

CatalogEntry entryOfKind(const SpecLookup& specs, const std::string& name, EntryKind kind)
{
    const auto e = specs.find(name);
    if (!e || e->kind != kind)
        throwMissing(specs, name, kind);
    return *e;
}

// A kept document that no longer reads is not the user's input of the moment: it is
// reported as a runtime failure (exit 1), not as bad input.
template <class Spec>
Spec readable(std::optional<Spec> spec, EntryKind kind, const std::string& name, const FieldErrors& errors)
{
    if (!spec)
        throw std::runtime_error("stored " + std::string(noun(kind)) + " \"" + name + "\" is invalid: " +
                                 joinErrors(errors));
    return *spec;
}

} // namespace

CatalogEntry SpecLookup::entry(const std::string& name) const
{
    if (auto e = find(name))
        return *e;
    throwMissing(*this, name, std::nullopt);
}

ModelSpec SpecLookup::model(const std::string& name) const
{
    const CatalogEntry e = entryOfKind(*this, name, EntryKind::Model);
    FieldErrors errors;
    return readable(modelFromJson(e.document, "model", errors), e.kind, name, errors);
}

std::optional<ChipSpec> SpecLookup::findChip(const std::string& name) const
{
    const auto e = find(name);
    if (!e || e->kind != EntryKind::Chip)
        return std::nullopt;
    FieldErrors errors;
    return chipFromJson(e->document, "chip", errors);
}

ChipSpec SpecLookup::chip(const std::string& name) const
{
    if (auto c = findChip(name))
        return *c;
    throwMissing(*this, name, EntryKind::Chip);
}

NodeType SpecLookup::node(const std::string& name) const
{
    const CatalogEntry e = entryOfKind(*this, name, EntryKind::Node);
    FieldErrors errors;
    auto n = nodeFromJson(e.document, "node", errors, [this](const std::string& c) { return findChip(c); });
    return readable(std::move(n), e.kind, name, errors);
}

} // namespace shardscope
