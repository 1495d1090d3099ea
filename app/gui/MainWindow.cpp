#include "MainWindow.h"
#include "Catalog.h"
#include "CatalogPage.h"
#include "JsonReader.h"
#include "PlanDetailsPage.h"
#include "ProblemOverview.h"
#include "Version.h"

#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

namespace shardscope {

MainWindow::MainWindow(Catalog& catalog, QWidget* parent) : QMainWindow(parent), catalog_(catalog)
{
    setWindowTitle(tr("ShardScope"));
    pages_ = new QTabWidget(this);
    pages_->setDocumentMode(true);

    auto* overview = new QPlainTextEdit(this);
    overview->setObjectName(QStringLiteral("overview"));
    overview->setReadOnly(true);
    overview->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    try {
        overview->setPlainText(QString::fromStdString(problemOverview(defaultProblem(catalog_))));
    } catch (const std::exception& e) {
        overview->setPlainText(tr("The default problem is not available: %1").arg(QString::fromUtf8(e.what())));
    }
    pages_->addTab(overview, tr("Overview"));

    detailsPage_ = new PlanDetailsPage(this);
    try {
        const Problem problem = defaultProblem(catalog_);
        FieldErrors errors;
        Layout layout = parseLayout("tp=8,pp=8,sp=on,zero=1,recompute=selective", errors);
        resolveDataParallel(layout, problem.cluster.devices(), errors);
        detailsPage_->showPlan(problem, layout);
    } catch (const std::exception& e) {
        detailsPage_->clear(QString::fromUtf8(e.what()));
    }
    pages_->addTab(detailsPage_, tr("Plan details"));

    catalogPage_ = new CatalogPage(catalog_, this);
    pages_->addTab(catalogPage_, tr("Catalog"));
    setCentralWidget(pages_);

    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Import into catalog..."), QKeySequence::Open, this, &MainWindow::importFile);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About ShardScope"), this, &MainWindow::showAbout);

    statusBar()->showMessage(tr("Catalog: %1").arg(catalog_.path()));
    for (const std::string& n : catalog_.notices())
        statusBar()->showMessage(QString::fromStdString(n));

    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray()))
        resize(1280, 800);
    pages_->setCurrentIndex(settings.value(QStringLiteral("window/page"), 0).toInt());
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/page"), pages_->currentIndex());
    event->accept();
}

void MainWindow::importFile()
{
    const QString file = QFileDialog::getOpenFileName(this, tr("Import into catalog"), QString(),
                                                      tr("ShardScope JSON (*.json)"));
    if (file.isEmpty())
        return;
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly)) {
        QMessageBox::warning(this, tr("Import"), tr("Cannot read %1: %2").arg(file, f.errorString()));
        return;
    }
    try {
        FieldErrors errors;
        const QJsonObject doc = parseJsonObject(f.readAll(), file.toStdString(), errors);
        if (!errors.empty())
            throw InputError(errors);
        const auto names = catalog_.importDocument(doc);
        catalogPage_->reload();
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
                           .arg(QString::fromLatin1(kVersion), catalog_.path()));
}

QStringList MainWindow::saveScreenshots(const QString& dir)
{
    QStringList written;
    QDir().mkpath(dir);
    auto save = [&](const QString& name) {
        QApplication::processEvents();
        const QString path = QDir(dir).filePath(name + QStringLiteral(".png"));
        if (grab().save(path, "PNG"))
            written << path;
    };
    for (int i = 0; i < pages_->count(); ++i) {
        pages_->setCurrentIndex(i);
        if (pages_->widget(i) == catalogPage_) {
            QTabWidget* kinds = catalogPage_->kindTabs();
            for (int k = 0; k < kinds->count(); ++k) {
                kinds->setCurrentIndex(k);
                save(QStringLiteral("catalog-") + kinds->tabText(k).toLower().replace(QLatin1Char(' '), QLatin1Char('-')));
            }
        } else {
            save(pages_->tabText(i).toLower().replace(QLatin1Char(' '), QLatin1Char('-')));
        }
    }
    return written;
}

} // namespace shardscope
