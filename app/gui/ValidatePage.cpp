#include "ValidatePage.h"
#include "EngineCalibration.h"
#include "HostProfileCache.h"
#include "Store.h"
#include "Device.h"
#include "EngineFit.h"
#include "ChartAdapters.h"
#include "ChartData.h"
#include "JobRunner.h"
#include "MetricText.h"
#include "RunHistory.h"
#include "ScaledCase.h"
#include "Units.h"

#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QPointer>
#include <QSignalBlocker>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QComboBox>
#include <QDateTime>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace shardscope {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

QString valueText(const MetricComparison& m, double v) { return metricValueText(m.metric, v); }

QStringList liveColumns()
{
    return {QObject::tr("metric"), QObject::tr("predicted"), QObject::tr("measured"), QObject::tr("error"),
            QObject::tr("device")};
}

// The metric column shows words; the JSON key (what `validate --json` and the CLI table print)
// stays on the item, for scripts, tests and the tooltip.
void markMetricKey(QTableWidgetItem* item, const std::string& metric)
{
    const QString key = QString::fromStdString(metric);
    item->setData(ValidatePage::kMetricKeyRole, key);
    item->setToolTip(item->toolTip().isEmpty() ? key : key + QStringLiteral("\n") + item->toolTip());
}

bool charted(const std::string& metric)
{
    const auto& shown = validationTableMetrics();
    return std::find(shown.begin(), shown.end(), metric) != shown.end();
}

QString localTime(const QString& utc)
{
    const QDateTime when = QDateTime::fromString(utc, Qt::ISODateWithMs);
    return when.isValid() ? when.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm")) : utc;
}

XYSeriesData lossSeries(const QString& name, const QVector<double>& losses, int color)
{
    XYSeriesData series{name, {}, true, false, color};
    for (qsizetype i = 0; i < losses.size(); ++i)
        series.points.push_back({double(i + 1), losses[i], QStringLiteral("%1, step %2: %3").arg(name).arg(i + 1).arg(losses[i], 0, 'f', 4)});
    return series;
}

QTableWidget* table(const QStringList& headers, QWidget* parent)
{
    auto* t = new QTableWidget(0, int(headers.size()), parent);
    t->setHorizontalHeaderLabels(headers);
    t->verticalHeader()->hide();
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setAlternatingRowColors(true);
    return t;
}

// A scaled case's parts that a worker may use: copies only, never `this`.
struct ValidationOutcome {
    ValidationResult result;
    std::vector<std::string> notes;
};

} // namespace

