#include "StepTimeBound.h"
#include "MlaCost.h"
#include "ModelStateMemory.h"
#include "PipelineSchedule.h"

#include <algorithm>
#include <limits>

namespace shardscope {

StepTimeBound::StepTimeBound(const CostModel& model)
    : model_(model),
      peak_(model.peakFlopsPerDevice()),
      efficiency_(model.matmulEfficiency()),
      grouped_efficiency_(model.matmulEfficiency() * model.params().grouped_gemm_efficiency),
      half_dim_(model.params().matmul_half_dim),
      overhead_s_(model.params().kernel_overhead_s),
      activation_bytes_(model.activationBytes()),
      sliding_(model.problem().model.slidingLayers(0, model.problem().model.layers) > 0),
      dp_overlap_(model.params().dp_overlap)
{
    // The bytes activationBytes() counts are the 16-bit (fp32: 32-bit) tensors the cost model
    // keeps at these precisions; a recipe that stores fewer bytes must be looked at before it
    // joins this list (no default: a new precision is a compiler warning here).
    const StateBytesPerParameter state = stateBytesPerParameter(model.problem().training);
    grad_bytes_ = state.gradients;
    weight_bytes_ = state.weights;
    gather_bytes_ = state.gathered;
    optimizer_bytes_ = state.optimizer;
    switch (model.problem().training.precision) {
    case Precision::FP32:
    case Precision::BF16Mixed:
    case Precision::BF16Autocast:
    case Precision::FP16Mixed: activations_bounded_ = true; break;
    // (The quantized recipes keep some linear inputs in 1 byte, or beside the bf16 copy: the
    // activation bound's 16-bit count is not a lower bound for every one of them.)
    case Precision::FP8Tensorwise:
    case Precision::FP8Delayed:
    case Precision::FP8Blockwise:
    case Precision::FP8Rowwise:
    case Precision::MXFP8:
    case Precision::NVFP4: activations_bounded_ = false; break;
    }
}

double StepTimeBound::gemm(double M, double N, double K, double batch, double efficiency) const
{
    // GemmPricer's compute time and launch (its max with the memory-bound time can only add).
    const double n = std::min({M, N, K});
    return 2 * M * N * K * batch / (peak_ * (efficiency * n / (n + half_dim_))) + overhead_s_;
}

StepTimeBound::Mesh StepTimeBound::mesh(const Layout& l) const
{
    const ModelSpec& m = model_.problem().model;
    Mesh out;
    out.pp = l.pp;
    out.stage = {0, l.pp - 1, l.middleStage(m.totalLayers())};
    const bool encoderDecoder = m.family == ModelFamily::EncoderDecoder;
    for (size_t i = 0; i < 3; ++i) {
        const int layers = l.stageLayers(m.totalLayers(), out.stage[i]);
        out.layers[i] = layers;
        if (encoderDecoder || !m.moe.enabled()) {
            (encoderDecoder && m.moe.enabled() ? out.either : out.dense)[i] = layers;
            continue;
        }
        out.moe[i] = 0;
        l.forEachStageRun(m.totalLayers(), out.stage[i], [&](int first, int n) { out.moe[i] += m.moeLayers(first, n); });
        out.dense[i] = layers - out.moe[i];
    }
    // The groups as stageCost() places them: tp innermost, cp at stride tp.
    out.tp_link = model_.linkFor(l.tp, 1);
    out.tp_group = placeGroup(l.tp, 1, out.tp_link.domain_devices);
    out.cp_link = model_.linkFor(l.cp, l.tp);
    out.cp_group = placeGroup(l.cp, l.tp, out.cp_link.domain_devices);
    setExpertGrid(out, l);
    return out;
}

void StepTimeBound::setExpertGrid(Mesh& mesh, const Layout& l) const
{
    // (CostModel.cpp, the MoE token traffic: the ep group ep members at stride etp, the etp group
    // etp neighbours.)
    mesh.ep = l.ep;
    mesh.etp = l.expertTensorParallel();
    mesh.ep_link = model_.linkFor(mesh.ep, mesh.etp);
    mesh.ep_group = placeGroup(mesh.ep, mesh.etp, mesh.ep_link.domain_devices);
    mesh.etp_link = model_.linkFor(mesh.etp, 1);
    mesh.etp_group = placeGroup(mesh.etp, 1, mesh.etp_link.domain_devices);
}

StepTimeBound::MicroBatch StepTimeBound::microBatch(const Mesh& mesh, const Layout& l) const
{
    const Problem& p = model_.problem();
    const ModelSpec& m = p.model;
    const TrainingSpec& t = p.training;
    const double h = m.hidden, tp = l.tp;
    const double T = l.micro_batch * (double(t.seq_len) / l.cp);  // tokens per micro-batch
    const double sp = l.sequence_parallel ? tp : 1.0;
    const double matrices = m.mlp == MlpKind::SwiGlu || m.mlp == MlpKind::GeGlu ? 3 : 2;
    MicroBatch out;
    // One layer's GEMMs, forward (CostModel.cpp, stageCost).
    if (m.mla.enabled()) {
        const MlaDeviceShapes mla = mlaDeviceShapes(m, l.tp);
        for (int i = 0; i < mla.gemm_count; ++i)
            out.projections_s += gemm(T, mla.gemms[size_t(i)].n, mla.gemms[size_t(i)].k, 1, efficiency_);
    } else {
        const double q = double(m.qDim()) / tp;
        const double kv = (m.kv_heads % l.tp == 0 ? double(m.kv_heads / l.tp) : 1.0) * m.head_dim;
        out.projections_s = gemm(T, q + 2 * kv, h, 1, efficiency_) + gemm(T, h, q, 1, efficiency_);
    }
    const double f = double(m.ffn_hidden) / tp;
    out.dense_s = gemm(T, (matrices - 1) * f, h, 1, efficiency_) + gemm(T, h, f, 1, efficiency_);
    out.moe_s = out.dense_s;
    const double tokens = T / sp;  // T_moe
    const double etp = l.expertTensorParallel();
    if (m.moe.enabled()) {
        const double localExperts = double(m.moe.experts) / l.ep;
        const double expertFfn = double(m.expertFfn()) / etp;
        // The busiest rank's tokens per local expert: imbalance x T_moe x top-k x etp / local experts.
        const double busy = t.moe_imbalance * tokens * m.moe.top_k * etp / localExperts;
        const double shared = m.moe.shared_experts * double(m.moe.shared_ffn_hidden) / tp;
        out.moe_s = gemm(busy, (matrices - 1) * expertFfn, h, localExperts, grouped_efficiency_) +
                    gemm(busy, h, expertFfn, localExperts, grouped_efficiency_) +
                    (shared > 0 ? gemm(T, (matrices - 1) * shared, h, 1, efficiency_) + gemm(T, h, shared, 1, efficiency_)
                                : 0.0) +
                    gemm(tokens, m.moe.experts, h, 1, efficiency_);
    }
    out.head_s = gemm(T, double(m.vocab) / tp, h, 1, efficiency_);  // logits, last stage

    // One pass's collectives (CostModel.cpp, stageCost), each priced by the cost model's links and
    // Collectives.h's functions on the same bytes.
    if (l.tp > 1) {
        // Per layer collective: sp's reduce-scatter and all-gather, or an all-reduce.
        const double message = T * h * activation_bytes_;
        out.tp_call_s = l.sequence_parallel ? reduceScatterTime(mesh.tp_group, message, mesh.tp_link) +
                                                  allGatherTime(mesh.tp_group, message, mesh.tp_link)
                                            : allReduceTime(mesh.tp_group, message, mesh.tp_link);
    }
    // (The alltoall dispatcher's collectives only; the others' are left out of the bound, which
    // stays a lower bound: Layout.h MoeDispatcher.)
    if (m.moe.enabled() && l.moe_dispatcher == MoeDispatcher::AllToAll) {
        const double imbalance = t.moe_imbalance;
        if (mesh.ep > 1) {
            // Dispatch and combine of the busiest rank's copies.
            const double payload = tokens * m.moe.top_k * h * activation_bytes_;
            out.a2a_s = 2 * allToAllTime(mesh.ep_group, imbalance * payload, mesh.ep_link);
        }
        if (mesh.etp > 1) {
            // The routed copies gathered after the dispatch and scattered before the combine.
            const double gathered = tokens * m.moe.top_k * mesh.etp * h * activation_bytes_;
            out.etp_s = 2 * allGatherTime(mesh.etp_group, imbalance * gathered, mesh.etp_link);
        }
    }
    if (l.cp > 1 && l.cp_comm == CpComm::A2A) {
        // All-to-all CP (CostModel.cpp): q, k, v to the head split and the output back, exposed,
        // per forward and once backward; the attention core itself is not in the bound.
        // (The cost model's head sizes: head_dim for q and k, an MLA value head its own.)
        const double qHeads = double(m.heads) / l.tp;
        const double kvHeads = m.kv_heads % l.tp == 0 ? double(m.kv_heads / l.tp) : 1.0;
        const double hd = m.head_dim, hv = m.mla.enabled() ? m.mla.v_head_dim : m.head_dim;
        const double qkv = T * (qHeads * hd + kvHeads * hd * (1 + hv / hd)) * activation_bytes_;
        const double o = T * qHeads * hv * activation_bytes_;
        out.cp_forward_s = out.cp_backward_s =
            allToAllTime(mesh.cp_group, qkv, mesh.cp_link) + allToAllTime(mesh.cp_group, o, mesh.cp_link);
    } else if (l.cp > 1 && !sliding_) {
        // The ring's K/V block per step: the forward's cp - 1 sends, the backward's first and last
        // with one block, the cp - 2 between with two. Each step's attention (a cp-th of the core)
        // and its exposed send take at least the send's time, so the sends alone bound the core
        // and the ring's exposure together (a sliding layer's core is less than its steps: not
        // bounded so).
        const double kvHeads = m.kv_heads % l.tp == 0 ? double(m.kv_heads / l.tp) : 1.0;
        const double hv = m.mla.enabled() ? m.mla.v_head_dim : m.head_dim;
        const double block = T * kvHeads * m.head_dim * (1 + hv / m.head_dim) * activation_bytes_;
        const bool crosses = mesh.cp_group.crossesDomains();
        const double one = sendRecvTime(crosses, block, mesh.cp_link), two = sendRecvTime(crosses, 2 * block, mesh.cp_link);
        const double c = l.cp;
        out.cp_forward_s = (c - 1) * one;
        out.cp_backward_s = 2 * one + (c - 2) * two;
    }

    // What a layer keeps outside tp at least: 8 sbh / sp (its norms' and blocks' inputs), and its
    // input alone, 2 sbh / sp (what full recomputation checkpoints); in 16-bit units times the
    // precision's share. A MoE layer's experts keep each busiest copy's pre-activation (2 f / etp
    // gated) and activation (f / etp): moeSaved's largest part.
    const double scale = activation_bytes_ / 2;
    out.outside_bytes = 8.0 * T * h / sp * scale;
    out.input_bytes = 2.0 * T * h / sp * scale;
    if (m.moe.enabled()) {
        const double expertF = double(m.expertFfn()) / etp;
        const double gated = m.mlp == MlpKind::SwiGlu || m.mlp == MlpKind::GeGlu ? 2 : 1;
        const double busyCopies = t.moe_imbalance * tokens * m.moe.top_k * etp;
        out.expert_bytes = activation_bytes_ * (gated + 1) * expertF * busyCopies;
    }
    return out;
}

StepTimeBound::Seconds StepTimeBound::stepTimeParts(const Mesh& mesh, const Layout& l, bool recompute) const
{
    return stepTimeParts(mesh, microBatch(mesh, l), l, recompute);
}

StepTimeBound::Seconds StepTimeBound::stepTimeParts(const Mesh& mesh, const MicroBatch& mb, const Layout& l,
                                                     bool recompute) const
{
    const ModelSpec& m = model_.problem().model;
    const double v = l.schedule == PipelineSchedule::Interleaved ? l.virtual_stages : 1;
    const double micro = microBatchesPerStep(l, model_.problem().training);
    const double cheaperMlp = std::min(mb.moe_s, mb.dense_s);
    std::array<double, 3> stage{};  // seconds per micro-batch, at least
    for (size_t i = 0; i < 3; ++i) {
        const double layers = mesh.layers[i], moeLayers = mesh.moe[i];
        const double layersForward =
            layers * mb.projections_s + moeLayers * mb.moe_s + mesh.dense[i] * mb.dense_s + mesh.either[i] * cheaperMlp;
        // Full recomputation repeats its share of the layers' forward (CostModel: recomputed x fwdLayers).
        const double share = recompute ? l.recomputedShare(m.totalLayers(), mesh.stage[i]) : 0.0;
        const double passes = 2 + share;  // forward, backward, the recomputed share of a forward
        // Collectives no overlap option hides: tp's two per layer (three per decoder layer of an
        // encoder-decoder: counted as two), less a MoE layer's MLP pair when it has no shared
        // experts (at most all of an encoder-decoder's), one chunk of tp exposed under
        // tp-comm-overlap; the all-to-all of one micro-batch of m under ep_comm_overlap; the etp
        // gather and scatter; the cp ring's sends (with the attention core they overlap).
        double comm = 0;
        if (mb.tp_call_s > 0) {
            const double withoutTpMlp = m.moe.enabled() && m.moe.shared_experts == 0 ? moeLayers + mesh.either[i] : 0.0;
            const double layerComm = passes * (2.0 * layers - withoutTpMlp) * mb.tp_call_s;
            comm += l.tp_comm_overlap ? layerComm / l.tp : layerComm;
        }
        const double a2a = passes * moeLayers * mb.a2a_s;
        comm += l.ep_comm_overlap && micro > 1 ? a2a / micro : a2a;
        comm += passes * moeLayers * mb.etp_s;
        comm += layers * ((1 + share) * mb.cp_forward_s + mb.cp_backward_s);
        // Backward: 2x the forward's GEMMs (activation and weight gradients).
        stage[i] = 3 * (layersForward + (mesh.stage[i] == l.pp - 1 ? mb.head_s : 0.0)) + share * layersForward + comm;
    }
    // The slowest stage is the cost model's argmax of these three; the bubble's typical stage
    // the middle one, or the mean of the ends.
    const double slowest = std::max({stage[0], stage[1], stage[2]});
    const double typical = mesh.pp > 2 ? stage[2] : 0.5 * (stage[0] + stage[1]);
    const double busy = micro * slowest;
    // (A margin for the rounding of sums taken in another order than the cost model's.)
    return {(busy + (mesh.pp - 1) * typical / v) * (1 - 1e-9), busy * (1 - 1e-9)};
}

double StepTimeBound::stepTime(const Mesh& mesh, const Layout& l) const { return stepTimeParts(mesh, l, true).step_s; }

double StepTimeBound::stepTimeWithoutRecompute(const Mesh& mesh, const Layout& l) const
{
    return stepTimeParts(mesh, l, false).step_s;
}

std::array<double, 3> StepTimeBound::activationBytes(const Mesh& mesh, const Layout& l) const
{
    return activationBytes(mesh, microBatch(mesh, l), l);
}

std::array<double, 3> StepTimeBound::activationBytes(const Mesh& mesh, const MicroBatch& mb, const Layout& l) const
{
    std::array<double, 3> out{};
    if (!activations_bounded_)
        return out;
    const double v = l.schedule == PipelineSchedule::Interleaved ? l.virtual_stages : 1;
    const int micro = microBatchesPerStep(l, model_.problem().training);
    const bool full = l.recompute == Recompute::Full;
    // (first, last, second): the stage's layers from the mesh's first, last and middle entries.
    const std::array<int, 3> index{0, l.pp - 1, 1};
    const bool secondCounts = l.unevenPipeline() && l.pp > 2;
    for (size_t i = 0; i < 3; ++i) {
        if (i == 2 && !secondCounts)
            break;
        const int layers = mesh.layers[i];
        const double recomputed = l.recomputedShare(model_.problem().model.totalLayers(), index[i]);
        const double checkpoints = l.checkpointShare(model_.problem().model.totalLayers(), index[i]);
        // Every layer's outside-tp bytes, or under full recomputation its checkpoints' inputs; the
        // MoE layers' experts' (those full recomputation does not recompute).
        // Recomputed modules (CostModel.cpp): layernorm and mlp discard norm outputs (the norms' inputs,
        // 4 sbh / sp, stay); moe discards the experts' bytes, moe_act their activations (f of the
        // 2 f + f gated). Offloaded layers keep nothing on the device: a share of the stage's.
        const unsigned modules = l.recomputedModules();
        const bool normsOut = (modules & (kRecomputeLayernorm | kRecomputeMlp)) != 0;
        const double perLayer = full ? checkpoints * mb.input_bytes : normsOut ? 2 * mb.input_bytes : mb.outside_bytes;
        const MlpKind mlp = model_.problem().model.mlp;
        const double gated = mlp == MlpKind::SwiGlu || mlp == MlpKind::GeGlu ? 2 : 1;
        const double expertShare = (modules & kRecomputeMoe) ? 0.0 : (modules & kRecomputeMoeAct) ? gated / (gated + 1) : 1.0;
        const double kept = l.offload_activations > 0 && layers > 0
                                ? std::max(0.0, 1.0 - double(l.offload_activations) / layers) : 1.0;
        const double perMicroBatch =
            kept * (layers * perLayer + mesh.moe[i] * mb.expert_bytes * expertShare * (full ? 1 - recomputed : 1.0));
        const int stage = index[i];
        double stored = 0;
        switch (l.schedule) {
        case PipelineSchedule::GPipe: stored = micro * perMicroBatch; break;
        case PipelineSchedule::OneFOneB: stored = std::min(micro, l.pp - stage) * perMicroBatch; break;
        case PipelineSchedule::Interleaved:
            if (micro % l.pp == 0) {
                // The schedule's peak of (micro-batch, chunk) pairs, each chunk a v-th of the layers'.
                std::array<double, 64> chunk;
                const int chunks = std::min(int(v), int(chunk.size()));
                std::fill(chunk.begin(), chunk.begin() + chunks, perMicroBatch / v);
                stored = chunks == int(v) ? peakInFlightBytes(l.schedule, l.pp, stage, micro, chunk.data(), chunks) : 0.0;
            } else {
                stored = std::min(double(micro), double(l.pp - stage) + double(l.pp - 1) / v) * perMicroBatch;
            }
            break;
        }
        out[i] = stored * (1 - 1e-9);
    }
    return out;
}

} // namespace shardscope

