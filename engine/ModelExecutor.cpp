// ModelExecutor: one device's part of the model under tp/sp/pp/ZeRO; see ModelExecutor.h.
// Dimension legend as there.
#include "ModelExecutor.h"

#include "MaskedLm.h"
#include "MoeMlp.h"
#include "OpConventions.h"
#include "Ops.h"
#include "Random.h"
#include "RelativePosition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace shardscope::engine {

namespace {

constexpr double kStat = 4;  // fp32 statistics bytes

// Hands out consecutive regions of a flat buffer; the first pass (null base) counts.
template <class T>
struct Carver {
    T* base = nullptr;
    std::int64_t used = 0;
    T* take(std::int64_t n)
    {
        T* p = base ? base + used : nullptr;
        used += n;
        return p;
    }
};

} // namespace

ShardPlacement placementIn(EmulatedCluster& cluster, int device)
{
    ShardPlacement p;
    p.device = &cluster.device(device);
    p.layout = cluster.layout();
    p.position = cluster.position(device);
    p.groups = cluster.groups(device);
    p.comm = &cluster.communicator();
    // Interleaved: the model's chunks go round the stages, so the last stage's output goes on
    // to stage 0 (and stage 0's chunks but the first receive from the last stage).
    const Layout& l = p.layout;
    const bool ring = l.schedule == PipelineSchedule::Interleaved && l.virtual_stages > 1 && l.pp > 1;
    p.previous_stage = cluster.stageNeighbour(device, ring && p.position.pp == 0 ? l.pp - 1 : -1);
    p.next_stage = cluster.stageNeighbour(device, ring && p.position.pp == l.pp - 1 ? 1 - l.pp : +1);
    return p;
}

ShardPlacement singleDevice(EmulatedDevice& device, const Layout& layout)
{
    ShardPlacement p;
    p.device = &device;
    p.layout = layout;
    return p;
}

FieldErrors validateShardable(const ModelConfig& c, const Layout& l, int micro_batch, const std::string& prefix)
{
    FieldErrors e;
    auto add = [&](const char* field, const std::string& message) { e.push_back({prefix + field, message}); };
    auto s = [](auto v) { return std::to_string(v); };
    if (l.tp < 1 || l.pp < 1 || l.cp < 1)
        return e;
    if (c.heads % l.tp != 0)
        add("tp", s(l.tp) + " does not divide heads " + s(c.heads));
    else if (c.kvHeads() % l.tp != 0)
        add("tp", s(l.tp) + " does not divide kv_heads " + s(c.kvHeads()) +
                      " (the key/value heads are split over tp, as Megatron-LM's query groups)");
    if (c.ffn() % l.tp != 0)
        add("tp", s(l.tp) + " does not divide the MLP size " + s(c.ffn()));
    // Mixture of experts (MoeMlp.h): experts whole on their ep rank (etp = 1), routed copies
    // dispatched over the ep group; what is not executed is refused by name.
    if (c.moe.enabled()) {
        const int ep = std::max(1, l.ep);
        if (c.moe.experts % ep != 0)
            add("ep", s(ep) + " does not divide the " + s(c.moe.experts) + " experts");
        if (c.expertFfn() % l.expertTensorParallel() != 0)
            add("etp", s(l.expertTensorParallel()) + " does not divide the expert size " + s(c.expertFfn()));
        if (c.sharedFfn() % l.tp != 0)
            add("tp", s(l.tp) + " does not divide the shared experts' " + s(c.sharedFfn()) +
                          " columns (split over tp as Megatron-LM's SharedExpertMLP)");
        if (l.tp > 1 && !l.sequence_parallel)
            add("sp", "MoE layers under tp > 1 need sequence parallelism (Megatron-LM's MoELayer): sp=on");
    } else if (l.ep > 1) {
        add("ep", s(l.ep) + ": expert parallelism needs a model with experts");
    }
    if (c.vocab % l.tp != 0)
        add("tp", s(l.tp) + " does not divide vocab " + s(c.vocab) + " (vocab-parallel embedding)");
    if (l.splitAccountsForEnds()) {
        // The embedding / loss counted as a layer (Layout.h): stageLayers gives each stage its
        // count, which one chunk per stage runs as any uneven split; interleaved chunks of
        // unequal sizes are not run here.
        if (l.schedule == PipelineSchedule::Interleaved)
            add(l.account_for_embedding_in_pipeline_split ? "account_for_embedding_in_pipeline_split"
                                                          : "account_for_loss_in_pipeline_split",
                "a pipeline split counting the embedding or loss as a layer runs without interleaving here "
                "(one chunk per stage)");
        else if ((c.layers + l.endLayers()) % l.pp != 0 || l.stageLayers(c.layers, 0) < 1 ||
                 l.stageLayers(c.layers, l.pp - 1) < 1)
            add(l.account_for_embedding_in_pipeline_split ? "account_for_embedding_in_pipeline_split"
                                                          : "account_for_loss_in_pipeline_split",
                "the " + s(c.layers) + " layers + " + s(l.endLayers()) + " (embedding/loss) do not split over pp = " +
                    s(l.pp) + " with a layer on every stage");
    } else if (const PipelineLayerLayout* custom = l.layerLayout()) {
        // An explicit layout (Layout.h) runs with one chunk per stage: stageLayers gives each stage's
        // count, its layers consecutive; its own rules are core/Layout.cpp's, here against this model.
        if (l.schedule == PipelineSchedule::Interleaved || custom->chunkCount() != l.pp)
            add("pipeline_layout", "an explicit pipeline layout runs without interleaving here (one chunk per stage: " +
                                       s(custom->chunkCount()) + " chunks over pp = " + s(l.pp) + ")");
        else if (const std::vector<std::string> problems =
                     custom->problems(l.pp, int(c.layers), c.mtp.enabled() ? c.mtp.layers : 0);
                 !problems.empty())
            add("pipeline_layout", problems.front());
    } else if (l.unevenPipeline()) {
        // Uneven pipeline splits (Layout.h) run with one chunk per stage; the split's own rules
        // are core/Layout.cpp's (validate()).
        const int rest = c.layers - l.first_stage_layers - l.last_stage_layers;
        const int middle = l.pp - (l.first_stage_layers > 0 ? 1 : 0) - (l.last_stage_layers > 0 ? 1 : 0);
        if (l.schedule == PipelineSchedule::Interleaved)
            add("schedule", "an uneven pipeline split runs without interleaving here (one chunk per stage)");
        else if (l.pp < 2 || rest < 0 || (rest > 0) != (middle > 0) || (middle > 0 && rest % middle != 0))
            add("first_stage_layers", "first " + s(l.first_stage_layers) + " and last " + s(l.last_stage_layers) +
                                          " layers do not leave an even split of the " + s(c.layers) +
                                          " layers over the other stages");
    } else if (c.layers % l.pp != 0)
        add("pp", s(l.pp) + " does not divide the " + s(c.layers) + " layers");
    else if (l.schedule == PipelineSchedule::Interleaved && l.virtual_stages > 1 &&
             c.layers % (std::int64_t(l.pp) * l.virtual_stages) != 0)
        add("v", "pp x v = " + s(std::int64_t(l.pp) * l.virtual_stages) + " model chunks do not divide the " +
                     s(c.layers) + " layers");
    // T5 (ModelConfig.h) runs on one stage and without cp, as Megatron-LM trains it: refused by name
    // here, and core's layout rules (core/Layout.cpp validate) refuse them for encoder-decoder models,
    // so the planner's search does not propose them.
    if (c.encoder_decoder && l.pp > 1)
        add("pp", "an encoder-decoder (T5) is executed on one pipeline stage: the encoder output that every "
                  "decoder stage's cross-attention reads would travel with the decoder stages' activations "
                  "(Megatron-LM's encoder-and-decoder schedule), which the engine does not do yet");
    // Ring attention would compute (or skip) the blocks outside the band: not executed, and the
    // validation scaler does not propose it (validation/ScaledCase.cpp).
    if (c.sliding_window.enabled() && l.cp > 1)
        add("cp", "context parallelism with a sliding window is not executed: the ring attention kernels run full "
                  "causal blocks");
    if (c.encoder_decoder && l.cp > 1)
        add("cp", "context parallelism of an encoder-decoder (T5) is not executed: its relative position bias "
                  "and cross-attention are not split over cp ranks");
    // All-to-all CP hands each cp rank heads / cp of a device's query and key/value heads (core's
    // allToAllCpSplitsHeads; Transformer Engine's AttnFuncWithCPAndQKVOA2A asserts the same).
    if (l.cp_comm == CpComm::A2A && l.cp > 1 && c.heads % l.tp == 0 && c.kvHeads() % l.tp == 0 &&
        ((c.heads / l.tp) % l.cp != 0 || (c.kvHeads() / l.tp) % l.cp != 0))
        add("cp_comm", "all-to-all context parallelism needs cp = " + s(l.cp) + " to divide a device's " +
                           s(c.heads / l.tp) + " query and " + s(c.kvHeads() / l.tp) + " key/value heads (heads / tp)");
    // The engine's MoE layers dispatch as Megatron-LM's alltoall dispatcher does (MoeMlp).
    if (l.moe_dispatcher != MoeDispatcher::AllToAll)
        add("moe_dispatcher", std::string("the ") + toString(l.moe_dispatcher) +
                                  " token dispatcher is not executed by the engine (its MoE layers run alltoall)");
    if (l.recompute == Recompute::Full && l.recompute_method == RecomputeMethod::Uniform && l.recompute_layers > 1 &&
        (c.encoder_decoder || c.post_norm))
        add("recompute_layers", "uniform groups of " + s(l.recompute_layers) + " layers recomputed whole in " +
                                    (c.encoder_decoder ? "an encoder-decoder" : "post-norm layers") +
                                    " are not executed here (pre-norm decoder layers are)");
    // Selective recomputation runs every module Megatron-LM names, in pre-norm decoder layers: the
    // attention cores again (core_attn, its default), the norms its TE spec runs on their own
    // (layernorm), the MoE experts' activation (moe_act), the dense MLP (mlp), the whole MoE block
    // (moe), MLA's up projections (mla_up_proj) and the shared experts (shared_experts, on one tp rank).
    if (l.recomputes(kRecomputeSharedExperts) && l.tp > 1)
        add("recompute_modules", "recomputation of shared_experts under tp " + s(l.tp) +
                                     " is not executed here (their collectives run once: one tp rank only)");
    // mla_up_proj rebuilds q, k, v from the latents a device keeps, without the RoPE key's gather
    // under sp again (Megatron keeps its checkpoint's inputs gathered), on one cp rank, and from the
    // kept input norm when q is not compressed.
    if (l.recomputes(kRecomputeMlaUpProj) && c.mla.enabled()) {
        const char* why = l.sequence_parallel && l.tp > 1 ? "sequence parallelism"
                          : l.cp > 1                       ? "context parallelism"
                          : c.mla.q_lora_rank == 0 && l.recomputes(kRecomputeLayernorm)
                              ? "layernorm recomputed too without q compression"
                              : nullptr;
        if (why)
            add("recompute_modules", std::string("recomputation of mla_up_proj with ") + why + " is not executed here");
    }
    if (const unsigned named = l.recomputedModules() & ~unsigned(kRecomputeCoreAttn);
        named != 0 && (c.post_norm || c.encoder_decoder))
        add("recompute_modules", "recomputation of " + recomputeModulesToString(named) + " in " +
                                     (c.encoder_decoder ? "an encoder-decoder's" : "post-norm") +
                                     " layers is not executed here (pre-norm decoder layers only)");
    // Activation offload moves a pre-norm decoder layer's own allocation (Slot::LayerBuffer): not
    // the MoE block's saved state (its own allocations), not fully recomputed layers, one chunk per
    // stage, no cp.
    if (l.offload_activations > 0) {
        const char* why = c.moe.enabled()                     ? "MoE layers (their saved state is the block's own)"
                          : c.encoder_decoder || c.post_norm ? "encoder-decoder and post-norm layers"
                          : l.recompute == Recompute::Full    ? "full recomputation"
                          : l.cp > 1                          ? "context parallelism"
                          : l.schedule == PipelineSchedule::Interleaved && l.virtual_stages > 1
                              ? "the interleaved schedule"
                              : nullptr;
        if (why)
            add("offload_activations", "activation offload to the host (" + s(l.offload_activations) +
                                           " layers) with " + why + " is not executed here");
    }
    // Multi-token prediction (ModelConfig.h) runs on the last stage of a one-chunk pipeline, without cp
    // (Megatron-LM's roll_tensor exchanges the rolled boundary between cp ranks: not executed).
    if (c.mtp.enabled() && l.cp > 1)
        add("cp", "context parallelism with multi-token prediction is not executed (the rolled tokens' boundary "
                  "between cp ranks, Megatron-LM's roll_tensor with cp_group)");
    if (c.mtp.enabled() && l.schedule == PipelineSchedule::Interleaved && l.virtual_stages > 1)
        add("schedule", "multi-token prediction under the interleaved schedule is not executed (one chunk per stage)");
    if (l.cp > 1 && c.seq % (2 * l.cp) != 0)
        add("cp", "2 x cp = " + s(2 * l.cp) + " does not divide the sequence length " + s(c.seq) +
                      " (causal load balancing cuts each sequence into 2 cp chunks, Megatron-LM's)");
    const std::int64_t tokens = std::int64_t(micro_batch) * c.seq / l.cp;  // a device's tokens of a micro-batch
    if (l.sequence_parallel && l.tp > 1 && tokens % l.tp != 0)
        add("sp", "tp " + s(l.tp) + " does not divide the micro-batch's " + s(tokens) + " tokens" +
                      (l.cp > 1 ? " on each cp rank" : ""));
    return e;
}

template <class T>
struct ModelExecutor<T>::Layer {
    T *n1w, *n1b, *qkvw, *qkvb, *aw, *ab, *n2w, *n2b, *fw, *fb, *pw, *pb;  // null where the model has none
    T *qknw, *qknb;  // QK-norm (2 hd each): [q's | k's]
    T *nxw, *nxb, *cqw, *ckvw, *cpw;  // a T5 decoder layer's cross-attention (norm, q, [k | v], projection)
    T *router, *expbias, *ein, *eout, *sin, *sout;  // an MoE layer's block (this ep rank's experts)
    T *mdw, *mqnw, *mqnb, *mkvnw, *mkvnb, *mqw, *mkvw;  // MLA: down, latent norms, q and kv up
    T *mtpn[3], *mtpnb[3], *mtpeh;  // an MTP depth's enorm, hnorm, final norm (weights, biases) and eh_proj
};

template <class T>
struct ModelExecutor<T>::Acts {
    T *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fchg, *res3;  // ln1, res2, ln2, res3: (C, Ns)
    T *n1mean, *n1rstd, *n2mean, *n2rstd;                        // Ns each (means: LayerNorm only)
    // QK-norm: the q and k rows before it ((qdt + kvdt), Nm) and its statistics ((NHt + NKVt) Nm each).
    T *qkpre, *qkmean, *qkrstd;
    // A T5 decoder layer's cross-attention: its norm's output lnx and statistics, q (qdt, Nm),
    // [k | v] of the encoder output (2 kvdt, Nm), probabilities, output (qdt, Nm), residual resx (C, Ns).
    T *lnx, *cq, *ckv, *catt, *catty, *resx, *nxmean, *nxrstd;
    // MLA: the down product's output (mDown, Ns) [q latent | kv latent | k_pe], the latent norms'
    // outputs (Q, Ns) and (R, Ns) with their statistics; qkv holds the assembled [q | k | v].
    T *mdown, *mqn, *mkvn, *mqmean, *mqrstd, *mkvmean, *mkvrstd;
};

// One (micro-batch, chunk) in flight: its saved activations and tokens.
template <class T>
struct ModelExecutor<T>::Slot {
    DeviceBuffer buffer;
    int chunk = 0;       // the local chunk: local layers [chunk Lc, (chunk+1) Lc)
    T* input = nullptr;  // (C, Ns): the embedding (the first chunk) or what the previous device sent
    std::vector<Acts> layers;  // Lc
    T *lnf = nullptr, *lnfmean = nullptr, *lnfrstd = nullptr, *probs = nullptr, *losses = nullptr;
    std::vector<int> inputs, targets;  // Nm each, host
    // T5: the encoder output (its final norm's, (C, Ns)) with statistics, the decoder's embedding
    // (C, Ns) and its input tokens (Nm, host).
    T *encOut = nullptr, *encmean = nullptr, *encrstd = nullptr, *decInput = nullptr;
    std::vector<int> decInputs;
    // BERT-style encoders: the embedding norm's input (C, Ns) and statistics; the masked-LM
    // transform's dense output, GeLU output (its norm's input) and norm output (C, Ns each) with
    // statistics; the pooler's first tokens and tanh output (C, mb), the next-sentence softmax
    // (2, mb, fp32) and losses (mb).
    T *embSum = nullptr, *embMean = nullptr, *embRstd = nullptr;
    T *mlmPre = nullptr, *mlmAct = nullptr, *mlmOut = nullptr, *mlmMean = nullptr, *mlmRstd = nullptr;
    T *poolIn = nullptr, *pooled = nullptr, *nspProbs = nullptr, *nspLosses = nullptr;
    std::vector<int> tokenTypes, nextSentence;  // Nm, mb
    std::vector<MoeSaved<T>> moe;  // Lc (+ D): each MoE layer's saved state (its own allocations)
    // Multi-token prediction (the model's last chunk): per depth the rolled embedding e (C, Ns),
    // eh_proj's input [enorm(e) | hnorm(h)] (2C, Ns), its output (the depth layer's input, C x Ns),
    // the depth's final-norm output (C, Ns), the norms' statistics, the head's softmax (Vt, Nm, fp32)
    // and losses (Nm), and the rolled tokens and targets (Nm, host).
    struct Mtp {
        T *emb, *cat, *x, *out, *emean, *erstd, *hmean, *hrstd, *fmean, *frstd, *probs, *losses;
        std::vector<int> inputs, targets;
    };
    std::vector<Mtp> mtp;
    // A pre-norm decoder layer's kept tensors, its input first, then its statistics, in an
    // allocation of its own (base non-null while on the device), made before the layer before it
    // writes that input and freed after the layer's backward, as autograd frees a layer's saved
    // tensors; an offloaded layer's (the chunk's first offloadedLayers()) are in the host's memory
    // between its forward and its backward. Their sizes (from the counting carve) and the copies'
    // completion times on the device clock.
    struct LayerBuffer {
        DeviceBuffer device, host;
        T* base = nullptr;
        std::int64_t tensors = 0, stats = 0;
        double done_s = 0;
    };
    std::vector<LayerBuffer> own;
};

template <class T>
struct ModelExecutor<T>::Work {
    T *gath, *partial, *dres, *dresFull, *dfch, *dfchg, *dqkv, *datty, *datt;
    T* stageOut;  // (C, Ns): a non-last stage's output, sent on and not needed by its backward
    T *encFull = nullptr, *dencFull = nullptr;  // T5: the gathered encoder output (SP), its gradient (C, Nm)
    T* dpost;     // (C, Ns): post-norm's and the encoder head's norm gradients (null if none)
    T *dpool, *dpoolIn;  // (C, mb) each: the pooler's gradients (null without one)
    // MLA: the up products' outputs (and their gradients), the RoPE key (and its gradient), the
    // gathered latents (SP), the latents' gradients and the down product's output gradient.
    T *mq = nullptr, *mkv = nullptr, *mpe = nullptr, *mqg = nullptr, *mkvg = nullptr, *mdq = nullptr,
      *mdkv = nullptr, *mddown = nullptr;
    // Multi-token prediction: the norms' outputs (or their gradients) (C, Ns each), the gradient into
    // the previous depth's hidden state (C, Ns), eh_proj's gathered input (2C, Nm, SP), its input
    // gradient (2C, Nm) and this rank's output-gradient rows (C/tp, Nm; tp > 1).
    T *mtpE = nullptr, *mtpH = nullptr, *mtpCarry = nullptr, *mtpCatFull = nullptr, *mtpDcat = nullptr,
      *mtpDy = nullptr;
};

// ---------------------------------------------------------------- construction

