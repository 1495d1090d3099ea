// Layout: how one training step is spread over the cluster's devices.
// Device mesh order is tp innermost, then cp, then dp, then pp (Megatron's
// order), so tp groups sit on neighbouring devices of a node.
#pragma once

#include "CheckedMath.h"
#include "FieldError.h"
#include "PipelineLayerLayout.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

namespace shardscope {

struct ModelSpec;
struct ClusterSpec;
struct TrainingSpec;

enum class PipelineSchedule { GPipe, OneFOneB, Interleaved };
enum class Recompute { None, Selective, Full };
// Which layers full recomputation covers (Megatron-LM's --recompute-method with
// --recompute-num-layers N): uniform groups of N layers, each group's input kept and the group
// recomputed whole; or block, the first N layers of each stage's chunk recomputed and the rest
// keeping their activations.
enum class RecomputeMethod { Uniform, Block };
enum class Offload { None, Optimizer };
// How context parallelism exchanges the sequence (Megatron-LM's --cp-comm-type, run by Transformer
// Engine): p2p, a ring passing K/V blocks around the cp group under the attention
// (AttnFuncWithCPAndKVP2P); a2a, Ulysses-style all-to-alls that trade the sequence split for a
// head split around the attention (AttnFuncWithCPAndQKVOA2A), DeepSpeed-Ulysses' scheme.
enum class CpComm { P2P, A2A };
// How a MoE layer moves its tokens to their experts and back (Megatron-LM's
// --moe-token-dispatcher-type allgather|alltoall|flex, with --moe-flex-dispatcher-backend
// deepep|hybridep for flex: TransformerConfig.moe_token_dispatcher_type / moe_flex_dispatcher_backend,
// megatron/core/transformer/transformer_config.py @ d98e8a64; token_dispatcher.py):
//   alltoall  every top-k copy to its expert's ep rank (all-to-all over ep), then gathered over etp
//             (MoEAlltoAllTokenDispatcher)
//   allgather every token all-gathered over the etp x ep group, the expert outputs reduce-scattered
//             back (MoEAllGatherTokenDispatcher: "this allgather spans the communication domain of TP*EP")
//   deepep    flex over the etp x ep group with DeepEP's kernels: a token sent once to each GPU that
//             holds one of its experts, across nodes once per remote node over RDMA and forwarded
//             inside that node over NVLink (deepseek-ai/DeepEP; _DeepepManager)
//   hybridep  flex with NVIDIA's HybridEP kernels (DeepEP branch hybrid-ep): the same node-then-GPU
//             routing over NVLink domains (also multi-node NVLink ones), the routing map all-gathered
//             over the group first (_HybridEPManager)
// (Megatron's third flex backend, ncclep, is not modelled.)
enum class MoeDispatcher { AllToAll, AllGather, DeepEp, HybridEp };
// The modules selective recomputation recomputes (Megatron-LM's --recompute-granularity selective
// --recompute-modules ...: TransformerConfig.recompute_modules, megatron/core/transformer/
// transformer_config.py @ d98e8a64; default ["core_attn"]), one bit each:
//   core_attn       the attention core (checkpointed; the fused kernel recomputes its scores anyway)
//   moe_act         the routed experts' activation function (output discarded: the FC2 input;
//                   moe/experts.py, needs --moe-grouped-gemm)
//   layernorm       input_layernorm and pre_mlp_layernorm where they are modules of their own
//                   (output discarded; transformer_layer.py): in Megatron's Transformer Engine spec
//                   (models/gpt/gpt_layer_specs.py) an MLA layer's input norm and a MoE layer's pre-MLP
//                   norm; the other norms are fused into the next linear layer (IdentityOp)
//   mla_up_proj     MLA's up projections and RoPE (output discarded: Q, K, V;
//                   multi_latent_attention.py)
//   mlp             a dense layer's MLP, its fused pre-MLP norm included (checkpointed)
//   moe             a MoE layer whole: router, dispatch, experts, combine (checkpointed; moe_layer.py)
//   shared_experts  a MoE layer's shared experts (checkpointed; moe/shared_experts.py)
enum RecomputeModule : unsigned {
    kRecomputeCoreAttn = 1u << 0,
    kRecomputeMoeAct = 1u << 1,
    kRecomputeLayernorm = 1u << 2,
    kRecomputeMlaUpProj = 1u << 3,
    kRecomputeMlp = 1u << 4,
    kRecomputeMoe = 1u << 5,
    kRecomputeSharedExperts = 1u << 6,
};
inline constexpr int kRecomputeModuleCount = 7;
inline constexpr unsigned kRecomputeModuleMask = (1u << kRecomputeModuleCount) - 1;
// A module bit's position (kRecomputeCoreAttn: 0), for tables indexed by module.
inline constexpr int recomputeModuleIndex(unsigned bit) { return std::countr_zero(bit); }

// The largest device count (dp x tp x pp x cp) and model-chunk count (pp x v) a layout may
// have: the planner and the engine count both in int.
inline constexpr std::int64_t kMaxLayoutProduct = 2'147'483'647;

struct Layout {
    int dp = 1;                   // data-parallel replicas
    int tp = 1;                   // tensor-parallel degree
    int pp = 1;                   // pipeline stages
    int cp = 1;                   // context-parallel degree (sequence split for attention)
    bool sequence_parallel = false;  // Megatron SP: norm/dropout regions split over tp
    int zero_stage = 0;           // 0: none, 1: optimizer, 2: + gradients, 3: + parameters
    int zero_group = 0;           // shard-group size; 0 = the whole dp group (FSDP), < dp = HSDP/MiCS
    int micro_batch = 1;          // sequences per micro-batch per replica
    PipelineSchedule schedule = PipelineSchedule::OneFOneB;
    int virtual_stages = 1;       // v: model chunks per device (interleaved 1F1B)
    Recompute recompute = Recompute::None;
    Offload offload = Offload::None;
    // Communication overlap as Megatron-LM names it (megatron/training/arguments.py):
    // --tp-comm-overlap pipelines the SP all-gathers and reduce-scatters with the GEMMs they
    // feed (needs sp); --overlap-param-gather (with --overlap-grad-reduce) gathers the
    // distributed optimizer's parameters during the next step's first forward (needs zero >= 1).
    bool tp_comm_overlap = false;
    bool overlap_param_gather = false;
    // Uneven pipeline split (Megatron-LM's --decoder-first-pipeline-num-layers and
    // --decoder-last-pipeline-num-layers): the layers on the first and on the last stage, 0 for
    // the even share; the other stages split the rest evenly (Llama 3 405B: 126 layers over 16
    // stages as 7 + 14 x 8 + 7, the end stages lighter for the embedding and the loss).
    int first_stage_layers = 0;
    int last_stage_layers = 0;
    // Megatron-LM's --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split
    // (TransformerConfig.account_for_embedding_in_pipeline_split / _loss_, megatron/core/transformer/
    // transformer_config.py @ d98e8a64): the embedding counts as one layer of the first model chunk
    // of stage 0, the loss as one of the last chunk of the last stage, so that layers + 2 split
    // evenly over pp x v chunks and those two chunks build one transformer layer fewer
    // (transformer_block.py get_num_layers_to_build; Qwen3-235B-A22B: 94 layers over 8 x 4 chunks
    // of 3, the first and the last with 2). Not with first/last_stage_layers (validate()).
    bool account_for_embedding_in_pipeline_split = false;
    bool account_for_loss_in_pipeline_split = false;
    // An explicit layer layout (Megatron-LM's --pipeline-model-parallel-layout, PipelineLayerLayout.h):
    // its interned PipelineLayerLayout, null for none. It sets every chunk's layers (pp x v chunks:
    // v follows from it), not with first/last_stage_layers or account_for_* (validate()).
    PipelineLayoutRef pipeline_layout;
    // With recompute=full: N of Megatron-LM's --recompute-num-layers (0: uniform groups of one
    // layer, every layer recomputed on its own, Megatron's "uniform, 1").
    RecomputeMethod recompute_method = RecomputeMethod::Uniform;
    int recompute_layers = 0;
    // Expert parallelism with Megatron-LM's semantics (megatron/core/parallel_state.py @ d98e8a64,
    // initialize_model_parallel): the MoE layers see the devices of a pipeline stage, tp x cp x dp,
    // as their own grid etp x ep x edp (order tp-ep-dp: etp innermost, then ep), so the routed
    // experts are split over ep ranks carved out of dp x cp (x tp when etp < tp), each expert's
    // matrices over etp, and expert gradients are reduced over the edp group.
    int ep = 1;   // --expert-model-parallel-size
    int etp = 0;  // --expert-tensor-parallel-size; 0: the same as tp (Megatron's default)
    // --overlap-moe-expert-parallel-comm: the dispatch and combine of one micro-batch run under
    // another's compute (Megatron-LM's combined 1F1B; needs ep > 1, no full recomputation, an
    // interleaved schedule when pp > 1, 16-bit training).
    bool ep_comm_overlap = false;
    CpComm cp_comm = CpComm::P2P;  // with cp > 1
    MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;  // MoE models only
    // With recompute=selective: the modules recomputed (RecomputeModule bits); 0, Megatron's
    // default, the attention core alone.
    unsigned recompute_modules = 0;
    // Activations of the first N layers offloaded to the host (Megatron-LM's
    // --cpu-offloading-num-layers N, which sets cpu_offloading; Transformer Engine's
    // get_cpu_offload_context, transformer_engine/pytorch/cpu_offload.py @ d0067d0): each offloaded
    // layer's saved tensors copied to pinned host memory on a stream of their own while the next
    // layer computes, and brought back ahead of its backward. 0: none.
    int offload_activations = 0;

