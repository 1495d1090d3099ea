// Communicator: collectives that really move data between the emulated devices
// of a cluster over shared memory, with the ring algorithm, on any sub-group.
//
// - CommGroup: an ordered set of devices (ring order = the order given). Its
//   collectives are called by every member from the member's own worker thread
//   with the member's rank. Data moves in place, peer to peer, with the ring's
//   arithmetic: chunk c is reduced on member c over every member's chunk c in the
//   order the ring would add them (bitwise the ring's result), then each member
//   copies the owners' chunks; one group barrier per phase (3 per all-reduce, not
//   the ring's 2(n - 1): thousands of emulated devices would spend their time
//   waking each other), so no chunk is read while its owner writes it. Chunk c of
//   `count` values is [count*c/n, count*(c+1)/n): uneven counts and count < n work.
// - Accounting: each call counts, per member and per CommKind, the bytes the
//   ring algorithm sends and receives on it (the chunks it would move), and advances the members'
//   device clocks like a real collective: it starts when the last member
//   arrives (the max of their clocks) and lasts the ring's alpha-beta time on
//   the group's placement: inside one emulated node the intra-node link, across
//   nodes one flat ring whose every step waits for the slower, node-network hop
//   (the planner's non-hierarchical ring, planner/Collectives.h).
// - Send/recv: buffered (the sender copies into the channel and goes on; the
//   receiver blocks until the message is there), FIFO per (sender, receiver),
//   with recycled buffers, so pipeline schedules cannot deadlock on a send.
// - Failure: abort() (an error on any device, or the run's cancel flag seen at
//   a collective or by the communicator's watcher thread) wakes every waiting
//   member, which throws ClusterAborted; a collective never waits for a device
//   that has stopped.
//
// Not here: overlap of communication with compute (a device's worker does one
// thing at a time), hierarchical (two-level) algorithms, in-network reduction.
#pragma once

#include "Device.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
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

class Communicator;

class CommGroup {
public:
    CommGroup(Communicator& comm, std::vector<EmulatedDevice*> members, std::string name);
    CommGroup(const CommGroup&) = delete;
    CommGroup& operator=(const CommGroup&) = delete;

    int size() const { return int(devices_.size()); }
    const std::string& name() const { return name_; }
    std::vector<int> memberIds() const;
    int rankOf(int device_id) const;  // -1 when not a member
    bool crossesNodes() const { return crosses_nodes_; }

    // Chunk c of count values among n members: [chunkBegin(c), chunkBegin(c + 1)).
    static std::size_t chunkBegin(std::size_t count, int n, int c) { return count * std::size_t(c) / std::size_t(n); }

    // element_bytes (allReduce, reduceScatter, allGather): what one value costs on the link,
    // for the accounting and the clock (2 for bf16 tensors held as float); 0: sizeof(T).
    // Ring all-reduce in place: every member ends with the same, bitwise identical values.
    template <class T>
    void allReduce(int rank, T* data, std::size_t count, ReduceOp op = ReduceOp::Sum, double element_bytes = 0);
    // Ring reduce-scatter in place: afterwards member r's chunk r of `data` holds
    // the reduction of everyone's chunk r; the rest of `data` is scratch.
    template <class T>
    void reduceScatter(int rank, T* data, std::size_t count, ReduceOp op = ReduceOp::Sum, double element_bytes = 0);
    // Ring all-gather in place: member r's chunk r is valid on entry; all chunks on exit.
    template <class T>
    void allGather(int rank, T* data, std::size_t count, double element_bytes = 0);
    // Scatter from `root`, then ring all-gather (van de Geijn's broadcast for long messages).
    template <class T>
    void broadcast(int rank, int root, T* data, std::size_t count);
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
    template <class T>
    void allToAllV(int rank, const T* send, const std::size_t* send_counts, T* recv, const std::size_t* recv_counts,
                   double element_bytes = 0, AllToAllBytes counted = AllToAllBytes::Crossing);
    // Variable-size all-gather (Megatron-LM's gather_from_sequence_parallel_region with
    // output_split_sizes, what the expert-tensor-parallel token gather runs): data holds the
    // members' blocks in member order, counts[i] values of member i after the blocks before it;
    // member r's block is valid on entry, every block on exit. Bytes as a ring moves them: member r
    // sends every block but r + 1's and receives every block but its own; n - 1 steps of the
    // largest block.
    template <class T>
    void allGatherV(int rank, T* data, const std::size_t* counts, double element_bytes = 0);
    // Variable-size reduce-scatter (reduce_scatter_to_sequence_parallel_region with
    // input_split_sizes): data holds every block on entry; on exit member r's block holds the
    // reduction of every member's block r, in the ring's order; the rest is unchanged. Member r
    // sends every block but its own and receives every block but r - 1's.
    template <class T>
    void reduceScatterV(int rank, T* data, const std::size_t* counts, ReduceOp op = ReduceOp::Sum,
                        double element_bytes = 0);
    // All-to-all of `count` values to and from each member (blocks in member order).
    template <class T>
    void allToAll(int rank, const T* send, T* recv, std::size_t count, double element_bytes = 0);
    // The alpha-beta time of one ring step carrying `chunk_bytes` on this group's placement.
    double stepSeconds(double chunk_bytes) const;

private:
    void arrive();  // group barrier; throws ClusterAborted after an abort
    double begin(int rank, void* data);  // publish and wait for all; returns the start clock
    template <class T>
    void reduceOwnChunk(int rank, T* data, std::size_t count, ReduceOp op);
    template <class T>
    void reduceRange(int rank, T* data, std::size_t begin, std::size_t end, ReduceOp op);
    template <class T>
    void gatherOwnedChunks(int rank, T* data, std::size_t count);
    double chunkValues(std::size_t count, int c) const;  // values in chunk c mod n
    // The all-to-all's duration from every member's published send counts (counts_).
    double allToAllSeconds(double element_bytes) const;

