// The model-format fields beyond a Llama (norm epsilon, QKV-only bias, QK-norm, sliding window,
// attention sinks, RoPE scaling, mixture of experts) as Megatron Core settings, one list for
// Megatron-LM's pretrain_gpt.py options and Megatron-Bridge's GPTModelProvider fields (and
// multi-token prediction).
//
// Looked up in NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553:
//   megatron/core/transformer/transformer_config.py: TransformerConfig fields, which
//     megatron/training/arguments.py turns into options through ArgumentGroupFactory
//     (megatron/training/argument_utils.py: "--" + name with '_' -> '-', or the field's
//     argparse_meta arg_names): layernorm_epsilon (--norm-epsilon), add_qkv_bias, qk_layernorm,
//     softmax_type (vanilla | off-by-one | learnable), moe_router_topk, moe_ffn_hidden_size,
//     moe_shared_expert_intermediate_size ("num_shared_experts * ffn_size_of_each_shared_expert"),
//     moe_grouped_gemm, moe_token_dispatcher_type (allgather | alltoall | flex),
//     moe_router_pre_softmax, moe_router_score_function (softmax | sigmoid | sqrtsoftplus),
//     moe_expert_capacity_factor (None: dropless);
//   megatron/training/arguments.py: --window-size (tuple_type "a,b"), --window-attn-skip-freq and
//     --moe-layer-freq (moe_freq_type: an int or a Python list expression, 1 = SWA / expert
//     layer), --moe-aux-loss-coeff, --use-rope-scaling with --rope-scaling-factor (llama3.x),
//     --position-embedding-type yarn with --rotary-scaling-factor (argument_utils.py sets
//     yarn_rotary_scaling_factor from it), --yarn-original-max-position-embeddings,
//     --yarn-beta-fast, --yarn-beta-slow, --no-yarn-correction-range-round-to-int,
//     --rotary-seq-len-interpolation-factor (an int);
//   megatron/core/models/common/embeddings/rotary_pos_embedding.py: the llama3.x scaling keeps
//     low_freq_factor 1, high_freq_factor 4 and original_max_position_embeddings 8192 (GPTModel
//     passes only the factor);
//   megatron/core/transformer/moe/moe_utils.py (topk_routing_with_score_function): softmax over
//     the top-k logits by default (renormalised, as Mixtral), softmax before top-k with
//     moe_router_pre_softmax (not renormalised), sigmoid scores always renormalised when top_k > 1.
//   multi-head latent attention: --multi-latent-attention (TransformerConfig field) selects
//     MLATransformerConfig (transformer_config.py), whose q_lora_rank, kv_lora_rank, qk_head_dim
//     (the no-RoPE part), qk_pos_emb_head_dim, v_head_dim come from _add_mla_args' options, and
//     --rotary-scaling-factor, --mscale, --mscale-all-dim likewise; --rope-type rope|yarn
//     (arguments.py; argument_utils.py asserts yarn only with MLA). Its YaRN
//     original_max_position_embeddings 4096, beta_fast 32 and beta_slow 1 have no option (MLA
//     does not read the --yarn-* ones: argument_utils.py _apply_yarn_config_from_args returns
//     for MLA; Megatron-Bridge's MLAModelProvider (src/megatron/bridge/models/mla_provider.py @
//     067f987d: MLATransformerConfig + GPTModelProvider) takes them as fields, and its DeepSeek-V3
//     bridge sets qk_layernorm True, models/deepseek/deepseek_v3_bridge.py); GPTModel builds no
//     rotary embedding of its own for MLA with --position-embedding-type rope (megatron/core/models/gpt/gpt_model.py: "rope" and not
//     multi_latent_attention; "yarn" would build one from the non-MLA yarn_* fields), and the
//     latent norms q_layernorm / kv_layernorm exist only with --qk-layernorm
//     (megatron/core/models/gpt/gpt_layer_specs.py: linear_q_up_proj and linear_kv_up_proj become
//     column_parallel_layer_norm_linear), as examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh
//     passes them;
//   moe_router_load_balancing_type (aux_loss | seq_aux_loss | global_aux_loss | sinkhorn |
//     quantile_balancing | none; an option of _add_moe_args, nargs '+'), moe_token_drop_policy
//     (probs | position), moe_expert_capacity_factor only with aux_loss, seq_aux_loss,
//     global_aux_loss or none (__post_init__), "Please use --moe-router-pre-softmax when topk is 1"
//     with the softmax score function (__post_init__); moe_router_force_load_balancing (random
//     logits, "only for benchmark") is not written: the plan does not ask for it;
//   moe_router_enable_expert_bias (aux-loss-free balancing, sigmoid scores),
//     moe_router_num_groups / moe_router_group_topk (groups scored by the sum of their top
//     topk / group_topk scores), moe_router_topk_scaling_factor.
// window_size is (left, right) keys around the query: a window of `size` keys is (size - 1, 0).
// NVIDIA-NeMo/Megatron-Bridge at commit 067f987d, src/megatron/bridge/models/gpt_provider.py:
// GPTModelProvider(TransformerConfig) adds rope_scaling, rope_scaling_factor and
// seq_len_interpolation_factor; its YaRN fields are not written by this export (refused).
#include "MegatronModelFields.h"