template <class T>
void ModelExecutor<T>::buildTables()
{
    const std::vector<ParameterTensor> full = parameterTable(cfg_);
    const std::int64_t C = C_, r = tpRank_, qd = cfg_.qDim(), kvd = cfg_.kvDim(), F = cfg_.ffn(),
                       vd = cfg_.valueDim();
    const std::int64_t qdt = qdt_, kvdt = kvdt_, Ft = Ft_, Vt = Vt_;
    auto addUnit = [&](std::string name) {
        ShardUnit u;
        u.name = std::move(name);
        u.offset = P_;
        u.first_tensor = int(tensors_.size());
        units_.push_back(u);
        return int(units_.size()) - 1;
    };
    auto addTensor = [&](const ParameterTensor& f, std::int64_t count, bool replicated, std::vector<ParameterRun> runs) {
        ShardTensor t;
        t.name = f.name;
        t.role = f.role;
        t.offset = P_;
        t.count = count;
        t.decay = f.decay;
        t.tp_replicated = replicated;
        // Under SP the norms saw only this rank's tokens: their gradients are partial sums.
        // (So did the masked-LM transform's dense layer, replicated and run on the token shard.)
        // QK-norm's weights saw only this rank's heads: partial sums under any tp, summed with
        // the SP norms' in one all-reduce (Megatron-LM's q_layernorm / k_layernorm gradients,
        // megatron/core/distributed/finalize_model_grads.py @ d98e8a6).
        t.sp_partial = (sp_ && (f.role == TensorRole::NormWeight || f.role == TensorRole::NormBias ||
                                f.role == TensorRole::EncoderNormWeight || f.role == TensorRole::EncoderNormBias ||
                                f.role == TensorRole::CrossNormWeight || f.role == TensorRole::CrossNormBias ||
                                f.role == TensorRole::MlmDenseWeight || f.role == TensorRole::MlmDenseBias)) ||
                       (tp_ > 1 && (f.role == TensorRole::QkNormWeight || f.role == TensorRole::QkNormBias)) ||
                       // The router ran on this rank's token shard (Megatron marks the router weight
                       // sequence_parallel, router.py reset_parameters @ d98e8a64); the shared experts
                       // are split over tp (SharedExpertMLP), their gradients whole.
                       (sp_ && f.role == TensorRole::RouterWeight) ||
                       // MLA's down product and latent norms run on the token shard, duplicated over tp
                       // (Megatron's 'duplicated' TELinear marks its weight sequence_parallel,
                       // megatron/core/extensions/transformer_engine.py @ d98e8a64).
                       (sp_ && (f.role == TensorRole::MlaDownWeight || f.role == TensorRole::MlaNormWeight ||
                                f.role == TensorRole::MlaNormBias)) ||
                       // MTP's enorm, hnorm and final norm run on the token shard (Megatron's TENorm
                       // with sequence_parallel: multi_token_prediction.py @ d98e8a64).
                       (sp_ && (f.role == TensorRole::MtpNormWeight || f.role == TensorRole::MtpNormBias));
        t.expert = expertTensor(f.role);
        t.unit = int(units_.size()) - 1;
        t.runs = std::move(runs);
        tensors_.push_back(std::move(t));
        units_.back().tensors += 1;
        units_.back().count += count;
        P_ += count;
    };
    auto whole = [&](const ParameterTensor& f) { addTensor(f, f.count, true, {{f.offset, 0, f.count}}); };
    auto find = [&](TensorRole role, int layer) -> const ParameterTensor* {
        for (const ParameterTensor& t : full)
            if (t.role == role && t.layer == layer)
                return &t;
        return nullptr;
    };
    // The modules outside the layers have several norms: those are found by name.
    auto named = [&](const char* name) -> const ParameterTensor* {
        for (const ParameterTensor& t : full)
            if (t.name == name)
                return &t;
        return nullptr;
    };
    // Vocabulary rows [r Vt, (r+1) Vt) of a (C, V) table: one contiguous run of columns.
    auto vocabRows = [&](const ParameterTensor& f, bool tiedCopy) {
        addTensor(f, C * Vt, tp_ == 1, {{f.offset + r * Vt * C, 0, C * Vt}});
        tensors_.back().tied_copy = tiedCopy;
        tensors_.back().word_embedding = f.role == TensorRole::TokenEmbedding;
    };
    // The modules outside the layers form one unit, the root (FSDP wraps them so: a tied
    // embedding and head must share a unit), gathered once for a forward and once for a backward.
    // Under ZeRO-2/3 a word embedding tied across pipeline stages is a unit of its own on both
    // end stages, so that their owned chunks of it line up for the embedding all-reduce.
    // With multi-token prediction the last stage embeds the rolled tokens with a copy of wte, tied
    // or not (Megatron-LM's GPTModel builds the embedding where mtp_process; its gradient is
    // all-reduced over the embedding group: finalize_model_grads.py _allreduce_word_embedding_grads
    // with mtp_num_layers, @ d98e8a64).
    const bool ends = stage_ == 0 || stage_ == stages_ - 1;
    const bool sharedWte = cfg_.tied_embeddings || cfg_.mtp.enabled();
    const bool separate = ends && sharedWte && stages_ > 1 && zero_ >= 2;
    if (ends && !separate)
        rootUnit_ = addUnit("root");
    if (stage_ == 0) {
        if (separate)
            embedUnit_ = addUnit("embedding");
        wteUnit_ = separate ? embedUnit_ : rootUnit_;
        wteAt_ = units_.back().count;
        vocabRows(*find(TensorRole::TokenEmbedding, -1), false);
        if (const ParameterTensor* wpe = find(TensorRole::PositionEmbedding, -1)) {
            if (separate)
                rootUnit_ = addUnit("root");
            wpeAt_ = units_.back().count;
            whole(*wpe);
        }
        if (encDec_) {  // T5: the bias tables (this rank's heads' rows) and the encoder's final norm
            const std::int64_t rows = std::int64_t(NHt_) * cfg_.relative_buckets;
            for (const int stack : {-1, -2}) {
                const ParameterTensor& f = *find(TensorRole::RelativeBias, stack);
                (stack == -1 ? encRelAt_ : decRelAt_) = units_.back().count;
                addTensor(f, rows, tp_ == 1, {{f.offset + r * rows, 0, rows}});
            }
            encLnfAt_ = units_.back().count;
            whole(*find(TensorRole::EncoderNormWeight, -1));
            if (const ParameterTensor* b = find(TensorRole::EncoderNormBias, -1))
                whole(*b);
        }
        // BERT: token types and the embedding norm, in the root unit with the positions.
        if ((cfg_.token_types > 0 || cfg_.embedding_norm) && separate && rootUnit_ < 0)
            rootUnit_ = addUnit("root");
        if (const ParameterTensor* wtt = find(TensorRole::TokenTypeEmbedding, -1)) {
            wttAt_ = units_.back().count;
            whole(*wtt);
        }
        if (const ParameterTensor* w = named("embnw")) {
            embNormAt_ = units_.back().count;
            whole(*w);
            if (const ParameterTensor* b = named("embnb"))
                whole(*b);
        }
    }
    if (stage_ == stages_ - 1) {
        if (separate)
            rootUnit_ = addUnit("root");
        if (const ParameterTensor* w = named("lnfw")) {
            lnfAt_ = units_.back().count;
            whole(*w);
            if (const ParameterTensor* b = named("lnfb"))
                whole(*b);
        }
        // BERT: the pooler, the masked-LM transform with its norm and output bias (vocabulary
        // rows, as the decoder it is added to), the next-sentence head.
        if (const ParameterTensor* w = find(TensorRole::PoolerWeight, -1)) {
            poolAt_ = units_.back().count;
            whole(*w);
            whole(*find(TensorRole::PoolerBias, -1));
        }
        if (const ParameterTensor* w = find(TensorRole::MlmDenseWeight, -1)) {
            mlmAt_ = units_.back().count;
            whole(*w);
            whole(*find(TensorRole::MlmDenseBias, -1));
            mlmNormAt_ = units_.back().count;
            whole(*named("mlmnw"));
            if (const ParameterTensor* b = named("mlmnb"))
                whole(*b);
            const ParameterTensor& bias = *find(TensorRole::MlmOutputBias, -1);
            mlmBiasAt_ = units_.back().count;
            addTensor(bias, Vt, tp_ == 1, {{bias.offset + r * Vt, 0, Vt}});
        }
        if (const ParameterTensor* w = find(TensorRole::NspWeight, -1)) {
            nspAt_ = units_.back().count;
            whole(*w);
            whole(*find(TensorRole::NspBias, -1));
        }
        headUnit_ = rootUnit_;
        if (!cfg_.tied_embeddings) {
            headAt_ = units_.back().count;
            vocabRows(*find(TensorRole::LmHead, -1), false);
            if (cfg_.mtp.enabled() && stages_ > 1) {  // MTP's copy of wte
                if (separate)
                    embedUnit_ = addUnit("embedding");
                wteUnit_ = separate ? embedUnit_ : rootUnit_;
                wteAt_ = units_.back().count;
                vocabRows(*find(TensorRole::TokenEmbedding, -1), true);
            }
        } else if (stages_ > 1) {
            if (separate)
                headUnit_ = embedUnit_ = addUnit("embedding");
            headAt_ = units_.back().count;
            vocabRows(*find(TensorRole::TokenEmbedding, -1), true);
            wteUnit_ = headUnit_;  // MTP embeds with it too
            wteAt_ = headAt_;
        } else {
            headAt_ = wteAt_;
        }
    }
    // The layer units, in local order: chunk j (the model's chunk j pp + s) holds layers
    // [(j pp + s) Lc, (j pp + s + 1) Lc); local layer j Lc + i is unit layerUnits_[j Lc + i].
    // An MoE layer's routed experts form a unit of their own after it ("h3.experts"), sharded over
    // the expert-data-parallel group: Megatron-LM's expert_parallel_buffers, whose gradients are
    // reduced and whose distributed-optimizer state is sharded over intra_expt_dp_group
    // (megatron/core/distributed/distributed_data_parallel.py @ d98e8a64).
    // The MTP depths' layers (their norms and eh_proj with them) follow as local layers Ls + d, model
    // layers L + d, in units "mtp<d>".
    layerUnits_.assign(size_t(Ls_ + D_), -1);
    expertUnits_.assign(size_t(Ls_ + D_), -1);
    for (int k = 0; k < Ls_ + D_; ++k) {
        const int l = modelLayerOf(k);
        std::string name = k < Ls_ ? "h" : "mtp";  // built by appending: GCC 12 warns (-Wrestrict) on "h" + to_string
        name += std::to_string(k < Ls_ ? l : k - Ls_);
        layerUnits_[size_t(k)] = addUnit(name);
        // The layer's tensors in the model's order, its routed experts' last (in their own unit).
        std::vector<const ParameterTensor*> order;
        for (const bool experts : {false, true})
            for (const ParameterTensor& t : full)
                if (t.layer == l && expertTensor(t.role) == experts)
                    order.push_back(&t);
        for (const ParameterTensor* tensor : order) {
            const ParameterTensor& f = *tensor;
            if (expertTensor(f.role) && expertUnits_[size_t(k)] < 0) {
                expertUnits_[size_t(k)] = addUnit(name + ".experts");
                units_.back().expert = true;
            }
            std::vector<ParameterRun> runs;
            switch (f.role) {
            case TensorRole::QkvWeight:  // columns of this rank's q heads, k heads, v heads
            case TensorRole::QkvBias: {
                const std::int64_t rows = f.role == TensorRole::QkvWeight ? C : 1;
                runs.push_back({f.offset + r * qdt * rows, 0, qdt * rows});
                runs.push_back({f.offset + (qd + r * kvdt) * rows, qdt * rows, kvdt * rows});
                runs.push_back({f.offset + (qd + kvd + r * kvdt) * rows, (qdt + kvdt) * rows, kvdt * rows});
                addTensor(f, (qdt + 2 * kvdt) * rows, tp_ == 1, runs);
                break;
            }
            case TensorRole::CrossQWeight:  // T5: columns of this rank's query heads
                runs.push_back({f.offset + r * qdt * C, 0, qdt * C});
                addTensor(f, qdt * C, tp_ == 1, runs);
                break;
            case TensorRole::CrossKvWeight:  // T5: columns of this rank's kv heads, of k and of v
                runs.push_back({f.offset + r * kvdt * C, 0, kvdt * C});
                runs.push_back({f.offset + (kvd + r * kvdt) * C, kvdt * C, kvdt * C});
                addTensor(f, 2 * kvdt * C, tp_ == 1, runs);
                break;
            case TensorRole::CrossProjWeight:
            case TensorRole::AttnProjWeight: {  // input rows [r qdt, ...) of every output column
                const std::int64_t in = f.role == TensorRole::AttnProjWeight ? vd : qd;
                for (std::int64_t j = 0; j < C; ++j)
                    runs.push_back({f.offset + j * in + r * qdt, j * qdt, qdt});
                addTensor(f, qdt * C, tp_ == 1, runs);
                break;
            }
            case TensorRole::MlaQUpWeight:   // MLA's up products: the columns of this rank's heads
            case TensorRole::MlaKvUpWeight: {
                const std::int64_t inRows = f.role == TensorRole::MlaQUpWeight ? mQin_ : mR_;
                const std::int64_t cols = f.role == TensorRole::MlaQUpWeight ? mQup_ : mKvup_;
                runs.push_back({f.offset + r * cols * inRows, 0, cols * inRows});
                addTensor(f, cols * inRows, tp_ == 1, runs);
                break;
            }
            case TensorRole::MlpInWeight:  // columns [r Ft, ...) of the gate and of up
            case TensorRole::MlpInBias: {
                const std::int64_t rows = f.role == TensorRole::MlpInWeight ? C : 1;
                runs.push_back({f.offset + r * Ft * rows, 0, Ft * rows});
                if (cfg_.gated())
                    runs.push_back({f.offset + (F + r * Ft) * rows, Ft * rows, Ft * rows});
                addTensor(f, std::int64_t(runs.size()) * Ft * rows, tp_ == 1, runs);
                break;
            }
            case TensorRole::MlpOutWeight:
                for (std::int64_t j = 0; j < C; ++j)
                    runs.push_back({f.offset + j * F + r * Ft, j * Ft, Ft});
                addTensor(f, Ft * C, tp_ == 1, runs);
                break;
            // The shared experts, a tp-split MLP (Megatron's SharedExpertMLP): columns [r Fst, ...)
            // of gate and of up, the matching rows of the output.
            case TensorRole::SharedInWeight: {
                const std::int64_t Fs = cfg_.sharedFfn(), Fst = Fs / tp_;
                runs.push_back({f.offset + r * Fst * C, 0, Fst * C});
                if (cfg_.gated())
                    runs.push_back({f.offset + (Fs + r * Fst) * C, Fst * C, Fst * C});
                addTensor(f, std::int64_t(runs.size()) * Fst * C, tp_ == 1, runs);
                break;
            }
            case TensorRole::SharedOutWeight: {
                const std::int64_t Fs = cfg_.sharedFfn(), Fst = Fs / tp_;
                for (std::int64_t j = 0; j < C; ++j)
                    runs.push_back({f.offset + j * Fs + r * Fst, j * Fst, Fst});
                addTensor(f, Fst * C, tp_ == 1, runs);
                break;
            }
            case TensorRole::ExpertInWeight:  // this ep rank's experts [ep_rank El, ...), each's etp slice:
            case TensorRole::ExpertOutWeight: {  // W_in's columns of gate and up, W_out's matching rows
                const std::int64_t Fe = cfg_.expertFfn(), Fl = Fe / etp_, gate = cfg_.gated() ? 2 : 1, t = etpRank_;
                const bool in = f.role == TensorRole::ExpertInWeight;
                const std::int64_t block = in ? C * gate * Fe : Fe * C, local = in ? C * gate * Fl : Fl * C;
                for (std::int64_t le = 0; le < El_; ++le) {
                    const std::int64_t from = f.offset + (std::int64_t(epRank_) * El_ + le) * block, to = le * local;
                    if (in)
                        for (std::int64_t h = 0; h < gate; ++h)  // [gate | up]
                            runs.push_back({from + (h * Fe + t * Fl) * C, to + h * Fl * C, Fl * C});
                    else
                        for (std::int64_t j = 0; j < C; ++j)
                            runs.push_back({from + j * Fe + t * Fl, to + j * Fl, Fl});
                }
                addTensor(f, El_ * local, false, runs);
                break;
            }
            case TensorRole::MtpProjWeight:  // eh_proj, column-parallel: output columns [r C/tp, ...)
                runs.push_back({f.offset + r * (C / tp_) * 2 * C, 0, (C / tp_) * 2 * C});
                addTensor(f, (C / tp_) * 2 * C, tp_ == 1, runs);
                break;
            default:  // norms, and the biases of the row-split products: whole on every rank
                whole(f);
            }
        }
    }
    // ZeRO chunks: member k of the unit's shard group (the experts': edp) owns
    // [count k / g, count (k+1) / g) of each unit.
    S_ = 0;
    for (ShardUnit& u : units_) {
        const int g = zero_ > 0 ? groupSize(shardGroupOf(u)) : 1, rank = zero_ > 0 ? shardRankOf(u) : 0;
        u.chunk_begin = std::int64_t(CommGroup::chunkBegin(std::size_t(u.count), g, rank));
        u.chunk_end = std::int64_t(CommGroup::chunkBegin(std::size_t(u.count), g, rank + 1));
        u.shard_offset = zero_ > 0 ? S_ : u.offset;
        S_ += u.chunk_end - u.chunk_begin;
    }
    if (zero_ == 0)
        S_ = P_;
}

template <class T>
std::vector<T> initialParameters(const ModelConfig& cfg, const ExecutorOptions& opts)
{
    std::vector<T> w(size_t(parameterCount(cfg)));
    initializeParameters<T>(parameterTable(cfg), opts.seed, opts.init_std, cfg.layers, w.data());
    return w;
}

template std::vector<float> initialParameters<float>(const ModelConfig&, const ExecutorOptions&);
template std::vector<double> initialParameters<double>(const ModelConfig&, const ExecutorOptions&);

