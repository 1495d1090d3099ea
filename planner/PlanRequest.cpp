#include "PlanRequest.h"
#include "JsonReader.h"
#include "SpecEnums.h"
#include "SpecJson.h"

#include <QJsonArray>

#include <cmath>
#include <limits>

namespace shardscope {

PricedPlan pricePlan(const PlanRequest& request, const Layout& layout)
{
    const CostModel model(request.problem, request.cost_model, request.framework);
    PricedPlan p{request, layout, model.evaluate(layout), model.explain(layout)};
    return p;
}

Prediction predictLayout(const PlanRequest& request, const Layout& layout)
{
    return CostModel(request.problem, request.cost_model, request.framework).evaluate(layout);
}

namespace {

// A JSON number that is a whole int: the range first (casting 1e300 to int is undefined).
bool wholeInt(double x)
{
    return x >= double(std::numeric_limits<int>::min()) && x <= double(std::numeric_limits<int>::max()) &&
           x == std::floor(x);
}

struct BoundsKey {
    const char* key;
    IntBounds SearchSpace::*member;
    int minimum;
};
constexpr BoundsKey kBoundsKeys[] = {
    {"dp", &SearchSpace::dp, 1}, {"tp", &SearchSpace::tp, 1}, {"pp", &SearchSpace::pp, 1},
    {"cp", &SearchSpace::cp, 1}, {"mb", &SearchSpace::mb, 1}, {"v", &SearchSpace::v, 1},
    {"zero", &SearchSpace::zero, 0}, {"ep", &SearchSpace::ep, 1}, {"etp", &SearchSpace::etp, 1},
};

template <class E, size_t N>
QJsonArray namesJson(const std::array<EnumName<E>, N>& table, const std::vector<E>& values)
{
    QJsonArray a;
    for (E v : values)
        a.append(QLatin1String(enumToString<E>(table, v)));
    return a;
}

// A non-empty list of distinct names of `table`; the default list when the key is absent.
template <class E, size_t N>
std::vector<E> namesFromJson(const QJsonObject& json, const char* key, const std::array<EnumName<E>, N>& table,
                             const std::vector<E>& fallback, const std::string& path, FieldErrors& errors)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isUndefined())
        return fallback;
    const std::string at = path + "." + key;
    if (!v.isArray() || v.toArray().isEmpty()) {
        errors.push_back({at, "must be a non-empty array of names (" + enumChoices<E>(table) + ")"});
        return fallback;
    }
    std::vector<E> out;
    const QJsonArray a = v.toArray();
    for (qsizetype i = 0; i < a.size(); ++i) {
        const std::string name = a[i].toString().toStdString();
        const auto e = enumFromString<E>(table, name);
        if (!a[i].isString() || !e)
            errors.push_back({at + "[" + std::to_string(i) + "]",
                              "unknown value \"" + name + "\" (" + enumChoices<E>(table) + ")"});
        else if (std::find(out.begin(), out.end(), *e) == out.end())
            out.push_back(*e);
    }
    return out.empty() ? fallback : out;
}

} // namespace

QJsonObject toJson(const SearchSpace& s)
{
    QJsonObject bounds;
    for (const BoundsKey& k : kBoundsKeys) {
        const IntBounds& b = s.*(k.member);
        bounds.insert(QLatin1String(k.key),
                      QJsonArray{b.lo, b.hi == INT_MAX ? QJsonValue(QJsonValue::Null) : QJsonValue(b.hi)});
    }
    return QJsonObject{
        {"bounds", bounds},
        {"zero_group", s.zero_group ? QJsonValue(*s.zero_group) : QJsonValue(QJsonValue::Null)},
        {"first_stage_layers", s.first_stage_layers ? QJsonValue(*s.first_stage_layers) : QJsonValue(QJsonValue::Null)},
        {"last_stage_layers", s.last_stage_layers ? QJsonValue(*s.last_stage_layers) : QJsonValue(QJsonValue::Null)},
        {"pipeline_layout", s.pipeline_layout
                                ? QJsonValue(QString::fromStdString(s.pipeline_layout->text()))
                                : QJsonValue(QJsonValue::Null)},
        {"recompute_method",
         s.recompute_method ? QJsonValue(QLatin1String(toString(*s.recompute_method))) : QJsonValue(QJsonValue::Null)},
        {"recompute_layers", s.recompute_layers ? QJsonValue(*s.recompute_layers) : QJsonValue(QJsonValue::Null)},
        {"recompute_modules", s.recompute_modules
                                  ? QJsonValue(QString::fromStdString(recomputeModulesToString(*s.recompute_modules)))
                                  : QJsonValue(QJsonValue::Null)},
        {"offload_activations",
         s.offload_activations ? QJsonValue(*s.offload_activations) : QJsonValue(QJsonValue::Null)},
        {"sequence_parallel", s.sequence_parallel ? QJsonValue(*s.sequence_parallel) : QJsonValue(QJsonValue::Null)},
        {"schedules", namesJson(kScheduleNames, s.schedules)},
        {"recompute", namesJson(kRecomputeNames, s.recomputes)},
        {"offload", namesJson(kOffloadNames, s.offloads)},
        {"tp_comm_overlap", s.tp_comm_overlap},
        {"overlap_param_gather", s.overlap_param_gather},
        {"ep_comm_overlap", s.ep_comm_overlap},
        {"cp_comm", s.cp_comm ? QJsonValue(QLatin1String(toString(*s.cp_comm))) : QJsonValue(QJsonValue::Null)},
        {"moe_dispatcher", s.moe_dispatcher ? QJsonValue(QLatin1String(toString(*s.moe_dispatcher)))
                                            : QJsonValue(QJsonValue::Null)},
        {"max_memory_fraction", s.max_memory_fraction},
        {"min_micro_batches", s.min_micro_batches},
        {"constraints", QString::fromStdString(constraintsText(s))},
    };
}