#include <cmath>

namespace shardscope::exportdetail {

namespace {

// A 0/1 pattern as a Python list expression of runs: "[0]*3+[1]*58".
std::string runPattern(const std::vector<int>& bits)
{
    std::string out;
    for (size_t i = 0; i < bits.size();) {
        size_t j = i;
        while (j < bits.size() && bits[j] == bits[i])
            ++j;
        if (!out.empty())
            out += '+';
        out += '[';
        out += str(bits[i]);
        out += "]*";
        out += str(std::int64_t(j - i));
        i = j;
    }
    return out;
}

// MLA's options and MLATransformerConfig fields, with its RoPE: plain or YaRN. Megatron-LM has
// no options for YaRN's original length and betas (MLATransformerConfig keeps 4096, 32 and 1);
// Megatron-Bridge's MLAModelProvider takes them as fields. q_lora_rank None: one q projection
// (the option's default; the field's default is 512, so the field is written).
void megatronMlaSettings(Refusals& refuse, const ModelSpec& m, bool bridge, std::vector<CoreSetting>& out)
{
    auto both = [&](const char* option, const std::string& value, const char* field) {
        out.push_back({option, value, field, value});
    };
    const MlaSpec& a = m.mla;
    out.push_back({"--multi-latent-attention", "", "multi_latent_attention", "True"});
    out.push_back({"--qk-layernorm", "", "qk_layernorm", "True"});  // the q and kv latents' norms
    if (a.q_lora_rank > 0)
        both("--q-lora-rank", str(a.q_lora_rank), "q_lora_rank");
    else
        out.push_back({"", "", "q_lora_rank", "None"});
    both("--kv-lora-rank", str(a.kv_lora_rank), "kv_lora_rank");
    both("--qk-head-dim", str(a.qk_nope_head_dim), "qk_head_dim");
    both("--qk-pos-emb-head-dim", str(a.qk_rope_head_dim), "qk_pos_emb_head_dim");
    both("--v-head-dim", str(a.v_head_dim), "v_head_dim");
    const RopeScaling& rs = m.rope_scaling;
    if (!rs.enabled()) {
        out.push_back({"--rope-type", "rope", "rope_type", "\"rope\""});
        return;
    }
    if (rs.type != RopeScalingKind::Yarn) {
        refuse.add(std::string(toString(rs.type)) + " RoPE scaling with multi-head latent attention",
                   "Megatron's MLA takes rope or yarn (--rope-type)");
        return;
    }
    if (!rs.truncate || rs.attention_factor != 0)
        refuse.add(std::string("YaRN") + (rs.truncate ? "" : " without truncation") +
                       (rs.attention_factor != 0 ? " with attention_factor " + num(rs.attention_factor) : ""),
                   "Megatron's MLA rounds the correction range and derives the attention scale from mscale");
    const int original = rs.original_max_position_embeddings > 0 ? rs.original_max_position_embeddings : 4096;
    const double fast = rs.beta_fast > 0 ? rs.beta_fast : 32, slow = rs.beta_slow > 0 ? rs.beta_slow : 1;
    if (!bridge && (original != 4096 || fast != 32 || slow != 1))
        refuse.add("YaRN with original_max_position_embeddings " + str(original) + ", beta_fast " + num(fast) +
                       ", beta_slow " + num(slow),
                   "Megatron's MLA keeps 4096, 32 and 1 (MLATransformerConfig has no options for them)");
    out.push_back({"--rope-type", "yarn", "rope_type", "\"yarn\""});
    both("--rotary-scaling-factor", num(rs.factor), "rotary_scaling_factor");
    both("--mscale", num(rs.mscale != 0 ? rs.mscale : 1.0), "mscale");
    both("--mscale-all-dim", num(rs.mscale_all_dim), "mscale_all_dim");
    if (bridge) {
        out.push_back({"", "", "original_max_position_embeddings", str(original)});
        out.push_back({"", "", "beta_fast", num(fast)});
        out.push_back({"", "", "beta_slow", num(slow)});
    }
}

} // namespace

std::string megatronPositionType(const ModelSpec& m)
{
    if (m.positions != PositionKind::Rotary)
        return "learned_absolute";
    if (m.mla.enabled())
        return "rope";  // MLA rotates in its own attention, yarn or not (--rope-type)
    return m.rope_scaling.type == RopeScalingKind::Yarn ? "yarn" : "rope";
}

std::vector<CoreSetting> megatronModelSettings(Refusals& refuse, const ModelSpec& m, bool bridge)
{
    std::vector<CoreSetting> out;
    auto flag = [&](const char* option, const char* field) { out.push_back({option, "", field, "True"}); };
    auto value = [&](const char* option, const std::string& cli, const char* field, const std::string& py) {
        out.push_back({option, cli, field, py});
    };

    value("--norm-epsilon", num(m.norm_eps), "layernorm_epsilon", num(m.norm_eps));
    if (m.qkv_bias && !m.bias)
        flag("--add-qkv-bias", "add_qkv_bias");
    if (m.qk_norm)
        flag("--qk-layernorm", "qk_layernorm");  // the norm of --normalization, as the model's
    if (m.attention_sinks)
        value("--softmax-type", "learnable", "softmax_type", "\"learnable\"");
    if (m.sliding_window.enabled()) {
        const std::string left = str(m.sliding_window.size - 1);
        value("--window-size", left + ",0", "window_size", "(" + left + ", 0)");
        if (!m.sliding_window.layers.empty()) {
            std::vector<int> bits;
            for (int i = 0; i < m.layers; ++i)
                bits.push_back(m.slidingLayer(i) ? 1 : 0);
            const std::string pattern = runPattern(bits);
            value("--window-attn-skip-freq", "'" + pattern + "'", "window_attn_skip_freq", pattern);
        }
    }

    const RopeScaling& rs = m.rope_scaling;
    if (m.mla.enabled()) {
        megatronMlaSettings(refuse, m, bridge, out);
    } else if (m.positions == PositionKind::Rotary && rs.enabled()) {
        switch (rs.type) {
        case RopeScalingKind::Llama3:
            if ((rs.low_freq_factor != 0 && rs.low_freq_factor != 1) ||
                (rs.high_freq_factor != 0 && rs.high_freq_factor != 4) ||
                (rs.original_max_position_embeddings != 0 && rs.original_max_position_embeddings != 8192))
                refuse.add("llama3 RoPE scaling with low_freq_factor " + num(rs.low_freq_factor) +
                               ", high_freq_factor " + num(rs.high_freq_factor) +
                               ", original_max_position_embeddings " + str(rs.original_max_position_embeddings),
                           "Megatron's llama3.x scaling keeps 1, 4 and 8192 (rotary_pos_embedding.py)");
            flag("--use-rope-scaling", "rope_scaling");
            value("--rope-scaling-factor", num(rs.factor), "rope_scaling_factor", num(rs.factor));
            break;
        case RopeScalingKind::Linear:
            if (rs.factor != std::floor(rs.factor))
                refuse.add("linear RoPE scaling by " + num(rs.factor),
                           "--rotary-seq-len-interpolation-factor takes an integer");
            value("--rotary-seq-len-interpolation-factor", num(rs.factor), "seq_len_interpolation_factor",
                  num(rs.factor));
            break;
        case RopeScalingKind::Yarn:
            if (bridge) {
                refuse.add("YaRN RoPE scaling", "the export writes no Megatron-Bridge YaRN fields");
                break;
            }
            if (rs.attention_factor != 0)
                refuse.add("a YaRN attention_factor of " + num(rs.attention_factor),
                           "Megatron derives the attention scale from --mscale, not a given factor");
            value("--rotary-scaling-factor", num(rs.factor), "", "");
            if (rs.original_max_position_embeddings > 0)
                value("--yarn-original-max-position-embeddings", str(rs.original_max_position_embeddings), "", "");
            if (rs.beta_fast != 0)
                value("--yarn-beta-fast", num(rs.beta_fast), "", "");
            if (rs.beta_slow != 0)
                value("--yarn-beta-slow", num(rs.beta_slow), "", "");
            if (rs.mscale != 0)
                value("--mscale", num(rs.mscale), "", "");
            if (rs.mscale_all_dim != 0)
                value("--mscale-all-dim", num(rs.mscale_all_dim), "", "");
            if (!rs.truncate)
                flag("--no-yarn-correction-range-round-to-int", "");
            break;
        case RopeScalingKind::Dynamic:
            refuse.add("dynamic (NTK) RoPE scaling", "Megatron has llama3.x, YaRN and linear interpolation only");
            break;
        case RopeScalingKind::None: break;
        }
    }

    if (m.moe.enabled()) {
        const MoeSpec& e = m.moe;
        value("--moe-ffn-hidden-size", str(m.expertFfn()), "moe_ffn_hidden_size", str(m.expertFfn()));
        if (e.shared_experts > 0) {
            const std::string shared = str(std::int64_t(e.shared_experts) * e.shared_ffn_hidden);
            value("--moe-shared-expert-intermediate-size", shared, "moe_shared_expert_intermediate_size", shared);
        }
        if (e.dense_layers > 0 || e.layer_interval > 1) {
            std::vector<int> bits;
            for (int i = 0; i < m.layers; ++i)
                bits.push_back(m.moeLayer(i) ? 1 : 0);
            const std::string pattern = runPattern(bits);
            value("--moe-layer-freq", "'" + pattern + "'", "moe_layer_freq", pattern);
        }
        switch (e.router) {
        case MoeRouter::SoftmaxNorm: break;  // the default: softmax over the top-k logits
        case MoeRouter::Softmax: flag("--moe-router-pre-softmax", "moe_router_pre_softmax"); break;
        case MoeRouter::SigmoidNorm:
            value("--moe-router-score-function", "sigmoid", "moe_router_score_function", "\"sigmoid\"");
            break;
        case MoeRouter::Sigmoid:
            if (e.top_k > 1)
                refuse.add("sigmoid routing without renormalisation (top_k " + str(e.top_k) + ")",
                           "Megatron renormalises sigmoid scores over the top k when k > 1");
            value("--moe-router-score-function", "sigmoid", "moe_router_score_function", "\"sigmoid\"");
            break;
        }
        if (e.score_correction_bias)
            flag("--moe-router-enable-expert-bias", "moe_router_enable_expert_bias");
        if (e.expert_groups > 0) {
            // DeepSeek scores a group by its top 2 (transformers' DeepseekV3MoE); Megatron by its
            // top topk / group_topk.
            if (e.top_k != 2 * e.group_top_k)
                refuse.add("group-limited routing with top_k " + str(e.top_k) + " over " + str(e.group_top_k) + " groups",
                           "Megatron scores a group by its top top_k / group_top_k experts, the model by its top 2");
            value("--moe-router-num-groups", str(e.expert_groups), "moe_router_num_groups", str(e.expert_groups));
            value("--moe-router-group-topk", str(e.group_top_k), "moe_router_group_topk", str(e.group_top_k));
        }
        if (e.routed_scaling > 0)
            value("--moe-router-topk-scaling-factor", num(e.routed_scaling), "moe_router_topk_scaling_factor",
                  num(e.routed_scaling));
        // Top 1 of a softmax over the chosen logit is a weight of 1 with no gradient, which
        // TransformerConfig refuses ("Please use --moe-router-pre-softmax when topk is 1").
        if (e.top_k == 1 && e.router == MoeRouter::SoftmaxNorm)
            refuse.add("top-1 routing renormalised over the one chosen expert (router softmax_norm)",
                       "TransformerConfig asks for --moe-router-pre-softmax at top_k 1, a softmax over all experts");
        // The load-balancing loss the model trains: the micro-batch one of GShard / Switch
        // (Megatron's "aux_loss", switch_load_balancing_loss_func, as the engine computes it),
        // or none without a coefficient. The model format has no sequence-wise loss ("seq_aux_loss").
        const std::string balancing = e.aux_loss_coeff > 0 ? "aux_loss" : "none";
        value("--moe-router-load-balancing-type", balancing, "moe_router_load_balancing_type",
              "\"" + balancing + "\"");
        if (e.capacity_factor > 0) {
            value("--moe-expert-capacity-factor", num(e.capacity_factor), "moe_expert_capacity_factor",
                  num(e.capacity_factor));
            // Over capacity the copies of lowest router probability are dropped (Megatron's
            // default "probs", written out); the experts' inputs are not padded to the capacity
            // (moe_pad_expert_input_to_capacity stays False).
            value("--moe-token-drop-policy", "probs", "moe_token_drop_policy", "\"probs\"");
        }
        value("--moe-aux-loss-coeff", num(e.aux_loss_coeff), "moe_aux_loss_coeff", num(e.aux_loss_coeff));
        // The experts of a layer as one grouped GEMM: it does not change the trained model. (The
        // token dispatcher is the layout's: megatronDispatcherSettings.)
        flag("--moe-grouped-gemm", "moe_grouped_gemm");
    }
    // Multi-token prediction (ModelSpec.h MtpSpec): TransformerConfig.mtp_num_layers and
    // mtp_loss_scaling_factor (transformer_config.py @ d98e8a64), options through
    // ArgumentGroupFactory (arguments.py: not excluded); Megatron places the MTP layers on the last
    // pipeline stage (multi_token_prediction.py mtp_on_this_rank), as the planner prices them.
    if (m.mtp.enabled()) {
        value("--mtp-num-layers", str(m.mtp.layers), "mtp_num_layers", str(m.mtp.layers));
        value("--mtp-loss-scaling-factor", num(m.mtp.loss_scale), "mtp_loss_scaling_factor", num(m.mtp.loss_scale));
    }
    return out;
}

std::vector<CoreSetting> megatronDispatcherSettings(const ModelSpec& m, const Layout& l)
{
    std::vector<CoreSetting> out;
    if (!m.moe.enabled())
        return out;
    // TransformerConfig.moe_token_dispatcher_type (allgather | alltoall | flex) and, for flex,
    // moe_flex_dispatcher_backend (deepep | hybridep | ncclep), transformer_config.py @ d98e8a64, options
    // through ArgumentGroupFactory; moe_enable_deepep is deprecated there ("Please use
    // --moe-flex-dispatcher-backend=deepep instead"), so it is not written. Megatron-Bridge's
    // apply_flex_dispatcher_backend (src/megatron/bridge/training/flex_dispatcher_backend.py @ 067f987d)
    // sets the same two fields. None of them changes the trained model.
    const bool flex = flexDispatcher(l.moe_dispatcher);
    const std::string type = flex ? "flex" : toString(l.moe_dispatcher);
    out.push_back({"--moe-token-dispatcher-type", type, "moe_token_dispatcher_type", "\"" + type + "\""});
    if (flex) {
        const std::string backend = toString(l.moe_dispatcher);
        out.push_back({"--moe-flex-dispatcher-backend", backend, "moe_flex_dispatcher_backend", "\"" + backend + "\""});
    }
    return out;
}

} // namespace shardscope::exportdetail
