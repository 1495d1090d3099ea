#include "EngineFit.h"
#include "Calibration.h"
#include "EmulatedHardware.h"

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>

namespace shardscope {

namespace {

double measured(const ValidationResult& r, const char* metric)
{
    const MetricComparison* m = r.metric(metric);
    return m ? m->measured : 0;
}

double predictedStep(const ValidationResult& r, const ValidationProfile& base)
{
    const engine::TrainRequest& req = r.c.request;
    // (MoE: at the routing load the steps waited for, where the run measured it.)
    const CostModel model(r.problemAtStepLoad(),
                          engineCostModelParams(r.c.profile, req.links, req.bucket_bytes, base.terms));
    return model.evaluate(r.c.request.layout).step_time_s;
}

double predictedWall(const ValidationResult& r, const ValidationProfile& base)
{
    return estimateWallClock(r.c.request, r.c.request.layout, r.c.host, base).wall_s;
}

template <class Predict>
FitErrors errorsOf(const std::vector<const ValidationResult*>& cases, const char* metric, Predict predict)
{
    std::vector<double> errors;
    FitErrors e;
    for (const ValidationResult* r : cases) {
        e.rel_errors.push_back(predict(*r) / measured(*r, metric) - 1);
        errors.push_back(std::fabs(e.rel_errors.back()));
    }
    e.cases = int(errors.size());
    if (!errors.empty()) {
        e.median = medianOf(errors);
        e.worst = *std::max_element(errors.begin(), errors.end());
    }
    return e;
}

} // namespace

EmulationWallTerms fitWallTerms(const std::vector<const ValidationResult*>& cases, const ValidationProfile& base)
{
    // Rows: features / measured . terms = 1 (relative errors).
    constexpr int kTerms = 3;
    Eigen::MatrixXd a(Eigen::Index(cases.size()), kTerms);
    Eigen::VectorXd b = Eigen::VectorXd::Ones(Eigen::Index(cases.size()));
    for (size_t i = 0; i < cases.size(); ++i) {
        const ValidationResult& r = *cases[i];
        const std::array<double, 3> f = estimateWallClock(r.c.request, r.c.request.layout, r.c.host, base).features();
        const double m = measured(r, "wall_step_time_s");
        for (int t = 0; t < kTerms; ++t)
            a(Eigen::Index(i), t) = f[size_t(t)] / m;
    }
    // Non-negative least squares by elimination: a term that comes out negative is one the
    // cases do not support; drop it and solve again. Rows are weighted (see below).
    auto solve = [&](const Eigen::VectorXd& w) {
        std::array<bool, kTerms> active{true, true, true};
        Eigen::VectorXd x = Eigen::VectorXd::Zero(kTerms);
        for (int round = 0; round < kTerms; ++round) {
            std::vector<Eigen::Index> columns;
            for (int t = 0; t < kTerms; ++t)
                if (active[size_t(t)] && a.col(t).norm() > 0)
                    columns.push_back(t);
            if (columns.empty() || Eigen::Index(columns.size()) > a.rows())
                break;
            const Eigen::MatrixXd sub = w.asDiagonal() * a(Eigen::all, columns);
            const Eigen::VectorXd solution = sub.colPivHouseholderQr().solve(w.asDiagonal() * b);
            x.setZero();
            bool negative = false;
            for (size_t k = 0; k < columns.size(); ++k) {
                x(columns[k]) = solution(Eigen::Index(k));
                if (solution(Eigen::Index(k)) < 0) {
                    active[size_t(columns[k])] = false;
                    negative = true;
                }
            }
            if (!negative)
                break;
            x.setZero();
        }
        return x;
    };
    // Least absolute relative error, by iteratively reweighted least squares: a case the shared
    // host happened to slow down in this run pulls the terms less than it would by its square.
    Eigen::VectorXd weights = Eigen::VectorXd::Ones(a.rows());
    Eigen::VectorXd x = solve(weights);
    for (int iteration = 0; iteration < 20; ++iteration) {
        const Eigen::VectorXd residual = a * x - b;
        for (Eigen::Index i = 0; i < a.rows(); ++i)
            weights(i) = 1.0 / std::sqrt(std::max(std::fabs(residual(i)), 1e-3));
        x = solve(weights);
    }
    EmulationWallTerms t;
    if (x(0) > 0)
        t.compute_factor = x(0);
    t.sync_s = std::max(0.0, x(1));
    t.hidden_sync_s = std::max(0.0, x(2));
    return t;
}

EngineFit fitOnEngine(const std::vector<ValidationResult>& results, const ValidationProfile& start, double holdout)
{
    EngineFit out;
    std::vector<const ValidationResult*> fit, held, wallFit, wallHeld;
    const int every = holdout > 0 ? std::max(2, int(std::lround(1.0 / holdout))) : 0;
    int i = 0;
    for (const ValidationResult& r : results) {
        if (!r.error.empty() || measured(r, "device_step_time_s") <= 0)
            continue;
        const bool hold = every > 0 && i % every == every - 1;
        (hold ? held : fit).push_back(&r);
        (hold ? out.holdout_cases : out.fit_cases).push_back(r.c.name);
        if (wallClockComparable(r.c) && measured(r, "wall_step_time_s") > 0) {
            (hold ? wallHeld : wallFit).push_back(&r);
            (hold ? out.wall.holdout_cases : out.wall.fit_cases).push_back(r.c.name);
        }
        ++i;
    }
    auto residuals = [&](const CostModelParams& p) {
        std::vector<double> r;
        for (const ValidationResult* v : fit)
            r.push_back(std::log(predictedStep(*v, ValidationProfile(p, start.wall)) / measured(*v, "device_step_time_s")));
        return r;
    };
    auto deviceErrors = [](const std::vector<const ValidationResult*>& cases, const ValidationProfile& p) {
        return errorsOf(cases, "device_step_time_s", [&](const ValidationResult& r) { return predictedStep(r, p); });
    };
    auto wallErrors = [](const std::vector<const ValidationResult*>& cases, const ValidationProfile& p) {
        return errorsOf(cases, "wall_step_time_s", [&](const ValidationResult& r) { return predictedWall(r, p); });
    };
    out.fit_before = deviceErrors(fit, start).median;
    const FitErrors heldBefore = deviceErrors(held, start);
    out.wall.fit_before = wallErrors(wallFit, start);
    out.wall.holdout_before = wallErrors(wallHeld, start);

    out.profile = start;
    if (!fit.empty())
        out.profile.terms = fitTerms(residuals, start.terms, {FitTerm::ElementwiseFactor}, "");
    out.profile.terms.name = "engine-fitted";
    // The host prices the device work with the fitted device terms; then the emulation's own.
    if (!wallFit.empty())
        out.profile.wall = fitWallTerms(wallFit, out.profile);

    out.fit_after = deviceErrors(fit, out.profile).median;
    const FitErrors heldAfter = deviceErrors(held, out.profile);
    out.holdout_before = heldBefore.median;
    out.holdout_worst_before = heldBefore.worst;
    out.holdout_after = heldAfter.median;
    out.holdout_worst_after = heldAfter.worst;
    out.holdout_errors_before = heldBefore.rel_errors;
    out.holdout_errors_after = heldAfter.rel_errors;
    out.wall.fit_after = wallErrors(wallFit, out.profile);
    out.wall.holdout_after = wallErrors(wallHeld, out.profile);
    return out;
}

} // namespace shardscope
