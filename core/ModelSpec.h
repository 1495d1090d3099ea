// ModelSpec: the architecture of a transformer, enough to derive its exact
// parameter count and matmul FLOPs. Parameter counts follow the reference
// implementations (HF transformers / Megatron): every weight, bias and norm.
#pragma once

#include "FieldError.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope {

enum class ModelFamily { DecoderOnly, EncoderOnly, EncoderDecoder };
// Gelu/Relu: two matrices (h->f, f->h). SwiGlu/GeGlu: gated, three matrices.
enum class MlpKind { Gelu, Relu, SwiGlu, GeGlu };
enum class PositionKind { Learned, Rotary, Relative, None };
enum class NormKind { LayerNorm, RmsNorm };
// How RoPE's frequencies are stretched past the trained length (Hugging Face's rope_type).
enum class RopeScalingKind { None, Linear, Dynamic, Yarn, Llama3 };

// RoPE scaling as Hugging Face configs give it (transformers src/transformers/modeling_rope_utils.py @ 0044e3b): it changes
// no count and no FLOP, but a launch must pass it. Zero: not given (the kind's default applies).
struct RopeScaling {
    RopeScalingKind type = RopeScalingKind::None;
    double factor = 0;
    int original_max_position_embeddings = 0;
    double low_freq_factor = 0, high_freq_factor = 0;  // llama3
    double beta_fast = 0, beta_slow = 0;               // yarn
    double attention_factor = 0;                       // yarn
    // yarn as DeepSeek-V2/V3 give it: the attention scale's mscale and mscale_all_dim ([RU]'s
    // get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)). 0: not given.
    double mscale = 0, mscale_all_dim = 0;
    bool truncate = true;                              // yarn: round the correction range (GPT-OSS: false)
    bool enabled() const { return type != RopeScalingKind::None; }
    bool operator==(const RopeScaling&) const = default;
};

// Sliding-window attention: each query sees at most `size` keys (itself and the size - 1 before
// it) on the layers listed, every layer when the list is empty (Mistral 7B v0.1); GPT-OSS
// alternates sliding and full layers. Layer indices count from 0 in the (decoder-only) stack.
struct SlidingWindow {
    int size = 0;             // 0: full attention everywhere
    std::vector<int> layers;  // strictly increasing; empty: every layer
    bool enabled() const { return size > 0; }
    bool operator==(const SlidingWindow&) const = default;
};

// How a token's expert weights come from the router's logits: softmax or sigmoid scores of the
// top k, as they are or renormalised to sum to 1 over the k (Mixtral, Qwen3-MoE with
// norm_topk_prob, GPT-OSS's softmax over the top-k logits; DeepSeek-V3: sigmoid, normalised).
enum class MoeRouter { Softmax, SoftmaxNorm, Sigmoid, SigmoidNorm };

// Mixture of experts (the project's issue 16 JSON form, "moe": {...}). Which layers have the
// MoE block: the layers from `dense_layers` on, every `layer_interval`-th of them (the last of
// each interval: Qwen's decoder_sparse_step); the others have the dense MLP of ffn_hidden.
struct MoeSpec {
    int experts = 0;            // routed experts; 0: dense model
    int top_k = 0;              // routed experts active per token
    int shared_experts = 0;     // experts every token passes through (DeepSeek, Qwen2-MoE)
    int shared_ffn_hidden = 0;  // inner size of each shared expert
    int ffn_hidden = 0;         // inner size of each routed expert; 0: the model's ffn_hidden
    int dense_layers = 0;       // first layers with a dense MLP (DeepSeek-V3: 3)
    int layer_interval = 1;     // an MoE block every this many layers after them
    MoeRouter router = MoeRouter::SoftmaxNorm;
    double capacity_factor = 0; // tokens an expert takes, x its even share; 0: dropless
    double aux_loss_coeff = 0;  // load-balancing loss weight (no count)
    // DeepSeek-V3's auxiliary-loss-free balancing (topk_method "noaux_tc"): one bias per routed
    // expert added to the scores for the choice only, updated by a rule, not by gradients
    // (DeepSeek-V3 report, section 2.1.2). Counted with the parameters: the checkpoint stores it.
    bool score_correction_bias = false;
    // Group-limited routing (DeepSeek's n_group / topk_group): the experts in `expert_groups`
    // equal groups, a token's top k chosen within its best `group_top_k` groups. 0: no groups.
    int expert_groups = 0;
    int group_top_k = 0;
    double routed_scaling = 0;  // factor on the routed experts' weights (DeepSeek-V3 2.5); 0: none (1)
    bool enabled() const { return experts > 0; }
    bool operator==(const MoeSpec&) const = default;
};

