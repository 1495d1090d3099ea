// Model-state memory per device under ZeRO against the paper's own example
// (Rajbhandari et al., SC'20, Figure 1: 7.5B parameters, 64 devices, K = 12).
#include "ModelStateMemory.h"

#include <QTest>

#include <cmath>

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
        const ModelStateBytes b = modelStateBytes(7.5e9, stage, 64, Precision::BF16Mixed, Optimizer::AdamW);
        QCOMPARE(std::round(b.total() / 1e8) / 10.0, publishedGB);
    }

    void formulaTerms()
    {
        // (2 + 2 + K) P with K = 12, split by state.
        const ModelStateBytes none = modelStateBytes(1e9, 0, 8, Precision::BF16Mixed, Optimizer::AdamW);
        QCOMPARE(none.weights, 2e9);
        QCOMPARE(none.gradients, 2e9);
        QCOMPARE(none.optimizer, 12e9);
        const ModelStateBytes z2 = modelStateBytes(1e9, 2, 8, Precision::BF16Mixed, Optimizer::AdamW);
        QCOMPARE(z2.weights, 2e9);
        QCOMPARE(z2.gradients, 2e9 / 8);
        QCOMPARE(z2.optimizer, 12e9 / 8);
        // fp32 training: 4 + 4 + 8 bytes, no master copy.
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::FP32, Optimizer::AdamW).total(), 16e9);
        // SGD with momentum keeps one moment: K = 4 + 4.
        QCOMPARE(modelStateBytes(1e9, 0, 1, Precision::BF16Mixed, Optimizer::Sgd).optimizer, 8e9);
    }
};

QTEST_GUILESS_MAIN(TstPlannerMemory)
#include "tst_planner_memory.moc"
