#include "Catalog.h"
#include "JsonReader.h"
#include "SpecJson.h"
#include "Version.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

namespace shardscope {

namespace {

constexpr std::array kEntryKindNames{
    EnumName<EntryKind>{EntryKind::Model, "model"},
    EnumName<EntryKind>{EntryKind::Chip, "chip"},
    EnumName<EntryKind>{EntryKind::Node, "node"},
};

QString nowText() { return QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs); }

std::string sqlError(const QSqlQuery& q) { return q.lastError().text().toStdString(); }

// Levenshtein distance, for "did you mean" suggestions on a mistyped name.
int editDistance(const std::string& a, const std::string& b)
{
    std::vector<int> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
        row[j] = int(j);
    for (size_t i = 1; i <= a.size(); ++i) {
        int diagonal = row[0];
        row[0] = int(i);
        for (size_t j = 1; j <= b.size(); ++j) {
            const int up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// A parsed entry ready to store.
struct ParsedEntry {
    EntryKind kind;
    std::string name;
    std::string display_name;
    QJsonObject document;
    std::string path;
};

// The schema, one step per version. Step i takes version i to i+1.
const std::vector<std::vector<const char*>>& migrations()
{
    static const std::vector<std::vector<const char*>> steps{
        // 0 -> 1: entries and key/value metadata
        {"CREATE TABLE entries (name TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('model','chip','node')),"
         " builtin INTEGER NOT NULL, display_name TEXT NOT NULL DEFAULT '', document TEXT NOT NULL,"
         " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
         "CREATE INDEX entries_kind ON entries(kind)",
         "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"},
        // 1 -> 2: saved plans (a problem, a layout and its prediction as JSON)
        {"CREATE TABLE plans (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, created_at TEXT NOT NULL,"
         " software_version TEXT NOT NULL, document TEXT NOT NULL)"},
        // 2 -> 3: host measurements (engine device profiles of this machine) and the history
        // of validation runs (planner prediction vs engine measurement)
        {"CREATE TABLE host_profiles (host_id TEXT NOT NULL, threads INTEGER NOT NULL, measured_at TEXT NOT NULL,"
         " document TEXT NOT NULL, PRIMARY KEY (host_id, threads))",
         "CREATE TABLE validation_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL,"
         " software_version TEXT NOT NULL, name TEXT NOT NULL, document TEXT NOT NULL)"},
        // 3 -> 4: named cost-model profiles (calibrations the planner can use on request)
        {"CREATE TABLE cost_profiles (name TEXT PRIMARY KEY, created_at TEXT NOT NULL, document TEXT NOT NULL)"},
    };
    return steps;
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

QString Catalog::defaultPath()
{
    const QByteArray env = qgetenv("SHARDSCOPE_DB");
    if (!env.isEmpty())
        return QString::fromLocal8Bit(env);
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (dir.isEmpty())
        dir = QDir::homePath() + QStringLiteral("/.local/share/shardscope");
    return dir + QStringLiteral("/catalog.sqlite");
}

Catalog::Catalog(const QString& path) : path_(path)
{
    static std::atomic<int> counter{0};
    connection_ = QStringLiteral("shardscope-catalog-%1").arg(counter.fetch_add(1));
    openOrRecover();
}

Catalog::~Catalog()
{
    {
        QSqlDatabase db = QSqlDatabase::database(connection_, false);
        if (db.isOpen())
            db.close();
    }
    QSqlDatabase::removeDatabase(connection_);
}

void Catalog::exec(const QString& sql) const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    if (!q.exec(sql))
        throw CatalogError("catalog " + path_.toStdString() + ": " + sqlError(q) + " (in: " + sql.toStdString() + ")");
}

void Catalog::inTransaction(const std::function<void()>& work)
{
    QSqlDatabase db = QSqlDatabase::database(connection_);
    if (!db.transaction())
        throw CatalogError("catalog " + path_.toStdString() + ": cannot start a transaction: " +
                           db.lastError().text().toStdString());
    try {
        work();
    } catch (...) {
        db.rollback();
        throw;
    }
    if (!db.commit()) {
        const std::string message = db.lastError().text().toStdString();
        db.rollback();
        throw CatalogError("catalog " + path_.toStdString() + ": " + message);
    }
}

void Catalog::run(QSqlQuery& q) const
{
    if (!q.exec())
        throw CatalogError("catalog " + path_.toStdString() + ": " + sqlError(q));
}

int Catalog::schemaVersion() const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next())
        return -1;
    return q.value(0).toInt();
}

void Catalog::openOrRecover()
{
    const QFileInfo info(path_);
    if (!QDir().mkpath(info.absolutePath()))
        throw CatalogError("cannot create the folder " + info.absolutePath().toStdString() + " for the catalog");
    if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE")))
        throw CatalogError("the Qt SQLite driver (QSQLITE) is not installed: install libqt6sql6-sqlite");

    for (int attempt = 0; attempt < 2; ++attempt) {
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection_);
            db.setDatabaseName(path_);
            if (!db.open())
                throw CatalogError("cannot open catalog " + path_.toStdString() + ": " +
                                   db.lastError().text().toStdString());
            // A file that is not a database fails here, on the first read.
            QSqlQuery check(db);
            const bool healthy = check.exec(QStringLiteral("PRAGMA quick_check")) && check.next() &&
                                 check.value(0).toString() == QLatin1String("ok");
            check.finish();
            if (healthy)
                break;
            db.close();
        }
        QSqlDatabase::removeDatabase(connection_);
        if (attempt == 1)
            throw CatalogError("catalog " + path_.toStdString() + " is unusable even after recreating it");
        // Keep the damaged file for the user; never delete it.
        const QString aside = path_ + QStringLiteral(".corrupt-") +
                              QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMddTHHmmsszzz"));
        if (!QFile::rename(path_, aside))
            throw CatalogError("catalog " + path_.toStdString() + " is not a valid database and could not be moved aside");
        for (const char* suffix : {"-wal", "-shm"})
            QFile::rename(path_ + QLatin1String(suffix), aside + QLatin1String(suffix));
        notices_.push_back("catalog " + path_.toStdString() + " was not a valid database; it was moved to " +
                           aside.toStdString() + " and a new catalog was created");
    }

