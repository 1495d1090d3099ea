// The communicator on the emulated cluster: every collective against sums and
// copies computed here independently (values chosen so that float sums are
// exact, so results compare bitwise), on whole clusters and on sub-groups that
// run at the same time; bytes sent and received per device; the device clocks
// after a collective (the last arrival plus the ring's alpha-beta time, on the
// intra-node link or across nodes); send/recv; and failures: a device that
// throws, a cancel, a receiver whose sender died - no run hangs.
// Built with -DSHARDSCOPE_TSAN=ON these run clean under ThreadSanitizer.
#include "Cluster.h"

#include <QTest>

#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <numeric>

using namespace shardscope;
using namespace shardscope::engine;

namespace {

DeviceProfile profile()
{
    DeviceProfile p;
    p.name = "test";
    p.memory_bytes = 1e9;
    p.peak_flops_fp32 = 1e12;
    p.memory_bytes_per_second = 1e9;
    return p;
}

LinkSpec links(int nodeDevices = 0)
{
    LinkSpec l;
    l.intra_bytes_per_second = 1e9;
    l.inter_bytes_per_second = 1e8;
    l.intra_latency_s = 1e-6;
    l.inter_latency_s = 1e-5;
    l.node_devices = nodeDevices;
    return l;
}

// Integers and halves: every partial sum is exact in float.
float value(int rank, std::size_t i) { return float(rank * 1000 + int(i % 97)) * 0.5f; }

} // namespace

class TstEngineComm : public QObject {
    Q_OBJECT

private slots:
    void allReduceSumsExactly_data()
    {
        QTest::addColumn<int>("devices");
        QTest::addColumn<int>("count");
        for (int n : {2, 3, 4, 8})
            for (int count : {1, 7, 1000, 4099})
                QTest::addRow("%d devices, %d values", n, count) << n << count;
    }
    void allReduceSumsExactly()
    {
        QFETCH(int, devices);
        QFETCH(int, count);
        EmulatedCluster cluster(devices, profile(), links());
        std::vector<std::vector<float>> data(static_cast<size_t>(devices));
        const auto failure = cluster.run([&](int id) {
            std::vector<float>& v = data[size_t(id)];
            v.resize(size_t(count));
            for (size_t i = 0; i < v.size(); ++i)
                v[i] = value(id, i);
            cluster.groups(id).world->allReduce(id, v.data(), v.size());
        });
        QVERIFY(!failure);
        for (size_t i = 0; i < size_t(count); ++i) {
            float expected = 0;
            for (int r = 0; r < devices; ++r)
                expected += value(r, i);
            for (int r = 0; r < devices; ++r)
                QCOMPARE(data[size_t(r)][i], expected);
        }
    }

    // Inexact float sums: the result is the ring's, bit for bit: chunk c summed in the order
    // it travels (members c+1, c+2, ..., c, each adding its values to what arrives), the
    // same on every member; chunks of uneven size (count not a multiple of n).
    void allReduceAddsInRingOrder()
    {
        const int n = 5;
        const std::size_t count = 613;
        EmulatedCluster cluster(n, profile(), links());
        auto x = [](int rank, std::size_t i) { return std::sin(float(rank * 7919 + int(i)) * 0.37f) * 1e3f / float(1 + i % 13); };
        std::vector<std::vector<float>> data(static_cast<size_t>(n));
        QVERIFY(!cluster.run([&](int id) {
            std::vector<float>& v = data[size_t(id)];
            for (std::size_t i = 0; i < count; ++i)
                v.push_back(x(id, i));
            cluster.groups(id).world->allReduce(id, v.data(), v.size());
        }));
        int orderMatters = 0;
        for (int c = 0; c < n; ++c)
            for (std::size_t i = CommGroup::chunkBegin(count, n, c); i < CommGroup::chunkBegin(count, n, c + 1); ++i) {
                float ring = x((c + 1) % n, i);
                for (int k = 2; k <= n; ++k)
                    ring = x((c + k) % n, i) + ring;
                float plain = 0;
                for (int r = 0; r < n; ++r)
                    plain += x(r, i);
                orderMatters += ring != plain;
                for (int r = 0; r < n; ++r)
                    QCOMPARE(data[size_t(r)][i], ring);
            }
        QVERIFY(orderMatters > 0);  // the values do tell the two orders apart
    }

