// Exporting any chart or drawn view as PNG, SVG or PDF: from a right-click menu in
// the GUI, and headless for screenshots and reports. PDF and SVG stay vector.
#pragma once

#include <QString>

class QWidget;

namespace shardscope {

// Format from the file suffix (.png, .svg, .pdf); returns an error message or empty.
QString exportWidget(QWidget* widget, const QString& path);

// Adds "Export as PNG/SVG/PDF..." to the widget's context menu (and, for a QChartView, its viewport).
void installExportMenu(QWidget* widget, const QString& suggestedName);

} // namespace shardscope
