// PlanDetailsPage: everything about one plan — its figures, the memory breakdown
// against HBM, the step-time breakdown, the pipeline schedule, the device mesh, and
// the named terms behind every figure.
#pragma once

#include "Layout.h"
#include "PlanFigures.h"
#include "Prediction.h"
#include "Problem.h"

#include <QWidget>

class QChartView;
class QLabel;
class QLineEdit;
class QTreeWidget;

namespace shardscope {

class DeviceMeshWidget;
class PipelineTimelineWidget;

class PlanDetailsPage : public QWidget {
    Q_OBJECT
public:
    explicit PlanDetailsPage(QWidget* parent = nullptr);

    // Shows a layout of a problem; the layout field lets the user try any other by hand.
    void showPlan(const Problem& problem, const Layout& layout);
    void setProblem(const Problem& problem);
    void clear(const QString& message);
    QLineEdit* layoutEdit() const { return layoutEdit_; }
    QLabel* layoutErrors() const { return layoutErrors_; }

    const Prediction& prediction() const { return prediction_; }
    QLabel* summary() const { return summary_; }
    QTreeWidget* terms() const { return terms_; }
    QList<QWidget*> charts() const;

private:
    void applyLayoutText();

    Problem problem_;
    bool hasProblem_ = false;
    Prediction prediction_;
    QLineEdit* layoutEdit_ = nullptr;
    QLabel* layoutErrors_ = nullptr;
    QLabel* summary_ = nullptr;
    QChartView* memory_ = nullptr;
    QChartView* time_ = nullptr;
    PipelineTimelineWidget* timeline_ = nullptr;
    DeviceMeshWidget* mesh_ = nullptr;
    QTreeWidget* terms_ = nullptr;
};

} // namespace shardscope