    const int version = schemaVersion();
    if (version > kSchemaVersion)
        throw CatalogError("catalog " + path_.toStdString() + " has schema version " + std::to_string(version) +
                           ", newer than this ShardScope supports (" + std::to_string(kSchemaVersion) +
                           "); it was left unchanged. Use a newer ShardScope or another file (--db PATH).");
    if (version == 0) {
        QSqlQuery q(QSqlDatabase::database(connection_));
        if (q.exec(QStringLiteral("SELECT count(*) FROM sqlite_master")) && q.next() && q.value(0).toInt() > 0)
            throw CatalogError("catalog " + path_.toStdString() +
                               " is an SQLite database of another program; it was left unchanged. "
                               "Choose another file with --db PATH.");
    }
    exec(QStringLiteral("PRAGMA journal_mode=WAL"));
    exec(QStringLiteral("PRAGMA foreign_keys=ON"));
    if (version < kSchemaVersion)
        migrate(version);
    seedBuiltins();
}

void Catalog::migrate(int from)
{
    inTransaction([&] {
        for (int v = from; v < kSchemaVersion; ++v)
            for (const char* sql : migrations()[size_t(v)])
                exec(QString::fromLatin1(sql));
        exec(QStringLiteral("PRAGMA user_version = %1").arg(kSchemaVersion));
    });
    if (from > 0)
        notices_.push_back("catalog " + path_.toStdString() + " was upgraded from schema version " +
                           std::to_string(from) + " to " + std::to_string(kSchemaVersion));
}

