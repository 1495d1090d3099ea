// The cost model against the published runs of calibration-cases.md, per chip family:
// A100 (Megatron-LM and DeepSpeed, 2021), Trainium (NeuronX) and H100 (Megatron-Core r0.8.0,
// with the overlap options its README states) rows within 25% each and their summary goals
// (median |error| <= 8%, worst <= 20%: 2.7%/12.7%, 7.7%/10.3%, 5.1%/19.2% when written); the
// shipped efficiency terms are the least-squares optimum on these 38 dense rows: refitting from
// them does not improve the fit. The MoE rows set the experts' two terms alone.
#include "BuiltinSpecs.h"
#include "Calibration.h"
#include "CostModel.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <QTest>

#include <algorithm>
#include <cmath>

using namespace shardscope;

class TstPlannerCalibration : public QObject {
    Q_OBJECT
    std::vector<CalibrationCase> cases_;
    std::vector<CalibrationCase> fitted_;  // the rows the shipped terms were fitted on

    // A row the shipped terms were fitted without (its left_out_of_fit says why; calibrate --fit
    // honours it). None since the Megatron-Core r0.8.0 H100 rows took their micro-batch as tuned
    // (their "tuned" block): at mb 1 the 32B row's fp32 gradient reduce-scatter could not hide
    // behind one micro-batch's backward (-31%); at the fastest micro-batch it is +2%.
    static bool knownGap(const CalibrationCase& c) { return !c.left_out_of_fit.empty(); }
    static bool shippedFit(const CalibrationCase& c) { return !c.problem.model.moe.enabled() && !knownGap(c); }
    // The Megatron-Bridge MoE rows (issue 16): the experts' two terms are fitted on them.
    static bool moeRow(const CalibrationCase& c) { return c.problem.model.moe.enabled(); }
    // (The 26.02 Qwen3-30B-A3B H100 row, pp 2 x v 12 over 48 layers with DeepEP and the recipe's
    // overlapped dispatch: +63%, +43% before when priced as a plain alltoall without overlap; its
    // dispatch is now off the critical path, and what the model misses there is elsewhere: one of
    // the issues left, named here rather than hidden under a wider tolerance for every row.)
    static bool knownOutlier(const CalibrationCase& c) { return c.id == "bridge-26.02-qwen3-30b-a3b-h100-16"; }
    static double tolerance(const CalibrationCase& c)
    {
        return knownOutlier(c) ? 0.7 : moeRow(c) ? 0.5 : knownGap(c) ? 0.35 : 0.25;
    }

private slots:
    void initTestCase()
    {
        cases_ = builtinCalibrationCases();
        // 10 + 12 Megatron-LM rows (A100), 7 Trainium configurations, 9 Megatron-Core rows (H100),
        // 14 Megatron-Bridge MoE rows (H100 and B200; the two Qwen3-235B-A22B H100 rows with the
        // embedding and the loss counted in the pipeline split)
        QCOMPARE(cases_.size(), size_t(52));
        QCOMPARE(size_t(std::count_if(cases_.begin(), cases_.end(), moeRow)), size_t(14));
        for (const CalibrationCase& c : cases_)
            if (shippedFit(c))
                fitted_.push_back(c);
        QCOMPARE(fitted_.size(), size_t(38));  // every dense row
        QCOMPARE(size_t(std::count_if(cases_.begin(), cases_.end(), knownGap)), size_t(0));
        // The nine Megatron-Core rows state no micro-batch: each is predicted at its fastest.
        QCOMPARE(size_t(std::count_if(cases_.begin(), cases_.end(),
                                      [](const CalibrationCase& c) { return !c.tuned_micro_batches.empty(); })),
                 size_t(9));
        QCOMPARE(size_t(std::count_if(cases_.begin(), cases_.end(),
                                      [](const CalibrationCase& c) { return c.family == "h100" && !moeRow(c); })),
                 size_t(9));
    }

