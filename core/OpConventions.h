// The per-element arithmetic of the transformer's non-matmul operations, counted once
// for the engine (which charges them on its emulated devices, engine/Kernels.h) and the
// planner (which prices them, planner/CostModel.cpp). Products count 2 FLOPs per
// multiply-add and are not here. These are conventions, not measurements: a kernel's
// real cost on a chip is dominated by its bytes, which both sides count from shapes.
#pragma once

#include "ModelSpec.h"

namespace shardscope::ops {

struct ElementFlops {
    double forward = 0;
    double backward = 0;
};

// LayerNorm: mean, variance, normalise, scale and shift (8); backward with the two
// reductions (14). RMSNorm drops the mean and the shift (5 and 9).
inline constexpr ElementFlops kLayerNorm{8, 14};
inline constexpr ElementFlops kRmsNorm{5, 9};
inline constexpr ElementFlops norm(NormKind kind) { return kind == NormKind::LayerNorm ? kLayerNorm : kRmsNorm; }

// Activations per element of the MLP's inner size: tanh GeLU (cube, scale, tanh as one,
// products: 10, backward 16); SiLU (5 and 8); ReLU (1 and 1).
inline constexpr ElementFlops kGelu{10, 16};
inline constexpr ElementFlops kSilu{5, 8};
inline constexpr ElementFlops kRelu{1, 1};
// A gated MLP multiplies the activated gate by the up projection: 1 more forward, 2 backward.
inline constexpr ElementFlops kGateProduct{1, 2};

// The MLP's activation per inner element, gate product included for gated kinds.
inline constexpr ElementFlops mlpActivation(MlpKind kind)
{
    switch (kind) {
    case MlpKind::Relu: return kRelu;
    case MlpKind::SwiGlu: return {kSilu.forward + kGateProduct.forward, kSilu.backward + kGateProduct.backward};
    case MlpKind::GeGlu: return {kGelu.forward + kGateProduct.forward, kGelu.backward + kGateProduct.backward};
    case MlpKind::Gelu: break;
    }
    return kGelu;
}

// A MoE copy's router weight applied in its experts' activation (Megatron-LM's weighted SwiGLU,
// moe/experts.py @ d98e8a64): 1 multiply per element forward; backward the weight's gradient (the
// activation evaluated again, its forward's count, and a multiply-add per element) and the output
// gradient scaled by the weight (1): 3 besides the activation's own.
inline constexpr ElementFlops kRouterWeight{1, 3};

// Bias and residual added after an output projection (a pass of its own after a
// tensor-parallel reduction): 2 per output element.
inline constexpr double kBiasResidualAdd = 2;
// The vocabulary softmax with cross-entropy: max, subtract, exp, sum, divide (5); backward
// subtracts the target's one-hot and scales (2).
inline constexpr ElementFlops kSoftmaxCrossEntropy{5, 2};
// Token (+ position) embedding: a sum per element; its gradient, two scatter-adds.
inline constexpr ElementFlops kEmbedding{1, 2};
// Rotary positions: per rotated element a multiply-add pair with its partner (3), the same
// rotation backward (3).
inline constexpr ElementFlops kRope{3, 3};
// A tensor scaled by a constant (T5's d_model^-0.5 before its tied head, forward and on the
// gradient): 1 per element.
inline constexpr double kScale = 1;
// BERT-style encoders: a token-type (segment) embedding adds one more table per element and
// its gradient one more scatter-add (1 and 1); the pooler's tanh (as one, like GeLU's; backward
// dy (1 - y^2): 3); post-norm layers add each residual branch's gradient to the block's in a
// pass of its own (1 per element, backward only), as the pooler's gradient is added to the
// first tokens' (1).
inline constexpr ElementFlops kTokenTypeEmbedding{1, 1};
inline constexpr ElementFlops kTanh{1, 3};
inline constexpr double kGradientAdd = 1;
// AdamW per parameter: moments, bias correction, update, decay (12); the global norm's square (2).
inline constexpr double kAdamW = 12;
inline constexpr double kSquaredNorm = 2;

} // namespace shardscope::ops
