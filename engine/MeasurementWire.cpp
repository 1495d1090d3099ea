// DeviceReport to bytes and back; see MeasurementWire.h. Native byte order: the ranks of one
// run are the same program on the same kind of machine.
#include "MeasurementWire.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace shardscope::engine {

namespace {

class Writer {
public:
    explicit Writer(std::vector<char>& out) : out_(out) {}
    template <class T>
    void value(const T& v)
    {
        static_assert(std::is_trivially_copyable_v<T>);
        const char* p = reinterpret_cast<const char*>(&v);
        out_.insert(out_.end(), p, p + sizeof(T));
    }
    template <class T>
    void vector(const std::vector<T>& v)
    {
        value(std::uint64_t(v.size()));
        for (const T& x : v)
            value(x);
    }
    void map(const std::map<std::string, double>& m)
    {
        value(std::uint64_t(m.size()));
        for (const auto& [key, v] : m) {
            value(std::uint64_t(key.size()));
            out_.insert(out_.end(), key.begin(), key.end());
            value(v);
        }
    }

private:
    std::vector<char>& out_;
};

class Reader {
public:
    explicit Reader(const std::vector<char>& in) : in_(in) {}
    bool done() const { return at_ == in_.size(); }
    template <class T>
    void value(T& v)
    {
        need(sizeof(T));
        std::memcpy(&v, in_.data() + at_, sizeof(T));
        at_ += sizeof(T);
    }
    template <class T>
    void vector(std::vector<T>& v)
    {
        std::uint64_t n = 0;
        value(n);
        need(n * sizeof(T));
        v.resize(size_t(n));
        for (T& x : v)
            value(x);
    }
    void map(std::map<std::string, double>& m)
    {
        std::uint64_t n = 0;
        value(n);
        for (std::uint64_t k = 0; k < n; ++k) {
            std::uint64_t len = 0;
            value(len);
            need(len);
            std::string key(in_.data() + at_, size_t(len));
            at_ += size_t(len);
            value(m[key]);
        }
    }

private:
    void need(std::uint64_t bytes) const
    {
        if (bytes > in_.size() - at_)
            throw std::runtime_error("MPI backend: a rank's device report is truncated at byte " + std::to_string(at_));
    }
    const std::vector<char>& in_;
    size_t at_ = 0;
};

template <class IO, class Report, class Device>
void fields(IO& io, Report& r, Device& d)
{
    io.value(d.id);
    io.value(d.threads);
    io.value(d.memory_peak_bytes);
    io.value(d.memory_peak_total_bytes);
    io.value(d.counters);
    io.map(d.comm_bytes);
    io.map(d.comm_bytes_received);
    io.map(d.comm_calls);
    io.map(d.comm_seconds);
    io.value(d.comm_wait_seconds);
    io.value(d.moe_peak_copies);
    io.value(d.moe_step_load);
    io.value(d.memory_resident_bytes);
    io.value(d.device_step_time_s);
    io.value(d.wall_step_time_s);
    io.vector(d.device_step_times_s);
    io.vector(d.wall_step_times_s);
    io.value(d.tp_rank);
    io.value(d.cp_rank);
    io.value(d.dp_rank);
    io.value(d.pp_rank);
    io.value(d.node);
    io.vector(r.loss);
    io.vector(r.grad_norm);
    io.vector(r.mtp_loss);
    io.vector(r.tokens_per_expert);
    io.value(r.dropped_copies);
}

} // namespace

void appendDeviceReport(std::vector<char>& out, const DeviceReport& r)
{
    Writer w(out);
    fields(w, r, r.device);
}

std::vector<DeviceReport> readDeviceReports(const std::vector<char>& in, const DeviceProfile& profile)
{
    std::vector<DeviceReport> out;
    Reader reader(in);
    while (!reader.done()) {
        DeviceReport r;
        fields(reader, r, r.device);
        r.device.profile = profile;
        out.push_back(std::move(r));
    }
    return out;
}

} // namespace shardscope::engine
