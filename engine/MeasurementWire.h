// What one process of an MPI run knows about its devices, as bytes for the others
// (Communicator::allGatherBytes), so that every rank assembles the same Measurement.
// Internal to runClusterTraining (ClusterTrainer.cpp).
#pragma once

#include "Trainer.h"

#include <cstdint>
#include <vector>

namespace shardscope::engine {

struct DeviceReport {
    DeviceMeasurement device;  // its profile is not sent: every device of a run has the same
    std::vector<double> loss, grad_norm;              // the step loop's, the same on every device
    std::vector<double> mtp_loss;                     // (multi-token prediction; else empty)
    std::vector<std::int64_t> tokens_per_expert;      // MoE: the copies its experts computed
    std::int64_t dropped_copies = 0;
};

void appendDeviceReport(std::vector<char>& out, const DeviceReport& r);
// Every report in `in`, each given `profile`; throws std::runtime_error on truncated bytes.
std::vector<DeviceReport> readDeviceReports(const std::vector<char>& in, const DeviceProfile& profile);

} // namespace shardscope::engine
