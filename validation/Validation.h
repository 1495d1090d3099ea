// Validation: a planner prediction against an engine measurement of the same case,
// metric by metric. A case is an engine training request (model, batch, layout,
// precision, recomputation, links) on a device profile; the planner prices the same
// problem with the same CostModel it uses for full-size plans, on the emulated
// hardware (EmulatedHardware.h).
//
// Metrics (per step, per device where the planner predicts one device):
//   weights_bytes gradients_bytes optimizer_bytes activations_bytes   the most loaded device
//   flops                                                             all devices, per step
//   comm_bytes                                                        sent by the busiest device
//   device_step_time_s                                                the slowest device
//   wall_step_time_s    the slowest device, median over steps (WallClockModel.h; only with a known host)
#pragma once

#include "CostModel.h"
#include "Trainer.h"
#include "WallClockModel.h"

#include <QJsonObject>

#include <atomic>
#include <string>
#include <vector>

namespace shardscope {

struct ValidationCase {
    std::string name;
    engine::TrainRequest request;
    engine::DeviceProfile profile;
    EmulationHost host;  // the machine running the engine; unknown: no wall-clock prediction
    // > 0: steps enough for every metric but the wall clock; runValidation runs no more than
    // these where the wall clock is not compared (wallClockComparable). 0: request.steps always.
    int exact_steps = 0;
};

struct MetricComparison {
    std::string metric;
    double predicted = 0;
    double measured = 0;
    double rel_error = 0;    // predicted / measured - 1 (0 when both are 0)
    int worst_device = -1;   // the device measured for the comparison
    // False: a measurement without a prediction to compare (predicted and rel_error NaN): the
    // host wall clock of an emulation whose device threads outnumber the cores is what the
    // emulation took, not a prediction error.
    bool compared = true;
};

struct ValidationResult {
    ValidationCase c;
    Problem problem;
    Prediction prediction;
    std::vector<Term> terms;  // the prediction's named terms (CostModel::explain)
    WallClockEstimate wall;   // the host wall-clock prediction, when the host is known
    engine::Measurement measurement;
    std::vector<MetricComparison> metrics;
    std::string error;       // why the case could not be compared (engine error, unsupported precision)
    std::string cost_model;  // the name of the cost-model terms that priced it
    // MoE with expert parallelism: the busiest device's measured load (its MoE layers' token copies
    // in one micro-batch over the balanced count), next to the planner's stated factor
    // (problem.training.moe_imbalance); 0 when the case has none.
    double moe_measured_load = 0;
    // MoE with expert parallelism: the load its steps waited for, the most of any device's ep group
    // (engine::DeviceMeasurement::moe_step_load: the busiest ep rank's copies over the mean, over the
    // run's layer calls); device_step_time_s_at_measured_load prices it. 0 when the case has none.
    double moe_step_load = 0;
    // The problem as priced at the measured step load (the stated imbalance where none was measured).
    Problem problemAtStepLoad() const;
    const MetricComparison* metric(const std::string& name) const;
};

// Whether the case's host wall clock is compared with a prediction: the host's profile is known
// and it has a core for every device's worker thread (more threads measure the oversubscribed
// host, not the model).
bool wallClockComparable(const ValidationCase& c);

// The metric names, in report order (the contract).
const std::vector<std::string>& validationMetrics();
// The first eight, one column each in the suite's table (the others are in its summary).
const std::vector<std::string>& validationTableMetrics();

// Runs the engine and the planner on one case. `cancel` stops the engine run.
// `onStep` is called after every training step (on a worker thread).
// The suite's emulated device unless the user names another (validate --suite, calibrate
// --engine, the GUI's calibration): Trainium scaled down so that the suite's small models feel
// the memory pressure of real plans.
inline constexpr const char* kSuiteChip = "trainium1";
inline constexpr double kSuiteChipScale = 1e-3;

ValidationResult runValidation(const ValidationCase& c, const ValidationProfile& base = ValidationProfile(),
                               const std::atomic<bool>* cancel = nullptr, const engine::StepCallback& onStep = {});

// The built-in suite: every parallel dimension, ZeRO stage, recomputation mode and schedule.
// `steps` per case: enough for a steady median wall time on a shared host (a step takes
// milliseconds; a busy neighbour slows the host for longer than that).
inline constexpr int kSuiteSteps = 60;
std::vector<ValidationCase> validationSuite(const engine::DeviceProfile& profile, int steps = kSuiteSteps);

// Steps that measure every metric but the wall clock of a suite case without routed experts
// or a pipeline: there bytes, FLOPs, communication and the emulated device time are the same
// in every step (measured: 3 steps against 60 agree to 4e-13, the rounding of a mean); only the
// wall clock's median needs kSuiteSteps on a shared host. Where such a case's wall clock is not
// compared (more device threads than cores) it runs these and no more (ValidationCase::exact_steps).
inline constexpr int kSuiteExactSteps = 3;

// "shardscope.validation/1": cases with their metrics and, per metric, the median and worst error.
QJsonObject validationDocument(const std::vector<ValidationResult>& results);

struct MetricSummary {
    double median_rel_error = 0;  // of |rel_error|
    double worst_rel_error = 0;
    int cases = 0;
};
double medianOf(std::vector<double> values);  // 0 for none

// Which term of the model a known difference comes from, for a metric of a case that is not
// exact; empty when none is known (then the difference is unexplained: report it as such).
std::string explainDifference(const ValidationResult& result, const std::string& metric);

MetricSummary summarizeMetric(const std::vector<ValidationResult>& results, const std::string& metric);

} // namespace shardscope
