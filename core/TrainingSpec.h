// TrainingSpec: what is trained, independent of model and hardware.
#pragma once

#include "FieldError.h"
#include "HardwareSpec.h"

namespace shardscope {

// Mixed precision keeps fp32 master weights and optimizer states (Rajbhandari et al.);
// Fp32 trains everything in fp32.
enum class Precision { FP32, BF16Mixed, FP16Mixed, FP8Mixed };
enum class Optimizer { AdamW, Sgd };

struct TrainingSpec {
    int global_batch = 0;             // sequences per optimizer step
    int seq_len = 0;                  // tokens per sequence
    Precision precision = Precision::BF16Mixed;
    Optimizer optimizer = Optimizer::AdamW;
    double tokens_to_train = 300e9;   // token budget for time and cost to train
    // Fused attention (FlashAttention-style): causal blocks above the diagonal are skipped,
    // probabilities are not stored, scores are recomputed in the backward pass.
    bool flash_attention = false;
    // Dropout layers, whose masks are kept for the backward pass (Korthikanti et al.'s setting,
    // GPT-3, BERT). Models trained without dropout (Llama, the engine's GPT) keep no masks.
    bool dropout = true;
    // Mixture of experts: the busiest expert-parallel rank's token copies over the mean (its
    // expert GEMMs and its share of the dispatch and combine take this much longer). 1 for
    // force-balanced runs (Megatron-Bridge's MoE benchmarks force-balance the routing); a run
    // balanced only by its auxiliary loss states its own measured figure.
    double moe_imbalance = 1.0;

    std::int64_t tokensPerStep() const { return std::int64_t(global_batch) * seq_len; }
    bool operator==(const TrainingSpec&) const = default;
};

// The data type the matmuls run in for a precision.
DataType computeType(Precision p);

FieldErrors validate(const TrainingSpec& training, const std::string& path = "training");

const char* toString(Precision v);
const char* toString(Optimizer v);

} // namespace shardscope
