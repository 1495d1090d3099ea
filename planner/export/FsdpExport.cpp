// PyTorch FSDP2 (fully_shard on a DeviceMesh), composed with tensor, pipeline and context
// parallelism as torch.distributed offers them: a Python module with the mesh, the plans and
// the batch figures, and the torchrun line (as a comment). The format name stays "fsdp";
// FullyShardedDataParallel ("FSDP1") is what PyTorch deprecates.
//
// Names from pytorch/pytorch:
//   torch/distributed/fsdp/_fully_shard/_fully_shard.py (commit 0257dd1c): fully_shard(module, *,
//     mesh, reshard_after_forward, mp_policy, offload_policy); "If 1D, then parameters are fully
//     sharded across the 1D mesh (FSDP) ... If 2D, then parameters are sharded across the 1st dim
//     and replicated across the 0th dim (HSDP)"; reshard_after_forward False "keeps the unsharded
//     parameters in memory after forward and avoids the all-gather in backward" (ZeRO-2-like);
//     "fully_shard should be called bottom-up"; FSDPModule.set_requires_gradient_sync (FSDP1's
//     no_sync) for gradient accumulation; MixedPrecisionPolicy(param_dtype, reduce_dtype) and
//     OffloadPolicy from _fsdp_api (CPUOffloadPolicy offloads parameters, gradients and the
//     optimizer step together);
//   torch/distributed/tensor/parallel/style.py (commit 004c2c9a): ColwiseParallel,
//     RowwiseParallel(input_layouts, output_layouts), SequenceParallel, PrepareModuleInput(
//     input_layouts, desired_input_layouts, input_kwarg_layouts, desired_input_kwarg_layouts),
//     applied with parallelize_module(module, device_mesh, parallelize_plan);
//   torch/distributed/tensor/experimental/_attention.py: context_parallel(mesh, *, buffers,
//     buffer_seq_dims, no_restore_buffers), which patches scaled_dot_product_attention with the
//     ring (load-balanced head/tail chunks) and shards the buffers along the sequence;
//   torch/distributed/pipelining: PipelineStage(submodule, stage_index, num_stages, device, group),
//     Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B(stages, n_microbatches, loss_fn), as
//     pytorch/torchtitan torchtitan/distributed/pipeline_parallel.py (b5bcd76c) builds them;
//   torch/distributed/device_mesh.py: init_device_mesh(device_type, mesh_shape, mesh_dim_names),
//     DeviceMesh._flatten (used by torchtitan's parallel_dims.py for the dp_shard x cp mesh);
//   torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py: checkpoint_wrapper.
// The data-parallel mesh is (dp_replicate, dp_shard x cp), as torchtitan builds it: context-parallel
// ranks share the FSDP shard group, and a shard size of 1 is plain replication (DDP) under the
// same fully_shard call (torchtitan/models/llama3/parallelize.py: "with shard_degree=1 it is a
// no-op for the all-gather"). So cp > 1 shards model states over the cp ranks: refused without ZeRO.
// The tensor-parallel plan names Hugging Face Llama modules (q_proj ... down_proj, embed_tokens,
// lm_head), so tp is refused for models that are not Llama-shaped. Refused as well: ZeRO-1
// (fully_shard's lightest sharding also shards gradients), optimizer-only offload, fp8.
#include "ExportCommon.h"

