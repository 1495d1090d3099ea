// EmulatedDevice: one accelerator as the engine sees it.
//
// - DeviceProfile: capacity, peak FLOP/s, memory bandwidth and per-kernel
//   overhead, from a catalog ChipSpec (optionally scaled down so that a small
//   model feels the pressure a large one feels on the real chip) or measured on
//   this host.
// - DeviceAllocator: every buffer is allocated under a MemoryCategory; current
//   and peak bytes per category; a request beyond capacity throws
//   DeviceOutOfMemory before any host memory is touched, leaving the device usable.
// - Counters and clock: each kernel reports its FLOPs and bytes read/written;
//   the device clock advances by the kernel's roofline time on the profile,
//   max(FLOPs / peak, bytes / bandwidth) + overhead.
//
// Device bytes versus host bytes: a bf16 tensor costs 2 bytes per element on the
// device (that is what the allocator counts) while the host keeps its values
// widened to float, exactly, so that Eigen's fp32 GEMMs run at full speed.
//
// Not thread-safe: a device is driven by one thread at a time (its worker in an
// emulated cluster); its KernelPool runs the kernels' parallel parts.
#pragma once

#include "HardwareSpec.h"
#include "KernelPool.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::engine {

// ---------------------------------------------------------------- profile

struct DeviceProfile {
    std::string name;                  // "host", "trainium1", "trainium1:0.001"
    double memory_bytes = 0;           // capacity of one device
    double peak_flops_fp32 = 0;        // dense FLOP/s; 0: not published
    double peak_flops_bf16 = 0;        // 0: not published
    double memory_bytes_per_second = 0;
    double kernel_overhead_s = 0;      // added to every kernel's roofline time
    // Optimizer offload: this device's share of its node's host link (one direction, PCIe), and
    // the host memory bandwidth the offloaded optimizer runs at; 0: not known (no offload).
    double host_link_bytes_per_second = 0;
    double host_memory_bytes_per_second = 0;
    double scale = 1;                  // factor applied to capacity, FLOP/s and bandwidth
    bool measured = false;             // true for the host profile

    double peakFlops(DataType compute) const { return compute == DataType::FP32 ? peak_flops_fp32 : peak_flops_bf16; }
};

// One device of a catalog chip (a Trainium chip has 2 NeuronCores: capacity,
// FLOP/s and bandwidth are divided by devices_per_chip), times `scale` in (0, 1].
// Per-kernel overhead is not in the catalog, so it is 0 here.
DeviceProfile profileFromChip(const ChipSpec& chip, double scale = 1.0);

// This machine, measured now with `threads` kernel threads: sustained fp32 GEMM
// rate (Eigen, the engine's own partitioning, 512x512x512 products), sustained
// copy bandwidth (read + write of 32 MiB arrays) and the cost of one empty
// parallel region (the per-kernel overhead). Capacity is the physical RAM.
// Takes well under a second; bf16 runs at the fp32 rate (it is emulated).
DeviceProfile measureHostProfile(int threads);

// Sustained single-precision GEMM FLOP/s for C(m,n) = A(m,k) B(k,n) with the
// engine's threaded GEMM, best of `repeats` after one warm-up. Used by the host
// profile and by the benchmark to state how close a training step gets.
double measureGemmFlops(KernelPool& pool, int m, int n, int k, int repeats);

// ---------------------------------------------------------------- memory

// Host: what this device keeps in its host's memory (offloaded optimizer states); counted
// per category like the others but not against the device's capacity.
enum class MemoryCategory { Weights, Gradients, Optimizer, Activations, Workspace, Host };
inline constexpr int kMemoryCategories = 6;
const char* toString(MemoryCategory c);  // "weights", "gradients", ..., "host"

// Thrown when an allocation does not fit. The device stays consistent: nothing
// was allocated, and freeing other buffers makes room again.
class DeviceOutOfMemory : public std::runtime_error {
public:
    DeviceOutOfMemory(const std::string& device, MemoryCategory category, double requested_bytes,
                      double free_bytes, double capacity_bytes);
    const std::string& device() const { return device_; }
    MemoryCategory category() const { return category_; }
    double requestedBytes() const { return requested_; }
    double freeBytes() const { return free_; }

private:
    std::string device_;
    MemoryCategory category_;
    double requested_;
    double free_;
};

class DeviceAllocator;

// A device allocation: host storage of `elements` values of `host_element_bytes`
// each (64-byte aligned, zero-filled unless asked not to), counted on the device as `device_bytes`
// (which may differ: bf16 tensors held as floats, fp32 statistics beside them).
// Move-only; returns its bytes to the allocator when destroyed.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    template <class T>
    T* as() const { return static_cast<T*>(host_); }
    std::size_t elements() const { return elements_; }
    double deviceBytes() const { return device_bytes_; }
    MemoryCategory category() const { return category_; }
    void release();

private:
    friend class DeviceAllocator;
    DeviceAllocator* owner_ = nullptr;
    void* host_ = nullptr;
    std::size_t elements_ = 0;
    std::size_t host_bytes_ = 0;  // the host block's size (64-byte multiple)
    double device_bytes_ = 0;
    MemoryCategory category_ = MemoryCategory::Workspace;
};

class DeviceAllocator {
public:
    DeviceAllocator(std::string device_name, double capacity_bytes);
    ~DeviceAllocator();
    DeviceAllocator(const DeviceAllocator&) = delete;
    DeviceAllocator& operator=(const DeviceAllocator&) = delete;

    // Throws DeviceOutOfMemory when device_bytes exceeds the free bytes; then
    // nothing is allocated and the device is unchanged. `zeroed` false: the caller writes
    // every value before reading it (saved activations, gathered weights), so a recycled
    // host block is not cleared.
    DeviceBuffer allocate(MemoryCategory category, double device_bytes, std::size_t elements,
                          std::size_t host_element_bytes, bool zeroed = true);

