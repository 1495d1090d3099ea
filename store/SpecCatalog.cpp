#include "SpecCatalog.h"
#include "BuiltinSpecs.h"
#include "Database.h"
#include "StoreText.h"

#include <QSqlQuery>

#include <set>

namespace shardscope {

namespace {

CatalogEntry entryFromRow(const QSqlQuery& q)
{
    CatalogEntry e;
    e.name = q.value(0).toString().toStdString();
    e.kind = entryKindFromString(q.value(1).toString().toStdString()).value_or(EntryKind::Model);
    e.builtin = q.value(2).toBool();
    e.display_name = q.value(3).toString().toStdString();
    e.document = jsonFromText(q.value(4));
    return e;
}

} // namespace

SpecCatalog::SpecCatalog(Database& db) : db_(db) { seedBuiltins(); }

void SpecCatalog::insert(const CatalogEntry& e, const QString& now)
{
    // A user entry of the same name is updated in place (created_at kept); a built-in is
    // only ever inserted after the old built-ins were deleted, so it never conflicts.
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral(
        "INSERT INTO entries (name, kind, builtin, display_name, document, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET display_name = excluded.display_name,"
        " document = excluded.document, updated_at = excluded.updated_at"));
    q.addBindValue(QString::fromStdString(e.name));
    q.addBindValue(QLatin1String(toString(e.kind)));
    q.addBindValue(e.builtin ? 1 : 0);
    q.addBindValue(QString::fromStdString(e.display_name));
    q.addBindValue(textFromJson(e.document));
    q.addBindValue(now);
    q.addBindValue(now);
    db_.run(q);
}

void SpecCatalog::seedBuiltins()
{
    const BuiltinSpecs& builtins = BuiltinSpecs::instance();
    const QString digest = QString::fromStdString(builtins.sha256());
    auto seeded = [&] {
        QSqlQuery q(db_.connection());
        q.prepare(QStringLiteral("SELECT value FROM meta WHERE key = 'builtin_sha256'"));
        db_.run(q);
        return q.next() && q.value(0).toString() == digest;
    };
    // Checked without a write lock (the usual case: nothing to do, and a catalog another
    // process is writing opens without waiting), then again under it: of several processes
    // that start at once, one seeds and the others find it done.
    if (seeded())
        return;
    db_.inTransaction([&] {
        if (seeded())
            return;
        db_.exec(QStringLiteral("DELETE FROM entries WHERE builtin = 1"));
        const QString now = nowText();
        for (const CatalogEntry& e : builtins.entries()) {
            if (find(e.name)) {
                db_.addNotice("your entry \"" + e.name + "\" shadows a built-in entry of the same name");
                continue;
            }
            insert(e, now);
        }
        QSqlQuery q(db_.connection());
        q.prepare(QStringLiteral("INSERT OR REPLACE INTO meta (key, value) VALUES ('builtin_sha256', ?)"));
        q.addBindValue(digest);
        db_.run(q);
    });
}

std::vector<CatalogEntry> SpecCatalog::list(std::optional<EntryKind> kind) const
{
    QSqlQuery q(db_.connection());
    QString sql = QStringLiteral("SELECT name, kind, builtin, display_name, document FROM entries");
    if (kind)
        sql += QStringLiteral(" WHERE kind = ?");
    // Built-ins in their file order would be nicer, but name order is stable and predictable.
    sql += QStringLiteral(" ORDER BY CASE kind WHEN 'model' THEN 0 WHEN 'chip' THEN 1 ELSE 2 END, builtin DESC, name");
    q.prepare(sql);
    if (kind)
        q.addBindValue(QLatin1String(toString(*kind)));
    db_.run(q);
    std::vector<CatalogEntry> out;
    while (q.next())
        out.push_back(entryFromRow(q));
    return out;
}

std::optional<CatalogEntry> SpecCatalog::find(const std::string& name) const
{
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral("SELECT name, kind, builtin, display_name, document FROM entries WHERE name = ?"));
    q.addBindValue(QString::fromStdString(name));
    db_.run(q);
    if (!q.next())
        return std::nullopt;
    return entryFromRow(q);
}

std::vector<ParsedEntry> SpecCatalog::checkedEntries(const QJsonObject& document, bool replace,
                                                     FieldErrors& errors) const
{
    const std::vector<ParsedEntry> parsed =
        parseEntries(entryDocuments(document, errors), errors, [this](const std::string& c) { return findChip(c); });
    std::set<std::string> seen;
    for (const ParsedEntry& p : parsed) {
        const CatalogEntry& e = p.entry;
        if (!seen.insert(e.name).second) {
            errors.push_back({p.path + ".name", quotedValue(e.name) + " appears twice in this file"});
            continue;
        }
        if (const auto existing = find(e.name)) {
            if (existing->builtin)
                errors.push_back({p.path + ".name", quotedValue(e.name) + " is a built-in entry and cannot be replaced; "
                                                                    "import it under another name"});
            else if (existing->kind != e.kind)
                errors.push_back({p.path + ".name", quotedValue(e.name) + " is already a " + toString(existing->kind)});
            else if (!replace)
                errors.push_back({p.path + ".name", quotedValue(e.name) + " already exists; use --replace to overwrite it"});
        }
    }
    return parsed;
}

FieldErrors SpecCatalog::checkImport(const QJsonObject& document, bool replace) const
{
    FieldErrors errors;
    checkedEntries(document, replace, errors);
    return errors;
}

std::vector<std::string> SpecCatalog::importDocument(const QJsonObject& document, bool replace)
{
    FieldErrors errors;
    const auto parsed = checkedEntries(document, replace, errors);
    if (!errors.empty())
        throw InputError(errors);
    std::vector<std::string> names;
    db_.inTransaction([&] {
        const QString now = nowText();
        for (const ParsedEntry& p : parsed) {
            insert(p.entry, now);
            names.push_back(p.entry.name);
        }
    });
    return names;
}

void SpecCatalog::remove(const std::string& name)
{
    const CatalogEntry e = entry(name);
    if (e.builtin)
        throw InputError(quotedValue(name) + " is a built-in entry and cannot be removed");
    if (e.kind == EntryKind::Chip) {
        std::string users;
        for (const CatalogEntry& n : list(EntryKind::Node))
            if (n.document.value(QLatin1String("chip")).toString().toStdString() == name)
                users += (users.empty() ? "" : ", ") + n.name;
        if (!users.empty())
            throw InputError("chip " + quotedValue(name) + " is used by node types " + users + "; remove them first");
    }
    db_.inTransaction([&] {
        QSqlQuery q(db_.connection());
        q.prepare(QStringLiteral("DELETE FROM entries WHERE name = ? AND builtin = 0"));
        q.addBindValue(QString::fromStdString(name));
        db_.run(q);
    });
}

} // namespace shardscope
