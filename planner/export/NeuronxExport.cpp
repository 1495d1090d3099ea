// NeuronX Distributed (AWS Trainium): the arguments of NxD's Llama training scripts as
// a bash array, and the torchrun line.
//
// Option names from aws-neuron/neuronx-distributed, examples/training/llama/:
//   pp > 1: tp_pp_llama_hf_pretrain/run_llama_nxd.py (commit 0598cd8b): --tensor_parallel_size,
//     --pipeline_parallel_size, --virtual_pipeline_size, --num_microbatches,
//     --train_batch_size (sequences per data-parallel replica and step), --seq_len,
//     --use_zero1_optimizer 0|1, --use_sequence_parallel 0|1 (default 1),
//     --use_selective_checkpoint 0|1 (0 means full checkpointing), --kv_replicator,
//     --qkv_linear 0|1, --use_flash_attention 0|1, --use_gpu_compatible_precision 0|1,
//     --training_config (a Hugging Face LlamaConfig directory);
//   pp = 1: tp_zero1_llama_hf_pretrain/tp_zero1_llama_hf_pretrain.py (commit 3aa65c66):
//     --tensor_parallel_size, --batch_size (per worker), --grad_accum_usteps, --seq_len,
//     --use_zero_1, --sequence_parallel_enabled, --selective_checkpoint_enabled,
//     --qkv_linear (flags), --kv_replicator, --use_flash_attention (default 1),
//     --use_gpu_compatible_precision, --model_path;
//   tp_pp_llama_hf_pretrain/run_llama2_70B_tp_pp.sh: torchrun --nproc_per_node 32 per
//     trn1.32xlarge, --kv_replicator 4 with --qkv_linear 1 at TP 32 over 8 KV heads,
//     XLA_DOWNCAST_BF16=1;
//   70B_config_llama2/config.json: the LlamaConfig keys listed in the output.
// training_utils.py: --use_gpu_compatible_precision keeps fp32 master weights and fp32
// gradient accumulation, which is ShardScope's bf16 mixed precision.
// Re-read at fbac349b61a3adbb123c2983835af692840ff62f (Release 2.29):
//   - both scripts take --context_parallel_size (run_llama_nxd.py, tp_zero1_llama_hf_pretrain.py:
//     nxd.neuronx_distributed_config(context_parallel_size=...); the data-parallel size is then
//     devices / (tp x pp x cp));
//   - mixed precision as AWS's own launchers pass it: tp_zero1_llama3_8B_hf_pretrain.sh passes
//     --use_mix_precision (AdamW_FP32OptimParams) and --use_gpu_compatible_precision 1 and exports
//     no XLA_DOWNCAST_BF16 (the script sets XLA_* only when --use_gpu_compatible_precision is 0);
//     run_llama3_70B_tp_pp.sh exports XLA_DOWNCAST_BF16=1 and leaves --use_gpu_compatible_precision
//     at its default 1.
// Both scripts activation-checkpoint full layers unless selective checkpointing is on, so
// a layout without recomputation is refused; so are ZeRO-2/3 and shard groups (the
// scripts take ZeRO-1 only), optimizer offload, the GPipe schedule,
// precisions other than bf16 mixed, SGD, and models that are not Llama-shaped (the
// scripts build LlamaForCausalLM). kv_replicator = tp / kv_heads when tp exceeds the KV
// heads; that --qkv_linear must accompany it is inferred from the 70B script, not from a
// stated rule.
#include "ExportCommon.h"

#include <algorithm>

