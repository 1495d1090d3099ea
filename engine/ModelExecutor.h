// ModelExecutor: the one model the engine trains. A ModelConfig's blocks (ModelConfig.h)
// as one device of a layout holds and computes them, for tensor, sequence and pipeline
// parallelism and ZeRO, with the collectives that tie the shards together; the single
// device is the same executor with every degree 1. Float for training (fp32 or the bf16
// modes, emulated), double for gradient checks.
//
// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, Section 3): tp rank r holds
//   qkvw (C, qdt + 2 kvdt), qkvb   query heads [r NH/tp, ...) and kv heads [r NKV/tp, ...)
//                                  of q, k and v (column split; Megatron's query groups)
//   qknw [qknb] (2 hd)             whole on every rank (QK-norm), gradients summed over tp
//   attprojw (qdt, C)              the matching input rows (row split); its bias is whole
//   fcw (C, Ft) or (C, 2 Ft), fcb  columns [r Ft, ...) (of gate and of up: column split)
//   fcprojw (Ft, C)                the matching input rows (row split); its bias is whole
//   wte (C, V/tp), lm_head         vocabulary rows [r V/tp, ...) (vocab-parallel embedding,
//                                  LM head and cross-entropy: max and sum-exp all-reduced)
//   T5: crossqw, crosskvw          columns of this rank's q heads, and kv heads of k and of v
//       crossprojw                 the matching input rows (row split)
//       enc.relb, dec.relb         this rank's heads' rows of each (heads, buckets) bias table
//   MLA (ModelConfig.h's MlaConfig, Megatron-LM's MLASelfAttention layout):
//       mladw, mlaqnw, mlakvnw     whole on every rank ('duplicated'), run on its tokens (the token
//                                  shard under sp: gradients partial, summed with the SP norms')
//       mlaqw, mlakvw              the columns of this rank's heads (column split)
//       attprojw (NH/tp Vd, C)     the matching input rows (row split)
//   norms, wpe, biases of row-split products: replicated.
// A row-split product yields a partial sum (C, N): all-reduce over tp (g), or with
// sequence parallelism (Korthikanti et al. 2022) reduce-scatter into a token shard
// (C, N/tp) where norms and residuals then run; before a column-split product the norm
// output is all-gathered again (f), in forward and again in backward (only the shard is
// saved). Tokens are split as the flat (b, t) columns of a micro-batch, in tp pieces.
// Pipeline parallelism: the L layers form pp v model chunks of Lc = L/(pp v) layers (v = 1
// unless the schedule is interleaved, Narayanan et al. 2021, Section 2.2); stage s holds
// chunks s, s + pp, ..., s + (v-1) pp (Megatron-LM's assignment), its local chunk j being the
// model's chunk j pp + s. Chunk c's output goes to the device of chunk c + 1 (stage s + 1, or
// from the last stage round to stage 0 when interleaved), its input gradient back. Stage 0
// also holds wte and wpe (the first chunk's), the last stage the final norm and the head (the
// last chunk's): with tied embeddings (pp > 1) a copy of wte whose gradient is all-reduced
// with stage 0's (the embedding group).
// BERT-style encoders (ModelConfig.h): the token-type table and the embedding norm sit with wpe in
// stage 0's root unit (replicated over tp; the norm runs on the token shard under SP), the pooler,
// the masked-LM transform with its norm, its output bias (vocabulary rows [r Vt, ...), as the
// decoder) and the next-sentence head in the last stage's; the decoder is wte (its last-stage copy
// when pp > 1, the embedding group as for a tied LM head). The transform runs on the token shard
// (SP: its gradients are summed over tp with the norms'); the pooler and its head on the cp rank
// holding each sequence's first token (rank 0), replicated over tp (SP: the first tokens are
// all-reduced over tp first).
// Each (micro-batch, chunk) in flight owns an activation allocation, released after its
// backward: the schedule's in-flight activations are what the allocator sees.
// ZeRO (Rajbhandari et al. 2020) over the shard group of g devices: parameters are
// grouped in units (the root: embeddings, final norm, head; then each layer, an MoE layer's
// routed experts in a unit of their own sharded over the edp group); member k owns chunk k
// of each unit.
//   1: optimizer states of the owned chunks only; gradients reduce-scattered, each member
//      updates its chunks, then the units are all-gathered.
//   2: + gradients: a unit's gradient lives in a transient buffer while its backward
//      runs, then is reduce-scattered into the owned chunks (and all-reduced over the
//      replica group when g < dp, HSDP).
//   3: + parameters: only the owned chunks persist; a unit is all-gathered into a
//      transient buffer before each use and freed after.
// Precision (device bytes per element e): fp32 4; bf16 modes 2 for weights, gradients,
// activations and activation gradients, every stored tensor rounded to bf16 when
// written; statistics, per-token losses and the vocabulary softmax fp32. Optimizer:
// AdamW m, v fp32 (8 bytes a parameter), + 4 for fp32 master weights in bf16-mixed.
//   bf16-mixed  fp32 master weights updated, weights = RNE(master)
//   bf16-rne    weights = RNE(weights + update)   (small updates vanish)
//   bf16-sr     weights = stochastic_round(weights + update), Trainium's approach;
//               the random bits hash (seed, step, full-model index): the same on any layout.
// Optimizer offload: the optimizer states (and fp32 master weights) in host memory (memory
// category Host, not on the device); each step the owned gradients go down the host link, the
// host runs AdamW at its memory bandwidth, the weights come back up (EmulatedDevice::chargeHost).
// Context parallelism (Megatron-LM's cp; Transformer Engine's AttnFuncWithCPAndKVP2P): each
// sequence is cut into 2 cp chunks and cp rank r holds chunks r and 2cp-1-r (causal load
// balancing, Megatron-LM megatron/core/utils.py _get_batch_on_this_cp_rank_per_sequence_balancing),
// so a micro-batch's columns are its Tl = T/cp tokens of each sequence, with their global
// positions (learned embeddings and RoPE). Everything outside attention runs on these tokens
// (cp behaves like dp there); attention is a ring over the cp group: the local queries meet
// each rank's K/V block in cp steps, merged by log-sum-exp, and backward sends the blocks
// round again with their dK/dV partials, which end at their owner (ringAttentionForward/Backward).
// Under cp_comm=a2a (TE's AttnFuncWithCPAndQKVOA2A) q, k and v are all-to-all'd to the head split
// instead (heads / cp heads of the whole sequence, in sequence order), the attention runs as on
// one device, and the output goes back (allToAllAttentionForward/Backward).
// Gradients are reduced over dp x cp (the cluster's dp group), ZeRO shards over g x cp.
// Mixture of experts (ModelConfig.h, MoeMlp.h): an MoE layer's MLP is the MoE block on this
// device's tokens (the token shard under sp, this cp rank's), complete per token (no tp
// reduction after it). Expert parallelism (Megatron-LM's expert grid per stage, Cluster.h):
// ep rank j holds experts [j E/ep, (j+1) E/ep), each split over the etp group as tp splits an
// MLP (expin: columns [r Fe/etp, ...) of gate and up; expout: the matching input rows), the
// router and its correction bias are whole on every device (the router's gradient partial over
// tp under sp, as the SP norms'), the shared experts split over tp as a dense MLP (Megatron-LM's
// SharedExpertMLP: shin's columns of gate and up, shout's rows; MoeMlp.h); tokens go to their
// experts and back by all-to-all-v over the ep group. The routed experts' gradients are summed
// over the expert-data-parallel group (the stage's devices holding the same experts), the rest
// as before. Full recomputation runs a recomputed MoE layer's block again in its backward (the
// dispatch and combine too), its first forward keeping nothing but the layer input. ZeRO: each MoE
// layer's routed experts are a unit of their own, sharded over the edp group (Megatron-LM's
// distributed optimizer over the expert-data-parallel group): their gradients reduce-scattered,
// their optimizer states (ZeRO-2: gradients, ZeRO-3: parameters) held as edp chunks. With a shard
// group smaller than dp (HSDP, dp / zero_group replicas: Megatron-LM's
// --num-distributed-optimizer-instances) the experts shard over the slice of their edp group inside
// the device's replica (edp x zero_group / dp devices) and their owned chunks are summed over the
// replicas with the dense ones (one inter-instance group for both, as Megatron's).
// Multi-token prediction (ModelConfig.h; Megatron-LM's MultiTokenPredictionLayer @ d98e8a64): the
// depths run on the last stage after the head, each as local layer Lc + d (model layer L + d) with
// its enorm, hnorm, eh_proj and final norm in that layer's unit ("mtp<d>"). eh_proj is
// column-parallel: rank r holds output columns [r C/tp, ...) of its (2C, C) weight, runs on the
// gathered tokens and its pieces are all-gathered along the hidden size (under sp then its token
// shard kept); the norms run on the token shard (sp: partial gradients, summed with the SP norms').
// The rolled tokens are embedded with the last stage's wte (a copy when pp > 1, tied or not, its
// gradient all-reduced with stage 0's over the embedding group) and predicted by the shared head.
// Full recomputation runs each depth's layer again in its backward whatever the method (eh_proj and
// the norms are kept; Megatron-LM recomputes them too). Not with cp or the interleaved schedule.
// Dimension legend: C hidden, qdt = NH/tp * hd (MLA: NH/tp * Vd, the attention output), kvdt = NKV/tp * hd, Ft = F/tp, V vocab,
// Vt = V/tp, T sequence, Tl = T/cp its local part, mb sequences per micro-batch, Nm = mb*Tl
// tokens, Ns = Nm/tp under sequence parallelism (else Nm).
#pragma once

