// shardscope-cli report: a self-contained HTML or PDF report of a plan file, with the
// same charts as the GUI, rendered offscreen (headless: no display needed).
#include "CliArgs.h"
#include "Commands.h"
#include "PlanCommand.h"
#include "ProblemArgs.h"
#include "Progress.h"
#include "ReportBuilder.h"
#include "ScaledCase.h"
#include "Search.h"
#include "Store.h"
#include "Sweep.h"

#include <ostream>

namespace shardscope::cli {

int runReport(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("report");
    const std::string usage = usageText(help);
    const CliArgs a(args, help);
    a.expectPositional(0, usage);
    const auto planPath = a.value("plan");
    const auto out = a.value("out");
    if (!planPath || !out)
        throw UsageError("missing --plan or --out; usage: " + usage);
    ReportFormat format = ReportFormat::Html;
    if (const QString error = reportFormatFromPath(QString::fromStdString(*out), format); !error.isEmpty())
        throw UsageError("--out: " + error.toStdString());
    ChartFormat charts = ChartFormat::Png;
    if (auto c = a.value("charts")) {
        if (*c == "svg")
            charts = ChartFormat::Svg;
        else if (*c != "png")
            throw UsageError("--charts: \"" + *c + "\" is not png or svg");
        if (charts == ChartFormat::Svg && format == ReportFormat::Pdf)
            throw UsageError("--charts svg: a PDF report embeds its charts; SVG charts go with an HTML report");
    }

    const PlanDocument plan = loadPlanFile(*planPath, ctx.err);
    ReportInput input;
    Layout chosen;
    if (auto text = a.value("layout")) {
        chosen = layoutFromArg(*text, plan.problem);
    } else if (plan.best) {
        chosen = *plan.best;
    } else {
        throw InputError(*planPath + ": best: the plan has no feasible layout; give one with --layout");
    }
    // Exactly the saved plan: its layouts priced with its own terms, its constraints, no new search.
    input.chosen = pricePlan(plan.request, chosen);
    input.result = savedResult(plan);
    input.title = QStringLiteral("%1 on %2 x %3")
                      .arg(QString::fromStdString(plan.problem.model.name))
                      .arg(plan.problem.cluster.nodes)
                      .arg(QString::fromStdString(plan.problem.cluster.node.name));

    // The scaling curve around the plan's size: the same request (terms, constraints, objective)
    // searched at each node count, the best plan of each.
    std::vector<int> nodes;
    for (int n = std::max(1, plan.problem.cluster.nodes / 4); n <= plan.problem.cluster.nodes * 4; n *= 2)
        nodes.push_back(n);
    PlanRequest sweepRequest = plan.request;
    sweepRequest.top_k = 1;
    Progress progress(ctx.err, a.flag("quiet"));
    SearchControl control;
    control.cancel = interruptFlag();
    progress.update("report: the scaling curve (" + std::to_string(nodes.size()) + " sizes)");
    input.sweep = sweepNodes(sweepRequest, nodes, control);
    if (input.sweep.cancelled)
        throw Interrupted();

    // The latest validation of this plan, when it was validated (shardscope-cli validate --plan).
    {
        const Store store(ctx.db_path, ctx.store_options);
        const std::string name = validationRunName(plan.problem, chosen);
        for (const RunStore::ValidationRun& run : store.runs().validationRuns(1000))
            if (run.name == name) {
                input.validation = run.document;
                input.validation_when = QString::fromStdString(run.created_at);
                break;
            }
    }

    ReportBuilder builder(input, QString::fromStdString(*out), format, charts);
    // Chart by chart; the report (and its chart files) are written by finish() only, so Ctrl-C
    // before it leaves nothing behind.
    for (int step = 0; step < builder.steps(); ++step) {
        throwIfInterrupted();
        progress.update("report: " + std::to_string(step + 1) + " of " + std::to_string(builder.steps()) + ": " +
                        builder.stepName(step).toStdString());
        builder.runStep(step);
    }
    throwIfInterrupted();
    progress.clear();
    if (const QString error = builder.finish(); !error.isEmpty())
        throw std::runtime_error(error.toStdString());
    ctx.out << "wrote " << *out << " (" << builder.chartNames().size() << " charts";
    if (format == ReportFormat::Pdf)
        ctx.out << ", " << builder.pageCount() << " pages";
    ctx.out << ")\n";
    return kExitOk;
}

} // namespace shardscope::cli
