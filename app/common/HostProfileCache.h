// The host profile, measured once per machine and thread count and kept in the run store:
// a later run reuses it, a new machine, thread count or engine kernel version measures
// again, and the user can ask for a fresh measurement.
//
// This policy lives in the app, not in the engine or the store: the engine measures and
// must not know where figures are kept, and the store keeps records and must not pull in
// the engine (its kernels and -march=native build) to decide when one is stale. Only the
// app, which uses both, decides when to measure.
#pragma once

#include "Device.h"
#include "RunStore.h"

#include <optional>
#include <string>

namespace shardscope {

struct CachedHostProfile {
    engine::DeviceProfile profile;
    bool measured_now = false;  // false: read from the run store
    std::string measured_at;
};

// Reads the stored profile of this host at `threads`, or measures and stores it when it is
// missing, stale (another engine kernel version) or `remeasure` is set.
CachedHostProfile cachedHostProfile(RunStore& runs, int threads, bool remeasure = false);

// The stored, current profile of this host at `threads`, without measuring (e.g. on a GUI
// thread, which must not spend the measurement's fraction of a second).
std::optional<CachedHostProfile> storedHostProfile(const RunStore& runs, int threads);

} // namespace shardscope
