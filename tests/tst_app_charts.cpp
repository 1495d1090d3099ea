// Explore's sweep charts on a real sweep (gpt3-175b on trn1.32xlarge, the GUI's example
// problem): the time-vs-cost chart marks and labels every node count, and the scaling chart's
// perfect-scaling line starts at the smallest size with a plan and says so; point labels never
// overlap each other or a marker and follow zoom.
#include "ChartAdapters.h"
#include "ChartData.h"
#include "PointLabels.h"
#include "Store.h"
#include "Sweep.h"
#include "Units.h"

#include <QChart>
#include <QChartView>
#include <QGraphicsSimpleTextItem>
#include <QLegendMarker>
#include <QScatterSeries>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <memory>

using namespace shardscope;

namespace {

// The point labels of a chart, in the order they were added.
QList<QGraphicsSimpleTextItem*> pointLabels(QChart* chart)
{
    QList<QGraphicsSimpleTextItem*> out;
    for (QGraphicsItem* item : chart->childItems())
        if (item->data(0).toString() == QLatin1String(kPointLabelName))
            out << static_cast<QGraphicsSimpleTextItem*>(item);
    return out;
}

QRectF sceneBox(const QGraphicsItem* item) { return item->mapRectToParent(item->boundingRect()); }

// Every visible label inside the plot, clear of the other labels and of every marker.
void checkLabelsClear(QChart* chart)
{
    const QList<QGraphicsSimpleTextItem*> labels = pointLabels(chart);
    QList<QRectF> markers;
    for (QAbstractSeries* s : chart->series())
        if (auto* scatter = qobject_cast<QScatterSeries*>(s)) {
            const double r = scatter->markerSize() / 2;
            for (qsizetype i = 0; i < scatter->count(); ++i) {
                const QPointF c = chart->mapToPosition(scatter->at(i), scatter);
                if (chart->plotArea().contains(c))
                    markers << QRectF(c.x() - r, c.y() - r, 2 * r, 2 * r);
            }
        }
    for (qsizetype a = 0; a < labels.size(); ++a) {
        if (!labels[a]->isVisible())
            continue;
        const QRectF box = sceneBox(labels[a]);
        QVERIFY2(chart->plotArea().contains(box), qPrintable(labels[a]->text()));
        for (const QRectF& m : markers)
            QVERIFY2(!box.intersects(m), qPrintable(labels[a]->text() + QStringLiteral(" covers a marker")));
        for (qsizetype b = a + 1; b < labels.size(); ++b)
            QVERIFY2(!labels[b]->isVisible() || !box.intersects(sceneBox(labels[b])),
                     qPrintable(labels[a]->text() + QStringLiteral(" overlaps ") + labels[b]->text()));
    }
}

} // namespace

class TstAppCharts : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;
    std::unique_ptr<Store> store_;
    SweepResult sweep_;  // 4, 8, 16, 32 nodes; 4 does not fit

    // The label drawn for series `s`'s point nearest the data point (x, y): its distance in pixels.
    static double labelDistance(QChart* chart, QAbstractSeries* series, const QPointF& point, const QGraphicsItem* label)
    {
        const QPointF at = chart->mapToPosition(point, series);
        const QRectF box = sceneBox(label);
        const double dx = std::max({box.left() - at.x(), 0.0, at.x() - box.right()});
        const double dy = std::max({box.top() - at.y(), 0.0, at.y() - box.bottom()});
        return std::hypot(dx, dy);
    }

