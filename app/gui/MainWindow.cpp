#include "MainWindow.h"
#include "Store.h"
#include "CatalogPage.h"
#include "ChartExport.h"
#include "ExplorePage.h"
#include "HfConfigImport.h"
#include "JobRunner.h"
#include "JsonReader.h"
#include "ModelDialog.h"
#include "PlanDetailsPage.h"
#include "PlanJson.h"
#include "PlansModel.h"
#include "PlansPage.h"
#include "ProblemOverview.h"
#include "ReportBuilder.h"
#include "ScaledCase.h"
#include "Theme.h"
#include "ValidatePage.h"
#include "Version.h"

#include <QAction>
#include <QApplication>
#include <QChartView>
#include <QCloseEvent>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLineEdit>
#include <QJsonDocument>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressDialog>
#include <QSaveFile>
#include <QSettings>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>

namespace shardscope {

MainWindow::MainWindow(Store& store, QWidget* parent) : QMainWindow(parent), store_(store)
{
    setWindowTitle(tr("ShardScope"));
    search_ = new JobRunner(this);
    sweep_ = new JobRunner(this);
    filter_ = new JobRunner(this);
    pages_ = new QTabWidget(this);
    pages_->setDocumentMode(true);

    setup_ = new SetupPage(store_.specs(), store_.runs(), this);
    plans_ = new PlansPage(this);
    details_ = new PlanDetailsPage(this);
    explore_ = new ExplorePage(this);
    validate_ = new ValidatePage(store_, this);
    catalogPage_ = new CatalogPage(store_.specs(), this);
    pages_->addTab(setup_, tr("&Setup"));
    pages_->addTab(plans_, tr("&Plans"));
    pages_->addTab(details_, tr("Plan &details"));
    pages_->addTab(explore_, tr("&Explore"));
    pages_->addTab(validate_, tr("&Validate"));
    pages_->addTab(catalogPage_, tr("&Catalog"));
    connect(catalogPage_, &CatalogPage::catalogChanged, setup_, &SetupPage::reloadCatalog);
    connect(validate_, &ValidatePage::calibrated, setup_, &SetupPage::reloadCostModels);
    // The first-run hint: what to do first, above whatever page is open.
    hint_ = new QFrame(this);
    hint_->setObjectName(QStringLiteral("firstRunHint"));
    static_cast<QFrame*>(hint_)->setFrameShape(QFrame::StyledPanel);
    hint_->setAutoFillBackground(true);
    hint_->setBackgroundRole(QPalette::AlternateBase);
    hintText_ = new QLabel(hint_);
    hintText_->setWordWrap(true);
    hintText_->setTextFormat(Qt::RichText);
    auto* gotIt = new QPushButton(tr("Got it"), hint_);
    gotIt->setToolTip(tr("Hide this hint (View > Getting started shows it again)"));
    auto* hintLayout = new QHBoxLayout(hint_);
    hintLayout->addWidget(hintText_, 1);
    hintLayout->addWidget(gotIt, 0, Qt::AlignTop);
    connect(gotIt, &QPushButton::clicked, this, [this] { showFirstRunHint(false); });
    auto* central = new QWidget(this);
    auto* centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->setSpacing(0);
    centralLayout->addWidget(hint_);
    centralLayout->addWidget(pages_, 1);
    setCentralWidget(central);
    updateFirstRunHint();

    connect(setup_, &SetupPage::changed, this, &MainWindow::startSearch);
    connect(plans_, &PlansPage::planSelected, this, &MainWindow::onPlanSelected);
    connect(plans_, &PlansPage::filterRequested, this, &MainWindow::startFilteredSearch);
    connect(plans_, &PlansPage::planActivated, this, [this](const Plan& plan) {
        onPlanSelected(plan);
        pages_->setCurrentWidget(details_);
    });
    connect(plans_, &PlansPage::cancelRequested, search_, &JobRunner::cancel);
    connect(search_, &JobRunner::progressed, plans_, &PlansPage::searchProgress);
    connect(search_, &JobRunner::finished, this, [this](quint64, bool cancelled) {
        plans_->searchEnded(cancelled);
        if (cancelled)
            statusBar()->showMessage(tr("Search cancelled"));
    });
    connect(search_, &JobRunner::failed, this, [this](quint64, const QString& message) {
        plans_->showError(tr("The search failed: %1").arg(message));
    });
    connect(sweep_, &JobRunner::progressed, explore_, [this](double, const QString& text) { explore_->setStatus(text); });

    // ---- menus and shortcuts ----
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open plan..."), QKeySequence::Open, this, &MainWindow::openPlanDialog);
    recentMenu_ = file->addMenu(tr("Open &recent"));
    file->addAction(tr("&Save plans..."), QKeySequence::Save, this, &MainWindow::savePlanDialog);
    file->addAction(tr("&Export selected plan..."), QKeySequence(tr("Ctrl+E")), this, &MainWindow::exportSelectedPlan);
    file->addAction(tr("Export &launch settings..."), QKeySequence(tr("Ctrl+L")), this,
                    &MainWindow::exportLaunchSettingsDialog);
    file->addAction(tr("Export &report (HTML, PDF)..."), QKeySequence(tr("Ctrl+R")), this,
                    &MainWindow::exportReportDialog);
    file->addSeparator();
    file->addAction(tr("&Import into catalog..."), QKeySequence(tr("Ctrl+I")), this, &MainWindow::importFile);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    QMenu* searchMenu = menuBar()->addMenu(tr("Sea&rch"));
    searchMenu->addAction(tr("&Run again"), QKeySequence::Refresh, this, &MainWindow::startSearch);
    searchMenu->addAction(tr("&Cancel"), QKeySequence(Qt::Key_Escape), search_, &JobRunner::cancel);
    QMenu* view = menuBar()->addMenu(tr("Vie&w"));
    for (int i = 0; i < pages_->count(); ++i)
        view->addAction(pages_->tabText(i).remove(QLatin1Char('&')), QKeySequence(QStringLiteral("Ctrl+%1").arg(i + 1)),
                        this, [this, i] { pages_->setCurrentIndex(i); });
    view->addSeparator();
    QMenu* theme = view->addMenu(tr("&Theme"));
    for (Theme t : {Theme::System, Theme::Light, Theme::Dark})
        theme->addAction(toString(t), this, [this, t] {
            QSettings().setValue(QStringLiteral("theme"), toString(t));
            applyTheme(t);
            refreshViews();
        });
    view->addAction(tr("&Getting started"), this, [this] { showFirstRunHint(true); });
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About ShardScope"), this, &MainWindow::showAbout);

    statusBar()->showMessage(tr("Catalog: %1").arg(store_.path()));
    for (const std::string& n : store_.notices())
        statusBar()->showMessage(QString::fromStdString(n));

    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray()))
        resize(1440, 900);
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    pages_->setCurrentIndex(settings.value(QStringLiteral("window/page"), 0).toInt());
    rebuildRecentMenu();
    details_->clear(tr("The search runs as soon as the setup is valid; select a plan to see its details."));
}