    // Each published run, predicted within its family's tolerance.
    void publishedRun_data()
    {
        QTest::addColumn<int>("index");
        const auto cases = builtinCalibrationCases();
        for (size_t i = 0; i < cases.size(); ++i)
            QTest::newRow(cases[i].id.c_str()) << int(i);
    }
    void publishedRun()
    {
        QFETCH(int, index);
        const CalibrationCase& c = cases_[size_t(index)];
        bool feasible = false;
        const double predicted = predictMetric(c, defaultCostModelParams(), &feasible);
        const double error = predicted / c.measured - 1;
        if (knownGap(c))
            QVERIFY2(error < 0, c.id.c_str());
        QVERIFY2(std::fabs(error) <= tolerance(c), qPrintable(QString("%1: measured %2, predicted %3 (%4%)")
                                                          .arg(c.id.c_str())
                                                          .arg(c.measured)
                                                          .arg(predicted)
                                                          .arg(100 * error, 0, 'f', 1)));
        // These runs happened: the model must find them feasible. (The MXFP8 row at mb 4, 190.3 GiB
        // before the recipe's 1-byte linear inputs and MXFP8 weights, 176.8 GiB after with the reserve,
        // fits: B200's capacity is its 180 GiB, not 180e9 bytes = 167.6 GiB. The two rows whose
        // recipes recompute named modules fit with them: DeepSeek-V3 on 256 B200 186.2 GiB with
        // selective alone, 156.8 GiB with mla_up_proj; GPT-OSS-120B at ep 8 192.2 GiB, 176.9 GiB with
        // layernorm + moe_act. The 26.04.01 DeepSeek-V3 row, pp 8 x v 2 with its 22 in-flight chunks
        // of 4 layers on rank 1, was "out of memory" at 190.7 GiB while the experts' outputs were
        // kept for the combine's weight gradient; with the weights applied in the experts'
        // activation, as Megatron-LM does since 2659630721, 152.2 GiB.)
        QVERIFY2(feasible, c.id.c_str());
    }

    void summaryGoals()
    {
        std::vector<CalibrationCase> dense, moe;
        for (const CalibrationCase& c : cases_)
            if (!knownGap(c))  // (held to its own bound in publishedRun)
                (moeRow(c) ? moe : dense).push_back(c);
        const std::vector<CaseResult> results = evaluateCases(dense, defaultCostModelParams());
        const auto families = summarizeByFamily(results);
        QCOMPARE(families.size(), size_t(3));
        for (const auto& [family, s] : families) {
            qInfo("%s: median |error| %.1f%%, worst %.1f%%, rms log error %.3f", family.c_str(), 100 * s.median_abs,
                  100 * s.worst_abs, s.rms_log);
            QVERIFY2(s.median_abs <= 0.08, family.c_str());
            QVERIFY2(s.worst_abs <= 0.20, family.c_str());
        }
        const ErrorSummary fitted = summarize(evaluateCases(fitted_, defaultCostModelParams()));
        QVERIFY(fitted.median_abs <= 0.06 && fitted.worst_abs <= 0.20);
        const ErrorSummary experts = summarize(evaluateCases(moe, defaultCostModelParams()));
        qInfo("MoE rows: median |error| %.1f%%, worst %.1f%%", 100 * experts.median_abs, 100 * experts.worst_abs);
        QVERIFY(experts.median_abs <= 0.15);
        std::vector<CalibrationCase> usual;  // (the worst bound without the named outlier, above)
        std::copy_if(moe.begin(), moe.end(), std::back_inserter(usual),
                     [](const CalibrationCase& c) { return !knownOutlier(c); });
        QVERIFY(summarize(evaluateCases(usual, defaultCostModelParams())).worst_abs <= 0.5);
    }

    // The experts' two terms are the fit on the MoE rows (the only rows they change).
    void shippedMoeTermsAreTheFit()
    {
        // (All 14, each with its recipe's token dispatcher: cost-model.json "fitted_on".)
        std::vector<CalibrationCase> moe;
        std::copy_if(cases_.begin(), cases_.end(), std::back_inserter(moe), moeRow);
        QCOMPARE(moe.size(), size_t(14));
        const FitResult refit =
            fitCostModel(moe, defaultCostModelParams(), {FitTerm::GroupedGemmEfficiency, FitTerm::MoeLayerOverhead});
        QVERIFY2(refit.after.rms_log >= 0.99 * refit.before.rms_log,
                 qPrintable(QString("refit improves rms log error from %1 to %2: update cost-model.json")
                                .arg(refit.before.rms_log)
                                .arg(refit.after.rms_log)));
        // ... and leave the dense rows as they were.
        CostModelParams none = defaultCostModelParams();
        none.grouped_gemm_efficiency = 1.0;
        none.moe_layer_overhead_s = 0;
        for (const CalibrationCase& c : fitted_)
            QCOMPARE(predictMetric(c, none), predictMetric(c, defaultCostModelParams()));
    }

    void shippedTermsAreTheFit()
    {
        const std::vector<FitTerm> terms{FitTerm::VendorMatmulEfficiency, FitTerm::SustainedMatmulFraction,
                                         FitTerm::ElementwiseFactor, FitTerm::StepOverhead, FitTerm::DpOverlap};
        const FitResult refit = fitCostModel(fitted_, defaultCostModelParams(), terms);
        QVERIFY2(refit.after.rms_log >= 0.99 * refit.before.rms_log,
                 qPrintable(QString("refit improves rms log error from %1 to %2: update cost-model.json")
                                .arg(refit.before.rms_log)
                                .arg(refit.after.rms_log)));
    }

