#include "PlanDetailsPage.h"
#include "ChartAdapters.h"
#include "DeviceMeshWidget.h"
#include "PipelineSchedule.h"
#include "PipelineTimelineWidget.h"
#include "Units.h"

#include <QChartView>
#include <QHeaderView>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <map>

namespace shardscope {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

} // namespace

PlanDetailsPage::PlanDetailsPage(QWidget* parent) : QWidget(parent)
{
    layoutEdit_ = new QLineEdit(this);
    layoutEdit_->setPlaceholderText(tr("dp=8,tp=8,pp=4,sp=on,zero=1,mb=1,schedule=1f1b,recompute=selective"));
    layoutEdit_->setToolTip(tr("Any layout, as on the command line; keys left out take defaults, dp fills the devices. "
                               "Press Enter to predict it."));
    layoutErrors_ = new QLabel(this);
    layoutErrors_->setStyleSheet(QStringLiteral("color: #c0392b"));
    layoutErrors_->setWordWrap(true);
    layoutErrors_->hide();
    connect(layoutEdit_, &QLineEdit::returnPressed, this, &PlanDetailsPage::applyLayoutText);
    summary_ = new QLabel(this);
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    memory_ = makeStackedBarChart({}, this);
    time_ = makeStackedBarChart({}, this);
    timeline_ = new PipelineTimelineWidget(this);
    mesh_ = new DeviceMeshWidget(this);
    terms_ = new QTreeWidget(this);
    terms_->setHeaderLabels({tr("Figure / term"), tr("Value"), tr("How it is computed")});
    terms_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    terms_->setAlternatingRowColors(true);

    auto* top = new QSplitter(Qt::Horizontal, this);
    top->addWidget(memory_);
    top->addWidget(time_);
    top->setStretchFactor(0, 1);
    top->setStretchFactor(1, 2);
    auto* middle = new QSplitter(Qt::Horizontal, this);
    middle->addWidget(timeline_);
    middle->addWidget(mesh_);
    auto* vertical = new QSplitter(Qt::Vertical, this);
    vertical->addWidget(top);
    vertical->addWidget(middle);
    vertical->addWidget(terms_);
    vertical->setStretchFactor(0, 3);
    vertical->setStretchFactor(1, 3);
    vertical->setStretchFactor(2, 2);

    auto* layout = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    form->addRow(tr("&Layout:"), layoutEdit_);
    layout->addLayout(form);
    layout->addWidget(layoutErrors_);
    layout->addWidget(summary_);
    layout->addWidget(vertical, 1);
    clear(tr("Select a plan to see its details."));
}

QList<QWidget*> PlanDetailsPage::charts() const { return {memory_, time_, timeline_, mesh_}; }

void PlanDetailsPage::clear(const QString& message)
{
    summary_->setText(message);
    terms_->clear();
    setStackedBarChart(memory_, {});
    setStackedBarChart(time_, {});
    timeline_->setTimeline({}, QString());
    mesh_->setMesh({}, {});
}

void PlanDetailsPage::setRequest(const PlanRequest& request) { request_ = request; }

void PlanDetailsPage::applyLayoutText()
{
    if (!request_)
        return;
    const Problem& problem = request_->problem;
    FieldErrors errors;
    Layout layout = parseLayout(layoutEdit_->text().toStdString(), errors);
    if (errors.empty()) {
        resolveDataParallel(layout, problem.cluster.devices(), errors);
        if (errors.empty())
            errors = validate(layout, problem.model, problem.cluster, problem.training);
    }
    if (!errors.empty()) {
        layoutErrors_->setText(QString::fromStdString(joinErrors(errors)));
        layoutErrors_->show();
        return;
    }
    layoutErrors_->hide();
    showPlan(pricePlan(*request_, layout));
}

void PlanDetailsPage::showPlan(const PricedPlan& plan)
{
    plan_ = plan;
    request_ = plan.request;
    const Problem& problem = plan_.request.problem;
    const Layout& layout = plan_.layout;
    layoutEdit_->setText(q(toString(layout)));
    layoutErrors_->hide();
    const Prediction& p = plan_.prediction;
    const QString experts = expertSummary(problem, layout, p);
    summary_->setText(QStringLiteral("<b>%1</b><br>%2<br>%3<small>%4</small>")
                          .arg(q(toString(layout)).toHtmlEscaped(), predictionSummary(problem, p).toHtmlEscaped(),
                               experts.isEmpty() ? QString() : experts.toHtmlEscaped() + QStringLiteral("<br>"),
                               tr("Precision: %1; cost model: %2; search constraints: %3")
                                   .arg(QLatin1String(toString(problem.training.precision)),
                                        q(plan_.request.cost_model.name), q(constraintsText(plan_.request.space)))
                                   .toHtmlEscaped()));
    setStackedBarChart(memory_, memoryChartData(p));
    setStackedBarChart(time_, stepTimeChartData(p));

    try {
        const PipelineTimeline timeline = pipelineTimelineFor(layout, p);
        timeline_->setTimeline(timeline, pipelineTitle(layout, p));
    } catch (const std::exception& e) {
        timeline_->setTimeline({}, QString::fromUtf8(e.what()));
    }
    mesh_->setMesh(problem, layout);

    terms_->clear();
    std::map<std::string, QTreeWidgetItem*> figures;
    for (const Term& term : plan_.terms) {
        const bool bytes = term.figure.rfind("memory", 0) == 0;
        auto value = [&](double v) { return q(bytes ? formatBytes(v) : formatDuration(v)); };
        QTreeWidgetItem*& parent = figures[term.figure];
        if (!parent) {
            parent = new QTreeWidgetItem(terms_, {figureName(term.figure)});
            parent->setToolTip(0, q(term.figure));  // the key, as predict --explain and the JSON name it
            parent->setFirstColumnSpanned(false);
            parent->setData(1, Qt::UserRole, 0.0);
        }
        const double sum = parent->data(1, Qt::UserRole).toDouble() + term.value;
        parent->setData(1, Qt::UserRole, sum);
        parent->setText(1, value(sum));
        auto* item = new QTreeWidgetItem(parent, {q(term.name), value(term.value), q(term.formula)});
        item->setToolTip(2, q(term.formula));
    }
    terms_->expandAll();
}

} // namespace shardscope