MainWindow::~MainWindow() = default;

bool MainWindow::busy() const
{
    return search_->busy() || sweep_->busy() || filter_->busy() || exploreBusy_ || validate_->busy();
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    search_->cancel();
    sweep_->cancel();
    filter_->cancel();
    validate_->cancel();
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/page"), pages_->currentIndex());
    event->accept();
}

void MainWindow::startSearch()
{
    FieldErrors errors;
    const std::optional<SearchRequest> request = setup_->request(errors);
    if (!request) {
        statusBar()->showMessage(tr("Setup is not valid: %1").arg(QString::fromStdString(joinErrors(errors))));
        return;
    }
    sweep_->cancel();
    filter_->cancel();
    exploreBusy_ = false;
    resultFile_.clear();
    plans_->searchStarted();
    statusBar()->showMessage(tr("Searching layouts of %1 on %2 x %3...")
                                 .arg(QString::fromStdString(request->plan.problem.model.name))
                                 .arg(request->plan.problem.cluster.nodes)
                                 .arg(QString::fromStdString(request->plan.problem.cluster.node.name)));
    SearchRequest r = *request;  // the worker gets copies only
    r.plan.top_k = 50;
    std::function<SearchResult(const std::atomic<bool>&, const JobRunner::Progress&)> work =
        [r](const std::atomic<bool>& cancel, const JobRunner::Progress& progress) {
            SearchControl control;
            control.cancel = &cancel;
            control.progress = [progress](const SearchProgress& p) {
                progress(p.total > 0 ? double(p.done) / double(p.total) : 0.0,
                         QObject::tr("%1 of %2 mesh shapes, %3 evaluations, %4 s")
                             .arg(p.done)
                             .arg(p.total)
                             .arg(p.evaluated)
                             .arg(p.elapsed_s, 0, 'f', 1));
            };
            return search(r.plan, control);
        };
    search_->start<SearchResult>(work, [this, r](const SearchResult& result) {
        if (!result.error.empty()) {
            result_ = result;
            plans_->showError(QString::fromStdString(result.error));
            return;
        }
        showResult(result, selected_);
        statusBar()->showMessage(tr("Search done: %1 layouts evaluated in %2 s")
                                     .arg(result.stats.evaluated)
                                     .arg(result.stats.seconds, 0, 'g', 3));
        updateFirstRunHint();
        emit searchFinished();
        startExplore(r);
    });
}

