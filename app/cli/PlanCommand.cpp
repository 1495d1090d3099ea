// shardscope-cli plan, sweep and compare: the planner's search over every legal
// layout, printed as tables or written as "shardscope.plan/1", "shardscope.sweep/1"
// and "shardscope.compare/1" documents (planner/PlanJson.h).
#include "CliArgs.h"
#include "Commands.h"
#include "OutputFile.h"
#include "CostModel.h"
#include "FrameworkExport.h"
#include "JsonReader.h"
#include "PlanCommand.h"
#include "PlanJson.h"
#include "ProblemArgs.h"
#include "Progress.h"
#include "Search.h"
#include "SpecJson.h"
#include "Store.h"
#include "Sweep.h"
#include "Units.h"

#include <QFile>
#include <QJsonDocument>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

namespace shardscope::cli {

namespace {

// What the user asked (terms, constraints, objective, top_k; the problem is filled in by the
// caller) and how to run it.
struct SearchSettings {
    PlanRequest request;
    SearchControl control;
};

// defaultTop: the --top of sweep and compare (one plan per point); plan keeps PlanRequest's.
SearchSettings searchSettingsFromArgs(const CliArgs& a, const RunStore& runs, std::optional<int> defaultTop)
{
    SearchSettings s;
    SearchSpace& space = s.request.space;
    FieldErrors errors;
    auto append = [&](const FieldErrors& more) { errors.insert(errors.end(), more.begin(), more.end()); };
    if (auto fix = a.value("fix"))
        append(applyFixed(space, *fix, "--fix"));
    if (auto lo = a.value("min"))
        append(applyBounds(space, *lo, false, "--min"));
    if (auto hi = a.value("max"))
        append(applyBounds(space, *hi, true, "--max"));
    if (auto modes = a.value("recompute"))
        append(applyRecomputeModes(space, *modes, "--recompute"));
    if (!errors.empty())
        throw InputError(errors);
    space.max_memory_fraction = a.number("max-mem", 1.0, 0.01, 1.0);
    space.min_micro_batches = a.integer("min-micro-batches", 1, 1, 1'000'000);
    if (auto objective = a.value("objective")) {
        auto o = objectiveFromString(*objective);
        if (!o)
            throw UsageError("--objective: unknown value \"" + *objective + "\" (one of: throughput, time, cost)");
        s.request.objective = *o;
    }
    s.request.top_k = a.integer("top", defaultTop.value_or(s.request.top_k), 1, 1000);
    s.request.cost_model = runs.costModelParamsNamed(a.value("cost-model").value_or("default"));
    if (auto framework = a.value("framework")) {
        // Only layouts that framework can run: the top plan exports with `export --format`.
        s.request.framework = exportFormatFromString(*framework);
        if (!s.request.framework)
            throw UsageError("--framework: unknown framework \"" + *framework + "\" (one of: " + exportFormatChoices() +
                             ")");
    }
    s.control.threads = a.integer("threads", 0, 0, 256);
    return s;
}

// The arguments with every --name option replaced by one "--name value".
std::vector<std::string> withOption(const std::vector<std::string>& args, const std::string& name,
                                    const std::string& value)
{
    std::vector<std::string> out;
    const std::string flag = "--" + name;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == flag) {
            ++i;  // skip its value
            continue;
        }
        if (args[i].rfind(flag + "=", 0) == 0)
            continue;
        out.push_back(args[i]);
    }
    out.push_back(flag);
    out.push_back(value);
    return out;
}

std::vector<std::string> splitList(const std::string& text)
{
    std::vector<std::string> out;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ','))
        if (!item.empty())
            out.push_back(item);
    return out;
}

std::string money(double usd)
{
    if (!(usd > 0))
        return "unknown";
    return "$" + formatCount(std::int64_t(usd + 0.5));
}

std::string scheduleText(const Layout& l)
{
    if (l.schedule == PipelineSchedule::Interleaved)
        return "interleaved v=" + std::to_string(l.virtual_stages);
    return toString(l.schedule);
}

std::string zeroText(const Layout& l)
{
    std::string z = std::to_string(l.zero_stage);
    // zero_group counts dp replicas; the shard group spans zero_group x cp devices. Group 1 shards
    // over the cp group alone ("cp"), or nothing at cp = 1.
    if (l.zero_group == 1)
        z += l.cp > 1 ? "/cp" : "/g1";
    else if (l.zero_group > 0)
        z += "/g" + std::to_string(l.zero_group);
    return z;
}