template <class T>
ModelExecutor<T>::ModelExecutor(const ModelConfig& config, const ExecutorOptions& options,
                                const ShardPlacement& placement)
    : cfg_(config), opts_(options), place_(placement), dev_(*placement.device), k_(dev_, options.precision),
      groups_(place_.groups), id_(placement.device->id())
{
    if (FieldErrors e = validate(cfg_); !e.empty())
        throw InputError(e);
    const Layout& l = place_.layout;
    if (FieldErrors e = validateShardable(cfg_, l, opts_.micro_batch); !e.empty())
        throw InputError(e);
    if (options.precision != PrecisionMode::FP32 && !std::is_same_v<T, float>)
        throw std::invalid_argument("ModelExecutor: the bf16 modes are emulated on float only");
    if (!std::is_same_v<T, float> && l.pp > 1)
        throw std::invalid_argument("ModelExecutor: the double instantiation (gradient checks) has no pipeline");
    if (!std::is_same_v<T, float> && l.cp > 1)
        throw std::invalid_argument("ModelExecutor: the double instantiation (gradient checks) has no context parallelism");
    const MeshPosition& pos = place_.position;
    tp_ = l.tp;
    tpRank_ = pos.tp;
    stage_ = pos.pp;
    stages_ = l.pp;
    cp_ = l.cp;
    cpRank_ = pos.cp;
    dpRank_ = pos.dp * cp_ + pos.cp;  // in the dp x cp gradient group (Cluster.h)
    zero_ = l.zero_stage;
    recompute_ = l.recompute;
    {
        const unsigned modules = l.recomputedModules();
        // (The post-norm and encoder-decoder layers recompute their attention cores under selective
        // recomputation whatever the modules: validate() refuses the other modules there.)
        rerunCore_ = l.recompute == Recompute::Selective &&
                     ((modules & kRecomputeCoreAttn) != 0 || cfg_.post_norm || cfg_.encoder_decoder);
        rebuildNorms_ = (modules & kRecomputeLayernorm) != 0;
        rebuildMlp_ = (modules & kRecomputeMlp) != 0;
        rebuildMoe_ = (modules & kRecomputeMoe) != 0;
        rebuildUpProj_ = (modules & kRecomputeMlaUpProj) != 0;
    }
    blockLayers_ =
        l.recompute == Recompute::Full && l.recompute_method == RecomputeMethod::Block ? l.recompute_layers : 0;
    const int g = zero_ > 0 ? l.zeroGroupSize() * cp_ : 1;  // the shard group spans g x cp
    shardRank_ = zero_ > 0 ? dpRank_ % g : 0;
    replicaIndex_ = zero_ > 0 ? dpRank_ / g : dpRank_;
    sp_ = l.sequence_parallel && tp_ > 1;
    e_ = k_.elementBytes();
    const bool fp32Grads = options.precision == PrecisionMode::BF16Mixed && options.fp32_gradients;
    g_ = fp32Grads ? 4.0 : e_;
    k_.setGradientBytes(g_);
    roundGrads_ = !fp32Grads;
    if (cfg_.moe.enabled()) {
        // Megatron's expert grid per stage (etp = 1): ep rank = stage rank % ep, the expert-data-
        // parallel rank = stage rank / ep (Cluster.h); one device: rank 0 of each.
        const int ep = std::max(1, l.ep);
        if (ep > 1 && !groups_.ep)
            throw std::invalid_argument("ModelExecutor: ep > 1 needs the cluster's ep group");
        epRank_ = groups_.ep ? groups_.ep->rankOf(id_) : 0;
        etp_ = groups_.etp ? groups_.etp->size() : 1;
        if (l.expertTensorParallel() > 1 && etp_ != l.expertTensorParallel())
            throw std::invalid_argument("ModelExecutor: etp > 1 needs the cluster's etp group");
        etpRank_ = groups_.etp ? groups_.etp->rankOf(id_) : 0;
        edpRank_ = groups_.edp ? groups_.edp->rankOf(id_) : 0;
        edpShardRank_ = groups_.edp_shard ? groups_.edp_shard->rankOf(id_) : 0;
        El_ = cfg_.moe.experts / ep;
        routed_.assign(size_t(cfg_.moe.experts), 0);
    }
    C_ = cfg_.hidden;
    V_ = cfg_.vocab;
    T_ = cfg_.seq;
    L_ = cfg_.layers;
    hd_ = cfg_.headDim();
    NHt_ = cfg_.heads / tp_;
    NKVt_ = cfg_.kvHeads() / tp_;
    mla_ = cfg_.mla.enabled();
    const int vd = mla_ ? cfg_.mla.v_head_dim : hd_;
    qdt_ = NHt_ * vd;
    kvdt_ = NKVt_ * hd_;
    qRows_ = std::int64_t(NHt_) * hd_;
    kvRows_ = kvdt_ + std::int64_t(NKVt_) * vd;
    if (mla_) {
        const MlaConfig& a = cfg_.mla;
        mQ_ = a.q_lora_rank;
        mR_ = a.kv_lora_rank;
        mP_ = a.qk_rope_head_dim;
        mN_ = a.qk_nope_head_dim;
        mV_ = a.v_head_dim;
        mDown_ = a.downRows();
        mQin_ = mQ_ > 0 ? mQ_ : cfg_.hidden;
        mQup_ = std::int64_t(NHt_) * (mN_ + mP_);
        mKvup_ = std::int64_t(NHt_) * (mN_ + mV_);
    }
    Ft_ = cfg_.ffn() / tp_;
    Fin_ = cfg_.gated() ? 2 * Ft_ : Ft_;
    Vt_ = V_ / tp_;
    qkvRows_ = qRows_ + kvRows_;
    mb_ = opts_.micro_batch;
    Tl_ = T_ / cp_;
    Nm_ = std::int64_t(mb_) * Tl_;
    chunks_ = l.schedule == PipelineSchedule::Interleaved ? std::max(1, l.virtual_stages) : 1;
    Ls_ = l.stageLayers(L_, stage_);  // L / pp, or this stage's count of an uneven split
    firstLayer_ = l.stageFirstLayer(L_, stage_);
    Lc_ = Ls_ / chunks_;
    D_ = stage_ == stages_ - 1 ? cfg_.mtp.layers : 0;  // the MTP depths run on the last stage
    encDec_ = cfg_.encoder_decoder;
    if (encDec_) {  // one stage (validateShardable): the encoder's layers, then the decoder's
        Lenc_ = cfg_.layers;
        Ls_ = Lc_ = cfg_.totalLayers();
        encBuckets_ = relativePositionBuckets(T_, T_, true, cfg_.relative_buckets, cfg_.relative_max_distance);
        decBuckets_ = relativePositionBuckets(T_, T_, false, cfg_.relative_buckets, cfg_.relative_max_distance);
    }
    Ns_ = sp_ ? Nm_ / tp_ : Nm_;
    // Each cp rank's tokens of a sequence: chunks r and 2cp-1-r of 2cp (Megatron-LM
    // megatron/core/utils.py _get_batch_on_this_cp_rank_per_sequence_balancing @ d98e8a6).
    cpPositions_.assign(size_t(cp_), {});
    for (int r = 0; r < cp_; ++r) {
        std::vector<int>& p = cpPositions_[size_t(r)];
        if (cp_ == 1) {
            for (int t = 0; t < T_; ++t)
                p.push_back(t);
            continue;
        }
        const int chunk = T_ / (2 * cp_);
        for (int c : {r, 2 * cp_ - 1 - r})
            for (int j = 0; j < chunk; ++j)
                p.push_back(c * chunk + j);
    }
    positions_.resize(size_t(Nm_));
    for (std::int64_t n = 0; n < Nm_; ++n)
        positions_[size_t(n)] = cpPositions_[size_t(cpRank_)][size_t(n % Tl_)];
    if (cp_ > 1) {
        if (!groups_.cp)
            throw std::invalid_argument("ModelExecutor: cp > 1 needs the cluster's cp group");
        const std::vector<int> ring = groups_.cp->memberIds();
        cpNext_ = ring[size_t((cpRank_ + 1) % cp_)];
        cpPrev_ = ring[size_t((cpRank_ + cp_ - 1) % cp_)];
        cpA2a_ = l.cp_comm == CpComm::A2A;
        // All-to-all CP: cp rank j's rows of q, k and v, and of the output (heads / cp of each).
        const std::int64_t hq = NHt_ / cp_, hkv = NKVt_ / cp_, vd = mla_ ? mV_ : hd_;
        heads_.qkvSplit[0] = {0, hq * hd_};
        heads_.qkvSplit[1] = {qRows_, hkv * hd_};
        heads_.qkvSplit[2] = {qRows_ + kvdt_, hkv * vd};
        heads_.outSplit = {0, hq * vd};
    }
    buildTables();
    if (cfg_.moe.enabled()) {
        MoeShape shape;
        shape.hidden = C_;
        shape.ffn = cfg_.expertFfn();
        shape.shared_ffn = cfg_.sharedFfn();
        shape.mlp = cfg_.mlp;
        const MoeRouter kind = cfg_.moe.router;
        shape.router.experts = cfg_.moe.experts;
        shape.router.top_k = cfg_.moe.top_k;
        shape.router.score =
            kind == MoeRouter::Sigmoid || kind == MoeRouter::SigmoidNorm ? RouterScore::Sigmoid : RouterScore::Softmax;
        shape.router.normalize = kind == MoeRouter::SoftmaxNorm || kind == MoeRouter::SigmoidNorm;
        shape.router.scaling = cfg_.moe.routed_scaling > 0 ? cfg_.moe.routed_scaling : 1.0;
        shape.router.groups = cfg_.moe.expert_groups;
        shape.router.group_top_k = cfg_.moe.group_top_k;
        shape.aux_loss_coeff = cfg_.moe.aux_loss_coeff;
        shape.capacity_factor = cfg_.moe.capacity_factor;
        shape.recompute_activation = (l.recomputedModules() & kRecomputeMoeAct) != 0;
        shape.recompute_shared = (l.recomputedModules() & kRecomputeSharedExperts) != 0;
        MoeParallel par;
        par.ep = groupSize(groups_.ep) > 1 ? groups_.ep : nullptr;
        par.ep_rank = epRank_;
        par.etp = groups_.etp;
        par.etp_rank = etpRank_;
        par.tpep = groups_.tpep;
        if (sp_) {  // the micro-batch's tokens are split over tp (sequence parallel) and cp
            par.token_groups[0] = groups_.tp;
            par.token_ranks[0] = tpRank_;
            par.shared_tp = groups_.tp;  // the shared experts split over tp (SharedExpertMLP)
            par.shared_tp_rank = tpRank_;
        }
        if (cp_ > 1) {
            par.token_groups[1] = groups_.cp;
            par.token_ranks[1] = cpRank_;
        }
        par.element_bytes = e_;
        moe_ = std::make_unique<MoeMlp<T>>(k_, shape, par);
    }

    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, att = std::int64_t(NHt_) * T_ * Nm;
    const std::int64_t normStats = cfg_.layerNorm() ? 2 * Ns : Ns;
    DeviceAllocator& alloc = dev_.allocator();
    const std::int64_t wCount = zero_ >= 3 ? S_ : P_, gCount = zero_ >= 2 ? S_ : P_;
    const bool master = opts_.precision == PrecisionMode::BF16Mixed;
    const std::size_t hb = sizeof(T);
    weights_ = alloc.allocate(MemoryCategory::Weights, double(wCount) * e_, size_t(wCount), hb);
    grads_ = alloc.allocate(MemoryCategory::Gradients, double(gCount) * g_, size_t(gCount), hb);
    // Optimizer offload (ZeRO-Offload, Megatron-LM's --optimizer-cpu-offload): the states live in
    // the host's memory; each step sends the owned gradients down and the updated weights up.
    offload_ = l.offload == Offload::Optimizer;
    if (offload_ && (!(dev_.profile().host_link_bytes_per_second > 0) || !(dev_.profile().host_memory_bytes_per_second > 0)))
        throw InputError("layout.offload: " + dev_.label() +
                         " has no host link or host memory bandwidth to offload the optimizer to");
    // Activation offload (Megatron-LM's --cpu-offloading-num-layers on Transformer Engine's
    // cpu_offload): the first N layers of the chunk keep their tensors in the host's memory.
    offloadActivations_ = std::min(l.offload_activations, Lc_);
    if (offloadActivations_ > 0 && !(dev_.profile().host_link_bytes_per_second > 0))
        throw InputError("layout.offload_activations: " + dev_.label() + " has no host link to offload activations to");
    optimizer_ = alloc.allocate(offload_ ? MemoryCategory::Host : MemoryCategory::Optimizer,
                                double(S_) * (master ? 12 : 8), size_t((master ? 3 : 2) * S_), hb);
    // Recomputation scratch, shared by the micro-batches: tensors (e bytes) and statistics (4).
    std::int64_t scratchTensors = 0, scratchStats = 0;
    // Whether this stage has a layer with the dense MLP (an MoE layer keeps its own set: MoeSaved).
    denseMlpHere_ = false;
    for (int k = 0; k < Ls_ + D_; ++k)
        denseMlpHere_ |= !cfg_.moeLayer(modelLayerOf(k));
    if (recompute_ == Recompute::Full) {  // all of a layer but its output (carve())
        scratchTensors = att + 3 * C * Ns + qkvRows_ * Nm + std::int64_t(qdt_) * Nm +
                         (denseMlpHere_ ? std::int64_t(Fin_ + Ft_) * Nm : 0);
        scratchStats = 2 * normStats;
        if (cfg_.qk_norm) {  // the q and k rows before QK-norm, its statistics per (head, token)
            scratchTensors += std::int64_t(qdt_ + kvdt_) * Nm;
            scratchStats += (cfg_.layerNorm() ? 2 : 1) * std::int64_t(NHt_ + NKVt_) * Nm;
        }
        if (mla_) {  // MLA's latents and their norms' statistics
            scratchTensors += std::int64_t(mDown_ + mQ_ + mR_) * Ns;
            scratchStats += (mQ_ > 0 ? 2 : 1) * (cfg_.layerNorm() ? 2 : 1) * Ns;
        }
        // Uniform groups: a set per layer of the group and its inner outputs (carve()).
        recomputeGroup_ = place_.layout.recomputeGroupLayers(Lc_);
        scratchTensors = recomputeGroup_ * scratchTensors + (recomputeGroup_ - 1) * C * Ns;
        scratchStats *= recomputeGroup_;
    } else if (recompute_ == Recompute::Selective) {
        scratchTensors = rerunCore_ ? att : 0;  // (named modules: rebuiltMlpSide / rebuiltInputNorm)
    }
    if (encDec_ && recompute_ != Recompute::None)  // a T5 decoder layer's cross-attention too
        scratchTensors += att + (recompute_ == Recompute::Full ? 2 * C * Ns + (2 * std::int64_t(qdt_) + 2 * kvdt_) * Nm : 0);
    if (encDec_ && recompute_ == Recompute::Full)
        scratchStats += normStats;
    if (scratchTensors > 0)
        scratch_ = alloc.allocate(MemoryCategory::Activations, double(scratchTensors) * e_ + double(scratchStats) * kStat,
                                  size_t(scratchTensors + scratchStats), hb);
    const std::int64_t spExtra = sp_ ? 2 * C * Nm : 0;  // gath, dresFull
    const bool sendsOutput = !lastStage() || chunks_ > 1;  // some local chunk sends its output on
    const std::int64_t stageOut = sendsOutput ? C * Ns : 0;
    const std::int64_t dfchg = cfg_.gated() ? std::int64_t(Ft_) * Nm : 0;  // ungated: in place in dfch
    // Ring attention: two messages [K V | dK dV] (4 kvdt, Nm), a block's partial output, the
    // running, per-step and backward softmax statistics. All-to-all CP: the exchange's send and
    // receive buffers, the head-split q k v, output and q k v gradient.
    const std::int64_t kvBlock = kvRows_ * Nm, cols = std::int64_t(NHt_) * Nm;
    const std::int64_t cpWork = cpA2a_    ? 4 * qkvRows_ * Nm + std::int64_t(qdt_) * Nm
                                : cp_ > 1 ? 2 * 2 * kvBlock + std::int64_t(qdt_) * Nm + (2 + cp_) * cols
                                          : 0;
    const std::int64_t t5 = encDec_ ? (sp_ ? 2 : 1) * C * Nm : 0;  // encFull (SP), dencFull
    // BERT: a norm gradient buffer (post-norm layers, the embedding norm, the masked-LM transform)
    // and the pooler's two gradients.
    const bool dpost = cfg_.post_norm || cfg_.embedding_norm || cfg_.masked_lm;
    const std::int64_t encoder = (dpost ? C * Ns : 0) + (cfg_.pooler ? 2 * C * mb_ : 0);
    // MLA: the up products' outputs, the RoPE key, the gathered latents (SP), their gradients
    // and the down product's output gradient.
    const std::int64_t mlaWork =
        mla_ ? (mQup_ + mKvup_ + mP_) * Nm + (sp_ ? std::int64_t(mQ_ + mR_) * Nm : 0) + std::int64_t(mQ_ + mR_) * Nm +
                   std::int64_t(mDown_) * Ns
             : 0;
    // MTP: the norms' outputs, the carried gradient, eh_proj's gathered input (SP), input gradient
    // and output-gradient rows (tp > 1).
    const std::int64_t mtpWork =
        D_ > 0 ? 3 * C * Ns + (sp_ ? 2 * C * Nm : 0) + 2 * C * Nm + (tp_ > 1 ? C / tp_ * Nm : 0) : 0;
    const std::int64_t work = spExtra + C * Nm + C * Ns + std::int64_t(Fin_) * Nm + dfchg + qkvRows_ * Nm +
                              std::int64_t(qdt_) * Nm + att + stageOut + cpWork + t5 + encoder + mlaWork + mtpWork;
    workspace_ = alloc.allocate(MemoryCategory::Workspace, double(work) * e_, size_t(work), hb);
    ws_ = new Work{};
    Carver<T> w{workspace_.template as<T>(), 0};
    ws_->gath = sp_ ? w.take(C * Nm) : nullptr;
    ws_->partial = w.take(C * Nm);
    ws_->dres = w.take(C * Ns);
    ws_->dresFull = sp_ ? w.take(C * Nm) : ws_->dres;
    ws_->dfch = w.take(std::int64_t(Fin_) * Nm);
    ws_->dfchg = cfg_.gated() ? w.take(dfchg) : ws_->dfch;
    ws_->dqkv = w.take(qkvRows_ * Nm);
    ws_->datty = w.take(std::int64_t(qdt_) * Nm);
    ws_->datt = w.take(att);
    ws_->stageOut = sendsOutput ? w.take(C * Ns) : nullptr;
    ws_->dpost = dpost ? w.take(C * Ns) : nullptr;
    ws_->dpool = cfg_.pooler ? w.take(C * mb_) : nullptr;
    ws_->dpoolIn = cfg_.pooler ? w.take(C * mb_) : nullptr;
    if (mla_) {
        ws_->mq = w.take(mQup_ * Nm);
        ws_->mkv = w.take(mKvup_ * Nm);
        ws_->mpe = w.take(std::int64_t(mP_) * Nm);
        ws_->mqg = sp_ && mQ_ > 0 ? w.take(std::int64_t(mQ_) * Nm) : nullptr;
        ws_->mkvg = sp_ ? w.take(std::int64_t(mR_) * Nm) : nullptr;
        ws_->mdq = mQ_ > 0 ? w.take(std::int64_t(mQ_) * Nm) : nullptr;
        ws_->mdkv = w.take(std::int64_t(mR_) * Nm);
        ws_->mddown = w.take(std::int64_t(mDown_) * Ns);
    }
    if (D_ > 0) {
        ws_->mtpE = w.take(C * Ns);
        ws_->mtpH = w.take(C * Ns);
        ws_->mtpCarry = w.take(C * Ns);
        ws_->mtpCatFull = sp_ ? w.take(2 * C * Nm) : nullptr;
        ws_->mtpDcat = w.take(2 * C * Nm);
        ws_->mtpDy = tp_ > 1 ? w.take(C / tp_ * Nm) : nullptr;
    }
    if (cpA2a_) {
        heads_.send = w.take(qkvRows_ * Nm);
        heads_.recv = w.take(qkvRows_ * Nm);
        heads_.qkv = w.take(qkvRows_ * Nm);
        heads_.out = w.take(std::int64_t(qdt_) * Nm);
        heads_.dqkv = w.take(qkvRows_ * Nm);
    } else if (cp_ > 1) {
        ring_.msg[0] = w.take(2 * kvBlock);
        ring_.msg[1] = w.take(2 * kvBlock);
        ring_.part = w.take(std::int64_t(qdt_) * Nm);
        ring_.lse = w.take(cols);
        ring_.delta = w.take(cols);
        ring_.stepLse = w.take(cp_ * cols);
    }
    if (encDec_) {
        ws_->encFull = sp_ ? w.take(C * Nm) : nullptr;
        ws_->dencFull = w.take(C * Nm);
    }
    heldWeights_.resize(units_.size());
    heldGrads_.resize(units_.size());
    weightUsers_.assign(units_.size(), 0);
    gradUsers_.assign(units_.size(), 0);
    stats_.resize(size_t(3 * Nm));
    std::int64_t spCount = 0;
    for (const ShardTensor& t : tensors_)
        if (t.sp_partial)
            spCount += t.count;
    packed_.reserve(size_t(spCount));

    // Every device starts from the full model's initial values and keeps its part.
    std::vector<T> drawn;
    const T* fullInit = nullptr;
    if constexpr (std::is_same_v<T, float>)
        if (opts_.initial_parameters && std::int64_t(opts_.initial_parameters->size()) == parameterCount(cfg_))
            fullInit = opts_.initial_parameters->data();
    if (!fullInit) {
        drawn = initialParameters<T>(cfg_, opts_);
        fullInit = drawn.data();
    }
    std::vector<T> local(static_cast<size_t>(P_));
    for (const ShardTensor& t : tensors_)
        for (const ParameterRun& run : t.runs)
            std::copy_n(fullInit + run.full_offset, run.count, local.data() + t.offset + run.local_offset);
    T* wp = weights_.template as<T>();
    T* ms = master ? optimizer_.template as<T>() + 2 * S_ : nullptr;
    for (const ShardUnit& u : units_) {
        if (ms)
            std::copy(local.begin() + u.offset + u.chunk_begin, local.begin() + u.offset + u.chunk_end,
                      ms + u.shard_offset);
        if (zero_ >= 3)
            std::copy(local.begin() + u.offset + u.chunk_begin, local.begin() + u.offset + u.chunk_end,
                      wp + u.shard_offset);
    }
    if (zero_ < 3)
        std::copy(local.begin(), local.end(), wp);
    k_.round(wp, wCount);
}

template <class T>
ModelExecutor<T>::~ModelExecutor()
{
    delete ws_;
}

template <class T>
typename ModelExecutor<T>::Layer ModelExecutor<T>::bind(const T* base, int unit) const
{
    const ShardUnit& u = units_[size_t(unit)];
    T* b = const_cast<T*>(base);
    Layer y{};
    int norms = 0, normBiases = 0;  // a layer's first norm is the attention's, the second the MLP's
    int mtpNorms = 0, mtpNormBiases = 0;
    for (int i = 0; i < u.tensors; ++i) {
        const ShardTensor& t = tensors_[size_t(u.first_tensor + i)];
        T* p = b + (t.offset - u.offset);
        switch (t.role) {
        case TensorRole::NormWeight: (norms++ == 0 ? y.n1w : y.n2w) = p; break;
        case TensorRole::NormBias: (normBiases++ == 0 ? y.n1b : y.n2b) = p; break;
        case TensorRole::QkvWeight: y.qkvw = p; break;
        case TensorRole::QkvBias: y.qkvb = p; break;
        case TensorRole::QkNormWeight: y.qknw = p; break;
        case TensorRole::QkNormBias: y.qknb = p; break;
        case TensorRole::AttnProjWeight: y.aw = p; break;
        case TensorRole::AttnProjBias: y.ab = p; break;
        case TensorRole::MlpInWeight: y.fw = p; break;
        case TensorRole::MlpInBias: y.fb = p; break;
        case TensorRole::MlpOutWeight: y.pw = p; break;
        case TensorRole::MlpOutBias: y.pb = p; break;
        case TensorRole::CrossNormWeight: y.nxw = p; break;
        case TensorRole::CrossNormBias: y.nxb = p; break;
        case TensorRole::CrossQWeight: y.cqw = p; break;
        case TensorRole::CrossKvWeight: y.ckvw = p; break;
        case TensorRole::CrossProjWeight: y.cpw = p; break;
        case TensorRole::RouterWeight: y.router = p; break;
        case TensorRole::ExpertBias: y.expbias = p; break;
        case TensorRole::ExpertInWeight: y.ein = p; break;
        case TensorRole::ExpertOutWeight: y.eout = p; break;
        case TensorRole::SharedInWeight: y.sin = p; break;
        case TensorRole::SharedOutWeight: y.sout = p; break;
        // MLA: with q compression the first latent norm is the q latent's, the second the kv latent's.
        case TensorRole::MlaDownWeight: y.mdw = p; break;
        case TensorRole::MlaNormWeight: (mQ_ > 0 && !y.mqnw ? y.mqnw : y.mkvnw) = p; break;
        case TensorRole::MlaNormBias: (mQ_ > 0 && !y.mqnb ? y.mqnb : y.mkvnb) = p; break;
        case TensorRole::MlaQUpWeight: y.mqw = p; break;
        case TensorRole::MlaKvUpWeight: y.mkvw = p; break;
        case TensorRole::MtpNormWeight: y.mtpn[mtpNorms++] = p; break;  // enorm, hnorm, final norm
        case TensorRole::MtpNormBias: y.mtpnb[mtpNormBiases++] = p; break;
        case TensorRole::MtpProjWeight: y.mtpeh = p; break;
        default: break;
        }
    }
    return y;
}

template <class T>
T* ModelExecutor<T>::localWeights()
{
    return weights_.template as<T>();
}

template <class T>
T* ModelExecutor<T>::localGrads()
{
    return grads_.template as<T>();
}

// ---------------------------------------------------------------- ZeRO parameter and gradient units

template <class T>
T* ModelExecutor<T>::acquireWeights(int unit)
{
    const ShardUnit& u = units_[size_t(unit)];
    if (zero_ < 3)
        return weights_.template as<T>() + u.offset;
    if (weightUsers_[size_t(unit)]++ == 0) {
        // ZeRO-3: gather the whole unit into a transient buffer (counted as weights while it lives).
        DeviceBuffer& b = heldWeights_[size_t(unit)];
        b = dev_.allocator().allocate(MemoryCategory::Weights, double(u.count) * e_, size_t(u.count), sizeof(T),
                                      false);  // every value comes from the all-gather
        std::copy_n(weights_.template as<T>() + u.shard_offset, u.chunk_end - u.chunk_begin,
                    b.template as<T>() + u.chunk_begin);
        if (CommGroup* sg = shardGroupOf(u))
            sg->allGather(shardRankOf(u), b.template as<T>(), size_t(u.count), e_);
    }
    return heldWeights_[size_t(unit)].template as<T>();
}

template <class T>
void ModelExecutor<T>::releaseWeights(int unit)
{
    if (zero_ < 3)
        return;
    if (--weightUsers_[size_t(unit)] == 0)
        heldWeights_[size_t(unit)].release();
}

template <class T>
T* ModelExecutor<T>::acquireGrads(int unit)
{
    const ShardUnit& u = units_[size_t(unit)];
    if (zero_ < 2)
        return grads_.template as<T>() + u.offset;
    if (gradUsers_[size_t(unit)]++ == 0)
        heldGrads_[size_t(unit)] = dev_.allocator().allocate(MemoryCategory::Gradients, double(u.count) * g_,
                                                             size_t(u.count), sizeof(T));  // zero-filled
    return heldGrads_[size_t(unit)].template as<T>();
}

template <class T>
void ModelExecutor<T>::releaseGrads(int unit)
{
    if (zero_ < 2 || --gradUsers_[size_t(unit)] > 0)
        return;
    // ZeRO-2/3: reduce-scatter the unit's gradient over its shard group and accumulate the
    // owned chunk into the shard (the replicas of HSDP sum their shards once per step).
    const ShardUnit& u = units_[size_t(unit)];
    T* b = heldGrads_[size_t(unit)].template as<T>();
    if (CommGroup* sg = shardGroupOf(u))
        sg->reduceScatter(shardRankOf(u), b, size_t(u.count), ReduceOp::Sum, g_);
    const T* chunk = b + u.chunk_begin;
    const std::int64_t n = u.chunk_end - u.chunk_begin;
    T* shard = grads_.template as<T>() + u.shard_offset;
    if (roundGrads_) {
        k_.accumulate(shard, chunk, n);
    } else {  // fp32 main gradients: the same sum, unrounded, its bytes at 4
        for (std::int64_t i = 0; i < n; ++i)
            shard[i] += chunk[i];
        k_.charge(KernelKind::Elementwise, {double(n), 2 * double(n) * g_, double(n) * g_});
    }
    heldGrads_[size_t(unit)].release();
}

template <class T>
int ModelExecutor<T>::layerUnit(const Slot& s, int k) const
{
    return layerUnits_[size_t(s.chunk * Lc_ + k)];
}

template <class T>
typename ModelExecutor<T>::Layer ModelExecutor<T>::acquireLayer(const Slot& s, int k, bool grads)
{
    const int unit = layerUnit(s, k), experts = expertUnits_[size_t(s.chunk * Lc_ + k)];
    Layer y = bind(grads ? acquireGrads(unit) : acquireWeights(unit), unit);
    if (experts >= 0) {
        const Layer e = bind(grads ? acquireGrads(experts) : acquireWeights(experts), experts);
        y.ein = e.ein;
        y.eout = e.eout;
    }
    return y;
}

template <class T>
void ModelExecutor<T>::releaseLayer(const Slot& s, int k, bool grads)
{
    // The experts' unit first: acquired last.
    const int unit = layerUnit(s, k), experts = expertUnits_[size_t(s.chunk * Lc_ + k)];
    for (const int u : {experts, unit}) {
        if (u < 0)
            continue;
        if (grads)
            releaseGrads(u);
        else
            releaseWeights(u);
    }
}

template <class T>
T* ModelExecutor<T>::gradPointer(std::int64_t i, int unit)
{
    const ShardUnit& u = units_[size_t(unit)];
    return zero_ < 2 ? grads_.template as<T>() + i
                     : grads_.template as<T>() + u.shard_offset + (i - u.offset - u.chunk_begin);
}

