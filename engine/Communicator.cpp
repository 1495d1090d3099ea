// Ring collectives over shared memory, buffered send/recv, abort; see Communicator.h.
#include "Communicator.h"

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

} // namespace

// ---------------------------------------------------------------- group

CommGroup::CommGroup(Communicator& comm, std::vector<EmulatedDevice*> members, std::string name)
    : comm_(comm), devices_(std::move(members)), name_(std::move(name)), buffers_(devices_.size(), nullptr),
      clocks_(devices_.size(), 0.0), counts_(devices_.size(), nullptr)
{
    for (const EmulatedDevice* d : devices_)
        if (comm_.links().nodeOf(d->id()) != comm_.links().nodeOf(devices_.front()->id()))
            crosses_nodes_ = true;
}

std::vector<int> CommGroup::memberIds() const
{
    std::vector<int> ids;
    for (const EmulatedDevice* d : devices_)
        ids.push_back(d->id());
    return ids;
}

int CommGroup::rankOf(int device_id) const
{
    for (size_t r = 0; r < devices_.size(); ++r)
        if (devices_[r]->id() == device_id)
            return int(r);
    return -1;
}

double CommGroup::stepSeconds(double chunk_bytes) const
{
    const LinkSpec& l = comm_.links();
    // A flat ring across nodes runs every step at the pace of its slowest hop.
    const double bw = crosses_nodes_ ? std::min(l.intra_bytes_per_second, l.inter_bytes_per_second)
                                     : l.intra_bytes_per_second;
    const double latency = crosses_nodes_ ? l.inter_latency_s : l.intra_latency_s;
    return latency + (chunk_bytes > 0 ? chunk_bytes / bw : 0.0);
}

void CommGroup::arrive()
{
    comm_.checkpoint();
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == size()) {
        arrived_ = 0;
        ++generation_;
        cv_.notify_all();
        return;
    }
    waitUntil(lock, cv_, comm_, [&] { return generation_ != generation; });
    if (generation_ == generation)
        throw ClusterAborted();  // aborted while waiting: the others may never arrive
}

double CommGroup::begin(int rank, void* data)
{
    buffers_[size_t(rank)] = data;
    clocks_[size_t(rank)] = devices_[size_t(rank)]->clockSeconds();
    arrive();
    // Read before the next barrier: nobody rewrites the slots until everyone passed it.
    return *std::max_element(clocks_.begin(), clocks_.end());
}

namespace {
template <class T>
inline T combine(T a, T b, ReduceOp op)
{
    return op == ReduceOp::Sum ? a + b : std::max(a, b);
}
} // namespace

// The ring's arithmetic, one barrier per phase instead of one per ring step. In a ring
// reduce-scatter chunk c starts on member c+1 and each member in turn adds its own values
// to what arrives from its left (data += peer), ending on member c; member c here adds every
// member's chunk c in that same order (acc = x(m) op acc for m = c+2, ..., c-1, then
// x(c) op acc), so the result is bitwise the ring's. Tiles of kTile values keep the partial
// sums on the stack. Every member reads the others' chunk c only; member c alone writes it.
// The emulation's threads then wait 3 times per all-reduce instead of 2 (n - 1): a
// 1024-member ring woke every thread 2,046 times per call.
template <class T>
void CommGroup::reduceOwnChunk(int rank, T* data, std::size_t count, ReduceOp op)
{
    const int n = size();
    reduceRange(rank, data, chunkBegin(count, n, rank), chunkBegin(count, n, rank + 1), op);
}

// Values [b, e) of every member's buffer reduced into member r's, in the ring's order (above).
template <class T>
void CommGroup::reduceRange(int rank, T* data, std::size_t b, std::size_t e, ReduceOp op)
{
    const int n = size();
    constexpr std::size_t kTile = 256;
    T acc[kTile];
    for (std::size_t t = b; t < e; t += kTile) {
        const std::size_t len = std::min(kTile, e - t);
        const T* first = static_cast<const T*>(buffers_[size_t((rank + 1) % n)]) + t;
        std::copy(first, first + len, acc);
        for (int j = 2; j < n; ++j) {
            const T* x = static_cast<const T*>(buffers_[size_t((rank + j) % n)]) + t;
            if (op == ReduceOp::Sum) {
                for (std::size_t i = 0; i < len; ++i)
                    acc[i] = x[i] + acc[i];
            } else {
                for (std::size_t i = 0; i < len; ++i)
                    acc[i] = combine(x[i], acc[i], op);
            }
        }
        for (std::size_t i = 0; i < len; ++i)
            data[t + i] = combine(data[t + i], acc[i], op);
    }
}

