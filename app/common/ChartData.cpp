#include "ChartData.h"
#include "Search.h"
#include "Sweep.h"
#include "Units.h"

#include <QObject>

#include <algorithm>
#include <cmath>

namespace shardscope {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDay = 86400.0;

QString layoutText(const Layout& l) { return QString::fromStdString(toString(l)); }

// "1,978,515 on-demand": a plan's cost to train in dollars with the kind of its price.
QString costText(const Plan& best, const SweepPoint& point)
{
    const std::string& kind = point.problem.cluster.node.price_kind;
    return QString::fromStdString(formatCount(std::int64_t(best.prediction.cost_to_train_usd + 0.5)) +
                                  (kind.empty() ? "" : " " + kind));
}

QString nodeCountText(int nodes) { return nodes == 1 ? QObject::tr("1 node") : QObject::tr("%1 nodes").arg(nodes); }

// Why a point has no plan, with the number of layouts that failed for it or without.
QString noPlanReason(const SweepPoint& point, bool withCount)
{
    if (!point.error.empty())
        return QString::fromStdString(point.error).section(QLatin1Char('\n'), 0, 0);
    // The reason most layouts failed for (out of memory, over the limit, ...).
    std::string reason;
    std::int64_t most = 0;
    for (const auto& [why, count] : point.result.stats.infeasible_by_reason)
        if (count > most && why.rfind("mesh:", 0) != 0) {
            most = count;
            reason = why;
        }
    if (reason.empty())
        return point.result.stats.mesh_shapes == 0 ? QObject::tr("no mesh shape fits the constraints")
                                                   : QObject::tr("no feasible layout");
    if (!withCount)
        return QString::fromStdString(reason);
    return QObject::tr("%1 (%2 layouts)").arg(QString::fromStdString(reason), QString::fromStdString(formatCount(most)));
}

} // namespace

XYChartData paretoChartData(const SearchResult& result, const Layout* selected)
{
    XYChartData memory{QObject::tr("Pareto front: step time vs memory per device"), QObject::tr("step time (s, log scale)"),
                       QObject::tr("memory (GiB)"), true, 10, {},
                       QObject::tr("No layout fits: the Plans page (Show infeasible) says why each one fails.")};
    XYSeriesData front{QObject::tr("Pareto front"), {}, true, false, -1};
    XYSeriesData top{QObject::tr("top plans"), {}, false, false, -1};
    XYSeriesData chosen{QObject::tr("selected plan"), {}, false, true, -1};
    for (const auto& p : result.pareto_step_memory.points())
        front.points.push_back({p.x, p.y / kGiB, layoutText(p.item.layout)});
    for (const Plan& plan : result.top) {
        const XYPoint point{plan.prediction.step_time_s, plan.prediction.memory_bytes.total() / kGiB,
                            layoutText(plan.layout)};
        top.points.push_back(point);
        if (selected && plan.layout == *selected)
            chosen.points.push_back(point);
    }
    memory.series = {front, top};
    if (!chosen.points.isEmpty())
        memory.series.push_back(chosen);
    return memory;
}

