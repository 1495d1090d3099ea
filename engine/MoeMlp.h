// MoeMlp: the mixture-of-experts MLP block (issue 16), built from OpsMoe.h and the Kernels
// facade, forward and backward, on one device or with expert parallelism:
//   logits = router^T x                               (E, N)
//   top-k choice and weights                          (router_topk_forward)
//   the N K token copies sorted by expert             (permuteByExpert, moe_dispatch_forward)
//   [ep > 1: all-to-all-v of the copies to the ep ranks holding their experts]
//   expert e on its copies: act(x W_in[e]) W_out[e]   the model's MLP kind (GeLU/ReLU or gated)
//   [ep > 1: all-to-all-v of the expert outputs back to the tokens' ranks]
//   y = sum_k expert_k(x)  [+ shared experts' MLP(x)]   (moe_combine_forward; w_k applied in
//                                                       the expert's activation, below)
//   aux = the load-balancing loss of the logits        (aux_loss_forward_backward)
// Shared experts (DeepSeek-V3, Qwen-MoE) are one dense MLP of shared_ffn columns on every token
// (S shared experts of size F' are one MLP of S F' columns). Under tensor parallelism they are split
// over the tp group as Megatron-LM's SharedExpertMLP, a tp-split MLP (megatron/core/transformer/moe/
// shared_experts.py @ d98e8a64): this rank's tokens (its sequence shard) all-gathered over tp, the
// columns [r Fs/tp, ...) of gate and of up, the matching rows of shared_out, the partial output
// reduce-scattered back to the token shard; in backward the output gradient gathered, the input
// gathered again for the weight gradient, the input gradient reduce-scattered.
// Dropless (capacity_factor 0): every copy is computed. Capacity mode, Megatron-LM's
// moe_expert_capacity_factor with its default drop policy "probs" and no padding (moe_utils.py
// @ d98e8a64, apply_router_token_dropping and get_capacity): each expert takes at most
// capacity = ceil(N K / E x capacity_factor) of this rank's N tokens' copies, those with the
// largest router weights (ties: the lower token first); a dropped copy adds nothing to its token
// (its weight times 0: no gradient either) and the kept weights are not renormalised. The
// load-balancing loss counts the router's choice before the drop (Megatron's
// routing_map_for_aux_loss).
// Weights, column-major (in, out) as everywhere in the engine:
//   router (C, E); expert_in El blocks (C, Fin) (Fin = F, or 2F [gate | up] when gated);
//   expert_out El blocks (F, C); shared_in (C, Fs_in), shared_out (Fs, C). El = E / ep: the
//   experts this ep rank holds, [ep_rank El, (ep_rank + 1) El) (E on one device).
// Expert parallelism follows Megatron-LM's MoEAlltoAllTokenDispatcher (megatron/core/transformer/
// moe/token_dispatcher.py @ d98e8a64, etp = 1): each rank routes its own tokens, all-gathers the
// per-expert counts over the ep group (preprocess: num_global_tokens_per_expert), sends each rank
// the copies for its experts (token_dispatch: all_to_all(ep_group, ...)), computes its experts
// on what it received (per sending rank and expert), and sends the outputs back (token_combine).
// With expert tensor parallelism (etp > 1) each expert's matrices are split over the etp group as
// tensor parallelism splits an MLP (W_in's columns [r F/etp, ...) of gate and of up, W_out's
// matching rows): after the all-to-all the etp members all-gather what they received (Megatron's
// dispatch_postprocess: gather_from_sequence_parallel_region over the expert tp group with the
// members' splits), each computes its column slice of every copy, and the partial outputs are
// reduce-scattered back to the member that received them (combine_preprocess:
// reduce_scatter_to_sequence_parallel_region) before the all-to-all back; the backward mirrors it.
// Each copy's router weight travels with it (Megatron's token_dispatch: the permuted probs in an
// all-to-all of their own after the tokens', gathered over etp in dispatch_postprocess, sorted
// with the copies) and is applied in the expert's activation (Megatron-LM since 2025-04, "Memory
// efficient token permutation", 2659630721: moe/experts.py's weighted activation, `permuted_probs`
// into it; the combine's unpermute then takes no probs): y = sum_k expert_k(x), each
// expert_k(x) = W_out (w_k act(x W_in)). So the expert outputs are not kept for the weights'
// gradient: the backward computes it at the expert, sum_f act . d(w act), from the kept
// pre-activation, sums the etp slices' parts (the gather's mirror, a reduce-scatter) and sends it
// back with an all-to-all of its own. The weights are fp32 on the link and kept in fp32 (the
// engine's router computes in fp32; Megatron-Bridge's MoE recipes set moe_router_dtype "fp32").
// The load-balancing loss counts the copies of the whole micro-batch: the counts are summed over
// the groups its tokens are split over (Megatron's tp_cp_group, router.py _apply_aux_loss), the
// scores are this rank's tokens', so the ranks' losses add up to the micro-batch's.
// A forward's saved tensors live in one device allocation (MoeSaved::buffer, category
// Activations, the router's logits and weights in fp32) until its backward, which takes its
// temporaries from one Workspace allocation.
#pragma once

