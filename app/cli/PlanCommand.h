// Shared by plan, sweep, compare, demo and predict --plan: plan tables, the
// breakdown of one plan, and reading a plan file ("shardscope.plan/1" or "/2").
#pragma once

#include "PlanJson.h"
#include "Search.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace shardscope::cli {

// One row per plan: layout keys, step time, tokens/s, MFU, memory per device, cost.
void printPlanTable(std::ostream& out, const std::vector<Plan>& plans, size_t rows);
// Step-time and memory breakdown of one plan, time and cost to train.
void printPlanBreakdown(std::ostream& out, const Problem& problem, const Plan& plan);
// Reads a plan file (its request and layouts); what the reader should know about it (an older
// schema's defaults) goes to `notes`. Throws InputError naming the file and field on any problem.
PlanDocument loadPlanFile(const std::string& path, std::ostream& notes);

} // namespace shardscope::cli
