// One fp32 training step (forward + backward + AdamW with clipping) of the
// engine's model executor on one emulated device, with 1 and 2 kernel threads:
//   gpt2small: 12 layers, 768 hidden, 12 heads, vocab 50257, seq 64, batch 4
//   llama:     12 layers, 768 hidden, 12 heads / 4 kv heads, SwiGLU 2048, RMSNorm, RoPE,
//              untied head, no biases, vocab 32000, seq 64, batch 4 (Llama's blocks at
//              GPT-2-small's width)
//   small:      6 layers, 384 hidden,  6 heads, vocab 50257, seq 256, batch 8
// The same run measures this machine's sustained fp32 GEMM rate with the
// engine's threaded GEMM on the step's dominant shape (the MLP's (4C, C) weight
// against the step's B*T tokens), between steps, and reports the step's achieved
// model FLOP/s (products only: matmul + attention, 2 per multiply-add) as a
// fraction of it. Reported time is the step alone (manual timing).
// Counters: model_GFLOP (per step), step_GFLOPs, gemm_GFLOPs, fraction_of_gemm; and what
// bounds it: optimizer_share (the norm and AdamW passes' share of the step), optimizer_GBps
// (the host memory rate they reach), fwd_bwd_fraction_of_gemm (forward + backward alone),
// page_faults (fresh host pages per step; 0 once the allocator recycles every buffer).
// With 1 thread the optimizer cannot overlap the products, so the step's fraction is at most
// 1 / (1 + optimizer seconds / (model FLOP / GEMM rate)).
#include "Data.h"
#include "Device.h"
#include "ModelExecutor.h"
#include "Ops.h"

#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

using namespace shardscope::engine;

