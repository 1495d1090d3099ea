// Communicator: what the model executor and the step loop call to move data between the
// emulated devices of a cluster, whatever carries it. Two implementations:
//   ThreadCommunicator.h  every device a worker thread of this process, collectives over
//                         shared memory (the embedded default, nothing to install)
//   MpiCommunicator.h     the devices spread over MPI ranks (Open MPI), collectives on MPI
//                         sub-communicators of the layout's groups (built only with MPI)
//
// - CommGroup: an ordered set of devices (ring order = the order given). Its collectives are
//   called by every member from the member's own worker thread with the member's rank.
//   Results are the ring's: chunk c of `count` values is [count*c/n, count*(c+1)/n) and is
//   reduced on member c over every member's chunk c in the order a ring would add them
//   (reduceInRingOrder below), so both backends give bitwise the same values.
// - Accounting, shared by the backends (the record* helpers): each call counts, per member and
//   per CommKind, the bytes the ring algorithm sends and receives on it, and advances the
//   members' device clocks like a real collective: it starts when the last member arrives (the
//   max of their clocks) and lasts the ring's alpha-beta time on the group's placement: inside
//   one emulated node the intra-node link, across nodes one flat ring whose every step waits for
//   the slower, node-network hop (the planner's non-hierarchical ring, planner/Collectives.h).
// - Send/recv: buffered (the sender goes on; the receiver blocks until the message is there),
//   FIFO per (sender, receiver), so pipeline schedules cannot deadlock on a send.
// - Failure: abort() wakes every waiting member of this process, which throws ClusterAborted.
//
// Not here: overlap of communication with compute (a device's worker does one thing at a
// time), hierarchical (two-level) algorithms, in-network reduction.
#pragma once

#include "Device.h"
#include "RunFault.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardscope::engine {

// Per-device links, one direction. Bandwidths must be positive where used.
struct LinkSpec {
    double intra_bytes_per_second = 0;  // scale-up link of one device inside its node
    double inter_bytes_per_second = 0;  // one device's share of its node's network
    double intra_latency_s = 0;
    double inter_latency_s = 0;
    int node_devices = 0;               // devices per emulated node; 0: one node holds them all

    int nodeOf(int device) const { return node_devices > 0 ? device / node_devices : 0; }
};

enum class ReduceOp { Sum, Max };

// What carries a cluster's collectives (the CLI's --backend threads|mpi).
enum class ClusterBackend { Threads, Mpi };
const char* toString(ClusterBackend b);

// What an all-to-all counts as a member's bytes sent and received (EmulatedDevice::communicate):
//   Crossing       the values that cross to and from the other members (own share not counted)
//   OwnCopiesOut   a token dispatch: sent = every value it sends, its own share included (the
//                  copies of its tokens going out), received = every value it receives
//   OwnCopiesBack  a token combine: sent = every value it receives, its own share included (the
//                  copies of its tokens coming back), received = every value it sends
// The last two are the planner's payload convention (core/Prediction.h CommBytes: the copies a
// device dispatches and combines), so that a dropless MoE's bytes do not depend on the routing.
// The link clock is the crossing bytes' in every case.
enum class AllToAllBytes { Crossing, OwnCopiesOut, OwnCopiesBack };

// Thrown inside a worker when the run was aborted by another device's error or a cancel.
class ClusterAborted : public std::runtime_error {
public:
    ClusterAborted() : std::runtime_error("the run was aborted") {}
};

class CommGroup {
public:
    CommGroup(const LinkSpec& links, std::vector<int> member_ids, std::string name);
    virtual ~CommGroup() = default;
    CommGroup(const CommGroup&) = delete;
    CommGroup& operator=(const CommGroup&) = delete;

    int size() const { return int(ids_.size()); }
    const std::string& name() const { return name_; }
    const std::vector<int>& memberIds() const { return ids_; }
    int rankOf(int device_id) const;  // -1 when not a member
    bool crossesNodes() const { return crosses_nodes_; }

    // Chunk c of count values among n members: [chunkBegin(c), chunkBegin(c + 1)).
    static std::size_t chunkBegin(std::size_t count, int n, int c) { return count * std::size_t(c) / std::size_t(n); }

