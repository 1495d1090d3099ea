// The planner against the engine on the built-in validation suite: what is exact by
// construction must be exact (model states per device under every ZeRO stage and
// layout), FLOPs must agree closely, and the validation document keeps its contract.
// The other metrics are reported by `shardscope-cli validate --suite`; their goals
// belong to the calibration work (see the issue notes), not to this test.
#include "BuiltinSpecs.h"
#include "Store.h"
#include "ScaledCase.h"
#include "EngineFit.h"
#include "Validation.h"
#include "ValidationCaseJson.h"
#include "EmulatedHardware.h"
#include "ModelConfig.h"

#include <QTemporaryDir>

#include <QJsonArray>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <utility>

using namespace shardscope;

namespace {

engine::DeviceProfile testProfile()
{
    ChipSpec chip;  // Trainium's published figures [N1], one NeuronCore of two, scaled down
    chip.name = "trainium1";
    chip.peak_flops_fp32 = 47.5e12;
    chip.peak_flops_bf16 = 190e12;
    chip.hbm_bytes = 32.0 * (1 << 30);
    chip.hbm_bytes_per_second = 820.0 * (1 << 30);
    chip.devices_per_chip = 2;
    return engine::profileFromChip(chip, 1e-3);
}

// DeepSeek-V3 on 256 p5.48xlarge (2,048 H100), global batch 2048 of 4096 tokens.
Problem deepseekV3OnP5x256()
{
    const SpecLookup& specs = BuiltinSpecs::instance();
    Problem full;
    full.model = specs.model("deepseek-v3");
    full.cluster.node = specs.node("p5.48xlarge");
    full.cluster.nodes = 256;
    full.training.global_batch = 2048;
    full.training.seq_len = 4096;
    return full;
}

// The metrics the planner prices exactly (bytes by state and collective, FLOPs), each within
// 1e-9 relative (+16 bytes) of the engine's measurement.
void expectExactMetrics(const ValidationResult& r)
{
    for (const char* metric : {"weights_bytes", "gradients_bytes", "optimizer_bytes", "flops", "matmul_flops",
                               "all_reduce_bytes", "reduce_scatter_bytes", "all_gather_bytes", "send_recv_bytes",
                               "all_to_all_bytes"})
        QVERIFY2(std::fabs(r.metric(metric)->predicted - r.metric(metric)->measured) <= 1e-9 * r.metric(metric)->measured + 16,
                 qPrintable(QString("%1: predicted %2, measured %3")
                                .arg(metric)
                                .arg(r.metric(metric)->predicted)
                                .arg(r.metric(metric)->measured)));
}

} // namespace

class TstValidation : public QObject {
    Q_OBJECT
    std::vector<ValidationResult> results_;

    static bool routingDependent(const ValidationResult& r)
    {
        const Layout& l = r.c.request.layout;
        return r.c.request.model.moe.enabled() && (l.ep > 1 || l.expertTensorParallel() > 1);
    }

private slots:
    void initTestCase()
    {
        const EmulationHost host = emulationHost(engine::measureHostProfile(1));
        for (ValidationCase c : validationSuite(testProfile(), 5)) {  // exact metrics: a few steps suffice
            c.host = host;
            results_.push_back(runValidation(c));
        }
        QVERIFY(results_.size() >= 16);
    }

    void everyCaseRan()
    {
        for (const ValidationResult& r : results_)
            QVERIFY2(r.error.empty(), (r.c.name + ": " + r.error).c_str());
    }

    // A case without routed experts or a pipeline measures the same in every step: where its
    // wall clock is not compared it runs kSuiteExactSteps, and measures what more steps do.
    void exactStepsWhereTheWallClockIsNotCompared()
    {
        for (const ValidationResult& r : results_) {
            const bool exact = !r.c.request.model.moe.enabled() && r.c.request.layout.pp == 1;
            QCOMPARE(r.c.exact_steps, exact ? kSuiteExactSteps : 0);
            const size_t expected = exact && !wallClockComparable(r.c) ? size_t(kSuiteExactSteps) : 5;
            QVERIFY2(r.measurement.steps.size() == expected, r.c.name.c_str());
            QCOMPARE(size_t(r.c.request.steps), expected);
        }
        // The same case, every step run: the same bytes, FLOPs and communication, and the same
        // emulated device time up to the rounding of a mean of more steps.
        ValidationCase c;
        for (const ValidationResult& r : results_)
            if (r.c.name == "tensor parallel")
                c = r.c;
        c.host.cores = 1;  // fewer cores than its 4 devices, whatever this machine has
        c.request.steps = 5;
        QVERIFY(c.exact_steps > 0 && !wallClockComparable(c));
        ValidationCase all = c;
        all.exact_steps = 0;
        all.request.steps = 2 * kSuiteExactSteps;
        const ValidationResult shortRun = runValidation(c), longRun = runValidation(all);
        QCOMPARE(shortRun.measurement.steps.size(), size_t(kSuiteExactSteps));
        QCOMPARE(longRun.measurement.steps.size(), size_t(2 * kSuiteExactSteps));
        for (const MetricComparison& m : shortRun.metrics) {
            const MetricComparison* other = longRun.metric(m.metric);
            QVERIFY(other);
            if (m.metric == "wall_step_time_s")
                continue;
            const double tolerance = m.metric == "device_step_time_s" ? 1e-12 * std::fabs(m.measured) : 0.0;
            QVERIFY2(std::fabs(m.measured - other->measured) <= tolerance,
                     qPrintable(QString("%1: %2 vs %3").arg(QString::fromStdString(m.metric))
                                    .arg(m.measured, 0, 'g', 17).arg(other->measured, 0, 'g', 17)));
        }
    }

    void suiteCoversEveryDimension()
    {
        bool dp = false, tp = false, sp = false, pp = false, gpipe = false, interleaved = false, full = false,
             selective = false;
        bool zero[4] = {};
        for (const ValidationResult& r : results_) {
            const Layout& l = r.c.request.layout;
            dp |= l.dp > 1;
            tp |= l.tp > 1;
            sp |= l.sequence_parallel;
            pp |= l.pp > 1;
            gpipe |= l.pp > 1 && l.schedule == PipelineSchedule::GPipe;
            interleaved |= l.pp > 1 && l.schedule == PipelineSchedule::Interleaved && l.virtual_stages > 1;
            full |= l.recompute == Recompute::Full;
            selective |= l.recompute == Recompute::Selective;
            zero[l.zero_stage] = true;
        }
        QVERIFY(dp && tp && sp && pp && gpipe && interleaved && full && selective);
        QVERIFY(zero[0] && zero[1] && zero[2] && zero[3]);
    }

