// HostProfile: this machine measured as an emulated device — sustained fp32 GEMM
// rate, memory bandwidth, per-kernel overhead — with what identifies the machine
// and the measurement, so that it is measured once, kept in the run store, and
// measured again when the machine, the thread count or the engine's kernels change.
// A plain value here; the engine measures it (engine/Device.h, measureHostProfile; the
// record: engine/HostMeasurement.h), the run store keeps it (store/RunStore.h).
#pragma once

#include <string>

namespace shardscope {

struct HostProfile {
    std::string host_id;               // machine id + CPU model: a different host never reuses it
    std::string cpu;                   // "AMD EPYC 9R14 ..." for people
    int threads = 1;                   // kernel threads the figures were measured with
    double gemm_flops_fp32 = 0;        // sustained FLOP/s
    double memory_bytes_per_second = 0;
    double kernel_overhead_s = 0;
    double memory_bytes = 0;           // physical RAM
    std::string measured_at;           // ISO 8601, UTC
    int engine_version = 1;            // bumped when the kernels change: old figures are stale

    bool operator==(const HostProfile&) const = default;
};

} // namespace shardscope
