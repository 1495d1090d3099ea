// ModelConfig: the transformer the engine trains, block by block, as the catalog's
// ModelSpec describes it (scaled down in depth, width, vocabulary and sequence only).
//
// A model is: token embedding (+ learned positions), L pre-norm blocks
//   x = x + attn_proj(attention(norm1(x)))        attention: causal or bidirectional,
//   x = x + mlp_proj(act(mlp_in(norm2(x))))       grouped-query, RoPE when the spec says
// then the final norm, the LM head (tied to the token embedding or its own matrix)
// and the mean cross-entropy. Blocks by kind:
//   norm        LayerNorm (weight, bias) or RMSNorm (weight), with the model's eps
//   attention   NH query heads of head_dim, NKV key/value heads (MHA, GQA, MQA);
//               fused qkv weight (C, NH*hd + 2 NKV*hd), output projection (NH*hd, C)
//   positions   learned (a (C, seq) table added to the embedding) or rotary (RoPE on
//               q and k, with the spec's base)
//   mlp         GeLU or ReLU: (C, F) then (F, C); SwiGLU or GeGLU: (C, 2F) [gate | up]
//               then (F, C)
//   bias        on every linear layer, on q, k and v only (Qwen2), or none
//   qk-norm     the norm over hd on every query and key head before RoPE (Qwen3), or none
//   window      causal attention over the last W keys on the sliding layers (Mistral, GPT-OSS)
// Encoder-decoder (T5, Raffel et al. 2020; huggingface/transformers modeling_t5.py @ 6b8b757):
//   encoder   the embedding of the inputs, `layers` pre-norm blocks with bidirectional
//             self-attention, its final norm: the encoder output E (C, T)
//   decoder   the embedding (the same wte) of the decoder inputs, `decoder_layers` blocks
//               x = x + attn_proj(causal self-attention(norm1(x)))
//               x = x + cross_proj(attention(q = cross_q(normx(x)), k, v = cross_kv(E)))
//               x = x + mlp(norm2(x))
//             its final norm, scaled by C^-0.5 before the tied head (T5ForConditionalGeneration)
//   positions relative: one (heads x relative_buckets) bias table per stack (bidirectional
//             buckets in the encoder, causal in the decoder, RelativePosition.h) added to every
//             self-attention score of the stack; none in cross-attention; scores unscaled (T5
//             folds 1/sqrt(hd) into its initialisation)
//   data      encoder tokens = the inputs x[0:T]; labels = the targets x[1:T+1]; decoder inputs =
//             the labels shifted right behind the start token 0 (T5's decoder_start_token_id, the
//             pad id; HF's _shift_right): [0, x[1:T]]. The loss is the decoder's, over T labels.
//   no biases on an encoder-decoder's linear layers (T5 has none; refused otherwise).
// BERT-style encoders (Devlin et al. 2019; HF transformers models/bert/modeling_bert.py
// @ 004ad5f: BertEmbeddings, BertSelfOutput, BertOutput, BertPooler, BertPreTrainingHeads):
//   token types  a (C, types) segment table added to the embedding sum
//   embed norm   a norm right after word + position + token-type sum
//   post-norm    x = norm1(x + attn(x)); x = norm2(x + mlp(x)); no final norm
//   masked LM    the loss on masked positions only: transform (dense C->C + bias, GeLU,
//                norm), the decoder tied to wte (or lm_head) plus an output bias (V);
//                inputs masked by MaskedLm.h (k = round(15% T) positions a sequence)
//   pooler       dense C->C + tanh on each sequence's first token, trained by BERT's
//                next-sentence head (C->2 + bias, cross-entropy over the 2 classes);
//                BertForPreTraining's loss: mean masked-LM loss + mean NSP loss
// Mixture of experts (issue 16; MoeMlp.h): in the layers ModelSpec::moeLayer names (from
// moe.dense_layers on, the last of every moe.layer_interval), the MLP is the MoE block:
//   router (C, E), E routed experts of expert_ffn columns (the model's MLP kind, no biases),
//   the shared experts as one MLP of shared_experts x shared_ffn columns, top-k routing with
//   the router kind, DeepSeek-V3's score-correction bias (held, used for the choice, not
//   trained: its update rule is not executed), the load-balancing loss in the gradient.
//   Pre-norm layers (decoders, pre-norm encoders) without linear biases only (refused otherwise
//   by name).
// Multi-token prediction (issue 16; core's MtpSpec; DeepSeek-V3 report arXiv:2412.19437 section 2.2,
// Megatron-LM megatron/core/transformer/multi_token_prediction.py @ d98e8a64): after the final norm,
// `mtp.layers` sequential depths d = 0.. on the last pipeline stage, each
//   e    the shared embedding of the inputs rolled left by d + 1 (roll_tensor: the last d + 1
//        positions of each sequence read token 0), RoPE at the unrolled positions (the main
//        model's rotary_pos_emb), the causal mask unchanged
//   x    eh_proj (2C -> C, no bias; ColumnParallelLinear) of [enorm(e) | hnorm(h_d)], h_0 the
//        main model's final-norm output, h_{d+1} = the depth's final norm of its layer output
//   one transformer layer of the main stack's last layer's kind (MoE or dense, MLA or not)
//   the shared head and cross-entropy on the targets rolled left by d + 1 (the last d + 1
//        positions masked), averaged over the mb (T - d - 1) valid tokens of the micro-batch
// The loss in the gradient: main + loss_scale / layers x sum over d of the depth's mean
// (process_mtp_loss, MTPLossAutoScaler); the reported loss is the main one (Megatron logs the
// MTP losses apart, as "mtp_k loss"). Decoders with rotary positions only.
// Not yet executed (refused by name in validate): T5 with pipeline
// or context parallelism (Megatron-LM trains T5 without them: core/Layout.cpp); a sliding
// window under context parallelism; attention sinks (GPT-OSS: no field here,
// validation/ScaledCase.cpp refuses them).
//
// Dimension legend: L layers, C hidden, NH heads, NKV kv heads, hd head size,
// qd = NH*hd, kvd = NKV*hd, F MLP inner size, V vocab, T sequence.
#pragma once

