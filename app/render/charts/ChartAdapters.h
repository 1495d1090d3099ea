// Qt Charts adapters: plain chart data (ChartData.h) in, a QChartView out. All
// chart building lives here so that Qt Charts (deprecated from Qt 6.10) can be
// swapped for Qt Graphs in one place. Views get the export context menu.
#pragma once

#include "ChartData.h"

class QChartView;
class QWidget;

namespace shardscope {

QChartView* makeStackedBarChart(const StackedBarsData& data, QWidget* parent = nullptr);
QChartView* makeXYChart(const XYChartData& data, QWidget* parent = nullptr);

// Replace the chart of an existing view (keeps the view and its menu).
void setStackedBarChart(QChartView* view, const StackedBarsData& data);
void setXYChart(QChartView* view, const XYChartData& data);
// The same bars side by side instead of stacked (one bar per set in each category: two runs).
void setGroupedBarChart(QChartView* view, const StackedBarsData& data);

} // namespace shardscope
