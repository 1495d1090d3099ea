// The desktop window on the offscreen platform: the overview page, the catalog
// browser's tables and details against the catalog itself, the item models'
// consistency (QAbstractItemModelTester), and one screenshot per page.
// The catalog lives in a QTemporaryDir and QSettings are redirected there too.
#include "Store.h"
#include "CatalogPage.h"
#include "ChartAdapters.h"
#include "ChartInteraction.h"
#include "PipelineTimelineWidget.h"
#include "DeviceMeshWidget.h"
#include "Theme.h"
#include "JsonEntryDialog.h"
#include "ChartData.h"
#include "MainWindow.h"
#include "SetupPage.h"
#include "Sweep.h"
#include "ModelDialog.h"
#include "PlansModel.h"
#include "PlansPage.h"
#include "ModelSpec.h"
#include "Units.h"
#include "Device.h"
#include "RunHistory.h"
#include "Validation.h"
#include "MetricText.h"
#include "ValidatePage.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QPushButton>
#include <QSpinBox>
#include <QChartView>
#include <QDir>
#include <QFileInfo>
#include <QFontInfo>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSet>
#include <QSettings>
#include <QStandardPaths>
#include <QStyle>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QSignalSpy>
#include <QJsonDocument>
#include <QFile>
#include <QListWidget>
#include <QGraphicsTextItem>
#include <QBarCategoryAxis>
#include <QLegendMarker>
#include <QTest>
#include <QThreadPool>
#include <QTreeWidget>
#include <QValueAxis>
#include <QLogValueAxis>
#include <QAbstractBarSeries>
#include <QBarSet>
#include <QXYSeries>
#include <QAction>
#include <QToolTip>
#include <QWheelEvent>
#include <QRadioButton>
#include <QStyleOptionButton>

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>

using namespace shardscope;

class TstAppGui : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<QTemporaryDir> dir_;
    std::unique_ptr<Store> store_;
    SpecCatalog* catalog_ = nullptr;
    std::unique_ptr<MainWindow> window_;

    CatalogPage* catalogPage() const { return window_->findChild<CatalogPage*>(); }

    // The catalog page's table for one kind, found by its tab title.
    QTableWidget* table(const QString& tabTitle) const
    {
        QTabWidget* kinds = catalogPage()->kindTabs();
        for (int i = 0; i < kinds->count(); ++i)
            if (kinds->tabText(i).remove(QLatin1Char('&')) == tabTitle)
                return qobject_cast<QTableWidget*>(kinds->widget(i));
        return nullptr;
    }

    static int column(const QTableWidget* t, const QString& header)
    {
        for (int c = 0; c < t->columnCount(); ++c)
            if (t->horizontalHeaderItem(c) && t->horizontalHeaderItem(c)->text() == header)
                return c;
        return -1;
    }

    static int rowOf(const QTableWidget* t, const QString& name)
    {
        for (int r = 0; r < t->rowCount(); ++r)
            if (t->item(r, 0) && t->item(r, 0)->text() == name)
                return r;
        return -1;
    }

    // One case of the validation suite trained for real on the suite's emulated device.
    ValidationResult runSuiteCase(const std::string& name, int steps) const
    {
        const engine::DeviceProfile device = engine::profileFromChip(store_->specs().chip(kSuiteChip), kSuiteChipScale);
        for (const ValidationCase& c : validationSuite(device, steps))
            if (c.name == name)
                return runValidation(c);
        return {};
    }

    // Stored as the Validate page and the CLI store a run.
    int storeRun(const std::vector<ValidationResult>& results, const std::string& name) const
    {
        QJsonObject doc = validationDocument(results);
        addLossCurves(doc, results);
        doc.insert("cost_model", QStringLiteral("default"));
        return store_->runs().storeValidationRun(name, doc);
    }

    static int historyRow(const QTableWidget* history, int id)
    {
        for (int r = 0; r < history->rowCount(); ++r)
            if (history->item(r, 0) && history->item(r, 0)->text() == QString::number(id))
                return r;
        return -1;
    }

    // The cell of a metric's row under a header, or a null string.
    static QString cell(const QTableWidget* t, const QString& metric, const QString& header)
    {
        const int metricColumn = column(t, QStringLiteral("metric")), c = column(t, header);
        for (int r = 0; r < t->rowCount(); ++r)
            if (t->item(r, metricColumn)->data(ValidatePage::kMetricKeyRole).toString() == metric) {
                // Words, not the JSON key, in the cell itself.
                if (t->item(r, metricColumn)->text() != metricWords(metric.toStdString()))
                    return QStringLiteral("metric cell: ") + t->item(r, metricColumn)->text();
                return c >= 0 && t->item(r, c) ? t->item(r, c)->text() : QString();
            }
        return {};
    }

    // The value column of the details row named `field`, or a null string.
    QString detail(const QString& field) const
    {
        const QTreeWidget* details = catalogPage()->findChild<QTreeWidget*>();
        if (!details)
            return {};
        for (int i = 0; i < details->topLevelItemCount(); ++i)
            if (details->topLevelItem(i)->text(0) == field)
                return details->topLevelItem(i)->text(1);
        return {};
    }