#include "AdamW.h"
#include "Cluster.h"
#include "Kernels.h"
#include "ModelConfig.h"
#include "MoeMlp.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::engine {

// Where a shard sits: its device, the layout's mesh and groups. On one device the groups
// are null and nothing is communicated.
struct ShardPlacement {
    EmulatedDevice* device = nullptr;
    Layout layout;
    MeshPosition position;
    DeviceGroups groups;
    Communicator* comm = nullptr;
    // Device ids of the pipeline neighbours: where a chunk's input comes from and its output
    // goes (interleaved: a ring, stage 0 follows the last stage); -1 where there is none.
    int previous_stage = -1, next_stage = -1;
};
ShardPlacement placementIn(EmulatedCluster& cluster, int device);
ShardPlacement singleDevice(EmulatedDevice& device, const Layout& layout);

struct ExecutorOptions {
    int micro_batch = 1;              // mb sequences
    std::int64_t global_tokens = 1;   // tokens of the whole step (all replicas, micro-batches): the loss's mean
    PrecisionMode precision = PrecisionMode::FP32;
    bool fp32_gradients = false;  // bf16-mixed: fp32 main gradients (TrainRequest::fp32_gradients)
    std::uint64_t seed = 1;
    double init_std = 0.02;
    std::size_t bucket_bytes = 25u << 20;  // data-parallel gradient all-reduce buckets (PyTorch DDP's default)
    // The full model's initial values (initialParameters), drawn once and shared by a cluster's
    // executors (4,096 replicas each drawing them took a quarter of a run); null: draw them.
    // Read by ModelExecutor<float> only.
    const std::vector<float>* initial_parameters = nullptr;
};

