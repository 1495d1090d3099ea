// The MPI backend: collectives of the layout's groups on MPI sub-communicators; see MpiCommunicator.h.
#include "MpiCommunicator.h"

#include "MpiSession.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace shardscope::engine {

namespace {

template <class T>
MPI_Datatype mpiType();
template <>
MPI_Datatype mpiType<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype mpiType<double>() { return MPI_DOUBLE; }

// MPI counts are int: a buffer larger than that is refused by name rather than truncated.
int mpiCount(std::size_t values, const std::string& group)
{
    if (values > std::size_t(INT_MAX))
        throw std::length_error("MPI backend: group " + group + " moves " + std::to_string(values) +
                                " values in one call, more than MPI's int counts hold");
    return int(values);
}

void check(int rc, const char* call)
{
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        throw std::runtime_error(std::string(call) + ": " + std::string(text, size_t(len)));
    }
}

} // namespace

// ---------------------------------------------------------------- session

MpiUnavailable::MpiUnavailable() : std::runtime_error("MPI is not available") {}

bool mpiAvailable() { return true; }

MpiSession::MpiSession()
{
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized)
        throw std::logic_error("MpiSession: MPI is already initialized (one session per process)");
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        throw std::runtime_error("--backend mpi: this MPI library gives no MPI_THREAD_MULTIPLE support (every "
                                 "emulated device's worker thread calls MPI)");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

