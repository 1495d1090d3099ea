// What an FP8/FP4 training recipe (TrainingSpec.h) changes in a step, per linear layer: its
// GEMMs' data type, the quantization passes around them (memory-bound: bytes read and written per
// element of the bf16 tensor quantized), the bytes kept of its input for the backward, and the
// quantized weight copies kept in memory. Master weights, gradients and optimizer states are those
// of bf16 mixed precision (ModelStateMemory.h). Everything outside the linear layers (the attention
// core's batched products, the logits head, the router, norms, element-wise work) stays in bf16.
//
// Sources (read at these commits):
//  [TE]  NVIDIA/TransformerEngine @ d0067d0. transformer_engine/pytorch/module/linear.py (_Linear
//        forward: the input quantized with rowwise and columnwise usage, the rowwise data dropped
//        after the forward GEMM, the quantized input saved for the backward), layernorm_linear.py and
//        layernorm_mlp.py (the norm's output quantized into the first GEMM and saved quantized;
//        fc1_out kept in bf16 for the activation's backward; act_out quantized for fc2 and saved
//        quantized; the quantized weight workspaces kept for the backward, cached across the step's
//        micro-batches); transformer_engine/common/recipe/__init__.py (block sizes and scale types).
//  [AO]  pytorch/ao @ 36027d82 torchao/float8/float8_linear.py (matmul_with_hp_or_float8_args:
//        save_for_backward(input_hp, weight_hp_t), the casts redone in the backward), the recipe
//        torchtitan's Float8LinearConverter runs ("rowwise", torchtitan @ b5bcd76c).
#pragma once

#include "HardwareSpec.h"
#include "TrainingSpec.h"

namespace shardscope {

struct QuantizationRecipe {
    bool quantized = false;           // the linear layers' GEMMs run on quantized inputs
    DataType gemm_type = DataType::BF16;
    double gemm_input_bytes = 2;      // bytes per element of a GEMM operand as the GEMM reads it
    // HBM bytes moved (read + written) per element of a bf16 tensor quantized for its two uses
    // (rowwise for one GEMM, columnwise for the other), amax passes and scales included.
    double activation_cast_bytes = 0; // a linear layer's input, per micro-batch forward
    double gradient_cast_bytes = 0;   // its output gradient, per micro-batch backward
    double weight_cast_bytes = 0;     // its weight, per cast
    bool weights_cached = true;       // weights cast once per step (TE workspaces), else every use
    double weight_casts_per_micro_batch = 0;  // uncached: forward and backward casts
    int casts_per_tensor = 0;         // kernel launches per quantized tensor
    // Bytes per element of a linear layer's input kept for the backward (bf16: 2).
    double stored_input_bytes = 2;
    // Bytes per linear-layer parameter of the quantized weight copies kept across the step.
    double weight_copy_bytes = 0;
    // The model's first and last transformer layers kept in bf16 (no quantized GEMMs, casts or
    // copies): Megatron-Bridge's bf16_with_fp8_current_scaling_mixed sets first_last_layers_bf16 with
    // one layer at each end (src/megatron/bridge/training/mixed_precision.py @ 067f987d); its other
    // recipes, and Megatron-LM's default (first_last_layers_bf16 False, transformer_config.py @
    // d98e8a64), quantize every layer; delayed scaling cannot keep them ("Delayed scaling does not
    // support first / last layer in BF16"). The exporters write the same (MegatronExport.cpp).
    int bf16_layers_at_start = 0;
    int bf16_layers_at_end = 0;
    // With a distributed optimizer (ZeRO-1/2) the quantized weights are the model's weights: no bf16
    // copy beside them, the optimizer's fp32 master updating them (Megatron's --fp8-param-gather /
    // --fp4-param-gather, which Megatron-Bridge's current-scaling, delayed, MXFP8 and NVFP4 recipes
    // set and its blockwise recipe does not: mixed_precision.py @ 067f987d).
    bool primary_weights = false;
};

inline QuantizationRecipe quantizationRecipe(Precision precision)
{
    QuantizationRecipe r;
    // Transformer Engine's recipes: the input and the output gradient are each read once in bf16
    // and written as two quantized copies (rowwise and columnwise); only the columnwise copy of the
    // input stays for the weight gradient, 1 byte [TE linear.py]. The weight's two copies live in
    // the module's workspace for the step (cast at its first micro-batch).
    auto te = [&](double dataBytes, double scaleBytes, bool amaxPass) {
        r.quantized = true;
        r.gemm_input_bytes = dataBytes;
        const double copies = 2 * (dataBytes + scaleBytes);  // rowwise + columnwise, with their scales
        const double cast = 2.0 + copies + (amaxPass ? 2.0 : 0.0);  // read bf16, write both, (amax: read again)
        r.activation_cast_bytes = r.gradient_cast_bytes = r.weight_cast_bytes = cast;
        r.casts_per_tensor = amaxPass ? 2 : 1;
        r.stored_input_bytes = dataBytes + scaleBytes;
        r.weight_copy_bytes = copies;
    };
    switch (precision) {
    case Precision::FP32:
    case Precision::BF16Mixed:
    case Precision::BF16Autocast:
    case Precision::FP16Mixed: return r;
    case Precision::FP8Tensorwise:  // current scaling: amax, then cast
        te(1.0, 0.0, true);
        r.bf16_layers_at_start = r.bf16_layers_at_end = 1;
        r.primary_weights = true;
        break;
    case Precision::FP8Delayed:  // the scale from the amax history, the cast fused
        te(1.0, 0.0, false);
        r.primary_weights = true;
        break;
    case Precision::FP8Blockwise: te(1.0, 4.0 / 128, false); break;  // fp32 scale per 1 x 128 block
    case Precision::MXFP8:  // E8M0 scale per 32 elements
        te(1.0, 1.0 / 32, false);
        r.primary_weights = true;
        break;
    case Precision::NVFP4:  // E4M3 per 16 + a per-tensor fp32 scale from an amax pass
        te(0.5, 1.0 / 16, true);
        r.primary_weights = true;
        break;
    case Precision::FP8Rowwise:
        // torchao: one cast per use (read bf16, write one fp8 copy with its row scales), the input
        // and weight kept in bf16 and cast again in the backward; no weight cache [AO].
        r.quantized = true;
        r.gemm_input_bytes = 1.0;
        r.activation_cast_bytes = 2 * 3.0;  // forward (fprop) and backward (wgrad) casts of the input
        r.gradient_cast_bytes = 2 * 3.0;    // dgrad and wgrad casts of the output gradient
        r.weight_cast_bytes = 3.0;
        r.weights_cached = false;
        r.weight_casts_per_micro_batch = 2;  // fprop and dgrad
        r.casts_per_tensor = 2;
        r.stored_input_bytes = 2.0;
        r.weight_copy_bytes = 0;
        break;
    }
    r.gemm_type = computeType(precision);
    return r;
}

} // namespace shardscope
