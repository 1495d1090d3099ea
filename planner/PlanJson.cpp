#include "PlanJson.h"
#include "FrameworkExport.h"
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
    QJsonObject o{{"layout", toJson(plan.layout)},
                  {"layout_text", QString::fromStdString(toString(plan.layout))},
                  {"prediction", toJson(plan.prediction)}};
    if (!plan.variants.empty()) {
        QJsonArray variants;
        for (const Layout& v : plan.variants)
            variants.append(toJson(v));
        o.insert("variants", variants);  // layouts of the same cost, folded into this one
    }
    return o;
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

QJsonObject planDocument(const SearchResult& r)
{
    // Each plan says which frameworks can run it (their exporters refuse nothing).
    auto withFrameworks = [&](const Plan& plan) {
        QJsonObject o = toJson(plan);
        QJsonArray runs;
        for (ExportFormat f : frameworksThatRun(r.request.problem, plan.layout))
            runs.append(QLatin1String(toString(f)));
        o.insert("frameworks", runs);
        return o;
    };
    QJsonArray alternatives;
    for (size_t i = 1; i < r.top.size(); ++i)
        alternatives.append(withFrameworks(r.top[i]));
    return QJsonObject{{"schema", "shardscope.plan/2"},
                       {"request", toJson(r.request)},
                       {"problem", toJson(r.request.problem)},
                       {"objective", toString(r.objective)},
                       {"cost_model", QString::fromStdString(r.request.cost_model.name)},
                       {"best", r.best() ? QJsonValue(withFrameworks(*r.best())) : QJsonValue(QJsonValue::Null)},
                       {"alternatives", alternatives},
                       {"pareto", frontJson(r.pareto_step_memory)},
                       {"pareto_time_cost", frontJson(r.pareto_time_cost)},
                       {"search", toJson(r.stats)}};
}

