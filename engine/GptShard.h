// GptShard: the part of the GPT (Gpt.h) that one device of a cluster holds and
// computes, for tensor, sequence and pipeline parallelism and ZeRO, and the
// collectives that tie the shards together. Float, fp32 only.
//
// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, Section 3): tp rank r holds
//   qkvw (C, 3C/tp), qkvb      heads [r NH/tp, (r+1) NH/tp) of q, k and v (column split)
//   attprojw (C/tp, C)         the matching input rows (row split); its bias is whole
//   fcw (C, 4C/tp), fcb        columns [r 4C/tp, ...) (column split)
//   fcprojw (4C/tp, C)         the matching input rows (row split); its bias is whole
//   wte (C, V/tp)              vocabulary rows [r V/tp, ...) (vocab-parallel embedding,
//                              LM head and cross-entropy: max and sum-exp all-reduced)
//   LayerNorms, wpe, biases of row-split products: replicated.
// A row-split product yields a partial sum (C, N): all-reduce over tp (g), or with
// sequence parallelism (Korthikanti et al. 2022) reduce-scatter into a token shard
// (C, N/tp) where LayerNorms and residuals then run; before a column-split product
// the LayerNorm output is all-gathered again (f), in forward and again in backward
// (only the shard is saved). Tokens are split as the flat (b, t) columns of a
// micro-batch, in tp contiguous pieces.
// Pipeline parallelism: stage s holds layers [s L/pp, (s+1) L/pp); stage 0 also
// wte and wpe, the last stage lnf and (when pp > 1) a copy of wte for the tied
// head, whose gradient is all-reduced with stage 0's (the embedding group).
// Each micro-batch in flight owns an activation allocation, released after its
// backward: the schedule's in-flight activations are what the allocator sees.
// ZeRO (Rajbhandari et al. 2020) over the shard group of g devices: parameters are
// grouped in units (wte, wpe, each layer, lnf); member k owns chunk k of each unit.
//   1: optimizer states of the owned chunks only; gradients all-reduced, each
//      member updates its chunks, then the units are all-gathered.
//   2: + gradients: a unit's gradient lives in a transient buffer while its
//      backward runs, then is reduce-scattered into the owned chunks (and
//      all-reduced over the replica group when g < dp, HSDP).
//   3: + parameters: only the owned chunks persist; a unit is all-gathered into
//      a transient buffer before each use and freed after.
// Memory categories as in Gpt.h (fp32: 4 bytes per element).
// Dimension legend: C hidden, Ct = C/tp, NH heads, NHt = NH/tp, V vocab,
// Vt = V/tp, T sequence, mb sequences per micro-batch, Nm = mb*T tokens,
// Ns = Nm/tp under sequence parallelism (else Nm).
#pragma once

#include "Cluster.h"
#include "Gpt.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::engine {

struct ShardOptions {
    int micro_batch = 1;              // mb sequences
    std::int64_t global_tokens = 1;   // tokens of the whole step (all replicas, micro-batches): the loss's mean
    Recompute recompute = Recompute::None;
    std::uint64_t seed = 1;
    double init_std = 0.02;
    std::size_t bucket_bytes = 25u << 20;  // data-parallel gradient all-reduce buckets (PyTorch DDP's default)
};

// One contiguous run of a local tensor in the full model's flat parameter buffer.
struct ParameterRun {
    std::int64_t full_offset;
    std::int64_t local_offset;  // from the local tensor's start
    std::int64_t count;
};

struct ShardTensor {
    std::string name;             // the full model's name ("h3.fcw")
    std::int64_t offset = 0;      // in the device's local flat parameter space
    std::int64_t count = 0;
    bool decay = false;
    bool tp_replicated = false;   // the same values on every tp rank
    bool sp_partial = false;      // its gradient is a partial sum over token shards (SP LayerNorms)
    bool tied_copy = false;       // the last stage's copy of wte (pp > 1)
    bool word_embedding = false;  // wte, or its copy
    int unit = 0;
    std::vector<ParameterRun> runs;
};

struct ShardUnit {
    std::string name;             // "root" (wte, wpe, lnf: the modules outside the layers), "h3"
    std::int64_t offset = 0;      // local flat offset
    std::int64_t count = 0;
    int first_tensor = 0, tensors = 0;
    std::int64_t chunk_begin = 0, chunk_end = 0;  // the owned chunk, relative to offset (ZeRO >= 1)
    std::int64_t shard_offset = 0;                // the owned chunk's place in the shard buffers
};

class GptShard {
public:
    // Builds this device's shard (allocates on the device: throws DeviceOutOfMemory)
    // and initialises it with the full model's initial values (initializeParameters).
    GptShard(const GptConfig& config, const ShardOptions& options, EmulatedCluster& cluster, int device);
    ~GptShard();
    GptShard(const GptShard&) = delete;
    GptShard& operator=(const GptShard&) = delete;