    // element_bytes (allReduce, reduceScatter, allGather, the V forms, all-to-all): what one value
    // costs on the link, for the accounting and the clock (2 for bf16 tensors held as float); 0: sizeof(T).
    // All-reduce in place: every member ends with the same, bitwise identical values.
    virtual void allReduce(int rank, float* data, std::size_t count, ReduceOp op = ReduceOp::Sum, double element_bytes = 0) = 0;
    virtual void allReduce(int rank, double* data, std::size_t count, ReduceOp op = ReduceOp::Sum, double element_bytes = 0) = 0;
    // Reduce-scatter in place: afterwards member r's chunk r of `data` holds the reduction of
    // everyone's chunk r; the rest of `data` is scratch.
    virtual void reduceScatter(int rank, float* data, std::size_t count, ReduceOp op = ReduceOp::Sum, double element_bytes = 0) = 0;
    virtual void reduceScatter(int rank, double* data, std::size_t count, ReduceOp op = ReduceOp::Sum, double element_bytes = 0) = 0;
    // All-gather in place: member r's chunk r is valid on entry; all chunks on exit.
    virtual void allGather(int rank, float* data, std::size_t count, double element_bytes = 0) = 0;
    virtual void allGather(int rank, double* data, std::size_t count, double element_bytes = 0) = 0;
    // Scatter from `root`, then ring all-gather (van de Geijn's broadcast for long messages).
    virtual void broadcast(int rank, int root, float* data, std::size_t count) = 0;
    virtual void broadcast(int rank, int root, double* data, std::size_t count) = 0;
    // All-to-all with per-peer counts (MPI_Alltoallv, NCCL's grouped send/recv; what an
    // expert-parallel token dispatch and combine run): member r sends send_counts[j] values to
    // member j, taken from `send` in member order, and receives recv_counts[i] values from
    // member i into `recv`, packed in member order. recv_counts[i] must be member i's
    // send_counts[r] (std::invalid_argument otherwise). The values a member keeps for itself are
    // copied, not counted (unless `counted` says otherwise, see AllToAllBytes). Clock: every
    // peer's message is in flight at once, on the link it crosses (the intra-node link to peers
    // of the same emulated node, the node network to the others), so a member is busy for max
    // over both links of (latency + the larger of the bytes it sends and receives on it / the
    // link's bandwidth), and the call ends when the busiest member of the group is done.
    virtual void allToAllV(int rank, const float* send, const std::size_t* send_counts, float* recv,
                           const std::size_t* recv_counts, double element_bytes = 0,
                           AllToAllBytes counted = AllToAllBytes::Crossing) = 0;
    virtual void allToAllV(int rank, const double* send, const std::size_t* send_counts, double* recv,
                           const std::size_t* recv_counts, double element_bytes = 0,
                           AllToAllBytes counted = AllToAllBytes::Crossing) = 0;
    // Variable-size all-gather (Megatron-LM's gather_from_sequence_parallel_region with
    // output_split_sizes, what the expert-tensor-parallel token gather runs): data holds the
    // members' blocks in member order, counts[i] values of member i after the blocks before it;
    // member r's block is valid on entry, every block on exit. Bytes as a ring moves them: member r
    // sends every block but r + 1's and receives every block but its own; n - 1 steps of the
    // largest block.
    virtual void allGatherV(int rank, float* data, const std::size_t* counts, double element_bytes = 0) = 0;
    virtual void allGatherV(int rank, double* data, const std::size_t* counts, double element_bytes = 0) = 0;
    // Variable-size reduce-scatter (reduce_scatter_to_sequence_parallel_region with
    // input_split_sizes): data holds every block on entry; on exit member r's block holds the
    // reduction of every member's block r, in the ring's order; the rest is unchanged. Member r
    // sends every block but its own and receives every block but r - 1's.
    virtual void reduceScatterV(int rank, float* data, const std::size_t* counts, ReduceOp op = ReduceOp::Sum,
                                double element_bytes = 0) = 0;
    virtual void reduceScatterV(int rank, double* data, const std::size_t* counts, ReduceOp op = ReduceOp::Sum,
                                double element_bytes = 0) = 0;
    // All-to-all of `count` values to and from each member (blocks in member order).
    template <class T>
    void allToAll(int rank, const T* send, T* recv, std::size_t count, double element_bytes = 0)
    {
        const std::vector<std::size_t> counts(size_t(size()), count);
        allToAllV(rank, send, counts.data(), recv, counts.data(), element_bytes);
    }
    // The alpha-beta time of one ring step carrying `chunk_bytes` on this group's placement.
    double stepSeconds(double chunk_bytes) const;

protected:
    // The accounting of one call on member `rank` (device `d`) that started at `start_s`; the
    // same for every backend, so that their measurements match.
    void recordAllReduce(EmulatedDevice& d, int rank, std::size_t count, double eb, double start_s) const;
    void recordReduceScatter(EmulatedDevice& d, int rank, std::size_t count, double eb, double start_s) const;
    void recordAllGather(EmulatedDevice& d, int rank, std::size_t count, double eb, double start_s) const;
    void recordBroadcast(EmulatedDevice& d, int rank, int root, std::size_t count, double eb, double start_s) const;
    void recordAllGatherV(EmulatedDevice& d, int rank, const std::size_t* counts, double eb, double start_s) const;
    void recordReduceScatterV(EmulatedDevice& d, int rank, const std::size_t* counts, double eb,
                              double start_s) const;
    // An all-to-all's bytes on member `rank`; `counts_of(i)` is member i's send counts.
    // Sets `mismatch` (and counts nothing) when a member's recv_counts disagree with its peers.
    template <class CountsOf>
    void allToAllBytes(int rank, CountsOf counts_of, const std::size_t* recv_counts, double eb, AllToAllBytes counted,
                       double& sent, double& received, std::string& mismatch) const;
    // The all-to-all's duration from every member's send counts (`counts_of(i)`).
    template <class CountsOf>
    double allToAllSeconds(CountsOf counts_of, double eb) const;
    double chunkValues(std::size_t count, int c) const;  // values in chunk c mod n
    // An all-to-all of a one-member group: a copy, counted only under the payload convention.
    template <class T>
    void allToAllAlone(EmulatedDevice& d, const T* send, const std::size_t* send_counts, T* recv,
                       const std::size_t* recv_counts, double eb, AllToAllBytes counted) const;

