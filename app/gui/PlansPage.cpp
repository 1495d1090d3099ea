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
#include <QTimer>
#include <QVBoxLayout>

namespace shardscope {

PlansPage::PlansPage(QWidget* parent) : QWidget(parent)
{
    model_ = new PlansModel(this);
    auto* proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(model_);
    proxy->setSortRole(PlansModel::SortRole);
    proxy_ = proxy;
    table_ = new QTableView(this);
    auto* header = new SortHeaderView(table_);
    header->setFillsWidth(true);  // a wide window's width goes to the columns
    table_->setHorizontalHeader(header);
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
    filter_->setPlaceholderText(tr("filter, e.g. tp=8,zero=1 (layout keys: searches every layout)"));
    filterStatus_ = new QLabel(this);
    filterStatus_->setWordWrap(true);
    filterStatus_->hide();
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
    layout->addWidget(filterStatus_);
    layout->addWidget(status_);
    layout->addWidget(table_, 1);

    // Every feasible plan says "yes": the column only carries news when infeasible ones are listed.
    // A model reset shows hidden sections again; the header handled the reset before this runs.
    // The expert columns likewise: ep and etp are 1 and tp for every plan of a dense model.
    auto hideFeasible = [this] {
        table_->setColumnHidden(PlansModel::Feasible, !showInfeasible_->isChecked());
        table_->setColumnHidden(PlansModel::Ep, !model_->hasExperts());
        table_->setColumnHidden(PlansModel::Etp, !model_->hasExperts());
    };
    connect(proxy_, &QAbstractItemModel::modelReset, this, hideFeasible);
    hideFeasible();

    // A short pause after typing, then the filter is checked and (if valid) searched.
    auto* debounce = new QTimer(this);
    debounce->setSingleShot(true);
    debounce->setInterval(300);
    connect(debounce, &QTimer::timeout, this, &PlansPage::applyFilter);
    connect(filter_, &QLineEdit::textChanged, debounce, qOverload<>(&QTimer::start));
    connect(filter_, &QLineEdit::returnPressed, this, &PlansPage::applyFilter);
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
    // A new search result (the setup changed): an earlier filter no longer applies.
    lastFilter_.clear();
    if (!filter_->text().isEmpty()) {
        const QSignalBlocker block(filter_);
        filter_->clear();
    }
    filterStatus_->hide();
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
        status_->setText(status_->text() + tr("\nNo layout fits: relax the Setup's constraints (fixed keys, upper "
                                              "bounds, max memory), allow more recomputation modes, or add nodes."));
}

QString PlansPage::filterProblem(const QString& text)
{
    SearchSpace space;
    const FieldErrors errors = applyFixed(space, text.trimmed().toStdString(), "filter");
    return QString::fromStdString(joinErrors(errors));
}

void PlansPage::applyFilter()
{
    const QString text = filter_->text().trimmed();
    if (text == lastFilter_)
        return;
    if (const QString problem = filterProblem(text); !problem.isEmpty()) {
        filterStatus_->setStyleSheet(QStringLiteral("color: #c0392b"));
        filterStatus_->setText(tr("Not a layout filter: %1").arg(problem));
        filterStatus_->show();
        return;  // the plans shown stay as they were
    }
    lastFilter_ = text;
    filterStatus_->setStyleSheet(QString());
    filterStatus_->setVisible(!text.isEmpty());
    filterStatus_->setText(tr("Searching every layout with %1...").arg(text));
    emit filterRequested(text);
}

void PlansPage::showFiltered(const SearchResult& result, const QString& filter)
{
    result_ = result;
    fillModel();
    const SearchStats& s = result.stats;
    filterStatus_->setStyleSheet(QString());
    filterStatus_->show();
    if (result.top.empty())
        filterStatus_->setText(tr("No feasible layout has %1 (%2 such layouts searched; see the counts below).")
                                   .arg(filter, QString::fromStdString(formatCount(s.candidates))));
    else
        filterStatus_->setText(tr("%1 feasible layouts have %2; the best %3 by %4 are shown. Clear the filter for "
                                  "all plans.")
                                   .arg(QString::fromStdString(formatCount(s.feasible)), filter)
                                   .arg(result.top.size())
                                   .arg(QLatin1String(toString(result.objective))));
}

void PlansPage::selectRow(int row)
{
    const QModelIndex source = model_->index(row, 0);
    const QModelIndex index = proxy_->mapFromSource(source);
    if (index.isValid())
        table_->setCurrentIndex(index);
}

} // namespace shardscope