// Multi-head latent attention (DeepSeek-V2/V3; the project's issue 16 JSON form "mla": {...}):
// queries through a rank-q_lora_rank bottleneck with its own norm (or one h x heads x qk_head_dim
// projection when q_lora_rank is 0: JSON null, DeepSeek-V2-Lite), keys and values from one
// kv_lora_rank latent (with its norm) that kv_b expands per head, and a qk_rope_head_dim RoPE key
// shared by every head, computed from the input. Per head: queries and keys of qk_nope_head_dim +
// qk_rope_head_dim (= head_dim), values of v_head_dim. Shapes: transformers
// models/deepseek_v3/modular_deepseek_v3.py @ 000c33f (DeepseekV3Attention).
struct MlaSpec {
    int q_lora_rank = 0;       // 0: no query compression
    int kv_lora_rank = 0;      // 0: not MLA
    int qk_nope_head_dim = 0;
    int qk_rope_head_dim = 0;
    int v_head_dim = 0;
    bool enabled() const { return kv_lora_rank > 0; }
    int qkHeadDim() const { return qk_nope_head_dim + qk_rope_head_dim; }
    bool operator==(const MlaSpec&) const = default;
};

// Multi-token prediction as DeepSeek-V3 trains with it (DeepSeek-V3 report arXiv:2412.19437
// section 2.2; the project's JSON form "mtp": {"layers", "loss_scale"}). Each of the `layers`
// sequential modules (depth k predicts token i + k + 1) is, per Megatron-LM's
// megatron/core/transformer/multi_token_prediction.py @ d98e8a64 (MultiTokenPredictionLayer) and
// torchtitan's torchtitan/models/deepseek_v3/mtp.py @ b5bcd76c (MTPTransformerBlock): enorm over
// the shifted token embedding and hnorm over the previous depth's hidden state (h each), eh_proj
// (2h -> h, no bias) over their concatenation, one transformer layer of the main stack's last
// layer's kind (MoE or dense), and a final norm (h) before the output head; the embedding and
// the output head are the main model's, shared. Training only: the published parameter counts
// (DeepSeek-V3: 671B) leave the modules out, so ParameterBreakdown::total does too (mtp holds them).
struct MtpSpec {
    int layers = 0;         // D, the prediction depths; 0: no multi-token prediction
    // lambda, the weight of the MTP losses' mean in the training loss (Megatron-LM
    // --mtp-loss-scaling-factor, default 0.1: transformer_config.py @ d98e8a64; DeepSeek-V3:
    // 0.3 for the first 10T tokens, then 0.1). No count or FLOP depends on it.
    double loss_scale = 0.1;
    bool enabled() const { return layers > 0; }
    bool operator==(const MtpSpec&) const = default;
};

struct ModelSpec {
    std::string name;           // catalog id, lowercase ("llama-2-7b")
    std::string display_name;   // "Llama 2 7B"
    std::string source;         // where the architecture is published

    ModelFamily family = ModelFamily::DecoderOnly;
    int layers = 0;             // decoder-only/encoder-only: all layers; encoder-decoder: encoder layers
    int decoder_layers = 0;     // encoder-decoder only
    int hidden = 0;             // d_model
    int heads = 0;              // query heads
    int kv_heads = 0;           // key/value heads (== heads: MHA, 1: MQA, else GQA)
    int head_dim = 0;           // per head; heads*head_dim may differ from hidden (T5-11B)
    int ffn_hidden = 0;         // MLP inner size (per expert for MoE)
    MlpKind mlp = MlpKind::Gelu;
    int vocab = 0;
    int max_seq = 0;            // longest sequence the model is defined for
    int position_table = 0;     // learned positions: table rows (0 = max_seq; RoBERTa 514)
    int token_types = 0;        // BERT segment embeddings (0: none)
    int relative_buckets = 0;   // T5 relative attention bias buckets (per stack, per head)
    PositionKind positions = PositionKind::Learned;
    // RoPE's base (theta) for rotary positions: 10000 in RoFormer and the frameworks' defaults,
    // 500000 for Llama 3, 1e6 for Mixtral. It changes no count, but a launch must pass it.
    double rope_base = 10000;
    RopeScaling rope_scaling;
    NormKind norm = NormKind::LayerNorm;
    // The norms' epsilon (HF rms_norm_eps / layer_norm_eps): no count, but the engine and a launch use it.
    double norm_eps = 1e-5;
    bool bias = true;           // biases on linear layers
    // Biases on the q, k and v projections only (Qwen2; JSON "bias": "qkv"): implied by `bias`.
    bool qkv_bias = false;
    // QK-norm (Qwen3): a norm of the model's kind over head_dim on every query and key head, one
    // weight vector for q and one for k per attention block.
    bool qk_norm = false;
    // Attention sinks (GPT-OSS): one learned logit per query head and attention block, a column
    // of the softmax that takes no value.
    bool attention_sinks = false;
    SlidingWindow sliding_window;
    bool tied_embeddings = true;  // LM head shares the token embedding
    bool embedding_norm = false;  // a norm right after the embeddings (BERT)
    bool final_norm = true;       // a norm after the last layer of each stack (pre-norm models)
    bool pooler = false;          // BERT pooler (dense h->h)
    MoeSpec moe;
    // Multi-head latent attention in place of the q, k, v projections (heads x head_dim stays the
    // query and key width; kv_heads == heads: the latent is expanded per head).
    MlaSpec mla;
    MtpSpec mtp;

