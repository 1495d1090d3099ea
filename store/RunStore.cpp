#include "RunStore.h"
#include "Database.h"
#include "StoreText.h"
#include "Version.h"

#include <QSqlQuery>

namespace shardscope {

namespace {

// Host profiles are kept as "shardscope.host/1" documents beside their key columns, so
// that a later field is added without a schema step.
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

int RunStore::storeValidationRun(const std::string& name, const QJsonObject& document)
{
    int id = 0;
    db_.inTransaction([&] {
        QSqlQuery q(db_.connection());
        q.prepare(QStringLiteral("INSERT INTO validation_runs (created_at, software_version, name, document)"
                                 " VALUES (?, ?, ?, ?)"));
        q.addBindValue(nowText());
        q.addBindValue(QLatin1String(kVersion));
        q.addBindValue(QString::fromStdString(name));
        q.addBindValue(textFromJson(document));
        db_.run(q);
        id = q.lastInsertId().toInt();
    });
    return id;
}

std::vector<RunStore::ValidationRun> RunStore::validationRuns(int limit) const
{
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral("SELECT id, created_at, software_version, name, document FROM validation_runs"
                             " ORDER BY id DESC LIMIT ?"));
    q.addBindValue(limit);
    db_.run(q);
    std::vector<ValidationRun> out;
    while (q.next())
        out.push_back({q.value(0).toInt(), q.value(1).toString().toStdString(), q.value(2).toString().toStdString(),
                       q.value(3).toString().toStdString(), jsonFromText(q.value(4))});
    return out;
}

void RunStore::storeCostProfile(const std::string& name, const ValidationProfile& profile)
{
    if (name.empty() || name == "default")
        throw InputError("cost profile: choose a name other than \"default\" (the built-in profile is never replaced)");
    ValidationProfile named = profile;
    named.terms.name = name;
    db_.inTransaction([&] {
        QSqlQuery q(db_.connection());
        q.prepare(QStringLiteral("INSERT OR REPLACE INTO cost_profiles (name, created_at, document) VALUES (?, ?, ?)"));
        q.addBindValue(QString::fromStdString(name));
        q.addBindValue(nowText());
        q.addBindValue(textFromJson(toJson(named)));
        db_.run(q);
    });
}

std::optional<ValidationProfile> RunStore::validationProfile(const std::string& name) const
{
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral("SELECT document FROM cost_profiles WHERE name = ?"));
    q.addBindValue(QString::fromStdString(name));
    db_.run(q);
    if (!q.next())
        return std::nullopt;
    FieldErrors errors;
    ValidationProfile p = validationProfileFromJson(jsonFromText(q.value(0)), "cost_model." + name, errors);
    if (!errors.empty())
        throw InputError(errors);
    p.terms.name = name;
    return p;
}

std::optional<CostModelParams> RunStore::costProfile(const std::string& name) const
{
    if (auto p = validationProfile(name))
        return p->terms;
    return std::nullopt;
}

std::vector<std::string> RunStore::costProfileNames() const
{
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral("SELECT name FROM cost_profiles ORDER BY name"));
    db_.run(q);
    std::vector<std::string> out;
    while (q.next())
        out.push_back(q.value(0).toString().toStdString());
    return out;
}

CostModelParams RunStore::costModelParamsNamed(const std::string& name) const
{
    return validationProfileNamed(name).terms;
}

ValidationProfile RunStore::validationProfileNamed(const std::string& name) const
{
    if (name.empty() || name == "default")
        return ValidationProfile();
    if (auto p = validationProfile(name))
        return *p;
    std::string known = "default";
    for (const std::string& n : costProfileNames())
        known += ", " + n;
    throw InputError("cost model profile " + quotedValue(name) + " is not in the catalog (there are: " + known + ")");
}

std::optional<HostProfile> RunStore::hostProfile(const std::string& host_id, int threads) const
{
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral("SELECT document FROM host_profiles WHERE host_id = ? AND threads = ?"));
    q.addBindValue(QString::fromStdString(host_id));
    q.addBindValue(threads);
    db_.run(q);
    if (!q.next())
        return std::nullopt;
    return hostProfileFromJson(jsonFromText(q.value(0)));
}

std::vector<HostProfile> RunStore::hostProfiles() const
{
    QSqlQuery q(db_.connection());
    q.prepare(QStringLiteral("SELECT document FROM host_profiles ORDER BY host_id, threads"));
    db_.run(q);
    std::vector<HostProfile> out;
    while (q.next())
        out.push_back(hostProfileFromJson(jsonFromText(q.value(0))));
    return out;
}

void RunStore::storeHostProfile(const HostProfile& p)
{
    if (p.host_id.empty() || p.threads < 1 || !(p.gemm_flops_fp32 > 0) || !(p.memory_bytes_per_second > 0))
        throw InputError("host profile: host_id, threads, gemm_flops_fp32 and memory_bytes_per_second are required");
    db_.inTransaction([&] {
        QSqlQuery q(db_.connection());
        q.prepare(QStringLiteral("INSERT OR REPLACE INTO host_profiles (host_id, threads, measured_at, document)"
                                 " VALUES (?, ?, ?, ?)"));
        q.addBindValue(QString::fromStdString(p.host_id));
        q.addBindValue(p.threads);
        q.addBindValue(QString::fromStdString(p.measured_at));
        q.addBindValue(textFromJson(hostProfileJson(p)));
        db_.run(q);
    });
}

} // namespace shardscope
