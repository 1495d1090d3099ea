// shardscope-cli demo: what ShardScope knows about the default problem,
// GPT-3 175B on 64 trn1.32xlarge, computed from the catalog.
#include "Catalog.h"
#include "CliArgs.h"
#include "Commands.h"
#include "ProblemOverview.h"

#include <ostream>

namespace shardscope::cli {

int runDemo(const std::vector<std::string>& args, Context& ctx)
{
    const CliArgs a(args, {"model", "node-type", "nodes", "seq", "tokens"}, {});
    a.expectPositional(0, "shardscope-cli demo [--model NAME] [--node-type NAME] [--nodes N] [--seq S] [--tokens T]");
    Catalog catalog(ctx.db_path);
    for (const std::string& n : catalog.notices())
        ctx.err << "shardscope-cli: " << n << "\n";

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
    ctx.out << "\nThe planner (shardscope-cli plan) turns this into ranked layouts with predicted step times;\n"
               "browse the catalog with: shardscope-cli catalog list\n";
    return kExitOk;
}

} // namespace shardscope::cli
