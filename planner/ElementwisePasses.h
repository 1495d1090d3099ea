// Element-wise work per framework: the memory passes of each element-wise op of a transformer
// layer, forward and backward, as each framework's model code runs them. Derived from the
// sources (not fitted): the cost model's fitted `elementwise_traffic_factor` was set on
// Megatron-LM / Transformer Engine rows, whose norms, activations, RoPE and bias-dropout-add run
// as fused kernels; an eager trainer runs each torch op as its own kernel, each a pass over memory.
// The element-wise term of a framework is the fused one scaled by passes(framework) / passes(fused)
// over the layer's tensors (CostModel.cpp), so the fitted factor keeps its meaning and an unset
// framework prices exactly as before.
//
// A pass is one read or one write of a tensor of the op's size at the activation width; an fp32
// intermediate of a 16-bit run counts 2. Per op (size: norm and residual h per token on the
// sequence shard, RoPE q + kv per token, the MLP activation f per token):
//
// fused (Megatron-LM @ d98e8a64, Transformer Engine):
//   norm      fwd 2 (read x, write y; TE's fused RMSNorm / LayerNorm, the statistics aside)
//             bwd 3 (read dy and x, write dx; dgamma from per-block partials)
//   SwiGLU    fwd 3 (read gate and up, write out), bwd 5 (read dy, gate, up; write dgate, dup):
//             megatron/core/fusions/fused_bias_swiglu.py (bias_swiglu, swiglu_back)
//   GeLU      fwd 2, bwd 3 with its bias: megatron/core/fusions/fused_bias_gelu.py
//   RoPE      fwd 2, bwd 2 per tensor (TE's fused rotary kernel: read, write)
//   residual  fwd 3 (read x and the residual, write the sum; with dropout + its 1-byte mask 0.5),
//             bwd 3 (the residual stream's gradient accumulated; with dropout + 2.5 for dx = dy x
//             mask): megatron/core/fusions/fused_bias_dropout.py (bias_dropout_add_fused_train)
// eager (PyTorch FSDP without torch.compile, DeepSpeed, Hugging Face model code:
//   transformers src/transformers/models/llama/modeling_llama.py @ 0022728):
//   norm      RMSNorm (LlamaRMSNorm, one kernel per op): fwd 18 = to(fp32) 1+2, pow 2+2,
//             mean 2, x * rsqrt 2+2, to(bf16) 2+1, weight * 1+1; bwd 38 = each op's backward
//             (weight mul: dx 2 + dweight 4; cast back 3; * rsqrt: dx 4 + d(rsqrt) 8; pow 6;
//             mean 2; the two gradients of x summed 6; the first cast's backward 3).
//             LayerNorm: torch.nn.LayerNorm is one native kernel: fwd 2, bwd 5 (dx, then
//             dgamma/dbeta in a second pass over dy and x)
//   SwiGLU    act_fn(gate) * up: silu 2, mul 3 -> fwd 5; bwd 9 (mul: two products 3 + 3; silu 3)
//   GeLU      F.gelu: fwd 2, bwd 3 (the bias in the GEMM's addmm)
//   RoPE      (q * cos) + (rotate_half(q) * sin): rotate_half's neg 1 + cat 2, two muls 2 + 2,
//             add 3 -> fwd 10; bwd 8 (two muls 2 + 2, neg 1, the two gradients summed 3)
//   residual  x + out: fwd 3, bwd 3; with dropout: dropout 2.5 (its mask 0.5) + add 3 -> fwd 5.5,
//             bwd 5.5 (dropout's backward 2.5 + the accumulation 3)
// torchtitan eager (torchtitan @ b5bcd76c; the exporter turns torch.compile on only for its
//   fp8-rowwise recipe, TorchtitanExport.cpp):
//   norm      nn.RMSNorm -> aten._fused_rms_norm (one kernel, performance_passes.py): fwd 2, bwd 5
//   SwiGLU    F.silu(w1(x)) * w3(x) (models/common/feed_forward.py): fwd 5, bwd 9
//   RoPE      ComplexRoPE.apply_rotary_emb (models/common/rope.py): float() 1+2, complex mul 2+2,
//             type_as 2+1 -> fwd 10; bwd 10 (the same three backwards)
//   residual  h = x + attention(...) (models/llama3/model.py): fwd 3, bwd 3
// torchtitan compiled (torch.compile, Inductor fuses each chain of element-wise ops into one
//   kernel): norm fwd 2, bwd 5; SwiGLU 3 / 5; RoPE 2 / 2; residual 3 / 3
// XLA (NeuronX Distributed, NxD Training, MaxText): the compiler fuses each chain of element-wise
//   ops of the traced graph into one loop fusion, priced as the fused profile (assumption: no
//   pass count published for neuronx-cc's or XLA's fusions).
//
// Not counted (the same in every profile, or outside this term): the attention scores of unfused
// attention (their element-wise traffic keeps the fused count), layout copies (HF's transpose +
// contiguous, repeat_kv), the logits' cross-entropy, MoE permutations.
#pragma once

