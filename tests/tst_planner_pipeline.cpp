// The pipeline schedule simulation against the bubble formulas (Narayanan et al.
// 2021, Section 2.2): with equal stages, the makespan is (m + p - 1)(t_f + t_b) for
// GPipe and 1F1B and m(t_f + t_b) + (p - 1)(t_f + t_b)/v for interleaved 1F1B; and
// the schedules' own rules (dependencies, warm-up depth, in-flight micro-batches).
#include "PipelineSchedule.h"

#include <QTest>

#include <random>

#include <cmath>
#include <map>

using namespace shardscope;

class TstPlannerPipeline : public QObject {
    Q_OBJECT
private slots:
    void makespanMatchesBubbleFormula_data()
    {
        QTest::addColumn<int>("schedule");
        QTest::addColumn<int>("p");
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("v");
        QTest::newRow("1f1b p=4 m=8") << int(PipelineSchedule::OneFOneB) << 4 << 8 << 1;
        QTest::newRow("1f1b p=8 m=3") << int(PipelineSchedule::OneFOneB) << 8 << 3 << 1;
        QTest::newRow("gpipe p=4 m=16") << int(PipelineSchedule::GPipe) << 4 << 16 << 1;
        QTest::newRow("interleaved p=4 m=8 v=2") << int(PipelineSchedule::Interleaved) << 4 << 8 << 2;
        QTest::newRow("interleaved p=4 m=16 v=4") << int(PipelineSchedule::Interleaved) << 4 << 16 << 4;
        QTest::newRow("interleaved p=2 m=4 v=3") << int(PipelineSchedule::Interleaved) << 2 << 4 << 3;
    }
    void makespanMatchesBubbleFormula()
    {
        QFETCH(int, schedule);
        QFETCH(int, p);
        QFETCH(int, m);
        QFETCH(int, v);
        const double tf = 1.0, tb = 2.0;
        const PipelineTimeline t = simulatePipeline(PipelineSchedule(schedule), p, m, v, tf, tb);
        const double expected = m * (tf + tb) + (p - 1) * (tf + tb) / (PipelineSchedule(schedule) ==
                                                                       PipelineSchedule::Interleaved ? v : 1);
        QVERIFY2(std::fabs(t.makespan_s - expected) < 1e-9,
                 qPrintable(QString("makespan %1, expected %2").arg(t.makespan_s).arg(expected)));
        QCOMPARE(t.ops.size(), size_t(2 * p * m * t.chunks));
        // Bubble fraction of the ideal time: (p - 1) / (v m).
        const double ideal = m * (tf + tb);
        QVERIFY(std::fabs((t.makespan_s - ideal) / ideal - (p - 1.0) / (t.chunks * m)) < 1e-9);
    }

    void dependenciesHold()
    {
        const PipelineTimeline t = simulatePipeline(PipelineSchedule::Interleaved, 4, 8, 2, 1.0, 2.0);
        using Key = std::tuple<int, int, bool>;  // (virtual stage, micro-batch, backward)
        std::map<Key, PipelineOp> byVirtualStage;
        for (const PipelineOp& op : t.ops)
            byVirtualStage[Key(op.chunk * 4 + op.stage, op.micro_batch, op.backward)] = op;
        QCOMPARE(byVirtualStage.size(), t.ops.size());
        auto endOf = [&](int vs, int mb, bool backward) { return byVirtualStage.at(Key(vs, mb, backward)).end_s; };
        for (const auto& [key, op] : byVirtualStage) {
            const auto [vs, mb, backward] = key;
            if (!backward && vs > 0)
                QVERIFY(op.start_s >= endOf(vs - 1, mb, false) - 1e-12);
            if (backward && vs < 7)
                QVERIFY(op.start_s >= endOf(vs + 1, mb, true) - 1e-12);
            if (backward)
                QVERIFY(op.start_s >= endOf(vs, mb, false) - 1e-12);
        }
        // No device runs two ops at once.
        std::map<int, double> lastEnd;
        for (const PipelineOp& op : t.ops) {
            QVERIFY(op.start_s >= lastEnd[op.stage] - 1e-12);
            lastEnd[op.stage] = op.end_s;
        }
    }

