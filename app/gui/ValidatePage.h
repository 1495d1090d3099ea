// ValidatePage: runs the engine on the selected plan's validation case (scaled down to
// run here, same layout shape and memory pressure) off the GUI thread, with progress, a
// live loss curve and Cancel; then the planner's prediction against the measurement,
// metric by metric (table and chart), stored in the run history shown below.
#pragma once

#include "Layout.h"
#include "PlanRequest.h"
#include "Problem.h"
#include "Validation.h"

#include <QWidget>

#include <optional>

class QChartView;
class QLabel;
class QProgressBar;
class QPushButton;
class QComboBox;
class QTableWidget;

namespace shardscope {

class Store;
class JobRunner;

class ValidatePage : public QWidget {
    Q_OBJECT
public:
    ValidatePage(Store& store, QWidget* parent = nullptr);

    // The plan to validate (the selected one) and the request it was made with: the full-size
    // plan's memory pressure, which the scaled case reproduces, is priced by its terms.
    void setPlan(const PlanRequest& request, const Layout& layout);
    void start();
    void cancel();
    // Runs the built-in validation suite on the engine (off the GUI thread, with progress and
    // cancel), fits the cost model's terms to it with held-out cases, stores the fitted profile
    // in the catalog as "engine-<date>" and selects it. Emits calibrated(name) when done.
    void calibrate();
    bool busy() const;
    int steps() const { return steps_; }
    // Whether finished runs go to the run history (not for the screenshots' demonstration run).
    void setStoresRuns(bool store) { storesRuns_ = store; }
    void setSteps(int steps) { steps_ = steps; }

    const std::optional<ValidationResult>& result() const { return result_; }
    const std::optional<PlanRequest>& planRequest() const { return request_; }
    QPushButton* runButton() const { return run_; }
    QPushButton* cancelButton() const { return cancel_; }
    QTableWidget* metricsTable() const { return metrics_; }
    // The metric column's items carry the metric's JSON key ("weights_bytes") in this role;
    // their text is the metric in words ("weights").
    static constexpr int kMetricKeyRole = Qt::UserRole + 1;
    QTableWidget* historyTable() const { return history_; }
    QChartView* errorChart() const { return errorChart_; }
    QComboBox* costModelBox() const { return costModel_; }
    QPushButton* calibrateButton() const { return calibrate_; }
    QList<QWidget*> charts() const;
    QLabel* status() const { return status_; }

    // The cost-model profiles in the catalog, re-read (the page does so whenever it is shown).
    void reloadCostModels();
    // The run history, re-read (the page does so whenever it is shown: the CLI may have added runs).
    void reloadHistory();

    // A stored run of the history shown as a run's results (double-click or Enter on its row):
    // its case, metrics, error chart and loss curve. False (and why, in the status) when a run
    // is going or the history has no such run.
    bool openRun(int id);
    // Two stored runs side by side (select two rows): the metrics they share, case by case, and
    // both error charts and loss curves. The older run is A.
    bool compareRuns(int a, int b);
    // The stored runs shown: none for a live run, one opened, or two compared (A, B).
    QVector<int> shownRuns() const { return shownRuns_; }
    QLabel* caseLabel() const { return caseLabel_; }

signals:
    void finished(bool ok);
    void calibrated(const QString& profile);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void showResult(const ValidationResult& result, const std::vector<std::string>& notes);
    // Empties the charts and the metrics table: what is shown always belongs to the plan named.
    void clearResults();
    // A message in full under the bar (red when it is an error), and the state in the bar
    // ("failed" for errors).
    void report(const QString& text, bool error, const QString& bar = QString());
    void addLoss(int step, double loss);
    // The metrics table's columns for a live run or a stored one (with the case column when a
    // run has several cases), or for two runs compared.
    void setMetricColumns(const QStringList& headers);
    // The history rows selected, as run ids.
    QVector<int> selectedRuns() const;

    Store& store_;
    JobRunner* job_ = nullptr;
    std::optional<PlanRequest> request_;
    Layout layout_;
    int steps_ = 20;
    bool storesRuns_ = true;
    std::optional<ValidationResult> result_;
    QVector<QPointF> losses_;
    QLabel* caseLabel_ = nullptr;
    QLabel* status_ = nullptr;
    QPushButton* run_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QComboBox* costModel_ = nullptr;  // "default" or a profile fitted by calibrate --engine --save
    QPushButton* calibrate_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QChartView* lossChart_ = nullptr;
    QChartView* errorChart_ = nullptr;
    QTableWidget* metrics_ = nullptr;
    QTableWidget* history_ = nullptr;
    QVector<int> shownRuns_;
};

} // namespace shardscope