// The full model's initial values every executor of `cfg` starts from (initializeParameters
// with the options' seed and init_std), as one flat buffer in parameterTable order.
template <class T>
std::vector<T> initialParameters(const ModelConfig& cfg, const ExecutorOptions& opts);

// One contiguous run of a local tensor in the full model's flat parameter buffer.
struct ParameterRun {
    std::int64_t full_offset;
    std::int64_t local_offset;  // from the local tensor's start
    std::int64_t count;
};

struct ShardTensor {
    std::string name;             // the full model's name ("h3.fcw")
    TensorRole role = TensorRole::NormWeight;
    std::int64_t offset = 0;      // in the device's local flat parameter space
    std::int64_t count = 0;
    bool decay = false;
    bool tp_replicated = false;   // the same values on every tp rank
    bool sp_partial = false;      // its gradient is a partial sum over tp (SP norms' token shards, QK-norm's heads)
    bool tied_copy = false;       // the last stage's copy of wte (pp > 1, tied)
    bool word_embedding = false;  // wte, or its copy
    bool expert = false;          // a routed expert's (this ep rank's experts): reduced over the edp group
    int unit = 0;
    std::vector<ParameterRun> runs;
};

struct ShardUnit {
    std::string name;             // "root" (the modules outside the layers), "h3"
    std::int64_t offset = 0;      // local flat offset
    std::int64_t count = 0;
    int first_tensor = 0, tensors = 0;
    std::int64_t chunk_begin = 0, chunk_end = 0;  // the owned chunk, relative to offset (ZeRO >= 1)
    std::int64_t shard_offset = 0;                // the owned chunk's place in the shard buffers
    bool expert = false;  // an MoE layer's routed experts ("h3.experts"): sharded over the edp group
};

