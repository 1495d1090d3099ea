// The planner's search: every legal layout of a problem within a SearchSpace,
// priced by the CostModel, ranked by an objective, with the Pareto fronts.
//
//   enumerate  the mesh shapes dp x tp x pp x cp of the device count that satisfy
//              the model's rules, then per shape every sp, mb, schedule and v,
//              recomputation, ZeRO stage and group, offload (SearchSpace.h lists the
//              domain); only legal factors are generated, and each candidate passes
//              validate(layout, model, cluster, training) before it is priced, so the
//              search and `predict` agree on what is legal
//   prune      by a memory lower bound (model states of the transformer layers
//              alone plus the reserve) before pricing: a layout whose bound
//              exceeds the memory limit is infeasible without being evaluated;
//              and by a step-time lower bound (StepTimeBound.h, branch and bound):
//              a layout is skipped when its worker's top plans and infeasible plans
//              are full of better ones and both of its fronts hold a point that
//              dominates (time bound, memory bound), or when it cannot fit and the
//              infeasible plans are full of better ones (the time bound with the
//              collectives, the memory bound with the activations: StepTimeBound.h;
//              a whole micro-batch size or group of ZeRO siblings at once when none
//              of them can rank). The ZeRO configurations are
//              searched innermost: they change only the data-parallel, optimizer and
//              offload terms, so the first one priced bounds its siblings' step time
//              (the other terms) and memory (its activations and buffers). Workers' results only merge
//              (a union of heaps cut to the best, a union of fronts), so a layout
//              that could not enter its worker's cannot enter the merged one: the
//              results are exact. The mesh shapes are searched in the order of
//              their bound, likely-good first, so that the heaps fill early.
//   evaluate   CostModel::evaluate on a thread pool; the mesh shapes are the work
//              items, handed out one at a time; each worker keeps its own top-k and
//              fronts, merged at the end
//   rank       by the objective, ties by memory per device, then by the layout's
//              fields in canonical order: a total order, so the result is the same
//              for any thread count and equals an exhaustive evaluation
//
// Infeasible layouts are counted by reason. Rules broken by a whole mesh shape
// ("mesh: tp does not divide heads") count mesh shapes; every other reason
// counts layouts. Infeasibility is a value here, never an exception.
#pragma once

#include "CostModel.h"
#include "Layout.h"
#include "Pareto.h"
#include "PlanRequest.h"
#include "Prediction.h"
#include "Problem.h"
#include "SearchSpace.h"
#include "StepTimeBound.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace shardscope {

struct Plan {
    Layout layout;
    Prediction prediction;
    std::string infeasible;  // why the plan cannot run (out of memory, over the limit); empty when it can
    // Layouts the cost model cannot tell apart from this one (the same step time, memory per
    // device and objective): dp/cp permutations, GPipe vs 1F1B at pp = 1. One choice, one row.
    std::vector<Layout> variants;
};

// Canonical order of layouts (dp, tp, pp, cp, sp, zero, zero_group, mb, schedule as
// 1f1b < gpipe < interleaved, v, recompute, offload): the last tie-breaker of every ranking.
bool layoutLess(const Layout& a, const Layout& b);
// Objective, then memory per device, then layoutLess: true when `a` ranks before `b`.
bool planBetter(Objective objective, const Plan& a, const Plan& b);
// Whether two priced plans cost the same in every figure the search ranks by (relative 1e-9).
bool samePlanCost(Objective objective, const Plan& a, const Plan& b);
// Plans ranked best first, with each run of plans of the same cost folded into its best-ranked
// one (the rest become its variants, at most kMaxVariants kept); at most `top_k` plans.
inline constexpr int kMaxVariants = 16;
std::vector<Plan> collapseVariants(const std::vector<Plan>& ranked, int top_k, Objective objective);

struct SearchProgress {
    std::int64_t done = 0;       // mesh shapes searched
    std::int64_t total = 0;      // mesh shapes to search
    std::int64_t evaluated = 0;  // cost-model evaluations so far
    double elapsed_s = 0;
    double remaining_s = 0;      // estimate from the shapes done so far
};

