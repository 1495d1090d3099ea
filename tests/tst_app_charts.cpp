// Explore's sweep charts on a real sweep (gpt3-175b on trn1.32xlarge, the GUI's example
// problem): the time-vs-cost chart marks and labels every node count, and the scaling chart's
// perfect-scaling line starts at the smallest size with a plan and says so; point labels never
// overlap each other or a marker and follow zoom.
#include "ChartAdapters.h"
#include "ChartData.h"
#include "DeviceMeshWidget.h"
#include "EntrySummary.h"
#include "PlanFigures.h"
#include "ProblemOverview.h"
#include "PlanRequest.h"
#include "PlansModel.h"
#include "PointLabels.h"
#include "Store.h"
#include "Sweep.h"
#include "Units.h"

#include <QChart>
#include <QAbstractBarSeries>
#include <QBarSet>
#include <QChartView>
#include <QGraphicsSimpleTextItem>
#include <QLegendMarker>
#include <QScatterSeries>
#include <QStandardPaths>
#include <QAbstractItemModelTester>
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

    // A problem on `nodes` p5.48xlarge at sequence 4096, from the catalog.
    PlanRequest p5Request(const char* model, int nodes, int batch) const
    {
        PlanRequest request;
        request.problem.model = store_->specs().model(model);
        request.problem.cluster.node = store_->specs().node("p5.48xlarge");
        request.problem.cluster.nodes = nodes;
        request.problem.training.global_batch = batch;
        request.problem.training.seq_len = 4096;
        return request;
    }

    // `text` with dp filling the request's devices; the errors of parsing it, if any, in `errors`.
    static Layout resolvedLayout(const PlanRequest& request, const char* text, FieldErrors& errors)
    {
        Layout layout = parseLayout(text, errors);
        resolveDataParallel(layout, request.problem.cluster.devices(), errors);
        return layout;
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

    // (issue 15) Activations offloaded to the host: named in the plan's summary line and in the
    // figures' names, outside the device's memory (which the memory bar draws).
    void offloadedActivationsInTheSummary()
    {
        const PlanRequest request = p5Request("llama-2-7b", 1, 64);
        FieldErrors errors;
        Layout layout = resolvedLayout(request, "tp=2,mb=1,offload_activations=4", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        const Prediction p = pricePlan(request, layout).prediction;
        QVERIFY(p.memory_bytes.host_activations > 0);
        const QString line = predictionSummary(request.problem, p);
        QVERIFY2(line.contains(QStringLiteral("(+ %1 of activations in host memory)")
                                   .arg(QString::fromStdString(formatBytes(p.memory_bytes.host_activations)))),
                 qPrintable(line));
        layout.offload_activations = 0;
        QVERIFY(!predictionSummary(request.problem, pricePlan(request, layout).prediction).contains("host memory"));
    }

    // (issue 16) A mixtral-8x7b plan with expert parallelism, priced, then given by hand the MoE
    // figures the cost model fills (experts' memory, the all-to-all): the plans table's ep and
    // etp columns, the memory bar's experts, the step-time bar's all-to-all, the figures' names
    // and the plan's expert line.
    void mixtureOfExpertsPlanFigures()
    {
        const PlanRequest request = p5Request("mixtral-8x7b", 2, 256);
        FieldErrors errors;
        Layout layout = resolvedLayout(request, "tp=2,sp=on,pp=1,ep=4,etp=1,zero=1,mb=1", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        errors = validate(layout, request.problem.model, request.problem.cluster, request.problem.training);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QCOMPARE(layout.dp, 8);
        QCOMPARE(layout.expertDataParallel(), 4);  // tp x cp x dp / (ep x etp) = 16 / 4
        PricedPlan priced = pricePlan(request, layout);
        Prediction p = priced.prediction;
        QVERIFY(p.step_time_s > 0 && p.memory_bytes.weights > 0);
        // The MoE fields by hand: 60% of the model states are the experts', an all-to-all of 5%
        // of the step exposed and 3% hidden (wide enough to draw).
        const double states = p.memory_bytes.weights + p.memory_bytes.gradients + p.memory_bytes.optimizer;
        p.memory_bytes.experts = 0.6 * states;
        const double exposed = 0.05 * p.step_time_s, hidden = 0.03 * p.step_time_s;
        p.time_s.ep_comm = exposed;
        p.time_s.hidden.ep_comm = hidden;
        p.step_time_s = p.time_s.sum();

        // The plans table: ep and etp columns; etp 0 in the layout reads as tp.
        Plan plan{layout, p, {}, {}};
        Layout asTp = layout;
        asTp.etp = 0;
        Plan second{asTp, p, {}, {}};
        PlansModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setPlans(request.problem, {plan, second});
        QVERIFY(model.hasExperts());
        QCOMPARE(model.headerData(PlansModel::Ep, Qt::Horizontal, Qt::DisplayRole).toString(), QStringLiteral("ep"));
        QCOMPARE(model.headerData(PlansModel::Etp, Qt::Horizontal, Qt::DisplayRole).toString(), QStringLiteral("etp"));
        QVERIFY(model.headerData(PlansModel::Ep, Qt::Horizontal, Qt::ToolTipRole).toString().contains(
            QLatin1String("--expert-model-parallel-size")));
        QCOMPARE(model.index(0, PlansModel::Ep).data().toInt(), 4);
        QCOMPARE(model.index(0, PlansModel::Etp).data().toInt(), 1);
        QCOMPARE(model.index(1, PlansModel::Etp).data().toInt(), 2);  // as tp
        QCOMPARE(model.index(0, PlansModel::Tp).data().toInt(), 2);
        Problem dense = request.problem;
        dense.model = store_->specs().model("llama-3-8b");
        model.setPlans(dense, {});
        QVERIFY(!model.hasExperts());

        // The memory chart: the device's bar as before, and a second, hatched bar of the experts'
        // share of the model states.
        constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
        const StackedBarsData memory = memoryChartData(p);
        QCOMPARE(memory.categories, (QStringList{"all", "MoE"}));
        QCOMPARE(memory.sets.size(), 7);
        QCOMPARE(memory.sets[6].name, QStringLiteral("routed experts, of weights + gradients + optimizer"));
        QCOMPARE(memory.sets[6].values, (QVector<double>{0.0, 0.6 * states / GiB}));
        QVERIFY(memory.sets[6].overlapped && !memory.sets[6].in_legend);
        double device = 0;
        for (int i = 0; i < 6; ++i) {
            QCOMPARE(memory.sets[i].values.size(), 2);
            QCOMPARE(memory.sets[i].values[1], 0.0);
            QVERIFY(!memory.sets[i].overlapped);
            device += memory.sets[i].values[0];
        }
        QCOMPARE(device, p.memory_bytes.total() / GiB);  // the experts are not counted twice
        // Drawn: hatched, out of the crowded legend.
        std::unique_ptr<QChartView> memoryView(makeStackedBarChart(memory, nullptr));
        QStringList legend;
        for (QLegendMarker* marker : memoryView->chart()->legend()->markers())
            if (marker->isVisible())
                legend << marker->label();
        QCOMPARE(legend, (QStringList{"weights", "gradients", "optimizer", "activations", "buffers", "reserve"}));
        const QList<QBarSet*> memorySets = qobject_cast<QAbstractBarSeries*>(memoryView->chart()->series().front())->barSets();
        QCOMPARE(memorySets.size(), 7);
        QCOMPARE(memorySets[6]->brush().style(), Qt::BDiagPattern);
        QCOMPARE(memorySets[6]->at(1), 0.6 * states / GiB);
        // A prediction without an experts' share (a dense model's) keeps its single bar.
        Prediction plain = priced.prediction;
        plain.memory_bytes.experts = 0;
        QCOMPARE(memoryChartData(plain).categories.size(), 1);
        QCOMPARE(memoryChartData(plain).sets.size(), 6);

        // The step-time bar: the all-to-all on the critical path and in the hidden lane, in one colour.
        const StackedBarsData time = stepTimeChartData(p);
        const auto ep = std::find_if(time.sets.begin(), time.sets.end(),
                                     [](const BarSet& s) { return s.name == QLatin1String("EP all-to-all"); });
        const auto epHidden = std::find_if(time.sets.begin(), time.sets.end(),
                                           [](const BarSet& s) { return s.name == QLatin1String("EP all-to-all, hidden"); });
        QVERIFY(ep != time.sets.end() && epHidden != time.sets.end());
        QCOMPARE(ep->values.front(), exposed);
        QCOMPARE(epHidden->values, (QVector<double>{0.0, hidden}));
        QVERIFY(epHidden->overlapped);
        QVERIFY(!epHidden->in_legend);  // its exposed part is drawn: the same colour, hatched, names it
        QCOMPARE(ep->color, epHidden->color);
        QCOMPARE(time.categories, (QStringList{"critical path", "hidden behind compute"}));
        double drawn = 0;
        for (const StepTimePart& part : stepTimeParts(p.time_s))
            drawn += part.exposed;
        QCOMPARE(drawn, p.step_time_s);  // every part of the step is a part of the bar

        // The figures' names, as the terms tree and the report show them.
        QCOMPARE(figureName("time_s.ep_comm"),
                 QStringLiteral("Step time: expert-parallel all-to-all (token dispatch and combine)"));
        QCOMPARE(figureName("memory_bytes.experts"),
                 QStringLiteral("Memory: routed experts (of weights, gradients and optimizer states)"));
        QCOMPARE(figureName("memory_bytes.host_activations"),
                 QStringLiteral("Host memory: offloaded activations (not in the device's total)"));

        // The plan's expert line (Plan details): 8 experts over ep 4, etp 1, edp 4, with the figures.
        const QString line = expertSummary(request.problem, layout, p);
        QVERIFY2(line.startsWith(QLatin1String("Experts: 8 routed over ep 4 (2 per device), etp 1, expert data parallel 4")),
                 qPrintable(line));
        QVERIFY2(line.contains(QString::fromStdString(formatBytes(0.6 * states))), qPrintable(line));
        QVERIFY2(line.contains(QStringLiteral("all-to-all %1 per step on the critical path, %2 hidden")
                                   .arg(QString::fromStdString(formatDuration(exposed)),
                                        QString::fromStdString(formatDuration(hidden)))),
                 qPrintable(line));
        QVERIFY(expertSummary(dense, Layout{}, plain).isEmpty());
        // The pipeline timeline spreads the all-to-all over the micro-batches like tp and cp.
        Prediction noEp = p;
        noEp.time_s.ep_comm = 0;
        QVERIFY(pipelineTimelineFor(layout, p).makespan_s > pipelineTimelineFor(layout, noEp).makespan_s);

        // The device mesh names the expert groups in Megatron's tp-ep-dp order: ep 4 over ranks
        // 0-3 of one node, the expert data parallel group of 4 at stride 4 over both nodes.
        DeviceMeshWidget mesh;
        mesh.setMesh(request.problem, layout);
        const QStringList placement = mesh.placementLines();
        QVERIFY2(placement.contains(QStringLiteral("ep groups of 4: inside one scale-up domain: switch link")),
                 qPrintable(placement.join(QLatin1Char('|'))));
        QVERIFY2(placement.contains(QStringLiteral("edp groups of 4: across 2 scale-up domains (2 per domain): node network")),
                 qPrintable(placement.join(QLatin1Char('|'))));
        QVERIFY(!placement.join(QLatin1Char('|')).contains(QLatin1String("etp groups")));  // etp 1: no groups
        Layout denseLayout = layout;
        denseLayout.ep = 1;
        denseLayout.etp = 0;
        mesh.setMesh(dense, denseLayout);
        QCOMPARE(mesh.placementLines().size(), 2);  // tp and dp only
        QVERIFY(!mesh.placementLines().join(QLatin1Char('|')).contains(QLatin1String("ep groups")));

        // The problem overview compares the FLOPs per token with 2 x the active parameters, not
        // the total (issue 16's "-85.2% above 2P").
        Problem overviewed = request.problem;
        overviewed.training.seq_len = 2048;
        const double flops = double(forwardFlopsPerToken(overviewed.model, 2048));
        const double activeP = double(parameterBreakdown(overviewed.model).active_per_token);
        const QString overview = QString::fromStdString(problemOverview(overviewed));
        QVERIFY2(overview.contains(QStringLiteral("(%1% above 2P, P = 12,879,925,248 active parameters: attention "
                                                  "scores and logits)")
                                       .arg(100 * (flops / (2 * activeP) - 1), 0, 'f', 1)),
                 qPrintable(overview));
        QVERIFY(flops > 2 * activeP);

        // The model summary: the parameters a token uses.
        const ModelSpec mixtral = store_->specs().model("mixtral-8x7b");
        QVERIFY2(QString::fromStdString(summarize(mixtral)).endsWith(
                     QLatin1String("46,702,792,704 parameters (12,879,925,248 active)")),
                 summarize(mixtral).c_str());
        QVERIFY(QString::fromStdString(summarize(store_->specs().model("llama-3-8b"))).endsWith(QLatin1String(" parameters")));
    }
};

QTEST_MAIN(TstAppCharts)
#include "tst_app_charts.moc"