// Written beside and renamed over (QSaveFile): an interrupted or failed write leaves the old
// file, never half a plan.
void writeDocument(const QJsonObject& doc, const std::string& path)
{
    writeOutputFile(path, QJsonDocument(doc).toJson(QJsonDocument::Indented));
}

// Sweeps and comparisons run one search per point: the line shows how many points, the
// current search's share of mesh shapes and the time so far. Ctrl-C cancels the search.
void watch(SearchControl& control, Progress& progress, const std::string& what)
{
    control.cancel = interruptFlag();
    control.progress = [&progress, what](const SearchProgress& p) {
        char buf[160];
        std::snprintf(buf, sizeof buf, ": searching %lld of %lld mesh shapes, %s evaluations", (long long)p.done,
                      (long long)p.total, formatCount(p.evaluated).c_str());
        progress.update(what + buf);
    };
}

void printCounts(std::ostream& o, const SearchStats& s)
{
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "searched %s layouts of %s mesh shapes in %s on %d thread%s (%s evaluations/s): "
                  "%s evaluated, %s pruned by the memory bound, %s feasible%s\n",
                  formatCount(s.candidates).c_str(), formatCount(s.mesh_shapes).c_str(),
                  formatDuration(s.seconds).c_str(), s.threads, s.threads == 1 ? "" : "s",
                  formatSi(s.evaluationsPerSecond(), "").c_str(), formatCount(s.evaluated).c_str(),
                  formatCount(s.pruned).c_str(), formatCount(s.feasible).c_str(), s.cancelled ? " (cancelled)" : "");
    o << buf;
    if (!s.infeasible_by_reason.empty()) {
        o << "infeasible:\n";
        for (const auto& [reason, n] : s.infeasible_by_reason)
            o << "  " << reason << ": " << formatCount(n) << "\n";
    }
}

bool checkObjective(Objective objective, const Problem& problem)
{
    if (const std::string why = objectiveProblem(objective, problem); !why.empty())
        throw InputError("--objective cost: " + why);
    return true;
}

} // namespace

