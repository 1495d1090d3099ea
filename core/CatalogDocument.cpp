#include "CatalogDocument.h"
#include "EnumNames.h"
#include "JsonReader.h"

#include <QJsonArray>

#include <array>
#include <map>

namespace shardscope {

namespace {

constexpr std::array kEntryKindNames{
    EnumName<EntryKind>{EntryKind::Model, "model"},
    EnumName<EntryKind>{EntryKind::Chip, "chip"},
    EnumName<EntryKind>{EntryKind::Node, "node"},
};

template <class Spec>
ParsedEntry parsed(EntryKind kind, const Spec& spec, const std::string& path)
{
    return {{kind, spec.name, spec.display_name, false, toJson(spec)}, path};
}

// Reads one model or node-type document; chips for node references come first from
// `bundleChips`, then from `lookup`.
std::optional<ParsedEntry> parseEntry(const QJsonObject& doc, const std::string& path, FieldErrors& errors,
                                      const std::map<std::string, ChipSpec>& bundleChips, const ChipLookup& lookup)
{
    const std::string kind = schemaKind(doc);
    if (kind == "model") {
        auto m = modelFromJson(doc, path, errors);
        if (!m)
            return std::nullopt;
        return parsed(EntryKind::Model, *m, path);
    }
    if (kind == "node") {
        auto find = [&](const std::string& name) -> std::optional<ChipSpec> {
            if (auto it = bundleChips.find(name); it != bundleChips.end())
                return it->second;
            return lookup(name);
        };
        auto n = nodeFromJson(doc, path, errors, find);
        if (!n)
            return std::nullopt;
        return parsed(EntryKind::Node, *n, path);
    }
    const QJsonValue schema = doc.value(QLatin1String("schema"));
    std::string message = "is required (e.g. \"shardscope.model/1\")";
    if (schema.isString())
        message = quotedValue(schema.toString().toStdString()) + " is not a model, chip or node document";
    else if (!schema.isUndefined())  // a number's toString() is "", which named nothing
        message = "expected a string such as \"shardscope.model/1\", got " +
                  (schema.isDouble() ? "the number " + printable(QString::number(schema.toDouble(), 'g', 17).toStdString())
                                     : std::string("a value of another type"));
    errors.push_back({path + ".schema", message});
    return std::nullopt;
}

} // namespace

const char* toString(EntryKind kind) { return enumToString<EntryKind>(kEntryKindNames, kind); }

std::optional<EntryKind> entryKindFromString(const std::string& text)
{
    std::string singular = text;
    if (!singular.empty() && singular.back() == 's')
        singular.pop_back();
    return enumFromString<EntryKind>(kEntryKindNames, singular);
}

EntryDocuments entryDocuments(const QJsonObject& document, FieldErrors& errors)
{
    EntryDocuments docs;
    if (schemaKind(document) != "catalog") {
        const std::string kind = schemaKind(document);
        // The kind names the document in error paths: from the user's text, so made printable.
        docs.emplace_back(document, kind.empty() ? std::string("document") : printable(kind, 40));
        return docs;
    }
    JsonReader r(document, "", errors);
    checkSchema(r, "catalog", 1);
    r.rejectUnknownKeys({"schema", "entries"});
    const QJsonValue entries = document.value(QLatin1String("entries"));
    if (!entries.isArray()) {
        errors.push_back({"entries", "expected an array of model, chip or node documents"});
        return docs;
    }
    const QJsonArray array = entries.toArray();
    for (qsizetype i = 0; i < array.size(); ++i) {
        const std::string path = "entries[" + std::to_string(i) + "]";
        if (!array[i].isObject())
            errors.push_back({path, "expected an object"});
        else
            docs.emplace_back(array[i].toObject(), path);
    }
    return docs;
}

std::vector<ParsedEntry> parseEntries(const EntryDocuments& documents, FieldErrors& errors, const ChipLookup& lookup)
{
    std::map<std::string, ChipSpec> bundleChips;
    for (const auto& [doc, path] : documents) {
        if (schemaKind(doc) != "chip")
            continue;
        if (auto c = chipFromJson(doc, path, errors))
            bundleChips[c->name] = *c;
    }
    std::vector<ParsedEntry> out;
    for (const auto& [doc, path] : documents) {
        if (schemaKind(doc) == "chip") {
            if (auto c = bundleChips.find(doc.value(QLatin1String("name")).toString().toStdString());
                c != bundleChips.end())
                out.push_back(parsed(EntryKind::Chip, c->second, path));
            continue;
        }
        if (auto e = parseEntry(doc, path, errors, bundleChips, lookup))
            out.push_back(*e);
    }
    return out;
}

} // namespace shardscope
