#include "PipelineTimelineWidget.h"
#include "ChartExport.h"
#include "ChartInteraction.h"
#include "Units.h"

#include <QAction>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace shardscope {

namespace {

// A time axis unit for a span: s, ms or us (no "0.000123" tick labels).
struct TimeUnit {
    double scale;
    const char* name;
};
TimeUnit unitFor(double span)
{
    if (span < 2e-3)
        return {1e6, "us"};
    if (span < 2)
        return {1e3, "ms"};
    return {1, "s"};
}

QString duration(double s) { return QString::fromStdString(formatDuration(s)); }

} // namespace

PipelineTimelineWidget::PipelineTimelineWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumSize(320, 160);
    setAutoFillBackground(true);
    setMouseTracking(true);
    installExportMenu(this, QStringLiteral("pipeline-timeline"));
    auto* reset = new QAction(tr("Reset zoom (double-click)"), this);
    connect(reset, &QAction::triggered, this, &PipelineTimelineWidget::resetZoom);
    addAction(reset);
    setToolTip(QString());  // tooltips come from event(): the op under the pointer
}

void PipelineTimelineWidget::setTimeline(const PipelineTimeline& timeline, const QString& title)
{
    timeline_ = timeline;
    title_ = title;
    view0_ = 0;
    view1_ = timeline.makespan_s;
    update();
}

bool PipelineTimelineWidget::zoomed() const
{
    return timeline_.makespan_s > 0 && (view0_ > 0 || view1_ < timeline_.makespan_s);
}

void PipelineTimelineWidget::setWindow(double t0, double t1)
{
    const double total = timeline_.makespan_s;
    if (total <= 0)
        return;
    // No closer than a thousandth of the step (a single op of 192 x 3 stays wide), no wider than it.
    double span = std::clamp(t1 - t0, total * 1e-3, total);
    t0 = std::clamp(t0, 0.0, total - span);
    view0_ = t0;
    view1_ = t0 + span;
    update();
}

void PipelineTimelineWidget::zoomAt(double factor, double x)
{
    const QRectF area = plotArea();
    if (area.width() <= 0 || view1_ <= view0_)
        return;
    const double t = view0_ + (std::clamp(x, area.left(), area.right()) - area.left()) / area.width() * (view1_ - view0_);
    // The time under the pointer stays under it.
    setWindow(t - (t - view0_) * factor, t + (view1_ - t) * factor);
}

void PipelineTimelineWidget::panBy(double dx)
{
    const QRectF area = plotArea();
    if (area.width() <= 0)
        return;
    const double dt = dx / area.width() * (view1_ - view0_);
    setWindow(view0_ + dt, view1_ + dt);
}

void PipelineTimelineWidget::resetZoom()
{
    view0_ = 0;
    view1_ = timeline_.makespan_s;
    update();
}

QRectF PipelineTimelineWidget::plotArea() const
{
    const QFontMetrics fm(font());
    const int titleH = fm.height() + 8;
    const int left = fm.horizontalAdvance(QStringLiteral("stage 00")) + 12;
    const int legendH = fm.height() + 10;
    const int axisH = fm.height() * 2 + 8;
    // Room on the right for half of the last tick label, which is centred on the axis end.
    const int right = fm.horizontalAdvance(QStringLiteral("000.000")) / 2 + 6;
    return QRectF(left, titleH + 4, width() - left - right, height() - titleH - axisH - legendH - 8);
}

double PipelineTimelineWidget::xOf(double t) const
{
    const QRectF area = plotArea();
    return area.left() + (t - view0_) * area.width() / std::max(1e-300, view1_ - view0_);
}

int PipelineTimelineWidget::stageAt(double y) const
{
    const QRectF area = plotArea();
    if (timeline_.stages <= 0 || y < area.top() || y >= area.bottom())
        return -1;
    return std::min(timeline_.stages - 1, int((y - area.top()) / (area.height() / timeline_.stages)));
}

