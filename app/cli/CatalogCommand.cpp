// shardscope-cli catalog list|show|import|export|remove
#include "CliArgs.h"
#include "Commands.h"
#include "OutputFile.h"
#include "EntrySummary.h"
#include "HfConfigImport.h"
#include "JsonReader.h"
#include "SpecJson.h"
#include "Store.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <iomanip>
#include <ostream>

namespace shardscope::cli {

namespace {

// The usage of every verb, for an error that does not know which verb was meant.
std::string catalogUsage()
{
    std::string out;
    for (const std::string& verb : commandNames("catalog"))
        out += (out.empty() ? "" : "\n       ") + usageText(commandHelp("catalog " + verb));
    return out;
}

void printNotices(const Store& store, Context& ctx)
{
    for (const std::string& n : store.notices())
        ctx.err << "shardscope-cli: " << n << "\n";
}

std::string prettyJson(const QJsonObject& o) { return QJsonDocument(o).toJson(QJsonDocument::Indented).toStdString(); }

int list(const CliArgs& a, SpecCatalog& catalog, Context& ctx)
{
    a.expectPositional(1, usageText(commandHelp("catalog list")));
    std::optional<EntryKind> kind;
    if (auto k = a.value("kind")) {
        kind = entryKindFromString(*k);
        if (!kind)
            throw UsageError("--kind " + *k + ": expected models, chips or nodes");
    }
    const std::vector<CatalogEntry> entries = catalog.list(kind);
    if (a.flag("names")) {
        for (const CatalogEntry& e : entries)
            ctx.out << e.name << "\n";
        return kExitOk;
    }
    if (a.flag("json")) {
        QJsonArray array;
        for (const CatalogEntry& e : entries)
            array.append(QJsonObject{{"name", QString::fromStdString(e.name)},
                                     {"kind", QLatin1String(toString(e.kind))},
                                     {"builtin", e.builtin},
                                     {"display_name", QString::fromStdString(e.display_name)}});
        ctx.out << QJsonDocument(array).toJson(QJsonDocument::Indented).toStdString();
        return kExitOk;
    }
    size_t width = 4;
    for (const CatalogEntry& e : entries)
        width = std::max(width, e.name.size());
    ctx.out << std::left << std::setw(int(width) + 2) << "NAME" << std::setw(7) << "KIND" << std::setw(9) << "SOURCE"
            << "SUMMARY\n";
    for (const CatalogEntry& e : entries)
        ctx.out << std::left << std::setw(int(width) + 2) << e.name << std::setw(7) << toString(e.kind)
                << std::setw(9) << (e.builtin ? "built-in" : "user") << summarize(catalog, e) << "\n";
    ctx.out << entries.size() << " entries in " << ctx.db_path.toStdString() << "\n";
    return kExitOk;
}

int show(const CliArgs& a, SpecCatalog& catalog, Context& ctx)
{
    a.expectPositional(2, usageText(commandHelp("catalog show")));
    const std::string name = a.positional()[1];
    const CatalogEntry entry = catalog.entry(name);
    if (a.flag("json")) {
        ctx.out << prettyJson(entry.document);
        return kExitOk;
    }
    std::vector<std::pair<std::string, std::string>> rows;
    switch (entry.kind) {
    case EntryKind::Model: rows = describe(catalog.model(name)); break;
    case EntryKind::Chip: rows = describe(catalog.chip(name)); break;
    case EntryKind::Node: rows = describe(catalog.node(name)); break;
    }
    ctx.out << toString(entry.kind) << " " << name << (entry.builtin ? " (built-in)" : " (user)") << "\n";
    for (const auto& [field, value] : rows)
        if (!value.empty())
            ctx.out << "  " << std::left << std::setw(22) << field << value << "\n";
    return kExitOk;
}

int import(const CliArgs& a, SpecCatalog& catalog, Context& ctx)
{
    a.expectPositional(2, usageText(commandHelp("catalog import")));
    const QString file = QString::fromStdString(a.positional()[1]);
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly))
        throw InputError("cannot read " + file.toStdString() + ": " + f.errorString().toStdString());
    FieldErrors errors;
    QJsonObject doc = parseJsonObject(f.readAll(), file.toStdString(), errors);
    if (!errors.empty())
        throw InputError(errors);
    const std::optional<std::string> name = a.value("name"), displayName = a.value("display-name");
    std::string readAs;
    if (isHfConfig(doc)) {
        const std::string architecture = printable(hfArchitecture(doc));
        try {
            doc = modelDocumentFromHfConfig(doc, {name.value_or(""), displayName.value_or(""), file.toStdString()});
        } catch (const InputError& e) {
            throw InputError(file.toStdString() + ": " + e.what());
        }
        readAs = "read " + file.toStdString() + " as a Hugging Face " + architecture + " config\n";
    } else if (name || displayName) {
        throw UsageError(std::string(name ? "--name" : "--display-name") +
                         " names a model read from a Hugging Face config.json; " + file.toStdString() +
                         " is a ShardScope document (its entries carry their names)");
    }
    std::vector<std::string> names;
    try {
        names = catalog.importDocument(doc, a.flag("replace"));
    } catch (const InputError& e) {
        if (readAs.empty())
            throw;
        throw InputError(std::string(e.what()) + " (--name gives the model read from " + file.toStdString() +
                         " another name)");
    }
    ctx.out << readAs;
    for (const std::string& n : names)
        ctx.out << "imported " << n << "\n";
    return kExitOk;
}

int exportEntry(const CliArgs& a, SpecCatalog& catalog, Context& ctx)
{
    a.expectPositional(2, usageText(commandHelp("catalog export")));
    const std::string name = a.positional()[1];
    const CatalogEntry entry = catalog.entry(name);
    const std::string text = prettyJson(entry.document);
    if (auto out = a.value("out")) {
        writeOutputFile(*out, QByteArray::fromStdString(text));
        ctx.out << "wrote " << *out << "\n";
    } else {
        ctx.out << text;
    }
    return kExitOk;
}

int remove(const CliArgs& a, SpecCatalog& catalog, Context& ctx)
{
    a.expectPositional(2, usageText(commandHelp("catalog remove")));
    catalog.remove(a.positional()[1]);
    ctx.out << "removed " << a.positional()[1] << "\n";
    return kExitOk;
}

} // namespace

int runCatalog(const std::vector<std::string>& args, Context& ctx)
{
    // The verb is the first word that is no option's value: found with every verb's options,
    // then the arguments are read again with the options of that verb only.
    std::set<std::string> valued, flags;
    for (const std::string& v : commandNames("catalog"))
        for (const OptionHelp& o : commandHelp("catalog " + v).options)
            (o.flag() ? flags : valued).insert(o.name);
    const CliArgs any(args, valued, flags);
    if (any.positional().empty())
        throw UsageError("missing catalog command; usage: " + catalogUsage());
    const std::string verb = any.positional()[0];
    const CommandHelp* help = findCommandHelp("catalog " + verb);
    if (!help)
        throw UsageError("unknown catalog command \"" + verb + "\"" + didYouMean(verb, commandNames("catalog")) +
                         "; usage: " + catalogUsage());
    const CliArgs a(args, *help);

    Store store(ctx.db_path, ctx.store_options);
    printNotices(store, ctx);
    SpecCatalog& catalog = store.specs();
    if (verb == "list")
        return list(a, catalog, ctx);
    if (verb == "show")
        return show(a, catalog, ctx);
    if (verb == "import")
        return import(a, catalog, ctx);
    if (verb == "export")
        return exportEntry(a, catalog, ctx);
    return remove(a, catalog, ctx);
}

} // namespace shardscope::cli
