#include "PlanJson.h"
#include "JsonReader.h"
#include "PredictionJson.h"
#include "SpecJson.h"

#include <QJsonArray>

namespace shardscope {

namespace {

QJsonValue bestOrNull(const SearchResult& r)
{
    if (const Plan* best = r.best())
        return toJson(*best);
    return QJsonValue::Null;
}

QJsonArray frontJson(const PlanFront& front)
{
    QJsonArray a;
    for (const auto& p : front.points())
        a.append(toJson(p.item));
    return a;
}

} // namespace

QJsonObject toJson(const Plan& plan)
{
    return QJsonObject{{"layout", toJson(plan.layout)},
                       {"layout_text", QString::fromStdString(toString(plan.layout))},
                       {"prediction", toJson(plan.prediction)}};
}

QJsonObject toJson(const SearchStats& s)
{
    QJsonObject reasons;
    for (const auto& [reason, n] : s.infeasible_by_reason)
        reasons.insert(QString::fromStdString(reason), qint64(n));
    return QJsonObject{{"mesh_shapes", qint64(s.mesh_shapes)},
                       {"candidates", qint64(s.candidates)},
                       {"evaluated", qint64(s.evaluated)},
                       {"pruned", qint64(s.pruned)},
                       {"feasible", qint64(s.feasible)},
                       {"infeasible_by_reason", reasons},
                       {"seconds", s.seconds},
                       {"evaluations_per_s", s.evaluationsPerSecond()},
                       {"threads", s.threads},
                       {"cancelled", s.cancelled}};
}

QJsonObject planDocument(const Problem& problem, const SearchResult& r, const std::string& costModelName)
{
    QJsonArray alternatives;
    for (size_t i = 1; i < r.top.size(); ++i)
        alternatives.append(toJson(r.top[i]));
    return QJsonObject{{"schema", "shardscope.plan/1"},
                       {"problem", toJson(problem)},
                       {"objective", toString(r.objective)},
                       {"cost_model", QString::fromStdString(costModelName)},
                       {"best", bestOrNull(r)},
                       {"alternatives", alternatives},
                       {"pareto", frontJson(r.pareto_step_memory)},
                       {"pareto_time_cost", frontJson(r.pareto_time_cost)},
                       {"search", toJson(r.stats)}};
}

QJsonObject sweepDocument(const Problem& base, const SweepResult& sweep, Objective objective)
{
    QJsonArray points, front;
    for (const SweepPoint& p : sweep.points) {
        QJsonObject o{{"nodes", p.problem.cluster.nodes},
                      {"devices", qint64(p.problem.cluster.devices())},
                      {"best", bestOrNull(p.result)},
                      {"scaling_efficiency", p.scaling_efficiency}};
        if (p.error.empty())
            o.insert("search", toJson(p.result.stats));
        else
            o.insert("error", QString::fromStdString(p.error));
        points.append(o);
    }
    for (int i : sweep.pareto_time_cost)
        front.append(sweep.points[size_t(i)].problem.cluster.nodes);
    return QJsonObject{{"schema", "shardscope.sweep/1"},
                       {"problem", toJson(base)},
                       {"objective", toString(objective)},
                       {"points", points},
                       {"reference_nodes", sweep.reference >= 0
                                               ? QJsonValue(sweep.points[size_t(sweep.reference)].problem.cluster.nodes)
                                               : QJsonValue(QJsonValue::Null)},
                       {"pareto_time_cost", front},
                       {"seconds", sweep.seconds},
                       {"cancelled", sweep.cancelled}};
}

QJsonObject compareDocument(const SweepResult& comparison, Objective objective)
{
    QJsonArray entries, front;
    for (const SweepPoint& p : comparison.points) {
        const Plan* best = p.result.best();
        QJsonObject o{{"node_type", QString::fromStdString(p.problem.cluster.node.name)},
                      {"nodes", p.problem.cluster.nodes},
                      {"devices", qint64(p.problem.cluster.devices())},
                      {"best", bestOrNull(p.result)},
                      {"time_to_train_s", best ? QJsonValue(best->prediction.time_to_train_s) : QJsonValue()},
                      // null when there is no plan or the node type has no published price
                      {"cost_to_train_usd", best && p.problem.cluster.node.price_per_node_hour_usd > 0
                                                ? QJsonValue(best->prediction.cost_to_train_usd)
                                                : QJsonValue()},
                      {"relative_throughput_per_device", p.scaling_efficiency}};
        if (p.error.empty())
            o.insert("search", toJson(p.result.stats));
        else
            o.insert("error", QString::fromStdString(p.error));
        entries.append(o);
    }
    for (int i : comparison.pareto_time_cost)
        front.append(QString::fromStdString(comparison.points[size_t(i)].problem.cluster.node.name));
    QJsonObject doc{{"schema", "shardscope.compare/1"},
                    {"objective", toString(objective)},
                    {"entries", entries},
                    {"pareto_time_cost", front},
                    {"seconds", comparison.seconds},
                    {"cancelled", comparison.cancelled}};
    if (!comparison.points.empty()) {
        doc.insert("model", toJson(comparison.points.front().problem.model));
        doc.insert("training", toJson(comparison.points.front().problem.training));
    }
    return doc;
}

std::optional<PlanDocument> planDocumentFromJson(const QJsonObject& json, const std::string& path,
                                                 FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    checkSchema(r, "plan", 1);
    PlanDocument doc;
    const std::string objective = r.string("objective", false);
    if (!objective.empty()) {
        if (auto o = objectiveFromString(objective))
            doc.objective = *o;
        else
            r.error("objective", "unknown value \"" + objective + "\" (one of: throughput, time, cost)");
    }
    auto problem = problemFromJson(r.object("problem", true).json(), r.fieldPath("problem"), errors);
    auto readLayout = [&](const QJsonObject& plan, const std::string& at) -> std::optional<Layout> {
        JsonReader pr(plan, at, errors);
        auto layout = layoutFromJson(pr.object("layout", true).json(), pr.fieldPath("layout"), errors);
        if (layout && problem) {
            const FieldErrors rules = validate(*layout, problem->model, problem->cluster, problem->training,
                                               pr.fieldPath("layout"));
            errors.insert(errors.end(), rules.begin(), rules.end());
            if (!rules.empty())
                return std::nullopt;
        }
        return layout;
    };
    const QJsonValue best = json.value("best");
    if (best.isObject())
        doc.best = readLayout(best.toObject(), r.fieldPath("best"));
    else if (!best.isNull() && !best.isUndefined())
        r.error("best", "must be an object or null");
    const QJsonValue alternatives = json.value("alternatives");
    if (alternatives.isArray()) {
        const QJsonArray a = alternatives.toArray();
        for (qsizetype i = 0; i < a.size(); ++i) {
            const std::string at = r.fieldPath("alternatives") + "[" + std::to_string(i) + "]";
            if (!a[i].isObject()) {
                errors.push_back({at, "must be an object"});
                continue;
            }
            if (auto l = readLayout(a[i].toObject(), at))
                doc.alternatives.push_back(*l);
        }
    } else if (!alternatives.isUndefined()) {
        r.error("alternatives", "must be an array");
    }
    if (errors.size() != before || !problem)
        return std::nullopt;
    doc.problem = *problem;
    return doc;
}

} // namespace shardscope
