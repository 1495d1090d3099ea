#include "ExplorePage.h"
#include "ChartAdapters.h"
#include "Units.h"

#include <QChartView>
#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace shardscope {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDay = 86400.0;

QString layoutText(const Layout& l) { return QString::fromStdString(toString(l)); }

} // namespace

ExplorePage::ExplorePage(QWidget* parent) : QWidget(parent)
{
    paretoMemory_ = makeXYChart({tr("Pareto front: step time vs memory"), tr("step time (s)"), tr("memory per device (GiB)"), true, 10, {}}, this);
    paretoCost_ = makeXYChart({tr("Time vs cost to train"), tr("time to train (days)"), tr("cost to train (USD)"), false, 10, {}}, this);
    scaling_ = makeXYChart({tr("Scaling over node counts"), tr("nodes"), tr("tokens/s per device"), true, 2, {}}, this);
    compare_ = makeStackedBarChart({tr("Node types: time to train"), tr("days"), {}, {}, true, 0, {}}, this);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    auto* grid = new QGridLayout;
    grid->addWidget(paretoMemory_, 0, 0);
    grid->addWidget(paretoCost_, 0, 1);
    grid->addWidget(scaling_, 1, 0);
    grid->addWidget(compare_, 1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(status_);
    layout->addLayout(grid, 1);
}

void ExplorePage::setStatus(const QString& text) { status_->setText(text); }

void ExplorePage::refresh()
{
    const SweepResult sweep = sweep_, comparison = comparison_;
    showSweep(sweep);
    showComparison(comparison);
}

void ExplorePage::showSearch(const SearchResult& result, const Layout* selected)
{
    XYChartData memory{tr("Pareto front: step time vs memory per device"), tr("step time (s, log scale)"),
                       tr("memory per device (GiB)"), true, 10, {}};
    XYSeriesData front{tr("Pareto front"), {}, true, false};
    XYSeriesData top{tr("top plans"), {}, false, false};
    XYSeriesData chosen{tr("selected plan"), {}, false, true};
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
    setXYChart(paretoMemory_, memory);

}

// On one cluster, cost is proportional to time; the trade-off appears across cluster sizes
// and node types: each point is the best plan of one size or node type.
void ExplorePage::showTimeCost()
{
    XYChartData cost{tr("Time vs cost to train (best plan of each size and node type)"), tr("time to train (days)"),
                     tr("cost to train (USD)"), false, 10, {}};
    XYSeriesData sizes{tr("node counts"), {}, true, false};
    XYSeriesData types{tr("node types"), {}, false, true};
    for (const SweepPoint& point : sweep_.points)
        if (const Plan* best = point.result.best(); best && best->prediction.cost_to_train_usd > 0)
            sizes.points.push_back({best->prediction.time_to_train_s / kDay, best->prediction.cost_to_train_usd,
                                    tr("%1 x %2: %3")
                                        .arg(point.problem.cluster.nodes)
                                        .arg(QString::fromStdString(point.problem.cluster.node.name))
                                        .arg(layoutText(best->layout))});
    for (const SweepPoint& point : comparison_.points)
        if (const Plan* best = point.result.best(); best && best->prediction.cost_to_train_usd > 0)
            types.points.push_back({best->prediction.time_to_train_s / kDay, best->prediction.cost_to_train_usd,
                                    tr("%1 x %2: %3")
                                        .arg(point.problem.cluster.nodes)
                                        .arg(QString::fromStdString(point.problem.cluster.node.name))
                                        .arg(layoutText(best->layout))});
    cost.series = {sizes, types};
    setXYChart(paretoCost_, cost);
}

void ExplorePage::showSweep(const SweepResult& sweep)
{
    sweep_ = sweep;
    showTimeCost();
    XYChartData d{tr("Scaling over node counts (best plan at each size)"), tr("nodes"), tr("tokens/s per device"),
                  true, 2, {}};
    XYSeriesData perDevice{tr("tokens/s per device"), {}, true, false};
    XYSeriesData ideal{tr("perfect scaling"), {}, true, false};
    double reference = 0;
    for (const SweepPoint& point : sweep.points) {
        const Plan* best = point.result.best();
        if (!best)
            continue;
        const double devices = double(point.problem.cluster.devices());
        const double value = best->prediction.tokens_per_s / devices;
        if (reference == 0)
            reference = value;
        perDevice.points.push_back({double(point.problem.cluster.nodes), value,
                                    tr("%1 nodes: %2, scaling efficiency %3%")
                                        .arg(point.problem.cluster.nodes)
                                        .arg(layoutText(best->layout))
                                        .arg(100 * point.scaling_efficiency, 0, 'f', 0)});
        ideal.points.push_back({double(point.problem.cluster.nodes), reference, QString()});
    }
    d.series = {perDevice, ideal};
    setXYChart(scaling_, d);
}

void ExplorePage::showComparison(const SweepResult& comparison)
{
    comparison_ = comparison;
    showTimeCost();
    StackedBarsData d;
    d.title = tr("Node types: time to train (best plan each)");
    d.value_axis = tr("days");
    d.horizontal = true;
    BarSet days{tr("time to train"), {}};
    for (const SweepPoint& point : comparison.points) {
        const Plan* best = point.result.best();
        QString label = QString::fromStdString(point.problem.cluster.node.name);
        if (best && best->prediction.cost_to_train_usd > 0)
            label += QStringLiteral(" ($%1)").arg(QString::fromStdString(
                formatCount(std::int64_t(best->prediction.cost_to_train_usd + 0.5))));
        else if (!best)
            label += tr(" (no plan)");
        d.categories << label;
        days.values << (best ? best->prediction.time_to_train_s / kDay : 0.0);
    }
    d.sets = {days};
    setStackedBarChart(compare_, d);
}

} // namespace shardscope
