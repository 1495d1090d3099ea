// PyTorch FSDP (FullyShardedDataParallel, "FSDP1"): a Python snippet with the wrapper's
// settings, the batch figures and the torchrun line (as a comment).
//
// Names from pytorch/pytorch:
//   torch/distributed/fsdp/api.py (commit 0aafd810): ShardingStrategy FULL_SHARD,
//     SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2; MixedPrecision
//     (param_dtype, reduce_dtype, buffer_dtype); CPUOffload(offload_params), which "offloads
//     gradients to CPU as well, meaning that the optimizer step runs on CPU";
//   torch/distributed/fsdp/fully_sharded_data_parallel.py: the device_mesh argument, "for
//     hybrid sharding strategies such as HYBRID_SHARD, users can pass in a 2D DeviceMesh";
//   torch/distributed/device_mesh.py: init_device_mesh(device_type, mesh_shape, *,
//     mesh_dim_names);
//   torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py: checkpoint_wrapper.
// (The last three were found as excerpts of stored copies, not pinned to a commit.)
// torchrun options as in the Megatron exporter.
// Decision: plain FSDP, not FSDP2 + DTensor. Tensor, pipeline, context and sequence
// parallelism need model code (parallelize_module, pipelining) that a settings export
// cannot write, so they are refused; so are ZeRO-1 (FSDP's lightest sharding,
// SHARD_GRAD_OP, also shards gradients), optimizer-only offload (CPUOffload moves
// parameters and gradients too) and fp8. ZeRO-2 maps to SHARD_GRAD_OP, ZeRO-3 to
// FULL_SHARD; a shard group smaller than dp to _HYBRID_SHARD_ZERO2 / HYBRID_SHARD on a
// (replicate, shard) device mesh.
#include "ExportCommon.h"

namespace shardscope::exportdetail {

ExportResult exportFsdp(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("fsdp", r.refusals);
    refuseMegatronOverlaps(refuse, l);
    refusePartialRecompute(refuse, l, "the exported wrapper checkpoints every transformer block");
    const Figures f = figures(p, l);
    const ChipSpec& chip = p.cluster.node.chip;

    if (chip.vendor != "NVIDIA" && chip.vendor != "AMD")
        refuse.device(chip.display_name, "the export targets CUDA and ROCm GPUs, device type \"cuda\"");
    const char* modelCode = "plain FSDP is data parallelism; this needs model code, FSDP2 with DTensor";
    if (l.tp > 1)
        refuse.add("tensor parallelism (tp=" + str(l.tp) + ")", modelCode);
    if (l.pp > 1)
        refuse.add("pipeline parallelism (pp=" + str(l.pp) + ")", modelCode);
    if (l.cp > 1)
        refuse.add("context parallelism (cp=" + str(l.cp) + ")", modelCode);
    if (l.sequence_parallel)
        refuse.add("sequence parallelism (sp=on)", modelCode);
    if (l.zero_stage == 1)
        refuse.add("ZeRO-1 (optimizer states only)", "SHARD_GRAD_OP, FSDP's lightest sharding, also shards gradients");
    if (l.offload == Offload::Optimizer)
        refuse.add("optimizer-only offload", "CPUOffload(offload_params=True) moves parameters and gradients too");
    if (p.training.precision == Precision::FP8Mixed)
        refuse.add("fp8 precision", "MixedPrecision takes torch dtypes for parameters, reduction and buffers; no fp8");
    if (refuse.any())
        return r;

    std::string strategy;
    switch (l.zero_stage) {
    case 0: strategy = "NO_SHARD"; break;
    case 2: strategy = f.partial_shard ? "_HYBRID_SHARD_ZERO2" : "SHARD_GRAD_OP"; break;
    default: strategy = f.partial_shard ? "HYBRID_SHARD" : "FULL_SHARD"; break;
    }
    std::string dtype;
    if (p.training.precision == Precision::BF16Mixed)
        dtype = "torch.bfloat16";
    else if (p.training.precision == Precision::FP16Mixed)
        dtype = "torch.float16";

    r.notes.push_back(str(f.devices) + " ranks; each runs micro-batches of " + str(l.micro_batch) + " sequence(s) of " +
                      str(p.training.seq_len) + " tokens, " + str(f.micro_batches) +
                      " per optimizer step (global batch " + str(p.training.global_batch) + ").");
    if (f.partial_shard)
        r.notes.push_back(strategy + ": model states sharded over groups of " + str(f.shard_group) +
                          " ranks, replicated across " + str(l.dp / f.shard_group) + " groups.");
    r.notes.push_back("Wrap every transformer block as its own FSDP unit (auto_wrap_policy).");
    if (p.training.precision == Precision::FP16Mixed)
        r.notes.push_back("fp16 needs a gradient scaler that works on sharded gradients.");
    r.notes.push_back("The optimizer (" + std::string(toString(p.training.optimizer)) +
                      ") is created on the wrapped model's parameters.");

    std::string t;
    t += commentLines({"PyTorch FSDP settings exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Names: pytorch/pytorch torch/distributed/fsdp/api.py (commit 0aafd810), "
                       "fully_sharded_data_parallel.py, device_mesh.py, algorithms/_checkpoint/checkpoint_wrapper.py",
                       ""});
    t += commentLines(r.notes);
    t += commentLines({"", "Launch on every node:",
                       "  torchrun --nnodes " + str(f.nodes) + " --nproc_per_node " + str(f.devices_per_node) +
                           " --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 train.py"});
    t += "import torch\n";
    if (f.partial_shard)
        t += "from torch.distributed.device_mesh import init_device_mesh\n";
    t += "from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy";
    t += dtype.empty() ? "\n" : ", MixedPrecision\n";
    if (l.recompute != Recompute::None)
        t += "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n";
    t += "\nMICRO_BATCH_SIZE = " + str(l.micro_batch) + "\n";
    t += "GRADIENT_ACCUMULATION_STEPS = " + str(f.micro_batches) + "  # run all but the last under model.no_sync()\n";
    t += "SEQUENCE_LENGTH = " + str(p.training.seq_len) + "\n\n";
    t += "\ndef fsdp_kwargs():\n";
    t += "    \"\"\"model = FullyShardedDataParallel(model, auto_wrap_policy=..., **fsdp_kwargs())\"\"\"\n";
    t += "    return dict(\n";
    t += "        sharding_strategy=ShardingStrategy." + strategy + ",\n";
    if (f.partial_shard)
        t += "        device_mesh=init_device_mesh(\"cuda\", (" + str(l.dp / f.shard_group) + ", " + str(f.shard_group) +
             "), mesh_dim_names=(\"replicate\", \"shard\")),\n";
    if (!dtype.empty())
        t += "        mixed_precision=MixedPrecision(param_dtype=" + dtype + ", reduce_dtype=" + dtype +
             ", buffer_dtype=" + dtype + "),\n";
    t += "    )\n";
    if (l.recompute != Recompute::None) {
        const bool full = l.recompute == Recompute::Full;
        t += "\n\ndef wrap_for_recompute(modules):\n";
        t += std::string("    \"\"\"") +
             (full ? "Full recomputation: pass every transformer block"
                   : "Selective recomputation: pass every block's core attention (softmax(QK^T)V)") +
             ", as an nn.ModuleList, before FSDP wraps the model.\"\"\"\n";
        t += "    for i, module in enumerate(modules):\n        modules[i] = checkpoint_wrapper(module)\n";
    }
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
