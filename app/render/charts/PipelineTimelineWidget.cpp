#include "PipelineTimelineWidget.h"
#include "ChartExport.h"

#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>

namespace shardscope {

PipelineTimelineWidget::PipelineTimelineWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumSize(320, 160);
    setAutoFillBackground(true);
    installExportMenu(this, QStringLiteral("pipeline-timeline"));
}

void PipelineTimelineWidget::setTimeline(const PipelineTimeline& timeline, const QString& title)
{
    timeline_ = timeline;
    title_ = title;
    update();
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
    const int left = fm.horizontalAdvance(QStringLiteral("stage 00")) + 12;
    const int legendH = fm.height() + 10;
    const int axisH = fm.height() * 2 + 8;
    // Room on the right for half of the last tick label, which is centred on the axis end.
    const int right = fm.horizontalAdvance(QString::number(timeline_.makespan_s, 'g', 3)) / 2 + 6;
    const QRectF area(left, titleH + 4, width() - left - right, height() - titleH - axisH - legendH - 8);
    const double rowH = area.height() / timeline_.stages;
    // Rows lower than a line of text are labelled every few stages so that labels never overlap.
    const int labelEvery = std::max(1, int(std::ceil(fm.height() / rowH)));
    const double xScale = area.width() / timeline_.makespan_s;

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
    const bool labels = timeline_.micro_batches * timeline_.chunks <= 48;
    for (const PipelineOp& op : timeline_.ops) {
        const QRectF box(area.left() + op.start_s * xScale, area.top() + op.stage * rowH + 1,
                         std::max(1.0, (op.end_s - op.start_s) * xScale), rowH - 2);
        QColor c = op.backward ? bwd : fwd;
        if (timeline_.chunks > 1 && op.chunk % 2 == 1)
            c = c.darker(125);  // alternate chunks of the interleaved schedule
        p.fillRect(box, c);
        if (box.width() >= 4) {  // separators only where they do not wash out narrow boxes
            p.setPen(QPen(pal.base().color(), 0.5));
            p.drawRect(box);
        }
        if (labels && box.width() > fm.horizontalAdvance(QStringLiteral("00")) + 2) {
            p.setPen(Qt::white);
            p.drawText(box, Qt::AlignCenter, QString::number(op.micro_batch));
        }
    }
    // Time axis in seconds.
    p.setPen(pal.text().color());
    const double y = area.bottom() + 2;
    p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y));
    // Ticks at round times (1, 2 or 5 x 10^n apart), about five over the step.
    const double rough = timeline_.makespan_s / 5;
    const double decade = std::pow(10.0, std::floor(std::log10(rough)));
    const double tick = decade * (rough / decade < 1.5 ? 1 : rough / decade < 3.5 ? 2 : rough / decade < 7.5 ? 5 : 10);
    for (int i = 0; i * tick <= timeline_.makespan_s * (1 + 1e-9); ++i) {
        const double t = i * tick;
        const double x = area.left() + t * xScale;
        p.drawLine(QPointF(x, y), QPointF(x, y + 4));
        p.drawText(QRectF(x - 40, y + 4, 80, fm.height()), Qt::AlignHCenter, QString::number(t, 'g', 3));
    }
    p.drawText(QRectF(area.left(), y + 4 + fm.height(), area.width(), fm.height()), Qt::AlignHCenter,
               tr("time within one step (s); bubble %1% of the step")
                   .arg(100 * timeline_.bubbleFraction(), 0, 'f', 1));
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
