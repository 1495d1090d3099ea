// PipelineTimelineWidget: micro-batches per pipeline stage over time — forward,
// backward and idle (bubble) — drawn from a simulated PipelineTimeline.
#pragma once

#include "PipelineSchedule.h"

#include <QWidget>

namespace shardscope {

class PipelineTimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit PipelineTimelineWidget(QWidget* parent = nullptr);

    void setTimeline(const PipelineTimeline& timeline, const QString& title);
    const PipelineTimeline& timeline() const { return timeline_; }
    QSize sizeHint() const override { return {640, 260}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    PipelineTimeline timeline_;
    QString title_;
};

} // namespace shardscope
