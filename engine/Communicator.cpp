// Ring collectives over shared memory, buffered send/recv, abort; see Communicator.h.
#include "Communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace shardscope::engine {

// ---------------------------------------------------------------- waiting

namespace {

// Waits until `ready()` or an abort. A cancel flag raised while everyone is
// already asleep wakes nobody, so sleepers look at it every few milliseconds
// and turn it into an abort (outside their lock: abort() takes every lock).
template <class Ready>
void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Communicator& comm, Ready ready)
{
    using namespace std::chrono_literals;
    while (!ready() && !comm.aborted()) {
        if (cv.wait_for(lock, 10ms) == std::cv_status::timeout && comm.cancelRequested() && !comm.aborted()) {
            lock.unlock();
            comm.abort();
            lock.lock();
        }
    }
}

} // namespace

// ---------------------------------------------------------------- group

CommGroup::CommGroup(Communicator& comm, std::vector<EmulatedDevice*> members, std::string name)
    : comm_(comm), devices_(std::move(members)), name_(std::move(name)), buffers_(devices_.size(), nullptr),
      clocks_(devices_.size(), 0.0)
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

// Chunk c travels from member c+1 around the ring and is complete on member c:
// in step k member r adds its left neighbour's partial chunk (r - 2 - k) mod n.
template <class T>
void CommGroup::ringReduceScatter(int rank, T* data, std::size_t count, ReduceOp op, double eb, double& sent,
                                  double& received)
{
    const int n = size();
    const int left = (rank + n - 1) % n;
    const T* peer = static_cast<const T*>(buffers_[size_t(left)]);
    for (int k = 0; k < n - 1; ++k) {
        const int c = ((rank - 2 - k) % n + 2 * n) % n;
        const std::size_t b = chunkBegin(count, n, c), e = chunkBegin(count, n, c + 1);
        if (op == ReduceOp::Sum) {
            for (std::size_t i = b; i < e; ++i)
                data[i] += peer[i];
        } else {
            for (std::size_t i = b; i < e; ++i)
                data[i] = combine(data[i], peer[i], op);
        }
        received += double(e - b) * eb;
        const int mine = ((rank - 1 - k) % n + 2 * n) % n;  // what the right neighbour takes from me
        sent += double(chunkBegin(count, n, mine + 1) - chunkBegin(count, n, mine)) * eb;
        arrive();
    }
}

// Member r owns chunk r; in step k it copies chunk (r - 1 - k) mod n from its left neighbour.
template <class T>
void CommGroup::ringAllGather(int rank, T* data, std::size_t count, double eb, double& sent, double& received)
{
    const int n = size();
    const int left = (rank + n - 1) % n;
    const T* peer = static_cast<const T*>(buffers_[size_t(left)]);
    for (int k = 0; k < n - 1; ++k) {
        const int c = ((rank - 1 - k) % n + 2 * n) % n;
        const std::size_t b = chunkBegin(count, n, c), e = chunkBegin(count, n, c + 1);
        if (e > b)
            std::memcpy(data + b, peer + b, (e - b) * sizeof(T));
        received += double(e - b) * eb;
        const int mine = ((rank - k) % n + 2 * n) % n;
        sent += double(chunkBegin(count, n, mine + 1) - chunkBegin(count, n, mine)) * eb;
        arrive();
    }
}

template <class T>
void CommGroup::allReduce(int rank, T* data, std::size_t count, ReduceOp op, double element_bytes)
{
    const double eb = element_bytes > 0 ? element_bytes : double(sizeof(T));
    const int n = size();
    if (n == 1)
        return;
    const double start = begin(rank, data);
    double sent = 0, received = 0;
    ringReduceScatter(rank, data, count, op, eb, sent, received);
    ringAllGather(rank, data, count, eb, sent, received);
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
    double sent = 0, received = 0;
    ringReduceScatter(rank, data, count, op, eb, sent, received);
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
    double sent = 0, received = 0;
    ringAllGather(rank, data, count, eb, sent, received);
    const double chunk = double(count) * eb / n;
    devices_[size_t(rank)]->communicate(CommKind::AllGather, sent, received, start,
                                        start + (n - 1) * stepSeconds(chunk));
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
    ringAllGather(rank, data, count, eb, sent, received);
    const double chunk = double(count) * eb / n;
    // The root's one link carries n - 1 chunks in the scatter, then n - 1 ring steps.
    const double scatter = stepSeconds((n - 1) * chunk);
    devices_[size_t(rank)]->communicate(CommKind::Broadcast, sent, received, start,
                                        start + scatter + (n - 1) * stepSeconds(chunk));
}

template void CommGroup::allReduce<float>(int, float*, std::size_t, ReduceOp, double);
template void CommGroup::allReduce<double>(int, double*, std::size_t, ReduceOp, double);
template void CommGroup::reduceScatter<float>(int, float*, std::size_t, ReduceOp, double);
template void CommGroup::reduceScatter<double>(int, double*, std::size_t, ReduceOp, double);
template void CommGroup::allGather<float>(int, float*, std::size_t, double);
template void CommGroup::allGather<double>(int, double*, std::size_t, double);
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