QJsonObject sweepDocument(const SweepResult& sweep)
{
    const Problem& base = sweep.request.problem;
    const Objective objective = sweep.request.objective;
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
                       {"request", toJson(sweep.request)},
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

QJsonObject compareDocument(const SweepResult& comparison)
{
    const Objective objective = comparison.request.objective;
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
                    {"request", toJson(comparison.request)},
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
    checkSchema(r, "plan", 2);
    PlanDocument doc;
    doc.version = json.value(QLatin1String("schema")).toString() == QLatin1String("shardscope.plan/1") ? 1 : 2;
    std::optional<Problem> problem;
    if (doc.version >= 2) {
        auto request = planRequestFromJson(r.object("request", true).json(), r.fieldPath("request"), errors);
        if (request) {
            doc.request = *request;
            problem = request->problem;
        }
    } else {
        // plan/1 saved the problem and the objective only: the default terms, no constraints.
        problem = problemFromJson(r.object("problem", true).json(), r.fieldPath("problem"), errors);
        const std::string objective = r.string("objective", false);
        if (!objective.empty()) {
            if (auto o = objectiveFromString(objective))
                doc.request.objective = *o;
            else
                r.error("objective", "unknown value \"" + objective + "\" (one of: throughput, time, cost)");
        }
        const std::string named = r.string("cost_model", false);
        doc.notes.push_back("made by an older ShardScope (shardscope.plan/1), which did not save its cost-model terms "
                            "or search constraints: priced with the default terms" +
                            (named.empty() || named == doc.request.cost_model.name
                                 ? std::string()
                                 : " (the file names profile \"" + named + "\")") +
                            ", searched without constraints");
    }
    auto checked = [&](std::optional<Layout> layout, const std::string& at) -> std::optional<Layout> {
        if (layout && problem) {
            const FieldErrors rules = validate(*layout, problem->model, problem->cluster, problem->training, at);
            errors.insert(errors.end(), rules.begin(), rules.end());
            if (!rules.empty())
                return std::nullopt;
        }
        return layout;
    };
    // A plan's layout, and its variants (layouts of the same cost) when it has them.
    auto readLayout = [&](const QJsonObject& plan, const std::string& at) -> std::optional<Layout> {
        JsonReader pr(plan, at, errors);
        auto layout = checked(layoutFromJson(pr.object("layout", true).json(), pr.fieldPath("layout"), errors),
                              pr.fieldPath("layout"));
        std::vector<Layout> variants;
        const QJsonArray a = plan.value(QLatin1String("variants")).toArray();
        for (qsizetype i = 0; i < a.size(); ++i) {
            const std::string vat = pr.fieldPath("variants") + "[" + std::to_string(i) + "]";
            if (auto v = checked(layoutFromJson(a[i].toObject(), vat, errors), vat))
                variants.push_back(*v);
        }
        doc.variants.push_back(std::move(variants));
        return layout;
    };
    auto readLayouts = [&](const char* key, std::vector<Layout>& out) {
        const QJsonValue v = json.value(QLatin1String(key));
        if (v.isUndefined())
            return;
        if (!v.isArray()) {
            r.error(key, "must be an array");
            return;
        }
        const QJsonArray a = v.toArray();
        for (qsizetype i = 0; i < a.size(); ++i) {
            const std::string at = r.fieldPath(key) + "[" + std::to_string(i) + "]";
            if (!a[i].isObject()) {
                errors.push_back({at, "must be an object"});
                continue;
            }
            if (auto l = readLayout(a[i].toObject(), at))
                out.push_back(*l);
        }
    };
    const QJsonValue best = json.value("best");
    if (best.isObject())
        doc.best = readLayout(best.toObject(), r.fieldPath("best"));
    else if (!best.isNull() && !best.isUndefined())
        r.error("best", "must be an object or null");
    readLayouts("alternatives", doc.alternatives);
    readLayouts("pareto", doc.pareto);
    readLayouts("pareto_time_cost", doc.pareto_time_cost);
    if (json.value("search").isObject()) {
        JsonReader st = r.object("search", false);
        auto count = [&](const char* key) {
            return std::int64_t(st.number(key, 0, false, 0, 9e15));
        };
        doc.stats.mesh_shapes = count("mesh_shapes");
        doc.stats.candidates = count("candidates");
        doc.stats.evaluated = count("evaluated");
        doc.stats.pruned = count("pruned");
        doc.stats.feasible = count("feasible");
        doc.stats.seconds = st.number("seconds", 0, false, 0, 1e9);
        doc.stats.threads = st.integer("threads", 1, false, 1, 1 << 16);
        doc.stats.cancelled = st.boolean("cancelled", false);
        const QJsonObject reasons = st.json().value("infeasible_by_reason").toObject();
        for (auto it = reasons.begin(); it != reasons.end(); ++it)
            if (it.value().isDouble() && it.value().toDouble() >= 0)
                doc.stats.infeasible_by_reason[it.key().toStdString()] = std::int64_t(it.value().toDouble());
    }
    if (errors.size() != before || !problem)
        return std::nullopt;
    doc.request.problem = *problem;
    doc.problem = *problem;
    doc.objective = doc.request.objective;
    return doc;
}

SearchResult savedResult(const PlanDocument& doc)
{
    SearchResult r;
    r.request = doc.request;
    r.objective = doc.request.objective;
    r.stats = doc.stats;
    const CostModel model(doc.request.problem, doc.request.cost_model, doc.request.framework);
    auto priced = [&](const Layout& layout) {
        Plan plan{layout, model.evaluate(layout), {}, {}};
        const MemoryBreakdown& m = plan.prediction.memory_bytes;
        if (!plan.prediction.feasible)
            plan.infeasible = toString(plan.prediction.reason);
        else if (m.total() > doc.request.space.max_memory_fraction * m.capacity)
            plan.infeasible = kReasonOverLimit;
        return plan;
    };
    if (doc.best)
        r.top.push_back(priced(*doc.best));
    for (const Layout& l : doc.alternatives)
        r.top.push_back(priced(l));
    for (size_t i = 0; i < r.top.size() && i < doc.variants.size(); ++i)
        r.top[i].variants = doc.variants[i];
    for (const Layout& l : doc.pareto) {
        const Plan p = priced(l);
        r.pareto_step_memory.insert(p.prediction.step_time_s, p.prediction.memory_bytes.total(), p);
    }
    for (const Layout& l : doc.pareto_time_cost) {
        const Plan p = priced(l);
        r.pareto_time_cost.insert(p.prediction.time_to_train_s, p.prediction.cost_to_train_usd, p);
    }
    return r;
}

} // namespace shardscope