#include "FieldError.h"
#include "Layout.h"
#include "ModelSpec.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::engine {

// The MoE block's settings (core's MoeSpec, the engine's part of it).
struct MoeConfig {
    int experts = 0;          // E routed experts; 0: dense model
    int top_k = 0;            // K
    int expert_ffn = 0;       // inner size of each routed expert; 0: the model's ffn()
    int shared_experts = 0;   // experts every token passes through
    int shared_ffn = 0;       // inner size of each shared expert
    int dense_layers = 0;     // the first layers keep the dense MLP
    int layer_interval = 1;   // then an MoE block in the last of every interval
    MoeRouter router = MoeRouter::SoftmaxNorm;
    double capacity_factor = 0;  // 0: dropless; else Megatron's moe_expert_capacity_factor (MoeMlp.h)
    double aux_loss_coeff = 0;
    bool score_correction_bias = false;
    double routed_scaling = 0;   // 0: none (1)
    int expert_groups = 0;       // group-limited routing (OpsMoe.h): G groups, a token's top k in its
    int group_top_k = 0;         // best g of them; 0: none
    bool enabled() const { return experts > 0; }
    bool operator==(const MoeConfig&) const = default;
};

// Multi-head latent attention (DeepSeek-V2/V3; core's MlaSpec), the engine's part of it. With it a
// layer's attention is (transformers models/deepseek_v3/modular_deepseek_v3.py @ 000c33f,
// DeepseekV3Attention; Megatron-LM megatron/core/transformer/multi_latent_attention.py @ d98e8a64,
// FusedMLASelfAttention when q_lora_rank > 0, MLASelfAttention when it is 0):
//   down   x (C) -> [q latent (Q) | kv latent (R) | k_pe (P)] in one product (mladw; without q
//          compression only [kv latent | k_pe]: Megatron's linear_qkv_down_proj / linear_kv_down_proj)
//   norms  the model's norm over the q latent (mlaqnw) and over the kv latent (mlakvnw)
//   up     q = q latent -> NH (Nd + P) (mlaqw; without compression x -> NH (Nd + P)),
//          kv = kv latent -> NH (Nd + Vd) ([k_nope | v] per head, mlakvw)
//   RoPE   on the last P rows of each query head and on k_pe, which every head's key shares:
//          key head h = [k_nope_h | k_pe], query head h = [q_nope_h | q_pe_h] (rotate-half pairing;
//          HF's rope_interleave and Megatron's mla_rotary_interleaved pair the rows differently: a
//          fixed permutation of the weights' columns, the same model)
//   scores over Nd + P per head, scaled by mscale^2 / sqrt(Nd + P) (Megatron's softmax_scale with
//          YaRN's mscale_all_dim; 1 without YaRN), values of Vd per head, the output (NH Vd, C).
// Pre-norm decoders with rotary positions and no linear biases only (refused otherwise by name).
struct MlaConfig {
    int q_lora_rank = 0;    // Q; 0: the plain q projection
    int kv_lora_rank = 0;   // R; 0: not MLA
    int qk_nope_head_dim = 0;  // Nd
    int qk_rope_head_dim = 0;  // P
    int v_head_dim = 0;        // Vd
    double softmax_mscale = 1; // the scores' extra factor (YaRN: mscale^2)
    bool enabled() const { return kv_lora_rank > 0; }
    int qkHeadDim() const { return qk_nope_head_dim + qk_rope_head_dim; }
    // The down projection's output rows: [Q | R | P] (Q = 0: [R | P]).
    int downRows() const { return q_lora_rank + kv_lora_rank + qk_rope_head_dim; }
    bool operator==(const MlaConfig&) const = default;
};