    void memoryIsExact_data()
    {
        QTest::addColumn<QString>("metric");
        QTest::newRow("weights") << "weights_bytes";
        QTest::newRow("gradients") << "gradients_bytes";
        QTest::newRow("optimizer") << "optimizer_bytes";
        // The activations too: every tensor the engine keeps for backward (per layer, the final
        // norm, the fp32 softmax, the losses, the norms' statistics, the recomputed layer's set)
        // is one the planner counts, under every schedule and recomputation mode.
        QTest::newRow("activations") << "activations_bytes";
    }
    void memoryIsExact()
    {
        QFETCH(QString, metric);
        for (const ValidationResult& r : results_) {
            // MoE with its copies exchanged: the activations follow the measured routing
            // (moeCasesAtTheMeasuredLoad compares them at it).
            if (metric == "activations_bytes" && routingDependent(r))
                continue;
            const MetricComparison* m = r.metric(metric.toStdString());
            QVERIFY(m);
            // An offloaded optimizer keeps no states on the device: 0 on both sides.
            const bool offloaded = metric == "optimizer_bytes" && r.c.request.layout.offload == Offload::Optimizer;
            QVERIFY2(offloaded ? m->measured == 0 : m->measured > 0, r.c.name.c_str());
            QVERIFY2(std::fabs(m->predicted - m->measured) <= 1e-9 * m->measured,
                     qPrintable(QString("%1: predicted %2, measured %3").arg(r.c.name.c_str()).arg(m->predicted).arg(m->measured)));
        }
    }

    // Bytes by collective kind on the busiest sender: exact for every case, up to the two fp64
    // scalars of the step's loss and norm, which a ring of more devices than values splits
    // unevenly (the planner counts the average member).
    void collectiveBytes_data()
    {
        QTest::addColumn<QString>("metric");
        for (const char* kind : {"comm_bytes", "all_reduce_bytes", "reduce_scatter_bytes", "all_gather_bytes",
                                 "send_recv_bytes", "all_to_all_bytes"})
            QTest::newRow(kind) << kind;
    }
    void collectiveBytes()
    {
        QFETCH(QString, metric);
        int exact = 0, compared = 0;
        for (const ValidationResult& r : results_) {
            const MetricComparison* m = r.metric(metric.toStdString());
            QVERIFY(m);
            if (m->measured == 0 && m->predicted == 0)
                continue;
            ++compared;
            const bool isExact = std::fabs(m->predicted - m->measured) <= 2 * 8.0;
            exact += isExact;
            // Expert tensor parallelism all-gathers each member's received copies over etp and
            // reduce-scatters their outputs back (MoeMlp.h): a routing-dependent count, which the
            // planner prices at the balanced mean; within 10% there (the suite's: 0.3-5%), exact
            // everywhere else.
            const bool etpCopies = routingDependent(r) && r.c.request.layout.expertTensorParallel() > 1 &&
                                   (metric == "all_gather_bytes" || metric == "reduce_scatter_bytes" ||
                                    metric == "comm_bytes");
            if (etpCopies) {
                QVERIFY2(std::fabs(m->rel_error) < 0.10, qPrintable(QString("%1: predicted %2, measured %3")
                                                                        .arg(r.c.name.c_str())
                                                                        .arg(m->predicted)
                                                                        .arg(m->measured)));
                continue;
            }
            QVERIFY2(isExact,
                     qPrintable(QString("%1: predicted %2, measured %3").arg(r.c.name.c_str()).arg(m->predicted).arg(m->measured)));
        }
        QVERIFY(compared >= 3);
        qInfo("%s: %d of %d cases exact", qPrintable(metric), exact, compared);
    }

    // All-to-all CP (cp_comm=a2a): the cases run as planned (cp_comm kept by the scaler, the
    // heads divisible by tp x cp), their all-to-all bytes the planner's exactly and nonzero, no
    // ring sends, and the activations exact (memoryIsExact).
    void allToAllContextParallelIsExact()
    {
        int cases = 0;
        for (const ValidationResult& r : results_) {
            const Layout& l = r.c.request.layout;
            if (l.cp_comm != CpComm::A2A)
                continue;
            ++cases;
            QVERIFY2(r.error.empty(), r.error.c_str());
            const engine::ModelConfig& m = r.c.request.model;
            QCOMPARE(m.heads / l.tp % l.cp, 0);
            QCOMPARE(m.kvHeads() / l.tp % l.cp, 0);
            const MetricComparison* a2a = r.metric("all_to_all_bytes");
            const MetricComparison* p2p = r.metric("send_recv_bytes");
            QVERIFY(a2a && p2p);
            QVERIFY2(a2a->measured > 0 && std::fabs(a2a->predicted - a2a->measured) <= 2 * 8.0,
                     qPrintable(QString("%1: predicted %2, measured %3").arg(r.c.name.c_str()).arg(a2a->predicted).arg(a2a->measured)));
            QCOMPARE(p2p->measured, 0.0);
            QCOMPARE(p2p->predicted, 0.0);
            qInfo("%s: %.0f all-to-all bytes a step, predicted %.0f", r.c.name.c_str(), a2a->measured, a2a->predicted);
        }
        QVERIFY(cases >= 2);
    }

    // Under ZeRO-2/3 with sp (or QK-norm under tp) each device all-reduces over tp its own slices of
    // the norms' (and router's) gradients, one call a step (Megatron-FSDP's local shards): uneven
    // between the shard group's members, so the busiest sender's, not the mean, is what the planner
    // prices — one call in its ledger, the bytes the engine's exactly (collectiveBytes).
    void ownedNormSlicesAreOneCallOfTheBusiestMember()
    {
        int cases = 0;
        for (const ValidationResult& r : results_) {
            if (r.c.name.find("owned") == std::string::npos)
                continue;
            ++cases;
            const engine::TrainRequest& q = r.c.request;
            QVERIFY(q.layout.zero_stage >= 2);
            const CostModel model(r.problem, engineCostModelParams(r.c.profile, q.links, q.bucket_bytes,
                                                                   defaultCostModelParams()));
            CostLedger ledger;
            model.evaluate(q.layout, &ledger);
            int found = 0;
            for (const Collective& c : ledger.collectives)
                if (c.kind == CommKind::AllReduce && std::string(c.what).starts_with("norm gradients")) {
                    ++found;
                    QCOMPARE(c.calls, 1.0);
                }
            QCOMPARE(found, 1);
            QCOMPARE(r.metric("all_reduce_bytes")->predicted, r.metric("all_reduce_bytes")->measured);
            // The members' shares differ: the devices' all-reduce bytes are not all the same.
            double least = INFINITY, most = 0;
            for (const engine::DeviceMeasurement& d : r.measurement.devices) {
                least = std::min(least, d.comm_bytes.at("all_reduce"));
                most = std::max(most, d.comm_bytes.at("all_reduce"));
            }
            QVERIFY2(most > least, r.c.name.c_str());
        }
        QCOMPARE(cases, 3);
    }

