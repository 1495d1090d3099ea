// Plan, sweep and comparison documents:
//   "shardscope.plan/1"    {"schema","problem","objective","cost_model","best":{"layout","layout_text",
//                           "prediction"}|null,"alternatives":[...],"pareto":[...],"pareto_time_cost":[...],
//                           "search":{"evaluated","pruned","infeasible_by_reason",{...},"seconds",...}}
//   "shardscope.sweep/1"   {"schema","problem","objective","points":[{"nodes","devices","best",
//                           "scaling_efficiency","search"|"error"}],"pareto_time_cost":[nodes...],"seconds"}
//   "shardscope.compare/1" {"schema","model","training","objective","entries":[{"node_type","nodes",
//                           "devices","best","time_to_train_s","cost_to_train_usd","search"|"error"}],"seconds"}
// "pareto" is the (step time, memory per device) front. Predictions are "shardscope.prediction/1".
// A plan document is read back for its problem and layouts; predictions are recomputed.
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

QJsonObject planDocument(const Problem& problem, const SearchResult& result, const std::string& costModelName);
QJsonObject sweepDocument(const Problem& base, const SweepResult& sweep, Objective objective);
QJsonObject compareDocument(const SweepResult& comparison, Objective objective);

struct PlanDocument {
    Problem problem;
    Objective objective = Objective::Throughput;
    std::optional<Layout> best;        // absent when the search found nothing feasible
    std::vector<Layout> alternatives;
};

// Reads a "shardscope.plan/1" document; every problem is reported with its field path.
std::optional<PlanDocument> planDocumentFromJson(const QJsonObject& json, const std::string& path,
                                                 FieldErrors& errors);

} // namespace shardscope