void MainWindow::startFilteredSearch(const QString& filter)
{
    if (!result_ || !result_->error.empty())
        return;
    if (filter.isEmpty()) {
        filter_->cancel();
        plans_->showResult(result_->request.problem, *result_);
        return;
    }
    PlanRequest r = result_->request;
    if (!applyFixed(r.space, filter.toStdString(), "filter").empty())
        return;  // the page checked it; nothing to search
    r.top_k = 50;
    std::function<SearchResult(const std::atomic<bool>&, const JobRunner::Progress&)> work =
        [r](const std::atomic<bool>& cancel, const JobRunner::Progress&) {
            SearchControl control;
            control.cancel = &cancel;
            return search(r, control);
        };
    filter_->start<SearchResult>(work, [this, filter](const SearchResult& filtered) {
        plans_->showFiltered(filtered, filter);
        emit filterFinished();
    });
}

void MainWindow::showResult(const SearchResult& result, const std::optional<Layout>& want)
{
    result_ = result;
    const Problem& problem = result.request.problem;
    plans_->showResult(problem, result);
    details_->setRequest(result.request);
    int row = result.top.empty() ? -1 : 0;
    for (size_t i = 0; want && i < result.top.size(); ++i)
        if (result.top[i].layout == *want)
            row = int(i);
    if (row >= 0)
        plans_->selectRow(row);
    else
        details_->clear(tr("No feasible plan for this setup."));
    explore_->showSearch(result, selected_ ? &*selected_ : nullptr);
}

void MainWindow::startExplore(const SearchRequest& request)
{
    const SearchRequest r = request;
    std::vector<Problem> compared;
    for (const std::string& name : r.compare_nodes) {
        Problem p = r.plan.problem;
        try {
            p.cluster.node = store_.specs().node(name);
        } catch (const std::exception&) {
            continue;
        }
        // The same number of chips on each node type, so the comparison is like for like.
        p.cluster.nodes = int(std::max<std::int64_t>(1, r.plan.problem.cluster.chips() / p.cluster.node.chips_per_node));
        compared.push_back(p);
    }
    struct ExploreResult {
        SweepResult sweep;
        SweepResult comparison;
    };
    exploreBusy_ = true;
    explore_->setStatus(tr("Sweeping node counts and comparing node types..."));
    std::function<ExploreResult(const std::atomic<bool>&, const JobRunner::Progress&)> work =
        [r, compared](const std::atomic<bool>& cancel, const JobRunner::Progress& progress) {
            // The same terms and constraints; node types without a price cannot rank by cost.
            PlanRequest base = r.plan;
            base.objective = base.objective == Objective::CostToTrain ? Objective::TimeToTrain : base.objective;
            base.top_k = 1;
            SearchControl control;
            control.cancel = &cancel;
            ExploreResult out;
            progress(0.0, QObject::tr("Sweeping %1 node counts...").arg(r.sweep_nodes.size()));
            out.sweep = sweepNodes(base, r.sweep_nodes, control);
            progress(0.5, QObject::tr("Comparing %1 node types...").arg(compared.size()));
            out.comparison = compareProblems(base, compared, control);
            return out;
        };
    sweep_->start<ExploreResult>(work, [this](const ExploreResult& result) {
        sweepResult_ = result.sweep;
        explore_->showSweep(result.sweep);
        explore_->showComparison(result.comparison);
        explore_->setStatus(tr("Scaling: %1 node counts in %2 s; comparison: %3 node types in %4 s (same chip count)")
                                .arg(result.sweep.points.size())
                                .arg(result.sweep.seconds, 0, 'g', 3)
                                .arg(result.comparison.points.size())
                                .arg(result.comparison.seconds, 0, 'g', 3));
    });
    connect(sweep_, &JobRunner::finished, this, [this](quint64, bool) {
        exploreBusy_ = false;
        emit exploreFinished();
    }, Qt::SingleShotConnection);
}

