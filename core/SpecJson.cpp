#include "SpecJson.h"
#include "JsonReader.h"
#include "ModelEnums.h"
#include "SpecEnums.h"

#include <QJsonArray>
#include <QJsonValue>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardscope {

namespace {

QString schemaTag(const char* kind)
{
    return QStringLiteral("shardscope.%1/%2").arg(QLatin1String(kind)).arg(kSpecSchemaVersion);
}

QJsonObject sourcesToJson(const std::map<std::string, std::string>& sources)
{
    QJsonObject out;
    for (const auto& [field, text] : sources)
        out.insert(QString::fromStdString(field), QString::fromStdString(text));
    return out;
}

std::map<std::string, std::string> readSources(JsonReader& r)
{
    std::map<std::string, std::string> out;
    if (!r.has("sources"))
        return out;
    JsonReader s = r.object("sources", false);
    for (auto it = s.json().begin(); it != s.json().end(); ++it) {
        if (!it.value().isString())
            s.error(printable(it.key().toStdString()).c_str(), "expected a string naming the source");
        else
            out[it.key().toStdString()] = it.value().toString().toStdString();
    }
    return out;
}

void putIfPositive(QJsonObject& o, const char* key, double v)
{
    if (v > 0)
        o.insert(QLatin1String(key), v);
}

// Runs the spec's own validation and adds its problems, re-rooted at `path`.
template <class T>
bool appendValidation(const T& value, const std::string& path, FieldErrors& errors)
{
    const FieldErrors found = validate(value, path);
    errors.insert(errors.end(), found.begin(), found.end());
    return found.empty();
}

QJsonObject ropeScalingToJson(const RopeScaling& r)
{
    QJsonObject o{{"type", toString(r.type)}, {"factor", r.factor}};
    putIfPositive(o, "original_max_position_embeddings", r.original_max_position_embeddings);
    putIfPositive(o, "low_freq_factor", r.low_freq_factor);
    putIfPositive(o, "high_freq_factor", r.high_freq_factor);
    putIfPositive(o, "beta_fast", r.beta_fast);
    putIfPositive(o, "beta_slow", r.beta_slow);
    putIfPositive(o, "attention_factor", r.attention_factor);
    putIfPositive(o, "mscale", r.mscale);
    putIfPositive(o, "mscale_all_dim", r.mscale_all_dim);
    if (!r.truncate)
        o.insert("truncate", false);
    return o;
}

// "rope_scaling": {"type", "factor", ...}: Hugging Face's key names (rope_type spelled "type").
RopeScaling readRopeScaling(JsonReader& s)
{
    RopeScaling out;
    s.rejectUnknownKeys({"type", "factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor",
                         "beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"});
    out.type = s.enumeration<RopeScalingKind>("type", kRopeScalingKindNames, RopeScalingKind::None, true);
    if (out.type == RopeScalingKind::None && s.has("type"))
        s.error("type", "\"default\" scales nothing: leave rope_scaling out");
    out.factor = s.number("factor", 0, true, 1, 1e6);
    out.original_max_position_embeddings = s.integer("original_max_position_embeddings", 0, false, 1, 1 << 24);
    out.low_freq_factor = s.number("low_freq_factor", 0, false, 0, 1e6);
    out.high_freq_factor = s.number("high_freq_factor", 0, false, 0, 1e6);
    out.beta_fast = s.number("beta_fast", 0, false, 0, 1e6);
    out.beta_slow = s.number("beta_slow", 0, false, 0, 1e6);
    out.attention_factor = s.number("attention_factor", 0, false, 0, 1e6);
    out.mscale = s.number("mscale", 0, false, 0, 1e6);
    out.mscale_all_dim = s.number("mscale_all_dim", 0, false, 0, 1e6);
    out.truncate = s.boolean("truncate", true);
    return out;
}

// "low_precision_recipes": ["fp8", "mxfp8", ...]: FP8/FP4 --precision names, each once.
std::vector<std::string> readLowPrecisionRecipes(JsonReader& r)
{
    std::vector<std::string> out;
    const QJsonValue value = r.json().value(QLatin1String("low_precision_recipes"));
    if (value.isUndefined())
        return out;
    if (!value.isArray()) {
        r.error("low_precision_recipes", "expected an array of FP8/FP4 recipe names (fp8, fp8-delayed, ...)");
        return out;
    }
    const QJsonArray list = value.toArray();
    for (qsizetype i = 0; i < list.size(); ++i) {
        const std::string name = list.at(i).toString().toStdString();
        const std::optional<Precision> p = enumFromString<Precision>(kPrecisionNames, name);
        if (!list.at(i).isString() || !p || !quantizedRecipe(*p)) {
            std::string choices;
            for (const auto& e : kPrecisionNames)
                if (quantizedRecipe(e.value))
                    choices += std::string(choices.empty() ? "" : ", ") + e.name;
            r.error("low_precision_recipes", "entry " + std::to_string(i) + " is not an FP8/FP4 recipe (" + choices + ")");
            return {};
        }
        if (std::find(out.begin(), out.end(), name) != out.end()) {
            r.error("low_precision_recipes", "\"" + name + "\" is listed twice");
            return {};
        }
        out.push_back(name);
    }
    return out;
}

QJsonObject slidingWindowToJson(const SlidingWindow& w)
{
    QJsonObject o{{"size", w.size}};
    if (!w.layers.empty()) {
        QJsonArray layers;
        for (int l : w.layers)
            layers.append(l);
        o.insert("layers", layers);
    }
    return o;
}

// "sliding_window": {"size": N} (every layer) or {"size": N, "layers": [0, 2, ...]}.
SlidingWindow readSlidingWindow(JsonReader& r)
{
    SlidingWindow out;
    JsonReader s = r.object("sliding_window", false);
    s.rejectUnknownKeys({"size", "layers"});
    out.size = s.integer("size", 0, true, 1, 1 << 24);
    const QJsonValue layers = s.json().value(QLatin1String("layers"));
    if (layers.isUndefined())
        return out;
    if (!layers.isArray()) {
        s.error("layers", "expected an array of layer indices (leave it out for every layer)");
        return out;
    }
    const QJsonArray list = layers.toArray();
    if (list.isEmpty())
        s.error("layers", "is empty: list the sliding layers, or leave it out for every layer");
    for (qsizetype i = 0; i < list.size(); ++i) {
        const double d = list.at(i).toDouble(-1);
        if (!list.at(i).isDouble() || d != std::floor(d) || d < 0 || d > 10000) {
            s.error("layers", "entry " + std::to_string(i) + " is not a layer index (an integer from 0)");
            return out;
        }
        out.layers.push_back(int(d));
    }
    return out;
}

QJsonObject moeToJson(const MoeSpec& e)
{
    QJsonObject o{{"experts", e.experts}, {"top_k", e.top_k}, {"router", toString(e.router)}};
    if (e.ffn_hidden > 0)
        o.insert("ffn_hidden", e.ffn_hidden);
    if (e.shared_experts > 0) {
        o.insert("shared_experts", e.shared_experts);
        o.insert("shared_ffn_hidden", e.shared_ffn_hidden);
    }
    if (e.dense_layers > 0)
        o.insert("dense_layers", e.dense_layers);
    if (e.layer_interval > 1)
        o.insert("layer_interval", e.layer_interval);
    putIfPositive(o, "capacity_factor", e.capacity_factor);
    putIfPositive(o, "aux_loss_coeff", e.aux_loss_coeff);
    if (e.score_correction_bias)
        o.insert("score_correction_bias", true);
    if (e.expert_groups > 0) {
        o.insert("expert_groups", e.expert_groups);
        o.insert("group_top_k", e.group_top_k);
    }
    putIfPositive(o, "routed_scaling", e.routed_scaling);
    return o;
}

QJsonObject mlaToJson(const MlaSpec& a)
{
    QJsonObject o{{"kv_lora_rank", a.kv_lora_rank},
                  {"qk_nope_head_dim", a.qk_nope_head_dim},
                  {"qk_rope_head_dim", a.qk_rope_head_dim},
                  {"v_head_dim", a.v_head_dim}};
    o.insert("q_lora_rank", a.q_lora_rank > 0 ? QJsonValue(a.q_lora_rank) : QJsonValue(QJsonValue::Null));
    return o;
}

// "mla": {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
// (issue 16's keys); q_lora_rank null or left out: no query compression (DeepSeek-V2-Lite).
MlaSpec readMla(JsonReader& r)
{
    MlaSpec a;
    JsonReader mla = r.object("mla", false);
    mla.rejectUnknownKeys({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    if (mla.has("q_lora_rank") && !mla.json().value(QLatin1String("q_lora_rank")).isNull())
        a.q_lora_rank = mla.integer("q_lora_rank", 0, true, 1, 1 << 20);
    // (ranks <= 0 and ranks past hidden: validate() names them against the model)
    a.kv_lora_rank = mla.integer("kv_lora_rank", 0, true, -(1 << 20), 1 << 20);
    a.qk_nope_head_dim = mla.integer("qk_nope_head_dim", 0, true, 1, 1 << 14);
    a.qk_rope_head_dim = mla.integer("qk_rope_head_dim", 0, true, 1, 1 << 14);
    a.v_head_dim = mla.integer("v_head_dim", 0, true, 1, 1 << 14);
    return a;
}

QJsonObject mtpToJson(const MtpSpec& t)
{
    return QJsonObject{{"layers", t.layers}, {"loss_scale", t.loss_scale}};
}

// "mtp": {"layers", "loss_scale"} (ModelSpec.h MtpSpec); loss_scale left out: Megatron-LM's
// default 0.1. Values out of range: validate() names them.
MtpSpec readMtp(JsonReader& r)
{
    MtpSpec t;
    JsonReader mtp = r.object("mtp", false);
    mtp.rejectUnknownKeys({"layers", "loss_scale"});
    t.layers = mtp.integer("layers", 0, true, -(1 << 20), 1 << 20);
    t.loss_scale = mtp.number("loss_scale", t.loss_scale, false, -1e30, 1e30);
    return t;
}

// "moe": {"experts", "top_k", "shared_experts", "shared_ffn_hidden", "ffn_hidden" (per routed
// expert), "dense_layers", "layer_interval", "router", "capacity_factor", "aux_loss_coeff"}
// (issue 16's keys). capacity_factor left out: dropless.
MoeSpec readMoe(JsonReader& r)
{
    MoeSpec e;
    JsonReader moe = r.object("moe", false);
    moe.rejectUnknownKeys({"experts", "top_k", "shared_experts", "shared_ffn_hidden", "ffn_hidden", "dense_layers",
                           "layer_interval", "router", "capacity_factor", "aux_loss_coeff", "score_correction_bias",
                           "expert_groups", "group_top_k", "routed_scaling"});
    e.experts = moe.integer("experts", 0, true, 1, 4096);
    e.top_k = moe.integer("top_k", 0, true, 1, 4096);
    e.shared_experts = moe.integer("shared_experts", 0, false, 0, 4096);
    e.shared_ffn_hidden = moe.integer("shared_ffn_hidden", 0, false, 1, 1 << 22);
    // A size or factor whose absence means something (the model's ffn_hidden; dropless routing):
    // 0 or less written out is refused with what leaving it out means, not read as the default.
    auto positiveWhenGiven = [&](const char* key, const char* leftOut) {
        const QJsonValue v = moe.json().value(QLatin1String(key));
        if (!v.isDouble() || v.toDouble() > 0)
            return true;
        char text[32];
        std::snprintf(text, sizeof text, "%g", v.toDouble());
        moe.error(key, std::string(text) + " must be > 0 when given (leave " + key + " out: " + leftOut + ")");
        return false;
    };
    if (positiveWhenGiven("ffn_hidden", "each routed expert has the model's ffn_hidden"))
        e.ffn_hidden = moe.integer("ffn_hidden", 0, false, 1, 1 << 22);
    e.dense_layers = moe.integer("dense_layers", 0, false, 0, 10000);
    e.layer_interval = moe.integer("layer_interval", 1, false, 1, 10000);
    e.router = moe.enumeration<MoeRouter>("router", kMoeRouterNames, MoeRouter::SoftmaxNorm, false);
    if (positiveWhenGiven("capacity_factor", "dropless routing, every token to its top k"))
        e.capacity_factor = moe.number("capacity_factor", 0, false, 1e-6, 1000);
    e.aux_loss_coeff = moe.number("aux_loss_coeff", 0, false, 0, 1000);
    e.score_correction_bias = moe.boolean("score_correction_bias", false);
    e.expert_groups = moe.integer("expert_groups", 0, false, 1, 4096);
    e.group_top_k = moe.integer("group_top_k", 0, e.expert_groups > 0, 1, 4096);
    e.routed_scaling = moe.number("routed_scaling", 0, false, 1e-6, 1000);
    return e;
}

} // namespace

RopeScaling ropeScalingFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    JsonReader r(json, path, errors);
    return readRopeScaling(r);
}

std::string schemaKind(const QJsonObject& json)
{
    const QString schema = json.value(QLatin1String("schema")).toString();
    if (!schema.startsWith(QLatin1String("shardscope.")))
        return {};
    const qsizetype slash = schema.indexOf(QLatin1Char('/'));
    return schema.mid(11, slash < 0 ? -1 : slash - 11).toStdString();
}

// ---- model ----------------------------------------------------------------

QJsonObject toJson(const ModelSpec& m)
{
    QJsonObject o;
    o.insert("schema", schemaTag("model"));
    o.insert("name", QString::fromStdString(m.name));
    if (!m.display_name.empty())
        o.insert("display_name", QString::fromStdString(m.display_name));
    if (!m.source.empty())
        o.insert("source", QString::fromStdString(m.source));
    o.insert("family", toString(m.family));
    o.insert("layers", m.layers);
    if (m.family == ModelFamily::EncoderDecoder)
        o.insert("decoder_layers", m.decoder_layers);
    o.insert("hidden", m.hidden);
    o.insert("heads", m.heads);
    o.insert("kv_heads", m.kv_heads);
    o.insert("head_dim", m.head_dim);
    o.insert("ffn_hidden", m.ffn_hidden);
    o.insert("mlp", toString(m.mlp));
    o.insert("vocab", m.vocab);
    o.insert("max_seq", m.max_seq);
    if (m.position_table > 0)
        o.insert("position_table", m.position_table);
    if (m.token_types > 0)
        o.insert("token_types", m.token_types);
    if (m.relative_buckets > 0)
        o.insert("relative_buckets", m.relative_buckets);
    o.insert("positions", toString(m.positions));
    if (m.positions == PositionKind::Rotary)
        o.insert("rope_base", m.rope_base);
    if (m.rope_scaling.enabled())
        o.insert("rope_scaling", ropeScalingToJson(m.rope_scaling));
    o.insert("norm", toString(m.norm));
    o.insert("norm_eps", m.norm_eps);
    if (!m.bias && m.qkv_bias)
        o.insert("bias", "qkv");
    else
        o.insert("bias", m.bias);
    if (m.qk_norm)
        o.insert("qk_norm", true);
    if (m.attention_sinks)
        o.insert("attention_sinks", true);
    if (m.sliding_window.enabled())
        o.insert("sliding_window", slidingWindowToJson(m.sliding_window));
    o.insert("tied_embeddings", m.tied_embeddings);
    o.insert("embedding_norm", m.embedding_norm);
    o.insert("final_norm", m.final_norm);
    o.insert("pooler", m.pooler);
    if (m.moe.enabled())
        o.insert("moe", moeToJson(m.moe));
    if (m.mla.enabled())
        o.insert("mla", mlaToJson(m.mla));
    if (m.mtp.enabled())
        o.insert("mtp", mtpToJson(m.mtp));
    // Derived, output only: doubles hold these counts exactly (< 2^53).
    const ParameterBreakdown counts = parameterBreakdown(m);
    o.insert("parameters", double(counts.total));
    if (m.moe.enabled())
        o.insert("active_parameters", double(counts.active_per_token));
    if (m.mtp.enabled())
        o.insert("mtp_parameters", double(counts.mtp));  // outside `parameters` (ModelSpec.h MtpSpec)
    o.insert("flops_per_token", double(forwardFlopsPerToken(m, m.max_seq)));
    return o;
}

std::optional<ModelSpec> modelFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    checkSchema(r, "model", kSpecSchemaVersion);
    r.rejectUnknownKeys({"schema", "name", "display_name", "source", "family", "layers", "decoder_layers", "hidden",
                         "heads", "kv_heads", "head_dim", "ffn_hidden", "mlp", "vocab", "max_seq", "position_table",
                         "token_types", "relative_buckets", "positions", "rope_base", "rope_scaling", "norm", "norm_eps",
                         "bias", "qk_norm", "attention_sinks", "sliding_window", "tied_embeddings", "embedding_norm", "final_norm",
                         "pooler", "moe", "mla", "mtp", "parameters", "active_parameters", "mtp_parameters",
                         "flops_per_token"});
    ModelSpec m;
    m.name = r.string("name", true);
    m.display_name = r.string("display_name", false);
    m.source = r.string("source", false);
    m.family = r.enumeration<ModelFamily>("family", kModelFamilyNames, ModelFamily::DecoderOnly, true);
    m.layers = r.integer("layers", 0, true, 1, 10000);
    const bool encDec = m.family == ModelFamily::EncoderDecoder;
    m.decoder_layers = r.integer("decoder_layers", 0, encDec, encDec ? 1 : 0, 10000);
    m.hidden = r.integer("hidden", 0, true, 1, 1 << 20);
    m.heads = r.integer("heads", 0, true, 1, 1 << 14);
    m.kv_heads = r.integer("kv_heads", m.heads, false, 1, 1 << 14);
    // Default head size hidden/heads, as in almost every model; T5-11B overrides it.
    m.head_dim = r.integer("head_dim", m.heads > 0 ? m.hidden / m.heads : 0, false, 1, 1 << 14);
    m.ffn_hidden = r.integer("ffn_hidden", 0, true, 1, 1 << 22);
    m.mlp = r.enumeration<MlpKind>("mlp", kMlpKindNames, MlpKind::Gelu, true);
    m.vocab = r.integer("vocab", 0, true, 1, 1 << 24);
    m.max_seq = r.integer("max_seq", 0, true, 1, 1 << 24);
    m.position_table = r.integer("position_table", 0, false, 0, 1 << 24);
    m.token_types = r.integer("token_types", 0, false, 0, 1 << 16);
    m.relative_buckets = r.integer("relative_buckets", 0, false, 0, 1 << 16);
    m.positions = r.enumeration<PositionKind>("positions", kPositionKindNames, PositionKind::Learned, true);
    m.rope_base = r.number("rope_base", 10000, false, 1, 1e12);
    if (r.has("rope_base") && m.positions != PositionKind::Rotary)
        r.error("rope_base", "applies to rotary positions only (positions is \"" + std::string(toString(m.positions)) + "\")");
    if (r.has("rope_scaling"))
        m.rope_scaling = ropeScalingFromJson(r.object("rope_scaling", false).json(), r.fieldPath("rope_scaling"), errors);
    m.norm = r.enumeration<NormKind>("norm", kNormKindNames, NormKind::LayerNorm, true);
    m.norm_eps = r.number("norm_eps", m.norm_eps, false, 1e-30, 0.5);
    // "bias": true (every linear layer), false, or "qkv" (the q, k and v projections only: Qwen2).
    const QJsonValue bias = json.value(QLatin1String("bias"));
    if (bias.isString()) {
        if (bias.toString() == QLatin1String("qkv"))
            m.qkv_bias = true;
        else
            r.error("bias", "unknown value " + quotedValue(bias.toString().toStdString()) +
                                " (true, false or \"qkv\")");
        m.bias = false;
    } else {
        m.bias = r.boolean("bias", false);
    }
    m.qk_norm = r.boolean("qk_norm", false);
    m.attention_sinks = r.boolean("attention_sinks", false);
    if (r.has("sliding_window"))
        m.sliding_window = readSlidingWindow(r);
    m.tied_embeddings = r.boolean("tied_embeddings", false);
    m.embedding_norm = r.boolean("embedding_norm", false);
    m.final_norm = r.boolean("final_norm", true);
    m.pooler = r.boolean("pooler", false);
    if (r.has("moe"))
        m.moe = readMoe(r);
    if (r.has("mla")) {
        m.mla = readMla(r);
        if (!r.has("head_dim"))  // MLA's query and key width per head
            m.head_dim = m.mla.qkHeadDim();
    }
    if (r.has("mtp"))
        m.mtp = readMtp(r);
    if (errors.size() != before)
        return std::nullopt;
    if (!appendValidation(m, path, errors))
        return std::nullopt;
    return m;
}