    void maxReduceAndDoubles()
    {
        EmulatedCluster cluster(3, profile(), links());
        std::vector<std::vector<double>> data(3);
        QVERIFY(!cluster.run([&](int id) {
            data[size_t(id)] = {double(id), -double(id), id == 1 ? 1e300 : 0.0, 2.5};
            cluster.groups(id).world->allReduce(id, data[size_t(id)].data(), 4, ReduceOp::Max);
        }));
        for (const auto& d : data)
            QCOMPARE(d, (std::vector<double>{2.0, 0.0, 1e300, 2.5}));
    }

    void reduceScatterAllGatherBroadcast()
    {
        const int n = 4;
        const std::size_t count = 1030;  // chunks of 257 and 258
        EmulatedCluster cluster(n, profile(), links());
        std::vector<std::vector<float>> rs(n), ag(n), bc(n);
        QVERIFY(!cluster.run([&](int id) {
            CommGroup& g = *cluster.groups(id).world;
            auto& a = rs[size_t(id)];
            a.resize(count);
            for (size_t i = 0; i < count; ++i)
                a[i] = value(id, i);
            g.reduceScatter(id, a.data(), count);
            auto& b = ag[size_t(id)];
            b.assign(count, -1.0f);
            for (size_t i = CommGroup::chunkBegin(count, n, id); i < CommGroup::chunkBegin(count, n, id + 1); ++i)
                b[i] = value(id, i);
            g.allGather(id, b.data(), count);
            auto& c = bc[size_t(id)];
            c.assign(count, 0.0f);
            if (id == 2)
                for (size_t i = 0; i < count; ++i)
                    c[i] = value(7, i);
            g.broadcast(id, 2, c.data(), count);
        }));
        for (int r = 0; r < n; ++r) {
            for (size_t i = CommGroup::chunkBegin(count, n, r); i < CommGroup::chunkBegin(count, n, r + 1); ++i) {
                float sum = 0;
                for (int q = 0; q < n; ++q)
                    sum += value(q, i);
                QCOMPARE(rs[size_t(r)][i], sum);
            }
            for (size_t i = 0; i < count; ++i) {
                int owner = 0;
                while (i >= CommGroup::chunkBegin(count, n, owner + 1))
                    ++owner;
                QCOMPARE(ag[size_t(r)][i], value(owner, i));
                QCOMPARE(bc[size_t(r)][i], value(7, i));
            }
        }
    }

    void subGroupsRunConcurrently()
    {
        // {0, 2} and {3, 1} reduce different data at the same time; the world checks afterwards.
        EmulatedCluster cluster(4, profile(), links());
        CommGroup& even = cluster.communicator().makeGroup({0, 2}, "even");
        CommGroup& odd = cluster.communicator().makeGroup({3, 1}, "odd");
        std::vector<std::vector<float>> data(4);
        QVERIFY(!cluster.run([&](int id) {
            CommGroup& g = id % 2 == 0 ? even : odd;
            auto& v = data[size_t(id)];
            for (int round = 0; round < 50; ++round) {
                v.assign(333, float(id + round));
                g.allReduce(g.rankOf(id), v.data(), v.size());
            }
        }));
        for (int id = 0; id < 4; ++id)
            for (float x : data[size_t(id)])
                QCOMPARE(x, id % 2 == 0 ? float(0 + 2 + 2 * 49) : float(1 + 3 + 2 * 49));
        QCOMPARE(even.rankOf(2), 1);
        QCOMPARE(odd.rankOf(3), 0);
        QCOMPARE(odd.rankOf(0), -1);
    }

