// The cost model's arithmetic. Sources:
//  [M21] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
//        Using Megatron-LM", SC'21: FLOPs (eq. 3), bubble (Section 2.2), TP/PP volumes.
//  [K22] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
//        Models", 2022: activation memory (ActivationMemory.h), SP, selective recomputation,
//        in-flight micro-batches of 1F1B and the interleaved schedule.
//  [Z20] Rajbhandari et al., "ZeRO", SC'20: model-state memory and ZeRO communication volume.
//  formulas.md "Collectives": ring alpha-beta costs (Collectives.h).
#include "CostModel.h"

#include "ActivationMemory.h"
#include "Collectives.h"
#include "MlaCost.h"
#include "MoeDispatch.h"
#include "ModelStateMemory.h"
#include "OpConventions.h"
#include "PipelineSchedule.h"
#include "TrainingObjective.h"
#include "ZeroShardShare.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <initializer_list>
#include <limits>

namespace shardscope {

namespace {

bool gatedMlp(MlpKind k) { return k == MlpKind::SwiGlu || k == MlpKind::GeGlu; }

// The ledger's terms of selective recomputation by module (Layout.h RecomputeModule, by index).
struct ModuleTerms {
    const char* recompute;
    const char* time_formula;
    const char* freed;
    const char* bytes_formula;
};
constexpr std::array<ModuleTerms, kRecomputeModuleCount> kModuleTerms{{
    {"recomputed attention core (core_attn)", "", "", ""},  // (the attention core's own terms)
    {"recomputed experts' activation (recompute_modules: moe_act)",
     "m x MoE layers x (factor x (2 f/etp gated + f/etp) x R copies x bytes / HBM BW + launch)",
     "discarded: experts' activation outputs (recompute_modules: moe_act)",
     "- in-flight x MoE layers x f/etp x R copies x (bytes - a recipe's quantized saving)"},
    {"recomputed norms of their own (recompute_modules: layernorm)",
     "m x (MLA layers' input norm + MoE layers' pre-MLP norm) x (factor x b s/sp h bytes / HBM BW + launch)",
     "discarded: outputs of the norms of their own (recompute_modules: layernorm)",
     "- in-flight x (MLA layers + MoE layers) x (b s/sp h bytes + fp32 statistics); fused norms discard nothing"},
    {"recomputed MLA up projections and RoPE (recompute_modules: mla_up_proj)",
     "m x MLA layers x (GEMMs q_b/q and kv_b over b s/cp tokens + factor x rebuilt bytes / HBM BW + launch)",
     "discarded: MLA's Q, K (after RoPE) and V (recompute_modules: mla_up_proj)",
     "- in-flight x MLA layers x b s/cp x 2 (2 heads/t (qk_nope + qk_rope) + heads/t v_head_dim) bytes"},
    {"recomputed dense MLPs (recompute_modules: mlp)",
     "m x dense layers x (MLP GEMMs + factor x rebuilt bytes / HBM BW); its tp collective again",
     "discarded: dense MLPs' insides with their fused norm (recompute_modules: mlp)",
     "- in-flight x dense layers x (b s/sp h + (6 gated, 4) b s f/t) bytes + norm statistics"},
    {"recomputed MoE layers (recompute_modules: moe)",
     "m x MoE layers x (router, experts' and shared experts' GEMMs + permutations + factor x kept bytes / HBM "
     "BW); dispatch and combine again (ep_comm)",
     "discarded: everything the MoE layers keep (recompute_modules: moe)",
     "- in-flight x MoE layers x the layer's kept bytes (router, expert copies, pre-activations, shared experts)"},
    {"recomputed shared experts (recompute_modules: shared_experts)",
     "m x MoE layers x (shared experts' GEMMs + factor x rebuilt bytes / HBM BW)",
     "discarded: shared experts' pre-activation and activation (recompute_modules: shared_experts)",
     "- in-flight x MoE layers x 3 (gated) x S f_s x b s/(cp sp) bytes"},
}};

// Layout-dependent sizes per device, computed once per evaluate().
struct Dims {
    double t, p, c, d, v, b, m;
    double s, s_local, T;     // sequence, its cp shard, tokens per micro-batch per device
    double h, hd, q_local, kv_local, heads_local, f_local, V_local;
    double hv;                // value head size: hd, MLA's v_head_dim
    double experts_active, experts, matrices;
    double sp;                // divisor of the regions outside TP: t with SP, else 1
    double ep, etp;           // expert-parallel and expert-tensor-parallel degrees (MoE)
    double T_moe;             // tokens entering a MoE block on this device: its sequence shard (T / sp)
    int layers_per_stage;
};

} // namespace

struct CostModel::StageCost {
    int encoder_layers = 0;
    int decoder_layers = 0;
    double params = 0;            // parameters held by one device of the stage, before ZeRO sharding
    double expert_params = 0;     // ... of them the routed experts' (sharded over ep x etp, reduced over edp)
    double moe_layers = 0;        // the stage's layers with a MoE block
    bool last_layer_moe = false;  // the layer whose backward runs first (the last chunk's last) has one
    double units = 0;             // ZeRO/FSDP units: each layer, and a root unit on the end stages
    // Compute per micro-batch, part by part as the named terms of time_s.compute add it; fwd_s and
    // bwd_s are the sums of the parts (set where the parts are).
    double layer_matmul_fwd_s = 0;   // the layers' projections and MLPs (cross-attention's too), forward
    double attention_fwd_s = 0;      // the attention cores (a sliding layer's band), forward
    double elementwise_fwd_s = 0;    // element-wise ops, forward
    // ... of the element-wise time forward and backward, the MoE layers' routing: the copies'
    // permutations and the fixed per-layer overhead (moe.layer_overhead_s), a term of its own.
    double moe_routing_s = 0;
    double head_fwd_s = 0;           // logits and loss, forward (with the MTP modules' head passes)
    double mtp_head_fwd_s = 0;       // ... of it the MTP modules' head passes (ModelSpec.h MtpSpec)
    double mtp_fwd_s = 0;            // the MTP modules' eh_proj GEMMs and norms, forward
    double mtp_bwd_s = 0;            // 2x forward
    double layer_matmul_bwd_s = 0;   // dgrad + wgrad: 2x the forward's FLOPs [M21], their own rooflines
    double attention_bwd_s = 0;      // 2x forward, 2.5x fused (the scores recomputed)
    double elementwise_bwd_s = 0;    // 2x forward
    double head_bwd_s = 0;           // 2x forward
    double fwd_s = 0;
    double bwd_s = 0;
    // An FP8/FP4 recipe's quantization passes (QuantizationRecipe.h), in fwd_s and bwd_s: the linear
    // layers' inputs per forward, their output gradients per backward; the weights' casts per step
    // (cached) or per micro-batch (cast at every use); the linear layers' parameters on the device.
    double quantize_fwd_s = 0;
    double quantize_bwd_s = 0;
    double weight_cast_step_s = 0;
    double weight_cast_mb_s = 0;
    double linear_params = 0;
    double recompute_s = 0;
    double vector_flops_mb = 0;   // vector FLOPs per micro-batch: forward, backward and recomputation
    // The stage's tensor- and context-parallel collectives per micro-batch, one slot per kind (calls 0:
    // none), and the norms' gradients summed over tp once per step (bytes; latency only, no time).
    // (MoE: the expert-tensor-parallel all-gather and reduce-scatter of the routed tokens, and the
    // all-to-all dispatch and combine over ep.)
    // (The allgather dispatcher's gather and scatter over etp x ep, and the flex dispatchers' network
    // part beside their NVLink part in kEpAllToAll.)
    enum Slot { kTpAllReduce, kTpReduceScatter, kTpAllGather, kCpRing, kEtpAllGather, kEtpReduceScatter, kEpAllToAll,
                kEpCounts, kAuxCounts, kCpAllToAll, kEpGather, kEpScatter, kEpNetwork, kSlots };
    std::array<Collective, kSlots> comm{};
    double sp_norm_grad_bytes = 0;
    double cp_merge_s = 0;        // the CP ring steps' partial-result merges per micro-batch (not hidden)
    double tp_s = 0;              // exposed TP/SP collectives per micro-batch (the slots' sum)
    double cp_s = 0;              // exposed CP ring (or all-to-alls) per micro-batch, with the merges
    double ep_s = 0;              // exposed MoE all-to-all per micro-batch
    double moe_buffer_bytes = 0;  // a MoE layer's dispatch buffers (all-to-all send and receive, ETP gather)
    double stored_bytes_per_mb = 0;   // activations kept per in-flight micro-batch
    double head_stored_bytes_per_mb = 0;  // ... of them the head's (last stage), kept by its last chunk
    double embed_stored_bytes_per_mb = 0; // ... of them the embedding norm's (first stage), by its first chunk
    double working_bytes = 0;         // live only for one micro-batch at a time
    // Selective recomputation of named modules (RecomputeModule bits, by recomputeModuleIndex): the
    // stored bytes each discards per micro-batch (not in stored_bytes_per_mb), its recompute time (in
    // recompute_s), and the matmul FLOPs they repeat.
    std::array<double, kRecomputeModuleCount> module_freed_bytes{};
    std::array<double, kRecomputeModuleCount> module_recompute_s{};
    double module_recompute_flops_mb = 0;
    // Activation offload (offload_activations): the bytes moved to the host per micro-batch (not in
    // stored_bytes_per_mb) and the copies' exposed time per micro-batch (out and back).
    double offloaded_bytes_per_mb = 0;
    double offload_s = 0;
    double total() const { return fwd_s + bwd_s + recompute_s + tp_s + cp_s + ep_s + offload_s; }
};

CostModel::CostModel(const Problem& problem, const CostModelParams& params, std::optional<ExportFormat> framework)
    : problem_(problem), params_(params), framework_(framework),
      elementwise_(elementwiseProfile(framework, problem.training.precision))
{
    static std::atomic<std::uint64_t> models{0};
    id_ = ++models;
    const ChipSpec& chip = problem.cluster.node.chip;
    const NodeType& node = problem.cluster.node;
    const double devicesPerChip = chip.devices_per_chip;
    peak_flops_device_ = chip.peakFlops(computeType(problem.training.precision)) / devicesPerChip;
    matmul_efficiency_ = params.matmulEfficiency(chip, computeType(problem.training.precision));
    recipe_ = quantizationRecipe(problem.training.precision);
    bf16_peak_flops_device_ = recipe_.quantized ? chip.peakFlops(DataType::BF16) / devicesPerChip : peak_flops_device_;
    bf16_matmul_efficiency_ = recipe_.quantized ? params.matmulEfficiency(chip, DataType::BF16) : matmul_efficiency_;
    hbm_bytes_per_second_device_ = chip.hbm_bytes_per_second / devicesPerChip;
    hbm_capacity_device_ = chip.hbmBytesPerDevice();
    host_link_bytes_per_second_device_ = node.host_link_bytes_per_second / devicesPerChip;
    domain_devices_ = double(node.scaleUpChips()) * devicesPerChip;
    domain_chips_ = node.scaleUpChips();
    devices_per_chip_ = devicesPerChip;
    // The devices of a chip share its scale-up links; the devices of a node share its network.
    intra_bytes_per_second_device_ = node.intra_link_bytes_per_second * params.intra_link_efficiency / devicesPerChip;
    inter_bytes_per_second_device_ =
        node.inter_node_bytes_per_second * params.inter_node_efficiency / node.devicesPerNode();
    // With multi-token prediction, its modules' FLOPs as Megatron-LM counts them (ModelSpec.h).
    model_flops_per_token_ = double(forwardFlopsPerToken(problem.model, problem.training.seq_len)) +
                             double(mtpForwardFlopsPerToken(problem.model, problem.training.seq_len));
    {
        // The other MFU conventions (Prediction.h). Attention blocks: each layer's self-attention,
        // and a decoder layer's cross-attention of an encoder-decoder.
        const ModelSpec& m = problem.model;
        const double s = problem.training.seq_len, q = double(m.qDim());
        const bool encDec = m.family == ModelFamily::EncoderDecoder;
        const double attentionBlocks = m.layers + (encDec ? 2.0 * m.decoder_layers : 0.0);
        const ParameterBreakdown params = parameterBreakdown(m);
        // PaLM's 6N + 12 L H Q T is forward + backward; a third of it per forward (the convention
        // counts H x Q = the query width, and N without the embedding table).
        // (Multi-token prediction: its modules' parameters and attention blocks too.)
        const double mtpBlocks = m.mtp.enabled() ? m.mtp.layers : 0.0;
        palm_flops_per_token_ = (6.0 * double(params.active_per_token - params.embeddings + params.mtp_active) +
                                 12.0 * (attentionBlocks + mtpBlocks) * s * q) /
                                3;
        // A causal self-attention computes the scores below the diagonal: half of Q K^T and P V
        // (2 s (q + v) per layer and token forward, v the value width: q but with MLA). Encoders
        // and cross-attention see every key.
        const double causalLayers =
            m.family == ModelFamily::EncoderOnly ? 0.0 : encDec ? m.decoder_layers : m.layers + mtpBlocks;
        causal_flops_per_token_ = model_flops_per_token_ - 0.5 * 2.0 * s * (q + double(m.valueDim())) * causalLayers;
    }
    // Fused attention at its published rates, per cp block (a ring step runs on s/cp keys).
    if (problem.training.flash_attention) {
        const bool causal = problem.model.family != ModelFamily::EncoderOnly;
        attention_ = shardscope::attentionRates(chip, problem.model.head_dim, causal);
        if (attention_) {
            const int seq = problem.training.seq_len;
            for (int cp = 1; cp <= seq; ++cp)
                if (seq % cp == 0)
                    attention_by_cp_.push_back({cp, attention_->forward.at(double(seq) / cp) / devicesPerChip,
                                                attention_->backward.at(double(seq) / cp) / devicesPerChip});
        }
    }

    const StateBytesPerParameter state = stateBytesPerParameter(problem.training);
    weight_bytes_ = state.weights;
    grad_bytes_ = state.gradients;
    optimizer_bytes_ = state.optimizer;
    gather_bytes_ = state.gathered;
    activation_bytes_ = problem.training.precision == Precision::FP32 ? 4.0 : 2.0;
}

namespace {

// Fraction of a chip's scale-up bandwidth that ring collectives among `chips` chips of a
// `domainChips`-chip domain can use. A switch gives every chip its full bandwidth to any
// peer; a fully connected mesh only the links to the group's other members; a ring or a
// torus dimension used by a smaller group leaves the other links idle.
double topologyFraction(Topology topology, double chips, double domainChips)
{
    if (chips >= domainChips)
        return 1.0;
    switch (topology) {
    case Topology::Switch: return 1.0;
    case Topology::FullyConnected: return (chips - 1) / (domainChips - 1);
    case Topology::Ring: return 0.5;                                          // a segment: no wrap-around
    case Topology::Torus2D: return 0.5;                                       // 2 of 4 links
    case Topology::Torus3D: return chips * chips >= domainChips ? 2.0 / 3 : 1.0 / 3;  // a plane, or a line
    }
    return 1.0;
}

} // namespace

void CostModel::attentionRatesFor(int cp, double& forward, double& backward) const
{
    for (const BlockRates& r : attention_by_cp_)
        if (r.cp == cp) {
            forward = r.forward;
            backward = r.backward;
            return;
        }
    // (A cp that does not divide the sequence: validate() refuses it; priced at its block anyway.)
    const double block = double(problem_.training.seq_len) / cp;
    forward = attention_->forward.at(block) / devices_per_chip_;
    backward = attention_->backward.at(block) / devices_per_chip_;
}

LinkModel CostModel::linkFor(double size, double stride) const
{
    LinkModel link{intra_bytes_per_second_device_, inter_bytes_per_second_device_, params_.intra_latency_s,
                   params_.inter_latency_s, domain_devices_, params_.hierarchical_collectives,
                   params_.collective_launch_s, params_.multi_nic_rings};
    const GroupPlacement g = placeGroup(size, stride, domain_devices_);
    // Chips one domain's members occupy: members at a stride below the chip's device count share chips.
    const double chips = g.members_per_domain * std::min(stride, devices_per_chip_) / devices_per_chip_;
    if (chips <= 1) {
        // All members on one chip (Trainium NeuronCores): an on-chip copy through HBM.
        link.intra_bytes_per_second = hbm_bytes_per_second_device_;
    } else {
        link.intra_bytes_per_second *=
            topologyFraction(problem_.cluster.node.intra_topology, chips, domain_chips_);
    }
    return link;
}

Prediction CostModel::evaluate(const Problem& problem, const Layout& layout)
{
    return CostModel(problem).evaluate(layout);
}

namespace {

// Time of one GEMM (M x K) . (K x N), `batch` times, on one device: the slower of its
// compute at the shape's efficiency and its memory traffic, plus a launch overhead.
// (Operands in `input_bytes` each, a quantized GEMM's fp8/fp4 inputs; the output in `bytes_per_element`.)
// A GEMM's forward time and its backward's, the two GEMMs each at its own roofline (as cuBLAS
// and the engine's kernels run them, engine/Kernels.cpp matmulBackward): dgrad dX = dY W^T reads
// dY and W, writes dX; wgrad dW += X^T dY reads X and dY and reads and writes the gradient in its
// own type (Megatron-LM's fused wgrad accumulates into the fp32 main_grad), which makes small-token
// GEMMs (few tokens an expert, a sequence shard) memory-bound in the backward. Sums and multiples
// of them are the stage's (layerMatmuls), both passes at once.
struct GemmCost {
    double fwd = 0, bwd = 0;
    GemmCost operator+(const GemmCost& o) const { return {fwd + o.fwd, bwd + o.bwd}; }
    GemmCost operator-(const GemmCost& o) const { return {fwd - o.fwd, bwd - o.bwd}; }
    GemmCost& operator+=(const GemmCost& o) { return *this = *this + o; }
    friend GemmCost operator*(double k, const GemmCost& c) { return {k * c.fwd, k * c.bwd}; }
};

struct GemmPricer {
    double peak, efficiency, half_dim, hbm, overhead, bytes_per_element, input_bytes;

