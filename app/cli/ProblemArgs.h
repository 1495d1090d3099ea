// Building a Problem from the command line, shared by predict, plan, sweep and compare:
// --model NAME|FILE --node-type NAME --nodes N --global-batch B --seq S
// [--precision fp32|bf16|fp16|fp8] [--tokens T] [--flash-attention].
#pragma once

#include "SpecLookup.h"
#include "CliArgs.h"
#include "Layout.h"
#include "Problem.h"

#include <set>
#include <string>

namespace shardscope::cli {

// Its options are described once, with their help, in CommandHelp.cpp (problemOptions).

// Throws UsageError for a missing option, InputError for an invalid problem (every field named).
Problem problemFromArgs(const CliArgs& args, const SpecLookup& specs);

// A --layout string for a problem: keys left out take defaults, dp fills the devices.
// Throws InputError listing every broken rule at once.
Layout layoutFromArg(const std::string& text, const Problem& problem);

// A model by catalog name, or from a JSON file when the argument names one.
ModelSpec modelFromArg(const std::string& arg, const SpecLookup& specs);

} // namespace shardscope::cli