    void bytesSentAndReceived()
    {
        // Ring all-reduce of S bytes on n devices: each sends and receives 2 (n-1)/n S;
        // reduce-scatter and all-gather half of that; send/recv exactly the message.
        const int n = 4;
        const std::size_t count = 1024;
        const double S = count * sizeof(float);
        EmulatedCluster cluster(n, profile(), links());
        QVERIFY(!cluster.run([&](int id) {
            std::vector<float> v(count, 1.0f);
            CommGroup& g = *cluster.groups(id).world;
            g.allReduce(id, v.data(), count);
            g.reduceScatter(id, v.data(), count);
            g.allGather(id, v.data(), count);
            if (id == 0)
                cluster.communicator().send(0, 3, v.data(), 100);
            if (id == 3)
                cluster.communicator().recv(3, 0, v.data(), 100);
        }));
        for (int id = 0; id < n; ++id) {
            const CommCounters& c = cluster.device(id).comm();
            QCOMPARE(c.bytes_sent[size_t(CommKind::AllReduce)], 2.0 * (n - 1) / n * S);
            QCOMPARE(c.bytes_received[size_t(CommKind::AllReduce)], 2.0 * (n - 1) / n * S);
            QCOMPARE(c.bytes_sent[size_t(CommKind::ReduceScatter)], double(n - 1) / n * S);
            QCOMPARE(c.bytes_received[size_t(CommKind::AllGather)], double(n - 1) / n * S);
            QCOMPARE(c.calls[size_t(CommKind::AllReduce)], std::int64_t(1));
        }
        QCOMPARE(cluster.device(0).comm().bytes_sent[size_t(CommKind::SendRecv)], 400.0);
        QCOMPARE(cluster.device(3).comm().bytes_received[size_t(CommKind::SendRecv)], 400.0);
        QCOMPARE(cluster.device(1).comm().bytes_sent[size_t(CommKind::SendRecv)], 0.0);
    }

    void clocksFollowTheLastArrivalAndTheLink_data()
    {
        QTest::addColumn<int>("peer");
        QTest::addColumn<bool>("acrossNodes");
        QTest::newRow("same node") << 1 << false;   // node_devices = 2: devices 0, 1 share node 0
        QTest::newRow("across nodes") << 2 << true;  // device 2 is on node 1
    }
    void clocksFollowTheLastArrivalAndTheLink()
    {
        QFETCH(int, peer);
        QFETCH(bool, acrossNodes);
        const LinkSpec l = links(2);
        EmulatedCluster cluster(4, profile(), l);
        CommGroup& pair = cluster.communicator().makeGroup({0, peer}, "pair");
        QCOMPARE(pair.crossesNodes(), acrossNodes);
        const std::size_t count = 1 << 16;
        QVERIFY(!cluster.run([&](int id) {
            if (id != 0 && id != peer)
                return;
            // The peer arrives late: 1 ms of memory-bound work (1e6 bytes at 1e9 B/s).
            if (id == peer)
                cluster.device(id).charge(KernelKind::Elementwise, {0, 1e6, 0}, DataType::FP32);
            std::vector<float> v(count, 1.0f);
            pair.allReduce(pair.rankOf(id), v.data(), count);
        }));
        const double bw = acrossNodes ? 1e8 : 1e9, lat = acrossNodes ? 1e-5 : 1e-6;
        const double expected = 1e-3 + 2 * (lat + count * 4.0 / 2 / bw);  // 2 (n-1) steps of S/n
        QVERIFY(std::fabs(cluster.device(0).clockSeconds() - expected) < 1e-12);
        QVERIFY(std::fabs(cluster.device(peer).clockSeconds() - expected) < 1e-12);
        QVERIFY(std::fabs(cluster.device(0).comm().wait_seconds - 1e-3) < 1e-12);  // device 0 waited for the peer
        QCOMPARE(cluster.device(peer).comm().wait_seconds, 0.0);
    }

