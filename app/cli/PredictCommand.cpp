// shardscope-cli predict: the cost model's prediction for one layout, as a readable
// breakdown or a "shardscope.prediction/1" document.
#include "CliArgs.h"
#include "Commands.h"
#include "CostModel.h"
#include "PlanCommand.h"
#include "PredictionJson.h"
#include "ProblemArgs.h"
#include "SpecJson.h"
#include "Store.h"
#include "Units.h"

#include <QJsonDocument>

#include <cstdio>
#include <ostream>

namespace shardscope::cli {

namespace {

std::string line(const char* label, double seconds, double step)
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-22s %12s  %5.1f%%\n", label, formatDuration(seconds).c_str(),
                  step > 0 ? 100 * seconds / step : 0.0);
    return buf;
}

std::string memLine(const char* label, double bytes, double capacity)
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-22s %12s  %5.1f%%\n", label, formatBytes(bytes).c_str(),
                  capacity > 0 ? 100 * bytes / capacity : 0.0);
    return buf;
}

void printReadable(std::ostream& o, const Problem& p, const Layout& l, const Prediction& pr)
{
    char buf[256];
    o << p.model.name << " on " << p.cluster.nodes << " x " << p.cluster.node.name << " (" << p.cluster.devices()
      << " devices), global batch " << p.training.global_batch << " x " << p.training.seq_len << " tokens"
      << (quantizedRecipe(p.training.precision) ? std::string(", ") + toString(p.training.precision) + " recipe" : "")
      << "\n";
    o << "layout " << toString(l) << "  (" << pr.micro_batches << " micro-batches per step)\n";
    if (l.zero_stage > 0) {
        // zero_group counts dp replicas (0: all of them); the shard group spans zero_group x cp devices.
        const std::int64_t group = std::int64_t(l.zeroGroupSize()) * l.cp;
        o << "ZeRO-" << l.zero_stage << " shard group: " << group << (group == 1 ? " device" : " devices")
          << " (zero_group " << l.zeroGroupSize() << " x cp " << l.cp << ")";
        if (group == 1)
            o << ": shards nothing (the model states of zero=0); the search does not offer it";
        o << "\n";
    }
    if (p.model.moe.enabled()) {
        // Megatron-LM's expert grid per stage: etp x ep x edp over the stage's tp x cp x dp devices.
        o << "experts: " << p.model.moe.experts / l.ep << " of " << p.model.moe.experts << " routed experts per device (ep "
          << l.ep << "), split over etp " << l.expertTensorParallel() << ", gradients over edp " << l.expertDataParallel();
        if (p.training.moe_imbalance != 1.0)
            o << "; busiest rank " << p.training.moe_imbalance << "x the mean load";
        o << "\n";
    }
    if (l.cp > 1 && !p.training.flash_attention)
        o << "note: Transformer Engine runs cp > 1 on fused attention only; this problem trains unfused attention "
             "(priced as asked, as the engine runs it; the search offers cp only with --flash-attention)\n";
    if (!pr.feasible)
        o << "NOT FEASIBLE: " << toString(pr.reason) << (pr.missing_figure ? std::string(": ") + pr.missing_figure : "")
          << "\n";
    o << "\nstep time " << formatDuration(pr.step_time_s) << "\n";
    const TimeBreakdown& t = pr.time_s;
    o << line("compute", t.compute, pr.step_time_s) << line("recompute", t.recompute, pr.step_time_s)
      << line("TP/SP communication", t.tp_comm, pr.step_time_s) << line("CP communication", t.cp_comm, pr.step_time_s)
      << line("PP communication", t.pp_comm, pr.step_time_s) << line("DP/ZeRO (exposed)", t.dp_comm, pr.step_time_s)
      << (p.model.moe.enabled() ? line("EP all-to-all (exposed)", t.ep_comm, pr.step_time_s) : std::string())
      << line("pipeline bubble", t.bubble, pr.step_time_s) << line("optimizer", t.optimizer, pr.step_time_s)
      << line("offload", t.offload, pr.step_time_s);
    const MemoryBreakdown& m = pr.memory_bytes;
    o << "\nmemory per device (stage " << pr.memory_stage << ") " << formatBytes(m.total()) << " of "
      << formatBytes(m.capacity) << "\n";
    o << memLine("weights", m.weights, m.capacity) << memLine("gradients", m.gradients, m.capacity)
      << memLine("optimizer states", m.optimizer, m.capacity) << memLine("activations", m.activations, m.capacity)
      << memLine("buffers", m.buffers, m.capacity) << memLine("reserve", m.reserve, m.capacity);
    if (p.model.moe.enabled())
        o << memLine("of which experts", m.experts, m.capacity);
    if (m.host_activations > 0)
        o << "  activations offloaded to host memory " << formatBytes(m.host_activations) << "\n";
    std::snprintf(buf, sizeof buf, "\nthroughput %s tokens/s, MFU %.1f%% (Megatron/Korthikanti), HFU %.1f%%\n",
                  formatSi(pr.tokens_per_s, "").c_str(), 100 * pr.mfu, 100 * pr.hfu);
    o << buf;
    std::snprintf(buf, sizeof buf, "MFU in other conventions: %.1f%% (PaLM: 6N + 12 L H Q T), %.1f%% (causal-aware: "
                                   "masked scores not counted)\n",
                  100 * pr.mfu_palm, 100 * pr.mfu_causal);
    o << buf;
    o << "time to train " << formatSi(p.training.tokens_to_train, "tokens") << ": "
      << formatDuration(pr.time_to_train_s);
    if (pr.cost_to_train_usd > 0) {
        std::snprintf(buf, sizeof buf, ", cost $%s%s", formatCount(std::int64_t(pr.cost_to_train_usd + 0.5)).c_str(),
                      p.cluster.node.price_kind.empty() ? "" : (" (" + p.cluster.node.price_kind + " price)").c_str());
        o << buf;
    } else {
        o << ", cost unknown (no published price for " << p.cluster.node.name << ")";
    }
    o << "\n";
}

} // namespace

