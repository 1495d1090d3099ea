// Plain chart data, independent of the chart library: the GUI's Qt Charts adapters
// and the report renderer draw these. Builders turn predictions into chart data
// with units chosen for people (GiB, seconds).
#pragma once

#include "Prediction.h"

#include <QString>
#include <QStringList>
#include <QVector>

namespace shardscope {

struct SearchResult;
struct SweepResult;
struct SweepPoint;
struct Layout;

struct BarSet {
    QString name;
    QVector<double> values;  // one per category
    int color = -1;          // fixed palette index, so a component keeps its colour across charts
    bool overlapped = false; // runs beside the others (hidden communication): drawn hatched
    bool in_legend = true;   // false: named by its category and its tooltip only (a crowded legend)
};

// Stacked bars over categories, optionally against a horizontal limit (a capacity).
struct StackedBarsData {
    QString title;
    QString value_axis;      // with its unit: "memory per device (GiB)"
    QStringList categories;
    QVector<BarSet> sets;
    bool horizontal = false;
    double limit = 0;        // 0: none
    QString limit_name;
    QString empty_text;      // shown instead of bare axes when there is nothing to draw
    QString note = {};       // what the bars leave out (too small to draw): after the title
};

struct XYPoint {
    double x = 0;
    double y = 0;
    QString label;           // tooltip
    QString tag = {};        // drawn beside the point ("8 nodes"); empty: none
};

struct XYSeriesData {
    QString name;
    QVector<XYPoint> points;
    bool line = true;        // line or scatter
    bool highlighted = false;
    int color = -1;          // fixed palette index, -1: by position
};

struct XYChartData {
    QString title;
    QString x_axis;
    QString y_axis;
    bool log_x = false;
    double log_base = 10;
    QVector<XYSeriesData> series;
    QString empty_text;      // shown instead of bare axes when there is nothing to draw
};

// Pareto front of step time vs memory of a search, its top plans and the selected one.
XYChartData paretoChartData(const SearchResult& result, const Layout* selected);
// Tokens/s per device over node counts against perfect scaling.
XYChartData scalingChartData(const SweepResult& sweep);
// Time vs cost to train of the best plan at each size and on each node type.
// Why a sweep or comparison point has no plan, for people: its error, or the reason most
// layouts failed ("out of memory (1,234 layouts)").
QString noPlanReason(const SweepPoint& point);

XYChartData timeCostChartData(const SweepResult& sweep, const SweepResult& comparison);
// Time to train per node type (comparison), labelled with the cost.
StackedBarsData nodeTypesChartData(const SweepResult& comparison);

// Memory per device by category against the HBM capacity (GiB); with routed experts a second,
// hatched bar of their share of weights + gradients + optimizer (memory_bytes.experts).
StackedBarsData memoryChartData(const Prediction& prediction);
// The step time's components in words, each with its time on the critical path and (for
// communication) its time hidden behind compute, in the chart's order and colours.
struct StepTimePart {
    QString name;
    double exposed = 0;  // seconds per step on the critical path
    double hidden = 0;   // seconds per step overlapped with compute (TimeBreakdown::hidden)
};
QVector<StepTimePart> stepTimeParts(const TimeBreakdown& time);

// Step time by component (seconds): the critical path as one horizontal stacked bar and, under
// it, the communication hidden behind compute (TimeBreakdown::hidden) as a second, overlapped
// lane (as Nsight Systems draws streams). Segments under kStepTimeVisibleShare of the step are
// left out of the bars and the legend and named in the note.
inline constexpr double kStepTimeVisibleShare = 0.005;
StackedBarsData stepTimeChartData(const Prediction& prediction);

} // namespace shardscope
