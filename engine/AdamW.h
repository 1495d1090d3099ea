// AdamW's settings and how updated weights are stored: plain types shared by
// the optimizer kernel (Ops.h) and the model (ModelExecutor.h) without pulling in Eigen.
#pragma once

namespace shardscope::engine {

struct AdamWSettings {
    double lr = 3e-4;
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    double weight_decay = 0.0;  // decoupled; applied only to tensors that ask for it (matrices)
};

// How the optimizer writes the updated weights.
enum class WeightRounding { None, Bf16NearestEven, Bf16Stochastic };

} // namespace shardscope::engine