    // All-to-all-v (issue 16's token dispatch): member s sends (s + 2 d) % 5 values to member d,
    // each naming its sender, receiver and index; every member gets exactly its blocks, in member
    // order; bytes per member are what it sends to and receives from the others (its own block is
    // copied, not counted); the clock is the busiest member's busiest link.
    void allToAllVDeliversEveryBlock_data()
    {
        QTest::addColumn<int>("devices");
        QTest::addColumn<int>("nodeDevices");
        QTest::addRow("4 devices, one node") << 4 << 0;
        QTest::addRow("4 devices, 2 per node") << 4 << 2;
        QTest::addRow("3 devices, one node") << 3 << 0;
        QTest::addRow("5 devices, 1 per node") << 5 << 1;
    }
    void allToAllVDeliversEveryBlock()
    {
        QFETCH(int, devices);
        QFETCH(int, nodeDevices);
        const LinkSpec l = links(nodeDevices);
        EmulatedCluster cluster(devices, profile(), l);
        auto count = [](int s, int d) { return std::size_t((s + 2 * d) % 5); };
        auto tag = [](int s, int d, std::size_t i) { return float(s * 10000 + d * 100 + int(i)); };
        std::vector<std::vector<float>> got(static_cast<size_t>(devices));
        QVERIFY(!cluster.run([&](int id) {
            std::vector<std::size_t> sendCounts, recvCounts;
            std::vector<float> send;
            for (int d = 0; d < devices; ++d) {
                sendCounts.push_back(count(id, d));
                recvCounts.push_back(count(d, id));
                for (std::size_t i = 0; i < count(id, d); ++i)
                    send.push_back(tag(id, d, i));
            }
            std::vector<float>& recv = got[size_t(id)];
            recv.assign(std::accumulate(recvCounts.begin(), recvCounts.end(), std::size_t(0)), -1.0f);
            cluster.groups(id).world->allToAllV(id, send.data(), sendCounts.data(), recv.data(), recvCounts.data());
        }));
        double longest = 0;
        for (int r = 0; r < devices; ++r) {
            std::vector<float> expected;
            double sent = 0, received = 0, linkSent[2] = {0, 0}, linkReceived[2] = {0, 0};
            for (int s = 0; s < devices; ++s) {
                for (std::size_t i = 0; i < count(s, r); ++i)
                    expected.push_back(tag(s, r, i));
                if (s == r)
                    continue;
                const int link = l.nodeOf(s) == l.nodeOf(r) ? 0 : 1;
                received += 4.0 * double(count(s, r));
                sent += 4.0 * double(count(r, s));
                linkReceived[link] += 4.0 * double(count(s, r));
                linkSent[link] += 4.0 * double(count(r, s));
            }
            QCOMPARE(got[size_t(r)], expected);
            const CommCounters& c = cluster.device(r).comm();
            QCOMPARE(c.bytes_sent[size_t(CommKind::AllToAll)], sent);
            QCOMPARE(c.bytes_received[size_t(CommKind::AllToAll)], received);
            QCOMPARE(c.calls[size_t(CommKind::AllToAll)], std::int64_t(1));
            for (int link = 0; link < 2; ++link) {
                const double bytes = std::max(linkSent[link], linkReceived[link]);
                if (bytes > 0)
                    longest = std::max(longest, (link == 0 ? l.intra_latency_s + bytes / l.intra_bytes_per_second
                                                           : l.inter_latency_s + bytes / l.inter_bytes_per_second));
            }
        }
        QVERIFY(longest > 0);
        for (int r = 0; r < devices; ++r)
            QVERIFY(std::fabs(cluster.device(r).clockSeconds() - longest) < 1e-15);
        QCOMPARE(QString(toString(CommKind::AllToAll)), QString("all_to_all"));
    }