private slots:
    void initTestCase()
    {
        QVERIFY2(!QFontInfo(QFont()).family().isEmpty(), "no usable font");
        QStandardPaths::setTestModeEnabled(true);
        dir_ = std::make_unique<QTemporaryDir>();
        QVERIFY2(dir_->isValid(), qPrintable(dir_->errorString()));
        // The window saves its geometry on close: keep that out of the user's settings.
        QCoreApplication::setOrganizationName(QStringLiteral("shardscope-tests"));
        QSettings::setDefaultFormat(QSettings::IniFormat);
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, dir_->filePath(QStringLiteral("settings")));
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir_->filePath(QStringLiteral("settings")));

        store_ = std::make_unique<Store>(dir_->filePath(QStringLiteral("catalog.sqlite")));
        QVERIFY(QFileInfo::exists(store_->path()));
        catalog_ = &store_->specs();
        window_ = std::make_unique<MainWindow>(*store_);
        window_->resize(1280, 800);
        window_->show();
        QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
        QVERIFY(catalogPage());
    }

    void cleanupTestCase()
    {
        if (window_)
            window_->close();
        window_.reset();
        catalog_ = nullptr;
        store_.reset();
        QThreadPool::globalInstance()->waitForDone();
    }

    void pages()
    {
        QTabWidget* pages = window_->pages();
        QVERIFY(pages);
        QStringList titles;
        for (int i = 0; i < pages->count(); ++i)
            titles << pages->tabText(i).remove(QLatin1Char('&'));
        QCOMPARE(titles, (QStringList{"Setup", "Plans", "Plan details", "Explore", "Validate", "Catalog"}));
        QCOMPARE(pages->widget(int(titles.indexOf(QStringLiteral("Catalog")))), catalogPage());

        QStringList kinds;
        for (int i = 0; i < catalogPage()->kindTabs()->count(); ++i)
            kinds << catalogPage()->kindTabs()->tabText(i).remove(QLatin1Char('&'));
        QCOMPARE(kinds, (QStringList{"Models", "Chips", "Node types"}));
    }

    void overview()
    {
        const auto* overview = window_->findChild<QPlainTextEdit*>(QStringLiteral("overview"));
        QVERIFY(overview);
        const QString text = overview->toPlainText();
        QVERIFY2(text.contains(QLatin1String("174,604,259,328")), qPrintable(text));  // GPT-3 175B, exact
        QVERIFY2(text.contains(QLatin1String("trn1.32xlarge")), qPrintable(text));
        QVERIFY(overview->isReadOnly());
    }

    void tablesMatchCatalog_data()
    {
        QTest::addColumn<QString>("tabTitle");
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("minimum");
        QTest::newRow("models") << QStringLiteral("Models") << int(EntryKind::Model) << 27;
        QTest::newRow("chips") << QStringLiteral("Chips") << int(EntryKind::Chip) << 13;
        QTest::newRow("nodes") << QStringLiteral("Node types") << int(EntryKind::Node) << 14;
    }

    void tablesMatchCatalog()
    {
        QFETCH(QString, tabTitle);
        QFETCH(int, kind);
        QFETCH(int, minimum);
        QCOMPARE(catalogPage()->findChildren<QTableWidget*>().size(), 3);
        const QTableWidget* t = table(tabTitle);
        QVERIFY(t);
        const std::vector<CatalogEntry> entries = catalog_->list(EntryKind(kind));
        QVERIFY2(int(entries.size()) >= minimum, qPrintable(QString::number(entries.size())));
        QCOMPARE(t->rowCount(), int(entries.size()));
        QSet<QString> expected, shown;
        for (const CatalogEntry& e : entries)
            expected.insert(QString::fromStdString(e.name));
        for (int r = 0; r < t->rowCount(); ++r) {
            QVERIFY(t->item(r, 0));
            shown.insert(t->item(r, 0)->text());
        }
        QCOMPARE(shown, expected);
    }

    // (gui18) A price says its kind where it is shown: "$21.50 on-demand", not a bare figure.
    void nodePricesSayTheirKind()
    {
        const QTableWidget* t = table(QStringLiteral("Node types"));
        QVERIFY(t);
        const int price = column(t, QStringLiteral("Price/h"));
        QVERIFY(price > 0);
        int priced = 0;
        for (int r = 0; r < t->rowCount(); ++r) {
            const NodeType n = catalog_->node(t->item(r, 0)->text().toStdString());
            if (n.price_per_node_hour_usd <= 0 || n.price_kind.empty())
                continue;
            ++priced;
            QCOMPARE(t->item(r, price)->text(), QStringLiteral("$%1 %2")
                                                    .arg(n.price_per_node_hour_usd, 0, 'f', 2)
                                                    .arg(QString::fromStdString(n.price_kind)));
        }
        QVERIFY2(priced >= 3, qPrintable(QString::number(priced)));  // p4d, p5, trn1, ...
        const int trn1 = rowOf(t, QStringLiteral("trn1.32xlarge"));
        QVERIFY(trn1 >= 0);
        QVERIFY2(t->item(trn1, price)->text().endsWith(QLatin1String(" on-demand")), qPrintable(t->item(trn1, price)->text()));
    }

    void modelDetails_data()
    {
        QTest::addColumn<QString>("name");
        QTest::newRow("gpt2-small") << QStringLiteral("gpt2-small");
        QTest::newRow("llama-3-8b") << QStringLiteral("llama-3-8b");
        QTest::newRow("mixtral-8x7b (MoE)") << QStringLiteral("mixtral-8x7b");
        QTest::newRow("t5-11b (encoder-decoder)") << QStringLiteral("t5-11b");
        QTest::newRow("gpt3-175b") << QStringLiteral("gpt3-175b");
    }

    // Selecting a model fills the details with its exact parameter count, and
    // the table's Parameters column shows the same figure.
    void modelDetails()
    {
        QFETCH(QString, name);
        window_->pages()->setCurrentWidget(catalogPage());
        QTableWidget* models = table(QStringLiteral("Models"));
        QVERIFY(models);
        catalogPage()->kindTabs()->setCurrentWidget(models);
        const int row = rowOf(models, name);
        QVERIFY2(row >= 0, qPrintable(name));
        // Select a different row first so that selecting `row` is a real change.
        models->selectRow(row == 0 ? 1 : 0);
        QVERIFY(detail(QStringLiteral("name")) != name);
        models->selectRow(row);
        QCOMPARE(models->currentRow(), row);

        const QString expected = QString::fromStdString(formatCount(parameterCount(catalog_->model(name.toStdString()))));
        QVERIFY(expected.count(QLatin1Char(',')) >= 2);  // an exact count, not "124M"
        QCOMPARE(detail(QStringLiteral("name")), name);
        QCOMPARE(detail(QStringLiteral("parameters")), expected);
        const int parameters = column(models, QStringLiteral("Parameters"));
        QVERIFY(parameters >= 0);
        QCOMPARE(models->item(row, parameters)->text(), expected);
    }

    void switchingKindShowsThatKindsDetails_data()
    {
        QTest::addColumn<QString>("tabTitle");
        QTest::addColumn<QString>("name");
        QTest::newRow("chip trainium1") << QStringLiteral("Chips") << QStringLiteral("trainium1");
        QTest::newRow("node trn1.32xlarge") << QStringLiteral("Node types") << QStringLiteral("trn1.32xlarge");
        QTest::newRow("node p5.48xlarge") << QStringLiteral("Node types") << QStringLiteral("p5.48xlarge");
    }

    void switchingKindShowsThatKindsDetails()
    {
        QFETCH(QString, tabTitle);
        QFETCH(QString, name);
        window_->pages()->setCurrentWidget(catalogPage());
        QTableWidget* models = table(QStringLiteral("Models"));
        catalogPage()->kindTabs()->setCurrentWidget(models);
        models->selectRow(rowOf(models, QStringLiteral("gpt2-small")));
        QCOMPARE(detail(QStringLiteral("name")), QStringLiteral("gpt2-small"));

        QTableWidget* t = table(tabTitle);
        QVERIFY(t);
        const int row = rowOf(t, name);
        QVERIFY2(row >= 0, qPrintable(name));
        t->selectRow(row);
        catalogPage()->kindTabs()->setCurrentWidget(t);
        QCOMPARE(detail(QStringLiteral("name")), name);
        QVERIFY(detail(QStringLiteral("parameters")).isNull());  // not a model's details any more
    }

    void itemModelsAreConsistent_data()
    {
        QTest::addColumn<QString>("tabTitle");
        QTest::newRow("models") << QStringLiteral("Models");
        QTest::newRow("chips") << QStringLiteral("Chips");
        QTest::newRow("nodes") << QStringLiteral("Node types");
    }

    void itemModelsAreConsistent()
    {
        QFETCH(QString, tabTitle);
        QTableWidget* t = table(tabTitle);
        QVERIFY(t);
        const int rows = t->rowCount();
        {
            QAbstractItemModelTester tester(t->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
            if (QTest::currentTestFailed())
                return;
            // Exercise the model while it is watched: a full reload and a sort on every column.
            catalogPage()->reload();
            if (QTest::currentTestFailed())
                return;
            for (int c = 0; c < t->columnCount(); ++c) {
                t->sortByColumn(c, Qt::DescendingOrder);
                t->sortByColumn(c, Qt::AscendingOrder);
                if (QTest::currentTestFailed())
                    return;
            }
            t->sortByColumn(0, Qt::AscendingOrder);
        }
        QCOMPARE(t->rowCount(), rows);
        // After a name sort the names are in order.
        for (int r = 1; r < t->rowCount(); ++r)
            QVERIFY2(t->item(r - 1, 0)->text() <= t->item(r, 0)->text(), qPrintable(t->item(r, 0)->text()));
    }

    // Numeric columns sort by value, not by their formatted text ("1,315,723,264" is
    // less than "124,439,808" as a string).
    void parametersColumnSortsByValue_data()
    {
        QTest::addColumn<int>("order");
        QTest::newRow("ascending") << int(Qt::AscendingOrder);
        QTest::newRow("descending") << int(Qt::DescendingOrder);
    }

    void parametersColumnSortsByValue()
    {
        QFETCH(int, order);
        QTableWidget* models = table(QStringLiteral("Models"));
        QVERIFY(models);
        const int parameters = column(models, QStringLiteral("Parameters"));
        QVERIFY(parameters >= 0);
        models->sortByColumn(parameters, Qt::SortOrder(order));
        QList<qint64> counts;
        for (int r = 0; r < models->rowCount(); ++r)
            counts << parameterCount(catalog_->model(models->item(r, 0)->text().toStdString()));
        models->sortByColumn(0, Qt::AscendingOrder);
        QVERIFY(counts.size() >= 22);
        if (Qt::SortOrder(order) == Qt::DescendingOrder)
            std::reverse(counts.begin(), counts.end());
        QVERIFY2(std::is_sorted(counts.cbegin(), counts.cend()), "Parameters column is not in numeric order");
        QVERIFY(counts.front() < counts.back());
    }

    // Chips and node types are edited as JSON with import's checks as you type.
    void jsonEntryEditor()
    {
        JsonEntryDialog dialog(*catalog_, catalog_->entry("trainium1").document, false);
        QVERIFY(!dialog.acceptable());  // the built-in's own name is taken
        QVERIFY(dialog.messages()->text().contains("built-in"));
        QJsonObject doc = catalog_->entry("trainium1").document;
        doc["name"] = "my-trainium";
        doc["hbm_bytes"] = "32 parsecs";
        dialog.editor()->setPlainText(QString::fromUtf8(QJsonDocument(doc).toJson()));
        QVERIFY(!dialog.acceptable());
        QVERIFY2(dialog.messages()->text().contains("hbm_bytes"), qPrintable(dialog.messages()->text()));
        doc["hbm_bytes"] = "64 GiB";
        dialog.editor()->setPlainText(QString::fromUtf8(QJsonDocument(doc).toJson()));
        QVERIFY2(dialog.acceptable(), qPrintable(dialog.messages()->text()));
        dialog.editor()->setPlainText(QStringLiteral("{ \"schema\": "));
        QVERIFY(!dialog.acceptable());
        QVERIFY(dialog.messages()->text().contains("line"));
    }

    void catalogPageExportAndRemove()
    {
        CatalogPage* page = catalogPage();
        QSignalSpy changed(page, &CatalogPage::catalogChanged);
        page->select("gpt2-small");
        QCOMPARE(page->selectedName(), std::string("gpt2-small"));
        const QString path = dir_->filePath("gpt2-small.json");
        QVERIFY(page->exportSelected(path).isEmpty());
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(f.readAll()).object().value("parameters").toDouble(), 124439808.0);
        QVERIFY(page->removeSelected().contains("built-in"));  // read-only
        QCOMPARE(changed.count(), 0);

        QJsonObject mine = catalog_->entry("gpt2-small").document;
        mine["name"] = "my-gpt2";
        catalog_->importDocument(mine);
        page->reload();
        page->select("my-gpt2");
        QCOMPARE(page->selectedName(), std::string("my-gpt2"));
        QVERIFY(page->removeSelected().isEmpty());
        QVERIFY(!catalog_->find("my-gpt2"));
        QCOMPARE(changed.count(), 1);
    }

    // Headers keep room for the sort arrow only where it is drawn: the chips table fits its
    // pane, every header stays readable, and the column sorted by a click widens for its arrow.
    void catalogHeadersFitWithoutScrolling()
    {
        window_->pages()->setCurrentWidget(catalogPage());
        catalogPage()->kindTabs()->setCurrentWidget(table(QStringLiteral("Chips")));
        QTableWidget* chips = table(QStringLiteral("Chips"));
        QVERIFY(chips);
        QHeaderView* header = chips->horizontalHeader();
        QTRY_COMPARE(chips->horizontalScrollBar()->maximum(), 0);
        QFont bold = header->font();
        bold.setBold(true);
        const QFontMetrics fm(bold);
        const int margin = header->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, header);
        for (int c = 0; c < chips->columnCount(); ++c) {
            const QString text = chips->horizontalHeaderItem(c)->text();
            QVERIFY2(header->sectionSize(c) >= fm.horizontalAdvance(text) + 2 * margin, qPrintable(text));
        }
        const int devices = column(chips, QStringLiteral("Devices/chip"));  // header wider than its cells
        QVERIFY(devices > 0);
        const int before = header->sectionSize(devices);
        chips->sortByColumn(devices, Qt::DescendingOrder);
        QVERIFY(header->sectionSize(devices) > before);
        QCOMPARE(header->sectionSize(devices), header->sectionSizeHint(devices));
        chips->sortByColumn(0, Qt::AscendingOrder);
    }

    // (gui18) At 1440x900 the node types' table, prices with their kind, is seen whole.
    void nodeTypesFitAt1440()
    {
        const QSize before = window_->size();
        window_->resize(1440, 900);
        window_->pages()->setCurrentWidget(catalogPage());
        QTableWidget* nodes = table(QStringLiteral("Node types"));
        QVERIFY(nodes);
        catalogPage()->kindTabs()->setCurrentWidget(nodes);
        QTRY_COMPARE(nodes->horizontalScrollBar()->maximum(), 0);
        window_->resize(before);
    }

    static QGraphicsTextItem* emptyState(QChart* chart)
    {
        for (QGraphicsItem* item : chart->childItems())
            if (auto* text = dynamic_cast<QGraphicsTextItem*>(item);
                text && text->objectName() == QLatin1String("shardscope_empty_state"))
                return text;
        return nullptr;
    }

    // A chart with nothing to draw says what would fill it, with no axes or legend to read.
    void emptyChartsSayWhatWouldFillThem()
    {
        const QString hint = QStringLiteral("Run a validation to see its loss here.");
        std::unique_ptr<QChartView> xy(makeXYChart({QStringLiteral("Training loss"), QStringLiteral("step"),
                                                    QStringLiteral("loss"), false, 10, {}, hint},
                                                   nullptr));
        std::unique_ptr<QChartView> bars(makeStackedBarChart(
            {QStringLiteral("Prediction error"), QStringLiteral("%"), {}, {}, true, 0, {}, {}}, nullptr));
        for (QChartView* view : {xy.get(), bars.get()}) {
            view->resize(500, 300);
            QVERIFY(view->chart()->axes().isEmpty());
            QVERIFY(!view->chart()->legend()->isVisible());
            QGraphicsTextItem* text = emptyState(view->chart());
            QVERIFY(text);
            QVERIFY(!text->toPlainText().isEmpty());
        }
        QCOMPARE(emptyState(xy->chart())->toPlainText(), hint);
        // With data, the ordinary chart: axes, no sentence.
        XYChartData d{QStringLiteral("Training loss"), QStringLiteral("step"), QStringLiteral("loss"), false, 10, {}, hint};
        d.series.push_back({QStringLiteral("loss"), {{1, 4.0, {}}, {2, 3.5, {}}}, true, false, -1});
        setXYChart(xy.get(), d);
        QCOMPARE(xy->chart()->axes().size(), 2);
        QVERIFY(!emptyState(xy->chart()));
    }

    // Value axes tick at round numbers (1, 2 or 5 x 10^n apart) that cover the data,
    // e.g. a ten-step loss curve at 0, 2, ..., 12, not at 0.55, 3.02, ...
    void xyChartAxesTickAtRoundNumbers()
    {
        XYChartData d{QStringLiteral("Training loss"), QStringLiteral("step"), QStringLiteral("loss (nats/token)"),
                      false, 10, {}, {}};
        XYSeriesData loss{QStringLiteral("loss"), {}, true, false, -1};
        for (int step = 1; step <= 10; ++step)
            loss.points.push_back({double(step), 5.2 - 0.09 * step, QString()});
        d.series = {loss};
        std::unique_ptr<QChartView> view(makeXYChart(d, nullptr));
        const QList<QAbstractAxis*> axes = view->chart()->axes();
        QCOMPARE(axes.size(), 2);
        for (QAbstractAxis* a : axes) {
            const auto* axis = qobject_cast<const QValueAxis*>(a);
            QVERIFY(axis);
            const QString name = axis->titleText();
            const double step = (axis->max() - axis->min()) / (axis->tickCount() - 1);
            QVERIFY2(step > 0, qPrintable(name));
            const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
            QVERIFY2(qFuzzyCompare(mantissa, 1.0) || qFuzzyCompare(mantissa, 2.0) || qFuzzyCompare(mantissa, 5.0),
                     qPrintable(name + QStringLiteral(": tick step %1").arg(step)));
            QVERIFY2(std::fabs(axis->min() / step - std::round(axis->min() / step)) < 1e-9, qPrintable(name));
            const bool isX = axis->orientation() == Qt::Horizontal;
            QVERIFY2(axis->min() <= (isX ? 1.0 : 5.2 - 0.9) && axis->max() >= (isX ? 10.0 : 5.2 - 0.09), qPrintable(name));
        }
    }

    // (gui18) A log axis over less than two decades labels every doubling, not one tick.
    void logAxisLabelsShortRanges()
    {
        XYChartData d{QStringLiteral("Pareto"), QStringLiteral("step time (s, log scale)"), QStringLiteral("GiB"),
                      true, 10, {}, {}};
        d.series.push_back({QStringLiteral("front"), {{50, 13, {}}, {120, 5, {}}, {400, 3, {}}}, true, false, -1});
        std::unique_ptr<QChartView> view(makeXYChart(d, nullptr));
        auto* axis = qobject_cast<QLogValueAxis*>(view->chart()->axes(Qt::Horizontal).front());
        QVERIFY(axis);
        QCOMPARE(axis->base(), 2.0);
        QVERIFY2(axis->tickCount() >= 3, qPrintable(QString::number(axis->tickCount())));
        d.series.front().points.push_back({40000, 1, {}});  // three decades: base 10 labels them
        setXYChart(view.get(), d);
        QCOMPARE(qobject_cast<QLogValueAxis*>(view->chart()->axes(Qt::Horizontal).front())->base(), 10.0);
    }

    // Every chart tells the value under the pointer; XY charts zoom (wheel, rubber band) and reset.
    void chartsShowValuesAndZoom()
    {
        XYChartData d{QStringLiteral("Training loss"), QStringLiteral("step"), QStringLiteral("loss (nats/token)"),
                      false, 10, {}, {}};
        XYSeriesData a{QStringLiteral("run 1"), {}, true, false, 0}, b{QStringLiteral("run 2"), {}, true, false, 1};
        for (int step = 1; step <= 20; ++step) {
            a.points.push_back({double(step), 5 - 0.1 * step, QStringLiteral("run 1, step %1").arg(step)});
            b.points.push_back({double(step), 4.5 - 0.1 * step, QStringLiteral("run 2, step %1").arg(step)});
        }
        const XYSeriesData best{QStringLiteral("best plan"), {{15, 1.0, QStringLiteral("dp=8,tp=8: 1.0 s")}}, false, true, -1};
        d.series = {a, b, best};
        std::unique_ptr<QChartView> view(makeXYChart(d, nullptr));
        view->resize(640, 420);
        view->show();
        QVERIFY(QTest::qWaitForWindowExposed(view.get()));
        QChart* chart = view->chart();
        const QList<QAbstractSeries*> series = chart->series();
        QCOMPARE(series.size(), qsizetype(3));
        auto at = [&](double x, double y) {
            return view->mapFromScene(chart->mapToScene(chart->mapToPosition(QPointF(x, y), series[0])));
        };
        // A marker names its point; elsewhere over the plot, each line's point nearest the pointer's x.
        QCOMPARE(chartToolTipAt(view.get(), at(15, 1.0)), QStringLiteral("dp=8,tp=8: 1.0 s"));
        QCOMPARE(chartToolTipAt(view.get(), at(7.2, 4.0)), QStringLiteral("run 1, step 7\nrun 2, step 7"));
        QCOMPARE(chartToolTipAt(view.get(), at(7.8, 2.0)), QStringLiteral("run 1, step 8\nrun 2, step 8"));
        QVERIFY(chartToolTipAt(view.get(), QPoint(2, 2)).isEmpty());  // outside the plot
        // ... shown when the pointer moves there.
        const QPoint over = at(7.2, 4.0);
        QMouseEvent move(QEvent::MouseMove, over, view->viewport()->mapToGlobal(over), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
        QApplication::sendEvent(view->viewport(), &move);
        QTRY_COMPARE(QToolTip::text(), QStringLiteral("run 1, step 7\nrun 2, step 7"));

        auto* x = qobject_cast<QValueAxis*>(chart->axes(Qt::Horizontal).front());
        auto* y = qobject_cast<QValueAxis*>(chart->axes(Qt::Vertical).front());
        QVERIFY(x && y);
        const double x0 = x->min(), x1 = x->max(), y0 = y->min(), y1 = y->max();
        // The wheel zooms in about the pointer.
        const QPoint pointer = at(7, 3);
        QWheelEvent wheel(pointer, view->viewport()->mapToGlobal(pointer), QPoint(), QPoint(0, 120), Qt::NoButton,
                          Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(view->viewport(), &wheel);
        QVERIFY2(x->max() - x->min() < 0.85 * (x1 - x0), qPrintable(QStringLiteral("%1..%2").arg(x->min()).arg(x->max())));
        QVERIFY(x->min() > x0 && x->min() < 7 && x->max() > 7 && x->max() < x1);
        QVERIFY(y->min() > y0 && y->min() < 3 && y->max() > 3 && y->max() < y1);
        // Double-click shows everything again.
        QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, pointer);
        QCOMPARE(x->min(), x0);
        QCOMPARE(x->max(), x1);
        QCOMPARE(y->max(), y1);
        // A rubber band from step 5 to step 10 shows steps 5 to 10.
        const QPoint from = at(5, 4.5), to = at(10, 2.5);
        QTest::mousePress(view->viewport(), Qt::LeftButton, {}, from);
        QMouseEvent drag(QEvent::MouseMove, to, view->viewport()->mapToGlobal(to), Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(view->viewport(), &drag);
        QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, to);
        QVERIFY2(x->min() > 4.5 && x->min() < 5.5 && x->max() > 9.5 && x->max() < 10.5,
                 qPrintable(QStringLiteral("%1..%2").arg(x->min()).arg(x->max())));
        // "Reset zoom" in the context menu.
        QAction* reset = nullptr;
        for (QAction* action : view->actions())
            if (action->text().startsWith(QLatin1String("Reset zoom")))
                reset = action;
        QVERIFY(reset);
        reset->trigger();
        QCOMPARE(x->min(), x0);
        QCOMPARE(x->max(), x1);

        // Bars name their set, category and value, in the axis's unit, without scientific notation.
        QCOMPARE(barToolTip(QStringLiteral("optimizer states"), QString(), 12.3, QStringLiteral("memory per device (GiB)")),
                 QStringLiteral("optimizer states: 12.3 GiB"));
        QCOMPARE(barToolTip(QStringLiteral("run 1"), QStringLiteral("flops"), 2.5, QStringLiteral("|predicted / measured - 1| (%)")),
                 QStringLiteral("run 1, flops: 2.5%"));
        QVERIFY(!barToolTip(QStringLiteral("tokens"), QString(), 3e11, QStringLiteral("tokens")).contains(QLatin1String("e+")));
        StackedBarsData bars{QStringLiteral("Step time"), QStringLiteral("time per step (s)"), {QStringLiteral("1F1B")},
                             {{QStringLiteral("compute"), {1.25}, 0}, {QStringLiteral("bubble"), {0.5}, 1}}, true, 0, {}, {}};
        std::unique_ptr<QChartView> barView(makeStackedBarChart(bars, nullptr));
        barView->resize(640, 300);
        barView->show();
        QVERIFY(QTest::qWaitForWindowExposed(barView.get()));
        QBarSet* bubble = qobject_cast<QAbstractBarSeries*>(barView->chart()->series().front())->barSets().at(1);
        emit bubble->hovered(true, 0);
        QTRY_COMPARE(QToolTip::text(), QStringLiteral("bubble, 1F1B: 0.5 s"));
    }

    // (gui18) The step-time bar: the critical path on top, the communication hidden behind compute
    // as a second, hatched lane under it; the legend names only what is drawn, and what is too
    // thin to draw is named in a note with its time.
    void stepTimeDrawsTheHiddenLaneAndOnlyWhatIsDrawn()
    {
        Prediction p;
        p.time_s.compute = 10;
        p.time_s.tp_comm = 1;
        p.time_s.bubble = 2;
        p.time_s.dp_comm = 0.004;        // 0.03% of the step: a hairline
        p.time_s.hidden.dp_comm = 6.85;  // the DP/ZeRO traffic hidden behind the backward
        p.time_s.hidden.tp_comm = 0.002;
        p.step_time_s = p.time_s.sum();
        const StackedBarsData d = stepTimeChartData(p);
        QCOMPARE(d.categories, (QStringList{"critical path", "hidden behind compute"}));
        QStringList names;
        for (const BarSet& s : d.sets)
            names << s.name;
        QCOMPARE(names, (QStringList{"compute", "TP/SP comm", "DP/ZeRO comm, hidden", "bubble"}));
        QCOMPARE(d.sets[2].values, (QVector<double>{0.0, 6.85}));
        QVERIFY(d.sets[2].overlapped && !d.sets[0].overlapped);
        QCOMPARE(d.sets[2].color, 5);  // DP/ZeRO's colour in both lanes
        QCOMPARE(d.note, QStringLiteral("Too small to draw: hidden TP/SP comm 2 ms; DP/ZeRO comm 4 ms"));

        std::unique_ptr<QChartView> view(makeStackedBarChart(d, nullptr));
        view->resize(640, 300);
        view->show();
        QVERIFY(QTest::qWaitForWindowExposed(view.get()));
        QStringList legend;
        for (QLegendMarker* marker : view->chart()->legend()->markers())
            if (marker->isVisible())
                legend << marker->label();
        QCOMPARE(legend, names);
        // Qt draws a horizontal chart's last category on top: the critical path.
        auto* lanes = qobject_cast<QBarCategoryAxis*>(view->chart()->axes(Qt::Vertical).front());
        QVERIFY(lanes);
        QCOMPARE(lanes->categories(), (QStringList{"hidden behind compute", "critical path"}));
        const QList<QBarSet*> sets = qobject_cast<QAbstractBarSeries*>(view->chart()->series().front())->barSets();
        QCOMPARE(sets[2]->at(0), 6.85);  // drawn in the bottom lane
        QCOMPARE(sets[2]->at(1), 0.0);
        QCOMPARE(sets[0]->at(1), 10.0);
        QCOMPARE(sets[2]->brush().style(), Qt::BDiagPattern);
        QCOMPARE(sets[0]->brush().style(), Qt::SolidPattern);
        QCOMPARE(view->chart()->title(), QStringLiteral("%1 (%2)").arg(d.title, d.note));

        // Nothing hidden: one lane, no note.
        Prediction plain;
        plain.time_s.compute = 3;
        plain.time_s.pp_comm = 0.5;
        plain.step_time_s = plain.time_s.sum();
        const StackedBarsData one = stepTimeChartData(plain);
        QCOMPARE(one.categories, QStringList{"critical path"});
        QCOMPARE(one.sets.size(), 2);
        QCOMPARE(one.sets[1].values, QVector<double>{0.5});
        QVERIFY(one.note.isEmpty());

        // The default problem's best plan: every component is drawn or named, none is lost.
        QTRY_VERIFY_WITH_TIMEOUT(window_->lastResult() && window_->lastResult()->best(), 120'000);
        const Prediction& best = window_->lastResult()->best()->prediction;
        const StackedBarsData real = stepTimeChartData(best);
        for (const StepTimePart& part : stepTimeParts(best.time_s)) {
            // (set name as drawn, name in the note)
            for (const auto& [value, name, noted] :
                 {std::tuple{part.exposed, part.name, part.name},
                  std::tuple{part.hidden, part.name + QStringLiteral(", hidden"), QStringLiteral("hidden ") + part.name}}) {
                if (value <= 0)
                    continue;
                const bool drawn = std::any_of(real.sets.begin(), real.sets.end(), [&](const BarSet& s) { return s.name == name; });
                const QString entry = noted + QLatin1Char(' ') + QString::fromStdString(formatDuration(value));
                const bool named = real.note.contains(QStringLiteral(": ") + entry) || real.note.contains(QStringLiteral("; ") + entry);
                QVERIFY2(drawn != named, qPrintable(name + QStringLiteral(": ") + real.note));
            }
        }
    }

    // The pipeline timeline of a long interleaved schedule (192 micro-batches, v=3, the blur)
    // zooms about the pointer, pans by dragging, resets on double-click, and names the op under
    // the pointer.
    void pipelineTimelineZoomsAndNamesMicroBatches()
    {
        const PipelineTimeline timeline = simulatePipeline(PipelineSchedule::Interleaved, 8, 192, 3, 1e-3, 2e-3);
        PipelineTimelineWidget widget;
        widget.resize(900, 300);
        widget.setTimeline(timeline, QStringLiteral("Pipeline schedule"));
        widget.show();
        QVERIFY(QTest::qWaitForWindowExposed(&widget));
        QCOMPARE(widget.visibleRange(), std::make_pair(0.0, timeline.makespan_s));
        QVERIFY(!widget.zoomed());
        // Micro-batch 17's forward on stage 2 (chunk 1).
        const auto op = std::find_if(timeline.ops.begin(), timeline.ops.end(), [](const PipelineOp& o) {
            return o.stage == 2 && o.micro_batch == 17 && o.chunk == 1 && !o.backward;
        });
        QVERIFY(op != timeline.ops.end());
        const double mid = (op->start_s + op->end_s) / 2;
        const QRectF area = widget.plotArea();
        const double rowY = area.top() + (2 + 0.5) * area.height() / timeline.stages;
        QVERIFY2((op->end_s - op->start_s) / timeline.makespan_s * area.width() < 2, "not a blur to begin with");
        // Twenty turns of the wheel over it: the time under the pointer stays under it.
        for (int i = 0; i < 20; ++i) {
            const QPointF at(widget.xOf(mid), rowY);
            QWheelEvent wheel(at, widget.mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                              Qt::NoScrollPhase, false);
            QApplication::sendEvent(&widget, &wheel);
            QVERIFY(std::fabs(widget.xOf(mid) - at.x()) < 1e-6 * area.width());
        }
        QVERIFY(widget.zoomed());
        const auto [t0, t1] = widget.visibleRange();
        QVERIFY(t0 < mid && mid < t1);
        QVERIFY2((t1 - t0) < 0.02 * timeline.makespan_s, qPrintable(QString::number((t1 - t0) / timeline.makespan_s)));
        QVERIFY((op->end_s - op->start_s) / (t1 - t0) * area.width() > 8);  // now a box with room for its number
        const QPointF over(widget.xOf(mid), rowY);
        QCOMPARE(widget.opAt(over), &widget.timeline().ops[size_t(op - timeline.ops.begin())]);
        const QString text = widget.toolTipAt(over);
        QVERIFY2(text.startsWith(QStringLiteral("stage 2, micro-batch 17 (chunk 1 of 3), forward: ")), qPrintable(text));
        QVERIFY2(text.endsWith(QStringLiteral(" (%1)").arg(QString::fromStdString(formatDuration(op->end_s - op->start_s)))),
                 qPrintable(text));
        // ... shown on a move.
        QMouseEvent move(QEvent::MouseMove, over, widget.mapToGlobal(over), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
        QApplication::sendEvent(&widget, &move);
        QTRY_COMPARE(QToolTip::text(), text);
        // A drag to the left shows later times, the same span.
        QTest::mousePress(&widget, Qt::LeftButton, {}, over.toPoint());
        const QPointF left = over - QPointF(200, 0);
        QMouseEvent drag(QEvent::MouseMove, left, widget.mapToGlobal(left), Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&widget, &drag);
        QTest::mouseRelease(&widget, Qt::LeftButton, {}, left.toPoint());
        const auto [p0, p1] = widget.visibleRange();
        QVERIFY(p0 > t0);
        QVERIFY(std::fabs((p1 - p0) - (t1 - t0)) < 1e-12);
        QVERIFY(std::fabs(widget.xOf(mid) - (over.x() - 200)) < 1);  // the op followed the pointer
        // Never past the step's ends.
        widget.panBy(1e9);
        QCOMPARE(widget.visibleRange().second, timeline.makespan_s);
        // Double-click: the whole step again.
        QTest::mouseDClick(&widget, Qt::LeftButton, {}, over.toPoint());
        QCOMPARE(widget.visibleRange(), std::make_pair(0.0, timeline.makespan_s));
        // The bubble is named too: stage 7 is idle at the very start of an interleaved step.
        QCOMPARE(widget.toolTipAt(QPointF(area.left() + 1, area.top() + 7.5 * area.height() / timeline.stages)),
                 QStringLiteral("stage 7: idle (bubble)"));
    }

    // In the dark theme a check box's and a radio button's edge stand out from the window by at least
    // 3:1 (WCAG 2.1 non-text contrast): Fusion's own edge, a shade darker than the window, is ~1.3:1.
    void darkThemeIndicatorsHaveContrast()
    {
        const QPalette before = QApplication::palette();
        applyTheme(Theme::Dark);
        auto luminance = [](const QColor& c) {
            auto channel = [](double v) { return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
            return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF());
        };
        auto contrast = [&](const QColor& a, const QColor& b) {
            const double la = luminance(a), lb = luminance(b);
            return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
        };
        QCheckBox box(QStringLiteral("fused (flash) attention"));
        QRadioButton radio(QStringLiteral("none"));
        for (QAbstractButton* button : {static_cast<QAbstractButton*>(&box), static_cast<QAbstractButton*>(&radio)}) {
            button->adjustSize();
            const QImage image = button->grab().toImage();
            QStyleOptionButton option;
            option.initFrom(button);
            const QRect indicator = button->style()->subElementRect(
                button == &box ? QStyle::SE_CheckBoxIndicator : QStyle::SE_RadioButtonIndicator, &option, button);
            const QColor window = button->palette().color(QPalette::Window);
            // The strongest edge pixel on the indicator's left side, at its middle.
            double best = 1;
            for (int x = indicator.left(); x <= indicator.left() + 2; ++x)
                best = std::max(best, contrast(image.pixelColor(x * image.width() / button->width(), indicator.center().y() * image.height() / button->height()), window));
            QVERIFY2(best >= 3.0, qPrintable(button->text() + QStringLiteral(": %1:1").arg(best, 0, 'f', 2)));
        }
        applyTheme(Theme::Light);
        QApplication::setPalette(before);
    }

    // The device mesh: the last node (the last pipeline stage) is among the nodes shown, a device
    // under the pointer is named with its ranks, and rank numbers are drawn only where they fit.
    void deviceMeshNamesDevicesAndShowsTheLastStage()
    {
        Problem problem;
        problem.cluster.node = store_->specs().node("trn1.32xlarge");
        problem.cluster.nodes = 64;
        FieldErrors errors;
        Layout layout = parseLayout("tp=8,cp=4,pp=16", errors);
        resolveDataParallel(layout, problem.cluster.devices(), errors);
        QVERIFY(errors.empty());
        QCOMPARE(layout.dp, 4);
        DeviceMeshWidget mesh;
        mesh.resize(700, 320);
        mesh.setMesh(problem, layout);
        mesh.show();
        QVERIFY(QTest::qWaitForWindowExposed(&mesh));
        DeviceMeshWidget::Geometry g = mesh.geometry();
        QVERIFY(g.shown > 1 && g.shown < 64);
        QCOMPARE(mesh.nodeShown(g, 0), 0);
        QCOMPARE(mesh.nodeShown(g, g.shown - 1), 63);  // stage 15 lives on the last nodes
        // The last device of the last node: rank 2047, the last stage, the last dp and tp ranks.
        const QRectF last = mesh.deviceRect(g, g.shown - 1, g.perNode - 1);
        QCOMPARE(mesh.toolTipAt(last.center()),
                 QStringLiteral("node 63, device 31 (rank 2047): tp rank 7, cp rank 3, dp rank 3, pipeline stage 15"));
        // Device 9 of node 0: tp rank 1 of the second tp group, cp rank 1.
        QCOMPARE(mesh.toolTipAt(mesh.deviceRect(g, 0, 9).center()),
                 QStringLiteral("node 0, device 9 (rank 9): tp rank 1, cp rank 1, dp rank 0, pipeline stage 0"));
        QVERIFY(mesh.toolTipAt(QPointF(1, 1)).isEmpty());
        // Numbers only in cells with room for them.
        const QFontMetrics fm(mesh.font());
        QCOMPARE(g.numbers, g.cell > fm.horizontalAdvance(QStringLiteral("3")) + 4 && g.cell > fm.height() * 0.8);
        problem.cluster.nodes = 2;
        layout = parseLayout("tp=8,pp=2", errors);
        resolveDataParallel(layout, problem.cluster.devices(), errors);
        mesh.resize(1400, 700);
        mesh.setMesh(problem, layout);
        g = mesh.geometry();
        QVERIFY2(g.numbers, qPrintable(QString::number(g.cell)));
        QCOMPARE(mesh.nodeShown(g, g.shown - 1), 1);
    }

    // Explore says why a node type has no plan, and tells no plan from no price.
    void noPlanSaysWhy()
    {
        SweepPoint point;
        point.problem.cluster.node = store_->specs().node("gaudi3-8");
        point.problem.cluster.nodes = 1;
        point.result.stats.mesh_shapes = 4;
        point.result.stats.infeasible_by_reason = {{"out of memory", 1200}, {"mesh: tp does not divide heads", 3}};
        QCOMPARE(noPlanReason(point), QStringLiteral("out of memory (1,200 layouts)"));
        SweepResult comparison;
        comparison.points = {point};
        const SweepResult noSweep;
        const XYChartData cost = timeCostChartData(noSweep, comparison);
        QVERIFY2(cost.x_axis.contains(QLatin1String("no plan: gaudi3-8: out of memory")), qPrintable(cost.x_axis));
        QVERIFY2(!cost.x_axis.contains(QLatin1String("no published price")), qPrintable(cost.x_axis));
        const StackedBarsData days = nodeTypesChartData(comparison);
        QVERIFY(days.categories.front().contains(QLatin1String("no plan: out of memory")));
        point.error = "cluster.nodes: 1 node of gaudi3-8 has no inter-node network";
        QCOMPARE(noPlanReason(point), QString::fromStdString(point.error));
    }

    // "New model..." starts from the family's structure, not from hidden fields of the model that
    // happened to be selected; every field that changes the count is a visible control.
    void newModelKeepsNothingUnseen()
    {
        ModelSpec bert = store_->specs().model("bert-base");
        QVERIFY(bert.pooler && bert.token_types > 0 && bert.embedding_norm);
        bert.family = ModelFamily::DecoderOnly;  // the user makes a Llama-style model from it
        const ModelSpec fresh = ModelDialog::withFamilyDefaults(bert);
        QVERIFY(!fresh.pooler && fresh.token_types == 0 && !fresh.embedding_norm && fresh.final_norm);
        QCOMPARE(fresh.hidden, bert.hidden);  // the visible sizes are kept
        ModelSpec plain = fresh;  // the same shape written out by hand
        plain.pooler = false;
        plain.token_types = 0;
        plain.embedding_norm = false;
        plain.final_norm = true;
        QCOMPARE(parameterCount(fresh), parameterCount(plain));
        // The dialog shows every structural field, so its count is what the user sees.
        ModelDialog dialog(store_->specs().model("bert-base"));
        QStringList boxes;
        for (const QCheckBox* c : dialog.findChildren<QCheckBox*>())
            boxes << c->text();
        for (const char* expected : {"pooler", "norm after the embeddings", "final norm"})
            QVERIFY2(boxes.join(QLatin1Char('|')).contains(QLatin1String(expected)), expected);
        QVERIFY(dialog.model() == store_->specs().model("bert-base"));  // every field round-trips
        QCOMPARE(ModelDialog::withFamilyDefaults(store_->specs().model("bert-base")).pooler, true);
    }

    // The fields Hugging Face configs brought (QK-norm, q/k/v-only biases, sliding window, expert
    // sizes) are controls of the dialog and round-trip; what it has no control for survives an
    // edit but not "New model...".
    void modelDialogNewFields()
    {
        ModelSpec m = store_->specs().model("mixtral-8x7b");
        m.bias = false;
        m.qkv_bias = true;
        m.qk_norm = true;
        m.sliding_window = {4096, {0, 2, 4}};
        m.rope_scaling = {RopeScalingKind::Linear, 2.0};
        m.moe.ffn_hidden = 2048;
        m.moe.shared_experts = 1;
        m.moe.shared_ffn_hidden = 1024;
        QVERIFY(validate(m).empty());
        ModelDialog dialog(m);
        QVERIFY(dialog.model() == m);
        QStringList boxes;
        for (const QCheckBox* c : dialog.findChildren<QCheckBox*>())
            boxes << c->text();
        for (const char* expected : {"QK-norm", "q, k and v only"})
            QVERIFY2(boxes.join(QLatin1Char('|')).contains(QLatin1String(expected)), expected);
        QCOMPARE(dialog.field("moe.ffn_hidden")->value(), 2048);
        dialog.field("moe.shared_experts")->setValue(0);
        dialog.field("moe.shared_ffn_hidden")->setValue(0);
        QCOMPARE(qint64(parameterCount(dialog.model())), qint64(parameterCount(m) - 32LL * 3 * 4096 * 1024));
        QVERIFY(dialog.parameters()->text().contains(QString::fromStdString(formatCount(parameterCount(dialog.model())))));
        dialog.field("sliding_window.size")->setValue(0);
        QVERIFY(!dialog.model().sliding_window.enabled() && dialog.model().sliding_window.layers.empty());
        const ModelSpec fresh = ModelDialog::withFamilyDefaults(m);
        QVERIFY(!fresh.rope_scaling.enabled() && !fresh.sliding_window.enabled());
        QVERIFY(fresh.qk_norm && fresh.moe.ffn_hidden == 2048);  // visible: kept
    }

    // (issue 16) The MoE router, capacity factor and load-balancing weight and MLA's ranks and
    // per-head sizes are controls of the dialog: DeepSeek-V3 round-trips, a change is counted
    // exactly, a bad value is named and cannot be saved. The catalog table shows the active
    // count; the plans table shows ep and etp for a mixture of experts only.
    void modelDialogMoeAndMlaFields()
    {
        const ModelSpec deepseek = store_->specs().model("deepseek-v3");
        ModelDialog dialog(deepseek);
        QVERIFY(dialog.model() == deepseek);
        auto* router = dialog.findChild<QComboBox*>(QStringLiteral("moe.router"));
        auto* capacity = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("moe.capacity_factor"));
        auto* aux = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("moe.aux_loss_coeff"));
        QVERIFY(router && capacity && aux);
        QCOMPARE(router->currentText(), QStringLiteral("sigmoid-norm"));
        QCOMPARE(capacity->text(), QStringLiteral("dropless"));
        QCOMPARE(dialog.field("mla.kv_lora_rank")->value(), 512);
        QCOMPARE(dialog.field("mla.q_lora_rank")->value(), 1536);
        QVERIFY(dialog.parameters()->text().contains(QStringLiteral("(37,552,297,472 active per token)")));
        QPushButton* save = dialog.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Save);
        QVERIFY(save->isEnabled());

        // A key-value rank of 256: kv_a_proj loses 256 x 7168, kv_b_proj 256 x 128 heads x (128 + 128),
        // kv_a_layernorm 256, in each of the 61 layers.
        dialog.field("mla.kv_lora_rank")->setValue(256);
        QCOMPARE(qint64(parameterCount(dialog.model())),
                 qint64(parameterCount(deepseek) - 61LL * (256 * 7168 + 256 * 128 * 256 + 256)));
        // Past hidden: named, not saved.
        dialog.field("mla.kv_lora_rank")->setValue(8000);
        QVERIFY2(dialog.messages()->text().contains(QLatin1String("model.mla.kv_lora_rank: 8000 is out of range [1, 7168]")),
                 qPrintable(dialog.messages()->text()));
        QVERIFY(!save->isEnabled());
        // 0: ordinary attention, the other MLA boxes off.
        dialog.field("mla.kv_lora_rank")->setValue(0);
        QVERIFY(!dialog.model().mla.enabled() && !dialog.field("mla.v_head_dim")->isEnabled());
        dialog.field("mla.kv_lora_rank")->setValue(512);
        QVERIFY(dialog.model() == deepseek);

        // The router and the training settings reach the model; a top k past the experts is named.
        capacity->setValue(1.25);
        aux->setValue(0.001);
        router->setCurrentIndex(router->findText(QStringLiteral("softmax")));
        QCOMPARE(dialog.model().moe.capacity_factor, 1.25);
        QCOMPARE(dialog.model().moe.aux_loss_coeff, 0.001);
        QCOMPARE(dialog.model().moe.router, MoeRouter::Softmax);
        QCOMPARE(qint64(parameterCount(dialog.model())), qint64(parameterCount(deepseek)));  // no count changes
        dialog.field("moe.top_k")->setValue(300);
        QVERIFY2(dialog.messages()->text().contains(QLatin1String("model.moe.top_k: 300 must be between 1 and experts 256")),
                 qPrintable(dialog.messages()->text()));
        QVERIFY(!save->isEnabled());
        // Multi-token prediction: DeepSeek-V3's one depth and its weight are controls; its module's
        // 11,610,068,224 parameters (counted by hand in tst_store_catalog) are shown
        // outside the 671B; two depths count it twice; none turns the weight off.
        {
            ModelDialog mtp(deepseek);
            auto* weight = mtp.findChild<QDoubleSpinBox*>(QStringLiteral("mtp.loss_scale"));
            QVERIFY(weight && weight->isEnabled());
            QCOMPARE(mtp.field("mtp.layers")->value(), 1);
            QCOMPARE(weight->value(), deepseek.mtp.loss_scale);
            QVERIFY2(mtp.parameters()->text().contains(QStringLiteral("+ 11,610,068,224 in multi-token prediction")),
                     qPrintable(mtp.parameters()->text()));
            mtp.field("mtp.layers")->setValue(2);
            QCOMPARE(qint64(parameterBreakdown(mtp.model()).mtp), qint64(2) * 11'610'068'224);
            QCOMPARE(qint64(parameterCount(mtp.model())), qint64(parameterCount(deepseek)));
            weight->setValue(0.3);
            QCOMPARE(mtp.model().mtp.loss_scale, 0.3);
            weight->setValue(0);
            QVERIFY2(mtp.messages()->text().contains(QLatin1String("mtp.loss_scale")), qPrintable(mtp.messages()->text()));
            mtp.field("mtp.layers")->setValue(0);
            QVERIFY(!mtp.model().mtp.enabled() && !weight->isEnabled());
            QVERIFY(!mtp.parameters()->text().contains(QLatin1String("multi-token")));
        }
        // With no experts the router's settings are off.
        dialog.field("moe.experts")->setValue(0);
        dialog.field("moe.top_k")->setValue(0);
        QVERIFY(!router->isEnabled() && !capacity->isEnabled());

        // The catalog table's Active column: what a token uses.
        window_->pages()->setCurrentWidget(catalogPage());
        QTableWidget* models = table(QStringLiteral("Models"));
        const int active = column(models, QStringLiteral("Active"));
        QVERIFY(active >= 0);
        for (const char* name : {"mixtral-8x7b", "qwen3-235b-a22b", "llama-3-8b"}) {
            const int row = rowOf(models, QLatin1String(name));
            QVERIFY2(row >= 0, name);
            QCOMPARE(models->item(row, active)->text(),
                     QString::fromStdString(formatCount(parameterBreakdown(catalog_->model(name)).active_per_token)));
        }

        // The plans table of the default (dense) problem hides ep and etp.
        QTRY_VERIFY_WITH_TIMEOUT(window_->lastResult() && window_->lastResult()->best(), 120'000);
        QTableView* plans = window_->plansPage()->table();
        QVERIFY(!window_->plansPage()->findChild<PlansModel*>()->hasExperts());
        QVERIFY(plans->isColumnHidden(PlansModel::Ep) && plans->isColumnHidden(PlansModel::Etp));
        QVERIFY(!plans->isColumnHidden(PlansModel::Tp));
    }

    // A catalog change (a model added) keeps the node types the user chose to compare.
    void compareSelectionSurvivesACatalogChange()
    {
        SetupPage* setup = window_->setupPage();
        QListWidget* compare = setup->findChild<QListWidget*>();
        QVERIFY(compare);
        compare->clearSelection();
        for (int i = 0; i < compare->count(); ++i)
            if (compare->item(i)->text() == QLatin1String("gaudi3-8"))
                compare->item(i)->setSelected(true);
        setup->reloadCatalog();
        QCOMPARE(compare->selectedItems().size(), qsizetype(1));
        QCOMPARE(compare->selectedItems().front()->text(), QStringLiteral("gaudi3-8"));
    }

    // The run history: double-click (or Enter on) a row opens that stored run, its metrics, error
    // chart and loss curve; two rows selected are compared side by side, metric by metric.
    void historyRowsOpenAndCompare()
    {
        const ValidationResult single = runSuiteCase("single device", 3), zero1 = runSuiteCase("ZeRO-1", 4),
                               tp = runSuiteCase("tensor parallel", 3);
        for (const ValidationResult* r : {&single, &zero1, &tp}) {
            QVERIFY2(r->error.empty() && !r->metrics.empty(), r->error.c_str());
            QVERIFY(!r->measurement.steps.empty());
        }
        const int a = storeRun({single}, "single device"), b = storeRun({zero1}, "ZeRO-1"),
                  suite = storeRun({single, tp}, "two cases");
        ValidatePage page(*store_);
        page.resize(1280, 800);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        QTableWidget* history = page.historyTable();
        QTableWidget* metrics = page.metricsTable();
        const int rowA = historyRow(history, a), rowB = historyRow(history, b);
        QVERIFY(rowA >= 0 && rowB >= 0 && historyRow(history, suite) >= 0);
        auto cellCenter = [&](int row) { return history->visualRect(history->model()->index(row, 1)).center(); };
        auto errorBars = [&] {
            const auto* view = qobject_cast<QChartView*>(page.charts().at(1));
            const auto bars = view->chart()->series();
            return bars.isEmpty() ? QList<QBarSet*>() : qobject_cast<QAbstractBarSeries*>(bars.front())->barSets();
        };
        auto lossCurves = [&] {
            QList<QList<QPointF>> curves;
            for (QAbstractSeries* s : qobject_cast<QChartView*>(page.charts().at(0))->chart()->series())
                curves << qobject_cast<QXYSeries*>(s)->points();
            return curves;
        };

        // Double-click run A: its results, as they were measured.
        QTest::mouseClick(history->viewport(), Qt::LeftButton, {}, cellCenter(rowA));
        QTest::mouseDClick(history->viewport(), Qt::LeftButton, {}, cellCenter(rowA));
        QCOMPARE(page.shownRuns(), QVector<int>{a});
        QCOMPARE(metrics->rowCount(), int(single.metrics.size()));
        const MetricComparison* step = single.metric("device_step_time_s");
        QVERIFY(step);
        QCOMPARE(cell(metrics, QStringLiteral("device_step_time_s"), QStringLiteral("measured")),
                 QString::fromStdString(formatDuration(step->measured)));
        QCOMPARE(cell(metrics, QStringLiteral("device_step_time_s"), QStringLiteral("error")),
                 QStringLiteral("%1%").arg(100 * step->rel_error, 0, 'f', 1));
        // A metric stored without a prediction (not compared) shows a dash, not "0 s".
        if (const MetricComparison* wall = single.metric("wall_step_time_s"); wall && !wall->compared)
            QCOMPARE(cell(metrics, QStringLiteral("wall_step_time_s"), QStringLiteral("predicted")), QStringLiteral("—"));
        QList<QBarSet*> bars = errorBars();
        QCOMPARE(bars.size(), qsizetype(1));
        // (A horizontal chart's categories read top to bottom: Qt's last bar is the first metric.)
        int charted = 0;
        const qsizetype drawn = bars.front()->count();
        for (const std::string& m : validationTableMetrics())
            if (const MetricComparison* c = single.metric(m); c && std::isfinite(c->rel_error))
                QCOMPARE(bars.front()->at(drawn - 1 - charted++), 100 * std::fabs(c->rel_error));
        QCOMPARE(bars.front()->count(), charted);
        QList<QList<QPointF>> curves = lossCurves();
        QCOMPARE(curves.size(), qsizetype(1));
        QCOMPARE(curves.front().size(), qsizetype(single.measurement.steps.size()));
        QCOMPARE(curves.front().back().y(), single.measurement.steps.back().loss);
        QVERIFY2(page.caseLabel()->text().contains(QStringLiteral("run %1").arg(a)), qPrintable(page.caseLabel()->text()));
        QVERIFY2(page.status()->text().contains(QStringLiteral("stored run %1").arg(a)), qPrintable(page.status()->text()));

        // Enter on run B opens it instead.
        history->setFocus();
        history->selectRow(rowB);
        QTest::keyClick(history, Qt::Key_Return);
        QCOMPARE(page.shownRuns(), QVector<int>{b});
        QCOMPARE(cell(metrics, QStringLiteral("flops"), QStringLiteral("measured")),
                 QString::fromStdString(formatSi(zero1.metric("flops")->measured, "FLOP")));

        // Click run B, Ctrl+click run A: both, side by side (the older run first).
        QTest::mouseClick(history->viewport(), Qt::LeftButton, {}, cellCenter(rowB));
        QTest::mouseClick(history->viewport(), Qt::LeftButton, Qt::ControlModifier, cellCenter(rowA));
        QCOMPARE(history->selectionModel()->selectedRows().size(), qsizetype(2));
        QCOMPARE(page.shownRuns(), (QVector<int>{a, b}));
        QCOMPARE(column(metrics, QStringLiteral("case")), -1);  // one case each: no case column
        QCOMPARE(metrics->rowCount(), int(std::min(single.metrics.size(), zero1.metrics.size())));
        const MetricComparison* optimizerA = single.metric("optimizer_bytes");
        const MetricComparison* optimizerB = zero1.metric("optimizer_bytes");
        QVERIFY(optimizerA && optimizerB && optimizerA->measured > optimizerB->measured);  // ZeRO-1 shards it
        QCOMPARE(cell(metrics, QStringLiteral("optimizer_bytes"), QStringLiteral("measured (run %1)").arg(a)),
                 QString::fromStdString(formatBytes(optimizerA->measured)));
        QCOMPARE(cell(metrics, QStringLiteral("optimizer_bytes"), QStringLiteral("measured (run %1)").arg(b)),
                 QString::fromStdString(formatBytes(optimizerB->measured)));
        const double change = 100 * (std::fabs(zero1.metric("device_step_time_s")->rel_error) - std::fabs(step->rel_error));
        QVERIFY(cell(metrics, QStringLiteral("device_step_time_s"), QStringLiteral("|error| change"))
                    .startsWith(QString::number(change, 'f', 1).prepend(change >= 0 ? QStringLiteral("+") : QString())
                                    .replace(QStringLiteral("+-"), QStringLiteral("-"))));
        bars = errorBars();
        QCOMPARE(bars.size(), qsizetype(2));
        QCOMPARE(bars[0]->label(), QStringLiteral("run %1").arg(a));
        QCOMPARE(bars[1]->at(bars[1]->count() - 1), 100 * std::fabs(zero1.metric(validationTableMetrics().front())->rel_error));
        curves = lossCurves();
        QCOMPARE(curves.size(), qsizetype(2));
        QCOMPARE(curves[1].size(), qsizetype(zero1.measurement.steps.size()));
        QCOMPARE(curves[1].front().y(), zero1.measurement.steps.front().loss);

        // A run of two cases against a run of one: the shared case, the other named.
        QVERIFY(page.compareRuns(suite, a));
        QCOMPARE(page.shownRuns(), (QVector<int>{a, suite}));
        QVERIFY(column(metrics, QStringLiteral("case")) >= 0);
        QCOMPARE(metrics->rowCount(), int(single.metrics.size()));
        QVERIFY2(page.status()->text().contains(QStringLiteral("tensor parallel (run %1 only)").arg(suite)),
                 qPrintable(page.status()->text()));
        QVERIFY(page.openRun(suite));
        QCOMPARE(metrics->rowCount(), int(single.metrics.size() + tp.metrics.size()));
        curves = lossCurves();  // one per case
        QCOMPARE(curves.size(), qsizetype(2));
        QCOMPARE(curves[1].back().y(), tp.measurement.steps.back().loss);

        // A run that is gone says so, in red.
        QVERIFY(!page.openRun(1'000'000));
        QVERIFY(page.status()->styleSheet().contains(QLatin1String("c0392b")));
    }

    void screenshots()
    {
        // The default problem is searched first, as `shardscope --screenshots` does.
        QTRY_VERIFY_WITH_TIMEOUT(window_->lastResult() != nullptr, 120'000);
        const QString shots = dir_->filePath(QStringLiteral("shots"));
        const QStringList files = window_->saveScreenshots(shots);
        const QStringList pagesExpected{"setup.png", "plans.png", "plan-details.png", "explore.png", "validate.png",
                                        "catalog-models.png", "catalog-chips.png", "catalog-node-types.png"};
        const QStringList chartsExpected{"chart-memory.png", "chart-step-time.png", "chart-pipeline-timeline.png",
                                         "chart-device-mesh.png", "chart-pareto-step-memory.png",
                                         "chart-pareto-time-cost.png", "chart-scaling.png", "chart-node-types.png",
                                         "chart-validation-loss.png", "chart-validation-errors.png",
                                         "dialog-model.png"};  // (the model dialog of the setup's model)
        QCOMPARE(files.size(), pagesExpected.size() + chartsExpected.size());
        const QSize windowSize = window_->size() * window_->devicePixelRatio();
        QList<QImage> pageImages;
        QSet<QString> names;
        for (const QString& f : files) {
            QVERIFY2(QFileInfo(f).absolutePath() == QDir(shots).absolutePath(), qPrintable(f));
            const QString name = QFileInfo(f).fileName();
            names.insert(name);
            QImage image;
            QVERIFY2(image.load(f, "PNG"), qPrintable(f));
            QVERIFY2(!image.isNull(), qPrintable(f));
            if (pagesExpected.contains(name)) {
                QCOMPARE(image.size(), windowSize);
                pageImages << image.convertToFormat(QImage::Format_ARGB32);
            } else {
                QVERIFY2(image.width() >= 200 && image.height() >= 120, qPrintable(f));
            }
            // Not a single uniform colour: sample a 16 x 16 grid.
            QSet<QRgb> colours;
            for (int i = 0; i < 16; ++i)
                for (int j = 0; j < 16; ++j)
                    colours.insert(image.pixel((image.width() - 1) * i / 15, (image.height() - 1) * j / 15));
            QVERIFY2(colours.size() > 1, qPrintable(f + QStringLiteral(" is one uniform colour")));
        }
        for (const QString& n : pagesExpected + chartsExpected)
            QVERIFY2(names.contains(n), qPrintable(n));
        // Each page really was switched to: no two page screenshots are identical.
        for (int a = 0; a < pageImages.size(); ++a)
            for (int b = a + 1; b < pageImages.size(); ++b)
                QVERIFY2(pageImages[a] != pageImages[b], qPrintable(QString("pages %1 and %2 look the same").arg(a).arg(b)));
    }
};

QTEST_MAIN(TstAppGui)
#include "tst_app_gui.moc"