template <class T>
template <class F>
void ModelExecutor<T>::forEachGradRange(F&& fn, bool whole)
{
    const bool owned = zero_ >= 2 || (zero_ == 1 && !whole);
    for (size_t ui = 0; ui < units_.size(); ++ui) {
        const ShardUnit& u = units_[ui];
        // With ZeRO, only the owned chunk of each unit is reduced (and updated).
        const std::int64_t lo = owned ? u.offset + u.chunk_begin : u.offset;
        const std::int64_t hi = owned ? u.offset + u.chunk_end : u.offset + u.count;
        for (int k = 0; k < u.tensors; ++k) {
            const ShardTensor& t = tensors_[size_t(u.first_tensor + k)];
            const std::int64_t b = std::max(lo, t.offset), e = std::min(hi, t.offset + t.count);
            if (b < e)
                fn(t, b, e - b, gradPointer(b, int(ui)));
        }
    }
}

// ---------------------------------------------------------------- communication helpers

template <class T>
const T* ModelExecutor<T>::gatherTokens(const T* shard, T* full)
{
    return gatherRows(shard, C_, full);
}

template <class T>
T* ModelExecutor<T>::reduceTokens(T* partial)
{
    return reduceRows(partial, C_);
}

template <class T>
const T* ModelExecutor<T>::gatherRows(const T* shard, std::int64_t rows, T* full)
{
    if (!sp_)
        return shard;
    const std::int64_t n = rows * Ns_;
    std::copy_n(shard, n, full + tpRank_ * n);
    groups_.tp->allGather(tpRank_, full, size_t(rows * Nm_), e_);
    return full;
}

template <class T>
T* ModelExecutor<T>::reduceRows(T* partial, std::int64_t rows)
{
    if (tp_ == 1)
        return partial;
    if (sp_) {
        groups_.tp->reduceScatter(tpRank_, partial, size_t(rows * Nm_), ReduceOp::Sum, e_);
        return partial + std::int64_t(tpRank_) * rows * Ns_;
    }
    groups_.tp->allReduce(tpRank_, partial, size_t(rows * Nm_), ReduceOp::Sum, e_);
    return partial;
}

template <class T>
void ModelExecutor<T>::send(const T* data, std::int64_t count)
{
    if constexpr (std::is_same_v<T, float>)
        place_.comm->send(id_, place_.next_stage, data, size_t(count), e_);
    else
        throw std::logic_error("ModelExecutor<double>: no pipeline");
}

template <class T>
void ModelExecutor<T>::recv(T* data, std::int64_t count, int from)
{
    if constexpr (std::is_same_v<T, float>)
        place_.comm->recv(id_, from, data, size_t(count), e_);
    else
        throw std::logic_error("ModelExecutor<double>: no pipeline");
}

template <class T>
const T* ModelExecutor<T>::layerInput(const Slot& s, int k) const
{
    if (encDec_ && k == Lenc_)
        return s.decInput;  // T5: the decoder's first layer reads the decoder embedding
    if (k >= Lc_ && !s.mtp.empty())
        return s.mtp[size_t(k - Lc_)].x;  // an MTP depth's layer reads eh_proj's output
    return k == 0 ? s.input : s.layers[size_t(k - 1)].res3;
}

template <class T>
const T* ModelExecutor<T>::stackOutput(const Slot& s) const
{
    return s.layers[size_t(Lc_ - 1)].res3;
}

// ---------------------------------------------------------------- forward

template <class T>
void ModelExecutor<T>::localTokens(const int* sequences, std::vector<int>& local) const
{
    // Sequence b's token at position p is sequences[b*T + p]; this rank's are its positions.
    const std::vector<int>& mine = cpPositions_[size_t(cpRank_)];
    local.resize(size_t(Nm_));
    for (int b = 0; b < mb_; ++b)
        for (int j = 0; j < Tl_; ++j)
            local[size_t(b) * size_t(Tl_) + size_t(j)] = sequences[std::int64_t(b) * T_ + mine[size_t(j)]];
}

template <class T>
int ModelExecutor<T>::modelLayer(const Slot& s, int k) const
{
    // Local layer j Lc + i of chunk j is the model's layer (j pp + stage) Lc + i (the units' order).
    return modelLayerOf(s.chunk * Lc_ + k);
}

template <class T>
int ModelExecutor<T>::modelLayerOf(int local) const
{
    return chunks_ == 1 ? firstLayer_ + local : ((local / Lc_) * stages_ + stage_) * Lc_ + local % Lc_;
}

template <class T>
AttentionShape ModelExecutor<T>::selfAttentionShape(const Slot& s, int k) const
{
    AttentionShape shape{mb_, T_, T_, NHt_, NKVt_, hd_, cfg_.causal};
    shape.window = cfg_.windowOf(modelLayer(s, k));  // the band on a sliding layer
    if (mla_) {  // MLA: values of v_head_dim, scores scaled by mscale^2 / sqrt(qk head size)
        shape.vd = mV_;
        shape.scale = cfg_.mla.softmax_mscale / std::sqrt(double(hd_));
    }
    return shape;
}

template <class T>
void ModelExecutor<T>::attentionCore(const Acts& a, Slot& s)
{
    const int k = int(&a - s.layers.data());
    if (cpA2a_) {
        allToAllAttentionForward(a, selfAttentionShape(s, k), !attentionRerun(k));
        return;
    }
    if (cp_ > 1) {
        ringAttentionForward(a);
        return;
    }
    const AttentionShape shape = selfAttentionShape(s, k);
    k_.attentionProbs(a.att, a.qkv, shape);
    k_.attentionValues(a.atty, a.att, a.qkv, shape);
}

template <class T>
void ModelExecutor<T>::rowParallelForward(T* out, const T* in, std::int64_t inner, const T* weight, const T* bias,
                                          const T* residual)
{
    k_.matmulForward(ws_->partial, in, weight, nullptr, nullptr, inner, C_, Nm_);
    k_.biasResidual(out, reduceTokens(ws_->partial), bias, residual, C_, Ns_);
}

template <class T>
bool ModelExecutor<T>::rebuildsInputNorm() const
{
    return recompute_ == Recompute::Selective && rebuildNorms_ && mla_ && !cfg_.post_norm && !encDec_;
}

template <class T>
bool ModelExecutor<T>::rebuildsPreMlp(bool moeLayer) const
{
    return recompute_ == Recompute::Selective && !cfg_.post_norm && !encDec_ &&
           (moeLayer ? rebuildNorms_ : rebuildMlp_);
}

template <class T>
bool ModelExecutor<T>::rebuildsUpProj() const
{
    return recompute_ == Recompute::Selective && rebuildUpProj_ && mla_ && !cfg_.post_norm && !encDec_;
}

template <class T>
DeviceBuffer ModelExecutor<T>::rebuiltQkv(Slot& s, int k)
{
    if (recomputes(k) || !rebuildsUpProj())
        return {};
    DeviceBuffer b = dev_.allocator().allocate(MemoryCategory::Activations, double(qkvRows_ * Nm_) * e_,
                                               size_t(qkvRows_ * Nm_), sizeof(T), false);
    s.layers[size_t(k)].qkv = b.template as<T>();
    return b;
}

template <class T>
bool ModelExecutor<T>::rebuildsMoe() const
{
    return recompute_ == Recompute::Selective && rebuildMoe_ && !cfg_.post_norm && !encDec_;
}

template <class T>
DeviceBuffer ModelExecutor<T>::rebuiltMlpSide(Slot& s, int k, bool backward)
{
    const bool moe = cfg_.moeLayer(modelLayer(s, k));
    if (recomputes(k) || !rebuildsPreMlp(moe))
        return {};
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, stats = (cfg_.layerNorm() ? 2 : 1) * Ns;
    // The pre-MLP norm's output; a dense MLP's FC1 output and activation, and in the backward its
    // output again (dropped); the norm's statistics (fp32) last.
    const std::int64_t tensors = C * Ns + (moe ? 0 : std::int64_t(Fin_ + Ft_) * Nm + (backward ? C * Ns : 0));
    DeviceBuffer b = dev_.allocator().allocate(MemoryCategory::Activations, double(tensors) * e_ + double(stats) * kStat,
                                               size_t(tensors + stats), sizeof(T), false);
    Acts& a = s.layers[size_t(k)];
    Carver<T> r{b.template as<T>()};
    a.ln2 = r.take(C * Ns);
    if (!moe) {
        a.fch = r.take(std::int64_t(Fin_) * Nm);
        a.fchg = r.take(std::int64_t(Ft_) * Nm);
        mlpRerunOut_ = backward ? r.take(C * Ns) : nullptr;
    }
    a.n2mean = cfg_.layerNorm() ? r.take(Ns) : nullptr;
    a.n2rstd = r.take(Ns);
    return b;
}

template <class T>
DeviceBuffer ModelExecutor<T>::rebuiltInputNorm(Slot& s, int k)
{
    if (recomputes(k) || !rebuildsInputNorm())
        return {};
    const std::int64_t C = C_, Ns = Ns_, stats = (cfg_.layerNorm() ? 2 : 1) * Ns;
    DeviceBuffer b = dev_.allocator().allocate(MemoryCategory::Activations, double(C * Ns) * e_ + double(stats) * kStat,
                                               size_t(C * Ns + stats), sizeof(T), false);
    Acts& a = s.layers[size_t(k)];
    Carver<T> r{b.template as<T>()};
    a.ln1 = r.take(C * Ns);
    a.n1mean = cfg_.layerNorm() ? r.take(Ns) : nullptr;
    a.n1rstd = r.take(Ns);
    return b;
}

template <class T>
void ModelExecutor<T>::layerForward(int k, Slot& s)
{
    if (encDec_) {
        t5LayerForward(k, s);
        return;
    }
    if (cfg_.post_norm) {
        postNormLayerForward(k, s);
        return;
    }
    const Layer w = acquireLayer(s, k, false);
    const Acts& a = s.layers[size_t(k)];
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    const T* x = layerInput(s, k);

    DeviceBuffer inputNorm = rebuiltInputNorm(s, k);  // (layernorm on MLA: this side's only)
    DeviceBuffer upProjected = rebuiltQkv(s, k);      // (mla_up_proj: until the attention has run)
    k_.normForward(cfg_.norm, a.ln1, a.n1mean, a.n1rstd, x, w.n1w, w.n1b, C, Ns, cfg_.norm_eps);
    if (mla_) {
        mlaAttentionForward(a, w);
        inputNorm.release();
    } else {
        k_.matmulForward(a.qkv, gatherTokens(a.ln1, ws_->gath), w.qkvw, w.qkvb, nullptr, C, qkvRows_, Nm);
        if (cfg_.qk_norm)
            k_.qkNormForward(cfg_.norm, a.qkv, a.qkpre, a.qkmean, a.qkrstd, w.qknw, w.qknb, qkvRows_, NHt_, NKVt_, hd_,
                             Nm, cfg_.norm_eps);
        if (!cfg_.learnedPositions())
            k_.ropeForward(a.qkv, qkvRows_, 0, NHt_ + NKVt_, hd_, positions_.data(), Nm, cfg_.rope_base);
    }
    attentionCore(a, s);
    upProjected.release();
    rowParallelForward(a.res2, a.atty, qdt_, w.aw, w.ab, x);

    const DeviceBuffer mlpSide = rebuiltMlpSide(s, k, false);  // (released with the layer's forward)
    k_.normForward(cfg_.norm, a.ln2, a.n2mean, a.n2rstd, a.res2, w.n2w, w.n2b, C, Ns, cfg_.norm_eps);
    if (cfg_.moeLayer(modelLayer(s, k))) {
        // The MoE block on this rank's tokens (the token shard under sp: Megatron's MoELayer input),
        // complete per token: no tensor-parallel reduction after it.
        MoeSaved<T>& saved = s.moe[size_t(k)];
        const double aux =
            moe_->forward(saved, ws_->partial, a.ln2, {w.router, w.ein, w.eout, w.sin, w.sout, w.expbias}, Ns);
        // Full recomputation: the block again in the backward (the dispatch and combine too, as
        // Megatron-LM's recomputed MoE layer does), the same routing; counted once, and the first
        // forward's saved set not kept (only the layer input is).
        if (!recomputing_) {
            moeAux_ += aux;
            for (size_t e = 0; e < routed_.size(); ++e)
                routed_[e] += saved.kept[e];
            mbCopies_ += saved.gathered;
            dropped_ += saved.dropped;
            busiestCopies_ += saved.busiest_copies;
            meanCopies_ += saved.mean_copies;
        }
        k_.biasResidual(a.res3, ws_->partial, nullptr, a.res2, C, Ns);
        // (moe: the block checkpointed, its input kept; everything it saved is rebuilt.)
        if ((recomputes(k) || rebuildsMoe()) && !recomputing_) {
            saved.release();
        }
        releaseLayer(s, k, false);
        return;
    }
    k_.matmulForward(a.fch, gatherTokens(a.ln2, ws_->gath), w.fw, w.fb, nullptr, C, Fin_, Nm);
    k_.activationForward(cfg_.mlp, a.fchg, a.fch, Ft_, Nm);
    rowParallelForward(a.res3, a.fchg, Ft_, w.pw, w.pb, a.res2);
    releaseLayer(s, k, false);
}

template <class T>
void ModelExecutor<T>::embedForward(Slot& s, const int* inputs, const int* token_types)
{
    const std::int64_t C = C_, Nm = Nm_;
    localTokens(inputs, s.inputs);
    for (std::int64_t n = 0; n < Nm; ++n)
        if (s.inputs[size_t(n)] < 0 || s.inputs[size_t(n)] >= V_)
            throw std::out_of_range("ModelExecutor::forward: token id " + std::to_string(s.inputs[size_t(n)]) +
                                    " outside [0, vocab " + std::to_string(V_) + ")");
    const T* wte = acquireWeights(wteUnit_) + wteAt_;
    const T* wpe = wpeAt_ >= 0 ? acquireWeights(rootUnit_) + wpeAt_ : nullptr;
    // Vocab-parallel when tp > 1: this rank's rows, zero for the others' tokens, then summed
    // over tp; tp rank 0 adds the positions.
    // BERT: the sum goes to the embedding norm's input, the norm's output is the first layer's.
    T* sum = cfg_.embedding_norm ? s.embSum : s.input;
    T* out = tp_ == 1 ? sum : ws_->partial;
    k_.embeddingForward(out, wte, wpe, tpRank_ == 0, s.inputs.data(), positions_.data(), C, Nm, tpRank_ * Vt_, Vt_);
    const T* root = wttAt_ >= 0 || embNormAt_ >= 0 ? acquireWeights(rootUnit_) : nullptr;
    if (wttAt_ >= 0) {
        s.tokenTypes.assign(size_t(Nm), 0);
        if (token_types)
            localTokens(token_types, s.tokenTypes);
        for (std::int64_t n = 0; n < Nm; ++n)
            if (s.tokenTypes[size_t(n)] < 0 || s.tokenTypes[size_t(n)] >= cfg_.token_types)
                throw std::out_of_range("ModelExecutor::forward: token type " + std::to_string(s.tokenTypes[size_t(n)]) +
                                        " outside [0, token_types " + std::to_string(cfg_.token_types) + ")");
        k_.tokenTypeForward(out, root + wttAt_, cfg_.token_types, tpRank_ == 0, s.tokenTypes.data(), C, Nm);
    }
    if (tp_ > 1)
        std::copy_n(reduceTokens(ws_->partial), C * Ns_, sum);
    k_.round(sum, C * Ns_);
    if (embNormAt_ >= 0) {
        const T* w = root + embNormAt_;
        k_.normForward(cfg_.norm, s.input, s.embMean, s.embRstd, sum, w, cfg_.layerNorm() ? w + C : nullptr, C, Ns_,
                       cfg_.norm_eps);
    }
    if (root)
        releaseWeights(rootUnit_);
    if (wpe)
        releaseWeights(rootUnit_);
    releaseWeights(wteUnit_);
}

template <class T>
double ModelExecutor<T>::headForward(Slot& s, const int* targets, const int* next_sentence)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, Vt = Vt_;
    localTokens(targets, s.targets);
    const int lowest = cfg_.masked_lm ? -1 : 0;  // the masked LM predicts only its masked positions
    for (std::int64_t n = 0; n < Nm; ++n)
        if (s.targets[size_t(n)] < lowest || s.targets[size_t(n)] >= V_)
            throw std::out_of_range("ModelExecutor::forward: target id " + std::to_string(s.targets[size_t(n)]) +
                                    " outside [" + std::to_string(lowest) + ", vocab " + std::to_string(V_) + ")");
    const T* root = acquireWeights(rootUnit_);
    const T* x = stackOutput(s);
    const T* hidden = x;  // the decoder's input: the final norm's output, the masked-LM transform's, or x
    if (lnfAt_ >= 0) {
        const T* lnfw = root + lnfAt_;
        const T* lnfb = cfg_.layerNorm() ? lnfw + C : nullptr;
        k_.normForward(cfg_.norm, s.lnf, s.lnfmean, s.lnfrstd, x, lnfw, lnfb, C, Ns, cfg_.norm_eps);
        if (encDec_ && cfg_.tied_embeddings)  // T5ForConditionalGeneration: sequence_output * model_dim**-0.5
            k_.scale(s.lnf, C * Ns, 1 / std::sqrt(double(C)));
        hidden = s.lnf;
    }
    if (mlmAt_ >= 0) {
        mlmTransformForward(s, root, hidden);
        hidden = s.mlmOut;
    }
    const T* headW = acquireWeights(headUnit_) + headAt_;
    k_.matmulForward(s.probs, gatherTokens(hidden, ws_->gath), headW, mlmBiasAt_ >= 0 ? root + mlmBiasAt_ : nullptr,
                     nullptr, C, Vt, Nm);
    releaseWeights(headUnit_);
    double nsp = 0;
    if (holdsPooler(s)) {
        s.nextSentence.assign(size_t(mb_), 0);
        if (!next_sentence)
            throw std::invalid_argument("ModelExecutor::forward: the next-sentence head needs each sequence's label");
        for (int b = 0; b < mb_; ++b) {
            if (next_sentence[b] != 0 && next_sentence[b] != 1)
                throw std::out_of_range("ModelExecutor::forward: next-sentence label " + std::to_string(next_sentence[b]) +
                                        " is not 0 or 1");
            s.nextSentence[size_t(b)] = next_sentence[b];
        }
        nsp = poolerForward(s, root, x);
    }
    releaseWeights(rootUnit_);
    crossEntropy(s.probs, s.losses, s.targets);
    double sum = nsp;
    for (std::int64_t n = 0; n < Nm; ++n)
        sum += double(s.losses[n]);
    return sum;
}

template <class T>
void ModelExecutor<T>::crossEntropy(T* probs, T* losses, const std::vector<int>& targets)
{
    const std::int64_t Nm = Nm_, Vt = Vt_;
    if (tp_ == 1) {
        k_.softmaxCrossEntropy(probs, losses, targets.data(), Vt, Nm);
    } else {
        // Vocab-parallel cross-entropy (Megatron): the max and then the sum of exponentials and the
        // target's logit (owned by one rank, zero elsewhere) are all-reduced over tp, in fp32.
        T* mx = stats_.data();
        T* sumTarget = mx + Nm;  // [sum exp (Nm), target logit (Nm)]
        const int lo = tpRank_ * Vt_;
        for (std::int64_t n = 0; n < Nm; ++n) {
            const T* col = probs + n * Vt;
            mx[n] = *std::max_element(col, col + Vt);
        }
        groups_.tp->allReduce(tpRank_, mx, size_t(Nm), ReduceOp::Max);
        for (std::int64_t n = 0; n < Nm; ++n) {
            const T* col = probs + n * Vt;
            const T m = mx[n];
            T sum = 0;
            for (std::int64_t v = 0; v < Vt; ++v)
                sum += std::exp(col[v] - m);
            sumTarget[n] = sum;
            const int t = targets[size_t(n)];
            sumTarget[Nm + n] = (t >= lo && t < lo + Vt_) ? col[t - lo] : T(0);
        }
        groups_.tp->allReduce(tpRank_, sumTarget, size_t(2 * Nm));
        for (std::int64_t n = 0; n < Nm; ++n) {
            T* col = probs + n * Vt;
            const T m = mx[n];
            const T inv = T(1) / sumTarget[n];
            for (std::int64_t v = 0; v < Vt; ++v)
                col[v] = std::exp(col[v] - m) * inv;
            // An ignored target (masked LM: not a masked position) has no loss.
            losses[n] = targets[size_t(n)] < 0 ? T(0) : std::log(sumTarget[n]) - (sumTarget[Nm + n] - m);
        }
        k_.chargeCrossEntropy(false, Vt, Nm);
    }
}