// Multi-token prediction (core's MtpSpec; see the header comment).
struct MtpConfig {
    int layers = 0;          // D depths; 0: none
    double loss_scale = 0.1; // lambda: Megatron-LM's mtp_loss_scaling_factor
    bool enabled() const { return layers > 0; }
    bool operator==(const MtpConfig&) const = default;
};

struct ModelConfig {
    int layers = 0;   // L
    int hidden = 0;   // C
    int heads = 0;    // NH
    int vocab = 0;    // V
    int seq = 0;      // T, also the learned position table's size
    int kv_heads = 0;     // NKV; 0: heads (MHA)
    int head_dim = 0;     // hd; 0: hidden / heads
    int ffn_hidden = 0;   // F; 0: 4 * hidden
    MlpKind mlp = MlpKind::Gelu;
    NormKind norm = NormKind::LayerNorm;
    double norm_eps = 1e-5;
    PositionKind positions = PositionKind::Learned;
    double rope_base = 10000;
    bool bias = true;
    // Biases on the q, k and v projections only, none on the output projection and the MLP
    // (Qwen2Attention: q_proj, k_proj, v_proj bias=True, o_proj bias=False; transformers
    // src/transformers/models/qwen2/modeling_qwen2.py @ 00d4b3d); with `bias` off.
    bool qkv_bias = false;
    // QK-norm (Qwen3Attention: q_norm and k_norm, the model's norm over head_dim on every query
    // and key head, after the q and k projections and before RoPE; transformers
    // src/transformers/models/qwen3/modeling_qwen3.py @ 000c33f). Decoders (pre-norm) only.
    bool qk_norm = false;
    // Sliding-window attention (Mistral: every layer; GPT-OSS: the layers listed): each query
    // attends to itself and the size - 1 keys before it (transformers' sliding-window causal
    // mask: sliding_window_overlay, kv_idx > q_idx - sliding_window, src/transformers/masking_utils.py
    // @ 2ccc6ca). Causal decoders only.
    SlidingWindow sliding_window{};
    bool tied_embeddings = true;
    bool causal = true;   // false: bidirectional self-attention (encoders)
    // Encoder-decoder (T5): `layers` encoder layers, then decoder_layers with cross-attention;
    // positions Relative with relative_buckets per head and stack, offsets beyond
    // relative_max_distance sharing the last bucket (T5's relative_attention_max_distance, 128).
    bool encoder_decoder = false;
    int decoder_layers = 0;
    int relative_buckets = 0;
    int relative_max_distance = 128;
    // BERT-style encoder blocks (see the header comment); all off for decoders.
    bool post_norm = false;       // norm after each residual add; the model then has no final norm
    int token_types = 0;          // segment table rows (0: none)
    bool embedding_norm = false;  // a norm after the embedding sum
    bool masked_lm = false;       // the masked-LM objective (its head), not next-token prediction
    bool pooler = false;          // pooler + next-sentence head (needs masked_lm)
    MoeConfig moe{};              // mixture of experts (see the header comment)
    MlaConfig mla{};              // multi-head latent attention in place of the qkv projection
    MtpConfig mtp{};              // multi-token prediction (see the header comment)