    LinkSpec links_;

private:
    std::vector<int> ids_;
    std::string name_;
    bool crosses_nodes_ = false;
};

// The collectives' float and double overloads forwarded to one template of each in `Impl`
// (allReduceT, ...): what a backend's group derives from.
template <class Impl>
class CommGroupOf : public CommGroup {
public:
    using CommGroup::CommGroup;
    void allReduce(int rank, float* data, std::size_t count, ReduceOp op, double eb) override { self().allReduceT(rank, data, count, op, eb); }
    void allReduce(int rank, double* data, std::size_t count, ReduceOp op, double eb) override { self().allReduceT(rank, data, count, op, eb); }
    void reduceScatter(int rank, float* data, std::size_t count, ReduceOp op, double eb) override { self().reduceScatterT(rank, data, count, op, eb); }
    void reduceScatter(int rank, double* data, std::size_t count, ReduceOp op, double eb) override { self().reduceScatterT(rank, data, count, op, eb); }
    void allGather(int rank, float* data, std::size_t count, double eb) override { self().allGatherT(rank, data, count, eb); }
    void allGather(int rank, double* data, std::size_t count, double eb) override { self().allGatherT(rank, data, count, eb); }
    void broadcast(int rank, int root, float* data, std::size_t count) override { self().broadcastT(rank, root, data, count); }
    void broadcast(int rank, int root, double* data, std::size_t count) override { self().broadcastT(rank, root, data, count); }
    void allToAllV(int rank, const float* send, const std::size_t* sc, float* recv, const std::size_t* rc, double eb,
                   AllToAllBytes counted) override { self().allToAllVT(rank, send, sc, recv, rc, eb, counted); }
    void allToAllV(int rank, const double* send, const std::size_t* sc, double* recv, const std::size_t* rc, double eb,
                   AllToAllBytes counted) override { self().allToAllVT(rank, send, sc, recv, rc, eb, counted); }
    void allGatherV(int rank, float* data, const std::size_t* counts, double eb) override { self().allGatherVT(rank, data, counts, eb); }
    void allGatherV(int rank, double* data, const std::size_t* counts, double eb) override { self().allGatherVT(rank, data, counts, eb); }
    void reduceScatterV(int rank, float* data, const std::size_t* counts, ReduceOp op, double eb) override { self().reduceScatterVT(rank, data, counts, op, eb); }
    void reduceScatterV(int rank, double* data, const std::size_t* counts, ReduceOp op, double eb) override { self().reduceScatterVT(rank, data, counts, op, eb); }

private:
    Impl& self() { return static_cast<Impl&>(*this); }
};