void MainWindow::refreshViews()
{
    // Charts take their theme when built: rebuild the ones on screen.
    if (selected_ && result_)
        details_->showPlan(pricePlan(result_->request, *selected_));
    if (result_)
        explore_->showSearch(*result_, selected_ ? &*selected_ : nullptr);
    explore_->refresh();
}

void MainWindow::onPlanSelected(const Plan& plan)
{
    selected_ = plan.layout;
    if (!result_)
        return;
    details_->showPlan(pricePlan(result_->request, plan.layout));
    validate_->setPlan(result_->request, plan.layout);
    if (result_)
        explore_->showSearch(*result_, &plan.layout);
}

bool MainWindow::openPlanFile(const QString& path, QString* error)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error)
            *error = tr("cannot read %1: %2").arg(path, f.errorString());
        return false;
    }
    FieldErrors errors;
    const QJsonObject json = parseJsonObject(f.readAll(), path.toStdString(), errors);
    std::optional<PlanDocument> doc;
    if (errors.empty())
        doc = planDocumentFromJson(json, "plan", errors);
    if (!doc) {
        if (error)
            *error = QString::fromStdString(joinErrors(errors));
        return false;
    }
    // The saved plans exactly: the file's request (terms, constraints, objective) in Setup, its
    // layouts priced with its terms on every page; no new search until the setup is changed.
    search_->cancel();
    sweep_->cancel();
    selected_ = doc->best;
    setup_->setRequest(doc->request);
    resultFile_ = QFileInfo(path).fileName();
    showResult(savedResult(*doc), doc->best);
    updateFirstRunHint();
    SearchRequest explore;
    FieldErrors setupErrors;
    if (const auto fromSetup = setup_->request(setupErrors)) {
        explore = *fromSetup;
        explore.plan = doc->request;
        startExplore(explore);
    }
    addRecentFile(path);
    QString message = tr("Opened %1: the saved plans, priced with cost model %2")
                          .arg(path, QString::fromStdString(doc->request.cost_model.name));
    for (const std::string& note : doc->notes)
        message += QStringLiteral("; ") + QString::fromStdString(note);
    statusBar()->showMessage(message);
    return true;
}

