// The host profile is measured once per machine and thread count, kept in the catalog,
// reused, and measured again on request or when the engine's kernels changed.
#include "HostProfileCache.h"

#include <QTemporaryDir>
#include <QTest>

using namespace shardscope;
using namespace shardscope::engine;

class TstEngineHostProfile : public QObject {
    Q_OBJECT
private slots:
    void measuredOnceThenReused()
    {
        QTemporaryDir dir;
        Catalog catalog(dir.filePath("c.sqlite"));
        const CachedHostProfile first = hostProfile(catalog, 1);
        QVERIFY(first.measured_now);
        QVERIFY(first.profile.peak_flops_fp32 > 1e8);        // any real CPU sustains more than 0.1 GFLOP/s
        QVERIFY(first.profile.memory_bytes_per_second > 1e8);
        const CachedHostProfile second = hostProfile(catalog, 1);
        QVERIFY(!second.measured_now);
        QCOMPARE(second.profile.peak_flops_fp32, first.profile.peak_flops_fp32);
        QCOMPARE(second.profile.memory_bytes_per_second, first.profile.memory_bytes_per_second);
        QCOMPARE(second.measured_at, first.measured_at);
        // Another thread count is another measurement.
        QVERIFY(!catalog.hostProfile(hostId(), 2).has_value());
        // On request, measured again and stored.
        QVERIFY(hostProfile(catalog, 1, true).measured_now);
        QCOMPARE(catalog.hostProfiles().size(), size_t(1));
    }

    void staleKernelVersionIsMeasuredAgain()
    {
        QTemporaryDir dir;
        Catalog catalog(dir.filePath("c.sqlite"));
        HostProfile old;
        old.host_id = hostId();
        old.cpu = cpuModel();
        old.threads = 1;
        old.gemm_flops_fp32 = 1e9;
        old.memory_bytes_per_second = 1e9;
        old.measured_at = "2020-01-01T00:00:00Z";
        old.engine_version = kEngineKernelVersion - 1;
        catalog.storeHostProfile(old);
        const CachedHostProfile now = hostProfile(catalog, 1);
        QVERIFY(now.measured_now);
        QCOMPARE(catalog.hostProfile(hostId(), 1)->engine_version, kEngineKernelVersion);
    }

    void hostIdNamesTheCpu()
    {
        QVERIFY(hostId().find(cpuModel()) != std::string::npos);
        QVERIFY(!cpuModel().empty());
    }
};

QTEST_GUILESS_MAIN(TstEngineHostProfile)
#include "tst_engine_hostprofile.moc"