    double operator()(double M, double N, double K, double batch = 1) const { return both(M, N, K, 0, batch).fwd; }
    // `grad_bytes`: the weight gradient's bytes per element.
    GemmCost both(double M, double N, double K, double grad_bytes, double batch = 1) const
    {
        const double flops = 2 * M * N * K * batch;
        const double n = std::min({M, N, K});
        const double eff = efficiency * n / (n + half_dim);
        const double compute = flops / (peak * eff);
        const double memory = (input_bytes * (M * K + K * N) + bytes_per_element * M * N) * batch / hbm;
        const double dgrad = (input_bytes * (M * N + N * K) + bytes_per_element * M * K) * batch / hbm;
        const double wgrad = (input_bytes * (M * K + M * N) + 2 * grad_bytes * K * N) * batch / hbm;
        return {std::max(compute, memory) + overhead,
                std::max(compute, dgrad) + std::max(compute, wgrad) + 2 * overhead};
    }
};

} // namespace

// Cost of stage `stage`'s work for one micro-batch, and what it keeps in memory.
namespace {

// The busiest member's owned norm gradients under ZeRO-2/3 (stageCost) depend on the model and on
// tp, sp, the pipeline split, the stage and the shard group only, while the search evaluates
// thousands of layouts per such key (micro-batches, schedules, recomputation, the expert grid): a
// small table per thread keeps the last figures (laying the units out was an eighth of the
// DeepSeek-V3 search's cycles).
struct OwnedNormKey {
    std::uint64_t model = 0;
    int tp = 0, pp = 0, stage = 0, members = 0, first_stage_layers = 0, last_stage_layers = 0;
    const PipelineLayerLayout* pipeline_layout = nullptr;  // (the entry holds it: the address stays its)
    bool sp = false, embedding_in_split = false, loss_in_split = false;
    bool operator==(const OwnedNormKey&) const = default;
};

template <class Compute>
double ownedNormGradientsCached(std::uint64_t model, const Layout& l, int stage, const Compute& compute)
{
    const OwnedNormKey key{model,
                           l.tp,
                           l.pp,
                           stage,
                           l.zeroGroupSize() * l.cp,
                           l.first_stage_layers,
                           l.last_stage_layers,
                           l.pipeline_layout.get(),
                           l.sequence_parallel,
                           l.account_for_embedding_in_pipeline_split,
                           l.account_for_loss_in_pipeline_split};
    struct Entry {
        OwnedNormKey key;
        double value = 0;
        PipelineLayoutRef held;  // keeps the key's layout alive, so its address names no other
    };
    constexpr std::size_t kEntries = 64;
    thread_local std::array<Entry, kEntries> table{};
    std::uint64_t hash = model * 0x9E3779B97F4A7C15ull;
    for (const std::uint64_t field :
         {std::uint64_t(key.tp), std::uint64_t(key.pp), std::uint64_t(key.stage), std::uint64_t(key.members),
          std::uint64_t(key.first_stage_layers), std::uint64_t(key.last_stage_layers),
          std::uint64_t(reinterpret_cast<std::uintptr_t>(key.pipeline_layout)),
          std::uint64_t(key.sp) | std::uint64_t(key.embedding_in_split) << 1 | std::uint64_t(key.loss_in_split) << 2})
        hash = (hash ^ field) * 0x100000001B3ull;
    Entry& e = table[(hash >> 32) % kEntries];
    if (!(e.key == key)) {  // (model 0 is no model's: an empty entry never matches)
        e.key = key;
        e.held = l.pipeline_layout;
        e.value = compute();
    }
    return e.value;
}

} // namespace

CostModel::StageCost CostModel::stageCost(const Layout& l, int stage) const
{
    const ModelSpec& model = problem_.model;
    const TrainingSpec& tr = problem_.training;
    const CostModelParams& prm = params_;

    Dims D{};
    D.t = l.tp;
    D.p = l.pp;
    D.c = l.cp;
    D.d = l.dp;
    D.v = l.schedule == PipelineSchedule::Interleaved ? l.virtual_stages : 1;
    D.b = l.micro_batch;
    D.m = microBatchesPerStep(l, tr);
    D.s = tr.seq_len;
    D.s_local = D.s / D.c;
    D.T = D.b * D.s_local;
    D.h = model.hidden;
    D.hd = model.head_dim;
    D.hv = model.mla.enabled() ? model.mla.v_head_dim : model.head_dim;
    D.q_local = double(model.qDim()) / D.t;
    // KV heads split when tp divides them, else each device keeps a replica of one head (NxD, Megatron).
    const double kvHeadsLocal = model.kv_heads % l.tp == 0 ? double(model.kv_heads / l.tp) : 1.0;
    D.kv_local = kvHeadsLocal * D.hd;
    D.heads_local = double(model.heads) / D.t;
    D.f_local = double(model.ffn_hidden) / D.t;
    D.V_local = double(model.vocab) / D.t;
    D.experts = model.moe.enabled() ? model.moe.experts : 1;
    D.experts_active = model.moe.enabled() ? model.moe.top_k : 1;
    D.matrices = gatedMlp(model.mlp) ? 3 : 2;
    D.sp = l.sequence_parallel ? D.t : 1.0;
    D.ep = l.ep;
    D.etp = l.expertTensorParallel();
    D.T_moe = D.T / D.sp;
    // (Uneven splits: the first and last stage's own counts, the rest even; Layout.h.)
    D.layers_per_stage = l.stageLayers(model.totalLayers(), stage);

    StageCost sc;
    // Encoder layers come first in the pipeline; a stage's layers are consecutive.
    const int first = l.stageFirstLayer(model.totalLayers(), stage);
    sc.encoder_layers = std::clamp(model.layers - first, 0, D.layers_per_stage);
    if (model.family != ModelFamily::EncoderDecoder)
        sc.encoder_layers = D.layers_per_stage;
    sc.decoder_layers = D.layers_per_stage - sc.encoder_layers;
    // ---- multi-token prediction (ModelSpec.h MtpSpec) runs on the last stage, where Megatron-LM
    // puts it unless a pipeline layout places it elsewhere (megatron/core/transformer/
    // multi_token_prediction.py @ d98e8a64, mtp_on_this_rank: is_pipeline_last_stage). Each MTP
    // module's transformer layer, of the main stack's last layer's kind, is one more layer of the
    // stage: its projections, attention, MLP or MoE block, collectives, activations and states are
    // priced as the stage's other layers are. Its eh_proj, norms and extra head pass: mtp_* below.
    const int mtpLayers = model.mtp.enabled() && stage == l.pp - 1 ? model.mtp.layers : 0;
    const int mainEncoderLayers = sc.encoder_layers;
    const bool mtpMoe = mtpLayers > 0 && model.moeLayer(model.layers - 1);
    const bool mtpSliding = mtpLayers > 0 && model.slidingLayer(model.layers - 1);
    sc.encoder_layers += mtpLayers;
    D.layers_per_stage += mtpLayers;

    // ---- parameters held by one device of this stage ----
    const double h = D.h;
    const double bias = model.bias ? 1.0 : 0.0;
    const double norm = model.norm == NormKind::LayerNorm ? 2 * h : h;
    // Biases: every linear layer, or q, k and v only (Qwen2). QK-norm's two weight vectors over
    // head_dim are replicated on every tp rank (Qwen3's tp plan: replicated_with_grad_allreduce).
    const double qkvBias = !model.bias && model.qkv_bias ? 1.0 : 0.0;
    const double qkNorm = model.qk_norm ? 2 * (model.norm == NormKind::LayerNorm ? 2 * D.hd : D.hd) : 0.0;
    // (MLA: its own projections and latent norms, planner/MlaCost.h.)
    const MlaDeviceShapes mla = model.mla.enabled() ? mlaDeviceShapes(model, D.t) : MlaDeviceShapes{};
    const double attention = model.mla.enabled()
                                 ? mla.params
                                 : h * D.q_local + 2 * h * D.kv_local + D.q_local * h + bias * (D.q_local + 2 * D.kv_local + h) +
                                       qkvBias * (D.q_local + 2 * D.kv_local) + qkNorm +
                                       (model.attention_sinks ? D.heads_local : 0.0);  // one sink per head (GPT-OSS)
    // MLPs of inner size f per device: the dense one, and with MoE the routed experts of this ep
    // rank (E / ep of them, each split over etp: Megatron-LM's expert grid), the shared experts
    // (split over tp like a dense MLP: Megatron's SharedExpertMLP) and the router (h x E, + E with
    // biases, replicated). A stage's layers are MoE or dense by ModelSpec::moeLayer; every decoder
    // layer of an encoder-decoder is MoE with MoE.
    auto mlpOf = [&](double f) { return D.matrices * h * f + bias * ((D.matrices - 1) * f + h); };
    const MoeSpec& moe = model.moe;
    const double localExperts = moe.enabled() ? D.experts / D.ep : 0.0;
    const double expertLocal = double(model.expertFfn()) / D.etp, sharedLocal = double(moe.shared_ffn_hidden) / D.t;
    const double denseMlp = mlpOf(D.f_local);
    const double routedMlp = localExperts * mlpOf(expertLocal);
    const double mlp = moe.enabled() ? routedMlp + moe.shared_experts * mlpOf(sharedLocal) +
                                           (h + bias + (moe.score_correction_bias ? 1.0 : 0.0)) * D.experts
                                     : denseMlp;
    // (Of the stage's runs of consecutive layers: one, or under interleaving one per model chunk,
    // the chunks of a stage lying apart in the model; Layout::forEachStageRun.)
    auto onStage = [&](auto&& perRun, int oneRunCount) {
        if ((D.v <= 1 && !l.layerLayout()) || model.family == ModelFamily::EncoderDecoder)
            return perRun(first, oneRunCount);
        int n = 0;
        l.forEachStageRun(model.totalLayers(), stage,
                          [&](int runFirst, int runLayers) { n += perRun(runFirst, runLayers); });
        return n;
    };
    const int moeEncoderLayers =
        onStage([&](int f, int n) { return model.moeLayers(f, n); }, mainEncoderLayers) + (mtpMoe ? mtpLayers : 0);
    sc.moe_layers = moe.enabled() ? double(moeEncoderLayers + sc.decoder_layers) : 0.0;
    {
        int last = -1;
        onStage([&](int f, int n) { return n > 0 ? (last = f + n - 1, 0) : 0; }, mainEncoderLayers);
        sc.last_layer_moe = moe.enabled() && (mtpLayers > 0 ? mtpMoe : last >= 0 && model.moeLayer(last));
    }
    sc.expert_params = sc.moe_layers * routedMlp;
    const double denseEncoderLayers = sc.encoder_layers - moeEncoderLayers;
    const double encoderLayerParams = attention + mlp + 2 * norm;
    const double decoderLayerParams = encoderLayerParams + attention + norm;
    sc.params = sc.encoder_layers * encoderLayerParams + sc.decoder_layers * decoderLayerParams -
                denseEncoderLayers * (mlp - denseMlp);
    const bool firstStage = stage == 0, lastStage = stage == l.pp - 1;
    // Sharded states are gathered and reduced a unit at a time: each layer (FSDP's per-block
    // wrapping) and, on the stages that have them, the modules outside the layers as one root
    // unit (FSDP's root; a tied embedding and head must share a unit).
    sc.units = sc.encoder_layers + sc.decoder_layers + (firstStage || lastStage ? 1 : 0);
    // Encoder-decoder (T5): which of this stage's layers begin and end the two stacks (one stage
    // today: Layout.cpp refuses pp > 1, as Megatron-LM does). The relative bias tables (one per
    // stack, on the stage of its first layer) are split over tp by heads, as the engine holds them.
    const bool encDec = model.family == ModelFamily::EncoderDecoder;
    auto holdsLayer = [&](int layer) { return layer >= first && layer < first + D.layers_per_stage; };
    const bool encoderEnds = encDec && holdsLayer(model.layers - 1);     // the encoder's final norm, E
    const bool decoderBegins = encDec && holdsLayer(model.layers);       // the decoder's embedding
    if (model.positions == PositionKind::Relative)
        sc.params += double(model.relative_buckets) * D.heads_local * ((firstStage ? 1 : 0) + (decoderBegins ? 1 : 0));
    if (firstStage) {
        double embedding = D.V_local * h + double(model.token_types) * h + (model.embedding_norm ? norm : 0);
        if (model.positions == PositionKind::Learned)
            embedding += double(model.position_table > 0 ? model.position_table : model.max_seq) * h;
        sc.params += embedding;
    }
    if (lastStage) {
        const double stacks = model.family == ModelFamily::EncoderDecoder ? 2 : 1;
        // Untied heads have their own matrix; a tied head on another stage than the embedding keeps a copy.
        const bool headCopy = !model.tied_embeddings || l.pp > 1;
        // MTP embeds the rolled tokens on this stage: an untied model's last stage keeps a copy of the
        // word embedding too (Megatron-LM's GPTModel builds the embedding where mtp_process, its
        // gradient all-reduced with the first stage's: gpt_model.py, finalize_model_grads.py @ d98e8a64).
        const bool mtpEmbeddingCopy = model.mtp.enabled() && !model.tied_embeddings && l.pp > 1;
        sc.params += (model.final_norm ? stacks * norm : 0) + (headCopy ? D.V_local * h : 0) +
                     (mtpEmbeddingCopy ? D.V_local * h : 0) + (model.pooler ? h * h + h : 0);
        // An encoder's pretraining heads (TrainingObjective.h): the masked-LM transform and its norm
        // and the next-sentence head replicated, the output bias split over the vocabulary.
        const ObjectiveHeadParameters heads = objectiveHeadParameters(model);
        sc.params += double(heads.mlm_transform + heads.mlm_norm + heads.next_sentence) +
                     double(heads.mlm_output_bias) / D.t;
    }
    // MTP: per module enorm, hnorm and the final norm (replicated) and eh_proj, 2h -> h split over
    // tp by its output (Megatron-LM's MultiTokenPredictionLayer builds it column-parallel, no bias).
    sc.params += mtpLayers * (3 * norm + 2 * h * h / D.t);
    sc.units = std::max(1.0, sc.units);

    // ---- forward time of one micro-batch ----
    // `gemm` prices the products outside the linear layers (attention core, head, router): bf16 under
    // an FP8/FP4 recipe. `linear` the linear layers' (projections, MLPs, experts): at the recipe's
    // rate on its quantized inputs (QuantizationRecipe.h); the same as `gemm` without a recipe.
    const GemmPricer gemm{bf16_peak_flops_device_, bf16_matmul_efficiency_, prm.matmul_half_dim,
                          hbm_bytes_per_second_device_, prm.kernel_overhead_s, activation_bytes_, activation_bytes_};
    const GemmPricer linear{peak_flops_device_, matmul_efficiency_, prm.matmul_half_dim, hbm_bytes_per_second_device_,
                            prm.kernel_overhead_s, activation_bytes_,
                            recipe_.quantized ? recipe_.gemm_input_bytes : activation_bytes_};
    const double T = D.T;
    // MoE, as Megatron-LM's alltoall token dispatcher runs it (megatron/core/transformer/moe/
    // token_dispatcher.py @ d98e8a64, MoEAlltoAllTokenDispatcher): the router scores the device's
    // T_moe tokens (its sequence shard), their top-k copies go to their experts' ep ranks
    // (all-to-all), are gathered over etp, and each local expert runs on its share; the reverse
    // brings the outputs back. Balanced, a device computes R = T_moe k etp copies, R ep / E per
    // local expert; the busiest rank `imbalance` times that (TrainingSpec::moe_imbalance).
    const double imbalance = moe.enabled() ? tr.moe_imbalance : 1.0;
    const double routedCopies = D.T_moe * D.experts_active * D.etp;         // R
    const double perExpertTokens = localExperts > 0 ? routedCopies / localExperts : 0.0;
    // Fused (flash) attention on a causal decoder skips the blocks above the diagonal:
    // half the keys on average. Encoders and unfused kernels compute the full matrix.
    const bool causal = model.family != ModelFamily::EncoderOnly;
    // (Context parallelism runs on fused attention only in Transformer Engine, so the search offers
    // cp > 1 only to problems that train fused attention (Search.cpp); a layout given with cp > 1
    // and unfused attention is priced as asked, which is what the engine runs: its ring attention
    // keeps the probabilities like unfused attention does.)
    const bool flash = tr.flash_attention;
    const double keys = flash && causal ? 0.5 * D.s : D.s;
    // The attention core runs as one kernel call per micro-batch and layer, or under context
    // parallelism as one call per ring step (Transformer Engine's AttnFuncWithCPAndKVP2P: cp
    // steps, each over this rank's s/cp queries and one s/cp block of keys; causal load
    // balancing gives every rank the same share of the unmasked scores).
    // All-to-all CP (cp_comm=a2a, TE's AttnFuncWithCPAndQKVOA2A) hands each device heads / cp of
    // the heads over the whole sequence instead: one call at the full key length, the same FLOPs.
    const bool a2a = l.cp > 1 && l.cp_comm == CpComm::A2A;
    const double ringSteps = a2a ? 1.0 : D.c;
    // FlashAttention's backward recomputes the scores: 5 matmuls against the forward's 2 instead
    // of 4, i.e. 2.5x the forward's FLOPs rather than 2x (the FA benchmarks count it so too).
    const double backwardFactor = flash ? 2.5 : 2.0;
    double selfAttentionCore = 0, attentionBackward = 0;
    if (attention_ && flash) {
        // Fused attention at its published rate for the call's key length (seq/cp per ring step):
        // short blocks run far below the long-sequence rate (FA3 causal hd128: 292 TFLOP/s at
        // 512 against 616 at 16k; resources/planner/attention-kernels.json).
        double forwardRate = 0, backwardRate = 0;
        attentionRatesFor(a2a ? 1 : l.cp, forwardRate, backwardRate);
        const double flops = 2 * D.b * D.heads_local * D.s_local * keys * (D.hd + D.hv);  // Q K^T and P V
        selfAttentionCore = flops / forwardRate + ringSteps * prm.kernel_overhead_s;
        attentionBackward = backwardFactor * flops / backwardRate + ringSteps * prm.kernel_overhead_s;
    } else {
        // No published rate for this chip (or unfused attention): the products as GEMMs at the
        // chip's matmul efficiency and shape curve, one pair per ring step.
        const double stepKeys = keys / ringSteps;
        const double queries = a2a ? D.s : D.s_local, batch = a2a ? D.b * D.heads_local / D.c : D.b * D.heads_local;
        selfAttentionCore = ringSteps * (gemm(queries, stepKeys, D.hd, batch) +  // Q K^T
                                         gemm(queries, D.hv, stepKeys, batch));  // P V
        attentionBackward = backwardFactor * selfAttentionCore;
    }
    // A sliding layer's fused kernel computes only the band of W keys before each query: on
    // average W - W^2 / (2 s) keys per query when W < s (s/2 at W = s, as above), the forward's
    // share of the full core in proportion. Unfused attention computes the full matrix and masks
    // it: no saving. (Decoder-only; the CP ring is priced as for full attention.)
    const int slidingLayers =
        onStage([&](int f, int n) { return model.slidingLayers(f, n); }, mainEncoderLayers) + (mtpSliding ? mtpLayers : 0);
    double slidingSaving = 0;  // what the sliding layers of this stage save against full attention, forward
    if (slidingLayers > 0 && flash && model.sliding_window.size < D.s && keys > 0) {
        const double W = model.sliding_window.size;
        const double bandKeys = W - W * W / (2 * D.s);
        slidingSaving = slidingLayers * (1 - std::min(1.0, bandKeys / keys)) * selfAttentionCore;
    }
    const double sharedLocalAll = moe.shared_experts * sharedLocal;
    // The local experts as one grouped GEMM per matrix (--moe-grouped-gemm: one launch), each
    // expert's M its tokens: small per-expert batches run low on the shape curve, and every
    // expert's weights are read.
    const double busyTokens = imbalance * perExpertTokens;
    // The stage's linear-layer GEMMs of one forward with a pricer: projections and MLPs (a MoE
    // layer's experts, shared experts and router; an MoE stage's dense layers with the dense MLP),
    // a decoder layer's cross-attention projections.
    // (`blocks` gets one dense MLP's and one MoE block's forward, for the modules recomputation repeats.)
    // Forward and backward at once (GemmCost).
    const double gb = grad_bytes_;
    auto layerMatmuls = [&](const GemmPricer& lin, double* blocks) {
        GemmCost projections = lin.both(T, D.q_local + 2 * D.kv_local, h, gb) + lin.both(T, h, D.q_local, gb);
        if (model.mla.enabled()) {
            projections = {};
            for (int i = 0; i < mla.gemm_count; ++i)
                projections += lin.both(T, mla.gemms[size_t(i)].n, mla.gemms[size_t(i)].k, gb);
        }
        const GemmCost denseMlp = lin.both(T, (D.matrices - 1) * D.f_local, h, gb) + lin.both(T, h, D.f_local, gb);
        GemmPricer grouped = lin;
        grouped.efficiency *= prm.grouped_gemm_efficiency;
        const GemmCost mlp =
            moe.enabled() ? grouped.both(busyTokens, (D.matrices - 1) * expertLocal, h, gb, localExperts) +
                                grouped.both(busyTokens, h, expertLocal, gb, localExperts) +
                                (sharedLocalAll > 0 ? lin.both(T, (D.matrices - 1) * sharedLocalAll, h, gb) +
                                                          lin.both(T, h, sharedLocalAll, gb)
                                                    : GemmCost{}) +
                                gemm.both(D.T_moe, D.experts, h, gb)  // the router (bf16 under a recipe)
                          : denseMlp;
        const GemmCost crossProjections =
            lin.both(T, D.q_local, h, gb) + lin.both(T, 2 * D.kv_local, h, gb) + lin.both(T, h, D.q_local, gb);
        const double nLayers = sc.encoder_layers + sc.decoder_layers;
        blocks[0] = denseMlp.fwd;
        blocks[1] = moe.enabled() ? mlp.fwd : 0.0;
        return nLayers * (projections + mlp) + sc.decoder_layers * crossProjections -
               denseEncoderLayers * (mlp - denseMlp);
    };
    // An FP8/FP4 recipe that keeps the model's first and last layers in bf16 (QuantizationRecipe.h:
    // Megatron-Bridge's current-scaling recipe): this stage's share of quantized layers (the bf16
    // ones priced as an average layer of the stage).
    // (The stage's layers [first, first + n) against [0, start) and [total - end, total), in closed form.)
    const int totalLayers = model.totalLayers();
    auto bf16InRun = [&](int runFirst, int runLayers) {
        const int runEnd = runFirst + runLayers;
        return std::max(0, std::min(runEnd, recipe_.bf16_layers_at_start) - runFirst) +
               std::max(0, runEnd - std::max({runFirst, totalLayers - recipe_.bf16_layers_at_end,
                                              recipe_.bf16_layers_at_start}));
    };
    const int bf16Layers = recipe_.quantized ? std::min(D.layers_per_stage, onStage(bf16InRun, D.layers_per_stage)) : 0;
    const double quantizedShare = recipe_.quantized ? 1.0 - double(bf16Layers) / std::max(1, D.layers_per_stage) : 0.0;
    // The token copies moved in memory per MoE layer, forward (the backward moves their gradients
    // alike): permuted by expert before the all-to-all and restored after the combine (T_moe k
    // copies, read and written), and, with several local experts, sorted by expert after the
    // gather and back before the scatter (R copies).
    const double permutedCopies = 2 * D.T_moe * D.experts_active + (localExperts > 1 ? 2 * imbalance * routedCopies : 0.0);
    // (With the fixed per-layer overhead of the routing: CostModelParams::moe_layer_overhead_s.)
    const double moePermute =
        moe.enabled() ? 2 * permutedCopies * h * activation_bytes_ / hbm_bytes_per_second_device_ +
                            (localExperts > 1 ? 4 : 2) * prm.kernel_overhead_s + prm.moe_layer_overhead_s
                      : 0.0;
    // The MLP inner activations a layer of this stage keeps, on average over its layers: f for a
    // dense layer; a MoE layer keeps its own set instead (moeSaved below), none in the shape.
    const double innerLocal =
        sc.encoder_layers > 0 ? denseEncoderLayers * D.f_local / sc.encoder_layers : (moe.enabled() ? 0.0 : D.f_local);
    // What a MoE layer keeps per micro-batch for its backward, as Megatron-LM's experts and
    // unpermute keep it and the engine's MoeMlp (MoeSaved) does: the router's logits and top-k
    // weights (fp32, E + k per token); the experts' input copies (R: received and etp-gathered;
    // T_moe k on one rank) and their router weights (fp32), each one's pre-activation (2 f / etp
    // gated) and weighted activation (f / etp); the shared experts' pre-activation and activation
    // over the tokens (S f_s columns of T_moe tokens: Megatron's tp-split shared MLP over all T
    // tokens holds the same). The router weights are applied in the experts' activation
    // (Megatron-LM since 2659630721, "Memory efficient token permutation": moe/experts.py's
    // weighted activation, the unpermute without probs), so the outputs are not kept for the
    // weights' gradient. The copies before the dispatch and the outputs before and after the
    // combine are the collectives' buffers, not kept. On the busiest rank R is `imbalance` x the mean.
    const double copies = D.T_moe * D.experts_active;  // T_moe k
    const double busyCopies = imbalance * routedCopies;  // R on the busiest rank
    const bool exchanged = D.ep > 1 || D.etp > 1;
    const double expertF = double(model.expertFfn()) / D.etp, expertFin = (gatedMlp(model.mlp) ? 2 : 1) * expertF;
    const double sharedF = double(moe.shared_experts) * moe.shared_ffn_hidden, sharedFin = (gatedMlp(model.mlp) ? 2 : 1) * sharedF;
    const double moeSaved =
        moe.enabled() ? activation_bytes_ * (h * (exchanged ? busyCopies : copies) + (expertFin + expertF) * busyCopies +
                                             (sharedFin + sharedF) * D.T_moe) +
                            4.0 * ((D.experts + D.experts_active) * D.T_moe + (exchanged ? busyCopies : copies))
                      : 0.0;

    LayerActivationShape shape;
    shape.tokens = T;
    shape.keys = D.s;
    shape.hidden = h;
    shape.q_dim_local = D.q_local;
    shape.kv_dim_local = D.kv_local;
    shape.heads_local = D.heads_local;
    shape.ffn_local = innerLocal;
    shape.gated_mlp = gatedMlp(model.mlp);
    shape.tp = D.t;
    shape.sequence_parallel = l.sequence_parallel;
    shape.dropout = tr.dropout;
    shape.norm_statistics = model.norm == NormKind::LayerNorm ? 2 : 1;
    shape.qk_norm = model.qk_norm;
    shape.head_dim = D.hd;
    LayerActivationBytes encAct = layerActivationBytes(shape);
    shape.cross_attention = true;
    LayerActivationBytes decAct = layerActivationBytes(shape);
    if (model.mla.enabled()) {
        // MLA's latents (on the token shard under sp), Q, K, V and output in place of the MHA
        // count's, and its latent norms' statistics (MlaCost.h).
        const double sp = l.sequence_parallel ? D.t : 1.0;
        encAct.inside_tp += T * mla.kept_split_bytes_per_token - (4.0 * T * D.q_local + 4.0 * T * D.kv_local);
        encAct.outside_tp += T / sp * mla.kept_duplicated_bytes_per_token;
        encAct.statistics += mla.latent_norms * shape.norm_statistics * 4.0 * T / sp;
    }
    if (flash) {  // only the softmax statistics are kept (fp32 per head and token: negligible)
        encAct.scores = 4.0 * D.heads_local * T;
        decAct.scores = 2 * encAct.scores;
    }
    // Activation bytes above are for 16-bit tensors; fp32 training doubles the tensors (not the masks).
    const double actScale = activation_bytes_ / 2.0;

    // Element-wise work is memory-bound: its traffic scales with the bytes the layer stores.
    const double hbm = hbm_bytes_per_second_device_;
    const double encElementwise = prm.elementwise_traffic_factor * encAct.all() * actScale / hbm;
    const double decElementwise = prm.elementwise_traffic_factor * decAct.all() * actScale / hbm;
    const double nEnc = sc.encoder_layers, nDec = sc.decoder_layers;
    // Attention cores: one per encoder layer, two per decoder layer (self and cross).
    const double attentionBlocks = nEnc + 2 * nDec;
    // Full recomputation of some layers only (Megatron-LM's --recompute-method block with
    // --recompute-num-layers N: the first N of each chunk's layers; uniform: every layer, one
    // checkpoint per group of N): the fraction of the stage's layers recomputed, and of its layers
    // whose input is kept as a checkpoint.
    // (Chunk by chunk: under account_for_* the first or last chunk holds a layer fewer; Layout.h.)
    // (MTP: each depth's layer is recomputed whenever recomputation is full, whatever the method:
    // Megatron-LM's MultiTokenPredictionLayer checkpoints it under recompute_granularity full.)
    const double mainLayers = D.layers_per_stage - mtpLayers;
    auto withMtp = [&](double share) {
        return mtpLayers > 0 && l.recompute == Recompute::Full ? (share * mainLayers + mtpLayers) / D.layers_per_stage
                                                               : share;
    };
    const double recomputed = withMtp(l.recomputedShare(model.totalLayers(), stage));
    const double checkpoints = withMtp(l.checkpointShare(model.totalLayers(), stage));
    const double groupLayers = l.recomputeGroupLayers(std::max(1, l.fullChunkLayers(model.totalLayers(), stage)));
    // The forward's parts: the layers' GEMMs (an MoE stage's dense layers with the dense MLP), their
    // attention cores (a sliding layer's band: less the saving), their element-wise work.
    // (Without a recipe `linear` prices as `gemm`; a recipe's bf16 layers priced apart. One call
    // site, so that the compiler inlines the lambda on the hot path.)
    double matmuls[2] = {0, 0}, matmulsBackward[2] = {0, 0};
    double blocks[2][2] = {{0, 0}, {0, 0}};  // per pricing: a dense MLP's, a MoE block's forward
    const int pricings = recipe_.quantized && quantizedShare < 1 ? 2 : 1;
    for (int i = 0; i < pricings; ++i) {
        const GemmCost c = layerMatmuls(i == 0 ? linear : gemm, blocks[i]);
        matmuls[i] = c.fwd;
        matmulsBackward[i] = c.bwd;
    }
    auto mixed = [&](const double* priced) {
        return pricings == 2 ? quantizedShare * priced[0] + (1 - quantizedShare) * priced[1] : priced[0];
    };
    sc.layer_matmul_fwd_s = mixed(matmuls);
    const double pricedDense[2] = {blocks[0][0], blocks[1][0]}, pricedMoe[2] = {blocks[0][1], blocks[1][1]};
    const double denseMlpFwd = mixed(pricedDense), moeBlockFwd = mixed(pricedMoe);
    sc.attention_fwd_s = attentionBlocks * selfAttentionCore - slidingSaving;
    // (A MoE layer's element-wise work: its permutations, and the traffic of what it keeps, as a
    // dense layer's is of its activations.)
    const double moeElementwise = moePermute + prm.elementwise_traffic_factor * moeSaved / hbm;
    sc.elementwise_fwd_s = nEnc * encElementwise + nDec * decElementwise + sc.moe_layers * moeElementwise;
    // A framework's own kernels (ElementwisePasses.h): the layers' fused element-wise time (the scores'
    // aside) scaled by its passes over the fused ones, forward and backward apart; zero when unset.
    double frameworkFwd = 0, frameworkBwd = 0;
    if (elementwise_) {
        const LayerModelKinds kinds{model.norm == NormKind::RmsNorm, model.positions == PositionKind::Rotary};
        LayerActivationShape encShape = shape;
        encShape.cross_attention = false;
        const OpPasses enc = elementwiseRatios(*elementwise_, encShape, kinds);
        const OpPasses dec = elementwiseRatios(*elementwise_, shape, kinds);
        const double perByte = prm.elementwise_traffic_factor * actScale / hbm;
        const double encFused = nEnc * perByte * (encAct.all() - encAct.scores);
        const double decFused = nDec * perByte * (decAct.all() - decAct.scores);
        frameworkFwd = encFused * (enc.forward - 1) + decFused * (dec.forward - 1);
        frameworkBwd = 2 * (encFused * (enc.backward - 1) + decFused * (dec.backward - 1));
    }
    sc.elementwise_fwd_s += frameworkFwd;
    // ---- FP8/FP4 recipe (QuantizationRecipe.h): every linear layer's input quantized in the forward
    // and its output gradient in the backward, memory-bound passes over the GEMM's M x K and M x N
    // (under SP the norm outputs are quantized on their sequence shard, before the gather: TE's
    // linear.py casts the local input when it all-gathers); the weights once per step or per use. ----
    const double outProjIn = D.heads_local * D.hv;  // the attention output's width (MLA: v_head_dim)
    const double denseLayers = nEnc + nDec - sc.moe_layers;
    if (recipe_.quantized) {
        auto cast = [&](double elements, double bytesPerElement) {
            return elements * bytesPerElement / hbm + recipe_.casts_per_tensor * prm.kernel_overhead_s;
        };
        const double qa = recipe_.activation_cast_bytes, qg = recipe_.gradient_cast_bytes;
        double attnFwd = 0, attnBwd = 0, attnWeights = 0, attnMatrices = 0;
        if (model.mla.enabled()) {
            for (int i = 0; i < mla.gemm_count; ++i) {
                const double n = mla.gemms[size_t(i)].n, k = mla.gemms[size_t(i)].k;
                attnFwd += cast(T * k / (k == h ? D.sp : 1.0), qa);
                attnBwd += cast(T * n, qg);
                attnWeights += n * k;
                attnMatrices += 1;
            }
        } else {
            attnFwd = cast(T * h / D.sp, qa) + cast(T * D.q_local, qa);
            attnBwd = cast(T * (D.q_local + 2 * D.kv_local), qg) + cast(T * h, qg);
            attnWeights = h * (D.q_local + 2 * D.kv_local) + D.q_local * h;
            attnMatrices = 2;
        }
        const double denseFwd = cast(T * h / D.sp, qa) + cast(T * D.f_local, qa);
        const double denseBwd = cast(T * (D.matrices - 1) * D.f_local, qg) + cast(T * h, qg);
        double moeFwd = 0, moeBwd = 0, moeWeights = 0, moeMatrices = 0;
        if (moe.enabled()) {
            // The local experts' grouped GEMMs on the busiest rank's copies (one cast per grouped tensor).
            const double R = imbalance * routedCopies;
            moeFwd = cast(R * h, qa) + cast(R * expertLocal, qa);
            moeBwd = cast(R * (D.matrices - 1) * expertLocal, qg) + cast(R * h, qg);
            moeWeights = localExperts * D.matrices * h * expertLocal;
            moeMatrices = 2;
            if (sharedLocalAll > 0) {
                moeFwd += cast(T * h / D.sp, qa) + cast(T * sharedLocalAll, qa);
                moeBwd += cast(T * (D.matrices - 1) * sharedLocalAll, qg) + cast(T * h, qg);
                moeWeights += D.matrices * h * sharedLocalAll;
                moeMatrices += 2;
            }
        }
        // (A decoder layer's cross-attention projections quantize like its self-attention's.)
        const double attentionLayers = nEnc + 2 * nDec;
        const double share = quantizedShare;  // (layers kept in bf16: no casts, no quantized copies)
        sc.quantize_fwd_s = share * (attentionLayers * attnFwd + denseLayers * denseFwd + sc.moe_layers * moeFwd);
        sc.quantize_bwd_s = share * (attentionLayers * attnBwd + denseLayers * denseBwd + sc.moe_layers * moeBwd);
        sc.linear_params =
            share * (attentionLayers * attnWeights + denseLayers * D.matrices * h * D.f_local + sc.moe_layers * moeWeights);
        const double weightCasts = share * (attentionLayers * attnMatrices + denseLayers * 2 + sc.moe_layers * moeMatrices);
        const double oneCast = sc.linear_params * recipe_.weight_cast_bytes / hbm +
                               weightCasts * recipe_.casts_per_tensor * prm.kernel_overhead_s;
        if (recipe_.weights_cached)
            sc.weight_cast_step_s = oneCast;
        else
            sc.weight_cast_mb_s = recipe_.weight_casts_per_micro_batch * oneCast;
    }
    const double fwdLayers = sc.layer_matmul_fwd_s + sc.attention_fwd_s + sc.elementwise_fwd_s + sc.quantize_fwd_s;
    double head = 0;
    const bool mlm = maskedLanguageModel(model), post = postNorm(model);
    if (lastStage) {
        // Logits and the fp32 cross-entropy over the vocabulary shard.
        head = gemm(T, D.V_local, h) + prm.elementwise_traffic_factor * 6 * T * D.V_local / hbm;
        // The masked-LM transform on the token shard, the pooler and next-sentence head per sequence.
        if (mlm)
            head += gemm(T / D.sp, h, h);
        if (mlm && model.pooler)
            head += gemm(D.b, h, h) + gemm(D.b, 2, h);
    }
    // MTP: each module runs the head (the shared output layer) and its loss once more, and before
    // its layer the eh_proj GEMM over [enorm(embedding); hnorm(hidden)] and, after it, the final
    // norm: three norms of h, priced as the element-wise traffic of a read and a write each.
    sc.mtp_head_fwd_s = mtpLayers * head;
    const double mtpNorms = prm.elementwise_traffic_factor * 3 * 2 * T * h * activation_bytes_ / hbm;
    sc.mtp_fwd_s = mtpLayers > 0 ? mtpLayers * (linear(T, h / D.t, 2 * h) + mtpNorms) : 0.0;
    head += sc.mtp_head_fwd_s;
    sc.head_fwd_s = head;
    // Activation and weight gradients: twice the forward's FLOPs [M21], each GEMM at its own
    // roofline (GemmPricer::both); flash attention recomputes its scores. The head and the MTP
    // modules keep 2 x forward: the vocabulary GEMM is compute-bound at every shape a plan has.
    // (A sliding layer's recomputed scores are its band: half its own core, hence 0.5 x the saving.)
    sc.layer_matmul_bwd_s = mixed(matmulsBackward);
    sc.attention_bwd_s = attentionBlocks * attentionBackward - 2 * slidingSaving - (flash ? 0.5 * slidingSaving : 0.0);
    sc.elementwise_bwd_s = 2 * (sc.elementwise_fwd_s - frameworkFwd) - sc.moe_layers * moePermute +  // (a permutation's
                           frameworkBwd;                                                              // backward: one)
    sc.moe_routing_s = 2 * sc.moe_layers * moePermute;
    sc.head_bwd_s = 2 * head;
    sc.mtp_bwd_s = 2 * sc.mtp_fwd_s;
    sc.fwd_s = fwdLayers + sc.head_fwd_s + sc.mtp_fwd_s;
    sc.bwd_s = sc.layer_matmul_bwd_s + sc.attention_bwd_s + sc.elementwise_bwd_s + sc.quantize_bwd_s + sc.head_bwd_s +
               sc.mtp_bwd_s;

    // Recomputation time (its FLOPs for HFU are counted globally in evaluate()).
    if (l.recompute == Recompute::Full) {
        sc.recompute_s = recomputed * fwdLayers;
    } else if (l.recomputes(kRecomputeCoreAttn) && !flash) {
        // Recompute the attention core only [K22 Section 5]; fused attention already does.
        const double scoresElementwise = prm.elementwise_traffic_factor * encAct.scores * actScale / hbm;
        sc.recompute_s = nEnc * (selfAttentionCore + scoresElementwise) + nDec * 2 * (selfAttentionCore + scoresElementwise);
    }

    // ---- tensor-parallel collectives: 2 all-reduces (3 with cross attention) forward and
    // backward per layer [M21]; SP turns each into RS + AG of the same cost [K22]. Full
    // recomputation repeats the forward ones. The vocab-parallel embedding adds one in the
    // forward (first stage), the tied head one in the backward (last stage). ----
    sc.comm[StageCost::kTpAllReduce] = {CommDimension::Tp, CommKind::AllReduce, CommPlacement::IntraDomain,
                                        "layer activations (and their gradients)", 0, 0, 0, 0};
    sc.comm[StageCost::kTpReduceScatter] = {CommDimension::Tp, CommKind::ReduceScatter, CommPlacement::IntraDomain,
                                            "layer outputs to their sequence shards (SP)", 0, 0, 0, 0};
    sc.comm[StageCost::kTpAllGather] = {CommDimension::Tp, CommKind::AllGather, CommPlacement::IntraDomain,
                                        "sequence shards into the layers' inputs (SP)", 0, 0, 0, 0};
    sc.comm[StageCost::kCpRing] = {CommDimension::Cp, CommKind::SendRecv, CommPlacement::IntraDomain,
                                   "K/V blocks around the ring (backward: with the dK/dV partials)", 0, 0, 0, 0};
    sc.comm[StageCost::kCpAllToAll] = {CommDimension::Cp, CommKind::AllToAll, CommPlacement::IntraDomain,
                                       "q, k, v and the output between sequence and head splits (cp_comm=a2a; "
                                       "backward: their gradients)", 0, 0, 0, 0};
    if (l.tp > 1) {
        const GroupPlacement tpGroup = placeGroup(D.t, 1, domain_devices_);
        const LinkModel tpLink = linkFor(D.t, 1);
        const CommPlacement tpWhere = tpGroup.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
        Collective& allReduce = sc.comm[StageCost::kTpAllReduce];
        Collective& reduceScatter = sc.comm[StageCost::kTpReduceScatter];
        Collective& allGather = sc.comm[StageCost::kTpAllGather];
        allReduce.placement = reduceScatter.placement = allGather.placement = tpWhere;
        const double message = T * h * activation_bytes_;
        // A MoE layer's routed experts take their tokens by all-to-all and the etp gather (below),
        // not by the MLP's gather and scatter over tp; its shared experts (a tp-split MLP) keep them.
        const double moeWithoutTpMlp = moe.enabled() && moe.shared_experts == 0 ? sc.moe_layers : 0.0;
        const double layerCollectives = 2 * nEnc + 3 * nDec - moeWithoutTpMlp;
        // T5 adds two per micro-batch: the decoder's vocab-parallel embedding, and the encoder
        // output's: gathered once under SP; its gradient, a partial sum over tp from each decoder
        // layer's column-parallel [k v] product, summed over the layers (as Megatron-LM accumulates
        // the encoder_hidden_state gradient across the decoder's skip connections, examples/t5/
        // pretrain_t5.py @ d98e8a6) and reduced over tp once, the engine's order; Megatron-LM's
        // column-parallel linear reduces it per layer: the same sum for more bytes.
        const double ends = (firstStage ? 1 : 0) + (lastStage ? 1 : 0) + (decoderBegins ? 1 : 0) + (encoderEnds ? 1 : 0);
        const double passes = 2.0 + recomputed;  // a recomputed layer's forward collectives again
        // (recompute_modules=mlp: a dense layer's MLP forward, its gather and scatter with it, runs again.)
        const double layerCalls = passes * layerCollectives + (l.recomputes(kRecomputeMlp) ? denseLayers : 0.0);
        const double calls = layerCalls + ends;
        // Sequence parallelism runs each all-reduce as a reduce-scatter and an all-gather: the
        // same steps, two calls.
        double scatterShare = 0;  // of one layer collective's time, its reduce-scatter's (SP)
        double perCall = 0;       // one layer collective's time (SP: its reduce-scatter and all-gather)
        if (l.sequence_parallel) {
            const double scatter = reduceScatterTime(tpGroup, message, tpLink), gather = allGatherTime(tpGroup, message, tpLink);
            perCall = scatter + gather;
            scatterShare = perCall > 0 ? scatter / perCall : 0.0;
            reduceScatter.calls = calls;
            reduceScatter.exposed_s = calls * scatter;
            reduceScatter.bytes = calls * ringHalfBytes(D.t, message);
            // A column-parallel linear keeps only its sequence shard of the input and
            // all-gathers it again in backward for its weight gradient (Megatron-LM does; the
            // gather overlaps the input-gradient GEMM there, so it adds bytes, not time).
            // (T5: and the encoder output for the decoder's [k v] products, once per backward.)
            const double regathers = layerCollectives + (lastStage ? 1 : 0) + (encoderEnds ? 1 : 0);
            allGather.calls = calls + regathers;
            allGather.exposed_s = calls * gather;
            allGather.bytes = (calls + regathers) * ringHalfBytes(D.t, message);
        } else {
            perCall = allReduceTime(tpGroup, message, tpLink);
            allReduce.calls = calls;
            allReduce.exposed_s = calls * perCall;
            allReduce.bytes = calls * allReduceBytes(D.t, message);
        }
        // MLA (MlaCost.h): the attention's input side moves its latents' rows, not the hidden size's
        // (backward once; a recomputed forward gathers them again under sp), and under sp re-gathers
        // the up projections' inputs for their weight gradients.
        const double mlaLayers = model.mla.enabled() ? nEnc : 0.0;
        if (mlaLayers > 0) {
            const double in = T * mla.tp_input_rows * activation_bytes_;
            const double regather = T * mla.tp_regather_rows * activation_bytes_;
            if (l.sequence_parallel) {
                const double moved = ringHalfBytes(D.t, in) - ringHalfBytes(D.t, message);
                reduceScatter.bytes += mlaLayers * moved;
                reduceScatter.exposed_s +=
                    mlaLayers * (reduceScatterTime(tpGroup, in, tpLink) - reduceScatterTime(tpGroup, message, tpLink));
                allGather.bytes +=
                    mlaLayers * ((1 + recomputed) * moved + ringHalfBytes(D.t, regather) - ringHalfBytes(D.t, message));
                allGather.exposed_s += mlaLayers * (1 + recomputed) *
                                       (allGatherTime(tpGroup, in, tpLink) - allGatherTime(tpGroup, message, tpLink));
            } else {
                allReduce.bytes += mlaLayers * (allReduceBytes(D.t, in) - allReduceBytes(D.t, message));
                allReduce.exposed_s +=
                    mlaLayers * (allReduceTime(tpGroup, in, tpLink) - allReduceTime(tpGroup, message, tpLink));
            }
        }
        if (l.tp_comm_overlap) {
            // Megatron's --tp-comm-overlap (Transformer Engine userbuffers) splits each layer's
            // SP all-gather and reduce-scatter into tp chunks pipelined with the GEMM they feed
            // or drain: one chunk of each stays exposed, and whatever the layer's GEMMs (forward,
            // backward and a full recomputation's forward) cannot cover. Embedding and head
            // collectives are not overlapped.
            const double layerComm = layerCalls * perCall;
            const double gemms = (sc.layer_matmul_fwd_s + sc.attention_fwd_s) * (1.0 + recomputed) +
                                 sc.layer_matmul_bwd_s + sc.attention_bwd_s;
            const double exposed = std::max(layerComm / D.t, layerComm - gemms);
            const double hidden = layerComm - exposed;
            // (SP: shared between the reduce-scatters and all-gathers by their time.)
            Collective& first = l.sequence_parallel ? reduceScatter : allReduce;
            first.hidden_s = l.sequence_parallel ? hidden * scatterShare : hidden;
            allGather.hidden_s = l.sequence_parallel ? hidden - first.hidden_s : 0.0;
            for (Collective* c : {&reduceScatter, &allGather, &allReduce})
                c->exposed_s -= c->hidden_s;
        }
        if (lastStage) {
            // Vocab-parallel cross-entropy [M21]: the max, the sum of exponentials and the
            // target's logit of every token, fp32, all-reduced over tp.
            const double stats = 3 * T * 4.0;
            allReduce.calls += 1;
            allReduce.exposed_s += allReduceTime(tpGroup, stats, tpLink);
            allReduce.bytes += allReduceBytes(D.t, stats);
        }
        if (mtpLayers > 0) {
            // MTP, per depth (ModelExecutor's mtpForward/mtpBackward, after Megatron-LM's
            // MultiTokenPredictionLayer @ d98e8a64): the rolled tokens' vocab-parallel embedding (a
            // reduce-scatter under SP, else an all-reduce); eh_proj, column-parallel over [enorm | hnorm]
            // (2h): under SP its input all-gathered (again in backward for the weight gradient) and its
            // input gradient reduce-scattered, without SP the input gradient all-reduced
            // (copy_to_tensor_model_parallel_region); its h/tp output rows all-gathered along the hidden
            // size (gather_from_tensor_model_parallel_region; under SP then scattered to the token shard,
            // whose backward all-gathers the gradient); the head once more (SP: its input gathered, again
            // in backward, its input gradient reduce-scattered; else that gradient all-reduced), the
            // enorm's gradient gathered back to the embedding (SP) and the cross-entropy's statistics.
            const double depths = mtpLayers, wide = 2 * message, stats = 3 * T * 4.0;
            if (l.sequence_parallel) {
                reduceScatter.calls += depths * 3;
                reduceScatter.bytes += depths * (2 * ringHalfBytes(D.t, message) + ringHalfBytes(D.t, wide));
                reduceScatter.exposed_s +=
                    depths * (2 * reduceScatterTime(tpGroup, message, tpLink) + reduceScatterTime(tpGroup, wide, tpLink));
                allGather.calls += depths * 7;
                allGather.bytes += depths * (5 * ringHalfBytes(D.t, message) + 2 * ringHalfBytes(D.t, wide));
                allGather.exposed_s +=
                    depths * (4 * allGatherTime(tpGroup, message, tpLink) + allGatherTime(tpGroup, wide, tpLink));
            } else {
                allReduce.calls += depths * 3;
                allReduce.bytes += depths * (2 * allReduceBytes(D.t, message) + allReduceBytes(D.t, wide));
                allReduce.exposed_s +=
                    depths * (2 * allReduceTime(tpGroup, message, tpLink) + allReduceTime(tpGroup, wide, tpLink));
                allGather.calls += depths;
                allGather.bytes += depths * ringHalfBytes(D.t, message);
                allGather.exposed_s += depths * allGatherTime(tpGroup, message, tpLink);
            }
            allReduce.calls += depths;
            allReduce.bytes += depths * allReduceBytes(D.t, stats);
            allReduce.exposed_s += depths * allReduceTime(tpGroup, stats, tpLink);
        }
        if (lastStage && mlm && model.pooler && l.sequence_parallel) {
            // The pooler's first tokens, each on one tp rank's token shard: a (h, b) block summed
            // over tp so every rank runs the replicated pooler (ModelExecutor::poolerForward).
            const double block = D.b * h * activation_bytes_;
            allReduce.calls += 1;
            allReduce.exposed_s += allReduceTime(tpGroup, block, tpLink);
            allReduce.bytes += allReduceBytes(D.t, block);
        }
        if (l.sequence_parallel || model.qk_norm) {
            // Each tp rank's norms saw only its sequence shard: their gradients are summed over
            // tp once per step (Megatron-LM's sequence-parallel gradient all-reduce).
            // (BERT: the embedding norm on the first stage; the masked-LM transform, dense and norm,
            // replicated and run on the token shard, on the last.) QK-norm's weights saw only the
            // rank's heads under any tp: summed in the same all-reduce (q_layernorm / k_layernorm,
            // Megatron-LM megatron/core/distributed/finalize_model_grads.py @ d98e8a6).
            // (MTP: each depth's enorm, hnorm and final norm on the token shard too.)
            const double spNorms = nEnc * 2 * norm + nDec * 3 * norm + mtpLayers * 3 * norm +
                                   (lastStage && model.final_norm ? (nDec > 0 ? 2 : 1) * norm : 0) +
                                   (firstStage && model.embedding_norm ? norm : 0) +
                                   (lastStage && mlm ? h * h + h + norm : 0);
            // (MoE: the router saw only the rank's token shard too; Megatron marks its weight
            // sequence_parallel, router.py @ d98e8a64.)
            const double router = moe.enabled() ? sc.moe_layers * (h + bias) * D.experts : 0.0;
            // (MLA: its down projection and latent norms, duplicated over tp and run on the token shard.)
            const double duplicated = model.mla.enabled() ? nEnc * mla.duplicated_params : 0.0;
            const double norms = (l.sequence_parallel ? spNorms + router + duplicated : 0.0) + (nEnc + 2 * nDec) * qkNorm;
            // Under ZeRO-2/3 only the owned slices of the gradients exist by then: a device sums its
            // own slice of each of them, one call (ZeroShardShare.h); the busiest member's is priced.
            // Its units as the engine lays them out (engine/ModelConfig.cpp parameterTable, in module
            // order; ModelExecutor's units: each layer without its routed experts, the root, a tied
            // embedding of its own across stages): marked are the gradients summed over tp.
            auto ownedNormGradients = [&] {
                const bool sp = l.sequence_parallel, qk = D.t > 1;
                auto layer = [&](bool moeLayer, bool decoderLayer) {
                    UnitLayout u;
                    u.add(norm, sp);  // the input norm
                    if (model.mla.enabled()) {
                        u.add(mla.duplicated_params, sp);  // the down products and latent norms, then the rest
                        u.add(mla.params - mla.duplicated_params, false);
                    } else {
                        u.add((h + bias + qkvBias) * (D.q_local + 2 * D.kv_local), false);  // qkv and its bias
                        u.add(qkNorm, qk);
                        u.add(D.q_local * h + bias * h + (model.attention_sinks ? D.heads_local : 0.0), false);
                    }
                    if (decoderLayer) {  // T5: the cross-attention's norm and products
                        u.add(norm, sp);
                        u.add(attention, false);
                    }
                    u.add(norm, sp);  // the MLP's norm
                    if (moeLayer) {   // the router, its correction bias and the shared experts (the routed: their unit)
                        u.add(h * D.experts, sp);
                        u.add(mlp - routedMlp - h * D.experts, false);
                    } else {
                        u.add(denseMlp, false);
                    }
                    return u;
                };
                // (ZeRO-2/3: a unit of its own; with MTP the last stage's copy of it, tied or not.)
                const bool ownEmbedding = (model.tied_embeddings || model.mtp.enabled()) && l.pp > 1;
                UnitLayout root, embedding;
                if (firstStage) {
                    (ownEmbedding ? embedding : root).add(D.V_local * h, false);
                    if (model.positions == PositionKind::Learned)
                        root.add(double(model.position_table > 0 ? model.position_table : model.max_seq) * h, false);
                    if (model.positions == PositionKind::Relative)
                        root.add(double(model.relative_buckets) * D.heads_local * (decoderBegins ? 2 : 1), false);
                    if (encDec)
                        root.add(norm, sp);  // the encoder's final norm
                    root.add(double(model.token_types) * h, false);
                    root.add(model.embedding_norm ? norm : 0.0, sp);
                }
                if (lastStage) {
                    const ObjectiveHeadParameters heads = objectiveHeadParameters(model);
                    root.add(model.final_norm ? norm : 0.0, sp);
                    root.add(model.pooler ? h * h + h : 0.0, false);
                    root.add(double(heads.mlm_transform + heads.mlm_norm), sp);
                    root.add(double(heads.mlm_output_bias) / D.t, false);
                    root.add(double(heads.next_sentence), false);
                    if (!model.tied_embeddings || l.pp > 1)
                        (ownEmbedding && model.tied_embeddings ? embedding : root).add(D.V_local * h, false);
                    if (model.mtp.enabled() && !model.tied_embeddings && l.pp > 1)
                        embedding.add(D.V_local * h, false);  // MTP's copy of the word embedding
                }
                MarkedShares shares(l.zeroGroupSize() * l.cp);
                shares.addUnit(root, 1);
                shares.addUnit(embedding, 1);
                // An MTP depth's unit: its layer, then enorm, hnorm, eh_proj (column-split) and its final norm.
                UnitLayout mtpUnit = layer(mtpMoe, false);
                mtpUnit.add(norm, sp);
                mtpUnit.add(norm, sp);
                mtpUnit.add(2 * h * h / D.t, false);
                mtpUnit.add(norm, sp);
                shares.addUnit(layer(false, false), denseEncoderLayers - (mtpMoe ? 0 : mtpLayers));
                shares.addUnit(layer(moe.enabled(), false),
                               sc.encoder_layers - denseEncoderLayers - (mtpMoe ? mtpLayers : 0));
                shares.addUnit(mtpUnit, mtpLayers);
                shares.addUnit(layer(moe.enabled(), true), sc.decoder_layers);
                return shares.overflowed() ? shares.mean() : shares.most();
            };
            const double owned = l.zero_stage >= 2 ? ownedNormGradientsCached(id_, l, stage, ownedNormGradients) : norms;
            sc.sp_norm_grad_bytes = allReduceBytes(D.t, owned * grad_bytes_);
        }
    }

    // ---- MoE token traffic per micro-batch, by dispatcher (Layout.h MoeDispatcher). alltoall
    // (Megatron-LM's MoEAlltoAllTokenDispatcher, above): each pass (forward, backward, a recomputed
    // forward) dispatches and combines every MoE layer's token copies over ep (2 all-to-alls of T_moe
    // k h bytes; the ep group: ep members at stride etp), and gathers them over etp after the
    // dispatch and reduce-scatters them before the combine (the R copies' buffer; the etp group: etp
    // neighbours). The copies' router weights (fp32, 4 bytes a copy) go with them, in an
    // all-to-all and an etp gather of their own in each forward (token_dispatcher.py @ d98e8a64:
    // token_dispatch's probs all-to-all, dispatch_postprocess's gather), and their gradients come
    // back once in the backward (an etp reduce-scatter, then an all-to-all); the combine moves
    // the weighted outputs alone. The busiest rank moves `imbalance` times the mean: its time, not the bytes (a
    // dropless count that does not depend on the routing). --overlap-moe-expert-parallel-comm runs
    // one micro-batch's all-to-all under another's compute: all but the first forward's and the last
    // backward's. ----
    const MoeDispatcher dispatcher = l.moe_dispatcher;
    const bool flexDispatch = flexDispatcher(dispatcher);
    sc.comm[StageCost::kEtpAllGather] = {CommDimension::Tp, CommKind::AllGather, CommPlacement::IntraDomain,
                                         "MoE: routed tokens gathered over etp after the dispatch", 0, 0, 0, 0};
    sc.comm[StageCost::kEtpReduceScatter] = {CommDimension::Tp, CommKind::ReduceScatter, CommPlacement::IntraDomain,
                                             "MoE: expert outputs scattered over etp before the combine", 0, 0, 0, 0};
    sc.comm[StageCost::kEpAllToAll] = {
        CommDimension::Ep, CommKind::AllToAll, CommPlacement::IntraDomain,
        flexDispatch ? "MoE (flex): tokens to their experts' GPUs of the node and forwarded to them from the network, "
                       "over NVLink, and back (at the same time as the network part)"
                     : "MoE: token copies dispatched to their experts and combined back",
        0, 0, 0, 0};
    sc.comm[StageCost::kEpNetwork] = {CommDimension::Ep, CommKind::AllToAll, CommPlacement::InterDomain,
                                      "MoE (flex): tokens once to each other node holding one of their experts, "
                                      "over the GPU's NIC, and back",
                                      0, 0, 0, 0};
    sc.comm[StageCost::kEpGather] = {CommDimension::Ep, CommKind::AllGather, CommPlacement::IntraDomain,
                                     "MoE (allgather): every token, its routing map and probabilities gathered over "
                                     "etp x ep",
                                     0, 0, 0, 0};
    sc.comm[StageCost::kEpScatter] = {CommDimension::Ep, CommKind::ReduceScatter, CommPlacement::IntraDomain,
                                      "MoE (allgather): the gathered tokens' expert outputs reduce-scattered back over "
                                      "etp x ep",
                                      0, 0, 0, 0};
    sc.comm[StageCost::kEpCounts] = {CommDimension::Ep, CommKind::AllGather, CommPlacement::IntraDomain,
                                     dispatcher == MoeDispatcher::HybridEp
                                         ? "MoE (hybridep): routing map (a byte per token and expert GPU) gathered over "
                                           "etp x ep before the dispatch"
                                         : "MoE: copies per expert (int64) gathered over etp x ep before the dispatch",
                                     0, 0, 0, 0};
    sc.comm[StageCost::kAuxCounts] = {CommDimension::Tp, CommKind::AllReduce, CommPlacement::IntraDomain,
                                      "MoE: copies per expert summed over tp x cp for the load-balancing loss", 0, 0, 0,
                                      0};
    // (recompute_modules=moe: the layer's forward, its dispatch and combine with it, runs again.)
    const double moeRecomputed = l.recomputes(kRecomputeMoe) ? 1.0 : 0.0;
    if (moe.enabled() && sc.moe_layers > 0) {
        const double passes = 2.0 + recomputed + moeRecomputed;
        const double forwards = 1.0 + recomputed + moeRecomputed;
        const double tokenBytes = h * activation_bytes_;
        // The group of the allgather and flex dispatchers: Megatron's tp_ep group, etp x ep
        // neighbours (ranks in tp-ep-dp order; token_dispatcher.py: pg_collection.tp_ep).
        const double group = D.ep * D.etp;
        const GroupPlacement tpEp = placeGroup(group, 1, domain_devices_);
        const LinkModel tpEpLink = linkFor(group, 1);
        const CommPlacement tpEpPlacement =
            tpEp.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
        // What another micro-batch computes meanwhile: Megatron-LM's combined 1F1B runs the
        // dispatch and combine on a communication stream beside the other micro-batch's layer
        // ("EP A2A in forward step is hidden by the attention/mlp computation in the backward step,
        // and vice versa": megatron/core/pipeline_parallel/combined_1f1b.py @ d98e8a64), every kernel
        // of its attention and MLP blocks: GEMMs, attention core, element-wise and quantization passes.
        const double window = (sc.layer_matmul_fwd_s + sc.attention_fwd_s) + sc.layer_matmul_bwd_s + sc.attention_bwd_s +
                              sc.elementwise_fwd_s + sc.elementwise_bwd_s + sc.quantize_fwd_s + sc.quantize_bwd_s;
        auto overlap = [&](Collective& c) {  // --overlap-moe-expert-parallel-comm (alltoall and flex)
            if (l.ep_comm_overlap && D.m > 1) {
                c.hidden_s = std::min(c.exposed_s, params_.ep_overlap * window) * (D.m - 1) / D.m;
                c.exposed_s -= c.hidden_s;
            }
        };
        if (dispatcher == MoeDispatcher::AllToAll && D.etp > 1) {
            const GroupPlacement etpGroup = placeGroup(D.etp, 1, domain_devices_);
            const LinkModel etpLink = linkFor(D.etp, 1);
            const double gathered = routedCopies * h * activation_bytes_, weights = routedCopies * 4.0;
            const double calls = passes * sc.moe_layers;
            for (int slot : {StageCost::kEtpAllGather, StageCost::kEtpReduceScatter}) {
                Collective& c = sc.comm[size_t(slot)];
                // (The weights: gathered in each forward, their gradients reduce-scattered once.)
                const double weightCalls = (slot == StageCost::kEtpAllGather ? forwards : 1.0) * sc.moe_layers;
                c.placement = etpGroup.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
                c.calls = calls + weightCalls;
                c.bytes = calls * ringHalfBytes(D.etp, gathered) + weightCalls * ringHalfBytes(D.etp, weights);
                c.exposed_s = calls * allGatherTime(etpGroup, imbalance * gathered, etpLink) +
                              weightCalls * allGatherTime(etpGroup, imbalance * weights, etpLink);
            }
        }
        if (dispatcher == MoeDispatcher::AllToAll && D.ep > 1) {
            const GroupPlacement epGroup = placeGroup(D.ep, D.etp, domain_devices_);
            const LinkModel epLink = linkFor(D.ep, D.etp);
            const double payload = D.T_moe * D.experts_active * h * activation_bytes_;
            const double weights = D.T_moe * D.experts_active * 4.0;  // (one call each pass)
            const double calls = 2 * passes * sc.moe_layers, weightCalls = passes * sc.moe_layers;
            Collective& a2a = sc.comm[StageCost::kEpAllToAll];
            a2a.placement = epGroup.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
            a2a.calls = calls + weightCalls;
            a2a.bytes = calls * payload + weightCalls * weights;
            a2a.exposed_s = calls * allToAllTime(epGroup, imbalance * payload, epLink) +
                            weightCalls * allToAllTime(epGroup, imbalance * weights, epLink);
            overlap(a2a);
        }
        if (dispatcher == MoeDispatcher::AllGather && group > 1) {
            // ---- allgather (MoEAllGatherTokenDispatcher, token_dispatcher.py @ d98e8a64): the etp x
            // ep group all-gathers every member's T_moe tokens ("[(S/TP)*B, H] -> [S*B*EP, H]"), and in
            // the forward their routing map (a bool per expert) and probabilities (E values, the
            // model's dtype without moe_router_dtype); each member's experts take their copies from
            // the gathered tokens, and the combine reduce-scatters the outputs of every gathered
            // token back to its owner. The backward is the mirror: the gathers' gradients
            // reduce-scattered, the scatter's gathered. One ring collective of the group each way.
            // Every member moves every token whatever the routing: no imbalance in the bytes or time.
            const double tokensGathered = group * D.T_moe * tokenBytes;
            const double mapBytes = group * D.T_moe * D.experts, probBytes = mapBytes * activation_bytes_;
            Collective& gather = sc.comm[StageCost::kEpGather];
            Collective& scatter = sc.comm[StageCost::kEpScatter];
            gather.placement = scatter.placement = tpEpPlacement;
            gather.calls = sc.moe_layers * (passes + 2 * forwards);
            gather.bytes = sc.moe_layers * (passes * ringHalfBytes(group, tokensGathered) +
                                            forwards * ringHalfBytes(group, mapBytes + probBytes));
            gather.exposed_s = sc.moe_layers * (passes * allGatherTime(tpEp, tokensGathered, tpEpLink) +
                                                forwards * (allGatherTime(tpEp, mapBytes, tpEpLink) +
                                                            allGatherTime(tpEp, probBytes, tpEpLink)));
            scatter.calls = sc.moe_layers * passes;
            scatter.bytes = scatter.calls * ringHalfBytes(group, tokensGathered);
            scatter.exposed_s = scatter.calls * reduceScatterTime(tpEp, tokensGathered, tpEpLink);
        }
        if (flexDispatch && group > 1) {
            // ---- flex (MoEFlexTokenDispatcher over the tp_ep group, token_dispatcher.py @ d98e8a64:
            // the routing map expanded to every etp GPU of a chosen expert, router_topk = etp x k):
            // DeepEP's or HybridEP's kernels send a token once per GPU that holds one of its
            // experts, across nodes once per remote node over RDMA and forwarded there over NVLink
            // (MoeDispatch.h: the sends per token on each link). The two links run at once: a call
            // lasts as long as the busier one, plus its latency. The combine moves the same bytes
            // back. Each dispatch of a forward carries the routing metadata with the tokens: DeepEP
            // a top-k index (int64) and weight (fp32) per flex top-k (_DeepepManager: fused_dispatch
            // of token_indices and token_probs), HybridEP an fp32 probability per expert of the
            // receiving node (rdma_prob_buffer / prob_buffer: experts per rank x ranks per node,
            // docs/Hybrid-EP_Implementation.md @ 94a9f8f6). Dropless: the bytes are the mean; the
            // busiest rank's time `imbalance` times it.
            const FlexSends sends =
                flexSends(D.experts, D.experts_active, D.ep, tpEp.domains, tpEp.members_per_domain,
                          moe.expert_groups, moe.group_top_k);
            const double metadata = dispatcher == MoeDispatcher::DeepEp
                                        ? D.etp * D.experts_active * (8.0 + 4.0)
                                        : D.experts / D.ep * tpEp.members_per_domain * 4.0;
            auto callTime = [&](double bytesPerToken, double& networkPart, double& nvlinkPart) {
                const double net = imbalance * sends.network * D.T_moe * bytesPerToken;
                const double nvl = imbalance * sends.nvlink * D.T_moe * bytesPerToken;
                networkPart = net > 0 ? tpEpLink.inter_latency_s + net / tpEpLink.inter_bytes_per_second : 0.0;
                nvlinkPart = nvl > 0 ? tpEpLink.intra_latency_s + nvl / tpEpLink.intra_bytes_per_second : 0.0;
                return tpEpLink.launch_s + std::max(networkPart, nvlinkPart);
            };
            double netPlain = 0, nvlPlain = 0, netMeta = 0, nvlMeta = 0;
            const double plain = callTime(tokenBytes, netPlain, nvlPlain);
            const double withMetadata = callTime(tokenBytes + metadata, netMeta, nvlMeta);
            const double calls = 2 * passes * sc.moe_layers;
            const double time = sc.moe_layers * (forwards * withMetadata + (2 * passes - forwards) * plain);
            const double tokenSends = sc.moe_layers * D.T_moe * (2 * passes * tokenBytes + forwards * metadata);
            Collective& nvlink = sc.comm[StageCost::kEpAllToAll];
            Collective& network = sc.comm[StageCost::kEpNetwork];
            nvlink.calls = calls;
            nvlink.bytes = sends.nvlink * tokenSends;
            network.calls = sends.network > 0 ? calls : 0.0;
            network.bytes = sends.network * tokenSends;
            // (The call's time on the link that bounds it.)
            Collective& bound = netPlain > nvlPlain ? network : nvlink;
            bound.exposed_s = time;
            overlap(bound);
        }
        // The dispatcher's preprocess (token_dispatcher.py, MoEAlltoAllTokenDispatcher.preprocess)
        // gathers every rank's copies per expert over the etp x ep group (E int64 each), once per
        // forward; DeepEP's notify step exchanges the same counts before its dispatch (per rank
        // and per expert); HybridEP gathers the routing map itself, a byte per token and expert
        // GPU of the group (hybrid_ep.cu @ 94a9f8f6: allgather_routing_map; Megatron's flex map has
        // etp x E columns). The load-balancing loss sums the copies per expert over the ranks that
        // split the micro-batch's tokens (tp under sp, and cp: Megatron's tp_cp group) likewise.
        if (group > 1 && dispatcher != MoeDispatcher::AllGather) {
            const double counts = dispatcher == MoeDispatcher::HybridEp ? group * D.T_moe * D.etp * D.experts
                                                                         : group * D.experts * 8.0;
            Collective& c = sc.comm[StageCost::kEpCounts];
            c.placement = tpEpPlacement;
            c.calls = forwards * sc.moe_layers;
            c.bytes = c.calls * ringHalfBytes(group, counts);
            c.exposed_s = c.calls * allGatherTime(tpEp, counts, tpEpLink);
        }
        const double tokenSplit = D.sp * D.c;
        if (moe.aux_loss_coeff > 0 && tokenSplit > 1) {
            const double counts = D.experts * 8.0;
            const GroupPlacement g = placeGroup(tokenSplit, 1, domain_devices_);
            Collective& c = sc.comm[StageCost::kAuxCounts];
            c.placement = g.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
            c.calls = forwards * sc.moe_layers;
            c.bytes = c.calls * allReduceBytes(tokenSplit, counts);
            c.exposed_s = c.calls * allReduceTime(g, counts, linkFor(tokenSplit, 1));
        }
        // A MoE layer's transient buffers, live one layer at a time; the largest are its backward's
        // (the engine's MoeMlp::backward, as Megatron's autograd materialises them): the gradients
        // of the combine's input and weights, of the received outputs and copies when they move,
        // of each copy's activation and pre-activation, of the dispatched copies, the logits, the
        // input scratch and the shared experts' two; the computed copies' router-weight gradients
        // and, when the copies move, the dispatched ones' (fp32).
        const double moving = D.ep > 1 || D.etp > 1 ? 2 * h * imbalance * routedCopies : 0.0;
        const double expertF = double(model.expertFfn()) / D.etp, expertFin = (gatedMlp(model.mlp) ? 2 : 1) * expertF;
        const double sharedF = double(moe.shared_experts) * moe.shared_ffn_hidden;
        sc.moe_buffer_bytes = activation_bytes_ * (2 * h * D.T_moe * D.experts_active + D.experts_active * D.T_moe + moving +
                                                   (expertF + expertFin) * imbalance * routedCopies +
                                                   (D.experts + h) * D.T_moe +
                                                   (gatedMlp(model.mlp) ? 3 : 2) * sharedF * D.T_moe) +
                              4.0 * (imbalance * routedCopies + (D.ep > 1 || D.etp > 1 ? D.T_moe * D.experts_active : 0.0));
        // (The allgather dispatcher's gathered tokens: the group's whole micro-batch, in Megatron's
        // global memory buffer, use_global_buffer=True.)
        if (dispatcher == MoeDispatcher::AllGather && D.ep * D.etp > 1)
            sc.moe_buffer_bytes += activation_bytes_ * D.ep * D.etp * D.T_moe * h;
    }

    // ---- context parallelism: Transformer Engine's ring (AttnFuncWithCPAndKVP2P,
    // transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py @ d0067d0,
    // Megatron-LM's cp): send/recv of this device's K and V block (b s/cp x 2 kv dims) to the
    // next cp rank. Forward: cp steps, cp - 1 of them sending one block. Backward: cp steps, the
    // first sending K/V, the middle ones K/V and the dK/dV partial, the last the partial alone:
    // 2 (cp - 1) blocks. Each step's transfer hides behind the step's attention compute (one
    // cp-th of the core). A recomputed forward (full, or selective without fused attention)
    // runs the ring again. ----
    if (a2a) {
        // ---- all-to-all CP (TE's AttnFuncWithCPAndQKVOA2A, context_parallel.py @ d0067d0):
        // forward, q, k and v all-to-all'd from the sequence split to the head split before the
        // attention and its output back after it; backward, the output's gradient before and dq,
        // dk, dv after. Each moves (cp - 1)/cp of the device's tensor to its peers; the attention
        // waits for them (TE overlaps the all-to-alls only with each other's reordering): exposed.
        // A recomputed forward runs its two again. No partial results to merge.
        const GroupPlacement cpGroup = placeGroup(D.c, D.t, domain_devices_);
        const LinkModel cpLink = linkFor(D.c, D.t);
        const double qkvBytes = D.b * D.s_local * (D.heads_local * D.hd + D.kv_local * (1 + D.hv / D.hd)) *
                                activation_bytes_;
        const double outBytes = D.b * D.s_local * D.heads_local * D.hv * activation_bytes_;
        const double pass = allToAllTime(cpGroup, qkvBytes, cpLink) + allToAllTime(cpGroup, outBytes, cpLink);
        const double forwards = 1.0 + (l.recomputes(kRecomputeCoreAttn) && !flash ? 1.0 : recomputed);
        const double blocks = attentionBlocks;
        Collective& exchange = sc.comm[StageCost::kCpAllToAll];
        exchange.placement = cpGroup.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
        exchange.calls = blocks * (forwards + 1) * 2;
        exchange.bytes = blocks * (forwards + 1) * (qkvBytes + outBytes) * (D.c - 1) / D.c;
        exchange.exposed_s = blocks * (forwards + 1) * pass;
    } else if (l.cp > 1) {
        const GroupPlacement cpGroup = placeGroup(D.c, D.t, domain_devices_);
        const LinkModel cpLink = linkFor(D.c, D.t);
        // (K of hd and V of hv per KV head: 2 kv dims, MLA's 192 + 128 per head.)
        const double block = D.b * D.s_local * D.kv_local * (1 + D.hv / D.hd) * activation_bytes_;
        const double one = sendRecvTime(cpGroup.crossesDomains(), block, cpLink);
        const double two = sendRecvTime(cpGroup.crossesDomains(), 2 * block, cpLink);
        // A step's attention runs on its s/cp block at that block's own rate (above): the
        // window each transfer can hide behind.
        const double fwdStep = selfAttentionCore / D.c, bwdStep = attentionBackward / D.c;
        const double fwdExposed = (D.c - 1) * std::max(0.0, one - fwdStep);
        const double bwdExposed = 2 * std::max(0.0, one - bwdStep) + (D.c - 2) * std::max(0.0, two - bwdStep);
        // (gui18) ... and what each transfer hides: the rest of it.
        const double fwdHidden = (D.c - 1) * std::min(one, fwdStep);
        const double bwdHidden = 2 * std::min(one, bwdStep) + (D.c - 2) * std::min(two, bwdStep);
        // Every step after the first merges its partial result, a memory-bound kernel of its own
        // (TE: the log-sum-exp correction of the output forward, reading the running and the
        // step's output and writing the merged one; backward, dQ accumulated and the dK/dV
        // partial added before it moves on). In the same stream as the attention: not hidden.
        const double outBytes = D.b * D.s_local * D.heads_local * D.hv * activation_bytes_;  // (q_local but with MLA)
        const double fwdMerge = (D.c - 1) * (prm.kernel_overhead_s + 3 * outBytes / hbm);
        const double bwdMerge = (D.c - 1) * (2 * prm.kernel_overhead_s + 3 * (outBytes + block) / hbm);
        const double forwards = 1.0 + (l.recomputes(kRecomputeCoreAttn) && !flash ? 1.0 : recomputed);
        const double blocks = attentionBlocks;
        Collective& ring = sc.comm[StageCost::kCpRing];
        ring.placement = cpGroup.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
        ring.calls = blocks * (forwards * (D.c - 1) + D.c);  // cp - 1 sends a forward, cp a backward
        ring.bytes = blocks * (forwards + 2) * (D.c - 1) * block;
        ring.exposed_s = blocks * (forwards * fwdExposed + bwdExposed);
        ring.hidden_s = blocks * (forwards * fwdHidden + bwdHidden);  // (gui18)
        sc.cp_merge_s = blocks * (forwards * fwdMerge + bwdMerge);
    }
    sc.tp_s = sc.comm[StageCost::kTpAllReduce].exposed_s + sc.comm[StageCost::kTpReduceScatter].exposed_s +
              sc.comm[StageCost::kTpAllGather].exposed_s + sc.comm[StageCost::kEtpAllGather].exposed_s +
              sc.comm[StageCost::kEtpReduceScatter].exposed_s + sc.comm[StageCost::kAuxCounts].exposed_s;
    sc.ep_s = sc.comm[StageCost::kEpAllToAll].exposed_s + sc.comm[StageCost::kEpNetwork].exposed_s +
              sc.comm[StageCost::kEpGather].exposed_s + sc.comm[StageCost::kEpScatter].exposed_s +
              sc.comm[StageCost::kEpCounts].exposed_s;
    sc.cp_s = sc.comm[StageCost::kCpRing].exposed_s + sc.comm[StageCost::kCpAllToAll].exposed_s + sc.cp_merge_s;

    // ---- activation memory [K22] ----
    // (Tensors in 16-bit units, times actScale; the norms' statistics are fp32 bytes already.)
    // All-to-all CP with the fused kernel: TE's AttnFuncWithCPAndQKVOA2A saves the head-split
    // output it computed (out_part, for the kernel's backward) while returning the all-to-all'd
    // copy, which the out-projection keeps: one output more per layer than the ring, whose saved
    // out_f16 is the returned tensor itself (context_parallel.py @ d0067d0). Its softmax
    // statistics are the ring's count (heads/cp over s against heads over s/cp). Unfused
    // attention (the scores kept) needs no output in its backward.
    if (a2a && flash)
        encAct.inside_tp += 2.0 * T * outProjIn;
    double perLayerStoredEnc = 0, perLayerStoredDec = 0;
    const double scoresEnc = nEnc > 0 ? encAct.scores : 0.0, scoresDec = nDec > 0 ? decAct.scores : 0.0;
    switch (l.recompute) {
    case Recompute::None:
        perLayerStoredEnc = encAct.all() * actScale + encAct.statistics;
        perLayerStoredDec = decAct.all() * actScale + decAct.statistics;
        break;
    case Recompute::Selective: {
        // (Without core_attn among the recomputed modules the scores stay.)
        const double dropped = l.recomputes(kRecomputeCoreAttn) ? 1.0 : 0.0;
        perLayerStoredEnc = (encAct.all() - dropped * encAct.scores) * actScale + encAct.statistics;
        perLayerStoredDec = (decAct.all() - dropped * decAct.scores) * actScale + decAct.statistics;
        // The layer whose attention is recomputed holds its scores again during its backward.
        sc.working_bytes += dropped * std::max(scoresEnc, scoresDec) * actScale;
        break;
    }
    case Recompute::Full:
        // Checkpointed inputs, and the layers left out of the recomputation (block) with all
        // their activations; per layer, as fractions of the stage's.
        perLayerStoredEnc = checkpoints * encAct.input * actScale +
                            (1 - recomputed) * (encAct.all() * actScale + encAct.statistics);
        perLayerStoredDec = checkpoints * decAct.input * actScale +
                            (1 - recomputed) * (decAct.all() * actScale + decAct.statistics);
        // The layers being recomputed (one, or a uniform group of N) hold their full activations
        // during their backward. (The group's input is the checkpoint, already counted.)
        sc.working_bytes += std::max(nEnc > 0 ? groupLayers * (encAct.all() * actScale + encAct.statistics) -
                                                    encAct.input * actScale
                                              : 0.0,
                                     nDec > 0 ? groupLayers * (decAct.all() * actScale + decAct.statistics) -
                                                    decAct.input * actScale
                                              : 0.0);
        break;
    }
    sc.stored_bytes_per_mb = nEnc * perLayerStoredEnc + nDec * perLayerStoredDec;
    if (sc.moe_layers > 0) {
        // The MoE layers' own sets (moeSaved); full recomputation keeps them only for the layers it
        // does not recompute, and holds one layer's again while it recomputes it.
        sc.stored_bytes_per_mb += sc.moe_layers * moeSaved * (l.recompute == Recompute::Full ? 1 - recomputed : 1.0);
        if (l.recompute == Recompute::Full)
            sc.working_bytes += groupLayers * moeSaved;
    }
    if (recipe_.quantized) {
        // FP8/FP4 activation storage (QuantizationRecipe.h, [TE] linear.py / layernorm_mlp.py): a
        // linear layer keeps its quantized input for the weight gradient, stored_input_bytes per
        // element instead of 2: the norm outputs into QKV and FC1 (their sequence shard under SP) and
        // the activation into FC2 (fc1_out, the activation's own input, stays bf16). The attention
        // output into the out-projection is one tensor with unfused attention; the fused kernel keeps
        // its bf16 output for its own backward, so the quantized copy is kept beside it. A MoE layer:
        // its experts' inputs and activations; its MLP input stays bf16 (the router keeps it) and a
        // shared expert keeps a quantized copy of it.
        const double s8 = recipe_.stored_input_bytes, saved = activation_bytes_ - s8;
        const double attnSave = saved * T * h / D.sp + (flash ? -s8 : saved) * T * outProjIn;
        const double denseSave = saved * (T * h / D.sp + T * D.f_local);
        const double moeSave =
            moe.enabled() ? saved * (h * (exchanged ? busyCopies : copies) + expertF * busyCopies + sharedF * D.T_moe) -
                                (moe.shared_experts > 0 ? s8 * T * h / D.sp : 0.0)
                          : 0.0;
        const double stageSave = quantizedShare * ((nEnc + nDec) * attnSave + denseLayers * denseSave + sc.moe_layers * moeSave);
        const double layers = std::max(1.0, nEnc + nDec);
        if (l.recompute == Recompute::Full) {
            sc.stored_bytes_per_mb -= (1 - recomputed) * stageSave;
            sc.working_bytes -= groupLayers * stageSave / layers;
        } else {
            sc.stored_bytes_per_mb -= stageSave;
        }
    }
    // ---- selective recomputation of named modules (Layout.h: Megatron-LM's recompute_modules,
    // transformer_config.py @ d98e8a64, applied in transformer_layer.py, moe/experts.py,
    // moe/moe_layer.py, moe/shared_experts.py, multi_latent_attention.py): per micro-batch, the
    // stage's stored bytes each module discards and the forward work it repeats in the backward.
    // Output-discarding modules (layernorm, moe_act, mla_up_proj) drop one tensor the next op saved
    // and rebuild it from inputs kept anyway; checkpointed ones (mlp, moe, shared_experts) keep their
    // input and drop everything inside. A layer's backward re-materialises its MLP side (pre-MLP norm,
    // MLP or MoE block) and then its attention side (input norm, up projections): the larger is live
    // once more (working set). Under an FP8/FP4 recipe a discarded tensor's quantized copy goes with
    // it (Megatron sets save_original_input on the linear layer that reads it). ----
    if (const unsigned modules = l.recomputedModules() & ~unsigned(kRecomputeCoreAttn); modules != 0) {
        const double s8 = recipe_.quantized ? recipe_.stored_input_bytes : 0.0;
        // The recipe's saving per element on a linear layer's quantized input (the stage's share).
        const double saved = recipe_.quantized ? (activation_bytes_ - s8) * quantizedShare : 0.0;
        const double tokensSp = T / D.sp;
        const double normStats = shape.norm_statistics * 4.0 * tokensSp;
        const double perByte = prm.elementwise_traffic_factor / hbm;  // element-wise time per byte rebuilt
        const double mlaLayers = model.mla.enabled() ? nEnc : 0.0;
        double denseSide = 0, moeSide = 0, attentionSide = 0;  // one layer's rebuilt bytes
        auto record = [&](unsigned bit, double layers, double bytes, double seconds, double flops) {
            const int k = recomputeModuleIndex(bit);
            sc.module_freed_bytes[size_t(k)] += layers * bytes;
            sc.module_recompute_s[size_t(k)] += layers * seconds;
            sc.module_recompute_flops_mb += layers * flops;
        };
        const bool wholeMoe = (modules & kRecomputeMoe) != 0;  // (its checkpoint holds moe_act's and shared_experts')
        if (modules & kRecomputeLayernorm) {
            // Megatron's TE spec (models/gpt/gpt_layer_specs.py @ d98e8a64) has two norms of their own:
            // an MLA layer's input norm (its output into the down projections, quantized under a
            // recipe) and a MoE layer's pre-MLP norm (into the router, the dispatch and the shared
            // experts, which keep a quantized copy under a recipe); the others are fused into the
            // next linear layer: nothing to discard. Each drops its output and fp32 statistics.
            const double input = (activation_bytes_ - saved) * tokensSp * h + normStats;
            const double preMlp = activation_bytes_ * tokensSp * h + normStats +
                                  (moe.shared_experts > 0 ? s8 * quantizedShare * tokensSp * h : 0.0);
            const double normTime = perByte * activation_bytes_ * tokensSp * h + prm.kernel_overhead_s;
            record(kRecomputeLayernorm, mlaLayers, input, normTime, 0.0);
            record(kRecomputeLayernorm, sc.moe_layers, preMlp, normTime, 0.0);
            attentionSide += mlaLayers > 0 ? input : 0.0;
            moeSide += sc.moe_layers > 0 ? preMlp : 0.0;
        }
        if ((modules & kRecomputeMoeAct) && !wholeMoe) {
            // The experts' activation output, FC2's input (f/etp per busiest copy): rebuilt from the
            // pre-activation, read (2 f/etp gated) and written.
            const double bytes = (activation_bytes_ - saved) * expertF * busyCopies;
            const double time = perByte * activation_bytes_ * (expertFin + expertF) * busyCopies + prm.kernel_overhead_s;
            record(kRecomputeMoeAct, sc.moe_layers, bytes, time, 0.0);
            moeSide += bytes;
        }
        if ((modules & kRecomputeMlaUpProj) && mlaLayers > 0) {
            // Q and K after RoPE and V (MlaCost.h's split count without the attention output): the
            // query and kv up projections and RoPE again.
            const double bytes = (T * mla.kept_split_bytes_per_token - 2.0 * T * D.heads_local * D.hv) * actScale;
            const MlaDeviceShapes::Gemm& q = mla.gemms[model.mla.q_lora_rank > 0 ? 1 : 0];
            const MlaDeviceShapes::Gemm& kv = mla.gemms[model.mla.q_lora_rank > 0 ? 3 : 2];
            const double time = linear(T, q.n, q.k) + linear(T, kv.n, kv.k) + perByte * bytes + prm.kernel_overhead_s;
            record(kRecomputeMlaUpProj, mlaLayers, bytes, time, 2.0 * T * (q.n * q.k + kv.n * kv.k));
            attentionSide += bytes;
        }
        if ((modules & kRecomputeMlp) && denseLayers > 0) {
            // A dense MLP with its fused pre-MLP norm: the norm's output and statistics, FC1's output
            // (gated: gate and up) and the activation; its input, the residual, is kept anyway.
            const double inner = (gatedMlp(model.mlp) ? 6.0 : 4.0) * T * D.f_local * actScale - saved * T * D.f_local;
            const double bytes = (activation_bytes_ - saved) * tokensSp * h + normStats + inner;
            record(kRecomputeMlp, denseLayers, bytes, denseMlpFwd + perByte * bytes,
                   2.0 * T * D.matrices * h * D.f_local);
            // The checkpoint's forward again also makes the MLP's output, live through the MLP's
            // backward and then dropped (tensor_parallel.checkpoint's backward re-runs the function).
            denseSide += bytes + activation_bytes_ * tokensSp * h;
        }
        if (wholeMoe && sc.moe_layers > 0) {
            // Everything the MoE layer keeps (moeSaved, less the recipe's quantized inputs); its
            // input, the pre-MLP norm's output, is the checkpoint's. The forward again: router,
            // permutations, dispatch and combine (counted with the all-to-alls), experts, shared experts.
            const double recipeSave =
                saved * (h * (exchanged ? busyCopies : copies) + expertF * busyCopies + sharedF * D.T_moe) -
                (moe.shared_experts > 0 ? s8 * quantizedShare * tokensSp * h : 0.0);
            const double bytes = moeSaved - recipeSave;
            const double flops = 2.0 * (routedCopies * D.matrices * h * expertLocal + T * D.matrices * h * sharedLocalAll +
                                        D.T_moe * D.experts * h);
            record(kRecomputeMoe, sc.moe_layers, bytes, moeBlockFwd + moePermute + perByte * moeSaved, flops);
            // (with its output, made again and live through the block's backward, as mlp's)
            moeSide += bytes + activation_bytes_ * tokensSp * h;
        }
        if ((modules & kRecomputeSharedExperts) && !wholeMoe && sc.moe_layers > 0 && sharedLocalAll > 0) {
            // The shared experts' pre-activation and activation over the tokens (moeSaved's share).
            const double bytes = activation_bytes_ * (sharedFin + sharedF) * D.T_moe - saved * sharedF * D.T_moe;
            const double time = linear(T, (D.matrices - 1) * sharedLocalAll, h) + linear(T, h, sharedLocalAll) +
                                perByte * bytes;
            record(kRecomputeSharedExperts, sc.moe_layers, bytes, time, 2.0 * T * D.matrices * h * sharedLocalAll);
            moeSide += bytes + activation_bytes_ * D.T_moe * h;  // (with their output, made again)
        }
        for (size_t k = 0; k < sc.module_freed_bytes.size(); ++k) {
            sc.stored_bytes_per_mb -= sc.module_freed_bytes[k];
            sc.recompute_s += sc.module_recompute_s[k];
        }
        // The peak is at the backward that runs first, the stage's last layer's (the last chunk's):
        // everything the stage keeps is still there; the later ones have freed more than they
        // rebuild. (An encoder-decoder's stage mixes both: the larger side.)
        const bool mixed = model.family == ModelFamily::EncoderDecoder;
        const double mlpSide = mixed ? std::max(denseLayers > 0 ? denseSide : 0.0, sc.moe_layers > 0 ? moeSide : 0.0)
                               : sc.last_layer_moe ? moeSide
                                                   : (denseLayers > 0 ? denseSide : 0.0);
        sc.working_bytes += std::max(mlpSide, attentionSide);
    }

    // ---- vector (non-matmul) FLOPs per micro-batch, per element, by core/OpConventions.h (the
    // engine charges the same table): the norms, the MLP's activation (a gated MLP with its
    // product), rotary positions on q and k, the residual add after each output projection
    // (with its bias, 2; a separate pass after the tensor-parallel reduction), the vocabulary
    // softmax with cross-entropy, the embedding sum (with learned positions) and its gradient.
    // The attention softmax is counted with the attention products (fused). ----
    {
        const ops::ElementFlops norm = ops::norm(model.norm), act = ops::mlpActivation(model.mlp);
        const double Ts = T / (l.sequence_parallel ? D.t : 1.0);
        const double ffn = T * innerLocal;
        const double add = model.bias ? ops::kBiasResidualAdd : 1;
        // RoPE rotates every query and key head of this tp rank, over the micro-batch's tokens.
        // (MLA: its RoPE parts and latent norms instead, MlaCost.h.)
        const double rope = model.mla.enabled() ? T * mla.rotated_per_token
                            : model.positions == PositionKind::Rotary
                                ? T * (double(model.qDim()) + double(model.kvDim())) / D.t : 0.0;
        // QK-norm normalises every query and key head of this tp rank, per attention block.
        const double qkNormed = model.qk_norm ? T * (D.q_local + D.kv_local) : model.mla.enabled() ? Ts * mla.normed_per_token : 0.0;
        const double keyGradientAdds = model.mla.enabled() ? ops::kGradientAdd * T * mla.key_gradient_adds_per_token : 0.0;
        auto layerForward = [&](double norms, double projections, double attentions) {
            return norms * norm.forward * h * Ts + act.forward * ffn + projections * add * h * Ts +
                   ops::kRope.forward * rope + attentions * norm.forward * qkNormed;
        };
        // Post-norm adds each residual branch's gradient in a pass of its own, one per norm.
        auto layerBackward = [&](double norms, double attentions) {
            return norms * norm.backward * h * Ts + act.backward * ffn + ops::kRope.backward * rope +
                   attentions * norm.backward * qkNormed + (post ? norms * ops::kGradientAdd * h * Ts : 0.0) +
                   attentions * keyGradientAdds;
        };
        double forward = nEnc * layerForward(2, 2, 1) + nDec * layerForward(3, 3, 2);
        double backward = nEnc * layerBackward(2, 1) + nDec * layerBackward(3, 2);
        double moeForward = 0;  // one MoE layer's forward
        if (sc.moe_layers > 0) {
            // A MoE layer (the engine's MoeMlp charges): the experts' and shared experts'
            // activations, the routed ones weighted by their copies' router weights (its
            // backward evaluates the activation again for the weights' gradient), the combine's
            // sum of the k copies (C per copy forward; its backward hands each copy its token's
            // gradient), the dispatch's scatter-add (C per copy) and the router's input gradient
            // added to the block's (C per token). Per device on average (R = T_moe k etp): summed
            // over the devices the routing does not matter.
            const double routedActivated = expertF * routedCopies, activated = routedActivated + sharedF * D.T_moe;
            // (The shared experts' output is added to the routed ones', C per token.)
            moeForward = act.forward * activated + ops::kRouterWeight.forward * routedActivated + h * copies +
                         (sharedF > 0 ? h * D.T_moe : 0.0);
            forward += sc.moe_layers * moeForward;
            backward += sc.moe_layers * (act.backward * activated +
                                         (act.forward + ops::kRouterWeight.backward) * routedActivated + h * copies +
                                         h * D.T_moe);
        }
        sc.vector_flops_mb = forward + backward + recomputed * forward;
        // Named modules run their element-wise forward once more: the rebuilt norms (an MLA layer's
        // input norm, an MoE layer's pre-MLP norm), the experts' weighted activation, the dense MLP
        // with its norm and its output's residual add.
        if (const unsigned modules = l.recomputedModules(); modules != 0) {
            if (modules & kRecomputeLayernorm)
                sc.vector_flops_mb += (sc.moe_layers + (model.mla.enabled() ? nEnc : 0.0)) * norm.forward * h * Ts;
            if ((modules & kRecomputeMoeAct) && !(modules & kRecomputeMoe) && sc.moe_layers > 0)
                sc.vector_flops_mb +=
                    sc.moe_layers * (act.forward + ops::kRouterWeight.forward) * expertF * routedCopies;
            if (modules & kRecomputeMlp)
                sc.vector_flops_mb += denseLayers * (norm.forward * h * Ts + act.forward * T * D.f_local + add * h * Ts);
            if (modules & kRecomputeMoe)
                sc.vector_flops_mb += sc.moe_layers * moeForward;
            if ((modules & kRecomputeSharedExperts) && !(modules & kRecomputeMoe) && sc.moe_layers > 0)
                sc.vector_flops_mb += sc.moe_layers * act.forward * sharedF * D.T_moe;
            if ((modules & kRecomputeMlaUpProj) && model.mla.enabled())  // RoPE on q and the key again
                sc.vector_flops_mb += nEnc * ops::kRope.forward * rope;
        }
        if (firstStage) {
            const bool learned = model.positions == PositionKind::Learned;
            sc.vector_flops_mb += ((learned ? ops::kEmbedding.forward : 0) + (learned ? 2 : 1)) * h * T;
            // BERT: the token-type table's sum and scatter-add, the embedding norm on the token shard.
            if (model.token_types > 0)
                sc.vector_flops_mb += (ops::kTokenTypeEmbedding.forward + ops::kTokenTypeEmbedding.backward) * h * T;
            if (model.embedding_norm)
                sc.vector_flops_mb += (norm.forward + norm.backward) * h * Ts;
        }
        // MTP, per depth: enorm, hnorm and the final norm, the head's softmax with cross-entropy once
        // more, the rolled embedding's gradient scattered into wte, and the gradient carried into the
        // previous depth's hidden state added to its head gradient (ModelExecutor's mtpBackward).
        if (mtpLayers > 0)
            sc.vector_flops_mb += mtpLayers * (3 * (norm.forward + norm.backward) * h * Ts +
                                               (ops::kSoftmaxCrossEntropy.forward + ops::kSoftmaxCrossEntropy.backward) *
                                                   D.V_local * T +
                                               h * T + ops::kGradientAdd * h * Ts);
        if (lastStage)
            sc.vector_flops_mb += (model.final_norm ? (norm.forward + norm.backward) * h * Ts : 0.0) +
                                  (ops::kSoftmaxCrossEntropy.forward + ops::kSoftmaxCrossEntropy.backward) * D.V_local * T +
                                  (mlm ? (ops::kGelu.forward + ops::kGelu.backward + norm.forward + norm.backward) * h * Ts
                                       : 0.0);  // the masked-LM transform's GeLU and norm (the pooler: evaluate())
        // T5: the encoder's final norm, the decoder embedding's gradient, the sum over the decoder
        // layers of the encoder output's gradient (a partial sum over tp: all T tokens), and the
        // d_model^-0.5 before a tied head and on its gradient.
        if (encoderEnds && model.final_norm)
            sc.vector_flops_mb += (norm.forward + norm.backward) * h * Ts;
        if (decoderBegins)
            sc.vector_flops_mb += h * T;  // one scatter-add into wte (no position table)
        if (encDec)
            sc.vector_flops_mb += std::max(0.0, nDec - 1) * h * T;
        if (encDec && lastStage && model.tied_embeddings)
            sc.vector_flops_mb += 2 * ops::kScale * h * Ts;
    }
    if (lastStage) {
        // Kept per micro-batch from the head's forward to its backward: the final norm's input
        // (the last residual) and output (the head's input) with its statistics, the softmax over
        // the vocabulary in fp32 (Megatron-LM's cross-entropy keeps it so; 16-bit logits are
        // transient), and the per-token fp32 losses.
        // An encoder's masked-LM transform keeps its dense output, GeLU output and norm output with
        // the norm's statistics; its pooler (on the cp rank holding each sequence's first token) the
        // first tokens and the tanh output (h, b), and the next-sentence softmax and losses in fp32.
        const double spTokens = T / (l.sequence_parallel ? D.t : 1.0);
        const double kept = 1.0 + (model.final_norm ? 1.0 : 0.0) + (mlm ? 3.0 : 0.0);  // + the last layer's output
        const double normed = (model.final_norm ? 1.0 : 0.0) + (mlm ? 1.0 : 0.0);
        const double finalNorm = kept * spTokens * h * activation_bytes_ + normed * shape.norm_statistics * 4.0 * spTokens;
        const double pooler = mlm && model.pooler ? 2 * D.b * h * activation_bytes_ + 3 * D.b * 4.0 : 0.0;
        // (MTP: each module's head keeps its own fp32 softmax and losses, and the module on its token
        // shard the rolled embedding (enorm's input, h), eh_proj's input (2h), its output (the layer's
        // input, h) and the final norm's output (the head's input, h), with the three norms' statistics:
        // ModelExecutor's Slot::Mtp, what Megatron's autograd keeps of MultiTokenPredictionLayer.)
        const double logits = T * D.V_local * 4.0;
        const double mtpKept = mtpLayers * (logits + 4.0 * T + 5 * spTokens * h * activation_bytes_ +
                                            3 * shape.norm_statistics * 4.0 * spTokens);
        sc.head_stored_bytes_per_mb = finalNorm + logits + 4.0 * T + pooler + mtpKept;
        sc.stored_bytes_per_mb += sc.head_stored_bytes_per_mb;
    }
    if (encoderEnds && model.final_norm) {
        // T5's encoder output E (its final norm's output, read by every decoder layer's [k v]
        // product) and that norm's input with its statistics, kept until the decoder's backward.
        const double spTokens = T / (l.sequence_parallel ? D.t : 1.0);
        sc.stored_bytes_per_mb += 2 * spTokens * h * activation_bytes_ + shape.norm_statistics * 4.0 * spTokens;
    }

    if (firstStage && model.embedding_norm) {
        // BERT's embedding norm keeps its input (the embedding sum) and statistics; its output is
        // the first layer's input, counted with the layer.
        const double spTokens = T / (l.sequence_parallel ? D.t : 1.0);
        sc.embed_stored_bytes_per_mb = spTokens * h * activation_bytes_ + shape.norm_statistics * 4.0 * spTokens;
        sc.stored_bytes_per_mb += sc.embed_stored_bytes_per_mb;
    }
    if (l.offload_activations > 0) {
        // ---- activation offload of the first N layers (Layout.h; Transformer Engine's
        // cpu_offload.py @ d0067d0, as Megatron-LM's transformer_block.py @ d98e8a64 runs it): a
        // layer's saved tensors go to pinned host memory on a stream of their own while the next
        // layer computes, and come back one layer ahead of its backward, "activation memory usage
        // ... equal to (num_layers - num_offloaded_layers) x T". Priced per layer as the stage's
        // average layer: each copy over the host link (no faster than the host memory) hidden
        // behind one layer's forward (out) or backward (back), the rest exposed; the reloaded layer
        // is held while the one before runs its backward (working set). ----
        const double layers = std::max(1.0, nEnc + nDec);
        const double layerBytes =
            std::max(0.0, sc.stored_bytes_per_mb - sc.head_stored_bytes_per_mb - sc.embed_stored_bytes_per_mb) / layers;
        const double n = std::min(double(l.offload_activations), layers);
        sc.offloaded_bytes_per_mb = n * layerBytes;
        sc.stored_bytes_per_mb -= sc.offloaded_bytes_per_mb;
        // Transformer Engine keeps at most (layers - N) layers' sets on the device, stalling compute
        // and reloads to hold it (cpu_offloading.rst @ d0067d0, "Default Offloading Scheduling"):
        // the reloaded layer never adds to the peak; with one kept layer nothing overlaps.
        const double link = std::min(host_link_bytes_per_second_device_ > 0 ? host_link_bytes_per_second_device_
                                                                             : std::numeric_limits<double>::infinity(),
                                     prm.host_memory_bytes_per_second > 0 ? prm.host_memory_bytes_per_second
                                                                          : std::numeric_limits<double>::infinity());
        const double copy = std::isfinite(link) ? layerBytes / link : 0.0;
        const double forward = fwdLayers / layers, backward = (sc.bwd_s - sc.head_bwd_s) / layers;
        sc.offload_s = layers - n >= 2 ? n * (std::max(0.0, copy - forward) + std::max(0.0, copy - backward))
                                       : n * 2 * copy;
    }
    return sc;
}

// The groups the data-parallel / ZeRO collectives run on, and the compute windows they hide
// behind: the same for every stage of a layout (resolved once per evaluate()). Two sets of groups:
// the dense parameters' over dp x cp (stride tp), and with MoE the routed experts' over the
// expert-data-parallel group edp = tp x cp x dp / (ep x etp) (stride ep x etp: Megatron-LM's
// expert grid tp-ep-dp), whose ZeRO shard group is the same share of it as the dense one of dp.
struct CostModel::DataParallelGroups {
    struct Set {
        double size = 1;          // the gradients' group
        double shard = 1;         // ZeRO's shard group, 1 without ZeRO
        double replicas = 1;      // shard groups (HSDP replicas)
        GroupPlacement all, sharded, across;
        LinkModel all_link, shard_link, across_link;
    };
    double m = 1;
    Set dense, experts;
    double grads_window = 0;  // what the gradient collectives hide behind
    double gather_window = 0; // ... and the parameter all-gather (ZeRO-1/2)
};

CostModel::DataParallelGroups CostModel::dataParallelGroups(const Layout& l, const StageCost& slow, double m) const
{
    DataParallelGroups g;
    g.m = m;
    auto place = [&](DataParallelGroups::Set& set, double size, double shard, double stride) {
        set.size = size;
        set.shard = l.zero_stage > 0 ? std::max(1.0, shard) : 1.0;
        set.replicas = set.size / set.shard;
        set.all = placeGroup(set.size, stride, domain_devices_);
        set.sharded = placeGroup(set.shard, stride, domain_devices_);
        set.across = placeGroup(set.replicas, stride * set.shard, domain_devices_);
        set.all_link = linkFor(set.size, stride);
        set.shard_link = linkFor(set.shard, stride);
        set.across_link = linkFor(set.replicas, stride * set.shard);
    };
    place(g.dense, double(l.dp) * l.cp, double(l.zeroGroupSize()) * l.cp, l.tp);
    if (problem_.model.moe.enabled()) {
        const double edp = l.expertDataParallel();
        place(g.experts, edp, edp * l.zeroGroupSize() / l.dp, double(l.ep) * l.expertTensorParallel());
    }
    // The slowest stage's backward (ZeRO-2: every micro-batch's; ZeRO-3: its whole step);
    // overlap-param-gather: the parameter gather behind its first forward.
    // (Without overlap_grad_reduce the gradients are reduced after the backward: no window.)
    const double backward = params_.overlap_grad_reduce ? slow.bwd_s : 0.0;
    switch (l.zero_stage) {
    case 0: g.grads_window = backward; break;  // the last micro-batch's backward
    case 1:
    case 2:
        g.grads_window = (l.zero_stage == 2 ? m : 1.0) * backward;
        g.gather_window = l.overlap_param_gather ? slow.fwd_s : g.grads_window;
        break;
    default: g.grads_window = m * (slow.fwd_s + slow.bwd_s + slow.recompute_s); break;
    }
    return g;
}

// The data-parallel / ZeRO rule, once for the time and the bytes: the collectives one device of a
// stage runs per step over dp x cp (gradients; with ZeRO the parameters too) [Z20], and the part
// of each hidden behind compute up to the overlap fraction of its window [Z20 Section 7]; with
// MoE the same rule for the routed experts' parameters over edp, in the same windows.
// Sharded states are reduced and gathered a unit at a time (StageCost::units; the experts: one
// per MoE layer): one call each, the same bytes in all. Plain data parallelism all-reduces
// gradient buckets. Untimed: the bytes and calls only (the search's evaluations need one stage's
// time).
void CostModel::dataParallelCollectives(const Layout& l, const DataParallelGroups& g, const StageCost& sc,
                                        bool timed, StepCollectives& out) const
{
    const CostModelParams& prm = params_;
    const double m = g.m;
    // A group of collectives sharing one compute window: hidden = min(traffic, overlap x window),
    // shared among them by their time.
    auto hide = [&](Collective* const* group, int count, double window) {
        if (!timed)
            return;
        double traffic = 0;
        for (int i = 0; i < count; ++i)
            traffic += group[i]->exposed_s;
        const double hidden = traffic - std::max(0.0, traffic - prm.dp_overlap * window);
        for (int i = 0; i < count; ++i) {
            Collective* c = group[i];
            c->hidden_s = traffic > 0 ? hidden * c->exposed_s / traffic : 0.0;
            c->exposed_s -= c->hidden_s;
        }
    };
    // The collectives of one set of parameters: [0] the gradients' reduce-scatter (ZeRO) or bucket
    // all-reduce, [1] the HSDP all-reduce across shard groups, [2] the parameters' all-gather.
    struct Part {
        Collective c[3];
    };
    auto partOf = [&](const DataParallelGroups::Set& set, CommDimension dimension, double params, double units) {
        Part part{};
        for (Collective& c : part.c)
            c = Collective{dimension, CommKind::AllReduce, CommPlacement::IntraDomain, "", 0, 0, 0, 0};
        if (set.size <= 1 || params <= 0)
            return part;
        const double grads = params * grad_bytes_, weights = params * gather_bytes_;
        auto record = [&](CommKind kind, const GroupPlacement& group, const char* what, double bytes, double calls,
                          double time) {
            const bool none = group.size <= 1;
            return Collective{dimension, kind,
                              group.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain, what,
                              none ? 0.0 : bytes, none ? 0.0 : calls, none ? 0.0 : time, 0.0};
        };
        const bool experts = dimension == CommDimension::ExpertDp;
        if (l.zero_stage == 0) {
            const double buckets = prm.dp_bucket_bytes > 0 ? std::max(1.0, std::ceil(grads / prm.dp_bucket_bytes)) : 1.0;
            part.c[0] = record(CommKind::AllReduce, set.all, experts ? "expert gradient buckets (edp)" : "gradient buckets",
                               allReduceBytes(set.size, grads), buckets,
                               timed ? buckets * allReduceTime(set.all, grads / buckets, set.all_link) : 0.0);
            return part;
        }
        // ZeRO-1 reduce-scatters the gradients once a step and gathers the updated parameters.
        // ZeRO-2 keeps only the gradient shard, so gradients are reduce-scattered after every
        // micro-batch's backward (DeepSpeed ZeRO-2 with accumulation), each hidden behind it.
        // ZeRO-3 also gathers the parameters before every forward and again before every backward
        // (a layer recomputed in backward reuses the parameters it gathers for it: DeepSpeed's
        // max_reuse_distance); prefetching overlaps its whole step. With HSDP the owned gradient
        // shard is all-reduced across the shard groups once a step.
        const double scatters = l.zero_stage >= 2 ? m : 1.0;      // per unit and step
        const double gathers = l.zero_stage == 3 ? 2 * m : 1.0;   // per unit and step
        part.c[0] = record(CommKind::ReduceScatter, set.sharded,
                           experts ? "expert gradients to their shard owners (edp)" : "gradients to their shard owners",
                           scatters * ringHalfBytes(set.shard, grads), units * scatters,
                           timed ? units * scatters * reduceScatterTime(set.sharded, grads / units, set.shard_link) : 0.0);
        part.c[1] = record(CommKind::AllReduce, set.across,
                           experts ? "expert gradient shards across the shard groups (edp, HSDP)"
                                   : "gradient shards across the shard groups (HSDP)",
                           allReduceBytes(set.replicas, grads / set.shard), 1,
                           timed ? allReduceTime(set.across, grads / set.shard, set.across_link) : 0.0);
        part.c[2] = record(CommKind::AllGather, set.sharded,
                           l.zero_stage == 3 ? (experts ? "expert parameters before each forward and backward (edp)"
                                                        : "parameters before each forward and backward")
                                             : (experts ? "updated expert parameters from their shard owners (edp)"
                                                        : "updated parameters from their shard owners"),
                           gathers * ringHalfBytes(set.shard, weights), units * gathers,
                           timed ? units * gathers * allGatherTime(set.sharded, weights / units, set.shard_link) : 0.0);
        return part;
    };
    Part dense = partOf(g.dense, CommDimension::Dp, sc.params - sc.expert_params, sc.units);
    Part experts = partOf(g.experts, CommDimension::ExpertDp, sc.expert_params, std::max(1.0, sc.moe_layers));
    Collective* grads[] = {&dense.c[0], &dense.c[1], &experts.c[0], &experts.c[1]};
    Collective* gathers[] = {&dense.c[2], &experts.c[2]};
    Collective* all[] = {&dense.c[0], &dense.c[1], &dense.c[2], &experts.c[0], &experts.c[1], &experts.c[2]};
    if (l.zero_stage == 0) {
        hide(grads, 4, g.grads_window);
    } else if (l.zero_stage < 3 && l.overlap_param_gather) {
        // --overlap-param-gather: the updated parameters are gathered bucket by bucket
        // during the next step's first forward, not in the backward window.
        hide(grads, 4, g.grads_window);
        hide(gathers, 2, g.gather_window);
    } else {
        hide(all, 6, g.grads_window);
    }
    for (const Collective* c : all)
        if (c->calls > 0)  // (a group of one member runs nothing)
            out.push(*c);
}

Prediction CostModel::evaluate(const Layout& l, CostLedger* ledger) const
{
    Prediction pr;
    TermBook book(ledger);
    const TrainingSpec& tr = problem_.training;
    const CostModelParams& prm = params_;
    const int p = l.pp;
    const double m = microBatchesPerStep(l, tr);
    const double v = l.schedule == PipelineSchedule::Interleaved ? l.virtual_stages : 1;
    pr.micro_batches = int(m);
    // The share of a (middle) stage's layers full recomputation recomputes (block: N of a chunk's).
    const double recomputedShare = l.recomputedShare(problem_.model.totalLayers(), p > 2 ? 1 : 0);

    // The stages that can be the most loaded: the first (embedding, most in-flight
    // micro-batches), the last (logits), and a middle one (sets the bubble).
    const StageCost firstStage = stageCost(l, 0);
    const StageCost lastStage = p > 1 ? stageCost(l, p - 1) : firstStage;
    int middle = l.middleStage(problem_.model.totalLayers());  // p / 2 unless an explicit layout
    StageCost middleStage = p > 2 ? stageCost(l, middle) : firstStage;
    // An explicit layout's middle stages need not be alike (their layers' kinds and counts): the
    // slowest of them.
    for (int s = 1; l.layerLayout() && s < p - 1; ++s)
        if (s != middle)
            if (StageCost other = stageCost(l, s); other.total() > middleStage.total()) {
                middleStage = std::move(other);
                middle = s;
            }
    const bool lastIsSlowest = lastStage.total() > firstStage.total() && lastStage.total() >= middleStage.total();
    const bool middleIsSlowest = !lastIsSlowest && middleStage.total() > firstStage.total();
    const StageCost& slow = lastIsSlowest ? lastStage : middleIsSlowest ? middleStage : firstStage;

    // ---- step time: the slowest stage's work per micro-batch, m times ----
    TimeBreakdown& ts = pr.time_s;
    book.add(Figure::Compute, "layer matmuls, forward", m * slow.layer_matmul_fwd_s,
             "m x sum of GEMMs: max(2MNK / (peak x eff x n/(n+n_half)), bytes / HBM BW) + launch overhead");
    book.add(Figure::Compute, "layer matmuls, backward", m * slow.layer_matmul_bwd_s,
             "m x per GEMM: dgrad max(2MNK / rate, (dY + W + dX) bytes / HBM BW) + wgrad max(2MNK / rate, (X + dY + 2 x dW in the gradient type) bytes / HBM BW) + 2 launches");
    if (attention_ && tr.flash_attention) {
        book.add(Figure::Compute, "attention core, forward (fused kernel at its published rate)", m * slow.attention_fwd_s,
                 "m x layers x 4 b heads/t s/cp keys hd / (published FLOP/s at key length s/cp; "
                 "resources/planner/attention-kernels.json) + a launch per ring step; keys s/2 when causal");
        book.add(Figure::Compute, "attention core, backward (fused kernel at its published rate)",
                 m * slow.attention_bwd_s, "m x layers x 2.5 x forward FLOPs / published backward FLOP/s at s/cp");
    } else {
        book.add(Figure::Compute, "attention core, forward (GEMMs: no published fused-kernel rate)",
                 m * slow.attention_fwd_s,
                 "m x layers x cp ring steps x (Q K^T + P V GEMMs over s/cp queries and s/cp keys, halved when "
                 "causal and fused)");
        book.add(Figure::Compute, "attention core, backward (GEMMs)", m * slow.attention_bwd_s,
                 "2 x forward, 2.5 x when fused (the scores recomputed)");
    }
    const ElementwiseProfile& elementwise = elementwise_ ? *elementwise_ : kFusedElementwise;
    book.add(Figure::Compute, elementwise.ledger,
             m * (slow.elementwise_fwd_s + slow.elementwise_bwd_s - slow.moe_routing_s), elementwise.formula);
    if (slow.moe_layers > 0)
        book.add(Figure::Compute, "MoE routing: the copies' permutations and the fixed per-layer overhead",
                 m * slow.moe_routing_s,
                 "m x MoE layers x (forward + backward) x (permutations: 2 x copies x h bytes / HBM BW (a rank's "
                 "T k copies before the dispatch and after the combine; its R copies sorted by local expert when it "
                 "has several) + launches + moe.layer_overhead_s, fitted on the MoE rows: router top-k, the token "
                 "counts synchronised to the host, index building)");
    if (recipe_.quantized) {
        book.add(Figure::Compute, "FP8/FP4 recipe: linear layers' inputs and output gradients quantized",
                 m * (slow.quantize_fwd_s + slow.quantize_bwd_s),
                 "m x per linear layer (input M x K forward, output gradient M x N backward) x bytes moved per "
                 "element (read bf16, write rowwise + columnwise copies with scales, an amax pass for per-tensor "
                 "current scaling and NVFP4) / HBM BW + launches");
        book.add(Figure::Compute, "FP8/FP4 recipe: weights quantized",
                 slow.weight_cast_step_s + m * slow.weight_cast_mb_s,
                 recipe_.weights_cached ? "once per step (Transformer Engine caches the quantized weights over the "
                                          "micro-batches): linear parameters x bytes moved per element / HBM BW"
                                        : "m x 2 (forward and input-gradient GEMMs; torchao casts at every use) x "
                                          "linear parameters x bytes moved per element / HBM BW");
    }
    book.add(Figure::Compute, "logits and loss, forward and backward",
             m * (slow.head_fwd_s - slow.mtp_head_fwd_s + slow.head_bwd_s - 2 * slow.mtp_head_fwd_s),
             "m x 3 x (GEMM T x h x V/t + cross-entropy traffic)");
    if (problem_.model.mtp.enabled()) {
        // (Each MTP module's transformer layer is one of the last stage's layers in the terms above.)
        book.add(Figure::Compute, "multi-token prediction: logits and loss of the MTP modules, forward and backward",
                 m * 3 * slow.mtp_head_fwd_s, "m x 3 x MTP layers x (GEMM T x h x V/t + cross-entropy traffic)");
        book.add(Figure::Compute, "multi-token prediction: eh_proj and norms, forward and backward",
                 m * (slow.mtp_fwd_s + slow.mtp_bwd_s),
                 "m x 3 x MTP layers x (GEMM T x 2h x h/t + 3 norms' element-wise traffic)");
    }
    double moduleRecompute = 0;
    for (double seconds : slow.module_recompute_s)
        moduleRecompute += seconds;
    book.add(Figure::Recompute,
             l.recompute != Recompute::Full ? "recomputed attention core"
             : recomputedShare < 1          ? "recomputed forward of the block's layers (recompute_method=block)"
                                            : "recomputed forward of every layer",
             m * (slow.recompute_s - moduleRecompute), "m x forward time of what the recomputation mode discards");
    for (size_t k = 1; k < slow.module_recompute_s.size(); ++k)  // (core_attn: the term above)
        if (l.recomputedModules() & (1u << k))
            book.add(Figure::Recompute, kModuleTerms[k].recompute, m * slow.module_recompute_s[k],
                     kModuleTerms[k].time_formula);
    if (l.offload_activations > 0) {
        if (host_link_bytes_per_second_device_ <= 0) {
            pr.feasible = false;
            pr.reason = Infeasibility::MissingHardwareFigure;
            pr.missing_figure = "the node type's host link (host_link_bytes_per_second), which activation offload "
                                "copies the layers over";
        }
        book.add(Figure::Offload, "activations of the offloaded layers to the host and back, not hidden",
                 m * slow.offload_s,
                 "m x N layers x (max(0, layer's stored bytes / host link - layer forward) + max(0, ... - layer "
                 "backward)): each copy on its own stream under the next layer's compute (Transformer Engine)");
    }
    {
        double traffic = 0, hidden = 0;
        for (int k : {StageCost::kTpAllReduce, StageCost::kTpReduceScatter, StageCost::kTpAllGather,
                      StageCost::kEtpAllGather, StageCost::kEtpReduceScatter, StageCost::kAuxCounts}) {
            traffic += slow.comm[size_t(k)].time_s();
            hidden += slow.comm[size_t(k)].hidden_s;
        }
        book.add(Figure::TpComm, "TP/SP collectives", m * traffic,
                 "m x (2 per layer, 3 with cross attention, +1 embedding) x passes x all-reduce of b s h bytes over tp; "
                 "MoE: the routed copies' all-gather and reduce-scatter over etp");
        if (l.tp_comm_overlap)
            book.add(Figure::TpComm, "hidden behind the GEMMs (tp-comm-overlap)", -m * hidden,
                     "per layer: traffic - max(traffic / tp (one chunk exposed), traffic - layer GEMM time)");
        ts.hidden.tp_comm = m * hidden;  // (gui18)
    }
    {
        // The dispatcher's terms (Layout.h MoeDispatcher; the slots of stageCost's MoE traffic).
        double dispatch = 0, hidden = 0;
        for (int k : {StageCost::kEpAllToAll, StageCost::kEpNetwork, StageCost::kEpGather, StageCost::kEpScatter}) {
            dispatch += slow.comm[size_t(k)].time_s();
            hidden += slow.comm[size_t(k)].hidden_s;
        }
        switch (l.moe_dispatcher) {
        case MoeDispatcher::AllToAll:
            book.add(Figure::EpComm, "MoE token dispatch and combine (alltoall dispatcher: all-to-all over ep)",
                     m * dispatch,
                     "m x MoE layers x passes x 2 x all-to-all of imbalance x b s/(cp sp) x top-k x h bytes: max(peers "
                     "in the node / ep x bytes / scale-up BW, peers elsewhere / ep x bytes / network share) + latency");
            break;
        case MoeDispatcher::AllGather:
            book.add(Figure::EpComm, "MoE token dispatch and combine (allgather dispatcher: gather and reduce-scatter "
                                     "over etp x ep)",
                     m * dispatch,
                     "m x MoE layers x passes x (all-gather + reduce-scatter of etp x ep x b s/(cp sp) x h bytes), and "
                     "per forward the routing map and probabilities (E per token) gathered");
            break;
        case MoeDispatcher::DeepEp:
        case MoeDispatcher::HybridEp:
            book.add(Figure::EpComm,
                     l.moe_dispatcher == MoeDispatcher::DeepEp
                         ? "MoE token dispatch and combine (deepep: once per remote node over RDMA, forwarded over NVLink)"
                         : "MoE token dispatch and combine (hybridep: once per remote node over RDMA, forwarded over "
                           "NVLink)",
                     m * dispatch,
                     "m x MoE layers x passes x 2 x max(imbalance x b s/(cp sp) x (N - 1) p x h bytes / network share, "
                     "... x N (D - 1) q x h bytes / scale-up BW) + latency; p, q: a node's and a GPU's chance to hold "
                     "one of a token's top-k experts (MoeDispatch.h), N nodes of D GPUs in etp x ep");
            break;
        }
        book.add(Figure::EpComm,
                 l.moe_dispatcher == MoeDispatcher::HybridEp ? "MoE routing map gathered before each dispatch"
                                                             : "MoE copies per expert gathered before each dispatch",
                 m * slow.comm[StageCost::kEpCounts].time_s(),
                 "m x MoE layers x forwards x all-gather over etp x ep of E int64 (hybridep: b s/(cp sp) x etp x E "
                 "bytes)");
        if (l.ep_comm_overlap)
            book.add(Figure::EpComm, "hidden under another micro-batch's compute (ep_comm_overlap)", -m * hidden,
                     "min(dispatch and combine, layer compute) x (m - 1) / m");
        ts.hidden.ep_comm = m * hidden;
    }
    const Collective& ring = slow.comm[StageCost::kCpRing];
    book.add(Figure::CpComm, "CP ring K/V (and dK/dV) send/recv not hidden by attention", m * ring.exposed_s,
             "m x layers x per ring step max(0, send/recv of b s/cp x 2 kv bytes (backward middle steps: "
             "with dK/dV, twice) - the step's attention time at its s/cp block's rate), cp - 1 forward steps "
             "(twice when recomputed), cp backward");
    book.add(Figure::CpComm, "CP all-to-alls of q, k, v and the output (cp_comm=a2a), not hidden",
             m * slow.comm[StageCost::kCpAllToAll].exposed_s,
             "m x layers x (forwards + backward) x (all-to-all of b s/cp x (q + k + v) dims + all-to-all of b s/cp x "
             "heads x hv), each moving (cp - 1)/cp of it to the peers");
    book.add(Figure::CpComm, "CP ring: partial results merged after each step", m * slow.cp_merge_s,
             "m x layers x (cp - 1) x (forward: launch + 3 x b s/cp q bytes / HBM BW (log-sum-exp correction); "
             "backward: 2 launches + 3 x (dQ + dK/dV) bytes / HBM BW)");
    ts.hidden.cp_comm = m * ring.hidden_s;  // (gui18)
    // Fill and drain: (p - 1) stage-times of a typical stage, divided by v when interleaved [M21 2.2].
    const double typical = p > 2 ? middleStage.total() : 0.5 * (firstStage.total() + lastStage.total());
    book.add(Figure::Bubble, "pipeline fill and drain", (p - 1) * typical / v, "(p - 1) x stage time per micro-batch / v");

    // ---- pipeline sends ----
    Collective sends{CommDimension::Pp, CommKind::SendRecv, CommPlacement::IntraDomain,
                     "activations forward, their gradients back", 0, 0, 0, 0};
    double ppChunkBytes = 0;  // one direction of one chunk's sends over all micro-batches
    if (p > 1) {
        const double stride = double(l.tp) * l.cp * l.dp;
        const bool crosses = placeGroup(p, stride, domain_devices_).crossesDomains();
        sends.placement = crosses ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
        // Activations of one micro-batch, scattered over tp with SP [M21 4.1 scatter/gather].
        const double bytes = l.micro_batch * double(tr.seq_len) / l.cp * problem_.model.hidden * activation_bytes_ /
                             (l.sequence_parallel ? l.tp : 1);
        const double one = sendRecvTime(crosses, bytes, linkFor(2, stride));
        sends.exposed_s = 2 * v * (m + p - 1) * one;
        ppChunkBytes = m * bytes;
        book.add(Figure::PpComm, "pipeline sends, forward and backward", sends.exposed_s,
                 "2 x v x (m + p - 1) x (latency + b s h / sp bytes / link BW)");
    }

    // ---- a tied embedding lives on the first and the last stage: its gradients are all-reduced
    // between the two once per step (Megatron's embedding group), after the pipeline drains.
    // (Under ZeRO-2/3 the owned shard of it: gradients are sharded by then.) ----
    const double dpGroupSize = double(l.dp) * l.cp;
    const double shardGroup = l.zero_stage > 0 ? double(l.zeroGroupSize()) * l.cp : 1.0;
    Collective embedding{CommDimension::EmbeddingGroup, CommKind::AllReduce, CommPlacement::IntraDomain,
                         "tied embedding gradients", 0, 0, 0, 0};
    // (MTP: the last stage's copy of the word embedding, tied or not, the same group.)
    if (p > 1 && (problem_.model.tied_embeddings || problem_.model.mtp.enabled())) {
        const double embeddingBytes = double(problem_.model.vocab) / l.tp * problem_.model.hidden * grad_bytes_ /
                                      (l.zero_stage >= 2 ? shardGroup : 1.0);
        const double stride = double(l.tp) * l.cp * l.dp * (p - 1);
        const GroupPlacement ends = placeGroup(2, stride, domain_devices_);
        embedding.placement = ends.crossesDomains() ? CommPlacement::InterDomain : CommPlacement::IntraDomain;
        embedding.bytes = allReduceBytes(2, embeddingBytes);
        embedding.calls = 1;
        embedding.exposed_s = allReduceTime(ends, embeddingBytes, linkFor(2, stride));
    }
    // The step's loss and global gradient norm (for clipping) add two fp64 scalars all-reduced over
    // every device (latency only, so no time is charged).
    // (MTP: its loss a third, all-reduced for the log as Megatron-LM's MTPLossLoggingHelper does.)
    const bool mtpScalar = problem_.model.mtp.enabled();
    const Collective scalars{CommDimension::AllDevices, CommKind::AllReduce,
                             placeGroup(double(l.devices()), 1, domain_devices_).crossesDomains()
                                 ? CommPlacement::InterDomain
                                 : CommPlacement::IntraDomain,
                             mtpScalar ? "loss, MTP loss and gradient norm (3 fp64 scalars)"
                                       : "loss and gradient norm (2 fp64 scalars)",
                             l.devices() > 1 ? allReduceBytes(double(l.devices()), (mtpScalar ? 3 : 2) * 8.0) : 0.0,
                             l.devices() > 1 ? 1.0 : 0.0, 0, 0};

    // ---- the collectives one device of a stage runs in a step: its tp and cp collectives per
    // micro-batch m times, the norms' gradients, the pipeline sends (a middle stage sends each
    // chunk's activations forward and its gradients back; an end device's first (or last) chunk has
    // no one to send back to (or forward to)), the data-parallel/ZeRO rule, the tied embedding's
    // all-reduce on the end stages, the step's scalars. ----
    // Data-parallel time is that of the stage holding the most parameters (an uneven split can
    // leave the middle stages with the most); the other stages' is computed for a ledger only.
    const StageCost& heavyEnd = (lastStage.params > firstStage.params) ? lastStage : firstStage;
    const StageCost& heavy = middleStage.params > heavyEnd.params ? middleStage : heavyEnd;
    const DataParallelGroups dpGroups = dataParallelGroups(l, slow, m);
    auto stepCollectives = [&](const StageCost& sc, int stage, StepCollectives& out) {
        for (Collective c : sc.comm) {
            if (c.calls <= 0)
                continue;
            c.bytes *= m;
            c.calls *= m;
            c.exposed_s *= m;
            c.hidden_s *= m;
            out.push(c);
        }
        if (sc.sp_norm_grad_bytes > 0)
            out.push({CommDimension::Tp, CommKind::AllReduce, sc.comm[StageCost::kTpAllReduce].placement,
                      "norm gradients, once per step (latency only: no time charged)", sc.sp_norm_grad_bytes, 1, 0, 0});
        const bool end = stage == 0 || stage == p - 1;
        if (p > 1) {
            Collective c = sends;
            c.calls = (end ? 2 * v - 1 : 2 * v) * m;
            c.bytes = (end ? 2 * v - 1 : 2 * v) * ppChunkBytes;
            out.push(c);
        }
        dataParallelCollectives(l, dpGroups, sc, ledger || &sc == &heavy, out);
        if (embedding.calls > 0 && end)
            out.push(embedding);
        if (scalars.calls > 0)
            out.push(scalars);
    };
    StepCollectives firstComm, lastComm, middleComm;
    stepCollectives(firstStage, 0, firstComm);
    if (p > 1)
        stepCollectives(lastStage, p - 1, lastComm);
    if (p > 2)
        stepCollectives(middleStage, middle, middleComm);

    // ---- data-parallel / ZeRO time (grads reduced over dp x cp), on the stage holding the most
    // parameters ----
    const StepCollectives& heavyComm = &heavy == &firstStage ? firstComm : &heavy == &lastStage ? lastComm : middleComm;
    if (dpGroupSize > 1 || dpGroups.experts.size > 1) {
        double traffic = 0, hidden = 0;
        for (const Collective& c : heavyComm)
            if (c.dimension == CommDimension::Dp || c.dimension == CommDimension::ExpertDp) {
                traffic += c.time_s();
                hidden += c.hidden_s;
            }
        // (Summed in another order the hidden parts can exceed the traffic by an ulp: a figure of
        // -7e-12 s where everything is hidden.)
        hidden = std::min(hidden, traffic);
        book.add(Figure::DpComm, "data-parallel/ZeRO traffic", traffic,
                 "ring/hierarchical collectives of the stage's gradients (and parameters for ZeRO); MoE: the routed "
                 "experts' over edp = tp x cp x dp / (ep x etp)");
        book.add(Figure::DpComm, "hidden behind compute", -hidden,
                 l.overlap_param_gather && (l.zero_stage == 1 || l.zero_stage == 2)
                     ? "gradients: min(traffic, overlap fraction x last backward); parameter all-gather: min(traffic, "
                       "overlap fraction x first forward) (overlap-param-gather)"
                     : "min(traffic, overlap fraction x backward (ZeRO-3: whole step) compute)");
        ts.hidden.dp_comm = hidden;  // (gui18)
    }
    if (embedding.calls > 0)
        book.add(Figure::DpComm, "tied embedding gradients, first and last stage", embedding.exposed_s,
                 "all-reduce of V/t x h gradient bytes between the two stages that hold the embedding");

    // ---- bytes sent per step by one device, by dimension and collective kind: the busiest stage's ----
    const StepCollectives* busiest = &firstComm;
    pr.comm_bytes = commBytesOf(firstComm);
    auto busier = [&](const StepCollectives& comm) {
        const CommBytes b = commBytesOf(comm);
        if (b.total() > pr.comm_bytes.total()) {
            pr.comm_bytes = b;
            busiest = &comm;
        }
    };
    if (p > 1)
        busier(lastComm);
    if (p > 2)
        busier(middleComm);
    if (ledger) {
        auto stageOf = [&](const StageCost* sc) { return sc == &firstStage ? 0 : sc == &lastStage ? p - 1 : middle; };
        ledger->time_stage = stageOf(&slow);
        ledger->dp_stage = stageOf(&heavy);
        ledger->bytes_stage = busiest == &firstComm ? 0 : busiest == &lastComm ? p - 1 : middle;
        ledger->collectives = *busiest;
    }

    // ---- optimizer step: memory-bound over the local shard; offloaded to the host if asked ----
    const double optimizerShard = l.zero_stage >= 1 ? shardGroup : 1.0;
    const double expertShard = dpGroups.experts.shard;  // (1 without ZeRO or MoE)
    auto ownedParams = [&](const StageCost& sc) {
        return (sc.params - sc.expert_params) / optimizerShard + sc.expert_params / expertShard;
    };
    const double localParams = ownedParams(heavy);
    const double fp32Weights = tr.precision == Precision::FP32 ? 2.0 : 1.0;
    const double traffic = 2 * optimizer_bytes_ + grad_bytes_ + weight_bytes_ * fp32Weights;
    if (l.offload == Offload::Optimizer) {
        if (host_link_bytes_per_second_device_ <= 0) {
            pr.feasible = false;
            pr.reason = Infeasibility::MissingHardwareFigure;
            pr.missing_figure = "the node type's host link (host_link_bytes_per_second), which optimizer offload "
                                "moves the gradients and weights over";
        }
        const double link = host_link_bytes_per_second_device_ > 0 ? host_link_bytes_per_second_device_
                                                                    : std::numeric_limits<double>::infinity();
        book.add(Figure::Offload, "gradients down, weights up, Adam on the host",
                 localParams * (grad_bytes_ + weight_bytes_) / link + localParams * traffic / prm.host_memory_bytes_per_second,
                 "shard x (grad + weight bytes) / host link + shard x traffic / host memory BW");
    } else {
        book.add(Figure::Optimizer, "optimizer step over the local shard", localParams * traffic / hbm_bytes_per_second_device_,
                 "shard params x (2 x state + grad + weight bytes) / HBM BW");
    }
    // Every step also reads the gradients it owns for the global norm (clipping), zeroes the
    // gradient buffer it holds for the next step, and under ZeRO-2/3 adds each micro-batch's
    // reduced shard into the accumulated one (read both, write one): memory-bound passes. (With
    // the optimizer offloaded, the norm is taken on the host's copy, inside the offload term; the
    // device still zeroes the gradients it holds.)
    const double heldGrads = l.zero_stage >= 2 ? localParams : heavy.params;
    book.add(Figure::Optimizer, "gradient norm and zeroing",
             (l.offload == Offload::Optimizer ? heldGrads : localParams + heldGrads) * grad_bytes_ /
                 hbm_bytes_per_second_device_,
             "(owned + held gradients) x grad bytes / HBM BW");
    book.add(Figure::Optimizer, "fixed host work per step", prm.step_overhead_s,
             "step_overhead_s: synchronisations, optimizer launches, data loading, logging (fitted)");
    book.add(Figure::Optimizer, "ZeRO-2/3 shard accumulation",
             l.zero_stage >= 2 && dpGroupSize > 1 ? m * localParams * 3 * grad_bytes_ / hbm_bytes_per_second_device_ : 0.0,
             "m x shard x 3 x grad bytes / HBM BW");

    // Every time figure is the sum of its terms.
    ts.compute = book.sum(Figure::Compute);
    ts.recompute = book.sum(Figure::Recompute);
    ts.tp_comm = book.sum(Figure::TpComm);
    ts.cp_comm = book.sum(Figure::CpComm);
    ts.pp_comm = book.sum(Figure::PpComm);
    ts.dp_comm = book.sum(Figure::DpComm);
    ts.ep_comm = book.sum(Figure::EpComm);
    ts.bubble = book.sum(Figure::Bubble);
    ts.optimizer = book.sum(Figure::Optimizer);
    ts.offload = book.sum(Figure::Offload);
    pr.step_time_s = ts.sum();

    // ---- memory of the most loaded stage ----
    struct StageMemory {
        MemoryBreakdown total;
        double stored = 0, working = 0, tp_buffer = 0, pp_buffer = 0, bucket = 0, zero_gather = 0, moe_buffer = 0;
        double quantized_weights = 0;  // an FP8/FP4 recipe's weight copies (in total.weights)
        double replaced_weights = 0;   // ... the bf16 weights they replace (primary quantized weights)
        std::array<double, kRecomputeModuleCount> module_freed{};  // discarded by recomputed modules (not in stored)
        double offloaded = 0;          // moved to the host (not in stored)
    };
    // The bytes a stage keeps over its schedule's in-flight micro-batches, of a micro-batch's `bytes`:
    // its layers' (split evenly over the chunks), the head's (the last chunk), the embedding's (the first).
    auto inFlight = [&](int stage, double bytes, double headBytes, double embedBytes) {
        double stored = 0;
        // Megatron-LM's combined 1F1B (ep_comm_overlap) runs one more forward before the first
        // backward, so that each steady-state forward and backward are of different micro-batches:
        // at pp = 1 two micro-batches are held whatever the schedule is named
        // (combined_1f1b_schedule_for_no_pipelining @ d98e8a64; the engine runs the same order).
        const int extra = l.ep_comm_overlap ? 1 : 0;
        const PipelineSchedule schedule = extra > 0 && p == 1 ? PipelineSchedule::OneFOneB : l.schedule;
        switch (schedule) {
        case PipelineSchedule::GPipe: stored = m * bytes; break;
        case PipelineSchedule::OneFOneB: stored = std::min(m, double(p - stage + extra)) * bytes; break;
        case PipelineSchedule::Interleaved:
            if (int(m) % p == 0) {
                // Megatron-LM's interleaved order walked (PipelineSchedule.h, the engine runs the
                // same): (p - s - 1) 2 + (v - 1) p + 1 (micro-batch, chunk) pairs at the peak of
                // stage s, i.e. p + (p - 2s - 1)/v micro-batches of the stage's layers; on stage 0
                // [K22]'s factor 1 + (p - 1)/(p v). The layers' bytes are split evenly over the v
                // chunks; the head's are kept only by the model's last chunk.
                // (On the stack up to 64 chunks, no allocation; a layout with more, on the heap.)
                const int chunks = int(v);
                std::array<double, 64> onStack;
                std::vector<double> onHeap(chunks > int(onStack.size()) ? size_t(chunks) : 0);
                double* chunk = chunks > int(onStack.size()) ? onHeap.data() : onStack.data();
                std::fill(chunk, chunk + chunks, (bytes - headBytes - embedBytes) / v);
                if (l.unevenChunks()) {
                    // Chunks of their own sizes (account_for_*, an explicit layout): each its
                    // layers' share, the MTP layers with the last stage's last chunk.
                    const int total = problem_.model.totalLayers();
                    const int mtp = stage == p - 1 && problem_.model.mtp.enabled() ? problem_.model.mtp.layers : 0;
                    const int held = l.stageLayers(total, stage) + mtp;
                    for (int c = 0; held > 0 && c < chunks; ++c)
                        chunk[c] = (bytes - headBytes - embedBytes) *
                                   (l.chunkLayers(total, stage, c) + (c == chunks - 1 ? mtp : 0)) / held;
                }
                chunk[chunks - 1] += headBytes;
                chunk[0] += embedBytes;
                stored = peakInFlightBytes(l.schedule, p, stage, int(m), chunk, chunks, extra);
            } else {  // not a schedule Megatron-LM runs (validate refuses it): [K22]'s first-stage count
                stored = std::min(m, double(p - stage) + double(p - 1) / v) * bytes;
            }
            break;
        }
        return stored;
    };
    auto memoryOf = [&](const StageCost& sc, int stage) {
        StageMemory sm;
        MemoryBreakdown& mb = sm.total;
        const ModelStateBytes states = modelStateBytes(sc.params - sc.expert_params, l.zero_stage, int(shardGroup),
                                                       tr.precision, tr.optimizer, tr.main_grads);
        // (The routed experts' states, sharded over their own edp shard group.)
        const ModelStateBytes expertStates = modelStateBytes(
            sc.expert_params, l.zero_stage, int(std::lround(expertShard)), tr.precision, tr.optimizer, tr.main_grads);
        mb.weights = states.weights + expertStates.weights;
        // An FP8/FP4 recipe keeps each linear layer's quantized weight (rowwise and columnwise copies)
        // for the step beside its bf16 weight (Transformer Engine's workspaces; QuantizationRecipe.h).
        // ZeRO-3 gathers a layer at a time: its copies are transient there (not counted).
        if (recipe_.quantized && l.zero_stage < 3) {
            sm.quantized_weights = sc.linear_params * recipe_.weight_copy_bytes;
            // With the distributed optimizer they are the weights themselves (primary_weights).
            sm.replaced_weights = recipe_.primary_weights && l.zero_stage >= 1 ? sc.linear_params * weight_bytes_ : 0.0;
            mb.weights += sm.quantized_weights - sm.replaced_weights;
        }
        mb.gradients = states.gradients + expertStates.gradients;
        mb.optimizer = l.offload == Offload::Optimizer ? 0.0 : states.optimizer + expertStates.optimizer;
        mb.experts = expertStates.weights + expertStates.gradients +
                     (l.offload == Offload::Optimizer ? 0.0 : expertStates.optimizer);
        sm.stored = inFlight(stage, sc.stored_bytes_per_mb, sc.head_stored_bytes_per_mb, sc.embed_stored_bytes_per_mb);
        // What the recomputed modules discard and the offloaded layers move, over the same in-flight
        // micro-batches (the layers' bytes: spread over the chunks as theirs are).
        for (size_t k = 0; k < sc.module_freed_bytes.size(); ++k)
            sm.module_freed[k] = sc.module_freed_bytes[k] > 0 ? inFlight(stage, sc.module_freed_bytes[k], 0, 0) : 0.0;
        sm.offloaded = sc.offloaded_bytes_per_mb > 0 ? inFlight(stage, sc.offloaded_bytes_per_mb, 0, 0) : 0.0;
        sm.working = sc.working_bytes;
        mb.activations = sm.stored + sm.working;
        const double T = l.micro_batch * double(tr.seq_len) / l.cp;
        const double h = problem_.model.hidden;
        sm.tp_buffer = l.tp > 1 ? 2 * T * h * activation_bytes_ : 0;  // all-gather / reduce-scatter staging
        sm.pp_buffer = p > 1 ? 2 * T * h * activation_bytes_ / (l.sequence_parallel ? l.tp : 1) : 0;  // send + receive
        sm.bucket = dpGroupSize > 1 ? std::min(prm.dp_bucket_bytes, sc.params * grad_bytes_) : 0;
        if (l.zero_stage == 3) {
            // ZeRO-3 gathers one linear layer at a time; the largest, twice (in use + prefetched).
            const ModelSpec& model = problem_.model;
            const double qkv = model.mla.enabled() ? mlaDeviceShapes(model, l.tp).largestMatrix()  // (MlaCost.h)
                                                   : h * (double(model.qDim()) + 2.0 * model.kvDim()) / l.tp;
            const double up = h * double(model.ffn_hidden) * (gatedMlp(model.mlp) ? 2 : 1) / l.tp;
            // (MoE: a layer's local experts' first matrices, gathered together for the grouped GEMM.)
            const double expertsUp = model.moe.enabled() ? double(model.moe.experts) / l.ep * h * double(model.expertFfn()) *
                                                               (gatedMlp(model.mlp) ? 2 : 1) / l.expertTensorParallel()
                                                         : 0.0;
            sm.zero_gather = 2 * std::max({qkv, up, expertsUp}) * weight_bytes_;
        }
        sm.moe_buffer = sc.moe_buffer_bytes;
        mb.buffers = sm.tp_buffer + sm.pp_buffer + sm.bucket + sm.zero_gather + sm.moe_buffer;
        mb.capacity = hbm_capacity_device_;
        mb.reserve = prm.reserve_fraction * hbm_capacity_device_;
        return sm;
    };
    const StageMemory memLast = memoryOf(lastStage, p - 1);
    // An uneven split with lighter end stages can leave the peak on the second stage: its middle
    // share of the layers with p - 1 micro-batches in flight (the middle stages' costs are alike).
    const bool secondCounts = l.unevenPipeline() && p > 2;
    const StageMemory memSecond = secondCounts ? memoryOf(middleStage, 1) : StageMemory{};
    const StageMemory memFirst = memoryOf(firstStage, 0);
    enum { First, Last, Second } peak = memLast.total.total() > memFirst.total.total() ? Last : First;
    if (secondCounts && memSecond.total.total() > (peak == First ? memFirst : memLast).total.total())
        peak = Second;
    const StageMemory& mem = peak == First ? memFirst : peak == Second ? memSecond : memLast;
    pr.memory_stage = peak == First ? 0 : peak == Second ? 1 : p - 1;
    book.add(Figure::Weights, "weights", mem.total.weights - mem.quantized_weights + mem.replaced_weights,
             "stage params x weight bytes / (ZeRO-3 shard)");
    if (mem.replaced_weights > 0)
        book.add(Figure::Weights, "FP8/FP4 recipe: linear layers' bf16 weights, replaced by their quantized copies",
                 -mem.replaced_weights, "- linear layers' params x weight bytes (fp8/fp4-param-gather with ZeRO-1/2)");
    if (recipe_.quantized)
        book.add(Figure::Weights, "FP8/FP4 recipe: quantized weight copies", mem.quantized_weights,
                 "linear layers' params x (rowwise + columnwise copies with scales) bytes (0 under ZeRO-3)");
    book.add(Figure::Gradients, "gradients", mem.total.gradients, "stage params x grad bytes / (ZeRO-2+ shard)");
    book.add(Figure::OptimizerStates, "optimizer states", mem.total.optimizer,
             "stage params x K / (ZeRO-1+ shard); 0 when offloaded");
    double discarded = mem.offloaded;
    for (double bytes : mem.module_freed)
        discarded += bytes;
    book.add(Figure::Activations, "stored for backward", mem.stored + discarded,
             "in-flight micro-batches x (stage layers x per-layer bytes [K22] + norm statistics; last stage: "
             "final norm, fp32 softmax over the vocabulary, losses); interleaved: the peak of the schedule's "
             "(micro-batch, chunk) pairs, the head's bytes on the last chunk only");
    for (size_t k = 1; k < mem.module_freed.size(); ++k)
        if (mem.module_freed[k] > 0)
            book.add(Figure::Activations, kModuleTerms[k].freed, -mem.module_freed[k], kModuleTerms[k].bytes_formula);
    if (l.offload_activations > 0) {
        book.add(Figure::Activations, "moved to the host: the offloaded layers' (offload_activations)", -mem.offloaded,
                 "- in-flight x N x the stage's stored bytes per layer");
        book.add(Figure::HostActivations, "offloaded layers' activations in pinned host memory", mem.offloaded,
                 "in-flight x N x the stage's stored bytes per layer (offload_activations)");
    }
    book.add(Figure::Activations, "working set", mem.working,
             "the recomputed layer's activations (full), attention scores (selective) or modules' outputs "
             "(recompute_modules: one layer's larger side, MLP or attention); one offloaded layer reloaded ahead");
    book.add(Figure::Buffers, "TP/SP collective staging", mem.tp_buffer, "2 x b s h bytes");
    book.add(Figure::Buffers, "pipeline send and receive", mem.pp_buffer, "2 x b s h / sp bytes");
    book.add(Figure::Buffers, "gradient bucket", mem.bucket, "min(bucket size, gradient bytes)");
    book.add(Figure::Buffers, "ZeRO-3 gathered parameters", mem.zero_gather,
             "2 x largest linear layer (in use + prefetched)");
    book.add(Figure::Buffers, "MoE layer's backward buffers", mem.moe_buffer,
             "(2 h T k + T k + [2 h R] + 3 f/etp R + (E + h) T + 3 f_s T) x bytes, T = b s/(cp sp), R the busiest "
             "rank's copies");
    book.add(Figure::Reserve, "reserve", mem.total.reserve, "reserve fraction x HBM");
    // Every memory figure is the sum of its terms.
    MemoryBreakdown& mb = pr.memory_bytes;
    mb.weights = book.sum(Figure::Weights);
    mb.gradients = book.sum(Figure::Gradients);
    mb.optimizer = book.sum(Figure::OptimizerStates);
    mb.activations = book.sum(Figure::Activations);
    mb.buffers = book.sum(Figure::Buffers);
    mb.reserve = book.sum(Figure::Reserve);
    mb.host_activations = book.sum(Figure::HostActivations);
    mb.capacity = mem.total.capacity;
    mb.experts = mem.total.experts;
    if (mb.total() > mb.capacity) {
        pr.feasible = false;
        if (pr.reason == Infeasibility::None)
            pr.reason = Infeasibility::OutOfMemory;
    }

    // ---- throughput and utilisation ----
    const double tokensPerStep = double(tr.global_batch) * tr.seq_len;
    const double devices = double(l.devices());
    pr.tokens_per_s = tokensPerStep / pr.step_time_s;
    pr.model_flops_per_step = 3 * model_flops_per_token_ * tokensPerStep;
    // An encoder's pretraining heads (TrainingObjective.h): the masked-LM transform per token, the
    // pooler and next-sentence head per sequence; forward and backward (2x). Replicated over tp: the
    // pooler always, the transform unless sequence parallelism splits its tokens.
    const double transformFlops = objectiveTransformFlopsPerToken(problem_.model) * tokensPerStep;
    const double poolerFlops = objectivePoolerFlopsPerSequence(problem_.model) * double(tr.global_batch);
    const double transformCopies = l.sequence_parallel ? 1.0 : double(l.tp);
    pr.model_flops_per_step += 3 * (transformFlops + poolerFlops);
    const double headReplicas = 3 * (transformFlops * (transformCopies - 1) + poolerFlops * (double(l.tp) - 1));
    double recomputeFlops = 0;
    if (l.recompute == Recompute::Full) {
        // (The busiest stage's recomputed fraction stands for every stage's: an uneven split's
        // ends may recompute a slightly different share.)
        const ModelSpec& model = problem_.model;
        const double logits = 2.0 * model.hidden * model.vocab;
        // MTP (ModelExecutor's recomputes()): each depth's transformer layer runs again whenever
        // recomputation is full, whatever the method; its eh_proj, norms and head pass do not
        // (per module: the layer, 2 (2h^2 + 3h) for eh_proj and the norms, 2hV for the logits: core's
        // mtpForwardFlopsPerToken).
        const double mtp = double(mtpForwardFlopsPerToken(model, tr.seq_len));
        const double h = model.hidden;
        const double mtpLayer = model.mtp.enabled() ? mtp / model.mtp.layers - 2 * (2 * h * h + 3 * h) - logits : 0.0;
        recomputeFlops = (recomputedShare * (model_flops_per_token_ - mtp - logits) +
                          (model.mtp.enabled() ? model.mtp.layers * mtpLayer : 0.0)) *
                         tokensPerStep;
    } else if (l.recomputes(kRecomputeCoreAttn) && !tr.flash_attention) {
        const ModelSpec& model = problem_.model;
        // The recomputed scores and values over each layer's keys: a sliding layer's window (core's
        // attentionKeys, as the model FLOPs count it), not the whole sequence.
        const int sliding = model.slidingLayers(0, model.layers);
        // (MTP: each depth's layer too, of the last layer's kind.)
        const bool mtpSliding = model.slidingLayer(model.layers - 1);
        const double mtpLayerKeys = double(mtpSliding ? attentionKeys(model, tr.seq_len, true) : tr.seq_len);
        const double mtpKeys = model.mtp.enabled() ? model.mtp.layers * mtpLayerKeys : 0.0;
        const double keys = double(model.layers - sliding) * tr.seq_len + mtpKeys +
                            double(sliding) * double(attentionKeys(model, tr.seq_len, true)) +
                            2.0 * (model.family == ModelFamily::EncoderDecoder ? model.decoder_layers : 0) * tr.seq_len;
        const double perToken = 2.0 * (double(model.qDim()) + double(model.valueDim())) * keys;
        recomputeFlops = perToken * tokensPerStep;
    }
    // MLA's down projection is 'duplicated' over tp (Megatron's TELinear, MlaCost.h): without sequence
    // parallelism every tp rank runs it on all the micro-batch's tokens (with sp, on its shard).
    double mlaReplicas = 0;
    if (const ModelSpec& model = problem_.model; model.mla.enabled() && !l.sequence_parallel && l.tp > 1) {
        const MlaSpec& a = model.mla;
        const double down = 2.0 * model.hidden * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim);
        const double passes = 3.0 + (l.recompute == Recompute::Full ? recomputedShare : 0.0);
        mlaReplicas = passes * down * model.layers * tokensPerStep * (double(l.tp) - 1);
    }
    // Recomputed modules' matmuls: every device of each stage, per micro-batch.
    if (l.recomputedModules() & ~unsigned(kRecomputeCoreAttn)) {
        const double perStage = double(l.tp) * l.cp * l.dp;
        recomputeFlops += perStage * m *
                          (firstStage.module_recompute_flops_mb + (p > 1 ? lastStage.module_recompute_flops_mb : 0.0) +
                           (p > 2 ? (p - 2) * middleStage.module_recompute_flops_mb : 0.0));
    }
    // (MTP's norms are in the model FLOPs as Megatron-LM counts them, 3h a depth and token forward:
    // core's mtpForwardFlopsPerToken; no matmul runs them, they are vector work: vector_flops_mb.)
    const MtpSpec& mtpSpec = problem_.model.mtp;
    const double mtpNorms = mtpSpec.enabled() ? 3 * mtpSpec.layers * 2.0 * 3 * problem_.model.hidden * tokensPerStep : 0.0;
    pr.hardware_flops_per_step = pr.model_flops_per_step - mtpNorms + recomputeFlops + headReplicas + mlaReplicas;
    // Vector FLOPs: every device of each stage, per micro-batch, and per step the optimizer (AdamW,
    // 12 per owned parameter), the gradient norm (2 per owned gradient) and under ZeRO-2/3 the
    // shard accumulation (1 per owned gradient and micro-batch). An offloaded optimizer and its
    // norm run on the host: no device FLOPs.
    {
        const double perStage = double(l.tp) * l.cp * l.dp;
        const bool onDevice = l.offload != Offload::Optimizer;
        auto stageVector = [&](const StageCost& sc) {
            const double owned = ownedParams(sc);
            const double accumulate = l.zero_stage >= 2 && dpGroupSize > 1 ? m * owned : 0.0;
            const double optimizer = onDevice ? (ops::kAdamW + ops::kSquaredNorm) * owned : 0.0;
            return perStage * (m * sc.vector_flops_mb + optimizer + accumulate);
        };
        pr.vector_flops_per_step = stageVector(firstStage);
        if (p > 1)
            pr.vector_flops_per_step += stageVector(lastStage);
        if (p > 2)
            pr.vector_flops_per_step += (p - 2) * stageVector(middleStage);
        // The pooler runs once per sequence on each tp rank (the cp rank of its first token): tanh,
        // the next-sentence softmax over 2 classes, and its gradient added to the first tokens'
        // hidden states (by every tp rank, or under SP by the one holding the token).
        const ModelSpec& model = problem_.model;
        if (maskedLanguageModel(model) && model.pooler) {
            const double sequences = double(tr.global_batch), h = model.hidden;
            pr.vector_flops_per_step +=
                sequences * double(l.tp) *
                    ((ops::kTanh.forward + ops::kTanh.backward) * h +
                     (ops::kSoftmaxCrossEntropy.forward + ops::kSoftmaxCrossEntropy.backward) * 2) +
                sequences * (l.sequence_parallel ? 1.0 : double(l.tp)) * ops::kGradientAdd * h;
        }
    }
    const double peakAll = pr.step_time_s * devices * peak_flops_device_;
    pr.mfu = pr.model_flops_per_step / peakAll;
    // An encoder's pretraining heads are model FLOPs in every convention (no mask, no embedding).
    const double headsFlops = 3 * (transformFlops + poolerFlops);
    pr.mfu_palm = (3 * palm_flops_per_token_ * tokensPerStep + headsFlops) / peakAll;
    pr.mfu_causal = (3 * causal_flops_per_token_ * tokensPerStep + headsFlops) / peakAll;
    pr.hfu = pr.hardware_flops_per_step / peakAll;
    pr.time_to_train_s = tr.tokens_to_train / pr.tokens_per_s;
    pr.cost_to_train_usd = pr.time_to_train_s / 3600.0 * problem_.cluster.nodes *
                           problem_.cluster.node.price_per_node_hour_usd;
    return pr;
}

CostLedger CostModel::ledger(const Layout& layout) const
{
    CostLedger ledger;
    evaluate(layout, &ledger);
    return ledger;
}

std::vector<Term> CostModel::explain(const Layout& layout) const
{
    const CostLedger recorded = ledger(layout);
    std::vector<Term> terms;
    terms.reserve(size_t(recorded.terms.size()));
    for (const LedgerTerm& t : recorded.terms)
        terms.push_back({figureKey(t.figure), t.name, t.value, t.formula});
    return terms;
}

} // namespace shardscope
