// WallClockModel: how long an engine run takes on this host, in wall-clock seconds per step.
//
// The engine emulates N devices with N worker threads (one kernel thread each) that share
// the host's C cores. The device clock describes the emulated chip; the wall clock is the
// host doing that work. So the wall clock is priced by the same CostModel, on the host as
// the device (its measured single-thread GEMM rate and copy bandwidth; collectives are
// memory copies at that bandwidth), plus what the emulation itself costs:
//
//   wall = compute_factor x max(T_critical, (N / C) x T_busy)
//        + sync_s x exposed barriers + hidden_sync_s x hidden barriers
//
//   T_critical  the CostModel's step time on the host device (the slowest device's path);
//   T_busy      the same without the pipeline bubble (the time a worker needs a core):
//               N busy workers on C < N cores take N / C times as long;
//   barriers    collective calls plus their ring steps on the critical path: every member
//               of the group waits for the others at each, d T_critical / d (latency per
//               call and per step); the CostModel prices both linearly on the emulated
//               machine (nothing overlaps there). A barrier is hidden when the workers
//               outside its group can keep every core busy while its members wait
//               (N - group >= C): then its wake-up costs less;
//   compute_factor, sync_s, hidden_sync_s (EmulationWallTerms) are fitted on this host's runs
//               (calibrate --engine); before calibration the model is the host's roofline.
// The model is linear in its terms: they are fitted by least absolute relative error.
// Tried and left out, because this host's runs give it no weight (the fit drops it): a host
// cost per kernel (small kernels are not the emulation's overhead, its barriers are).
#pragma once

#include "CostModelParams.h"
#include "ValidationProfile.h"
#include "Device.h"
#include "Trainer.h"

#include <array>

namespace shardscope {

// The machine the engine runs on: the host profile measured with one kernel thread (what
// each emulated device gets) and the number of cores its workers share.
struct EmulationHost {
    engine::DeviceProfile profile;
    int cores = 0;  // 0: unknown; no wall-clock prediction is made
    bool known() const { return cores > 0 && profile.peak_flops_fp32 > 0 && profile.memory_bytes_per_second > 0; }
};

// `profile` (the host measured with one thread) on this machine's cores.
EmulationHost emulationHost(const engine::DeviceProfile& profile);

// The wall-clock prediction and the quantities it is made of.
struct WallClockEstimate {
    double critical_s = 0;        // T_critical
    double busy_s = 0;            // T_busy
    double oversubscription = 1;  // N / C, at least 1
    double barriers = 0;          // per step on the critical path
    double hidden_barriers = 0;   // ... of them whose wait the other workers fill (N - group >= cores)
    double compute_s = 0;         // max(T_critical, oversubscription x T_busy)
    double wall_s = 0;
    // The coefficients of compute_factor, sync_s and hidden_sync_s: wall_s is their dot product
    // with the terms.
    std::array<double, 3> features() const { return {compute_s, barriers - hidden_barriers, hidden_barriers}; }
};

WallClockEstimate estimateWallClock(const engine::TrainRequest& request, const Layout& priced,
                                    const EmulationHost& host, const ValidationProfile& base);

} // namespace shardscope