// ---- chip -----------------------------------------------------------------

QJsonObject toJson(const ChipSpec& c)
{
    QJsonObject o;
    o.insert("schema", schemaTag("chip"));
    o.insert("name", QString::fromStdString(c.name));
    if (!c.vendor.empty())
        o.insert("vendor", QString::fromStdString(c.vendor));
    if (!c.display_name.empty())
        o.insert("display_name", QString::fromStdString(c.display_name));
    QJsonObject peak;
    putIfPositive(peak, "fp32", c.peak_flops_fp32);
    putIfPositive(peak, "bf16", c.peak_flops_bf16);
    putIfPositive(peak, "fp16", c.peak_flops_fp16);
    putIfPositive(peak, "fp8", c.peak_flops_fp8);
    putIfPositive(peak, "fp4", c.peak_flops_fp4);
    o.insert("peak_flops", peak);
    if (!c.low_precision_recipes.empty()) {
        QJsonArray recipes;
        for (const std::string& name : c.low_precision_recipes)
            recipes.append(QString::fromStdString(name));
        o.insert("low_precision_recipes", recipes);
    }
    o.insert("hbm_bytes", c.hbm_bytes);
    o.insert("hbm_bytes_per_second", c.hbm_bytes_per_second);
    o.insert("devices_per_chip", c.devices_per_chip);
    if (!c.sources.empty())
        o.insert("sources", sourcesToJson(c.sources));
    return o;
}

