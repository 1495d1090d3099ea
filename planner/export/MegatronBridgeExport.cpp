// Megatron-Bridge: a Python recipe, a function returning a ConfigContainer, run by pretrain().
//
// Names from NVIDIA-NeMo/Megatron-Bridge at commit 067f987df03b8355b03192d88d70f1709fedf51a:
//   src/megatron/bridge/recipes/common.py: _pretrain_common(), the template every library recipe
//     starts from ("The caller MUST set cfg.model and cfg.tokenizer.tokenizer_model"), with
//     mixed_precision "bf16_mixed", ddp.overlap_grad_reduce / overlap_param_gather on;
//   src/megatron/bridge/recipes/llama/h100/llama3.py: how a recipe sets cfg.model.<parallel sizes>,
//     cfg.train.global_batch_size / micro_batch_size, cfg.dataset.seq_length, the NullTokenizer
//     with a vocab_size, cfg.ddp.use_distributed_optimizer / use_megatron_fsdp /
//     data_parallel_sharding_strategy ("no_shard" without Megatron-FSDP);
//   src/megatron/bridge/models/gpt_provider.py: GPTModelProvider(TransformerConfig, ...) with
//     position_embedding_type, rotary_base, share_embeddings_and_output_weights, vocab_size,
//     seq_length, num_moe_experts; the TransformerConfig fields of Megatron Core (num_layers,
//     hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, kv_channels,
//     normalization, gated_linear_unit, activation_func, add_bias_linear, hidden_dropout,
//     attention_dropout, tensor/pipeline/virtual_pipeline/context parallel sizes,
//     sequence_parallel, recompute_granularity / recompute_method / recompute_num_layers,
//     moe_router_topk);
//   src/megatron/bridge/training/mixed_precision.py: the registered recipes bf16_mixed,
//     fp16_mixed, bf16_with_fp8_delayed_scaling_mixed (fp8 "hybrid", as the Megatron export);
//   src/megatron/bridge/training/config.py: Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS
//     "> 1 or unset" and the fsdp_dtensor checkpoint format; ddp.num_distributed_optimizer_instances;
//     optimizer.optimizer_cpu_offload; ConfigContainer.env_vars (defaults set before the run);
//   src/megatron/bridge/training/comm_overlap.py: CommOverlapConfig(tp_comm_overlap);
//   tutorials/recipes/llama/00_quickstart_pretrain.py: pretrain(config=..., forward_step_func=
//     forward_step) under torchrun.
// What Megatron Core cannot run is refused as for Megatron-LM (refuseMegatronCoreLimits).
#include "ExportCommon.h"
#include "MegatronModelFields.h"

