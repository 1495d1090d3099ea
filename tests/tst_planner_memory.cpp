// Model-state memory per device under ZeRO against the paper's own example
// (Rajbhandari et al., SC'20, Figure 1: 7.5B parameters, 64 devices, K = 12).
#include "ModelStateMemory.h"
#include "ZeroShardShare.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <QTest>

#include <cmath>
#include <initializer_list>

using namespace shardscope;

class TstPlannerMemory : public QObject {
    Q_OBJECT
private slots:
    void zeroPaperExample_data()
    {
        QTest::addColumn<int>("stage");
        QTest::addColumn<double>("publishedGB");
        QTest::newRow("baseline") << 0 << 120.0;
        QTest::newRow("ZeRO-1 (P_os)") << 1 << 31.4;
        QTest::newRow("ZeRO-2 (P_os+g)") << 2 << 16.6;
        QTest::newRow("ZeRO-3 (P_os+g+p)") << 3 << 1.9;
    }
    void zeroPaperExample()
    {
        QFETCH(int, stage);
        QFETCH(double, publishedGB);
        // The paper's 2 + 2 + 12: 16-bit gradients.
        const ModelStateBytes b =
            modelStateBytes(7.5e9, stage, 64, Precision::BF16Mixed, Optimizer::AdamW, MainGrads::BF16);
        QCOMPARE(std::round(b.total() / 1e8) / 10.0, publishedGB);
    }

