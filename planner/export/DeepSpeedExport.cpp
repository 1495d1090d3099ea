// DeepSpeed: a ds_config.json. JSON carries no comments, so what the user must still
// do goes to ExportResult::notes.
//
// Key names from deepspeedai/DeepSpeed:
//   docs/_pages/config-json.md (commit 00376da4): train_batch_size,
//     train_micro_batch_size_per_gpu, gradient_accumulation_steps, bf16.enabled,
//     fp16.enabled, zero_optimization.stage, zero_optimization.offload_optimizer
//     {device, pin_memory}, zero_hpz_partition_size, tensor_parallel.autotp_size (AutoTP,
//     training with ZeRO 0-3), activation_checkpointing {partition_activations,
//     cpu_checkpointing, contiguous_memory_optimization, synchronize_checkpoint_boundary};
//     "train_batch_size must be equal to train_micro_batch_size_per_gpu *
//     gradient_accumulation_steps * number of GPUs" (the data-parallel ranks under model
//     parallelism: DeepSpeedConfig takes its world size from the data-parallel group);
//   deepspeed/runtime/zero/config.py (commit 1b88ac36): mics_shard_size (MiCS, ZeRO-3
//     partitioning within a shard group, replication across groups);
//   deepspeed/runtime/config.py (commit 029f12b3): the "pipeline" section with "stages"
//     and "activation_checkpoint_interval";
//   deepspeed/runtime/pipe/engine.py: PipelineEngine asserts "ZeRO-2 and ZeRO-3 are
//     incompatible with pipeline parallelism" (the assertion was found in several stored
//     copies of the file, not attributed to a commit of deepspeedai/DeepSpeed).
//   deepspeed/runtime/config.py and deepspeed/__init__.py (commit 38327e07f): DeepSpeedConfig is
//     built in deepspeed.initialize before the engine sets up AutoTP's groups, with the
//     data-parallel world size of the mpu passed, else of the mesh, else of all ranks; with
//     AutoTP and no mpu that is every rank (tp copies included), so _batch_assertion would
//     refuse train_batch_size = micro x accumulation x dp. AutoTP exports therefore leave
//     train_batch_size out and let _set_batch_related_parameters derive it (DeepSpeed's own
//     tests/unit/model_parallelism/test_autotp_training.py give only the micro-batch).
// Ulysses sequence parallelism at deepspeedai/DeepSpeed commit edaa7221267243c7be7fb49c5d5f5c4fb97b4641:
//   deepspeed/__init__.py: with "sequence_parallel_size" and "data_parallel_size" in the config,
//     deepspeed.initialize builds a (data_parallel, sequence_parallel) device mesh, and
//     deepspeed/runtime/config.py takes the batch world size from its data_parallel group, so
//     train_batch_size = micro x accumulation x dp holds;
//   deepspeed/runtime/sequence_parallel/ulysses_sp.py: UlyssesSPAttentionHF.register_with_transformers
//     (sequence_parallel_size, ...) and UlyssesSPDataLoaderAdapter; it raises unless sp divides the
//     attention heads and the KV heads divide by sp or sp by them.
// Expert parallelism (AutoEP) at edaa7221: deepspeed/runtime/config.py reads an "expert_parallel"
//   section (deepspeed/module_inject/auto_ep_config.py parse_autoep_config: enabled, autoep_size,
//   expert_tensor_parallel_size, preset_model, ...); deepspeed/runtime/engine.py
//   _configure_expert_parallel replaces the Hugging Face model's MoE blocks (presets mixtral,
//   qwen3_moe, qwen3_5_moe, deepseek_v2, deepseek_v3, chosen by the model type; transformers >= 5)
//   after validate_autoep_config, build_folding_spec and validate_folding_global
//   (auto_ep_folding.py): ep x etp divides the devices of a stage, ep groups are consecutive ranks
//   (the layout's tp-ep-dp expert grid at etp 1), "expert_tensor_parallel_size ... is not
//   supported yet" other than 1, with AutoTP ("folding") ep > 1, no pipeline, no Ulysses, ZeRO <= 2
//   and no offload; pp is taken from an mpu (1 without one), so a PipelineModule's grid is not
//   AutoEP's; the deepseek_v3 preset has supports_expert_bias=False (the aux-loss-free bias is
//   rejected).
// The plan's cp runs as Ulysses where it applies (no AutoTP, no pipeline): an all-to-all over
// heads instead of the plan's K/V ring, the same sequence split (the note says so).
// Decisions: tensor parallelism is AutoTP (tensor_parallel.autotp_size), which needs no
// Megatron-DeepSpeed; Megatron-style sequence parallelism, fp8,
// selective recomputation (model code, not a config key), the GPipe and interleaved
// schedules (PipelineEngine has its own 1F1B-style schedule), AutoTP with pipeline
// parallelism (not documented together) and a ZeRO-1/2 shard group smaller than dp
// (mics_shard_size is ZeRO-3; zero_hpz_partition_size only adds a secondary copy of the
// weights, it does not shrink the optimizer shard group) are refused.
#include "ExportCommon.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace shardscope::exportdetail {