namespace {

// Writes the whole file or nothing (a temporary file renamed over the target).
bool writeWhole(const QString& path, const QByteArray& bytes, QString* error)
{
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        if (error)
            *error = QObject::tr("cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

} // namespace

bool MainWindow::savePlanFile(const QString& path, QString* error) const
{
    if (!result_) {
        if (error)
            *error = tr("there is no search result to save yet");
        return false;
    }
    SearchResult ordered = *result_;
    // The selected plan goes first: it is the one the file stands for.
    if (selected_) {
        auto it = std::find_if(ordered.top.begin(), ordered.top.end(),
                               [this](const Plan& p) { return p.layout == *selected_; });
        if (it != ordered.top.end())
            std::rotate(ordered.top.begin(), it, it + 1);
    }
    return writeWhole(path, QJsonDocument(planDocument(ordered)).toJson(QJsonDocument::Indented), error);
}

void MainWindow::openPlanDialog()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open plan"), QString(), tr("Plans (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!openPlanFile(path, &error))
        QMessageBox::warning(this, tr("Open plan"), tr("Cannot open %1:\n\n%2").arg(path, error));
}

void MainWindow::savePlanDialog()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Save plans"), QStringLiteral("plan.json"),
                                                      tr("Plans (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!savePlanFile(path, &error))
        QMessageBox::warning(this, tr("Save plans"), error);
    else {
        addRecentFile(path);
        statusBar()->showMessage(tr("Saved %1").arg(path));
    }
}

void MainWindow::exportSelectedPlan() { savePlanDialog(); }

bool MainWindow::exportLaunchSettings(ExportFormat format, const QString& path, QString* error) const
{
    if (!result_ || !(selected_ || result_->best())) {
        if (error)
            *error = tr("there is no plan to export yet: wait for the search");
        return false;
    }
    const Layout layout = selected_ ? *selected_ : result_->best()->layout;
    const ExportResult r = exportSettings(format, result_->request.problem, layout);
    if (!r.ok()) {
        if (error) {
            QStringList lines;
            for (const std::string& refusal : r.refusals)
                lines << QString::fromStdString(refusal);
            *error = tr("%1 cannot run %2:\n%3")
                         .arg(QLatin1String(toString(format)), QString::fromStdString(toString(layout)),
                              lines.join(QLatin1Char('\n')));
        }
        return false;
    }
    return writeWhole(path, QByteArray::fromStdString(r.text), error);
}

void MainWindow::exportLaunchSettingsDialog()
{
    // The frameworks that can run the plan first; the others are listed with what they refuse.
    QStringList items;
    std::vector<ExportFormat> formats;
    const Layout* layout = selected_ ? &*selected_ : result_ && result_->best() ? &result_->best()->layout : nullptr;
    if (!layout) {
        QMessageBox::information(this, tr("Export launch settings"), tr("There is no plan to export yet."));
        return;
    }
    for (ExportFormat f : exportFormats()) {
        const bool runs = frameworkRuns(f, result_->request.problem, *layout);
        items << (runs ? QString::fromLatin1(toString(f)) : tr("%1 (cannot run this plan)").arg(toString(f)));
        formats.push_back(f);
    }
    bool ok = false;
    const QString choice =
        QInputDialog::getItem(this, tr("Export launch settings"), tr("Framework:"), items, 0, false, &ok);
    if (!ok)
        return;
    const ExportFormat format = formats[size_t(items.indexOf(choice))];
    const QString suggested = QStringLiteral("launch-%1.%2")
                                  .arg(QLatin1String(toString(format)), QLatin1String(exportFileExtension(format)));
    QString error;
    if (!frameworkRuns(format, result_->request.problem, *layout)) {
        exportLaunchSettings(format, QString(), &error);  // only for the refusals
        QMessageBox::warning(this, tr("Export launch settings"), error);
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export launch settings"), suggested);
    if (path.isEmpty())
        return;
    if (!exportLaunchSettings(format, path, &error))
        QMessageBox::warning(this, tr("Export launch settings"), error);
    else
        statusBar()->showMessage(tr("Wrote %1 (%2)").arg(path, QLatin1String(toString(format))));
}

void MainWindow::exportReportDialog()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Export report"), QStringLiteral("report.html"),
                                                      tr("Reports (*.html *.pdf)"));
    if (path.isEmpty())
        return;
    const QString error = exportReport(path);
    if (!error.isEmpty())
        QMessageBox::warning(this, tr("Export report"), error);
    else
        statusBar()->showMessage(tr("Wrote %1").arg(path));
}

QString MainWindow::exportReport(const QString& path, bool showProgress)
{
    if (!result_ || !(selected_ || result_->best()))
        return tr("there is no plan to report yet: wait for the search");
    ReportFormat format = ReportFormat::Html;
    if (const QString error = reportFormatFromPath(path, format); !error.isEmpty())
        return error;
    const Problem& problem = result_->request.problem;
    const Layout chosen = selected_ ? *selected_ : result_->best()->layout;
    ReportInput input;
    input.chosen = pricePlan(result_->request, chosen);
    input.result = *result_;
    input.sweep = sweepResult_;
    input.title = tr("%1 on %2 x %3")
                      .arg(QString::fromStdString(problem.model.name))
                      .arg(problem.cluster.nodes)
                      .arg(QString::fromStdString(problem.cluster.node.name));
    const std::string runName = validationRunName(problem, chosen);
    for (const RunStore::ValidationRun& run : store_.runs().validationRuns(1000))
        if (run.name == runName) {
            input.validation = run.document;
            input.validation_when = QString::fromStdString(run.created_at);
            break;
        }
    ReportBuilder builder(input, path, format, ChartFormat::Png);
    // Charts are widgets and render on this thread: one per event-loop turn keeps the
    // window responsive and the dialog's Cancel working.
    std::unique_ptr<QProgressDialog> progress;
    if (showProgress) {
        progress = std::make_unique<QProgressDialog>(tr("Writing the report..."), tr("Cancel"), 0, builder.steps(), this);
        progress->setWindowModality(Qt::WindowModal);
        progress->setMinimumDuration(0);
    }
    for (int step = 0; step < builder.steps(); ++step) {
        if (progress) {
            progress->setValue(step);
            progress->setLabelText(builder.stepName(step));
            QApplication::processEvents();
            if (progress->wasCanceled())
                return tr("cancelled; nothing was written");
        }
        builder.runStep(step);
    }
    return builder.finish();
}