// Waiting ranks sleep instead of spinning in MPI_Barrier: ranks oversubscribe the cores, and a
// rank that measures the host or runs a benchmark alone should have them.
void MpiSession::barrier() const
{
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    for (int done = 0; !done;) {
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

bool MpiSession::sameOnEveryRank(std::uint64_t value) const
{
    std::uint64_t low = 0, high = 0;
    check(MPI_Allreduce(&value, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    check(MPI_Allreduce(&value, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return low == high;
}

void MpiSession::abort(int exit_code) const
{
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; if it ever did, this rank still stops
}

std::unique_ptr<Communicator> makeMpiCommunicator(std::vector<EmulatedDevice*> devices, LinkSpec links,
                                                  const std::atomic<bool>* cancel)
{
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        throw std::logic_error("--backend mpi: MPI is not initialized (an MpiSession must come first)");
    return std::make_unique<MpiCommunicator>(std::move(devices), links, cancel);
}

// ---------------------------------------------------------------- group

MpiCommGroup::MpiCommGroup(MpiCommunicator& comm, std::vector<EmulatedDevice*> members, std::vector<int> ids,
                           std::string name)
    : CommGroupOf(comm.links(), std::move(ids), std::move(name)), comm_(comm), devices_(std::move(members)),
      procOf_(devices_.size(), -1), indexOnProc_(devices_.size(), -1), buffers_(devices_.size(), nullptr),
      clocks_(devices_.size(), 0.0), counts_(devices_.size(), nullptr)
{
    const int n = size();
    // The ranks holding members, in world-rank order (the group communicator's order).
    std::vector<int> holders;
    for (int m = 0; m < n; ++m)
        holders.push_back(comm.ownerOf(memberIds()[size_t(m)]));
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    on_.resize(holders.size());
    for (int m = 0; m < n; ++m) {
        const int owner = comm.ownerOf(memberIds()[size_t(m)]);
        const int p = int(std::lower_bound(holders.begin(), holders.end(), owner) - holders.begin());
        procOf_[size_t(m)] = p;
        indexOnProc_[size_t(m)] = int(on_[size_t(p)].size());
        on_[size_t(p)].push_back(m);
        if (owner == comm.processIndex())
            local_.push_back(m);
    }
    int next = 0;
    for (const std::vector<int>& members : on_)
        for (int m : members)
            procOrdered_ = procOrdered_ && m == next++;
    if (n == 1)
        return;  // nothing to move
    // Every rank builds every group in the same order, so these collective calls match.
    if (holders.size() == 1) {
        if (!local_.empty())
            check(MPI_Comm_dup(MPI_COMM_SELF, &mpi_), "MPI_Comm_dup");
    } else {
        check(MPI_Comm_split(comm.world(), local_.empty() ? MPI_UNDEFINED : 0, comm.processIndex(), &mpi_),
              "MPI_Comm_split");
    }
}

MpiCommGroup::~MpiCommGroup()
{
    if (mpi_ != MPI_COMM_NULL)
        MPI_Comm_free(&mpi_);
}

int MpiCommGroup::localIndex(int member) const
{
    for (size_t i = 0; i < local_.size(); ++i)
        if (local_[i] == member)
            return int(i);
    return -1;
}

void MpiCommGroup::arrive()
{
    comm_.checkpoint();
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == int(local_.size())) {
        arrived_ = 0;
        ++generation_;
        cv_.notify_all();
        return;
    }
    cv_.wait(lock, [&] { return generation_ != generation || comm_.aborted(); });
    if (generation_ == generation)
        throw ClusterAborted();
}

template <class Work>
double MpiCommGroup::collective(int rank, void* data, Work work)
{
    buffers_[size_t(rank)] = data;
    clocks_[size_t(rank)] = devices_[size_t(rank)]->clockSeconds();
    arrive();
    if (rank == local_.front()) {
        double latest = 0;
        for (int m : local_)
            latest = std::max(latest, clocks_[size_t(m)]);
        check(MPI_Allreduce(&latest, &start_, 1, MPI_DOUBLE, MPI_MAX, mpi_), "MPI_Allreduce");
        work();
    }
    arrive();  // the first local member has moved everyone's data
    return start_;
}

void MpiCommGroup::chunkBlocks(std::size_t count)
{
    const int n = size();
    offsets_.resize(size_t(n));
    lengths_.resize(size_t(n));
    for (int m = 0; m < n; ++m) {
        offsets_[size_t(m)] = chunkBegin(count, n, m);
        lengths_[size_t(m)] = chunkBegin(count, n, m + 1) - offsets_[size_t(m)];
    }
}

void MpiCommGroup::countBlocks(const std::size_t* counts)
{
    const int n = size();
    offsets_.resize(size_t(n));
    lengths_.resize(size_t(n));
    std::size_t at = 0;
    for (int m = 0; m < n; ++m) {
        offsets_[size_t(m)] = at;
        lengths_[size_t(m)] = counts[m];
        at += counts[m];
    }
}

// To the rank holding member c: block c of every local member's buffer (c-major, then the local
// members in group order); from rank p: block c (each local c) of every member p holds.
template <class T>
void MpiCommGroup::reduceBlocks(ReduceOp op)
{
    const int procs = int(on_.size()), locals = int(local_.size());
    sendCounts_.assign(size_t(procs), 0);
    recvCounts_.assign(size_t(procs), 0);
    sendDispls_.assign(size_t(procs), 0);
    recvDispls_.assign(size_t(procs), 0);
    std::size_t localLength = 0;
    for (int c : local_)
        localLength += lengths_[size_t(c)];
    std::size_t sendTotal = 0, recvTotal = 0;
    for (int p = 0; p < procs; ++p) {
        std::size_t toP = 0;
        for (int c : on_[size_t(p)])
            toP += lengths_[size_t(c)];
        sendDispls_[size_t(p)] = mpiCount(sendTotal, name());
        sendCounts_[size_t(p)] = mpiCount(toP * size_t(locals), name());
        sendTotal += toP * size_t(locals);
        recvDispls_[size_t(p)] = mpiCount(recvTotal, name());
        recvCounts_[size_t(p)] = mpiCount(localLength * on_[size_t(p)].size(), name());
        recvTotal += localLength * on_[size_t(p)].size();
    }
    recvBuf_.resize(recvTotal * sizeof(T));
    const void* send = nullptr;
    if (locals == 1 && procOrdered_) {  // the member's own buffer, block c at its offset
        send = buffers_[size_t(local_.front())];
        for (int p = 0; p < procs; ++p)
            sendDispls_[size_t(p)] = mpiCount(offsets_[size_t(on_[size_t(p)].front())], name());
    } else {
        sendBuf_.resize(sendTotal * sizeof(T));
        T* out = reinterpret_cast<T*>(sendBuf_.data());
        for (int p = 0; p < procs; ++p)
            for (int c : on_[size_t(p)])
                for (int i : local_) {
                    const T* from = static_cast<const T*>(buffers_[size_t(i)]) + offsets_[size_t(c)];
                    out = std::copy(from, from + lengths_[size_t(c)], out);
                }
        send = sendBuf_.data();
    }
    check(MPI_Alltoallv(send, sendCounts_.data(), sendDispls_.data(), mpiType<T>(), recvBuf_.data(),
                        recvCounts_.data(), recvDispls_.data(), mpiType<T>(), mpi_),
          "MPI_Alltoallv");
    const T* in = reinterpret_cast<const T*>(recvBuf_.data());
    std::size_t before = 0;  // values of the local members before c in each rank's block
    for (int c : local_) {
        const std::size_t len = lengths_[size_t(c)];
        auto valuesOf = [&](int m) {
            const int p = procOf_[size_t(m)];
            return in + recvDispls_[size_t(p)] + before * on_[size_t(p)].size() +
                   size_t(indexOnProc_[size_t(m)]) * len;
        };
        reduceInRingOrder(c, size(), static_cast<T*>(buffers_[size_t(c)]), offsets_[size_t(c)],
                          offsets_[size_t(c)] + len, op, valuesOf);
        before += len;
    }
}

// Every local member's own block to every rank (MPI_Allgatherv), then into every local buffer.
template <class T>
void MpiCommGroup::gatherBlocks()
{
    const int procs = int(on_.size());
    recvCounts_.assign(size_t(procs), 0);
    recvDispls_.assign(size_t(procs), 0);
    std::size_t total = 0;
    for (int p = 0; p < procs; ++p) {
        std::size_t fromP = 0;
        for (int m : on_[size_t(p)])
            fromP += lengths_[size_t(m)];
        recvDispls_[size_t(p)] = mpiCount(total, name());
        recvCounts_[size_t(p)] = mpiCount(fromP, name());
        total += fromP;
    }
    if (local_.size() == 1 && procOrdered_) {  // in place: every block lands at its offset
        for (int p = 0; p < procs; ++p)
            recvDispls_[size_t(p)] = mpiCount(offsets_[size_t(on_[size_t(p)].front())], name());
        check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffers_[size_t(local_.front())], recvCounts_.data(),
                             recvDispls_.data(), mpiType<T>(), mpi_),
              "MPI_Allgatherv");
        return;
    }
    std::size_t mine = 0;
    for (int c : local_)
        mine += lengths_[size_t(c)];
    sendBuf_.resize(mine * sizeof(T));
    recvBuf_.resize(total * sizeof(T));
    T* out = reinterpret_cast<T*>(sendBuf_.data());
    for (int c : local_) {
        const T* from = static_cast<const T*>(buffers_[size_t(c)]) + offsets_[size_t(c)];
        out = std::copy(from, from + lengths_[size_t(c)], out);
    }
    check(MPI_Allgatherv(sendBuf_.data(), mpiCount(mine, name()), mpiType<T>(), recvBuf_.data(), recvCounts_.data(),
                         recvDispls_.data(), mpiType<T>(), mpi_),
          "MPI_Allgatherv");
    const T* in = reinterpret_cast<const T*>(recvBuf_.data());
    for (int p = 0; p < procs; ++p) {
        const T* block = in + recvDispls_[size_t(p)];
        for (int m : on_[size_t(p)]) {
            const std::size_t len = lengths_[size_t(m)];
            for (int i : local_)
                if (i != m)
                    std::copy(block, block + len, static_cast<T*>(buffers_[size_t(i)]) + offsets_[size_t(m)]);
            block += len;
        }
    }
}

template <class T>
void MpiCommGroup::allReduceT(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    if (size() == 1)
        return;
    const double start = collective(rank, data, [&] {
        chunkBlocks(count);
        reduceBlocks<T>(op);
        gatherBlocks<T>();
    });
    recordAllReduce(*devices_[size_t(rank)], rank, count, element_bytes > 0 ? element_bytes : double(sizeof(T)), start);
}

template <class T>
void MpiCommGroup::reduceScatterT(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    if (size() == 1)
        return;
    const double start = collective(rank, data, [&] {
        chunkBlocks(count);
        reduceBlocks<T>(op);
    });
    recordReduceScatter(*devices_[size_t(rank)], rank, count, element_bytes > 0 ? element_bytes : double(sizeof(T)),
                        start);
}

template <class T>
void MpiCommGroup::allGatherT(int rank, T* data, std::size_t count, double element_bytes)
{
    if (size() == 1)
        return;
    const double start = collective(rank, data, [&] {
        chunkBlocks(count);
        gatherBlocks<T>();
    });
    recordAllGather(*devices_[size_t(rank)], rank, count, element_bytes > 0 ? element_bytes : double(sizeof(T)), start);
}

template <class T>
void MpiCommGroup::allGatherVT(int rank, T* data, const std::size_t* counts, double element_bytes)
{
    if (size() == 1)
        return;
    const double start = collective(rank, data, [&] {
        countBlocks(counts);
        gatherBlocks<T>();
    });
    recordAllGatherV(*devices_[size_t(rank)], rank, counts, element_bytes > 0 ? element_bytes : double(sizeof(T)),
                     start);
}

template <class T>
void MpiCommGroup::reduceScatterVT(int rank, T* data, const std::size_t* counts, ReduceOp op, double element_bytes)
{
    if (size() == 1)
        return;
    const double start = collective(rank, data, [&] {
        countBlocks(counts);
        reduceBlocks<T>(op);
    });
    recordReduceScatterV(*devices_[size_t(rank)], rank, counts, element_bytes > 0 ? element_bytes : double(sizeof(T)),
                         start);
}

template <class T>
void MpiCommGroup::broadcastT(int rank, int root, T* data, std::size_t count)
{
    if (size() == 1)
        return;
    const double start = collective(rank, data, [&] {
        // Into the root's buffer when it is here, else into the first local member's.
        const int holder = localIndex(root) >= 0 ? root : local_.front();
        T* buffer = static_cast<T*>(buffers_[size_t(holder)]);
        check(MPI_Bcast(buffer, mpiCount(count, name()), mpiType<T>(), procOf_[size_t(root)], mpi_), "MPI_Bcast");
        for (int i : local_)
            if (i != holder)
                std::copy(buffer, buffer + count, static_cast<T*>(buffers_[size_t(i)]));
    });
    recordBroadcast(*devices_[size_t(rank)], rank, root, count, double(sizeof(T)), start);
}

template <class T>
void MpiCommGroup::allToAllVT(int rank, const T* send, const std::size_t* send_counts, T* recv,
                              const std::size_t* recv_counts, double element_bytes, AllToAllBytes counted)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return allToAllAlone(*devices_[0], send, send_counts, recv, recv_counts, eb, counted);
    counts_[size_t(rank)] = send_counts;
    // The exchange follows the senders' counts; a member whose recv_counts disagree with them
    // gets nothing written and throws below, like the threads backend.
    const double start = collective(rank, const_cast<T*>(send), [&] {
        const int procs = int(on_.size()), locals = int(local_.size());
        // Every member's send counts, member-major: each rank sends its members' rows.
        countMatrix_.resize(size_t(n) * size_t(n));
        std::vector<std::size_t> mine(size_t(locals) * size_t(n));
        for (int k = 0; k < locals; ++k)
            std::copy_n(counts_[size_t(local_[size_t(k)])], n, mine.begin() + std::ptrdiff_t(k) * n);
        recvCounts_.assign(size_t(procs), 0);
        recvDispls_.assign(size_t(procs), 0);
        std::vector<std::size_t> rows;
        rows.resize(size_t(n) * size_t(n));
        int at = 0;
        for (int p = 0; p < procs; ++p) {
            recvDispls_[size_t(p)] = at;
            recvCounts_[size_t(p)] = mpiCount(on_[size_t(p)].size() * size_t(n), name());
            at += recvCounts_[size_t(p)];
        }
        static_assert(sizeof(std::size_t) == sizeof(std::uint64_t));
        check(MPI_Allgatherv(mine.data(), mpiCount(mine.size(), name()), MPI_UINT64_T, rows.data(),
                             recvCounts_.data(), recvDispls_.data(), MPI_UINT64_T, mpi_),
              "MPI_Allgatherv");
        for (int p = 0; p < procs; ++p)
            for (size_t k = 0; k < on_[size_t(p)].size(); ++k)
                std::copy_n(rows.begin() + recvDispls_[size_t(p)] + std::ptrdiff_t(k) * n, n,
                            countMatrix_.begin() + std::ptrdiff_t(on_[size_t(p)][k]) * n);
        auto row = [&](int m) { return countMatrix_.data() + size_t(m) * size_t(n); };
        // Data: to rank q, for each local sender i, for each member j on q, the block i -> j.
        sendCounts_.assign(size_t(procs), 0);
        sendDispls_.assign(size_t(procs), 0);
        std::size_t sendTotal = 0, recvTotal = 0;
        for (int p = 0; p < procs; ++p) {
            std::size_t toP = 0, fromP = 0;
            for (int i : local_)
                for (int j : on_[size_t(p)])
                    toP += row(i)[j];
            for (int i : on_[size_t(p)])
                for (int j : local_)
                    fromP += row(i)[j];
            sendDispls_[size_t(p)] = mpiCount(sendTotal, name());
            sendCounts_[size_t(p)] = mpiCount(toP, name());
            recvDispls_[size_t(p)] = mpiCount(recvTotal, name());
            recvCounts_[size_t(p)] = mpiCount(fromP, name());
            sendTotal += toP;
            recvTotal += fromP;
        }
        sendBuf_.resize(sendTotal * sizeof(T));
        recvBuf_.resize(recvTotal * sizeof(T));
        T* out = reinterpret_cast<T*>(sendBuf_.data());
        for (int p = 0; p < procs; ++p)
            for (int i : local_) {
                const T* from = static_cast<const T*>(buffers_[size_t(i)]);
                for (int j : on_[size_t(p)]) {
                    std::size_t offset = 0;
                    for (int k = 0; k < j; ++k)
                        offset += row(i)[k];
                    out = std::copy(from + offset, from + offset + row(i)[j], out);
                }
            }
        check(MPI_Alltoallv(sendBuf_.data(), sendCounts_.data(), sendDispls_.data(), mpiType<T>(), recvBuf_.data(),
                            recvCounts_.data(), recvDispls_.data(), mpiType<T>(), mpi_),
              "MPI_Alltoallv");
    });
    auto countsOf = [&](int m) { return countMatrix_.data() + size_t(m) * size_t(n); };
    std::string mismatch;
    double sent = 0, received = 0;
    allToAllBytes(rank, countsOf, recv_counts, eb, counted, sent, received, mismatch);
    if (mismatch.empty()) {
        // From rank p: for each member i on p, for each local receiver j, the block i -> j.
        const T* in = reinterpret_cast<const T*>(recvBuf_.data());
        std::size_t at = 0;
        for (int i = 0; i < n; ++i) {
            const int p = procOf_[size_t(i)];
            std::size_t offset = std::size_t(recvDispls_[size_t(p)]);
            for (int k = 0; k < indexOnProc_[size_t(i)]; ++k)
                for (int j : local_)
                    offset += countsOf(on_[size_t(p)][size_t(k)])[j];
            for (int j : local_) {
                if (j == rank)
                    break;
                offset += countsOf(i)[j];
            }
            std::copy_n(in + offset, recv_counts[i], recv + at);
            at += recv_counts[i];
        }
    }
    const double seconds = mismatch.empty() ? allToAllSeconds(countsOf, eb) : 0;
    arrive();  // every local member has read the received blocks
    if (!mismatch.empty())
        throw std::invalid_argument("allToAllV in group " + name() + ": " + mismatch);
    devices_[size_t(rank)]->communicate(CommKind::AllToAll, sent, received, start, start + seconds);
}

// ---------------------------------------------------------------- communicator

MpiCommunicator::MpiCommunicator(std::vector<EmulatedDevice*> devices, LinkSpec links,
                                 const std::atomic<bool>* cancel)
    : Communicator(std::move(devices), links, cancel), owner_(devices_.size(), 0), recvScratch_(devices_.size())
{
    check(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup");
    MPI_Comm_rank(world_, &rank_);
    MPI_Comm_size(world_, &ranks_);
    const std::size_t n = devices_.size();
    for (int r = 0; r < ranks_; ++r)
        for (std::size_t d = n * std::size_t(r) / std::size_t(ranks_); d < n * std::size_t(r + 1) / std::size_t(ranks_);
             ++d)
            owner_[d] = r;
    void* tagUpper = nullptr;
    int found = 0;
    MPI_Comm_get_attr(world_, MPI_TAG_UB, &tagUpper, &found);
    if (found && double(n) * double(n) > double(*static_cast<int*>(tagUpper)))
        throw std::invalid_argument("MPI backend: " + std::to_string(n) + " devices need more message tags than " +
                                    "this MPI's MPI_TAG_UB (" + std::to_string(*static_cast<int*>(tagUpper)) + ")");
}

MpiCommunicator::~MpiCommunicator()
{
    completeSends(true);
    groups_.clear();  // their communicators, freed in the same order on every rank
    MPI_Comm_free(&world_);
}

CommGroup& MpiCommunicator::makeGroup(const std::vector<int>& ids, const std::string& name)
{
    std::vector<EmulatedDevice*> members = groupDevices(ids, name);
    std::lock_guard<std::mutex> lock(registry_);
    groups_.push_back(std::make_unique<MpiCommGroup>(*this, std::move(members), ids, name));
    return *groups_.back();
}

void MpiCommunicator::completeSends(bool wait)
{
    std::lock_guard<std::mutex> lock(sendMutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
        int done = 1;
        if (wait)
            MPI_Wait(&(*it)->request, MPI_STATUS_IGNORE);
        else
            MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE);
        it = done ? pending_.erase(it) : it + 1;
    }
}

void MpiCommunicator::send(int from, int to, const float* data, std::size_t count, double element_bytes)
{
    checkpoint();
    double t0 = 0;
    const double link = recordSend(from, to, count, element_bytes, t0);
    auto message = std::make_unique<PendingSend>();
    const double header[2] = {t0, link};
    message->bytes.resize(sizeof header + count * sizeof(float));
    std::memcpy(message->bytes.data(), header, sizeof header);
    std::memcpy(message->bytes.data() + sizeof header, data, count * sizeof(float));
    completeSends(false);
    std::lock_guard<std::mutex> lock(sendMutex_);
    check(MPI_Isend(message->bytes.data(), mpiCount(message->bytes.size(), "send/recv"), MPI_BYTE, ownerOf(to),
                    tag(from, to), world_, &message->request),
          "MPI_Isend");
    pending_.push_back(std::move(message));
}

void MpiCommunicator::recv(int to, int from, float* data, std::size_t count, double element_bytes)
{
    checkpoint();
    std::vector<char>& buffer = recvScratch_[size_t(to)];
    const std::size_t expected = 2 * sizeof(double) + count * sizeof(float);
    buffer.resize(std::max(expected, buffer.size()));
    MPI_Status status;
    check(MPI_Recv(buffer.data(), mpiCount(buffer.size(), "send/recv"), MPI_BYTE, ownerOf(from), tag(from, to), world_,
                   &status),
          "MPI_Recv");
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (std::size_t(got) != expected)
        throw std::logic_error("Communicator: device " + std::to_string(to) + " expected " + std::to_string(count) +
                               " values from device " + std::to_string(from) + ", got " +
                               std::to_string((std::size_t(got) - std::min<std::size_t>(std::size_t(got), 16)) / 4));
    double header[2];
    std::memcpy(header, buffer.data(), sizeof header);
    std::memcpy(data, buffer.data() + sizeof header, count * sizeof(float));
    recordRecv(to, count, element_bytes, header[0], header[1]);
}

void MpiCommunicator::abort()
{
    aborted_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(registry_);
    for (auto& g : groups_) {
        std::lock_guard<std::mutex> l(g->mutex_);
        g->cv_.notify_all();
    }
}

std::vector<std::vector<char>> MpiCommunicator::allGatherBytes(const std::vector<char>& mine)
{
    std::vector<int> sizes(size_t(ranks_), 0), displs(size_t(ranks_), 0);
    const int size = mpiCount(mine.size(), "measurement");
    check(MPI_Allgather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, world_), "MPI_Allgather");
    std::size_t total = 0;
    for (int r = 0; r < ranks_; ++r) {
        displs[size_t(r)] = mpiCount(total, "measurement");
        total += std::size_t(sizes[size_t(r)]);
    }
    std::vector<char> all(total);
    check(MPI_Allgatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, world_),
          "MPI_Allgatherv");
    std::vector<std::vector<char>> out(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r)
        out[size_t(r)].assign(all.begin() + displs[size_t(r)], all.begin() + displs[size_t(r)] + sizes[size_t(r)]);
    return out;
}