    // Issue 16: the MoE cases. The all-to-all's bytes (the payload, a dropless count) are exact
    // (collectiveBytes); the activations, which follow where the router sent the copies, agree
    // exactly once the planner prices the busiest device's measured load (one micro-batch in
    // flight: pp = 1), and the measured load is reported beside the planner's factor.
    void moeCasesAtTheMeasuredLoad()
    {
        int moe = 0, exchanged = 0, atLoad = 0;
        for (const ValidationResult& r : results_) {
            if (!r.c.request.model.moe.enabled())
                continue;
            ++moe;
            QVERIFY2(r.error.empty(), r.c.name.c_str());
            const Layout& l = r.c.request.layout;
            const MetricComparison* a2a = r.metric("all_to_all_bytes");
            QVERIFY(a2a);
            QCOMPARE(a2a->measured > 0, l.ep > 1);
            if (!routingDependent(r))
                continue;
            ++exchanged;
            if (l.pp > 1 || l.ep_comm_overlap)  // (several micro-batches' sets at the peak, each its own load)
                continue;
            ++atLoad;
            QVERIFY2(r.moe_measured_load >= 1.0, r.c.name.c_str());
            const MetricComparison* m = r.metric("activations_bytes_at_measured_load");
            QVERIFY2(m, r.c.name.c_str());
            // (What moe_act and moe rebuild at the peak is one layer's, the layer whose backward runs
            // first, at its own load; the measured load is the step's over all its MoE layers, which
            // on these 2-4 layer models with tiny micro-batches differ by up to 1.5x (moe rebuilds
            // the whole saved set, half the peak here): within 10%.)
            const bool rebuilt = (l.recomputedModules() & (kRecomputeMoeAct | kRecomputeMoe)) != 0;
            QVERIFY2(std::fabs(m->predicted - m->measured) <= (rebuilt ? 0.10 : 1e-9) * m->measured,
                     qPrintable(QString("%1: predicted %2, measured %3 at load %4")
                                    .arg(r.c.name.c_str())
                                    .arg(m->predicted)
                                    .arg(m->measured)
                                    .arg(r.moe_measured_load)));
            // The routing was not balanced by chance: the balanced prediction is below the measured.
            QVERIFY(r.metric("activations_bytes")->predicted <= m->measured);
            // The step waited for each layer's busiest ep rank: priced at that load, the step is at
            // least the balanced one (a rank's copies: at least the mean, at most all ep ranks').
            QVERIFY2(r.moe_step_load > 1.0 && r.moe_step_load <= l.ep, r.c.name.c_str());
            const MetricComparison* step = r.metric("device_step_time_s_at_measured_load");
            QVERIFY2(step, r.c.name.c_str());
            QCOMPARE(step->measured, r.metric("device_step_time_s")->measured);
            QVERIFY(step->predicted >= r.metric("device_step_time_s")->predicted);
        }
        QVERIFY(moe >= 8 && exchanged >= 6 && atLoad >= 5);
        // The document carries the measured routing next to the factor.
        const QJsonObject doc = validationDocument(results_);
        int reported = 0;
        for (const QJsonValue& c : doc.value("cases").toArray()) {
            const QJsonObject moeDoc = c.toObject().value("moe").toObject();
            if (moeDoc.isEmpty())
                continue;
            ++reported;
            QVERIFY(moeDoc.value("tokens_per_expert").toArray().size() >= 4);
            QCOMPARE(moeDoc.value("planner_imbalance").toDouble(), 1.0);
        }
        QCOMPARE(reported, moe);
    }