// Layout rules against the model that the executor needs ("tp: 3 does not divide kv_heads 2").
FieldErrors validateShardable(const ModelConfig& config, const Layout& layout, int micro_batch,
                              const std::string& prefix = "layout.");

template <class T>
class ModelExecutor {
public:
    // Builds this device's shard (allocates on the device: throws DeviceOutOfMemory,
    // leaving the device as it was) and initialises it with the full model's initial
    // values (initializeParameters), so every layout starts where one device starts.
    ModelExecutor(const ModelConfig& config, const ExecutorOptions& options, const ShardPlacement& placement);
    ~ModelExecutor();
    ModelExecutor(const ModelExecutor&) = delete;
    ModelExecutor& operator=(const ModelExecutor&) = delete;

    const ModelConfig& config() const { return cfg_; }
    bool firstStage() const { return stage_ == 0; }
    bool lastStage() const { return stage_ == stages_ - 1; }
    int chunks() const { return chunks_; }  // v: model chunks on this device
    std::int64_t localParameters() const { return P_; }
    std::int64_t shardParameters() const { return S_; }
    const std::vector<ShardTensor>& tensors() const { return tensors_; }
    const std::vector<ShardUnit>& units() const { return units_; }

    // One micro-batch forward through local chunk `chunk`. inputs/targets: the mb whole
    // sequences' token ids (mb*T) in [0, V), of which this cp rank takes its chunks (the
    // model's first chunk reads inputs, its last chunk targets). Every other chunk
    // receives its input from the previous device (previous_stage) and every chunk but the
    // last sends its output on (next_stage). Returns the sum of the per-token losses on the
    // last chunk (0 elsewhere).
    // Masked LM (MaskedLm.h): targets -1 are not predicted; token_types (mb*T, like inputs; null:
    // all 0) go to the first chunk, next_sentence (mb labels) to the last, which with a pooler
    // adds k x each sequence's next-sentence loss (k = predictedPerSequence: divided by the
    // step's B k predicted positions, BertForPreTraining's mean MLM + mean NSP loss).
    double forward(int micro, const int* inputs, const int* targets, int chunk = 0, const int* token_types = nullptr,
                   const int* next_sentence = nullptr);
    // Backward of micro-batch `micro` through local chunk `chunk` (its forward ran),
    // gradients accumulated.
    void backward(int micro, int chunk = 0);
    // After the step's last backward: gradient reductions (DP buckets, SP, embedding
    // group); returns this device's share of the gradient's squared norm (each value
    // counted on exactly one device of the cluster).
    double reduceGradients();
    // AdamW on the owned part (grad_scale from clipping), then the ZeRO 1/2 all-gather;
    // zeroes the gradients.
    void update(const AdamWSettings& settings, double grad_scale, int step);