XYChartData scalingChartData(const SweepResult& sweep)
{
    XYChartData d{QObject::tr("Scaling over node counts (best plan at each size)"), QObject::tr("nodes"),
                  QObject::tr("tokens/s per device"), true, 2, {},
                  QObject::tr("No node count has a plan: Explore says why for each.")};
    XYSeriesData perDevice{QObject::tr("tokens/s per device"), {}, true, false, -1};
    // Perfect scaling is the reference point's tokens/s per device at every size, the reference
    // being the sweep's (Sweep.h): the smallest size with a plan, so the line never starts at a
    // size that does not fit. Smaller sizes that do not fit are named on the axis; each point
    // is labelled with its scaling efficiency, so a point above 100% is read as what it is.
    const SweepPoint* ref = nullptr;
    if (sweep.reference >= 0 && size_t(sweep.reference) < sweep.points.size())
        ref = &sweep.points[size_t(sweep.reference)];
    for (size_t i = 0; !ref && i < sweep.points.size(); ++i)  // a result put together by hand
        if (sweep.points[i].result.best())
            ref = &sweep.points[i];
    XYSeriesData ideal{ref ? QObject::tr("perfect scaling from %1").arg(nodeCountText(ref->problem.cluster.nodes))
                           : QObject::tr("perfect scaling"),
                       {}, true, false, -1};
    const double refPerDevice =
        ref ? ref->result.best()->prediction.tokens_per_s / double(ref->problem.cluster.devices()) : 0.0;
    QStringList noPlan;
    QString lastReason;
    bool aboveIdeal = false;
    // The share of its speed memory costs a size (1 - best that fits / fastest that does not):
    // at the reference, and the most among the sizes above perfect scaling.
    double refMemoryCost = 0, aboveMemoryCost = 0;
    for (const SweepPoint& point : sweep.points) {
        const Plan* best = point.result.best();
        const int nodes = point.problem.cluster.nodes;
        if (!best) {
            noPlan << QString::number(nodes);
            lastReason = noPlanReason(point, false);  // short: the axis title has one line
            continue;
        }
        const double value = best->prediction.tokens_per_s / double(point.problem.cluster.devices());
        const double efficiency = 100 * value / refPerDevice;  // the sweep's scaling_efficiency
        // The fastest layout priced that did not fit: what more memory would give at least
        // (pruned layouts are not priced).
        double fastestUnfit = 0;
        for (const Plan& p : point.result.top_infeasible)
            fastestUnfit = std::max(fastestUnfit, p.prediction.tokens_per_s);
        QString hover = QObject::tr("%1: %2, scaling efficiency %3%")
                            .arg(nodeCountText(nodes), layoutText(best->layout))
                            .arg(efficiency, 0, 'f', 1);
        if (fastestUnfit > best->prediction.tokens_per_s)
            hover += QObject::tr("; a layout that does not fit would be %1% faster")
                         .arg(100 * (fastestUnfit / best->prediction.tokens_per_s - 1), 0, 'f', 0);
        const double memoryCost = fastestUnfit > 0 ? std::max(0.0, 1 - best->prediction.tokens_per_s / fastestUnfit) : 0.0;
        if (&point == ref)
            refMemoryCost = memoryCost;
        if (std::round(efficiency * 10) > 1000) {  // above 100.0% as printed
            aboveIdeal = true;
            aboveMemoryCost = std::max(aboveMemoryCost, memoryCost);
        }
        perDevice.points.push_back({double(nodes), value, hover, QStringLiteral("%1%").arg(efficiency, 0, 'f', 1)});
        ideal.points.push_back({double(nodes), refPerDevice, QString()});
    }
    if (!noPlan.isEmpty())
        d.x_axis += QObject::tr(" (no plan at %1: %2)").arg(noPlan.join(QStringLiteral(", ")), lastReason);
    // Above perfect scaling: said why, on the line itself, when memory costs the reference more
    // than those sizes.
    if (aboveIdeal && refMemoryCost > aboveMemoryCost)
        ideal.name += QObject::tr(" (≥%1% lost to memory)").arg(100 * refMemoryCost, 0, 'f', 0);
    else if (aboveIdeal)
        d.x_axis += QObject::tr(" (over 100%: faster per device than %1)").arg(nodeCountText(ref->problem.cluster.nodes));
    d.series = {perDevice, ideal};
    return d;
}

QString noPlanReason(const SweepPoint& point) { return noPlanReason(point, true); }

