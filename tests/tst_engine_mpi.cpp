// The MPI backend against the threads backend, in one mpirun job (CTest starts this program
// with `mpirun --oversubscribe -np 3`): every rank runs the same cluster twice, once on its
// own threads (the whole cluster in this process) and once spread over the ranks, and the
// devices this rank runs must agree bitwise: every collective's result (random floats, so a
// different summation order would show), bytes sent and received per kind, calls, link time
// and device clocks; then whole training runs of several layouts (dp/tp/pp/ZeRO, sequence and
// context parallelism, interleaved pipeline, MoE with ep and etp): losses, gradient norms,
// memory peaks by category, bytes per collective kind and device clocks, for every device
// (each rank assembles the whole measurement). Ranks hold uneven shares (8 devices over 3).
#include "Cluster.h"
#include "Layout.h"
#include "MpiSession.h"
#include "Trainer.h"

#include <QTest>

#include <cstring>
#include <numeric>
#include <random>

using namespace shardscope;
using namespace shardscope::engine;

namespace {

engine::MpiSession* session = nullptr;

DeviceProfile profile()
{
    DeviceProfile p;
    p.name = "test";
    p.memory_bytes = 1e12;
    p.peak_flops_fp32 = 1e12;
    p.peak_flops_bf16 = 4e12;
    p.memory_bytes_per_second = 1e11;
    return p;
}

LinkSpec links()
{
    LinkSpec l;
    l.intra_bytes_per_second = 1e11;
    l.inter_bytes_per_second = 1e10;
    l.intra_latency_s = 1e-6;
    l.inter_latency_s = 1e-5;
    l.node_devices = 4;  // two emulated nodes of 8 devices: groups inside one and across both
    return l;
}

// Random values of member `id` for call `call`: float sums depend on their order.
std::vector<float> values(int id, int call, std::size_t count)
{
    std::mt19937 rng(std::uint32_t(id * 7919 + call));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(count);
    for (float& x : v)
        x = u(rng);
    return v;
}

// What one device did in the collective workout below, to compare across backends.
struct Trace {
    std::vector<std::vector<float>> results;
    CommCounters comm;
    double clock = 0;
};

// Every collective on the world group and on two sub-groups (one inside a node, one across
// nodes, members out of id order), send/recv across the pipeline-like ring, uneven counts.
void workout(EmulatedCluster& c, int id, Trace& t)
{
    const int n = c.size();
    CommGroup& world = *c.groups(id).world;
    const int r = world.rankOf(id);
    int call = 0;
    auto keep = [&](std::vector<float> v) { t.results.push_back(std::move(v)); };
    for (std::size_t count : {std::size_t(1), std::size_t(13), std::size_t(1000)}) {
        std::vector<float> v = values(id, ++call, count);
        world.allReduce(r, v.data(), count);
        keep(v);
        v = values(id, ++call, count);
        world.allReduce(r, v.data(), count, ReduceOp::Max);
        keep(v);
        v = values(id, ++call, count);
        world.reduceScatter(r, v.data(), count, ReduceOp::Sum, 2);
        keep(std::vector<float>(v.begin() + std::ptrdiff_t(CommGroup::chunkBegin(count, n, r)),
                                v.begin() + std::ptrdiff_t(CommGroup::chunkBegin(count, n, r + 1))));
        v = values(id, ++call, count);
        world.allGather(r, v.data(), count);
        keep(v);
        v = values(id, ++call, count);
        world.broadcast(r, 2, v.data(), count);
        keep(v);
    }
    // Variable blocks and all-to-all with counts that differ per pair.
    std::vector<std::size_t> blocks(static_cast<std::size_t>(n));
    for (int m = 0; m < n; ++m)
        blocks[size_t(m)] = std::size_t(3 + 5 * m % 7);
    const std::size_t total = std::accumulate(blocks.begin(), blocks.end(), std::size_t(0));
    std::vector<float> v = values(id, ++call, total);
    world.allGatherV(r, v.data(), blocks.data());
    keep(v);
    v = values(id, ++call, total);
    world.reduceScatterV(r, v.data(), blocks.data());
    keep(v);
    std::vector<std::size_t> sendCounts(static_cast<std::size_t>(n)), recvCounts(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
        sendCounts[size_t(j)] = std::size_t((r * 3 + j * 5) % 4);
        recvCounts[size_t(j)] = std::size_t((j * 3 + r * 5) % 4);
    }
    std::vector<float> send = values(id, ++call, std::accumulate(sendCounts.begin(), sendCounts.end(), std::size_t(0)));
    std::vector<float> recv(std::accumulate(recvCounts.begin(), recvCounts.end(), std::size_t(0)));
    world.allToAllV(r, send.data(), sendCounts.data(), recv.data(), recvCounts.data(), 2, AllToAllBytes::OwnCopiesOut);
    keep(recv);
    // Sub-groups at the same time: tp {2k, 2k+1} inside a node (and a rank), dp {t, t+2, t+4, t+6}
    // across both nodes and every rank.
    for (CommGroup* g : {c.groups(id).tp, c.groups(id).dp}) {
        const int gr = g->rankOf(id);
        std::vector<float> s = values(id, ++call, 77);
        g->allReduce(gr, s.data(), s.size());
        keep(s);
    }
    // A ring of sends: each device to the next, receive from the previous.
    std::vector<float> out = values(id, ++call, 50), in(50);
    c.communicator().send(id, (id + 1) % n, out.data(), out.size());
    c.communicator().recv(id, (id + n - 1) % n, in.data(), in.size());
    keep(in);
    t.comm = c.device(id).comm();
    t.clock = c.device(id).clockSeconds();
}

Layout parse(const char* text)
{
    FieldErrors errors;
    Layout l = parseLayout(text, errors);
    if (!errors.empty())
        qFatal("bad layout %s: %s", text, joinErrors(errors).c_str());
    return l;
}

TrainRequest request(const char* layout, ModelConfig model = ModelConfig{4, 32, 4, 32, 8})
{
    TrainRequest r;
    r.model = model;
    r.batch = 8;
    r.steps = 3;
    r.optimizer = AdamWSettings{3e-3, 0.9, 0.95, 1e-8, 0.1};
    r.seed = 7;
    r.links = links();
    r.layout = parse(layout);
    if (r.layout.dp == 0)
        r.layout.dp = 1;
    return r;
}

ModelConfig moeModel()
{
    ModelConfig c{4, 32, 4, 32, 8};
    c.kv_heads = 2;
    c.ffn_hidden = 48;
    c.mlp = MlpKind::SwiGlu;
    c.norm = NormKind::RmsNorm;
    c.positions = PositionKind::Rotary;
    c.bias = false;
    c.moe.experts = 4;
    c.moe.top_k = 2;
    c.moe.expert_ffn = 24;
    c.moe.aux_loss_coeff = 0.01;
    return c;
}

} // namespace