    double capacityBytes() const { return capacity_; }
    double usedBytes() const { return used_; }
    double freeBytes() const { return capacity_ - used_; }
    double currentBytes(MemoryCategory c) const { return current_[size_t(c)]; }
    double peakBytes(MemoryCategory c) const { return peak_[size_t(c)]; }
    double peakTotalBytes() const { return peak_total_; }
    // Peaks restart from the current usage (e.g. after setup, to see a step's own peak).
    void resetPeaks();

private:
    friend class DeviceBuffer;
    // Takes the buffer's bytes back; keeps its host block for the next allocation of the same
    // size (a step allocates and frees the same activation and ZeRO buffers every micro-batch:
    // recycling spares the host fresh pages, which cost more than the kernels on small models).
    void give_back(const DeviceBuffer& b);
    void* takeHostBlock(std::size_t host_bytes);

    static constexpr std::size_t kMaxCachedBlocks = 256;
    std::vector<std::pair<std::size_t, void*>> cache_;  // (bytes, block), host side only

    std::string name_;
    double capacity_;
    double used_ = 0;
    double peak_total_ = 0;
    std::array<double, kMemoryCategories> current_{};
    std::array<double, kMemoryCategories> peak_{};
};

// ---------------------------------------------------------------- counters and clock

enum class KernelKind { Matmul, Attention, LayerNorm, Gelu, Softmax, Embedding, Elementwise, Optimizer };
inline constexpr int kKernelKinds = 8;
const char* toString(KernelKind k);  // "matmul", "attention", ...

// What one kernel call does: FLOPs (2 per multiply-add) and device bytes moved.
struct KernelCost {
    double flops = 0;
    double bytes_read = 0;
    double bytes_written = 0;
};

// Communication, by collective kind (Communicator.h moves the data).
enum class CommKind { AllReduce, ReduceScatter, AllGather, Broadcast, SendRecv, AllToAll };
inline constexpr int kCommKinds = 6;
// "all_reduce", "reduce_scatter", "all_gather", "broadcast", "send_recv", "all_to_all"
const char* toString(CommKind k);

struct CommCounters {
    std::array<double, kCommKinds> bytes_sent{};
    std::array<double, kCommKinds> bytes_received{};
    std::array<double, kCommKinds> seconds{};   // device-clock time on the link, per kind
    std::array<std::int64_t, kCommKinds> calls{};
    double wait_seconds = 0;  // device-clock time spent waiting for the last member to arrive
};

// Work done for this device on its host: transfers over the host link and the host's
// memory passes (the offloaded optimizer step).
struct HostCost {
    double bytes_to_host = 0;
    double bytes_to_device = 0;
    double host_memory_bytes = 0;  // read + written in host memory
};

struct DeviceCounters {
    double host_bytes_to_host = 0, host_bytes_to_device = 0, host_memory_bytes = 0;
    double host_seconds = 0;  // device-clock time of the host link and the host's passes
    std::array<double, kKernelKinds> flops{};
    std::array<double, kKernelKinds> seconds{};  // device-clock time per kind
    std::array<std::int64_t, kKernelKinds> calls{};
    double bytes_read = 0;
    double bytes_written = 0;
    double totalFlops() const;
};

class EmulatedDevice {
public:
    // `threads`: kernel threads of this device (cores it may use).
    EmulatedDevice(int id, DeviceProfile profile, int threads = 1);

    int id() const { return id_; }
    const DeviceProfile& profile() const { return profile_; }
    std::string label() const;  // "device 0 (trainium1:0.001)"
    DeviceAllocator& allocator() { return allocator_; }
    const DeviceAllocator& allocator() const { return allocator_; }
    KernelPool& pool() { return pool_; }
    int threads() const { return pool_.threads(); }

    // Records a kernel and advances the clock by its roofline time for `compute`.
    // Throws std::invalid_argument if the profile lacks the peak for `compute`.
    void charge(KernelKind kind, const KernelCost& cost, DataType compute);
    // Records offloaded work and advances the clock by its time: the link carries both
    // directions one after the other, then the host makes its memory passes. Throws
    // std::invalid_argument when the profile has no host link or host memory bandwidth.
    void chargeHost(const HostCost& cost);
    // Activation offload: a copy of `bytes` over the host link on a copy engine of its own per
    // direction (to the host / to the device), as a DMA stream runs beside the kernels. It starts
    // when issued (the clock), its direction's previous copy and `not_before_s` are done, takes bytes / the
    // slower of the link and the host memory; returns its completion time. waitFor(t): the
    // device waits (the clock to at least t), the wait counted as host-link time.
    double copyAsync(bool to_host, double bytes, double not_before_s = 0);
    void waitFor(double done_s);
    double clockSeconds() const { return clock_s_; }
    const DeviceCounters& counters() const { return counters_; }
    const CommCounters& comm() const { return comm_; }
    void resetCounters();

    // Records a collective (or one side of a send/recv) this device took part
    // in: it waited from its clock until `start_s` (the last member's arrival,
    // >= clockSeconds()), then the link was busy until `end_s`; the clock ends there.
    void communicate(CommKind kind, double bytes_sent, double bytes_received, double start_s, double end_s);

private:
    int id_;
    DeviceProfile profile_;
    DeviceAllocator allocator_;
    KernelPool pool_;
    DeviceCounters counters_;
    CommCounters comm_;
    double clock_s_ = 0;
    double copy_done_s_[2] = {0, 0};  // each direction's copy engine busy until (to host, to device)
};

} // namespace shardscope::engine