    // 1F1B keeps at most p - s micro-batches in flight on stage s; GPipe keeps all m.
    void inFlightMicroBatches()
    {
        const int p = 4, m = 12;
        for (PipelineSchedule schedule : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe}) {
            const PipelineTimeline t = simulatePipeline(schedule, p, m, 1, 1.0, 2.0);
            for (int s = 0; s < p; ++s) {
                int inFlight = 0, peak = 0;
                for (const PipelineOp& op : t.ops) {
                    if (op.stage != s)
                        continue;
                    inFlight += op.backward ? -1 : 1;
                    peak = std::max(peak, inFlight);
                }
                QCOMPARE(peak, schedule == PipelineSchedule::GPipe ? m : p - s);
            }
        }
    }

    void peakInFlightBytesEqualsTheWalk()
    {
        // The periodic form against the op-by-op walk: every schedule, stage and size here,
        // with uneven whole-number chunk bytes (the first stage's embedding, uneven splits).
        std::mt19937 gen(7);
        std::uniform_int_distribution<int> bytes(1, 1'000'000);
        int checked = 0;
        for (PipelineSchedule sched : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved})
            for (int p = 1; p <= 6; ++p)
                for (int v = 1; v <= (sched == PipelineSchedule::Interleaved ? 4 : 1); ++v)
                    for (int m : {1, 2, 3, 5, 8, 12, 24, 30, 96})
                        for (int s = 0; s < p; ++s) {
                            if (sched == PipelineSchedule::Interleaved && m % p != 0)
                                continue;
                            std::vector<double> chunk(static_cast<size_t>(v));
                            for (double& c : chunk)
                                c = bytes(gen);
                            const double walked = peakInFlightBytesByWalk(sched, p, s, m, chunk.data(), v);
                            QCOMPARE(peakInFlightBytes(sched, p, s, m, chunk.data(), v), walked);
                            ++checked;
                        }
        QVERIFY(checked > 500);
    }

    void peakInFlightBytesWalksTheSchedule()
    {
        // GPipe and 1F1B: m and min(m, p - s) micro-batches. Interleaved, equal chunks: Megatron-LM's
        // warm-up (p - s - 1) 2 + (v - 1) p forwards plus the first steady forward, all m v pairs
        // when the warm-up reaches them (get_pp_rank_microbatches in schedules.py).
        for (int p = 2; p <= 5; ++p)
            for (int s = 0; s < p; ++s)
                for (const int m : {p, 2 * p, 4 * p}) {
                    QCOMPARE(peakInFlightBytes(PipelineSchedule::GPipe, p, s, m, {3.0}), 3.0 * m);
                    QCOMPARE(peakInFlightBytes(PipelineSchedule::OneFOneB, p, s, m, {3.0}), 3.0 * std::min(m, p - s));
                    for (int v = 2; v <= 4; ++v) {
                        const int warmup = (p - s - 1) * 2 + (v - 1) * p;
                        const int pairs = warmup >= m * v ? m * v : warmup + 1;
                        QCOMPARE(peakInFlightBytes(PipelineSchedule::Interleaved, p, s, m, std::vector<double>(size_t(v), 3.0)),
                                 3.0 * pairs);
                        // Megatron's combined 1F1B (overlap_moe_expert_parallel_comm): one warm-up
                        // forward more, so one pair more at the peak (all m v at most).
                        const std::vector<double> chunks(size_t(v), 3.0);
                        QCOMPARE(peakInFlightBytes(PipelineSchedule::Interleaved, p, s, m, chunks.data(), v, 1),
                                 3.0 * std::min(m * v, warmup + 1 >= m * v ? m * v : warmup + 2));
                    }
                }
        // Unequal chunks: the peak is of the bytes, not of the count. p = 2, v = 2, m = 8 on stage 1
        // holds (0,0) (1,0) (0,1), then (0,0) (1,0) (1,1), then (0,0) (1,0) (2,0), ...: one of chunk 1.
        QCOMPARE(peakInFlightBytes(PipelineSchedule::Interleaved, 2, 1, 8, {1.0, 10.0}), 12.0);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 peakInFlightBytes(PipelineSchedule::Interleaved, 4, 0, 6, {1.0, 1.0}));
    }

    void impossibleScheduleRefused()
    {
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 simulatePipeline(PipelineSchedule::Interleaved, 4, 6, 2, 1.0, 2.0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, simulatePipeline(PipelineSchedule::OneFOneB, 0, 6, 1, 1.0, 2.0));
    }
};

QTEST_GUILESS_MAIN(TstPlannerPipeline)
#include "tst_planner_pipeline.moc"