namespace shardscope::exportdetail {

namespace {

std::string tensorParallelPlans(bool sp)
{
    std::string t;
    t += "\n\ndef model_tensor_parallel_plan():\n";
    t += "    \"\"\"parallelize_module(model, mesh[\"tp\"], ...) on a Hugging Face LlamaForCausalLM.\"\"\"\n";
    t += "    return {\n";
    if (sp) {
        t += "        \"model.embed_tokens\": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),\n";
        t += "        \"model.norm\": SequenceParallel(),\n";
        t += "        \"lm_head\": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),\n";
    } else {
        t += "        \"model.embed_tokens\": RowwiseParallel(input_layouts=Replicate()),\n";
        t += "        \"lm_head\": ColwiseParallel(output_layouts=Replicate()),\n";
    }
    t += "    }\n";
    t += "\n\ndef block_tensor_parallel_plan():\n";
    t += "    \"\"\"parallelize_module(block, mesh[\"tp\"], ...) on every LlamaDecoderLayer.\"\"\"\n";
    t += "    return {\n";
    if (sp) {
        t += "        \"input_layernorm\": SequenceParallel(),\n";
        t += "        \"self_attn\": PrepareModuleInput(\n";
        t += "            input_kwarg_layouts={\"hidden_states\": Shard(1)},\n";
        t += "            desired_input_kwarg_layouts={\"hidden_states\": Replicate()},\n";
        t += "        ),\n";
    }
    t += "        \"self_attn.q_proj\": ColwiseParallel(),\n";
    t += "        \"self_attn.k_proj\": ColwiseParallel(),\n";
    t += "        \"self_attn.v_proj\": ColwiseParallel(),\n";
    t += std::string("        \"self_attn.o_proj\": RowwiseParallel(") + (sp ? "output_layouts=Shard(1)" : "") + "),\n";
    if (sp) {
        t += "        \"post_attention_layernorm\": SequenceParallel(),\n";
        t += "        \"mlp\": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),\n";
    }
    t += "        \"mlp.gate_proj\": ColwiseParallel(),\n";
    t += "        \"mlp.up_proj\": ColwiseParallel(),\n";
    t += std::string("        \"mlp.down_proj\": RowwiseParallel(") + (sp ? "output_layouts=Shard(1)" : "") + "),\n";
    t += "    }\n";
    return t;
}

} // namespace

ExportResult exportFsdp(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("fsdp", r);
    refuseMultiTokenPrediction(refuse, p.model,
                               "the export's PyTorch FSDP training script builds no MTP module");
    refuseModuleRecomputeAndOffload(refuse, l,
                                    "the exported script's checkpoint_wrapper recomputes whole transformer "
                                    "blocks (no list of modules)",
                                    "the exported script offloads no activations to the host");
    refuseUnevenPipeline(refuse, l, "the exported pipeline gives every model chunk the same layers");
    refuseMegatronOverlaps(refuse, l);
    refuseMoeDispatcher(refuse, l,
                        "the wrapped Hugging Face MoE blocks compute their experts on every rank: no token dispatcher");
    refuseAllToAllCp(refuse, l, "PyTorch's context_parallel (torch.distributed.tensor.experimental) patches attention with a K/V ring");
    refusePartialRecompute(refuse, l, "the exported wrapper checkpoints every transformer block");
    const Figures f = figures(p, l);
    const ModelSpec& m = p.model;

    if (!isCudaOrRocmGpu(p.cluster.node.chip))
        refuse.device(p.cluster.node.chip.display_name, "the export targets CUDA and ROCm GPUs, device type \"cuda\"");
    if (l.tp > 1)
        if (const std::string features = nonLlamaFeatures(m); !features.empty())
            refuse.add("tensor parallelism (tp=" + str(l.tp) + ") for " + m.name + " (" + features + ")",
                       "the export's parallelize_module plan names Hugging Face Llama modules");
    // The user's Hugging Face MoE blocks keep every expert on every rank: the exported mesh has
    // no expert dimension.
    refuseExpertParallel(refuse, l, "the module wraps the user's Hugging Face model, whose MoE blocks hold every "
                                    "expert; the exported mesh has no expert dimension");
    if (l.cp > 1 && l.zero_stage == 0)
        refuse.add("context parallelism (cp=" + str(l.cp) + ") without ZeRO",
                   "the context-parallel ranks are part of fully_shard's shard mesh (dp_shard x cp), so cp > 1 "
                   "shards model states");
    if (l.zero_stage == 1)
        refuse.add("ZeRO-1 (optimizer states only)", "fully_shard, FSDP2's only sharding, also shards gradients");
    if (l.offload == Offload::Optimizer)
        refuse.add("optimizer-only offload", "CPUOffloadPolicy moves parameters and gradients too");
    if (quantizedRecipe(p.training.precision))
        refuse.add(std::string(toString(p.training.precision)) + " precision",
                   "MixedPrecisionPolicy takes torch dtypes for parameters and reduction; no FP8/FP4 recipe");
    if (p.training.precision == Precision::BF16Autocast)
        refuse.add("bf16-autocast precision",
                   "NeuronX Distributed's precision keeps bf16 weights with fp32 gradient accumulation; "
                   "MixedPrecisionPolicy(param_dtype=bf16) keeps the sharded parameters in fp32 and casts them "
                   "at each gather, a different set of states");
    if (refuse.any())
        return r;

    const bool sharded = l.zero_stage >= 2;
    const int shard = sharded ? f.shard_group : 1;
    const int replicate = l.dp / shard;
    const bool interleaved = f.pipelined && l.schedule == PipelineSchedule::Interleaved;
    const char* schedule = !f.pipelined                               ? ""
                           : l.schedule == PipelineSchedule::GPipe    ? "ScheduleGPipe"
                           : interleaved                              ? "ScheduleInterleaved1F1B"
                                                                      : "Schedule1F1B";
    std::string dtype, reduceDtype;
    if (p.training.precision == Precision::BF16Mixed)
        dtype = "torch.bfloat16";
    else if (p.training.precision == Precision::FP16Mixed)
        dtype = "torch.float16";
    // The gradients reduced in the priced type: fp32 main gradients reduce_dtype=torch.float32.
    if (!dtype.empty())
        reduceDtype = gradientType(p.training) == DataType::FP32 ? "torch.float32" : dtype;

    // The module wraps the user's model: the qkv bias, QK-norm, window, MoE, ... are its own.
    if (const std::string note = modelBuildNote(m); !note.empty())
        r.notes.push_back(note);
    r.notes.push_back("Mesh pp " + str(l.pp) + " x dp_replicate " + str(replicate) + " x dp_shard " + str(shard) +
                      " x cp " + str(l.cp) + " x tp " + str(l.tp) + " = " + str(f.devices) + " ranks, tp innermost.");
    if (sharded)
        r.notes.push_back(std::string("fully_shard (") +
                          (l.zero_stage == 2 ? "ZeRO-2: reshard_after_forward=False" : "ZeRO-3") +
                          ") shards model states over dp_shard x cp = " + str(shard * l.cp) +
                          " ranks, replicated across " + str(replicate) + ".");
    else
        r.notes.push_back("dp_shard 1: fully_shard shards nothing and all-reduces gradients across the " +
                          str(replicate) + " replicas (DDP).");
    if (f.pipelined)
        r.notes.push_back(str(f.micro_batches) + " pipeline micro-batches of " + str(l.micro_batch) +
                          " sequence(s) per step; " + str(m.layers / (l.pp * l.virtual_stages)) +
                          " layers per model chunk, chunk i of pp rank r is stage r + i x " + str(l.pp) + ".");
    else
        r.notes.push_back(str(f.micro_batches) + " micro-batches of " + str(l.micro_batch) + " sequence(s) of " +
                          str(p.training.seq_len) + " tokens per rank and optimizer step (global batch " +
                          str(p.training.global_batch) + ").");
    if (l.cp > 1)
        r.notes.push_back("Context parallelism patches scaled_dot_product_attention: the model must attend through "
                          "it (attn_implementation=\"sdpa\").");
    if (l.recompute == Recompute::Selective)
        r.notes.push_back("Selective recomputation: pass each block's core attention (softmax(QK^T)V) module to "
                          "wrap_for_recompute.");
    if (p.training.precision == Precision::FP16Mixed)
        r.notes.push_back("fp16 needs a gradient scaler that works on sharded gradients.");
    r.notes.push_back("The optimizer (" + std::string(toString(p.training.optimizer)) +
                      ") is created after parallelize(), on the sharded parameters.");

    std::string t;
    t += commentLines({"PyTorch FSDP2 settings exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Names: pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fully_shard.py (commit 0257dd1c), "
                       "tensor/parallel/style.py (004c2c9a), tensor/experimental, pipelining, device_mesh.py",
                       ""});
    t += commentLines(r.notes);
    t += commentLines({"", "Launch on every node (train.py imports this module):",
                       "  " + torchrunCommand(f, false) + " train.py"});
    t += "import torch\n";
    if (l.recompute != Recompute::None)
        t += "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n";
    t += "from torch.distributed.device_mesh import init_device_mesh\n";
    t += "from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard\n";
    if (f.pipelined)
        t += std::string("from torch.distributed.pipelining import PipelineStage, ") + schedule + "\n";
    if (l.tp > 1 && l.sequence_parallel)
        t += "from torch.distributed.tensor import Replicate, Shard\n";
    else if (l.tp > 1)
        t += "from torch.distributed.tensor import Replicate\n";
    if (l.cp > 1)
        t += "from torch.distributed.tensor.experimental import context_parallel\n";
    if (l.tp > 1) {
        t += "from torch.distributed.tensor.parallel import (\n    ColwiseParallel,\n";
        if (l.sequence_parallel)
            t += "    PrepareModuleInput,\n";
        t += "    RowwiseParallel,\n";
        if (l.sequence_parallel)
            t += "    SequenceParallel,\n";
        t += "    parallelize_module,\n)\n";
    }
    t += "\nMICRO_BATCH_SIZE = " + str(l.micro_batch) + "\n";
    if (f.pipelined)
        t += "PIPELINE_MICROBATCHES = " + str(f.micro_batches) + "  # per step; no gradient accumulation\n";
    else
        t += "GRADIENT_ACCUMULATION_STEPS = " + str(f.micro_batches) +
             "  # model.set_requires_gradient_sync(False) on all but the last\n";
    t += "SEQUENCE_LENGTH = " + str(p.training.seq_len) + "\n";
    t += "RESHARD_AFTER_FORWARD = " + std::string(l.zero_stage == 3 ? "True" : "False") + "\n";

    t += "\n\ndef build_mesh():\n";
    t += "    mesh = init_device_mesh(\n        \"cuda\",\n        (" + str(l.pp) + ", " + str(replicate) + ", " +
         str(shard) + ", " + str(l.cp) + ", " + str(l.tp) + "),\n";
    t += "        mesh_dim_names=(\"pp\", \"dp_replicate\", \"dp_shard\", \"cp\", \"tp\"),\n    )\n";
    t += "    mesh[\"dp_shard\", \"cp\"]._flatten(\"dp_shard_cp\")  # FSDP's shard group\n";
    t += "    return mesh\n";
    if (l.tp > 1)
        t += tensorParallelPlans(l.sequence_parallel);
    if (l.recompute != Recompute::None) {
        t += "\n\ndef wrap_for_recompute(modules):\n";
        t += std::string("    \"\"\"") +
             (l.recompute == Recompute::Full ? "Full recomputation: every transformer block"
                                             : "Selective recomputation: every block's core attention") +
             ", an nn.ModuleList, before fully_shard.\"\"\"\n";
        t += "    for i, module in enumerate(modules):\n        modules[i] = checkpoint_wrapper(module)\n";
    }
    t += "\n\ndef parallelize(model, blocks, mesh):\n";
    t += "    \"\"\"Tensor parallelism, recomputation, then fully_shard bottom-up: each block, then the root.\"\"\"\n";
    if (l.tp > 1) {
        t += "    parallelize_module(model, mesh[\"tp\"], model_tensor_parallel_plan())\n";
        t += "    for block in blocks:\n        parallelize_module(block, mesh[\"tp\"], block_tensor_parallel_plan())\n";
    }
    if (l.recompute == Recompute::Full)
        t += "    wrap_for_recompute(blocks)\n";
    t += "    mp_policy = MixedPrecisionPolicy(";
    if (!dtype.empty())
        t += "param_dtype=" + dtype + ", reduce_dtype=" + reduceDtype;  // the gradients' type, as priced
    t += ")\n";
    t += "    dp_mesh = mesh[\"dp_replicate\", \"dp_shard_cp\"]  # HSDP placement: replicate, shard\n";
    t += "    for block in blocks:\n";
    t += "        fully_shard(block, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD, mp_policy=mp_policy)\n";
    t += "    fully_shard(model, mesh=dp_mesh, reshard_after_forward=False, mp_policy=mp_policy)\n";
    t += "    return model\n";
    if (f.pipelined) {
        t += "\n\ndef pipeline_schedule(chunks, mesh, loss_fn):\n";
        t += "    \"\"\"chunks: this pp rank's " + str(l.virtual_stages) + " model chunk(s), each parallelize()d.\"\"\"\n";
        t += "    pp_mesh = mesh[\"pp\"]\n";
        t += "    rank = pp_mesh.get_local_rank()\n";
        t += "    device = torch.device(\"cuda\", torch.cuda.current_device())\n";
        t += "    stages = [\n";
        t += "        PipelineStage(chunk, rank + i * " + str(l.pp) + ", " + str(l.pp * l.virtual_stages) +
             ", device, group=pp_mesh.get_group())\n";
        t += "        for i, chunk in enumerate(chunks)\n    ]\n";
        t += std::string("    return ") + schedule + "(" + (interleaved ? "stages" : "stages[0]") +
             ", n_microbatches=PIPELINE_MICROBATCHES, loss_fn=loss_fn)\n";
    }
    if (l.cp > 1) {
        t += "\n\ndef context_parallel_region(mesh, buffers, seq_dims):\n";
        t += "    \"\"\"with context_parallel_region(mesh, [input_ids, labels, position_ids], [1, 1, 1]): "
             "forward and backward.\"\"\"\n";
        t += "    return context_parallel(mesh[\"cp\"], buffers=buffers, buffer_seq_dims=seq_dims, "
             "no_restore_buffers=set(buffers))\n";
    }
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