void printPlanTable(std::ostream& o, const std::vector<Plan>& plans, size_t rows)
{
    char buf[512];
    // The expert grid (MoE) as two more columns when a plan has one; a dense table stays as it was.
    const bool experts = std::any_of(plans.begin(), plans.begin() + std::ptrdiff_t(std::min(rows, plans.size())),
                                     [](const Plan& p) { return p.layout.expertParallel(); });
    auto expertColumns = [&](const std::string& ep, const std::string& etp) {
        return experts ? " " + std::string(4 - std::min<size_t>(4, ep.size()), ' ') + ep + " " +
                             std::string(3 - std::min<size_t>(3, etp.size()), ' ') + etp
                       : std::string();
    };
    // MFU in three named conventions (core/Prediction.h): Megatron/Korthikanti's, PaLM's, causal-aware.
    std::snprintf(buf, sizeof buf, "%3s %5s %4s %4s %4s%s %-3s %-6s %4s %-15s %-9s %-9s %10s %10s %8s %9s %10s %20s %14s %s\n",
                  "#", "dp", "tp", "pp", "cp", expertColumns("ep", "etp").c_str(), "sp", "zero", "mb", "schedule",
                  "recompute", "offload", "step", "tokens/s", "MFU(Meg)", "MFU(PaLM)", "MFU(caus)", "memory/device",
                  "cost to train", " same cost");
    o << buf;
    for (size_t i = 0; i < plans.size() && i < rows; ++i) {
        const Layout& l = plans[i].layout;
        const Prediction& p = plans[i].prediction;
        const MemoryBreakdown& m = p.memory_bytes;
        const std::string memory =
            formatBytes(m.total()) + " (" + std::to_string(int(100 * m.total() / m.capacity + 0.5)) + "%)";
        // Layouts of the same cost are one choice: counted here, listed in --json ("variants").
        const std::string same =
            plans[i].variants.empty()
                ? std::string()
                : " +" + std::to_string(plans[i].variants.size()) + (plans[i].variants.size() == 1 ? " variant" : " variants");
        std::snprintf(buf, sizeof buf,
                      "%3zu %5d %4d %4d %4d%s %-3s %-6s %4d %-15s %-9s %-9s %10s %10s %7.1f%% %8.1f%% %9.1f%% %20s %14s%s\n",
                      i + 1, l.dp, l.tp, l.pp, l.cp,
                      expertColumns(std::to_string(l.ep), std::to_string(l.expertTensorParallel())).c_str(),
                      l.sequence_parallel ? "on" : "off", zeroText(l).c_str(),
                      l.micro_batch, scheduleText(l).c_str(), toString(l.recompute), toString(l.offload),
                      formatDuration(p.step_time_s).c_str(), formatSi(p.tokens_per_s, "").c_str(), 100 * p.mfu,
                      100 * p.mfu_palm, 100 * p.mfu_causal, memory.c_str(), money(p.cost_to_train_usd).c_str(),
                      same.c_str());
        o << buf;
    }
    // Uneven pipeline splits are not a column: one line per split shown.
    std::vector<std::string> splits;
    for (size_t i = 0; i < plans.size() && i < rows; ++i) {
        const Layout& l = plans[i].layout;
        if (!l.unevenPipeline())
            continue;
        // (account_for_* splits, Layout.h: the search does not propose them; a loaded plan may hold one.)
        const PipelineLayerLayout* custom = l.layerLayout();
        const std::string text = custom ? "pp=" + std::to_string(l.pp) + ", v=" + std::to_string(l.virtual_stages) +
                                              ": layout " + custom->text() + " (Megatron-LM's pipeline layout)"
                                 : l.splitAccountsForEnds()
                                     ? "pp=" + std::to_string(l.pp) + ": the " +
                                           (l.endLayers() == 2 ? std::string("embedding and the loss")
                                            : l.account_for_embedding_in_pipeline_split ? std::string("embedding")
                                                                                        : std::string("loss")) +
                                           " counted as layers of the first / last model chunk"
                                     : "pp=" + std::to_string(l.pp) + ": first stage " +
                                 (l.first_stage_layers > 0 ? std::to_string(l.first_stage_layers) : "even share") +
                                 ", last stage " +
                                 (l.last_stage_layers > 0 ? std::to_string(l.last_stage_layers) : "even share") +
                                 " layers, the rest split evenly";
        if (std::find(splits.begin(), splits.end(), text) == splits.end())
            splits.push_back(text);
    }
    for (const std::string& split : splits)
        o << "uneven pipeline split, " << split << "\n";
    // Nor is the cp exchange: the plans with all-to-all context parallelism named (the others, ring).
    std::string a2a;
    for (size_t i = 0; i < plans.size() && i < rows; ++i)
        if (plans[i].layout.cp > 1 && plans[i].layout.cp_comm == CpComm::A2A)
            a2a += (a2a.empty() ? "" : ", ") + std::to_string(i + 1);
    if (!a2a.empty())
        o << "all-to-all context parallelism (cp_comm=a2a, Ulysses) in plan" << (a2a.find(',') != std::string::npos ? "s " : " ")
          << a2a << "; cp > 1 elsewhere is the K/V ring\n";
}

void printPlanBreakdown(std::ostream& o, const Problem& problem, const Plan& plan)
{
    const Prediction& p = plan.prediction;
    const TimeBreakdown& t = p.time_s;
    const MemoryBreakdown& m = p.memory_bytes;
    auto pct = [&](double part) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%.1f%%", p.step_time_s > 0 ? 100 * part / p.step_time_s : 0.0);
        return std::string(buf);
    };
    o << "layout " << toString(plan.layout) << "\n";
    o << "  step " << formatDuration(p.step_time_s) << " = compute " << formatDuration(t.compute) << " ("
      << pct(t.compute) << ") + recompute " << formatDuration(t.recompute) << " + TP " << formatDuration(t.tp_comm)
      << " + CP " << formatDuration(t.cp_comm) << " + PP " << formatDuration(t.pp_comm) << " + DP/ZeRO "
      << formatDuration(t.dp_comm) << (t.ep_comm > 0 ? " + EP " + formatDuration(t.ep_comm) : std::string())
      << " + bubble " << formatDuration(t.bubble) << " (" << pct(t.bubble)
      << ") + optimizer " << formatDuration(t.optimizer) << " + offload " << formatDuration(t.offload) << "\n";
    o << "  memory " << formatBytes(m.total()) << " of " << formatBytes(m.capacity) << " = weights "
      << formatBytes(m.weights) << " + gradients " << formatBytes(m.gradients) << " + optimizer "
      << formatBytes(m.optimizer) << " + activations " << formatBytes(m.activations) << " + buffers "
      << formatBytes(m.buffers) << " + reserve " << formatBytes(m.reserve) << "\n";
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  %s tokens/s, MFU %.1f%% (Megatron), %.1f%% (PaLM), %.1f%% (causal-aware), %s micro-batches; ",
                  formatSi(p.tokens_per_s, "").c_str(), 100 * p.mfu, 100 * p.mfu_palm, 100 * p.mfu_causal,
                  std::to_string(p.micro_batches).c_str());
    o << buf << "time to train " << formatSi(problem.training.tokens_to_train, "tokens") << " "
      << formatDuration(p.time_to_train_s) << ", cost " << money(p.cost_to_train_usd)
      << (p.cost_to_train_usd > 0 && !problem.cluster.node.price_kind.empty()
              ? " (" + problem.cluster.node.price_kind + " price)"
              : std::string())
      << "\n";
}