namespace {

// A search-space key that is a name or null (not fixed): the name's value, or none with an error
// naming the key for anything else.
template <class E>
std::optional<E> optionalEnum(const QJsonObject& json, JsonReader& r, const char* key,
                              std::span<const EnumName<E>> names)
{
    const QJsonValue v = json.value(QLatin1String(key));
    if (v.isString()) {
        if (auto e = enumFromString<E>(names, v.toString().toStdString()))
            return e;
        r.error(key, "unknown value (" + enumChoices<E>(names) + ")");
    } else if (!v.isNull() && !v.isUndefined()) {
        r.error(key, "must be a name (" + enumChoices<E>(names) + ") or null");
    }
    return std::nullopt;
}

} // namespace

SearchSpace searchSpaceFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    SearchSpace s;
    JsonReader r(json, path, errors);
    r.rejectUnknownKeys({"bounds", "zero_group", "first_stage_layers", "last_stage_layers", "pipeline_layout",
                         "recompute_method",
                         "recompute_layers", "recompute_modules", "offload_activations", "sequence_parallel",
                         "schedules", "recompute", "offload",
                         "tp_comm_overlap", "overlap_param_gather", "ep_comm_overlap", "cp_comm", "moe_dispatcher",
                         "max_memory_fraction", "min_micro_batches", "constraints"});
    const JsonReader bounds = r.object("bounds", false);
    for (const BoundsKey& k : kBoundsKeys) {
        const QJsonValue v = bounds.json().value(QLatin1String(k.key));
        if (v.isUndefined())
            continue;
        const std::string at = bounds.fieldPath(k.key);
        const QJsonArray a = v.toArray();
        const bool hiOpen = a.size() == 2 && a[1].isNull();
        const bool shape = v.isArray() && a.size() == 2 && a[0].isDouble() && (a[1].isDouble() || hiOpen);
        const double lo = shape ? a[0].toDouble() : 0, hi = shape && !hiOpen ? a[1].toDouble() : double(INT_MAX);
        if (!shape || !wholeInt(lo) || !wholeInt(hi) || lo < k.minimum || hi < lo) {
            errors.push_back({at, "must be [lo, hi] with integers " + std::to_string(k.minimum) +
                                      " <= lo <= hi, or [lo, null] for no upper bound"});
            continue;
        }
        s.*(k.member) = IntBounds{int(lo), int(hi)};
    }
    const QJsonValue group = json.value(QLatin1String("zero_group"));
    if (group.isDouble() && group.toDouble() >= 0 && wholeInt(group.toDouble()))
        s.zero_group = int(group.toDouble());
    else if (!group.isNull() && !group.isUndefined())
        r.error("zero_group", "must be a shard-group size (0 or positive) or null");
    s.recompute_method = optionalEnum<RecomputeMethod>(json, r, "recompute_method", kRecomputeMethodNames);
    // Recomputed modules as the layout grammar writes them ("layernorm+moe_act"), an offload count.
    const QJsonValue modules = json.value(QLatin1String("recompute_modules"));
    if (modules.isString()) {
        const size_t before = errors.size();
        const unsigned bits = parseRecomputeModules(modules.toString().toStdString(), r.fieldPath("recompute_modules"),
                                                    errors);
        if (errors.size() == before)
            s.recompute_modules = bits;
    } else if (!modules.isNull() && !modules.isUndefined()) {
        r.error("recompute_modules", "must be module names joined by '+' (\"layernorm+moe_act\") or null");
    }
    const QJsonValue offloaded = json.value(QLatin1String("offload_activations"));
    if (offloaded.isDouble() && offloaded.toDouble() >= 0 && offloaded.toDouble() <= 1'000'000 &&
        wholeInt(offloaded.toDouble()))
        s.offload_activations = int(offloaded.toDouble());
    else if (!offloaded.isNull() && !offloaded.isUndefined())
        r.error("offload_activations", "must be a layer count (0 for none, or positive, at most 1000000) or null");
    for (const char* key : {"first_stage_layers", "last_stage_layers", "recompute_layers"}) {
        const QJsonValue v = json.value(QLatin1String(key));
        if (v.isDouble() && v.toDouble() >= 0 && wholeInt(v.toDouble()))
            (std::string(key) == "first_stage_layers"  ? s.first_stage_layers
             : std::string(key) == "last_stage_layers" ? s.last_stage_layers
                                                       : s.recompute_layers) = int(v.toDouble());
        else if (!v.isNull() && !v.isUndefined())
            r.error(key, "must be a layer count (0 for the even split, or positive) or null");
    }
    const QJsonValue pipeline = json.value(QLatin1String("pipeline_layout"));
    if (pipeline.isString()) {
        std::string why;
        if (const std::optional<PipelineLayerLayout> parsed =
                PipelineLayerLayout::parse(pipeline.toString().toStdString(), why))
            s.pipeline_layout = internPipelineLayerLayout(*parsed);
        else
            r.error("pipeline_layout", quotedValue(pipeline.toString().toStdString()) + ": " + why);
    } else if (!pipeline.isNull() && !pipeline.isUndefined()) {
        r.error("pipeline_layout", "must be Megatron-LM's layout string (\"Et*4|(t*4|)*14tmL\") or null");
    }
    const QJsonValue sp = json.value(QLatin1String("sequence_parallel"));
    if (sp.isBool())
        s.sequence_parallel = sp.toBool();
    else if (!sp.isNull() && !sp.isUndefined())
        r.error("sequence_parallel", "must be true, false or null");
    s.schedules = namesFromJson(json, "schedules", kScheduleNames, s.schedules, path, errors);
    s.recomputes = namesFromJson(json, "recompute", kRecomputeNames, s.recomputes, path, errors);
    s.offloads = namesFromJson(json, "offload", kOffloadNames, s.offloads, path, errors);
    s.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
    s.overlap_param_gather = r.boolean("overlap_param_gather", false);
    s.ep_comm_overlap = r.boolean("ep_comm_overlap", false);
    s.cp_comm = optionalEnum<CpComm>(json, r, "cp_comm", kCpCommNames);
    s.moe_dispatcher = optionalEnum<MoeDispatcher>(json, r, "moe_dispatcher", kMoeDispatcherNames);
    s.max_memory_fraction = r.number("max_memory_fraction", 1.0, false, 0.01, 1.0);
    s.min_micro_batches = r.integer("min_micro_batches", 1, false, 1, 1'000'000);
    return s;
}