std::optional<ChipSpec> chipFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    checkSchema(r, "chip", kSpecSchemaVersion);
    r.rejectUnknownKeys({"schema", "name", "vendor", "display_name", "peak_flops", "low_precision_recipes",
                         "hbm_bytes", "hbm_bytes_per_second", "devices_per_chip", "sources"});
    ChipSpec c;
    c.name = r.string("name", true);
    c.vendor = r.string("vendor", false);
    c.display_name = r.string("display_name", false);
    JsonReader peak = r.object("peak_flops", true);
    peak.rejectUnknownKeys({"fp32", "bf16", "fp16", "fp8", "fp4"});
    c.peak_flops_fp32 = peak.quantity("fp32", QuantityKind::FlopsPerSecond, false);
    c.peak_flops_bf16 = peak.quantity("bf16", QuantityKind::FlopsPerSecond, false);
    c.peak_flops_fp16 = peak.quantity("fp16", QuantityKind::FlopsPerSecond, false);
    c.peak_flops_fp8 = peak.quantity("fp8", QuantityKind::FlopsPerSecond, false);
    c.peak_flops_fp4 = peak.quantity("fp4", QuantityKind::FlopsPerSecond, false);
    c.low_precision_recipes = readLowPrecisionRecipes(r);
    c.hbm_bytes = r.quantity("hbm_bytes", QuantityKind::Bytes, true);
    c.hbm_bytes_per_second = r.quantity("hbm_bytes_per_second", QuantityKind::BytesPerSecond, true);
    c.devices_per_chip = r.integer("devices_per_chip", 1, false, 1, 256);
    c.sources = readSources(r);
    if (errors.size() != before || !appendValidation(c, path, errors))
        return std::nullopt;
    return c;
}

