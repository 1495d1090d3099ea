#include "ModelStateMemory.h"

namespace shardscope {

namespace {

StateBytesPerParameter precisionStates(Precision precision, Optimizer optimizer)
{
    // Adam keeps momentum and variance (2 x 4 bytes); SGD with momentum keeps one (4 bytes).
    const double moments = optimizer == Optimizer::AdamW ? 8.0 : 4.0;
    switch (precision) {
    case Precision::FP32:
        return {4.0, 4.0, moments, 4.0};  // no separate master copy
    case Precision::BF16Mixed:
    case Precision::FP16Mixed:
    case Precision::FP8Tensorwise:  // FP8/FP4 recipes keep bf16 weights and gradients, fp32 master
    case Precision::FP8Delayed:     // weights and moments; their quantized weight copies are the cost
    case Precision::FP8Blockwise:   // model's (QuantizationRecipe.h)
    case Precision::FP8Rowwise:
    case Precision::MXFP8:
    case Precision::NVFP4:
        return {2.0, 2.0, 4.0 + moments, 2.0};  // + fp32 master weights
    case Precision::BF16Autocast:
        // bf16 weights; the gradients accumulated in fp32 buffers (torch_xla's ZeRO-1 use_grad_acc_hook:
        // the accumulation in optimizer_dtype, fp32); fp32 master weights and moments. The updated
        // parameters are gathered in fp32 too (higher_cc_precision: the collectives in optimizer_dtype).
        return {2.0, 4.0, 4.0 + moments, 4.0};
    }
    return {2.0, 2.0, 4.0 + moments, 2.0};
}

} // namespace

StateBytesPerParameter stateBytesPerParameter(Precision precision, Optimizer optimizer, MainGrads grads)
{
    // The gradients at their accumulation type; the weights, the optimizer and the all-gather of the
    // updated parameters (in the weights' type) are the precision's (Megatron's distributed optimizer
    // gathers bf16 parameters with fp32 main grads, dist_optimizer.md @ d98e8a64).
    StateBytesPerParameter s = precisionStates(precision, optimizer);
    s.gradients = gradientType(precision, grads) == DataType::FP32 ? 4.0 : 2.0;  // fp32, else bf16/fp16
    return s;
}

ModelStateBytes modelStateBytes(double parameters, int zero_stage, int shards, Precision precision,
                                Optimizer optimizer, MainGrads grads)
{
    const StateBytesPerParameter per = stateBytesPerParameter(precision, optimizer, grads);
    const double n = shards > 0 ? shards : 1;
    ModelStateBytes b;
    b.optimizer = parameters * per.optimizer / (zero_stage >= 1 ? n : 1.0);
    b.gradients = parameters * per.gradients / (zero_stage >= 2 ? n : 1.0);
    b.weights = parameters * per.weights / (zero_stage >= 3 ? n : 1.0);
    return b;
}

} // namespace shardscope
