#include "ChartInteraction.h"
#include "Units.h"

#include <QAbstractAxis>
#include <QAction>
#include <QChart>
#include <QChartView>
#include <QHelpEvent>
#include <QLineSeries>
#include <QMouseEvent>
#include <QRegularExpression>
#include <QScatterSeries>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>
#include <limits>

namespace shardscope {

namespace {

// A number for people: no scientific notation (SI prefixes past 10^5), four digits.
QString number(double v)
{
    if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3))
        return QString::fromStdString(formatSi(v, "", 4)).trimmed();
    return QString::number(v, 'g', std::fabs(v) >= 1000 ? 6 : 4);
}

QString axisTitle(QXYSeries* series, Qt::Orientation orientation)
{
    for (const QAbstractAxis* axis : series->attachedAxes())
        if (axis->orientation() == orientation)
            return axis->titleText();
    return {};
}

// The label of point i, or "series: x title x, y title y".
QString pointText(QXYSeries* series, qsizetype i)
{
    const QStringList labels = series->property("shardscope_labels").toStringList();
    if (i < labels.size() && !labels[i].isEmpty())
        return labels[i];
    const QPointF p = series->at(i);
    return QStringLiteral("%1: %2 %3, %4 %5")
        .arg(series->name(), axisTitle(series, Qt::Horizontal), number(p.x()), axisTitle(series, Qt::Vertical), number(p.y()));
}

class ChartHover : public QObject {
public:
    explicit ChartHover(QChartView* view) : QObject(view), view_(view) {}

protected:
    bool eventFilter(QObject*, QEvent* event) override
    {
        if (event->type() == QEvent::MouseMove) {
            const auto* move = static_cast<QMouseEvent*>(event);
            if (move->buttons() != Qt::NoButton)
                return false;  // a rubber band being drawn
            const QString text = chartToolTipAt(view_, move->position().toPoint());
            if (text.isEmpty())
                QToolTip::hideText();
            else if (text != QToolTip::text() || !QToolTip::isVisible())
                QToolTip::showText(move->globalPosition().toPoint(), text, view_->viewport());
        } else if (event->type() == QEvent::Leave) {
            QToolTip::hideText();
        }
        return false;
    }

private:
    QChartView* view_;
};

class ChartZoom : public QObject {
public:
    explicit ChartZoom(QChartView* view) : QObject(view), view_(view) {}

protected:
    bool eventFilter(QObject*, QEvent* event) override
    {
        // The event's type first: while ~QChartView runs the viewport still gets events (window
        // deactivation) after the view has deleted its chart.
        const QEvent::Type type = event->type();
        if (type != QEvent::Wheel && type != QEvent::MouseButtonDblClick && type != QEvent::MouseButtonRelease)
            return false;
        QChart* chart = view_->chart();
        if (!chart || chart->series().isEmpty())
            return false;
        switch (type) {
        case QEvent::Wheel: {
            const auto* wheel = static_cast<QWheelEvent*>(event);
            const QPointF at = chart->mapFromScene(view_->mapToScene(wheel->position().toPoint()));
            const QRectF plot = chart->plotArea();
            if (!plot.contains(at) || wheel->angleDelta().y() == 0)
                return false;
            // Zoom about the pointer: the point under it stays where it is.
            const double factor = wheel->angleDelta().y() > 0 ? 0.8 : 1.25;
            chart->zoomIn(QRectF(at + (plot.topLeft() - at) * factor, plot.size() * factor));
            return true;
        }
        case QEvent::MouseButtonDblClick:
            if (static_cast<QMouseEvent*>(event)->button() == Qt::LeftButton) {
                chart->zoomReset();
                return true;
            }
            return false;
        case QEvent::MouseButtonRelease:
            // QChartView zooms out on a right click; here the right button opens the context
            // menu (export, reset zoom) and nothing else.
            return static_cast<QMouseEvent*>(event)->button() == Qt::RightButton;
        default:
            return false;
        }
    }

private:
    QChartView* view_;
};

} // namespace