namespace shardscope::exportdetail {

namespace {

std::string onOff(bool on) { return on ? "1" : "0"; }

} // namespace

ExportResult exportNeuronX(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("neuronx", r);
    refuseMultiTokenPrediction(refuse, p.model,
                               "the export writes no neuronx-nemo-megatron multi-token prediction settings");
    refuseModuleRecomputeAndOffload(refuse, l,
                                    "NeuronX Distributed recomputes whole layers or its attention core (no list "
                                    "of modules)",
                                    "the exported NxD config offloads no activations to the host");
    refuseMegatronOverlaps(refuse, l);
    refuseMoeDispatcher(refuse, l, "NeuronX Distributed has neither Megatron's allgather dispatcher nor DeepEP/HybridEP "
                                   "kernels");
    refuseAllToAllCp(refuse, l, "NeuronX Distributed's context parallelism is ring attention");
    refusePartialRecompute(refuse, l, "the exported NxD config checkpoints every layer");
    refuseUnevenPipeline(refuse, l,
                         "this exporter writes NeuronX Distributed's even split of the layers over the "
                         "pipeline stages; manual pipeline cuts are not exported");
    const ModelSpec& m = p.model;
    const ChipSpec& chip = p.cluster.node.chip;
    const Figures f = figures(p, l);

    if (chip.vendor != "AWS" || chip.name.rfind("trainium", 0) != 0)
        refuse.device(chip.display_name, "NeuronX Distributed trains on AWS Trainium");
    if (const std::string features = nonLlamaFeatures(m); !features.empty())
        refuse.add("the architecture of " + m.name + " (" + features + ")",
                   "the NxD Llama training scripts build LlamaForCausalLM");
    refuseExpertParallel(refuse, l, "the NxD Llama training scripts build a dense LlamaForCausalLM");
    if (l.zero_stage >= 2)
        refuse.add("ZeRO-" + str(l.zero_stage), "the scripts shard optimizer states only, as ZeRO-1 does");
    else if (f.partial_shard)
        refuse.add("a ZeRO shard group of " + str(f.shard_group) + " of the " + str(l.dp) + " data-parallel ranks",
                   "ZeRO-1 shards over the whole data-parallel group");
    if (l.offload == Offload::Optimizer)
        refuse.add("optimizer offload", "the scripts take no offload option");
    if (l.recompute == Recompute::None)
        refuse.add("no activation recomputation",
                   "the scripts checkpoint full layers unless selective checkpointing is on");
    if (f.pipelined && l.schedule == PipelineSchedule::GPipe)
        refuse.add("the GPipe schedule", "NxD's pipeline runs 1F1B, interleaved with --virtual_pipeline_size");
    // --use_gpu_compatible_precision 1 is bf16-autocast exactly (TrainingSpec.h); bf16 mixed is
    // exported to the same scripts as before (its fp32 gradient accumulation is then not priced).
    if (p.training.precision != Precision::BF16Mixed && p.training.precision != Precision::BF16Autocast)
        refuse.add(std::string(toString(p.training.precision)) + " precision",
                   "the scripts train in bf16 with fp32 master weights (--use_gpu_compatible_precision 1)");
    if (p.training.optimizer != Optimizer::AdamW)
        refuse.add(std::string("the optimizer ") + toString(p.training.optimizer), "the scripts use AdamW");
    if (gradientType(p.training) == DataType::BF16)
        refuse.add("bf16 gradients (main_grads bf16)",
                   "--use_gpu_compatible_precision 1 accumulates the gradients in fp32 (use_fp32_grad_acc)");
    if (refuse.any())
        return r;

    const int kvReplicator = l.tp > m.kv_heads ? l.tp / m.kv_heads : 1;
    const bool selective = l.recompute == Recompute::Selective;
    std::vector<std::string> args;
    auto arg = [&](const std::string& name, const std::string& value = "") {
        args.push_back(value.empty() ? name : name + " " + value);
    };
    std::string script;
    if (f.pipelined) {
        script = "run_llama_nxd.py";
        arg("--tensor_parallel_size", str(l.tp));
        arg("--pipeline_parallel_size", str(l.pp));
        arg("--virtual_pipeline_size", str(l.virtual_stages));
        arg("--context_parallel_size", str(l.cp));
        arg("--num_microbatches", str(f.micro_batches));
        arg("--train_batch_size", str(f.replica_batch));
        arg("--seq_len", str(p.training.seq_len));
        arg("--use_zero1_optimizer", onOff(l.zero_stage == 1));
        arg("--use_sequence_parallel", onOff(l.sequence_parallel));
        arg("--use_selective_checkpoint", onOff(selective));
        arg("--kv_replicator", str(kvReplicator));
        arg("--qkv_linear", onOff(kvReplicator > 1));
        arg("--use_flash_attention", onOff(p.training.flash_attention));
        arg("--use_gpu_compatible_precision", "1");
    } else {
        script = "tp_zero1_llama_hf_pretrain.py";
        arg("--tensor_parallel_size", str(l.tp));
        arg("--context_parallel_size", str(l.cp));
        arg("--batch_size", str(l.micro_batch));
        arg("--grad_accum_usteps", str(f.micro_batches));
        arg("--seq_len", str(p.training.seq_len));
        if (l.zero_stage == 1)
            arg("--use_zero_1");
        if (l.sequence_parallel)
            arg("--sequence_parallel_enabled");
        if (selective)
            arg("--selective_checkpoint_enabled");
        arg("--kv_replicator", str(kvReplicator));
        if (kvReplicator > 1)
            arg("--qkv_linear");
        arg("--use_flash_attention", onOff(p.training.flash_attention));
        arg("--use_mix_precision");  // as tp_zero1_llama3_8B_hf_pretrain.sh passes it
        arg("--use_gpu_compatible_precision", "1");
    }

    r.notes.push_back("NxD derives the data-parallel size: " + str(f.devices) + " NeuronCores / (tp " + str(l.tp) +
                      " x pp " + str(l.pp) + " x cp " + str(l.cp) + ") = dp " + str(l.dp) + "; " + str(f.micro_batches) +
                      " micro-batches of " + str(l.micro_batch) + " sequence(s) per replica and step.");
    if (kvReplicator > 1)
        r.notes.push_back("kv_replicator " + str(kvReplicator) + ": tp " + str(l.tp) + " over " + str(m.kv_heads) +
                          " key/value heads replicates each KV head " + str(kvReplicator) + " times.");
    r.notes.push_back(std::string(f.pipelined ? "--training_config" : "--model_path") +
                      " DIR: a Hugging Face LlamaConfig config.json with hidden_size " + str(m.hidden) +
                      ", intermediate_size " + str(m.ffn_hidden) + ", num_hidden_layers " + str(m.layers) +
                      ", num_attention_heads " + str(m.heads) + ", num_key_value_heads " + str(m.kv_heads) +
                      ", vocab_size " + str(m.vocab) + ", max_position_embeddings " +
                      str(std::max(m.max_seq, p.training.seq_len)) + ", tie_word_embeddings " +
                      (m.tied_embeddings ? "true" : "false") + ".");
    r.notes.push_back("Yours to add: that directory, the tokenized data, learning rate and steps.");

    std::string t = "#!/bin/bash\n";
    t += commentLines({"NeuronX Distributed (Trainium) launch settings exported by ShardScope", problemLine(p),
                       "layout " + toString(l),
                       "Option names: aws-neuron/neuronx-distributed examples/training/llama/" +
                           std::string(f.pipelined ? "tp_pp_llama_hf_pretrain/run_llama_nxd.py (commits 0598cd8b, fbac349b)"
                                                   : "tp_zero1_llama_hf_pretrain/tp_zero1_llama_hf_pretrain.py "
                                                     "(commits 3aa65c66, fbac349b)"),
                       ""});
    t += commentLines(r.notes);
    if (f.pipelined)
        t += "export XLA_DOWNCAST_BF16=1  # bf16 compute, as run_llama3_70B_tp_pp.sh exports it\n";
    t += "NXD_ARGS=(\n";
    for (const std::string& a : args)
        t += "    " + a + "\n";
    t += ")\n";
    t += torchrunCommand(f, true) + " \\\n    " + script +
         " \"${NXD_ARGS[@]}\" \"$@\"\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