namespace {

// Reads one entry document of any kind; chips for node references come first
// from `bundleChips`, then from `lookup`.
std::optional<ParsedEntry> parseEntry(const QJsonObject& doc, const std::string& path, FieldErrors& errors,
                                      const std::map<std::string, ChipSpec>& bundleChips, const ChipLookup& lookup)
{
    const std::string kind = schemaKind(doc);
    ParsedEntry e;
    e.path = path;
    if (kind == "model") {
        auto m = modelFromJson(doc, path, errors);
        if (!m)
            return std::nullopt;
        e = {EntryKind::Model, m->name, m->display_name, toJson(*m), path};
    } else if (kind == "chip") {
        auto c = chipFromJson(doc, path, errors);
        if (!c)
            return std::nullopt;
        e = {EntryKind::Chip, c->name, c->display_name, toJson(*c), path};
    } else if (kind == "node") {
        auto find = [&](const std::string& name) -> std::optional<ChipSpec> {
            if (auto it = bundleChips.find(name); it != bundleChips.end())
                return it->second;
            return lookup(name);
        };
        auto n = nodeFromJson(doc, path, errors, find);
        if (!n)
            return std::nullopt;
        e = {EntryKind::Node, n->name, n->display_name, toJson(*n), path};
    } else {
        const QJsonValue schema = doc.value(QLatin1String("schema"));
        errors.push_back({path + ".schema", schema.isUndefined()
                                                ? std::string("is required (e.g. \"shardscope.model/1\")")
                                                : "\"" + schema.toString().toStdString() +
                                                      "\" is not a model, chip or node document"});
        return std::nullopt;
    }
    return e;
}

// Entries of a bundle or the single document, with the path each is reported under.
std::vector<std::pair<QJsonObject, std::string>> documentsOf(const QJsonObject& document, FieldErrors& errors)
{
    std::vector<std::pair<QJsonObject, std::string>> docs;
    if (schemaKind(document) != "catalog") {
        const std::string kind = schemaKind(document);
        docs.emplace_back(document, kind.empty() ? std::string("document") : kind);
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

// Parses every document; chips first so that nodes in the same bundle can use them.
std::vector<ParsedEntry> parseAll(const std::vector<std::pair<QJsonObject, std::string>>& docs, FieldErrors& errors,
                                  const ChipLookup& lookup)
{
    std::map<std::string, ChipSpec> bundleChips;
    std::vector<ParsedEntry> parsed;
    for (const auto& [doc, path] : docs) {
        if (schemaKind(doc) != "chip")
            continue;
        if (auto c = chipFromJson(doc, path, errors))
            bundleChips[c->name] = *c;
    }
    for (const auto& [doc, path] : docs) {
        if (schemaKind(doc) == "chip") {
            if (auto c = bundleChips.find(doc.value(QLatin1String("name")).toString().toStdString());
                c != bundleChips.end())
                parsed.push_back({EntryKind::Chip, c->second.name, c->second.display_name, toJson(c->second), path});
            continue;
        }
        if (auto e = parseEntry(doc, path, errors, bundleChips, lookup))
            parsed.push_back(*e);
    }
    return parsed;
}

} // namespace

void Catalog::seedBuiltins()
{
    // Hash the built-in resources with the schema, reseed only when they changed.
    QCryptographicHash hash(QCryptographicHash::Sha256);
    std::vector<std::pair<QString, QByteArray>> files;
    QDirIterator it(QStringLiteral(":/catalog"), {QStringLiteral("*.json")}, QDir::Files);
    while (it.hasNext()) {
        const QString file = it.next();
        QFile f(file);
        if (!f.open(QIODevice::ReadOnly))
            throw CatalogError("cannot read built-in resource " + file.toStdString());
        files.emplace_back(file, f.readAll());
    }
    std::sort(files.begin(), files.end());
    if (files.empty())
        throw CatalogError("no built-in catalog data in the resources (:/catalog/*.json)");
    for (const auto& [name, bytes] : files) {
        hash.addData(name.toUtf8());
        hash.addData(bytes);
    }
    const QString digest = QString::fromLatin1(hash.result().toHex());

    QSqlDatabase db = QSqlDatabase::database(connection_);
    {
        QSqlQuery q(db);
        q.prepare(QStringLiteral("SELECT value FROM meta WHERE key = 'builtin_sha256'"));
        if (q.exec() && q.next() && q.value(0).toString() == digest)
            return;
    }

    FieldErrors errors;
    std::vector<std::pair<QJsonObject, std::string>> docs;
    for (const auto& [name, bytes] : files) {
        const std::string file = name.toStdString();
        const QJsonObject root = parseJsonObject(bytes, file, errors);
        for (auto& [doc, path] : documentsOf(root, errors))
            docs.emplace_back(doc, file + ": " + path);
    }
    const std::vector<ParsedEntry> parsed = parseAll(docs, errors, [](const std::string&) { return std::nullopt; });
    if (!errors.empty())
        throw CatalogError("built-in catalog data is invalid:\n" + joinErrors(errors));

    inTransaction([&] {
        exec(QStringLiteral("DELETE FROM entries WHERE builtin = 1"));
        const QString now = nowText();
        for (const ParsedEntry& e : parsed) {
            QSqlQuery clash(db);
            clash.prepare(QStringLiteral("SELECT 1 FROM entries WHERE name = ?"));
            clash.addBindValue(QString::fromStdString(e.name));
            if (clash.exec() && clash.next()) {
                notices_.push_back("your entry \"" + e.name + "\" shadows a built-in entry of the same name");
                continue;
            }
            QSqlQuery q(db);
            q.prepare(QStringLiteral("INSERT INTO entries (name, kind, builtin, display_name, document, created_at,"
                                     " updated_at) VALUES (?, ?, 1, ?, ?, ?, ?)"));
            q.addBindValue(QString::fromStdString(e.name));
            q.addBindValue(QLatin1String(toString(e.kind)));
            q.addBindValue(QString::fromStdString(e.display_name));
            q.addBindValue(QString::fromUtf8(QJsonDocument(e.document).toJson(QJsonDocument::Compact)));
            q.addBindValue(now);
            q.addBindValue(now);
            run(q);
        }
        QSqlQuery q(db);
        q.prepare(QStringLiteral("INSERT OR REPLACE INTO meta (key, value) VALUES ('builtin_sha256', ?)"));
        q.addBindValue(digest);
        run(q);
    });
}

CatalogEntry Catalog::entryFromRow(const QSqlQuery& q) const
{
    CatalogEntry e;
    e.name = q.value(0).toString().toStdString();
    e.kind = entryKindFromString(q.value(1).toString().toStdString()).value_or(EntryKind::Model);
    e.builtin = q.value(2).toBool();
    e.display_name = q.value(3).toString().toStdString();
    e.document = QJsonDocument::fromJson(q.value(4).toString().toUtf8()).object();
    return e;
}

std::vector<CatalogEntry> Catalog::list(std::optional<EntryKind> kind) const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    QString sql = QStringLiteral("SELECT name, kind, builtin, display_name, document FROM entries");
    if (kind)
        sql += QStringLiteral(" WHERE kind = ?");
    // Built-ins in their file order would be nicer, but name order is stable and predictable.
    sql += QStringLiteral(" ORDER BY CASE kind WHEN 'model' THEN 0 WHEN 'chip' THEN 1 ELSE 2 END, builtin DESC, name");
    q.prepare(sql);
    if (kind)
        q.addBindValue(QLatin1String(toString(*kind)));
    if (!q.exec())
        throw CatalogError("catalog " + path_.toStdString() + ": " + sqlError(q));
    std::vector<CatalogEntry> out;
    while (q.next())
        out.push_back(entryFromRow(q));
    return out;
}

std::optional<CatalogEntry> Catalog::find(const std::string& name) const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    q.prepare(QStringLiteral("SELECT name, kind, builtin, display_name, document FROM entries WHERE name = ?"));
    q.addBindValue(QString::fromStdString(name));
    if (!q.exec())
        throw CatalogError("catalog " + path_.toStdString() + ": " + sqlError(q));
    if (!q.next())
        return std::nullopt;
    return entryFromRow(q);
}

