// A plain-text overview of a problem: the model's size and FLOPs, the cluster,
// model-state memory under ZeRO and the compute-bound lower bound on time and
// cost to train. Shared by `shardscope-cli demo` and the GUI's overview page.
#include "ProblemOverview.h"
#include "EntrySummary.h"
#include "ModelStateMemory.h"
#include "Units.h"

#include <cstdio>
#include <sstream>

namespace shardscope {

namespace {

std::string percent(double fraction)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
    return buf;
}

} // namespace

Problem defaultProblem(const SpecLookup& specs)
{
    Problem p;
    p.model = specs.model("gpt3-175b");
    p.cluster.node = specs.node("trn1.32xlarge");
    p.cluster.nodes = 64;
    p.training.seq_len = 2048;
    p.training.global_batch = 1536;
    p.training.tokens_to_train = 300e9;
    return p;
}

std::string problemOverview(const Problem& p)
{
    std::ostringstream o;
    o << "ShardScope: " << p.model.display_name << " on " << p.cluster.nodes << " x " << p.cluster.node.name << "\n\n";
    const ModelSpec& m = p.model;
    const NodeType& node = p.cluster.node;
    const ChipSpec& chip = node.chip;
    const double params = double(parameterCount(m));
    const double flopsPerToken = double(forwardFlopsPerToken(m, p.training.seq_len));
    // Forward + backward = 3x forward matmul FLOPs (no recomputation counted: model FLOPs).
    const double trainFlops = 3.0 * flopsPerToken * p.training.tokens_to_train;
    const double peak = double(p.cluster.chips()) * chip.peakFlops(computeType(p.training.precision));
    const double hbmTotal = double(p.cluster.chips()) * chip.hbm_bytes;
    const TrainingSpec& t = p.training;
    const ModelStateBytes replicated = modelStateBytes(params, 0, 1, t.precision, t.optimizer, t.main_grads);
    const ModelStateBytes sharded =
        modelStateBytes(params, 3, int(p.cluster.devices()), t.precision, t.optimizer, t.main_grads);
    const double secondsAtPeak = trainFlops / peak;

    o << "Model " << m.name << ": " << summarize(m) << "\n";
    // 2 FLOPs per parameter a token passes through: with MoE the active ones (the top k of each
    // block's experts), not the total, which a token never multiplies by (issue 16: "-85.2%").
    const double active = double(parameterBreakdown(m).active_per_token);
    o << "  forward matmul FLOPs per token at seq " << p.training.seq_len << ": "
      << formatSi(flopsPerToken, "FLOP") << " (" << percent(flopsPerToken / (2 * active) - 1) << " above 2P"
      << (m.moe.enabled() ? ", P = " + formatCount(std::int64_t(active)) + " active parameters" : std::string())
      << ": attention scores and logits)\n";
    o << "  training FLOPs for " << formatSi(p.training.tokens_to_train, "tokens") << ": "
      << formatSi(trainFlops, "FLOP") << " (forward + backward, no recomputation)\n\n";

    o << "Cluster: " << p.cluster.nodes << " x " << node.name << " = " << p.cluster.chips() << " " << chip.name
      << " chips, " << p.cluster.devices() << " devices\n";
    o << "  node: " << summarize(node) << "\n";
    o << "  peak " << toString(computeType(p.training.precision)) << ": " << formatSi(peak, "FLOP/s")
      << ", HBM " << formatBytes(hbmTotal) << " in all, " << formatBytes(chip.hbmBytesPerDevice())
      << " per device\n\n";

    o << "Model states with mixed-precision Adam (Rajbhandari et al. 2020, 16 bytes/parameter):\n";
    o << "  replicated on every device (no ZeRO): " << formatBytes(replicated.total()) << " per device, "
      << (replicated.total() <= chip.hbmBytesPerDevice() ? "fits" : "does NOT fit") << " in "
      << formatBytes(chip.hbmBytesPerDevice()) << "\n";
    o << "  fully sharded over all " << p.cluster.devices() << " devices (ZeRO-3): " << formatBytes(sharded.total())
      << " per device = " << percent(sharded.total() / chip.hbmBytesPerDevice()) << " of HBM\n\n";

    o << "Lower bound on time to train (every chip at 100% of peak, no communication): "
      << formatDuration(secondsAtPeak) << "\n";
    if (node.price_per_node_hour_usd > 0) {
        const double cost = secondsAtPeak / 3600.0 * p.cluster.nodes * node.price_per_node_hour_usd;
        char price[32];
        std::snprintf(price, sizeof price, "$%.2f", node.price_per_node_hour_usd);
        o << "  and on cost at " << price << " per node-hour"
          << (node.price_kind.empty() ? "" : " (" + node.price_kind + ")") << ": $"
          << formatCount(std::int64_t(cost + 0.5)) << "\n";
    }
    return o.str();
}

} // namespace shardscope