ValidatePage::ValidatePage(Store& store, QWidget* parent) : QWidget(parent), store_(store)
{
    job_ = new JobRunner(this);
    caseLabel_ = new QLabel(tr("Select a plan: its validation case is derived from it."), this);
    caseLabel_->setWordWrap(true);
    caseLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    run_ = new QPushButton(tr("Validate the selected pla&n"), this);
    cancel_ = new QPushButton(tr("Cancel"), this);
    cancel_->setEnabled(false);
    costModel_ = new QComboBox(this);
    costModel_->setToolTip(tr("The cost-model terms that price the case: the built-in default, or a profile "
                              "fitted on engine runs (shardscope-cli calibrate --engine --save NAME), whose "
                              "wall-clock terms describe this machine"));
    progress_ = new QProgressBar(this);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    progress_->setRange(0, 1000);
    lossChart_ = makeXYChart({tr("Training loss (engine run)"), tr("step"), tr("loss (nats/token)"), false, 10, {}, {}}, this);
    errorChart_ = makeStackedBarChart(
        {tr("Prediction error by metric"), tr("predicted / measured - 1 (%)"), {}, {}, true, 0, {}, {}}, this);
    metrics_ = table(liveColumns(), this);
    history_ = table({tr("run"), tr("when"), tr("version"), tr("cases"), tr("device step time |error|"), tr("name")}, this);
    history_->setWordWrap(false);
    history_->setTextElideMode(Qt::ElideMiddle);
    history_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    history_->setToolTip(tr("Double-click a run (or press Enter) to open it; select two runs (Ctrl+click) to "
                            "compare them side by side"));

    auto* bar = new QHBoxLayout;
    bar->addWidget(run_);
    bar->addWidget(cancel_);
    auto* costModelLabel = new QLabel(tr("C&ost model:"), this);
    costModelLabel->setBuddy(costModel_);
    bar->addWidget(costModelLabel);
    bar->addWidget(costModel_);
    calibrate_ = new QPushButton(tr("Calibr&ate on this machine"), this);
    calibrate_->setToolTip(tr("Train the 17 validation cases on the engine (a few seconds), fit the cost model's "
                              "terms to them with held-out cases, and save the result as a cost-model profile"));
    bar->addWidget(calibrate_);
    bar->addWidget(progress_, 1);
    auto* charts = new QSplitter(Qt::Horizontal, this);
    charts->addWidget(lossChart_);
    charts->addWidget(errorChart_);
    // Room for one readable label per metric: Qt Charts elides every category label when
    // a category gets less than a line of height.
    errorChart_->setMinimumHeight(300);
    auto* tables = new QSplitter(Qt::Horizontal, this);
    tables->addWidget(metrics_);
    auto* historyBox = new QWidget(this);
    auto* historyLayout = new QVBoxLayout(historyBox);
    historyLayout->setContentsMargins(0, 0, 0, 0);
    auto* historyHint = new QLabel(tr("Run history: double-click a run to open it; select two (Ctrl+click) to compare them."),
                                   historyBox);
    historyHint->setWordWrap(true);
    historyLayout->addWidget(historyHint);
    historyLayout->addWidget(history_, 1);
    tables->addWidget(historyBox);
    auto* vertical = new QSplitter(Qt::Vertical, this);
    vertical->addWidget(charts);
    vertical->addWidget(tables);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(caseLabel_);
    layout->addLayout(bar);
    layout->addWidget(status_);
    layout->addWidget(vertical, 1);

    connect(run_, &QPushButton::clicked, this, &ValidatePage::start);
    connect(cancel_, &QPushButton::clicked, this, &ValidatePage::cancel);
    connect(calibrate_, &QPushButton::clicked, this, &ValidatePage::calibrate);
    // Enter and double-click (activation) open a run; two rows selected compare them.
    connect(history_, &QAbstractItemView::activated, this, [this](const QModelIndex& index) {
        if (const QTableWidgetItem* item = history_->item(index.row(), 0))
            openRun(item->data(Qt::UserRole).toInt());
    });
    connect(history_, &QTableWidget::itemSelectionChanged, this, [this] {
        const QVector<int> ids = selectedRuns();
        if (ids.size() == 2 && shownRuns_ != QVector<int>{std::min(ids[0], ids[1]), std::max(ids[0], ids[1])})
            compareRuns(ids[0], ids[1]);
    });
    connect(job_, &JobRunner::progressed, this, [this](double fraction, const QString& text) {
        progress_->setValue(int(1000 * fraction));
        progress_->setFormat(text);
    });
    connect(job_, &JobRunner::finished, this, [this](quint64, bool cancelled) {
        run_->setEnabled(request_.has_value());
        calibrate_->setEnabled(true);
        cancel_->setEnabled(false);
        if (cancelled) {
            report(tr("Cancelled: nothing was stored."), false, tr("cancelled"));
            emit finished(false);
        }
    });
    connect(job_, &JobRunner::failed, this, [this](quint64, const QString& message) {
        run_->setEnabled(request_.has_value());
        calibrate_->setEnabled(true);
        cancel_->setEnabled(false);
        clearResults();
        report(tr("The run failed: %1").arg(message), true);
        emit finished(false);
    });
    run_->setEnabled(false);
    reloadCostModels();
    reloadHistory();
}

QList<QWidget*> ValidatePage::charts() const { return {lossChart_, errorChart_}; }

bool ValidatePage::busy() const { return job_->busy(); }

