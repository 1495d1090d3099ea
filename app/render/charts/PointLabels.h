// Text beside chosen points of an XY chart ("8 nodes" at each point of a sweep), which
// Qt Charts 6.4 cannot do per point (QXYSeries::setPointLabelsFormat is one format for
// every point, and only @xPoint/@yPoint). One QGraphicsSimpleTextItem per tagged point,
// placed again whenever the plot area or an axis range changes (resize, zoom).
#pragma once

#include <QStringList>

class QChart;
class QXYSeries;

namespace shardscope {

// The object name of every label item, for tests and screenshots.
inline constexpr const char* kPointLabelName = "shardscope_point_label";

// Labels the points of `series` with `tags` (one per point, in order; an empty tag: no label).
// Call after the series is added to the chart and attached to its axes.
void addPointLabels(QChart* chart, QXYSeries* series, const QStringList& tags);

// Places every point label of the chart: beside its point (above right, then the other three
// corners, then further up or down), never over another label or a marker, inside the plot
// area; a label with no free place is hidden (the point's hover still names it).
void placePointLabels(QChart* chart);

} // namespace shardscope
