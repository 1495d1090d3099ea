// Ring collectives over shared memory, buffered send/recv, abort; see ThreadCommunicator.h.
#include "ThreadCommunicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace shardscope::engine {

// ---------------------------------------------------------------- waiting

namespace {

// Waits until `ready()` or an abort (abort() wakes every waiter under its lock). A cancel
// flag raised while everyone is asleep is turned into an abort by the communicator's one
// watcher thread: thousands of waiters polling it themselves every 10 ms kept 2 cores busy.
template <class Ready>
void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Communicator& comm, Ready ready)
{
    cv.wait(lock, [&] { return ready() || comm.aborted(); });
}

// The spin phase before sleeping (ThreadCommunicator.h): up to kSpinYields yields, a few
// hundred microseconds at most, about the wait of a short kernel on the peer (as KernelPool).
constexpr int kSpinYields = 2000;

} // namespace

// ---------------------------------------------------------------- group

ThreadCommGroup::ThreadCommGroup(ThreadCommunicator& comm, std::vector<EmulatedDevice*> members, std::vector<int> ids,
                                 std::string name)
    : CommGroupOf(comm.links(), std::move(ids), std::move(name)), comm_(comm), devices_(std::move(members)),
      buffers_(devices_.size(), nullptr), clocks_(devices_.size(), 0.0), counts_(devices_.size(), nullptr)
{
}

void ThreadCommGroup::arrive()
{
    comm_.checkpoint();
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == size()) {
        arrived_ = 0;
        ++generation_;
        published_.store(generation_, std::memory_order_release);
        cv_.notify_all();
        return;
    }
    if (comm_.spins()) {
        // The last member's release of published_ follows every member's writes before the
        // barrier (each made them before taking mutex_): the acquire below sees them.
        lock.unlock();
        for (int i = 0; i < kSpinYields && !comm_.aborted(); ++i) {
            if (published_.load(std::memory_order_acquire) != generation)
                return;
            std::this_thread::yield();
        }
        lock.lock();
    }
    waitUntil(lock, cv_, comm_, [&] { return generation_ != generation; });
    if (generation_ == generation)
        throw ClusterAborted();  // aborted while waiting: the others may never arrive
}

double ThreadCommGroup::begin(int rank, void* data)
{
    buffers_[size_t(rank)] = data;
    clocks_[size_t(rank)] = devices_[size_t(rank)]->clockSeconds();
    arrive();
    // Read before the next barrier: nobody rewrites the slots until everyone passed it.
    return *std::max_element(clocks_.begin(), clocks_.end());
}

// Values [b, e) of every member's buffer reduced into member r's, in the ring's order.
template <class T>
void ThreadCommGroup::reduceRange(int rank, T* data, std::size_t b, std::size_t e, ReduceOp op)
{
    reduceInRingOrder(rank, size(), data, b, e, op,
                      [&](int m) { return static_cast<const T*>(buffers_[size_t(m)]) + b; });
}

// Member r copies every other member's own chunk (valid on its owner) into its buffer.
template <class T>
void ThreadCommGroup::gatherOwnedChunks(int rank, T* data, std::size_t count)
{
    const int n = size();
    for (int c = 0; c < n; ++c) {
        const std::size_t b = chunkBegin(count, n, c), e = chunkBegin(count, n, c + 1);
        if (c != rank && e > b)
            std::memcpy(data + b, static_cast<const T*>(buffers_[size_t(c)]) + b, (e - b) * sizeof(T));
    }
}

template <class T>
void ThreadCommGroup::allReduceT(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    reduceRange(rank, data, chunkBegin(count, n, rank), chunkBegin(count, n, rank + 1), op);
    arrive();  // every chunk reduced on its owner
    gatherOwnedChunks(rank, data, count);
    arrive();  // nobody reads this buffer any more
    recordAllReduce(*devices_[size_t(rank)], rank, count, element_bytes > 0 ? element_bytes : double(sizeof(T)), start);
}

template <class T>
void ThreadCommGroup::reduceScatterT(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    reduceRange(rank, data, chunkBegin(count, n, rank), chunkBegin(count, n, rank + 1), op);
    arrive();  // the others have read their chunks of this buffer
    recordReduceScatter(*devices_[size_t(rank)], rank, count, element_bytes > 0 ? element_bytes : double(sizeof(T)),
                        start);
}

template <class T>
void ThreadCommGroup::allGatherT(int rank, T* data, std::size_t count, double element_bytes)
{
    if (size() == 1)
        return;
    const double start = begin(rank, data);
    gatherOwnedChunks(rank, data, count);
    arrive();
    recordAllGather(*devices_[size_t(rank)], rank, count, element_bytes > 0 ? element_bytes : double(sizeof(T)), start);
}