void ValidatePage::setPlan(const PlanRequest& request, const Layout& layout)
{
    // Another plan: the results shown so far are not its own.
    if (!job_->busy() && (!request_ || !(*request_ == request) || !(layout_ == layout))) {
        clearResults();
        progress_->setValue(0);
        report(tr("Run the engine to validate this plan."), false, QString());
    }
    request_ = request;
    const Problem& problem = request.problem;
    layout_ = layout;
    run_->setEnabled(!job_->busy());
    caseLabel_->setText(tr("Plan: %1 on %2 x %3, %4")
                            .arg(q(problem.model.name))
                            .arg(problem.cluster.nodes)
                            .arg(q(problem.cluster.node.name), q(toString(layout))));
}

void ValidatePage::cancel() { job_->cancel(); }

void ValidatePage::calibrate()
{
    if (job_->busy())
        return;
    // Catalog reads stay on this thread: the suite's device and this host's stored profile
    // (the use case measures the host when there is none).
    EngineCalibrationRequest request;
    try {
        request.device = engine::profileFromChip(store_.specs().chip(kSuiteChip), kSuiteChipScale);
    } catch (const std::exception& e) {
        report(tr("Cannot calibrate: %1").arg(QString::fromUtf8(e.what())), true);
        return;
    }
    if (const auto stored = storedHostProfile(store_.runs(), 1))
        request.host = emulationHost(stored->profile);
    run_->setEnabled(false);
    calibrate_->setEnabled(false);
    cancel_->setEnabled(true);
    progress_->setValue(0);
    std::function<EngineCalibration(const std::atomic<bool>&, const JobRunner::Progress&)> work =
        [request](const std::atomic<bool>& cancel, const JobRunner::Progress& progress) {
            return calibrateOnEngine(request, &cancel, [&](int done, int total, const std::string& next) {
                progress(double(done) / double(total + 1),
                         QObject::tr("case %1 of %2: %3").arg(done + 1).arg(total).arg(q(next)));
            });
        };
    job_->start<EngineCalibration>(work, [this](const EngineCalibration& outcome) {
        if (!outcome.complete)
            return;
        ValidationProfile profile = outcome.fit.profile;
        profile.terms.name = engineProfileName();
        const QString name = q(profile.terms.name);
        try {
            store_.runs().storeCostProfile(profile.terms.name, profile);
        } catch (const std::exception& e) {
            report(tr("Calibrated, but not stored: %1").arg(QString::fromUtf8(e.what())), true);
            return;
        }
        reloadCostModels();
        costModel_->setCurrentText(name);
        progress_->setValue(1000);
        report(tr("Saved as %1: %2").arg(name, q(calibrationSummary(outcome.fit))), false, tr("calibrated"));
        emit calibrated(name);
    });
}

void ValidatePage::addLoss(int step, double loss)
{
    losses_.push_back({double(step), loss});
    XYSeriesData series{tr("loss"), {}, true, false, 0};
    for (const QPointF& p : losses_)
        series.points.push_back({p.x(), p.y(), QStringLiteral("step %1: %2").arg(p.x()).arg(p.y(), 0, 'f', 4)});
    setXYChart(lossChart_, {tr("Training loss (engine run)"), tr("step"), tr("loss (nats/token)"), false, 10, {series}, {}});
}