#include "Communicator.h"
#include "Kernels.h"
#include "OpsMoe.h"

#include <cstdint>
#include <vector>

namespace shardscope::engine {

struct MoeShape {
    int hidden = 0;       // C
    int ffn = 0;          // F per routed expert
    int shared_ffn = 0;   // all shared experts' columns together; 0: none
    MlpKind mlp = MlpKind::Gelu;
    RouterSpec router;
    double aux_loss_coeff = 0;
    double capacity_factor = 0;  // 0: dropless
    // Megatron-LM's recompute_modules "moe_act": the experts' activation output (FC2's input) is not
    // kept; the backward computes it again from the pre-activation (moe/experts.py
    // CheckpointWithoutOutput around the activation @ d98e8a64).
    bool recompute_activation = false;
    // recompute_modules "shared_experts": the shared experts checkpointed (moe/shared_experts.py):
    // their pre-activation and activation not kept, their forward run again before their backward
    // (with one tp rank: no collectives to repeat).
    bool recompute_shared = false;

    bool gated() const { return mlp == MlpKind::SwiGlu || mlp == MlpKind::GeGlu; }
    std::int64_t ffnIn() const { return gated() ? 2 * std::int64_t(ffn) : ffn; }
    std::int64_t sharedIn() const { return gated() ? 2 * std::int64_t(shared_ffn) : shared_ffn; }
    // Parameters: router, experts, shared experts (no biases).
    std::int64_t parameters() const;
};

// Where the block's experts and tokens are; the defaults are one device.
struct MoeParallel {
    CommGroup* ep = nullptr;  // the expert-parallel group (null: every expert here)
    int ep_rank = 0;
    CommGroup* etp = nullptr;  // the expert-tensor-parallel group (null: each expert whole here)
    int etp_rank = 0;
    // etp x ep (Megatron's tp_ep group, rank etp_rank + etp ep_rank): the per-expert counts are
    // gathered over it in one call when both are split; null: over ep, or etp, alone.
    CommGroup* tpep = nullptr;
    // The groups a micro-batch's tokens are split over (tp under sequence parallelism, cp), with
    // this device's rank in each: the load-balancing loss's counts are summed over them.
    CommGroup* token_groups[2] = {nullptr, nullptr};
    int token_ranks[2] = {0, 0};
    double element_bytes = 0;  // a token value on the link (0: sizeof(T))
    // The shared experts' tensor-parallel group (the tp group under sequence parallelism; null:
    // whole here) and this rank in it: shared_in holds its Fs/tp columns of gate and of up.
    CommGroup* shared_tp = nullptr;
    int shared_tp_rank = 0;
    int epSize() const { return ep ? ep->size() : 1; }
    int etpSize() const { return etp ? etp->size() : 1; }
};

template <class T>
struct MoeWeights {
    const T* router = nullptr;
    const T* expert_in = nullptr;   // this rank's El experts (their etp slices)
    const T* expert_out = nullptr;
    const T* shared_in = nullptr;
    const T* shared_out = nullptr;
    const T* expert_bias = nullptr;  // E values steering the choice only (DeepSeek-V3); may be null
};

template <class T>
struct MoeGrads {
    T* router = nullptr;
    T* expert_in = nullptr;
    T* expert_out = nullptr;
    T* shared_in = nullptr;
    T* shared_out = nullptr;
};

// One forward's state, read by its backward.
template <class T>
struct MoeSaved {
    DeviceBuffer routing;  // logits (E, N) and weights (K, N), fp32
    DeviceBuffer buffer;   // the saved tensors from disp on
    DeviceBuffer weights;  // the computed copies' router weights (fp32), in recv's order
    // Drops what the layer keeps for its backward (after it, or when it is to be recomputed).
    void release()
    {
        buffer.release();
        weights.release();
        routing.release();
    }
    T *logits = nullptr, *topW = nullptr, *disp = nullptr, *recv = nullptr, *hidden = nullptr, *act = nullptr,
      *prob = nullptr, *expertOut = nullptr, *combineIn = nullptr, *sharedPre = nullptr, *sharedAct = nullptr;
    std::vector<int> topIdx;
    MoePermutation perm;
    std::vector<std::int64_t> counts;        // this rank's copies per expert (E), the router's choice
    std::vector<std::int64_t> kept;          // of them, the copies within the capacity (= counts dropless)
    std::vector<std::int64_t> batchCounts;   // the micro-batch's (summed over the token groups)
    std::vector<std::size_t> sendCounts, recvCounts;  // copies to and from each ep rank
    // Copies per (etp member, ep rank, local expert), in that order: what this rank's experts
    // compute (its own received copies only without etp).
    std::vector<std::int64_t> chunks;
    std::vector<std::size_t> etpCounts;      // copies each etp member received
    std::vector<std::size_t> sendValues, recvValues, etpValues;  // the three splits in values (C a copy)
    std::int64_t N = 0, received = 0, batchTokens = 0, dropped = 0;  // dropped: copies past the capacity
    std::int64_t own = 0, gathered = 0;      // this rank's received copies' place among the gathered ones, and all
    // The ep group's load in this call: the copies the busiest ep rank's experts compute, and the
    // mean over the group's ep ranks (each rank knows every rank's counts after the preprocess's
    // all-gather). Every layer call waits for its busiest rank at the combine, so these summed
    // over a step's calls give the step's effective imbalance (ModelExecutor::moeStepLoad).
    double busiest_copies = 0, mean_copies = 0;
    const T* x = nullptr;
};

template <class T>
class MoeMlp {
public:
    MoeMlp(Kernels<T>& kernels, MoeShape shape, MoeParallel parallel = {});