template <class T>
void ThreadCommGroup::allGatherVT(int rank, T* data, const std::size_t* counts, double element_bytes)
{
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    std::size_t at = 0;
    for (int i = 0; i < n; ++i) {
        if (i != rank && counts[i] > 0)
            std::memcpy(data + at, static_cast<const T*>(buffers_[size_t(i)]) + at, counts[i] * sizeof(T));
        at += counts[i];
    }
    arrive();  // every block read from its owner
    recordAllGatherV(*devices_[size_t(rank)], rank, counts, element_bytes > 0 ? element_bytes : double(sizeof(T)),
                     start);
}

template <class T>
void ThreadCommGroup::reduceScatterVT(int rank, T* data, const std::size_t* counts, ReduceOp op, double element_bytes)
{
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    std::size_t mine = 0;
    for (int i = 0; i < rank; ++i)
        mine += counts[i];
    reduceRange(rank, data, mine, mine + counts[rank], op);
    arrive();  // the others have read their blocks of this buffer
    recordReduceScatterV(*devices_[size_t(rank)], rank, counts, element_bytes > 0 ? element_bytes : double(sizeof(T)),
                         start);
}

template <class T>
void ThreadCommGroup::broadcastT(int rank, int root, T* data, std::size_t count)
{
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    // Scatter: member r takes chunk r of the root's buffer.
    const T* src = static_cast<const T*>(buffers_[size_t(root)]);
    if (rank != root) {
        const std::size_t b = chunkBegin(count, n, rank), e = chunkBegin(count, n, rank + 1);
        if (e > b)
            std::memcpy(data + b, src + b, (e - b) * sizeof(T));
    }
    arrive();
    gatherOwnedChunks(rank, data, count);
    arrive();
    recordBroadcast(*devices_[size_t(rank)], rank, root, count, double(sizeof(T)), start);
}

template <class T>
void ThreadCommGroup::allToAllVT(int rank, const T* send, const std::size_t* send_counts, T* recv,
                                 const std::size_t* recv_counts, double element_bytes, AllToAllBytes counted)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return allToAllAlone(*devices_[0], send, send_counts, recv, recv_counts, eb, counted);
    counts_[size_t(rank)] = send_counts;
    const double start = begin(rank, const_cast<T*>(send));
    auto countsOf = [this](int i) { return counts_[size_t(i)]; };
    std::string mismatch;
    double sent = 0, received = 0;
    allToAllBytes(rank, countsOf, recv_counts, eb, counted, sent, received, mismatch);
    if (mismatch.empty()) {
        // Member r's block in member i's send buffer starts after i's blocks for members < r.
        std::size_t at = 0;
        for (int i = 0; i < n; ++i) {
            std::size_t offset = 0;
            for (int j = 0; j < rank; ++j)
                offset += counts_[size_t(i)][j];
            std::copy_n(static_cast<const T*>(buffers_[size_t(i)]) + offset, recv_counts[i], recv + at);
            at += recv_counts[i];
        }
    }
    const double seconds = mismatch.empty() ? allToAllSeconds(countsOf, eb) : 0;
    arrive();  // every member has read its blocks: the send buffers may change again
    if (!mismatch.empty())
        throw std::invalid_argument("allToAllV in group " + name() + ": " + mismatch);
    devices_[size_t(rank)]->communicate(CommKind::AllToAll, sent, received, start, start + seconds);
}

template void ThreadCommGroup::allToAllVT<float>(int, const float*, const std::size_t*, float*, const std::size_t*,
                                                 double, AllToAllBytes);
template void ThreadCommGroup::allToAllVT<double>(int, const double*, const std::size_t*, double*,
                                                  const std::size_t*, double, AllToAllBytes);
template void ThreadCommGroup::allReduceT<float>(int, float*, std::size_t, ReduceOp, double);
template void ThreadCommGroup::allReduceT<double>(int, double*, std::size_t, ReduceOp, double);
template void ThreadCommGroup::reduceScatterT<float>(int, float*, std::size_t, ReduceOp, double);
template void ThreadCommGroup::reduceScatterT<double>(int, double*, std::size_t, ReduceOp, double);
template void ThreadCommGroup::allGatherT<float>(int, float*, std::size_t, double);
template void ThreadCommGroup::allGatherT<double>(int, double*, std::size_t, double);
template void ThreadCommGroup::allGatherVT<float>(int, float*, const std::size_t*, double);
template void ThreadCommGroup::allGatherVT<double>(int, double*, const std::size_t*, double);
template void ThreadCommGroup::reduceScatterVT<float>(int, float*, const std::size_t*, ReduceOp, double);
template void ThreadCommGroup::reduceScatterVT<double>(int, double*, const std::size_t*, ReduceOp, double);
template void ThreadCommGroup::broadcastT<float>(int, int, float*, std::size_t);
template void ThreadCommGroup::broadcastT<double>(int, int, double*, std::size_t);

