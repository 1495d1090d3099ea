// SearchSpace: which layouts the planner's search may consider, and what it
// optimises. The search enumerates every layout that satisfies the model's
// rules (validate(layout, model, cluster, training) in core/Layout.h) and lies
// inside these bounds; this file only narrows that space, it never widens it.
//
// The domain of each layout key, before the user's constraints:
//   first/last_stage_layers  0 (even) where pp divides the layers, else Megatron-LM's uneven
//                    split with the most layers k <= the middle share on each end (126 over 16:
//                    7 + 14 x 8 + 7), else ends one layer apart (61 over 16: 3 + 14 x 4 + 2);
//                    fixed with --fix
//   dp, tp, pp, cp   every factorisation dp x tp x pp x cp of the device count; cp > 1 only
//                    when the problem trains fused (flash) attention, the only kind context
//                    parallelism runs on (Transformer Engine)
//   sp               off, and on when tp > 1
//   zero             0-3
//   zero_group       0 (the whole dp group, FSDP) and, for zero >= 1, the HSDP/MiCS
//                    groups g < dp dividing dp, g a power of two or one node's worth
//                    of replicas (devices per node / (tp x cp)); the shard group spans
//                    g x cp devices, so g = 1 is left out when cp = 1 (it shards
//                    nothing), and g = dp always (it is the same layout as 0)
//   mb               every divisor of the per-replica batch (global batch / dp)
//   schedule, v      1f1b and gpipe with v = 1; interleaved (pp >= 2) with every
//                    v >= 2 dividing layers / pp
//   recompute        none, selective, full
//   offload          none, and optimizer when zero >= 1
//   ep, etp          MoE only: every ep dividing the routed experts, and etp = tp (written as
//                    the default) or a power of two up to a node's devices dividing the experts'
//                    ffn_hidden, with ep x etp dividing tp x cp x dp (Megatron-LM's expert grid)
#pragma once

#include "FieldError.h"
#include "Layout.h"

#include <climits>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

// What the search ranks by. Lower objective value is better (objectiveValue()).
enum class Objective {
    Throughput,   // tokens per second, highest first
    TimeToTrain,  // time to train the token budget, shortest first
    CostToTrain,  // cost to train the token budget, cheapest first (needs a node price)
};

struct IntBounds {
    int lo = 1;
    int hi = INT_MAX;
    bool contains(int v) const { return v >= lo && v <= hi; }
    bool operator==(const IntBounds&) const = default;
};

