#include "PlanFigures.h"
#include "Units.h"

#include <QObject>

#include <algorithm>

namespace shardscope {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

} // namespace

PipelineTimeline pipelineTimelineFor(const Layout& layout, const Prediction& p)
{
    const double m = std::max(1, p.micro_batches);
    const TimeBreakdown& t = p.time_s;
    const double comm = (t.tp_comm + t.cp_comm) / m;
    const double forward = t.compute / 3 / m + comm / 2;
    const double backward = 2 * t.compute / 3 / m + t.recompute / m + comm / 2;
    return simulatePipeline(layout.schedule, layout.pp, p.micro_batches, layout.virtual_stages, forward, backward);
}

QString predictionSummary(const Problem& problem, const Prediction& p)
{
    QString s = QObject::tr("%1 per step, %2 tokens/s, MFU %3%, memory %4 of %5")
                    .arg(q(formatDuration(p.step_time_s)), q(formatSi(p.tokens_per_s, "")))
                    .arg(100 * p.mfu, 0, 'f', 1)
                    .arg(q(formatBytes(p.memory_bytes.total())), q(formatBytes(p.memory_bytes.capacity)));
    s += QObject::tr(", %1 to train %2 tokens")
             .arg(q(formatDuration(p.time_to_train_s)), q(formatSi(problem.training.tokens_to_train, "")));
    if (p.cost_to_train_usd > 0)
        s += QObject::tr(" for $%1").arg(q(formatCount(std::int64_t(p.cost_to_train_usd + 0.5))));
    if (!p.feasible)
        s = QObject::tr("NOT FEASIBLE (%1): ").arg(QLatin1String(toString(p.reason))) + s;
    return s;
}

} // namespace shardscope