int runPredict(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("predict");
    const CliArgs a(args, help);
    a.expectPositional(0, usageText(help));
    const Store store(ctx.db_path, ctx.store_options);
    // A plan file brings its problem and, unless --layout says otherwise, its best layout.
    std::optional<PlanDocument> plan;
    if (auto file = a.value("plan"))
        plan = loadPlanFile(*file, ctx.err);
    const Problem problem = plan ? plan->problem : problemFromArgs(a, store.specs());

    Layout layout;
    if (plan && !a.value("layout")) {
        if (!plan->best)
            throw InputError(*a.value("plan") + ": best: the plan has no feasible layout; give one with --layout");
        layout = *plan->best;  // validated when the file was read
    } else {
        layout = layoutFromArg(a.value("layout").value_or(""), problem);
    }

    // A plan is priced with the terms it was made with; --cost-model prices a problem given here.
    if (plan && a.value("cost-model"))
        throw UsageError("--cost-model: the plan file carries its own cost-model terms (profile \"" +
                         plan->request.cost_model.name + "\"); leave out --plan to price with another profile");
    // Likewise its framework; --framework prices a problem given here with that framework's kernels.
    if (plan && a.value("framework"))
        throw UsageError("--framework: the plan file carries its own framework (" +
                         std::string(plan->request.framework ? toString(*plan->request.framework) : "none") +
                         "); leave out --plan to price with another");
    std::optional<ExportFormat> framework = plan ? plan->request.framework : std::nullopt;
    if (auto name = a.value("framework")) {
        framework = exportFormatFromString(*name);
        if (!framework)
            throw UsageError("--framework: unknown framework \"" + *name + "\" (one of: " + exportFormatChoices() + ")");
    }
    const CostModel model(problem,
                          plan ? plan->request.cost_model
                               : store.runs().costModelParamsNamed(a.value("cost-model").value_or("default")),
                          framework);
    // The ledger behind the figures (predict --json carries it: a user can audit each figure
    // against its terms and each byte count against its collectives).
    CostLedger ledger;
    const Prediction prediction = model.evaluate(layout, &ledger);
    const bool explain = a.flag("explain");
    if (a.flag("json")) {
        QJsonObject doc = toJson(prediction, explain ? model.explain(layout) : std::vector<Term>{}, &ledger);
        doc.insert("problem", toJson(problem));
        doc.insert("layout", toJson(layout));
        doc.insert("cost_model", QString::fromStdString(model.params().name));
        doc.insert("framework", framework ? QJsonValue(QLatin1String(toString(*framework))) : QJsonValue());
        ctx.out << QJsonDocument(doc).toJson(QJsonDocument::Indented).toStdString();
        return kExitOk;
    }
    printReadable(ctx.out, problem, layout, prediction);
    if (explain) {
        ctx.out << "\nterms (stage " << prediction.memory_stage << " for memory, the slowest stage for time):\n";
        for (const Term& t : model.explain(layout)) {
            const bool bytes = t.figure.rfind("memory", 0) == 0;
            char buf[512];
            std::snprintf(buf, sizeof buf, "  %-26s %-46s %12s  %s\n", t.figure.c_str(), t.name.c_str(),
                          (bytes ? formatBytes(t.value) : formatDuration(t.value)).c_str(), t.formula.c_str());
            ctx.out << buf;
        }
        // The collectives behind the bytes (and the communication times when one stage sets them).
        ctx.out << "\ncollectives per step (stage " << ledger.bytes_stage << ", whose bytes are reported; times: stage "
                << ledger.time_stage << ", dp_comm stage " << ledger.dp_stage << "):\n";
        for (const Collective& c : ledger.collectives) {
            char buf[512];
            std::snprintf(buf, sizeof buf, "  %-4s %-15s %-12s %12s %10s calls %11s exposed %11s hidden  %s\n",
                          c.dimension == CommDimension::EmbeddingGroup ? "emb"
                          : c.dimension == CommDimension::AllDevices   ? "all"
                                                                       : toString(c.dimension),
                          toString(c.kind), toString(c.placement), formatBytes(c.bytes).c_str(),
                          formatSi(c.calls, "").c_str(), formatDuration(c.exposed_s).c_str(),
                          formatDuration(c.hidden_s).c_str(), c.what);
            ctx.out << buf;
        }
    }
    return kExitOk;
}

} // namespace shardscope::cli