PlanDocument loadPlanFile(const std::string& path, std::ostream& notes)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        throw InputError("--plan: cannot read " + path + ": " + f.errorString().toStdString());
    FieldErrors errors;
    const QJsonObject json = parseJsonObject(f.readAll(), path, errors);
    if (!errors.empty())
        throw InputError(errors);
    auto doc = planDocumentFromJson(json, path, errors);
    if (!doc)
        throw InputError(errors);
    for (const std::string& note : doc->notes)
        notes << "note: " << path << ": " << note << "\n";
    return *doc;
}

int runPlan(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("plan");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    const Store store(ctx.db_path, ctx.store_options);
    const SpecCatalog& catalog = store.specs();
    SearchSettings s = searchSettingsFromArgs(a, store.runs(), std::nullopt);
    s.request.problem = problemFromArgs(a, catalog);
    const Problem& problem = s.request.problem;
    checkObjective(s.request.objective, problem);

    s.control.cancel = interruptFlag();  // Ctrl-C: no table, no --out file
    const SearchResult result = search(s.request, s.control);
    if (result.stats.cancelled)
        throw Interrupted();
    const QJsonObject doc = planDocument(result);
    if (auto out = a.value("out"))
        writeDocument(doc, *out);
    if (a.flag("json")) {
        ctx.out << QJsonDocument(doc).toJson(QJsonDocument::Indented).toStdString();
    } else {
        ctx.out << problem.model.name << " on " << problem.cluster.nodes << " x " << problem.cluster.node.name << " ("
                << problem.cluster.devices() << " devices), global batch " << problem.training.global_batch << " x "
                << problem.training.seq_len << " tokens"
                << (quantizedRecipe(problem.training.precision)
                        ? std::string(", ") + toString(problem.training.precision) + " recipe"
                        : std::string())
                << ", objective " << toString(result.objective) << ", cost model "
                << result.request.cost_model.name << ", constraints " << constraintsText(result.request.space)
                << (result.request.framework ? std::string(", runnable by ") + toString(*result.request.framework)
                                             : std::string())
                << "\n\n";
        if (!result.top.empty()) {
            printPlanTable(ctx.out, result.top, result.top.size());
            ctx.out << "\nbest ";
            printPlanBreakdown(ctx.out, problem, result.top.front());
            // The front from fastest to smallest; long fronts are thinned evenly (all of it is in --json).
            const auto& front = result.pareto_step_memory.points();
            constexpr size_t kShown = 12;
            ctx.out << "\nPareto front, step time vs memory per device (" << front.size() << " layouts"
                    << (front.size() > kShown ? ", " + std::to_string(kShown) + " shown; all in --json" : std::string())
                    << "):\n";
            size_t last = front.size();
            for (size_t k = 0; k < std::min(front.size(), kShown); ++k) {
                const size_t i = front.size() <= kShown ? k : k * (front.size() - 1) / (kShown - 1);
                if (i == last)
                    continue;
                last = i;
                char buf[64];
                std::snprintf(buf, sizeof buf, "  %10s %11s  ", formatDuration(front[i].x).c_str(),
                              formatBytes(front[i].y).c_str());
                ctx.out << buf << toString(front[i].item.layout) << "\n";
            }
            ctx.out << "\n";
        }
        printCounts(ctx.out, result.stats);
        if (auto out = a.value("out"))
            ctx.out << "wrote " << *out << "\n";
    }
    if (result.top.empty()) {
        ctx.err << "shardscope-cli: no feasible layout for " << problem.model.name << " on " << problem.cluster.nodes
                << " x " << problem.cluster.node.name
                << (result.stats.mesh_shapes == 0 ? ": the constraints leave no mesh shape dp x tp x pp x cp to search\n"
                                                  : " (see the infeasible counts)\n");
        return kExitFailure;
    }
    return kExitOk;
}