const PipelineOp* PipelineTimelineWidget::opAt(const QPointF& at) const
{
    const QRectF area = plotArea();
    const int stage = stageAt(at.y());
    if (stage < 0 || at.x() < area.left() || at.x() > area.right())
        return nullptr;
    const double t = view0_ + (at.x() - area.left()) / area.width() * (view1_ - view0_);
    // Ops of a pixel or less are drawn a pixel wide: they are found within that pixel too.
    const double slack = 0.5 * (view1_ - view0_) / area.width();
    const PipelineOp* near = nullptr;
    for (const PipelineOp& op : timeline_.ops)
        if (op.stage == stage && t >= op.start_s - slack && t <= op.end_s + slack) {
            if (t >= op.start_s && t <= op.end_s)
                return &op;
            near = &op;
        }
    return near;
}

QString PipelineTimelineWidget::toolTipAt(const QPointF& at) const
{
    const int stage = stageAt(at.y());
    const QRectF area = plotArea();
    if (stage < 0 || at.x() < area.left() || at.x() > area.right())
        return {};
    const PipelineOp* op = opAt(at);
    if (!op)
        return tr("stage %1: idle (bubble)").arg(stage);
    const QString chunk = timeline_.chunks > 1 ? tr(" (chunk %1 of %2)").arg(op->chunk).arg(timeline_.chunks) : QString();
    return tr("stage %1, micro-batch %2%3, %4: %5 - %6 (%7)")
        .arg(op->stage)
        .arg(op->micro_batch)
        .arg(chunk, op->backward ? tr("backward") : tr("forward"), duration(op->start_s), duration(op->end_s),
             duration(op->end_s - op->start_s));
}

void PipelineTimelineWidget::wheelEvent(QWheelEvent* event)
{
    if (timeline_.makespan_s <= 0 || event->angleDelta().y() == 0)
        return QWidget::wheelEvent(event);
    zoomAt(event->angleDelta().y() > 0 ? 0.8 : 1.25, event->position().x());
    event->accept();
}

void PipelineTimelineWidget::mousePressEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && zoomed()) {
        dragging_ = true;
        dragX_ = event->position().x();
        setCursor(Qt::ClosedHandCursor);
        event->accept();
        return;
    }
    QWidget::mousePressEvent(event);
}

void PipelineTimelineWidget::mouseMoveEvent(QMouseEvent* event)
{
    if (dragging_) {
        panBy(dragX_ - event->position().x());  // the content follows the pointer
        dragX_ = event->position().x();
        event->accept();
        return;
    }
    const QString text = toolTipAt(event->position());
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(event->globalPosition().toPoint(), text, this);
    QWidget::mouseMoveEvent(event);
}

void PipelineTimelineWidget::mouseReleaseEvent(QMouseEvent* event)
{
    if (dragging_ && event->button() == Qt::LeftButton) {
        dragging_ = false;
        unsetCursor();
        event->accept();
        return;
    }
    QWidget::mouseReleaseEvent(event);
}

void PipelineTimelineWidget::mouseDoubleClickEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton) {
        resetZoom();
        event->accept();
        return;
    }
    QWidget::mouseDoubleClickEvent(event);
}

bool PipelineTimelineWidget::event(QEvent* event)
{
    // A tooltip asked for without a move (keyboard, touch) too.
    if (event->type() == QEvent::ToolTip)
        return answerToolTip(this, event, toolTipAt(static_cast<QHelpEvent*>(event)->pos()));
    return QWidget::event(event);
}

void PipelineTimelineWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.base());
    const QFontMetrics fm(font());
    const int titleH = fm.height() + 8;
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(pal.text().color());
    p.drawText(QRect(0, 2, width(), titleH), Qt::AlignHCenter | Qt::AlignVCenter, title_);
    p.setFont(font());
    if (timeline_.stages == 0 || timeline_.makespan_s <= 0) {
        p.drawText(rect(), Qt::AlignCenter, tr("no pipeline to show"));
        return;
    }
    const int legendH = fm.height() + 10;
    const QRectF area = plotArea();
    const int left = int(area.left());
    const double rowH = area.height() / timeline_.stages;
    // Rows lower than a line of text are labelled every few stages so that labels never overlap.
    const int labelEvery = std::max(1, int(std::ceil(fm.height() / rowH)));
    const double span = view1_ - view0_;
    const double xScale = area.width() / span;

    // Idle time shows through as the bubble colour.
    const QColor bubble = pal.window().color().darker(115);
    const QColor fwd(66, 133, 244), bwd(234, 134, 50);
    for (int s = 0; s < timeline_.stages; ++s) {
        const QRectF row(area.left(), area.top() + s * rowH + 1, area.width(), rowH - 2);
        p.fillRect(row, bubble);
        if (s % labelEvery != 0)
            continue;
        p.setPen(pal.text().color());
        const double mid = row.center().y();
        p.drawText(QRectF(0, mid - fm.height() / 2.0, left - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   tr("stage %1").arg(s));
    }
    // The ops in the window, clipped to it; each box wide enough for its number carries it
    // (zoom in to read the numbers of a long schedule).
    p.save();
    p.setClipRect(area.adjusted(0, 0, 1, 0));
    for (const PipelineOp& op : timeline_.ops) {
        if (op.end_s < view0_ || op.start_s > view1_)
            continue;
        const QRectF box(area.left() + (op.start_s - view0_) * xScale, area.top() + op.stage * rowH + 1,
                         std::max(1.0, (op.end_s - op.start_s) * xScale), rowH - 2);
        QColor c = op.backward ? bwd : fwd;
        if (timeline_.chunks > 1 && op.chunk % 2 == 1)
            c = c.darker(125);  // alternate chunks of the interleaved schedule
        p.fillRect(box, c);
        if (box.width() >= 4) {  // separators only where they do not wash out narrow boxes
            p.setPen(QPen(pal.base().color(), 0.5));
            p.drawRect(box);
        }
        const QString number = QString::number(op.micro_batch);
        if (box.width() > fm.horizontalAdvance(number) + 4 && box.height() > fm.height() * 0.8) {
            p.setPen(Qt::white);
            p.drawText(box, Qt::AlignCenter, number);
        }
    }
    p.restore();
    // Time axis over the window, in a unit that suits its span.
    p.setPen(pal.text().color());
    const double y = area.bottom() + 2;
    p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y));
    const TimeUnit unit = unitFor(span);
    // Ticks at round times (1, 2 or 5 x 10^n apart), about five over the window, and as many
    // decimals as the tick step needs (never two ticks with the same label).
    const double rough = span * unit.scale / 5;
    const double decade = std::pow(10.0, std::floor(std::log10(rough)));
    const double tick = decade * (rough / decade < 1.5 ? 1 : rough / decade < 3.5 ? 2 : rough / decade < 7.5 ? 5 : 10);
    const int decimals = std::max(0, int(-std::floor(std::log10(tick) + 1e-9)));
    for (double v = std::ceil(view0_ * unit.scale / tick - 1e-9) * tick; v <= view1_ * unit.scale * (1 + 1e-9); v += tick) {
        const double x = area.left() + (v / unit.scale - view0_) * xScale;
        p.drawLine(QPointF(x, y), QPointF(x, y + 4));
        p.drawText(QRectF(x - 40, y + 4, 80, fm.height()), Qt::AlignHCenter, QString::number(v, 'f', decimals));
    }
    const QString caption = zoomed() ? tr("time within one step (%1), %2 to %3 of %4 shown; double-click: the whole step")
                                           .arg(QLatin1String(unit.name), duration(view0_), duration(view1_),
                                                duration(timeline_.makespan_s))
                                     : tr("time within one step (%1); bubble %2% of the step%3")
                                           .arg(QLatin1String(unit.name))
                                           .arg(100 * timeline_.bubbleFraction(), 0, 'f', 1)
                                           // On screen, how to see more; a report's picture is not interactive.
                                           .arg(isVisible() && !testAttribute(Qt::WA_DontShowOnScreen)
                                                    ? tr("; wheel: zoom")
                                                    : QString());
    p.drawText(QRectF(area.left(), y + 4 + fm.height(), area.width(), fm.height()), Qt::AlignHCenter, caption);
    // Legend.
    const double ly = height() - legendH + 2;
    double lx = area.left();
    for (const auto& [color, name] : {std::pair{fwd, tr("forward")}, std::pair{bwd, tr("backward")},
                                      std::pair{bubble, tr("idle (bubble)")}}) {
        p.fillRect(QRectF(lx, ly + 2, 14, fm.height() - 4), color);
        p.drawText(QPointF(lx + 18, ly + fm.ascent()), name);
        lx += 18 + fm.horizontalAdvance(name) + 20;
    }
}

} // namespace shardscope