// Member r copies every other member's own chunk (valid on its owner) into its buffer.
template <class T>
void CommGroup::gatherOwnedChunks(int rank, T* data, std::size_t count)
{
    const int n = size();
    for (int c = 0; c < n; ++c) {
        const std::size_t b = chunkBegin(count, n, c), e = chunkBegin(count, n, c + 1);
        if (c != rank && e > b)
            std::memcpy(data + b, static_cast<const T*>(buffers_[size_t(c)]) + b, (e - b) * sizeof(T));
    }
}

// What the ring moves, per member (eb bytes a value): a reduce-scatter's member r receives
// every chunk but r - 1 and sends every chunk but r; an all-gather's receives every chunk but
// r and sends every chunk but r + 1.
double CommGroup::chunkValues(std::size_t count, int c) const
{
    const int n = size();
    c = (c % n + n) % n;
    return double(chunkBegin(count, n, c + 1) - chunkBegin(count, n, c));
}

template <class T>
void CommGroup::allReduce(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    reduceOwnChunk(rank, data, count, op);
    arrive();  // every chunk reduced on its owner
    gatherOwnedChunks(rank, data, count);
    arrive();  // nobody reads this buffer any more
    const double all = double(count);
    const double sent = (2 * all - chunkValues(count, rank) - chunkValues(count, rank + 1)) * eb;
    const double received = (2 * all - chunkValues(count, rank - 1) - chunkValues(count, rank)) * eb;
    const double chunk = double(count) * eb / n;
    devices_[size_t(rank)]->communicate(CommKind::AllReduce, sent, received, start,
                                        start + 2 * (n - 1) * stepSeconds(chunk));
}

template <class T>
void CommGroup::reduceScatter(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    reduceOwnChunk(rank, data, count, op);
    arrive();  // the others have read their chunks of this buffer
    const double sent = (double(count) - chunkValues(count, rank)) * eb;
    const double received = (double(count) - chunkValues(count, rank - 1)) * eb;
    const double chunk = double(count) * eb / n;
    devices_[size_t(rank)]->communicate(CommKind::ReduceScatter, sent, received, start,
                                        start + (n - 1) * stepSeconds(chunk));
}

template <class T>
void CommGroup::allGather(int rank, T* data, std::size_t count, double element_bytes)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    gatherOwnedChunks(rank, data, count);
    arrive();
    const double sent = (double(count) - chunkValues(count, rank + 1)) * eb;
    const double received = (double(count) - chunkValues(count, rank)) * eb;
    const double chunk = double(count) * eb / n;
    devices_[size_t(rank)]->communicate(CommKind::AllGather, sent, received, start,
                                        start + (n - 1) * stepSeconds(chunk));
}

template <class T>
void CommGroup::allGatherV(int rank, T* data, const std::size_t* counts, double element_bytes)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    std::size_t at = 0, total = 0, largest = 0;
    for (int i = 0; i < n; ++i) {
        if (i != rank && counts[i] > 0)
            std::memcpy(data + at, static_cast<const T*>(buffers_[size_t(i)]) + at, counts[i] * sizeof(T));
        at += counts[i];
        total += counts[i];
        largest = std::max(largest, counts[i]);
    }
    arrive();  // every block read from its owner
    const double sent = double(total - counts[(rank + 1) % n]) * eb, received = double(total - counts[rank]) * eb;
    devices_[size_t(rank)]->communicate(CommKind::AllGather, sent, received, start,
                                        start + (n - 1) * stepSeconds(double(largest) * eb));
}

template <class T>
void CommGroup::reduceScatterV(int rank, T* data, const std::size_t* counts, ReduceOp op, double element_bytes)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    std::size_t mine = 0, total = 0, largest = 0;
    for (int i = 0; i < n; ++i) {
        if (i < rank)
            mine += counts[i];
        total += counts[i];
        largest = std::max(largest, counts[i]);
    }
    reduceRange(rank, data, mine, mine + counts[rank], op);
    arrive();  // the others have read their blocks of this buffer
    const double sent = double(total - counts[rank]) * eb, received = double(total - counts[(rank + n - 1) % n]) * eb;
    devices_[size_t(rank)]->communicate(CommKind::ReduceScatter, sent, received, start,
                                        start + (n - 1) * stepSeconds(double(largest) * eb));
}

