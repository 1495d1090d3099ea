// GptModel: a GPT-2-style decoder trained on one EmulatedDevice.
//
// Token + learned position embeddings, L pre-LayerNorm blocks (causal multi-head
// self-attention, GeLU MLP with 4C inner size, residuals), final LayerNorm, LM
// head tied to the token embedding, mean cross-entropy loss. Forward and
// backward call the hand-written ops of Ops.h; AdamW with bias correction by
// step, decoupled weight decay on matrices only, clipping by global norm.
//
// Memory, after llm.c: one device allocation per category, tensors are views at
// offsets into it. Dimension legend: L layers, C hidden, NH heads, V vocab,
// T sequence, B batch, N = B*T, P parameters. Element sizes on the device:
// e = 4 bytes (fp32) or 2 (bf16 modes); statistics (LayerNorm mean/rstd,
// per-token losses) are always fp32.
//   weights      P*e
//   gradients    P*e
//   optimizer    P*8 (AdamW m, v in fp32) + P*4 fp32 master weights in bf16-mixed
//   activations  saved for backward, by recomputation mode:
//     per layer:  ln1 C*N, qkv 3C*N, atty C*N, att NH*T*N, res2 C*N, ln2 C*N,
//                 fch 4C*N, fch_gelu 4C*N, res3 C*N       = 16C*N + NH*T*N
//                 + stats 4N (two LayerNorms' mean and rstd)
//     global:     encoded C*N, lnf C*N, probs V*N (+ stats: lnf 2N, losses N)
//     none:       L layers in full
//     selective:  att not kept: L*(16C*N) + one layer's att NH*T*N, recomputed in backward
//     full:       only res3 of each layer (the next layer's input) is kept:
//                 L*C*N + one layer's scratch (15C*N + NH*T*N, stats 4N), recomputed
//   workspace    activation gradients, reused across layers:
//                dres C*N, dln C*N, dqkv 3C*N, dfch 4C*N, datt NH*T*N  (dlogits overwrite probs)
// Token ids (2N ints) stay on the host and are not counted; nor are Eigen's
// GEMM packing buffers (a real kernel keeps those in on-chip SRAM).
//
// bf16 emulation: in bf16 modes every stored tensor (weights, activations,
// activation gradients, weight gradients) is rounded to bf16 (round-to-nearest-
// even) when written; products accumulate in fp32 as on tensor cores. Updates:
//   bf16-mixed  fp32 master weights updated, weights = RNE(master)
//   bf16-rne    weights = RNE(weights + update)   (small updates vanish)
//   bf16-sr     weights = stochastic_round(weights + update), Trainium's approach
#pragma once

#include "AdamW.h"
#include "Device.h"
#include "FieldError.h"
#include "Layout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::engine {

struct GptConfig {
    int layers = 0;   // L
    int hidden = 0;   // C
    int heads = 0;    // NH; C % NH == 0
    int vocab = 0;    // V
    int seq = 0;      // T, also the position table's size
    bool operator==(const GptConfig&) const = default;
};

// P = V*C + T*C + L*(12C^2 + 13C) + 2C  (GPT-2's parameterisation with tied head).
std::int64_t parameterCount(const GptConfig& c);
// Problems named by field ("heads: 5 does not divide hidden 64"); empty when valid.
FieldErrors validate(const GptConfig& c, const std::string& prefix = "");

enum class PrecisionMode { FP32, BF16Mixed, BF16RNE, BF16SR };
const char* toString(PrecisionMode p);  // "fp32", "bf16-mixed", "bf16-rne", "bf16-sr"
std::optional<PrecisionMode> precisionFromString(const std::string& text);
// "none", "selective", "full" (core's toString(Recompute) spells them the same way).
std::optional<Recompute> recomputeFromString(const std::string& text);

struct ModelOptions {
    int batch = 1;                         // B
    PrecisionMode precision = PrecisionMode::FP32;
    Recompute recompute = Recompute::None;
    std::uint64_t seed = 1;                // initialisation and stochastic rounding
    double init_std = 0.02;                // GPT-2: N(0, 0.02); residual projections / sqrt(2L)
};

struct ParameterTensor {
    std::string name;       // "h3.fcw"
    std::int64_t offset;    // in elements, into the flat parameter buffer
    std::int64_t count;
    bool decay;             // matrices get weight decay; biases and norms do not
};

// The full model's parameter table, in the flat buffer's order: wte, wpe, then
// per layer ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb,
// then lnfw, lnfb. Shards (GptShard) map their tensors onto it.
std::vector<ParameterTensor> parameterTable(const GptConfig& c);
// GPT-2 initialisation of the whole flat buffer w (P values) from `seed`, in
// table order; every shard of a cluster draws the same values from it.
template <class T>
void initializeParameters(const std::vector<ParameterTensor>& tensors, std::uint64_t seed, double init_std,
                          int layers, T* w);

// T: float for training; double for gradient checks (fp32 precision mode only).
template <class T>
class GptModel {
public:
    // Allocates every buffer on `device` (throws DeviceOutOfMemory, leaving the
    // device as it was) and initialises the weights from options.seed.
    GptModel(const GptConfig& config, const ModelOptions& options, EmulatedDevice& device);
    ~GptModel();
    GptModel(const GptModel&) = delete;
    GptModel& operator=(const GptModel&) = delete;

    const GptConfig& config() const { return cfg_; }
    const ModelOptions& options() const { return opts_; }
    std::int64_t parameterCount() const { return P_; }
    const std::vector<ParameterTensor>& tensors() const { return tensors_; }

    // inputs, targets: N = B*T token ids in [0, V), sequence b at [b*T, (b+1)*T).
    // Returns the mean cross-entropy (nats per token).
    double forward(const int* inputs, const int* targets);
    void zeroGrad();
    // Gradients of the last forward's mean loss, accumulated into the gradients.
    void backward();
    // Global-norm clipping (max_norm <= 0: none), then AdamW step `step` (>= 1).
    // Returns the gradient norm before clipping.
    double update(const AdamWSettings& settings, double max_norm, int step);

    // Flat views (P values) for tests and checkpoints.
    T* params() { return weights_.as<T>(); }
    T* grads() { return grads_.as<T>(); }
    const T* losses() const;  // N per-token losses of the last forward

private:
    struct Layer;   // views of one layer's parameters (or gradients)
    struct Acts;    // views of one layer's saved activations
    void layerForward(int l);
    void layerBackward(int l);
    void round(T* x, std::int64_t count);
    void chargeEpilogue(double outputs);
    const T* layerInput(int l) const;

    GptConfig cfg_;
    ModelOptions opts_;
    EmulatedDevice& dev_;
    std::int64_t P_ = 0;
    int B_ = 0, T_ = 0, C_ = 0, V_ = 0, L_ = 0, NH_ = 0;
    std::int64_t N_ = 0;
    DataType compute_ = DataType::FP32;
    double eb_ = 4;  // device bytes of a tensor element (4 or 2)
    std::vector<ParameterTensor> tensors_;

    DeviceBuffer weights_, grads_, optimizer_, activations_, workspace_;
    std::vector<Layer> p_, g_;      // per layer: parameters, gradients
    std::vector<Acts> a_;           // per layer: activations
    struct Globals;
    Globals* gl_ = nullptr;         // embeddings, final norm, head views; owned
    std::vector<int> inputs_, targets_;  // host copies for backward
};

extern template class GptModel<float>;
extern template class GptModel<double>;

} // namespace shardscope::engine