#include "ActivationMemory.h"
#include "FrameworkExport.h"
#include "TrainingSpec.h"

#include <optional>

namespace shardscope {

struct OpPasses {
    double forward = 0, backward = 0;
};

struct ElementwiseProfile {
    const char* name;    // "fused", "eager", ...
    const char* ledger;  // the element-wise term's name in the ledger, with its framework
    const char* formula;
    OpPasses rms_norm, layer_norm, swiglu, gelu, rope, residual, dropout_residual;
};

// The passes of each profile (the table above), named in the ledger with their framework.
inline constexpr OpPasses kFusedNorm{2, 3}, kFusedSwiglu{3, 5}, kGelu{2, 3}, kFusedRope{2, 2}, kResidual{3, 3},
    kFusedDropoutResidual{3.5, 5.5}, kEagerRmsNorm{18, 38}, kNativeNorm{2, 5}, kEagerSwiglu{5, 9},
    kEagerRope{10, 8}, kComplexRope{10, 10}, kEagerDropoutResidual{5.5, 5.5};
inline constexpr const char* kFusedFormula = "m x 3 x factor x stored activation bytes / HBM BW";
inline constexpr const char* kScaledFormula =
    "fused term x passes(framework) / passes(fused) over the layer's norms, RoPE, MLP activation and residuals, "
    "forward and backward apart (planner/ElementwisePasses.h)";

constexpr ElementwiseProfile fusedElementwise(const char* name, const char* ledger)
{
    return {name, ledger, kFusedFormula, kFusedNorm, kFusedNorm, kFusedSwiglu, kGelu, kFusedRope, kResidual,
            kFusedDropoutResidual};
}
constexpr ElementwiseProfile eagerElementwise(const char* name, const char* ledger)
{
    return {name, ledger, kScaledFormula, kEagerRmsNorm, kNativeNorm, kEagerSwiglu, kGelu, kEagerRope, kResidual,
            kEagerDropoutResidual};
}

inline constexpr ElementwiseProfile kFusedElementwise =
    fusedElementwise("fused", "element-wise ops, forward and backward");
inline constexpr ElementwiseProfile kMegatronElementwise =
    fusedElementwise("megatron", "element-wise ops, forward and backward (megatron: fused kernels)");
inline constexpr ElementwiseProfile kMegatronBridgeElementwise =
    fusedElementwise("megatron-bridge", "element-wise ops, forward and backward (megatron-bridge: fused kernels)");
inline constexpr ElementwiseProfile kNeuronxElementwise =
    fusedElementwise("neuronx", "element-wise ops, forward and backward (neuronx: XLA-compiled graph, fused)");
inline constexpr ElementwiseProfile kNxdTrainingElementwise = fusedElementwise(
    "nxd-training", "element-wise ops, forward and backward (nxd-training: XLA-compiled graph, fused)");
inline constexpr ElementwiseProfile kMaxTextElementwise =
    fusedElementwise("maxtext", "element-wise ops, forward and backward (maxtext: XLA-compiled graph, fused)");
inline constexpr ElementwiseProfile kFsdpElementwise =
    eagerElementwise("fsdp", "element-wise ops, forward and backward (fsdp: eager PyTorch, one kernel per op)");
inline constexpr ElementwiseProfile kDeepSpeedElementwise = eagerElementwise(
    "deepspeed", "element-wise ops, forward and backward (deepspeed: eager PyTorch, one kernel per op)");
inline constexpr ElementwiseProfile kTorchtitanEagerElementwise{
    "torchtitan", "element-wise ops, forward and backward (torchtitan: eager, without torch.compile)",
    kScaledFormula, kNativeNorm, kNativeNorm, kEagerSwiglu, kGelu, kComplexRope, kResidual, kEagerDropoutResidual};
inline constexpr ElementwiseProfile kTorchtitanCompiledElementwise{
    "torchtitan-compiled", "element-wise ops, forward and backward (torchtitan: torch.compile)",
    kScaledFormula, kNativeNorm, kNativeNorm, kFusedSwiglu, kGelu, kFusedRope, kResidual, kFusedDropoutResidual};

// The profile a framework runs a problem's element-wise ops with; null: unset (the fused default,
// priced exactly as without a framework).
inline const ElementwiseProfile* elementwiseProfile(std::optional<ExportFormat> framework, Precision precision)
{
    if (!framework)
        return nullptr;
    switch (*framework) {
    case ExportFormat::Megatron: return &kMegatronElementwise;
    case ExportFormat::MegatronBridge: return &kMegatronBridgeElementwise;
    case ExportFormat::Fsdp: return &kFsdpElementwise;
    case ExportFormat::DeepSpeed: return &kDeepSpeedElementwise;
    case ExportFormat::Torchtitan:  // compiled only with its fp8-rowwise recipe (TorchtitanExport.cpp)
        return precision == Precision::FP8Rowwise ? &kTorchtitanCompiledElementwise : &kTorchtitanEagerElementwise;
    case ExportFormat::NeuronX: return &kNeuronxElementwise;
    case ExportFormat::NxdTraining: return &kNxdTrainingElementwise;
    case ExportFormat::MaxText: return &kMaxTextElementwise;
    }
    return nullptr;
}

// What a layer's element-wise ops move per token, forward and backward, in passes x elements.
struct LayerModelKinds {
    bool rms_norm = true;
    bool rotary = true;
};
inline OpPasses layerElementwisePasses(const ElementwiseProfile& p, const LayerActivationShape& s,
                                       const LayerModelKinds& kinds)
{
    const double sp = s.sequence_parallel ? s.tp : 1.0;
    const double hs = s.hidden / sp;
    const double blocks = s.cross_attention ? 3.0 : 2.0;  // norms and residual adds per layer
    const OpPasses norm = kinds.rms_norm ? p.rms_norm : p.layer_norm;
    const OpPasses act = s.gated_mlp ? p.swiglu : p.gelu;
    const OpPasses res = s.dropout ? p.dropout_residual : p.residual;
    const double qk = s.q_dim_local + s.kv_dim_local;
    const double attention = s.cross_attention ? 2.0 : 1.0;
    auto sum = [&](double OpPasses::*dir) {
        return blocks * (norm.*dir + res.*dir) * hs + (kinds.rotary ? attention * p.rope.*dir * qk : 0.0) +
               act.*dir * s.ffn_local + (s.qk_norm ? attention * norm.*dir * qk : 0.0);
    };
    return {sum(&OpPasses::forward), sum(&OpPasses::backward)};
}

// passes(profile) / passes(fused) for one layer, forward and backward.
inline OpPasses elementwiseRatios(const ElementwiseProfile& p, const LayerActivationShape& s,
                                  const LayerModelKinds& kinds)
{
    const OpPasses fused = layerElementwisePasses(kFusedElementwise, s, kinds);
    const OpPasses own = layerElementwisePasses(p, s, kinds);
    return {fused.forward > 0 ? own.forward / fused.forward : 1.0,
            fused.backward > 0 ? own.backward / fused.backward : 1.0};
}

} // namespace shardscope