template <class T>
void ModelExecutor<T>::carve(Slot& s, bool counting)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, att = std::int64_t(NHt_) * T_ * Nm;
    const bool full = recompute_ == Recompute::Full, selective = recompute_ == Recompute::Selective;
    const bool ln = cfg_.layerNorm();
    // QK-norm: the q and k rows it reads, and a statistic per (head, token).
    const std::int64_t qkNormed = std::int64_t(qdt_ + kvdt_) * Nm, qkHeads = std::int64_t(NHt_ + NKVt_) * Nm;
    // Tensors (e bytes) first, then fp32 statistics; recomputation scratch likewise.
    Carver<T> ten, st, sten, sst;
    if (!counting) {
        ten.base = s.buffer.template as<T>();
        sten.base = scratch_.template as<T>();
    }
    // Layers with allocations of their own (ownedLayers()): a carver each, for its input and
    // tensors and for its statistics (no base while the layer is not on the device).
    const int owned = ownedLayers();
    s.own.resize(size_t(owned));
    std::vector<Carver<T>> offTen(static_cast<size_t>(owned)), offSt(static_cast<size_t>(owned));
    for (int k = 0; k < owned; ++k) {
        typename Slot::LayerBuffer& o = s.own[size_t(k)];
        if (!counting && o.base) {
            offTen[size_t(k)].base = o.base;
            offSt[size_t(k)].base = o.base + o.tensors;
        }
    }
    auto tensorsOf = [&](size_t k) -> Carver<T>& { return int(k) < owned ? offTen[k] : ten; };
    auto statsOf = [&](size_t k) -> Carver<T>& { return int(k) < owned ? offSt[k] : st; };
    s.input = tensorsOf(0).take(C * Ns);
    const bool head = holdsHead(s);
    const int depths = head ? D_ : 0;  // the MTP depths' layers follow the chunk's (local Lc + d)
    s.layers.assign(size_t(Lc_ + depths), Acts{});
    if (moe_ && counting)
        s.moe.resize(size_t(Lc_ + depths));
    s.mtp.resize(size_t(depths));
    // Full recomputation in uniform groups of G layers (Megatron-LM's --recompute-method uniform
    // --recompute-num-layers G): a set of scratch tensors for each layer of a group, and the
    // outputs of its first G - 1 layers (the next ones' inputs), all rebuilt together in the
    // backward of the group's last layer; only the group's input is kept.
    const int G = full ? recomputeGroup_ : 1;
    std::vector<Acts> sets(static_cast<size_t>(G));
    std::vector<T*> innerOutputs(static_cast<size_t>(G - 1));
    for (int j = 0; j < G; ++j) {
        Acts& shared = sets[size_t(j)];
        if (full || rerunCore_)
            shared.att = sten.take(att);
        if (encDec_ && (full || selective))
            shared.catt = sten.take(att);
        if (full) {
            shared.ln1 = sten.take(C * Ns);
            shared.qkv = sten.take(qkvRows_ * Nm);
            shared.qkpre = cfg_.qk_norm ? sten.take(qkNormed) : nullptr;
            if (mla_) {
                shared.mdown = sten.take(std::int64_t(mDown_) * Ns);
                shared.mqn = mQ_ > 0 ? sten.take(std::int64_t(mQ_) * Ns) : nullptr;
                shared.mkvn = sten.take(std::int64_t(mR_) * Ns);
            }
            shared.atty = sten.take(std::int64_t(qdt_) * Nm);
            shared.res2 = sten.take(C * Ns);
            shared.ln2 = sten.take(C * Ns);
            shared.fch = denseMlpHere_ ? sten.take(std::int64_t(Fin_) * Nm) : nullptr;
            shared.fchg = denseMlpHere_ ? sten.take(std::int64_t(Ft_) * Nm) : nullptr;
            if (encDec_) {
                shared.lnx = sten.take(C * Ns);
                shared.cq = sten.take(std::int64_t(qdt_) * Nm);
                shared.ckv = sten.take(2 * std::int64_t(kvdt_) * Nm);
                shared.catty = sten.take(std::int64_t(qdt_) * Nm);
                shared.resx = sten.take(C * Ns);
            }
        }
    }
    for (T*& out : innerOutputs)
        out = sten.take(C * Ns);
    const Acts& shared = sets[0];
    // A recomputed layer's place in its group (MTP depths' layers: alone), and whether it ends it.
    auto inGroup = [&](size_t k) { return k < size_t(Lc_) ? k % size_t(G) : 0; };
    auto endsGroup = [&](size_t k) { return k >= size_t(Lc_) - 1 || inGroup(k) == size_t(G) - 1; };
    // Selective recomputation of named modules: what they rebuild is allocated per layer while it
    // runs (rebuiltMlpSide, rebuiltInputNorm), not kept.
    // A chunk's output is sent to the next device and its own backward does not read it
    // (Megatron-LM frees it once sent): only the model's last chunk keeps it, as the final
    // norm's input.
    // (A layer's input is the one before's output: carved with the layer that reads it.)
    auto output = [&](const Acts& a) {
        const size_t next = size_t(&a - s.layers.data()) + 1;
        return &a == &s.layers.back() && !head ? ws_->stageOut : tensorsOf(next).take(C * Ns);
    };
    for (size_t k = 0; k < s.layers.size(); ++k) {
        Acts& a = s.layers[k];
        if (recomputes(int(k))) {
            a = sets[inGroup(k)];
            // the next layer's input: the only tensor kept (a group's inner ones: rebuilt)
            a.res3 = endsGroup(k) ? output(a) : innerOutputs[inGroup(k)];
            continue;
        }
        Carver<T>& lt = tensorsOf(k);
        const bool moe = cfg_.moeLayer(modelLayer(s, int(k)));  // the MoE block keeps its own (MoeSaved)
        a.ln1 = rebuildsInputNorm() ? nullptr : lt.take(C * Ns);
        a.qkv = rebuildsUpProj() ? nullptr : lt.take(qkvRows_ * Nm);
        a.qkpre = cfg_.qk_norm ? lt.take(qkNormed) : nullptr;
        if (mla_) {  // the down product's output and the latent norms' outputs (Megatron keeps them so)
            a.mdown = lt.take(std::int64_t(mDown_) * Ns);
            a.mqn = mQ_ > 0 ? lt.take(std::int64_t(mQ_) * Ns) : nullptr;
            a.mkvn = lt.take(std::int64_t(mR_) * Ns);
        }
        a.att = rerunCore_ ? shared.att : lt.take(att);
        a.atty = lt.take(std::int64_t(qdt_) * Nm);
        a.res2 = lt.take(C * Ns);
        const bool rebuilt = rebuildsPreMlp(moe);
        a.ln2 = rebuilt ? nullptr : lt.take(C * Ns);
        a.fch = moe || rebuilt ? nullptr : lt.take(std::int64_t(Fin_) * Nm);
        a.fchg = moe || rebuilt ? nullptr : lt.take(std::int64_t(Ft_) * Nm);
        a.res3 = output(a);
    }
    if (head && lnfAt_ >= 0)
        s.lnf = ten.take(C * Ns);
    for (typename Slot::Mtp& m : s.mtp) {  // what Megatron's autograd keeps of an MTP depth besides its layer
        m.emb = ten.take(C * Ns);
        m.cat = ten.take(2 * C * Ns);
        m.x = ten.take(C * Ns);
        m.out = ten.take(C * Ns);
    }
    // BERT: the embedding norm's input on the model's first chunk; the masked-LM transform's three
    // tensors and the pooler's two on its last (the pooler only on the cp rank of position 0).
    const bool embeds = firstStage() && s.chunk == 0, pooler = holdsPooler(s);
    if (embeds && embNormAt_ >= 0)
        s.embSum = ten.take(C * Ns);
    if (head && mlmAt_ >= 0) {
        s.mlmPre = ten.take(C * Ns);
        s.mlmAct = ten.take(C * Ns);
        s.mlmOut = ten.take(C * Ns);
    }
    if (pooler) {
        s.poolIn = ten.take(C * mb_);
        s.pooled = ten.take(C * mb_);
    }
    if (encDec_) {  // T5: each decoder layer's cross-attention, the encoder output, the decoder embedding
        for (int k = Lenc_; !full && k < Lc_; ++k) {
            Acts& a = s.layers[size_t(k)];
            a.lnx = ten.take(C * Ns);
            a.cq = ten.take(std::int64_t(qdt_) * Nm);
            a.ckv = ten.take(2 * std::int64_t(kvdt_) * Nm);
            a.catt = selective ? shared.catt : ten.take(att);
            a.catty = ten.take(std::int64_t(qdt_) * Nm);
            a.resx = ten.take(C * Ns);
        }
        s.encOut = ten.take(C * Ns);
        s.decInput = ten.take(C * Ns);
    }
    // Statistics after the tensors, in the same buffer (and scratch) allocations.
    if (!counting) {
        st.base = ten.base + ten.used;
        sst.base = sten.base ? sten.base + sten.used : nullptr;
    }
    // A layer's norm statistics (those of the norms it keeps) from carver c.
    auto takeStats = [&](Acts& a, Carver<T>& c, bool inputNorm, bool preMlp) {
        a.n1mean = inputNorm && ln ? c.take(Ns) : nullptr;
        a.n1rstd = inputNorm ? c.take(Ns) : nullptr;
        a.n2mean = preMlp && ln ? c.take(Ns) : nullptr;
        a.n2rstd = preMlp ? c.take(Ns) : nullptr;
        a.qkmean = cfg_.qk_norm && ln ? c.take(qkHeads) : nullptr;
        a.qkrstd = cfg_.qk_norm ? c.take(qkHeads) : nullptr;
        if (mla_) {
            a.mqmean = mQ_ > 0 && ln ? c.take(Ns) : nullptr;
            a.mqrstd = mQ_ > 0 ? c.take(Ns) : nullptr;
            a.mkvmean = ln ? c.take(Ns) : nullptr;
            a.mkvrstd = c.take(Ns);
        }
    };
    std::vector<Acts> statSets(static_cast<size_t>(G));
    for (Acts& sharedStats : statSets) {
        if (full) {
            takeStats(sharedStats, sst, true, true);
            if (encDec_) {
                sharedStats.nxmean = ln ? sst.take(Ns) : nullptr;
                sharedStats.nxrstd = sst.take(Ns);
            }
        }
    }
    for (size_t k = 0; k < s.layers.size(); ++k) {
        Acts& a = s.layers[k];
        if (recomputes(int(k))) {
            const Acts& sharedStats = statSets[inGroup(k)];
            a.n1mean = sharedStats.n1mean;
            a.n1rstd = sharedStats.n1rstd;
            a.n2mean = sharedStats.n2mean;
            a.n2rstd = sharedStats.n2rstd;
            a.qkmean = sharedStats.qkmean;
            a.qkrstd = sharedStats.qkrstd;
            a.nxmean = sharedStats.nxmean;
            a.nxrstd = sharedStats.nxrstd;
            a.mqmean = sharedStats.mqmean;
            a.mqrstd = sharedStats.mqrstd;
            a.mkvmean = sharedStats.mkvmean;
            a.mkvrstd = sharedStats.mkvrstd;
            continue;
        }
        takeStats(a, statsOf(k), !rebuildsInputNorm(), !rebuildsPreMlp(cfg_.moeLayer(modelLayer(s, int(k)))));
    }
    for (int k = Lenc_; encDec_ && !full && k < Lc_; ++k) {
        s.layers[size_t(k)].nxmean = ln ? st.take(Ns) : nullptr;
        s.layers[size_t(k)].nxrstd = st.take(Ns);
    }
    if (encDec_) {
        s.encmean = ln ? st.take(Ns) : nullptr;
        s.encrstd = st.take(Ns);
    }
    if (embeds && embNormAt_ >= 0) {
        s.embMean = ln ? st.take(Ns) : nullptr;
        s.embRstd = st.take(Ns);
    }
    if (head && mlmAt_ >= 0) {
        s.mlmMean = ln ? st.take(Ns) : nullptr;
        s.mlmRstd = st.take(Ns);
    }
    if (pooler) {  // the next-sentence softmax and losses, fp32 as the vocabulary's
        s.nspProbs = st.take(2 * std::int64_t(mb_));
        s.nspLosses = st.take(mb_);
    }
    if (head && lnfAt_ >= 0) {
        s.lnfmean = ln ? st.take(Ns) : nullptr;
        s.lnfrstd = st.take(Ns);
    }
    if (head) {
        // The softmax over the vocabulary is kept in fp32 whatever the precision, as
        // Megatron-LM's cross-entropy keeps it for backward.
        s.probs = st.take(std::int64_t(Vt_) * Nm);
        s.losses = st.take(Nm);
    }
    for (typename Slot::Mtp& m : s.mtp) {  // each MTP depth's norms' statistics, softmax and losses
        m.emean = ln ? st.take(Ns) : nullptr;
        m.erstd = st.take(Ns);
        m.hmean = ln ? st.take(Ns) : nullptr;
        m.hrstd = st.take(Ns);
        m.fmean = ln ? st.take(Ns) : nullptr;
        m.frstd = st.take(Ns);
        m.probs = st.take(std::int64_t(Vt_) * Nm);
        m.losses = st.take(Nm);
    }
    if (counting)
        for (int k = 0; k < owned; ++k) {
            s.own[size_t(k)].tensors = offTen[size_t(k)].used;
            s.own[size_t(k)].stats = offSt[size_t(k)].used;
        }
    if (counting)
        s.buffer = dev_.allocator().allocate(MemoryCategory::Activations,
                                             double(ten.used) * e_ + double(st.used) * kStat,
                                             size_t(ten.used + st.used), sizeof(T),
                                             false);
}

template <class T>
int ModelExecutor<T>::offloadedLayers() const
{
    return offloadActivations_;
}

template <class T>
bool ModelExecutor<T>::offloadOverlaps() const
{
    return Lc_ - offloadActivations_ >= 2;
}

template <class T>
int ModelExecutor<T>::ownedLayers() const
{
    // (T5's encoder output and BERT's post-norm layers keep the slot's one allocation.)
    return encDec_ || cfg_.post_norm ? 0 : Lc_;
}

template <class T>
void ModelExecutor<T>::placeLayer(Slot& s, int k)
{
    typename Slot::LayerBuffer& o = s.own[size_t(k)];
    o.device = dev_.allocator().allocate(MemoryCategory::Activations, double(o.tensors) * e_ + double(o.stats) * kStat,
                                         size_t(o.tensors + o.stats), sizeof(T), false);
    o.base = o.device.template as<T>();
    carve(s, false);
}

template <class T>
void ModelExecutor<T>::offloadToHost(Slot& s, int k)
{
    typename Slot::LayerBuffer& o = s.own[size_t(k)];
    const std::size_t n = size_t(o.tensors + o.stats);
    o.host = dev_.allocator().allocate(MemoryCategory::Host, double(o.tensors) * e_ + double(o.stats) * kStat, n,
                                       sizeof(T), false);
    std::copy_n(o.base, n, o.host.template as<T>());
    o.done_s = dev_.copyAsync(true, double(o.tensors) * e_ + double(o.stats) * kStat);
}

template <class T>
void ModelExecutor<T>::freeLayer(Slot& s, int k, bool afterCopy)
{
    typename Slot::LayerBuffer& o = s.own[size_t(k)];
    if (afterCopy)
        dev_.waitFor(o.done_s);
    // (An offloaded layer's is poisoned before it goes back to the allocator, which may hand the
    // same host block to the reload: what the backward reads is what came back from the host.)
    if (k < offloadedLayers())
        std::fill_n(o.base, size_t(o.tensors + o.stats), std::numeric_limits<T>::quiet_NaN());
    o.device.release();
    o.base = nullptr;
}

template <class T>
void ModelExecutor<T>::reloadLayer(Slot& s, int k)
{
    typename Slot::LayerBuffer& o = s.own[size_t(k)];
    placeLayer(s, k);
    std::copy_n(o.host.template as<T>(), size_t(o.tensors + o.stats), o.base);
    o.host.release();
    // (Not before its copy to the host is done.)
    o.done_s = dev_.copyAsync(false, double(o.tensors) * e_ + double(o.stats) * kStat, o.done_s);
}

template <class T>
bool ModelExecutor<T>::holdsHead(const Slot& s) const
{
    return lastStage() && s.chunk == chunks_ - 1;
}

template <class T>
double ModelExecutor<T>::forward(int micro, const int* inputs, const int* targets, int chunk, const int* token_types,
                                 const int* next_sentence)
{
    if (chunk < 0 || chunk >= chunks_)
        throw std::out_of_range("ModelExecutor::forward: chunk " + std::to_string(chunk) + " outside [0, " +
                                std::to_string(chunks_) + ")");
    const size_t at = size_t(micro) * size_t(chunks_) + size_t(chunk);
    if (at >= slots_.size())
        slots_.resize(at + 1);
    if (!slots_[at])
        slots_[at] = std::make_unique<Slot>();
    Slot& s = *slots_[at];
    s.chunk = chunk;
    // This (micro-batch, chunk)'s saved activations: one allocation, released after its backward.
    carve(s, true);
    carve(s, false);

    // The model's first and last chunks use the root unit: gathered once for the whole forward
    // (FSDP's root), released at its end.
    const bool embeds = firstStage() && chunk == 0, head = holdsHead(s);
    const bool outer = embeds || head;
    moeAux_ = 0;
    if (outer)
        forOuterUnits([&](int u) { acquireWeights(u); });
    const int owned = ownedLayers(), offloaded = offloadedLayers();
    if (owned > 0)
        placeLayer(s, 0);  // (its input: the embedding or what the previous stage sends)
    if (embeds)
        embedForward(s, inputs, token_types);
    else
        recv(s.input, std::int64_t(C_) * Ns_, place_.previous_stage);
    mbCopies_ = 0;
    for (int k = 0; k < Lc_; ++k) {
        if (encDec_ && k == Lenc_)
            encoderToDecoder(s, targets);
        // This layer's output is the next one's input. (While an offloaded layer's copy is in
        // flight, it waits in a workspace, d res3, free in a forward, until that layer is freed:
        // the device holds the offloaded layer in flight and the one computing, as Megatron-LM's does.)
        const bool staged = offloaded > 0 && k <= offloaded && k + 1 < owned;
        if (k + 1 < owned && !staged)
            placeLayer(s, k + 1);
        if (staged)
            s.layers[size_t(k)].res3 = ws_->dres;
        layerForward(k, s);
        // An offloaded layer's tensors go to the host on the copy engine while the next layer
        // computes; its device copy is freed once that copy is done, at the end of the next layer
        // (Transformer Engine's cpu_offload synchronises there).
        // With fewer than two kept layers the device may hold one layer's set only (Transformer
        // Engine's default scheduling, cpu_offloading.rst @ d0067d0: "at most (model_layers -
        // num_layers) sets of activations are on GPU at any time; both compute and reload may be
        // stalled"): the next layer waits for this copy.
        if (k < offloaded)
            offloadToHost(s, k);
        if (k < offloaded && !offloadOverlaps())
            freeLayer(s, k, true);
        else if (k >= 1 && k - 1 < offloaded && offloadOverlaps())
            freeLayer(s, k - 1, true);
        if (staged) {
            placeLayer(s, k + 1);
            std::copy_n(ws_->dres, std::int64_t(C_) * Ns_, s.layers[size_t(k)].res3);
        }
    }
    double loss = 0;
    mtpLoss_ = 0;
    if (head)
        loss = headForward(s, targets, next_sentence);
    if (head && D_ > 0)
        mtpForward(s, inputs, targets);
    peakCopies_ = std::max(peakCopies_, mbCopies_);
    if (!head)
        send(stackOutput(s), std::int64_t(C_) * Ns_);
    if (outer)
        forOuterUnits([&](int u) { releaseWeights(u); });
    return loss;
}

// ---------------------------------------------------------------- ring attention (context parallelism)
//
// After Transformer Engine's AttnFuncWithCPAndKVP2P (transformer_engine/pytorch/attention/
// dot_product_attention/context_parallel.py @ d0067d0), without its overlap and without skipping
// the blocks the causal mask empties (the products are computed and charged over each block's
// full square, the planner's convention). The ring is the cp group: send to rank r+1, receive
// from rank r-1. A K/V block is (2 kvdt, Nm): each column the k rows then the v rows of qkv.

template <class T>
void ModelExecutor<T>::ringSend(const T* data, std::int64_t count)
{
    if constexpr (std::is_same_v<T, float>)
        place_.comm->send(id_, cpNext_, data, size_t(count), e_);
    else
        throw std::logic_error("ModelExecutor<double>: no context parallelism");
}

template <class T>
void ModelExecutor<T>::ringRecv(T* data, std::int64_t count)
{
    if constexpr (std::is_same_v<T, float>)
        place_.comm->recv(id_, cpPrev_, data, size_t(count), e_);
    else
        throw std::logic_error("ModelExecutor<double>: no context parallelism");
}

// Forward: in step i (of cp) this rank holds the block of rank (r - i) mod cp; it passes the
// block on (cp - 1 sends of 2 kvdt x Nm values: what the planner's cp bytes count), computes
// its queries' partial attention against it with the causal mask on global positions (the
// block's probabilities into att rows [i Tl, (i+1) Tl)), and merges the partial output by
// log-sum-exp. After the last step every stored block is renormalised to the final softmax,
// which the backward reads.
template <class T>
void ModelExecutor<T>::ringAttentionForward(const Acts& a)
{
    const std::int64_t Nm = Nm_, kv = kvRows_ * Nm;
    AttentionShape s{mb_, Tl_, Tl_, NHt_, NKVt_, hd_, cfg_.causal};
    if (mla_) {
        s.vd = mV_;
        s.scale = cfg_.mla.softmax_mscale / std::sqrt(double(hd_));
    }
    const std::int64_t cols = s.probColumns();
    const int* qpos = cpPositions_[size_t(cpRank_)].data();
    T* cur = ring_.msg[0];
    T* next = ring_.msg[1];
    for (std::int64_t n = 0; n < Nm; ++n)
        std::copy_n(a.qkv + n * qkvRows_ + qRows_, kvRows_, cur + n * kvRows_);
    k_.chargeCopy(kv);
    for (int i = 0; i < cp_; ++i) {
        const int owner = (cpRank_ - i + cp_) % cp_;
        if (i + 1 < cp_)
            ringSend(cur, kv);  // posted before the step's compute, as TE does (buffered)
        T* lse = ring_.stepLse + i * cols;
        k_.ringAttentionProbs(a.att, T_, std::int64_t(i) * Tl_, lse, a.qkv, cur, s, qpos,
                              cpPositions_[size_t(owner)].data());
        k_.ringAttentionValues(i == 0 ? a.atty : ring_.part, a.att, T_, std::int64_t(i) * Tl_, cur, s);
        if (i == 0)
            std::copy_n(lse, cols, ring_.lse);
        else
            k_.ringAttentionMerge(a.atty, ring_.lse, ring_.part, lse, s);
        if (i + 1 < cp_) {
            ringRecv(next, kv);
            std::swap(cur, next);
        }
    }
    k_.ringAttentionFinish(a.att, T_, ring_.stepLse, ring_.lse, cp_, s);
    k_.round(a.atty, std::int64_t(qdt_) * Nm);
}

// Backward (TE's backward): the blocks go round again in the forward's order, now carrying
// their dK/dV partials, which each rank adds to and which end at the block's owner. Step 0
// sends this rank's K/V; step i in [1, cp-2] sends the block held with its partial [K V dK dV];
// step cp-1 sends the partial alone to its owner: 2 (cp - 1) blocks of 2 kvdt x Nm values, as
// TE sends. The owner adds its own part last (the block of step 0), into what it receives.
// dq accumulates over the steps; delta = rowsum(dout o out) (FlashAttention-2's D).
template <class T>
void ModelExecutor<T>::ringAttentionBackward(const Acts& a)
{
    const std::int64_t Nm = Nm_, kv = kvRows_ * Nm;
    AttentionShape s{mb_, Tl_, Tl_, NHt_, NKVt_, hd_, cfg_.causal};
    if (mla_) {
        s.vd = mV_;
        s.scale = cfg_.mla.softmax_mscale / std::sqrt(double(hd_));
    }
    T* dqkv = ws_->dqkv;
    std::fill(dqkv, dqkv + qkvRows_ * Nm, T(0));
    k_.ringAttentionDelta(ring_.delta, ws_->datty, a.atty, s);
    auto pack = [&](T* block) {
        for (std::int64_t n = 0; n < Nm; ++n)
            std::copy_n(a.qkv + n * qkvRows_ + qRows_, kvRows_, block + n * kvRows_);
        k_.chargeCopy(kv);
    };
    T* cur = ring_.msg[0];
    T* next = ring_.msg[1];
    pack(cur);
    ringSend(cur, kv);
    ringRecv(next, kv);
    std::swap(cur, next);
    for (int i = 1; i < cp_; ++i) {
        T* dkv = cur + kv;  // the partial of the block held, from the ranks it visited since its owner
        if (i == 1)
            std::fill(dkv, dkv + kv, T(0));
        k_.ringAttentionBackward(dqkv, dkv, ws_->datt, ws_->datty, a.att, T_, std::int64_t(i) * Tl_, ring_.delta,
                                 a.qkv, cur, s);
        k_.round(dkv, kv);
        if (i + 1 < cp_) {
            ringSend(cur, 2 * kv);
            ringRecv(next, 2 * kv);
            std::swap(cur, next);
        } else {
            ringSend(dkv, kv);
        }
    }
    // This rank's own block: the others' partial, received, plus its own part.
    T* own = next;
    ringRecv(own + kv, kv);
    pack(own);
    k_.ringAttentionBackward(dqkv, own + kv, ws_->datt, ws_->datty, a.att, T_, 0, ring_.delta, a.qkv, own, s);
    for (std::int64_t n = 0; n < Nm; ++n)
        std::copy_n(own + kv + n * kvRows_, kvRows_, dqkv + n * qkvRows_ + qRows_);
    k_.chargeCopy(kv);
    k_.round(dqkv, qkvRows_ * Nm);
}