    // Writes this device's values into the full flat parameter buffer (P values), the
    // owned ZeRO-3 chunks only; with every device's contribution it is complete.
    void exportParameters(T* full) const;
    // Flat local views, for gradient checks on one device (ZeRO 0: local == full order).
    T* localWeights();
    T* localGrads();
    // Fault injection for tests: makes this device's first weight NaN.
    void injectNaN();
    // Mixture of experts: the load-balancing loss of the last forward() call's MoE layers (this
    // device's share of each micro-batch's, unweighted; in the gradient with the weight
    // micro-batch loss tokens / global_tokens), and the token copies this device routed to each
    // expert since it was built (the measured load; in capacity mode the copies it computed), and
    // the copies dropped past an expert's capacity.
    double lastAuxLoss() const { return moeAux_; }
    const std::vector<std::int64_t>& tokensPerExpert() const { return routed_; }
    std::int64_t droppedCopies() const { return dropped_; }
    // The most token copies this device's MoE layers computed in one micro-batch's forward (their
    // saved sets grow with them): the measured load the planner's imbalance factor stands for.
    std::int64_t moePeakCopies() const { return peakCopies_; }
    // Over the run's MoE layer calls (forward, recomputations not counted again): the ep group's
    // busiest rank's copies over the group's mean (MoeSaved::busiest_copies); 0 without MoE.
    double moeStepLoad() const { return meanCopies_ > 0 ? busiestCopies_ / meanCopies_ : 0.0; }
    // Multi-token prediction (ModelConfig.h): the last forward() call's MTP loss, the mean over the
    // depths of each depth's mean cross-entropy over its valid tokens (Megatron's logged "mtp_k loss"
    // averaged over k; 0 off the model's last chunk). In the gradient with the weight loss_scale x
    // micro-batch loss tokens / global_tokens, as lastAuxLoss.
    double lastMtpLoss() const { return mtpLoss_; }

private:
    struct Layer;
    struct Acts;
    struct Slot;
    struct Work;
    void buildTables();
    Layer bind(const T* base, int unit) const;
    T* acquireWeights(int unit);
    void releaseWeights(int unit);
    T* acquireGrads(int unit);
    void releaseGrads(int unit);
    const T* gatherTokens(const T* shard, T* full);
    T* reduceTokens(T* partial);
    // A row-split projection (attention output, MLP down): this rank's partial product over its
    // `inner` columns, reduced over tp (to the token shard under sp), then bias and residual on
    // the (C, Ns) result.
    void rowParallelForward(T* out, const T* in, std::int64_t inner, const T* weight, const T* bias, const T* residual);
    void carve(Slot& s, bool counting);
    bool holdsHead(const Slot& s) const;
    void layerForward(int k, Slot& s);
    void attentionCore(const Acts& a, Slot& s);
    int modelLayer(const Slot& s, int k) const;  // the model's index of the slot's local layer k
    int modelLayerOf(int local) const;            // ... of local layer `local` (chunk j's are j Lc + i)
    AttentionShape selfAttentionShape(const Slot& s, int k) const;  // a pre-norm layer's, with its window
    void ringAttentionForward(const Acts& a);
    void ringAttentionBackward(const Acts& a);
    void ringSend(const T* data, std::int64_t count);
    // All-to-all CP (cp_comm=a2a): the attention on heads / cp heads of the whole sequence.
    void allToAllAttentionForward(const Acts& a, AttentionShape shape, bool keepHeads);
    void allToAllAttentionBackward(const Acts& a, AttentionShape shape, bool keptHeads);
    void attentionCoreBackward(const Acts& a, int k, const AttentionShape& shape);  // layer k's
    bool attentionRerun(int k) const;  // whether the backward runs layer k's attention core again
    struct RowSplit {  // rows [row0 + j per, row0 + (j+1) per) of a tensor go to cp rank j
        std::int64_t row0, per;
    };
    static std::int64_t splitRows(const RowSplit* splits, int count)  // a cp rank's rows of them
    {
        std::int64_t rows = 0;
        for (int i = 0; i < count; ++i)
            rows += splits[i].per;
        return rows;
    }
    void cpAllToAll(std::int64_t block);
    void toHeadSplit(const T* x, std::int64_t rows, const RowSplit* splits, int count, T* heads);
    void fromHeadSplit(const T* heads, const RowSplit* splits, int count, T* x, std::int64_t rows);
    void ringRecv(T* data, std::int64_t count);
    void localTokens(const int* sequences, std::vector<int>& local) const;
    void layerBackward(int k, Slot& s);
    void embedForward(Slot& s, const int* inputs, const int* token_types);
    void embedBackward(Slot& s);
    double headForward(Slot& s, const int* targets, const int* next_sentence);
    void headBackward(Slot& s);
    const T* stackOutput(const Slot& s) const;  // the last local layer's output (the head's input)
    // The vocabulary softmax and cross-entropy of probs (Vt, Nm: the logits on entry), vocab-parallel
    // over tp, into losses (targets < 0: none); and its backward, dloss per predicted token.
    void crossEntropy(T* probs, T* losses, const std::vector<int>& targets);
    void crossEntropyBackward(T* probs, const std::vector<int>& targets, T dloss);
    // Multi-token prediction (ModelConfig.h): the D_ depths after the head, and back (before it);
    // their gradient into the main final norm's output is left in ws_->mtpCarry.
    void mtpForward(Slot& s, const int* inputs, const int* targets);
    void mtpBackward(Slot& s);
    // BERT-style encoders (ModelConfig.h): post-norm layers, the masked-LM transform, the pooler
    // with its next-sentence head.
    void postNormLayerForward(int k, Slot& s);
    void postNormLayerBackward(int k, Slot& s);
    void mlmTransformForward(Slot& s, const T* root, const T* x);
    void mlmTransformBackward(Slot& s, const T* root, T* droot, const T* dh, const T* x, T* dx);
    double poolerForward(Slot& s, const T* root, const T* x);
    void poolerBackward(Slot& s, const T* root, T* droot);
    bool holdsPooler(const Slot& s) const;
    const T* layerInput(const Slot& s, int local_layer) const;
    T* gradPointer(std::int64_t local_index, int unit);
    template <class F>
    void forEachGradRange(F&& fn, bool whole = false);
    void sumAcrossTensorAndPipeline(bool whole);
    void send(const T* data, std::int64_t count);
    void recv(T* data, std::int64_t count, int from);
    int groupSize(const CommGroup* g) const { return g ? g->size() : 1; }