    // The single-device cases run the whole batch as one micro-batch (their layout says mb = batch):
    // priced as the layout says, with no patch between the engine and the planner.
    // Interleaved where the last stage is the most loaded (a large vocabulary): its peak holds
    // fewer of the head's chunk than of its other chunks (Megatron-LM's order; pp = 2, v = 3:
    // 5 of stage 1's (micro-batch, chunk) pairs at its peak where [K22]'s first-stage count
    // gives 4), and the planner walks the same order.
    void interleavedLastStageActivationsAreExact_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<QString>("layout");
        QTest::newRow("pp=2, v=2") << 4 << "dp=1,pp=2,mb=1,schedule=interleaved,v=2";
        QTest::newRow("pp=2, v=3") << 6 << "dp=1,pp=2,mb=1,schedule=interleaved,v=3";
        QTest::newRow("pp=2, v=2, recompute=full") << 4 << "dp=1,pp=2,mb=1,schedule=interleaved,v=2,recompute=full";
    }
    void interleavedLastStageActivationsAreExact()
    {
        QFETCH(int, layers);
        QFETCH(QString, layout);
        ValidationCase c = validationSuite(testProfile(), 2).front();
        c.name = "interleaved, large vocabulary";
        c.request.model = engine::ModelConfig{layers, 64, 4, 4096, 32};
        FieldErrors errors;
        c.request.layout = parseLayout(layout.toStdString(), errors);
        QVERIFY(errors.empty());
        const ValidationResult r = runValidation(c);
        QVERIFY2(r.error.empty(), r.error.c_str());
        QCOMPARE(r.prediction.memory_stage, 1);
        for (const char* metric : {"activations_bytes", "weights_bytes", "flops", "comm_bytes"}) {
            const MetricComparison* m = r.metric(metric);
            QVERIFY(m);
            QVERIFY2(m->predicted == m->measured,
                     qPrintable(QString("%1: predicted %2, measured %3").arg(metric).arg(m->predicted).arg(m->measured)));
        }
    }

    void singleDeviceIsPricedAsOneMicroBatch()
    {
        for (const ValidationResult& r : results_) {
            if (r.c.request.layout.devices() != 1)
                continue;
            QCOMPARE(r.c.request.layout.micro_batch, r.c.request.batch);
            QCOMPARE(r.prediction.micro_batches, 1);
            // Activations then agree exactly, like the cluster cases'.
            QCOMPARE(r.metric("activations_bytes")->predicted, r.metric("activations_bytes")->measured);
        }
    }

    // FLOPs of every kernel (matmuls, and the vector work: norms, activations, adds, softmax,
    // embedding, optimizer) and of the matmuls alone agree exactly in every case, selective
    // recomputation included (the attention core again, attention over V too, as Megatron-LM).
    void flopsAgree()
    {
        for (const ValidationResult& r : results_)
            for (const char* metric : {"flops", "matmul_flops"}) {
                const MetricComparison* m = r.metric(metric);
                QVERIFY2(std::fabs(m->predicted - m->measured) <= 1e-9 * m->measured,
                         qPrintable(QString("%1 %2: predicted %3, measured %4").arg(r.c.name.c_str(), metric)
                                        .arg(m->predicted).arg(m->measured)));
            }
    }

    // A full-size plan becomes a case the engine runs here, with what changed said.
    void scaledCaseFromAPlan()
    {
        Problem full;
        full.model.name = "gpt-ish";
        full.model.layers = 48;
        full.model.hidden = 8192;
        full.model.heads = 64;
        full.model.kv_heads = 64;
        full.model.head_dim = 128;
        full.model.ffn_hidden = 4 * 8192;
        full.model.vocab = 51200;
        full.model.max_seq = 2048;
        full.cluster.node.name = "trn1-like";
        ChipSpec chip;
        chip.name = "trainium1";
        chip.peak_flops_fp32 = 47.5e12;
        chip.peak_flops_bf16 = 190e12;
        chip.hbm_bytes = 32.0 * (1 << 30);
        chip.hbm_bytes_per_second = 820.0 * (1 << 30);
        chip.devices_per_chip = 2;
        full.cluster.node.chip = chip;
        full.cluster.node.chips_per_node = 16;
        full.cluster.node.intra_link_bytes_per_second = 384.0 * (1 << 30);
        full.cluster.node.inter_node_bytes_per_second = 100e9;
        full.cluster.nodes = 16;
        full.training.global_batch = 512;
        full.training.seq_len = 2048;
        FieldErrors errors;
        Layout layout = parseLayout("dp=8,tp=8,pp=4,cp=2,sp=on,zero=1,schedule=interleaved,v=2,recompute=selective", errors);
        QVERIFY(errors.empty() && validate(layout, full.model, full.cluster, full.training).empty());

        // NxD's bf16-autocast has no engine counterpart (fp32 parameter gathers): refused by name.
        Problem autocast = full;
        autocast.training.precision = Precision::BF16Autocast;
        try {
            scaledValidationCase(autocast, layout, 2);
            QFAIL("bf16-autocast was validated as another precision");
        } catch (const InputError& e) {
            QVERIFY2(std::string(e.what()).find("bf16-autocast") != std::string::npos, e.what());
        }

        const ScaledCase s = scaledValidationCase(full, layout, 2);
        const Layout& l = s.validation.request.layout;
        QVERIFY(l.devices() <= kMaxValidationDevices);
        QCOMPARE(l.schedule, PipelineSchedule::Interleaved);  // executed as planned
        QCOMPARE(l.virtual_stages, 2);
        QCOMPARE(s.validation.request.model.layers, 4);  // pp x v chunks of one layer
        // 512 devices (8 x 8 x 4 x cp 2) to 16: dp halved to 2, then pp to 2, then tp to 2; cp
        // (executed by the engine) kept at 2, the scaled sequence cut into 2 cp chunks.
        QCOMPARE(l.dp, 2);
        QCOMPARE(l.pp, 2);
        QCOMPARE(l.cp, 2);
        QCOMPARE(l.tp, 2);
        QCOMPARE(s.validation.request.model.seq % (2 * l.cp), 0);
        QCOMPARE(l.zero_stage, 1);
        QVERIFY(l.sequence_parallel);
        QCOMPARE(l.recompute, Recompute::Selective);
        QVERIFY(s.adaptations.size() >= 1);  // devices reduced: nothing else is changed
        // The same memory pressure: the scaled device is filled as the real one is.
        const Prediction fullPrediction = CostModel::evaluate(full, layout);
        const ValidationResult r = runValidation(s.validation);
        QVERIFY2(r.error.empty(), r.error.c_str());
        const double fullFraction = fullPrediction.memory_bytes.total() / fullPrediction.memory_bytes.capacity;
        const double smallFraction = (r.prediction.memory_bytes.total()) / r.prediction.memory_bytes.capacity;
        QVERIFY2(std::fabs(smallFraction - fullFraction) < 0.01 * fullFraction,
                 qPrintable(QString("%1 vs %2").arg(smallFraction).arg(fullFraction)));
        QCOMPARE(r.metric("weights_bytes")->rel_error, 0.0);
        // The plan's bf16 with its default fp32 main gradients is run so: gradients and their
        // reductions at 4 bytes, exact (collectiveBytes' 16 bytes of the step's fp64 scalars); a plan
        // with bf16 gradients runs bf16 ones, exact too.
        auto exact = [](const ValidationResult& v) {
            for (const char* metric :
                 {"gradients_bytes", "reduce_scatter_bytes", "all_reduce_bytes", "all_gather_bytes"})
                QVERIFY2(std::fabs(v.metric(metric)->predicted - v.metric(metric)->measured) <= 2 * 8.0,
                         qPrintable(QString("%1: predicted %2, measured %3")
                                        .arg(metric)
                                        .arg(v.metric(metric)->predicted)
                                        .arg(v.metric(metric)->measured)));
        };
        QVERIFY(s.validation.request.fp32_gradients);
        QCOMPARE(r.problem.training.main_grads, MainGrads::FP32);
        exact(r);
        Problem bf16Grads = full;
        bf16Grads.training.main_grads = MainGrads::BF16;
        const ScaledCase b = scaledValidationCase(bf16Grads, layout, 2);
        QVERIFY(!b.validation.request.fp32_gradients);
        const ValidationResult rb = runValidation(b.validation);
        QVERIFY2(rb.error.empty(), rb.error.c_str());
        QCOMPARE(rb.metric("gradients_bytes")->predicted, r.metric("gradients_bytes")->predicted / 2);
        exact(rb);
    }

    // A catalog model is validated as itself: Llama 3 70B's blocks at engine size, its HSDP shard
    // groups kept HSDP, no note but size reductions; the memory exact against the planner.
    // DeepSeek-V3 validates as itself (issue 16): its multi-head latent attention, MoE blocks and
    // multi-token prediction depth at engine size, the ranks and head sizes in the model's ratios,
    // YaRN's score factor from its rope_scaling, a plan with tp (sp), pp and ep; the exact metrics exact.
    void deepseekV3ValidatesAsItself()
    {
        const Problem full = deepseekV3OnP5x256();
        FieldErrors errors;
        // 61 layers over 16 stages as 3 + 14 x 4 + 2; the experts over ep 64; full recomputation (the
        // plan fits 80 GB with it: 31 GiB a device, not without: 95 GiB).
        Layout layout = parseLayout("dp=64,tp=2,pp=16,sp=on,ep=64,etp=1,mb=1,first_stage_layers=3,last_stage_layers=2,"
                                    "recompute=full", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QVERIFY(validate(layout, full.model, full.cluster, full.training).empty());
        // The built-in trains with multi-token prediction (one depth): the scaled model keeps it.
        const ScaledCase s = scaledValidationCase(full, layout, 2);
        QVERIFY2(s.full_prediction.feasible, "the full-size plan fits its devices");
        const engine::ModelConfig& m = s.validation.request.model;
        const MlaSpec& a = full.model.mla;
        QVERIFY(m.mla.enabled() && m.moe.enabled());
        // Node-limited routing (the top 4 of 8 groups, 2 experts from each) on the scaled experts:
        // k = g x 2 as in the full model, fewer groups chosen than there are, each group with a
        // choice left within it; the adaptation says how it was scaled.
        QCOMPARE(full.model.moe.expert_groups, 8);
        QVERIFY(m.moe.expert_groups >= 2 && m.moe.group_top_k >= 1 && m.moe.group_top_k < m.moe.expert_groups);
        QCOMPARE(m.moe.experts % m.moe.expert_groups, 0);
        QCOMPARE(m.moe.top_k, m.moe.group_top_k * (full.model.moe.top_k / full.model.moe.group_top_k));
        QVERIFY(m.moe.experts / m.moe.expert_groups >= 2 * (m.moe.top_k / m.moe.group_top_k));
        const std::string groupsNote = "group-limited routing's top 4 of 8 groups scaled to top " +
                                       std::to_string(m.moe.group_top_k) + " of " + std::to_string(m.moe.expert_groups);
        QVERIFY2(std::any_of(s.adaptations.begin(), s.adaptations.end(),
                             [&](const std::string& a) { return a.find(groupsNote) != std::string::npos; }),
                 groupsNote.c_str());
        QCOMPARE(m.mtp.layers, full.model.mtp.layers);
        QCOMPARE(m.mtp.loss_scale, full.model.mtp.loss_scale);
        // 128 / 64 / 128 head parts as 8 / 4 / 8; ranks in their ratio to the hidden size.
        QCOMPARE(m.mla.qk_rope_head_dim, 4);
        QCOMPARE(m.mla.qk_nope_head_dim, 4 * a.qk_nope_head_dim / a.qk_rope_head_dim);
        QCOMPARE(m.mla.v_head_dim, 4 * a.v_head_dim / a.qk_rope_head_dim);
        QCOMPARE(m.head_dim, m.mla.qkHeadDim());
        QVERIFY(std::abs(double(m.mla.q_lora_rank) / m.hidden - double(a.q_lora_rank) / full.model.hidden) <= 2.0 / m.hidden);
        QVERIFY(std::abs(double(m.mla.kv_lora_rank) / m.hidden - double(a.kv_lora_rank) / full.model.hidden) <=
                    2.0 / m.hidden ||
                m.mla.kv_lora_rank == 4);
        // DeepSeek-V3's yarn factor 40 and mscale_all_dim 1: (0.1 ln 40 + 1)^2 = 1.874.
        const RopeScaling& rs = full.model.rope_scaling;
        QCOMPARE(rs.type, RopeScalingKind::Yarn);
        const double mscale = 0.1 * rs.mscale_all_dim * std::log(rs.factor) + 1.0;
        QCOMPARE(m.mla.softmax_mscale, mscale * mscale);
        QVERIFY(std::fabs(m.mla.softmax_mscale - 1.874) < 1e-3);
        const ValidationResult r = runValidation(s.validation);
        QVERIFY2(r.error.empty(), r.error.c_str());
        QVERIFY(r.problem.model.mla.enabled());
        QVERIFY(r.problem.model.mtp.enabled());
        expectExactMetrics(r);
    }

    // An explicit pipeline layout (pipeline_layout, Megatron-LM's --pipeline-model-parallel-layout)
    // scales as the uneven split does: DeepSeek-V3's 3 + 14 x 4 + 2 spelled as a layout string trains
    // for real, bytes and FLOPs exact; the interleaved layout of the B200 recipe is refused by name
    // (the engine runs one chunk per stage).
    void explicitPipelineLayoutScales()
    {
        const Problem full = deepseekV3OnP5x256();
        FieldErrors errors;
        Layout layout = parseLayout("dp=64,tp=2,pp=16,sp=on,ep=64,etp=1,mb=1,recompute=full,"
                                    "pipeline_layout=Et*3|(t*4|)*14t*2mL", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QVERIFY(validate(layout, full.model, full.cluster, full.training).empty());
        const ScaledCase s = scaledValidationCase(full, layout, 2);
        const Layout& l = s.validation.request.layout;
        QVERIFY(l.layerLayout());
        QVERIFY(l.pp > 1);
        // The lighter ends keep 1 layer each, every other stage 2; MTP and loss on the last.
        QCOMPARE(l.stageLayers(s.validation.request.model.layers, 0), 1);
        QCOMPARE(l.stageLayers(s.validation.request.model.layers, l.pp - 1), 1);
        for (int stage = 1; stage + 1 < l.pp; ++stage)
            QCOMPARE(l.stageLayers(s.validation.request.model.layers, stage), 2);
        QVERIFY2(QString::fromStdString(l.layerLayout()->text()).endsWith("mL"), l.layerLayout()->text().c_str());
        const ValidationResult r = runValidation(s.validation);
        QVERIFY2(r.error.empty(), r.error.c_str());
        expectExactMetrics(r);

        Problem b200 = full;
        b200.cluster.node = BuiltinSpecs::instance().node("p6-b200.48xlarge");
        b200.cluster.nodes = 32;
        b200.training.global_batch = 4096;
        Layout interleaved = parseLayout("dp=32,pp=8,mb=1,ep=32,recompute=full,pipeline_layout=Et*4|(t*4|)*14tmL", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QCOMPARE(interleaved.virtual_stages, 2);
        QVERIFY(validate(interleaved, b200.model, b200.cluster, b200.training).empty());
        try {
            scaledValidationCase(b200, interleaved, 2);
            QFAIL("an interleaved explicit layout was validated as another layout");
        } catch (const InputError& e) {
            QVERIFY2(std::string(e.what()).find("pipeline_layout=Et*4|(t*4|)*14tmL") != std::string::npos, e.what());
        }
    }

    void scaledCaseKeepsTheArchitecture()
    {
        const SpecLookup& specs = BuiltinSpecs::instance();
        Problem full;
        full.model = specs.model("llama-3-70b");
        full.cluster.node = specs.node("p5.48xlarge");
        full.cluster.nodes = 32;
        full.training.global_batch = 1024;
        full.training.seq_len = 8192;
        FieldErrors errors;
        Layout layout = parseLayout("dp=32,tp=8,zero=3,zero_group=8,sp=on,recompute=full", errors);
        QVERIFY(errors.empty() && validate(layout, full.model, full.cluster, full.training).empty());
        const ScaledCase s = scaledValidationCase(full, layout, 2);
        const engine::ModelConfig& m = s.validation.request.model;
        QCOMPARE(m.norm, NormKind::RmsNorm);
        QCOMPARE(m.mlp, MlpKind::SwiGlu);
        QCOMPARE(m.positions, PositionKind::Rotary);
        QCOMPARE(m.rope_base, 500000.0);
        QVERIFY(!m.bias && !m.tied_embeddings);
        QCOMPARE(m.heads / m.kvHeads(), 4);  // 64 / 8 query groups, capped at 4 per group
        QCOMPARE(m.kvHeads() % s.validation.request.layout.tp, 0);
        // The MLP keeps Llama 3's width ratio (28672 / 8192 = 3.5), rounded to what tp divides.
        QVERIFY(std::fabs(double(m.ffn()) / m.hidden - 3.5) < 0.2);
        const Layout& l = s.validation.request.layout;
        QVERIFY2(l.zero_group >= 2 && l.zero_group < l.dp && l.dp % l.zero_group == 0,
                 qPrintable(QString::fromStdString(toString(l))));
        QCOMPARE(s.validation.request.precision, engine::PrecisionMode::BF16Mixed);
        for (const std::string& note : s.adaptations)
            QVERIFY2(note.find("GPT-2") == std::string::npos && note.find("fp32") == std::string::npos, note.c_str());
        const ValidationResult r = runValidation(s.validation);
        QVERIFY2(r.error.empty(), r.error.c_str());
        for (const char* metric : {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "flops"})
            QVERIFY2(std::fabs(r.metric(metric)->rel_error) < 1e-9, metric);
        // What the engine cannot express is refused by name, not trained as something else.
        for (const auto& [name, named] : {std::pair{"gpt-oss-120b", "attention_sinks"}}) {
            Problem other = full;
            other.model = specs.model(name);
            try {
                scaledValidationCase(other, parseLayout("dp=8", errors), 2);
                QFAIL(qPrintable(QString::fromLatin1(name) + " was accepted"));
            } catch (const InputError& e) {
                QVERIFY2(QString(e.what()).contains(QLatin1String(named)), e.what());
            }
        }
    }

    // A ZeRO plan of an MoE model with a shard group smaller than dp (HSDP) is validated as HSDP: the
    // routed experts shard over the slice of their edp group in each replica (Megatron's
    // distributed-optimizer instances). Where the scaled mesh leaves the replicas not dividing the
    // edp group (core's rule, Megatron's assertion), the group is widened to the smallest that does.
    void scaledMoeHsdpPlanKeepsHsdp_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("dp");
        QTest::addColumn<int>("group");
        QTest::addColumn<QString>("widened");
        // 64 devices scaled to 16: dp 64 -> 16, ep 8, edp 2: zero_group 8 leaves 2 replicas, kept.
        QTest::newRow("kept") << "dp=64,ep=8,zero=1,zero_group=8" << 8 << 16 << 8 << "";
        // 512 devices: dp 64 -> 4 and tp 8 -> 4, ep 8 (etp 1), edp 64 -> 2: zero_group 1's 4 replicas
        // do not divide it, 2 of 2 do.
        QTest::newRow("widened") << "dp=64,tp=8,sp=on,ep=8,etp=1,zero=1,zero_group=1" << 64 << 4 << 2
                                 << "ZeRO shard group 1 widened to 2 (2 replicas, HSDP as planned): the replicas "
                                    "must divide the expert-data-parallel group of 2";
    }
    void scaledMoeHsdpPlanKeepsHsdp()
    {
        QFETCH(QString, layout);
        QFETCH(int, nodes);
        QFETCH(int, dp);
        QFETCH(int, group);
        QFETCH(QString, widened);
        const SpecLookup& specs = BuiltinSpecs::instance();
        Problem full;
        full.model = specs.model("mixtral-8x7b");
        full.cluster.node = specs.node("p5.48xlarge");
        full.cluster.nodes = nodes;
        full.training.global_batch = 512;
        full.training.seq_len = 4096;
        FieldErrors errors;
        const Layout planned = parseLayout(layout.toStdString(), errors);
        QVERIFY(errors.empty() && validate(planned, full.model, full.cluster, full.training).empty());
        const ScaledCase s = scaledValidationCase(full, planned, 2);
        const Layout& l = s.validation.request.layout;
        QCOMPARE(l.dp, dp);
        QCOMPARE(l.ep, 8);
        QCOMPARE(l.zero_stage, 1);
        QCOMPARE(l.zero_group, group);
        bool noted = false;
        for (const std::string& note : s.adaptations)
            noted = noted || (!widened.isEmpty() && note == widened.toStdString());
        QCOMPARE(noted, !widened.isEmpty());
        QVERIFY2(engine::validate(s.validation.request).empty(),
                 joinErrors(engine::validate(s.validation.request)).c_str());
    }

    // An encoder is validated as itself: BERT large's blocks (post-norm, token types, embedding norm,
    // pooler with the next-sentence head, the masked-LM head), every exact metric exact.
    void scaledCaseTrainsBertAsItself()
    {
        const SpecLookup& specs = BuiltinSpecs::instance();
        Problem full;
        full.model = specs.model("bert-large");
        full.cluster.node = specs.node("p5.48xlarge");
        full.cluster.nodes = 2;
        full.training.global_batch = 256;
        full.training.seq_len = 512;
        FieldErrors errors;
        Layout layout = parseLayout("dp=4,tp=2,pp=2,sp=on,mb=2", errors);
        QVERIFY(errors.empty() && validate(layout, full.model, full.cluster, full.training).empty());
        const ScaledCase s = scaledValidationCase(full, layout, 2);
        const engine::ModelConfig& m = s.validation.request.model;
        QVERIFY(m.masked_lm && m.pooler && m.post_norm && m.embedding_norm && !m.causal);
        QCOMPARE(m.token_types, 2);
        QVERIFY(m.tied_embeddings && m.bias);
        QCOMPARE(m.mlp, MlpKind::Gelu);
        const QString blocks = QString::fromStdString(engine::describe(m));
        for (const char* block : {"post-norm", "token types", "embedding norm", "masked-LM head", "pooler"})
            QVERIFY2(blocks.contains(block), qPrintable(blocks));
        const ValidationResult r = runValidation(s.validation);
        QVERIFY2(r.error.empty(), r.error.c_str());
        auto check = [&](const char* metric, double slack) {
            const MetricComparison* c = r.metric(metric);
            QVERIFY2(c && std::fabs(c->predicted - c->measured) <= 1e-9 * c->measured + slack,
                     qPrintable(QString("%1: predicted %2, measured %3").arg(metric).arg(c->predicted).arg(c->measured)));
        };
        for (const char* metric : {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "flops",
                                   "matmul_flops"})
            check(metric, 0);
        // Collective bytes: up to the step's two fp64 scalars (collectiveBytes above).
        for (const char* metric : {"comm_bytes", "all_reduce_bytes", "all_gather_bytes", "reduce_scatter_bytes",
                                   "send_recv_bytes"})
            check(metric, 2 * 8.0);
        QCOMPARE(r.measurement.steps.size(), size_t(2));
    }

    // Fitting the element-wise term on engine measurements, reported on held-out cases.
    void engineCalibrationImprovesHeldOutCases()
    {
        // From a start four times off (the shipped term is fitted on published runs, where the
        // engine's optimum need not be): the fit must find its way back on the engine's own runs.
        CostModelParams start = defaultCostModelParams();
        start.elementwise_traffic_factor *= 4;
        const EngineFit fit = fitOnEngine(results_, start, 0.3);
        QVERIFY(fit.holdout_cases.size() >= 4);
        QCOMPARE(fit.fit_cases.size() + fit.holdout_cases.size(), results_.size());
        QVERIFY2(fit.fit_after < fit.fit_before, qPrintable(QString("%1 -> %2").arg(fit.fit_before).arg(fit.fit_after)));
        QVERIFY2(fit.holdout_after < 0.5 * fit.holdout_before,
                 qPrintable(QString("%1 -> %2").arg(fit.holdout_before).arg(fit.holdout_after)));
        QVERIFY(fit.profile.terms.elementwise_traffic_factor > 0.1 && fit.profile.terms.elementwise_traffic_factor < 10);
        // Only the fitted term moved.
        QCOMPARE(fit.profile.terms.dp_overlap, defaultCostModelParams().dp_overlap);
    }

    // The wall-clock model's parts follow the layout: one device has no barriers and runs at
    // the host's roofline; oversubscribed workers share the cores; every collective call and
    // ring step is a barrier (a ZeRO-3 step: per micro-batch and unit, two all-gathers and a
    // reduce-scatter over 4 members, each a call and 3 steps), as the engine runs them.
    void wallClockModelParts()
    {
        const ValidationResult* single = nullptr;
        const ValidationResult* zero3 = nullptr;
        const ValidationResult* dp = nullptr;
        for (const ValidationResult& r : results_) {
            if (r.c.name == "single device")
                single = &r;
            else if (r.c.name == "ZeRO-3")
                zero3 = &r;
            else if (r.c.name == "data parallel")
                dp = &r;
        }
        QVERIFY(single && zero3 && dp);
        QCOMPARE(single->wall.barriers, 0.0);
        QCOMPARE(single->wall.oversubscription, 1.0);
        QCOMPARE(single->wall.compute_s, single->wall.critical_s);
        // Uncalibrated: the host's roofline alone.
        QCOMPARE(single->metric("wall_step_time_s")->predicted, single->wall.critical_s);

        const int cores = single->c.host.cores;
        QCOMPARE(dp->wall.oversubscription, std::max(1.0, 4.0 / cores));
        QCOMPARE(dp->wall.compute_s, std::max(dp->wall.critical_s, dp->wall.oversubscription * dp->wall.busy_s));
        // One gradient bucket, all-reduced over 4: a call and 2 x 3 ring steps; while its members
        // wait, no other worker can use their cores (all 4 are in the group).
        QCOMPARE(dp->wall.barriers, 7.0);
        QCOMPARE(dp->wall.hidden_barriers, 0.0);
        // The 3D case's groups are pairs among 8 workers: on few cores the others fill the waits.
        for (const ValidationResult& r : results_)
            if (r.c.name == "3D")
                QCOMPARE(r.wall.hidden_barriers, cores <= 6 ? r.wall.barriers : 0.0);
        const Layout& l = zero3->c.request.layout;
        const double micro = double(zero3->c.request.batch) / l.dp / l.micro_batch;
        // Units: each layer, and the root (the embeddings and the final norm).
        const double units = zero3->c.request.model.layers + 1;
        QCOMPARE(zero3->wall.barriers, micro * units * 3 * (1 + 3));
    }

    // The emulation's terms are recovered exactly from measurements they generated, and a term
    // the measurements do not support stays at zero.
    void wallTermsAreFittedByLeastSquares()
    {
        std::vector<ValidationResult> synthetic = results_;
        std::vector<const ValidationResult*> cases;
        for (ValidationResult& r : synthetic) {
            for (MetricComparison& m : r.metrics)
                if (m.metric == "wall_step_time_s")
                    m.measured = 1.25 * r.wall.compute_s + 30e-6 * (r.wall.barriers - r.wall.hidden_barriers) +
                                 18e-6 * r.wall.hidden_barriers;
            cases.push_back(&r);
        }
        const EmulationWallTerms t = fitWallTerms(cases, defaultCostModelParams());
        QVERIFY2(std::fabs(t.compute_factor - 1.25) < 1e-9, qPrintable(QString::number(t.compute_factor)));
        QVERIFY2(std::fabs(t.sync_s - 30e-6) < 1e-12, qPrintable(QString::number(t.sync_s)));
        QVERIFY2(std::fabs(t.hidden_sync_s - 18e-6) < 1e-12, qPrintable(QString::number(t.hidden_sync_s)));
        // Measurements with no barrier cost at all: the barrier term is not made negative.
        for (ValidationResult& r : synthetic)
            for (MetricComparison& m : r.metrics)
                if (m.metric == "wall_step_time_s")
                    m.measured = 0.9 * r.wall.compute_s * (r.wall.barriers > 0 ? 0.8 : 1.0);
        const EmulationWallTerms clamped = fitWallTerms(cases, defaultCostModelParams());
        QCOMPARE(clamped.sync_s, 0.0);
        QCOMPARE(clamped.hidden_sync_s, 0.0);
        QVERIFY(clamped.compute_factor > 0.7 && clamped.compute_factor < 0.9);
    }

    // The emulation's terms travel with a profile; a profile without them gets the defaults.
    void wallTermsInProfiles()
    {
        const ValidationProfile p(defaultCostModelParams(), EmulationWallTerms{1.1, 25e-6, 20e-6});
        FieldErrors errors;
        const ValidationProfile back = validationProfileFromJson(toJson(p), "p", errors);
        QVERIFY(errors.empty());
        QVERIFY(back == p);
        // The planner reads the same document for its own terms.
        QVERIFY(costModelParamsFromJson(toJson(p), "p", errors) == p.terms);
        QVERIFY(errors.empty());
        const ValidationProfile plain = validationProfileFromJson(toJson(defaultCostModelParams()), "p", errors);
        QVERIFY(errors.empty());
        QVERIFY(plain.wall == EmulationWallTerms{});
        QJsonObject bad = toJson(p);
        bad.insert("emulation_wall", QJsonObject{{"compute_factor", -1}, {"sync_s", 1e-6}});
        validationProfileFromJson(bad, "p", errors);
        QVERIFY(!errors.empty());
        QVERIFY2(QString::fromStdString(errors.front().path).contains("emulation_wall.compute_factor"),
                 errors.front().path.c_str());
    }

    // A fitted profile is stored under a name and used on request; the default never changes.
    void namedCostProfiles()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        RunStore& runs = store.runs();
        // From a start four times off (the shipped term is fitted on published runs, where the
        // engine's optimum need not be): the fit must find its way back on the engine's own runs.
        CostModelParams start = defaultCostModelParams();
        start.elementwise_traffic_factor *= 4;
        const EngineFit fit = fitOnEngine(results_, start, 0.3);
        runs.storeCostProfile("engine", fit.profile);
        const CostModelParams loaded = runs.costModelParamsNamed("engine");
        QCOMPARE(loaded.name, std::string("engine"));
        QCOMPARE(loaded.elementwise_traffic_factor, fit.profile.terms.elementwise_traffic_factor);
        QCOMPARE(runs.costModelParamsNamed("default").elementwise_traffic_factor,
                 defaultCostModelParams().elementwise_traffic_factor);
        QVERIFY_THROWS_EXCEPTION(InputError, runs.storeCostProfile("default", fit.profile));
        // The wall terms are stored with it, for validation.
        QVERIFY(runs.validationProfileNamed("engine").wall == fit.profile.wall);
        try {
            runs.costModelParamsNamed("missing");
            QFAIL("an unknown profile must be refused");
        } catch (const InputError& e) {
            QVERIFY(QString(e.what()).contains("engine"));  // names the profiles there are
        }
    }

    void historyKeepsEveryRun()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        const QJsonObject doc = validationDocument(results_);
        const int first = store.runs().storeValidationRun("suite", doc);
        const int second = store.runs().storeValidationRun("again", doc);
        QVERIFY(second > first);
        const auto runs = store.runs().validationRuns();
        QCOMPARE(runs.size(), size_t(2));
        QCOMPARE(runs.front().name, std::string("again"));  // newest first
        QVERIFY(runs.front().document == doc);
        QVERIFY(!runs.front().software_version.empty());
    }

    // `calibrate --from-history`: stored runs are priced again from their requests, without the
    // engine; the fit on them equals the fit on the live results.
    void historyRefitsLikeLiveRuns()
    {
        const QJsonObject doc = validationDocument(results_);
        const QJsonArray cases = doc.value("cases").toArray();
        std::vector<ValidationResult> stored;
        for (qsizetype i = 0; i < cases.size(); ++i)
            stored.push_back(validationResultFromJson(cases[i].toObject(), "cases[" + std::to_string(i) + "]"));
        QCOMPARE(stored.size(), results_.size());
        for (size_t i = 0; i < stored.size(); ++i) {
            QCOMPARE(stored[i].c.name, results_[i].c.name);
            QCOMPARE(toString(stored[i].c.request.layout), toString(results_[i].c.request.layout));
            QCOMPARE(stored[i].c.profile.peak_flops_fp32, results_[i].c.profile.peak_flops_fp32);
            QCOMPARE(stored[i].c.request.links.intra_bytes_per_second, results_[i].c.request.links.intra_bytes_per_second);
            QCOMPARE(stored[i].c.request.bucket_bytes, results_[i].c.request.bucket_bytes);
            QCOMPARE(stored[i].moe_step_load, results_[i].moe_step_load);  // (0: none measured)
            // The rebuilt problem prices the case exactly as the live run did.
            const CostModel model(stored[i].problem,
                                  engineCostModelParams(stored[i].c.profile, stored[i].c.request.links,
                                                        stored[i].c.request.bucket_bytes, defaultCostModelParams()));
            QCOMPARE(model.evaluate(stored[i].c.request.layout).step_time_s, results_[i].prediction.step_time_s);
        }
        const EngineFit live = fitOnEngine(results_, defaultCostModelParams(), 0.3);
        const EngineFit history = fitOnEngine(stored, defaultCostModelParams(), 0.3);
        QCOMPARE(history.profile.terms.elementwise_traffic_factor, live.profile.terms.elementwise_traffic_factor);
        QCOMPARE(history.holdout_after, live.holdout_after);
        QVERIFY(history.holdout_errors_after == live.holdout_errors_after);
        // The host came back too: the wall-clock fit is the same.
        QCOMPARE(stored[0].c.host.cores, results_[0].c.host.cores);
        QCOMPARE(stored[0].c.host.profile.peak_flops_fp32, results_[0].c.host.profile.peak_flops_fp32);
        // The wall clock is fitted on the cases it is compared on: a core for every device thread.
        size_t comparable = 0;
        for (const ValidationResult& r : results_)
            comparable += wallClockComparable(r.c) &&
                          std::find(history.holdout_cases.begin(), history.holdout_cases.end(), r.c.name) ==
                              history.holdout_cases.end();
        QVERIFY(comparable >= 1);
        QCOMPARE(history.wall.fit_cases.size(), comparable);
        QVERIFY(history.profile.wall == live.profile.wall);
        QCOMPARE(history.wall.holdout_after.median, live.wall.holdout_after.median);

        // A malformed stored request names its field; a run stored without one says so.
        QJsonObject bad = cases[0].toObject();
        QJsonObject request = bad.value("request").toObject();
        QJsonObject model = request.value("model").toObject();
        model.insert("heads", -3);
        request.insert("model", model);
        request.insert("layout", "tp=x");
        bad.insert("request", request);
        try {
            validationResultFromJson(bad, "cases[0]");
            QFAIL("a malformed request must be refused");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("cases[0].request.model.heads"), e.what());
            QVERIFY2(QString(e.what()).contains("cases[0].request.layout.tp"), e.what());
        }
        bad.remove("request");
        QVERIFY_THROWS_EXCEPTION(InputError, validationResultFromJson(bad, "cases[0]"));
        // A stored MoE step load below 1 (or not a number) is refused by its field, not priced.
        for (const QJsonValue& load : {QJsonValue(0.5), QJsonValue("x")}) {
            QJsonObject moe = cases[0].toObject();
            moe.insert("moe", QJsonObject{{"step_load", load}});
            try {
                validationResultFromJson(moe, "cases[0]");
                QFAIL("a malformed step load must be refused");
            } catch (const InputError& e) {
                QVERIFY2(QString(e.what()).contains("cases[0].moe.step_load"), e.what());
            }
        }
    }

    void documentContract()
    {
        const QJsonObject doc = validationDocument(results_);
        QCOMPARE(doc.value("schema").toString(), QString("shardscope.validation/1"));
        const QJsonArray cases = doc.value("cases").toArray();
        QCOMPARE(cases.size(), qsizetype(results_.size()));
        for (const QJsonValue& c : cases) {
            const QJsonObject o = c.toObject();
            QVERIFY(o.contains("name") && o.contains("layout"));
            for (const std::string& metric : validationMetrics()) {
                const QJsonObject m = o.value("metrics").toObject().value(QString::fromStdString(metric)).toObject();
                for (const char* key : {"predicted", "measured", "rel_error", "worst_device"})
                    QVERIFY2(m.contains(key), (metric + "." + key).c_str());
            }
        }
        const QJsonObject summary = doc.value("summary").toObject();
        for (const std::string& metric : validationMetrics()) {
            const QJsonObject s = summary.value(QString::fromStdString(metric)).toObject();
            QVERIFY(s.contains("median_rel_error") && s.contains("worst_rel_error"));
            QVERIFY(s.value("median_rel_error").toDouble() <= s.value("worst_rel_error").toDouble());
        }
        QCOMPARE(summary.value("weights_bytes").toObject().value("worst_rel_error").toDouble(), 0.0);
        // Where a metric is not exact, the document says which term of the model differs.
        for (const QJsonValue& c : cases) {
            const QJsonObject o = c.toObject();
            const QJsonObject metrics = o.value("metrics").toObject();
            QVERIFY(metrics.value("device_step_time_s").toObject().value("known_difference").toString().contains(
                "uncalibrated"));  // the default terms price these cases
            for (const char* exact : {"weights_bytes", "activations_bytes", "flops", "comm_bytes", "all_gather_bytes",
                                      "all_to_all_bytes"}) {
                const QJsonObject m = metrics.value(exact).toObject();
                // (MoE under expert parallelism: the activations follow the measured routing, said so.)
                if (QLatin1String(exact) == QLatin1String("activations_bytes") && o.value("moe").toObject().contains("busiest_device_load")) {
                    QVERIFY(m.value("known_difference").toString().contains("routing-dependent"));
                    continue;
                }
                if (QLatin1String(exact) == QLatin1String("activations_bytes") && m.value("rel_error").toDouble() != 0 &&
                    m.value("known_difference").toString().contains("routing-dependent"))
                    continue;  // (pp > 1: several micro-batches' routed sets in flight)
                // (etp > 1: each member's received copies gathered over etp, said so.)
                if (QLatin1String(exact) != QLatin1String("activations_bytes") && m.value("rel_error").toDouble() != 0 &&
                    m.value("known_difference").toString().contains("expert tensor parallelism"))
                    continue;
                QVERIFY2(!m.contains("known_difference"), qPrintable(o.value("name").toString() + " " + exact));
            }
        }
        // The device clock's breakdown on both sides adds up to the compared step times.
        for (const QJsonValue& c : cases) {
            const QJsonObject o = c.toObject();
            const QJsonObject step = o.value("metrics").toObject().value("device_step_time_s").toObject();
            const QJsonObject breakdown = o.value("device_time_breakdown").toObject();
            for (const char* side : {"predicted", "measured"}) {
                double sum = 0;
                for (const QJsonValue& v : breakdown.value(side).toObject())
                    sum += v.toDouble();
                const double expected = step.value(side).toDouble();
                QVERIFY2(std::fabs(sum - expected) <= 1e-9 * expected,
                         qPrintable(QString("%1 %2: %3 vs %4").arg(o.value("name").toString(), side).arg(sum).arg(expected)));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TstValidation)
#include "tst_validation.moc"
