// Roofline costs of the matrix products, shared by GptModel (one device) and
// GptShard (a tensor/pipeline shard), so both charge a kernel the same way.
// FLOPs: 2 per multiply-add. Epilogues fused into a product (bias, residual
// add) add bytes only. Bytes: device bytes of each tensor read and written once.
// IC, OC: input and output channels; N tokens.
#pragma once

#include "Device.h"

namespace shardscope::engine {

struct CostArgs {
    double e;   // activation / activation-gradient element bytes
    double we;  // weight and gradient element bytes (same as e here)
};

inline KernelCost matmulForwardCost(double IC, double OC, double N, bool bias, bool residual, CostArgs s)
{
    return {2 * IC * OC * N,
            IC * OC * s.we + IC * N * s.e + (bias ? OC * s.we : 0) + (residual ? OC * N * s.e : 0),
            OC * N * s.e};
}

// The backward of a product as the two kernels frameworks run (cuBLAS/NKI dgrad and wgrad):
// the input gradient dX = W dY reads W and dY and writes dX; the weight gradient dW += X dY^T
// reads X, dY and the accumulated dW, and writes dW (and the bias gradient, from dY).
inline KernelCost matmulInputGradCost(double IC, double OC, double N, CostArgs s)
{
    return {2 * IC * OC * N, IC * OC * s.we + OC * N * s.e, IC * N * s.e};
}

inline KernelCost matmulWeightGradCost(double IC, double OC, double N, bool bias, CostArgs s)
{
    return {2 * IC * OC * N, IC * N * s.e + OC * N * s.e + IC * OC * s.we + (bias ? OC * s.we : 0),
            IC * OC * s.we + (bias ? OC * s.we : 0)};
}

// Charges both kernels of a product's backward.
inline void chargeMatmulBackward(EmulatedDevice& device, double IC, double OC, double N, bool bias, CostArgs s,
                                 DataType compute)
{
    device.charge(KernelKind::Matmul, matmulInputGradCost(IC, OC, N, s), compute);
    device.charge(KernelKind::Matmul, matmulWeightGradCost(IC, OC, N, bias, s), compute);
}

} // namespace shardscope::engine
