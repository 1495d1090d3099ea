#include "ValidationCaseJson.h"

#include "ModelEnums.h"
#include "EmulatedHardware.h"
#include "JsonReader.h"
#include "MeasurementJson.h"

#include <QJsonArray>

#include <limits>

namespace shardscope {

namespace {

// The sliding layers of a run's model (empty: every layer slides, or none has a window).
QJsonArray slidingLayersJson(const engine::ModelConfig& m)
{
    QJsonArray layers;
    for (int layer : m.sliding_window.layers)
        layers.append(layer);
    return layers;
}

engine::DeviceProfile profileFromJson(JsonReader device)
{
    engine::DeviceProfile p;
    p.name = device.string("name", true);
    p.memory_bytes = device.number("memory_bytes", 0, true, 1, 1e18);
    p.peak_flops_fp32 = device.number("peak_flops_fp32", 0, true, 0, 1e20);
    p.peak_flops_bf16 = device.number("peak_flops_bf16", 0, false, 0, 1e20);
    p.memory_bytes_per_second = device.number("memory_bytes_per_second", 0, true, 1, 1e18);
    p.kernel_overhead_s = device.number("kernel_overhead_s", 0, false, 0, 1e3);
    p.host_link_bytes_per_second = device.number("host_link_bytes_per_second", 0, false, 0, 1e18);
    p.host_memory_bytes_per_second = device.number("host_memory_bytes_per_second", 0, false, 0, 1e18);
    p.scale = device.number("scale", 1, false, 1e-9, 1);
    p.measured = device.boolean("measured", false);
    return p;
}

} // namespace

QJsonObject toJson(const ValidationCase& c)
{
    const engine::TrainRequest& r = c.request;
    QJsonObject o{
        {"model", QJsonObject{{"layers", r.model.layers},
                              {"hidden", r.model.hidden},
                              {"heads", r.model.heads},
                              {"vocab", r.model.vocab},
                              {"seq", r.model.seq},
                              {"kv_heads", r.model.kvHeads()},
                              {"head_dim", r.model.headDim()},
                              {"ffn_hidden", r.model.ffn()},
                              {"mlp", toString(r.model.mlp)},
                              {"norm", toString(r.model.norm)},
                              {"norm_eps", r.model.norm_eps},
                              {"positions", toString(r.model.positions)},
                              {"rope_base", r.model.rope_base},
                              {"bias", r.model.bias},
                              {"qkv_bias", r.model.qkv_bias},
                              {"qk_norm", r.model.qk_norm},
                              {"sliding_window", r.model.sliding_window.size},
                              {"sliding_layers", slidingLayersJson(r.model)},
                              {"tied_embeddings", r.model.tied_embeddings},
                              {"causal", r.model.causal},
                              // BERT-style encoders' blocks (ModelConfig.h)
                              {"post_norm", r.model.post_norm},
                              {"token_types", r.model.token_types},
                              {"embedding_norm", r.model.embedding_norm},
                              {"masked_lm", r.model.masked_lm},
                              {"pooler", r.model.pooler}}},
        {"batch", r.batch},
        {"steps", r.steps},
        {"precision", engine::toString(r.precision)},
        {"recompute", toString(r.layout.recompute)},  // also in the layout; kept for older readers
        {"layout", QString::fromStdString(toString(r.layout))},
        {"links", QJsonObject{{"intra_bytes_per_second", r.links.intra_bytes_per_second},
                              {"inter_bytes_per_second", r.links.inter_bytes_per_second},
                              {"intra_latency_s", r.links.intra_latency_s},
                              {"inter_latency_s", r.links.inter_latency_s},
                              {"node_devices", r.links.node_devices}}},
        {"bucket_bytes", double(r.bucket_bytes)},
        {"device", engine::toJson(c.profile)}};
    if (r.model.encoder_decoder) {  // T5 (written only for it: older readers and files stay as they were)
        QJsonObject model = o.value("model").toObject();
        model.insert("encoder_decoder", true);
        model.insert("decoder_layers", r.model.decoder_layers);
        model.insert("relative_buckets", r.model.relative_buckets);
        model.insert("relative_max_distance", r.model.relative_max_distance);
        o.insert("model", model);
    }
    if (const engine::MoeConfig& e = r.model.moe; e.enabled()) {  // (written only for MoE, like T5's)
        QJsonObject model = o.value("model").toObject();
        model.insert("moe", QJsonObject{{"experts", e.experts},
                                        {"top_k", e.top_k},
                                        {"expert_ffn", e.expert_ffn},
                                        {"shared_experts", e.shared_experts},
                                        {"shared_ffn", e.shared_ffn},
                                        {"dense_layers", e.dense_layers},
                                        {"layer_interval", e.layer_interval},
                                        {"router", toString(e.router)},
                                        {"capacity_factor", e.capacity_factor},
                                        {"aux_loss_coeff", e.aux_loss_coeff},
                                        {"score_correction_bias", e.score_correction_bias},
                                        {"routed_scaling", e.routed_scaling},
                                        {"expert_groups", e.expert_groups},
                                        {"group_top_k", e.group_top_k}});
        o.insert("model", model);
    }
    if (const engine::MlaConfig& a = r.model.mla; a.enabled()) {  // (written only with MLA)
        QJsonObject model = o.value("model").toObject();
        model.insert("mla", QJsonObject{{"q_lora_rank", a.q_lora_rank},
                                        {"kv_lora_rank", a.kv_lora_rank},
                                        {"qk_nope_head_dim", a.qk_nope_head_dim},
                                        {"qk_rope_head_dim", a.qk_rope_head_dim},
                                        {"v_head_dim", a.v_head_dim},
                                        {"softmax_mscale", a.softmax_mscale}});
        o.insert("model", model);
    }
    if (const engine::MtpConfig& t = r.model.mtp; t.enabled()) {  // (written only with MTP)
        QJsonObject model = o.value("model").toObject();
        model.insert("mtp", QJsonObject{{"layers", t.layers}, {"loss_scale", t.loss_scale}});
        o.insert("model", model);
    }
    if (c.host.known())
        o.insert("host", QJsonObject{{"device", engine::toJson(c.host.profile)}, {"cores", c.host.cores}});
    if (r.fp32_gradients)  // (written only when set: older files read as bf16 gradients, as they ran)
        o.insert("fp32_gradients", true);
    return o;
}

ValidationCase validationCaseFromJson(const QJsonObject& o, const std::string& path)
{
    FieldErrors errors;
    JsonReader in(o, path, errors);
    ValidationCase c;
    engine::TrainRequest& r = c.request;
    JsonReader model = in.object("model", true);
    r.model.layers = model.integer("layers", 0, true, 1, 1024);
    r.model.hidden = model.integer("hidden", 0, true, 1, 1 << 16);
    r.model.heads = model.integer("heads", 0, true, 1, 1024);
    r.model.vocab = model.integer("vocab", 0, true, 1, 1 << 20);
    r.model.seq = model.integer("seq", 0, true, 1, 1 << 20);
    // Runs stored before the engine executed other architectures were GPT-2 shaped: the defaults.
    r.model.kv_heads = model.integer("kv_heads", 0, false, 0, 1024);
    r.model.head_dim = model.integer("head_dim", 0, false, 0, 1 << 12);
    r.model.ffn_hidden = model.integer("ffn_hidden", 0, false, 0, 1 << 22);
    r.model.mlp = model.enumeration<MlpKind>("mlp", kMlpKindNames, MlpKind::Gelu, false);
    r.model.norm = model.enumeration<NormKind>("norm", kNormKindNames, NormKind::LayerNorm, false);
    r.model.norm_eps = model.number("norm_eps", 1e-5, false, 1e-30, 0.5);
    r.model.positions = model.enumeration<PositionKind>("positions", kPositionKindNames, PositionKind::Learned, false);
    r.model.rope_base = model.number("rope_base", 10000, false, 1, 1e12);
    r.model.bias = model.boolean("bias", true);
    r.model.qkv_bias = model.boolean("qkv_bias", false);
    r.model.qk_norm = model.boolean("qk_norm", false);
    r.model.sliding_window.size = model.integer("sliding_window", 0, false, 0, 1 << 16);
    for (const QJsonValue& v : model.json().value("sliding_layers").toArray())
        r.model.sliding_window.layers.push_back(v.toInt(-1));  // -1: not a layer, named by validate()
    r.model.tied_embeddings = model.boolean("tied_embeddings", true);
    r.model.causal = model.boolean("causal", true);
    r.model.encoder_decoder = model.boolean("encoder_decoder", false);
    r.model.decoder_layers = model.integer("decoder_layers", 0, false, 0, 1024);
    r.model.relative_buckets = model.integer("relative_buckets", 0, false, 0, 1 << 12);
    r.model.relative_max_distance = model.integer("relative_max_distance", 128, false, 1, 1 << 20);
    r.model.post_norm = model.boolean("post_norm", false);
    r.model.token_types = model.integer("token_types", 0, false, 0, 1 << 16);
    r.model.embedding_norm = model.boolean("embedding_norm", false);
    r.model.masked_lm = model.boolean("masked_lm", false);
    r.model.pooler = model.boolean("pooler", false);
    if (model.has("moe")) {
        JsonReader moe = model.object("moe", false);
        engine::MoeConfig& e = r.model.moe;
        e.experts = moe.integer("experts", 0, true, 1, 1 << 16);
        e.top_k = moe.integer("top_k", 0, true, 1, 1 << 16);
        e.expert_ffn = moe.integer("expert_ffn", 0, false, 0, 1 << 22);
        e.shared_experts = moe.integer("shared_experts", 0, false, 0, 1 << 12);
        e.shared_ffn = moe.integer("shared_ffn", 0, false, 0, 1 << 22);
        e.dense_layers = moe.integer("dense_layers", 0, false, 0, 1024);
        e.layer_interval = moe.integer("layer_interval", 1, false, 1, 1024);
        e.router = moe.enumeration<MoeRouter>("router", kMoeRouterNames, MoeRouter::SoftmaxNorm, false);
        e.capacity_factor = moe.number("capacity_factor", 0, false, 0, 1e6);
        e.aux_loss_coeff = moe.number("aux_loss_coeff", 0, false, 0, 1e6);
        e.score_correction_bias = moe.boolean("score_correction_bias", false);
        e.routed_scaling = moe.number("routed_scaling", 0, false, 0, 1e6);
        e.expert_groups = moe.integer("expert_groups", 0, false, 0, 64);
        e.group_top_k = moe.integer("group_top_k", 0, false, 0, 64);
    }
    if (model.has("mla")) {
        JsonReader mla = model.object("mla", false);
        engine::MlaConfig& a = r.model.mla;
        a.q_lora_rank = mla.integer("q_lora_rank", 0, false, 0, 1 << 16);
        a.kv_lora_rank = mla.integer("kv_lora_rank", 0, true, 1, 1 << 16);
        a.qk_nope_head_dim = mla.integer("qk_nope_head_dim", 0, true, 1, 1 << 12);
        a.qk_rope_head_dim = mla.integer("qk_rope_head_dim", 0, true, 2, 1 << 12);
        a.v_head_dim = mla.integer("v_head_dim", 0, true, 1, 1 << 12);
        a.softmax_mscale = mla.number("softmax_mscale", 1, false, 1e-6, 1e6);
    }
    if (model.has("mtp")) {
        JsonReader mtp = model.object("mtp", false);
        r.model.mtp.layers = mtp.integer("layers", 0, true, 1, 64);
        r.model.mtp.loss_scale = mtp.number("loss_scale", 0.1, false, 1e-9, 10);
    }
    r.batch = in.integer("batch", 1, true, 1, 1 << 20);
    r.steps = in.integer("steps", 1, false, 1, 1 << 20);
    if (const std::string text = in.string("precision", true); !text.empty()) {
        if (auto v = engine::precisionFromString(text))
            r.precision = *v;
        else
            in.error("precision", "unknown value \"" + text + "\" (fp32, bf16-mixed, bf16-rne, bf16-sr)");
    }
    r.fp32_gradients = in.boolean("fp32_gradients", false);
    std::optional<Recompute> recompute;  // older runs: beside the layout
    if (const std::string text = in.string("recompute", false); !text.empty()) {
        if (auto v = engine::recomputeFromString(text))
            recompute = *v;
        else
            in.error("recompute", "unknown value \"" + text + "\" (none, selective, full)");
    }
    {
        FieldErrors layoutErrors;
        r.layout = parseLayout(in.string("layout", true), layoutErrors);
        for (const FieldError& e : layoutErrors)
            errors.push_back({path.empty() ? e.path : path + "." + e.path, e.message});
        if (recompute && r.layout.recompute == Recompute::None)
            r.layout.recompute = *recompute;
    }
    JsonReader links = in.object("links", true);
    r.links.intra_bytes_per_second = links.number("intra_bytes_per_second", 0, false, 0, 1e18);
    r.links.inter_bytes_per_second = links.number("inter_bytes_per_second", 0, false, 0, 1e18);
    r.links.intra_latency_s = links.number("intra_latency_s", 0, false, 0, 1e3);
    r.links.inter_latency_s = links.number("inter_latency_s", 0, false, 0, 1e3);
    r.links.node_devices = links.integer("node_devices", 0, false, 0, 1 << 20);
    r.bucket_bytes = std::size_t(in.number("bucket_bytes", double(r.bucket_bytes), false, 1, 1e15));
    c.profile = profileFromJson(in.object("device", true));
    // Runs stored before the host was recorded have none: no wall-clock prediction for them.
    if (o.contains(QLatin1String("host"))) {
        JsonReader host = in.object("host", true);
        c.host.profile = profileFromJson(host.object("device", true));
        c.host.cores = host.integer("cores", 0, true, 1, 1 << 16);
    }
    if (!errors.empty())
        throw InputError(errors);
    return c;
}

ValidationResult validationResultFromJson(const QJsonObject& storedCase, const std::string& path)
{
    ValidationResult r;
    if (!storedCase.contains(QLatin1String("request")))
        throw InputError(path + ".request: missing (the run was stored before requests were kept)");
    r.c = validationCaseFromJson(storedCase.value(QLatin1String("request")).toObject(), path + ".request");
    r.c.name = storedCase.value(QLatin1String("name")).toString().toStdString();
    r.error = storedCase.value(QLatin1String("error")).toString().toStdString();
    const engine::TrainRequest& req = r.c.request;
    r.problem = emulatedProblem(req.model, req.batch, req.precision, req.fp32_gradients, r.c.profile, req.links,
                                int(req.layout.devices()));
    // The MoE step load the run measured (stored since the engine measures it): the engine fit
    // prices the case at it. A run stored before has none and is priced at the stated imbalance.
    const QJsonValue stepLoad = storedCase.value(QLatin1String("moe")).toObject().value(QLatin1String("step_load"));
    if (!stepLoad.isUndefined()) {
        if (!stepLoad.isDouble() || !(stepLoad.toDouble() >= 1.0) || !std::isfinite(stepLoad.toDouble()))
            throw InputError(path + ".moe.step_load: must be a number >= 1 (the busiest ep rank's copies over the "
                                    "mean), not " +
                             (stepLoad.isDouble() ? std::to_string(stepLoad.toDouble()) : std::string("a non-number")));
        r.moe_step_load = stepLoad.toDouble();
    }
    const QJsonObject metrics = storedCase.value(QLatin1String("metrics")).toObject();
    for (auto it = metrics.begin(); it != metrics.end(); ++it) {
        const QJsonObject m = it.value().toObject();
        // A measurement stored without a prediction (compared false, predicted null) stays one.
        const bool compared = m.value(QLatin1String("compared")).toBool(true);
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const QJsonValue error = m.value(QLatin1String("rel_error"));
        r.metrics.push_back({it.key().toStdString(), compared ? m.value(QLatin1String("predicted")).toDouble() : nan,
                             m.value(QLatin1String("measured")).toDouble(), error.isDouble() ? error.toDouble() : nan,
                             m.value(QLatin1String("worst_device")).toInt(-1), compared});
    }
    return r;
}

} // namespace shardscope