    // The marked values each ZeRO shard member owns (ZeroShardShare.h), derived by hand. A unit of 10
    // values, [2 marked][5][3 marked], over 4 members owns [0,2) [2,5) [5,7) [7,10): member 0 holds 2
    // marked values, member 3 the last 3. Twice that unit and once a unit [1][3 marked] (members own
    // one value each: 1, 2 and 3 get one marked each): 4, 1, 1, 7 — the most 7, the mean 13 / 4.
    void markedSharesPerMember()
    {
        struct Run {  // values of a unit, marked or not
            double values;
            bool marked;
        };
        auto layoutOf = [](std::initializer_list<Run> runs) {
            UnitLayout u;
            for (const Run& r : runs)
                u.add(r.values, r.marked);
            return u;
        };
        MarkedShares shares(4);
        shares.addUnit(layoutOf({{2, true}, {5, false}, {3, true}}), 2);
        shares.addUnit(layoutOf({{1, false}, {3, true}}), 1);
        QVERIFY(!shares.overflowed());
        QCOMPARE(shares.most(), 7.0);
        QCOMPARE(shares.mean(), 13.0 / 4);
        // A marked run across members: each its own chunk of it (8 over 4: 2 each); empty runs add nothing.
        MarkedShares even(4);
        even.addUnit(layoutOf({{8, true}, {0, false}}), 3);
        QCOMPARE(even.most(), 6.0);
        QCOMPARE(even.mean(), 6.0);
        // Uneven chunks: 7 values over 2 members own [0,3) and [3,7); [3 marked][4] gives member 0 all 3.
        MarkedShares two(2);
        two.addUnit(layoutOf({{3, true}, {4, false}}), 1);
        QCOMPARE(two.most(), 3.0);
        // More runs than a unit holds: overflowed, the caller prices the mean.
        UnitLayout many;
        for (int i = 0; i < UnitLayout::kMaxSegments + 1; ++i)
            many.add(1, i % 2 == 0);
        QVERIFY(!many.valid());
        MarkedShares lost(2);
        lost.addUnit(many, 1);
        QVERIFY(lost.overflowed());
        // A group of 1000: a unit of 1000 values, the first 128 and the last 2 marked, each member one
        // value. Twice: 130 ranks hold 2 each (past kMaxRanks: overflowed). The first 128 alone: 2 each.
        MarkedShares wide(1000);
        wide.addUnit(layoutOf({{128, true}, {872, false}}), 2);
        QVERIFY(!wide.overflowed());
        QCOMPARE(wide.most(), 2.0);
        QCOMPARE(wide.mean(), 256.0 / 1000);
        wide.addUnit(layoutOf({{1, true}, {999, false}}), 0.5);  // rank 0 again: 2.5
        QCOMPARE(wide.most(), 2.5);
        wide.addUnit(layoutOf({{998, false}, {2, true}}), 1);
        QVERIFY(wide.overflowed());

        // Against a count value by value: member k owns [floor(n k / g), floor(n (k + 1) / g)), for
        // units of uneven runs over groups that divide them unevenly.
        std::uint64_t state = 12345;
        auto next = [&](int lo, int hi) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            return lo + int((state >> 33) % std::uint64_t(hi - lo + 1));
        };
        for (int trial = 0; trial < 200; ++trial) {
            const int g = next(1, 40);
            std::vector<Run> runs;
            for (int r = next(1, 6); r > 0; --r)
                runs.push_back({double(next(1, 50)), next(0, 1) == 1});
            std::int64_t n = 0;
            for (const Run& r : runs)
                n += std::int64_t(r.values);
            std::vector<double> owned(size_t(g), 0.0);
            std::int64_t at = 0;
            for (const Run& r : runs) {
                for (std::int64_t x = at; x < at + std::int64_t(r.values); ++x)
                    if (r.marked)
                        for (int k = 0; k < g; ++k)
                            if (x >= n * k / g && x < n * (k + 1) / g)
                                owned[size_t(k)] += 3;  // 3 copies
                at += std::int64_t(r.values);
            }
            UnitLayout u;
            for (const Run& r : runs)
                u.add(r.values, r.marked);
            MarkedShares shares(g);
            shares.addUnit(u, 3);
            QVERIFY(!shares.overflowed());
            QCOMPARE(shares.most(), *std::max_element(owned.begin(), owned.end()));
        }
    }

    void formulaTerms()
    {
        // (2 + 2 + K) P with K = 12, split by state (bf16 gradients).
        const auto bf16 = MainGrads::BF16, fp32 = MainGrads::FP32;
        const ModelStateBytes none = modelStateBytes(1e9, 0, 8, Precision::BF16Mixed, Optimizer::AdamW, bf16);
        QCOMPARE(none.weights, 2e9);
        QCOMPARE(none.gradients, 2e9);
        QCOMPARE(none.optimizer, 12e9);
        const ModelStateBytes z2 = modelStateBytes(1e9, 2, 8, Precision::BF16Mixed, Optimizer::AdamW, bf16);
        QCOMPARE(z2.weights, 2e9);
        QCOMPARE(z2.gradients, 2e9 / 8);
        QCOMPARE(z2.optimizer, 12e9 / 8);
        // fp32 main gradients (the default): 4 bytes each, the ZeRO-2 shard 4/8; weights and K unchanged.
        const ModelStateBytes f2 = modelStateBytes(1e9, 2, 8, Precision::BF16Mixed, Optimizer::AdamW, fp32);
        QCOMPARE(f2.weights, 2e9);
        QCOMPARE(f2.gradients, 4e9 / 8);
        QCOMPARE(f2.optimizer, 12e9 / 8);
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::BF16Mixed, Optimizer::AdamW, MainGrads::Default).gradients, 4e9);
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::MXFP8, Optimizer::AdamW, MainGrads::Default).gradients, 4e9);
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::NVFP4, Optimizer::AdamW, bf16).gradients, 2e9);
        // fp16 keeps fp16 gradients (Megatron's --fp16), whatever the default.
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::FP16Mixed, Optimizer::AdamW, MainGrads::Default).gradients, 2e9);
        // The all-gather of the updated parameters stays at the weights' bf16.
        QCOMPARE(stateBytesPerParameter(Precision::BF16Mixed, Optimizer::AdamW, fp32).gathered, 2.0);
        // fp32 training: 4 + 4 + 8 bytes, no master copy.
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::FP32, Optimizer::AdamW, MainGrads::Default).total(), 16e9);
        // SGD with momentum keeps one moment: K = 4 + 4.
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::BF16Mixed, Optimizer::Sgd, bf16).optimizer, 8e9);
    }

    // Megatron-LM's table of bytes per parameter (docs/user-guide/features/dist_optimizer.md @ d98e8a64):
    // "bf16 parameters, fp32 gradients" 18 without the distributed optimizer, 6 + 12/d with it (ZeRO-1:
    // the gradient buffer whole, the fp32 main weights and moments sharded); "fp32 parameters, fp32
    // gradients" 16 and 8 + 8/d.
    void megatronDistributedOptimizerTable_data()
    {
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("d");
        QTest::addColumn<double>("withoutDO");
        QTest::addColumn<double>("withDO");
        for (const int d : {1, 8, 64}) {
            QTest::addRow("bf16 params, fp32 grads, d=%d", d) << int(Precision::BF16Mixed) << d << 18.0 << 6 + 12.0 / d;
            QTest::addRow("fp32 params, fp32 grads, d=%d", d) << int(Precision::FP32) << d << 16.0 << 8 + 8.0 / d;
        }
    }
    void megatronDistributedOptimizerTable()
    {
        QFETCH(int, precision);
        QFETCH(int, d);
        QFETCH(double, withoutDO);
        QFETCH(double, withDO);
        const auto p = Precision(precision);
        QCOMPARE(modelStateBytes(1, 0, d, p, Optimizer::AdamW, MainGrads::Default).total(), withoutDO);
        QCOMPARE(modelStateBytes(1, 1, d, p, Optimizer::AdamW, MainGrads::Default).total(), withDO);
    }
};

QTEST_GUILESS_MAIN(TstPlannerMemory)
#include "tst_planner_memory.moc"
