// The host profile is measured once per machine and thread count, kept in the run store,
// reused, and measured again on request or when the engine's kernels changed
// (app/common/HostProfileCache.h over engine/HostMeasurement.h and store/RunStore.h).
#include "HostMeasurement.h"
#include "HostProfileCache.h"
#include "Store.h"

#include <QTemporaryDir>
#include <QTest>

using namespace shardscope;
using namespace shardscope::engine;

class TstAppHostProfile : public QObject {
    Q_OBJECT
private slots:
    void measuredOnceThenReused()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        RunStore& runs = store.runs();
        QVERIFY(!storedHostProfile(runs, 1));
        const CachedHostProfile first = cachedHostProfile(runs, 1);
        QVERIFY(first.measured_now);
        QVERIFY(first.profile.peak_flops_fp32 > 1e8);        // any real CPU sustains more than 0.1 GFLOP/s
        QVERIFY(first.profile.memory_bytes_per_second > 1e8);
        const CachedHostProfile second = cachedHostProfile(runs, 1);
        QVERIFY(!second.measured_now);
        QCOMPARE(second.profile.peak_flops_fp32, first.profile.peak_flops_fp32);
        QCOMPARE(second.profile.memory_bytes_per_second, first.profile.memory_bytes_per_second);
        QCOMPARE(second.measured_at, first.measured_at);
        QVERIFY(second.profile.measured);
        QCOMPARE(second.profile.name, std::string("host"));
        QCOMPARE(storedHostProfile(runs, 1)->profile.peak_flops_fp32, first.profile.peak_flops_fp32);
        // Another thread count is another measurement.
        QVERIFY(!runs.hostProfile(hostId(), 2).has_value());
        // On request, measured again and stored.
        QVERIFY(cachedHostProfile(runs, 1, true).measured_now);
        QCOMPARE(runs.hostProfiles().size(), size_t(1));
    }

    void staleKernelVersionIsMeasuredAgain()
    {
        QTemporaryDir dir;
        Store store(dir.filePath("c.sqlite"));
        RunStore& runs = store.runs();
        HostProfile old;
        old.host_id = hostId();
        old.cpu = cpuModel();
        old.threads = 1;
        old.gemm_flops_fp32 = 1e9;
        old.memory_bytes_per_second = 1e9;
        old.measured_at = "2020-01-01T00:00:00Z";
        old.engine_version = kEngineKernelVersion - 1;
        runs.storeHostProfile(old);
        QVERIFY(!storedHostProfile(runs, 1));  // stale: not offered without measuring
        const CachedHostProfile now = cachedHostProfile(runs, 1);
        QVERIFY(now.measured_now);
        QCOMPARE(runs.hostProfile(hostId(), 1)->engine_version, kEngineKernelVersion);
    }

    void hostIdNamesTheCpu()
    {
        QVERIFY(hostId().find(cpuModel()) != std::string::npos);
        QVERIFY(!cpuModel().empty());
    }
};

QTEST_GUILESS_MAIN(TstAppHostProfile)
#include "tst_app_hostprofile.moc"
