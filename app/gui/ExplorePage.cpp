#include "ExplorePage.h"
#include "ChartAdapters.h"

#include <QChartView>
#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace shardscope {

ExplorePage::ExplorePage(QWidget* parent) : QWidget(parent)
{
    const SearchResult noSearch;
    paretoMemory_ = makeXYChart(paretoChartData(noSearch, nullptr), this);
    // Empty charts until the first sweep (one named empty result: GCC 12 warns, wrongly, that a
    // temporary's maps may be used uninitialised).
    const SweepResult none;
    paretoCost_ = makeXYChart(timeCostChartData(none, none), this);
    scaling_ = makeXYChart(scalingChartData(none), this);
    compare_ = makeStackedBarChart(nodeTypesChartData(none), this);
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
    setXYChart(paretoMemory_, paretoChartData(result, selected));
}

void ExplorePage::showTimeCost() { setXYChart(paretoCost_, timeCostChartData(sweep_, comparison_)); }

void ExplorePage::showSweep(const SweepResult& sweep)
{
    sweep_ = sweep;
    showTimeCost();
    setXYChart(scaling_, scalingChartData(sweep));
}

void ExplorePage::showComparison(const SweepResult& comparison)
{
    comparison_ = comparison;
    showTimeCost();
    setStackedBarChart(compare_, nodeTypesChartData(comparison));
}

} // namespace shardscope