    // y (C, N) overwritten; returns the load-balancing loss of these tokens' share (the whole
    // micro-batch's on one device). x is read again by backward(): it must stay valid until then.
    double forward(MoeSaved<T>& s, T* y, const T* x, const MoeWeights<T>& w, std::int64_t N);
    // From d y (C, N): d x (C, N) overwritten, weight gradients added to g; aux_grad is the
    // loss's weight on the load-balancing term (1 when it is added as it is). Releases s's buffers.
    void backward(MoeSaved<T>& s, T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g, T aux_grad);

    // The same on the block's own state (one forward in flight).
    double forward(T* y, const T* x, const MoeWeights<T>& w, std::int64_t N) { return forward(own_, y, x, w, N); }
    void backward(T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g, T aux_grad)
    {
        backward(own_, dx, dy, w, g, aux_grad);
    }
    // What the last forward on the own state routed: copies per expert.
    const std::vector<std::int64_t>& tokensPerExpert() const { return own_.counts; }

private:
    void dropPastCapacity(MoeSaved<T>& s);
    void copyCopies(T* to, const T* from, std::int64_t count);  // a device copy, charged
    void exchange(MoeSaved<T>& s);
    // Whether the received copies are sorted by expert for the experts (several local experts), and
    // the sort (to expert-major order) or its inverse, charged.
    bool sortsCopies(const MoeSaved<T>& s) const;
    // width values a copy (C: the copies, 1: their weights, charged at elementBytes each).
    void permuteCopies(const MoeSaved<T>& s, T* dst, const T* src, bool toSorted, std::int64_t width = 0,
                       double elementBytes = 0);
    DeviceBuffer workspace(std::int64_t values);
    // Calls run(first copy, copies, local expert) for each run of one expert's consecutive copies.
    template <class Run>
    void forEachExpertRun(const MoeSaved<T>& s, const Run& run) const;
    void expertsForward(MoeSaved<T>& s, const MoeWeights<T>& w);
    // dprob (G): the computed copies' weight gradients, in chunk order (the etp slice's part).
    void expertsBackward(MoeSaved<T>& s, const MoeWeights<T>& w, const MoeGrads<T>& g, const T* dout, T* dact,
                         T* dhidden, T* din, T* dprob);

    Kernels<T>& k_;
    MoeShape s_;
    MoeParallel par_;
    int El_ = 0;               // experts on this rank
    std::int64_t Fl_ = 0, Finl_ = 0;  // this rank's slice of an expert's F (and of W_in's columns)
    std::int64_t Fsl_ = 0, Fsinl_ = 0;  // this rank's slice of the shared experts' columns (tp)
    int stp_ = 1;                       // the shared experts' tp size
    // The shared experts on this rank's N tokens: y += their output (forward); dx = their input
    // gradient (backward, overwritten), their weight gradients accumulated.
    void sharedForward(MoeSaved<T>& s, T* y, const T* x, const MoeWeights<T>& w, std::int64_t N);
    void sharedBackward(MoeSaved<T>& s, T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g, std::int64_t N);
    MoeSaved<T> own_;
};

} // namespace shardscope::engine