XYChartData timeCostChartData(const SweepResult& sweep, const SweepResult& comparison)
{
    XYChartData cost{QObject::tr("Time vs cost to train (best plan of each size and node type)"),
                     QObject::tr("time to train (days, log scale)"), QObject::tr("cost ($M)"), true, 10, {},
                     QObject::tr("No plan with a published price: Explore names the node types without one.")};
    // The sweep's node type over its node counts as a line with a marker and a label per node
    // count, and each compared node type as its own point series named in the legend. Time on a
    // log axis: each doubling of the nodes about halves it, so the sizes are spread evenly.
    const QString swept = sweep.points.empty() ? QString()
                                               : QString::fromStdString(sweep.points.front().problem.cluster.node.name);
    XYSeriesData sizes{swept.isEmpty() ? QObject::tr("node counts") : QObject::tr("%1, node counts").arg(swept), {},
                       true, false, 0};
    auto add = [](XYSeriesData& series, const SweepPoint& point, bool tagged) {
        if (const Plan* best = point.result.best(); best && best->prediction.cost_to_train_usd > 0)
            series.points.push_back({best->prediction.time_to_train_s / kDay, best->prediction.cost_to_train_usd / 1e6,
                                     QObject::tr("%1 x %2: $%3, %4")
                                         .arg(point.problem.cluster.nodes)
                                         .arg(QString::fromStdString(point.problem.cluster.node.name))
                                         .arg(costText(*best, point), layoutText(best->layout)),
                                     tagged ? nodeCountText(point.problem.cluster.nodes) : QString()});
    };
    for (const SweepPoint& point : sweep.points)
        add(sizes, point, true);
    cost.series = {sizes};
    int color = 1;
    QStringList unpriced, noPlan;
    for (const SweepPoint& point : comparison.points) {
        XYSeriesData type{QObject::tr("%1 x %2").arg(point.problem.cluster.nodes).arg(
                              QString::fromStdString(point.problem.cluster.node.name)),
                          {}, false, false, color};
        add(type, point, false);
        if (type.points.isEmpty()) {
            // Off the chart for one of two reasons, said apart: no plan at all, or no price.
            const QString name = QString::fromStdString(point.problem.cluster.node.name);
            if (!point.result.best())
                noPlan << QObject::tr("%1: %2").arg(name, noPlanReason(point));
            else
                unpriced << name;
            continue;
        }
        cost.series.push_back(type);
        ++color;
    }
    if (cost.series.size() == 1 && comparison.points.empty())
        cost.series.push_back({QObject::tr("node types"), {}, false, true, -1});  // the empty chart's legend
    // The prices' kind (on-demand, capacity block, ...), so a cost is never read as another kind.
    QStringList kinds;
    auto addKind = [&](const SweepPoint& point) {
        const QString kind = QString::fromStdString(point.problem.cluster.node.price_kind);
        const Plan* best = point.result.best();
        if (best && best->prediction.cost_to_train_usd > 0 && !kind.isEmpty() && !kinds.contains(kind))
            kinds << kind;
    };
    for (const SweepPoint& point : sweep.points)
        addKind(point);
    for (const SweepPoint& point : comparison.points)
        addKind(point);
    // In the title: the vertical axis has room for "cost ($M)" alone at 1100x720. Which node
    // type has which kind: each point's hover and the Node types chart.
    if (!kinds.isEmpty())
        cost.title = QObject::tr("Time vs cost to train, best plans (%1 prices)")
                         .arg(kinds.join(QStringLiteral(", ")));
    if (!noPlan.isEmpty())
        cost.x_axis += QObject::tr(" (no plan: %1)").arg(noPlan.join(QStringLiteral("; ")));
    if (!unpriced.isEmpty())
        cost.x_axis += QObject::tr(" (no published price: %1)").arg(unpriced.join(QStringLiteral(", ")));
    return cost;
}

StackedBarsData nodeTypesChartData(const SweepResult& comparison)
{
    StackedBarsData d;
    d.title = QObject::tr("Node types: time to train (best plan each)");
    d.value_axis = QObject::tr("days");
    d.horizontal = true;
    BarSet days{QObject::tr("time to train"), {}, -1};
    for (const SweepPoint& point : comparison.points) {
        const Plan* best = point.result.best();
        // Two lines (the axis draws its labels as rich text): the name, then what it costs and
        // the kind of price, or why there is no plan; on one line they were cut at 1100x720.
        QString why;
        if (best && best->prediction.cost_to_train_usd > 0)
            why = QStringLiteral("($%1)").arg(costText(*best, point));
        else if (!best)
            why = QObject::tr("(no plan: %1)").arg(noPlanReason(point));
        else
            why = QObject::tr("(no price)");
        d.categories << QStringLiteral("%1<br>%2").arg(QString::fromStdString(point.problem.cluster.node.name).toHtmlEscaped(),
                                                      why.toHtmlEscaped());
        days.values << (best ? best->prediction.time_to_train_s / kDay : 0.0);
    }
    d.sets = {days};
    return d;
}

