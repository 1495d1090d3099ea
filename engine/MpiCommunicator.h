// MpiCommunicator: the cluster's devices spread over the MPI ranks of an mpirun job
// (Communicator.h; compiled only with Open MPI). Every rank builds the same cluster (same
// devices, same groups, in the same order) and runs the workers of its own devices: rank r of
// R runs devices [n r / R, n (r + 1) / R), so tensor-parallel neighbours share a rank the way
// they share a node. Several ranks may share a host (`mpirun --oversubscribe`) or spread over
// hosts (`mpirun --hostfile FILE`).
//
// - MpiCommGroup: the ranks holding a group's members get their own communicator
//   (MPI_Comm_split of the world; MPI_Comm_dup of MPI_COMM_SELF when one rank holds them all).
//   In a collective the local members meet at a barrier of this process, the first local member
//   moves the data of all of them with MPI on the group's communicator, then they meet again.
//   Reductions: member c's chunk of every member goes to member c with MPI_Alltoallv and member
//   c reduces them in the ring's order (reduceInRingOrder), then MPI_Allgatherv brings every
//   reduced chunk to everyone: the ring's traffic and bitwise the threads backend's values.
//   MPI_Allreduce and MPI_Reduce_scatter_block are not used for sums because their order is
//   Open MPI's choice (its tuned component switches algorithm by size and rank count), which
//   would make an MPI run's losses differ from a threads run's in the last bits. The start
//   clock is an MPI_Allreduce (MPI_MAX) of the members' clocks; all-to-all counts an
//   MPI_Allgatherv; data MPI_Alltoallv; broadcast MPI_Bcast.
// - Send/recv: MPI_Isend of [send clock, link time, values] (the sender goes on: buffered like
//   the threads backend), MPI_Recv by the receiver; tag = sender * n + receiver on a duplicate
//   of the world communicator, FIFO per pair by MPI's non-overtaking rule.
// - Failure: a worker that fails prints its error naming rank, device and kind and calls
//   MPI_Abort, so every rank stops (a peer blocked in MPI cannot be woken otherwise); a rank
//   that dies makes mpirun stop the others.
#pragma once

#include "Communicator.h"

#include <mpi.h>

#include <condition_variable>
#include <memory>
#include <mutex>

namespace shardscope::engine {

class MpiCommunicator;

class MpiCommGroup final : public CommGroupOf<MpiCommGroup> {
public:
    MpiCommGroup(MpiCommunicator& comm, std::vector<EmulatedDevice*> members, std::vector<int> ids, std::string name);
    ~MpiCommGroup() override;

private:
    friend class CommGroupOf<MpiCommGroup>;
    template <class T> void allReduceT(int rank, T* data, std::size_t count, ReduceOp op, double eb);
    template <class T> void reduceScatterT(int rank, T* data, std::size_t count, ReduceOp op, double eb);
    template <class T> void allGatherT(int rank, T* data, std::size_t count, double eb);
    template <class T> void broadcastT(int rank, int root, T* data, std::size_t count);
    template <class T>
    void allToAllVT(int rank, const T* send, const std::size_t* send_counts, T* recv, const std::size_t* recv_counts,
                    double eb, AllToAllBytes counted);
    template <class T> void allGatherVT(int rank, T* data, const std::size_t* counts, double eb);
    template <class T> void reduceScatterVT(int rank, T* data, const std::size_t* counts, ReduceOp op, double eb);

    // Publishes this member's buffer and clock, lets the first local member run `work` for
    // every local member once all of them are here, and returns the start clock (the latest
    // member clock of the whole group).
    template <class Work>
    double collective(int rank, void* data, Work work);
    void arrive();  // barrier of the local members; throws ClusterAborted after an abort
    // Blocks [offsets[m], offsets[m] + lengths[m]) of member m: reduced over every member's
    // buffer into member m's (reduceBlocks), or copied from member m to everyone (gatherBlocks).
    template <class T> void reduceBlocks(ReduceOp op);
    template <class T> void gatherBlocks();
    void chunkBlocks(std::size_t count);  // offsets_/lengths_ of the ring's chunks
    void countBlocks(const std::size_t* counts);  // offsets_/lengths_ of packed blocks
    int localIndex(int member) const;  // position among this process's members, -1 if remote

    friend class MpiCommunicator;
    MpiCommunicator& comm_;
    std::vector<EmulatedDevice*> devices_;
    MPI_Comm mpi_ = MPI_COMM_NULL;       // the ranks holding members; null without local members
    std::vector<int> local_;             // this process's members (group ranks), in group order
    std::vector<std::vector<int>> on_;   // on_[p]: the members on the group communicator's rank p
    std::vector<int> procOf_;            // member -> group communicator rank
    std::vector<int> indexOnProc_;       // member -> position among on_[procOf_]
    // on_[0], on_[1], ... is 0, 1, ..., n - 1 (each rank's members consecutive, ranks in member
    // order): with one local member its buffer is already MPI's send (or in-place) layout.
    bool procOrdered_ = true;

    std::mutex mutex_;
    std::condition_variable cv_;
    int arrived_ = 0;               // guarded by mutex_
    std::uint64_t generation_ = 0;  // guarded by mutex_
    // Written by each local member before a barrier, read by the first after it.
    std::vector<void*> buffers_;
    std::vector<double> clocks_;
    std::vector<const std::size_t*> counts_;
    double start_ = 0;  // written by the first local member between the barriers
    // The first local member's scratch (one collective at a time per group).
    std::vector<std::size_t> offsets_, lengths_;
    std::vector<int> sendCounts_, sendDispls_, recvCounts_, recvDispls_;
    std::vector<char> sendBuf_, recvBuf_;
    std::vector<std::size_t> countMatrix_;  // all-to-all: every member's send counts, member-major
};

class MpiCommunicator final : public Communicator {
public:
    MpiCommunicator(std::vector<EmulatedDevice*> devices, LinkSpec links, const std::atomic<bool>* cancel = nullptr);
    ~MpiCommunicator() override;

    bool runsDevice(int id) const override { return ownerOf(id) == rank_; }
    int ownerOf(int device) const { return owner_[size_t(device)]; }
    int processCount() const override { return ranks_; }
    int processIndex() const override { return rank_; }
    std::vector<std::vector<char>> allGatherBytes(const std::vector<char>& mine) override;
    void workerFailed(int device, const std::string& message, RunFaultKind kind) override;

    CommGroup& makeGroup(const std::vector<int>& device_ids, const std::string& name) override;
    void send(int from, int to, const float* data, std::size_t count, double element_bytes = 0) override;
    void recv(int to, int from, float* data, std::size_t count, double element_bytes = 0) override;
    void abort() override;

    MPI_Comm world() const { return world_; }

private:
    int tag(int from, int to) const { return from * deviceCount() + to; }
    void completeSends(bool wait);  // frees the buffers of finished sends; `wait`: all of them

    MPI_Comm world_ = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD: the run's own tags
    int rank_ = 0, ranks_ = 1;
    std::vector<int> owner_;  // device -> rank
    std::mutex registry_;     // guards groups_
    std::vector<std::unique_ptr<MpiCommGroup>> groups_;
    struct PendingSend {
        MPI_Request request;
        std::vector<char> bytes;
    };
    std::mutex sendMutex_;  // guards pending_
    std::vector<std::unique_ptr<PendingSend>> pending_;
    std::vector<std::vector<char>> recvScratch_;  // per receiving device, used by its worker only
};

} // namespace shardscope::engine
