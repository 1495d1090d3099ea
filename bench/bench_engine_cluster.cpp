// The emulated cluster on this machine (2 cores here):
//  - BM_TrainStep: wall time of one training step of a small GPT (4 layers, 256
//    hidden, 8 heads, vocab 4096, seq 64, global batch 8), fp32, on one device
//    (1 and 2 kernel threads) and on dp=2, tp=2 and pp=2 (mb=2, 1F1B) clusters
//    whose devices run one worker thread each: the same global batch, so the
//    ratio is the cost of emulating the layout (collectives, pipeline bubbles,
//    threads sharing the cores). The reported time is the median step of a
//    5-step run after its first (warm-up) step; setup is excluded.
//  - BM_AllReduce: the communicator's ring all-reduce of a float buffer across
//    2, 4 and 8 devices (worker threads), 1 MiB and 64 MiB per device. Counters:
//    algbw_GBs = bytes / time, busbw_GBs = 2 (n-1)/n bytes / time (the data each
//    device moves, NCCL's convention).
//  - BM_AllReduceMpi (under mpirun -np N, N > 1): the same all-reduce on the MPI backend, one
//    device per rank, N devices; rank 0 reports. The other benchmarks run on rank 0 alone (the
//    other ranks skip them and sleep until it joins), so both backends are measured on the same
//    machine in one run:
//      mpirun --oversubscribe -np 4 build/bench/bench_engine_cluster --benchmark_filter=AllReduce
//          --benchmark_repetitions=5 --benchmark_report_aggregates_only=true  (one line)
//  - BM_ManyReplicas: a whole 2-step run (setup, thread start, teardown included) of a 2-layer
//    model (hidden 16, vocab 16, seq 8) at dp = 256, 1024 and 4096, one sequence per replica:
//    what scales with the device count (threads, barriers, data, initialisation).
//   build/bench/bench_engine_cluster --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include "Cluster.h"
#include "MpiSession.h"
#include "Trainer.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

using namespace shardscope;
using namespace shardscope::engine;

