// The "calibrate on the engine" use case, shared by `shardscope-cli calibrate --engine` and the
// GUI's "Calibrate on this machine": the validation suite trained on the engine case by case
// (progress, cancel), then the cost model's terms fitted to it with a held-out share.
// Storing the fitted profile is the caller's (the app's store); this knows no database.
#pragma once

#include "EngineFit.h"
#include "Validation.h"
#include "WallClockModel.h"

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

inline constexpr double kCalibrationHoldout = 0.3;

struct EngineCalibrationRequest {
    engine::DeviceProfile device;          // the emulated device of every case
    std::optional<EmulationHost> host;     // the machine running the engine; measured when absent
    double holdout = kCalibrationHoldout;  // share of the cases held out of the fit
    ValidationProfile start;
};

struct EngineCalibration {
    std::vector<ValidationResult> results;  // the cases trained (all of them unless cancelled)
    EmulationHost host;                     // the host they ran on
    bool complete = false;                  // every case ran and the terms were fitted
    EngineFit fit;                          // valid when complete
};

// Called before each case: cases done, cases in all, the next case's name.
using CalibrationProgress = std::function<void(int done, int total, const std::string& next)>;

EngineCalibration calibrateOnEngine(const EngineCalibrationRequest& request, const std::atomic<bool>* cancel = nullptr,
                                    const CalibrationProgress& progress = {});

// The name a fitted profile is saved under when the user gives none: "engine-<local time>".
std::string engineProfileName();

// "held-out device step time 34.6% -> 3.2%, wall 16.0% -> 7.3% (median)": the fit in a line.
std::string calibrationSummary(const EngineFit& fit);

} // namespace shardscope