    // dp x tp x pp x cp, or INT64_MAX when the product overflows (validate() refuses a layout
    // whose product passes kMaxLayoutProduct, naming it).
    std::int64_t devices() const
    {
        const auto product = checkedMul(std::int64_t(dp) * tp, std::int64_t(pp) * cp);
        return product ? *product : INT64_MAX;
    }
    int zeroGroupSize() const { return zero_group > 0 ? zero_group : dp; }
    int expertTensorParallel() const { return etp > 0 ? etp : tp; }
    // edp = tp x cp x dp / (ep x etp): the replicas of each expert shard (validate() checks it divides).
    int expertDataParallel() const
    {
        const std::int64_t grid = std::int64_t(tp) * cp * dp, expert = std::int64_t(ep) * expertTensorParallel();
        return expert > 0 && grid % expert == 0 ? int(grid / expert) : 0;
    }
    bool expertParallel() const { return ep > 1 || etp > 0; }
    // The pipeline split counts the embedding and/or the loss as layers (Megatron's account_for_*).
    bool splitAccountsForEnds() const
    {
        return account_for_embedding_in_pipeline_split || account_for_loss_in_pipeline_split;
    }
    // Stages with layer counts of their own: first/last_stage_layers, or the end stages one layer
    // lighter under account_for_*.
    bool unevenPipeline() const
    {
        return first_stage_layers > 0 || last_stage_layers > 0 || splitAccountsForEnds() || pipeline_layout != nullptr;
    }
    // The explicit layer layout, or null.
    const PipelineLayerLayout* layerLayout() const
    {
        return pipeline_layout.get();
    }
    // Chunks of a stage may differ in their layer counts (account_for_*, an explicit layout).
    bool unevenChunks() const { return splitAccountsForEnds() || pipeline_layout != nullptr; }
    // The middle stage the cost model prices as the pipeline's typical one: p / 2, or under an
    // explicit layout the middle stage holding the most layers (the first such).
    int middleStage(int layers) const
    {
        if (pp <= 2)
            return 0;
        if (!pipeline_layout)
            return pp / 2;
        int best = 1;
        for (int s = 2; s < pp - 1; ++s)
            if (stageLayers(layers, s) > stageLayers(layers, best))
                best = s;
        return best;
    }
    // Calls f(first, count) for each run of consecutive layers of stage `stage`: one without
    // interleaving, else one per model chunk, which lie apart in the model: the layer ids walk
    // chunk 0 of every stage, then chunk 1, ... (Megatron-LM's get_transformer_layer_offset and
    // PipelineParallelLayerLayout.get_layer_offset @ d98e8a64; the engine's chunk order).
    template <class F>
    void forEachStageRun(int layers, int stage, F&& f) const
    {
        const int v = pipeline_layout ? pipeline_layout->chunkCount() / std::max(1, pp)
                      : schedule == PipelineSchedule::Interleaved ? std::max(1, virtual_stages)
                                                                  : 1;
        if (v <= 1) {
            f(stageFirstLayer(layers, stage), stageLayers(layers, stage));
            return;
        }
        int offset = 0;
        for (int c = 0; c < v; ++c)
            for (int s = 0; s < pp; ++s) {
                const int n = chunkLayers(layers, s, c);
                if (s == stage && n > 0)
                    f(offset, n);
                offset += n;
            }
    }
    // The modules selective recomputation recomputes (RecomputeModule bits; none without it).
    unsigned recomputedModules() const
    {
        if (recompute != Recompute::Selective)
            return 0;
        return recompute_modules != 0 ? recompute_modules : unsigned(kRecomputeCoreAttn);
    }
    bool recomputes(RecomputeModule module) const { return (recomputedModules() & module) != 0; }
    // Of the `chunkLayers` layers of a model chunk: how many full recomputation recomputes
    // (block: N of them; uniform: all), and how many checkpoints it keeps (block: one per
    // recomputed layer; uniform: one per group of N).
    int recomputedLayers(int chunkLayers) const
    {
        if (recompute != Recompute::Full)
            return 0;
        return recompute_method == RecomputeMethod::Block && recompute_layers > 0
                   ? std::min(recompute_layers, chunkLayers) : chunkLayers;
    }
    int recomputeCheckpoints(int chunkLayers) const
    {
        if (recompute != Recompute::Full)
            return 0;
        if (recompute_method == RecomputeMethod::Block || recompute_layers <= 1)
            return recomputedLayers(chunkLayers);
        return (chunkLayers + recompute_layers - 1) / recompute_layers;
    }
    // Layers a uniform group recomputes at once (1 for block and the default).
    int recomputeGroupLayers(int chunkLayers) const
    {
        return recompute == Recompute::Full && recompute_method == RecomputeMethod::Uniform && recompute_layers > 1
                   ? std::min(recompute_layers, chunkLayers) : 1;
    }
    // Layers on pipeline stage `stage` of a model of `layers` layers, and the first of them (a
    // stage's layers are taken as consecutive; the split must be valid: validate()).
    int stageLayers(int layers, int stage) const
    {
        if (pipeline_layout)
            return layerLayout()->stageLayers(pp, stage);
        if (splitAccountsForEnds()) {
            // transformer_block.py @ d98e8a64 get_num_layers_to_build: (layers + ends) / pp per
            // rank, less the embedding on stage 0 and the loss on the last stage.
            return (layers + endLayers()) / pp - (stage == 0 && account_for_embedding_in_pipeline_split ? 1 : 0) -
                   (stage == pp - 1 && account_for_loss_in_pipeline_split ? 1 : 0);
        }
        if (stage == 0 && first_stage_layers > 0)
            return first_stage_layers;
        if (stage == pp - 1 && last_stage_layers > 0)
            return last_stage_layers;
        const int middle = pp - (first_stage_layers > 0 ? 1 : 0) - (last_stage_layers > 0 ? 1 : 0);
        return middle > 0 ? (layers - first_stage_layers - last_stage_layers) / middle : 0;
    }
    int stageFirstLayer(int layers, int stage) const
    {
        if (stage == 0)
            return 0;
        if (pipeline_layout)  // its first chunk's (forEachStageRun gives every chunk's)
            return layerLayout()->chunkFirstLayer(pp, stage, 0);
        if (splitAccountsForEnds())  // transformer_layer.py @ d98e8a64 _get_layer_offset (v = 1)
            return stage * ((layers + endLayers()) / pp) - (account_for_embedding_in_pipeline_split ? 1 : 0);
        const int head = first_stage_layers > 0 ? first_stage_layers : stageLayers(layers, 0);
        return head + (stage - 1) * stageLayers(layers, pp > 2 ? 1 : pp - 1);
    }
    // Layers of model chunk `chunk` (0 .. v - 1) of stage `stage`: a stage's share over its v
    // chunks, less the embedding on stage 0's first chunk and the loss on the last stage's last
    // (get_num_layers_to_build).
    int chunkLayers(int layers, int stage, int chunk) const
    {
        const int v = std::max(1, virtual_stages);
        if (pipeline_layout)
            return layerLayout()->chunkLayers(pp, stage, chunk);
        if (!splitAccountsForEnds())
            return stageLayers(layers, stage) / v;
        return (layers + endLayers()) / pp / v -
               (stage == 0 && chunk == 0 && account_for_embedding_in_pipeline_split ? 1 : 0) -
               (stage == pp - 1 && chunk == v - 1 && account_for_loss_in_pipeline_split ? 1 : 0);
    }
    // The layers of a full model chunk of stage `stage` (its other chunks: at most one fewer).
    int fullChunkLayers(int layers, int stage) const
    {
        const int v = std::max(1, virtual_stages);
        if (pipeline_layout)
            return layerLayout()->largestChunkLayers(pp, stage);
        return splitAccountsForEnds() ? (layers + endLayers()) / pp / v : stageLayers(layers, stage) / v;
    }
    // Of stage `stage`'s layers: the share full recomputation recomputes and the share whose input
    // it keeps as a checkpoint, chunk by chunk (recomputedLayers / recomputeCheckpoints of each
    // model chunk; an even split's chunks are alike, at least one layer each).
    double recomputedShare(int layers, int stage) const { return chunkShare(layers, stage, false); }
    double checkpointShare(int layers, int stage) const { return chunkShare(layers, stage, true); }
    double chunkShare(int layers, int stage, bool checkpoints) const
    {
        // (The search asks this of every candidate's stages: the common answers without a division.)
        if (recompute != Recompute::Full)
            return 0.0;
        if ((recompute_layers <= 0 || (recompute_layers == 1 && recompute_method != RecomputeMethod::Block)) &&
            !unevenChunks())
            return 1.0;  // every layer of every chunk (at least one each), one checkpoint per layer
        if (!unevenChunks()) {
            const int chunk = std::max(1, stageLayers(layers, stage) / std::max(1, virtual_stages));
            return double(checkpoints ? recomputeCheckpoints(chunk) : recomputedLayers(chunk)) / chunk;
        }
        int counted = 0, held = 0;
        for (int c = 0; c < std::max(1, virtual_stages); ++c) {
            const int chunk = chunkLayers(layers, stage, c);
            counted += checkpoints ? recomputeCheckpoints(chunk) : recomputedLayers(chunk);
            held += chunk;
        }
        return held > 0 ? double(counted) / held : 0.0;
    }
    // The embedding and the loss where the split counts them as layers.
    int endLayers() const
    {
        return (account_for_embedding_in_pipeline_split ? 1 : 0) + (account_for_loss_in_pipeline_split ? 1 : 0);
    }
    bool operator==(const Layout&) const = default;
};

// Whether all-to-all context parallelism can split a device's heads over cp: Transformer Engine
// (context_parallel.py @ d0067d0, AttnFuncWithCPAndQKVOA2A) "requires num_heads % cp_size == 0 for
// Q, K, V" — the heads after tp, an MLA model's KV heads its heads, a KV head replicated over tp
// one per device. Sets the device's query and KV heads when given.
bool allToAllCpSplitsHeads(const ModelSpec& model, int tp, int cp, int* queryHeads = nullptr, int* kvHeads = nullptr);

// Micro-batches per step and pipeline: global batch / (dp x micro-batch).
int microBatchesPerStep(const Layout& layout, const TrainingSpec& training);

// "dp=8,tp=8,pp=4,cp=1,sp=on,zero=1,zero_group=0,mb=1,schedule=1f1b,v=1,recompute=selective,offload=none"
// (+ ",tp_comm_overlap=on,overlap_param_gather=on", ",first_stage_layers=N,last_stage_layers=N",
// ",account_for_embedding_in_pipeline_split=on,account_for_loss_in_pipeline_split=on" and
// ",recompute_method=uniform|block,recompute_layers=N", ",ep=N,etp=N", ",ep_comm_overlap=on", ",cp_comm=a2a",
// ",moe_dispatcher=deepep", ",recompute_modules=layernorm+moe_act" (Megatron's module names joined by '+') and
// ",offload_activations=N", ",pipeline_layout=Et*4|(t*4|)*14tmL" (no commas: they separate keys) when set: toString names them only then).
// Keys left out keep the defaults; dp left out is returned as 0, meaning "fill the
// devices" (resolveDataParallel). Unknown keys or values are errors naming the key.
Layout parseLayout(const std::string& text, FieldErrors& errors);
// Megatron-LM's layout strings may hold cosmetic commas ("E|(t|)*3,m|m||L", arguments.py's help),
// which in a layout text would split its keys: the items after pipeline_layout= that are no
// key=value belong to it, their commas dropped as Megatron drops them (parseLayout and the search's
// fixed keys read texts through it).
std::string joinPipelineLayoutCommas(const std::string& text);
std::string toString(const Layout& layout);

// dp = devices / (tp x pp x cp) when dp is 0.
void resolveDataParallel(Layout& layout, std::int64_t devices, FieldErrors& errors);

// The layout's own consistency (ranges, option combinations).
FieldErrors validate(const Layout& layout, const std::string& path = "layout");
// The layout's rules against a problem: device count, heads, layers, sequence, batch.
FieldErrors validate(const Layout& layout, const ModelSpec& model, const ClusterSpec& cluster,
                     const TrainingSpec& training, const std::string& path = "layout");

const char* toString(PipelineSchedule v);
const char* toString(Recompute v);
const char* toString(Offload v);
const char* toString(RecomputeMethod v);
const char* toString(CpComm v);
const char* toString(MoeDispatcher v);
// The flex dispatchers (DeepEP, HybridEP): a token crosses to a node once, then is forwarded inside it.
inline bool flexDispatcher(MoeDispatcher d) { return d == MoeDispatcher::DeepEp || d == MoeDispatcher::HybridEp; }
// "core_attn+layernorm" for RecomputeModule bits, in Megatron-LM's order; parsed back by
// parseRecomputeModules (an unknown or repeated name is an error naming it).
std::string recomputeModulesToString(unsigned modules);
unsigned parseRecomputeModules(const std::string& text, const std::string& path, FieldErrors& errors);
// Megatron-LM's name of one module bit ("core_attn"), and the bit of a name (0 when unknown).
const char* recomputeModuleName(unsigned module);
unsigned recomputeModuleBit(const std::string& name);

} // namespace shardscope