std::string Catalog::nearMatches(const std::string& name, std::optional<EntryKind> kind) const
{
    std::vector<std::pair<int, std::string>> scored;
    for (const CatalogEntry& e : list(kind)) {
        const int d = editDistance(name, e.name);
        if (d <= 3 || e.name.find(name) != std::string::npos)
            scored.emplace_back(d, e.name);
    }
    std::sort(scored.begin(), scored.end());
    std::string out;
    for (size_t i = 0; i < scored.size() && i < 4; ++i)
        out += (i ? ", " : "") + scored[i].second;
    return out.empty() ? std::string() : " (did you mean: " + out + "?)";
}

CatalogEntry Catalog::entry(const std::string& name) const
{
    if (auto e = find(name))
        return *e;
    throw InputError("no entry named \"" + name + "\" in the catalog" + nearMatches(name, std::nullopt));
}

namespace {

const char* articleKind(EntryKind kind)
{
    switch (kind) {
    case EntryKind::Model: return "model";
    case EntryKind::Chip: return "chip";
    case EntryKind::Node: return "node type";
    }
    return "entry";
}

} // namespace

ModelSpec Catalog::model(const std::string& name) const
{
    const auto e = find(name);
    if (!e || e->kind != EntryKind::Model)
        throw InputError("no " + std::string(articleKind(EntryKind::Model)) + " named \"" + name +
                         "\" in the catalog" + nearMatches(name, EntryKind::Model));
    FieldErrors errors;
    auto m = modelFromJson(e->document, "model", errors);
    if (!m)
        throw CatalogError("stored model \"" + name + "\" is invalid: " + joinErrors(errors));
    return *m;
}

