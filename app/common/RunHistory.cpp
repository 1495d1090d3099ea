#include "RunHistory.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardscope {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

StoredCase storedCase(const QJsonObject& c)
{
    StoredCase out;
    out.name = c.value(QLatin1String("name")).toString();
    out.layout = c.value(QLatin1String("layout")).toString();
    out.error = c.value(QLatin1String("error")).toString();
    const QJsonObject metrics = c.value(QLatin1String("metrics")).toObject();
    // The report order, not the document's (JSON objects are sorted by key).
    for (const std::string& name : validationMetrics()) {
        const QJsonValue v = metrics.value(q(name));
        if (!v.isObject())
            continue;
        const QJsonObject o = v.toObject();
        StoredMetric m;
        m.metric = name;
        // A metric that was not compared (the emulation's wall time on shared cores) has no
        // prediction: null in the document, NaN here, shown as a dash.
        const QJsonValue predicted = o.value(QLatin1String("predicted"));
        m.predicted = predicted.isDouble() ? predicted.toDouble() : std::numeric_limits<double>::quiet_NaN();
        m.measured = o.value(QLatin1String("measured")).toDouble();
        if (const QJsonValue e = o.value(QLatin1String("rel_error")); e.isDouble())
            m.rel_error = e.toDouble();
        m.worst_device = o.value(QLatin1String("worst_device")).toInt(-1);
        m.known_difference = o.value(QLatin1String("known_difference")).toString();
        out.metrics.push_back(m);
    }
    for (const QJsonValue& loss : c.value(QLatin1String("losses")).toArray())
        out.losses.push_back(loss.toDouble());
    return out;
}

} // namespace

const StoredMetric* StoredCase::metric(const std::string& name) const
{
    const auto it = std::find_if(metrics.begin(), metrics.end(), [&](const StoredMetric& m) { return m.metric == name; });
    return it == metrics.end() ? nullptr : &*it;
}

std::optional<double> StoredRun::medianAbsError(const std::string& metric) const
{
    std::vector<double> errors;
    for (const StoredCase& c : cases)
        if (const StoredMetric* m = c.metric(metric); m && m->rel_error)
            errors.push_back(std::fabs(*m->rel_error));
    if (errors.empty())
        return std::nullopt;
    return medianOf(errors);
}

StoredRun storedRun(const RunStore::ValidationRun& run)
{
    StoredRun out;
    out.id = run.id;
    out.created_at = q(run.created_at);
    out.name = q(run.name);
    out.software_version = q(run.software_version);
    out.cost_model = run.document.value(QLatin1String("cost_model")).toString();
    out.device = run.document.value(QLatin1String("device")).toString();
    out.cases = storedCases(run.document);
    return out;
}

std::vector<StoredCase> storedCases(const QJsonObject& document)
{
    std::vector<StoredCase> out;
    for (const QJsonValue& c : document.value(QLatin1String("cases")).toArray())
        out.push_back(storedCase(c.toObject()));
    return out;
}

void addLossCurves(QJsonObject& document, const std::vector<ValidationResult>& results)
{
    QJsonArray cases = document.value(QLatin1String("cases")).toArray();
    for (qsizetype i = 0; i < cases.size() && size_t(i) < results.size(); ++i) {
        QJsonArray losses;
        for (const engine::StepRecord& s : results[size_t(i)].measurement.steps)
            losses.append(s.loss);
        QJsonObject c = cases[i].toObject();
        c.insert(QLatin1String("losses"), losses);
        cases[i] = c;
    }
    document.insert(QLatin1String("cases"), cases);
}

RunComparison compareRuns(const StoredRun& a, const StoredRun& b)
{
    RunComparison out;
    auto addCase = [&](const StoredCase& ca, const StoredCase& cb) {
        for (const StoredMetric& ma : ca.metrics)
            if (const StoredMetric* mb = cb.metric(ma.metric))
                out.rows.push_back({ca.name, cb.name, ma, *mb});
    };
    if (a.cases.size() == 1 && b.cases.size() == 1) {
        addCase(a.cases.front(), b.cases.front());
        return out;
    }
    for (const StoredCase& ca : a.cases) {
        const auto it = std::find_if(b.cases.begin(), b.cases.end(), [&](const StoredCase& c) { return c.name == ca.name; });
        if (it == b.cases.end())
            out.unmatched << QStringLiteral("%1 (run %2 only)").arg(ca.name).arg(a.id);
        else
            addCase(ca, *it);
    }
    for (const StoredCase& cb : b.cases)
        if (std::none_of(a.cases.begin(), a.cases.end(), [&](const StoredCase& c) { return c.name == cb.name; }))
            out.unmatched << QStringLiteral("%1 (run %2 only)").arg(cb.name).arg(b.id);
    return out;
}

} // namespace shardscope