QJsonObject toJson(const PlanRequest& request)
{
    return QJsonObject{{"problem", toJson(request.problem)},
                       {"cost_model", toJson(request.cost_model)},
                       {"space", toJson(request.space)},
                       {"objective", toString(request.objective)},
                       {"top_k", request.top_k},
                       {"framework", request.framework ? QJsonValue(QLatin1String(toString(*request.framework)))
                                                       : QJsonValue(QJsonValue::Null)}};
}

std::optional<PlanRequest> planRequestFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    r.rejectUnknownKeys({"problem", "cost_model", "space", "objective", "top_k", "framework"});
    PlanRequest request;
    auto problem = problemFromJson(r.object("problem", true).json(), r.fieldPath("problem"), errors);
    request.cost_model = costModelParamsFromJson(r.object("cost_model", true).json(), r.fieldPath("cost_model"), errors);
    request.space = searchSpaceFromJson(r.object("space", false).json(), r.fieldPath("space"), errors);
    const std::string objective = r.string("objective", true);
    if (auto o = objectiveFromString(objective))
        request.objective = *o;
    else if (!objective.empty())
        r.error("objective", "unknown value \"" + objective + "\" (one of: throughput, time, cost)");
    request.top_k = r.integer("top_k", 10, false, 1, 1000);
    const QJsonValue framework = json.value(QLatin1String("framework"));
    if (framework.isString()) {
        if (auto f = exportFormatFromString(framework.toString().toStdString()))
            request.framework = *f;
        else
            r.error("framework", "unknown framework \"" + framework.toString().toStdString() + "\" (one of: " +
                                     exportFormatChoices() + ")");
    } else if (!framework.isNull() && !framework.isUndefined()) {
        r.error("framework", "must be a framework name or null");
    }
    if (errors.size() != before || !problem)
        return std::nullopt;
    request.problem = *problem;
    return request;
}

} // namespace shardscope