namespace shardscope::exportdetail {

ExportResult exportMegatronBridge(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("megatron-bridge", r);
    refuseMegatronCoreLimits(refuse, p, l);
    if (refuse.any())
        return r;
    const ModelSpec& m = p.model;
    const Figures f = figures(p, l);
    const bool megatronFsdp = l.zero_stage >= 2;

    std::vector<std::string> model;  // GPTModelProvider keyword arguments
    auto kw = [&](const std::string& name, const std::string& value) { model.push_back(name + "=" + value); };
    kw("num_layers", str(m.layers));
    kw("hidden_size", str(m.hidden));
    kw("ffn_hidden_size", str(m.ffn_hidden));
    kw("num_attention_heads", str(m.heads));
    kw("num_query_groups", str(m.kv_heads));
    if (!m.mla.enabled())  // (MLA: its own head sizes, MegatronModelFields.cpp)
        kw("kv_channels", str(m.head_dim));
    kw("normalization", m.norm == NormKind::RmsNorm ? "\"RMSNorm\"" : "\"LayerNorm\"");
    if (m.mlp == MlpKind::SwiGlu) {
        kw("gated_linear_unit", "True");
        kw("activation_func", "F.silu");
    }
    kw("add_bias_linear", pyBool(m.bias));
    kw("share_embeddings_and_output_weights", pyBool(m.tied_embeddings));
    std::string positionType = "\"";
    positionType += megatronPositionType(m);
    positionType += '"';
    kw("position_embedding_type", positionType);
    if (m.positions == PositionKind::Rotary)
        kw("rotary_base", num(m.rope_base));
    kw("vocab_size", str(m.vocab));
    kw("seq_length", str(p.training.seq_len));
    if (!p.training.dropout) {
        kw("hidden_dropout", "0.0");
        kw("attention_dropout", "0.0");
    }
    if (m.moe.enabled()) {
        kw("num_moe_experts", str(m.moe.experts));
        kw("moe_router_topk", str(m.moe.top_k));
    }
    // norm_eps, qkv bias, qk_norm, sinks, sliding window, RoPE scaling, the rest of MoE
    // (MegatronModelFields.cpp).
    for (const CoreSetting& s : megatronModelSettings(refuse, m, true))
        if (!s.field.empty())  // (an option without a field: Megatron-LM's)
            kw(s.field, s.py_value);
    for (const CoreSetting& s : megatronDispatcherSettings(m, l))
        kw(s.field, s.py_value);
    kw("tensor_model_parallel_size", str(l.tp));
    kw("pipeline_model_parallel_size", str(l.pp));
    kw("virtual_pipeline_model_parallel_size",
       f.pipelined && l.schedule == PipelineSchedule::Interleaved ? str(l.virtual_stages) : "None");
    // TransformerConfig.num_layers_in_first_pipeline_stage / num_layers_in_last_pipeline_stage
    // (transformer_config.py @ d98e8a64, "Uneven PP"): None, the even share, unless set.
    if (l.first_stage_layers > 0)
        kw("num_layers_in_first_pipeline_stage", str(l.first_stage_layers));
    if (l.last_stage_layers > 0)
        kw("num_layers_in_last_pipeline_stage", str(l.last_stage_layers));
    // TransformerConfig.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
    // (megatron/core/transformer/transformer_config.py @ d98e8a64), set on cfg.model as the library's
    // Qwen3 MoE recipes do (src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py @ 067f987d).
    if (l.account_for_embedding_in_pipeline_split)
        kw("account_for_embedding_in_pipeline_split", "True");
    if (l.account_for_loss_in_pipeline_split)
        kw("account_for_loss_in_pipeline_split", "True");
    // TransformerConfig.pipeline_model_parallel_layout, a string as Bridge's performance configs set
    // it (scripts/performance/configs/deepseek/deepseek_llm_pretrain.py @ c8101293: cfg.model.
    // pipeline_model_parallel_layout = base_cfg.pp_layout); its v must equal the chunk count's.
    if (const PipelineLayerLayout* custom = l.layerLayout())
        kw("pipeline_model_parallel_layout", "\"" + custom->text() + "\"");
    kw("context_parallel_size", str(l.cp));
    // TransformerConfig.cp_comm_type (megatron/core/transformer/transformer_config.py @ d98e8a64):
    // None is p2p.
    if (l.cp > 1 && l.cp_comm == CpComm::A2A)
        kw("cp_comm_type", "\"a2a\"");
    // ModelParallelConfig's expert_model_parallel_size / expert_tensor_parallel_size, which
    // GPTModelProvider inherits through TransformerConfig; the library's MoE recipes set them
    // on cfg.model (recipes/deepseek/h100/deepseek_v3.py @ 067f987d).
    if (m.moe.enabled()) {
        kw("expert_model_parallel_size", str(l.ep));
        kw("expert_tensor_parallel_size", str(l.expertTensorParallel()));
    }
    kw("sequence_parallel", pyBool(l.sequence_parallel));
    if (l.recompute == Recompute::Selective) {
        kw("recompute_granularity", "\"selective\"");
        // TransformerConfig.recompute_modules (Megatron Core @ d98e8a64), set on cfg.model as the
        // library's performance overrides do (scripts/performance/utils/overrides.py @ 067f987d,
        // _set_recompute_overrides); left out, Megatron's default ["core_attn"].
        if (l.recompute_modules != 0) {
            std::string list;
            for (unsigned bit = 1; bit <= kRecomputeModuleMask; bit <<= 1)
                if (l.recompute_modules & bit) {
                    list += list.empty() ? "\"" : ", \"";
                    list += recomputeModuleName(bit);
                    list += '"';
                }
            kw("recompute_modules", "[" + list + "]");
        }
    } else if (l.recompute == Recompute::Full) {
        // (The layout's method and count, as the Megatron-LM export writes them.)
        kw("recompute_granularity", "\"full\"");
        kw("recompute_method", l.recompute_layers > 0 ? "\"" + std::string(toString(l.recompute_method)) + "\""
                                                      : std::string("\"uniform\""));
        kw("recompute_num_layers", l.recompute_layers > 0 ? str(l.recompute_layers) : "1");
    }
    if (l.offload_activations > 0) {
        // Megatron Core's cpu_offloading / cpu_offloading_num_layers (model_parallel_config.py @
        // d98e8a64; no argparse here to set cpu_offloading from the count), activations only, as
        // the library's _set_recompute_overrides (scripts/performance/utils/overrides.py @ 067f987d)
        // sets them.
        kw("cpu_offloading", "True");
        kw("cpu_offloading_weights", "False");
        kw("cpu_offloading_num_layers", str(l.offload_activations));
    }

    const char* precision = nullptr;
    switch (p.training.precision) {
    case Precision::BF16Mixed: precision = "\"bf16_mixed\""; break;
    case Precision::FP16Mixed: precision = "\"fp16_mixed\""; break;
    // The FP8/FP4 recipes registered in src/megatron/bridge/training/mixed_precision.py @ 067f987d
    // (fp8_recipe tensorwise / delayed / blockwise / mxfp8, fp4_recipe nvfp4); torchao's rowwise has none.
    case Precision::FP8Tensorwise: precision = "\"bf16_with_fp8_current_scaling_mixed\""; break;
    case Precision::FP8Delayed: precision = "\"bf16_with_fp8_delayed_scaling_mixed\""; break;
    case Precision::FP8Blockwise: precision = "\"bf16_with_fp8_subchannel_scaling_mixed\""; break;
    case Precision::MXFP8: precision = "\"bf16_with_mxfp8_mixed\""; break;
    case Precision::NVFP4: precision = "\"bf16_with_nvfp4_mixed\""; break;
    case Precision::FP8Rowwise:
    case Precision::BF16Autocast: break;  // refused with Megatron Core's limits
    case Precision::FP32: precision = "None"; break;
    }
    const char* strategy = l.zero_stage == 3 ? "optim_grads_params" : l.zero_stage == 2 ? "optim_grads" : "no_shard";

    r.notes.push_back("Megatron derives the data-parallel size: " + str(f.devices) + " devices / (tp " + str(l.tp) +
                      " x pp " + str(l.pp) + " x cp " + str(l.cp) + ") = dp " + str(l.dp) + "; " +
                      str(f.micro_batches) + " micro-batches of " + str(l.micro_batch) +
                      " sequence(s) per replica and step.");
    if (m.moe.enabled())
        r.notes.push_back(expertGridNote(m, l));
    r.notes.push_back("Yours to set: cfg.dataset.blend (mock data until then), the tokenizer (a NullTokenizer of " +
                      str(m.vocab) + " entries here), learning rate, iterations and checkpoints.");

    std::string t;
    t += commentLines({"Megatron-Bridge recipe exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Names: NVIDIA-NeMo/Megatron-Bridge recipes/common.py, models/gpt_provider.py, "
                       "training/config.py (commit 067f987d)",
                       ""});
    t += commentLines(r.notes);
    t += commentLines({"", "Launch on every node:",
                       "  " + torchrunCommand(f, false) + " shardscope_bridge_recipe.py"});
    if (m.mlp == MlpKind::SwiGlu)
        t += "import torch.nn.functional as F\n";
    // Multi-head latent attention: MLAModelProvider (models/mla_provider.py), the MLA fields of
    // Megatron Core's MLATransformerConfig on a GPTModelProvider.
    const char* provider = m.mla.enabled() ? "MLAModelProvider" : "GPTModelProvider";
    t += m.mla.enabled() ? "from megatron.bridge.models.mla_provider import MLAModelProvider\n"
                         : "from megatron.bridge.models.gpt_provider import GPTModelProvider\n";
    t += "from megatron.bridge.recipes.common import _pretrain_common\n";
    if (l.tp_comm_overlap || l.ep_comm_overlap)
        t += "from megatron.bridge.training.comm_overlap import CommOverlapConfig\n";
    t += "from megatron.bridge.training.config import ConfigContainer\n";
    t += "from megatron.bridge.training.gpt_step import forward_step\n";
    if (gradientType(p.training) == DataType::BF16)
        t += "from megatron.bridge.training.mixed_precision import get_mixed_precision_config\n";
    t += "from megatron.bridge.training.pretrain import pretrain\n\n\n";
    t += "def shardscope_pretrain_config() -> ConfigContainer:\n";
    t += "    cfg = _pretrain_common()\n";
    t += std::string("    cfg.model = ") + provider + "(\n";
    for (const std::string& a : model)
        t += "        " + a + ",\n";
    t += "    )\n";
    t += "    cfg.tokenizer.tokenizer_type = \"NullTokenizer\"\n";
    t += "    cfg.tokenizer.tokenizer_model = None\n";
    t += "    cfg.tokenizer.vocab_size = " + str(m.vocab) + "\n";
    t += "    cfg.dataset.seq_length = " + str(p.training.seq_len) + "\n";
    t += "    cfg.train.global_batch_size = " + str(p.training.global_batch) + "\n";
    t += "    cfg.train.micro_batch_size = " + str(l.micro_batch) + "\n";
    // The recipe's grad_reduce_in_fp32 (True for the bf16 ones) overwrites the DDP config's
    // (mixed_precision.py @ 067f987d, update_config_with_precision_overrides): bf16 gradients set
    // both, as the performance recipes do (perf_recipes/_common.py @ 067f987d).
    if (gradientType(p.training) == DataType::BF16) {
        t += std::string("    cfg.mixed_precision = get_mixed_precision_config(") + precision + ")\n";
        t += "    cfg.mixed_precision.grad_reduce_in_fp32 = False\n";
        t += "    cfg.ddp.grad_reduce_in_fp32 = False\n";
    } else {
        t += std::string("    cfg.mixed_precision = ") + precision + "\n";
    }
    t += "    cfg.ddp.use_distributed_optimizer = " + pyBool(l.zero_stage >= 1) + "\n";
    t += "    cfg.ddp.use_megatron_fsdp = " + pyBool(megatronFsdp) + "\n";
    t += std::string("    cfg.ddp.data_parallel_sharding_strategy = \"") + strategy + "\"\n";
    if (f.partial_shard)
        t += "    cfg.ddp.num_distributed_optimizer_instances = " + str(l.dp / f.shard_group) + "\n";
    // The gradients' reduction hidden behind the backward, as the cost model prices it.
    t += "    cfg.ddp.overlap_grad_reduce = " + pyBool(l.dp * l.cp > 1 || l.expertDataParallel() > 1 || l.overlap_param_gather) + "\n";
    t += "    cfg.ddp.overlap_param_gather = " + pyBool(l.overlap_param_gather) + "\n";
    if (megatronFsdp)
        t += "    cfg.checkpoint.ckpt_format = \"fsdp_dtensor\"  # Megatron-FSDP requires it\n";
    if (l.offload == Offload::Optimizer) {
        t += "    cfg.optimizer.optimizer_cpu_offload = True\n";
        t += "    cfg.optimizer.use_precision_aware_optimizer = True\n";
    }
    // CommOverlapConfig sets the model's overlap_moe_expert_parallel_comm from its own field (False
    // unless asked: src/megatron/bridge/training/comm_overlap.py @ 067f987d), as the performance
    // recipes ask for it (cfg.comm_overlap.overlap_moe_expert_parallel_comm = True).
    if (l.tp_comm_overlap || l.ep_comm_overlap) {
        std::string fields;
        if (l.tp_comm_overlap)
            fields += "tp_comm_overlap=True";
        if (l.ep_comm_overlap)
            fields += std::string(fields.empty() ? "" : ", ") + "overlap_moe_expert_parallel_comm=True";
        t += "    cfg.comm_overlap = CommOverlapConfig(" + fields + ")\n";
    }
    if (!megatronFsdp && (l.tp > 1 || l.cp > 1) && olderThanBlackwellGpu(p.cluster.node.chip))
        t += "    cfg.env_vars[\"CUDA_DEVICE_MAX_CONNECTIONS\"] = 1  # Megatron Core with tp/cp before Blackwell\n";
    t += "    return cfg\n\n\n";
    t += "if __name__ == \"__main__\":\n";
    t += "    pretrain(config=shardscope_pretrain_config(), forward_step_func=forward_step)\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
