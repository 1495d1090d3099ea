#include "ValidatePage.h"
#include "EngineCalibration.h"
#include "HostProfileCache.h"
#include "Store.h"
#include "Device.h"
#include "EngineFit.h"
#include "ChartAdapters.h"
#include "ChartData.h"
#include "JobRunner.h"
#include "ScaledCase.h"
#include "Units.h"

#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QPointer>
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

QString valueText(const MetricComparison& m, double v)
{
    if (m.metric.find("bytes") != std::string::npos)
        return q(formatBytes(v));
    if (m.metric.find("_s") != std::string::npos)
        return q(formatDuration(v));
    return q(formatSi(v, "FLOP"));
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
    lossChart_ = makeXYChart({tr("Training loss (engine run)"), tr("step"), tr("loss (nats/token)"), false, 10, {}}, this);
    errorChart_ = makeStackedBarChart({tr("Prediction error by metric"), tr("predicted / measured - 1 (%)"), {}, {}, true, 0, {}}, this);
    metrics_ = table({tr("metric"), tr("predicted"), tr("measured"), tr("error"), tr("device")}, this);
    history_ = table({tr("run"), tr("when"), tr("version"), tr("cases"), tr("device step time |error|"), tr("name")}, this);
    history_->setWordWrap(false);
    history_->setTextElideMode(Qt::ElideMiddle);

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
    tables->addWidget(history_);
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
    setXYChart(lossChart_, {tr("Training loss (engine run)"), tr("step"), tr("loss (nats/token)"), false, 10, {series}});
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
    caseLabel_->setText(tr("Validation case: %1 layers, hidden %2, %3 heads, vocab %4, seq %5, batch %6 on %7 devices "
                           "of %8, layout %9%10")
                            .arg(r.model.layers)
                            .arg(r.model.hidden)
                            .arg(r.model.heads)
                            .arg(r.model.vocab)
                            .arg(r.model.seq)
                            .arg(r.batch)
                            .arg(r.layout.devices())
                            .arg(q(scaled.validation.profile.name), q(toString(r.layout)),
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
    StackedBarsData errors{tr("Prediction error by metric"), tr("predicted / measured - 1 (%)"), {}, {}, true, 0, {}};
    BarSet set{tr("error"), {}, 0};
    for (const MetricComparison& m : result.metrics) {
        const int row = metrics_->rowCount();
        metrics_->insertRow(row);
        const QString err = !m.compared ? tr("emulation time, not predicted")
                            : std::isfinite(m.rel_error) ? QStringLiteral("%1%").arg(100 * m.rel_error, 0, 'f', 1)
                                                         : tr("n/a");
        const QStringList cells{q(m.metric), m.compared ? valueText(m, m.predicted) : QStringLiteral("—"),
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
        // The chart shows the summary metrics (the CLI table's columns; the per-kind byte
        // counts stay in the table: twelve bars no longer leave room for their labels).
        const auto& charted = validationTableMetrics();
        if (std::find(charted.begin(), charted.end(), m.metric) == charted.end())
            continue;
        errors.categories << q(m.metric);
        // Bars show the size of the error; the table keeps its sign.
        set.values << (std::isfinite(m.rel_error) ? std::fabs(100 * m.rel_error) : 0.0);
    }
    errors.sets = {set};
    errors.value_axis = tr("|predicted / measured - 1| (%)");
    setStackedBarChart(errorChart_, errors);
    metrics_->resizeColumnsToContents();

    QJsonObject doc = validationDocument({result});
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
    metrics_->setRowCount(0);
    losses_.clear();
    setXYChart(lossChart_, {tr("Training loss (engine run)"), tr("step"), tr("loss (nats/token)"), false, 10, {}});
    setStackedBarChart(errorChart_, {tr("Prediction error by metric"), tr("predicted / measured - 1 (%)"), {}, {}, true, 0, {}});
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
    history_->setRowCount(0);
    for (const RunStore::ValidationRun& r : store_.runs().validationRuns(50)) {
        const int row = history_->rowCount();
        history_->insertRow(row);
        const QJsonObject summary = r.document.value(QLatin1String("summary")).toObject();
        const double step = summary.value(QLatin1String("device_step_time_s"))
                                .toObject()
                                .value(QLatin1String("median_rel_error"))
                                .toDouble();
        // Local time to the minute: the stored UTC stamp (with seconds) is in the tooltip.
        const QDateTime when = QDateTime::fromString(q(r.created_at), Qt::ISODateWithMs);
        const QStringList cells{QString::number(r.id),
                                when.isValid() ? when.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"))
                                               : q(r.created_at),
                                q(r.software_version),
                                QString::number(r.document.value(QLatin1String("cases")).toArray().size()),
                                QStringLiteral("%1%").arg(100 * step, 0, 'f', 1), q(r.name)};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c == 1)
                item->setToolTip(q(r.created_at));
            if (c == cells.size() - 1)
                item->setToolTip(q(r.name));  // long plan names are elided in the cell
            history_->setItem(row, c, item);
        }
    }
    // The last column (the run's name) takes the rest of the width, elided in the middle.
    for (int c = 0; c + 1 < history_->columnCount(); ++c)
        history_->resizeColumnToContents(c);
}

} // namespace shardscope
