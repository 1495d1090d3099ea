// The default problem (GPT-3 175B on 64 trn1.32xlarge) and a plain-text
// overview of any problem, computed from the catalog, never typed in.
#pragma once

#include "SpecLookup.h"
#include "Problem.h"

#include <string>

namespace shardscope {

Problem defaultProblem(const SpecLookup& specs);
std::string problemOverview(const Problem& problem);

} // namespace shardscope