// ---- node -----------------------------------------------------------------

QJsonObject toJson(const NodeType& n)
{
    QJsonObject o;
    o.insert("schema", schemaTag("node"));
    o.insert("name", QString::fromStdString(n.name));
    if (!n.display_name.empty())
        o.insert("display_name", QString::fromStdString(n.display_name));
    o.insert("chip", QString::fromStdString(n.chip.name));
    o.insert("chips_per_node", n.chips_per_node);
    o.insert("devices_per_node", n.devicesPerNode());  // derived, output only
    o.insert("intra_topology", toString(n.intra_topology));
    putIfPositive(o, "intra_link_bytes_per_second", n.intra_link_bytes_per_second);
    if (n.scale_up_chips > 0)
        o.insert("scale_up_chips", n.scale_up_chips);
    putIfPositive(o, "inter_node_bytes_per_second", n.inter_node_bytes_per_second);
    putIfPositive(o, "host_link_bytes_per_second", n.host_link_bytes_per_second);
    putIfPositive(o, "price_per_node_hour_usd", n.price_per_node_hour_usd);
    if (!n.price_kind.empty())
        o.insert("price_kind", QString::fromStdString(n.price_kind));
    if (!n.sources.empty())
        o.insert("sources", sourcesToJson(n.sources));
    return o;
}

