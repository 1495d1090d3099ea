#include "PlanFigures.h"
#include "Units.h"

#include <QCoreApplication>
#include <QObject>

#include <algorithm>
#include <utility>

namespace shardscope {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

} // namespace

QString pipelineTitle(const Layout& layout, const Prediction& prediction)
{
    const QString stages = layout.pp == 1 ? QObject::tr("1 stage") : QObject::tr("%1 stages").arg(layout.pp);
    const QString microBatches = prediction.micro_batches == 1 ? QObject::tr("1 micro-batch")
                                                               : QObject::tr("%1 micro-batches").arg(prediction.micro_batches);
    return QObject::tr("Pipeline schedule: %1, %2, %3%4")
        .arg(QLatin1String(toString(layout.schedule)), stages, microBatches,
             layout.schedule == PipelineSchedule::Interleaved ? QObject::tr(", v = %1").arg(layout.virtual_stages)
                                                              : QString());
}

QString figureName(const std::string& figure)
{
    static const std::pair<const char*, const char*> kNames[] = {
        {"time_s.compute", QT_TRANSLATE_NOOP("PlanFigures", "Step time: compute")},
        {"time_s.recompute", QT_TRANSLATE_NOOP("PlanFigures", "Step time: recomputation")},
        {"time_s.tp_comm", QT_TRANSLATE_NOOP("PlanFigures", "Step time: tensor/sequence-parallel communication")},
        {"time_s.cp_comm", QT_TRANSLATE_NOOP("PlanFigures", "Step time: context-parallel communication")},
        {"time_s.pp_comm", QT_TRANSLATE_NOOP("PlanFigures", "Step time: pipeline communication")},
        {"time_s.dp_comm", QT_TRANSLATE_NOOP("PlanFigures", "Step time: data-parallel / ZeRO communication")},
        {"time_s.ep_comm", QT_TRANSLATE_NOOP("PlanFigures", "Step time: expert-parallel all-to-all (token dispatch and combine)")},
        {"time_s.hidden.ep_comm", QT_TRANSLATE_NOOP("PlanFigures", "Hidden behind compute: expert-parallel all-to-all")},
        {"time_s.bubble", QT_TRANSLATE_NOOP("PlanFigures", "Step time: pipeline bubble")},
        {"time_s.optimizer", QT_TRANSLATE_NOOP("PlanFigures", "Step time: optimizer")},
        {"time_s.offload", QT_TRANSLATE_NOOP("PlanFigures", "Step time: offload")},
        {"memory_bytes.weights", QT_TRANSLATE_NOOP("PlanFigures", "Memory: weights")},
        {"memory_bytes.gradients", QT_TRANSLATE_NOOP("PlanFigures", "Memory: gradients")},
        {"memory_bytes.optimizer", QT_TRANSLATE_NOOP("PlanFigures", "Memory: optimizer states")},
        {"memory_bytes.activations", QT_TRANSLATE_NOOP("PlanFigures", "Memory: activations")},
        {"memory_bytes.buffers", QT_TRANSLATE_NOOP("PlanFigures", "Memory: communication buffers")},
        {"memory_bytes.reserve", QT_TRANSLATE_NOOP("PlanFigures", "Memory: reserve")},
        {"memory_bytes.experts", QT_TRANSLATE_NOOP("PlanFigures", "Memory: routed experts (of weights, gradients and optimizer states)")},
        {"memory_bytes.host_activations",
         QT_TRANSLATE_NOOP("PlanFigures", "Host memory: offloaded activations (not in the device's total)")},
    };
    for (const auto& [key, name] : kNames)
        if (figure == key)
            return QCoreApplication::translate("PlanFigures", name);
    return QString::fromStdString(figure);
}

PipelineTimeline pipelineTimelineFor(const Layout& layout, const Prediction& p)
{
    const double m = std::max(1, p.micro_batches);
    const TimeBreakdown& t = p.time_s;
    const double comm = (t.tp_comm + t.cp_comm + t.ep_comm) / m;
    const double forward = t.compute / 3 / m + comm / 2;
    const double backward = 2 * t.compute / 3 / m + t.recompute / m + comm / 2;
    return simulatePipeline(layout.schedule, layout.pp, p.micro_batches, layout.virtual_stages, forward, backward);
}

QString expertSummary(const Problem& problem, const Layout& layout, const Prediction& p)
{
    const MoeSpec& e = problem.model.moe;
    if (!e.enabled())
        return {};
    const int perRank = e.experts / std::max(1, layout.ep);
    QString s = QObject::tr("Experts: %1 routed over ep %2 (%3 per device), etp %4, expert data parallel %5")
                    .arg(e.experts)
                    .arg(layout.ep)
                    .arg(perRank)
                    .arg(layout.expertTensorParallel())
                    .arg(layout.expertDataParallel());
    const MemoryBreakdown& m = p.memory_bytes;
    if (m.experts > 0)
        s += QObject::tr("; their weights, gradients and optimizer states %1 of %2 per device")
                 .arg(q(formatBytes(m.experts)), q(formatBytes(m.weights + m.gradients + m.optimizer)));
    const TimeBreakdown& t = p.time_s;
    if (t.ep_comm > 0 || t.hidden.ep_comm > 0)
        s += QObject::tr("; all-to-all %1 per step on the critical path, %2 hidden")
                 .arg(q(formatDuration(t.ep_comm)), q(formatDuration(t.hidden.ep_comm)));
    return s;
}

QString predictionSummary(const Problem& problem, const Prediction& p)
{
    QString s = QObject::tr("%1 per step, %2 tokens/s, MFU %3%, memory %4 of %5")
                    .arg(q(formatDuration(p.step_time_s)), q(formatSi(p.tokens_per_s, "")))
                    .arg(100 * p.mfu, 0, 'f', 1)
                    .arg(q(formatBytes(p.memory_bytes.total())), q(formatBytes(p.memory_bytes.capacity)));
    // Offloaded activations live in host memory: named apart, never in the device's figure.
    if (p.memory_bytes.host_activations > 0)
        s += QObject::tr(" (+ %1 of activations in host memory)").arg(q(formatBytes(p.memory_bytes.host_activations)));
    s += QObject::tr(", %1 to train %2 tokens")
             .arg(q(formatDuration(p.time_to_train_s)), q(formatSi(problem.training.tokens_to_train, "")));
    if (p.cost_to_train_usd > 0) {
        s += QObject::tr(" for $%1").arg(q(formatCount(std::int64_t(p.cost_to_train_usd + 0.5))));
        // A price is on-demand, a capacity block or reserved: the cost says which.
        if (!problem.cluster.node.price_kind.empty())
            s += QObject::tr(" (%1 price)").arg(q(problem.cluster.node.price_kind));
    }
    if (!p.feasible)
        s = QObject::tr("NOT FEASIBLE (%1): ").arg(QLatin1String(toString(p.reason))) + s;
    return s;
}

} // namespace shardscope
