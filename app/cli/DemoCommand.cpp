// shardscope-cli demo: what ShardScope knows about the default problem,
// GPT-3 175B on 64 trn1.32xlarge, computed from the catalog.
#include "CliArgs.h"
#include "Commands.h"
#include "CostModel.h"
#include "PlanCommand.h"
#include "ProblemOverview.h"
#include "Search.h"
#include "Store.h"
#include "Units.h"

#include <ostream>

namespace shardscope::cli {

int runDemo(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("demo");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    const Store store(ctx.db_path, ctx.store_options);
    for (const std::string& n : store.notices())
        ctx.err << "shardscope-cli: " << n << "\n";
    const SpecCatalog& catalog = store.specs();

    Problem p = defaultProblem(catalog);
    if (auto model = a.value("model"))
        p.model = catalog.model(*model);
    if (auto node = a.value("node-type"))
        p.cluster.node = catalog.node(*node);
    p.cluster.nodes = a.integer("nodes", p.cluster.nodes, 1, 1'000'000);
    p.training.seq_len = a.integer("seq", std::min(p.model.max_seq, p.training.seq_len), 1, 1 << 24);
    p.training.tokens_to_train = a.number("tokens", p.training.tokens_to_train, 1, 1e16);
    if (FieldErrors errors = validate(p); !errors.empty())
        throw InputError(errors);

    ctx.out << problemOverview(p);

    // The planner on the same cluster, at a global batch of 1024 sequences (issue 4's demo).
    Problem planned = p;
    planned.training.global_batch = 1024;
    const CostModel model(planned);
    SearchOptions options;
    options.top_k = 5;
    const SearchResult result = search(model, SearchSpace{}, options);
    ctx.out << "\nBest layouts for global batch " << planned.training.global_batch << " x " << planned.training.seq_len
            << " tokens (shardscope-cli plan), by throughput:\n";
    if (const Plan* best = result.best()) {
        printPlanTable(ctx.out, result.top, result.top.size());
        ctx.out << "\nbest ";
        printPlanBreakdown(ctx.out, planned, *best);
    } else {
        ctx.out << "  no feasible layout\n";
    }
    ctx.out << "  (" << formatCount(result.stats.candidates) << " legal layouts: " << formatCount(result.stats.evaluated)
            << " priced, " << formatCount(result.stats.pruned) << " pruned by memory, "
            << formatCount(result.stats.feasible) << " feasible, in " << formatDuration(result.stats.seconds) << ")\n";
    ctx.out << "\nbrowse the catalog with: shardscope-cli catalog list\n";
    return kExitOk;
}

} // namespace shardscope::cli
