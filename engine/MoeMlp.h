// MoeMlp: the mixture-of-experts MLP block on one device (issue 16), built from OpsMoe.h and
// the Kernels facade, forward and backward:
//   logits = router^T x                               (E, N)
//   top-k choice and weights                          (router_topk_forward)
//   the N K token copies dispatched by expert         (permuteByExpert, moe_dispatch_forward)
//   expert e on its slots: act(x W_in[e]) W_out[e]     the model's MLP kind (GeLU/ReLU or gated)
//   y = sum_k w_k expert_k(x)  [+ shared experts' MLP(x)]   (moe_combine_forward)
//   aux = the load-balancing loss of the logits        (aux_loss_forward_backward)
// Shared experts (DeepSeek-V3, Qwen-MoE) are one dense MLP of shared_ffn columns on every token
// (S shared experts of size F' are one MLP of S F' columns). Dropless: every copy is computed
// (capacity modes come with expert parallelism).
// Weights, column-major (in, out) as everywhere in the engine:
//   router (C, E); expert_in E blocks (C, Fin) (Fin = F, or 2F [gate | up] when gated);
//   expert_out E blocks (F, C); shared_in (C, Fs_in), shared_out (Fs, C).
// The block keeps its activations for the backward in its own host buffers (one micro-batch);
// inside the executor they become device allocations, counted as activations like the rest.
#pragma once

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

    bool gated() const { return mlp == MlpKind::SwiGlu || mlp == MlpKind::GeGlu; }
    std::int64_t ffnIn() const { return gated() ? 2 * std::int64_t(ffn) : ffn; }
    std::int64_t sharedIn() const { return gated() ? 2 * std::int64_t(shared_ffn) : shared_ffn; }
    // Parameters: router, experts, shared experts (no biases).
    std::int64_t parameters() const;
};

template <class T>
struct MoeWeights {
    const T* router = nullptr;
    const T* expert_in = nullptr;
    const T* expert_out = nullptr;
    const T* shared_in = nullptr;
    const T* shared_out = nullptr;
};

template <class T>
struct MoeGrads {
    T* router = nullptr;
    T* expert_in = nullptr;
    T* expert_out = nullptr;
    T* shared_in = nullptr;
    T* shared_out = nullptr;
};

template <class T>
class MoeMlp {
public:
    MoeMlp(Kernels<T>& kernels, MoeShape shape);

    // y (C, N) overwritten; returns the load-balancing loss of this call's tokens. x is read
    // again by backward(): it must stay valid until then.
    double forward(T* y, const T* x, const MoeWeights<T>& w, std::int64_t N);
    // From d y (C, N): d x (C, N) overwritten, weight gradients added to g; aux_grad is the
    // loss's weight on the load-balancing term (1 when it is added as it is).
    void backward(T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g, T aux_grad);

    // What the last forward routed: copies per expert (the measured load next to a planner's
    // imbalance factor).
    const std::vector<std::int64_t>& tokensPerExpert() const { return counts_; }

private:
    Kernels<T>& k_;
    MoeShape s_;
    std::int64_t N_ = 0;
    const T* x_ = nullptr;  // the forward's input, read again by the backward
    std::vector<T> logits_, topW_, disp_, hidden_, act_, expertOut_, sharedPre_, sharedAct_, sharedOut_;
    std::vector<int> topIdx_;
    std::vector<std::int64_t> counts_;
    MoePermutation perm_;
};

} // namespace shardscope::engine