struct SearchSpace {
    // Inclusive bounds; fixing a key sets lo == hi.
    IntBounds dp, tp, pp, cp, mb, v;
    IntBounds ep, etp;  // (etp: the expert-tensor-parallel degree itself, tp when the layout leaves it out)
    IntBounds zero{0, 3};
    std::optional<int> zero_group;          // fixed shard group (0: whole dp group)
    std::optional<bool> sequence_parallel;  // fixed sp
    // Fixed uneven pipeline split (Layout.h); unset: the even split, or where pp does not divide
    // the layers the uneven one with the lighter ends (Search.cpp, pipelineSplit).
    std::optional<int> first_stage_layers, last_stage_layers;
    // A fixed explicit layer layout (Layout::pipeline_layout's id, PipelineLayerLayout.h): the shapes
    // whose pp divides its chunks, each with v = chunks / pp.
    PipelineLayoutRef pipeline_layout;
    // Fixed partial full recomputation (Layout.h), applied to the layouts with recompute=full;
    // unset: every layer recomputed (the search does not choose N itself).
    std::optional<RecomputeMethod> recompute_method;
    std::optional<int> recompute_layers;
    // Fixed recomputed modules (Layout.h RecomputeModule bits), applied to the layouts with
    // recompute=selective, and fixed activation offload (offload_activations=N), applied to the
    // layouts without recomputation (Megatron-LM runs it only so, and only at pp = 1: validate()
    // refuses the others). Unset: Megatron's default core_attn, no offload (the search does not
    // choose modules or N itself).
    std::optional<unsigned> recompute_modules;
    std::optional<int> offload_activations;
    // Megatron's overlap options (Layout.h), applied to every layout that can use them.
    bool tp_comm_overlap = false;
    bool overlap_param_gather = false;
    bool ep_comm_overlap = false;
    // How layouts with cp > 1 exchange the sequence (Layout.h CpComm); unset: p2p (the ring), except
    // for --framework deepspeed, whose context parallelism is Ulysses' all-to-all (a2a). A layout
    // whose heads a2a cannot split keeps p2p.
    std::optional<CpComm> cp_comm;
    // The MoE token dispatcher (Layout.h MoeDispatcher); unset: alltoall. Not searched: which one a run
    // has is the framework's and the cluster's (DeepEP and HybridEP are libraries of their own, Megatron
    // only), so it is fixed (--fix moe_dispatcher=deepep) and applied to every expert grid that can run
    // it; the others keep alltoall.
    std::optional<MoeDispatcher> moe_dispatcher;
    std::vector<PipelineSchedule> schedules{PipelineSchedule::OneFOneB, PipelineSchedule::GPipe,
                                            PipelineSchedule::Interleaved};
    std::vector<Recompute> recomputes{Recompute::None, Recompute::Selective, Recompute::Full};
    std::vector<Offload> offloads{Offload::None, Offload::Optimizer};
    // A layout is feasible only if its predicted memory per device is at most this
    // fraction of the device's HBM.
    double max_memory_fraction = 1.0;
    // Micro-batches per step and pipeline (global batch / (dp x mb)) at least this.
    int min_micro_batches = 1;

    bool allows(PipelineSchedule s) const;
    bool allows(Recompute r) const;
    bool allows(Offload o) const;
    bool operator==(const SearchSpace&) const = default;
};

// "tp=8,pp=2,sp=on,schedule=interleaved,recompute=selective": fixes each key named
// (the keys of parseLayout: dp, tp, pp, cp, sp, zero, zero_group, mb, schedule, v,
// recompute, offload, tp_comm_overlap, overlap_param_gather, first_stage_layers, last_stage_layers,
// recompute_method, recompute_layers, ep, etp, ep_comm_overlap, cp_comm, moe_dispatcher, recompute_modules,
// offload_activations). Errors name the key ("fix.tp: \"x\" is
// not an integer").
FieldErrors applyFixed(SearchSpace& space, const std::string& text, const std::string& path = "fix");
// "tp=16,pp=8": upper (or lower) bounds on the integer keys dp, tp, pp, cp, zero, mb, v, ep, etp.
FieldErrors applyBounds(SearchSpace& space, const std::string& text, bool upper, const std::string& path);
// "none,selective": the recomputation modes allowed.
FieldErrors applyRecomputeModes(SearchSpace& space, const std::string& text, const std::string& path = "recompute");

// The inverse of the three above, so a saved space can be shown and edited as it was typed:
// applyFixed(fixedText(s)), then applyBounds(boundsText(s, false)) and (true), then
// applyRecomputeModes(recomputeModesText(s)) on a default space give `s` back for every space
// those functions can make. Keys at their defaults are left out; fixedText also names a single
// allowed schedule or offload mode.
std::string fixedText(const SearchSpace& space);
std::string boundsText(const SearchSpace& space, bool upper);
std::string recomputeModesText(const SearchSpace& space);  // "none,selective,full"
// For people: "--fix tp=8,cp=1 --max pp=8 --max-mem 0.9 --min-micro-batches 4", or "none".
std::string constraintsText(const SearchSpace& space);

// Lower is better: -tokens/s, seconds, or dollars.
struct Prediction;
double objectiveValue(Objective objective, const Prediction& prediction);

const char* toString(Objective objective);               // "throughput", "time", "cost"
std::optional<Objective> objectiveFromString(const std::string& text);

} // namespace shardscope