    ModelConfig cfg_;
    ExecutorOptions opts_;
    ShardPlacement place_;
    EmulatedDevice& dev_;
    Kernels<T> k_;
    const DeviceGroups& groups_;
    int id_;
    int tp_ = 1, tpRank_ = 0, stage_ = 0, stages_ = 1, dpRank_ = 0;
    int zero_ = 0, shardRank_ = 0, replicaIndex_ = 0;
    bool sp_ = false, offload_ = false;
    Recompute recompute_ = Recompute::None;
    int C_ = 0, NHt_ = 0, NKVt_ = 0, hd_ = 0, qdt_ = 0, kvdt_ = 0, Ft_ = 0, Fin_ = 0, V_ = 0, Vt_ = 0, T_ = 0,
        mb_ = 0, L_ = 0, Ls_ = 0;
    // The fused qkv's parts: q rows (NHt hd) and the [k | v] rows (NKVt (hd + vd), vd the value head
    // size); qdt_ is the attention output's rows (NHt vd).
    std::int64_t qRows_ = 0, kvRows_ = 0;
    // Multi-head latent attention (ModelConfig.h's MlaConfig): Q, R, P, Nd, Vd, the down product's
    // rows, the q up product's input rows (Q, or C without q compression) and its output rows.
    bool mla_ = false;
    int mQ_ = 0, mR_ = 0, mP_ = 0, mN_ = 0, mV_ = 0, mDown_ = 0, mQin_ = 0;
    std::int64_t mQup_ = 0, mKvup_ = 0;
    void mlaAttentionForward(const Acts& a, const Layer& w);
    void mlaUpProjection(const Acts& a, const Layer& w);
    void mlaAttentionBackward(const Acts& a, const Layer& w, const Layer& d, const T* x);
    // gatherTokens/reduceTokens for a (rows, Ns) shard / (rows, Nm) partial.
    const T* gatherRows(const T* shard, std::int64_t rows, T* full);
    T* reduceRows(T* partial, std::int64_t rows);
    int chunks_ = 1, Lc_ = 0;  // v local chunks of Lc layers (Ls = v Lc)
    int firstLayer_ = 0;       // the model layer of local layer 0 (one chunk; uneven splits)
    int blockLayers_ = 0;      // recompute=full, method block: the first N layers of each chunk (0: all)
    // Whether local layer k of a chunk is recomputed in its backward (full recomputation).
    // An MTP depth's layer (k >= Lc) is recomputed whenever recomputation is full (Megatron-LM's
    // MultiTokenPredictionLayer checkpoints it under recompute_granularity full, whatever the method).
    bool recomputes(int k) const
    {
        return recompute_ == Recompute::Full && (blockLayers_ == 0 || k < blockLayers_ || k >= Lc_);
    }
    int D_ = 0;            // MTP depths on this device (the last stage's)
    double mtpLoss_ = 0;   // (lastMtpLoss)
    std::int64_t Nm_ = 0, Ns_ = 0, qkvRows_ = 0;
    std::int64_t P_ = 0, S_ = 0;
    double e_ = 4;
    // A gradient's bytes, held and on the wire: e_, or 4 with bf16-mixed's fp32 main gradients, which
    // are then never rounded to bf16 (roundGrads_ false).
    double g_ = 4;
    bool roundGrads_ = false;
    int rootUnit_ = -1;
    // Local layer k's unit, and its routed experts' unit (-1: a dense layer).
    std::vector<int> layerUnits_, expertUnits_;
    int layerUnit(const Slot& s, int k) const;
    // A layer's weights or gradients: its unit and its experts' (acquired and released together).
    Layer acquireLayer(const Slot& s, int k, bool grads);
    void releaseLayer(const Slot& s, int k, bool grads);
    // The ZeRO shard group of a unit and this device's rank in it: the experts' is the edp group
    // (Megatron's intra_expt_dp_group), the others' the shard group of dp x cp.
    // Under HSDP the experts' is the slice of edp inside this device's replica (edp_shard; Cluster.h).
    CommGroup* shardGroupOf(const ShardUnit& u) const { return u.expert ? groups_.edp_shard : groups_.shard; }
    int shardRankOf(const ShardUnit& u) const { return u.expert ? edpShardRank_ : shardRank_; }
    int embedUnit_ = -1;             // the tied word embedding's own unit (ZeRO-2/3 over stages), else -1
    int wteUnit_ = -1, headUnit_ = -1;  // the units holding wte and the head weights
    // fn(unit) for the units outside the layers on this device (root, embedding).
    template <class F>
    void forOuterUnits(F&& fn)
    {
        if (rootUnit_ >= 0)
            fn(rootUnit_);
        if (embedUnit_ >= 0)
            fn(embedUnit_);
    }
    std::int64_t wteAt_ = -1, wpeAt_ = -1, lnfAt_ = -1, headAt_ = -1;  // places inside the root unit
    // BERT-style encoders' places inside the root unit (-1: none): token types, embedding norm,
    // pooler, masked-LM transform, its norm and output bias, next-sentence head.
    std::int64_t wttAt_ = -1, embNormAt_ = -1, poolAt_ = -1, mlmAt_ = -1, mlmNormAt_ = -1, mlmBiasAt_ = -1,
                 nspAt_ = -1;
    std::vector<ShardTensor> tensors_;
    std::vector<ShardUnit> units_;
    std::vector<int> positions_;  // Nm: each token's place in its sequence (RoPE)
    // Context parallelism: cp ranks, the positions of each rank's Tl tokens of a sequence, the
    // ring neighbours' device ids, and the ring's buffers (workspace).
    int cp_ = 1, cpRank_ = 0, Tl_ = 0, cpNext_ = -1, cpPrev_ = -1;
    std::vector<std::vector<int>> cpPositions_;
    struct Ring {
        T *msg[2], *dkvOwn, *part, *lse, *stepLse, *delta;
    } ring_{};
    // All-to-all CP: the exchange's send and receive buffers, the head-split q, k, v (when the
    // backward runs the attention again), output and q, k, v gradient (workspace).
    bool cpA2a_ = false;
    struct HeadSplit {
        T *send, *recv, *qkv, *out, *dqkv;
        RowSplit qkvSplit[3], outSplit;  // cp rank j's rows of [q | k | v] and of the output
    } heads_{};

