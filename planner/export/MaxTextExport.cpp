// MaxText: a YAML config on top of base.yml, with the mesh as ici_* (within a slice) and
// dcn_* (across slices) axes, and the train command. TPU plans become exportable.
//
// Keys from AI-Hypercomputer/maxtext at commit e591f30cbbf217ed67ef71263ec0538239f9c3b8:
//   src/maxtext/configs/base.yml: base_config inheritance (configs/gpu/models/mixtral_8x7b.yml
//     starts `base_config: "base.yml"`); ici_/dcn_ data, fsdp, context, tensor, pipeline
//     parallelism (dcn_data_parallelism and ici_fsdp_parallelism default to -1, "auto-sharded":
//     the export sets every axis); shard_optimizer_over_data ("ZeRO-1 optimizer sharding over
//     data axis"); per_device_batch_size, gradient_accumulation_steps, max_target_length;
//     remat_policy; optimizer_memory_host_offload; attention (dot_product, flash,
//     cudnn_flash_te); dtype, weight_dtype; opt_type adamw|sgd; enable_dropout; hardware tpu|gpu;
//     decoder_block, base_emb_dim, base_num_query_heads, base_num_kv_heads, base_mlp_dim,
//     base_num_decoder_layers, head_dim, vocab_size, mlp_activations, logits_via_embedding,
//     rope_max_timescale (configs/models/llama3-8b.yml: decoder_block "llama2", 500_000);
//     num_layers_per_pipeline_stage, num_pipeline_microbatches, scan_layers;
//   src/maxtext/configs/types.py: global batch = int(devices x per_device_batch_size) x
//     gradient_accumulation_steps; stages x repeats x layers per stage = decoder layers; pipeline
//     micro-batches divide by the stages and divide the per-step batch;
//     context_parallel_strategy all_gather|ring|ulysses|usp (ring on TPU needs Tokamax splash);
//   src/maxtext/layers/decoders.py: remat policies "minimal_with_context" saves every named
//     matmul output and the attention context (nothing of a layer recomputed but element-wise
//     ops), "minimal" all but the context (the core attention recomputed: selective), "full"
//     recomputes the layer;
//   docs/run_maxtext/run_maxtext_localhost.md: python3 -m maxtext.trainers.pre_train.train CONFIG.
// Decisions: data parallelism without ZeRO is the data axis, ZeRO-1 the data axis with
// shard_optimizer_over_data, ZeRO-3 the fsdp axis (a shard group smaller than dp: fsdp = group,
// data = the groups); ZeRO-2 and a ZeRO-1 shard group are refused. MaxText's pipeline is a scanned
// loop that JAX differentiates, all forwards before the backwards: the GPipe order, so 1F1B and
// interleaved 1F1B are refused. Sequence parallelism is not a setting: XLA shards activations by
// the logical axis rules (said in a note). Models must be Llama-shaped (decoder_block "llama2").
// Mixture of experts at the same commit: decoder_block "mixtral" (models/mixtral.py:
// MixtralDecoderLayer, RMSNorm + GQA attention + RoutedMoE) and "qwen3_moe" (models/qwen3.py:
// Qwen3MoeDecoderLayer, the same with use_qk_norm), as configs/models/mixtral-8x7b.yml and
// qwen3-30b-a3b.yml set them: num_experts, num_experts_per_tok, base_moe_mlp_dim (types.py: a
// fully MoE model has base_mlp_dim = base_moe_mlp_dim), normalization_layer_epsilon,
// capacity_factor (< 0: no token dropping), load_balance_loss_weight; layers/moe.py get_topk:
// the top-k logits then a softmax over them (Mixtral's renormalised softmax; norm_topk_prob
// divides by their sum, 1, again); load_balance_loss: sequence-wise, E^2 x mean(density x
// probability) x weight with the densities counting each token's k choices, which is k times
// Megatron's switch_load_balancing_loss_func (f_i over T x topk) that the model's aux_loss_coeff
// means, so the weight is the coefficient / k, and equal only where a micro-batch is one sequence.
// Expert parallelism: the mesh axis "expert" (ici_/dcn_expert_parallelism); base.yml's
// logical_axis_rules shard the experts ('exp') over it, the expert matrices' embed dimension
// ('embed_moe') over fsdp and context, their mlp dimension ('mlp_moe') over tensor (etp = tp),
// and the dense weights ('embed') over fsdp and expert together: ep ranks come out of ZeRO-3's
// whole fsdp group, as the plan's ep comes out of dp.
// Slices: a TPU slice is the chips one ICI domain joins (NodeType::scaleUpChips); on GPUs the
// NVLink domain. The outer axes go across slices first: pipeline, data, fsdp, context, tensor.
#include "ExportCommon.h"