ExportResult exportDeepSpeed(const Problem& p, const Layout& l)
{
    ExportResult r;
    r.notes_in_text = false;
    Refusals refuse("deepspeed", r);
    refuseMultiTokenPrediction(refuse, p.model,
                               "the export trains a Hugging Face model under DeepSpeed (DeepseekV3ForCausalLM "
                               "builds no MTP module)");
    refuseModuleRecomputeAndOffload(refuse, l,
                                    "DeepSpeed's activation checkpointing recomputes whole layers (no list of "
                                    "modules)",
                                    "DeepSpeed's cpu_checkpointing moves the checkpoints of recomputed layers, "
                                    "not the activations of N layers trained without recomputation");
    refuseMegatronOverlaps(refuse, l);
    refuseMoeDispatcher(refuse, l,
                        "DeepSpeed's AutoEP exchanges tokens with its own all-to-all; it has neither Megatron's "
                        "allgather dispatcher nor DeepEP/HybridEP kernels");
    refusePartialRecompute(refuse, l,
                           "the exported ds_config checkpoints every layer (activation_checkpoint_interval 1)");
    refuseUnevenPipeline(refuse, l,
                         "deepspeed.pipe.PipelineModule balances the layers by its partition_method "
                         "(parameters, uniform, type:...), not by given counts");
    const Figures f = figures(p, l);
    const std::string& vendor = p.cluster.node.chip.vendor;

    if (vendor != "NVIDIA" && vendor != "AMD" && vendor != "Intel")
        refuse.device(p.cluster.node.chip.display_name,
                   "DeepSpeed's accelerators are CUDA and ROCm GPUs and Intel Gaudi");
    if (l.cp > 1 && l.cp_comm != CpComm::A2A)
        refuse.add("context parallelism as a K/V ring (cp_comm=p2p)",
                   "DeepSpeed's sequence parallelism is Ulysses' all-to-all of heads (sequence_parallel_size): "
                   "cp_comm=a2a, priced as such");
    if (l.cp > 1 && (l.tp > 1 || f.pipelined))
        refuse.add("context parallelism (cp=" + str(l.cp) + ") with " + (l.tp > 1 ? "AutoTP" : "pipeline parallelism"),
                   "Ulysses (sequence_parallel_size) meshes data and sequence parallelism only");
    if (l.cp > 1 && p.model.heads % l.cp != 0)
        refuse.add("context parallelism (cp=" + str(l.cp) + ") over " + str(p.model.heads) + " attention heads",
                   "Ulysses (ulysses_sp.py) needs the sequence-parallel size to divide the heads");
    if (l.cp > 1 && p.model.kv_heads % l.cp != 0 && l.cp % p.model.kv_heads != 0)
        refuse.add("context parallelism (cp=" + str(l.cp) + ") over " + str(p.model.kv_heads) + " key/value heads",
                   "Ulysses (ulysses_sp.py) needs the KV heads to divide by the sequence-parallel size or it by them");
    if (l.sequence_parallel)
        refuse.add("Megatron-style sequence parallelism (sp=on)",
                   "AutoTP splits the linear layers only; norm and dropout regions stay replicated");
    if (l.tp > 1 && f.pipelined)
        refuse.add("tensor parallelism (tp=" + str(l.tp) + ") together with pipeline parallelism (pp=" + str(l.pp) + ")",
                   "AutoTP is documented with ZeRO data parallelism, not with PipelineModule");
    if (l.tp > 1 && l.zero_stage == 3)
        refuse.add("AutoTP (tp=" + str(l.tp) + ") with ZeRO-3",
                   "deepspeed/runtime/engine.py (38327e07f) asserts ZeRO stage <= 2 with autotp_size > 1");
    if (f.pipelined && l.zero_stage >= 2)
        refuse.add("ZeRO-" + str(l.zero_stage) + " with pipeline parallelism",
                   "PipelineEngine asserts ZeRO stage < 2");
    if (f.pipelined && l.schedule != PipelineSchedule::OneFOneB)
        refuse.add(std::string("the ") + toString(l.schedule) + " schedule",
                   "DeepSpeed's PipelineEngine runs its own 1F1B-style schedule");
    if (f.partial_shard && l.zero_stage < 3)
        refuse.add("a ZeRO-" + str(l.zero_stage) + " shard group of " + str(f.shard_group) + " of the " + str(l.dp) +
                       " data-parallel ranks",
                   "mics_shard_size applies to ZeRO-3; zero_hpz_partition_size only adds a secondary weight copy");
    if (l.recompute == Recompute::Selective)
        refuse.add("selective recomputation",
                   "ds_config checkpoints whole layers; attention-only recomputation is model code");
    if (quantizedRecipe(p.training.precision))
        refuse.add(std::string(toString(p.training.precision)) + " precision",
                   "ds_config has bf16 and fp16 sections, no FP8/FP4 recipe");
    if (p.training.precision == Precision::BF16Autocast)
        refuse.add("bf16-autocast precision",
                   "NeuronX Distributed's precision gathers the updated parameters in fp32; DeepSpeed's bf16 "
                   "optimizer gathers them in bf16 (grad_accum_dtype fp32 alone is not the same run)");
    // bf16 keeps DeepSpeed's gradients in bf16 (engine.py @ edaa722: grad_accum_dtype None is the model's
    // dtype, communication_data_type bf16); fp32 accumulation is its BF16_Optimizer's, chosen by
    // _do_optimizer_sanity_check for ZeRO-1 without offload only (no ZeRO: NotImplementedError).
    const bool fp32Grads = p.training.precision == Precision::BF16Mixed && gradientType(p.training) == DataType::FP32;
    if (fp32Grads && (l.zero_stage != 1 || l.offload == Offload::Optimizer))
        refuse.add("fp32 gradients (main_grads fp32) with " +
                       (l.zero_stage == 1 ? std::string("the optimizer offloaded") : "ZeRO-" + str(l.zero_stage)),
                   "DeepSpeed accumulates bf16 gradients there; data_types.grad_accum_dtype fp32 runs with ZeRO-1 "
                   "without offload only (price it with --main-grads bf16)");
    const bool autoep = l.ep > 1;
    if (autoep) {
        if (l.expertTensorParallel() != 1)
            refuse.add("expert tensor parallelism (etp=" + str(l.expertTensorParallel()) + ")",
                       "AutoEP's validate_folding_global supports expert_tensor_parallel_size 1 only");
        if (f.pipelined)
            refuse.add("expert parallelism (ep=" + str(l.ep) + ") with pipeline parallelism",
                       "AutoEP takes the pipeline size from an mpu, which a PipelineModule run does not pass");
        if (l.cp > 1)
            refuse.add("expert parallelism (ep=" + str(l.ep) + ") with Ulysses (cp=" + str(l.cp) + ")",
                       "AutoEP builds its expert groups over the sequence-parallel ranks, not the layout's dp x cp");
        if (l.tp > 1 && l.offload != Offload::None)
            refuse.add("optimizer offload with AutoEP and AutoTP",
                       "validate_folding_global: offload with AutoEP+AutoTP folding is not validated yet");
        if (p.model.moe.score_correction_bias)
            refuse.add("the routers' score-correction bias (auxiliary-loss-free balancing)",
                       "AutoEP's deepseek_v3 preset has supports_expert_bias=False and rejects load_balance_coeff");
    } else if (l.etp > 0 && l.etp != l.tp) {
        refuse.add("expert tensor parallelism (etp=" + str(l.etp) + " with tp=" + str(l.tp) + ") without expert parallelism",
                   "ds_config names an expert tensor-parallel size only in its AutoEP section "
                   "(expert_parallel), which the export writes for ep > 1");
    }
    if (refuse.any())
        return r;

    QJsonObject config;
    const bool autotp = l.tp > 1;
    if (!autotp)
        config.insert("train_batch_size", p.training.global_batch);
    config.insert("train_micro_batch_size_per_gpu", l.micro_batch);
    config.insert("gradient_accumulation_steps", f.micro_batches);
    if (p.training.precision == Precision::BF16Mixed)
        config.insert("bf16", QJsonObject{{"enabled", true}});
    if (fp32Grads) {  // the gradients accumulated and reduced in fp32, as priced
        config.insert("data_types", QJsonObject{{"grad_accum_dtype", "fp32"}});
        config.insert("communication_data_type", "fp32");
    }
    else if (p.training.precision == Precision::FP16Mixed)
        config.insert("fp16", QJsonObject{{"enabled", true}});

    QJsonObject zero{{"stage", l.zero_stage}};
    if (l.offload == Offload::Optimizer)
        zero.insert("offload_optimizer", QJsonObject{{"device", "cpu"}, {"pin_memory", true}});
    if (f.partial_shard) {
        zero.insert("mics_shard_size", f.shard_group);
        r.notes.push_back("mics_shard_size: shard every model state over groups of " + str(f.shard_group) +
                          " ranks and replicate across the " + str(l.dp / f.shard_group) +
                          " groups (MiCS); construct the model under MiCS's zero.Init variant.");
    }
    config.insert("zero_optimization", zero);

    if (l.cp > 1) {
        config.insert("sequence_parallel_size", l.cp);
        config.insert("data_parallel_size", l.dp);
        r.notes.push_back("sequence_parallel_size " + str(l.cp) + " (Ulysses): register UlyssesSPAttentionHF with "
                          "sequence_parallel_size=" + str(l.cp) + " and wrap the data loader in "
                          "UlyssesSPDataLoaderAdapter; attention exchanges q, k, v and its output all-to-all "
                          "between the sequence and the head split, as the plan prices (cp_comm=a2a).");
    }

    if (l.tp > 1) {
        config.insert("tensor_parallel", QJsonObject{{"autotp_size", l.tp}});
        r.notes.push_back("tensor_parallel.autotp_size: AutoTP partitions a Hugging Face model by its tp_plan "
                          "or a preset_model; add preset_model or partition_config if the model has neither.");
    }
    if (autoep) {
        config.insert("expert_parallel", QJsonObject{{"enabled", true},
                                                     {"autoep_size", l.ep},
                                                     {"expert_tensor_parallel_size", 1}});
        r.notes.push_back("expert_parallel (AutoEP): the Hugging Face model's MoE blocks are replaced by expert-parallel "
                          "ones (a preset for its model type: Mixtral, Qwen3-MoE, DeepSeek; transformers 5 or newer); " +
                          expertGridNote(p.model, l));
    }
    if (f.pipelined) {
        config.insert("pipeline", QJsonObject{{"stages", l.pp},
                                              {"activation_checkpoint_interval",
                                               l.recompute == Recompute::Full ? 1 : 0}});
        r.notes.push_back("pipeline.stages: build the model as a deepspeed.pipe.PipelineModule with num_stages=" +
                          str(l.pp) + ".");
    } else if (l.recompute == Recompute::Full) {
        config.insert("activation_checkpointing", QJsonObject{{"partition_activations", false},
                                                              {"cpu_checkpointing", false},
                                                              {"contiguous_memory_optimization", false},
                                                              {"synchronize_checkpoint_boundary", false}});
        r.notes.push_back("activation_checkpointing configures deepspeed.checkpointing; the model calls "
                          "deepspeed.checkpointing.checkpoint on every transformer layer.");
    }

    if (autotp)
        r.notes.push_back("train_batch_size is left to DeepSpeed: it counts all " + str(f.devices) +
                          " ranks before AutoTP's groups exist (micro-batch x accumulation x " + str(f.devices) + " = " +
                          str(std::int64_t(l.micro_batch) * f.micro_batches * f.devices) +
                          "); the sequences per step are " + str(p.training.global_batch) + " = micro-batch " +
                          str(l.micro_batch) + " x " + str(f.micro_batches) + " accumulation steps x " + str(l.dp) +
                          " data-parallel ranks (the " + str(l.tp) + " ranks of a tensor-parallel group share inputs).");
    else
        r.notes.push_back("train_batch_size " + str(p.training.global_batch) + " = micro-batch " + str(l.micro_batch) +
                          " x " + str(f.micro_batches) + " accumulation steps x " + str(l.dp) + " data-parallel ranks (" +
                          str(f.devices) + " devices / tp " + str(l.tp) + " / pp " + str(l.pp) + " / cp " + str(l.cp) + ").");
    r.notes.push_back("The optimizer (" + std::string(toString(p.training.optimizer)) +
                      ") and learning rate come from your script or an \"optimizer\" section.");
    // ds_config holds no model: the qkv bias, QK-norm, window, MoE, ... are the model's own.
    if (const std::string note = modelBuildNote(p.model); !note.empty())
        r.notes.push_back(note);
    r.text = QJsonDocument(config).toJson(QJsonDocument::Indented).toStdString();
    return r;
}

} // namespace shardscope::exportdetail