void ValidatePage::start()
{
    if (!request_ || job_->busy())
        return;
    ScaledCase scaled;
    try {
        scaled = scaledValidationCase(request_->problem, layout_, steps_, request_->cost_model);
    } catch (const std::exception& e) {
        clearResults();
        report(tr("Cannot validate this plan: %1").arg(QString::fromUtf8(e.what())), true);
        return;
    }
    clearResults();  // nothing of an earlier run stays under the new case's header
    report(tr("Running the validation case on the engine..."), false, tr("starting..."));
    run_->setEnabled(false);
    calibrate_->setEnabled(false);
    cancel_->setEnabled(true);
    progress_->setValue(0);
    QStringList notes;
    for (const std::string& n : scaled.adaptations)
        notes << q(n);
    const engine::TrainRequest& r = scaled.validation.request;
    caseLabel_->setText(tr("Validation case: %1 layers, hidden %2, %3 heads, vocab %4, seq %5 (%6), batch %7 on %8 "
                           "devices of %9, layout %10%11")
                            .arg(r.model.layers)
                            .arg(r.model.hidden)
                            .arg(r.model.heads)
                            .arg(r.model.vocab)
                            .arg(r.model.seq)
                            .arg(q(engine::describe(r.model)))
                            .arg(r.batch)
                            .arg(r.layout.devices())
                            .arg(deviceText(q(scaled.validation.profile.name)), q(toString(r.layout)),
                                 notes.isEmpty() ? QString() : tr("\nAdapted: %1").arg(notes.join(QStringLiteral("; ")))));

    // The chosen cost-model profile (read here: the catalog belongs to this thread).
    ValidationProfile params;
    try {
        params = store_.runs().validationProfileNamed(costModel_->currentText().toStdString());
    } catch (const std::exception& e) {
        clearResults();
        report(tr("Cannot validate this plan: %1").arg(QString::fromUtf8(e.what())), true);
        run_->setEnabled(true);
        cancel_->setEnabled(false);
        return;
    }
    ScaledCase work = scaled;  // the worker gets copies
    // The host runs the emulation; its stored profile prices the wall clock (measured by the
    // worker when this machine has none yet: a fraction of a second the GUI thread must not spend).
    if (const auto stored = storedHostProfile(store_.runs(), 1))
        work.validation.host = emulationHost(stored->profile);
    const int steps = steps_;
    QPointer<ValidatePage> self(this);
    const quint64 jobId = job_->currentJob() + 1;  // the id start() below will give
    std::function<ValidationOutcome(const std::atomic<bool>&, const JobRunner::Progress&)> run =
        [work, params, steps, self, jobId](const std::atomic<bool>& cancel, const JobRunner::Progress& progress) mutable {
            if (!work.validation.host.known())
                work.validation.host = emulationHost(engine::measureHostProfile(1));
            const engine::StepCallback onStep = [self, jobId, steps, progress](const engine::StepRecord& s) {
                progress(double(s.step) / steps, QObject::tr("step %1 of %2, loss %3").arg(s.step).arg(steps).arg(s.loss, 0, 'f', 4));
                const int step = s.step;
                const double loss = s.loss;
                QMetaObject::invokeMethod(
                    self.data(),
                    [self, jobId, step, loss] {
                        if (self && self->job_->currentJob() == jobId)
                            self->addLoss(step, loss);
                    },
                    Qt::QueuedConnection);
            };
            return ValidationOutcome{runValidation(work.validation, params, &cancel, onStep),
                                     work.adaptations};
        };
    job_->start<ValidationOutcome>(run, [this](const ValidationOutcome& outcome) { showResult(outcome.result, outcome.notes); });
}

void ValidatePage::showResult(const ValidationResult& result, const std::vector<std::string>& notes)
{
    result_ = result;
    metrics_->setRowCount(0);
    if (!result.error.empty()) {
        clearResults();
        report(tr("Could not compare: %1").arg(q(result.error)), true);
        emit finished(false);
        return;
    }
    StackedBarsData errors{tr("Prediction error by metric"), tr("predicted / measured - 1 (%)"), {}, {}, true, 0, {}, {}};
    BarSet set{tr("error"), {}, 0};
    for (const MetricComparison& m : result.metrics) {
        const int row = metrics_->rowCount();
        metrics_->insertRow(row);
        // Short: the column's width is its longest cell, and the tooltip says why.
        const QString err = !m.compared ? tr("not predicted")
                                        : relErrorText(m.rel_error);
        const QStringList cells{metricWords(m.metric), m.compared ? valueText(m, m.predicted) : QStringLiteral("—"),
                                valueText(m, m.measured), err,
                                m.worst_device >= 0 ? QString::number(m.worst_device) : tr("all")};
        // Where the model is known to differ, the row says which term (tooltip).
        const QString why = q(explainDifference(result, m.metric));
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (!why.isEmpty())
                item->setToolTip(tr("Known difference: %1").arg(why));
            metrics_->setItem(row, c, item);
        }
        markMetricKey(metrics_->item(row, 0), m.metric);
        // The chart shows the summary metrics (the CLI table's columns; the per-kind byte
        // counts stay in the table: twelve bars no longer leave room for their labels).
        // A metric not compared (the emulation's wall time on shared cores) has no error bar.
        if (!charted(m.metric) || !m.compared)
            continue;
        // Bars show the size of the error; the table keeps its sign. The size is in the
        // category's name too: an exact 0 draws no bar and would read as missing.
        const double size = std::isfinite(m.rel_error) ? std::fabs(m.rel_error) : 0.0;
        errors.categories << tr("%1: %2").arg(metricWords(m.metric), relErrorText(size));
        set.values << 100 * size;
    }
    errors.sets = {set};
    errors.value_axis = tr("|predicted / measured - 1| (%)");
    setStackedBarChart(errorChart_, errors);
    metrics_->resizeColumnsToContents();

    QJsonObject doc = validationDocument({result});
    addLossCurves(doc, {result});  // the history draws the curve again when the run is opened
    QJsonArray adaptations;
    for (const std::string& n : notes)
        adaptations.append(q(n));
    doc.insert("adaptations", adaptations);
    doc.insert("device", q(result.c.profile.name));
    doc.insert("cost_model", costModel_->currentText());
    if (!storesRuns_) {
        report(tr("Done (not stored in the history)."), false, tr("done"));
        progress_->setValue(1000);
        emit finished(true);
        return;
    }
    try {
        const int id = store_.runs().storeValidationRun(result.c.name, doc);
        report(tr("Done: stored as run %1 in the history.").arg(id), false, tr("done"));
    } catch (const std::exception& e) {
        report(tr("Done, but not stored: %1").arg(QString::fromUtf8(e.what())), true);
    }
    progress_->setValue(1000);
    reloadHistory();
    emit finished(true);
}

