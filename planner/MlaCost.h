// Multi-head latent attention (DeepSeek-V2/V3; core's MlaSpec) in the planner: its weights per
// device, its projection GEMMs and the activations one layer keeps, for the cost model and the
// search's memory bound. Kept apart from CostModel.cpp, which uses these in place of the q, k, v
// terms when a model has MLA.
//
// Shapes: transformers models/deepseek_v3/modular_deepseek_v3.py @ 000c33f (DeepseekV3Attention):
//   q_a_proj h -> Q, q_a_layernorm(Q), q_b_proj Q -> heads (N + P)   (or q_proj h -> heads (N + P))
//   kv_a_proj_with_mqa h -> R + P, kv_a_layernorm(R), kv_b_proj R -> heads (N + V), o_proj heads V -> h
// with Q, R the q and kv ranks, N, P the no-RoPE and RoPE head sizes, V the value head size.
// Under tensor parallelism as Megatron Core lays MLA out (NVIDIA/Megatron-LM @ d98e8a64,
// megatron/core/transformer/multi_latent_attention.py): linear_q_down_proj and
// linear_kv_down_proj are 'duplicated' on every tp rank (with their norms), linear_q_up_proj and
// linear_kv_up_proj column-parallel over the heads, linear_proj row-parallel.
#pragma once

#include "ModelSpec.h"

#include <algorithm>
#include <array>

namespace shardscope {

struct MlaDeviceShapes {
    // One GEMM per token: n outputs from k inputs (the planner's gemm(T, n, k)).
    struct Gemm {
        double n = 0, k = 0;
    };
    std::array<Gemm, 5> gemms{};  // forward projections of one layer on one device
    int gemm_count = 0;
    double params = 0;            // weights and latent norms of one layer on one device
    // Bytes per token (16-bit activations) the layer's attention keeps for its backward on one
    // device, in place of the MHA count's Q, K, V and output (4 q + 4 kv bytes, ActivationMemory.h):
    //   duplicated on every rank, over its tokens (the token shard under sequence parallelism:
    //     Megatron runs the down projection and the latent norms on hidden_states' [s/tp] shard and
    //     the up projections gather their inputs, keeping the shard): the q latent and its norm's
    //     output (2 x 2Q), the down product's kv part (2 (R + P): the latent into its norm and the
    //     RoPE key before rotation), the kv norm's output (2R, kv_b's input);
    //   split over tp by heads (every token): Q and K after RoPE (2 x 2 heads (N + P)), V and the
    //     attention output (2 x 2 heads V).
    double kept_duplicated_bytes_per_token = 0;
    double kept_split_bytes_per_token = 0;
    int latent_norms = 0;  // 2 with q compression (fp32 statistics per token each), else 1
    // Element-wise work per token (vector FLOPs, core/OpConventions.h): RoPE rotates the rank's
    // query heads' P-wide parts and the one shared P-wide key (after its gather: every token);
    // the latent norms run over Q + R (duplicated on every rank, on its token shard under sp);
    // the shared key's gradient sums the rank's heads' parts (heads - 1) P adds, backward.
    double rotated_per_token = 0;
    double normed_per_token = 0;
    double key_gradient_adds_per_token = 0;
    // Tensor parallelism: the rows per token the attention's tp collectives move in place of the
    // hidden size's. Its input side: the up projections' inputs (the q latent, or the layer's normed
    // input without q compression; the kv latent) and the RoPE key, all-gathered under sp (and their
    // gradients reduce-scattered), their gradients all-reduced without sp; the up projections'
    // inputs again in backward under sp (the weight gradients' re-gather). The output projection's
    // collectives stay the hidden size's.
    double tp_input_rows = 0;
    double tp_regather_rows = 0;
    // The duplicated parameters (down projection, latent norms): their gradients are partial over
    // tp under sp, summed in the sequence-parallel all-reduce.
    double duplicated_params = 0;

    // The largest of the projections on this device (what ZeRO-3 gathers at once).
    double largestMatrix() const
    {
        double largest = 0;
        for (int i = 0; i < gemm_count; ++i)
            largest = std::max(largest, gemms[size_t(i)].n * gemms[size_t(i)].k);
        return largest;
    }
};

inline MlaDeviceShapes mlaDeviceShapes(const ModelSpec& m, double tp)
{
    const MlaSpec& a = m.mla;
    const double h = m.hidden, headsLocal = double(m.heads) / tp;
    const double Q = a.q_lora_rank, R = a.kv_lora_rank, P = a.qk_rope_head_dim, N = a.qk_nope_head_dim,
                 V = a.v_head_dim;
    const double norm = m.norm == NormKind::LayerNorm ? 2.0 : 1.0;  // values per normalised element
    MlaDeviceShapes s;
    auto add = [&](double n, double k) {
        s.gemms[size_t(s.gemm_count++)] = {n, k};
        s.params += n * k;
    };
    if (Q > 0) {
        add(Q, h);                     // q_a_proj, duplicated
        add(headsLocal * (N + P), Q);  // q_b_proj, column-parallel
        s.params += norm * Q;          // q_a_layernorm, duplicated
    } else {
        add(headsLocal * (N + P), h);  // q_proj, column-parallel
    }
    add(R + P, h);                     // kv_a_proj_with_mqa, duplicated
    add(headsLocal * (N + V), R);      // kv_b_proj, column-parallel
    add(h, headsLocal * V);            // o_proj, row-parallel
    s.params += norm * R;              // kv_a_layernorm, duplicated
    s.kept_duplicated_bytes_per_token = 2.0 * (2 * Q + (R + P) + R);
    s.kept_split_bytes_per_token = 2.0 * (2 * headsLocal * (N + P) + 2 * headsLocal * V);
    s.latent_norms = Q > 0 ? 2 : 1;
    s.rotated_per_token = headsLocal * P + P;
    s.normed_per_token = Q + R;
    s.key_gradient_adds_per_token = (headsLocal - 1) * P;
    s.tp_input_rows = (Q > 0 ? Q : h) + R + P;
    s.tp_regather_rows = (Q > 0 ? Q : h) + R;
    s.duplicated_params = (Q > 0 ? Q * h : 0.0) + (R + P) * h + norm * (Q + R);
    return s;
}

// The weight matrices of one MLA block (no norms), whole: for the search's memory lower bound.
inline double mlaMatrixParams(const ModelSpec& m)
{
    const MlaDeviceShapes s = mlaDeviceShapes(m, 1);
    double matrices = 0;
    for (int i = 0; i < s.gemm_count; ++i)
        matrices += s.gemms[size_t(i)].n * s.gemms[size_t(i)].k;
    return matrices;
}

} // namespace shardscope