int runSweep(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("sweep");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    const auto nodesText = a.value("nodes");
    if (!nodesText)
        throw UsageError("missing --nodes (a list \"1,2,4\" or a range \"1..512\")");
    FieldErrors errors;
    const std::vector<int> nodes = parseNodeCounts(*nodesText, "--nodes", errors);
    if (!errors.empty())
        throw InputError(errors);
    const Store store(ctx.db_path, ctx.store_options);
    const SpecCatalog& catalog = store.specs();
    // The problem at the first size: every other option is checked once, here.
    const Problem base = problemFromArgs(CliArgs(withOption(args, "nodes", std::to_string(nodes.front())), help),
                                         catalog);
    SearchSettings s = searchSettingsFromArgs(a, store.runs(), 1);
    s.request.problem = base;
    checkObjective(s.request.objective, base);

    Progress progress(ctx.err, a.flag("quiet"));
    watch(s.control, progress, "sweep of " + std::to_string(nodes.size()) + " sizes");
    const SweepResult sweep = sweepNodes(s.request, nodes, s.control);
    progress.clear();
    if (sweep.cancelled)
        throw Interrupted();
    if (a.flag("json")) {
        ctx.out << QJsonDocument(sweepDocument(sweep)).toJson(QJsonDocument::Indented).toStdString();
    } else {
        char buf[512];
        ctx.out << base.model.name << " on " << base.cluster.node.name << ", global batch " << base.training.global_batch
                << " x " << base.training.seq_len << " tokens, " << formatSi(base.training.tokens_to_train, "tokens")
                << " to train, objective " << toString(s.request.objective) << ", cost model "
                << s.request.cost_model.name << "\n\n";
        std::snprintf(buf, sizeof buf, "%6s %8s %10s %10s %6s %10s %12s %14s %8s  %s\n", "nodes", "devices", "step",
                      "tokens/s", "MFU", "memory", "to train", "cost", "scaling", "best layout");
        ctx.out << buf;
        for (const SweepPoint& p : sweep.points) {
            const Plan* best = p.result.best();
            if (!best) {
                const std::string why = !p.error.empty() ? p.error : "no feasible layout";
                std::snprintf(buf, sizeof buf, "%6d %8lld  %s\n", p.problem.cluster.nodes,
                              static_cast<long long>(p.problem.cluster.devices()), why.c_str());
                ctx.out << buf;
                continue;
            }
            const Prediction& pr = best->prediction;
            std::snprintf(buf, sizeof buf, "%6d %8lld %10s %10s %5.1f%% %10s %12s %14s %7.1f%%  %s\n",
                          p.problem.cluster.nodes, static_cast<long long>(p.problem.cluster.devices()),
                          formatDuration(pr.step_time_s).c_str(), formatSi(pr.tokens_per_s, "").c_str(), 100 * pr.mfu,
                          formatBytes(pr.memory_bytes.total()).c_str(), formatDuration(pr.time_to_train_s).c_str(),
                          money(pr.cost_to_train_usd).c_str(), 100 * p.scaling_efficiency,
                          toString(best->layout).c_str());
            ctx.out << buf;
        }
        ctx.out << "\nscaling: tokens/s per device relative to ";
        if (sweep.reference >= 0)
            ctx.out << sweep.points[size_t(sweep.reference)].problem.cluster.nodes << " nodes";
        else
            ctx.out << "(no size has a feasible plan)";
        ctx.out << "; not dominated in (time, cost):";
        for (int i : sweep.pareto_time_cost)
            ctx.out << " " << sweep.points[size_t(i)].problem.cluster.nodes;
        ctx.out << "\nswept " << sweep.points.size() << " sizes in " << formatDuration(sweep.seconds) << "\n";
    }
    return sweep.reference >= 0 ? kExitOk : kExitFailure;
}