void ValidatePage::clearResults()
{
    result_.reset();
    shownRuns_.clear();
    metrics_->setRowCount(0);
    setMetricColumns(liveColumns());
    losses_.clear();
    setXYChart(lossChart_, {tr("Training loss (engine run)"), tr("step"), tr("loss (nats/token)"), false, 10, {},
                            tr("Validate the selected plan: its scaled-down model trains on the emulated cluster "
                               "and its loss appears here, step by step.")});
    setStackedBarChart(errorChart_, {tr("Prediction error by metric"), tr("predicted / measured - 1 (%)"), {}, {}, true,
                                     0, {}, tr("The planner's predictions against the engine's measurements appear "
                                               "here once a validation run ends. A past run opens from the history.")});
}

void ValidatePage::report(const QString& text, bool error, const QString& bar)
{
    status_->setText(text);
    status_->setStyleSheet(error ? QStringLiteral("color: #c0392b") : QString());
    // The bar keeps the state in a word: the message is read in full below it.
    progress_->setFormat(error ? tr("failed") : bar);
}

void ValidatePage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    reloadCostModels();  // profiles saved from the CLI meanwhile appear
    if (selectedRuns().isEmpty())
        reloadHistory();  // ... and runs (a selection being compared is left as it is)
}

void ValidatePage::reloadCostModels()
{
    const QString current = costModel_->currentText();
    costModel_->clear();
    costModel_->addItem(QStringLiteral("default"));
    try {
        for (const std::string& name : store_.runs().costProfileNames())
            costModel_->addItem(q(name));
    } catch (const std::exception&) {
        // A catalog that cannot list its profiles still validates with the default.
    }
    const int at = costModel_->findText(current);
    costModel_->setCurrentIndex(at >= 0 ? at : 0);
}