// ---------------------------------------------------------------- all-to-all attention (context parallelism)
//
// After Transformer Engine's AttnFuncWithCPAndQKVOA2A (transformer_engine/pytorch/attention/
// dot_product_attention/context_parallel.py @ d0067d0): flash_attn_a2a_communicate all-to-alls q,
// k and v from the sequence split to the head split (cp rank j gets heads [j h/cp, (j+1) h/cp)
// of every rank's tokens; all_to_all_single over the cp group) and puts the load-balanced chunks
// back in sequence order (reorder_seq_chunks_for_a2a_before_attn); the attention then runs as
// on one device over the whole sequence on h/cp heads, and its output goes back the other way
// (reorder_seq_chunks_for_a2a_after_attn, then the all-to-all). The backward all-to-alls dout to
// the head split and dq, dk, dv back. Each call moves (cp - 1)/cp of the tensor off the device.
// What the layer keeps is the ring's: q, k, v (head-split in place of the sequence-split ones
// when the backward does not run the core again: the same values), the probabilities (h/cp
// heads x T queries x T keys = h x T/cp x T) and the sequence-split output.

template <class T>
bool ModelExecutor<T>::attentionRerun(int k) const
{
    if (cfg_.post_norm)
        return recompute_ != Recompute::None;  // postNormLayerBackward's rule
    return recomputes(k) || rerunCore_;
}

// The exchange of one head-split block (per-rank rows x Nm values) with every cp rank.
template <class T>
void ModelExecutor<T>::cpAllToAll(std::int64_t block)
{
    if constexpr (std::is_same_v<T, float>)
        groups_.cp->allToAll(cpRank_, heads_.send, heads_.recv, size_t(block), e_);
    else
        throw std::logic_error("ModelExecutor<double>: no context parallelism");
}

// x (rows, Nm) on this rank's tokens -> heads (per-rank rows, mb T) on this rank's heads, in
// sequence order.
template <class T>
void ModelExecutor<T>::toHeadSplit(const T* x, std::int64_t rows, const RowSplit* splits, int count, T* heads)
{
    const std::int64_t Nm = Nm_, per = splitRows(splits, count), block = per * Nm;
    for (int j = 0; j < cp_; ++j)
        for (std::int64_t n = 0; n < Nm; ++n) {
            std::int64_t at = j * block + n * per;
            for (int i = 0; i < count; at += splits[i].per, ++i)
                std::copy_n(x + n * rows + splits[i].row0 + j * splits[i].per, splits[i].per, heads_.send + at);
        }
    k_.chargeCopy(cp_ * block);
    cpAllToAll(block);
    for (int src = 0; src < cp_; ++src) {
        const int* pos = cpPositions_[size_t(src)].data();
        for (int b = 0; b < mb_; ++b)
            for (int t = 0; t < Tl_; ++t)
                std::copy_n(heads_.recv + src * block + (std::int64_t(b) * Tl_ + t) * per, per,
                            heads + (std::int64_t(b) * T_ + pos[t]) * per);
    }
    k_.chargeCopy(cp_ * block);
}

// The reverse: heads (per-rank rows, mb T) -> x (rows, Nm), every row of the splits written.
template <class T>
void ModelExecutor<T>::fromHeadSplit(const T* heads, const RowSplit* splits, int count, T* x, std::int64_t rows)
{
    const std::int64_t Nm = Nm_, per = splitRows(splits, count), block = per * Nm;
    for (int dst = 0; dst < cp_; ++dst) {
        const int* pos = cpPositions_[size_t(dst)].data();
        for (int b = 0; b < mb_; ++b)
            for (int t = 0; t < Tl_; ++t)
                std::copy_n(heads + (std::int64_t(b) * T_ + pos[t]) * per, per,
                            heads_.send + dst * block + (std::int64_t(b) * Tl_ + t) * per);
    }
    k_.chargeCopy(cp_ * block);
    cpAllToAll(block);
    for (int j = 0; j < cp_; ++j)
        for (std::int64_t n = 0; n < Nm; ++n) {
            std::int64_t at = j * block + n * per;
            for (int i = 0; i < count; at += splits[i].per, ++i)
                std::copy_n(heads_.recv + at, splits[i].per, x + n * rows + splits[i].row0 + j * splits[i].per);
        }
    k_.chargeCopy(cp_ * block);
}

template <class T>
void ModelExecutor<T>::allToAllAttentionForward(const Acts& a, AttentionShape shape, bool keepHeads)
{
    shape.NH /= cp_;
    shape.NKV /= cp_;
    // Kept for the backward: into a.qkv itself (free once sent), unless the backward runs this again.
    T* heads = keepHeads ? a.qkv : heads_.qkv;
    toHeadSplit(a.qkv, qkvRows_, heads_.qkvSplit, 3, heads);
    k_.attentionProbs(a.att, heads, shape);
    k_.attentionValues(heads_.out, a.att, heads, shape);
    fromHeadSplit(heads_.out, &heads_.outSplit, 1, a.atty, qdt_);
}

template <class T>
void ModelExecutor<T>::allToAllAttentionBackward(const Acts& a, AttentionShape shape, bool keptHeads)
{
    shape.NH /= cp_;
    shape.NKV /= cp_;
    toHeadSplit(ws_->datty, qdt_, &heads_.outSplit, 1, heads_.out);  // dout, head-split
    k_.attentionBackward(heads_.dqkv, ws_->datt, heads_.out, a.att, keptHeads ? a.qkv : heads_.qkv, shape);
    fromHeadSplit(heads_.dqkv, heads_.qkvSplit, 3, ws_->dqkv, qkvRows_);
}

template <class T>
void ModelExecutor<T>::attentionCoreBackward(const Acts& a, int k, const AttentionShape& shape)
{
    if (cpA2a_)
        allToAllAttentionBackward(a, shape, !attentionRerun(k));
    else if (cp_ > 1)
        ringAttentionBackward(a);
    else
        k_.attentionBackward(ws_->dqkv, ws_->datt, ws_->datty, a.att, a.qkv, shape);
}

// ---------------------------------------------------------------- backward

template <class T>
void ModelExecutor<T>::layerBackward(int k, Slot& s)
{
    if (encDec_) {
        t5LayerBackward(k, s);
        return;
    }
    if (cfg_.post_norm) {
        postNormLayerBackward(k, s);
        return;
    }
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    const T* x = layerInput(s, k);
    const Layer w = acquireLayer(s, k, false);
    const Acts& a = s.layers[size_t(k)];
    if (recomputes(k)) {
        // (A uniform group's forward runs again, whole, in the backward of its last layer.)
        recomputing_ = true;
        if (recomputeGroup_ > 1 && k < Lc_) {
            const int first = k / recomputeGroup_ * recomputeGroup_;
            if (k == std::min(Lc_, first + recomputeGroup_) - 1)
                for (int i = first; i <= k; ++i)
                    layerForward(i, s);
        } else {
            layerForward(k, s);
        }
        recomputing_ = false;
    }
    // mla_up_proj: q, k, v again from the kept latents (the up products and RoPE), before the
    // attention core reads them (its rerun under core_attn too), freed after its backward.
    DeviceBuffer upProjected = rebuiltQkv(s, k);
    if (upProjected.elements() > 0)
        mlaUpProjection(a, w);
    if (!recomputes(k) && rerunCore_)
        attentionCore(a, s);  // the attention over V too, as Megatron-LM's checkpoint of the core does
    const Layer d = acquireLayer(s, k, true);
    T* dres = ws_->dres;  // (C, Ns): d res3 on entry, d x on exit
    const bool moeLayer = cfg_.moeLayer(modelLayer(s, k));
    // Named modules (selective), one side at a time as the backward reads them: the MLP side's
    // first. The pre-MLP norm of an MoE layer (layernorm; the block reads it as its input) or a
    // dense layer's MLP with its norm (mlp: its forward run whole, the row-parallel reduction too,
    // its output dropped).
    DeviceBuffer mlpSide = rebuiltMlpSide(s, k, true);
    if (mlpSide.elements() > 0) {
        k_.normForward(cfg_.norm, a.ln2, a.n2mean, a.n2rstd, a.res2, w.n2w, w.n2b, C, Ns, cfg_.norm_eps);
        if (moeLayer) {
            s.moe[size_t(k)].x = a.ln2;
        } else {
            k_.matmulForward(a.fch, gatherTokens(a.ln2, ws_->gath), w.fw, w.fb, nullptr, C, Fin_, Nm);
            k_.activationForward(cfg_.mlp, a.fchg, a.fch, Ft_, Nm);
            rowParallelForward(mlpRerunOut_, a.fchg, Ft_, w.pw, w.pb, a.res2);
        }
    }

    if (moeLayer) {
        // The MoE block; its load-balancing loss weighs 1 / (micro-batches x dp) of the step, as
        // Megatron scales it (router.py attach_and_log_load_balancing_loss): this micro-batch's
        // loss tokens over the step's.
        const double batchTokens = double(mb_) * (cfg_.masked_lm ? predictedPerSequence(cfg_) : T_);
        DeviceBuffer rerunOutput;
        if (!recomputes(k) && rebuildsMoe()) {
            // moe: the block's forward again from its input (Megatron-LM's checkpointed MoELayer):
            // the router, the dispatch and combine with their all-to-alls, the experts; the same
            // routing; its output live through the block's backward and dropped.
            rerunOutput = dev_.allocator().allocate(MemoryCategory::Activations, double(C * Ns) * e_, size_t(C * Ns),
                                                    sizeof(T), false);
            moe_->forward(s.moe[size_t(k)], rerunOutput.template as<T>(), a.ln2,
                          {w.router, w.ein, w.eout, w.sin, w.sout, w.expbias}, Ns);
        }
        moe_->backward(s.moe[size_t(k)], ws_->partial, dres, {w.router, w.ein, w.eout, w.sin, w.sout, w.expbias},
                       {d.router, d.ein, d.eout, d.sin, d.sout}, T(batchTokens / double(opts_.global_tokens)));
        rerunOutput.release();
        k_.normBackward(cfg_.norm, dres, d.n2w, d.n2b, ws_->partial, a.res2, w.n2w, a.n2mean, a.n2rstd, C, Ns);
    } else {
        // MLP. The row-split product needs the whole output gradient: under SP gather it.
        k_.matmulBackward(ws_->dfchg, d.pw, d.pb, gatherTokens(dres, ws_->dresFull), a.fchg, w.pw, Ft_, C, Nm);
        k_.activationBackward(cfg_.mlp, ws_->dfch, a.fch, ws_->dfchg, Ft_, Nm);
        k_.matmulBackward(ws_->partial, d.fw, d.fb, ws_->dfch, gatherTokens(a.ln2, ws_->gath), w.fw, C, Fin_, Nm);
        k_.normBackward(cfg_.norm, dres, d.n2w, d.n2b, reduceTokens(ws_->partial), a.res2, w.n2w, a.n2mean, a.n2rstd,
                        C, Ns);
    }

    mlpSide.release();

    // Attention.
    k_.matmulBackward(ws_->datty, d.aw, d.ab, gatherTokens(dres, ws_->dresFull), a.atty, w.aw, qdt_, C, Nm);
    attentionCoreBackward(a, k, selfAttentionShape(s, k));
    upProjected.release();
    if (mla_) {
        const DeviceBuffer inputNorm = rebuiltInputNorm(s, k);  // its input norm (layernorm)
        if (inputNorm.elements() > 0)
            k_.normForward(cfg_.norm, a.ln1, a.n1mean, a.n1rstd, x, w.n1w, w.n1b, C, Ns, cfg_.norm_eps);
        mlaAttentionBackward(a, w, d, x);
        releaseLayer(s, k, true);
        releaseLayer(s, k, false);
        return;
    }
    if (!cfg_.learnedPositions())
        k_.ropeBackward(ws_->dqkv, qkvRows_, 0, NHt_ + NKVt_, hd_, positions_.data(), Nm, cfg_.rope_base);
    if (cfg_.qk_norm)  // (datty, read by the attention's backward, is free again: the scratch)
        k_.qkNormBackward(cfg_.norm, ws_->dqkv, ws_->datty, d.qknw, d.qknb, a.qkpre, w.qknw, a.qkmean, a.qkrstd,
                          qkvRows_, NHt_, NKVt_, hd_, Nm);
    k_.matmulBackward(ws_->partial, d.qkvw, d.qkvb, ws_->dqkv, gatherTokens(a.ln1, ws_->gath), w.qkvw, C, qkvRows_, Nm);
    k_.normBackward(cfg_.norm, dres, d.n1w, d.n1b, reduceTokens(ws_->partial), x, w.n1w, a.n1mean, a.n1rstd, C, Ns);
    releaseLayer(s, k, true);
    releaseLayer(s, k, false);
}

// ---------------------------------------------------------------- multi-head latent attention
//
// MlaConfig's block (ModelConfig.h) under tp and sp as Megatron-LM lays it out (NVIDIA/Megatron-LM
// @ d98e8a64, megatron/core/transformer/multi_latent_attention.py): the down product and the latent
// norms 'duplicated' on every tp rank and run on the rank's tokens (its token shard under sp: their
// gradients then partial, summed in the sp all-reduce); the up products column-parallel over the
// heads (their inputs all-gathered under sp, again in backward for the weight gradients, their
// input gradients reduce-scattered, or all-reduced without sp); the RoPE key gathered under sp
// (gather_from_sequence_parallel_region) and its gradient, summed over this rank's heads, reduced
// over tp likewise; the output projection row-parallel. (Without sp Megatron at d98e8a64 does not
// reduce the RoPE key's gradient over tp, NVIDIA/Megatron-LM issue #1699 / pull request #6839: here
// it is all-reduced, so every layout computes the single device's gradient.)
// Saved for backward (what Megatron's autograd keeps): the down product's output (the norms'
// inputs and the RoPE key before rotation), the latent norms' outputs and statistics, the
// assembled q, k, v after RoPE and the attention output; the up products' outputs and the
// gathered latents are transient.

template <class T>
void ModelExecutor<T>::mlaAttentionForward(const Acts& a, const Layer& w)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, D = mDown_, Q = mQ_, R = mR_, P = mP_;
    const double eps = cfg_.norm_eps;
    k_.matmulForward(a.mdown, a.ln1, w.mdw, nullptr, nullptr, C, D, Ns);
    if (Q > 0)
        k_.normForward(cfg_.norm, a.mqn, a.mqmean, a.mqrstd, a.mdown, w.mqnw, w.mqnb, Q, Ns, eps, D);
    k_.normForward(cfg_.norm, a.mkvn, a.mkvmean, a.mkvrstd, a.mdown + Q, w.mkvnw, w.mkvnb, R, Ns, eps, D);
    mlaUpProjection(a, w);
}

// The up products, RoPE and the assembled q, k, v (a.qkv) from the kept latents: the forward's
// second half, and what recompute_modules=mla_up_proj runs again before the attention's backward.
template <class T>
void ModelExecutor<T>::mlaUpProjection(const Acts& a, const Layer& w)
{
    const std::int64_t Ns = Ns_, Nm = Nm_, D = mDown_, Q = mQ_, R = mR_, P = mP_;
    const T* qIn = Q > 0 ? gatherRows(a.mqn, Q, ws_->mqg) : gatherTokens(a.ln1, ws_->gath);
    k_.matmulForward(ws_->mq, qIn, w.mqw, nullptr, nullptr, mQin_, mQup_, Nm);
    k_.matmulForward(ws_->mkv, gatherRows(a.mkvn, R, ws_->mkvg), w.mkvw, nullptr, nullptr, R, mKvup_, Nm);
    // The RoPE key: this rank's tokens' rows of the down product, gathered under sp, rotated once.
    T* pe = ws_->mpe + (sp_ ? std::int64_t(tpRank_) * P * Ns : 0);
    for (std::int64_t n = 0; n < Ns; ++n)
        std::copy_n(a.mdown + n * D + Q + R, P, pe + n * P);
    k_.chargeCopy(P * Ns);
    if (sp_)
        groups_.tp->allGather(tpRank_, ws_->mpe, size_t(P * Nm), e_);
    for (int h = 0; h < NHt_; ++h)
        k_.ropeForward(ws_->mq, mQup_, std::int64_t(h) * hd_ + mN_, 1, mP_, positions_.data(), Nm, cfg_.rope_base);
    k_.ropeForward(ws_->mpe, P, 0, 1, mP_, positions_.data(), Nm, cfg_.rope_base);
    k_.mlaAssemble(a.qkv, ws_->mq, ws_->mkv, ws_->mpe, NHt_, mN_, mP_, mV_, Nm);
}

// From dqkv (the attention's input gradient) to d ln1 (C, Ns), which the caller's norm takes.
template <class T>
void ModelExecutor<T>::mlaAttentionBackward(const Acts& a, const Layer& w, const Layer& d, const T* x)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, D = mDown_, Q = mQ_, R = mR_, P = mP_;
    k_.mlaDisassemble(ws_->mq, ws_->mkv, ws_->mpe, ws_->dqkv, NHt_, mN_, mP_, mV_, Nm);
    for (int h = 0; h < NHt_; ++h)
        k_.ropeBackward(ws_->mq, mQup_, std::int64_t(h) * hd_ + mN_, 1, mP_, positions_.data(), Nm, cfg_.rope_base);
    k_.ropeBackward(ws_->mpe, P, 0, 1, mP_, positions_.data(), Nm, cfg_.rope_base);
    // The up products' backward on the gathered latents (gathered again: only the shards are kept).
    T* dqIn = Q > 0 ? ws_->mdq : ws_->partial;
    const T* qIn = Q > 0 ? gatherRows(a.mqn, Q, ws_->mqg) : gatherTokens(a.ln1, ws_->gath);
    k_.matmulBackward(dqIn, d.mqw, nullptr, ws_->mq, qIn, w.mqw, mQin_, mQup_, Nm);
    k_.matmulBackward(ws_->mdkv, d.mkvw, nullptr, ws_->mkv, gatherRows(a.mkvn, R, ws_->mkvg), w.mkvw, R, mKvup_, Nm);
    // Partial sums over this rank's heads: reduced over tp (to the token shard under sp).
    const T* dkvn = reduceRows(ws_->mdkv, R);
    const T* dpe = reduceRows(ws_->mpe, P);
    T* ddown = ws_->mddown;  // (D, Ns): the norms add their input gradients into it
    k_.zero(ddown, D * Ns);
    for (std::int64_t n = 0; n < Ns; ++n)
        std::copy_n(dpe + n * P, P, ddown + n * D + Q + R);
    k_.chargeCopy(P * Ns);
    k_.normBackward(cfg_.norm, ddown + Q, d.mkvnw, d.mkvnb, dkvn, a.mdown + Q, w.mkvnw, a.mkvmean, a.mkvrstd, R, Ns, D);
    T* dln1 = ws_->partial;
    if (Q > 0) {
        const T* dqn = reduceRows(ws_->mdq, Q);
        k_.normBackward(cfg_.norm, ddown, d.mqnw, d.mqnb, dqn, a.mdown, w.mqnw, a.mqmean, a.mqrstd, Q, Ns, D);
        k_.matmulBackward(dln1, d.mdw, nullptr, ddown, a.ln1, w.mdw, C, D, Ns);
    } else {
        // The q projection's input gradient (partial over tp) reduced first, the down product's added to it.
        dln1 = reduceTokens(ws_->partial);
        k_.matmulBackward(dln1, d.mdw, nullptr, ddown, a.ln1, w.mdw, C, D, Ns, true);
    }
    k_.normBackward(cfg_.norm, ws_->dres, d.n1w, d.n1b, dln1, x, w.n1w, a.n1mean, a.n1rstd, C, Ns);
}

template <class T>
void ModelExecutor<T>::crossEntropyBackward(T* probs, const std::vector<int>& targets, T dloss)
{
    const std::int64_t Nm = Nm_, Vt = Vt_;
    if (tp_ == 1) {
        k_.softmaxCrossEntropyBackward(probs, targets.data(), Vt, Nm, dloss);
    } else {
        const int lo = tpRank_ * Vt_;
        for (std::int64_t n = 0; n < Nm; ++n) {
            T* col = probs + n * Vt;
            const int t = targets[size_t(n)];
            const T scale = t < 0 ? T(0) : dloss;  // an ignored target: no gradient
            for (std::int64_t v = 0; v < Vt; ++v)
                col[v] *= scale;
            if (t >= lo && t < lo + Vt_)
                col[t - lo] -= dloss;
        }
        k_.chargeCrossEntropy(true, Vt, Nm);
        k_.round(probs, Vt * Nm);
    }
}

template <class T>
void ModelExecutor<T>::headBackward(Slot& s)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, Vt = Vt_;
    // Every token's loss enters the step's mean over all replicas and micro-batches.
    const T dloss = T(1.0 / double(opts_.global_tokens));
    crossEntropyBackward(s.probs, s.targets, dloss);
    const T* root = acquireWeights(rootUnit_);
    T* droot = acquireGrads(rootUnit_);
    const T* headW = acquireWeights(headUnit_) + headAt_;
    T* dhead = acquireGrads(headUnit_) + headAt_;
    const T* x = stackOutput(s);
    const T* lnfOut = lnfAt_ >= 0 ? s.lnf : x;
    const T* hidden = mlmAt_ >= 0 ? s.mlmOut : lnfOut;
    k_.matmulBackward(ws_->partial, dhead, mlmBiasAt_ >= 0 ? droot + mlmBiasAt_ : nullptr, s.probs,
                      gatherTokens(hidden, ws_->gath), headW, C, Vt, Nm);
    releaseGrads(headUnit_);
    releaseWeights(headUnit_);
    T* dfromHead = reduceTokens(ws_->partial);
    if (D_ > 0)  // + the MTP depths' gradient into the final norm's output (their first hnorm's input)
        k_.accumulate(dfromHead, ws_->mtpCarry, C * Ns);
    if (encDec_ && cfg_.tied_embeddings)  // through T5's d_model^-0.5
        k_.scale(dfromHead, C * Ns, 1 / std::sqrt(double(C)));
    const T* dhidden = dfromHead;
    // BERT: back through the masked-LM transform, into d lnfOut (partial's head, free by then) or d x.
    if (mlmAt_ >= 0) {
        T* dlnfOut = lnfAt_ >= 0 ? ws_->partial : ws_->dres;
        mlmTransformBackward(s, root, droot, dhidden, lnfOut, dlnfOut);
        dhidden = dlnfOut;
    }
    if (lnfAt_ >= 0) {
        std::fill(ws_->dres, ws_->dres + C * Ns, T(0));
        const T* lnfw = root + lnfAt_;
        T* dlnfw = droot + lnfAt_;
        k_.normBackward(cfg_.norm, ws_->dres, dlnfw, cfg_.layerNorm() ? dlnfw + C : nullptr, dhidden, x, lnfw,
                        s.lnfmean, s.lnfrstd, C, Ns);
    } else if (dhidden != ws_->dres) {
        std::copy_n(dhidden, C * Ns, ws_->dres);  // no norm and no transform: the head's input is x
        k_.chargeCopy(C * Ns);
    }
    if (holdsPooler(s))
        poolerBackward(s, root, droot);
    releaseGrads(rootUnit_);
    releaseWeights(rootUnit_);
}

