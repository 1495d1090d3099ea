// KernelPool: helpers spin briefly on the region counter (a step launches a few
// hundred regions back to back, and waking a sleeping thread costs tens of
// microseconds), then sleep on a condition variable so an idle pool burns no CPU.
#include "KernelPool.h"

#include <stdexcept>

namespace shardscope::engine {

KernelPool::KernelPool(int threads) : threads_(threads < 1 ? 1 : threads)
{
    workers_.reserve(size_t(threads_ - 1));
    for (int i = 1; i < threads_; ++i)
        workers_.emplace_back([this, i] { workerLoop(i); });
}

KernelPool::~KernelPool()
{
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        ++generation_;
        published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread& t : workers_)
        t.join();
}

void KernelPool::runErased(int parts, Trampoline call, void* fn)
{
    if (parts > threads_)
        throw std::logic_error("KernelPool::run: more parts than threads");
    {
        std::lock_guard lock(mutex_);
        call_ = call;
        fn_ = fn;
        parts_ = parts;
        pending_ = parts - 1;
        unfinished_.store(pending_, std::memory_order_relaxed);
        error_ = nullptr;
        ++generation_;
        published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    std::exception_ptr mine;
    try {
        call(fn, 0);
    } catch (...) {
        mine = std::current_exception();
    }
    // The owner spins a little too before sleeping: the parts are even, so the helpers
    // usually finish within microseconds of it.
    for (int i = 0; i < 4000 && unfinished_.load(std::memory_order_acquire) != 0; ++i)
        std::this_thread::yield();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    if (mine)
        std::rethrow_exception(mine);
    if (error_)
        std::rethrow_exception(error_);
}

void KernelPool::workerLoop(int index)
{
    std::uint64_t seen = 0;
    for (;;) {
        // Spin a little: the next region usually follows within microseconds.
        for (int i = 0; i < 4000 && published_.load(std::memory_order_acquire) == seen; ++i)
            std::this_thread::yield();
        Trampoline call = nullptr;
        void* fn = nullptr;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return generation_ != seen; });
            seen = generation_;
            if (stop_)
                return;
            if (index >= parts_)
                continue;  // this region needs fewer parts
            call = call_;
            fn = fn_;
        }
        std::exception_ptr failure;
        try {
            call(fn, index);
        } catch (...) {
            failure = std::current_exception();
        }
        {
            std::lock_guard lock(mutex_);
            if (failure && !error_)
                error_ = failure;
            --pending_;
            unfinished_.store(pending_, std::memory_order_release);
        }
        done_.notify_one();
    }
}

} // namespace shardscope::engine