struct SearchOptions {
    Objective objective = Objective::Throughput;
    int top_k = 10;
    int threads = 0;  // 0: one per hardware thread
    // Set from any thread to stop the search; the partial result is returned promptly
    // with stats.cancelled set.
    const std::atomic<bool>* cancel = nullptr;
    // Called on the thread that called search(), about every 50 ms and once at the end.
    std::function<void(const SearchProgress&)> progress;
    // Only layouts this framework's exporter takes (PlanRequest::framework).
    std::optional<ExportFormat> framework;
    // Skip layouts whose step-time lower bound (StepTimeBound.h) proves they cannot enter the
    // top plans, the infeasible ones or either front: the results are those of an exhaustive
    // evaluation either way; only the counts of evaluated, feasible and infeasible layouts differ.
    bool prune_by_time = true;
};

// How a search runs, apart from what it is asked (PlanRequest).
struct SearchControl {
    int threads = 0;  // 0: one per hardware thread
    const std::atomic<bool>* cancel = nullptr;
    std::function<void(const SearchProgress&)> progress;
};

struct SearchStats {
    std::int64_t mesh_shapes = 0;  // factorisations dp x tp x pp x cp inside the space's bounds
    std::int64_t candidates = 0;   // legal layouts in the space = evaluated + pruned
    std::int64_t evaluated = 0;    // priced by the cost model
    std::int64_t pruned = 0;       // rejected without pricing: the memory lower bound, optimizer
                                   // offload on a node type whose host link is not published, or
                                   // the step-time bound (pruned_by_time)
    std::int64_t pruned_by_time = 0;  // of them, by the step-time bound: they could not rank (neither
                                      // feasible nor infeasible: not counted under a reason)
    std::int64_t feasible = 0;     // evaluated, fit in memory, finite prediction (a layout pruned by
                                   // time is not evaluated, so not counted here, feasible or not)
    std::map<std::string, std::int64_t> infeasible_by_reason;
    double seconds = 0;
    int threads = 1;
    bool cancelled = false;

    double evaluationsPerSecond() const { return seconds > 0 ? double(evaluated) / seconds : 0.0; }
};

// Reasons (keys of infeasible_by_reason).
inline constexpr const char* kReasonOutOfMemory = "out of memory";
inline constexpr const char* kReasonOverLimit = "over the memory limit";
inline constexpr const char* kReasonNoFinitePrediction = "no finite prediction";
inline constexpr const char* kReasonCpNeedsFusedAttention =
    "mesh: cp > 1 runs on fused attention only (the problem trains unfused attention: --flash-attention)";

struct PlanLess {
    bool operator()(const Plan& a, const Plan& b) const { return layoutLess(a.layout, b.layout); }
};
using PlanFront = ParetoFront<Plan, PlanLess>;

struct SearchResult {
    PlanRequest request;            // what was searched: problem, terms, space, objective, top_k
    Objective objective = Objective::Throughput;
    std::vector<Plan> top;          // best first; empty when nothing is feasible
    // The best layouts (by the objective) that were priced but do not fit: what the user
    // would get with more memory. Pruned layouts have no prediction and are not here.
    std::vector<Plan> top_infeasible;
    PlanFront pareto_step_memory;   // x: step time (s), y: memory per device (bytes)
    PlanFront pareto_time_cost;     // x: time to train (s), y: cost to train (USD)
    SearchStats stats;
    std::string error;              // set when the search could not run (e.g. cost without a price)

    const Plan* best() const { return top.empty() ? nullptr : &top.front(); }
};

// Memory lower bound per device for a layout (only dp, tp, pp, cp, zero, zero_group and
// offload matter): model states of the transformer layers alone, plus the reserve.
// Never above CostModel::evaluate()'s memory_bytes.total().
double memoryLowerBound(const CostModel& model, const Layout& layout);
// A stronger one the step-time pruning uses (the memory pruning above decides what is priced, so
// it stays as it is): on each stage the memory figure compares, the states of its layers by kind
// (dense and MoE) with the activations StepTimeBound::activationBytes() bounds, plus the reserve.
double stageMemoryLowerBound(const CostModel& model, const StepTimeBound& bound, const Layout& layout);

SearchResult search(const CostModel& model, const SearchSpace& space, const SearchOptions& options = {});
SearchResult search(const Problem& problem, const SearchSpace& space, const SearchOptions& options = {});
// The request's problem, terms, space, objective and top_k.
SearchResult search(const PlanRequest& request, const SearchControl& control = {});

// Why an objective cannot rank a problem's layouts (cost without a published price), or empty.
std::string objectiveProblem(Objective objective, const Problem& problem);

} // namespace shardscope
