// The MPI backend through the CLI, as a user runs it: `mpirun -np 3 shardscope-cli train ...
// --backend mpi` prints the same measurement as the threads backend (losses bitwise, bytes per
// collective kind, memory per device, device clocks); `validate --backend mpi --hosts FILE`
// starts itself under mpirun and stores one run; and faults stop every rank with the named
// error instead of hanging: a device out of emulated memory, a NaN (mpi_nan_run), a rank killed
// from outside. Time limits are safety nets (a hang fails the test), not timings.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <sys/types.h>

namespace {

struct Run {
    int exitCode = -1;  // -1: crashed or hung
    QByteArray out, err;
    qint64 ms = 0;
};

QProcessEnvironment environment()
{
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");  // CI runs as root
    e.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    return e;
}

Run run(const QString& program, const QStringList& args, int limitMs = 120'000)
{
    QProcess p;
    p.setProcessEnvironment(environment());
    QElapsedTimer t;
    t.start();
    p.start(program, args);
    Run r;
    if (!p.waitForStarted(-1))
        return r;
    if (!p.waitForFinished(limitMs)) {
        p.kill();
        p.waitForFinished(-1);
        return r;
    }
    r.ms = t.elapsed();
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

Run mpirun(int ranks, const QStringList& args, int limitMs = 120'000)
{
    return run(QStringLiteral(SHARDSCOPE_MPIEXEC),
               QStringList{"--oversubscribe", "-np", QString::number(ranks), SHARDSCOPE_CLI_PATH} + args, limitMs);
}

QJsonObject json(const Run& r)
{
    QJsonParseError e;
    const QJsonDocument d = QJsonDocument::fromJson(r.out, &e);
    if (e.error != QJsonParseError::NoError)
        qWarning("not JSON: %s\n%s", qPrintable(e.errorString()), r.err.constData());
    return d.object();
}

} // namespace

class TstEngineMpiCli : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString db() const { return dir_.filePath("runs.sqlite"); }
    QStringList train(const QString& layout, int devices, const QString& device = "trainium1:0.001") const
    {
        return {"--db", db(), "train", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "32", "--seq",
                "32", "--batch", "8", "--steps", "3", "--devices", QString::number(devices), "--layout", layout,
                "--device", device, "--intra-bw", "1e11", "--inter-bw", "1e10", "--node-devices", "4"};
    }

private slots:
    void trainPrintsTheThreadsMeasurement_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<int>("devices");
        QTest::newRow("dp2 tp2 pp2 zero1") << "dp=2,tp=2,pp=2,zero=1" << 8;
        QTest::newRow("tp2 sp cp2") << "tp=2,cp=2,sp=on" << 4;
    }

    void trainPrintsTheThreadsMeasurement()
    {
        QFETCH(QString, layout);
        QFETCH(int, devices);
        const Run threads = run(SHARDSCOPE_CLI_PATH, train(layout, devices) + QStringList{"--json"});
        QCOMPARE(threads.exitCode, 0);
        const Run mpi = mpirun(3, train(layout, devices) + QStringList{"--json", "--backend", "mpi"});
        QVERIFY2(mpi.exitCode == 0, mpi.err.constData());
        const QJsonObject a = json(threads), b = json(mpi);  // one document: only rank 0 prints
        QVERIFY(!a.isEmpty() && !b.isEmpty());
        QCOMPARE(b.value("losses"), a.value("losses"));  // JSON doubles round-trip: bitwise
        QCOMPARE(a.value("losses").toArray().size(), 3);
        const QJsonArray da = a.value("devices").toArray(), dbs = b.value("devices").toArray();
        QCOMPARE(dbs.size(), devices);
        QCOMPARE(da.size(), devices);
        for (qsizetype d = 0; d < da.size(); ++d)
            for (const char* key : {"comm_bytes", "comm_bytes_received", "comm_calls", "comm_seconds",
                                    "memory_peak_bytes", "memory_resident_bytes", "device_step_times_s", "flops"})
                QVERIFY2(dbs[d].toObject().value(key) == da[d].toObject().value(key),
                         qPrintable(QString("device %1: %2").arg(d).arg(key)));
        QVERIFY(da[0].toObject().value("comm_bytes").toObject().value("all_reduce").toDouble() > 0);
    }

    void validateStartsItselfUnderMpirunWithHosts()
    {
        QFile hosts(dir_.filePath("hosts"));
        QVERIFY(hosts.open(QIODevice::WriteOnly));
        hosts.write("localhost slots=3\n");  // Open MPI's host file: three ranks here
        hosts.close();
        const QStringList validate{"--db", db(), "validate", "--layers", "2", "--hidden", "64", "--heads", "4",
                                   "--vocab", "32", "--seq", "32", "--batch", "8", "--layout", "dp=2,tp=2,pp=2",
                                   "--steps", "2", "--json"};
        const Run threads = run(SHARDSCOPE_CLI_PATH, validate);
        QVERIFY2(threads.exitCode == 0, threads.err.constData());
        const Run mpi = run(SHARDSCOPE_CLI_PATH, validate + QStringList{"--backend", "mpi", "--hosts", hosts.fileName(),
                                                                     "--max-devices", "8"});
        QVERIFY2(mpi.exitCode == 0, mpi.err.constData());
        const QJsonArray ca = json(threads).value("cases").toArray(), cb = json(mpi).value("cases").toArray();
        QCOMPARE(cb.size(), 1);
        QCOMPARE(ca.size(), 1);
        const QJsonObject a = ca[0].toObject(), b = cb[0].toObject();
        QCOMPARE(b.value("losses"), a.value("losses"));
        QCOMPARE(a.value("losses").toArray().size(), 2);
        // Every measured metric but the host's wall clock, which no two runs share.
        const QJsonObject metricsA = a.value("metrics").toObject(), metricsB = b.value("metrics").toObject();
        QVERIFY(metricsA.contains("all_reduce_bytes") && metricsA.contains("activations_bytes"));
        for (const QString& metric : metricsA.keys())
            if (!metric.contains("wall"))
                QVERIFY2(metricsB.value(metric).toObject().value("measured") ==
                             metricsA.value(metric).toObject().value("measured"),
                         qPrintable(metric));
        // Stored once (by rank 0): two runs in the history, the threads one and this one.
        const Run history = run(SHARDSCOPE_CLI_PATH, {"--db", db(), "history", "--json"});
        QCOMPARE(history.exitCode, 0);
        QCOMPARE(QJsonDocument::fromJson(history.out).array().size(), 2);
        // --hosts is for MPI and outside mpirun only.
        const Run bad = run(SHARDSCOPE_CLI_PATH, validate + QStringList{"--hosts", hosts.fileName()});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY(bad.err.contains("--backend mpi"));
    }

    void outOfMemoryStopsEveryRank()
    {
        // Weights fit, gradients do not: device 0 runs out during the first step.
        const Run r = mpirun(2, train("tp=2,pp=2", 4, "trainium1:0.00001") + QStringList{"--backend", "mpi"});
        QVERIFY2(r.exitCode > 0, r.err.constData());
        QVERIFY2(r.err.contains("[out_of_memory]") && r.err.contains("out of memory allocating gradients") &&
                     r.err.contains("stopping every rank"),
                 r.err.constData());
    }

    void notFiniteStopsEveryRank()
    {
        const Run r = run(SHARDSCOPE_MPIEXEC, {"--oversubscribe", "-np", "3", SHARDSCOPE_NAN_RUNNER, "5"});
        QVERIFY2(r.exitCode > 0, r.err.constData());
        QVERIFY2(r.err.contains("[not_finite]") && r.err.contains("step 2") && r.err.contains("stopping every rank"),
                 r.err.constData());
        QVERIFY(!r.out.contains("finished"));  // no rank went on past the failure
    }

    void aKilledRankStopsTheJob()
    {
        // A run long enough to be killed in the middle of its collectives.
        QStringList args = train("dp=2,tp=2,pp=2", 8);
        args[args.indexOf("--steps") + 1] = "100000";
        QProcess p;
        p.setProcessEnvironment(environment());
        p.start(SHARDSCOPE_MPIEXEC, QStringList{"--oversubscribe", "-np", "3", SHARDSCOPE_CLI_PATH} + args +
                                        QStringList{"--backend", "mpi"});
        QVERIFY(p.waitForStarted(-1));
        // Wait for rank 0's first step line, then kill one of mpirun's children (a rank) by its id.
        QByteArray out;
        for (int i = 0; i < 600 && !out.contains("step "); ++i) {
            p.waitForReadyRead(100);
            out += p.readAllStandardOutput();
        }
        QVERIFY2(out.contains("step "), out.constData());
        QFile children(QString("/proc/%1/task/%1/children").arg(p.processId()));
        QVERIFY(children.open(QIODevice::ReadOnly));
        const QList<QByteArray> pids = children.readAll().trimmed().split(' ');
        QCOMPARE(pids.size(), 3);
        QCOMPARE(::kill(pid_t(pids.last().toLongLong()), SIGKILL), 0);
        QVERIFY2(p.waitForFinished(60'000), "the job hung after a rank died");
        QVERIFY(p.exitCode() != 0 || p.exitStatus() != QProcess::NormalExit);
        QVERIFY2(p.readAllStandardError().contains("signal 9"), "mpirun names the killed rank");
    }
};

QTEST_GUILESS_MAIN(TstEngineMpiCli)
#include "tst_engine_mpi_cli.moc"