std::optional<NodeType> nodeFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors,
                                     const ChipLookup& findChip)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    checkSchema(r, "node", kSpecSchemaVersion);
    r.rejectUnknownKeys({"schema", "name", "display_name", "chip", "chips_per_node", "devices_per_node",
                         "intra_topology", "intra_link_bytes_per_second", "scale_up_chips",
                         "inter_node_bytes_per_second", "host_link_bytes_per_second", "price_per_node_hour_usd",
                         "price_kind", "sources"});
    NodeType n;
    n.name = r.string("name", true);
    n.display_name = r.string("display_name", false);
    const QJsonValue chip = json.value(QLatin1String("chip"));
    if (chip.isObject()) {
        if (auto c = chipFromJson(chip.toObject(), r.fieldPath("chip"), errors))
            n.chip = *c;
    } else if (chip.isString()) {
        const std::string chipName = chip.toString().toStdString();
        if (auto c = findChip ? findChip(chipName) : std::nullopt)
            n.chip = *c;
        else
            r.error("chip", "no chip named " + quotedValue(chipName) + " in the catalog");
    } else {
        r.error("chip", chip.isUndefined() ? "is required" : "expected a chip name or a chip object");
    }
    n.chips_per_node = r.integer("chips_per_node", 0, true, 1, 4096);
    n.intra_topology = r.enumeration<Topology>("intra_topology", kTopologyNames, Topology::Switch, true);
    n.intra_link_bytes_per_second =
        r.quantity("intra_link_bytes_per_second", QuantityKind::BytesPerSecond, n.chips_per_node > 1);
    n.scale_up_chips = r.integer("scale_up_chips", 0, false, 0, 1'000'000);
    n.inter_node_bytes_per_second = r.quantity("inter_node_bytes_per_second", QuantityKind::BytesPerSecond, false);
    n.host_link_bytes_per_second = r.quantity("host_link_bytes_per_second", QuantityKind::BytesPerSecond, false);
    n.price_per_node_hour_usd = r.number("price_per_node_hour_usd", 0, false, 0, 1e6);
    n.price_kind = r.string("price_kind", false);
    n.sources = readSources(r);
    if (errors.size() != before || !appendValidation(n, path, errors))
        return std::nullopt;
    return n;
}