template <class T>
void ModelExecutor<T>::embedBackward(Slot& s)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    // BERT: through the embedding norm first, into the sum's gradient.
    const bool encoder = wttAt_ >= 0 || embNormAt_ >= 0;
    const T* root = encoder ? acquireWeights(rootUnit_) : nullptr;
    T* droot = encoder ? acquireGrads(rootUnit_) : nullptr;
    const T* dsum = ws_->dres;
    if (embNormAt_ >= 0) {
        std::fill(ws_->dpost, ws_->dpost + C * Ns, T(0));
        const T* w = root + embNormAt_;
        T* dw = droot + embNormAt_;
        k_.normBackward(cfg_.norm, ws_->dpost, dw, cfg_.layerNorm() ? dw + C : nullptr, ws_->dres, s.embSum, w,
                        s.embMean, s.embRstd, C, Ns);
        dsum = ws_->dpost;
    }
    const T* dout = gatherTokens(dsum, ws_->dresFull);
    T* dwte = acquireGrads(wteUnit_) + wteAt_;
    T* dwpe = wpeAt_ >= 0 ? acquireGrads(rootUnit_) + wpeAt_ : nullptr;
    k_.embeddingBackward(dwte, dwpe, dout, s.inputs.data(), positions_.data(), C, Nm, tpRank_ * Vt_, Vt_);
    if (wttAt_ >= 0)
        k_.tokenTypeBackward(droot + wttAt_, cfg_.token_types, dout, s.tokenTypes.data(), C, Nm);
    if (dwpe)
        releaseGrads(rootUnit_);
    releaseGrads(wteUnit_);
    if (encoder) {
        releaseGrads(rootUnit_);
        releaseWeights(rootUnit_);
    }
}

template <class T>
void ModelExecutor<T>::backward(int micro, int chunk)
{
    if (chunk < 0 || chunk >= chunks_)
        throw std::out_of_range("ModelExecutor::backward: chunk " + std::to_string(chunk) + " outside [0, " +
                                std::to_string(chunks_) + ")");
    Slot& s = *slots_.at(size_t(micro) * size_t(chunks_) + size_t(chunk));
    const std::int64_t n = std::int64_t(C_) * Ns_;
    // The root unit is held across the whole backward of the chunks that use it (FSDP's root:
    // gathered once, its gradient reduced once at the end; with one stage the tied embedding's
    // gradient comes from the head first and the embedding last).
    const bool embeds = firstStage() && chunk == 0, head = holdsHead(s);
    const bool outer = embeds || head;
    if (outer)
        forOuterUnits([&](int u) {
            acquireWeights(u);
            acquireGrads(u);
        });
    if (head && D_ > 0)
        mtpBackward(s);
    if (head)
        headBackward(s);
    else
        recv(ws_->dres, n, place_.next_stage);
    if (encDec_)
        decoderBackwardBegin(s);
    const int owned = ownedLayers(), offloaded = offloadedLayers();
    for (int k = Lc_ - 1; k >= 0; --k) {
        // An offloaded layer comes back one layer ahead, during the backward of the layer after it
        // (Transformer Engine's double buffer); a layer's allocation is freed after its backward.
        if (k < offloaded && !s.own[size_t(k)].base)
            reloadLayer(s, k);
        if (k >= 1 && k - 1 < offloaded && offloadOverlaps())
            reloadLayer(s, k - 1);
        if (k < offloaded)
            dev_.waitFor(s.own[size_t(k)].done_s);
        layerBackward(k, s);
        if (k < owned)
            freeLayer(s, k, false);
        if (encDec_ && k == Lenc_)
            decoderToEncoder(s);
    }
    if (embeds)
        embedBackward(s);
    else if constexpr (std::is_same_v<T, float>)
        place_.comm->send(id_, place_.previous_stage, ws_->dres, size_t(n), e_);
    if (outer)
        forOuterUnits([&](int u) {
            releaseGrads(u);
            releaseWeights(u);
        });
    s.buffer.release();
}

// ---------------------------------------------------------------- multi-token prediction
//
// ModelConfig.h's MTP depths as Megatron-LM runs them (NVIDIA/Megatron-LM @ d98e8a64,
// megatron/core/transformer/multi_token_prediction.py: MultiTokenPredictionLayer._get_embeddings,
// _concat_embeddings, _postprocess; process_mtp_loss; roll_tensor), on the last stage:
//   tokens   input_ids and labels rolled left once per depth (torch.roll, the vacated last position
//            filled with 0; the loss mask rolled with them): depth d's position p reads token
//            p + d + 1, past the sequence's end token 0 with no target; RoPE at the positions unrolled
//            (the GPT model's rotary_pos_emb goes to every MTP layer as it is)
//   e        the shared embedding of the rolled tokens (VocabParallelEmbedding: reduced over tp, to
//            the token shard under sp), no position table (rotary only: ModelConfig validate)
//   eh_proj  ColumnParallelLinear (gather_output=False, no bias) of cat(enorm(e), hnorm(h)) over the
//            gathered tokens (sp: all-gather of the (2C, Ns) input, in backward again for the weight
//            gradient, its input gradient reduce-scattered; without sp copy_to_tensor_model_parallel
//            _region: the input gradient all-reduced); this rank's C/tp output rows all-gathered along
//            the hidden size (gather_from_tensor_model_parallel_region), then under sp this rank's
//            tokens kept (scatter_to_sequence_parallel_region; its backward an all-gather)
//   layer    the depth's transformer layer (local layer Lc + d, model layer L + d: the last layer's kind)
//   head     final_layernorm, then the shared output layer and vocab-parallel cross-entropy on the
//            rolled labels; the loss mtp_loss_scale x sum / num_tokens with mtp_loss_scale =
//            loss_scale / D and num_tokens the rolled mask's count, mb (T - d - 1), under the same
//            backward scale as the main loss (MTPLossAutoScaler: 1 / (micro-batches x dp) of the step)
// Depth d's hidden input is depth d - 1's final-norm output, depth 0's the main final norm's output.

template <class T>
void ModelExecutor<T>::mtpForward(Slot& s, const int* inputs, const int* targets)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, Ct = C / tp_;
    const T* wte = acquireWeights(wteUnit_) + wteAt_;
    const T* headW = acquireWeights(headUnit_) + headAt_;
    const T* prev = s.lnf;
    double total = 0;
    for (int d = 0; d < D_; ++d) {
        typename Slot::Mtp& m = s.mtp[size_t(d)];
        const int k = Lc_ + d, shift = d + 1;
        m.inputs.assign(size_t(Nm), 0);
        m.targets.assign(size_t(Nm), -1);
        for (int b = 0; b < mb_; ++b)
            for (int p = 0; p + shift < T_; ++p) {
                const std::int64_t n = std::int64_t(b) * T_ + p;
                const int token = inputs[n + shift];
                if (token < 0 || token >= V_)
                    throw std::out_of_range("ModelExecutor::forward: token id " + std::to_string(token) +
                                            " outside [0, vocab " + std::to_string(V_) + ")");
                m.inputs[size_t(n)] = token;
                m.targets[size_t(n)] = targets[n + shift];  // checked by headForward
            }
        const Layer w = acquireLayer(s, k, false);
        T* e = tp_ == 1 ? m.emb : ws_->partial;
        k_.embeddingForward(e, wte, nullptr, false, m.inputs.data(), positions_.data(), C, Nm, tpRank_ * Vt_, Vt_);
        if (tp_ > 1)
            std::copy_n(reduceTokens(ws_->partial), C * Ns, m.emb);
        k_.round(m.emb, C * Ns);
        k_.normForward(cfg_.norm, ws_->mtpE, m.emean, m.erstd, m.emb, w.mtpn[0], w.mtpnb[0], C, Ns, cfg_.norm_eps);
        k_.normForward(cfg_.norm, ws_->mtpH, m.hmean, m.hrstd, prev, w.mtpn[1], w.mtpnb[1], C, Ns, cfg_.norm_eps);
        k_.copyRows(m.cat, 2 * C, 0, ws_->mtpE, C, 0, C, Ns);  // torch.cat((decoder_input, hidden_states), -1)
        k_.copyRows(m.cat, 2 * C, C, ws_->mtpH, C, 0, C, Ns);
        const T* catFull = gatherRows(m.cat, 2 * C, ws_->mtpCatFull);
        if (tp_ == 1) {
            k_.matmulForward(m.x, catFull, w.mtpeh, nullptr, nullptr, 2 * C, C, Nm);
        } else {
            T* pieces = ws_->partial;  // rank r's (C/tp, Nm) rows at r C/tp Nm
            k_.matmulForward(pieces + tpRank_ * Ct * Nm, catFull, w.mtpeh, nullptr, nullptr, 2 * C, Ct, Nm);
            groups_.tp->allGather(tpRank_, pieces, size_t(C * Nm), e_);
            const std::int64_t n0 = sp_ ? tpRank_ * Ns : 0;  // sp: this rank's tokens
            for (int r = 0; r < tp_; ++r)
                k_.copyRows(m.x, C, r * Ct, pieces + (r * Nm + n0) * Ct, Ct, 0, Ct, Ns);
        }
        layerForward(k, s);
        k_.normForward(cfg_.norm, m.out, m.fmean, m.frstd, s.layers[size_t(k)].res3, w.mtpn[2], w.mtpnb[2], C, Ns,
                       cfg_.norm_eps);
        releaseLayer(s, k, false);
        k_.matmulForward(m.probs, gatherTokens(m.out, ws_->gath), headW, nullptr, nullptr, C, Vt_, Nm);
        crossEntropy(m.probs, m.losses, m.targets);
        double sum = 0;
        for (std::int64_t n = 0; n < Nm; ++n)
            sum += double(m.losses[n]);
        total += sum / (double(mb_) * (T_ - shift));
        prev = m.out;
    }
    releaseWeights(headUnit_);
    releaseWeights(wteUnit_);
    mtpLoss_ = total / D_;
}

template <class T>
void ModelExecutor<T>::mtpBackward(Slot& s)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, Ct = C / tp_;
    const T* headW = acquireWeights(headUnit_) + headAt_;
    T* dhead = acquireGrads(headUnit_) + headAt_;
    T* dwte = acquireGrads(wteUnit_) + wteAt_;
    T* carry = ws_->mtpCarry;  // d (the depth's hidden input), from the depth after it
    for (int d = D_ - 1; d >= 0; --d) {
        typename Slot::Mtp& m = s.mtp[size_t(d)];
        const int k = Lc_ + d;
        // loss_scale / D per valid token of the micro-batch's mb (T - d - 1), over the step as the main
        // loss's mb T: T / (T - d - 1) / global_tokens.
        const double perToken = cfg_.mtp.loss_scale / D_ * double(T_) / double(T_ - d - 1);
        crossEntropyBackward(m.probs, m.targets, T(perToken / double(opts_.global_tokens)));
        k_.matmulBackward(ws_->partial, dhead, nullptr, m.probs, gatherTokens(m.out, ws_->gath), headW, C, Vt_, Nm);
        T* dout = reduceTokens(ws_->partial);
        if (d < D_ - 1)
            k_.accumulate(dout, carry, C * Ns);
        const Layer w = acquireLayer(s, k, false);
        const Layer g = acquireLayer(s, k, true);
        std::fill(ws_->dres, ws_->dres + C * Ns, T(0));
        k_.normBackward(cfg_.norm, ws_->dres, g.mtpn[2], g.mtpnb[2], dout, s.layers[size_t(k)].res3, w.mtpn[2], m.fmean,
                        m.frstd, C, Ns);
        layerBackward(k, s);  // ws_->dres: d x, eh_proj's output
        const T* dx = gatherTokens(ws_->dres, ws_->dresFull);
        const T* dy = dx;
        if (tp_ > 1) {  // the all-gather along the hidden size: this rank's rows back
            k_.copyRows(ws_->mtpDy, Ct, 0, dx, C, tpRank_ * Ct, Ct, Nm);
            dy = ws_->mtpDy;
        }
        k_.matmulBackward(ws_->mtpDcat, g.mtpeh, nullptr, dy, gatherRows(m.cat, 2 * C, ws_->mtpCatFull), w.mtpeh, 2 * C,
                          Ct, Nm);
        const T* dcat = reduceRows(ws_->mtpDcat, 2 * C);
        k_.copyRows(ws_->mtpE, C, 0, dcat, 2 * C, 0, C, Ns);
        k_.copyRows(ws_->mtpH, C, 0, dcat, 2 * C, C, C, Ns);
        std::fill(ws_->dres, ws_->dres + C * Ns, T(0));
        k_.normBackward(cfg_.norm, ws_->dres, g.mtpn[0], g.mtpnb[0], ws_->mtpE, m.emb, w.mtpn[0], m.emean, m.erstd, C,
                        Ns);
        k_.embeddingBackward(dwte, nullptr, gatherTokens(ws_->dres, ws_->dresFull), m.inputs.data(), positions_.data(),
                             C, Nm, tpRank_ * Vt_, Vt_);
        std::fill(carry, carry + C * Ns, T(0));
        const T* prev = d == 0 ? s.lnf : s.mtp[size_t(d - 1)].out;
        k_.normBackward(cfg_.norm, carry, g.mtpn[1], g.mtpnb[1], ws_->mtpH, prev, w.mtpn[1], m.hmean, m.hrstd, C, Ns);
        releaseLayer(s, k, true);
        releaseLayer(s, k, false);
    }
    releaseGrads(wteUnit_);
    releaseGrads(headUnit_);
    releaseWeights(headUnit_);
}

// ---------------------------------------------------------------- BERT-style encoders
//
// HF transformers models/bert/modeling_bert.py @ 004ad5f: BertSelfOutput and BertOutput
// (LayerNorm(dense(x) + input): post-norm), BertPredictionHeadTransform (dense, GeLU, LayerNorm),
// BertLMPredictionHead (the tied decoder plus the output bias), BertPooler (dense + tanh of the
// first token), BertPreTrainingHeads' seq_relationship (h -> 2).
//
// A post-norm layer keeps the same tensors as a pre-norm one, named by their place:
//   res2 = x + attn(x)     norm 1's input        ln1 = norm1(res2)   the MLP's input and residual
//   ln2  = ln1 + mlp(ln1)  norm 2's input        res3 = norm2(ln2)  the layer's output
// Its backward runs each norm first (into a zeroed buffer: the residual skips the norm here) and
// adds the residual branch's gradient in a pass of its own (ops::kGradientAdd).

template <class T>
void ModelExecutor<T>::postNormLayerForward(int k, Slot& s)
{
    const int unit = layerUnit(s, k);
    const Layer w = bind(acquireWeights(unit), unit);
    const Acts& a = s.layers[size_t(k)];
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    const T* x = layerInput(s, k);
    k_.matmulForward(a.qkv, gatherTokens(x, ws_->gath), w.qkvw, w.qkvb, nullptr, C, qkvRows_, Nm);
    if (!cfg_.learnedPositions())
        k_.ropeForward(a.qkv, qkvRows_, 0, NHt_ + NKVt_, hd_, positions_.data(), Nm, cfg_.rope_base);
    attentionCore(a, s);
    rowParallelForward(a.res2, a.atty, qdt_, w.aw, w.ab, x);
    k_.normForward(cfg_.norm, a.ln1, a.n1mean, a.n1rstd, a.res2, w.n1w, w.n1b, C, Ns, cfg_.norm_eps);
    k_.matmulForward(a.fch, gatherTokens(a.ln1, ws_->gath), w.fw, w.fb, nullptr, C, Fin_, Nm);
    k_.activationForward(cfg_.mlp, a.fchg, a.fch, Ft_, Nm);
    rowParallelForward(a.ln2, a.fchg, Ft_, w.pw, w.pb, a.ln1);
    k_.normForward(cfg_.norm, a.res3, a.n2mean, a.n2rstd, a.ln2, w.n2w, w.n2b, C, Ns, cfg_.norm_eps);
    releaseWeights(unit);
}

template <class T>
void ModelExecutor<T>::postNormLayerBackward(int k, Slot& s)
{
    const int unit = layerUnit(s, k);
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    const T* x = layerInput(s, k);
    const Layer w = bind(acquireWeights(unit), unit);
    const Acts& a = s.layers[size_t(k)];
    if (recompute_ == Recompute::Full)
        postNormLayerForward(k, s);
    else if (recompute_ == Recompute::Selective)
        attentionCore(a, s);
    const Layer d = bind(acquireGrads(unit), unit);
    T* dres = ws_->dres;   // (C, Ns): d res3 on entry, d x on exit
    T* dsum = ws_->dpost;  // (C, Ns): d ln2, then d ln1

    std::fill(dsum, dsum + C * Ns, T(0));
    k_.normBackward(cfg_.norm, dsum, d.n2w, d.n2b, dres, a.ln2, w.n2w, a.n2mean, a.n2rstd, C, Ns);
    k_.matmulBackward(ws_->dfchg, d.pw, d.pb, gatherTokens(dsum, ws_->dresFull), a.fchg, w.pw, Ft_, C, Nm);
    k_.activationBackward(cfg_.mlp, ws_->dfch, a.fch, ws_->dfchg, Ft_, Nm);
    k_.matmulBackward(ws_->partial, d.fw, d.fb, ws_->dfch, gatherTokens(a.ln1, ws_->gath), w.fw, C, Fin_, Nm);
    k_.accumulate(dsum, reduceTokens(ws_->partial), C * Ns);

    std::fill(dres, dres + C * Ns, T(0));
    k_.normBackward(cfg_.norm, dres, d.n1w, d.n1b, dsum, a.res2, w.n1w, a.n1mean, a.n1rstd, C, Ns);
    k_.matmulBackward(ws_->datty, d.aw, d.ab, gatherTokens(dres, ws_->dresFull), a.atty, w.aw, qdt_, C, Nm);
    attentionCoreBackward(a, k, AttentionShape{mb_, T_, T_, NHt_, NKVt_, hd_, cfg_.causal});
    if (!cfg_.learnedPositions())
        k_.ropeBackward(ws_->dqkv, qkvRows_, 0, NHt_ + NKVt_, hd_, positions_.data(), Nm, cfg_.rope_base);
    k_.matmulBackward(ws_->partial, d.qkvw, d.qkvb, ws_->dqkv, gatherTokens(x, ws_->gath), w.qkvw, C, qkvRows_, Nm);
    k_.accumulate(dres, reduceTokens(ws_->partial), C * Ns);
    releaseGrads(unit);
    releaseWeights(unit);
}

// The masked-LM transform on this rank's (C, Ns) tokens (under SP its token shard, as Megatron-LM
// runs the BERT LM head's dense layer; the replicated weights' gradients are then partial sums
// over tp, reduced with the norms'). x: the last hidden state (or the final norm's output).
template <class T>
void ModelExecutor<T>::mlmTransformForward(Slot& s, const T* root, const T* x)
{
    const std::int64_t C = C_, Ns = Ns_;
    const T* w = root + mlmAt_;
    const T* nw = root + mlmNormAt_;
    k_.matmulForward(s.mlmPre, x, w, w + C * C, nullptr, C, C, Ns);
    k_.activationForward(MlpKind::Gelu, s.mlmAct, s.mlmPre, C, Ns);
    k_.normForward(cfg_.norm, s.mlmOut, s.mlmMean, s.mlmRstd, s.mlmAct, nw, cfg_.layerNorm() ? nw + C : nullptr, C,
                   Ns, cfg_.norm_eps);
}

// dh: the gradient of the transform's output (C, Ns); dx (C, Ns) overwritten (may be dh's buffer
// only if dh is read first: dx is written last).
template <class T>
void ModelExecutor<T>::mlmTransformBackward(Slot& s, const T* root, T* droot, const T* dh, const T* x, T* dx)
{
    const std::int64_t C = C_, Ns = Ns_;
    const T* w = root + mlmAt_;
    const T* nw = root + mlmNormAt_;
    T* dw = droot + mlmAt_;
    T* dnw = droot + mlmNormAt_;
    T* dact = ws_->dpost;
    std::fill(dact, dact + C * Ns, T(0));
    k_.normBackward(cfg_.norm, dact, dnw, cfg_.layerNorm() ? dnw + C : nullptr, dh, s.mlmAct, nw, s.mlmMean, s.mlmRstd,
                    C, Ns);
    k_.activationBackward(MlpKind::Gelu, dact, s.mlmPre, dact, C, Ns);
    k_.matmulBackward(dx, dw, dw + C * C, dact, x, w, C, C, Ns);
}

// The pooler runs where the sequences' first tokens are: on the cp rank holding position 0 (cp
// rank 0: its first chunk is each sequence's first), of the model's last chunk.
template <class T>
bool ModelExecutor<T>::holdsPooler(const Slot& s) const
{
    return poolAt_ >= 0 && holdsHead(s) && cpRank_ == 0;
}

// Each sequence b's first token is local column b Tl. Under SP the tp ranks hold token shards: each
// copies the first tokens it holds into a zeroed (C, mb) block and the block is all-reduced over tp
// (a sum of one value and zeros: exact in any precision), so every tp rank runs the replicated
// pooler and head on all mb sequences. Returns k x the sum of the next-sentence losses.
template <class T>
double ModelExecutor<T>::poolerForward(Slot& s, const T* root, const T* x)
{
    const std::int64_t C = C_, mb = mb_;
    const std::int64_t lo = sp_ ? std::int64_t(tpRank_) * Ns_ : 0;
    std::fill(s.poolIn, s.poolIn + C * mb, T(0));
    std::int64_t copied = 0;
    for (std::int64_t b = 0; b < mb; ++b) {
        const std::int64_t col = b * Tl_;
        if (col >= lo && col < lo + Ns_) {
            std::copy_n(x + (col - lo) * C, C, s.poolIn + b * C);
            copied += C;
        }
    }
    k_.chargeCopy(copied);
    if (sp_)
        groups_.tp->allReduce(tpRank_, s.poolIn, size_t(C * mb), ReduceOp::Sum, e_);
    const T* pw = root + poolAt_;
    const T* nw = root + nspAt_;
    k_.matmulForward(s.pooled, s.poolIn, pw, pw + C * C, nullptr, C, C, mb);
    k_.tanhForward(s.pooled, C * mb);
    k_.matmulForward(s.nspProbs, s.pooled, nw, nw + 2 * C, nullptr, C, 2, mb);
    k_.softmaxCrossEntropy(s.nspProbs, s.nspLosses, s.nextSentence.data(), 2, mb);
    double sum = 0;
    for (std::int64_t b = 0; b < mb; ++b)
        sum += double(s.nspLosses[b]);
    return double(predictedPerSequence(cfg_)) * sum;
}

