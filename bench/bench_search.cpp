// The planner's full search (issue 4: every legal layout of GPT-3 175B, seq 2048,
// global batch 1536, on 128 trn1.32xlarge = 4096 NeuronCores and on 256 p5.48xlarge
// = 2048 H100s, in under 0.5 s on the 2-core machine), and a sweep over cluster sizes. Issue 16:
// DeepSeek-V3 (MoE, MLA) on 256 p5.48xlarge = 2048 H100s, every legal layout including ep and
// etp, seq 4096, global batch 8192 (the Megatron-Bridge recipe's 4096 tokens), no slower than 4x
// the GPT-3 trn1 case of the same run (the search prunes by a step-time bound since: the trn1
// case without that pruning, BM_SearchGpt3Trn1x128Exhaustive, is the search as it was).
// Problems come from the built-in specs (core/BuiltinSpecs.h, no database). Run by hand:
//   build/bench/bench_search --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Wall-clock time (UseRealTime): the work runs on the search's own threads.
#include "BuiltinSpecs.h"
#include "Search.h"
#include "Sweep.h"

#include <benchmark/benchmark.h>

using namespace shardscope;

namespace {

Problem gpt3(const char* nodeType, int nodes)
{
    const BuiltinSpecs& specs = BuiltinSpecs::instance();  // no database: the built-in specs suffice
    Problem p;
    p.model = specs.model("gpt3-175b");
    p.cluster.node = specs.node(nodeType);
    p.cluster.nodes = nodes;
    p.training.seq_len = 2048;
    p.training.global_batch = 1536;
    p.training.tokens_to_train = 300e9;
    return p;
}

Problem deepseekV3OnH100(int nodes)
{
    const BuiltinSpecs& specs = BuiltinSpecs::instance();
    Problem p;
    p.model = specs.model("deepseek-v3");
    p.cluster.node = specs.node("p5.48xlarge");
    p.cluster.nodes = nodes;
    p.training.seq_len = 4096;
    p.training.global_batch = 8192;
    p.training.flash_attention = true;
    p.training.tokens_to_train = 14.8e12;  // DeepSeek-V3's pre-training tokens (arXiv:2412.19437)
    return p;
}

void reportCounters(benchmark::State& state, const SearchStats& s)
{
    state.counters["candidates"] = double(s.candidates);
    state.counters["evaluated"] = double(s.evaluated);
    state.counters["pruned"] = double(s.pruned);
    state.counters["pruned_by_time"] = double(s.pruned_by_time);
    state.counters["feasible"] = double(s.feasible);
    state.counters["evals_per_s"] = s.evaluationsPerSecond();
    state.counters["threads"] = s.threads;
}

void searchBenchmark(benchmark::State& state, const Problem& problem, bool pruneByTime = true)
{
    const CostModel model(problem);
    SearchOptions options;
    options.threads = int(state.range(0));
    options.prune_by_time = pruneByTime;
    SearchResult last;
    for (auto _ : state) {
        last = search(model, SearchSpace{}, options);
        benchmark::DoNotOptimize(last.top.data());
    }
    if (!last.best())
        state.SkipWithError("no feasible layout");
    reportCounters(state, last.stats);
}

void BM_SearchGpt3Trn1x128(benchmark::State& state) { searchBenchmark(state, gpt3("trn1.32xlarge", 128)); }
// The same search without the step-time pruning: every layout the memory bound keeps is priced,
// as issue 16's reference ("today's" trn1 case, before the pruning) was measured.
void BM_SearchGpt3Trn1x128Exhaustive(benchmark::State& state)
{
    searchBenchmark(state, gpt3("trn1.32xlarge", 128), false);
}
void BM_SearchGpt3P5x256(benchmark::State& state) { searchBenchmark(state, gpt3("p5.48xlarge", 256)); }
void BM_SearchDeepSeekV3P5x256(benchmark::State& state) { searchBenchmark(state, deepseekV3OnH100(256)); }

// The best plan at 1, 2, 4, ..., 512 nodes of trn1.32xlarge.
void BM_SweepGpt3Trn1(benchmark::State& state)
{
    const Problem base = gpt3("trn1.32xlarge", 1);
    std::vector<int> nodes;
    for (int n = 1; n <= 512; n *= 2)
        nodes.push_back(n);
    SearchOptions options;
    options.threads = int(state.range(0));
    options.top_k = 1;
    std::int64_t evaluated = 0;
    for (auto _ : state) {
        const SweepResult sweep = sweepNodes(base, nodes, SearchSpace{}, options);
        evaluated = 0;
        for (const SweepPoint& p : sweep.points)
            evaluated += p.result.stats.evaluated;
        benchmark::DoNotOptimize(sweep.points.data());
    }
    state.counters["evaluated"] = double(evaluated);
}

} // namespace

BENCHMARK(BM_SearchGpt3Trn1x128)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SearchGpt3Trn1x128Exhaustive)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SearchGpt3P5x256)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SearchDeepSeekV3P5x256)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SweepGpt3Trn1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
