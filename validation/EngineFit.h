// Fitting the cost model's terms to engine measurements, with a held-out share of the
// cases to report the gain honestly:
// - device clock: the element-wise traffic factor (Levenberg-Marquardt on log errors);
// - host wall clock: the emulation's terms (WallClockModel.h), by least absolute relative
//   error (iteratively reweighted least squares; the model is linear in its terms), on the
//   cases whose host is known.
#pragma once

#include "Validation.h"

#include <string>
#include <vector>

namespace shardscope {

struct FitErrors {       // |predicted / measured - 1| over a set of cases
    double median = 0;
    double worst = 0;
    int cases = 0;
    std::vector<double> rel_errors;  // predicted / measured - 1, per case in order
};

struct ClockFit {        // one clock's errors before and after the fit
    std::vector<std::string> fit_cases, holdout_cases;
    FitErrors fit_before, fit_after, holdout_before, holdout_after;
};

struct EngineFit {
    ValidationProfile profile;                // the fitted terms: device (element-wise) and host wall clock
    std::vector<std::string> fit_cases, holdout_cases;
    double fit_before = 0, fit_after = 0;     // median |error| of device step time on the fit cases
    double holdout_before = 0, holdout_after = 0;
    double holdout_worst_before = 0, holdout_worst_after = 0;
    std::vector<double> holdout_errors_before, holdout_errors_after;  // predicted / measured - 1, per held-out case
    ClockFit wall;                            // host wall clock (cases with a known host only)
};

// Every k-th case is held out (k = round(1 / holdout)); the same cases for both clocks.
EngineFit fitOnEngine(const std::vector<ValidationResult>& results, const ValidationProfile& start, double holdout);

// The emulation's wall-clock terms that minimise the absolute relative error on `cases` (each
// coefficient >= 0; a term the cases do not support stays 0). `base` prices the host.
EmulationWallTerms fitWallTerms(const std::vector<const ValidationResult*>& cases, const ValidationProfile& base);

} // namespace shardscope