// ---------------------------------------------------------------- communicator

ThreadCommunicator::ThreadCommunicator(std::vector<EmulatedDevice*> devices, LinkSpec links,
                                       const std::atomic<bool>* cancel)
    : Communicator(std::move(devices), links, cancel),
      spins_(deviceCount() <= int(std::max(1u, std::thread::hardware_concurrency())))
{
    if (cancel_)
        watcher_ = std::thread([this] {
            using namespace std::chrono_literals;
            std::unique_lock<std::mutex> lock(watcherMutex_);
            while (!watcherStop_) {
                watcherCv_.wait_for(lock, 10ms);
                if (cancelRequested() && !aborted()) {
                    lock.unlock();
                    abort();
                    lock.lock();
                }
            }
        });
}

ThreadCommunicator::~ThreadCommunicator()
{
    if (watcher_.joinable()) {
        {
            std::lock_guard<std::mutex> lock(watcherMutex_);
            watcherStop_ = true;
        }
        watcherCv_.notify_all();
        watcher_.join();
    }
}

CommGroup& ThreadCommunicator::makeGroup(const std::vector<int>& ids, const std::string& name)
{
    std::vector<EmulatedDevice*> members = groupDevices(ids, name);
    std::lock_guard<std::mutex> lock(registry_);
    groups_.push_back(std::make_unique<ThreadCommGroup>(*this, std::move(members), ids, name));
    return *groups_.back();
}

ThreadCommunicator::Channel& ThreadCommunicator::channel(int from, int to)
{
    std::lock_guard<std::mutex> lock(registry_);
    std::unique_ptr<Channel>& c = channels_[{from, to}];
    if (!c)
        c = std::make_unique<Channel>();
    return *c;
}

void ThreadCommunicator::send(int from, int to, const float* data, std::size_t count, double element_bytes)
{
    checkpoint();
    double t0 = 0;
    const double link = recordSend(from, to, count, element_bytes, t0);
    Channel& c = channel(from, to);
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        Message m;
        if (!c.spare.empty()) {
            m.data = std::move(c.spare.back());
            c.spare.pop_back();
        }
        m.data.assign(data, data + count);  // no allocation once a buffer of this size was recycled
        m.send_clock_s = t0;
        m.link_s = link;
        c.queue.push_back(std::move(m));
        c.queued.store(c.queue.size(), std::memory_order_release);
    }
    c.cv.notify_all();
}

void ThreadCommunicator::recv(int to, int from, float* data, std::size_t count, double element_bytes)
{
    checkpoint();
    Channel& c = channel(from, to);
    double sendClock = 0, link = 0;
    if (spins_)
        for (int i = 0; i < kSpinYields && c.queued.load(std::memory_order_acquire) == 0 && !aborted(); ++i)
            std::this_thread::yield();
    {
        std::unique_lock<std::mutex> lock(c.mutex);
        waitUntil(lock, c.cv, *this, [&] { return !c.queue.empty(); });
        if (c.queue.empty())
            throw ClusterAborted();
        Message& m = c.queue.front();
        if (m.data.size() != count)
            throw std::logic_error("Communicator: device " + std::to_string(to) + " expected " +
                                   std::to_string(count) + " values from device " + std::to_string(from) + ", got " +
                                   std::to_string(m.data.size()));
        std::memcpy(data, m.data.data(), count * sizeof(float));
        sendClock = m.send_clock_s;
        link = m.link_s;
        c.spare.push_back(std::move(m.data));
        c.queue.pop_front();
        c.queued.store(c.queue.size(), std::memory_order_relaxed);
    }
    recordRecv(to, count, element_bytes, sendClock, link);
}

void ThreadCommunicator::abort()
{
    aborted_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(registry_);
    // Taking each waiter's mutex before notifying: a waiter is either before its
    // predicate check (and will see the flag) or asleep (and is woken).
    for (auto& g : groups_) {
        std::lock_guard<std::mutex> l(g->mutex_);
        g->cv_.notify_all();
    }
    for (auto& [key, c] : channels_) {
        std::lock_guard<std::mutex> l(c->mutex);
        c->cv.notify_all();
    }
}

} // namespace shardscope::engine