class Communicator {
public:
    // `devices[i]` must have id i (every device of the cluster, also those another process
    // runs). `cancel` (may be null) is polled at every collective.
    Communicator(std::vector<EmulatedDevice*> devices, LinkSpec links, const std::atomic<bool>* cancel = nullptr);
    virtual ~Communicator() = default;
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    const LinkSpec& links() const { return links_; }
    int deviceCount() const { return int(devices_.size()); }
    EmulatedDevice& device(int id) { return *devices_[size_t(id)]; }
    // Whether this process runs device `id`'s worker (always, with threads).
    virtual bool runsDevice(int /*id*/) const { return true; }

    // A group over these device ids, in ring order. Create groups before the workers start
    // (not thread-safe against running collectives), in the same order in every process; the
    // communicator owns them. Throws std::invalid_argument on bad ids.
    virtual CommGroup& makeGroup(const std::vector<int>& device_ids, const std::string& name) = 0;

    // Buffered point-to-point (float data), called by the sender's and the receiver's workers.
    // element_bytes: what one value costs on the link (2 for bf16 held as float); 0: 4.
    virtual void send(int from, int to, const float* data, std::size_t count, double element_bytes = 0) = 0;
    virtual void recv(int to, int from, float* data, std::size_t count, double element_bytes = 0) = 0;

    // Wakes every waiter of this process; they throw ClusterAborted. Idempotent, any thread.
    virtual void abort() = 0;
    bool aborted() const { return aborted_.load(std::memory_order_acquire); }
    bool cancelRequested() const { return cancel_ && cancel_->load(std::memory_order_relaxed); }
    // Throws ClusterAborted if aborted, aborting first when the cancel flag is up.
    void checkpoint();

    // The processes running the cluster's workers (1 with threads) and this one's index.
    virtual int processCount() const { return 1; }
    virtual int processIndex() const { return 0; }
    // Every process's `mine`, in process order, on every process: what a run's measurement is
    // assembled from. With threads, {mine}.
    virtual std::vector<std::vector<char>> allGatherBytes(const std::vector<char>& mine) { return {mine}; }
    // A worker of this process failed with this error. With threads the run returns it; MPI
    // cannot wake a peer process blocked in MPI, so it stops every rank (MPI_Abort naming it).
    virtual void workerFailed(int /*device*/, const std::string& /*message*/, RunFaultKind /*kind*/) {}

protected:
    // Checks the ids of a new group and returns its members' devices.
    std::vector<EmulatedDevice*> groupDevices(const std::vector<int>& ids, const std::string& name);
    // The sender's accounting and link time of a point-to-point message; the receiver's.
    double recordSend(int from, int to, std::size_t count, double element_bytes, double& send_clock_s);
    void recordRecv(int to, std::size_t count, double element_bytes, double send_clock_s, double link_s);

    std::vector<EmulatedDevice*> devices_;
    LinkSpec links_;
    const std::atomic<bool>* cancel_;
    std::atomic<bool> aborted_{false};
};