class TstEngineMpi : public QObject {
    Q_OBJECT

private slots:
    void eachRankRunsItsShare()
    {
        EmulatedCluster c(8, profile(), links(), nullptr, ClusterBackend::Mpi);
        int mine = 0;
        for (int id = 0; id < 8; ++id)
            mine += c.runsDevice(id) ? 1 : 0;
        const int r = session->rank(), n = session->size();
        QCOMPARE(mine, 8 * (r + 1) / n - 8 * r / n);
        QVERIFY(c.runsDevice(8 * r / n));
        QCOMPARE(c.communicator().processCount(), n);
    }

    void collectivesMatchThreadsBitwise()
    {
        // tp groups {0,1}, {2,3}, ...; dp groups across nodes: tp=2 over 8 devices, dp = 4.
        const Layout layout = parse("dp=4,tp=2");
        EmulatedCluster threads(layout, profile(), links());
        EmulatedCluster mpi(layout, profile(), links(), nullptr, ClusterBackend::Mpi);
        std::vector<Trace> a(8), b(8);
        QVERIFY(!threads.run([&](int id) { workout(threads, id, a[size_t(id)]); }));
        QVERIFY(!mpi.run([&](int id) { workout(mpi, id, b[size_t(id)]); }));
        int compared = 0;
        for (int id = 0; id < 8; ++id) {
            if (!mpi.runsDevice(id))
                continue;
            ++compared;
            const Trace& x = a[size_t(id)];
            const Trace& y = b[size_t(id)];
            QCOMPARE(y.results.size(), x.results.size());
            for (size_t k = 0; k < x.results.size(); ++k) {
                QCOMPARE(y.results[k].size(), x.results[k].size());
                QVERIFY2(std::memcmp(y.results[k].data(), x.results[k].data(), x.results[k].size() * sizeof(float)) == 0,
                         qPrintable(QString("device %1, call %2: values differ").arg(id).arg(k)));
            }
            for (int kind = 0; kind < kCommKinds; ++kind) {
                QCOMPARE(y.comm.bytes_sent[size_t(kind)], x.comm.bytes_sent[size_t(kind)]);
                QCOMPARE(y.comm.bytes_received[size_t(kind)], x.comm.bytes_received[size_t(kind)]);
                QCOMPARE(y.comm.calls[size_t(kind)], x.comm.calls[size_t(kind)]);
                QCOMPARE(y.comm.seconds[size_t(kind)], x.comm.seconds[size_t(kind)]);
            }
            QCOMPARE(y.clock, x.clock);
            QVERIFY(x.comm.bytes_sent[size_t(CommKind::AllReduce)] > 0);
        }
        QVERIFY(compared > 0);
    }

