// EmulatedDevice: the allocator's accounting by category and its out-of-memory
// error (device, category, requested and free bytes, and the device stays
// usable), the roofline clock, the kernel pool's split, and device profiles
// from the catalog's chips (scaled) and from this host (measured).
#include "Device.h"

#include <QTest>

#include <atomic>
#include <cmath>
#include <vector>

using namespace shardscope;
using namespace shardscope::engine;

namespace {

DeviceProfile testProfile(double capacity)
{
    DeviceProfile p;
    p.name = "testchip";
    p.memory_bytes = capacity;
    p.peak_flops_fp32 = 1e12;
    p.peak_flops_bf16 = 4e12;
    p.memory_bytes_per_second = 1e11;
    p.kernel_overhead_s = 2e-6;
    return p;
}

} // namespace

class TstEngineDevice : public QObject {
    Q_OBJECT

private slots:
    void allocatorCountsByCategory()
    {
        DeviceAllocator a("device 0 (testchip)", 10000);
        {
            DeviceBuffer w = a.allocate(MemoryCategory::Weights, 1000, 500, 4);  // bf16 on device, float on host
            QCOMPARE(w.elements(), size_t(500));
            QVERIFY(reinterpret_cast<std::uintptr_t>(w.as<float>()) % 64 == 0);
            QCOMPARE(w.as<float>()[499], 0.0f);  // zero-filled
            DeviceBuffer act = a.allocate(MemoryCategory::Activations, 3000, 750, 4);
            QCOMPARE(a.currentBytes(MemoryCategory::Weights), 1000.0);
            QCOMPARE(a.currentBytes(MemoryCategory::Activations), 3000.0);
            QCOMPARE(a.usedBytes(), 4000.0);
            act.release();
            QCOMPARE(a.currentBytes(MemoryCategory::Activations), 0.0);
            DeviceBuffer act2 = a.allocate(MemoryCategory::Activations, 2000, 500, 4);
            DeviceBuffer moved = std::move(act2);  // a move does not double count
            QCOMPARE(a.currentBytes(MemoryCategory::Activations), 2000.0);
        }
        QCOMPARE(a.usedBytes(), 0.0);
        QCOMPARE(a.peakBytes(MemoryCategory::Weights), 1000.0);
        QCOMPARE(a.peakBytes(MemoryCategory::Activations), 3000.0);
        QCOMPARE(a.peakTotalBytes(), 4000.0);  // weights 1000 + first activations 3000
        QCOMPARE(a.peakBytes(MemoryCategory::Optimizer), 0.0);
        a.resetPeaks();
        QCOMPARE(a.peakTotalBytes(), 0.0);
    }

    void outOfMemoryIsClearAndSurvivable()
    {
        DeviceAllocator a("device 3 (trainium1:0.001)", 1 << 20);  // 1 MiB
        DeviceBuffer w = a.allocate(MemoryCategory::Weights, 600 * 1024, 150 * 1024, 4);
        bool thrown = false;
        try {
            DeviceBuffer g = a.allocate(MemoryCategory::Gradients, 600 * 1024, 150 * 1024, 4);
        } catch (const DeviceOutOfMemory& e) {
            thrown = true;
            const QString m = QString::fromUtf8(e.what());
            QVERIFY2(m.contains("device 3 (trainium1:0.001)"), qPrintable(m));
            QVERIFY2(m.contains("gradients"), qPrintable(m));
            QVERIFY2(m.contains("614,400 bytes"), qPrintable(m));  // requested
            QVERIFY2(m.contains("434,176 bytes"), qPrintable(m));  // free: 1 MiB - 600 KiB
            QCOMPARE(e.category(), MemoryCategory::Gradients);
            QCOMPARE(e.requestedBytes(), 614400.0);
            QCOMPARE(e.freeBytes(), 434176.0);
        }
        QVERIFY(thrown);
        // Nothing was counted for the failed request; a fitting one still works.
        QCOMPARE(a.currentBytes(MemoryCategory::Gradients), 0.0);
        QCOMPARE(a.peakBytes(MemoryCategory::Gradients), 0.0);
        DeviceBuffer g = a.allocate(MemoryCategory::Gradients, 400 * 1024, 100 * 1024, 4);
        QCOMPARE(a.usedBytes(), 1000.0 * 1024);
    }

