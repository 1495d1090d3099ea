// Plan, sweep and comparison documents:
//   "shardscope.plan/2"    {"schema","request":{PlanRequest: "problem","cost_model" (every term, with its
//                           name),"space" (the constraints),"objective","top_k"},
//                           "problem","objective","cost_model" (the profile's name; as in plan/1),
//                           "best":{"layout","layout_text","prediction"}|null,"alternatives":[...],
//                           "pareto":[...],"pareto_time_cost":[...],"search":{"evaluated","pruned",...}}
//   "shardscope.sweep/1"   {"schema","request","problem","objective","points":[{"nodes","devices","best",
//                           "scaling_efficiency","search"|"error"}],"pareto_time_cost":[nodes...],"seconds"}
//   "shardscope.compare/1" {"schema","request","model","training","objective","entries":[{"node_type","nodes",
//                           "devices","best","time_to_train_s","cost_to_train_usd","search"|"error"}],"seconds"}
// "pareto" is the (step time, memory per device) front. Predictions are "shardscope.prediction/1".
// A plan document is read back for its request and its layouts; whoever opens it prices those
// layouts with the request's terms (savedResult), which gives the saved figures again exactly.
// "shardscope.plan/1" files (no "request") still open: priced with the default terms, without
// constraints, and PlanDocument::notes says so.
#pragma once

#include "FieldError.h"
#include "Search.h"
#include "Sweep.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

QJsonObject toJson(const Plan& plan);          // {"layout","layout_text","prediction"}
QJsonObject toJson(const SearchStats& stats);

// The result's request is written whole; the plans in the order of result.top (the first is "best").
QJsonObject planDocument(const SearchResult& result);
QJsonObject sweepDocument(const SweepResult& sweep);
QJsonObject compareDocument(const SweepResult& comparison);

struct PlanDocument {
    int version = 2;                   // the schema version read
    PlanRequest request;
    Problem problem;                   // request.problem
    Objective objective = Objective::Throughput;  // request.objective
    std::optional<Layout> best;        // absent when the search found nothing feasible
    std::vector<Layout> alternatives;
    // Per plan read (best first, then the alternatives; then the fronts' plans), the layouts of
    // the same cost folded into it.
    std::vector<std::vector<Layout>> variants;
    std::vector<Layout> pareto;        // the (step time, memory) front's layouts
    std::vector<Layout> pareto_time_cost;
    SearchStats stats;                 // as saved (counts, seconds, threads)
    std::vector<std::string> notes;    // what a reader should know (an old schema's defaults)
};

// Reads a "shardscope.plan/1" or "/2" document; every problem is reported with its field path.
std::optional<PlanDocument> planDocumentFromJson(const QJsonObject& json, const std::string& path,
                                                 FieldErrors& errors);

// The saved plans priced with the saved request's terms (no search): top = best then the
// alternatives, the fronts rebuilt from their saved layouts, the saved counts.
SearchResult savedResult(const PlanDocument& document);

} // namespace shardscope