void ValidatePage::reloadHistory()
{
    const QSignalBlocker quiet(history_);  // emptying the table is no selection of the user's
    history_->setRowCount(0);
    for (const RunStore::ValidationRun& r : store_.runs().validationRuns(50)) {
        const int row = history_->rowCount();
        history_->insertRow(row);
        const QJsonObject summary = r.document.value(QLatin1String("summary")).toObject();
        const QJsonObject stepSummary = summary.value(QLatin1String("device_step_time_s")).toObject();
        const double step = stepSummary.value(QLatin1String("median_rel_error")).toDouble();
        // A run whose cases could not be compared (out of memory, a refusal) has no error to show:
        // "failed", with the first case's reason in the tooltip, not a 0.0% that reads as perfect.
        QString failure;
        for (const QJsonValue& c : r.document.value(QLatin1String("cases")).toArray())
            if (failure.isEmpty())
                failure = c.toObject().value(QLatin1String("error")).toString();
        const bool compared = stepSummary.value(QLatin1String("cases")).toInt(0) > 0;
        // Local time to the minute: the stored UTC stamp (with seconds) is in the tooltip.
        const QDateTime when = QDateTime::fromString(q(r.created_at), Qt::ISODateWithMs);
        const QStringList cells{QString::number(r.id),
                                when.isValid() ? when.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"))
                                               : q(r.created_at),
                                q(r.software_version),
                                QString::number(r.document.value(QLatin1String("cases")).toArray().size()),
                                compared             ? QStringLiteral("%1%").arg(100 * step, 0, 'f', 1)
                                : failure.isEmpty() ? QStringLiteral("-")
                                                    : tr("failed"),
                                q(r.name)};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c == 0)
                item->setData(Qt::UserRole, r.id);
            if (c == 1)
                item->setToolTip(q(r.created_at));
            if (c == 4 && !compared && !failure.isEmpty())
                item->setToolTip(failure);
            if (c == cells.size() - 1)
                item->setToolTip(q(r.name));  // long plan names are elided in the cell
            history_->setItem(row, c, item);
        }
    }
    // The last column (the run's name) takes the rest of the width, elided in the middle.
    for (int c = 0; c + 1 < history_->columnCount(); ++c)
        history_->resizeColumnToContents(c);
}

void ValidatePage::setMetricColumns(const QStringList& headers)
{
    metrics_->setColumnCount(int(headers.size()));
    metrics_->setHorizontalHeaderLabels(headers);
}

QVector<int> ValidatePage::selectedRuns() const
{
    QVector<int> ids;
    for (const QModelIndex& index : history_->selectionModel()->selectedRows())
        if (const QTableWidgetItem* item = history_->item(index.row(), 0))
            ids << item->data(Qt::UserRole).toInt();
    return ids;
}

namespace {

std::optional<StoredRun> findRun(Store& store, int id)
{
    // The history shows the newest 50; a run pushed out of them by newer ones is still found.
    for (const int limit : {50, 100000})
        for (const RunStore::ValidationRun& r : store.runs().validationRuns(limit))
            if (r.id == id)
                return storedRun(r);
    return std::nullopt;
}

QString runDescription(const StoredRun& run)
{
    QStringList parts{localTime(run.created_at)};
    if (!run.software_version.isEmpty())
        parts << QObject::tr("ShardScope %1").arg(run.software_version);
    if (!run.cost_model.isEmpty())
        parts << QObject::tr("cost model %1").arg(run.cost_model);
    if (!run.device.isEmpty())
        parts << QObject::tr("device %1").arg(deviceText(run.device));
    QString what = run.cases.size() == 1 ? QObject::tr("%1, layout %2").arg(run.cases.front().name, run.cases.front().layout)
                                         : QObject::tr("%n cases", nullptr, int(run.cases.size()));
    return QObject::tr("run %1 (%2): %3").arg(run.id).arg(parts.join(QStringLiteral(", ")), what);
}

} // namespace