// ---- training -------------------------------------------------------------

QJsonObject toJson(const TrainingSpec& t)
{
    QJsonObject o{{"schema", schemaTag("training")},
                  {"global_batch", t.global_batch},
                  {"seq_len", t.seq_len},
                  {"precision", toString(t.precision)},
                  {"optimizer", toString(t.optimizer)},
                  {"tokens_to_train", t.tokens_to_train},
                  {"flash_attention", t.flash_attention},
                  {"dropout", t.dropout}};
    if (t.moe_imbalance != 1.0)  // (documents of balanced runs stay as they were)
        o.insert("moe_imbalance", t.moe_imbalance);
    if (t.main_grads != MainGrads::Default)  // (the frameworks' default is not written)
        o.insert("main_grads", toString(t.main_grads));
    return o;
}

std::optional<TrainingSpec> trainingFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    if (r.has("schema"))
        checkSchema(r, "training", kSpecSchemaVersion);
    r.rejectUnknownKeys(
        {"schema", "global_batch", "seq_len", "precision", "optimizer", "tokens_to_train", "flash_attention", "dropout",
         "moe_imbalance", "main_grads"});
    TrainingSpec t;
    t.global_batch = r.integer("global_batch", 0, true, 1, 100'000'000);
    t.seq_len = r.integer("seq_len", 0, true, 1, 1 << 24);
    t.precision = r.enumeration<Precision>("precision", kPrecisionNames, Precision::BF16Mixed, false);
    t.optimizer = r.enumeration<Optimizer>("optimizer", kOptimizerNames, Optimizer::AdamW, false);
    t.tokens_to_train = r.number("tokens_to_train", 300e9, false, 1, 1e16);
    t.flash_attention = r.boolean("flash_attention", false);
    t.dropout = r.boolean("dropout", true);
    t.moe_imbalance = r.number("moe_imbalance", 1.0, false, 1, 64);
    t.main_grads = r.enumeration<MainGrads>("main_grads", kMainGradsNames, MainGrads::Default, false);
    if (errors.size() != before || !appendValidation(t, path, errors))
        return std::nullopt;
    return t;
}

