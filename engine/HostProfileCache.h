// The host profile, measured once per machine and thread count and kept in the
// catalog: a later run reuses it, a new machine, thread count or engine kernel
// version measures again, and the user can ask for a fresh measurement.
#pragma once

#include "Catalog.h"
#include "Device.h"

#include <optional>
#include <string>

namespace shardscope::engine {

// Bumped when the kernels change enough that old host figures no longer describe them.
inline constexpr int kEngineKernelVersion = 1;

// "<machine id>/<cpu model>": /etc/machine-id (or the host name) and /proc/cpuinfo's model name.
std::string hostId();
std::string cpuModel();

struct CachedHostProfile {
    DeviceProfile profile;
    bool measured_now = false;  // false: read from the catalog
    std::string measured_at;
};

// Reads the stored profile of this host at `threads`, or measures and stores it when it is
// missing, stale (another engine kernel version) or `remeasure` is set.
CachedHostProfile hostProfile(Catalog& catalog, int threads, bool remeasure = false);

// The stored, current profile of this host at `threads`, without measuring (e.g. on a GUI
// thread, which must not spend the measurement's fraction of a second).
std::optional<CachedHostProfile> storedHostProfile(Catalog& catalog, int threads);

} // namespace shardscope::engine
