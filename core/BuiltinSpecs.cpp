#include "BuiltinSpecs.h"
#include "JsonReader.h"

#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QFile>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace shardscope {

const BuiltinSpecs& BuiltinSpecs::instance()
{
    static const BuiltinSpecs specs;
    return specs;
}

BuiltinSpecs::BuiltinSpecs()
{
    std::vector<std::pair<QString, QByteArray>> files;
    QDirIterator it(QStringLiteral(":/catalog"), {QStringLiteral("*.json")}, QDir::Files);
    while (it.hasNext()) {
        const QString file = it.next();
        QFile f(file);
        if (!f.open(QIODevice::ReadOnly))
            throw std::runtime_error("cannot read built-in resource " + file.toStdString());
        files.emplace_back(file, f.readAll());
    }
    if (files.empty())
        throw std::runtime_error("no built-in catalog data in the resources (:/catalog/*.json)");
    std::sort(files.begin(), files.end());

    QCryptographicHash hash(QCryptographicHash::Sha256);
    FieldErrors errors;
    EntryDocuments docs;
    for (const auto& [name, bytes] : files) {
        hash.addData(name.toUtf8());
        hash.addData(bytes);
        const std::string file = name.toStdString();
        const QJsonObject root = parseJsonObject(bytes, file, errors);
        for (auto& [doc, path] : entryDocuments(root, errors))
            docs.emplace_back(doc, file + ": " + path);
    }
    sha256_ = hash.result().toHex().toStdString();
    // Built-in node types name built-in chips only.
    const std::vector<ParsedEntry> parsed = parseEntries(docs, errors, [](const std::string&) { return std::nullopt; });
    if (!errors.empty())
        throw std::runtime_error("built-in catalog data is invalid:\n" + joinErrors(errors));
    for (const ParsedEntry& p : parsed) {
        entries_.push_back(p.entry);
        entries_.back().builtin = true;
    }
}

std::vector<CatalogEntry> BuiltinSpecs::list(std::optional<EntryKind> kind) const
{
    // The order of a catalog's list(): by kind, then by name.
    std::vector<CatalogEntry> out;
    for (const CatalogEntry& e : entries_)
        if (!kind || e.kind == *kind)
            out.push_back(e);
    std::sort(out.begin(), out.end(), [](const CatalogEntry& a, const CatalogEntry& b) {
        return std::pair(int(a.kind), a.name) < std::pair(int(b.kind), b.name);
    });
    return out;
}

std::optional<CatalogEntry> BuiltinSpecs::find(const std::string& name) const
{
    for (const CatalogEntry& e : entries_)
        if (e.name == name)
            return e;
    return std::nullopt;
}

} // namespace shardscope
