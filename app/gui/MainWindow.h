// MainWindow: the ShardScope desktop window. Pages: Setup, Plans, Plan details,
// Explore, Catalog. The search re-runs off the GUI thread whenever the setup
// changes (stale results are dropped); sweeps and comparisons follow it.
#pragma once

#include "FrameworkExport.h"
#include "Search.h"
#include "SetupPage.h"
#include "Sweep.h"

#include <QMainWindow>

#include <memory>
#include <optional>

class QLabel;
class QMenu;
class QTabWidget;

namespace shardscope {

class Store;
class CatalogPage;
class ExplorePage;
class JobRunner;
class PlanDetailsPage;
class PlansPage;
class ValidatePage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(Store& store, QWidget* parent = nullptr);
    ~MainWindow() override;

    QTabWidget* pages() const { return pages_; }
    SetupPage* setupPage() const { return setup_; }
    PlansPage* plansPage() const { return plans_; }
    PlanDetailsPage* detailsPage() const { return details_; }
    ExplorePage* explorePage() const { return explore_; }
    ValidatePage* validatePage() const { return validate_; }

    // True while a search, sweep or comparison runs.
    bool busy() const;  // a search, sweep, comparison, filter or validation runs
    const SearchResult* lastResult() const { return result_ ? &*result_ : nullptr; }
    const Problem& lastProblem() const { return result_ ? result_->request.problem : noProblem_; }
    // The request behind the plans shown (searched here or opened from a file).
    const PlanRequest* lastRequest() const { return result_ ? &result_->request : nullptr; }

    bool openPlanFile(const QString& path, QString* error = nullptr);
    bool savePlanFile(const QString& path, QString* error = nullptr) const;
    // The selected plan (else the best) as a framework's launch settings, written to `path`;
    // false with every refusal (or the write error) in `error`.
    bool exportLaunchSettings(ExportFormat format, const QString& path, QString* error = nullptr) const;
    // Writes an HTML or PDF report of the selected plan, rendering one chart per event-loop
    // turn with a progress dialog (cancellable); returns an error message or empty.
    QString exportReport(const QString& path, bool showProgress = true);
    // The getting-started hint shown above the pages until the user dismisses it ("Got it",
    // remembered in the settings; View > Getting started brings it back).
    QWidget* firstRunHint() const { return hint_; }
    QLabel* firstRunHintText() const { return hintText_; }
    void showFirstRunHint(bool show);
    // Saves one PNG per page (and per catalog tab) and one per chart into `dir`.
    QStringList saveScreenshots(const QString& dir);

signals:
    void searchFinished();
    void exploreFinished();
    void filterFinished();

protected:
    void closeEvent(class QCloseEvent* event) override;

private:
    void startSearch();
    void startExplore(const SearchRequest& request);
    // The Plans filter over the whole space: the request searched again with its keys fixed.
    void startFilteredSearch(const QString& filter);
    void onPlanSelected(const Plan& plan);
    // Shows a search result (a fresh one, or the saved plans of an opened file) on every page,
    // keeping the plan the user chose when it is still there.
    void showResult(const SearchResult& result, const std::optional<Layout>& want);
    void refreshViews();
    void updateFirstRunHint();
    void openPlanDialog();
    void savePlanDialog();
    void exportSelectedPlan();
    void exportLaunchSettingsDialog();
    void exportReportDialog();
    void importFile();
    void showAbout();
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();

    Store& store_;
    QTabWidget* pages_ = nullptr;
    SetupPage* setup_ = nullptr;
    PlansPage* plans_ = nullptr;
    PlanDetailsPage* details_ = nullptr;
    ExplorePage* explore_ = nullptr;
    ValidatePage* validate_ = nullptr;
    CatalogPage* catalogPage_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    JobRunner* search_ = nullptr;
    JobRunner* sweep_ = nullptr;
    JobRunner* filter_ = nullptr;

    Problem noProblem_;
    std::optional<SearchResult> result_;
    QString resultFile_;  // the plan file result_ was opened from; empty for a search here
    SweepResult sweepResult_;
    std::optional<Layout> selected_;
    bool exploreBusy_ = false;
    QWidget* hint_ = nullptr;
    QLabel* hintText_ = nullptr;
};

} // namespace shardscope