    int qDim() const { return heads * head_dim; }
    int kvDim() const { return kv_heads * head_dim; }
    // The width of the attention's output (P V, the output projection's input): heads x head_dim,
    // heads x v_head_dim with MLA.
    int valueDim() const { return heads * (mla.enabled() ? mla.v_head_dim : head_dim); }
    int totalLayers() const { return layers + (family == ModelFamily::EncoderDecoder ? decoder_layers : 0); }
    // Whether layer `index` (from 0) attends through the sliding window, and how many of the
    // `count` layers from `first` do.
    bool slidingLayer(int index) const;
    int slidingLayers(int first, int count) const;
    // Whether layer `index` of the main stack (from 0) has the MoE block, and how many of the
    // `count` layers from `first` do; every decoder layer of an encoder-decoder has it with MoE.
    bool moeLayer(int index) const;
    int moeLayers(int first, int count) const;
    int expertFfn() const { return moe.ffn_hidden > 0 ? moe.ffn_hidden : ffn_hidden; }
    bool operator==(const ModelSpec&) const = default;
};

// Parameter counts by component, exact.
struct ParameterBreakdown {
    std::int64_t embeddings = 0;       // token (+ position, token-type, embedding norm, relative bias)
    std::int64_t encoder_layer = 0;    // one layer of the main stack (encoder for enc-dec)
    std::int64_t decoder_layer = 0;    // one decoder layer of an encoder-decoder
    std::int64_t layers_total = 0;     // all layers
    std::int64_t final_norms = 0;
    std::int64_t lm_head = 0;          // untied output projection only
    std::int64_t pooler = 0;
    std::int64_t total = 0;
    std::int64_t active_per_token = 0; // MoE: parameters used by one token (experts top_k of E)
    // Multi-token prediction (MtpSpec): all its modules, outside `total` and `active_per_token`;
    // one module's share of them, and what one token uses of it (its layer's top k experts).
    std::int64_t mtp = 0;
    std::int64_t mtp_layer = 0;
    std::int64_t mtp_active = 0;
};

// Both counts below throw InputError naming the model when a count overflows int64, which
// validate() refuses beforehand: a model that passed validation never throws.
ParameterBreakdown parameterBreakdown(const ModelSpec& model);
std::int64_t parameterCount(const ModelSpec& model);

// Keys one query attends to at sequence length `seq` in Megatron's full-sequence convention:
// `seq`, or the window on a sliding layer when it is shorter.
std::int64_t attentionKeys(const ModelSpec& model, int seq, bool sliding);

// Forward matmul FLOPs (2 per multiply-add) per token at sequence length `seq`:
// projections, attention scores and values over the full sequence (Megatron's
// convention, Narayanan et al. 2021 eq. 3; a sliding layer over its window), MLP (active experts only), router,
// and the logit layer. Lookups, norms and softmax are not matmuls and are left out.
// Encoder-decoder: encoder and decoder both see `seq` tokens; per decoder token.
std::int64_t forwardFlopsPerToken(const ModelSpec& model, int seq);
// The forward FLOPs per token the multi-token prediction modules add, as Megatron-LM's
// num_floating_point_operations counts them (megatron/training/training.py @ d98e8a64): per
// module one more layer of the last layer's kind, the eh_proj GEMM (2 x 2h x h), the enorm,
// hnorm and final norm as 3h multiply-adds, and one more pass of the logit layer. 0 without MTP.
// Not in forwardFlopsPerToken (the model's own count, as `flops_per_token` shows it): the
// planner's model-FLOP count adds it.
std::int64_t mtpForwardFlopsPerToken(const ModelSpec& model, int seq);
// False when the parameter count, or the FLOP count per token at `seq`, overflows int64.
bool countsFit(const ModelSpec& model, int seq);

FieldErrors validate(const ModelSpec& model, const std::string& path = "model");

const char* toString(ModelFamily v);
const char* toString(MlpKind v);
const char* toString(PositionKind v);
const char* toString(NormKind v);
const char* toString(RopeScalingKind v);
const char* toString(MoeRouter v);

} // namespace shardscope
