// CostModel::evaluate over a mix of layouts (issue: median <= 0.5 us per evaluation
// on one core, no heap allocation). Run by hand:
//   build/bench/bench_costmodel --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include "CostModel.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

using namespace shardscope;

namespace {

// GPT-3 175B on 128 trn1.32xlarge (4096 NeuronCores), built without the catalog so the
// benchmark measures the model alone. Figures as in resources/catalog (Trainium [N1], trn1 [N4]).
Problem gpt3OnTrn1()
{
    Problem p;
    ModelSpec& m = p.model;
    m.name = "gpt3-175b";
    m.layers = 96;
    m.hidden = 12288;
    m.heads = 96;
    m.kv_heads = 96;
    m.head_dim = 128;
    m.ffn_hidden = 4 * 12288;
    m.vocab = 50257;
    m.max_seq = 2048;
    ChipSpec& c = p.cluster.node.chip;
    c.name = "trainium1";
    c.vendor = "AWS";
    c.peak_flops_bf16 = 190e12;
    c.hbm_bytes = 32.0 * (1 << 30);
    c.hbm_bytes_per_second = 820.0 * (1 << 30);
    c.devices_per_chip = 2;
    NodeType& n = p.cluster.node;
    n.name = "trn1.32xlarge";
    n.chips_per_node = 16;
    n.intra_topology = Topology::Torus2D;
    n.intra_link_bytes_per_second = 384.0 * (1 << 30);
    n.inter_node_bytes_per_second = 800e9 / 8;
    n.price_per_node_hour_usd = 21.5;
    p.cluster.nodes = 128;
    p.training.global_batch = 1536;
    p.training.seq_len = 2048;
    return p;
}

std::vector<Layout> layoutMix(const Problem& p)
{
    std::vector<Layout> out;
    for (int tp : {1, 4, 8, 32})
        for (int pp : {1, 4, 8, 16})
            for (int zero : {0, 1, 3})
                for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
                    for (PipelineSchedule s : {PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved}) {
                        Layout l;
                        l.tp = tp;
                        l.pp = pp;
                        l.dp = int(p.cluster.devices() / (tp * pp));
                        l.zero_stage = zero;
                        l.sequence_parallel = tp > 1;
                        l.recompute = r;
                        l.schedule = pp > 1 ? s : PipelineSchedule::OneFOneB;
                        l.virtual_stages = l.schedule == PipelineSchedule::Interleaved ? 2 : 1;
                        if (validate(l, p.model, p.cluster, p.training).empty())
                            out.push_back(l);
                    }
    return out;
}

// evaluate() over the layout mix, one layout per iteration.
void evaluateMix(benchmark::State& state, const CostModel& model, const std::vector<Layout>& layouts)
{
    size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        const Prediction p = model.evaluate(layouts[i]);
        sink += p.step_time_s;
        if (++i == layouts.size())
            i = 0;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(state.iterations());
    state.counters["layouts"] = double(layouts.size());
}

void BM_CostModelEvaluate(benchmark::State& state)
{
    const Problem problem = gpt3OnTrn1();
    evaluateMix(state, CostModel(problem), layoutMix(problem));
}
BENCHMARK(BM_CostModelEvaluate);

// The same with an eager framework's element-wise kernels (ElementwisePasses.h): a few more
// multiplications per stage, still no allocation.
void BM_CostModelEvaluateEager(benchmark::State& state)
{
    const Problem problem = gpt3OnTrn1();
    evaluateMix(state, CostModel(problem, defaultCostModelParams(), ExportFormat::Fsdp), layoutMix(problem));
}
BENCHMARK(BM_CostModelEvaluateEager);

void BM_CostModelConstruct(benchmark::State& state)
{
    const Problem problem = gpt3OnTrn1();
    for (auto _ : state) {
        CostModel model(problem);
        benchmark::DoNotOptimize(&model);
    }
}
BENCHMARK(BM_CostModelConstruct);

} // namespace

BENCHMARK_MAIN();
