// PlanDetailsPage: everything about one plan — its figures, the memory breakdown
// against HBM, the step-time breakdown, the pipeline schedule, the device mesh, and
// the named terms behind every figure.
#pragma once

#include "Layout.h"
#include "PlanFigures.h"
#include "PlanRequest.h"
#include "Prediction.h"
#include "Problem.h"

#include <optional>

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

    // Shows a priced plan as it is (the page never builds a cost model). The layout field lets
    // the user try any other layout, priced by the same request's terms.
    void showPlan(const PricedPlan& plan);
    void setRequest(const PlanRequest& request);  // what a typed layout is priced by
    void clear(const QString& message);
    QLineEdit* layoutEdit() const { return layoutEdit_; }
    QLabel* layoutErrors() const { return layoutErrors_; }

    const Prediction& prediction() const { return plan_.prediction; }
    const PricedPlan& plan() const { return plan_; }
    QLabel* summary() const { return summary_; }
    QTreeWidget* terms() const { return terms_; }
    QList<QWidget*> charts() const;

private:
    void applyLayoutText();

    std::optional<PlanRequest> request_;
    PricedPlan plan_;
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