#include <numeric>

namespace shardscope::exportdetail {

namespace {

// What keeps a MoE model from MaxText's mixtral / qwen3_moe decoder blocks, and the layouts
// its expert axis cannot express.
void refuseMaxTextMoe(Refusals& refuse, const ModelSpec& m, const Layout& l)
{
    // The features beyond a Llama other than what the MoE blocks' keys carry: the MoE block,
    // QK-norm (qwen3_moe), the epsilon (normalization_layer_epsilon) and a head_dim of its own
    // (head_dim; Qwen3-30B-A3B: 32 heads of 128 on a hidden size of 2048).
    ModelSpec dense = m;
    dense.moe = MoeSpec{};
    dense.qk_norm = false;
    dense.norm_eps = 1e-5;
    dense.head_dim = dense.heads > 0 ? dense.hidden / dense.heads : dense.head_dim;
    if (const std::string mismatch = nonLlamaFeatures(dense); !mismatch.empty())
        refuse.add("the architecture of " + m.name + " (" + mismatch + ")",
                   "the export writes decoder_block \"mixtral\" or \"qwen3_moe\" (RMSNorm, SwiGLU, RoPE, no biases, "
                   "QK-norm for qwen3_moe)");
    const MoeSpec& e = m.moe;
    const char* block = "MaxText's mixtral and qwen3_moe blocks";
    if (e.router != MoeRouter::SoftmaxNorm)
        refuse.add(std::string("the router ") + toString(e.router),
                   "get_topk takes a softmax over the top-k logits (renormalised) for these blocks");
    if (e.shared_experts > 0)
        refuse.add(str(e.shared_experts) + " shared expert(s)", std::string(block) + " have none");
    if (e.dense_layers > 0 || e.layer_interval > 1)
        refuse.add("dense layers among the MoE layers (dense_layers " + str(e.dense_layers) + ", layer_interval " +
                       str(e.layer_interval) + ")",
                   std::string("the export writes ") + block + ", an MoE block in every layer");
    if (e.score_correction_bias || e.expert_groups > 0 || e.routed_scaling > 0)
        refuse.add("DeepSeek routing (correction bias, groups or routed scaling)",
                   std::string(block) + " route by the top-k logits alone");
    if (e.capacity_factor > 0)
        refuse.add("a capacity factor of " + num(e.capacity_factor),
                   "the export writes MaxText's dropless path (capacity_factor -1) only");
    if (e.aux_loss_coeff > 0 && l.micro_batch > 1)
        refuse.add("a load-balancing loss over micro-batches of " + str(l.micro_batch) + " sequences",
                   "MaxText's load_balance_loss is per sequence (layers/moe.py), the plan's per micro-batch");
    if (l.ep > 1) {
        if (l.zero_stage != 3 || l.zeroGroupSize() != l.dp)
            refuse.add("expert parallelism (ep=" + str(l.ep) + ") without ZeRO-3 over all " + str(l.dp) +
                           " data-parallel ranks",
                       "base.yml's logical_axis_rules shard the dense weights over fsdp and expert together");
        else if (l.dp % l.ep != 0)
            refuse.add("expert parallelism (ep=" + str(l.ep) + ") over context-parallel ranks",
                       "MaxText's expert axis is apart from its context axis: ep must divide dp " + str(l.dp));
    }
    if (l.etp > 0 && l.etp != l.tp)
        refuse.add("expert tensor parallelism (etp=" + str(l.etp) + " with tp=" + str(l.tp) + ")",
                   "base.yml's logical_axis_rules split the expert matrices ('mlp_moe') over the tensor axis");
}

struct Axis {
    const char* name;  // MaxText's mesh axis: ici_<name>_parallelism, dcn_<name>_parallelism
    int size;
    int dcn = 1;
};

} // namespace

ExportResult exportMaxText(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("maxtext", r);
    refuseMultiTokenPrediction(refuse, p.model,
                               "the export writes no MaxText multi-token prediction settings");
    refuseModuleRecomputeAndOffload(refuse, l,
                                    "MaxText's remat policies name its own tensors (remat_policy), not "
                                    "Megatron's modules: not mapped",
                                    "MaxText offloads the tensors its remat policy names, not N whole layers: "
                                    "not mapped");
    refuseUnevenPipeline(refuse, l, "MaxText's pipeline holds num_layers_per_pipeline_stage layers on every stage");
    refuseMegatronOverlaps(refuse, l);
    refuseMoeDispatcher(refuse, l, "MaxText's MoE has neither Megatron's allgather dispatcher nor DeepEP/HybridEP "
                                   "kernels");
    const ModelSpec& m = p.model;
    const ChipSpec& chip = p.cluster.node.chip;
    const Figures f = figures(p, l);
    const bool tpu = chip.vendor == "Google";

    if (!tpu && chip.vendor != "NVIDIA")
        refuse.device(chip.display_name, "MaxText runs on Google TPUs and NVIDIA GPUs (hardware: tpu | gpu)");
    const bool moe = m.moe.enabled();
    if (!moe) {
        if (const std::string mismatch = nonLlamaFeatures(m); !mismatch.empty())
            refuse.add("the architecture of " + m.name + " (" + mismatch + ")",
                       "the export writes decoder_block \"llama2\" (RMSNorm, SwiGLU, RoPE, no biases)");
    } else {
        refuseMaxTextMoe(refuse, m, l);
    }
    if (l.zero_stage == 2)
        refuse.add("ZeRO-2", "MaxText shards optimizer states over the data axis (shard_optimizer_over_data) or "
                             "everything over the fsdp axis, not optimizer states and gradients alone");
    if (l.zero_stage == 1 && f.partial_shard)
        refuse.add("a ZeRO-1 shard group of " + str(f.shard_group) + " of the " + str(l.dp) + " data-parallel ranks",
                   "shard_optimizer_over_data shards over the whole data axis");
    if (f.pipelined && l.schedule != PipelineSchedule::GPipe)
        refuse.add(std::string("the ") + toString(l.schedule) + " schedule",
                   "MaxText's pipeline is a scanned loop JAX differentiates: every forward before the backwards "
                   "(the GPipe order)");
    if (p.training.precision == Precision::FP16Mixed || p.training.precision == Precision::BF16Autocast ||
        quantizedRecipe(p.training.precision))
        refuse.add(std::string(toString(p.training.precision)) + " precision",
                   "the export writes dtype bfloat16 or float32 with float32 weights");
    if (f.pipelined && (f.micro_batches % l.pp != 0))
        refuse.add(str(f.micro_batches) + " pipeline micro-batches over " + str(l.pp) + " stages",
                   "types.py asserts the micro-batches divide by the stages");

    // Slices: the devices one ICI (TPU) or NVLink (GPU) domain joins.
    const std::int64_t sliceDevices =
        std::min<std::int64_t>(f.devices, std::int64_t(p.cluster.node.scaleUpChips()) * chip.devices_per_chip);
    if (sliceDevices <= 0 || f.devices % sliceDevices != 0)
        refuse.add("a cluster of " + str(f.devices) + " devices",
                   "it is not a whole number of " + str(sliceDevices) + "-device slices");
    if (refuse.any())
        return r;
    const int slices = int(f.devices / sliceDevices);

    const bool fsdp = l.zero_stage == 3;
    const int shard = fsdp ? f.shard_group : 1;
    // A MoE model's expert axis out of the fsdp group (ep > 1 only with ZeRO-3 over the whole
    // dp); a dense model's exports keep to the axes it uses.
    std::vector<Axis> axes{{"pipeline", l.pp}, {"data", l.dp / shard}, {"fsdp", shard / l.ep}};
    if (moe)
        axes.push_back({"expert", l.ep});
    axes.push_back({"context", l.cp});
    axes.push_back({"tensor", l.tp});
    int across = slices;
    for (Axis& a : axes) {
        a.dcn = std::gcd(a.size, across);
        across /= a.dcn;
    }
    if (across != 1) {
        refuse.add("the layout over " + str(slices) + " slices",
                   "its axes cannot be split into whole factors across the slices");
        return r;
    }

    // Sequences per device and micro-batch: MaxText counts every device, tp and cp included.
    const int accumulation = f.pipelined ? 1 : f.micro_batches;
    const double perDevice = double(p.training.global_batch) / (double(f.devices) * accumulation);
    if (std::int64_t(double(f.devices) * perDevice) * accumulation != p.training.global_batch) {
        refuse.add("a global batch of " + str(p.training.global_batch),
                   "per_device_batch_size x " + str(f.devices) + " devices x gradient_accumulation_steps does not "
                   "reproduce it in MaxText's integer arithmetic");
        return r;
    }

    const char* remat = l.recompute == Recompute::Full        ? "full"
                        : l.recompute == Recompute::Selective ? "minimal"
                                                               : "minimal_with_context";
    const char* attention = !p.training.flash_attention ? "dot_product" : tpu ? "flash" : "cudnn_flash_te";

    r.notes.push_back(str(slices) + " slice(s) of " + str(sliceDevices) + " devices; ICI axes within a slice, DCN "
                      "axes across slices; every axis is set (no -1 left to MaxText).");
    r.notes.push_back("per_device_batch_size " + num(perDevice) + " x " + str(f.devices) + " devices x " +
                      str(accumulation) + " accumulation step(s) = global batch " + str(p.training.global_batch) +
                      (f.pipelined ? ", in " + str(f.micro_batches) + " pipeline micro-batches." : "."));
    if (l.tp > 1)
        r.notes.push_back(std::string("Sequence parallelism (sp=") + (l.sequence_parallel ? "on" : "off") +
                          ") is not a MaxText setting: XLA shards the activations by logical_axis_rules.");
    const bool ulysses = l.cp > 1 && l.cp_comm == CpComm::A2A;
    if (ulysses)
        r.notes.push_back("context_parallel_strategy ulysses: q, k, v and the output exchanged all-to-all between the "
                          "sequence and the head split, as the plan prices (cp_comm=a2a).");
    else if (l.cp > 1)
        r.notes.push_back(tpu ? "context_parallel_strategy all_gather: K/V are all-gathered over the context axis "
                                "(the plan's ring moves the same bytes, step by step)."
                              : "context_parallel_strategy ring: K/V pass around the context axis, as the plan prices.");
    if (p.training.dropout)
        r.notes.push_back(std::string("The plan priced dropout masks; MaxText's ") + (moe ? "MoE decoder" : "Llama") +
                          " trains without dropout (dropout_rate 0).");
    if (moe) {
        r.notes.push_back(expertGridNote(m, l));
        if (m.moe.aux_loss_coeff > 0)
            r.notes.push_back("load_balance_loss_weight " + num(m.moe.aux_loss_coeff / m.moe.top_k) + " = aux_loss_coeff " +
                              num(m.moe.aux_loss_coeff) + " / top_k " + str(m.moe.top_k) +
                              ": MaxText counts each token's k choices in the densities; per sequence, as the "
                              "plan's one-sequence micro-batches.");
        r.notes.push_back("Yours to set: run_name, base_output_directory, dataset_path (or dataset_type: synthetic), "
                          "tokenizer_path, steps.");
    } else {
        r.notes.push_back("Normalization epsilon: base.yml's 1e-05. Yours to set: run_name, base_output_directory, "
                          "dataset_path (or dataset_type: synthetic), tokenizer_path, steps.");
    }

    std::string t;
    t += commentLines({"MaxText config exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Keys: AI-Hypercomputer/maxtext src/maxtext/configs/base.yml, types.py (commit e591f30c)", ""});
    t += commentLines(r.notes);
    t += commentLines({"", "Run on every host:", "  python3 -m maxtext.trainers.pre_train.train shardscope-maxtext.yml "
                                                 "run_name=$RUN_NAME base_output_directory=$OUTPUT_DIR"});
    t += "base_config: \"base.yml\"\n";
    t += std::string("hardware: \"") + (tpu ? "tpu" : "gpu") + "\"\n\n";
    t += "# model\n";
    t += std::string("decoder_block: \"") + (!moe ? "llama2" : m.qk_norm ? "qwen3_moe" : "mixtral") + "\"\n";
    t += "base_emb_dim: " + str(m.hidden) + "\n";
    t += "base_num_query_heads: " + str(m.heads) + "\n";
    t += "base_num_kv_heads: " + str(m.kv_heads) + "\n";
    t += "base_mlp_dim: " + str(moe ? m.expertFfn() : m.ffn_hidden) + "\n";
    if (moe) {
        t += "num_experts: " + str(m.moe.experts) + "\n";
        t += "num_experts_per_tok: " + str(m.moe.top_k) + "\n";
        t += "base_moe_mlp_dim: " + str(m.expertFfn()) + "\n";
        t += "capacity_factor: -1.0  # dropless\n";
        t += "load_balance_loss_weight: " + num(m.moe.aux_loss_coeff / m.moe.top_k) + "\n";
        if (m.qk_norm) {
            t += "use_qk_norm: true\n";
            t += "norm_topk_prob: true\n";
        }
        t += "normalization_layer_epsilon: " + num(m.norm_eps) + "\n";
    }
    t += "base_num_decoder_layers: " + str(m.layers) + "\n";
    t += "head_dim: " + str(m.head_dim) + "\n";
    t += "vocab_size: " + str(m.vocab) + "\n";
    t += "mlp_activations: [\"silu\", \"linear\"]\n";
    t += std::string("logits_via_embedding: ") + (m.tied_embeddings ? "true" : "false") + "\n";
    t += "rope_max_timescale: " + num(m.rope_base) + "\n";
    t += "enable_dropout: false\n\n";
    t += "# batch\n";
    t += "max_target_length: " + str(p.training.seq_len) + "\n";
    t += "per_device_batch_size: " + num(perDevice) + "\n";
    t += "gradient_accumulation_steps: " + str(accumulation) + "\n\n";
    t += "# mesh: the product of the ici axes is the devices of a slice, of the dcn axes the slices\n";
    for (const Axis& a : axes)
        t += std::string("ici_") + a.name + "_parallelism: " + str(a.size / a.dcn) + "\n";
    for (const Axis& a : axes)
        t += std::string("dcn_") + a.name + "_parallelism: " + str(a.dcn) + "\n";
    if (l.zero_stage == 1)
        t += "shard_optimizer_over_data: true\n";
    if (l.cp > 1)
        t += std::string("context_parallel_strategy: \"") + (ulysses ? "ulysses" : tpu ? "all_gather" : "ring") + "\"\n";
    if (f.pipelined) {
        t += "num_layers_per_pipeline_stage: " + str(m.layers / l.pp) + "\n";
        t += "num_pipeline_microbatches: " + str(f.micro_batches) + "\n";
        t += "scan_layers: false  # base.yml: scan the pipeline iterations, not the layers, with pipelining\n";
    }
    t += "\n# memory, precision, kernels\n";
    t += std::string("remat_policy: \"") + remat + "\"\n";
    if (l.offload == Offload::Optimizer)
        t += "optimizer_memory_host_offload: true\n";
    t += std::string("dtype: \"") + (p.training.precision == Precision::FP32 ? "float32" : "bfloat16") + "\"\n";
    t += "weight_dtype: \"float32\"\n";
    // Gradients cast to grad_dtype (float32 by default: base.yml, trainers/pre_train/train.py @ e591f30).
    if (gradientType(p.training) == DataType::BF16)
        t += "grad_dtype: \"bfloat16\"\n";
    t += std::string("attention: \"") + attention + "\"\n";
    t += std::string("opt_type: \"") + (p.training.optimizer == Optimizer::Sgd ? "sgd" : "adamw") + "\"\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