template <class T>
void CommGroup::broadcast(int rank, int root, T* data, std::size_t count)
{
    const double eb = double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    double sent = 0, received = 0;
    // Scatter: member r takes chunk r of the root's buffer.
    const T* src = static_cast<const T*>(buffers_[size_t(root)]);
    for (int c = 0; c < n; ++c) {
        const std::size_t b = chunkBegin(count, n, c), e = chunkBegin(count, n, c + 1);
        if (c == rank && rank != root) {
            if (e > b)
                std::memcpy(data + b, src + b, (e - b) * sizeof(T));
            received += double(e - b) * eb;
        } else if (rank == root && c != root) {
            sent += double(e - b) * eb;
        }
    }
    arrive();
    gatherOwnedChunks(rank, data, count);
    arrive();
    sent += (double(count) - chunkValues(count, rank + 1)) * eb;
    received += (double(count) - chunkValues(count, rank)) * eb;
    const double chunk = double(count) * eb / n;
    // The root's one link carries n - 1 chunks in the scatter, then n - 1 ring steps.
    const double scatter = stepSeconds((n - 1) * chunk);
    devices_[size_t(rank)]->communicate(CommKind::Broadcast, sent, received, start,
                                        start + scatter + (n - 1) * stepSeconds(chunk));
}