void MpiCommunicator::workerFailed(int device, const std::string& message, RunFaultKind kind)
{
    static std::atomic<bool> stopping{false};  // one message per rank: the first failure
    if (stopping.exchange(true))
        return;
    std::fprintf(stderr, "shardscope-cli: rank %d of %d, device %d: %s [%s]; stopping every rank\n", rank_, ranks_,
                 device, message.c_str(), toString(kind));
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

template void MpiCommGroup::allToAllVT<float>(int, const float*, const std::size_t*, float*, const std::size_t*,
                                              double, AllToAllBytes);
template void MpiCommGroup::allToAllVT<double>(int, const double*, const std::size_t*, double*, const std::size_t*,
                                               double, AllToAllBytes);
template void MpiCommGroup::allReduceT<float>(int, float*, std::size_t, ReduceOp, double);
template void MpiCommGroup::allReduceT<double>(int, double*, std::size_t, ReduceOp, double);
template void MpiCommGroup::reduceScatterT<float>(int, float*, std::size_t, ReduceOp, double);
template void MpiCommGroup::reduceScatterT<double>(int, double*, std::size_t, ReduceOp, double);
template void MpiCommGroup::allGatherT<float>(int, float*, std::size_t, double);
template void MpiCommGroup::allGatherT<double>(int, double*, std::size_t, double);
template void MpiCommGroup::allGatherVT<float>(int, float*, const std::size_t*, double);
template void MpiCommGroup::allGatherVT<double>(int, double*, const std::size_t*, double);
template void MpiCommGroup::reduceScatterVT<float>(int, float*, const std::size_t*, ReduceOp, double);
template void MpiCommGroup::reduceScatterVT<double>(int, double*, const std::size_t*, ReduceOp, double);
template void MpiCommGroup::broadcastT<float>(int, int, float*, std::size_t);
template void MpiCommGroup::broadcastT<double>(int, int, double*, std::size_t);

} // namespace shardscope::engine
