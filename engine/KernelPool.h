// KernelPool: the threads one emulated device uses for its kernels.
//
// A lone device may use every core (threads = cores); in an emulated cluster
// each device's worker thread owns a pool of its own share of the cores, often
// 1, which runs everything inline with no synchronisation. Eigen itself stays
// single-threaded (EIGEN_DONT_PARALLELIZE): kernels split their output into
// disjoint blocks and each block is one single-threaded Eigen call, so two
// devices never fight over a shared Eigen thread pool.
//
// Not a general task system: one parallel region at a time, started and waited
// for by the owning thread; no allocation per region.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace shardscope::engine {

class KernelPool {
public:
    explicit KernelPool(int threads = 1);
    ~KernelPool();
    KernelPool(const KernelPool&) = delete;
    KernelPool& operator=(const KernelPool&) = delete;

    int threads() const { return threads_; }

    // Calls fn(part) for part in [0, parts), parts <= threads(), concurrently;
    // part 0 on the calling thread. Returns when all parts are done and rethrows
    // the first exception a part threw.
    template <class F>
    void run(int parts, F&& fn)
    {
        if (parts <= 1 || threads_ == 1) {
            for (int p = 0; p < parts; ++p)
                fn(p);
            return;
        }
        using Fn = std::remove_reference_t<F>;
        runErased(parts, [](void* f, int part) { (*static_cast<Fn*>(f))(part); }, &fn);
    }

    // Splits [0, n) into at most threads() contiguous ranges whose boundaries are
    // multiples of `grain` (except the end) and calls fn(begin, end) on each.
    // Ranges depend only on n, grain and threads(): the same split every call.
    template <class F>
    void parallelFor(std::int64_t n, std::int64_t grain, F&& fn)
    {
        if (n <= 0)
            return;
        const std::int64_t blocks = (n + grain - 1) / grain;
        const int parts = int(std::min<std::int64_t>(threads_, blocks));
        if (parts <= 1) {
            fn(std::int64_t(0), n);
            return;
        }
        run(parts, [&](int p) {
            const std::int64_t b0 = blocks * p / parts, b1 = blocks * (p + 1) / parts;
            const std::int64_t begin = b0 * grain, end = std::min(n, b1 * grain);
            if (begin < end)
                fn(begin, end);
        });
    }

private:
    using Trampoline = void (*)(void*, int);
    void runErased(int parts, Trampoline call, void* fn);
    void workerLoop(int index);

    int threads_ = 1;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    // The current region, written by the owner under mutex_ before bumping generation_.
    Trampoline call_ = nullptr;
    void* fn_ = nullptr;
    int parts_ = 0;
    std::uint64_t generation_ = 0;   // guarded by mutex_
    std::atomic<std::uint64_t> published_{0};  // mirrors generation_ for the spin phase
    int pending_ = 0;                // helper parts not yet finished, guarded by mutex_
    std::atomic<int> unfinished_{0};  // mirrors pending_ for the owner's spin phase
    bool stop_ = false;
    std::exception_ptr error_;
};

} // namespace shardscope::engine
