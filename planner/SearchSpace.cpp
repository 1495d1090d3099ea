#include "SearchSpace.h"
#include "EnumNames.h"
#include "KeyValues.h"
#include "Prediction.h"
#include "SpecEnums.h"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <string_view>

namespace shardscope {

namespace {


IntBounds* intKey(SearchSpace& s, const std::string& key)
{
    if (key == "dp") return &s.dp;
    if (key == "tp") return &s.tp;
    if (key == "pp") return &s.pp;
    if (key == "cp") return &s.cp;
    if (key == "mb") return &s.mb;
    if (key == "v") return &s.v;
    if (key == "zero") return &s.zero;
    if (key == "ep") return &s.ep;
    if (key == "etp") return &s.etp;
    return nullptr;
}

template <class E, size_t N>
bool enumValue(const std::array<EnumName<E>, N>& table, const std::string& field, const std::string& value, E& out,
               FieldErrors& errors)
{
    if (auto v = enumFromString<E>(table, value)) {
        out = *v;
        return true;
    }
    errors.push_back({field, "unknown value " + quotedValue(value) + " (" + enumChoices<E>(table) + ")"});
    return false;
}

} // namespace

bool SearchSpace::allows(PipelineSchedule s) const
{
    return std::find(schedules.begin(), schedules.end(), s) != schedules.end();
}
bool SearchSpace::allows(Recompute r) const
{
    return std::find(recomputes.begin(), recomputes.end(), r) != recomputes.end();
}
bool SearchSpace::allows(Offload o) const { return std::find(offloads.begin(), offloads.end(), o) != offloads.end(); }

FieldErrors applyFixed(SearchSpace& space, const std::string& text, const std::string& path)
{
    FieldErrors errors;
    bool recomputeFixed = false;
    for (const auto& [key, value] : splitKeyValues(joinPipelineLayoutCommas(text), path, errors)) {
        const std::string field = path + "." + printable(key);
        if (IntBounds* b = intKey(space, key)) {
            int v = 0;
            if (!parseWholeInt(value, v))
                errors.push_back({field, quotedValue(value) + " is not an integer"});
            else if (v < (key == "zero" ? 0 : 1))
                errors.push_back({field, value + " is out of range"});
            else
                *b = IntBounds{v, v};
        } else if (std::optional<int>* layers = key == "first_stage_layers" ? &space.first_stage_layers
                                                : key == "last_stage_layers"  ? &space.last_stage_layers
                                                : key == "recompute_layers"   ? &space.recompute_layers
                                                                              : nullptr) {
            int v = 0;
            if (!parseWholeInt(value, v) || v < 0)
                errors.push_back({field, quotedValue(value) + " is not a layer count (0: " +
                                             (layers == &space.recompute_layers ? "every layer" : "the even split") +
                                             ", or positive)"});
            else
                *layers = v;
        } else if (key == "pipeline_layout") {
            std::string why;
            if (const std::optional<PipelineLayerLayout> parsed = PipelineLayerLayout::parse(value, why))
                space.pipeline_layout = internPipelineLayerLayout(*parsed);
            else
                errors.push_back({field, quotedValue(value) + ": " + why});
        } else if (key == "recompute_modules") {
            const size_t before = errors.size();
            const unsigned modules = parseRecomputeModules(value, field, errors);
            if (errors.size() == before)
                space.recompute_modules = modules;
        } else if (key == "offload_activations") {
            int v = 0;
            if (!parseWholeInt(value, v) || v < 0)
                errors.push_back({field, quotedValue(value) + " is not a layer count (0: none, or positive)"});
            else
                space.offload_activations = v;
        } else if (key == "recompute_method") {
            RecomputeMethod m{};
            if (enumValue(kRecomputeMethodNames, field, value, m, errors))
                space.recompute_method = m;
        } else if (key == "zero_group") {
            int v = 0;
            if (!parseWholeInt(value, v) || v < 0)
                errors.push_back({field, quotedValue(value) + " is not a shard-group size (0 or positive)"});
            else
                space.zero_group = v;
        } else if (key == "sp" || key == "tp_comm_overlap" || key == "overlap_param_gather" || key == "ep_comm_overlap") {
            std::optional<bool> on;
            if (value == "on" || value == "true" || value == "1")
                on = true;
            else if (value == "off" || value == "false" || value == "0")
                on = false;
            else
                errors.push_back({field, "unknown value " + quotedValue(value) + " (one of: on, off)"});
            if (on && key == "sp")
                space.sequence_parallel = *on;
            else if (on && key == "tp_comm_overlap")
                space.tp_comm_overlap = *on;
            else if (on && key == "ep_comm_overlap")
                space.ep_comm_overlap = *on;
            else if (on)
                space.overlap_param_gather = *on;
        } else if (key == "cp_comm") {
            CpComm c{};
            if (enumValue(kCpCommNames, field, value, c, errors))
                space.cp_comm = c;
        } else if (key == "moe_dispatcher") {
            MoeDispatcher d{};
            if (enumValue(kMoeDispatcherNames, field, value, d, errors))
                space.moe_dispatcher = d;
        } else if (key == "schedule") {
            PipelineSchedule s{};
            if (enumValue(kScheduleNames, field, value, s, errors))
                space.schedules = {s};
        } else if (key == "recompute") {
            Recompute r{};
            recomputeFixed = true;
            if (enumValue(kRecomputeNames, field, value, r, errors))
                space.recomputes = {r};
        } else if (key == "offload") {
            Offload o{};
            if (enumValue(kOffloadNames, field, value, o, errors))
                space.offloads = {o};
        } else {
            errors.push_back({field, "unknown key (known: dp, tp, pp, cp, sp, zero, zero_group, mb, schedule, v, "
                                     "recompute, offload, tp_comm_overlap, overlap_param_gather, "
                                     "first_stage_layers, last_stage_layers, recompute_method, recompute_layers, ep, "
                                     "etp, ep_comm_overlap, cp_comm, moe_dispatcher, recompute_modules, "
                                     "offload_activations, pipeline_layout)"});
        }
    }
    // A fixed module list or activation offload comes with its recomputation mode (modules need
    // selective, offload none: Layout.cpp's rules), so that every candidate carries what was fixed
    // instead of the search picking another mode that drops it (both fixed: each mode its own).
    const bool modules = space.recompute_modules && *space.recompute_modules != 0;
    const bool offload = space.offload_activations && *space.offload_activations > 0;
    if (!recomputeFixed && (modules || offload)) {
        space.recomputes.clear();
        if (offload)
            space.recomputes.push_back(Recompute::None);
        if (modules)
            space.recomputes.push_back(Recompute::Selective);
    }
    return errors;
}

FieldErrors applyBounds(SearchSpace& space, const std::string& text, bool upper, const std::string& path)
{
    FieldErrors errors;
    for (const auto& [key, value] : splitKeyValues(text, path, errors)) {
        const std::string field = path + "." + printable(key);
        IntBounds* b = intKey(space, key);
        int v = 0;
        if (!b)
            errors.push_back({field, "unknown key (bounds apply to: dp, tp, pp, cp, zero, mb, v, ep, etp)"});
        else if (!parseWholeInt(value, v))
            errors.push_back({field, quotedValue(value) + " is not an integer"});
        else if (v < (key == "zero" ? 0 : 1))
            errors.push_back({field, value + " is out of range"});
        else if (upper)
            b->hi = std::min(b->hi, v);
        else
            b->lo = std::max(b->lo, v);
    }
    return errors;
}

FieldErrors applyRecomputeModes(SearchSpace& space, const std::string& text, const std::string& path)
{
    FieldErrors errors;
    std::vector<Recompute> modes;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ',')) {
        item = trimmedSpaces(item);
        if (item.empty())
            continue;
        Recompute r{};
        if (enumValue(kRecomputeNames, path, item, r, errors) && std::find(modes.begin(), modes.end(), r) == modes.end())
            modes.push_back(r);
    }
    if (modes.empty() && errors.empty())
        errors.push_back({path, "no recomputation mode given (" + enumChoices<Recompute>(kRecomputeNames) + ")"});
    if (errors.empty())
        space.recomputes = modes;
    return errors;
}

