#include "ChartAdapters.h"
#include "ChartExport.h"
#include "ChartInteraction.h"
#include "PointLabels.h"
#include "Theme.h"

#include <QBarCategoryAxis>
#include <QGraphicsTextItem>
#include <QTextDocument>
#include <QTextOption>
#include <QBarLegendMarker>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QBarSeries>
#include <QHorizontalBarSeries>
#include <QHorizontalStackedBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QValueAxis>

#include <QRegularExpression>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace shardscope {

namespace {

QChart* newChart(const QString& title)
{
    auto* chart = new QChart;
    chart->setTheme(paletteIsDark() ? QChart::ChartThemeDark : QChart::ChartThemeLight);
    chart->setTitle(title);
    chart->setAnimationOptions(QChart::NoAnimation);  // screenshots and reports must be deterministic
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(6, 6, 6, 6));
    return chart;
}

// A qualitative palette with ten distinct colours (Tableau 10), legible on light and dark
// backgrounds: the chart themes repeat colours after five series.
QColor seriesColor(qsizetype i)
{
    static const QRgb colors[] = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                  0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};
    return QColor::fromRgb(colors[i % 10]);
}

QChartView* newView(QWidget* parent, const QString& exportName)
{
    auto* view = new QChartView(parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumSize(280, 200);
    installExportMenu(view, exportName);
    installChartHover(view);
    return view;
}

void replaceChart(QChartView* view, QChart* chart)
{
    QChart* old = view->chart();
    view->setChart(chart);
    // QChartView owns the default chart it created; charts we set earlier are ours to delete.
    if (old && old->parent() == nullptr)
        delete old;
}

// An empty chart says what would fill it (a sentence in the plot area) instead of drawing
// bare 0..1 axes; no legend, no axes.
void showEmptyState(QChart* chart, const QString& text)
{
    chart->legend()->hide();
    auto* item = new QGraphicsTextItem(chart);
    item->setPlainText(text.isEmpty() ? QObject::tr("Nothing to show yet.") : text);
    item->setDefaultTextColor(chart->titleBrush().color());
    item->setObjectName(QStringLiteral("shardscope_empty_state"));
    auto place = [chart, item](const QRectF& area) {
        item->setTextWidth(std::max(80.0, area.width() * 0.8));
        const QRectF r = item->boundingRect();
        item->setPos(area.center() - QPointF(r.width() / 2, r.height() / 2));
    };
    QObject::connect(chart, &QChart::plotAreaChanged, item, place);
    place(chart->plotArea());
    QTextOption centred = item->document()->defaultTextOption();
    centred.setAlignment(Qt::AlignCenter);
    item->document()->setDefaultTextOption(centred);
}

QString exportNameOf(const QString& title)
{
    QString name = title.toLower();
    name.replace(QRegularExpression(QStringLiteral("[^a-z0-9]+")), QStringLiteral("-"));
    return name.isEmpty() ? QStringLiteral("chart") : name;
}

} // namespace