bool ValidatePage::openRun(int id)
{
    if (job_->busy()) {
        status_->setText(tr("A run is going: open a stored run when it is done."));
        return false;
    }
    std::optional<StoredRun> found;
    try {
        found = findRun(store_, id);
    } catch (const std::exception& e) {
        report(tr("Cannot read run %1: %2").arg(id).arg(QString::fromUtf8(e.what())), true);
        return false;
    }
    if (!found) {
        report(tr("The history has no run %1 (removed?).").arg(id), true);
        return false;
    }
    const StoredRun& run = *found;
    clearResults();
    shownRuns_ = {id};
    const bool several = run.cases.size() > 1;
    setMetricColumns(several ? QStringList{tr("case")} + liveColumns() : liveColumns());
    QStringList failed;
    for (const StoredCase& c : run.cases) {
        if (!c.error.isEmpty())
            failed << QStringLiteral("%1: %2").arg(c.name, c.error);
        for (const StoredMetric& m : c.metrics) {
            const int row = metrics_->rowCount();
            metrics_->insertRow(row);
            QStringList cells{metricWords(m.metric), metricValueText(m.metric, m.predicted),
                              metricValueText(m.metric, m.measured),
                              std::isfinite(m.predicted) ? relErrorText(m.rel_error) : tr("not predicted"),
                              m.worst_device >= 0 ? QString::number(m.worst_device) : tr("all")};
            if (several)
                cells.prepend(c.name);
            for (int col = 0; col < cells.size(); ++col) {
                auto* item = new QTableWidgetItem(cells[col]);
                if (!m.known_difference.isEmpty())
                    item->setToolTip(tr("Known difference: %1").arg(m.known_difference));
                metrics_->setItem(row, col, item);
            }
            markMetricKey(metrics_->item(row, several ? 1 : 0), m.metric);
        }
    }
    metrics_->resizeColumnsToContents();

    StackedBarsData errors{several ? tr("Prediction error by metric (median of %n cases)", nullptr, int(run.cases.size()))
                                   : tr("Prediction error by metric"),
                           tr("|predicted / measured - 1| (%)"), {}, {}, true, 0, {}, {}};
    BarSet set{tr("run %1").arg(id), {}, 0};
    for (const std::string& metric : validationTableMetrics())
        if (const auto e = run.medianAbsError(metric)) {
            errors.categories << tr("%1: %2").arg(metricWords(metric), relErrorText(*e));  // a 0 has no bar
            set.values << 100 * *e;
        }
    errors.sets = {set};
    setStackedBarChart(errorChart_, errors);

    XYChartData loss{tr("Training loss (run %1)").arg(id), tr("step"), tr("loss (nats/token)"), false, 10, {}, {}};
    int color = 0;
    for (const StoredCase& c : run.cases)
        if (!c.losses.isEmpty())
            loss.series.push_back(lossSeries(several ? c.name : tr("run %1").arg(id), c.losses, color++));
    if (loss.series.isEmpty())
        loss.title = tr("Training loss (not kept for run %1: stored by an older version)").arg(id);
    setXYChart(lossChart_, loss);

    caseLabel_->setText(tr("Stored %1").arg(runDescription(run)));
    progress_->setValue(0);
    QString text = tr("Showing stored run %1 (select another plan, or validate this one, to leave it).").arg(id);
    if (!failed.isEmpty())
        text += QLatin1Char('\n') + tr("Not compared: %1").arg(failed.join(QStringLiteral("; ")));
    report(text, false, tr("run %1").arg(id));
    return true;
}