namespace shardscope {

StepTimeBound::ZeroTerms StepTimeBound::zeroTerms(const Mesh& mesh, const Layout& l) const
{
    const Problem& p = model_.problem();
    const ModelSpec& m = p.model;
    const CostModelParams& prm = model_.params();
    // Parameters per device of a layer (the weight matrices only: layerStateBytesLowerBound's
    // count in Search.cpp): the attention and the dense MLP or shared experts over tp, the local
    // routed experts (over ep, each over etp) apart, reduced over their own group.
    const double h = m.hidden;
    const double matrices = m.mlp == MlpKind::SwiGlu || m.mlp == MlpKind::GeGlu ? 3.0 : 2.0;
    const double attention = (m.mla.enabled() ? mlaMatrixParams(m) : 2.0 * h * m.qDim() + 2.0 * h * m.kvDim()) / l.tp;
    const double denseLayer = attention + matrices * h * m.ffn_hidden / l.tp;
    const double moeLayer = attention + (m.moe.enabled() ? m.moe.shared_experts * double(m.moe.shared_ffn_hidden) *
                                                               matrices * h / l.tp
                                                         : 0.0);
    const double routed = m.moe.enabled() ? double(m.moe.experts) / l.ep * double(m.expertFfn()) * matrices * h /
                                                l.expertTensorParallel()
                                          : 0.0;
    // The groups (CostModel.cpp, dataParallelGroups): the dense parameters' over dp x cp at stride
    // tp, the experts' over edp at stride ep x etp; ZeRO's shard groups a share of them.
    struct Set {
        double size, shard, replicas;
        GroupPlacement all, sharded, across;
        LinkModel all_link, shard_link, across_link;
    };
    auto place = [&](double size, double shard, double stride) {
        Set set;
        set.size = size;
        set.shard = l.zero_stage > 0 ? std::max(1.0, shard) : 1.0;
        set.replicas = set.size / set.shard;
        set.all_link = model_.linkFor(set.size, stride);
        set.shard_link = model_.linkFor(set.shard, stride);
        set.across_link = model_.linkFor(set.replicas, stride * set.shard);
        set.all = placeGroup(set.size, stride, set.all_link.domain_devices);
        set.sharded = placeGroup(set.shard, stride, set.shard_link.domain_devices);
        set.across = placeGroup(set.replicas, stride * set.shard, set.across_link.domain_devices);
        return set;
    };
    const Set dense = place(double(l.dp) * l.cp, double(l.zeroGroupSize()) * l.cp, l.tp);
    const double edp = l.expertDataParallel();
    const Set experts = m.moe.enabled() ? place(edp, edp * l.zeroGroupSize() / l.dp, double(l.ep) * l.expertTensorParallel())
                                        : Set{1, 1, 1, {}, {}, {}, {}, {}, {}};
    // One set's collectives for `params` parameters: {once a step, per micro-batch}.
    auto traffic = [&](const Set& set, double params) -> std::array<double, 2> {
        if (set.size <= 1 || params <= 0)
            return {0.0, 0.0};
        const double grads = params * grad_bytes_, weights = params * gather_bytes_;
        if (l.zero_stage == 0)
            return {allReduceTime(set.all, grads, set.all_link), 0.0};
        // ZeRO-1 scatters the gradients and gathers the parameters once a step, ZeRO-2 scatters
        // per micro-batch, ZeRO-3 also gathers before every forward and backward; HSDP all-reduces
        // the owned shard across the shard groups once.
        const double scatter = reduceScatterTime(set.sharded, grads, set.shard_link);
        const double gather = allGatherTime(set.sharded, weights, set.shard_link);
        const double across = allReduceTime(set.across, grads / set.shard, set.across_link);
        std::array<double, 2> out{across, 0.0};
        (l.zero_stage >= 2 ? out[1] : out[0]) += scatter;
        if (l.zero_stage == 3)
            out[1] += 2 * gather;
        else
            out[0] += gather;
        return out;
    };
    // The optimizer over the owned shard (its states and gradients read and written at least;
    // CostModel.cpp: the optimizer step, or offloaded the host link and the host's memory).
    const double optimizerShard = l.zero_stage >= 1 ? dense.shard : 1.0, expertShard = experts.shard;
    const double hostLink = model_.hostLinkBytesPerSecondDevice();
    const double perOwned = l.offload == Offload::Optimizer
                                ? (hostLink > 0 ? (grad_bytes_ + weight_bytes_) / hostLink : 0.0) +
                                      (prm.host_memory_bytes_per_second > 0
                                           ? (2 * optimizer_bytes_ + grad_bytes_) / prm.host_memory_bytes_per_second
                                           : 0.0)
                                : (2 * optimizer_bytes_ + grad_bytes_) / model_.hbmBytesPerSecondDevice();
    ZeroTerms out;
    for (size_t i = 0; i < 3; ++i) {
        const double nonExpert = mesh.dense[i] * denseLayer + mesh.moe[i] * moeLayer +
                                 mesh.either[i] * (m.moe.enabled() ? std::min(denseLayer, moeLayer) : denseLayer);
        const double expert = mesh.moe[i] * routed;
        const std::array<double, 2> a = traffic(dense, nonExpert), b = traffic(experts, expert);
        out.once_s[i] = a[0] + b[0];
        out.per_micro_batch_s[i] = a[1] + b[1];
        out.optimizer_s[i] = (nonExpert / optimizerShard + expert / expertShard) * perOwned;
    }
    return out;
}


} // namespace shardscope
