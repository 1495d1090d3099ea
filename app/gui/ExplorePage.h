// ExplorePage: the trade-offs around the search's result — Pareto fronts of step
// time vs memory and time vs cost with the selected plan highlighted, the scaling
// curve over node counts, and the node-type comparison.
#pragma once

#include "Search.h"
#include "Sweep.h"

#include <QWidget>

class QChartView;
class QLabel;

namespace shardscope {

class ExplorePage : public QWidget {
    Q_OBJECT
public:
    explicit ExplorePage(QWidget* parent = nullptr);

    void showSearch(const SearchResult& result, const Layout* selected);
    void showSweep(const SweepResult& sweep);
    void showComparison(const SweepResult& comparison);
    void setStatus(const QString& text);
    void refresh();  // rebuild the sweep charts (after a theme change)

    QList<QChartView*> charts() const { return {paretoMemory_, paretoCost_, scaling_, compare_}; }

private:
    void showTimeCost();

    SweepResult sweep_, comparison_;
    QChartView* paretoMemory_ = nullptr;
    QChartView* paretoCost_ = nullptr;
    QChartView* scaling_ = nullptr;
    QChartView* compare_ = nullptr;
    QLabel* status_ = nullptr;
};

} // namespace shardscope