    friend class Communicator;
    Communicator& comm_;
    std::vector<EmulatedDevice*> devices_;
    std::string name_;
    bool crosses_nodes_ = false;
    std::mutex mutex_;
    std::condition_variable cv_;
    int arrived_ = 0;                // guarded by mutex_
    std::uint64_t generation_ = 0;   // guarded by mutex_
    // Written by each member before a barrier, read by the others after it.
    std::vector<void*> buffers_;
    std::vector<double> clocks_;
    std::vector<const std::size_t*> counts_;  // all-to-all: each member's send counts
};

class Communicator {
public:
    // `devices[i]` must have id i. `cancel` (may be null) is polled at every collective.
    Communicator(std::vector<EmulatedDevice*> devices, LinkSpec links, const std::atomic<bool>* cancel = nullptr);
    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    const LinkSpec& links() const { return links_; }
    int deviceCount() const { return int(devices_.size()); }
    EmulatedDevice& device(int id) { return *devices_[size_t(id)]; }

    // A group over these device ids, in ring order. Create groups before the
    // workers start (not thread-safe against running collectives); the
    // communicator owns them. Throws std::invalid_argument on bad ids.
    CommGroup& makeGroup(const std::vector<int>& device_ids, const std::string& name);

    // Buffered point-to-point (float data), called by the sender's and the receiver's workers.
    // element_bytes: what one value costs on the link (2 for bf16 held as float); 0: 4.
    void send(int from, int to, const float* data, std::size_t count, double element_bytes = 0);
    void recv(int to, int from, float* data, std::size_t count, double element_bytes = 0);

    // Wakes every waiter; they throw ClusterAborted. Idempotent, any thread.
    void abort();
    bool aborted() const { return aborted_.load(std::memory_order_acquire); }
    bool cancelRequested() const { return cancel_ && cancel_->load(std::memory_order_relaxed); }
    // Throws ClusterAborted if aborted, aborting first when the cancel flag is up.
    void checkpoint();

private:
    struct Message {
        std::vector<float> data;
        double send_clock_s = 0;
        double link_s = 0;
    };
    struct Channel {
        std::mutex mutex;
        std::condition_variable cv;
        std::deque<Message> queue;            // guarded by mutex
        std::vector<std::vector<float>> spare; // recycled buffers, guarded by mutex
    };
    Channel& channel(int from, int to);

    std::vector<EmulatedDevice*> devices_;
    LinkSpec links_;
    const std::atomic<bool>* cancel_;
    std::atomic<bool> aborted_{false};
    std::mutex registry_;  // guards groups_ and channels_ (their creation)
    std::vector<std::unique_ptr<CommGroup>> groups_;
    std::map<std::pair<int, int>, std::unique_ptr<Channel>> channels_;
    // With a cancel flag: one thread looks at it every 10 ms and aborts (waiters do not poll).
    std::thread watcher_;
    std::mutex watcherMutex_;
    std::condition_variable watcherCv_;
    bool watcherStop_ = false;  // guarded by watcherMutex_
};

} // namespace shardscope::engine