namespace {

constexpr const char* kIntKeys[] = {"dp", "tp", "pp", "cp", "zero", "mb", "v", "ep", "etp"};

// Appends `item` to a separated list.
void appendItem(std::string& list, const std::string& item, char separator = ',')
{
    if (!list.empty())
        list += separator;
    list += item;
}

template <class E, size_t N>
std::string namesOf(const std::array<EnumName<E>, N>& table, const std::vector<E>& values)
{
    std::string out;
    for (E v : values)
        appendItem(out, enumToString<E>(table, v));
    return out;
}

} // namespace

std::string fixedText(const SearchSpace& s)
{
    const SearchSpace defaults;
    SearchSpace copy = s;  // intKey() takes a mutable space
    std::string out;
    auto add = [&](const std::string& key, const std::string& value) { appendItem(out, key + "=" + value); };
    for (const char* key : kIntKeys) {
        const IntBounds& b = *intKey(copy, key);
        if (b.lo == b.hi)
            add(key, std::to_string(b.lo));
    }
    if (s.zero_group)
        add("zero_group", std::to_string(*s.zero_group));
    if (s.first_stage_layers)
        add("first_stage_layers", std::to_string(*s.first_stage_layers));
    if (s.last_stage_layers)
        add("last_stage_layers", std::to_string(*s.last_stage_layers));
    if (s.pipeline_layout)
        add("pipeline_layout", s.pipeline_layout->text());
    if (s.recompute_method)
        add("recompute_method", toString(*s.recompute_method));
    if (s.recompute_layers)
        add("recompute_layers", std::to_string(*s.recompute_layers));
    if (s.recompute_modules)
        add("recompute_modules", recomputeModulesToString(*s.recompute_modules));
    if (s.offload_activations)
        add("offload_activations", std::to_string(*s.offload_activations));
    if (s.sequence_parallel)
        add("sp", *s.sequence_parallel ? "on" : "off");
    if (s.schedules.size() == 1 && s.schedules != defaults.schedules)
        add("schedule", toString(s.schedules.front()));
    if (s.offloads.size() == 1 && s.offloads != defaults.offloads)
        add("offload", toString(s.offloads.front()));
    if (s.tp_comm_overlap)
        add("tp_comm_overlap", "on");
    if (s.overlap_param_gather)
        add("overlap_param_gather", "on");
    if (s.ep_comm_overlap)
        add("ep_comm_overlap", "on");
    if (s.cp_comm)
        add("cp_comm", toString(*s.cp_comm));
    if (s.moe_dispatcher)
        add("moe_dispatcher", toString(*s.moe_dispatcher));
    return out;
}