void MainWindow::addRecentFile(const QString& path)
{
    QSettings settings;
    QStringList files = settings.value(QStringLiteral("recentFiles")).toStringList();
    files.removeAll(path);
    files.prepend(QFileInfo(path).absoluteFilePath());
    while (files.size() > 8)
        files.removeLast();
    settings.setValue(QStringLiteral("recentFiles"), files);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    recentMenu_->clear();
    const QStringList files = QSettings().value(QStringLiteral("recentFiles")).toStringList();
    for (const QString& f : files)
        recentMenu_->addAction(QFileInfo(f).fileName(), this, [this, f] {
            QString error;
            if (!openPlanFile(f, &error))
                QMessageBox::warning(this, tr("Open plan"), tr("Cannot open %1:\n\n%2").arg(f, error));
        })->setToolTip(f);
    recentMenu_->setEnabled(!files.isEmpty());
}

void MainWindow::importFile()
{
    const QString file = QFileDialog::getOpenFileName(this, tr("Import into catalog"), QString(),
                                                      tr("ShardScope JSON or Hugging Face config.json (*.json)"));
    if (file.isEmpty())
        return;
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly)) {
        QMessageBox::warning(this, tr("Import"), tr("Cannot read %1: %2").arg(file, f.errorString()));
        return;
    }
    try {
        FieldErrors errors;
        QJsonObject doc = parseJsonObject(f.readAll(), file.toStdString(), errors);
        if (!errors.empty())
            throw InputError(errors);
        // A Hugging Face config.json becomes a model; its name, proposed from _name_or_path or
        // the folder, is asked for (a built-in such as t5-base keeps its name).
        if (isHfConfig(doc)) {
            QJsonObject model = modelDocumentFromHfConfig(doc, {{}, {}, file.toStdString()});
            bool ok = false;
            const QString name = QInputDialog::getText(
                this, tr("Import Hugging Face config"),
                tr("%1 read as %2.\nName in the catalog:")
                    .arg(file, QString::fromStdString(printable(hfArchitecture(doc)))),
                QLineEdit::Normal, model.value(QLatin1String("name")).toString(), &ok);
            if (!ok)
                return;
            doc = modelDocumentFromHfConfig(doc, {name.trimmed().toStdString(), {}, file.toStdString()});
        }
        const auto names = store_.specs().importDocument(doc);
        catalogPage_->reload();
        setup_->reloadCatalog();
        statusBar()->showMessage(tr("Imported %n entries from %1", nullptr, int(names.size())).arg(file));
    } catch (const std::exception& e) {
        QMessageBox::warning(this, tr("Import"),
                             tr("Nothing was imported from %1:\n\n%2").arg(file, QString::fromUtf8(e.what())));
    }
}

void MainWindow::showAbout()
{
    QMessageBox::about(this, tr("About ShardScope"),
                       tr("ShardScope %1\n\nPlans and validates parallel training layouts for transformer models "
                          "on clusters of AI chips.\n\nCatalog: %2")
                           .arg(QString::fromLatin1(kVersion), store_.path()));
}