    // A row's "implementation" block: how its framework ran its collectives, where that differs
    // from the defaults (the DeepSpeed-2021 ZeRO-3 rows: per-device NIC rate, their own overlap;
    // Megatron-LM 2021: gradients after the backward). The row is priced with them; a refit of the
    // default terms leaves them alone; an unknown key is refused by name.
    void rowImplementation()
    {
        int deepspeed = 0, megatron2021 = 0;
        for (const CalibrationCase& c : cases_) {
            if (c.id.find("zero3") != std::string::npos) {
                ++deepspeed;
                QVERIFY(c.multi_nic_rings && !*c.multi_nic_rings && c.dp_overlap);
                QVERIFY(!c.implementation_why.empty());
                const CostModelParams own = c.ownTerms(defaultCostModelParams());
                QVERIFY(!own.multi_nic_rings && own.dp_overlap == *c.dp_overlap);
                // NCCL's multi-NIC rings would make these rows far faster than they ran.
                CalibrationCase nccl = c;
                nccl.multi_nic_rings.reset();
                nccl.dp_overlap.reset();
                QVERIFY(predictMetric(nccl, defaultCostModelParams()) > 1.3 * c.measured);
            }
            if (c.id.rfind("megatron-table1", 0) == 0 || c.id.rfind("megatron-table2-ptdp", 0) == 0) {
                ++megatron2021;
                QVERIFY(c.overlap_grad_reduce && !*c.overlap_grad_reduce);
            }
        }
        QCOMPARE(deepspeed, 6);
        QCOMPARE(megatron2021, 16);

        FieldErrors errors;
        QFile f(QStringLiteral(":/planner/calibration-cases.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject all = QJsonDocument::fromJson(f.readAll()).object();
        QJsonArray rows = all.value("cases").toArray();
        QJsonObject row = rows.at(10).toObject();
        QCOMPARE(row.value("id").toString(), QString("megatron-table2-zero3-175b-384"));
        QJsonObject impl = row.value("implementation").toObject();
        impl.insert("multi_nic", false);
        row.insert("implementation", impl);
        all.insert("cases", QJsonArray{row});
        calibrationCasesFromJson(all, BuiltinSpecs::instance(), errors);
        QVERIFY(!errors.empty());
        QVERIFY2(joinErrors(errors).find("multi_nic") != std::string::npos, joinErrors(errors).c_str());
    }

    // "framework" in a row's implementation block prices its element-wise work with that
    // framework's kernels (ElementwisePasses.h); an unknown framework is refused by name. No shipped
    // row names one: the Trainium rows' XLA graphs price as fused kernels, and the paper behind the
    // DeepSpeed-2021 rows does not say which model code ran under ZeRO-3 (DeepSpeed's Megatron
    // integration runs Megatron's fused kernels); named deepspeed they move by about -0.1%.
    void rowFramework()
    {
        QFile f(QStringLiteral(":/planner/calibration-cases.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject all = QJsonDocument::fromJson(f.readAll()).object();
        QJsonObject row = all.value("cases").toArray().at(10).toObject();
        QCOMPARE(row.value("id").toString(), QString("megatron-table2-zero3-175b-384"));
        for (const CalibrationCase& c : cases_)
            QVERIFY2(!c.framework, c.id.c_str());
        auto withFramework = [&](const char* name, FieldErrors& errors) {
            QJsonObject impl = row.value("implementation").toObject();
            impl.insert("framework", QString(name));
            QJsonObject r = row;
            r.insert("implementation", impl);
            QJsonObject doc = all;
            doc.insert("cases", QJsonArray{r});
            return calibrationCasesFromJson(doc, BuiltinSpecs::instance(), errors);
        };
        FieldErrors errors;
        const std::vector<CalibrationCase> eager = withFramework("deepspeed", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QCOMPARE(eager.size(), size_t(1));
        QVERIFY(eager[0].framework == ExportFormat::DeepSpeed);
        // Eager dropout-residual and LayerNorm passes: a little slower than the fused kernels.
        const CalibrationCase& fused = cases_[10];
        QVERIFY(predictMetric(eager[0], defaultCostModelParams()) < predictMetric(fused, defaultCostModelParams()));
        withFramework("pytorch", errors);
        QVERIFY(!errors.empty());
        QVERIFY2(joinErrors(errors).find("framework") != std::string::npos, joinErrors(errors).c_str());
    }

    // A row whose source states no micro-batch ("tuned"): it is predicted at the fastest of its sizes
    // that divides the batch per replica and fits, as a tuned benchmark ran; the choice follows the
    // terms; a size that is not a positive integer is refused by name.
    void rowTunedMicroBatch()
    {
        const auto it = std::find_if(cases_.begin(), cases_.end(),
                                     [](const CalibrationCase& c) { return c.id == "megatron-core-h100-32b"; });
        QVERIFY(it != cases_.end());
        const CalibrationCase& row = *it;
        QCOMPARE(row.tuned_micro_batches, (std::vector<int>{1, 2, 4}));
        QVERIFY(!row.tuned_why.empty());
        const CostModelParams params = defaultCostModelParams();
        double best = 0;
        int bestMb = 0;
        for (int mb : row.tuned_micro_batches) {
            CalibrationCase fixed = row;
            fixed.tuned_micro_batches.clear();
            fixed.layout.micro_batch = mb;
            const double metric = predictMetric(fixed, params);
            if (metric > best) {
                best = metric;
                bestMb = mb;
            }
        }
        QCOMPARE(predictMetric(row, params), best);
        QCOMPARE(row.predictedLayout(params).micro_batch, bestMb);
        // 4 micro-batches of 1 per replica leave the fp32 gradient reduce-scatter (16 GB a GPU over
        // its own NIC) behind one micro-batch's backward: one micro-batch of 4 hides it.
        QCOMPARE(bestMb, 4);
        // mb 3 does not divide 192 / 48 = 4 sequences per replica: the candidate is skipped.
        CalibrationCase odd = row;
        odd.tuned_micro_batches = {3, 2};
        QCOMPARE(odd.predictedLayout(params).micro_batch, 2);

        QFile f(QStringLiteral(":/planner/calibration-cases.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonObject all = QJsonDocument::fromJson(f.readAll()).object();
        for (const QJsonValue& v : all.value("cases").toArray()) {
            QJsonObject r = v.toObject();
            if (r.value("id").toString() != QLatin1String("megatron-core-h100-32b"))
                continue;
            QJsonObject tuned = r.value("tuned").toObject();
            tuned.insert("mb", QJsonArray{1, 0});
            r.insert("tuned", tuned);
            all.insert("cases", QJsonArray{r});
        }
        FieldErrors errors;
        calibrationCasesFromJson(all, BuiltinSpecs::instance(), errors);
        QVERIFY(!errors.empty());
        QVERIFY2(joinErrors(errors).find("tuned.mb") != std::string::npos, joinErrors(errors).c_str());
    }

    // The Trainium rows train as their source states: "Autocast:BF16+FP32Optimizer", NxD's
    // --use_gpu_compatible_precision 1 (bf16-autocast: fp32 gradient accumulation and collectives).
    void trainiumPrecision()
    {
        int rows = 0;
        for (const CalibrationCase& c : cases_)
            if (c.id.rfind("trn1-nxd", 0) == 0) {
                ++rows;
                QVERIFY2(c.problem.training.precision == Precision::BF16Autocast, c.id.c_str());
            }
        QCOMPARE(rows, 7);
    }

    void fitRecoversFromAPoorStart()
    {
        CostModelParams poor = defaultCostModelParams();
        poor.matmul_efficiency_by_vendor["AWS"] = 0.95;
        poor.measured_matmul_sustained_fraction = 0.6;
        poor.elementwise_traffic_factor = 0.5;
        poor.step_overhead_s = 1e-3;
        const FitResult fit = fitCostModel(fitted_, poor,
                                           {FitTerm::VendorMatmulEfficiency, FitTerm::SustainedMatmulFraction,
                                            FitTerm::ElementwiseFactor, FitTerm::StepOverhead});
        QVERIFY(fit.before.rms_log > 2 * fit.after.rms_log);
        const CostModelParams& shipped = defaultCostModelParams();
        QVERIFY(std::fabs(fit.params.elementwise_traffic_factor - shipped.elementwise_traffic_factor) <
                0.05 * shipped.elementwise_traffic_factor);
        QVERIFY(std::fabs(fit.params.measured_matmul_sustained_fraction - shipped.measured_matmul_sustained_fraction) <
                0.02);
        QVERIFY(std::fabs(fit.params.step_overhead_s - shipped.step_overhead_s) < 0.1 * shipped.step_overhead_s);
    }
};

QTEST_GUILESS_MAIN(TstPlannerCalibration)
#include "tst_planner_calibration.moc"
