// EmulatedDevice, its allocator and clock, and the device profiles (catalog
// chips, and this host measured with the engine's own kernels).
#include "Device.h"

#include "Ops.h"
#include "Units.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>
#include <vector>

namespace shardscope::engine {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- profile

DeviceProfile profileFromChip(const ChipSpec& chip, double scale)
{
    if (!(scale > 0 && scale <= 1))
        throw std::invalid_argument("profileFromChip: scale must be in (0, 1]");
    const double perDevice = scale / std::max(1, chip.devices_per_chip);
    DeviceProfile p;
    p.name = chip.name;
    if (scale != 1) {
        char text[32];
        std::snprintf(text, sizeof text, ":%g", scale);
        p.name += text;
    }
    p.memory_bytes = chip.hbm_bytes * perDevice;
    p.peak_flops_fp32 = chip.peakFlops(DataType::FP32) * perDevice;
    p.peak_flops_bf16 = chip.peakFlops(DataType::BF16) * perDevice;
    p.memory_bytes_per_second = chip.hbm_bytes_per_second * perDevice;
    p.kernel_overhead_s = 0;  // not in the catalog
    p.scale = scale;
    return p;
}

double measureGemmFlops(KernelPool& pool, int m, int n, int k, int repeats)
{
    Mat<float> a = Mat<float>::Constant(m, k, 0.5f), b = Mat<float>::Constant(k, n, 0.25f), c(m, n);
    gemm<float>(pool, c, a, false, b, false, false);  // warm-up: caches, page faults
    double best = 1e300;
    for (int r = 0; r < std::max(1, repeats); ++r) {
        const auto t0 = Clock::now();
        gemm<float>(pool, c, a, false, b, false, false);
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return 2.0 * m * n * double(k) / best;
}

namespace {

// Sustained copy bandwidth: bytes read + written per second, best of a few
// passes over arrays much larger than the caches, split over the pool.
double measureCopyBandwidth(KernelPool& pool)
{
    const std::int64_t count = std::int64_t(32) << 20 >> 2;  // 32 MiB of floats per array
    std::vector<float> src(size_t(count), 1.0f), dst(size_t(count), 0.0f);
    double best = 1e300;
    for (int r = 0; r < 5; ++r) {
        const auto t0 = Clock::now();
        pool.parallelFor(count, 1 << 16, [&](std::int64_t i0, std::int64_t i1) {
            std::memcpy(dst.data() + i0, src.data() + i0, size_t(i1 - i0) * sizeof(float));
        });
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
        src[size_t(r)] = dst[size_t(count - 1 - r)];  // keep the copies observable
    }
    return 2.0 * double(count) * sizeof(float) / best;
}

// The cost of one empty parallel region: what every kernel pays before it computes.
double measureRegionOverhead(KernelPool& pool)
{
    if (pool.threads() == 1)
        return 0;
    constexpr int kRegions = 2000;
    volatile int sink = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < kRegions; ++i)
        pool.run(pool.threads(), [&](int part) {
            if (part == 0)
                sink = sink + 1;
        });
    return std::chrono::duration<double>(Clock::now() - t0).count() / kRegions;
}

} // namespace

DeviceProfile measureHostProfile(int threads)
{
    KernelPool pool(threads);
    DeviceProfile p;
    p.name = "host";
    p.measured = true;
    p.memory_bytes = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
    p.peak_flops_fp32 = measureGemmFlops(pool, 512, 512, 512, 6);
    p.peak_flops_bf16 = p.peak_flops_fp32;  // bf16 is emulated on fp32 units
    p.memory_bytes_per_second = measureCopyBandwidth(pool);
    p.kernel_overhead_s = measureRegionOverhead(pool);
    return p;
}

// ---------------------------------------------------------------- memory

const char* toString(MemoryCategory c)
{
    switch (c) {
    case MemoryCategory::Weights: return "weights";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::Optimizer: return "optimizer";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::Workspace: return "workspace";
    case MemoryCategory::Host: return "host";
    }
    return "?";
}

DeviceOutOfMemory::DeviceOutOfMemory(const std::string& device, MemoryCategory category, double requested_bytes,
                                     double free_bytes, double capacity_bytes)
    : std::runtime_error(device + ": out of memory allocating " + toString(category) + ": requested " +
                         formatBytes(requested_bytes) + " (" + formatCount(std::int64_t(requested_bytes)) +
                         " bytes), free " + formatBytes(free_bytes) + " (" + formatCount(std::int64_t(free_bytes)) +
                         " bytes) of " + formatBytes(capacity_bytes))
    , device_(device)
    , category_(category)
    , requested_(requested_bytes)
    , free_(free_bytes)
{
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : owner_(o.owner_), host_(o.host_), elements_(o.elements_), host_bytes_(o.host_bytes_),
      device_bytes_(o.device_bytes_), category_(o.category_)
{
    o.owner_ = nullptr;
    o.host_ = nullptr;
    o.elements_ = 0;
    o.device_bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept
{
    if (this != &o) {
        release();
        owner_ = o.owner_;
        host_ = o.host_;
        elements_ = o.elements_;
        host_bytes_ = o.host_bytes_;
        device_bytes_ = o.device_bytes_;
        category_ = o.category_;
        o.owner_ = nullptr;
        o.host_ = nullptr;
        o.elements_ = 0;
        o.device_bytes_ = 0;
    }
    return *this;
}

void DeviceBuffer::release()
{
    if (owner_)
        owner_->give_back(*this);  // keeps the host block for reuse
    else
        std::free(host_);
    owner_ = nullptr;
    host_ = nullptr;
    elements_ = 0;
    device_bytes_ = 0;
}

DeviceAllocator::DeviceAllocator(std::string device_name, double capacity_bytes)
    : name_(std::move(device_name)), capacity_(capacity_bytes)
{
}

DeviceAllocator::~DeviceAllocator()
{
    for (const auto& [bytes, block] : cache_)
        std::free(block);
}

void* DeviceAllocator::takeHostBlock(std::size_t host_bytes)
{
    for (size_t i = cache_.size(); i-- > 0;)
        if (cache_[i].first == host_bytes) {
            void* block = cache_[i].second;
            cache_.erase(cache_.begin() + std::ptrdiff_t(i));
            return block;
        }
    return nullptr;
}

DeviceBuffer DeviceAllocator::allocate(MemoryCategory category, double device_bytes, std::size_t elements,
                                       std::size_t host_element_bytes, bool zeroed)
{
    const double bytes = device_bytes;
    const bool onDevice = category != MemoryCategory::Host;
    if (onDevice && bytes > freeBytes())
        throw DeviceOutOfMemory(name_, category, bytes, freeBytes(), capacity_);
    DeviceBuffer b;
    if (elements > 0) {
        // 64-byte aligned for AVX-512 loads; aligned_alloc wants a multiple of the alignment.
        const std::size_t hostBytes = (elements * host_element_bytes + 63) / 64 * 64;
        b.host_ = takeHostBlock(hostBytes);
        if (!b.host_) {
            b.host_ = std::aligned_alloc(64, hostBytes);
            if (!b.host_)
                throw std::bad_alloc();
            zeroed = true;  // fresh pages: cleared once, so nothing of another buffer is ever read
        }
        if (zeroed)
            std::memset(b.host_, 0, hostBytes);
        b.host_bytes_ = hostBytes;
    }
    b.owner_ = this;
    b.elements_ = elements;
    b.device_bytes_ = bytes;
    b.category_ = category;
    const size_t c = size_t(category);
    current_[c] += bytes;
    peak_[c] = std::max(peak_[c], current_[c]);
    if (onDevice) {
        used_ += bytes;
        peak_total_ = std::max(peak_total_, used_);
    }
    return b;
}

void DeviceAllocator::give_back(const DeviceBuffer& b)
{
    if (b.host_) {
        if (cache_.size() >= kMaxCachedBlocks) {
            std::free(cache_.front().second);
            cache_.erase(cache_.begin());
        }
        cache_.emplace_back(b.host_bytes_, b.host_);
    }
    current_[size_t(b.category_)] -= b.device_bytes_;
    if (b.category_ != MemoryCategory::Host)
        used_ -= b.device_bytes_;
}

void DeviceAllocator::resetPeaks()
{
    peak_ = current_;
    peak_total_ = used_;
}

// ---------------------------------------------------------------- counters and clock

const char* toString(KernelKind k)
{
    switch (k) {
    case KernelKind::Matmul: return "matmul";
    case KernelKind::Attention: return "attention";
    case KernelKind::LayerNorm: return "layernorm";
    case KernelKind::Gelu: return "gelu";
    case KernelKind::Softmax: return "softmax";
    case KernelKind::Embedding: return "embedding";
    case KernelKind::Elementwise: return "elementwise";
    case KernelKind::Optimizer: return "optimizer";
    }
    return "?";
}

double DeviceCounters::totalFlops() const
{
    double s = 0;
    for (double f : flops)
        s += f;
    return s;
}

EmulatedDevice::EmulatedDevice(int id, DeviceProfile profile, int threads)
    : id_(id)
    , profile_(std::move(profile))
    , allocator_("device " + std::to_string(id) + " (" + profile_.name + ")", profile_.memory_bytes)
    , pool_(threads)
{
}

std::string EmulatedDevice::label() const { return "device " + std::to_string(id_) + " (" + profile_.name + ")"; }

void EmulatedDevice::charge(KernelKind kind, const KernelCost& cost, DataType compute)
{
    const double peak = profile_.peakFlops(compute);
    if (cost.flops > 0 && peak <= 0)
        throw std::invalid_argument(label() + ": the profile has no peak " + shardscope::toString(compute) +
                                    " FLOP/s (not published in the catalog)");
    if (profile_.memory_bytes_per_second <= 0)
        throw std::invalid_argument(label() + ": the profile has no memory bandwidth (not published in the catalog)");
    const double compute_s = cost.flops > 0 ? cost.flops / peak : 0;
    const double memory_s = (cost.bytes_read + cost.bytes_written) / profile_.memory_bytes_per_second;
    const double t = std::max(compute_s, memory_s) + profile_.kernel_overhead_s;
    const size_t k = size_t(kind);
    counters_.flops[k] += cost.flops;
    counters_.seconds[k] += t;
    counters_.calls[k] += 1;
    counters_.bytes_read += cost.bytes_read;
    counters_.bytes_written += cost.bytes_written;
    clock_s_ += t;
}

void EmulatedDevice::chargeHost(const HostCost& cost)
{
    if (!(profile_.host_link_bytes_per_second > 0) || !(profile_.host_memory_bytes_per_second > 0))
        throw std::invalid_argument(label() + ": the profile has no host link or host memory bandwidth: optimizer "
                                              "offload cannot be emulated (the node type publishes no host link)");
    const double t = (cost.bytes_to_host + cost.bytes_to_device) / profile_.host_link_bytes_per_second +
                     cost.host_memory_bytes / profile_.host_memory_bytes_per_second;
    counters_.host_bytes_to_host += cost.bytes_to_host;
    counters_.host_bytes_to_device += cost.bytes_to_device;
    counters_.host_memory_bytes += cost.host_memory_bytes;
    counters_.host_seconds += t;
    clock_s_ += t;
}

double EmulatedDevice::copyAsync(bool to_host, double bytes, double not_before_s)
{
    const double link = std::min(profile_.host_link_bytes_per_second > 0 ? profile_.host_link_bytes_per_second : 0.0,
                                 profile_.host_memory_bytes_per_second > 0 ? profile_.host_memory_bytes_per_second
                                                                           : profile_.host_link_bytes_per_second);
    if (!(link > 0))
        throw std::invalid_argument(label() + ": the profile has no host link: activation offload cannot be emulated "
                                              "(the node type publishes no host link)");
    double& busy = copy_done_s_[to_host ? 0 : 1];
    busy = std::max({busy, clock_s_, not_before_s}) + bytes / link;
    (to_host ? counters_.host_bytes_to_host : counters_.host_bytes_to_device) += bytes;
    return busy;
}

void EmulatedDevice::waitFor(double done_s)
{
    if (done_s > clock_s_) {
        counters_.host_seconds += done_s - clock_s_;
        clock_s_ = done_s;
    }
}

void EmulatedDevice::resetCounters()
{
    counters_ = DeviceCounters{};
    comm_ = CommCounters{};
    clock_s_ = 0;
    copy_done_s_[0] = copy_done_s_[1] = 0;
}

const char* toString(CommKind k)
{
    switch (k) {
    case CommKind::AllReduce: return "all_reduce";
    case CommKind::ReduceScatter: return "reduce_scatter";
    case CommKind::AllGather: return "all_gather";
    case CommKind::Broadcast: return "broadcast";
    case CommKind::SendRecv: return "send_recv";
    case CommKind::AllToAll: return "all_to_all";
    }
    return "?";
}

void EmulatedDevice::communicate(CommKind kind, double bytes_sent, double bytes_received, double start_s, double end_s)
{
    const size_t k = size_t(kind);
    comm_.bytes_sent[k] += bytes_sent;
    comm_.bytes_received[k] += bytes_received;
    comm_.seconds[k] += std::max(0.0, end_s - std::max(start_s, clock_s_));
    comm_.calls[k] += 1;
    comm_.wait_seconds += std::max(0.0, start_s - clock_s_);
    clock_s_ = std::max(clock_s_, end_s);
}

} // namespace shardscope::engine
