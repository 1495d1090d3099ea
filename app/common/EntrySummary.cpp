#include "EntrySummary.h"
#include "Units.h"

#include <cstdio>

namespace shardscope {

namespace {

std::string usd(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "$%.2f", v);
    return buf;
}

std::string attentionKind(const ModelSpec& m)
{
    if (m.mla.enabled())
        return "MLA " + std::to_string(m.heads);
    if (m.kv_heads == m.heads)
        return "MHA " + std::to_string(m.heads);
    if (m.kv_heads == 1)
        return "MQA " + std::to_string(m.heads) + "/1";
    return "GQA " + std::to_string(m.heads) + "/" + std::to_string(m.kv_heads);
}

std::string sourceOf(const std::map<std::string, std::string>& sources, const std::string& field)
{
    auto it = sources.find(field);
    return it == sources.end() ? std::string() : "  [" + it->second + "]";
}

// "%g" of a double: 1e-05, 500000.
std::string numberText(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

std::string positionsText(const ModelSpec& m)
{
    std::string s = toString(m.positions);
    if (m.positions != PositionKind::Rotary)
        return s;
    s += ", base " + numberText(m.rope_base);
    const RopeScaling& r = m.rope_scaling;
    if (r.enabled()) {
        s.append(", ").append(toString(r.type)).append(" scaling x").append(numberText(r.factor));
        if (r.original_max_position_embeddings > 0)
            s += " from " + formatCount(r.original_max_position_embeddings);
    }
    return s;
}

} // namespace

std::string summarize(const ModelSpec& m)
{
    std::string s = toString(m.family);
    if (m.family == ModelFamily::EncoderDecoder)
        s += ", " + std::to_string(m.layers) + "+" + std::to_string(m.decoder_layers) + " layers";
    else
        s += ", " + std::to_string(m.layers) + " layers";
    s += ", hidden " + std::to_string(m.hidden) + ", " + attentionKind(m) + ", " + toString(m.mlp);
    if (m.moe.enabled())
        s += ", MoE " + std::to_string(m.moe.experts) + " experts top-" + std::to_string(m.moe.top_k);
    const ParameterBreakdown p = parameterBreakdown(m);
    s += ", " + formatCount(p.total) + " parameters";
    if (m.moe.enabled())  // what a token uses: the top k of each MoE block's routed experts
        s += " (" + formatCount(p.active_per_token) + " active)";
    return s;
}

std::string summarize(const ChipSpec& c)
{
    std::string s;
    if (c.peak_flops_bf16 > 0)
        s += "bf16 " + formatSi(c.peak_flops_bf16, "FLOP/s");
    else if (c.peak_flops_fp32 > 0)
        s += "fp32 " + formatSi(c.peak_flops_fp32, "FLOP/s");
    s += ", " + formatBytes(c.hbm_bytes) + " HBM at " + formatSi(c.hbm_bytes_per_second, "B/s");
    if (c.devices_per_chip > 1)
        s += ", " + std::to_string(c.devices_per_chip) + " devices per chip";
    return s;
}

std::string summarize(const NodeType& n)
{
    std::string s = std::to_string(n.chips_per_node) + " x " + n.chip.name;
    if (n.chip.devices_per_chip > 1)
        s.append(" (").append(std::to_string(n.devicesPerNode())).append(" devices)");
    // append() rather than "literal" + string: GCC 12 warns falsely (-Wrestrict) on the latter.
    s.append(", ").append(toString(n.intra_topology));
    if (n.intra_link_bytes_per_second > 0)
        s.append(" ").append(formatSi(n.intra_link_bytes_per_second, "B/s")).append(" per chip");
    s.append(", network ").append(n.inter_node_bytes_per_second > 0 ? formatSi(n.inter_node_bytes_per_second, "B/s")
                                                                     : std::string("not published"));
    if (n.price_per_node_hour_usd > 0)
        s += ", " + usd(n.price_per_node_hour_usd) + "/h";
    return s;
}

std::string summarize(const SpecLookup& specs, const CatalogEntry& e)
{
    try {
        switch (e.kind) {
        case EntryKind::Model: return summarize(specs.model(e.name));
        case EntryKind::Chip: return summarize(specs.chip(e.name));
        case EntryKind::Node: return summarize(specs.node(e.name));
        }
    } catch (const std::exception& ex) {
        return std::string("(invalid: ") + ex.what() + ")";
    }
    return {};
}

std::vector<std::pair<std::string, std::string>> describe(const ModelSpec& m)
{
    const ParameterBreakdown p = parameterBreakdown(m);
    std::vector<std::pair<std::string, std::string>> rows{
        {"name", m.name},
        {"display name", m.display_name},
        {"family", toString(m.family)},
        {"layers", m.family == ModelFamily::EncoderDecoder
                       ? std::to_string(m.layers) + " encoder + " + std::to_string(m.decoder_layers) + " decoder"
                       : std::to_string(m.layers)},
        {"hidden", std::to_string(m.hidden)},
        {"attention", attentionKind(m) + " heads, head dim " + std::to_string(m.head_dim)},
        {"MLP", std::string(toString(m.mlp)) + ", ffn " + std::to_string(m.ffn_hidden)},
        {"vocabulary", formatCount(m.vocab)},
        {"max sequence", formatCount(m.max_seq)},
        {"positions", positionsText(m)},
        {"norm", std::string(toString(m.norm)) + " (eps " + numberText(m.norm_eps) + ")" +
                     (m.bias ? ", linear biases" : m.qkv_bias ? ", biases on q, k and v only" : ", no linear biases")},
        {"embeddings", m.tied_embeddings ? "tied to the LM head" : "untied LM head"},
    };
    if (m.mla.enabled()) {
        const MlaSpec& a = m.mla;
        rows.emplace_back("latent attention",
                          (a.q_lora_rank > 0 ? "q rank " + std::to_string(a.q_lora_rank) : std::string("no q compression")) +
                              ", kv rank " + std::to_string(a.kv_lora_rank) + "; per head q/k " +
                              std::to_string(a.qk_nope_head_dim) + " + RoPE " + std::to_string(a.qk_rope_head_dim) +
                              ", v " + std::to_string(a.v_head_dim));
    }
    if (m.qk_norm)
        rows.emplace_back("QK-norm", std::string(toString(m.norm)) + " over head dim " + std::to_string(m.head_dim) +
                                         " on every query and key head");
    if (m.attention_sinks)
        rows.emplace_back("attention sinks", "one learned logit per query head and layer");
    if (m.sliding_window.enabled())
        rows.emplace_back("sliding window", formatCount(m.sliding_window.size) + " keys on " +
                                                (m.sliding_window.layers.empty()
                                                     ? std::string("every layer")
                                                     : std::to_string(m.sliding_window.layers.size()) + " of " +
                                                           std::to_string(m.layers) + " layers"));
    if (m.moe.enabled()) {
        const MoeSpec& e = m.moe;
        std::string text = std::to_string(e.experts) + " experts of ffn " + std::to_string(m.expertFfn()) + ", top-" +
                           std::to_string(e.top_k) + " per token (" + toString(e.router) + ")";
        if (e.shared_experts > 0)
            text += ", " + std::to_string(e.shared_experts) + " shared of " + std::to_string(e.shared_ffn_hidden);
        if (e.dense_layers > 0 || e.layer_interval > 1)
            text += ", in " + std::to_string(m.moeLayers(0, m.layers)) + " of " + std::to_string(m.layers) + " layers";
        text += e.capacity_factor > 0 ? ", capacity factor " + numberText(e.capacity_factor) : std::string(", dropless");
        rows.emplace_back("mixture of experts", text);
    }
    rows.emplace_back("parameters", formatCount(p.total));
    rows.emplace_back("  embeddings", formatCount(p.embeddings));
    rows.emplace_back("  layers", formatCount(p.layers_total));
    if (p.lm_head)
        rows.emplace_back("  LM head", formatCount(p.lm_head));
    if (m.moe.enabled())
        rows.emplace_back("active per token", formatCount(p.active_per_token) + " (top " + std::to_string(m.moe.top_k) +
                                                  " of " + std::to_string(m.moe.experts) + " routed experts)");
    rows.emplace_back("forward FLOPs/token",
                      formatSi(double(forwardFlopsPerToken(m, m.max_seq)), "FLOP") + " at seq " +
                          std::to_string(m.max_seq));
    if (!m.source.empty())
        rows.emplace_back("source", m.source);
    return rows;
}

std::vector<std::pair<std::string, std::string>> describe(const ChipSpec& c)
{
    std::vector<std::pair<std::string, std::string>> rows{{"name", c.name}, {"display name", c.display_name},
                                                          {"vendor", c.vendor}};
    auto peak = [&](const char* type, double v) {
        if (v > 0)
            rows.emplace_back(std::string("peak ") + type, formatSi(v, "FLOP/s") +
                                                                sourceOf(c.sources, std::string("peak_flops.") + type));
    };
    peak("bf16", c.peak_flops_bf16);
    peak("fp16", c.peak_flops_fp16);
    peak("fp8", c.peak_flops_fp8);
    peak("fp4", c.peak_flops_fp4);
    peak("fp32", c.peak_flops_fp32);
    {
        std::string recipes;
        for (const std::string& r : c.low_precision_recipes)
            recipes += (recipes.empty() ? "" : ", ") + r;
        rows.emplace_back("FP8/FP4 recipes", (recipes.empty() ? std::string("none") : recipes) +
                                                 sourceOf(c.sources, "low_precision_recipes"));
    }
    rows.emplace_back("HBM", formatBytes(c.hbm_bytes) + sourceOf(c.sources, "hbm_bytes"));
    rows.emplace_back("HBM bandwidth", formatSi(c.hbm_bytes_per_second, "B/s") +
                                           sourceOf(c.sources, "hbm_bytes_per_second"));
    rows.emplace_back("devices per chip",
                      std::to_string(c.devices_per_chip) + sourceOf(c.sources, "devices_per_chip"));
    return rows;
}

std::vector<std::pair<std::string, std::string>> describe(const NodeType& n)
{
    auto known = [](double v, const std::string& text) { return v > 0 ? text : std::string("not published"); };
    return {
        {"name", n.name},
        {"display name", n.display_name},
        {"chip", n.chip.name + " (" + summarize(n.chip) + ")"},
        {"chips per node", std::to_string(n.chips_per_node) + sourceOf(n.sources, "chips_per_node")},
        {"devices per node", std::to_string(n.devicesPerNode())},
        {"intra-node topology", std::string(toString(n.intra_topology)) + sourceOf(n.sources, "intra_topology")},
        {"intra-node link", known(n.intra_link_bytes_per_second,
                                  formatSi(n.intra_link_bytes_per_second, "B/s") + " per chip, one direction" +
                                      sourceOf(n.sources, "intra_link_bytes_per_second"))},
        {"scale-up domain", std::to_string(n.scaleUpChips()) + " chips" + sourceOf(n.sources, "scale_up_chips")},
        {"network per node", known(n.inter_node_bytes_per_second,
                                   formatSi(n.inter_node_bytes_per_second, "B/s") + " one direction" +
                                       sourceOf(n.sources, "inter_node_bytes_per_second"))},
        {"host link", known(n.host_link_bytes_per_second,
                            formatSi(n.host_link_bytes_per_second, "B/s") + " per chip, one direction" +
                                sourceOf(n.sources, "host_link_bytes_per_second"))},
        {"price per node-hour",
         known(n.price_per_node_hour_usd, usd(n.price_per_node_hour_usd) +
                                              (n.price_kind.empty() ? "" : " (" + n.price_kind + ")") +
                                              sourceOf(n.sources, "price_per_node_hour_usd"))},
    };
}

} // namespace shardscope
