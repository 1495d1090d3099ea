// Model-state memory per device for mixed-precision Adam under ZeRO
// (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", SC'20, Section 3 and Figure 1): 2 bytes of 16-bit weights,
// 2 bytes of gradients and K = 12 bytes of optimizer state (fp32 master weights,
// momentum, variance) per parameter, partitioned over the data-parallel group.
// The frameworks' bf16 default keeps the gradients in fp32 (MainGrads, TrainingSpec.h): 2 + 4 + 12,
// Megatron-LM's "bf16 parameters, fp32 gradients" 18 bytes, 6 + 12/d with its distributed
// optimizer (docs/user-guide/features/dist_optimizer.md @ d98e8a64).
#pragma once

#include "TrainingSpec.h"

#include <cstdint>

namespace shardscope {

struct ModelStateBytes {
    double weights = 0;
    double gradients = 0;
    double optimizer = 0;
    double total() const { return weights + gradients + optimizer; }
};

// Bytes per parameter of each state for a precision and optimizer.
struct StateBytesPerParameter {
    double weights;
    double gradients;  // the main gradients' width (gradientType): also their reductions' bytes per element
    double optimizer;  // K in the ZeRO paper
    double gathered;   // bytes the data-parallel all-gather moves per parameter (the weights' width but
                       // under bf16-autocast, whose ZeRO-1 gathers the fp32 shards)
};
StateBytesPerParameter stateBytesPerParameter(Precision precision, Optimizer optimizer, MainGrads grads);
inline StateBytesPerParameter stateBytesPerParameter(const TrainingSpec& t)
{
    return stateBytesPerParameter(t.precision, t.optimizer, t.main_grads);
}

// `parameters` held by one model-parallel rank (P / (tp x pp)), `shards` the
// ZeRO partition group size (1 when not sharded), `zero_stage` 0-3.
ModelStateBytes modelStateBytes(double parameters, int zero_stage, int shards, Precision precision,
                                Optimizer optimizer, MainGrads grads);

} // namespace shardscope