    // The planner's payload convention (AllToAllBytes, core/Prediction.h): a dispatch counts every
    // value a member sends, its own block included, a combine every value it receives; the link
    // clock is the crossing bytes' as with the default counting.
    void allToAllVCountsTheOwnCopiesWhenAsked()
    {
        const int devices = 3;
        const LinkSpec l = links(0);
        for (AllToAllBytes counted : {AllToAllBytes::OwnCopiesOut, AllToAllBytes::OwnCopiesBack}) {
            EmulatedCluster cluster(devices, profile(), l), plain(devices, profile(), l);
            auto count = [](int s, int d) { return std::size_t(1 + (s + 2 * d) % 4); };
            for (EmulatedCluster* c : {&cluster, &plain})
                QVERIFY(!c->run([&](int id) {
                    std::vector<std::size_t> sendCounts, recvCounts;
                    for (int d = 0; d < devices; ++d) {
                        sendCounts.push_back(count(id, d));
                        recvCounts.push_back(count(d, id));
                    }
                    std::vector<float> send(std::accumulate(sendCounts.begin(), sendCounts.end(), std::size_t(0)), 1.0f);
                    std::vector<float> recv(std::accumulate(recvCounts.begin(), recvCounts.end(), std::size_t(0)));
                    c->groups(id).world->allToAllV(id, send.data(), sendCounts.data(), recv.data(), recvCounts.data(), 0,
                                                   c == &cluster ? counted : AllToAllBytes::Crossing);
                }));
            for (int r = 0; r < devices; ++r) {
                double out = 0, in = 0;
                for (int p = 0; p < devices; ++p) {
                    out += 4.0 * double(count(r, p));
                    in += 4.0 * double(count(p, r));
                }
                const CommCounters& c = cluster.device(r).comm();
                const bool dispatch = counted == AllToAllBytes::OwnCopiesOut;
                QCOMPARE(c.bytes_sent[size_t(CommKind::AllToAll)], dispatch ? out : in);
                QCOMPARE(c.bytes_received[size_t(CommKind::AllToAll)], dispatch ? in : out);
                QCOMPARE(cluster.device(r).clockSeconds(), plain.device(r).clockSeconds());
                QVERIFY(plain.device(r).comm().bytes_sent[size_t(CommKind::AllToAll)] < c.bytes_sent[size_t(CommKind::AllToAll)]);
            }
        }
        // A group of one counts its own block under the convention, and nothing otherwise.
        EmulatedCluster one(1, profile(), links(0));
        QVERIFY(!one.run([&](int id) {
            const std::size_t n = 5;
            std::vector<float> send(n, 2.0f), recv(n);
            one.groups(id).world->allToAllV(id, send.data(), &n, recv.data(), &n, 0, AllToAllBytes::OwnCopiesOut);
            one.groups(id).world->allToAllV(id, send.data(), &n, recv.data(), &n);
        }));
        QCOMPARE(one.device(0).comm().bytes_sent[size_t(CommKind::AllToAll)], 20.0);
    }