// ---- layout ---------------------------------------------------------------

QJsonObject toJson(const Layout& l)
{
    QJsonObject o{{"schema", schemaTag("layout")},
                       {"dp", l.dp},
                       {"tp", l.tp},
                       {"pp", l.pp},
                       {"cp", l.cp},
                       {"sp", l.sequence_parallel},
                       {"zero", l.zero_stage},
                       {"zero_group", l.zero_group},
                       {"mb", l.micro_batch},
                       {"schedule", toString(l.schedule)},
                       {"v", l.virtual_stages},
                       {"recompute", toString(l.recompute)},
                       {"offload", toString(l.offload)},
                       {"tp_comm_overlap", l.tp_comm_overlap},
                       {"overlap_param_gather", l.overlap_param_gather}};
    // An uneven pipeline split is written only when set (documents of even splits stay as they were).
    if (l.first_stage_layers > 0)
        o.insert("first_stage_layers", l.first_stage_layers);
    if (l.last_stage_layers > 0)
        o.insert("last_stage_layers", l.last_stage_layers);
    if (l.account_for_embedding_in_pipeline_split)
        o.insert("account_for_embedding_in_pipeline_split", true);
    if (l.account_for_loss_in_pipeline_split)
        o.insert("account_for_loss_in_pipeline_split", true);
    if (l.recompute_layers > 0) {
        o.insert("recompute_method", toString(l.recompute_method));
        o.insert("recompute_layers", l.recompute_layers);
    }
    if (l.ep > 1)
        o.insert("ep", l.ep);
    if (l.etp > 0)
        o.insert("etp", l.etp);
    if (l.ep_comm_overlap)
        o.insert("ep_comm_overlap", true);
    if (l.cp_comm != CpComm::P2P)
        o.insert("cp_comm", toString(l.cp_comm));
    if (l.moe_dispatcher != MoeDispatcher::AllToAll)
        o.insert("moe_dispatcher", toString(l.moe_dispatcher));
    if (l.recompute_modules != 0) {
        QJsonArray modules;  // Megatron-LM's list, as --recompute-modules takes it
        for (unsigned bit = 1; bit <= kRecomputeModuleMask; bit <<= 1)
            if (l.recompute_modules & bit)
                modules.append(QLatin1String(recomputeModuleName(bit)));
        o.insert("recompute_modules", modules);
    }
    if (l.offload_activations > 0)
        o.insert("offload_activations", l.offload_activations);
    if (const PipelineLayerLayout* custom = l.layerLayout())
        o.insert("pipeline_layout", QString::fromStdString(custom->text()));
    return o;
}