QString chartToolTipAt(QChartView* view, const QPoint& viewportPos)
{
    QChart* chart = view->chart();
    if (!chart)
        return {};
    const QPointF at = chart->mapFromScene(view->mapToScene(viewportPos));
    if (!chart->plotArea().adjusted(-8, -8, 8, 8).contains(at))
        return {};
    // A marker under the pointer (within its radius and a few pixels) names its point.
    double best = std::numeric_limits<double>::max();
    QString marker;
    for (QAbstractSeries* s : chart->series()) {
        auto* scatter = qobject_cast<QScatterSeries*>(s);
        if (!scatter || !scatter->isVisible())
            continue;
        const double reach = scatter->markerSize() / 2 + 4;
        for (qsizetype i = 0; i < scatter->count(); ++i) {
            const QPointF p = chart->mapToPosition(scatter->at(i), scatter);
            const double d = std::hypot(p.x() - at.x(), p.y() - at.y());
            if (d <= reach && d < best) {
                best = d;
                marker = pointText(scatter, i);
            }
        }
    }
    if (!marker.isEmpty())
        return marker;
    // Lines: each series' point nearest the pointer's x, inside the plot.
    if (!chart->plotArea().contains(at))
        return {};
    QStringList lines;
    for (QAbstractSeries* s : chart->series()) {
        auto* line = qobject_cast<QLineSeries*>(s);
        if (!line || !line->isVisible() || line->count() == 0)
            continue;
        qsizetype nearest = -1;
        double dx = std::numeric_limits<double>::max();
        for (qsizetype i = 0; i < line->count(); ++i) {
            const double d = std::fabs(chart->mapToPosition(line->at(i), line).x() - at.x());
            if (d < dx) {
                dx = d;
                nearest = i;
            }
        }
        // Not past the ends of a line (a perfect-scaling line over part of the axis).
        const double first = chart->mapToPosition(line->at(0), line).x();
        const double last = chart->mapToPosition(line->at(line->count() - 1), line).x();
        if (nearest >= 0 && at.x() >= std::min(first, last) - 8 && at.x() <= std::max(first, last) + 8)
            lines << pointText(line, nearest);
    }
    return lines.join(QLatin1Char('\n'));
}

void installChartHover(QChartView* view)
{
    view->setMouseTracking(true);
    view->viewport()->setMouseTracking(true);
    view->viewport()->installEventFilter(new ChartHover(view));
}

void installChartZoom(QChartView* view)
{
    view->setRubberBand(QChartView::RectangleRubberBand);
    view->viewport()->installEventFilter(new ChartZoom(view));
    auto* reset = new QAction(QObject::tr("Reset zoom (double-click)"), view);
    QObject::connect(reset, &QAction::triggered, view, [view] {
        if (view->chart())
            view->chart()->zoomReset();
    });
    view->addAction(reset);
}

QString barToolTip(const QString& set, const QString& category, double value, const QString& valueAxis)
{
    // The unit is the axis title's last parenthesis: "memory per device (GiB)" -> "GiB".
    static const QRegularExpression unitPattern(QStringLiteral("\\(([^()]*)\\)\\s*$"));
    const QRegularExpressionMatch m = unitPattern.match(valueAxis);
    const QString unit = m.hasMatch() ? m.captured(1).section(QLatin1Char(','), 0, 0).trimmed() : QString();
    const QString where = category.isEmpty() ? set : set.isEmpty() ? category : QStringLiteral("%1, %2").arg(set, category);
    return QStringLiteral("%1: %2%3").arg(where, number(value), unit.isEmpty() ? QString() : (unit == QLatin1String("%") ? unit : QLatin1Char(' ') + unit));
}

bool answerToolTip(QWidget* widget, QEvent* event, const QString& text)
{
    if (event->type() != QEvent::ToolTip)
        return false;
    const auto* help = static_cast<QHelpEvent*>(event);
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(help->globalPos(), text, widget);
    return true;
}

} // namespace shardscope