    int kvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
    // The attention output's width (the output projection's input): heads x v_head_dim with MLA.
    int valueDim() const { return mla.enabled() ? heads * mla.v_head_dim : qDim(); }
    int headDim() const { return head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0); }
    int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
    int qDim() const { return heads * headDim(); }
    int kvDim() const { return kvHeads() * headDim(); }
    bool gated() const { return mlp == MlpKind::SwiGlu || mlp == MlpKind::GeGlu; }
    bool learnedPositions() const { return positions == PositionKind::Learned; }
    bool layerNorm() const { return norm == NormKind::LayerNorm; }
    int totalLayers() const { return layers + (encoder_decoder ? decoder_layers : 0); }
    bool finalNorm() const { return !post_norm; }
    bool qkvBias() const { return bias || qkv_bias; }
    // The window of layer `index` (from 0): the size on a sliding layer, else 0 (full attention).
    // Index L + d is MTP depth d's layer, of the last layer's kind (so for moeLayer).
    int windowOf(int index) const;
    // Whether layer `index` (from 0) has the MoE block: core's ModelSpec::moeLayer rule.
    bool moeLayer(int index) const;
    // The model layer index of MTP depth d's transformer layer: L + d.
    int mtpLayer(int depth) const { return layers + depth; }
    int expertFfn() const { return moe.expert_ffn > 0 ? moe.expert_ffn : ffn(); }
    int sharedFfn() const { return moe.shared_experts * moe.shared_ffn; }  // the shared experts' columns together
    bool operator==(const ModelConfig&) const = default;
};

// "GPT-2 style (LayerNorm, GeLU, learned positions, MHA, tied)" or
// "Llama style (RMSNorm, SwiGLU, RoPE base 500000, GQA 8/2, untied, no bias)": what is trained.
std::string describe(const ModelConfig& c);

// The MoE block of a catalog model scaled down to a model of `hidden` and `layers` (the engine's
// scaled case): the router kind, top-k, aux-loss coefficient, capacity factor, score-correction
// bias and scaling as they are; min(E, max(8, 2 ep)) experts rounded up to a multiple of ep;
// top_k at most half of them (a choice among the rest); the expert and shared-expert sizes
// in the spec's ratio to its hidden size (even, at least 2); at most one dense first layer and
// an interval that leaves an MoE layer among `layers`. Group-limited routing is dropped (not
// executed). A dense spec gives a disabled MoeConfig.
MoeConfig scaledMoe(const ModelSpec& spec, int hidden, int layers, int ep = 1);

// Every parameter (weights, biases, norms) of the config: equals core's
// parameterCount() of the ModelSpec it came from at this size.
std::int64_t parameterCount(const ModelConfig& c);
// Problems named by field ("heads: 5 does not divide hidden 64"); empty when valid.
FieldErrors validate(const ModelConfig& c, const std::string& prefix = "");

enum class PrecisionMode { FP32, BF16Mixed, BF16RNE, BF16SR };
const char* toString(PrecisionMode p);  // "fp32", "bf16-mixed", "bf16-rne", "bf16-sr"
std::optional<PrecisionMode> precisionFromString(const std::string& text);
// "none", "selective", "full" (core's toString(Recompute) spells them the same way).
std::optional<Recompute> recomputeFromString(const std::string& text);