namespace {

void setBarChart(QChartView* view, const StackedBarsData& d, bool stacked)
{
    QChart* chart = newChart(d.title);
    if (d.categories.isEmpty() || d.sets.isEmpty()) {
        showEmptyState(chart, d.empty_text);
        replaceChart(view, chart);
        return;
    }
    if (!d.horizontal)
        chart->legend()->setAlignment(Qt::AlignRight);  // room for the category names beside one tall bar
    QAbstractBarSeries* series = nullptr;
    if (stacked)
        series = d.horizontal ? static_cast<QAbstractBarSeries*>(new QHorizontalStackedBarSeries)
                              : static_cast<QAbstractBarSeries*>(new QStackedBarSeries);
    else
        series = d.horizontal ? static_cast<QAbstractBarSeries*>(new QHorizontalBarSeries)
                              : static_cast<QAbstractBarSeries*>(new QBarSeries);
    // Qt draws a horizontal chart's first category at the bottom: reversed, the categories read
    // top to bottom in their order (the step time's critical path above its hidden lane).
    QStringList categoryNames = d.categories;
    if (d.horizontal)
        std::reverse(categoryNames.begin(), categoryNames.end());
    auto drawnAt = [&](qsizetype i) { return d.horizontal ? d.categories.size() - 1 - i : i; };
    // The tallest stack (or bar) over the categories sets the axis.
    QVector<double> stacks(d.categories.size(), 0.0);
    QList<QBarSet*> hiddenFromLegend;
    for (const BarSet& s : d.sets) {
        auto* set = new QBarSet(s.name);
        const QColor color = seriesColor(s.color >= 0 ? s.color : series->count());
        set->setColor(color);
        set->setBorderColor(color);
        if (s.overlapped)  // hatched in its kind's colour: the same traffic, off the critical path
            set->setBrush(QBrush(color, Qt::BDiagPattern));
        const QString name = s.name, axis = d.value_axis;
        QObject::connect(set, &QBarSet::hovered, view, [set, categoryNames, name, axis](bool over, int index) {
            if (!over)
                return QToolTip::hideText();
            QToolTip::showText(QCursor::pos(), barToolTip(name, categoryNames.value(index), set->at(index), axis));
        });
        QVector<double> values(d.categories.size(), 0.0);
        for (qsizetype i = 0; i < s.values.size() && i < values.size(); ++i)
            values[drawnAt(i)] = s.values[i];
        for (qsizetype i = 0; i < values.size(); ++i) {
            *set << values[i];
            stacks[i] = stacked ? stacks[i] + values[i] : std::max(stacks[i], values[i]);
        }
        series->append(set);
        if (!s.in_legend)
            hiddenFromLegend << set;
    }
    const double total = stacks.isEmpty() ? 0.0 : *std::max_element(stacks.begin(), stacks.end());
    chart->addSeries(series);
    for (QBarSet* set : hiddenFromLegend)
        for (QLegendMarker* marker : chart->legend()->markers(series))
            if (static_cast<QBarLegendMarker*>(marker)->barset() == set)
                marker->setVisible(false);
    // What the bars leave out, after the title: a line of its own would take the height the
    // axes' labels need in a short chart (they turn to "...").
    if (!d.note.isEmpty())
        chart->setTitle(QStringLiteral("%1 (%2)").arg(d.title, d.note));
    auto* categories = new QBarCategoryAxis;
    categories->append(categoryNames);
    auto* values = new QValueAxis;
    values->setTitleText(d.value_axis);
    values->setLabelFormat(QStringLiteral("%.3g"));
    const double top = std::max(total, d.limit) * 1.1;
    values->setRange(0, top > 0 ? top : 1);
    values->applyNiceNumbers();
    chart->addAxis(categories, d.horizontal ? Qt::AlignLeft : Qt::AlignBottom);
    chart->addAxis(values, d.horizontal ? Qt::AlignBottom : Qt::AlignLeft);
    series->attachAxis(categories);
    series->attachAxis(values);
    if (d.limit > 0) {
        // The capacity as a line across the bar, on a hidden 0..1 axis.
        auto* limit = new QLineSeries;
        limit->setName(QStringLiteral("%1 (%2)").arg(d.limit_name).arg(d.limit, 0, 'g', 3));
        QPen pen(Qt::red);
        pen.setWidth(2);
        pen.setStyle(Qt::DashLine);
        limit->setPen(pen);
        if (d.horizontal)
            *limit << QPointF(d.limit, 0) << QPointF(d.limit, 1);
        else
            *limit << QPointF(0, d.limit) << QPointF(1, d.limit);
        chart->addSeries(limit);
        // The capacity is named in the title; its legend entry would crowd a small chart.
        for (QLegendMarker* marker : chart->legend()->markers(limit))
            marker->setVisible(false);
        auto* across = new QValueAxis;
        across->setRange(0, 1);
        across->setVisible(false);
        chart->addAxis(across, d.horizontal ? Qt::AlignRight : Qt::AlignTop);
        limit->attachAxis(values);
        limit->attachAxis(across);
    }
    replaceChart(view, chart);
}

} // namespace

void setStackedBarChart(QChartView* view, const StackedBarsData& data) { setBarChart(view, data, true); }

void setGroupedBarChart(QChartView* view, const StackedBarsData& data) { setBarChart(view, data, false); }

QChartView* makeStackedBarChart(const StackedBarsData& data, QWidget* parent)
{
    QChartView* view = newView(parent, exportNameOf(data.title));
    setStackedBarChart(view, data);
    return view;
}

