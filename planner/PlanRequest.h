// PlanRequest: everything a search was asked — the problem, the cost model's terms (the
// whole set, with the profile's name), the search space with the user's constraints, the
// objective and how many plans to keep. A search takes one, its result carries it, and
// every plan, sweep and comparison document writes it whole, so that whoever opens a plan
// (predict, export, report, validate, the GUI) prices it with exactly the terms and
// constraints it was made with, never with others and never by searching again.
//
// PricedPlan: one layout of a request priced by the request's terms, with the named terms
// behind every figure — the value snapshot the GUI pages and the report receive (they never
// build a CostModel themselves).
#pragma once

#include "CostModel.h"
#include "CostModelParams.h"
#include "FieldError.h"
#include "FrameworkExport.h"
#include "Layout.h"
#include "Prediction.h"
#include "Problem.h"
#include "SearchSpace.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct PlanRequest {
    Problem problem;
    CostModelParams cost_model = defaultCostModelParams();
    SearchSpace space;
    Objective objective = Objective::Throughput;
    int top_k = 10;
    // The framework the plans must run on: the search keeps only layouts its exporter takes,
    // so the top plan always exports, and the cost model prices the layers' element-wise work
    // with that framework's kernels (ElementwisePasses.h). Unset: any layout the cost model can
    // price, element-wise work at the fused kernels' passes.
    std::optional<ExportFormat> framework;

    bool operator==(const PlanRequest&) const = default;
};

struct PricedPlan {
    PlanRequest request;
    Layout layout;
    Prediction prediction;
    std::vector<Term> terms;  // CostModel::explain of the layout under the request's terms
};

// Prices `layout` (which must satisfy validate()) with the request's terms, terms included.
PricedPlan pricePlan(const PlanRequest& request, const Layout& layout);
// The same without the named terms (cheaper; for tables).
Prediction predictLayout(const PlanRequest& request, const Layout& layout);

// {"problem","cost_model":{"schema":"shardscope.costmodel/1",...},"space":{...},"objective","top_k",
//  "framework":"megatron"|null}
QJsonObject toJson(const PlanRequest& request);
std::optional<PlanRequest> planRequestFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);

// {"bounds":{"dp":[lo,hi|null],...},"zero_group","sequence_parallel","schedules","recompute","offload",
//  "max_memory_fraction","min_micro_batches","constraints":"--fix ... --max ..."}
// ("constraints" is for people and is not read back).
QJsonObject toJson(const SearchSpace& space);
SearchSpace searchSpaceFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);

} // namespace shardscope