// What a tensor is, for initialisation and sharding.
enum class TensorRole {
    TokenEmbedding,  // wte (C, V)
    PositionEmbedding,  // wpe (C, T)
    NormWeight, NormBias,
    QkvWeight, QkvBias,          // (C, qd + 2 kvd): columns [q | k | v]
    QkNormWeight, QkNormBias,    // QK-norm (2 hd): [q's | k's], the bias LayerNorm only
    AttnProjWeight, AttnProjBias,  // (qd, C), (C)
    MlpInWeight, MlpInBias,      // (C, F) or (C, 2F) [gate | up]
    MlpOutWeight, MlpOutBias,    // (F, C), (C)
    LmHead,                      // untied (C, V)
    // Encoder-decoder (T5):
    RelativeBias,                // (NH, buckets), head-major: the encoder's (layer -1) and the decoder's (layer -2)
    EncoderNormWeight, EncoderNormBias,  // the encoder's final norm
    CrossNormWeight, CrossNormBias,      // a decoder layer's norm before cross-attention
    CrossQWeight,                // (C, qd): the decoder's queries
    CrossKvWeight,               // (C, 2 kvd): [k | v] of the encoder output
    CrossProjWeight,             // (qd, C)
    // BERT-style encoders:
    TokenTypeEmbedding,          // wtt (C, types)
    PoolerWeight, PoolerBias,    // (C, C), (C)
    MlmDenseWeight, MlmDenseBias,  // the masked-LM transform (C, C), (C)
    MlmOutputBias,               // (V), added to the decoder's logits
    NspWeight, NspBias,          // next-sentence head (C, 2), (2)
    // Mixture of experts (an MoE layer's MLP):
    RouterWeight,                // (C, E)
    ExpertBias,                  // (E): DeepSeek-V3's score-correction bias (not trained)
    ExpertInWeight,              // E blocks (C, Fe) or (C, 2 Fe) [gate | up]
    ExpertOutWeight,             // E blocks (Fe, C)
    SharedInWeight,              // (C, Fs) or (C, 2 Fs): every shared expert's columns, [gate | up]
    SharedOutWeight,             // (Fs, C)
    // Multi-head latent attention (MlaConfig), in place of qkvw:
    MlaDownWeight,               // (C, Q + R + P): [q latent | kv latent | k_pe] (Q = 0: (C, R + P))
    MlaNormWeight, MlaNormBias,  // the q latent's norm (Q) when Q > 0, then the kv latent's (R)
    MlaQUpWeight,                // (Q, NH (Nd + P)), or (C, NH (Nd + P)) when Q = 0: per head [nope | rope]
    MlaKvUpWeight,               // (R, NH (Nd + Vd)): per head [k_nope | v]
    // Multi-token prediction (MtpConfig), each depth's, in its layer (L + d) after the layer's own:
    MtpNormWeight, MtpNormBias,  // enorm, hnorm, the final norm (C each), in that order
    MtpProjWeight,               // eh_proj (2C, C): input rows [enorm(e) | hnorm(h)]
};
// Whether a tensor is a routed expert's (reduced over the expert-data-parallel group).
inline bool expertTensor(TensorRole r) { return r == TensorRole::ExpertInWeight || r == TensorRole::ExpertOutWeight; }

struct ParameterTensor {
    std::string name;       // "h3.fcw"
    std::int64_t offset;    // in elements, into the flat parameter buffer
    std::int64_t count;
    bool decay;             // matrices get weight decay; biases and norms do not
    TensorRole role = TensorRole::NormWeight;
    int layer = -1;         // -1: outside the layers
};

// The full model's parameter table, in the flat buffer's order: wte, wpe (learned
// positions), [wtt] [embnw embnb] (token types, embedding norm), per layer ln1w [ln1b]
// qkvw [qkvb] [qknw [qknb]] (MLA: mladw [mlaqnw [mlaqnb]] mlakvnw [mlakvnb] mlaqw mlakvw) attprojw [attprojb] ln2w [ln2b] fcw [fcb] fcprojw [fcprojb] (bracketed:
// LayerNorm biases, linear biases; an MoE layer has router [expbias] expin expout [shin shout]
// in place of fcw .. fcprojb), then lnfw [lnfb] (pre-norm only), [poolw poolb]
// [mlmw mlmb mlmnw mlmnb mlmbias] [nspw nspb] (pooler, masked-LM head, next-sentence
// head), then the MTP depths (mtp0.: the layer's tensors, then mtpenw [mtpenb] mtphnw [mtphnb]
// mtpehw mtplnfw [mtplnfb]; layer L + d), then lm_head when untied. Shards (ModelExecutor) map their tensors onto it.
// Encoder-decoder: wte, enc.relb, the encoder layers h0.. (layer l), enc.lnfw [enc.lnfb],
// dec.relb, the decoder layers d0.. (layer layers + j) with lnxw [lnxb] crossqw crosskvw
// crossprojw between attprojw and ln2w, then lnfw [lnfb] (the decoder's), lm_head when untied.
std::vector<ParameterTensor> parameterTable(const ModelConfig& c);
// GPT-2 initialisation of the whole flat buffer w (P values) from `seed`, in table
// order: matrices N(0, init_std), the residual projections N(0, init_std / sqrt(2L)),
// norm weights 1, biases 0. Every shard of a cluster draws the same values from it.
template <class T>
void initializeParameters(const std::vector<ParameterTensor>& tensors, std::uint64_t seed, double init_std,
                          int layers, T* w);

} // namespace shardscope::engine
