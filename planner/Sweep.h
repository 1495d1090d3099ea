// Sweeps and comparisons: the same search over several cluster sizes of one node
// type, or over several node types, on the same model and token budget.
#pragma once

#include "Search.h"

#include <string>
#include <vector>

namespace shardscope {

struct SweepPoint {
    Problem problem;         // the base problem at this size (or node type)
    std::string error;       // why this point could not be searched (an invalid problem), else empty
    SearchResult result;
    // Tokens/s per device relative to the reference point (the smallest size with a
    // feasible plan): 1 = perfect weak scaling. 0 when this point has no plan.
    double scaling_efficiency = 0;
};

struct SweepResult {
    PlanRequest request;              // the base request: terms, space, objective (its problem: the first asked)
    std::vector<SweepPoint> points;   // in the order asked
    int reference = -1;               // index of the reference point, -1 when none has a plan
    // Indices of the points whose best plans are not dominated in (time to train, cost to
    // train), by time; a point without a price counts as cost 0.
    std::vector<int> pareto_time_cost;
    double seconds = 0;
    bool cancelled = false;
};

// The best plans of the base request's problem at each node count (its cluster.nodes is
// replaced), each searched with the request's terms, space, objective and top_k.
SweepResult sweepNodes(const PlanRequest& base, const std::vector<int>& nodes, const SearchControl& control = {});
// The best plans of each problem (typically one per node type) under the base request's
// terms, space and objective; scaling efficiency relative to the first problem with a plan.
SweepResult compareProblems(const PlanRequest& base, const std::vector<Problem>& problems,
                            const SearchControl& control = {});

// The same with the default terms and the options' objective and top_k.
SweepResult sweepNodes(const Problem& base, const std::vector<int>& nodes, const SearchSpace& space,
                       const SearchOptions& options = {});

// The best plans of each problem (typically one per node type); scaling efficiency is
// relative to the first problem with a plan, per device.
SweepResult compareProblems(const std::vector<Problem>& problems, const SearchSpace& space,
                            const SearchOptions& options = {});

// "1,2,4,8" or "1..512" (powers of two times the start, up to the end); errors name `path`.
std::vector<int> parseNodeCounts(const std::string& text, const std::string& path, FieldErrors& errors);

} // namespace shardscope