// The ring's arithmetic: in a ring reduce-scatter chunk c starts on member c+1 and each member
// in turn adds its own values to what arrives from its left (data += peer), ending on member c;
// member c here adds every member's chunk c in that same order (acc = x(m) op acc for
// m = c+2, ..., c-1, then x(c) op acc), so the result is bitwise the ring's. `values_of(m)`
// points at member m's first value of the range [b, e) (m != rank); `data` is member `rank`'s
// buffer, its [b, e) reduced in place. Tiles of kTile values keep the partial sums on the stack.
template <class T, class ValuesOf>
void reduceInRingOrder(int rank, int n, T* data, std::size_t b, std::size_t e, ReduceOp op, ValuesOf values_of)
{
    constexpr std::size_t kTile = 256;
    T acc[kTile];
    auto combine = [op](T a, T c) { return op == ReduceOp::Sum ? a + c : std::max(a, c); };
    for (std::size_t t = b; t < e; t += kTile) {
        const std::size_t len = std::min(kTile, e - t);
        const T* first = values_of((rank + 1) % n) + (t - b);
        std::copy(first, first + len, acc);
        for (int j = 2; j < n; ++j) {
            const T* x = values_of((rank + j) % n) + (t - b);
            if (op == ReduceOp::Sum) {
                for (std::size_t i = 0; i < len; ++i)
                    acc[i] = x[i] + acc[i];
            } else {
                for (std::size_t i = 0; i < len; ++i)
                    acc[i] = combine(x[i], acc[i]);
            }
        }
        for (std::size_t i = 0; i < len; ++i)
            data[t + i] = combine(data[t + i], acc[i]);
    }
}

template <class T>
void CommGroup::allToAllAlone(EmulatedDevice& d, const T* send, const std::size_t* send_counts, T* recv,
                              const std::size_t* recv_counts, double eb, AllToAllBytes counted) const
{
    if (recv_counts[0] != send_counts[0])
        throw std::invalid_argument("allToAllV: member 0 receives " + std::to_string(recv_counts[0]) +
                                    " values from itself but sends " + std::to_string(send_counts[0]));
    std::copy_n(send, send_counts[0], recv);
    if (counted != AllToAllBytes::Crossing) {  // the payload convention counts the own share
        const double own = double(send_counts[0]) * eb, clock = d.clockSeconds();
        d.communicate(CommKind::AllToAll, own, own, clock, clock);
    }
}

template <class CountsOf>
void CommGroup::allToAllBytes(int rank, CountsOf counts_of, const std::size_t* recv_counts, double eb,
                              AllToAllBytes counted, double& sent, double& received, std::string& mismatch) const
{
    const int n = size();
    const std::size_t* mine = counts_of(rank);
    sent = received = 0;
    for (int i = 0; i < n; ++i) {
        const std::size_t theirs = counts_of(i)[rank];
        if (theirs != recv_counts[i] && mismatch.empty())
            mismatch = "member " + std::to_string(rank) + " expects " + std::to_string(recv_counts[i]) +
                       " values from member " + std::to_string(i) + ", which sends " + std::to_string(theirs);
        if (i != rank || counted != AllToAllBytes::Crossing) {
            received += double(recv_counts[i]) * eb;
            sent += double(mine[i]) * eb;
        }
    }
    if (counted == AllToAllBytes::OwnCopiesBack)
        std::swap(sent, received);
}

template <class CountsOf>
double CommGroup::allToAllSeconds(CountsOf counts_of, double eb) const
{
    const LinkSpec& l = links_;
    const int n = size();
    double longest = 0;
    for (int m = 0; m < n; ++m) {
        const int node = l.nodeOf(ids_[size_t(m)]);
        double sent[2] = {0, 0}, received[2] = {0, 0};  // [intra, inter]
        for (int j = 0; j < n; ++j) {
            if (j == m)
                continue;
            const int link = l.nodeOf(ids_[size_t(j)]) == node ? 0 : 1;
            sent[link] += double(counts_of(m)[j]) * eb;
            received[link] += double(counts_of(j)[m]) * eb;
        }
        double busy = 0;
        for (int link = 0; link < 2; ++link) {
            const double bytes = std::max(sent[link], received[link]);
            if (bytes <= 0)
                continue;
            const double bw = link == 0 ? l.intra_bytes_per_second : l.inter_bytes_per_second;
            const double latency = link == 0 ? l.intra_latency_s : l.inter_latency_s;
            busy = std::max(busy, latency + bytes / bw);
        }
        longest = std::max(longest, busy);
    }
    return longest;
}

} // namespace shardscope::engine