std::optional<ChipSpec> Catalog::findChip(const std::string& name) const
{
    const auto e = find(name);
    if (!e || e->kind != EntryKind::Chip)
        return std::nullopt;
    FieldErrors errors;
    return chipFromJson(e->document, "chip", errors);
}

ChipSpec Catalog::chip(const std::string& name) const
{
    if (auto c = findChip(name))
        return *c;
    throw InputError("no chip named \"" + name + "\" in the catalog" + nearMatches(name, EntryKind::Chip));
}

NodeType Catalog::node(const std::string& name) const
{
    const auto e = find(name);
    if (!e || e->kind != EntryKind::Node)
        throw InputError("no " + std::string(articleKind(EntryKind::Node)) + " named \"" + name +
                         "\" in the catalog" + nearMatches(name, EntryKind::Node));
    FieldErrors errors;
    auto n = nodeFromJson(e->document, "node", errors, [this](const std::string& c) { return findChip(c); });
    if (!n)
        throw CatalogError("stored node type \"" + name + "\" is invalid: " + joinErrors(errors));
    return *n;
}

namespace {

// An import's entries, parsed and checked against the catalog (names, built-ins, kinds).
std::vector<ParsedEntry> checkedEntries(const Catalog& catalog, const QJsonObject& document, bool replace,
                                        FieldErrors& errors)
{
    const auto docs = documentsOf(document, errors);
    const std::vector<ParsedEntry> parsed =
        parseAll(docs, errors, [&catalog](const std::string& c) { return catalog.findChip(c); });

    std::set<std::string> seen;
    for (const ParsedEntry& e : parsed) {
        if (!seen.insert(e.name).second) {
            errors.push_back({e.path + ".name", "\"" + e.name + "\" appears twice in this file"});
            continue;
        }
        if (const auto existing = catalog.find(e.name)) {
            if (existing->builtin)
                errors.push_back({e.path + ".name", "\"" + e.name + "\" is a built-in entry and cannot be replaced; "
                                                                    "import it under another name"});
            else if (existing->kind != e.kind)
                errors.push_back({e.path + ".name", "\"" + e.name + "\" is already a " + toString(existing->kind)});
            else if (!replace)
                errors.push_back({e.path + ".name", "\"" + e.name + "\" already exists; use --replace to overwrite it"});
        }
    }
    return parsed;
}

} // namespace

FieldErrors Catalog::checkImport(const QJsonObject& document, bool replace) const
{
    FieldErrors errors;
    checkedEntries(*this, document, replace, errors);
    return errors;
}

