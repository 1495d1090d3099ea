// NxD Training (neuronx-distributed-training, AWS Trainium): a YAML config for the HF Llama
// model, run by the repository's examples/train.sh.
//
// Keys from aws-neuron/neuronx-distributed-training at commit
// 9169aa03f39efd4eb02da63891a7ed98defb1714 (Neuron SDK 2.26.0):
//   examples/conf/hf_llama3_8B_config.yaml and hf_llama3_70B_CP_config.yaml: name hf_llama,
//     model_source hf; trainer.devices (processes per node), trainer.num_nodes;
//     distributed_strategy.tensor_model_parallel_size, pipeline_model_parallel_size,
//     virtual_pipeline_model_parallel_size, context_parallel_size, zero1, sequence_parallel,
//     kv_replicator; data.micro_batch_size, data.global_batch_size ("gradient accumulation will be
//     done automatically based on data_parallel_size"); model.model_config (a Hugging Face
//     config.json), encoder_seq_length, max_position_embeddings, num_layers, hidden_size,
//     qkv_linear, fuse_qkv, rope_theta, activations_checkpoint_granularity selective|full,
//     activations_checkpoint_recompute [CoreAttention], fusions.flash_attention,
//     fusions.ring_attention (with context parallelism), optim.name adamw; precision.type
//     'mixed_precision' | 'fp32' | ...;
//   src/neuronx_distributed_training/lightning_modules/model/hf_models/llama_model.py: no
//     granularity with flash attention recomputes nothing; without flash attention the core
//     attention is checkpointed anyway;
//   src/neuronx_distributed_training/lightning_modules/model/base.py: mixed_precision keeps
//     fp32 master weights and fp32 gradient accumulation (ShardScope's bf16 mixed precision);
//   examples/train.sh: CONF_FILE names conf/<CONF_FILE>.yaml, torchrun training_orchestrator.py.
// Refused: ZeRO-2/3 and shard groups (zero1 shards optimizer states over the whole data-parallel
// group), optimizer offload, the GPipe schedule, fp16/fp8, SGD, non-Llama models, and no
// recomputation without flash attention (the model then checkpoints the core attention).
// Mixture of experts at the same commit: examples/conf/hf_mixtral_8x7b_config.yaml and
// hf_mixtral_8x7b_dropless_config.yaml (distributed_strategy.expert_model_parallel_size;
// model.moe: num_experts, frequency, dropout, capacity_factor, dropless, routing_algorithm top_k,
// top_k, output_router_logits, router_aux_loss_coef, normalize_top_k_affinities); examples/training.py
// builds HFMixtralModule when "mixtral" is in the config's name;
// lightning_modules/model/hf_models/mixtral_model.py reads those keys into a Hugging Face
// MixtralConfig; models/hf_models/modeling_mixtral.py: RouterTopK (softmax over the experts, no
// shared experts), ExpertMLPs with glu_mlp, an MoE block on the layers with
// layer_index % moe_frequency == 0; examples/training_orchestrator.py: dropless needs SiLU and a
// capacity factor of 0, otherwise a capacity factor > 0. The expert grid is aws-neuron/
// neuronx-distributed's (parallel_state.py @ fbac349, initialize_model_parallel): per stage
// [expert data parallel, expert_model_parallel_size, tp] with tp innermost, so each expert is split
// over the whole tp group (etp = tp) and ep is carved out of dp x cp; tp = 4 on trn1 with ep > 1
// raises NotImplementedError.
#include "ExportCommon.h"

#include <algorithm>