int runCompare(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("compare");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    const auto typesText = a.value("node-types");
    if (!typesText)
        throw UsageError("missing --node-types (a list \"trn1.32xlarge,p5.48xlarge\")");
    if (a.value("node-type"))
        throw UsageError("compare takes --node-types A,B,C, not --node-type");
    const std::vector<std::string> types = splitList(*typesText);
    if (types.empty())
        throw UsageError("--node-types: no node type given");
    const auto nodesText = a.value("nodes");
    if (!nodesText)
        throw UsageError("missing --nodes (one count for all node types, or one per node type)");
    FieldErrors errors;
    std::vector<int> nodes = parseNodeCounts(*nodesText, "--nodes", errors);
    if (!errors.empty())
        throw InputError(errors);
    if (nodes.size() == 1)
        nodes.assign(types.size(), nodes.front());
    if (nodes.size() != types.size())
        throw UsageError("--nodes: give one count, or one per node type (" + std::to_string(types.size()) + ")");

    const Store store(ctx.db_path, ctx.store_options);
    const SpecCatalog& catalog = store.specs();
    SearchSettings s = searchSettingsFromArgs(a, store.runs(), 1);
    std::vector<Problem> problems;
    std::vector<std::string> unpriced;
    for (size_t i = 0; i < types.size(); ++i) {
        std::vector<std::string> one = withOption(args, "node-types", types[i]);
        one = withOption(one, "nodes", std::to_string(nodes[i]));
        // problemFromArgs reads --node-type; node-types is renamed to it.
        for (std::string& w : one)
            if (w == "--node-types")
                w = "--node-type";
        problems.push_back(problemFromArgs(CliArgs(one, help), catalog));
        if (!objectiveProblem(s.request.objective, problems.back()).empty())
            unpriced.push_back(types[i]);
    }
    if (!unpriced.empty()) {
        std::string list;
        for (const std::string& t : unpriced)
            list += (list.empty() ? "" : ", ") + t;
        throw InputError("--objective cost: no published price per node-hour for " + list +
                         "; rank by time or throughput instead");
    }

    s.request.problem = problems.front();
    Progress progress(ctx.err, a.flag("quiet"));
    watch(s.control, progress, "comparison of " + std::to_string(problems.size()) + " node types");
    const SweepResult cmp = compareProblems(s.request, problems, s.control);
    progress.clear();
    if (cmp.cancelled)
        throw Interrupted();
    if (a.flag("json")) {
        ctx.out << QJsonDocument(compareDocument(cmp)).toJson(QJsonDocument::Indented).toStdString();
    } else {
        const Problem& first = problems.front();
        char buf[512];
        ctx.out << first.model.name << ", global batch " << first.training.global_batch << " x "
                << first.training.seq_len << " tokens, " << formatSi(first.training.tokens_to_train, "tokens")
                << " to train, objective " << toString(s.request.objective) << ", cost model "
                << s.request.cost_model.name << "\n\n";
        std::snprintf(buf, sizeof buf, "%-18s %6s %8s %10s %10s %6s %12s %14s %10s  %s\n", "node type", "nodes",
                      "devices", "step", "tokens/s", "MFU", "to train", "cost", "per dev.", "best layout");
        ctx.out << buf;
        for (const SweepPoint& p : cmp.points) {
            const Plan* best = p.result.best();
            if (!best) {
                const std::string why = !p.error.empty() ? p.error : "no feasible layout";
                std::snprintf(buf, sizeof buf, "%-18s %6d %8lld  %s\n", p.problem.cluster.node.name.c_str(),
                              p.problem.cluster.nodes, static_cast<long long>(p.problem.cluster.devices()),
                              why.c_str());
                ctx.out << buf;
                continue;
            }
            const Prediction& pr = best->prediction;
            std::snprintf(buf, sizeof buf, "%-18s %6d %8lld %10s %10s %5.1f%% %12s %14s %9.2fx  %s\n",
                          p.problem.cluster.node.name.c_str(), p.problem.cluster.nodes,
                          static_cast<long long>(p.problem.cluster.devices()), formatDuration(pr.step_time_s).c_str(),
                          formatSi(pr.tokens_per_s, "").c_str(), 100 * pr.mfu,
                          formatDuration(pr.time_to_train_s).c_str(), money(pr.cost_to_train_usd).c_str(),
                          p.scaling_efficiency, toString(best->layout).c_str());
            ctx.out << buf;
        }
        ctx.out << "\nper dev.: tokens/s per device relative to the first node type with a plan\n"
                << "compared " << cmp.points.size() << " node types in " << formatDuration(cmp.seconds) << "\n";
    }
    return cmp.reference >= 0 ? kExitOk : kExitFailure;
}

} // namespace shardscope::cli