std::optional<Layout> layoutFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    if (r.has("schema"))
        checkSchema(r, "layout", kSpecSchemaVersion);
    r.rejectUnknownKeys({"schema", "dp", "tp", "pp", "cp", "sp", "zero", "zero_group", "mb", "schedule", "v",
                         "recompute", "offload", "tp_comm_overlap", "overlap_param_gather", "first_stage_layers",
                         "last_stage_layers", "account_for_embedding_in_pipeline_split",
                         "account_for_loss_in_pipeline_split", "recompute_method", "recompute_layers", "ep", "etp", "ep_comm_overlap",
                         "cp_comm", "moe_dispatcher", "recompute_modules", "offload_activations",
                         "pipeline_layout"});
    constexpr int kMax = 1'000'000;
    Layout l;
    l.dp = r.integer("dp", 1, true, 1, kMax);
    l.tp = r.integer("tp", 1, false, 1, kMax);
    l.pp = r.integer("pp", 1, false, 1, kMax);
    l.cp = r.integer("cp", 1, false, 1, kMax);
    l.sequence_parallel = r.boolean("sp", false);
    l.zero_stage = r.integer("zero", 0, false, 0, 3);
    l.zero_group = r.integer("zero_group", 0, false, 0, kMax);
    l.micro_batch = r.integer("mb", 1, false, 1, kMax);
    l.schedule = r.enumeration<PipelineSchedule>("schedule", kScheduleNames, PipelineSchedule::OneFOneB, false);
    l.virtual_stages = r.integer("v", 1, false, 1, kMax);
    l.recompute = r.enumeration<Recompute>("recompute", kRecomputeNames, Recompute::None, false);
    l.offload = r.enumeration<Offload>("offload", kOffloadNames, Offload::None, false);
    l.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
    l.overlap_param_gather = r.boolean("overlap_param_gather", false);
    l.first_stage_layers = r.integer("first_stage_layers", 0, false, 0, kMax);
    l.last_stage_layers = r.integer("last_stage_layers", 0, false, 0, kMax);
    l.account_for_embedding_in_pipeline_split = r.boolean("account_for_embedding_in_pipeline_split", false);
    l.account_for_loss_in_pipeline_split = r.boolean("account_for_loss_in_pipeline_split", false);
    l.recompute_method = r.enumeration<RecomputeMethod>("recompute_method", kRecomputeMethodNames,
                                                        RecomputeMethod::Uniform, false);
    l.recompute_layers = r.integer("recompute_layers", 0, false, 0, kMax);
    l.ep = r.integer("ep", 1, false, 1, kMax);
    l.etp = r.integer("etp", 0, false, 0, kMax);
    l.ep_comm_overlap = r.boolean("ep_comm_overlap", false);
    l.cp_comm = r.enumeration<CpComm>("cp_comm", kCpCommNames, CpComm::P2P, false);
    l.moe_dispatcher =
        r.enumeration<MoeDispatcher>("moe_dispatcher", kMoeDispatcherNames, MoeDispatcher::AllToAll, false);
    if (const QJsonValue modules = json.value(QLatin1String("recompute_modules")); modules.isArray()) {
        const QJsonArray names = modules.toArray();
        if (names.isEmpty())
            r.error("recompute_modules", "an empty list (leave the key out for Megatron-LM's default, core_attn)");
        for (qsizetype i = 0; i < names.size(); ++i) {
            const std::string field = "recompute_modules[" + std::to_string(i) + "]";
            if (!names[i].isString()) {
                r.error(field.c_str(), "must be a module name");
                continue;
            }
            const unsigned bit =
                parseRecomputeModules(names[i].toString().toStdString(), r.fieldPath(field.c_str()), errors);
            if (l.recompute_modules & bit)
                r.error(field.c_str(), quotedValue(names[i].toString().toStdString()) + " named twice");
            l.recompute_modules |= bit;
        }
    } else if (!modules.isUndefined()) {
        r.error("recompute_modules", "must be a list of module names (core_attn, moe_act, layernorm, mla_up_proj, "
                                     "mlp, moe, shared_experts)");
    }
    l.offload_activations = r.integer("offload_activations", 0, false, 0, kMax);
    if (const std::string text = r.string("pipeline_layout", false); !text.empty()) {
        std::string why;
        if (const std::optional<PipelineLayerLayout> parsed = PipelineLayerLayout::parse(text, why)) {
            l.pipeline_layout = internPipelineLayerLayout(*parsed);
            // Its chunk count sets v and the schedule unless given, as in the text form (parseLayout).
            if (!r.has("v") && parsed->chunkCount() % l.pp == 0)
                l.virtual_stages = parsed->chunkCount() / l.pp;
            if (!r.has("schedule") && l.virtual_stages > 1)
                l.schedule = PipelineSchedule::Interleaved;
        } else {
            r.error("pipeline_layout", quotedValue(text) + ": " + why);
        }
    }
    if (errors.size() != before || !appendValidation(l, path, errors))
        return std::nullopt;
    return l;
}

// ---- problem --------------------------------------------------------------

QJsonObject toJson(const Problem& p)
{
    QJsonObject node = toJson(p.cluster.node);
    node.insert("chip", toJson(p.cluster.node.chip));  // self-contained: chip inline
    return QJsonObject{{"schema", schemaTag("problem")},
                       {"model", toJson(p.model)},
                       {"cluster", QJsonObject{{"node", node}, {"nodes", p.cluster.nodes}}},
                       {"training", toJson(p.training)}};
}

std::optional<Problem> problemFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    const size_t before = errors.size();
    JsonReader r(json, path, errors);
    if (r.has("schema"))
        checkSchema(r, "problem", kSpecSchemaVersion);
    r.rejectUnknownKeys({"schema", "model", "cluster", "training"});
    Problem p;
    auto model = modelFromJson(r.object("model", true).json(), r.fieldPath("model"), errors);
    JsonReader cluster = r.object("cluster", true);
    cluster.rejectUnknownKeys({"node", "nodes"});
    auto node = nodeFromJson(cluster.object("node", true).json(), cluster.fieldPath("node"), errors, nullptr);
    p.cluster.nodes = cluster.integer("nodes", 1, true, 1, 1'000'000);
    auto training = trainingFromJson(r.object("training", true).json(), r.fieldPath("training"), errors);
    if (errors.size() != before || !model || !node || !training)
        return std::nullopt;
    p.model = *model;
    p.cluster.node = *node;
    p.training = *training;
    const FieldErrors found = validate(p);
    if (!found.empty()) {
        errors.insert(errors.end(), found.begin(), found.end());
        return std::nullopt;
    }
    return p;
}

} // namespace shardscope