private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(dir_.isValid());
        store_ = std::make_unique<Store>(dir_.filePath(QStringLiteral("catalog.sqlite")));
        // The GUI's example problem with its default memory limit (Setup: 0.90 of HBM).
        PlanRequest request;
        request.problem.model = store_->specs().model("gpt3-175b");
        request.problem.cluster.node = store_->specs().node("trn1.32xlarge");
        request.problem.training.global_batch = 1536;
        request.problem.training.seq_len = 2048;
        request.space.max_memory_fraction = 0.9;
        sweep_ = sweepNodes(request, {4, 8, 16, 32});
        QCOMPARE(sweep_.points.size(), size_t(4));
        QVERIFY2(!sweep_.points[0].result.best(), "4 nodes of trn1.32xlarge hold gpt3-175b: pick a smaller count");
        QVERIFY(sweep_.points[1].result.best() && sweep_.points[2].result.best() && sweep_.points[3].result.best());
        QCOMPARE(sweep_.reference, 1);
    }

    // (gui18) Time vs cost: a marker and a label per node count of the sweep, beside its point.
    void timeCostLabelsEveryNodeCount()
    {
        const SweepResult noComparison;  // named: GCC 12 warns, wrongly, about a temporary's maps
        const XYChartData data = timeCostChartData(sweep_, noComparison);
        QCOMPARE(data.series.front().points.size(), qsizetype(3));  // 8, 16, 32: priced plans
        QStringList tags;
        for (const XYPoint& p : data.series.front().points)
            tags << p.tag;
        QCOMPARE(tags, (QStringList{"8 nodes", "16 nodes", "32 nodes"}));
        // Each doubling about halves the time: a log axis spreads the sizes out.
        QVERIFY(data.log_x);
        // The cost says which kind of price it is.
        const std::string kind = sweep_.points[1].problem.cluster.node.price_kind;
        QVERIFY(!kind.empty());
        QCOMPARE(data.title, QStringLiteral("Time vs cost to train, best plans (%1 prices)")
                                 .arg(QString::fromStdString(kind)));
        const Plan& best8 = *sweep_.points[1].result.best();
        QCOMPARE(data.series.front().points.front().label,
                 QStringLiteral("8 x trn1.32xlarge: $%1 %2, %3")
                     .arg(QString::fromStdString(formatCount(std::int64_t(best8.prediction.cost_to_train_usd + 0.5))),
                          QString::fromStdString(kind), QString::fromStdString(toString(best8.layout))));
        SweepResult compared;
        compared.points = {sweep_.points[2]};
        const StackedBarsData days = nodeTypesChartData(compared);
        QVERIFY2(days.categories.front().endsWith(QStringLiteral(" %1)").arg(QString::fromStdString(kind))),
                 qPrintable(days.categories.front()));

        std::unique_ptr<QChartView> view(makeXYChart(data, nullptr));
        view->resize(560, 320);  // a quarter of Explore at 1100x720
        view->show();
        QVERIFY(QTest::qWaitForWindowExposed(view.get()));
        QChart* chart = view->chart();
        // The line has markers: a scatter series over it with the same points, not in the legend.
        QScatterSeries* markers = nullptr;
        for (QAbstractSeries* s : chart->series())
            if (auto* scatter = qobject_cast<QScatterSeries*>(s); scatter && scatter->count() == 3)
                markers = scatter;
        QVERIFY(markers);
        for (QLegendMarker* m : chart->legend()->markers(markers))
            QVERIFY(!m->isVisible());
        const QList<QGraphicsSimpleTextItem*> labels = pointLabels(chart);
        QCOMPARE(labels.size(), qsizetype(3));
        for (qsizetype i = 0; i < labels.size(); ++i) {
            QCOMPARE(labels[i]->text(), tags[i]);
            QVERIFY2(labels[i]->isVisible(), qPrintable(tags[i]));
            const XYPoint& p = data.series.front().points[i];
            const double d = labelDistance(chart, markers, QPointF(p.x, p.y), labels[i]);
            QVERIFY2(d < 2 * labels[i]->boundingRect().height() + 8, qPrintable(tags[i] + QStringLiteral(": %1 px away").arg(d)));
        }
        checkLabelsClear(chart);
        // Zoomed in on the 8-node point, its label follows; the others leave with their points.
        const XYPoint& eight = data.series.front().points[0];
        const QPointF at = chart->mapToPosition(QPointF(eight.x, eight.y), markers);
        chart->zoomIn(QRectF(at - QPointF(60, 40), QSizeF(120, 80)));
        QVERIFY(labels[0]->isVisible());
        QVERIFY(labelDistance(chart, markers, QPointF(eight.x, eight.y), labels[0]) < 2 * labels[0]->boundingRect().height() + 8);
        QVERIFY(!labels[2]->isVisible());
        checkLabelsClear(chart);
    }

    // Crowded points: the labels that find no free place are hidden, the rest overlap nothing.
    void crowdedLabelsNeverOverlap()
    {
        XYChartData d{QStringLiteral("crowded"), QStringLiteral("x"), QStringLiteral("y"), false, 10, {}, {}};
        XYSeriesData s{QStringLiteral("points"), {}, true, false, -1};
        for (int i = 0; i < 40; ++i)
            s.points.push_back({1 + 0.02 * i, 1 + 0.01 * (i % 3), {}, QStringLiteral("point %1").arg(i)});
        d.series = {s};
        std::unique_ptr<QChartView> view(makeXYChart(d, nullptr));
        view->resize(400, 260);
        view->show();
        QVERIFY(QTest::qWaitForWindowExposed(view.get()));
        const QList<QGraphicsSimpleTextItem*> labels = pointLabels(view->chart());
        QCOMPARE(labels.size(), qsizetype(40));
        const auto shown = std::count_if(labels.begin(), labels.end(), [](const QGraphicsItem* l) { return l->isVisible(); });
        QVERIFY2(shown > 0 && shown < 40, qPrintable(QString::number(shown)));
        checkLabelsClear(view->chart());
    }

    // (gui18) Scaling: perfect scaling is drawn from the smallest size with a plan (8 nodes: 4 do
    // not fit) at that size's tokens/s per device, named so; every point says its efficiency.
    void scalingBaselineStartsAtTheSmallestSizeThatFits()
    {
        const XYChartData data = scalingChartData(sweep_);
        QCOMPARE(data.series.size(), qsizetype(2));
        const XYSeriesData& perDevice = data.series[0];
        const XYSeriesData& ideal = data.series[1];
        const SweepPoint& ref = sweep_.points[1];
        const double refPerDevice = ref.result.best()->prediction.tokens_per_s / double(ref.problem.cluster.devices());
        QCOMPARE(ideal.points.size(), qsizetype(3));
        QCOMPARE(ideal.points.front().x, 8.0);
        for (const XYPoint& p : ideal.points)
            QCOMPARE(p.y, refPerDevice);
        QCOMPARE(perDevice.points.front().y, refPerDevice);
        QVERIFY2(ideal.name.startsWith(QLatin1String("perfect scaling from 8 nodes")), qPrintable(ideal.name));
        QVERIFY2(data.x_axis.contains(QLatin1String("no plan at 4: out of memory)")), qPrintable(data.x_axis));
        bool above = false;
        for (qsizetype i = 0; i < perDevice.points.size(); ++i) {
            const double efficiency = 100 * sweep_.points[size_t(i) + 1].scaling_efficiency;
            QCOMPARE(perDevice.points[i].tag, QStringLiteral("%1%").arg(efficiency, 0, 'f', 1));
            above = above || std::round(efficiency * 10) > 1000;
        }
        QCOMPARE(perDevice.points.front().tag, QStringLiteral("100.0%"));
        // A point over 100% is said to be what it is: the line says what memory costs its size
        // (a layout priced that does not fit there is that much faster), or the axis says the
        // sizes above beat it; under 100% everywhere, neither.
        const bool memoryNote = ideal.name.contains(QLatin1String("lost to memory"));
        QCOMPARE(memoryNote || data.x_axis.contains(QLatin1String("over 100%")), above);
        if (memoryNote) {
            double fastestUnfit = 0;
            for (const Plan& p : ref.result.top_infeasible)
                fastestUnfit = std::max(fastestUnfit, p.prediction.tokens_per_s);
            const double cost = 100 * (1 - ref.result.best()->prediction.tokens_per_s / fastestUnfit);
            QCOMPARE(ideal.name, QStringLiteral("perfect scaling from 8 nodes (≥%1% lost to memory)").arg(cost, 0, 'f', 0));
        } else if (!above) {
            QCOMPARE(ideal.name, QStringLiteral("perfect scaling from 8 nodes"));
        }
        // Drawn: one label per point with a plan.
        std::unique_ptr<QChartView> view(makeXYChart(data, nullptr));
        view->resize(560, 320);
        view->show();
        QVERIFY(QTest::qWaitForWindowExposed(view.get()));
        QStringList texts;
        for (const QGraphicsSimpleTextItem* l : pointLabels(view->chart()))
            texts << l->text();
        QCOMPARE(texts.size(), qsizetype(3));
        QCOMPARE(texts.front(), QStringLiteral("100.0%"));
        checkLabelsClear(view->chart());
    }

    // Without a size that fits there is no line to draw: the chart says so instead.
    void scalingWithoutAPlanSaysSo()
    {
        SweepResult none;
        none.points = {sweep_.points[0]};
        const XYChartData data = scalingChartData(none);
        QVERIFY(data.series[0].points.isEmpty() && data.series[1].points.isEmpty());
        QCOMPARE(data.series[1].name, QStringLiteral("perfect scaling"));
        QVERIFY(!data.empty_text.isEmpty());
    }
};

QTEST_MAIN(TstAppCharts)
#include "tst_app_charts.moc"
