// Hover and zoom on the charts the adapters build (ChartAdapters.h):
// - the value under the pointer as a tooltip: the nearest marker of a scatter series (its
//   label: a plan, a node type), or on line charts every series' point nearest the pointer's
//   x (TensorBoard-style: "run 5, step 12: 4.1203"); bars name their set, category and value;
// - zoom on XY charts: drag a rectangle (rubber band) or turn the wheel over the plot;
//   double-click, or "Reset zoom" in the context menu, shows everything again.
#pragma once

#include <QString>

class QChartView;
class QEvent;
class QPoint;
class QWidget;

namespace shardscope {

// The tooltip an XY chart shows with the pointer at `viewportPos` (empty: none there).
QString chartToolTipAt(QChartView* view, const QPoint& viewportPos);

// Pointer tracking and the tooltips above (any chart view the adapters make).
void installChartHover(QChartView* view);
// Rubber band, wheel and double-click zoom, and "Reset zoom" in the context menu (XY charts).
void installChartZoom(QChartView* view);

// For a painted widget's event(): answers a QEvent::ToolTip with text (hides the tooltip when
// text is empty) and returns true; false for every other event.
bool answerToolTip(QWidget* widget, QEvent* event, const QString& text);

// A bar's tooltip: "optimizer states, 1F1B: 12.3 GiB" (the unit from the value axis title).
QString barToolTip(const QString& set, const QString& category, double value, const QString& valueAxis);

} // namespace shardscope