QStringList MainWindow::saveScreenshots(const QString& dir)
{
    QStringList written;
    QDir().mkpath(dir);
    auto fileName = [](QString name) {
        name = name.remove(QLatin1Char('&')).toLower();
        name.replace(QLatin1Char(' '), QLatin1Char('-'));
        return name;
    };
    auto save = [&](QWidget* widget, const QString& name) {
        QApplication::processEvents();
        const QString path = QDir(dir).filePath(name + QStringLiteral(".png"));
        if (widget->grab().save(path, "PNG"))
            written << path;
    };
    for (int i = 0; i < pages_->count(); ++i) {
        pages_->setCurrentIndex(i);
        if (pages_->widget(i) == catalogPage_) {
            QTabWidget* kinds = catalogPage_->kindTabs();
            for (int k = 0; k < kinds->count(); ++k) {
                kinds->setCurrentIndex(k);
                save(this, QStringLiteral("catalog-") + fileName(kinds->tabText(k)));
            }
        } else {
            save(this, fileName(pages_->tabText(i)));
        }
    }
    // Each chart on its own, at the size it has in its page.
    pages_->setCurrentWidget(validate_);
    const QList<QWidget*> validateCharts = validate_->charts();
    const QStringList validateNames{QStringLiteral("chart-validation-loss"), QStringLiteral("chart-validation-errors")};
    for (int i = 0; i < validateCharts.size(); ++i)
        save(validateCharts[i], validateNames.value(i));
    pages_->setCurrentWidget(details_);
    const QStringList detailNames{QStringLiteral("chart-memory"), QStringLiteral("chart-step-time"),
                                  QStringLiteral("chart-pipeline-timeline"), QStringLiteral("chart-device-mesh")};
    const QList<QWidget*> detailCharts = details_->charts();
    for (int i = 0; i < detailCharts.size(); ++i)
        save(detailCharts[i], detailNames.value(i));
    pages_->setCurrentWidget(explore_);
    const QStringList exploreNames{QStringLiteral("chart-pareto-step-memory"), QStringLiteral("chart-pareto-time-cost"),
                                   QStringLiteral("chart-scaling"), QStringLiteral("chart-node-types")};
    const QList<QChartView*> exploreCharts = explore_->charts();
    for (int i = 0; i < exploreCharts.size(); ++i)
        save(exploreCharts[i], exploreNames.value(i));
    // The model dialog (Catalog > Edit...) on the setup's model: every field a model has.
    FieldErrors errors;
    if (const auto request = setup_->request(errors)) {
        ModelDialog dialog(request->plan.problem.model, this);
        dialog.show();
        save(&dialog, QStringLiteral("dialog-model"));
    }
    return written;
}

void MainWindow::showFirstRunHint(bool show)
{
    QSettings().setValue(QStringLiteral("hints/firstRunDismissed"), !show);
    updateFirstRunHint();
}

void MainWindow::updateFirstRunHint()
{
    const bool dismissed = QSettings().value(QStringLiteral("hints/firstRunDismissed"), false).toBool();
    hint_->setVisible(!dismissed);
    if (dismissed)
        return;
    // What has been searched already, so the first step names the user's own problem.
    // Short enough for two lines at the documented minimum width (1100 px).
    QString searched = tr("The example problem is being searched.");
    if (result_) {
        const Problem& p = result_->request.problem;
        // QString::arg fills the lowest-numbered marker first: the file name (%4) goes last.
        searched = (resultFile_.isEmpty() ? tr("Example searched: <b>%1</b> on %2 x %3.")
                                          : tr("Opened <b>%1</b> on %2 x %3 from %4."))
                       .arg(QString::fromStdString(p.model.name).toHtmlEscaped())
                       .arg(p.cluster.nodes)
                       .arg(QString::fromStdString(p.cluster.node.name).toHtmlEscaped());
        if (!resultFile_.isEmpty())
            searched = searched.arg(resultFile_.toHtmlEscaped());
    }
    hintText_->setText(tr("<b>Getting started.</b> %1 "
                          "<b>1.</b> <i>Setup</i>: your model, nodes and batch (it searches again by itself). "
                          "<b>2.</b> <i>Plans</i>: click a header to sort, double-click a plan for its details. "
                          "<b>3.</b> <i>Validate</i> trains it scaled down against the prediction. "
                          "File &gt; Export: plan, launch settings, report.")
                           .arg(searched));
}

} // namespace shardscope