    // Variable-size all-gather and reduce-scatter (the expert-tensor-parallel token gather and the
    // partial outputs' reduction): member m's block of (m + 2) % 4 values; the gather delivers
    // every block, the reduce-scatter leaves each member its block summed in the ring's order, the
    // bytes are a ring's over the blocks.
    void variableSizeGatherAndReduceScatter()
    {
        const int devices = 3;
        EmulatedCluster cluster(devices, profile(), links(0));
        const std::vector<std::size_t> counts{2, 3, 0};
        const std::size_t total = 5;
        std::vector<std::vector<double>> gathered(devices), reduced(devices);
        QVERIFY(!cluster.run([&](int id) {
            std::vector<double> g(total, -1.0), r(total);
            std::size_t at = 0;
            for (int m = 0; m < id; ++m)
                at += counts[size_t(m)];
            for (std::size_t i = 0; i < counts[size_t(id)]; ++i)
                g[at + i] = 100.0 * id + double(i);
            for (std::size_t i = 0; i < total; ++i)
                r[i] = double(id + 1) * double(i + 1);
            cluster.groups(id).world->allGatherV(id, g.data(), counts.data());
            cluster.groups(id).world->reduceScatterV(id, r.data(), counts.data());
            gathered[size_t(id)] = g;
            reduced[size_t(id)] = r;
        }));
        const std::vector<double> expected{0, 1, 100, 101, 102};
        std::size_t at = 0;
        for (int id = 0; id < devices; ++id) {
            QCOMPARE(gathered[size_t(id)], expected);
            for (std::size_t i = at; i < at + counts[size_t(id)]; ++i)
                QCOMPARE(reduced[size_t(id)][i], (1 + 2 + 3) * double(i + 1));
            at += counts[size_t(id)];
            const CommCounters& c = cluster.device(id).comm();
            QCOMPARE(c.bytes_sent[size_t(CommKind::AllGather)], 8.0 * double(total - counts[size_t((id + 1) % devices)]));
            QCOMPARE(c.bytes_received[size_t(CommKind::AllGather)], 8.0 * double(total - counts[size_t(id)]));
            QCOMPARE(c.bytes_sent[size_t(CommKind::ReduceScatter)], 8.0 * double(total - counts[size_t(id)]));
            QCOMPARE(c.bytes_received[size_t(CommKind::ReduceScatter)],
                     8.0 * double(total - counts[size_t((id + devices - 1) % devices)]));
        }
    }

    void allToAllMovesEqualBlocksAndRefusesMismatchedCounts()
    {
        EmulatedCluster cluster(4, profile(), links());
        std::vector<std::vector<double>> got(4);
        QVERIFY(!cluster.run([&](int id) {
            std::vector<double> send(4 * 3);
            for (size_t i = 0; i < send.size(); ++i)
                send[i] = id * 100.0 + double(i);
            got[size_t(id)].assign(send.size(), -1.0);
            cluster.groups(id).world->allToAll(id, send.data(), got[size_t(id)].data(), 3);
        }));
        for (int r = 0; r < 4; ++r)
            for (int s = 0; s < 4; ++s)
                for (int i = 0; i < 3; ++i)
                    QCOMPARE(got[size_t(r)][size_t(3 * s + i)], s * 100.0 + 3 * r + i);
        QCOMPARE(cluster.device(0).comm().bytes_sent[size_t(CommKind::AllToAll)], 3 * 3 * 8.0);

        // Member 1 expects 2 values from member 3, which sends it 1: named, and nobody hangs.
        EmulatedCluster bad(4, profile(), links());
        const auto failure = bad.run([&](int id) {
            std::vector<std::size_t> sendCounts(4, 1), recvCounts(4, 1);
            if (id == 1)
                recvCounts[3] = 2;
            std::vector<float> send(4, 1.0f), recv(5);
            bad.groups(id).world->allToAllV(id, send.data(), sendCounts.data(), recv.data(), recvCounts.data());
            bad.groups(id).world->allToAllV(id, send.data(), sendCounts.data(), recv.data(), recvCounts.data());
        });
        QVERIFY(failure);
        QCOMPARE(failure->device, 1);
        QVERIFY2(failure->message.find("member 1 expects 2 values from member 3, which sends 1") != std::string::npos,
                 failure->message.c_str());
    }

    void sendRecvIsOrderedAndTimed()
    {
        EmulatedCluster cluster(2, profile(), links(1));  // one device per node: the inter-node link
        std::vector<float> got;
        QVERIFY(!cluster.run([&](int id) {
            std::vector<float> v(10);
            for (int m = 0; m < 20; ++m) {
                if (id == 0) {
                    std::fill(v.begin(), v.end(), float(m));
                    cluster.communicator().send(0, 1, v.data(), v.size());
                } else {
                    cluster.communicator().recv(1, 0, v.data(), v.size());
                    got.push_back(v[9]);
                }
            }
        }));
        std::vector<float> expected(20);
        std::iota(expected.begin(), expected.end(), 0.0f);
        QCOMPARE(got, expected);
        // The receiver is never earlier than the last message's arrival: 20 transfers back to back.
        const double transfer = 1e-5 + 40.0 / 1e8;
        QVERIFY(cluster.device(1).clockSeconds() >= 20 * transfer - 1e-15);
        QVERIFY(std::fabs(cluster.device(0).clockSeconds() - 20 * transfer) < 1e-12);
    }