namespace shardscope::exportdetail {

ExportResult exportNxdTraining(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("nxd-training", r);
    refuseMultiTokenPrediction(refuse, p.model,
                               "the export writes no NxD Training multi-token prediction settings");
    refuseModuleRecomputeAndOffload(refuse, l,
                                    "NxD Training's activation_checkpoint_config is full or selective (the "
                                    "attention core), no list of modules",
                                    "the exported NxD Training config offloads no activations to the host");
    refuseUnevenPipeline(refuse, l,
                         "NxD Training's pipeline_model_parallel_size splits the layers evenly over the stages");
    refuseMegatronOverlaps(refuse, l);
    refuseMoeDispatcher(refuse, l, "NxD Training's MoE has neither Megatron's allgather dispatcher nor DeepEP/HybridEP "
                                   "kernels");
    refuseAllToAllCp(refuse, l, "NxD Training's context parallelism is ring attention (fusions.ring_attention)");
    const ModelSpec& m = p.model;
    const ChipSpec& chip = p.cluster.node.chip;
    const Figures f = figures(p, l);

    if (!isTrainium(chip))
        refuse.device(chip.display_name, "NxD Training trains on AWS Trainium");
    const bool moe = m.moe.enabled();
    // A MoE model is configured as hf_mixtral: a Llama-shaped model whose MLPs are NxD's MoE.
    ModelSpec dense = m;
    dense.moe = MoeSpec{};
    if (const std::string features = nonLlamaFeatures(dense); !features.empty())
        refuse.add("the architecture of " + m.name + " (" + features + ")",
                   moe ? "the export configures hf_mixtral, Hugging Face's MixtralForCausalLM with NxD's MoE"
                       : "the export configures hf_llama, Hugging Face's LlamaForCausalLM");
    if (moe) {
        const MoeSpec& e = m.moe;
        if (e.router != MoeRouter::Softmax && e.router != MoeRouter::SoftmaxNorm)
            refuse.add(std::string("the router ") + toString(e.router),
                       "modeling_mixtral.py builds RouterTopK with its softmax over the experts");
        if (e.router == MoeRouter::SoftmaxNorm && e.top_k < 2)
            refuse.add("renormalised top-1 routing", "normalize_top_k_affinities needs top_k > 1 (expert_mlps)");
        if (e.shared_experts > 0)
            refuse.add(str(e.shared_experts) + " shared expert(s)", "NxD Training's Mixtral has no shared experts");
        if (e.dense_layers > 0 || e.layer_interval > 1)
            refuse.add("MoE layers after " + str(e.dense_layers) + " dense ones, every " + str(e.layer_interval),
                       "modeling_mixtral.py puts a MoE block on the layers with layer_index % moe_frequency == 0");
        if (e.score_correction_bias || e.expert_groups > 0 || e.routed_scaling > 0)
            refuse.add("DeepSeek routing (correction bias, groups or routed scaling)",
                       "RouterTopK has top-k softmax routing only");
        if (l.expertTensorParallel() != l.tp)
            refuse.add("expert tensor parallelism (etp=" + str(l.expertTensorParallel()) + ") other than tp=" + str(l.tp),
                       "neuronx-distributed's expert grid splits each expert over the whole tp group "
                       "(parallel_state.py: [edp, ep, tp])");
        if (l.ep > 1 && l.tp == 4 && chip.name == "trainium1")
            refuse.add("expert parallelism (ep=" + str(l.ep) + ") with tp=4 on Trainium1",
                       "parallel_state.py: \"TP=4 case not yet implemented for expert parallelism\" on trn1");
    }
    if (l.zero_stage >= 2)
        refuse.add("ZeRO-" + str(l.zero_stage), "distributed_strategy.zero1 shards optimizer states only");
    else if (f.partial_shard)
        refuse.add("a ZeRO shard group of " + str(f.shard_group) + " of the " + str(l.dp) + " data-parallel ranks",
                   "zero1 shards over the whole data-parallel group");
    if (l.offload == Offload::Optimizer)
        refuse.add("optimizer offload", "the config has no offload setting");
    if (f.pipelined && l.schedule == PipelineSchedule::GPipe)
        refuse.add("the GPipe schedule",
                   "NxD's pipeline runs 1F1B, interleaved with virtual_pipeline_model_parallel_size");
    if (p.training.precision != Precision::BF16Mixed && p.training.precision != Precision::FP32 &&
        p.training.precision != Precision::BF16Autocast)
        refuse.add(std::string(toString(p.training.precision)) + " precision",
                   "precision.type mixed_precision is bf16 with fp32 master weights; fp32 and autocast are the "
                   "other matches");
    // docs/general/config_overview.rst @ 9169aa0: "Autocast is supported in this release for HF based
    // LLama3 8B and Llama3 70B models" (not the Mixtral module).
    if (p.training.precision == Precision::BF16Autocast && p.model.moe.enabled())
        refuse.add("bf16-autocast precision with a mixture-of-experts model",
                   "precision.type autocast is supported for the HF Llama models only");
    if (p.training.optimizer != Optimizer::AdamW)
        refuse.add(std::string("the optimizer ") + toString(p.training.optimizer), "the export writes optim.name adamw");
    // mixed_precision accumulates the gradients in fp32 exactly when zero1 is on (base.py @ 9169aa0:
    // use_fp32_grad_acc and zero_one_enabled); without it they stay bf16.
    if (p.training.precision == Precision::BF16Mixed) {
        const bool fp32Grads = gradientType(p.training) == DataType::FP32;
        if (fp32Grads && l.zero_stage == 0)
            refuse.add("fp32 gradients without ZeRO-1",
                       "precision.type mixed_precision accumulates fp32 gradients only with zero1 (price it with "
                       "--main-grads bf16)");
        if (!fp32Grads && l.zero_stage == 1)
            refuse.add("bf16 gradients (main_grads bf16) with ZeRO-1",
                       "precision.type mixed_precision with zero1 accumulates the gradients in fp32");
    }
    if (l.recompute == Recompute::None && !p.training.flash_attention)
        refuse.add("no activation recomputation without flash attention",
                   "llama_model.py checkpoints the core attention whenever flash attention is off");
    if (refuse.any())
        return r;

    const int kvReplicator = l.tp > m.kv_heads ? l.tp / m.kv_heads : 1;
    r.notes.push_back("NxD derives the data-parallel size: " + str(f.devices) + " NeuronCores / (tp " + str(l.tp) +
                      " x pp " + str(l.pp) + " x cp " + str(l.cp) + ") = dp " + str(l.dp) + "; " +
                      str(f.micro_batches) + " micro-batches of " + str(l.micro_batch) +
                      " sequence(s) per replica and step.");
    if (moe) {
        r.notes.push_back(expertGridNote(m, l) + " NxD: expert data parallel = world / (tp x pp x ep) = " +
                          str(f.devices / (std::int64_t(l.tp) * l.pp * l.ep)) + ".");
        r.notes.push_back(m.moe.capacity_factor > 0
                              ? "Routed tokens beyond a capacity factor of " + num(m.moe.capacity_factor) +
                                    " are dropped (dropless False)."
                              : std::string("Dropless routing (NxD's blockwise kernel; capacity_factor 0)."));
    }
    if (kvReplicator > 1)
        r.notes.push_back("kv_replicator " + str(kvReplicator) + ": tp " + str(l.tp) + " over " + str(m.kv_heads) +
                          " key/value heads replicates each KV head " + str(kvReplicator) + " times.");
    r.notes.push_back(std::string("model.model_config: a Hugging Face ") + (moe ? "MixtralConfig" : "LlamaConfig") +
                      " config.json with hidden_size " + str(m.hidden) + ", intermediate_size " +
                      str(moe ? m.expertFfn() : m.ffn_hidden) + ", num_hidden_layers " +
                      str(m.layers) + ", num_attention_heads " + str(m.heads) + ", num_key_value_heads " +
                      str(m.kv_heads) + ", vocab_size " + str(m.vocab) + ", tie_word_embeddings " +
                      (m.tied_embeddings ? "true" : "false") + ".");
    r.notes.push_back("Yours to set: model.model_config, data.train_dir, the learning rate and trainer.max_steps.");

    std::string t;
    t += commentLines({"NxD Training (Trainium) config exported by ShardScope", problemLine(p),
                       "layout " + toString(l),
                       std::string("Keys: aws-neuron/neuronx-distributed-training examples/conf/") +
                           (moe ? "hf_mixtral_8x7b_config.yaml, hf_mixtral_8x7b_dropless_config.yaml"
                                : "hf_llama3_8B_config.yaml, hf_llama3_70B_CP_config.yaml") +
                           " (commit 9169aa03)",
                       ""});
    t += commentLines(r.notes);
    t += commentLines({"", "Save as examples/conf/shardscope_nxdt.yaml and run on every node (NTASKS, NODEID, "
                           "MASTER_ADDR, MASTER_PORT set):",
                       "  CONF_FILE=shardscope_nxdt ./train.sh"});
    t += std::string("name: ") + (moe ? "hf_mixtral" : "hf_llama") + "\nmodel_source: hf\nseed: 1234\n\n";
    t += "trainer:\n";
    t += "  devices: " + str(f.devices_per_node) + "\n";
    t += "  num_nodes: " + str(f.nodes) + "\n";
    t += "  max_steps: 1000\n";
    t += "  gradient_clip_val: 1.0\n\n";
    t += "distributed_strategy:\n";
    t += "  tensor_model_parallel_size: " + str(l.tp) + "\n";
    t += "  pipeline_model_parallel_size: " + str(l.pp) + "\n";
    t += "  virtual_pipeline_model_parallel_size: " + str(l.virtual_stages) + "\n";
    t += "  context_parallel_size: " + str(l.cp) + "\n";
    t += "  zero1: " + pyBool(l.zero_stage == 1) + "\n";
    t += "  sequence_parallel: " + pyBool(l.sequence_parallel) + "\n";
    t += "  kv_replicator: " + str(kvReplicator) + "\n";
    if (moe)
        t += "  expert_model_parallel_size: " + str(l.ep) + "\n";
    t += "\n";
    t += "data:\n";
    t += "  micro_batch_size: " + str(l.micro_batch) + "\n";
    t += "  global_batch_size: " + str(p.training.global_batch) + "\n";
    t += "  train_dir: null  # yours: the tokenized dataset\n\n";
    t += "model:\n";
    t += "  model_config: null  # yours: the config.json described above\n";
    t += "  encoder_seq_length: " + str(p.training.seq_len) + "\n";
    t += "  max_position_embeddings: " + str(std::max(m.max_seq, p.training.seq_len)) + "\n";
    t += "  num_layers: " + str(m.layers) + "\n";
    t += "  hidden_size: " + str(m.hidden) + "\n";
    t += "  qkv_linear: " + pyBool(kvReplicator > 1) + "\n";
    t += "  fuse_qkv: True\n";
    t += "  rope_theta: " + num(m.rope_base) + "\n";
    if (moe) {
        const MoeSpec& e = m.moe;
        t += "  moe:\n";
        t += "    num_experts: " + str(e.experts) + "\n";
        t += "    frequency: 1\n";
        t += "    dropout: 0.0\n";
        t += "    capacity_factor: " + (e.capacity_factor > 0 ? num(e.capacity_factor) : std::string("0.0")) + "\n";
        t += "    dropless: " + pyBool(e.capacity_factor <= 0) + "\n";
        t += "    routing_algorithm: top_k\n";
        t += "    top_k: " + str(e.top_k) + "\n";
        t += "    output_router_logits: True\n";  // as both examples; the loss is scaled by the coefficient
        t += "    router_aux_loss_coef: " + (e.aux_loss_coeff > 0 ? num(e.aux_loss_coeff) : std::string("0.0")) + "\n";
        t += "    normalize_top_k_affinities: " + pyBool(e.router == MoeRouter::SoftmaxNorm) + "\n";
    }
    if (l.recompute == Recompute::Selective) {
        t += "  activations_checkpoint_granularity: selective\n";
        t += "  activations_checkpoint_recompute: [CoreAttention]\n";
    } else if (l.recompute == Recompute::Full) {
        t += "  activations_checkpoint_granularity: full\n";
    } else {
        t += "  activations_checkpoint_granularity: null  # with flash attention: nothing recomputed\n";
    }
    t += "  fusions:\n";
    t += "    softmax: True\n";
    t += "    flash_attention: " + pyBool(p.training.flash_attention) + "\n";
    if (l.cp > 1)
        t += "    ring_attention: True\n";
    t += "  optim:\n    name: adamw\n\n";
    t += "precision:\n";
    // autocast: bf16 weights (llama_model.py casts the model), torch.autocast over the step, fp32
    // master weights and gradient accumulation (base.py) and --auto-cast none for neuronx-cc
    // (training_orchestrator.py): ShardScope's bf16-autocast.
    t += std::string("  type: '") +
         (p.training.precision == Precision::FP32           ? "fp32"
          : p.training.precision == Precision::BF16Autocast ? "autocast"
                                                            : "mixed_precision") +
         "'\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
