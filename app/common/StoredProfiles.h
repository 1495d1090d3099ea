// Validation profiles by name from the catalog: a profile saved by `calibrate --engine --save`
// holds the planner's terms and the emulation's wall-clock terms in one document.
#pragma once

#include "ValidationProfile.h"

#include <string>

namespace shardscope {

class Catalog;

// "default" is the built-in terms with the uncalibrated wall clock. Throws InputError naming
// the profile (and the ones there are) when it is missing or invalid.
ValidationProfile validationProfileNamed(const Catalog& catalog, const std::string& name);

} // namespace shardscope