namespace {

std::unique_ptr<MpiSession> mpi;  // under mpirun

// Under mpirun the single-process benchmarks run on rank 0 only.
bool skipOnOtherRanks(benchmark::State& state)
{
    if (!mpi || mpi->rank() == 0)
        return false;
    state.SkipWithError("rank 0 runs it");
    return true;
}

DeviceProfile benchProfile()
{
    DeviceProfile p;
    p.name = "bench";
    p.memory_bytes = 64.0 * (1ull << 30);
    p.peak_flops_fp32 = p.peak_flops_bf16 = 1e12;
    p.memory_bytes_per_second = 1e11;
    return p;
}

TrainRequest benchRequest()
{
    TrainRequest r;
    r.model = ModelConfig{4, 256, 8, 4096, 64};
    r.batch = 8;
    r.steps = 5;
    r.seed = 1337;
    r.links.intra_bytes_per_second = r.links.inter_bytes_per_second = 1e10;
    return r;
}

double medianStepAfterWarmup(const Measurement& m)
{
    std::vector<double> w;
    for (size_t i = 1; i < m.steps.size(); ++i)
        w.push_back(m.steps[i].wall_seconds);
    std::sort(w.begin(), w.end());
    return w.empty() ? 0 : w[w.size() / 2];
}

// range(0): 0 = one device, 1 thread; 1 = one device, 2 threads; 2 = dp=2; 3 = tp=2; 4 = pp=2.
void BM_TrainStep(benchmark::State& state)
{
    if (skipOnOtherRanks(state))
        return;
    const int which = int(state.range(0));
    static const char* labels[] = {"1 device, 1 thread", "1 device, 2 threads", "dp=2", "tp=2", "pp=2,mb=2,1f1b"};
    state.SetLabel(labels[which]);
    TrainRequest r = benchRequest();
    const auto src = makeTokenSource(r);
    for (auto _ : state) {
        Measurement m;
        if (which <= 1) {
            EmulatedDevice d(0, benchProfile(), which + 1);
            m = runTraining(r, *src, d);
        } else {
            FieldErrors errors;
            const char* layouts[] = {"dp=2", "tp=2", "pp=2,mb=2,schedule=1f1b"};
            r.layout = parseLayout(layouts[which - 2], errors);
            if (r.layout.dp == 0)
                r.layout.dp = 1;
            m = runClusterTraining(r, *src, benchProfile());
        }
        if (m.error) {
            state.SkipWithError(m.error->message.c_str());
            return;
        }
        state.SetIterationTime(medianStepAfterWarmup(m));
    }
}

// All-reduces of `bytes` per device on `devices` devices of `backend`; with MPI only this rank's
// devices hold data, and the clock starts after a first all-reduce has lined the ranks up.
void allReduceBench(benchmark::State& state, int devices, std::size_t bytes, ClusterBackend backend)
{
    const std::size_t count = bytes / sizeof(float);
    LinkSpec links;
    links.intra_bytes_per_second = 1e10;
    EmulatedCluster cluster(devices, benchProfile(), links, nullptr, backend);
    std::vector<std::vector<float>> data(static_cast<size_t>(devices));
    for (int id = 0; id < devices; ++id)
        if (cluster.runsDevice(id))
            data[size_t(id)].assign(count, 1.0f);
    const int rounds = bytes >= (32u << 20) ? 3 : 50;
    for (auto _ : state) {
        std::chrono::steady_clock::time_point t0;
        const auto failure = cluster.run([&](int id) {
            float one = 1;
            cluster.groups(id).world->allReduce(id, &one, 1);
            if (id == 0 || !cluster.runsDevice(0))
                t0 = std::chrono::steady_clock::now();
            for (int k = 0; k < rounds; ++k)
                cluster.groups(id).world->allReduce(id, data[size_t(id)].data(), count);
        });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / rounds;
        if (failure) {
            state.SkipWithError(failure->message.c_str());
            return;
        }
        state.SetIterationTime(s);
        state.counters["algbw_GBs"] = double(bytes) / s * 1e-9;
        state.counters["busbw_GBs"] = 2.0 * (devices - 1) / devices * double(bytes) / s * 1e-9;
    }
}

void BM_AllReduce(benchmark::State& state)
{
    state.SetLabel("threads");
    if (skipOnOtherRanks(state))
        return;
    allReduceBench(state, int(state.range(0)), std::size_t(state.range(1)), ClusterBackend::Threads);
}

// Registered in main() under mpirun: one device per rank.
void BM_AllReduceMpi(benchmark::State& state, int ranks)
{
    state.SetLabel("mpi, " + std::to_string(ranks) + " ranks");
    mpi->barrier();  // the others sleep while rank 0 runs the benchmarks before this one
    allReduceBench(state, ranks, std::size_t(state.range(0)), ClusterBackend::Mpi);
}

class NullReporter : public benchmark::BenchmarkReporter {
public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
};

void BM_ManyReplicas(benchmark::State& state)
{
    if (skipOnOtherRanks(state))
        return;
    const int dp = int(state.range(0));
    TrainRequest r;
    r.model = ModelConfig{2, 16, 2, 16, 8};
    r.batch = dp;
    r.steps = 2;
    r.links.intra_bytes_per_second = r.links.inter_bytes_per_second = 1e9;
    r.layout.dp = dp;
    const auto src = makeTokenSource(r);
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        const Measurement m = runClusterTraining(r, *src, benchProfile());
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (m.error) {
            state.SkipWithError(m.error->message.c_str());
            return;
        }
    }
}

} // namespace

BENCHMARK(BM_ManyReplicas)->Arg(256)->Arg(1024)->Arg(4096)->Iterations(1)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_TrainStep)->DenseRange(0, 4)->Iterations(1)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_AllReduce)
    ->ArgsProduct({{2, 4, 8}, {1 << 20, 64 << 20}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

int main(int argc, char** argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE in every rank it starts.
    if (std::getenv("OMPI_COMM_WORLD_SIZE") && mpiAvailable())
        mpi = std::make_unique<MpiSession>();
    if (mpi && mpi->size() > 1)  // last: rank 0 reaches it after the others
        for (int bytes : {1 << 20, 64 << 20})
            benchmark::RegisterBenchmark("BM_AllReduceMpi", BM_AllReduceMpi, mpi->size())
                ->Args({bytes})
                ->Iterations(1)
                ->Unit(benchmark::kMillisecond)
                ->UseManualTime();
    NullReporter quiet;
    if (mpi && mpi->rank() != 0)
        benchmark::RunSpecifiedBenchmarks(&quiet);
    else
        benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    mpi.reset();
    return 0;
}
