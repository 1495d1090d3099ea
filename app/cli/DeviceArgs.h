// "--device NAME[:scale]": a catalog chip's device profile, scaled down (capacity, FLOP/s
// and bandwidth multiplied by scale in (0, 1]) so that a small model feels the pressure a
// large one feels on the real chip. Shared by validate and calibrate --engine.
#pragma once

#include "SpecLookup.h"
#include "Device.h"

#include <string>

namespace shardscope::cli {

// Throws UsageError for a malformed scale, InputError (with near matches) for an unknown chip.
engine::DeviceProfile chipProfileFromArg(const std::string& text, const SpecLookup& specs, double defaultScale);

} // namespace shardscope::cli