std::vector<std::string> Catalog::importDocument(const QJsonObject& document, bool replace)
{
    FieldErrors errors;
    const auto parsed = checkedEntries(*this, document, replace, errors);
    if (!errors.empty())
        throw InputError(errors);

    std::vector<std::string> names;
    inTransaction([&] {
        const QString now = nowText();
        for (const ParsedEntry& e : parsed) {
            QSqlQuery q(QSqlDatabase::database(connection_));
            q.prepare(QStringLiteral(
                "INSERT INTO entries (name, kind, builtin, display_name, document, created_at, updated_at)"
                " VALUES (?, ?, 0, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET display_name = excluded.display_name,"
                " document = excluded.document, updated_at = excluded.updated_at"));
            q.addBindValue(QString::fromStdString(e.name));
            q.addBindValue(QLatin1String(toString(e.kind)));
            q.addBindValue(QString::fromStdString(e.display_name));
            q.addBindValue(QString::fromUtf8(QJsonDocument(e.document).toJson(QJsonDocument::Compact)));
            q.addBindValue(now);
            q.addBindValue(now);
            run(q);
            names.push_back(e.name);
        }
    });
    return names;
}

void Catalog::remove(const std::string& name)
{
    const CatalogEntry e = entry(name);
    if (e.builtin)
        throw InputError("\"" + name + "\" is a built-in entry and cannot be removed");
    if (e.kind == EntryKind::Chip) {
        std::string users;
        for (const CatalogEntry& n : list(EntryKind::Node))
            if (n.document.value(QLatin1String("chip")).toString().toStdString() == name)
                users += (users.empty() ? "" : ", ") + n.name;
        if (!users.empty())
            throw InputError("chip \"" + name + "\" is used by node types " + users + "; remove them first");
    }
    inTransaction([&] {
        QSqlQuery q(QSqlDatabase::database(connection_));
        q.prepare(QStringLiteral("DELETE FROM entries WHERE name = ? AND builtin = 0"));
        q.addBindValue(QString::fromStdString(name));
        run(q);
    });
}

namespace {

QJsonObject hostProfileJson(const HostProfile& p)
{
    return QJsonObject{{"schema", "shardscope.host/1"},
                       {"host_id", QString::fromStdString(p.host_id)},
                       {"cpu", QString::fromStdString(p.cpu)},
                       {"threads", p.threads},
                       {"gemm_flops_fp32", p.gemm_flops_fp32},
                       {"memory_bytes_per_second", p.memory_bytes_per_second},
                       {"kernel_overhead_s", p.kernel_overhead_s},
                       {"memory_bytes", p.memory_bytes},
                       {"measured_at", QString::fromStdString(p.measured_at)},
                       {"engine_version", p.engine_version}};
}

HostProfile hostProfileFromJson(const QJsonObject& o)
{
    HostProfile p;
    p.host_id = o.value(QLatin1String("host_id")).toString().toStdString();
    p.cpu = o.value(QLatin1String("cpu")).toString().toStdString();
    p.threads = o.value(QLatin1String("threads")).toInt();
    p.gemm_flops_fp32 = o.value(QLatin1String("gemm_flops_fp32")).toDouble();
    p.memory_bytes_per_second = o.value(QLatin1String("memory_bytes_per_second")).toDouble();
    p.kernel_overhead_s = o.value(QLatin1String("kernel_overhead_s")).toDouble();
    p.memory_bytes = o.value(QLatin1String("memory_bytes")).toDouble();
    p.measured_at = o.value(QLatin1String("measured_at")).toString().toStdString();
    p.engine_version = o.value(QLatin1String("engine_version")).toInt();
    return p;
}

} // namespace

std::optional<HostProfile> Catalog::hostProfile(const std::string& host_id, int threads) const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    q.prepare(QStringLiteral("SELECT document FROM host_profiles WHERE host_id = ? AND threads = ?"));
    q.addBindValue(QString::fromStdString(host_id));
    q.addBindValue(threads);
    if (!q.exec())
        throw CatalogError("catalog " + path_.toStdString() + ": " + sqlError(q));
    if (!q.next())
        return std::nullopt;
    return hostProfileFromJson(QJsonDocument::fromJson(q.value(0).toString().toUtf8()).object());
}

