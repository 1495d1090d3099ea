#include "PlansPage.h"
#include "PlansModel.h"
#include "SortHeaderView.h"
#include "Units.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

namespace shardscope {

namespace {

// Filters rows on the whole layout text ("tp=8", "interleaved", "zero=3"), not one column.
class LayoutFilterProxy : public QSortFilterProxyModel {
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setNeedle(const QString& text)
    {
        needle_ = text.trimmed();
        invalidateRowsFilter();
    }

protected:
    bool filterAcceptsRow(int row, const QModelIndex&) const override
    {
        if (needle_.isEmpty())
            return true;
        const auto* plans = static_cast<const PlansModel*>(sourceModel());
        const Plan* plan = plans->plan(row);
        if (!plan)
            return false;
        const QString layout = QString::fromStdString(toString(plan->layout));
        for (const QString& part : needle_.split(QLatin1Char(','), Qt::SkipEmptyParts))
            if (!layout.contains(part.trimmed(), Qt::CaseInsensitive))
                return false;
        return true;
    }

private:
    QString needle_;
};

} // namespace

PlansPage::PlansPage(QWidget* parent) : QWidget(parent)
{
    model_ = new PlansModel(this);
    auto* proxy = new LayoutFilterProxy(this);
    proxy->setSourceModel(model_);
    proxy->setSortRole(PlansModel::SortRole);
    proxy_ = proxy;
    table_ = new QTableView(this);
    table_->setHorizontalHeader(new SortHeaderView(table_));
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(PlansModel::Rank, Qt::AscendingOrder);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setAlternatingRowColors(true);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);

    filter_ = new QLineEdit(this);
    filter_->setPlaceholderText(tr("filter, e.g. tp=8,zero=1"));
    filter_->setClearButtonEnabled(true);
    progress_ = new QProgressBar(this);
    progress_->setRange(0, 1000);
    progress_->setTextVisible(true);
    showInfeasible_ = new QCheckBox(tr("Show &infeasible"), this);
    showInfeasible_->setToolTip(tr("Also list the best layouts that do not fit in memory (greyed), with the reason"));
    connect(showInfeasible_, &QCheckBox::toggled, this, &PlansPage::fillModel);
    cancel_ = new QPushButton(tr("Ca&ncel search"), this);
    cancel_->setEnabled(false);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* bar = new QHBoxLayout;
    auto* filterLabel = new QLabel(tr("Fil&ter:"), this);
    filterLabel->setBuddy(filter_);
    bar->addWidget(filterLabel);
    bar->addWidget(filter_, 1);
    bar->addWidget(showInfeasible_);
    bar->addWidget(progress_, 1);
    bar->addWidget(cancel_);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(status_);
    layout->addWidget(table_, 1);

    // Every feasible plan says "yes": the column only carries news when infeasible ones are listed.
    // A model reset shows hidden sections again; the header handled the reset before this runs.
    auto hideFeasible = [this] { table_->setColumnHidden(PlansModel::Feasible, !showInfeasible_->isChecked()); };
    connect(proxy_, &QAbstractItemModel::modelReset, this, hideFeasible);
    hideFeasible();

    connect(filter_, &QLineEdit::textChanged, this, [proxy](const QString& t) { proxy->setNeedle(t); });
    connect(cancel_, &QPushButton::clicked, this, &PlansPage::cancelRequested);
    // Enter (activated) and double-click both open the plan's details.
    auto activate = [this](const QModelIndex& index) {
        if (const Plan* plan = model_->plan(proxy_->mapToSource(index).row()))
            emit planActivated(*plan);
    };
    connect(table_, &QAbstractItemView::activated, this, activate);
    connect(table_, &QAbstractItemView::doubleClicked, this, activate);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                const QModelIndex source = proxy_->mapToSource(current);
                if (const Plan* plan = model_->plan(source.row()))
                    emit planSelected(*plan);
            });
}

void PlansPage::searchStarted()
{
    progress_->setValue(0);
    progress_->setFormat(tr("searching... %p%"));
    cancel_->setEnabled(true);
}

void PlansPage::searchProgress(double fraction, const QString& text)
{
    progress_->setValue(int(1000 * fraction));
    progress_->setFormat(text);
}

void PlansPage::searchEnded(bool cancelled)
{
    cancel_->setEnabled(false);
    progress_->setValue(cancelled ? 0 : 1000);
    progress_->setFormat(cancelled ? tr("cancelled") : tr("done"));
    if (cancelled)
        status_->setText(tr("Search cancelled: change the setup to search again."));
}

void PlansPage::showError(const QString& message)
{
    model_->clear();
    status_->setText(message);
}

void PlansPage::fillModel()
{
    std::vector<Plan> plans = result_.top;
    if (showInfeasible_->isChecked())
        plans.insert(plans.end(), result_.top_infeasible.begin(), result_.top_infeasible.end());
    model_->setPlans(problem_, std::move(plans));
}

void PlansPage::showResult(const Problem& problem, const SearchResult& result)
{
    problem_ = problem;
    result_ = result;
    fillModel();
    const SearchStats& s = result.stats;
    QString reasons;
    for (const auto& [reason, count] : s.infeasible_by_reason)
        reasons += tr("; %1: %2").arg(QString::fromStdString(reason), QString::fromStdString(formatCount(count)));
    status_->setText(tr("%1 candidate layouts: %2 evaluated, %3 pruned by memory, %4 feasible%5. "
                        "%6 s on %7 threads (%8 evaluations/s). Showing the best %9 by %10.")
                         .arg(QString::fromStdString(formatCount(s.candidates)))
                         .arg(QString::fromStdString(formatCount(s.evaluated)))
                         .arg(QString::fromStdString(formatCount(s.pruned)))
                         .arg(QString::fromStdString(formatCount(s.feasible)))
                         .arg(reasons)
                         .arg(s.seconds, 0, 'g', 3)
                         .arg(s.threads)
                         .arg(QString::fromStdString(formatSi(s.evaluationsPerSecond(), "")))
                         .arg(result.top.size())
                         .arg(QLatin1String(toString(result.objective))));
    if (result.top.empty())
        status_->setText(status_->text() + tr("\nNo layout fits: relax the constraints, add nodes or allow "
                                              "recomputation, ZeRO or offload."));
}

void PlansPage::selectRow(int row)
{
    const QModelIndex source = model_->index(row, 0);
    const QModelIndex index = proxy_->mapFromSource(source);
    if (index.isValid())
        table_->setCurrentIndex(index);
}

} // namespace shardscope