StackedBarsData memoryChartData(const Prediction& p)
{
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    const MemoryBreakdown& m = p.memory_bytes;
    StackedBarsData d;
    d.title = QObject::tr("Memory per device (stage %1) vs HBM %2 GiB")
                  .arg(p.memory_stage)
                  .arg(m.capacity / GiB, 0, 'g', 3);
    d.value_axis = QObject::tr("GiB");
    d.categories = {QObject::tr("device")};
    d.sets = {{QObject::tr("weights"), {m.weights / GiB}},
              {QObject::tr("gradients"), {m.gradients / GiB}},
              {QObject::tr("optimizer"), {m.optimizer / GiB}},
              {QObject::tr("activations"), {m.activations / GiB}},
              {QObject::tr("buffers"), {m.buffers / GiB}},
              {QObject::tr("reserve"), {m.reserve / GiB}}};
    // A mixture of experts: the routed experts' share of weights + gradients + optimizer
    // (memory_bytes.experts, a part of those three, not a fourth term) as a second, hatched bar
    // beside the device's, so the first still adds up to the total and nothing is counted twice.
    // Short category names and no legend entry: at 1100x720 the chart is about 360 x 200 px and
    // a seventh entry or a longer name is cut; the bar's tooltip names it whole.
    if (m.experts > 0) {
        d.categories = {QObject::tr("all"), QObject::tr("MoE")};
        for (BarSet& set : d.sets)
            set.values << 0.0;
        BarSet experts{QObject::tr("routed experts, of weights + gradients + optimizer"), {0.0, m.experts / GiB}};
        experts.overlapped = true;
        experts.in_legend = false;
        d.sets << experts;
    }
    d.limit = m.capacity / GiB;
    d.limit_name = QObject::tr("HBM capacity");
    return d;
}

QVector<StepTimePart> stepTimeParts(const TimeBreakdown& t)
{
    return {{QObject::tr("compute"), t.compute, 0},
            {QObject::tr("recompute"), t.recompute, 0},
            {QObject::tr("TP/SP comm"), t.tp_comm, t.hidden.tp_comm},
            {QObject::tr("CP comm"), t.cp_comm, t.hidden.cp_comm},
            {QObject::tr("PP comm"), t.pp_comm, 0},
            {QObject::tr("DP/ZeRO comm"), t.dp_comm, t.hidden.dp_comm},
            // MoE token dispatch and combine over the ep group (time_s.ep_comm, hidden.ep_comm).
            {QObject::tr("EP all-to-all"), t.ep_comm, t.hidden.ep_comm},
            {QObject::tr("bubble"), t.bubble, 0},
            {QObject::tr("optimizer"), t.optimizer, 0},
            {QObject::tr("offload"), t.offload, 0}};
}

StackedBarsData stepTimeChartData(const Prediction& p)
{
    StackedBarsData d;
    d.title = QObject::tr("Step time %1").arg(QString::fromStdString(formatDuration(p.step_time_s)));
    d.value_axis = QObject::tr("seconds per step");
    d.horizontal = true;
    // Narrower than this share of the step a segment is a hairline or nothing at the sizes the
    // chart is drawn (a 500-px bar: under 2.5 px): not drawn, and so not in the legend; the
    // chart's note names it with its time.
    const double visible = kStepTimeVisibleShare * p.step_time_s;
    const QString criticalPath = QObject::tr("critical path"), hiddenLane = QObject::tr("hidden behind compute");
    const QVector<StepTimePart> parts = stepTimeParts(p.time_s);
    const bool hiddenLaneDrawn = std::any_of(parts.begin(), parts.end(), [&](const StepTimePart& part) {
        return part.hidden >= visible && part.hidden > 0;
    });
    d.categories = {criticalPath};
    if (hiddenLaneDrawn)
        d.categories << hiddenLane;
    QStringList notDrawn;
    auto tooSmall = [&](const QString& name, double value) {
        notDrawn << QStringLiteral("%1 %2").arg(name, QString::fromStdString(formatDuration(value)));
    };
    int color = 0;
    for (const StepTimePart& part : parts) {
        if (part.exposed >= visible && part.exposed > 0) {
            BarSet set{part.name, {part.exposed}, color};
            if (hiddenLaneDrawn)
                set.values << 0.0;
            d.sets.push_back(set);
        } else if (part.exposed > 0) {
            tooSmall(part.name, part.exposed);
        }
        if (part.hidden >= visible && part.hidden > 0) {
            BarSet set{QObject::tr("%1, hidden").arg(part.name), {0.0, part.hidden}, color};
            set.overlapped = true;
            // Beside its exposed part it is the same colour, hatched, on the lane named "hidden
            // behind compute": a legend entry of its own says nothing more and crowds the legend
            // (at 1100x720 "DP/ZeRO comm, hidden" was cut). Its tooltip names it whole.
            set.in_legend = !(part.exposed >= visible && part.exposed > 0);
            d.sets.push_back(set);
        } else if (part.hidden > 0) {
            tooSmall(QObject::tr("hidden %1").arg(part.name), part.hidden);
        }
        ++color;
    }
    if (!notDrawn.isEmpty())
        d.note = QObject::tr("Too small to draw: %1").arg(notDrawn.join(QStringLiteral("; ")));
    return d;
}

} // namespace shardscope