    void clockIsRoofline()
    {
        EmulatedDevice d(0, testProfile(1e9));
        // compute-bound: 2e9 FLOP at 1e12 = 2 ms; 1e6 bytes at 1e11 = 10 us
        d.charge(KernelKind::Matmul, {2e9, 5e5, 5e5}, DataType::FP32);
        QVERIFY(std::fabs(d.clockSeconds() - (2e-3 + 2e-6)) < 1e-12);
        // the same kernel in bf16 runs at 4e12: 0.5 ms
        d.charge(KernelKind::Matmul, {2e9, 5e5, 5e5}, DataType::BF16);
        QVERIFY(std::fabs(d.clockSeconds() - (2.5e-3 + 4e-6)) < 1e-12);
        // memory-bound: 1e3 FLOP, 1e8 bytes at 1e11 = 1 ms
        d.charge(KernelKind::Gelu, {1e3, 5e7, 5e7}, DataType::FP32);
        QVERIFY(std::fabs(d.clockSeconds() - (3.5e-3 + 6e-6)) < 1e-12);
        const DeviceCounters& c = d.counters();
        QCOMPARE(c.flops[size_t(KernelKind::Matmul)], 4e9);
        QCOMPARE(c.calls[size_t(KernelKind::Matmul)], std::int64_t(2));
        QCOMPARE(c.bytes_read, 5e5 + 5e5 + 5e7);
        QCOMPARE(c.totalFlops(), 4e9 + 1e3);
        d.resetCounters();
        QCOMPARE(d.clockSeconds(), 0.0);
        // A profile without the needed peak says so instead of dividing by zero.
        DeviceProfile noFp32 = testProfile(1e9);
        noFp32.peak_flops_fp32 = 0;
        EmulatedDevice e(1, noFp32);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, e.charge(KernelKind::Matmul, {1, 0, 0}, DataType::FP32));
    }

    void poolCoversEveryIndexOnce_data()
    {
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("grain");
        QTest::newRow("1 thread") << 1 << 1000 << 16;
        QTest::newRow("2 threads") << 2 << 1000 << 16;
        QTest::newRow("3 threads, ragged") << 3 << 1001 << 7;
        QTest::newRow("fewer blocks than threads") << 4 << 10 << 8;
    }
    void poolCoversEveryIndexOnce()
    {
        QFETCH(int, threads);
        QFETCH(int, n);
        QFETCH(int, grain);
        KernelPool pool(threads);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> misaligned{0};  // QTest macros are for the test's own thread only
        for (int round = 0; round < 50; ++round)  // many regions back to back: the spin/sleep hand-over
            pool.parallelFor(n, grain, [&](std::int64_t b, std::int64_t e) {
                misaligned += b % grain != 0;
                for (std::int64_t i = b; i < e; ++i)
                    hits[size_t(i)]++;
            });
        QCOMPARE(misaligned.load(), 0);
        for (int i = 0; i < n; ++i)
            QCOMPARE(hits[size_t(i)].load(), 50);
        // An exception in a part reaches the caller and the pool keeps working.
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, pool.run(threads, [threads](int part) {
            if (part == threads - 1)
                throw std::runtime_error("part failed");
        }));
        std::atomic<int> covered{0};
        pool.parallelFor(n, grain, [&](std::int64_t b, std::int64_t e) { covered += int(e - b); });
        QCOMPARE(covered.load(), n);
    }

    void profileFromChipIsPerDeviceAndScaled()
    {
        ChipSpec chip;
        chip.name = "trainium1";
        chip.peak_flops_fp32 = 47.5e12;
        chip.peak_flops_bf16 = 190e12;
        chip.hbm_bytes = 32.0 * (1ull << 30);
        chip.hbm_bytes_per_second = 820.0 * (1ull << 30);
        chip.devices_per_chip = 2;
        const DeviceProfile full = profileFromChip(chip);
        QCOMPARE(full.name, std::string("trainium1"));
        QCOMPARE(full.memory_bytes, 16.0 * (1ull << 30));
        QCOMPARE(full.peak_flops_bf16, 95e12);
        QCOMPARE(full.memory_bytes_per_second, 410.0 * (1ull << 30));
        const DeviceProfile small = profileFromChip(chip, 0.001);
        QCOMPARE(small.name, std::string("trainium1:0.001"));
        QVERIFY(std::fabs(small.memory_bytes - 16.0 * (1ull << 30) * 0.001) < 1);
        QVERIFY(std::fabs(small.peak_flops_fp32 - 23.75e9) < 1);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, profileFromChip(chip, 0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, profileFromChip(chip, 2));
    }

    void hostProfileIsMeasured()
    {
        // Values are whatever this machine does; only their sanity is checked, never a time.
        const DeviceProfile p = measureHostProfile(1);
        QCOMPARE(p.name, std::string("host"));
        QVERIFY(p.measured);
        QVERIFY(p.peak_flops_fp32 > 1e8);     // any CPU sustains 0.1 GFLOP/s
        QCOMPARE(p.peak_flops_bf16, p.peak_flops_fp32);
        QVERIFY(p.memory_bytes_per_second > 1e8);
        QVERIFY(p.memory_bytes > 64.0 * (1 << 20));
        QCOMPARE(p.kernel_overhead_s, 0.0);  // one thread: no parallel region to pay for
    }
};

QTEST_GUILESS_MAIN(TstEngineDevice)
#include "tst_engine_device.moc"
