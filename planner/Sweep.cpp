#include "Sweep.h"

#include <chrono>
#include <charconv>
#include <sstream>

namespace shardscope {

namespace {

SweepResult searchAll(std::vector<Problem> problems, const PlanRequest& base, const SearchControl& control)
{
    const auto start = std::chrono::steady_clock::now();
    SweepResult out;
    out.request = base;
    for (Problem& problem : problems) {
        SweepPoint point;
        point.problem = std::move(problem);
        if (const FieldErrors errors = validate(point.problem); !errors.empty()) {
            point.error = joinErrors(errors);
        } else {
            PlanRequest request = base;
            request.problem = point.problem;
            point.result = search(request, control);
            point.error = point.result.error;
            out.cancelled = out.cancelled || point.result.stats.cancelled;
        }
        out.points.push_back(std::move(point));
        if (out.cancelled)
            break;
    }
    // Scaling efficiency: tokens/s per device against the first point with a plan.
    for (size_t i = 0; i < out.points.size(); ++i) {
        const Plan* best = out.points[i].result.best();
        if (!best)
            continue;
        if (out.reference < 0)
            out.reference = int(i);
        const Plan* ref = out.points[size_t(out.reference)].result.best();
        const double perDevice = best->prediction.tokens_per_s / double(best->layout.devices());
        const double refPerDevice = ref->prediction.tokens_per_s / double(ref->layout.devices());
        out.points[i].scaling_efficiency = refPerDevice > 0 ? perDevice / refPerDevice : 0.0;
    }
    // (time, cost) front over the best plans, ties kept to the earlier point.
    struct IndexLess {
        bool operator()(int a, int b) const { return a < b; }
    };
    ParetoFront<int, IndexLess> front;
    for (size_t i = 0; i < out.points.size(); ++i)
        if (const Plan* best = out.points[i].result.best())
            front.insert(best->prediction.time_to_train_s, best->prediction.cost_to_train_usd, int(i));
    for (const auto& p : front.points())
        out.pareto_time_cost.push_back(p.item);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

// The request of the older entry points: default terms, the options' objective and top_k.
PlanRequest requestOf(const Problem& problem, const SearchSpace& space, const SearchOptions& options)
{
    return PlanRequest{problem, defaultCostModelParams(), space, options.objective, options.top_k, std::nullopt};
}

SearchControl controlOf(const SearchOptions& options) { return {options.threads, options.cancel, options.progress}; }

} // namespace

SweepResult sweepNodes(const PlanRequest& base, const std::vector<int>& nodes, const SearchControl& control)
{
    std::vector<Problem> problems;
    for (int n : nodes) {
        Problem p = base.problem;
        p.cluster.nodes = n;
        problems.push_back(std::move(p));
    }
    return searchAll(std::move(problems), base, control);
}

SweepResult compareProblems(const PlanRequest& base, const std::vector<Problem>& problems,
                            const SearchControl& control)
{
    return searchAll(problems, base, control);
}

SweepResult sweepNodes(const Problem& base, const std::vector<int>& nodes, const SearchSpace& space,
                       const SearchOptions& options)
{
    return sweepNodes(requestOf(base, space, options), nodes, controlOf(options));
}

SweepResult compareProblems(const std::vector<Problem>& problems, const SearchSpace& space,
                            const SearchOptions& options)
{
    return compareProblems(requestOf(problems.empty() ? Problem{} : problems.front(), space, options), problems,
                           controlOf(options));
}

std::vector<int> parseNodeCounts(const std::string& text, const std::string& path, FieldErrors& errors)
{
    auto number = [&](const std::string& s, int& out) {
        const char* end = s.data() + s.size();
        auto [ptr, ec] = std::from_chars(s.data(), end, out);
        if (s.empty() || ec != std::errc() || ptr != end || out < 1 || out > 1'000'000) {
            errors.push_back({path, "\"" + s + "\" is not a node count (1 to 1000000)"});
            return false;
        }
        return true;
    };
    std::vector<int> counts;
    if (const size_t dots = text.find(".."); dots != std::string::npos) {
        int lo = 0, hi = 0;
        if (!number(text.substr(0, dots), lo) || !number(text.substr(dots + 2), hi))
            return {};
        if (lo > hi) {
            errors.push_back({path, text + ": the range is empty"});
            return {};
        }
        for (std::int64_t n = lo; n <= hi; n *= 2)
            counts.push_back(int(n));
        return counts;
    }
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ',')) {
        int n = 0;
        if (!number(item, n))
            return {};
        counts.push_back(n);
    }
    if (counts.empty())
        errors.push_back({path, "no node count given (a list \"1,2,4\" or a range \"1..512\")"});
    return counts;
}

} // namespace shardscope
