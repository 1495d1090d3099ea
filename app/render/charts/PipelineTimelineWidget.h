// PipelineTimelineWidget: micro-batches per pipeline stage over time — forward,
// backward and idle (bubble) — drawn from a simulated PipelineTimeline. The wheel zooms
// the time axis about the pointer, a drag pans it, double-click (or "Reset zoom" in the
// context menu) shows the whole step; the pointer names the micro-batch under it.
#pragma once

#include "PipelineSchedule.h"

#include <QWidget>

#include <utility>

namespace shardscope {

class PipelineTimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit PipelineTimelineWidget(QWidget* parent = nullptr);

    void setTimeline(const PipelineTimeline& timeline, const QString& title);
    const PipelineTimeline& timeline() const { return timeline_; }
    QSize sizeHint() const override { return {640, 260}; }

    // The time window shown (seconds within the step): the whole step unless zoomed.
    std::pair<double, double> visibleRange() const { return {view0_, view1_}; }
    bool zoomed() const;
    // Zooms the time axis by `factor` (< 1: in) about the time at widget x `x`.
    void zoomAt(double factor, double x);
    // Moves the window by `dx` pixels of the axis (positive: later), within the step.
    void panBy(double dx);
    void resetZoom();
    // The widget x of a time, and the op drawn at a point (nullptr: none, e.g. idle).
    double xOf(double t) const;
    const PipelineOp* opAt(const QPointF& at) const;
    // What the pointer at `at` is over: "stage 3, micro-batch 17, backward: 1.23 s - 1.30 s (67 ms)".
    QString toolTipAt(const QPointF& at) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

public:
    // The rectangle the stages are drawn in (widget coordinates).
    QRectF plotArea() const;

private:
    int stageAt(double y) const;
    void setWindow(double t0, double t1);

    PipelineTimeline timeline_;
    QString title_;
    double view0_ = 0, view1_ = 0;
    bool dragging_ = false;
    double dragX_ = 0;
};

} // namespace shardscope