    bool firstStage() const { return stage_ == 0; }
    bool lastStage() const { return stage_ == stages_ - 1; }
    std::int64_t localParameters() const { return P_; }
    std::int64_t shardParameters() const { return S_; }
    const std::vector<ShardTensor>& tensors() const { return tensors_; }
    const std::vector<ShardUnit>& units() const { return units_; }

    // One micro-batch forward. inputs/targets: Nm token ids (stage 0 reads inputs,
    // the last stage targets). Stage > 0 receives its input from the previous
    // stage; stage < last sends its output on. Returns the sum of the per-token
    // losses on the last stage (0 elsewhere).
    double forward(int micro, const int* inputs, const int* targets);
    // Backward of micro-batch `micro` (its forward ran), gradients accumulated.
    void backward(int micro);
    // After the step's last backward: gradient reductions (DP buckets, SP,
    // embedding group); returns this device's share of the gradient's squared
    // norm (each value counted on exactly one device of the cluster).
    double reduceGradients();
    // AdamW on the owned part, then the ZeRO 1/2 all-gather; zeroes the gradients.
    void update(const AdamWSettings& settings, double grad_scale, int step);

    // Writes this device's values into the full flat parameter buffer (P values),
    // the owned ZeRO-3 chunks only; with every device's contribution it is complete.
    void exportParameters(float* full) const;
    // Fault injection for tests: makes this device's first weight NaN.
    void injectNaN();

private:
    struct Layer;
    struct Acts;
    struct Slot;
    void buildTables(const GptConfig& config);
    Layer bind(const float* base, int unit) const;
    float* acquireWeights(int unit);
    void releaseWeights(int unit);
    float* acquireGrads(int unit);
    void releaseGrads(int unit);
    // Under SP: copies the (C, Ns) shard into the gather buffer and all-gathers (C, Nm).
    const float* gatherTokens(const float* shard, float* full);
    // Reduces a (C, Nm) partial sum over tp; returns its (C, Ns) result (a view into `partial`).
    float* reduceTokens(float* partial);
    void layerForward(int l, Slot& s);
    void layerBackward(int l, Slot& s);
    void embedForward(Slot& s, const int* inputs);
    void embedBackward(Slot& s);
    double headForward(Slot& s, const int* targets);
    void headBackward(Slot& s);
    const float* layerInput(const Slot& s, int local_layer) const;
    float* gradPointer(std::int64_t local_index, int unit);
    // fn(tensor, local begin, count, grad pointer) over the owned gradients (with ZeRO, the owned
    // chunk of each unit), or over whole units when `whole` and they are held whole (ZeRO < 2).
    template <class F>
    void forEachGradRange(F&& fn, bool whole = false);
    void sumAcrossTensorAndPipeline(bool whole);

    GptConfig cfg_;
    ShardOptions opts_;
    EmulatedCluster& cluster_;
    EmulatedDevice& dev_;
    int id_;
    int tp_ = 1, tpRank_ = 0, stage_ = 0, stages_ = 1, dpRank_ = 0;
    int zero_ = 0, shardRank_ = 0, replicaIndex_ = 0;
    bool sp_ = false;
    int C_ = 0, Ct_ = 0, NHt_ = 0, V_ = 0, Vt_ = 0, T_ = 0, mb_ = 0, L_ = 0, layer0_ = 0, Ls_ = 0;
    std::int64_t Nm_ = 0, Ns_ = 0;
    std::int64_t P_ = 0, S_ = 0;
    int wteUnit_ = -1, wpeUnit_ = -1, lnfUnit_ = -1, firstLayerUnit_ = 0;
    int rootUnit_ = -1;                                 // -1 on a middle pipeline stage
    std::int64_t wteAt_ = 0, wpeAt_ = 0, lnfAt_ = 0;    // their places inside the root unit
    std::vector<ShardTensor> tensors_;
    std::vector<ShardUnit> units_;
    const DeviceGroups& groups_;

    DeviceBuffer weights_, grads_, optimizer_, workspace_;
    std::vector<DeviceBuffer> heldWeights_, heldGrads_;  // per unit: transient ZeRO-3 / ZeRO-2 buffers
    std::vector<int> weightUsers_, gradUsers_;
    std::vector<std::unique_ptr<Slot>> slots_;           // by micro-batch index; acts held while in flight
    DeviceBuffer scratch_;                               // recomputation scratch, shared by micro-batches
    struct Work;
    Work* ws_ = nullptr;                                 // views into workspace_; owned
    std::vector<float> stats_;                           // vocab-parallel softmax scratch (3 Nm)
    std::vector<float> packed_;                          // SP LayerNorm gradients packed for one all-reduce
};

} // namespace shardscope::engine
