// What each key of a Hugging Face config.json means, per architecture, read in the
// transformers source (github:huggingface/transformers):
//  [LC]  src/transformers/models/llama/configuration_llama.py      @ 008e574 (LlamaConfig)
//  [MC]  src/transformers/models/mistral/configuration_mistral.py  @ 008e574 (MistralConfig)
//  [MM]  src/transformers/models/mistral/modeling_mistral.py       @ 005a187 (every layer gets config.sliding_window)
//  [Q2C] src/transformers/models/qwen2/configuration_qwen2.py      @ 008e574 (Qwen2Config, layer_types)
//  [Q2M] src/transformers/models/qwen2/modeling_qwen2.py           @ 00d4b3d (q/k/v bias=True, o_proj bias=False)
//  [Q3C] src/transformers/models/qwen3/configuration_qwen3.py      @ 008e574 (Qwen3Config)
//  [Q3M] src/transformers/models/qwen3/modeling_qwen3.py           @ 000c33f (q_norm, k_norm over head_dim)
//  [GC]  src/transformers/models/gpt2/configuration_gpt2.py        @ 01ae98a (GPT2Config; n_inner None -> 4 n_embd)
//  [BC]  src/transformers/models/bert/configuration_bert.py        @ 008f5c8 (BertConfig)
//  [TC]  src/transformers/models/t5/configuration_t5.py            @ 038869d (T5Config, feed_forward_proj)
//  [RU]  src/transformers/modeling_rope_utils.py                   @ 0044e3b (rope_scaling keys per rope_type)
//  [XC]  src/transformers/models/mixtral/configuration_mixtral.py  @ 008e574 (MixtralConfig, default_theta 1e6)
//  [QMC] src/transformers/models/qwen3_moe/configuration_qwen3_moe.py @ 008e574 (Qwen3MoeConfig)
//  [OC]  src/transformers/models/gpt_oss/configuration_gpt_oss.py  @ 02b8f42 (GptOssConfig)
//  [OM]  src/transformers/models/gpt_oss/modeling_gpt_oss.py       @ 00d4b3d (biased experts and router, sinks)
//  [DC]  src/transformers/models/deepseek_v3/configuration_deepseek_v3.py @ 001f85b (DeepseekV3Config)
//  [DM]  src/transformers/models/deepseek_v3/modular_deepseek_v3.py @ 000c33f (MLA shapes, DeepseekV3MoE,
//        DeepseekV3TopkRouter's e_score_correction_bias, MoE from first_k_dense_replace on; the MTP
//        layer 61 ignored on load); modeling_deepseek_v3.py is generated from it
// Configs written by transformers 4.x carry "rope_theta" and "rope_scaling" (4.x LlamaConfig's
// rope_theta=10000.0, rope_scaling=None); 5.x merges them into "rope_parameters" ([LC]).
// tie_word_embeddings: PretrainedConfig's default is True; the Llama, Mistral and Qwen config
// classes default it to False ([LC], [MC], [Q2C], [Q3C]).
#include "HfConfigImport.h"
#include "JsonReader.h"
#include "SpecJson.h"

#include <QJsonArray>
#include <QJsonValue>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <set>