namespace {

struct Shape {
    ModelConfig model;
    int batch;
};

ModelConfig llamaShape()
{
    ModelConfig c{12, 768, 12, 32000, 64};
    c.kv_heads = 4;
    c.ffn_hidden = 2048;
    c.mlp = shardscope::MlpKind::SwiGlu;
    c.norm = shardscope::NormKind::RmsNorm;
    c.positions = shardscope::PositionKind::Rotary;
    c.bias = false;
    c.tied_embeddings = false;
    return c;
}

const Shape kGpt2Small{{12, 768, 12, 50257, 64}, 4};
const Shape kLlama{llamaShape(), 4};
const Shape kSmall{{6, 384, 6, 50257, 256}, 8};

// Host memory the fp32 optimizer passes move per step: the norm reads each gradient; AdamW
// reads the gradient, weight and both moments, writes the weight and both moments back and
// clears the gradient (9 floats a parameter in all).
double optimizerMemoryBytes(std::int64_t parameters)
{
    return double(parameters) * 9.0 * sizeof(float);
}

// Capacity is irrelevant to wall time: a profile large enough for both shapes.
DeviceProfile benchProfile()
{
    DeviceProfile p;
    p.name = "bench";
    p.memory_bytes = 64.0 * (1ull << 30);
    p.peak_flops_fp32 = p.peak_flops_bf16 = 1e12;
    p.memory_bytes_per_second = 1e11;
    return p;
}

void stepBenchmark(benchmark::State& state, const Shape& shape)
{
    const int threads = int(state.range(0));
    EmulatedDevice device(0, benchProfile(), threads);
    const int hidden = shape.model.hidden, tokens = shape.batch * shape.model.seq;

    ExecutorOptions options;
    options.micro_batch = shape.batch;
    options.global_tokens = std::int64_t(tokens);
    options.seed = 1337;
    shardscope::Layout layout;
    layout.micro_batch = shape.batch;
    ModelExecutor<float> model(shape.model, options, singleDevice(device, layout));
    MarkovSource data(shape.model.vocab, 1337);
    const size_t n = size_t(tokens);
    std::vector<int> inputs(n), targets(n);
    const AdamWSettings adam{3e-4, 0.9, 0.95, 1e-8, 0.1};

    int step = 0;
    double optimizerSeconds = 0;  // the norm and AdamW passes of the timed steps
    auto oneStep = [&] {
        data.batch(step, shape.batch, shape.model.seq, inputs.data(), targets.data());
        ++step;
        benchmark::DoNotOptimize(model.forward(0, inputs.data(), targets.data()));
        model.backward(0);
        const auto t0 = std::chrono::steady_clock::now();
        const double norm = std::sqrt(model.reduceGradients());
        model.update(adam, norm > 1.0 ? 1.0 / (norm + 1e-6) : 1.0, step);
        optimizerSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    oneStep();  // warm-up: first touch of every buffer
    device.resetCounters();
    optimizerSeconds = 0;
    // The GEMM rate is measured between steps, under the same conditions as the
    // steps (same threads, same machine load); the best rate seen is the reference.
    double gemmRate = 0, seconds = 0;
    long faults = 0;  // fresh host pages touched by the steps (the kernel clears each one)
    for (auto _ : state) {
        gemmRate = std::max(gemmRate, measureGemmFlops(device.pool(), 4 * hidden, tokens, hidden, 3));
        rusage before{}, after{};
        getrusage(RUSAGE_SELF, &before);
        const auto t0 = std::chrono::steady_clock::now();
        oneStep();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        getrusage(RUSAGE_SELF, &after);
        faults += after.ru_minflt - before.ru_minflt;
        state.SetIterationTime(s);
        seconds += s;
    }
    const DeviceCounters& c = device.counters();
    const double steps = double(state.iterations());
    const double modelFlops = (c.flops[size_t(KernelKind::Matmul)] + c.flops[size_t(KernelKind::Attention)]) / steps;
    const double achieved = modelFlops / (seconds / steps);
    state.counters["model_GFLOP"] = modelFlops * 1e-9;
    state.counters["step_GFLOPs"] = achieved * 1e-9;
    state.counters["gemm_GFLOPs"] = gemmRate * 1e-9;
    state.counters["fraction_of_gemm"] = achieved / gemmRate;
    state.counters["all_GFLOP"] = c.totalFlops() / steps * 1e-9;
    state.counters["page_faults"] = double(faults) / steps;
    // The optimizer's passes are memory-bound (AdamW reads and writes the weights and both
    // moments, reads and clears the gradients; the norm reads the gradients once): their share
    // of the step and the memory rate they reach bound what the products can make of a step.
    state.counters["optimizer_share"] = optimizerSeconds / seconds;
    state.counters["optimizer_GBps"] = optimizerMemoryBytes(model.localParameters()) / (optimizerSeconds / steps) * 1e-9;
    state.counters["fwd_bwd_fraction_of_gemm"] = modelFlops / ((seconds - optimizerSeconds) / steps) / gemmRate;
}

void BM_StepGpt2Small(benchmark::State& state) { stepBenchmark(state, kGpt2Small); }
void BM_StepLlama(benchmark::State& state) { stepBenchmark(state, kLlama); }
void BM_StepSmall(benchmark::State& state) { stepBenchmark(state, kSmall); }

// The sustained GEMM rate alone, for square 1024 products and the MLP shape of GPT-2 small.
void BM_Sgemm(benchmark::State& state)
{
    KernelPool pool(int(state.range(0)));
    const int m = int(state.range(1)), n = int(state.range(2)), k = int(state.range(3));
    Mat<float> a = Mat<float>::Constant(m, k, 0.5f), b = Mat<float>::Constant(k, n, 0.25f), c(m, n);
    for (auto _ : state) {
        gemm<float>(pool, c, a, false, b, false, false);
        benchmark::DoNotOptimize(c.data());
    }
    state.counters["GFLOPs"] =
        benchmark::Counter(2.0 * m * n * double(k) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

} // namespace

BENCHMARK(BM_StepGpt2Small)->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_StepLlama)->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_StepSmall)->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Sgemm)
    ->Args({1, 1024, 1024, 1024})
    ->Args({2, 1024, 1024, 1024})
    ->Args({1, 3072, 256, 768})
    ->Args({2, 3072, 256, 768})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