    void failingDeviceStopsEveryone()
    {
        EmulatedCluster cluster(4, profile(), links());
        std::atomic<int> finished{0};
        const auto failure = cluster.run([&](int id) {
            std::vector<float> v(64, 1.0f);
            CommGroup& g = *cluster.groups(id).world;
            g.allReduce(id, v.data(), v.size());
            if (id == 2)
                throw std::runtime_error("device 2: simulated fault");
            g.allReduce(id, v.data(), v.size());  // the others wait here for device 2, which never comes
            finished.fetch_add(1);
        });
        QVERIFY(failure);
        QCOMPARE(failure->device, 2);
        QVERIFY(failure->message.find("simulated fault") != std::string::npos);
        QCOMPARE(finished.load(), 0);
        QVERIFY(cluster.communicator().aborted());
        QVERIFY(!cluster.cancelled());
    }

    void receiverOfADeadSenderIsReleased()
    {
        EmulatedCluster cluster(2, profile(), links());
        const auto failure = cluster.run([&](int id) {
            std::vector<float> v(8);
            if (id == 0)
                throw std::runtime_error("sender failed");
            cluster.communicator().recv(1, 0, v.data(), v.size());
        });
        QVERIFY(failure);
        QCOMPARE(failure->device, 0);
    }

    void cancelStopsWaiters()
    {
        std::atomic<bool> cancel{false};
        EmulatedCluster cluster(3, profile(), links(), &cancel);
        const auto failure = cluster.run([&](int id) {
            std::vector<float> v(16, 1.0f);
            if (id == 1) {
                // Device 1 never joins; give the others time to fall asleep in the collective,
                // then cancel: they must wake up by themselves (not a timed assertion).
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                cancel.store(true);
                return;
            }
            for (;;)
                cluster.groups(id).world->allReduce(id, v.data(), v.size());
        });
        QVERIFY(!failure);
        QVERIFY(cluster.cancelled());
    }

    void badGroupsAreRejected()
    {
        EmulatedCluster cluster(2, profile(), links());
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cluster.communicator().makeGroup({0, 5}, "bad"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cluster.communicator().makeGroup({1, 1}, "twice"));
    }

    void meshPlacesTensorParallelInnermost()
    {
        Layout l;
        l.dp = 2;
        l.tp = 2;
        l.pp = 2;
        l.zero_stage = 1;
        l.zero_group = 1;
        EmulatedCluster cluster(l, profile(), links(4));
        // id = (pp * dp + dp_rank) * tp + tp_rank
        QCOMPARE(cluster.groups(5).tp->memberIds(), (std::vector<int>{4, 5}));
        QCOMPARE(cluster.groups(5).dp->memberIds(), (std::vector<int>{5, 7}));
        QCOMPARE(cluster.groups(5).shard->memberIds(), (std::vector<int>{5}));
        QCOMPARE(cluster.groups(5).replica->memberIds(), (std::vector<int>{5, 7}));
        QCOMPARE(cluster.groups(5).embedding->memberIds(), (std::vector<int>{1, 5}));
        QCOMPARE(cluster.stageNeighbour(1, +1), 5);
        QCOMPARE(cluster.stageNeighbour(5, +1), -1);
        QCOMPARE(cluster.position(6).pp, 1);
        QCOMPARE(cluster.position(6).dp, 1);
        QCOMPARE(cluster.position(6).node, 1);
        QVERIFY(!cluster.groups(5).tp->crossesNodes());
        QVERIFY(cluster.groups(5).embedding->crossesNodes());  // pipeline stages on different nodes
    }
};

QTEST_GUILESS_MAIN(TstEngineComm)
#include "tst_engine_comm.moc"