// The next-sentence loss's gradient (k / (B k) = 1 / B a sequence), back through the head and the
// pooler into the first tokens' hidden states (ws_->dres, this rank's token columns).
template <class T>
void ModelExecutor<T>::poolerBackward(Slot& s, const T* root, T* droot)
{
    const std::int64_t C = C_, mb = mb_;
    const T dloss = T(double(predictedPerSequence(cfg_)) / double(opts_.global_tokens));
    k_.softmaxCrossEntropyBackward(s.nspProbs, s.nextSentence.data(), 2, mb, dloss);
    const T* pw = root + poolAt_;
    const T* nw = root + nspAt_;
    T* dpw = droot + poolAt_;
    T* dnw = droot + nspAt_;
    k_.matmulBackward(ws_->dpool, dnw, dnw + 2 * C, s.nspProbs, s.pooled, nw, C, 2, mb);
    k_.tanhBackward(ws_->dpool, s.pooled, C * mb);
    k_.matmulBackward(ws_->dpoolIn, dpw, dpw + C * C, ws_->dpool, s.poolIn, pw, C, C, mb);
    const std::int64_t lo = sp_ ? std::int64_t(tpRank_) * Ns_ : 0;
    for (std::int64_t b = 0; b < mb; ++b) {
        const std::int64_t col = b * Tl_;
        if (col >= lo && col < lo + Ns_)
            k_.accumulate(ws_->dres + (col - lo) * C, ws_->dpoolIn + b * C, C);
    }
}

// ---------------------------------------------------------------- step

// The tensor-parallel and pipeline sums: the norms' gradients under sequence parallelism (each
// tp rank saw its own tokens) and the tied embedding's between the pipeline's ends.
template <class T>
void ModelExecutor<T>::sumAcrossTensorAndPipeline(bool whole)
{
    if (sp_ || (cfg_.qk_norm && tp_ > 1)) {
        packed_.clear();
        forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, T* p) {
            if (t.sp_partial)
                packed_.insert(packed_.end(), p, p + n);
        }, whole);
        groups_.tp->allReduce(tpRank_, packed_.data(), packed_.size(), ReduceOp::Sum, g_);
        size_t at = 0;
        forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, T* p) {
            if (t.sp_partial) {
                std::copy_n(packed_.data() + at, n, p);
                at += size_t(n);
            }
        }, whole);
    }
    if (groups_.embedding && (cfg_.tied_embeddings || cfg_.mtp.enabled())) {
        const int rank = groups_.embedding->rankOf(id_);
        forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, T* p) {
            if (t.word_embedding)
                groups_.embedding->allReduce(rank, p, size_t(n), ReduceOp::Sum, g_);
        }, whole);
    }
}

template <class T>
double ModelExecutor<T>::reduceGradients()
{
    T* g = grads_.template as<T>();
    // bf16 gradients: stored rounded once accumulated (ZeRO-2/3 round each reduced chunk); fp32 main
    // gradients stay as accumulated.
    if (zero_ < 2 && roundGrads_)
        k_.round(g, P_);
    // Megatron-LM's order where gradients are held whole (no ZeRO, ZeRO-1): the tensor-parallel
    // and pipeline sums of whole tensors first, then the data-parallel reduction.
    if (zero_ <= 1)
        sumAcrossTensorAndPipeline(true);
    const int dp = groupSize(groups_.dp);
    // The routed experts' gradients are summed over the expert-data-parallel group (the devices
    // of the stage holding the same experts; Megatron's expert_data_parallel_group), the others
    // over dp below, in buckets over the ranges between the experts'.
    std::vector<std::pair<std::int64_t, std::int64_t>> dense{{0, P_}};
    if (moe_) {
        dense.clear();
        std::int64_t at = 0;
        for (const ShardTensor& t : tensors_) {
            if (!t.expert)
                continue;
            if (t.offset > at)
                dense.push_back({at, t.offset});
            at = t.offset + t.count;
        }
        if (P_ > at)
            dense.push_back({at, P_});
        if (zero_ == 0 && groupSize(groups_.edp) > 1)
            for (size_t i = tensors_.size(); i-- > 0;)
                if (tensors_[i].expert)
                    groups_.edp->allReduce(edpRank_, g + tensors_[i].offset, size_t(tensors_[i].count), ReduceOp::Sum,
                                           g_);
    }
    // Data parallel without gradient sharding: all-reduce in buckets, the last layers'
    // first (the order a backward produces them, as PyTorch DDP does).
    if (zero_ == 0 && dp > 1) {
        const std::int64_t bucket = std::max<std::int64_t>(1, std::int64_t(double(opts_.bucket_bytes) / g_));
        for (size_t r = dense.size(); r-- > 0;)
            for (std::int64_t end = dense[r].second; end > dense[r].first; end -= bucket) {
                const std::int64_t begin = std::max<std::int64_t>(dense[r].first, end - bucket);
                groups_.dp->allReduce(dpRank_, g + begin, size_t(end - begin), ReduceOp::Sum, g_);
            }
    }
    // ZeRO-1: each member updates only the chunk it owns, so it needs only that chunk
    // reduced: reduce-scatter over the shard group (then all-reduce the chunk over the
    // replicas, HSDP), half the bytes of an all-reduce; the update all-gathers the weights.
    // The routed experts' units alike over their own group, edp or under HSDP its slice in this
    // replica (Megatron's expert buffers), their chunks then over the same replicas.
    if (zero_ == 1)
        for (size_t ui = units_.size(); ui-- > 0;) {
            const ShardUnit& u = units_[ui];
            if (u.expert ? groupSize(groups_.edp) <= 1 : dp <= 1)
                continue;
            if (CommGroup* sg = shardGroupOf(u); groupSize(sg) > 1)
                sg->reduceScatter(shardRankOf(u), g + u.offset, size_t(u.count), ReduceOp::Sum, g_);
            if (groupSize(groups_.replica) > 1)
                groups_.replica->allReduce(replicaIndex_, g + u.offset + u.chunk_begin,
                                           size_t(u.chunk_end - u.chunk_begin), ReduceOp::Sum, g_);
        }
    // ZeRO-2/3 with HSDP: the accumulated shards are summed over the replicas, once per step.
    if (zero_ >= 2 && groupSize(groups_.replica) > 1)
        groups_.replica->allReduce(replicaIndex_, g, size_t(S_), ReduceOp::Sum, g_);
    if (zero_ >= 2)
        sumAcrossTensorAndPipeline(false);
    // This device's share of the squared norm: every value of the model counted once.
    const bool countsReplicas = zero_ >= 1 ? replicaIndex_ == 0 : dpRank_ == 0;
    double sumSq = 0;
    forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, T* p) {
        // An expert's values are on the devices of one expert-data-parallel group: counted on its rank 0
        // (ZeRO: each member's own chunk, in the first replica).
        const bool counted = t.expert ? (zero_ >= 1 ? replicaIndex_ == 0 : edpRank_ == 0)
                                      : countsReplicas && !t.tied_copy && !(t.tp_replicated && tpRank_ != 0);
        if (counted)
            sumSq += sum_of_squares<T>(k_.pool(), p, n);
    });
    // The norm's pass over the owned gradients (with the optimizer offloaded, the host takes it on
    // its copy, inside the offloaded step).
    const double gc = zero_ >= 1 ? double(S_) : double(P_);
    if (!offload_)
        k_.chargeSquaredNorm(std::int64_t(gc), g_);
    return sumSq;
}

template <class T>
void ModelExecutor<T>::update(const AdamWSettings& settings, double grad_scale, int step)
{
    T* w = weights_.template as<T>();
    T* m = optimizer_.template as<T>();
    T* v = m + S_;
    const bool mixed = opts_.precision == PrecisionMode::BF16Mixed;
    T* master = mixed ? m + 2 * S_ : nullptr;
    WeightRounding rounding = WeightRounding::None;
    if (opts_.precision == PrecisionMode::BF16RNE)
        rounding = WeightRounding::Bf16NearestEven;
    else if (opts_.precision == PrecisionMode::BF16SR)
        rounding = WeightRounding::Bf16Stochastic;
    // Stochastic rounding draws from (seed, step, index): a stream per device, reproducible.
    const std::uint64_t seed = id_ == 0 ? opts_.seed : mix64(opts_.seed ^ (0x9E3779B97F4A7C15ull * std::uint64_t(id_)));
    // The update clears each gradient it reads; where it reads them all (no ZeRO, ZeRO-2/3),
    // the step's clearing pass below is only charged, not run again.
    std::int64_t cleared = 0;
    for (size_t ui = 0; ui < units_.size(); ++ui) {
        const ShardUnit& u = units_[ui];
        const std::int64_t lo = u.offset + u.chunk_begin, hi = u.offset + u.chunk_end;
        for (int k = 0; k < u.tensors; ++k) {
            const ShardTensor& t = tensors_[size_t(u.first_tensor + k)];
            const std::int64_t b = std::max(lo, t.offset), e = std::min(hi, t.offset + t.count);
            if (b >= e)
                continue;
            const std::int64_t s = u.shard_offset + (b - lo);  // place in the optimizer (and ZeRO-3 weight) shard
            T* g = gradPointer(b, int(ui));
            adamw_update<T>(k_.pool(), zero_ >= 3 ? w + s : w + b, g, m + s, v + s, master ? master + s : nullptr,
                            e - b, settings, t.decay, step, grad_scale, rounding, seed, std::uint64_t(b), g);
            cleared += e - b;
        }
    }
    const double p = double(S_), ms = mixed ? 4 : 0;
    if (offload_) {
        // Down: the owned gradients; on the host: read the gradient and read and write m, v (and
        // the fp32 master), write the weight (fp32: read it too); up: the updated weights.
        const double weightPasses = opts_.precision == PrecisionMode::FP32 ? 2 : 1;
        k_.device().chargeHost({p * g_, p * e_, p * (2 * (8 + ms) + g_ + weightPasses * e_)});
    } else {
        k_.chargeAdamW(S_, mixed, g_);
    }
    if (zero_ == 1 || zero_ == 2)
        for (const ShardUnit& u : units_)
            if (CommGroup* sg = shardGroupOf(u))
                sg->allGather(shardRankOf(u), w + u.offset, size_t(u.count), e_);
    const auto gradCount = std::int64_t(grads_.elements());
    if (cleared == gradCount)  // ranges are disjoint: every gradient was cleared once
        k_.chargeZero(gradCount, g_);
    else
        k_.zero(grads_.template as<T>(), gradCount, g_);
}

template <class T>
void ModelExecutor<T>::injectNaN()
{
    weights_.template as<T>()[0] = std::numeric_limits<T>::quiet_NaN();
}

template <class T>
void ModelExecutor<T>::exportParameters(T* full) const
{
    const T* w = weights_.template as<T>();
    for (const ShardTensor& t : tensors_) {
        const ShardUnit& u = units_[size_t(t.unit)];
        for (const ParameterRun& run : t.runs)
            for (std::int64_t i = 0; i < run.count; ++i) {
                const std::int64_t li = t.offset + run.local_offset + i;
                if (zero_ < 3)
                    full[run.full_offset + i] = w[li];
                else if (li >= u.offset + u.chunk_begin && li < u.offset + u.chunk_end)
                    full[run.full_offset + i] = w[u.shard_offset + (li - u.offset - u.chunk_begin)];
            }
    }
}

// ---------------------------------------------------------------- encoder-decoder (T5)
//
// After huggingface/transformers src/transformers/models/t5/modeling_t5.py @ 6b8b757 (T5Block,
// T5LayerSelfAttention, T5LayerCrossAttention, T5Attention without the 1/sqrt(d) of the scores,
// T5Stack's final_layer_norm, T5ForConditionalGeneration's d_model^-0.5 before the tied lm_head),
// with Megatron-LM's tensor parallelism (megatron/core/models/T5/t5_model.py @ d98e8a6): the
// cross-attention's q and [k v] products column-parallel, its projection row-parallel. Two
// differences from Megatron-LM, both exact and cheaper: the relative bias tables are split over tp
// by heads (each rank holds its heads' rows; Megatron-LM keeps the whole table on every rank and
// scatters the computed (T, T, heads) bias, all-gathering its gradient), and the encoder output's
// gradient, a partial sum over tp from each decoder layer's column-parallel [k v] product, is summed
// over the layers and reduced once per micro-batch instead of once per layer.

template <class T>
AttentionShape ModelExecutor<T>::t5Shape(bool causal) const
{
    return AttentionShape{mb_, T_, T_, NHt_, NKVt_, hd_, causal, 1.0};  // T5 scales no score
}

template <class T>
ScoreBias<T> ModelExecutor<T>::relativeBias(bool decoder, const T* root) const
{
    return ScoreBias<T>{root + (decoder ? decRelAt_ : encRelAt_), (decoder ? decBuckets_ : encBuckets_).data(),
                        cfg_.relative_buckets};
}

template <class T>
const T* ModelExecutor<T>::encoderOutput(const Slot& s) const
{
    return sp_ ? ws_->encFull : s.encOut;  // gathered over the token shards under SP
}

template <class T>
void ModelExecutor<T>::t5SelfAttention(int k, const Acts& a)
{
    const bool decoder = k >= Lenc_;
    const AttentionShape shape = t5Shape(decoder);
    const AttentionOperands<T> x{a.qkv, qkvRows_, a.qkv + qdt_, qkvRows_};
    k_.attentionProbs(a.att, x, shape, relativeBias(decoder, acquireWeights(rootUnit_)));
    releaseWeights(rootUnit_);
    k_.attentionValues(a.atty, a.att, x, shape);
}

template <class T>
void ModelExecutor<T>::t5CrossAttention(const Acts& a)
{
    const AttentionShape shape = t5Shape(false);  // every decoder token sees every encoder token, no bias
    const AttentionOperands<T> x{a.cq, qdt_, a.ckv, 2 * std::int64_t(kvdt_)};
    k_.attentionProbs(a.catt, x, shape, {});
    k_.attentionValues(a.catty, a.catt, x, shape);
}

template <class T>
void ModelExecutor<T>::t5LayerForward(int k, Slot& s)
{
    const int unit = layerUnits_[size_t(k)];
    const Layer w = bind(acquireWeights(unit), unit);
    const Acts& a = s.layers[size_t(k)];
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    const T* x = layerInput(s, k);
    const bool decoder = k >= Lenc_;
    k_.normForward(cfg_.norm, a.ln1, a.n1mean, a.n1rstd, x, w.n1w, w.n1b, C, Ns, cfg_.norm_eps);
    k_.matmulForward(a.qkv, gatherTokens(a.ln1, ws_->gath), w.qkvw, nullptr, nullptr, C, qkvRows_, Nm);
    t5SelfAttention(k, a);
    rowParallelForward(a.res2, a.atty, qdt_, w.aw, nullptr, x);
    const T* mlpIn = a.res2;
    if (decoder) {  // cross-attention: q from this layer, k and v from the encoder output
        k_.normForward(cfg_.norm, a.lnx, a.nxmean, a.nxrstd, a.res2, w.nxw, w.nxb, C, Ns, cfg_.norm_eps);
        k_.matmulForward(a.cq, gatherTokens(a.lnx, ws_->gath), w.cqw, nullptr, nullptr, C, qdt_, Nm);
        k_.matmulForward(a.ckv, encoderOutput(s), w.ckvw, nullptr, nullptr, C, 2 * std::int64_t(kvdt_), Nm);
        t5CrossAttention(a);
        rowParallelForward(a.resx, a.catty, qdt_, w.cpw, nullptr, a.res2);
        mlpIn = a.resx;
    }
    k_.normForward(cfg_.norm, a.ln2, a.n2mean, a.n2rstd, mlpIn, w.n2w, w.n2b, C, Ns, cfg_.norm_eps);
    k_.matmulForward(a.fch, gatherTokens(a.ln2, ws_->gath), w.fw, nullptr, nullptr, C, Fin_, Nm);
    k_.activationForward(cfg_.mlp, a.fchg, a.fch, Ft_, Nm);
    rowParallelForward(a.res3, a.fchg, Ft_, w.pw, nullptr, mlpIn);
    releaseWeights(unit);
}

template <class T>
void ModelExecutor<T>::t5LayerBackward(int k, Slot& s)
{
    const int unit = layerUnits_[size_t(k)];
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_, kv = 2 * std::int64_t(kvdt_);
    const T* x = layerInput(s, k);
    const Layer w = bind(acquireWeights(unit), unit);
    const Acts& a = s.layers[size_t(k)];
    const bool decoder = k >= Lenc_;
    if (recompute_ == Recompute::Full) {
        t5LayerForward(k, s);
    } else if (recompute_ == Recompute::Selective) {  // the attention cores, self and cross
        t5SelfAttention(k, a);
        if (decoder)
            t5CrossAttention(a);
    }
    const Layer d = bind(acquireGrads(unit), unit);
    T* dres = ws_->dres;  // (C, Ns): d res3 on entry, d x on exit
    const T* mlpIn = decoder ? a.resx : a.res2;

    k_.matmulBackward(ws_->dfchg, d.pw, nullptr, gatherTokens(dres, ws_->dresFull), a.fchg, w.pw, Ft_, C, Nm);
    k_.activationBackward(cfg_.mlp, ws_->dfch, a.fch, ws_->dfchg, Ft_, Nm);
    k_.matmulBackward(ws_->partial, d.fw, nullptr, ws_->dfch, gatherTokens(a.ln2, ws_->gath), w.fw, C, Fin_, Nm);
    k_.normBackward(cfg_.norm, dres, d.n2w, d.n2b, reduceTokens(ws_->partial), mlpIn, w.n2w, a.n2mean, a.n2rstd, C, Ns);

    if (decoder) {
        T* dq = ws_->dqkv;
        T* dkv = ws_->dqkv + std::int64_t(qdt_) * Nm;
        k_.matmulBackward(ws_->datty, d.cpw, nullptr, gatherTokens(dres, ws_->dresFull), a.catty, w.cpw, qdt_, C, Nm);
        k_.attentionBackward(dq, qdt_, dkv, kv, ws_->datt, ws_->datty, a.catt, {a.cq, qdt_, a.ckv, kv}, t5Shape(false));
        // The encoder output's gradient: the last decoder layer's (the first to run) writes it, the others add.
        const bool first = k == Ls_ - 1;
        k_.matmulBackward(first ? ws_->dencFull : ws_->partial, d.ckvw, nullptr, dkv, encoderOutput(s), w.ckvw, C, kv, Nm);
        if (!first)
            k_.accumulate(ws_->dencFull, ws_->partial, C * Nm);
        k_.matmulBackward(ws_->partial, d.cqw, nullptr, dq, gatherTokens(a.lnx, ws_->gath), w.cqw, C, qdt_, Nm);
        k_.normBackward(cfg_.norm, dres, d.nxw, d.nxb, reduceTokens(ws_->partial), a.res2, w.nxw, a.nxmean, a.nxrstd,
                        C, Ns);
    }

    k_.matmulBackward(ws_->datty, d.aw, nullptr, gatherTokens(dres, ws_->dresFull), a.atty, w.aw, qdt_, C, Nm);
    const AttentionShape shape = t5Shape(decoder);
    k_.attentionBackward(ws_->dqkv, qkvRows_, ws_->dqkv + qdt_, qkvRows_, ws_->datt, ws_->datty, a.att,
                         {a.qkv, qkvRows_, a.qkv + qdt_, qkvRows_}, shape);
    const ScoreBias<T> bias = relativeBias(decoder, acquireWeights(rootUnit_));
    T* droot = acquireGrads(rootUnit_);
    k_.relativeBiasBackward(droot + (decoder ? decRelAt_ : encRelAt_), ws_->datt, bias, shape);
    releaseGrads(rootUnit_);
    releaseWeights(rootUnit_);
    k_.matmulBackward(ws_->partial, d.qkvw, nullptr, ws_->dqkv, gatherTokens(a.ln1, ws_->gath), w.qkvw, C, qkvRows_, Nm);
    k_.normBackward(cfg_.norm, dres, d.n1w, d.n1b, reduceTokens(ws_->partial), x, w.n1w, a.n1mean, a.n1rstd, C, Ns);
    releaseGrads(unit);
    releaseWeights(unit);
}

// Between the stacks: the encoder's final norm gives E; the decoder inputs are the labels shifted
// right behind the start token 0 (ModelConfig.h), embedded with the shared wte.
template <class T>
void ModelExecutor<T>::encoderToDecoder(Slot& s, const int* targets)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    const T* root = acquireWeights(rootUnit_);
    const T* w = root + encLnfAt_;
    k_.normForward(cfg_.norm, s.encOut, s.encmean, s.encrstd, s.layers[size_t(Lenc_ - 1)].res3, w,
                   cfg_.layerNorm() ? w + C : nullptr, C, Ns, cfg_.norm_eps);
    releaseWeights(rootUnit_);
    if (sp_)
        gatherTokens(s.encOut, ws_->encFull);
    s.decInputs.resize(size_t(Nm));
    for (std::int64_t n = 0; n < Nm; ++n) {
        const int t = int(n % T_);
        const int label = targets[n];
        if (label < 0 || label >= V_)
            throw std::out_of_range("ModelExecutor::forward: target id " + std::to_string(label) +
                                    " outside [0, vocab " + std::to_string(V_) + ")");
        s.decInputs[size_t(n)] = t == 0 ? 0 : targets[n - 1];
    }
    const T* wte = acquireWeights(wteUnit_) + wteAt_;
    T* out = tp_ == 1 ? s.decInput : ws_->partial;
    k_.embeddingForward(out, wte, nullptr, tpRank_ == 0, s.decInputs.data(), positions_.data(), C, Nm, tpRank_ * Vt_,
                        Vt_);
    if (tp_ > 1)
        std::copy_n(reduceTokens(ws_->partial), C * Ns, s.decInput);
    k_.round(s.decInput, C * Ns);
    releaseWeights(wteUnit_);
}

template <class T>
void ModelExecutor<T>::decoderBackwardBegin(Slot& s)
{
    if (sp_)  // the cross-attention's [k v] products need the whole E again (only the shard was kept)
        gatherTokens(s.encOut, ws_->encFull);
}

// Backward between the stacks: the decoder embedding's gradient into wte, then E's gradient
// (reduced over tp) through the encoder's final norm into the last encoder layer's output.
template <class T>
void ModelExecutor<T>::decoderToEncoder(Slot& s)
{
    const std::int64_t C = C_, Nm = Nm_, Ns = Ns_;
    T* dwte = acquireGrads(wteUnit_) + wteAt_;
    k_.embeddingBackward(dwte, nullptr, gatherTokens(ws_->dres, ws_->dresFull), s.decInputs.data(), positions_.data(),
                         C, Nm, tpRank_ * Vt_, Vt_);
    releaseGrads(wteUnit_);
    const T* dE = reduceTokens(ws_->dencFull);
    std::fill(ws_->dres, ws_->dres + C * Ns, T(0));
    const T* w = acquireWeights(rootUnit_) + encLnfAt_;
    T* dw = acquireGrads(rootUnit_) + encLnfAt_;
    k_.normBackward(cfg_.norm, ws_->dres, dw, cfg_.layerNorm() ? dw + C : nullptr, dE, s.layers[size_t(Lenc_ - 1)].res3,
                    w, s.encmean, s.encrstd, C, Ns);
    releaseGrads(rootUnit_);
    releaseWeights(rootUnit_);
}

template class ModelExecutor<float>;
template class ModelExecutor<double>;

} // namespace shardscope::engine