bool ValidatePage::compareRuns(int idA, int idB)
{
    if (job_->busy()) {
        status_->setText(tr("A run is going: compare stored runs when it is done."));
        return false;
    }
    if (idA > idB)
        std::swap(idA, idB);  // the older run is A
    std::optional<StoredRun> a, b;
    try {
        a = findRun(store_, idA);
        b = findRun(store_, idB);
    } catch (const std::exception& e) {
        report(tr("Cannot read runs %1 and %2: %3").arg(idA).arg(idB).arg(QString::fromUtf8(e.what())), true);
        return false;
    }
    if (!a || !b || idA == idB) {
        report(tr("The history has no run %1 (removed?).").arg(!a ? idA : idB), true);
        return false;
    }
    const RunComparison cmp = shardscope::compareRuns(*a, *b);
    clearResults();
    shownRuns_ = {idA, idB};
    const bool several = a->cases.size() > 1 || b->cases.size() > 1;
    const QString ra = tr("run %1").arg(idA), rb = tr("run %1").arg(idB);
    // The errors first: what a comparison is for; the values behind them follow.
    QStringList headers{tr("metric"),
                        tr("error (%1)").arg(ra), tr("error (%1)").arg(rb), tr("|error| change"),
                        tr("measured (%1)").arg(ra), tr("measured (%1)").arg(rb),
                        tr("predicted (%1)").arg(ra), tr("predicted (%1)").arg(rb)};
    if (several)
        headers.prepend(tr("case"));
    setMetricColumns(headers);
    for (const RunComparisonRow& r : cmp.rows) {
        const int row = metrics_->rowCount();
        metrics_->insertRow(row);
        const std::string& metric = r.a.metric;
        // The change in the size of the error, in percentage points: negative is closer.
        QString change = tr("n/a");
        if (r.a.rel_error && r.b.rel_error) {
            const double points = 100 * (std::fabs(*r.b.rel_error) - std::fabs(*r.a.rel_error));
            change = std::fabs(points) < 0.05 ? QStringLiteral("0.0 pp")
                                              : QStringLiteral("%1%2 pp").arg(points > 0 ? QStringLiteral("+") : QString()).arg(points, 0, 'f', 1);
        }
        QStringList cells{metricWords(metric),
                          relErrorText(r.a.rel_error), relErrorText(r.b.rel_error), change,
                          metricValueText(metric, r.a.measured), metricValueText(metric, r.b.measured),
                          metricValueText(metric, r.a.predicted), metricValueText(metric, r.b.predicted)};
        if (several)
            cells.prepend(r.case_a);
        for (int col = 0; col < cells.size(); ++col) {
            auto* item = new QTableWidgetItem(cells[col]);
            QStringList why;
            if (!r.a.known_difference.isEmpty())
                why << tr("%1: %2").arg(ra, r.a.known_difference);
            if (!r.b.known_difference.isEmpty() && r.b.known_difference != r.a.known_difference)
                why << tr("%1: %2").arg(rb, r.b.known_difference);
            if (!why.isEmpty())
                item->setToolTip(tr("Known difference: %1").arg(why.join(QStringLiteral("; "))));
            metrics_->setItem(row, col, item);
        }
        markMetricKey(metrics_->item(row, several ? 1 : 0), metric);
    }
    metrics_->resizeColumnsToContents();

    // Both runs' errors per metric, side by side: the median over the cases they share.
    QStringList sharedCases;
    for (const RunComparisonRow& r : cmp.rows)
        if (!sharedCases.contains(r.case_a))
            sharedCases << r.case_a;
    const int shared = int(sharedCases.size());
    StackedBarsData errors{several ? tr("Prediction error by metric (median of %n shared cases)", nullptr, shared)
                                   : tr("Prediction error by metric"),
                           tr("|predicted / measured - 1| (%)"), {}, {}, true, 0, {}, {}};
    BarSet setA{ra, {}, 0}, setB{rb, {}, 1};
    for (const std::string& metric : validationTableMetrics()) {
        std::vector<double> ea, eb;
        for (const RunComparisonRow& r : cmp.rows)
            if (r.a.metric == metric && r.a.rel_error && r.b.rel_error) {
                ea.push_back(std::fabs(*r.a.rel_error));
                eb.push_back(std::fabs(*r.b.rel_error));
            }
        if (ea.empty())
            continue;
        errors.categories << metricWords(metric);
        setA.values << 100 * medianOf(ea);
        setB.values << 100 * medianOf(eb);
    }
    errors.sets = {setA, setB};
    setGroupedBarChart(errorChart_, errors);

    XYChartData loss{tr("Training loss (%1 and %2)").arg(ra, rb), tr("step"), tr("loss (nats/token)"), false, 10, {}, {}};
    int color = 0;
    for (const StoredRun* run : {&*a, &*b}) {
        if (run->cases.size() == 1 && !run->cases.front().losses.isEmpty())
            loss.series.push_back(lossSeries(tr("run %1").arg(run->id), run->cases.front().losses, color));
        ++color;
    }
    if (loss.series.size() < 2)
        loss.title = tr("Training loss (curves kept for runs of one case stored by this version)");
    setXYChart(lossChart_, loss);

    caseLabel_->setText(tr("Comparing stored %1\nwith %2").arg(runDescription(*a), runDescription(*b)));
    progress_->setValue(0);
    QString text = cmp.rows.empty() ? tr("Runs %1 and %2 share no case.").arg(idA).arg(idB)
                                    : tr("%n metrics side by side (|error| change: %1 against %2; negative is closer).",
                                         nullptr, int(cmp.rows.size()))
                                          .arg(rb, ra);
    if (!cmp.unmatched.isEmpty())
        text += QLatin1Char('\n') + tr("Not in both runs: %1").arg(cmp.unmatched.join(QStringLiteral(", ")));
    report(text, false, tr("runs %1 and %2").arg(idA).arg(idB));
    return true;
}

} // namespace shardscope