std::vector<HostProfile> Catalog::hostProfiles() const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    if (!q.exec(QStringLiteral("SELECT document FROM host_profiles ORDER BY host_id, threads")))
        throw CatalogError("catalog " + path_.toStdString() + ": " + sqlError(q));
    std::vector<HostProfile> out;
    while (q.next())
        out.push_back(hostProfileFromJson(QJsonDocument::fromJson(q.value(0).toString().toUtf8()).object()));
    return out;
}

void Catalog::storeHostProfile(const HostProfile& p)
{
    if (p.host_id.empty() || p.threads < 1 || !(p.gemm_flops_fp32 > 0) || !(p.memory_bytes_per_second > 0))
        throw InputError("host profile: host_id, threads, gemm_flops_fp32 and memory_bytes_per_second are required");
    inTransaction([&] {
        QSqlQuery q(QSqlDatabase::database(connection_));
        q.prepare(QStringLiteral("INSERT OR REPLACE INTO host_profiles (host_id, threads, measured_at, document)"
                                 " VALUES (?, ?, ?, ?)"));
        q.addBindValue(QString::fromStdString(p.host_id));
        q.addBindValue(p.threads);
        q.addBindValue(QString::fromStdString(p.measured_at));
        q.addBindValue(QString::fromUtf8(QJsonDocument(hostProfileJson(p)).toJson(QJsonDocument::Compact)));
        run(q);
    });
}

int Catalog::storeValidationRun(const std::string& name, const QJsonObject& document)
{
    int id = 0;
    inTransaction([&] {
        QSqlQuery q(QSqlDatabase::database(connection_));
        q.prepare(QStringLiteral("INSERT INTO validation_runs (created_at, software_version, name, document)"
                                 " VALUES (?, ?, ?, ?)"));
        q.addBindValue(nowText());
        q.addBindValue(QLatin1String(kVersion));
        q.addBindValue(QString::fromStdString(name));
        q.addBindValue(QString::fromUtf8(QJsonDocument(document).toJson(QJsonDocument::Compact)));
        run(q);
        id = q.lastInsertId().toInt();
    });
    return id;
}

std::vector<Catalog::ValidationRun> Catalog::validationRuns(int limit) const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    q.prepare(QStringLiteral("SELECT id, created_at, software_version, name, document FROM validation_runs"
                             " ORDER BY id DESC LIMIT ?"));
    q.addBindValue(limit);
    run(q);
    std::vector<ValidationRun> out;
    while (q.next())
        out.push_back({q.value(0).toInt(), q.value(1).toString().toStdString(), q.value(2).toString().toStdString(),
                       q.value(3).toString().toStdString(),
                       QJsonDocument::fromJson(q.value(4).toString().toUtf8()).object()});
    return out;
}

void Catalog::storeCostProfile(const std::string& name, const QJsonObject& document)
{
    if (name.empty() || name == "default")
        throw InputError("cost profile: choose a name other than \"default\" (the built-in profile is never replaced)");
    inTransaction([&] {
        QSqlQuery q(QSqlDatabase::database(connection_));
        q.prepare(QStringLiteral("INSERT OR REPLACE INTO cost_profiles (name, created_at, document) VALUES (?, ?, ?)"));
        q.addBindValue(QString::fromStdString(name));
        q.addBindValue(nowText());
        q.addBindValue(QString::fromUtf8(QJsonDocument(document).toJson(QJsonDocument::Compact)));
        run(q);
    });
}

std::optional<QJsonObject> Catalog::costProfile(const std::string& name) const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    q.prepare(QStringLiteral("SELECT document FROM cost_profiles WHERE name = ?"));
    q.addBindValue(QString::fromStdString(name));
    run(q);
    if (!q.next())
        return std::nullopt;
    return QJsonDocument::fromJson(q.value(0).toString().toUtf8()).object();
}

std::vector<std::string> Catalog::costProfileNames() const
{
    QSqlQuery q(QSqlDatabase::database(connection_));
    q.prepare(QStringLiteral("SELECT name FROM cost_profiles ORDER BY name"));
    run(q);
    std::vector<std::string> out;
    while (q.next())
        out.push_back(q.value(0).toString().toStdString());
    return out;
}

} // namespace shardscope
