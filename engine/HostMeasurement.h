// This machine as the engine sees it: what identifies it (so that a stored measurement is
// never reused on another machine), the version of the engine's kernels (so that one made
// with older kernels is measured again), and the conversion between a measured DeviceProfile
// and the HostProfile record that is kept. The engine measures (Device.h, measureHostProfile);
// keeping and reusing the measurement is the app's (app/common/HostProfileCache.h).
#pragma once

#include "Device.h"
#include "HostProfile.h"

#include <string>

namespace shardscope::engine {

// Bumped when the kernels change enough that old host figures no longer describe them.
inline constexpr int kEngineKernelVersion = 1;

// "<machine id>/<cpu model>": /etc/machine-id (or the host name) and /proc/cpuinfo's model name.
std::string hostId();
std::string cpuModel();

// The record of a measurement of this host made with `threads` kernel threads at `measured_at`.
HostProfile hostProfileRecord(const DeviceProfile& measured, int threads, const std::string& measured_at);
// The device a stored record describes ("host", measured).
DeviceProfile deviceProfileOf(const HostProfile& record);

} // namespace shardscope::engine
