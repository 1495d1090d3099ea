// shardscope-cli calibrate: the cost model against the published runs of
// calibration-cases.md, and (with --fit) a least-squares fit of its efficiency terms.
#include "Calibration.h"
#include "EngineCalibration.h"
#include "EngineFit.h"
#include "HostProfileCache.h"
#include "Store.h"
#include "Validation.h"
#include "ValidationCaseJson.h"
#include "CliArgs.h"
#include "Commands.h"
#include "OutputFile.h"
#include "DeviceArgs.h"
#include "Progress.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <ostream>

namespace shardscope::cli {

namespace {

// Each held-out case: its name and its relative error (predicted / measured - 1) before and after the fit.
QJsonArray heldOutJson(const std::vector<std::string>& names, const std::vector<double>& before,
                       const std::vector<double>& after)
{
    QJsonArray out;
    for (size_t i = 0; i < names.size() && i < before.size() && i < after.size(); ++i)
        out.append(QJsonObject{{"case", QString::fromStdString(names[i])},
                               {"error_before", before[i]},
                               {"error_after", after[i]}});
    return out;
}

void printTable(std::ostream& out, const std::vector<CaseResult>& results)
{
    char line[256];
    std::snprintf(line, sizeof line, "%-44s %10s %10s %8s\n", "CASE", "MEASURED", "PREDICTED", "ERROR");
    out << line;
    for (const CaseResult& r : results) {
        char tuned[32] = "";
        if (r.micro_batch_tuned)
            std::snprintf(tuned, sizeof tuned, "  (mb %d, tuned)", r.micro_batch);
        std::snprintf(line, sizeof line, "%-44s %10.2f %10.2f %+7.1f%%%s%s\n", r.id.c_str(), r.measured, r.predicted,
                      100 * r.relative_error, r.feasible ? "" : "  (out of memory)", tuned);
        out << line;
    }
}

void printSummary(std::ostream& out, const char* label, const ErrorSummary& s)
{
    char line[160];
    std::snprintf(line, sizeof line, "%s: median |error| %.1f%%, worst %.1f%%, rms log error %.3f\n", label,
                  100 * s.median_abs, 100 * s.worst_abs, s.rms_log);
    out << line;
}

// The summary, then one line per chip family (the goals are per family).
void printSummaries(std::ostream& out, const char* label, const std::vector<CaseResult>& results)
{
    printSummary(out, label, summarize(results));
    for (const auto& [family, s] : summarizeByFamily(results)) {
        const std::string indented = std::string("  ") + family;
        printSummary(out, indented.c_str(), s);
    }
}

QJsonObject summaryJson(const ErrorSummary& s)
{
    return QJsonObject{{"median_abs", s.median_abs}, {"worst_abs", s.worst_abs}, {"rms_log", s.rms_log}};
}

QJsonObject byFamilyJson(const std::vector<CaseResult>& results)
{
    QJsonObject o;
    for (const auto& [family, s] : summarizeByFamily(results))
        o.insert(QString::fromStdString(family), summaryJson(s));
    return o;
}

QJsonArray resultsJson(const std::vector<CaseResult>& results)
{
    QJsonArray a;
    for (const CaseResult& r : results)
        a.append(QJsonObject{{"id", QString::fromStdString(r.id)},
                             {"measured", r.measured},
                             {"predicted", r.predicted},
                             {"relative_error", r.relative_error},
                             {"feasible", r.feasible},
                             {"micro_batch", r.micro_batch},
                             {"micro_batch_tuned", r.micro_batch_tuned}});
    return a;
}

// The cost model's element-wise term fitted to engine runs of the validation suite, with a
// held-out share of the cases to show the gain honestly.
// The cases of every stored validation run that kept its request, oldest first (so the
// held-out share is stable as runs are added). Runs stored before requests were kept are
// skipped and counted.
std::vector<ValidationResult> historyResults(const RunStore& runStore, int& skipped)
{
    std::vector<ValidationResult> results;
    std::vector<RunStore::ValidationRun> runs = runStore.validationRuns(100000);
    std::reverse(runs.begin(), runs.end());
    skipped = 0;
    for (const RunStore::ValidationRun& run : runs) {
        const QJsonArray cases = run.document.value(QLatin1String("cases")).toArray();
        for (qsizetype i = 0; i < cases.size(); ++i) {
            const QJsonObject c = cases[i].toObject();
            if (!c.contains(QLatin1String("request"))) {
                ++skipped;
                continue;
            }
            results.push_back(validationResultFromJson(
                c, "history run " + std::to_string(run.id) + " cases[" + std::to_string(i) + "]"));
        }
    }
    return results;
}

int calibrateOnEngine(const CliArgs& a, Context& ctx)
{
    Store store(ctx.db_path, ctx.store_options);
    const bool fromHistory = a.flag("from-history");
    const double holdout = a.number("holdout", kCalibrationHoldout, 0, 0.9);
    std::vector<ValidationResult> results;
    std::string source;
    if (fromHistory) {
        int skipped = 0;
        results = historyResults(store.runs(), skipped);
        if (results.empty())
            throw UsageError("calibrate --from-history: the run history holds no validation cases with their "
                             "requests (run `shardscope-cli validate --suite` first)" +
                             (skipped ? " (" + std::to_string(skipped) + " older cases without requests)" : std::string()));
        source = "history (" + std::to_string(results.size()) + " cases)";
    }
    const CostModelParams start = defaultCostModelParams();
    EngineFit fit;  // the published-run terms are the start; the engine moves the element-wise one
    if (fromHistory) {
        fit = fitOnEngine(results, start, holdout);
    } else {
        EngineCalibrationRequest request;
        request.device = chipProfileFromArg(a.value("device").value_or(kSuiteChip), store.specs(), kSuiteChipScale);
        request.host = emulationHost(cachedHostProfile(store.runs(), 1).profile);
        request.holdout = holdout;
        request.start = start;
        // Case by case on the engine: progress on a terminal, Ctrl-C stops before the fit (nothing saved).
        Progress progress(ctx.err, a.flag("quiet"));
        const EngineCalibration run =
            calibrateOnEngine(request, interruptFlag(), [&](int done, int total, const std::string& next) {
                progress.update("calibrate: case " + std::to_string(done + 1) + " of " + std::to_string(total) +
                                ": " + next);
            });
        progress.clear();
        throwIfInterrupted();
        if (!run.complete)
            throw std::runtime_error("calibrate --engine: the engine runs did not complete");
        fit = run.fit;
        source = request.device.name;
    }
    if (auto name = a.value("save")) {
        fit.profile.terms.name = *name;
        store.runs().storeCostProfile(*name, fit.profile);
    }
    if (a.flag("json")) {
        QJsonObject o{{"schema", "shardscope.engine-calibration/1"},
                      {"source", QString::fromStdString(source)},
                      {"fit_cases", int(fit.fit_cases.size())},
                      {"holdout_cases", int(fit.holdout_cases.size())},
                      {"device_step_time", QJsonObject{{"fit_median_before", fit.fit_before},
                                                       {"fit_median_after", fit.fit_after},
                                                       {"holdout_median_before", fit.holdout_before},
                                                       {"holdout_median_after", fit.holdout_after},
                                                       {"holdout_worst_before", fit.holdout_worst_before},
                                                       {"holdout_worst_after", fit.holdout_worst_after},
                                                       {"holdout", heldOutJson(fit.holdout_cases, fit.holdout_errors_before,
                                                                               fit.holdout_errors_after)}}},
                      {"wall_step_time", QJsonObject{{"fit_cases", fit.wall.fit_before.cases},
                                                     {"holdout_cases", fit.wall.holdout_before.cases},
                                                     {"fit_median_before", fit.wall.fit_before.median},
                                                     {"fit_median_after", fit.wall.fit_after.median},
                                                     {"holdout_median_before", fit.wall.holdout_before.median},
                                                     {"holdout_median_after", fit.wall.holdout_after.median},
                                                     {"holdout_worst_before", fit.wall.holdout_before.worst},
                                                     {"holdout_worst_after", fit.wall.holdout_after.worst},
                                                     {"holdout", heldOutJson(fit.wall.holdout_cases,
                                                                             fit.wall.holdout_before.rel_errors,
                                                                             fit.wall.holdout_after.rel_errors)}}},
                      {"params", toJson(fit.profile)}};
        ctx.out << QJsonDocument(o).toJson(QJsonDocument::Indented).toStdString();
        return kExitOk;
    }
    char line[256];
    std::snprintf(line, sizeof line, "element-wise traffic factor: %.3f (published runs) -> %.3f (engine, %s)\n",
                  start.elementwise_traffic_factor, fit.profile.terms.elementwise_traffic_factor, source.c_str());
    ctx.out << line;
    std::snprintf(line, sizeof line, "device step time, %zu fit cases: median |error| %.1f%% -> %.1f%%\n",
                  fit.fit_cases.size(), 100 * fit.fit_before, 100 * fit.fit_after);
    ctx.out << line;
    std::snprintf(line, sizeof line,
                  "device step time, %zu held-out cases: median |error| %.1f%% -> %.1f%%, worst %.1f%% -> %.1f%%\n",
                  fit.holdout_cases.size(), 100 * fit.holdout_before, 100 * fit.holdout_after,
                  100 * fit.holdout_worst_before, 100 * fit.holdout_worst_after);
    ctx.out << line;
    for (size_t i = 0; i < fit.holdout_cases.size(); ++i) {
        if (i < fit.holdout_errors_after.size())
            std::snprintf(line, sizeof line, "  held out: %-36s %+6.1f%% -> %+6.1f%%\n", fit.holdout_cases[i].c_str(),
                          100 * fit.holdout_errors_before[i], 100 * fit.holdout_errors_after[i]);
        else
            std::snprintf(line, sizeof line, "  held out: %s\n", fit.holdout_cases[i].c_str());
        ctx.out << line;
    }
    if (fit.wall.fit_before.cases > 0) {
        const EmulationWallTerms& w = fit.profile.wall;
        std::snprintf(line, sizeof line,
                      "host wall clock terms: compute x %.3f, %.1f us per barrier (%.1f us when other workers fill "
                      "its wait)\n", w.compute_factor, 1e6 * w.sync_s, 1e6 * w.hidden_sync_s);
        ctx.out << line;
        std::snprintf(line, sizeof line, "wall step time, %d fit cases: median |error| %.1f%% -> %.1f%%\n",
                      fit.wall.fit_before.cases, 100 * fit.wall.fit_before.median, 100 * fit.wall.fit_after.median);
        ctx.out << line;
        std::snprintf(line, sizeof line,
                      "wall step time, %d held-out cases: median |error| %.1f%% -> %.1f%%, worst %.1f%% -> %.1f%%\n",
                      fit.wall.holdout_before.cases, 100 * fit.wall.holdout_before.median,
                      100 * fit.wall.holdout_after.median, 100 * fit.wall.holdout_before.worst,
                      100 * fit.wall.holdout_after.worst);
        ctx.out << line;
        for (size_t i = 0; i < fit.wall.holdout_cases.size(); ++i) {
            std::snprintf(line, sizeof line, "  held out: %-36s %+6.1f%% -> %+6.1f%%\n",
                          fit.wall.holdout_cases[i].c_str(), 100 * fit.wall.holdout_before.rel_errors[i],
                          100 * fit.wall.holdout_after.rel_errors[i]);
            ctx.out << line;
        }
    } else {
        ctx.out << "wall step time: no case knows its host (runs stored before hosts were recorded); not fitted\n";
    }
    if (auto name = a.value("save"))
        ctx.out << "saved as cost-model profile \"" << *name << "\" (use it with --cost-model " << *name << ")\n";
    return kExitOk;
}

} // namespace

int runCalibrate(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("calibrate");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    if (a.flag("engine") && a.flag("from-history"))
        throw UsageError("give one of --engine (fresh engine runs) or --from-history (the stored runs)");
    if (a.flag("engine") || a.flag("from-history")) {
        // These fit the engine's terms; the published-run options do not apply.
        for (const char* option : {"terms", "out"})
            if (a.value(option))
                throw UsageError(std::string("--") + option + " applies to the published-run fit, not to --engine or --from-history");
        if (a.flag("fit"))
            throw UsageError("--fit applies to the published-run fit; --engine and --from-history always fit");
        if (a.flag("from-history") && a.value("device"))
            throw UsageError("--device: the stored runs name their own devices; use it with --engine");
        return calibrateOnEngine(a, ctx);
    }
    if (a.value("device"))
        throw UsageError("--device: the published runs name their own hardware; use it with --engine");
    if (a.value("holdout") && !a.flag("fit"))
        throw UsageError("--holdout applies to a fit: with --fit (the published runs), --engine or --from-history");
    // Every k-th published row (k = round(1 / holdout)) is held out of the fit and reported apart.
    const double holdout = a.number("holdout", 0, 0, 0.9);
    // Which efficiency terms the fit may move (default: the ones the shipped profile was fitted on).
    std::vector<FitTerm> terms{FitTerm::VendorMatmulEfficiency, FitTerm::SustainedMatmulFraction,
                               FitTerm::ElementwiseFactor, FitTerm::StepOverhead, FitTerm::DpOverlap};
    if (auto list = a.value("terms")) {
        terms.clear();
        size_t start = 0;
        while (start <= list->size()) {
            const size_t comma = std::min(list->find(',', start), list->size());
            const std::string name = list->substr(start, comma - start);
            bool known = false;
            for (FitTerm t : {FitTerm::VendorMatmulEfficiency, FitTerm::SustainedMatmulFraction,
                              FitTerm::MatmulHalfDim, FitTerm::ElementwiseFactor,
                              FitTerm::DpOverlap, FitTerm::InterNodeEfficiency, FitTerm::IntraLinkEfficiency,
                              FitTerm::GroupedGemmEfficiency, FitTerm::MoeLayerOverhead, FitTerm::KernelOverhead,
                              FitTerm::StepOverhead})
                if (name == toString(t)) {
                    terms.push_back(t);
                    known = true;
                }
            if (!known)
                throw UsageError("--terms: unknown term \"" + name +
                                 "\" (matmul_efficiency.by_vendor, matmul_efficiency.sustained_fraction, "
                                 "matmul_half_dim, elementwise_traffic_factor, dp_overlap, "
                                 "network.inter_node_efficiency, network.intra_link_efficiency, "
                                 "moe.grouped_gemm_efficiency, moe.layer_overhead_s, kernel_overhead_s, step_overhead_s)");
            start = comma + 1;
        }
    }
    // Opened before any work only to keep the profile: a catalog that cannot take it fails first.
    std::optional<Store> store;
    if (a.value("save"))
        store.emplace(ctx.db_path);
    const std::vector<CalibrationCase> cases = builtinCalibrationCases();
    CostModelParams params = defaultCostModelParams();
    const std::vector<CaseResult> before = evaluateCases(cases, params);
    std::vector<CaseResult> after;
    FitResult fit;
    std::vector<bool> held(cases.size(), false);
    if (a.flag("fit")) {
        const int every = holdout > 0 ? std::max(2, int(std::lround(1.0 / holdout))) : 0;
        std::vector<CalibrationCase> fitCases;
        for (size_t i = 0; i < cases.size(); ++i) {
            held[i] = every > 0 && int(i) % every == every - 1;
            if (!held[i])
                fitCases.push_back(cases[i]);
        }
        if (a.value("terms")) {
            fit = fitCostModel(fitCases, params, terms);
        } else {
            // The shipped terms' own procedure (cost-model.json "fitted_on"): the dense terms on the
            // dense rows, then the experts' two terms on the MoE rows with the dense ones fixed (the
            // only rows those terms change), each on its rows outside the held-out ones.
            std::vector<CalibrationCase> dense, experts;
            for (const CalibrationCase& c : fitCases)
                if (c.left_out_of_fit.empty())  // (the rows the shipped fit left out, with their reason)
                    (c.problem.model.moe.enabled() ? experts : dense).push_back(c);
            fit = fitCostModel(dense, params, terms);
            if (!experts.empty()) {
                const FitResult moe =
                    fitCostModel(experts, fit.params, {FitTerm::GroupedGemmEfficiency, FitTerm::MoeLayerOverhead});
                fit.params = moe.params;
                fit.iterations += moe.iterations;
                fit.before = summarize(evaluateCases(fitCases, params));
                fit.after = summarize(evaluateCases(fitCases, fit.params));
            }
        }
        params = fit.params;
        params.name = "fitted";
        after = evaluateCases(cases, params);
    }
    auto heldOut = [&](const std::vector<CaseResult>& all) {
        std::vector<CaseResult> out;
        for (size_t i = 0; i < all.size(); ++i)
            if (held[i])
                out.push_back(all[i]);
        return out;
    };
    const bool reportHoldout = a.flag("fit") && std::find(held.begin(), held.end(), true) != held.end();
    if (a.flag("json")) {
        QJsonObject o{{"schema", "shardscope.calibration/1"},
                      {"cases", resultsJson(before)},
                      {"by_family", byFamilyJson(before)}};
        if (a.flag("fit")) {
            o.insert("fitted", resultsJson(after));
            o.insert("fitted_by_family", byFamilyJson(after));
            o.insert("params", toJson(params));
        }
        if (reportHoldout) {
            const ErrorSummary b = summarize(heldOut(before)), f = summarize(heldOut(after));
            QJsonArray ids;
            for (const CaseResult& r : heldOut(before))
                ids.append(QString::fromStdString(r.id));
            o.insert("holdout", QJsonObject{{"cases", ids},
                                            {"median_before", b.median_abs},
                                            {"median_after", f.median_abs},
                                            {"worst_before", b.worst_abs},
                                            {"worst_after", f.worst_abs},
                                            {"by_family_before", byFamilyJson(heldOut(before))},
                                            {"by_family_after", byFamilyJson(heldOut(after))}});
        }
        ctx.out << QJsonDocument(o).toJson(QJsonDocument::Indented).toStdString();
    } else {
        printTable(ctx.out, before);
        printSummaries(ctx.out, "current terms", before);
        if (a.flag("fit")) {
            ctx.out << "\nafter fitting (" << fit.iterations << " iterations):\n";
            printTable(ctx.out, after);
            printSummaries(ctx.out, "fitted terms", after);
            if (reportHoldout) {
                ctx.out << "held out of the fit (" << heldOut(before).size() << " rows):\n";
                printSummaries(ctx.out, "current terms", heldOut(before));
                printSummaries(ctx.out, "fitted terms ", heldOut(after));
            }
            ctx.out << QJsonDocument(toJson(params)).toJson(QJsonDocument::Indented).toStdString();
        }
    }
    if (auto name = a.value("save")) {
        params.name = *name;
        store->runs().storeCostProfile(*name, params);
        if (!a.flag("json"))
            ctx.out << "saved as cost-model profile \"" << *name << "\" (use it with --cost-model " << *name << ")\n";
    }
    if (auto out = a.value("out")) {
        writeOutputFile(*out, QJsonDocument(toJson(params)).toJson(QJsonDocument::Indented));
    }
    return kExitOk;
}

} // namespace shardscope::cli