namespace shardscope {

namespace {

constexpr int kMaxSize = 1 << 24;

// Keys of PretrainedConfig and generation settings that change no weight: token ids,
// dropout, initialisation, inference and bookkeeping.
const char* const kShapeFreeKeys[] = {
    "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "use_cache",
    "initializer_range", "initializer_factor", "return_dict", "output_hidden_states", "output_attentions",
    "torchscript", "use_bfloat16", "tf_legacy_loss", "chunk_size_feed_forward", "tie_encoder_decoder",
    "finetuning_task", "id2label", "label2id", "num_labels", "task_specific_params", "problem_type",
    "tokenizer_class", "prefix", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
    "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "gradient_checkpointing", "attention_dropout", "classifier_dropout", "output_past"};

// The keys of one config: typed reads with the config class's default, and at the end every key
// neither read nor known to be shape-free is refused by name.
class Config {
public:
    Config(const QJsonObject& json, std::string architecture, FieldErrors& errors)
        : json_(json), reader_(json, "", errors), errors_(errors), architecture_(std::move(architecture))
    {
        for (const char* k : kShapeFreeKeys)
            read_.insert(k);
    }

    bool has(const char* key) const { return json_.contains(QLatin1String(key)); }
    bool isNull(const char* key) const { return json_.value(QLatin1String(key)).isNull(); }
    void error(const char* key, const std::string& message) { reader_.error(key, message); }
    void shapeFree(std::initializer_list<const char*> keys) { read_.insert(keys.begin(), keys.end()); }

    int integer(const char* key, int classDefault, int lo = 1, int hi = kMaxSize)
    {
        read_.insert(key);
        return reader_.integer(key, classDefault, false, lo, hi);
    }
    // A key whose None (JSON null) has a meaning of its own: nullopt for null, the class default when absent.
    std::optional<int> optionalInteger(const char* key, std::optional<int> classDefault, int lo = 1, int hi = kMaxSize)
    {
        read_.insert(key);
        if (!has(key))
            return classDefault;
        if (isNull(key))
            return std::nullopt;
        return reader_.integer(key, 0, true, lo, hi);
    }
    double number(const char* key, double classDefault, double lo, double hi)
    {
        read_.insert(key);
        return reader_.number(key, classDefault, false, lo, hi);
    }
    bool boolean(const char* key, bool classDefault)
    {
        read_.insert(key);
        return reader_.boolean(key, classDefault);
    }
    std::string string(const char* key, const std::string& classDefault)
    {
        read_.insert(key);
        return has(key) ? reader_.string(key, false) : classDefault;
    }
    // A key whose only value we can express: anything else is refused with `why`.
    void expectBoolean(const char* key, bool expected, const std::string& why)
    {
        if (has(key) && boolean(key, expected) != expected)
            error(key, why);
        read_.insert(key);
    }
    // The model format's reader, its problems under the config's key.
    void readRopeScaling(const char* key, const QJsonObject& rope, RopeScaling& out)
    {
        out = ropeScalingFromJson(rope, key, errors_);
    }
    QJsonValue value(const char* key)
    {
        read_.insert(key);
        return json_.value(QLatin1String(key));
    }

    void refuseUnread()
    {
        for (auto it = json_.begin(); it != json_.end(); ++it) {
            const std::string key = it.key().toStdString();
            if (!read_.count(key))
                reader_.error(printable(key).c_str(),
                              "is not a key " + architecture_ +
                                  " is known to read without changing its weights: not imported (remove it if it "
                                  "changes no shape)");
        }
    }

private:
    QJsonObject json_;
    JsonReader reader_;
    FieldErrors& errors_;
    std::string architecture_;
    std::set<std::string, std::less<>> read_;
};

// "silu" gates Llama's MLP (act(gate) * up): SwiGLU; a GELU there makes it GeGLU.
std::optional<MlpKind> gatedMlp(const std::string& act)
{
    if (act == "silu" || act == "swish")
        return MlpKind::SwiGlu;
    if (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
        return MlpKind::GeGlu;
    return std::nullopt;
}

std::optional<MlpKind> plainMlp(const std::string& act)
{
    if (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
        return MlpKind::Gelu;
    if (act == "relu")
        return MlpKind::Relu;
    return std::nullopt;
}

// One rope_scaling (4.x) or rope_parameters (5.x) object, keys as [RU] reads them ("type" is the
// old spelling of "rope_type"); rope_parameters also carries "rope_theta". Read as the model
// format's rope_scaling, which keeps Hugging Face's keys.
void readRope(Config& c, const char* key, ModelSpec& m)
{
    const QJsonValue v = c.value(key);
    if (v.isNull() || v.isUndefined())
        return;
    if (!v.isObject()) {
        c.error(key, "expected an object or null");
        return;
    }
    QJsonObject rope = v.toObject();
    if (rope.contains(QLatin1String("rope_theta"))) {
        const QJsonValue theta = rope.take(QLatin1String("rope_theta"));
        if (!theta.isDouble() || !(theta.toDouble() >= 1 && theta.toDouble() <= 1e12))
            c.error(key, "rope_theta: expected a number between 1 and 1e12");
        else
            m.rope_base = theta.toDouble();
    }
    const QJsonValue type = rope.contains(QLatin1String("rope_type")) ? rope.take(QLatin1String("rope_type"))
                                                                       : rope.take(QLatin1String("type"));
    const std::string name = type.isString() ? type.toString().toStdString() : "default";
    if (name == "default") {
        if (!rope.isEmpty())
            c.error(key, quotedValue(rope.begin().key().toStdString()) + " applies to scaled RoPE, not the default");
        return;
    }
    static const char* const kRead[] = {"linear", "dynamic", "yarn", "llama3"};
    if (std::find(std::begin(kRead), std::end(kRead), name) == std::end(kRead)) {
        c.error(key, "RoPE scaling " + quotedValue(name) + " is not read (default, linear, dynamic, yarn, llama3)");
        return;
    }
    rope.insert(QLatin1String("type"), QString::fromStdString(name));
    c.readRopeScaling(key, rope, m.rope_scaling);
}

// The sliding layers from HF's layer_types ("sliding_attention" / "full_attention"), or from
// `firstSliding` on when there is none; an empty list when every layer slides.
std::vector<int> slidingLayers(Config& c, int layers, int firstSliding)
{
    std::vector<int> out;
    const QJsonValue types = c.value("layer_types");
    if (types.isUndefined() || types.isNull()) {
        for (int i = std::max(0, firstSliding); i < layers; ++i)
            out.push_back(i);
    } else if (!types.isArray() || types.toArray().size() != layers) {
        c.error("layer_types", "expected a list of " + std::to_string(layers) + " layer types");
    } else {
        const QJsonArray list = types.toArray();
        for (int i = 0; i < layers; ++i) {
            const QString t = list.at(i).toString();
            if (t == QLatin1String("sliding_attention"))
                out.push_back(i);
            else if (t != QLatin1String("full_attention"))
                c.error("layer_types", "entry " + std::to_string(i) + " " +
                                           quotedValue(list.at(i).toString().toStdString()) +
                                           " is not read (full_attention, sliding_attention)");
        }
    }
    if (int(out.size()) == layers)
        out.clear();  // every layer
    return out;
}

// What the Llama-style config classes default (their dataclass fields).
struct LlamaStyleDefaults {
    int vocab, hidden, ffn, layers, heads;
    std::optional<int> kv_heads;  // None: = heads
    std::optional<int> head_dim;  // None: hidden / heads
    int max_position_embeddings;
    double rope_theta = 10000;    // 4.x rope_theta; Mixtral 1e6
    double rms_norm_eps = 1e-6;
};

// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM: decoder, rotary,
// RMSNorm, gated MLP, untied by default ([LC], [MC], [Q2C], [Q3C]).
void readLlamaStyle(Config& c, const LlamaStyleDefaults& d, ModelSpec& m)
{
    m.family = ModelFamily::DecoderOnly;
    m.vocab = c.integer("vocab_size", d.vocab);
    m.hidden = c.integer("hidden_size", d.hidden, 1, 1 << 20);
    m.ffn_hidden = c.integer("intermediate_size", d.ffn, 1, 1 << 22);
    m.layers = c.integer("num_hidden_layers", d.layers, 1, 10000);
    m.heads = c.integer("num_attention_heads", d.heads, 1, 1 << 14);
    m.kv_heads = c.optionalInteger("num_key_value_heads", d.kv_heads, 1, 1 << 14).value_or(m.heads);
    const std::optional<int> headDim = c.optionalInteger("head_dim", d.head_dim, 1, 1 << 14);
    m.head_dim = headDim ? *headDim : m.hidden / std::max(1, m.heads);
    m.max_seq = c.integer("max_position_embeddings", d.max_position_embeddings);
    const std::string act = c.string("hidden_act", "silu");
    if (auto k = gatedMlp(act))
        m.mlp = *k;
    else
        c.error("hidden_act", quotedValue(act) + " is not read as a gated MLP (silu, gelu, gelu_new, gelu_pytorch_tanh)");
    m.positions = PositionKind::Rotary;
    m.rope_base = c.number("rope_theta", d.rope_theta, 1, 1e12);
    readRope(c, "rope_scaling", m);
    if (c.has("rope_parameters") && !c.isNull("rope_parameters")) {
        if (m.rope_scaling.enabled())
            c.error("rope_parameters", "given with rope_scaling: one of the two");
        readRope(c, "rope_parameters", m);
    }
    m.norm = NormKind::RmsNorm;
    m.norm_eps = c.number("rms_norm_eps", d.rms_norm_eps, 1e-30, 0.5);
    m.tied_embeddings = c.boolean("tie_word_embeddings", false);
    m.final_norm = true;
    m.bias = false;
}

void readLlama(Config& c, ModelSpec& m)
{
    readLlamaStyle(c, {32000, 4096, 11008, 32, 32, std::nullopt, std::nullopt, 2048}, m);
    // attention_bias: q, k, v and o; mlp_bias: gate, up and down ([LC]).
    const bool attention = c.boolean("attention_bias", false), mlp = c.boolean("mlp_bias", false);
    if (attention != mlp)
        c.error(attention ? "attention_bias" : "mlp_bias",
                std::string("biases on the ") + (attention ? "attention projections" : "MLP") + " but not the " +
                    (attention ? "MLP" : "attention projections") + " cannot be expressed (bias is true, false or \"qkv\")");
    m.bias = attention && mlp;
    c.shapeFree({"pretraining_tp"});  // splits the matmuls for numerics only
}

void readMistral(Config& c, ModelSpec& m)
{
    readLlamaStyle(c, {32000, 4096, 14336, 32, 32, 8, std::nullopt, 4096 * 32}, m);
    // Every layer attends through config.sliding_window ([MM]); null: full attention.
    if (const std::optional<int> w = c.optionalInteger("sliding_window", 4096))
        m.sliding_window = {*w, slidingLayers(c, m.layers, 0)};
}

// Qwen2/Qwen3: the window applies only with use_sliding_window, to layers from max_window_layers
// on unless layer_types lists them ([Q2C], [Q3C] __post_init__).
void readQwenSliding(Config& c, ModelSpec& m)
{
    const bool use = c.boolean("use_sliding_window", false);
    const std::optional<int> w = c.optionalInteger("sliding_window", 4096);
    const int first = c.integer("max_window_layers", 28, 0, 10000);
    if (use && w)
        m.sliding_window = {*w, slidingLayers(c, m.layers, first)};
    else
        c.value("layer_types");  // without a window every layer attends fully, whatever it says
}

void readQwen2(Config& c, ModelSpec& m)
{
    // Qwen2Config has no head_dim field; Qwen2Attention reads one when present ([Q2M]).
    readLlamaStyle(c, {151936, 4096, 22016, 32, 32, 32, std::nullopt, 32768}, m);
    m.qkv_bias = true;  // q_proj, k_proj, v_proj bias=True; o_proj and the MLP none ([Q2M])
    readQwenSliding(c, m);
}

void readQwen3(Config& c, ModelSpec& m)
{
    readLlamaStyle(c, {151936, 4096, 22016, 32, 32, 32, 128, 32768}, m);
    m.qk_norm = true;  // q_norm and k_norm: RMSNorm(head_dim) in every attention ([Q3M])
    if (c.boolean("attention_bias", false))
        c.error("attention_bias", "biases on q, k, v and o but not the MLP cannot be expressed (bias is true, false "
                                  "or \"qkv\")");
    readQwenSliding(c, m);
}

// The router's settings both MoE classes share: top-k of num experts, aux-loss weight; the
// router's logits and jitter are training switches without weights.
// A token's top k drawn from more experts than there are: refused by the config's own keys.
void refuseTopKPastExperts(Config& c, const MoeSpec& e, const char* expertsKey)
{
    if (e.top_k > e.experts)
        c.error("num_experts_per_tok", std::to_string(e.top_k) + " is more than " + expertsKey + " " +
                                           std::to_string(e.experts) + ": a token cannot be routed to more experts "
                                           "than there are");
}

void readRouter(Config& c, ModelSpec& m, const char* expertsKey, int experts, int topK, double auxLoss)
{
    m.moe.experts = c.integer(expertsKey, experts, 1, 4096);
    m.moe.top_k = c.integer("num_experts_per_tok", topK, 1, 4096);
    refuseTopKPastExperts(c, m.moe, expertsKey);
    m.moe.aux_loss_coeff = c.number("router_aux_loss_coef", auxLoss, 0, 1000);
    c.shapeFree({"output_router_logits", "router_jitter_noise"});
}

void readMixtral(Config& c, ModelSpec& m)
{
    readLlamaStyle(c, {32000, 4096, 14336, 32, 32, 8, std::nullopt, 4096 * 32, 1e6, 1e-5}, m);
    // Every layer's MoE block: num_local_experts experts of intermediate_size, softmax over all,
    // the top k renormalised ([XC]: MixtralSparseMoeBlock); sliding_window None by default.
    readRouter(c, m, "num_local_experts", 8, 2, 0.001);
    m.moe.router = MoeRouter::SoftmaxNorm;
    if (const std::optional<int> w = c.optionalInteger("sliding_window", std::nullopt))
        m.sliding_window = {*w, {}};
}

void readQwen3Moe(Config& c, ModelSpec& m)
{
    // Qwen3MoeConfig has no head_dim field; the attention reads one when present ([QMC], as Qwen3).
    readLlamaStyle(c, {151936, 2048, 6144, 24, 32, 4, std::nullopt, 32768}, m);
    m.qk_norm = true;
    if (c.boolean("attention_bias", false))
        c.error("attention_bias", "biases on q, k, v and o but not the MLP cannot be expressed");
    readRouter(c, m, "num_experts", 128, 8, 0.001);
    m.moe.ffn_hidden = c.integer("moe_intermediate_size", 768, 1, 1 << 22);
    m.moe.router = c.boolean("norm_topk_prob", false) ? MoeRouter::SoftmaxNorm : MoeRouter::Softmax;
    // A layer is sparse unless listed in mlp_only_layers, when (index + 1) % decoder_sparse_step
    // == 0 ([QMC]): our dense_layers are such a list's prefix 0..k-1.
    m.moe.layer_interval = c.integer("decoder_sparse_step", 1, 1, 10000);
    const QJsonValue dense = c.value("mlp_only_layers");
    if (dense.isArray()) {
        const QJsonArray list = dense.toArray();
        for (qsizetype i = 0; i < list.size(); ++i)
            if (list.at(i).toInt(-1) != int(i))
                c.error("mlp_only_layers", "dense layers other than the first ones (0, 1, ...) are not read");
        m.moe.dense_layers = int(list.size());
        if (m.moe.dense_layers > 0 && m.moe.layer_interval > 1)
            c.error("mlp_only_layers", "with decoder_sparse_step > 1 is not read");
    } else if (!dense.isUndefined() && !dense.isNull()) {
        c.error("mlp_only_layers", "expected a list of layer indices");
    }
    if (c.boolean("use_sliding_window", false))
        c.error("use_sliding_window", "sliding windows in Qwen3-MoE are not read");
    c.shapeFree({"sliding_window", "max_window_layers"});  // unused without use_sliding_window
}

void readGptOss(Config& c, ModelSpec& m)
{
    readLlamaStyle(c, {201088, 2880, 2880, 36, 64, 8, 64, 131072, 150000, 1e-5}, m);
    // Every linear layer has a bias: q, k, v, o with attention_bias (default True), the experts'
    // gate_up and down, the router ([OM]); the sinks are one parameter per head and layer.
    if (!c.boolean("attention_bias", true))
        c.error("attention_bias", "false with the experts' and router's biases cannot be expressed");
    m.bias = true;
    m.attention_sinks = true;
    // intermediate_size is each expert's; top-k logits softmaxed ([OM] GptOssTopKRouter).
    readRouter(c, m, "num_local_experts", 128, 4, 0.001);
    m.moe.router = MoeRouter::SoftmaxNorm;
    // Sliding and full layers alternate, the first sliding ([OC] __post_init__), unless layer_types says.
    if (const std::optional<int> w = c.optionalInteger("sliding_window", 128)) {
        std::vector<int> layers;
        if (c.has("layer_types") && !c.isNull("layer_types"))
            layers = slidingLayers(c, m.layers, 0);
        else
            for (int i = 0; i < m.layers; i += 2)
                layers.push_back(i);
        m.sliding_window = {*w, layers};
    } else {
        c.value("layer_types");  // no window: every layer attends fully
    }
    if (!c.has("rope_parameters") && !c.has("rope_scaling"))
        m.rope_scaling = {RopeScalingKind::Yarn, 32.0, 4096, 0, 0, 32.0, 1.0, 0, false};  // [OC]'s default
    // The published checkpoints store the experts in MXFP4 (quantization_config); the model
    // trained has the same shape. The SwiGLU's clamp and gain, the old names of the context and
    // top k: no weights.
    const QJsonValue quant = c.value("quantization_config");
    if (quant.isObject() && quant.toObject().value(QLatin1String("quant_method")).toString() != QLatin1String("mxfp4"))
        c.error("quantization_config", "only the published MXFP4 storage of the experts is read");
    c.shapeFree({"swiglu_limit", "swiglu_alpha", "initial_context_length", "experts_per_token"});
}

// A rank of MLA's bottlenecks: 1 to hidden_size (a wider latent compresses nothing).
int mlaRank(Config& c, const char* key, int value, int hidden)
{
    if (value > hidden)
        c.error(key, std::to_string(value) + " is larger than hidden_size " + std::to_string(hidden) +
                         ": a low-rank bottleneck no wider than the model");
    return value;
}

void readDeepseekV3(Config& c, ModelSpec& m)
{
    // [DC]'s defaults are DeepSeek-V3's own shape; num_key_value_heads defaults to the heads.
    readLlamaStyle(c, {129280, 7168, 18432, 61, 128, 128, std::nullopt, 4096, 10000, 1e-6}, m);
    if (c.boolean("attention_bias", false))
        c.error("attention_bias", "biases on q_a, kv_a and o with multi-head latent attention are not in the model format");
    // MLA ([DM] DeepseekV3Attention): q through q_lora_rank (None: one q_proj), keys and values
    // from the kv_lora_rank latent, expanded per head; the RoPE key of qk_rope_head_dim shared.
    MlaSpec& a = m.mla;
    a.q_lora_rank = mlaRank(c, "q_lora_rank", c.optionalInteger("q_lora_rank", 1536, 1, 1 << 20).value_or(0), m.hidden);
    a.kv_lora_rank = mlaRank(c, "kv_lora_rank", c.integer("kv_lora_rank", 512, 1, 1 << 20), m.hidden);
    a.qk_nope_head_dim = c.integer("qk_nope_head_dim", 128, 1, 1 << 14);
    a.qk_rope_head_dim = c.integer("qk_rope_head_dim", 64, 1, 1 << 14);
    a.v_head_dim = c.integer("v_head_dim", 128, 1, 1 << 14);
    // [DC] sets head_dim = qk_rope_head_dim and qk_head_dim = nope + rope, and a config written
    // by transformers 5.x saves both: only those values are the class's own.
    if (c.has("head_dim") && m.head_dim != a.qk_rope_head_dim)
        c.error("head_dim", std::to_string(m.head_dim) + " is not qk_rope_head_dim " + std::to_string(a.qk_rope_head_dim) +
                                " (DeepseekV3Config derives it so)");
    if (c.has("qk_head_dim") && c.integer("qk_head_dim", 0, 1, 1 << 15) != a.qkHeadDim())
        c.error("qk_head_dim", "is not qk_nope_head_dim + qk_rope_head_dim " + std::to_string(a.qkHeadDim()));
    m.head_dim = a.qkHeadDim();
    if (m.kv_heads != m.heads)
        c.error("num_key_value_heads", std::to_string(m.kv_heads) + " differs from num_attention_heads " +
                                           std::to_string(m.heads) + ": kv_b_proj expands the latent for every head");

    // MoE from layer first_k_dense_replace on, every layer ([DM] DeepseekV3DecoderLayer): the
    // routed experts of moe_intermediate_size, one shared MLP of n_shared_experts x that size,
    // the router's weight (experts x hidden) and e_score_correction_bias (one per expert).
    MoeSpec& e = m.moe;
    e.experts = c.integer("n_routed_experts", 256, 1, 4096);
    e.top_k = c.integer("num_experts_per_tok", 8, 1, 4096);
    refuseTopKPastExperts(c, e, "n_routed_experts");
    e.ffn_hidden = c.integer("moe_intermediate_size", 2048, 1, 1 << 22);
    e.shared_experts = c.integer("n_shared_experts", 1, 0, 4096);
    e.shared_ffn_hidden = e.shared_experts > 0 ? e.ffn_hidden : 0;
    e.dense_layers = c.integer("first_k_dense_replace", 3, 0, 10000);
    // moe_layer_freq is a key of DeepSeek's own configuration_deepseek.py (its model puts MoE
    // where layer % freq == 0); transformers' DeepseekV3 reads none and makes every layer MoE.
    if (c.integer("moe_layer_freq", 1, 1, 10000) != 1)
        c.error("moe_layer_freq", "other than 1 is not read: transformers' DeepseekV3ForCausalLM makes every layer "
                                  "from first_k_dense_replace an MoE layer and DeepSeek's own code does not");
    // Sigmoid scores, normalised over the top k with norm_topk_prob, times routed_scaling_factor;
    // the top k from the best topk_group of n_group groups, chosen with the correction bias.
    e.router = c.boolean("norm_topk_prob", true) ? MoeRouter::SigmoidNorm : MoeRouter::Sigmoid;
    if (const std::string f = c.string("scoring_func", "sigmoid"); f != "sigmoid")
        c.error("scoring_func", quotedValue(f) + " is not read: DeepseekV3ForCausalLM scores with a sigmoid");
    if (const std::string t = c.string("topk_method", "noaux_tc"); t != "noaux_tc")
        c.error("topk_method", quotedValue(t) + " is not read: DeepseekV3ForCausalLM routes as noaux_tc (the score "
                                                 "correction bias and group-limited top k)");
    e.score_correction_bias = true;
    e.expert_groups = c.integer("n_group", 8, 1, 4096);
    e.group_top_k = c.integer("topk_group", 4, 1, 4096);
    e.routed_scaling = c.number("routed_scaling_factor", 2.5, 1e-6, 1000);
    // The sequence-wise balance loss weight of DeepSeek's own config class (transformers reads none).
    e.aux_loss_coeff = c.number("aux_loss_alpha", 0, 0, 1000);
    // The published checkpoint stores its weights in fp8 (e4m3, one fp32 scale per 128 x 128
    // block): the same weights, fewer bytes in the file; the model is planned in the training
    // precision. The MTP module (num_nextn_predict_layers, layer 61) is not built by
    // DeepseekV3ForCausalLM ([DM] _keys_to_ignore_on_load_unexpected "model.layers.61.*"): it is
    // trained with the model, so it is read as the model's multi-token prediction depth (ModelSpec.h
    // MtpSpec, outside the count; the config gives no loss weight: Megatron-LM's default).
    // ep_size, seq_aux, rope_interleave and auto_map: no weights.
    const QJsonValue quant = c.value("quantization_config");
    if (quant.isObject() && quant.toObject().value(QLatin1String("quant_method")).toString() != QLatin1String("fp8"))
        c.error("quantization_config", "only the published fp8 storage of the weights is read");
    else if (!quant.isObject() && !quant.isUndefined() && !quant.isNull())
        c.error("quantization_config", "expected an object");
    m.mtp.layers = c.integer("num_nextn_predict_layers", 0, 0, 1000);
    c.shapeFree({"ep_size", "seq_aux", "rope_interleave", "auto_map", "pretraining_tp"});
}

void readGpt2(Config& c, ModelSpec& m)
{
    m.family = ModelFamily::DecoderOnly;
    m.vocab = c.integer("vocab_size", 50257);
    m.max_seq = c.integer("n_positions", 1024);
    m.hidden = c.integer("n_embd", 768, 1, 1 << 20);
    m.layers = c.integer("n_layer", 12, 1, 10000);
    m.heads = c.integer("n_head", 12, 1, 1 << 14);
    m.kv_heads = m.heads;
    m.head_dim = m.hidden / std::max(1, m.heads);
    m.ffn_hidden = c.optionalInteger("n_inner", std::nullopt, 1, 1 << 22).value_or(4 * m.hidden);
    const std::string act = c.string("activation_function", "gelu_new");
    if (auto k = plainMlp(act))
        m.mlp = *k;
    else
        c.error("activation_function", quotedValue(act) + " is not read (gelu_new, gelu, gelu_pytorch_tanh, relu)");
    m.positions = PositionKind::Learned;
    m.norm = NormKind::LayerNorm;
    m.norm_eps = c.number("layer_norm_epsilon", 1e-5, 1e-30, 0.5);
    m.bias = true;
    m.tied_embeddings = c.boolean("tie_word_embeddings", true);
    m.final_norm = true;
    c.expectBoolean("add_cross_attention", false, "cross attention in GPT-2 blocks is not read");
    // n_ctx: GPT-2's old name of the context; the double-heads model's summary_*; attention
    // scaling and upcasting switches: no weights ([GC]).
    c.shapeFree({"n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
                 "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "scale_attn_weights",
                 "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"});
}

void readBert(Config& c, ModelSpec& m)
{
    m.family = ModelFamily::EncoderOnly;
    m.vocab = c.integer("vocab_size", 30522);
    m.hidden = c.integer("hidden_size", 768, 1, 1 << 20);
    m.layers = c.integer("num_hidden_layers", 12, 1, 10000);
    m.heads = c.integer("num_attention_heads", 12, 1, 1 << 14);
    m.kv_heads = m.heads;
    m.head_dim = m.hidden / std::max(1, m.heads);
    m.ffn_hidden = c.integer("intermediate_size", 3072, 1, 1 << 22);
    const std::string act = c.string("hidden_act", "gelu");
    if (auto k = plainMlp(act))
        m.mlp = *k;
    else
        c.error("hidden_act", quotedValue(act) + " is not read (gelu, gelu_new, relu)");
    m.max_seq = c.integer("max_position_embeddings", 512);
    m.token_types = c.integer("type_vocab_size", 2, 0, 1 << 16);
    m.norm_eps = c.number("layer_norm_eps", 1e-12, 1e-30, 0.5);
    const std::string positions = c.string("position_embedding_type", "absolute");
    if (positions != "absolute")
        c.error("position_embedding_type", quotedValue(positions) + " is not read (absolute)");
    m.positions = PositionKind::Learned;
    m.norm = NormKind::LayerNorm;
    m.bias = true;
    m.tied_embeddings = c.boolean("tie_word_embeddings", true);
    m.embedding_norm = true;
    m.final_norm = false;
    // BertForMaskedLM's head transform (dense h x h with bias) has the pooler's shape: the
    // model is counted as BertModel, which leaves out the head's LayerNorm (2h) and its
    // output bias (V).
    m.pooler = true;
    c.expectBoolean("is_decoder", false, "BERT as a decoder is not read");
    c.expectBoolean("add_cross_attention", false, "cross attention in BERT layers is not read");
    c.shapeFree({"hidden_dropout_prob", "attention_probs_dropout_prob"});
}

void readT5(Config& c, ModelSpec& m)
{
    m.family = ModelFamily::EncoderDecoder;
    m.vocab = c.integer("vocab_size", 32128);
    m.hidden = c.integer("d_model", 512, 1, 1 << 20);
    m.head_dim = c.integer("d_kv", 64, 1, 1 << 14);
    m.ffn_hidden = c.integer("d_ff", 2048, 1, 1 << 22);
    m.layers = c.integer("num_layers", 6, 1, 10000);
    m.decoder_layers = c.optionalInteger("num_decoder_layers", std::nullopt, 1, 10000).value_or(m.layers);
    m.heads = c.integer("num_heads", 8, 1, 1 << 14);
    m.kv_heads = m.heads;
    m.relative_buckets = c.integer("relative_attention_num_buckets", 32, 1, 1 << 16);
    m.norm_eps = c.number("layer_norm_epsilon", 1e-6, 1e-30, 0.5);
    // "relu", "gelu", or "gated-ACT": wi_0 and wi_1 ([TC]); "gated-gelu" runs gelu_new.
    const std::string ff = c.string("feed_forward_proj", "relu");
    if (ff == "relu")
        m.mlp = MlpKind::Relu;
    else if (ff == "gelu" || ff == "gelu_new")
        m.mlp = MlpKind::Gelu;
    else if (ff == "gated-gelu" || ff == "gated-gelu_new")
        m.mlp = MlpKind::GeGlu;
    else if (ff == "gated-silu")
        m.mlp = MlpKind::SwiGlu;
    else
        c.error("feed_forward_proj", quotedValue(ff) + " is not read (relu, gelu, gated-gelu, gated-silu)");
    // Relative positions define no length: n_positions (in the published t5-* configs), else
    // the 512 tokens T5 was pre-trained on (Raffel et al. 2020).
    m.max_seq = c.integer("n_positions", 512);
    m.positions = PositionKind::Relative;
    m.norm = NormKind::RmsNorm;  // T5LayerNorm: scale only, no mean
    m.bias = false;
    m.tied_embeddings = c.boolean("tie_word_embeddings", true);
    m.final_norm = true;
    c.expectBoolean("is_encoder_decoder", true, "T5 without its decoder is not read");
    c.shapeFree({"relative_attention_max_distance", "dropout_rate"});
}

struct Architecture {
    const char* name;        // "architectures"[0]
    const char* model_type;  // its model_type
    const char* config_file; // where its keys are defined
    void (*read)(Config&, ModelSpec&);
};

constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", "models/llama/configuration_llama.py @ 008e574", readLlama},
    {"MistralForCausalLM", "mistral", "models/mistral/configuration_mistral.py @ 008e574", readMistral},
    {"Qwen2ForCausalLM", "qwen2", "models/qwen2/configuration_qwen2.py @ 008e574", readQwen2},
    {"Qwen3ForCausalLM", "qwen3", "models/qwen3/configuration_qwen3.py @ 008e574", readQwen3},
    {"MixtralForCausalLM", "mixtral", "models/mixtral/configuration_mixtral.py @ 008e574", readMixtral},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "models/qwen3_moe/configuration_qwen3_moe.py @ 008e574", readQwen3Moe},
    {"GptOssForCausalLM", "gpt_oss", "models/gpt_oss/configuration_gpt_oss.py @ 02b8f42", readGptOss},
    {"DeepseekV3ForCausalLM", "deepseek_v3", "models/deepseek_v3/configuration_deepseek_v3.py @ 001f85b", readDeepseekV3},
    {"GPT2LMHeadModel", "gpt2", "models/gpt2/configuration_gpt2.py @ 01ae98a", readGpt2},
    {"BertForMaskedLM", "bert", "models/bert/configuration_bert.py @ 008f5c8", readBert},
    {"T5ForConditionalGeneration", "t5", "models/t5/configuration_t5.py @ 038869d", readT5},
};

const Architecture* findArchitecture(const std::string& name)
{
    for (const Architecture& a : kArchitectures)
        if (name == a.name)
            return &a;
    return nullptr;
}

std::string lastPart(std::string path)
{
    while (!path.empty() && (path.back() == '/' || path.back() == '\\'))
        path.pop_back();
    const size_t slash = path.find_last_of("/\\");
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A catalog name from a display name: lowercase, spaces as dashes ("Llama-2-7b-hf" -> "llama-2-7b-hf").
std::string catalogName(const std::string& display)
{
    std::string out;
    for (const char ch : display) {
        const unsigned char u = static_cast<unsigned char>(ch);
        out += std::isspace(u) ? '-' : char(std::tolower(u));
    }
    return out;
}

// The display name: the last part of _name_or_path, else the directory of a config.json, else
// the file's name without its extension.
std::string displayNameFor(const QJsonObject& config, const std::string& filePath)
{
    const std::string named = lastPart(config.value(QLatin1String("_name_or_path")).toString().toStdString());
    if (!named.empty())
        return named;
    if (filePath.empty())
        return {};
    const std::filesystem::path p(filePath);
    if (p.filename() == "config.json") {
        const std::string dir = std::filesystem::absolute(p).parent_path().filename().string();
        if (!dir.empty())
            return dir;
    }
    return p.stem().string();
}

} // namespace

bool isHfConfig(const QJsonObject& document)
{
    if (document.contains(QLatin1String("schema")))
        return false;
    return document.contains(QLatin1String("architectures")) || document.contains(QLatin1String("model_type"));
}

std::vector<std::string> hfArchitectures()
{
    std::vector<std::string> out;
    for (const Architecture& a : kArchitectures)
        out.emplace_back(a.name);
    return out;
}

std::string hfArchitecture(const QJsonObject& config)
{
    const QJsonValue list = config.value(QLatin1String("architectures"));
    if (list.isArray() && !list.toArray().isEmpty())
        return list.toArray().at(0).toString().toStdString();
    const std::string type = config.value(QLatin1String("model_type")).toString().toStdString();
    for (const Architecture& a : kArchitectures)
        if (type == a.model_type)
            return a.name;
    return {};
}

std::optional<ModelSpec> modelFromHfConfig(const QJsonObject& config, const HfImportNames& names, FieldErrors& errors)
{
    const size_t before = errors.size();
    const QJsonValue list = config.value(QLatin1String("architectures"));
    if (list.isArray() && list.toArray().size() > 1) {
        errors.push_back({"architectures", "names " + std::to_string(list.toArray().size()) +
                                               " architectures: one model per import"});
        return std::nullopt;
    }
    const std::string name = hfArchitecture(config);
    const Architecture* arch = findArchitecture(name);
    if (!arch) {
        std::string known;
        for (const Architecture& a : kArchitectures)
            known += std::string(known.empty() ? "" : ", ") + a.name;
        const std::string what = name.empty() ? "model_type " + quotedValue(config.value(QLatin1String("model_type")).toString().toStdString())
                                              : quotedValue(name);
        errors.push_back({name.empty() ? "model_type" : "architectures",
                          what + " is not an architecture ShardScope reads (" + known + ")"});
        return std::nullopt;
    }
    Config c(config, arch->name, errors);
    if (const QJsonValue pruned = c.value("pruned_heads"); pruned.isObject() && !pruned.toObject().isEmpty())
        c.error("pruned_heads", "pruned attention heads are not read");
    ModelSpec m;
    arch->read(c, m);
    c.refuseUnread();

    const std::string display = !names.display_name.empty() ? names.display_name : displayNameFor(config, names.file_path);
    m.name = !names.name.empty() ? names.name : catalogName(display);
    if (m.name.empty())
        errors.push_back({"_name_or_path", "is absent and no file names the model: give it a name (--name)"});
    m.display_name = display.empty() ? m.name : display;
    std::string origin = config.value(QLatin1String("_name_or_path")).toString().toStdString();
    if (origin.empty())
        origin = displayNameFor(config, names.file_path);  // the folder: the repository's name when downloaded
    m.source = "Hugging Face config.json" + (origin.empty() ? std::string() : " of " + origin) + " read as " +
               arch->name + " (transformers src/transformers/" + arch->config_file + ")";
    if (errors.size() != before)
        return std::nullopt;
    const FieldErrors invalid = validate(m, "model");
    if (!invalid.empty()) {
        errors.insert(errors.end(), invalid.begin(), invalid.end());
        return std::nullopt;
    }
    return m;
}

QJsonObject modelDocumentFromHfConfig(const QJsonObject& config, const HfImportNames& names)
{
    FieldErrors errors;
    const std::optional<ModelSpec> model = modelFromHfConfig(config, names, errors);
    if (!model) {
        const std::string architecture = printable(hfArchitecture(config));
        throw InputError("nothing imported from this Hugging Face config" +
                         (architecture.empty() ? std::string() : " (" + architecture + ")") + ":\n" + joinErrors(errors));
    }
    return toJson(*model);
}

} // namespace shardscope
