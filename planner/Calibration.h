// Calibration against published training runs (resources/planner/calibration-cases.json,
// transcribed from calibration-cases.md): predict each run's published metric with
// the cost model, report the errors, and fit the cost model's efficiency terms by
// least squares on log errors (Levenberg-Marquardt, Eigen).
#pragma once

#include "CostModelParams.h"
#include "FrameworkExport.h"
#include "Layout.h"
#include "Prediction.h"
#include "Problem.h"
#include "SpecLookup.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct CalibrationCase {
    std::string id;
    std::string source;
    std::string metric;     // "tflops_per_device" (Megatron's eq. 3 FLOPs), "model_tflops_per_device"
                            // (no recomputation, as Megatron-Core logs it) or "sequences_per_s"
    std::string family;     // the chip family the run measured ("a100", "h100", "trainium1"): errors are reported per family
    double measured = 0;
    Problem problem;
    Layout layout;
    // How the row's framework ran its collectives where that differs from the cost model's
    // default (NCCL's rings over every NIC of a node): "implementation" in the case's JSON, with
    // the reason in its "why". The fit keeps the row's own setting.
    std::optional<bool> multi_nic_rings, overlap_grad_reduce;
    std::optional<double> dp_overlap;
    // The framework the row ran ("framework" in its implementation block): its element-wise kernels
    // priced by their passes (ElementwisePasses.h); unset, the fused kernels the terms were fitted on.
    std::optional<ExportFormat> framework;
    std::string implementation_why;
    // Micro-batch sizes the row's source does not state ("tuned" in its JSON, with the reason in
    // its "why"): the row is predicted at the fastest of them that divides its batch and fits, as a
    // tuned benchmark ran; empty: the layout's own mb.
    std::vector<int> tuned_micro_batches;
    std::string tuned_why;
    // Why the shipped terms were fitted without this row ("left_out_of_fit" in its JSON; empty: in
    // the fit). calibrate --fit leaves it out too, so that it reproduces the shipped terms.
    std::string left_out_of_fit;
    // The cost model's terms with the row's own implementation settings.
    CostModelParams ownTerms(const CostModelParams& params) const;
    // The layout the row is predicted with under `params`: its own, or with the fastest of its
    // tuned micro-batch sizes; with its prediction, and whether a tuned size was taken (false when
    // none divides the batch and validates: the row's own mb).
    struct Predicted;
    Predicted predicted(const CostModelParams& params) const;
    Layout predictedLayout(const CostModelParams& params) const;
};

struct CalibrationCase::Predicted {
    Layout layout;
    Prediction prediction;
    bool tuned = false;
};

struct CaseResult {
    std::string id;
    std::string family;
    double measured = 0;
    double predicted = 0;
    double relative_error = 0;  // predicted / measured - 1
    bool feasible = true;
    int micro_batch = 1;        // the micro-batch it was predicted at
    bool micro_batch_tuned = false;  // chosen by the model among the row's "tuned" sizes
};

// Reads a "shardscope.calibration-cases/1" document; node types by name from `specs`.
std::vector<CalibrationCase> calibrationCasesFromJson(const QJsonObject& json, const SpecLookup& specs,
                                                      FieldErrors& errors);
// The built-in cases (compiled in), on the built-in node types (core/BuiltinSpecs.h).
std::vector<CalibrationCase> builtinCalibrationCases();

double predictMetric(const CalibrationCase& c, const CostModelParams& params, bool* feasible = nullptr);
std::vector<CaseResult> evaluateCases(const std::vector<CalibrationCase>& cases, const CostModelParams& params);

struct ErrorSummary {
    double median_abs = 0;   // median |relative error|
    double worst_abs = 0;
    double rms_log = 0;      // root mean square of log(predicted / measured)
};
ErrorSummary summarize(const std::vector<CaseResult>& results);
// The same per chip family, in the order the families first appear.
std::vector<std::pair<std::string, ErrorSummary>> summarizeByFamily(const std::vector<CaseResult>& results);
// A chip's family: its catalog name up to the first '-' ("a100-80gb" -> "a100", "h100-sxm" -> "h100").
std::string chipFamily(const struct ChipSpec& chip);

// The terms a fit may move.
enum class FitTerm {
    VendorMatmulEfficiency, SustainedMatmulFraction, MatmulHalfDim, ElementwiseFactor, DpOverlap, InterNodeEfficiency,
    IntraLinkEfficiency, GroupedGemmEfficiency, MoeLayerOverhead, KernelOverhead, StepOverhead
};
const char* toString(FitTerm term);

struct FitResult {
    CostModelParams params;
    ErrorSummary before, after;
    int iterations = 0;
};

// Levenberg-Marquardt over `terms` minimising |residuals(params)|^2 (any residuals: the
// published runs below, or engine measurements). Terms move in unconstrained coordinates
// (fractions through a logistic, positive values through exp).
CostModelParams fitTerms(const std::function<std::vector<double>(const CostModelParams&)>& residuals,
                         const CostModelParams& start, const std::vector<FitTerm>& terms, const std::string& vendor,
                         int* iterations = nullptr);

// Levenberg-Marquardt on r_i = log(predicted_i / measured_i). `vendor` names the
// vendor whose matmul efficiency is fitted (its chips have no published measurement).
FitResult fitCostModel(const std::vector<CalibrationCase>& cases, const CostModelParams& start,
                       const std::vector<FitTerm>& terms, const std::string& vendor = "AWS");

} // namespace shardscope