    void trainingMatchesThreads_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<bool>("moe");
        QTest::newRow("dp2 tp2 pp2 zero1") << "dp=2,tp=2,pp=2,zero=1" << false;
        QTest::newRow("tp2 sp pp2 1f1b mb2") << "tp=2,pp=2,sp=on,mb=2,schedule=1f1b" << false;
        QTest::newRow("dp4 zero3 hsdp2") << "dp=4,zero=3,zero_group=2,pp=2" << false;
        QTest::newRow("cp2 tp2 dp2") << "cp=2,tp=2,dp=2" << false;
        QTest::newRow("pp2 interleaved v2 tp2") << "pp=2,schedule=interleaved,v=2,mb=1,dp=2,tp=2" << false;
        QTest::newRow("moe dp4 ep4") << "dp=4,ep=4,pp=2" << true;
        QTest::newRow("moe tp2 sp ep2 etp2") << "dp=2,tp=2,sp=on,ep=2,etp=2,pp=2" << true;
        // (HSDP on MoE: 2 replicas, the experts' shard groups 2 of their edp group of 4.)
        QTest::newRow("moe dp8 ep2 zero2 hsdp4") << "dp=8,ep=2,zero=2,zero_group=4" << true;
    }

    void trainingMatchesThreads()
    {
        QFETCH(QString, layout);
        QFETCH(bool, moe);
        TrainRequest r = moe ? request(qPrintable(layout), moeModel()) : request(qPrintable(layout));
        const auto source = makeTokenSource(r);
        const Measurement a = runClusterTraining(r, *source, profile());
        r.backend = ClusterBackend::Mpi;
        const Measurement b = runClusterTraining(r, *source, profile());
        QVERIFY(!a.error && !b.error);
        QCOMPARE(b.devices.size(), a.devices.size());
        QCOMPARE(b.steps.size(), a.steps.size());
        for (size_t k = 0; k < a.steps.size(); ++k) {
            QCOMPARE(b.steps[k].loss, a.steps[k].loss);  // bitwise: QCOMPARE on doubles is fuzzy, so also:
            QVERIFY(std::memcmp(&b.steps[k].loss, &a.steps[k].loss, sizeof(double)) == 0);
            QVERIFY(std::memcmp(&b.steps[k].grad_norm, &a.steps[k].grad_norm, sizeof(double)) == 0);
            QCOMPARE(b.steps[k].device_seconds, a.steps[k].device_seconds);
        }
        for (size_t d = 0; d < a.devices.size(); ++d) {
            const DeviceMeasurement& x = a.devices[d];
            const DeviceMeasurement& y = b.devices[d];
            QCOMPARE(y.id, x.id);
            QCOMPARE(y.comm_bytes, x.comm_bytes);
            QCOMPARE(y.comm_bytes_received, x.comm_bytes_received);
            QCOMPARE(y.comm_calls, x.comm_calls);
            QCOMPARE(y.comm_seconds, x.comm_seconds);
            QCOMPARE(y.memory_peak_bytes, x.memory_peak_bytes);
            QCOMPARE(y.memory_resident_bytes, x.memory_resident_bytes);
            QCOMPARE(y.counters.flops, x.counters.flops);
            QCOMPARE(y.device_step_times_s, x.device_step_times_s);
            QCOMPARE(y.pp_rank, x.pp_rank);
            QCOMPARE(y.moe_peak_copies, x.moe_peak_copies);
        }
        QCOMPARE(b.moe_tokens_per_expert, a.moe_tokens_per_expert);
        if (moe)
            QVERIFY(a.devices[0].comm_bytes.at("all_to_all") > 0);
        QVERIFY(a.steps.back().loss < a.steps.front().loss);
    }

    void keepParametersIsRefusedAcrossRanks()
    {
        TrainRequest r = request("dp=2,tp=2,pp=2");
        r.keep_parameters = true;
        r.backend = ClusterBackend::Mpi;
        const auto source = makeTokenSource(r);
        if (session->size() > 1)
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument, runClusterTraining(r, *source, profile()));
    }
};

int main(int argc, char** argv)
{
    engine::MpiSession mpi;
    session = &mpi;
    TstEngineMpi test;
    // One report: rank 0's (every rank asserts the same, on its own devices).
    std::vector<char*> args(argv, argv + argc);
    char silent[] = "-silent";
    if (mpi.rank() != 0)
        args.push_back(silent);
    const int failed = QTest::qExec(&test, int(args.size()), args.data());
    return failed;
}

#include "tst_engine_mpi.moc"
