// TrainingSpec: what is trained, independent of model and hardware.
#pragma once

#include "FieldError.h"
#include "HardwareSpec.h"

namespace shardscope {

// Mixed precision keeps fp32 master weights and optimizer states (Rajbhandari et al.);
// Fp32 trains everything in fp32. The FP8 and FP4 recipes are bf16 mixed precision whose linear
// layers' GEMMs (forward, input gradient, weight gradient) run on quantized inputs, as Transformer
// Engine names its recipes (transformer_engine/common/recipe/__init__.py @ d0067d0):
//   FP8Tensorwise  "fp8"            per-tensor current scaling (Float8CurrentScaling; Megatron's
//                                   --fp8-recipe tensorwise, Megatron-Bridge's "FP8-CS")
//   FP8Delayed     "fp8-delayed"    per-tensor delayed scaling from an amax history (DelayedScaling)
//   FP8Blockwise   "fp8-blockwise"  1 x 128 blocks of activations and gradients, 128 x 128 of
//                                   weights, fp32 scales (Float8BlockScaling; DeepSeek-V3's)
//   FP8Rowwise     "fp8-rowwise"    one scale per row (torchao's float8 "rowwise" recipe, torchtitan)
//   MXFP8          "mxfp8"          32-element blocks, E8M0 scales (MXFP8BlockScaling)
//   NVFP4          "nvfp4"          E2M1 in 16-element blocks with E4M3 scales and a per-tensor fp32
//                                   scale (NVFP4BlockScaling)
// BF16Autocast "bf16-autocast" is NeuronX Distributed's precision (NxD Training's precision.type
// 'autocast', NxD's --use_gpu_compatible_precision 1, the "Autocast:BF16+FP32Optimizer" of AWS's
// Trainium benchmarks): bf16 weights and matmuls, but the ZeRO-1 optimizer accumulates the
// gradients in fp32 and runs its reduce-scatter and all-gather in fp32 (use_fp32_grad_acc ->
// use_grad_acc_hook + higher_cc_precision), with fp32 master weights and moments:
//   neuronx-distributed-training @ 9169aa0 lightning_modules/model/base.py (autocast sets
//   use_master_weights and use_fp32_grad_acc), hf_models/llama_model.py (torch_dtype bf16 for every
//   type but fp32; model.to(torch.bfloat16) when XLA_DOWNCAST_BF16=0, as autocast sets it),
//   examples/training_orchestrator.py (autocast: XLA_USE_BF16=0, XLA_DOWNCAST_BF16=0);
//   neuronx-distributed @ fbac349 trainer/trainer.py (use_fp32_grad_acc -> use_grad_acc_hook,
//   higher_cc_precision).
// (Appended last: the GUI keeps a precision as its enum value.)
enum class Precision {
    FP32, BF16Mixed, FP16Mixed, FP8Tensorwise, FP8Delayed, FP8Blockwise, FP8Rowwise, MXFP8, NVFP4, BF16Autocast
};
enum class Optimizer { AdamW, Sgd };

// The data type the gradients are accumulated and data-parallel reduced in ("main grads"), for bf16
// and the FP8/FP4 recipes. Default is the frameworks' default, fp32:
//   Megatron-LM megatron/training/arguments.py @ d98e8a64 (--bf16 sets accumulate_allreduce_grads_in_fp32
//   unless --grad-reduce-in-bf16: fp32 main_grad buffers, reduced in fp32); Megatron-Bridge
//   training/mixed_precision.py @ 067f987 (grad_reduce_in_fp32 True); torchtitan
//   torchtitan/config/configs.py @ b5bcd76 (mixed_precision_reduce "float32", its only choice).
// BF16 keeps them in the weights' bf16 (Megatron's --grad-reduce-in-bf16, Megatron-Bridge's performance
// recipes: perf_recipes/_common.py @ 067f987 sets grad_reduce_in_fp32 False). fp32, fp16 and
// bf16-autocast precisions fix their gradients' type (fp32, fp16, fp32): only Default or the same.
enum class MainGrads { Default, FP32, BF16 };

struct TrainingSpec {
    int global_batch = 0;             // sequences per optimizer step
    int seq_len = 0;                  // tokens per sequence
    Precision precision = Precision::BF16Mixed;
    Optimizer optimizer = Optimizer::AdamW;
    MainGrads main_grads = MainGrads::Default;
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

// The data type the matmuls run in for a precision (the linear layers' under an FP8/FP4 recipe).
DataType computeType(Precision p);
// An FP8 or FP4 recipe: the linear layers' GEMMs on quantized inputs, the rest in bf16.
bool quantizedRecipe(Precision p);
// The data type the gradients are accumulated and reduced in (MainGrads resolved for the precision).
DataType gradientType(Precision p, MainGrads g);
inline DataType gradientType(const TrainingSpec& t) { return gradientType(t.precision, t.main_grads); }

FieldErrors validate(const TrainingSpec& training, const std::string& path = "training");

const char* toString(Precision v);
const char* toString(Optimizer v);
const char* toString(MainGrads v);

} // namespace shardscope