void setXYChart(QChartView* view, const XYChartData& d)
{
    QChart* chart = newChart(d.title);
    const bool empty = std::all_of(d.series.begin(), d.series.end(), [](const XYSeriesData& s) { return s.points.isEmpty(); });
    if (empty) {
        showEmptyState(chart, d.empty_text);
        replaceChart(view, chart);
        return;
    }
    double minX = 1e300, maxX = -1e300, minY = 1e300, maxY = -1e300;
    for (const XYSeriesData& s : d.series)
        for (const XYPoint& p : s.points) {
            minX = std::min(minX, p.x);
            maxX = std::max(maxX, p.x);
            minY = std::min(minY, p.y);
            maxY = std::max(maxY, p.y);
        }
    if (minX > maxX) {
        minX = minY = 0;
        maxX = maxY = 1;
    }
    QAbstractAxis* xAxis = nullptr;
    if (d.log_x && minX > 0) {
        auto* log = new QLogValueAxis;
        // Under two decades base 10 labels one tick or none (50 s to 400 s: only "100"): base 2
        // labels every doubling (64, 128, 256).
        log->setBase(d.log_base == 10 && maxX / minX < 100 ? 2 : d.log_base);
        log->setLabelFormat(QStringLiteral("%g"));
        log->setRange(minX / 1.5, maxX * 1.5);
        xAxis = log;
    } else {
        auto* lin = new QValueAxis;
        const double pad = (maxX - minX) * 0.05 + (maxX == minX ? std::fabs(maxX) * 0.1 + 1e-9 : 0);
        lin->setRange(minX >= 0 ? std::max(0.0, minX - pad) : minX - pad, maxX + pad);
        lin->applyNiceNumbers();  // ticks at 0, 2, 4 or 100, 200, not at 0.55, 3.02
        lin->setLabelFormat(QStringLiteral("%.3g"));
        xAxis = lin;
    }
    xAxis->setTitleText(d.x_axis);
    auto* yAxis = new QValueAxis;
    const double padY = (maxY - minY) * 0.08 + (maxY == minY ? std::fabs(maxY) * 0.1 + 1e-9 : 0);
    yAxis->setRange(minY >= 0 ? 0.0 : minY - padY, maxY + padY);
    yAxis->applyNiceNumbers();
    yAxis->setLabelFormat(QStringLiteral("%.3g"));
    yAxis->setTitleText(d.y_axis);
    chart->addAxis(xAxis, Qt::AlignBottom);
    chart->addAxis(yAxis, Qt::AlignLeft);
    std::vector<std::pair<QXYSeries*, QStringList>> tagged;
    int drawn = 0;  // series drawn so far, for the colour by position
    for (const XYSeriesData& s : d.series) {
        QStringList tags, labels;  // labels: the hover's tooltips (ChartInteraction.h)
        for (const XYPoint& p : s.points) {
            tags << p.tag;
            labels << p.label;
        }
        const bool hasTags = std::any_of(tags.begin(), tags.end(), [](const QString& t) { return !t.isEmpty(); });
        const QColor color = s.highlighted ? QColor(220, 40, 40) : seriesColor(s.color >= 0 ? s.color : drawn);
        ++drawn;
        auto addSeries = [&](QXYSeries* series) {
            series->setName(s.name);
            series->setColor(color);
            for (const XYPoint& p : s.points)
                series->append(p.x, p.y);
            series->setProperty("shardscope_labels", labels);
            chart->addSeries(series);
            series->attachAxis(xAxis);
            series->attachAxis(yAxis);
        };
        auto scatter = [&](double markerSize) {
            auto* points = new QScatterSeries;
            points->setMarkerSize(markerSize);
            addSeries(points);
            return points;
        };
        if (!s.line) {
            // A series of one point stands for a named thing (a node type): big enough to find.
            QScatterSeries* points = scatter(s.highlighted ? 14 : s.points.size() == 1 ? 12 : 8);
            if (hasTags)
                tagged.emplace_back(points, tags);
            continue;
        }
        addSeries(new QLineSeries);
        if (hasTags) {
            // A labelled point gets a marker (the line alone hides where it is): a scatter series
            // over the line, one legend entry for both. QLineSeries' own points stayed at the
            // 15-pixel default marker here whatever setMarkerSize said, before or after addSeries (Qt 6.4).
            QScatterSeries* points = scatter(8);
            for (QLegendMarker* marker : chart->legend()->markers(points))
                marker->setVisible(false);
            tagged.emplace_back(points, tags);
        }
    }
    // After every series: the labels keep clear of all the markers.
    for (const auto& [series, tags] : tagged)
        addPointLabels(chart, series, tags);
    // Past eight series a legend crowds the plot out (a suite's loss curves): hover names each.
    if (d.series.size() > 8)
        chart->legend()->hide();
    replaceChart(view, chart);
}

QChartView* makeXYChart(const XYChartData& data, QWidget* parent)
{
    QChartView* view = newView(parent, exportNameOf(data.title));
    installChartZoom(view);
    setXYChart(view, data);
    return view;
}

} // namespace shardscope
