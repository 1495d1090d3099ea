// ThreadCommunicator: the embedded backend (Communicator.h): every device a worker thread of
// this process, collectives over shared memory.
//
// - ThreadCommGroup: data moves in place, peer to peer, with the ring's arithmetic
//   (reduceInRingOrder); one group barrier per phase (3 per all-reduce, not the ring's
//   2(n - 1): thousands of emulated devices would spend their time waking each other), so no
//   chunk is read while its owner writes it. Uneven counts and count < n work.
// - Send/recv: the sender copies into the channel and goes on; the receiver blocks until the
//   message is there; recycled buffers.
// - Waiting: while the cluster's workers fit on the host's cores (each worker on a core of its
//   own), a waiter spins briefly on the barrier's generation before it sleeps: a futex sleep and
//   wake cost tens of microseconds, and a two-way tensor-parallel step meets hundreds of
//   barriers. With more workers than cores it sleeps at once (a spinner would take a core from
//   the worker it waits for).
// - Failure: abort() (an error on any device, or the run's cancel flag seen at a collective or
//   by the communicator's watcher thread) wakes every waiting member; a collective never waits
//   for a device that has stopped.
#pragma once

#include "Communicator.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace shardscope::engine {

class ThreadCommunicator;

class ThreadCommGroup final : public CommGroupOf<ThreadCommGroup> {
public:
    ThreadCommGroup(ThreadCommunicator& comm, std::vector<EmulatedDevice*> members, std::vector<int> ids,
                    std::string name);

private:
    friend class CommGroupOf<ThreadCommGroup>;
    template <class T> void allReduceT(int rank, T* data, std::size_t count, ReduceOp op, double eb);
    template <class T> void reduceScatterT(int rank, T* data, std::size_t count, ReduceOp op, double eb);
    template <class T> void allGatherT(int rank, T* data, std::size_t count, double eb);
    template <class T> void broadcastT(int rank, int root, T* data, std::size_t count);
    template <class T>
    void allToAllVT(int rank, const T* send, const std::size_t* send_counts, T* recv, const std::size_t* recv_counts,
                    double eb, AllToAllBytes counted);
    template <class T> void allGatherVT(int rank, T* data, const std::size_t* counts, double eb);
    template <class T> void reduceScatterVT(int rank, T* data, const std::size_t* counts, ReduceOp op, double eb);

    void arrive();  // group barrier; throws ClusterAborted after an abort
    double begin(int rank, void* data);  // publish and wait for all; returns the start clock
    template <class T>
    void reduceRange(int rank, T* data, std::size_t begin, std::size_t end, ReduceOp op);
    template <class T>
    void gatherOwnedChunks(int rank, T* data, std::size_t count);

    friend class ThreadCommunicator;
    ThreadCommunicator& comm_;
    std::vector<EmulatedDevice*> devices_;
    std::mutex mutex_;
    std::condition_variable cv_;
    int arrived_ = 0;                // guarded by mutex_
    std::uint64_t generation_ = 0;   // guarded by mutex_
    std::atomic<std::uint64_t> published_{0};  // mirrors generation_ for the spin phase
    // Written by each member before a barrier, read by the others after it.
    std::vector<void*> buffers_;
    std::vector<double> clocks_;
    std::vector<const std::size_t*> counts_;  // all-to-all: each member's send counts
};

class ThreadCommunicator final : public Communicator {
public:
    // `devices[i]` must have id i. `cancel` (may be null) is polled at every collective.
    ThreadCommunicator(std::vector<EmulatedDevice*> devices, LinkSpec links, const std::atomic<bool>* cancel = nullptr);
    ~ThreadCommunicator() override;

    CommGroup& makeGroup(const std::vector<int>& device_ids, const std::string& name) override;
    void send(int from, int to, const float* data, std::size_t count, double element_bytes = 0) override;
    void recv(int to, int from, float* data, std::size_t count, double element_bytes = 0) override;
    void abort() override;
    // Whether waiters spin before they sleep: every worker has a core of its own.
    bool spins() const { return spins_; }

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
        std::atomic<std::size_t> queued{0};   // queue.size(), for the receiver's spin phase
        std::vector<std::vector<float>> spare; // recycled buffers, guarded by mutex
    };
    Channel& channel(int from, int to);

    bool spins_ = false;
    std::mutex registry_;  // guards groups_ and channels_ (their creation)
    std::vector<std::unique_ptr<ThreadCommGroup>> groups_;
    std::map<std::pair<int, int>, std::unique_ptr<Channel>> channels_;
    // With a cancel flag: one thread looks at it every 10 ms and aborts (waiters do not poll).
    std::thread watcher_;
    std::mutex watcherMutex_;
    std::condition_variable watcherCv_;
    bool watcherStop_ = false;  // guarded by watcherMutex_
};

} // namespace shardscope::engine