    // Encoder-decoder (T5, ModelConfig.h; one stage, no cp): local layers [0, Lenc_) are the
    // encoder's, [Lenc_, Ls_) the decoder's. The encoder output E lives in the Slot; under SP it is
    // gathered once per forward and once per backward (encFull), and its gradient, the decoder
    // layers' K/V input gradients (partial sums over tp), is summed over the layers (dencFull)
    // and reduced over tp once per micro-batch. The relative bias tables, the encoder's final norm
    // and the decoder's embedding (the tied wte) live in the root unit.
    bool encDec_ = false;
    int Lenc_ = 0;
    std::int64_t encRelAt_ = -1, decRelAt_ = -1, encLnfAt_ = -1;  // places inside the root unit
    std::vector<int> encBuckets_, decBuckets_;  // (T, T): bidirectional, causal
    AttentionShape t5Shape(bool causal) const;
    ScoreBias<T> relativeBias(bool decoder, const T* root) const;
    const T* encoderOutput(const Slot& s) const;
    void t5LayerForward(int k, Slot& s);
    void t5LayerBackward(int k, Slot& s);
    void t5SelfAttention(int k, const Acts& a);
    void t5CrossAttention(const Acts& a);
    void encoderToDecoder(Slot& s, const int* targets);
    void decoderBackwardBegin(Slot& s);
    void decoderToEncoder(Slot& s);

