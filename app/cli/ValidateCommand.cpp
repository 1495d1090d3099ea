// shardscope-cli validate: the planner's prediction against a real engine run of the
// same case, metric by metric (validation/Validation.h).
//   validate --suite [--device NAME[:scale]] [--json]
//   validate --plan plan.json [--layout "..."] [--steps N] [--json]
//   history [--json]
// Every validation is stored in the run history (store/RunStore.h).
#include "CliArgs.h"
#include "Commands.h"
#include "DeviceArgs.h"
#include "HostProfileCache.h"
#include "PlanCommand.h"
#include "PredictionJson.h"
#include "Progress.h"
#include "ProblemArgs.h"
#include "RunHistory.h"
#include "ScaledCase.h"
#include "Store.h"
#include "BackendArgs.h"
#include "Units.h"
#include "Validation.h"

#include <QJsonArray>

#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <set>

namespace shardscope::cli {

namespace {


std::string percent(double x)
{
    if (!std::isfinite(x))
        return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
    return buf;
}

void printCase(std::ostream& o, const ValidationResult& r)
{
    char line[256];
    std::snprintf(line, sizeof line, "  %-20s %14s %14s %9s  %s\n", "metric", "predicted", "measured", "error",
                  "device");
    o << line;
    for (const MetricComparison& m : r.metrics) {
        const bool bytes = m.metric.find("bytes") != std::string::npos;
        const bool seconds = m.metric.find("_s") != std::string::npos;
        auto show = [&](double v) {
            return bytes ? formatBytes(v) : seconds ? formatDuration(v) : formatSi(v, "FLOP");
        };
        std::snprintf(line, sizeof line, "  %-20s %14s %14s %9s  %s\n", m.metric.c_str(),
                      m.compared ? show(m.predicted).c_str() : "-", show(m.measured).c_str(),
                      m.compared ? percent(m.rel_error).c_str() : "took",
                      m.worst_device >= 0 ? std::to_string(m.worst_device).c_str() : "all");
        o << line;
    }
    for (const MetricComparison& m : r.metrics)
        if (const std::string why = explainDifference(r, m.metric); !why.empty())
            o << "  known difference, " << m.metric << ": " << why << "\n";
}

// One column per metric, as wide as its name (never cut) or its widest cell, and the case
// names as wide as the longest.
void printSuite(std::ostream& o, const std::vector<ValidationResult>& results)
{
    const std::vector<std::string>& metrics = validationTableMetrics();
    std::vector<std::vector<std::string>> cells(results.size());
    std::vector<size_t> width;
    for (const std::string& metric : metrics)
        width.push_back(metric.size());
    size_t nameWidth = 4;
    for (size_t i = 0; i < results.size(); ++i) {
        nameWidth = std::max(nameWidth, results[i].c.name.size());
        for (size_t k = 0; k < metrics.size() && results[i].error.empty(); ++k) {
            const MetricComparison* m = results[i].metric(metrics[k]);
            // A measurement without a prediction (the emulation's wall time on a shared host): what it took.
            std::string cell = !m ? "-" : m->compared ? percent(m->rel_error) : "(";
            if (m && !m->compared)  // appended: GCC 12 warns (-Wrestrict) on "(" + string
                cell.append(formatDuration(m->measured)).append(")");
            cells[i].push_back(cell);
            width[k] = std::max(width[k], cells[i].back().size());
        }
    }
    auto pad = [&](const std::string& text, size_t w, bool left) {
        const std::string fill(w > text.size() ? w - text.size() : 0, ' ');
        return left ? text + fill : fill + text;
    };
    o << pad("case", nameWidth, true);
    for (size_t k = 0; k < metrics.size(); ++k)
        o << " " << pad(metrics[k], width[k], false);
    o << "\n";
    for (size_t i = 0; i < results.size(); ++i) {
        o << pad(results[i].c.name, nameWidth, true);
        if (!results[i].error.empty()) {
            o << " " << results[i].error << "\n";
            continue;
        }
        for (size_t k = 0; k < metrics.size(); ++k)
            o << " " << pad(cells[i][k], width[k], false);
        o << "\n";
    }
}

void printSummary(std::ostream& o, const std::vector<ValidationResult>& results)
{
    char line[256];
    o << "\nerror of the prediction (predicted / measured - 1); summary over the cases:\n";
    for (const std::string& metric : validationMetrics()) {
        const MetricSummary s = summarizeMetric(results, metric);
        std::snprintf(line, sizeof line, "  %-20s median |error| %6.1f%%, worst %6.1f%% (%d cases)\n", metric.c_str(),
                      100 * s.median_rel_error, 100 * s.worst_rel_error, s.cases);
        o << line;
    }
    // Where a metric is not exact, say which term of the model the difference comes from: once
    // per explanation, with the metrics and cases it applies to.
    struct Known {
        std::string why;
        std::vector<std::pair<std::string, std::vector<std::string>>> where;  // metric -> cases
    };
    std::vector<Known> known;
    for (const std::string& metric : validationTableMetrics())
        for (const ValidationResult& r : results) {
            const std::string why = explainDifference(r, metric);
            if (why.empty())
                continue;
            auto k = std::find_if(known.begin(), known.end(), [&](const Known& x) { return x.why == why; });
            if (k == known.end())
                k = known.insert(known.end(), Known{why, {}});
            auto w = std::find_if(k->where.begin(), k->where.end(), [&](const auto& x) { return x.first == metric; });
            if (w == k->where.end())
                w = k->where.insert(k->where.end(), {metric, {}});
            w->second.push_back(r.c.name);
        }
    if (!known.empty())
        o << "\nknown differences (which term of the model):\n";
    for (const Known& k : known) {
        o << "  - " << k.why << "\n";
        for (const auto& [metric, cases] : k.where) {
            o << "    " << metric << ": ";
            if (cases.size() == results.size()) {
                o << "all cases\n";
                continue;
            }
            for (size_t i = 0; i < cases.size(); ++i)
                o << (i ? ", " : "") << cases[i];
            o << "\n";
        }
    }
}

} // namespace

namespace {

int validate(const std::vector<std::string>& args, Context& ctx, const BackendRun& backend)
{
    const CommandHelp& help = commandHelp("validate");
    const std::string usage = usageText(help);
    const CliArgs a(args, help);
    a.expectPositional(0, usage);
    const bool direct = a.value("layers").has_value();
    const bool fullModel = a.value("model").has_value();
    if (int(a.flag("suite")) + int(a.value("plan").has_value()) + int(direct) + int(fullModel) != 1)
        throw UsageError("give one of --suite, --plan, --model (a full-size case) or --layers (an "
                         "engine-sized case); usage: " + usage);
    const std::string profileKind = a.value("profile").value_or("chip");
    if (profileKind != "chip" && profileKind != "host")
        throw UsageError("--profile: \"" + profileKind + "\" is not host or chip");
    Progress progress(ctx.err, a.flag("quiet") || !backend.writes());
    if (a.flag("suite"))
        interruptFlag();  // Ctrl-C stops the suite between cases: nothing stored, nothing printed
    Store store(ctx.db_path, ctx.store_options);
    const int maxDevices = a.integer("max-devices", kMaxValidationDevices, 1, 1 << 16);
    // Every case runs on this backend (MPI: every rank runs the same cases in the same order).
    auto onBackend = [&](ValidationCase c) {
        c.request.backend = backend.backend;
        return c;
    };
    // A named cost-model profile (e.g. one fitted by `calibrate --engine --save NAME`): its
    // terms price the cases, on top of the emulated hardware's.
    const ValidationProfile base = store.runs().validationProfileNamed(a.value("cost-model").value_or("default"));
    std::vector<ValidationResult> results;
    std::vector<std::string> adaptations;
    std::string runName = "suite";
    std::optional<QJsonObject> fullSize;  // the full-size plan as priced by its own terms
    engine::DeviceProfile profile;
    // --profile host: this machine as the device (measured once, stored), so that the device
    // clock and the wall clock describe the same hardware.
    auto hostDevice = [&] { return cachedHostProfile(store.runs(), 1).profile; };
    // Whatever the device, the host runs the emulation: its wall clock is predicted too. MPI:
    // rank 0 measures (or reads) it first, the others read what it stored.
    if (backend.session && !backend.writes())
        backend.session->barrier();
    const EmulationHost host = emulationHost(hostDevice());
    if (backend.session && backend.writes())
        backend.session->barrier();
    if (backend.session && profileKind == "host" && !backend.session->sameOnEveryRank(fingerprint(hostDevice())))
        throw InputError("profile: the MPI ranks measured different hosts (--profile host): validate with "
                         "--profile chip (the default) when the ranks run on several machines");
    // A full-size case (a plan's request, or a problem given here) scaled down to run here.
    auto runScaled = [&](const PlanRequest& request, const Layout& layout, const char* what) {
        ScaledCase scaled = scaledValidationCase(request.problem, layout, a.integer("steps", 3, 1, 1000),
                                                 request.cost_model, maxDevices);
        if (profileKind == "host") {
            scaled.validation.profile = hostDevice();
            scaled.adaptations.push_back(std::string("the device is this host (measured), not the ") + what +
                                         "'s chip");
        }
        adaptations = scaled.adaptations;
        profile = scaled.validation.profile;
        runName = scaled.validation.name;
        scaled.validation.host = host;
        fullSize = QJsonObject{{"cost_model", QString::fromStdString(request.cost_model.name)},
                               {"constraints", QString::fromStdString(constraintsText(request.space))},
                               {"layout", QString::fromStdString(toString(layout))},
                               {"prediction", toJson(scaled.full_prediction)}};
        progress.update("validate: training " + scaled.validation.name + " on the engine");
        results.push_back(runValidation(onBackend(scaled.validation), base));
    };
    if (a.flag("suite")) {
        profile = profileKind == "host" ? hostDevice()
                                        : chipProfileFromArg(a.value("device").value_or(kSuiteChip), store.specs(), kSuiteChipScale);
        const std::vector<ValidationCase> suite = validationSuite(profile);
        for (ValidationCase c : suite) {
            throwIfInterrupted();
            progress.update("validate: case " + std::to_string(results.size() + 1) + " of " +
                            std::to_string(suite.size()) + ": " + c.name);
            c.host = host;
            results.push_back(runValidation(onBackend(c), base));
        }
        throwIfInterrupted();
    } else if (direct) {
        ValidationCase c;
        engine::TrainRequest& r = c.request;
        r.model.layers = a.integer("layers", 1, 1, 1000);
        r.model.hidden = a.integer("hidden", 1, 1, 1 << 16);
        r.model.heads = a.integer("heads", 1, 1, 1 << 12);
        r.model.vocab = a.integer("vocab", 1, 2, 1 << 20);
        r.model.seq = a.integer("seq", 1, 1, 1 << 16);
        r.batch = a.integer("batch", 1, 1, 1 << 20);
        r.steps = a.integer("steps", 3, 1, 1000);
        FieldErrors errors;
        r.layout = parseLayout(a.value("layout").value_or(""), errors);
        resolveDataParallel(r.layout, a.integer("devices", int(std::max<std::int64_t>(1, r.layout.tp * r.layout.pp)),
                                                1, 64),
                            errors);
        if (!errors.empty())
            throw InputError(errors);
        profile = profileKind == "host" ? hostDevice()
                                        : chipProfileFromArg(a.value("device").value_or(kSuiteChip), store.specs(), kSuiteChipScale);
        c.profile = profile;
        r.links.intra_bytes_per_second = profile.memory_bytes_per_second;  // shared memory between devices
        r.links.inter_bytes_per_second = profile.memory_bytes_per_second / 8;
        r.links.node_devices = a.integer("node-devices", int(r.layout.devices()), 1, 64);
        c.name = "direct " + toString(r.layout);
        if (FieldErrors requestErrors = engine::validate(r); !requestErrors.empty())
            throw InputError(requestErrors);
        runName = c.name;
        c.host = host;
        progress.update("validate: training " + c.name + " on the engine");
        results.push_back(runValidation(onBackend(c), base));
    } else if (fullModel) {
        // A full-size problem and layout, as `predict` takes them, scaled down like a plan.
        // --devices N stands for --nodes: the nodes of --node-type that hold N devices.
        std::vector<std::string> withNodes = args;
        if (!a.value("nodes")) {
            const std::string type = a.value("node-type").value_or("");
            if (type.empty())
                throw UsageError("--node-type: missing (the full-size case's node type); usage: " + usage);
            if (!a.value("devices"))
                throw UsageError("give --nodes N or --devices N for the full-size case; usage: " + usage);
            const int perNode = store.specs().node(type).devicesPerNode();
            const int devices = a.integer("devices", 1, 1, 1 << 24);
            if (devices % perNode != 0)
                throw InputError("devices: " + std::to_string(devices) + " is not a whole number of " + type +
                                 " nodes (" + std::to_string(perNode) + " devices each)");
            withNodes.insert(withNodes.end(), {"--nodes", std::to_string(devices / perNode)});
        }
        const CliArgs full(withNodes, help);
        const Problem problem = problemFromArgs(full, store.specs());
        const Layout layout = layoutFromArg(a.value("layout").value_or(""), problem);
        runScaled(PlanRequest{problem, defaultCostModelParams(), {}, Objective::Throughput, 1, std::nullopt}, layout, "problem");
    } else {
        const PlanDocument plan = loadPlanFile(*a.value("plan"), ctx.err);
        Layout layout;
        if (auto text = a.value("layout"))
            layout = layoutFromArg(*text, plan.problem);
        else if (plan.best)
            layout = *plan.best;
        else
            throw InputError(*a.value("plan") + ": best: the plan has no feasible layout; give one with --layout");
        runScaled(plan.request, layout, "plan");
    }
    progress.clear();
    QJsonObject doc = validationDocument(results);
    addLossCurves(doc, results);  // the GUI's history draws them again
    if (!adaptations.empty()) {
        QJsonArray notes;
        for (const std::string& n : adaptations)
            notes.append(QString::fromStdString(n));
        doc.insert("adaptations", notes);
    }
    if (fullSize)
        doc.insert("full_size", *fullSize);
    doc.insert("device", QString::fromStdString(profile.name));
    doc.insert("cost_model", QString::fromStdString(base.terms.name));
    if (!backend.writes())
        return kExitOk;  // rank 0 stores the run and prints
    const int id = store.runs().storeValidationRun(runName, doc);

    if (a.flag("json")) {
        ctx.out << QJsonDocument(doc).toJson(QJsonDocument::Indented).toStdString();
        return kExitOk;
    }
    if (results.size() == 1) {
        const ValidationResult& r = results.front();
        ctx.out << r.c.name << "\n";
        for (const std::string& n : adaptations)
            ctx.out << "  note: " << n << "\n";
        if (fullSize) {
            const QJsonObject pr = fullSize->value(QLatin1String("prediction")).toObject();
            ctx.out << "  full size: " << fullSize->value(QLatin1String("layout")).toString().toStdString() << ", "
                    << formatDuration(pr.value(QLatin1String("time_s")).toObject().value(QLatin1String("step")).toDouble())
                    << " per step (cost model "
                    << fullSize->value(QLatin1String("cost_model")).toString().toStdString() << ", constraints "
                    << fullSize->value(QLatin1String("constraints")).toString().toStdString() << ")";
            // A plan that does not fit its devices is scaled with the same pressure: the emulated
            // devices run out of memory too, and the reason belongs beside the figure.
            if (!pr.value(QLatin1String("feasible")).toBool(true))
            {
                ctx.out << "; NOT FEASIBLE at full size: " << pr.value(QLatin1String("reason")).toString().toStdString();
                if (const QString figure = pr.value(QLatin1String("missing_figure")).toString(); !figure.isEmpty())
                    ctx.out << ": " << figure.toStdString();
            }
            ctx.out << "\n";
        }
        ctx.out << "  engine model: " << r.c.request.model.totalLayers() << " layers, hidden " << r.c.request.model.hidden
                << ", " << r.c.request.model.heads << " heads, vocab " << r.c.request.model.vocab << ", seq "
                << r.c.request.model.seq << " (" << engine::describe(r.c.request.model) << "), batch " << r.c.request.batch
                << ", layout "
                << toString(r.c.request.layout) << "\n";
        if (!r.error.empty())
            ctx.out << "  could not compare: " << r.error << "\n";
        else
            printCase(ctx.out, r);
    } else {
        printSuite(ctx.out, results);
        printSummary(ctx.out, results);
    }
    ctx.out << "device: " << profile.name << "; stored as run " << id << " in the history (shardscope-cli history)\n";
    return kExitOk;
}

} // namespace

int runValidate(const std::vector<std::string>& args, Context& ctx)
{
    return runWithBackend(args, commandHelp("validate"), ctx, validate);
}

int runHistory(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("history");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    Store store(ctx.db_path, ctx.store_options);
    const auto runs = store.runs().validationRuns(a.integer("limit", 20, 1, 100000));
    if (a.flag("json")) {
        QJsonArray array;
        for (const RunStore::ValidationRun& r : runs)
            array.append(QJsonObject{{"id", r.id},
                                     {"created_at", QString::fromStdString(r.created_at)},
                                     {"software_version", QString::fromStdString(r.software_version)},
                                     {"name", QString::fromStdString(r.name)},
                                     {"validation", r.document}});
        ctx.out << QJsonDocument(array).toJson(QJsonDocument::Indented).toStdString();
        return kExitOk;
    }
    for (const RunStore::ValidationRun& r : runs) {
        const QJsonObject summary = r.document.value(QLatin1String("summary")).toObject();
        const QJsonObject stepSummary = summary.value(QLatin1String("device_step_time_s")).toObject();
        const double step = stepSummary.value(QLatin1String("median_rel_error")).toDouble();
        const QJsonArray caseList = r.document.value(QLatin1String("cases")).toArray();
        const int cases = int(caseList.size());
        // A run whose cases could not be compared has no error to show (as the Validate page):
        // "failed" with the first case's reason, not a 0.0% that reads as perfect.
        std::string result;
        if (stepSummary.value(QLatin1String("cases")).toInt(0) > 0) {
            char figure[96];
            std::snprintf(figure, sizeof figure, "device step time median |error| %.1f%%", 100 * step);
            result = figure;
        } else {
            QString failure;
            for (const QJsonValue& c : caseList)
                if (failure.isEmpty())
                    failure = c.toObject().value(QLatin1String("error")).toString();
            result = failure.isEmpty() ? std::string("nothing compared") : "failed: " + failure.toStdString();
        }
        ctx.out << std::string(4 - std::min<size_t>(4, std::to_string(r.id).size()), ' ') << r.id << "  " << r.created_at
                << "  " << r.software_version << "  " << cases << (cases == 1 ? " case, " : " cases, ") << result << "  "
                << r.name << "\n";
    }
    if (runs.empty())
        ctx.out << "no validation runs yet: shardscope-cli validate --suite\n";
    return kExitOk;
}

} // namespace shardscope::cli