double CommGroup::allToAllSeconds(double eb) const
{
    const LinkSpec& l = comm_.links();
    const int n = size();
    double longest = 0;
    for (int m = 0; m < n; ++m) {
        const int node = l.nodeOf(devices_[size_t(m)]->id());
        double sent[2] = {0, 0}, received[2] = {0, 0};  // [intra, inter]
        for (int j = 0; j < n; ++j) {
            if (j == m)
                continue;
            const int link = l.nodeOf(devices_[size_t(j)]->id()) == node ? 0 : 1;
            sent[link] += double(counts_[size_t(m)][j]) * eb;
            received[link] += double(counts_[size_t(j)][m]) * eb;
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

template <class T>
void CommGroup::allToAllV(int rank, const T* send, const std::size_t* send_counts, T* recv,
                          const std::size_t* recv_counts, double element_bytes, AllToAllBytes counted)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1) {
        if (recv_counts[0] != send_counts[0])
            throw std::invalid_argument("allToAllV: member 0 receives " + std::to_string(recv_counts[0]) +
                                        " values from itself but sends " + std::to_string(send_counts[0]));
        std::copy_n(send, send_counts[0], recv);
        if (counted != AllToAllBytes::Crossing) {  // the payload convention counts the own share
            const double own = double(send_counts[0]) * eb, clock = devices_[0]->clockSeconds();
            devices_[0]->communicate(CommKind::AllToAll, own, own, clock, clock);
        }
        return;
    }
    counts_[size_t(rank)] = send_counts;
    const double start = begin(rank, const_cast<T*>(send));
    // Member r's block in member i's send buffer starts after i's blocks for members < r.
    std::string mismatch;
    std::size_t at = 0;
    double sent = 0, received = 0;
    for (int i = 0; i < n; ++i) {
        const std::size_t* theirs = counts_[size_t(i)];
        if (theirs[rank] != recv_counts[i] && mismatch.empty())
            mismatch = "member " + std::to_string(rank) + " expects " + std::to_string(recv_counts[i]) +
                       " values from member " + std::to_string(i) + ", which sends " + std::to_string(theirs[rank]);
        if (!mismatch.empty())
            continue;
        std::size_t offset = 0;
        for (int j = 0; j < rank; ++j)
            offset += theirs[j];
        std::copy_n(static_cast<const T*>(buffers_[size_t(i)]) + offset, recv_counts[i], recv + at);
        at += recv_counts[i];
        if (i != rank || counted != AllToAllBytes::Crossing) {
            received += double(recv_counts[i]) * eb;
            sent += double(send_counts[i]) * eb;
        }
    }
    if (counted == AllToAllBytes::OwnCopiesBack)
        std::swap(sent, received);
    const double seconds = mismatch.empty() ? allToAllSeconds(eb) : 0;
    arrive();  // every member has read its blocks: the send buffers may change again
    if (!mismatch.empty())
        throw std::invalid_argument("allToAllV in group " + name_ + ": " + mismatch);
    devices_[size_t(rank)]->communicate(CommKind::AllToAll, sent, received, start, start + seconds);
}

template <class T>
void CommGroup::allToAll(int rank, const T* send, T* recv, std::size_t count, double element_bytes)
{
    const std::vector<std::size_t> counts(size_t(size()), count);
    allToAllV(rank, send, counts.data(), recv, counts.data(), element_bytes);
}

template void CommGroup::allToAllV<float>(int, const float*, const std::size_t*, float*, const std::size_t*, double,
                                          AllToAllBytes);
template void CommGroup::allToAllV<double>(int, const double*, const std::size_t*, double*, const std::size_t*,
                                           double, AllToAllBytes);
template void CommGroup::allToAll<float>(int, const float*, float*, std::size_t, double);
template void CommGroup::allToAll<double>(int, const double*, double*, std::size_t, double);
template void CommGroup::allReduce<float>(int, float*, std::size_t, ReduceOp, double);
template void CommGroup::allReduce<double>(int, double*, std::size_t, ReduceOp, double);
template void CommGroup::reduceScatter<float>(int, float*, std::size_t, ReduceOp, double);
template void CommGroup::reduceScatter<double>(int, double*, std::size_t, ReduceOp, double);
template void CommGroup::allGather<float>(int, float*, std::size_t, double);
template void CommGroup::allGather<double>(int, double*, std::size_t, double);
template void CommGroup::allGatherV<float>(int, float*, const std::size_t*, double);
template void CommGroup::allGatherV<double>(int, double*, const std::size_t*, double);
template void CommGroup::reduceScatterV<float>(int, float*, const std::size_t*, ReduceOp, double);
template void CommGroup::reduceScatterV<double>(int, double*, const std::size_t*, ReduceOp, double);
template void CommGroup::broadcast<float>(int, int, float*, std::size_t);
template void CommGroup::broadcast<double>(int, int, double*, std::size_t);

// ---------------------------------------------------------------- communicator

Communicator::Communicator(std::vector<EmulatedDevice*> devices, LinkSpec links, const std::atomic<bool>* cancel)
    : devices_(std::move(devices)), links_(links), cancel_(cancel)
{
    for (size_t i = 0; i < devices_.size(); ++i)
        if (!devices_[i] || devices_[i]->id() != int(i))
            throw std::invalid_argument("Communicator: device " + std::to_string(i) + " must have id " +
                                        std::to_string(i));
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

Communicator::~Communicator()
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

CommGroup& Communicator::makeGroup(const std::vector<int>& ids, const std::string& name)
{
    if (ids.empty())
        throw std::invalid_argument("Communicator: group " + name + " is empty");
    std::vector<EmulatedDevice*> members;
    for (int id : ids) {
        if (id < 0 || id >= deviceCount())
            throw std::invalid_argument("Communicator: group " + name + ": no device " + std::to_string(id));
        if (std::count(ids.begin(), ids.end(), id) > 1)
            throw std::invalid_argument("Communicator: group " + name + " names device " + std::to_string(id) +
                                        " twice");
        members.push_back(devices_[size_t(id)]);
    }
    std::lock_guard<std::mutex> lock(registry_);
    groups_.push_back(std::make_unique<CommGroup>(*this, std::move(members), name));
    return *groups_.back();
}

Communicator::Channel& Communicator::channel(int from, int to)
{
    std::lock_guard<std::mutex> lock(registry_);
    std::unique_ptr<Channel>& c = channels_[{from, to}];
    if (!c)
        c = std::make_unique<Channel>();
    return *c;
}

void Communicator::send(int from, int to, const float* data, std::size_t count, double element_bytes)
{
    checkpoint();
    const double bytes = double(count) * (element_bytes > 0 ? element_bytes : double(sizeof(float)));
    const bool across = links_.nodeOf(from) != links_.nodeOf(to);
    const double link = (across ? links_.inter_latency_s : links_.intra_latency_s) +
                        bytes / (across ? links_.inter_bytes_per_second : links_.intra_bytes_per_second);
    EmulatedDevice& d = device(from);
    const double t0 = d.clockSeconds();
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
    }
    c.cv.notify_all();
    d.communicate(CommKind::SendRecv, bytes, 0, t0, t0 + link);
}

void Communicator::recv(int to, int from, float* data, std::size_t count, double element_bytes)
{
    checkpoint();
    Channel& c = channel(from, to);
    double sendClock = 0, link = 0;
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
    }
    EmulatedDevice& d = device(to);
    const double now = d.clockSeconds();
    d.communicate(CommKind::SendRecv, 0, double(count) * (element_bytes > 0 ? element_bytes : double(sizeof(float))), std::max(now, sendClock),
                  std::max(now, sendClock + link));
}

void Communicator::abort()
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

void Communicator::checkpoint()
{
    if (cancelRequested() && !aborted())
        abort();
    if (aborted())
        throw ClusterAborted();
}

} // namespace shardscope::engine