    DeviceBuffer weights_, grads_, optimizer_, workspace_;
    std::vector<DeviceBuffer> heldWeights_, heldGrads_;
    std::vector<int> weightUsers_, gradUsers_;
    std::vector<std::unique_ptr<Slot>> slots_;
    DeviceBuffer scratch_;
    Work* ws_ = nullptr;
    std::vector<T> stats_;   // vocab-parallel softmax scratch (3 Nm)
    std::vector<T> packed_;  // SP norm gradients packed for one all-reduce
    // Mixture of experts (MoeMlp.h): the block, this device's ep and edp ranks, its El experts.
    std::unique_ptr<MoeMlp<T>> moe_;
    int epRank_ = 0, edpRank_ = 0, edpShardRank_ = 0, El_ = 0, etp_ = 1, etpRank_ = 0;
    double moeAux_ = 0;
    bool recomputing_ = false;  // a full recomputation's forward of a layer, inside its backward
    // Selective recomputation's modules (Layout::recomputedModules, Megatron-LM's recompute_modules):
    // the attention cores again (core_attn); the pre-MLP norm of an MoE layer and the input norm of
    // an MLA layer, the norms Megatron's TE spec runs on their own (layernorm); the dense MLP with
    // its fused norm, checkpointed (mlp). moe_act is the MoE block's (MoeShape).
    bool rerunCore_ = false, rebuildNorms_ = false, rebuildMlp_ = false, rebuildMoe_ = false;
    bool rebuildsMoe() const;  // the MoE block checkpointed (moe)
    bool rebuildUpProj_ = false;
    bool rebuildsUpProj() const;  // MLA's q, k, v rebuilt from the latents (mla_up_proj)
    DeviceBuffer rebuiltQkv(Slot& s, int k);
    // The MLP again under "mlp": its output (the layer's, kept) rebuilt here and dropped.
    T* mlpRerunOut_ = nullptr;
    // Whether a pre-norm decoder layer's input norm (MLA, layernorm) or its MLP side (an MoE
    // layer's pre-MLP norm under layernorm, a dense layer's norm and MLP under mlp) is rebuilt.
    bool rebuildsInputNorm() const;
    bool rebuildsPreMlp(bool moeLayer) const;
    // The rebuilt tensors of local layer k's MLP side or input norm, allocated (activations) while
    // the side runs, forward or backward (with the MLP's dropped output), the layer's Acts pointed
    // at them; empty when nothing is rebuilt there.
    DeviceBuffer rebuiltMlpSide(Slot& s, int k, bool backward);
    DeviceBuffer rebuiltInputNorm(Slot& s, int k);
    // A layer's own allocation (Slot::LayerBuffer, ownedLayers() of them): made (its tensors
    // pointed at it), copied to the host (asynchronous, on the device's copy engine: activation
    // offload of the chunk's first offloadedLayers()), freed (after its copy to the host is done,
    // when `afterCopy`), and back from the host.
    int offloadedLayers() const;
    int ownedLayers() const;
    bool offloadOverlaps() const;  // two or more kept layers: copies overlap the next layer
    void placeLayer(Slot& s, int k);
    void offloadToHost(Slot& s, int k);
    void freeLayer(Slot& s, int k, bool afterCopy);
    void reloadLayer(Slot& s, int k);
    int offloadActivations_ = 0;
    int recomputeGroup_ = 1;  // full recomputation's uniform group (Layout::recomputeGroupLayers)
    bool denseMlpHere_ = true;  // some layer of this stage has the dense MLP (not the MoE block)
    std::int64_t dropped_ = 0;
    std::vector<std::int64_t> routed_;
    std::int64_t mbCopies_ = 0, peakCopies_ = 0;  // (moePeakCopies)
    double busiestCopies_ = 0, meanCopies_ = 0;    // (moeStepLoad)
};

extern template class ModelExecutor<float>;
extern template class ModelExecutor<double>;

} // namespace shardscope::engine
