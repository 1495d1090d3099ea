// What every backend shares: group placement, the ring's byte accounting and link clocks,
// point-to-point accounting; see Communicator.h.
#include "Communicator.h"

namespace shardscope::engine {

const char* toString(ClusterBackend b)
{
    return b == ClusterBackend::Mpi ? "mpi" : "threads";
}

// ---------------------------------------------------------------- group

CommGroup::CommGroup(const LinkSpec& links, std::vector<int> member_ids, std::string name)
    : links_(links), ids_(std::move(member_ids)), name_(std::move(name))
{
    for (int id : ids_)
        if (links_.nodeOf(id) != links_.nodeOf(ids_.front()))
            crosses_nodes_ = true;
}

int CommGroup::rankOf(int device_id) const
{
    for (size_t r = 0; r < ids_.size(); ++r)
        if (ids_[r] == device_id)
            return int(r);
    return -1;
}

double CommGroup::stepSeconds(double chunk_bytes) const
{
    const LinkSpec& l = links_;
    // A flat ring across nodes runs every step at the pace of its slowest hop.
    const double bw = crosses_nodes_ ? std::min(l.intra_bytes_per_second, l.inter_bytes_per_second)
                                     : l.intra_bytes_per_second;
    const double latency = crosses_nodes_ ? l.inter_latency_s : l.intra_latency_s;
    return latency + (chunk_bytes > 0 ? chunk_bytes / bw : 0.0);
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

void CommGroup::recordAllReduce(EmulatedDevice& d, int rank, std::size_t count, double eb, double start) const
{
    const int n = size();
    const double all = double(count);
    const double sent = (2 * all - chunkValues(count, rank) - chunkValues(count, rank + 1)) * eb;
    const double received = (2 * all - chunkValues(count, rank - 1) - chunkValues(count, rank)) * eb;
    const double chunk = double(count) * eb / n;
    d.communicate(CommKind::AllReduce, sent, received, start, start + 2 * (n - 1) * stepSeconds(chunk));
}

void CommGroup::recordReduceScatter(EmulatedDevice& d, int rank, std::size_t count, double eb, double start) const
{
    const int n = size();
    const double sent = (double(count) - chunkValues(count, rank)) * eb;
    const double received = (double(count) - chunkValues(count, rank - 1)) * eb;
    const double chunk = double(count) * eb / n;
    d.communicate(CommKind::ReduceScatter, sent, received, start, start + (n - 1) * stepSeconds(chunk));
}

void CommGroup::recordAllGather(EmulatedDevice& d, int rank, std::size_t count, double eb, double start) const
{
    const int n = size();
    const double sent = (double(count) - chunkValues(count, rank + 1)) * eb;
    const double received = (double(count) - chunkValues(count, rank)) * eb;
    const double chunk = double(count) * eb / n;
    d.communicate(CommKind::AllGather, sent, received, start, start + (n - 1) * stepSeconds(chunk));
}

void CommGroup::recordBroadcast(EmulatedDevice& d, int rank, int root, std::size_t count, double eb,
                                double start) const
{
    const int n = size();
    double sent = 0, received = 0;
    for (int c = 0; c < n; ++c) {  // the scatter: member c takes chunk c of the root's buffer
        const double values = chunkValues(count, c);
        if (c == rank && rank != root)
            received += values * eb;
        else if (rank == root && c != root)
            sent += values * eb;
    }
    sent += (double(count) - chunkValues(count, rank + 1)) * eb;
    received += (double(count) - chunkValues(count, rank)) * eb;
    const double chunk = double(count) * eb / n;
    // The root's one link carries n - 1 chunks in the scatter, then n - 1 ring steps.
    const double scatter = stepSeconds((n - 1) * chunk);
    d.communicate(CommKind::Broadcast, sent, received, start, start + scatter + (n - 1) * stepSeconds(chunk));
}

void CommGroup::recordAllGatherV(EmulatedDevice& d, int rank, const std::size_t* counts, double eb,
                                 double start) const
{
    const int n = size();
    std::size_t total = 0, largest = 0;
    for (int i = 0; i < n; ++i) {
        total += counts[i];
        largest = std::max(largest, counts[i]);
    }
    const double sent = double(total - counts[(rank + 1) % n]) * eb, received = double(total - counts[rank]) * eb;
    d.communicate(CommKind::AllGather, sent, received, start, start + (n - 1) * stepSeconds(double(largest) * eb));
}

void CommGroup::recordReduceScatterV(EmulatedDevice& d, int rank, const std::size_t* counts, double eb,
                                     double start) const
{
    const int n = size();
    std::size_t total = 0, largest = 0;
    for (int i = 0; i < n; ++i) {
        total += counts[i];
        largest = std::max(largest, counts[i]);
    }
    const double sent = double(total - counts[rank]) * eb, received = double(total - counts[(rank + n - 1) % n]) * eb;
    d.communicate(CommKind::ReduceScatter, sent, received, start,
                  start + (n - 1) * stepSeconds(double(largest) * eb));
}

// ---------------------------------------------------------------- communicator

Communicator::Communicator(std::vector<EmulatedDevice*> devices, LinkSpec links, const std::atomic<bool>* cancel)
    : devices_(std::move(devices)), links_(links), cancel_(cancel)
{
    for (size_t i = 0; i < devices_.size(); ++i)
        if (!devices_[i] || devices_[i]->id() != int(i))
            throw std::invalid_argument("Communicator: device " + std::to_string(i) + " must have id " +
                                        std::to_string(i));
}

std::vector<EmulatedDevice*> Communicator::groupDevices(const std::vector<int>& ids, const std::string& name)
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
    return members;
}

double Communicator::recordSend(int from, int to, std::size_t count, double element_bytes, double& send_clock_s)
{
    const double bytes = double(count) * (element_bytes > 0 ? element_bytes : double(sizeof(float)));
    const bool across = links_.nodeOf(from) != links_.nodeOf(to);
    const double link = (across ? links_.inter_latency_s : links_.intra_latency_s) +
                        bytes / (across ? links_.inter_bytes_per_second : links_.intra_bytes_per_second);
    EmulatedDevice& d = device(from);
    send_clock_s = d.clockSeconds();
    d.communicate(CommKind::SendRecv, bytes, 0, send_clock_s, send_clock_s + link);
    return link;
}

void Communicator::recordRecv(int to, std::size_t count, double element_bytes, double send_clock_s, double link_s)
{
    EmulatedDevice& d = device(to);
    const double now = d.clockSeconds();
    d.communicate(CommKind::SendRecv, 0, double(count) * (element_bytes > 0 ? element_bytes : double(sizeof(float))),
                  std::max(now, send_clock_s), std::max(now, send_clock_s + link_s));
}

void Communicator::checkpoint()
{
    if (cancelRequested() && !aborted())
        abort();
    if (aborted())
        throw ClusterAborted();
}

} // namespace shardscope::engine