std::string boundsText(const SearchSpace& s, bool upper)
{
    SearchSpace copy = s, defaults;
    std::string out;
    for (const char* key : kIntKeys) {
        const IntBounds& b = *intKey(copy, key);
        const IntBounds& d = *intKey(defaults, key);
        if (b.lo == b.hi)
            continue;  // fixed: fixedText says it
        const int value = upper ? b.hi : b.lo;
        if (value != (upper ? d.hi : d.lo))
            appendItem(out, std::string(key) + "=" + std::to_string(value));
    }
    return out;
}

std::string recomputeModesText(const SearchSpace& s) { return namesOf(kRecomputeNames, s.recomputes); }

std::string constraintsText(const SearchSpace& s)
{
    const SearchSpace defaults;
    std::string out;
    auto add = [&](const std::string& flag, const std::string& value) {
        if (!value.empty())
            appendItem(out, flag + " " + value, ' ');
    };
    add("--fix", fixedText(s));
    add("--min", boundsText(s, false));
    add("--max", boundsText(s, true));
    if (s.recomputes != defaults.recomputes)
        add("--recompute", recomputeModesText(s));
    if (s.schedules.size() > 1 && s.schedules != defaults.schedules)
        add("schedules", namesOf(kScheduleNames, s.schedules));
    if (s.max_memory_fraction != defaults.max_memory_fraction) {
        std::ostringstream f;
        f << s.max_memory_fraction;
        add("--max-mem", f.str());
    }
    if (s.min_micro_batches != defaults.min_micro_batches)
        add("--min-micro-batches", std::to_string(s.min_micro_batches));
    return out.empty() ? "none" : out;
}

double objectiveValue(Objective objective, const Prediction& p)
{
    switch (objective) {
    case Objective::Throughput: return -p.tokens_per_s;
    case Objective::TimeToTrain: return p.time_to_train_s;
    case Objective::CostToTrain: return p.cost_to_train_usd;
    }
    return 0;
}

const char* toString(Objective objective)
{
    switch (objective) {
    case Objective::Throughput: return "throughput";
    case Objective::TimeToTrain: return "time";
    case Objective::CostToTrain: return "cost";
    }
    return "?";
}

std::optional<Objective> objectiveFromString(const std::string& text)
{
    for (Objective o : {Objective::Throughput, Objective::TimeToTrain, Objective::CostToTrain})
        if (text == toString(o))
            return o;
    return std::nullopt;
}

} // namespace shardscope
