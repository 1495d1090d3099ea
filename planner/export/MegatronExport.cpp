// Megatron-LM: the arguments of pretrain_gpt.py as a bash array, and the torchrun line.
//
// Option names, and what the version can and cannot do, from NVIDIA/Megatron-LM
// megatron/training/arguments.py at commit 307dcf37f03d44da131ba21999278abe4112d2ad
// (the version stored for this lookup; read in full):
//   --tensor-model-parallel-size, --pipeline-model-parallel-size,
//   --num-layers-per-virtual-pipeline-stage, --context-parallel-size, --sequence-parallel,
//   --use-distributed-optimizer, --micro-batch-size, --global-batch-size,
//   --recompute-granularity full|selective, --recompute-method uniform|block,
//   --recompute-num-layers, --bf16, --fp16, --fp8-format e4m3|hybrid, --num-layers,
//   --hidden-size, --ffn-hidden-size, --num-attention-heads, --kv-channels,
//   --group-query-attention, --num-query-groups, --seq-length, --max-position-embeddings,
//   --position-embedding-type learned_absolute|rope, --normalization LayerNorm|RMSNorm,
//   --swiglu, --disable-bias-linear, --untie-embeddings-and-output-weights, --num-experts,
//   --moe-router-topk, --use-flash-attn, --optimizer adam|sgd.
// The model fields beyond a Llama: MegatronModelFields.cpp (d98e8a64).
// Rules of that version that the export enforces (validate_args):
//   - selective recomputation takes no --recompute-method;
//   - MoE with tp > 1 asserts --sequence-parallel.
// Expert parallelism at d98e8a64: --expert-model-parallel-size and --expert-tensor-parallel-size
// are ModelParallelConfig's expert_model_parallel_size / expert_tensor_parallel_size
// (megatron/core/model_parallel_config.py; None: tensor_model_parallel_size, which
// validate_args sets); validate_args asserts "Number of experts should be a multiple of expert
// model parallel_size"; initialize_model_parallel (megatron/core/parallel_state.py) builds the
// expert grid tp-ep-dp per stage from world / (etp x ep x pp).
// Re-read at commit d98e8a64 (megatron/training/arguments.py; TransformerConfig in
// megatron/core/transformer/transformer_config.py, whose fields become options through
// ArgumentGroupFactory):
//   - validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 whenever tp > 1 or cp > 1 on a
//     device older than Blackwell (get_device_arch_version() < 10), not only with sp;
//   - --hidden-dropout and --attention-dropout default to 0.1 (TransformerConfig): a plan
//     priced without dropout passes 0 for both;
//   - --rotary-base defaults to 10000: passed from the model (Llama 3: 500000);
//   - --use-flash-attn is still parsed but --attention-backend (flash, fused, unfused, local,
//     auto; AttnBackend in megatron/core/transformer/enums.py) is what selects the kernel:
//     auto (a fused kernel: flash or cuDNN) for fused attention, unfused otherwise;
//   - --tp-comm-overlap needs --sequence-parallel; --overlap-param-gather needs the
//     distributed optimizer and --overlap-grad-reduce.
// megatron/core/transformer/attention.py (commit f41b4fd4) divides num_query_groups by the
// tensor-parallel size, so tp must divide the key/value heads.
// At d98e8a64 (read in full) Megatron also runs what 307dcf37 could not: ZeRO-2/3 as
// Megatron-FSDP (--use-megatron-fsdp, --data-parallel-sharding-strategy), optimizer CPU offload
// (--optimizer-cpu-offload with --use-precision-aware-optimizer), shard groups smaller than dp
// (--num-distributed-optimizer-instances), tp a multiple of the KV heads (TransformerConfig),
// and the interleaved schedule at pp = 2 (allowed with --overlap-p2p-communication, the
// default). Still refused: the GPipe schedule.
// torchrun options (--nnodes, --nproc_per_node, --node_rank, --master_addr, --master_port)
// as used by aws-neuron/neuronx-distributed examples/training/llama/tp_pp_llama_hf_pretrain/
// run_llama2_70B_tp_pp.sh.
#include "ExportCommon.h"
#include "QuantizationRecipe.h"
#include "MegatronModelFields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardscope::exportdetail {

// get_device_arch_version() < 10: every NVIDIA part before Blackwell (B200/GB200/B300 are
// compute capability 10.x) and AMD's Instinct parts (ROCm reports gfx9 as 9.x).
bool olderThanBlackwellGpu(const ChipSpec& chip)
{
    if (chip.vendor != "NVIDIA")
        return true;
    for (const char* blackwell : {"b200", "gb200", "b300", "gb300"})
        if (chip.name.rfind(blackwell, 0) == 0)
            return false;
    return true;
}

// --- shared with the Megatron-Bridge exporter (Megatron Core's limits) ---
void refuseMegatronCoreLimits(Refusals& refuse, const Problem& p, const Layout& l)
{
    const ModelSpec& m = p.model;
    if (!isCudaOrRocmGpu(p.cluster.node.chip))
        refuse.device(p.cluster.node.chip.display_name,
                      "Megatron-LM runs on CUDA GPUs: NVIDIA, or AMD through ROCm");
    if (m.family != ModelFamily::DecoderOnly)
        refuse.add(std::string("a model of family ") + toString(m.family),
                   "the export builds Megatron's GPT model (pretrain_gpt.py, GPTModelProvider), which is decoder-only");
    if (m.positions == PositionKind::Relative || m.positions == PositionKind::None)
        refuse.add(std::string("position embedding ") + toString(m.positions),
                   "--position-embedding-type takes learned_absolute or rope");
    if (m.mlp == MlpKind::Relu || m.mlp == MlpKind::GeGlu)
        refuse.add(std::string("the MLP activation ") + toString(m.mlp),
                   "Megatron offers gelu, --swiglu and --squared-relu");
    if (!m.final_norm)
        refuse.add("a model without a final norm", "Megatron's GPT model always adds one");
    if (m.kv_heads % l.tp != 0 && l.tp % m.kv_heads != 0)
        refuse.add("tp=" + str(l.tp) + " with " + str(m.kv_heads) + " key/value heads",
                   "TransformerConfig (d98e8a64) needs num_query_groups to be a multiple or a divisor of tp");
    if (l.zero_stage == 3 && l.overlap_param_gather)
        refuse.add("overlap_param_gather with ZeRO-3", "Megatron-FSDP gathers parameters itself");
    if (l.pp > 1 && l.schedule == PipelineSchedule::GPipe)
        refuse.add("the GPipe schedule", "Megatron runs 1F1B, or interleaved 1F1B with "
                                         "--num-layers-per-virtual-pipeline-stage");
    if (m.positions == PositionKind::Rotary && m.rope_base != std::floor(m.rope_base))
        refuse.add("a RoPE base of " + std::to_string(m.rope_base), "--rotary-base takes an integer");
    if (m.moe.enabled() && l.tp > 1 && !l.sequence_parallel)
        refuse.add("MoE with tp=" + str(l.tp) + " and sequence parallelism off",
                   "validate_args requires --sequence-parallel for MoE with tensor parallelism");
    // TransformerConfig.__post_init__ (d98e8a64): "Bias in Moe is only supported when ETP==1".
    if (m.moe.enabled() && m.bias && l.expertTensorParallel() > 1)
        refuse.add("biases in a mixture-of-experts model with etp=" + str(l.expertTensorParallel()),
                   "TransformerConfig supports MoE biases only with expert tensor parallelism 1");
    // Megatron Core's quantized recipes are Transformer Engine's (Fp8Recipe / Fp4Recipe,
    // megatron/core/enums.py @ d98e8a64): no row-wise scaling (torchao's recipe).
    // bf16-autocast is NeuronX Distributed's precision: its ZeRO-1 gathers the updated parameters in
    // fp32 (higher_cc_precision); Megatron's distributed optimizer gathers them in the weights' bf16
    // (megatron/core/distributed/param_and_grad_buffer.py @ d98e8a64: the param buffer's dtype).
    if (p.training.precision == Precision::BF16Autocast)
        refuse.add("bf16-autocast precision",
                   "NeuronX Distributed's precision (fp32 gradient accumulation and fp32 ZeRO-1 collectives); "
                   "Megatron's --bf16 gathers its parameters in bf16: price it with bf16");
    if (p.training.precision == Precision::FP8Rowwise)
        refuse.add("fp8-rowwise precision", "Megatron Core's FP8 recipes are tensorwise, delayed, blockwise and mxfp8 "
                                            "(Transformer Engine); row-wise scaling is torchao's");
    // (initialize_model_parallel's "Expert data parallel size should be divisible by partial DistOpt
    // shard factor", parallel_state.py @ d98e8a64, is core's layout rule: validate() refuses it first.)
}

// --- end of the shared part ---

ExportResult exportMegatron(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("megatron", r);
    const ModelSpec& m = p.model;
    const Figures f = figures(p, l);
    refuseMegatronCoreLimits(refuse, p, l);
    if (refuse.any())
        return r;

    std::vector<std::string> args;
    auto arg = [&](const std::string& name, const std::string& value = "") {
        args.push_back(value.empty() ? name : name + " " + value);
    };
    arg("--tensor-model-parallel-size", str(l.tp));
    arg("--pipeline-model-parallel-size", str(l.pp));
    // Uneven splits (d98e8a64, megatron/training/arguments.py _add_distributed_args:
    // --decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers; the rest split
    // evenly, TransformerConfig "Uneven PP"). With interleaving validate_args then asks for
    // --num-virtual-stages-per-pipeline-rank instead of the layers per virtual stage.
    if (l.first_stage_layers > 0)
        arg("--decoder-first-pipeline-num-layers", str(l.first_stage_layers));
    if (l.last_stage_layers > 0)
        arg("--decoder-last-pipeline-num-layers", str(l.last_stage_layers));
    // The embedding / loss counted as a layer of the first / last chunk (arguments.py @ d98e8a64:
    // --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split; validate_args
    // and TransformerConfig add one layer per flag before splitting over pp and v).
    if (l.account_for_embedding_in_pipeline_split)
        arg("--account-for-embedding-in-pipeline-split", "");
    if (l.account_for_loss_in_pipeline_split)
        arg("--account-for-loss-in-pipeline-split", "");
    // An explicit layout (arguments.py @ d98e8a64 --pipeline-model-parallel-layout): validate_args
    // takes v from its chunk count and allows neither virtual-stage argument beside it. Quoted for
    // the shell ('|', '(' and '*').
    if (const PipelineLayerLayout* custom = l.layerLayout())
        arg("--pipeline-model-parallel-layout", "'" + custom->text() + "'");
    else if (f.pipelined && l.schedule == PipelineSchedule::Interleaved) {
        if (l.unevenPipeline())
            arg("--num-virtual-stages-per-pipeline-rank", str(l.virtual_stages));
        else
            arg("--num-layers-per-virtual-pipeline-stage", str(m.layers / (l.pp * l.virtual_stages)));
    }
    arg("--context-parallel-size", str(l.cp));
    // --cp-comm-type (arguments.py; TransformerConfig.cp_comm_type): p2p, the default, left out.
    if (l.cp > 1 && l.cp_comm == CpComm::A2A)
        arg("--cp-comm-type", "a2a");
    // Expert parallelism (ModelParallelConfig fields, options through ArgumentGroupFactory):
    // the experts over ep ranks of the stage's tp x cp x dp grid, each expert over etp; both
    // written for a MoE model, etp even where it is tp (validate_args' default).
    if (m.moe.enabled()) {
        arg("--expert-model-parallel-size", str(l.ep));
        arg("--expert-tensor-parallel-size", str(l.expertTensorParallel()));
    }
    if (l.sequence_parallel)
        arg("--sequence-parallel");
    // ZeRO-1 is the distributed optimizer; ZeRO-2/3 are Megatron-FSDP's sharding strategies
    // (--data-parallel-sharding-strategy optim_grads | optim_grads_params; validate_args
    // asserts the fsdp_dtensor checkpoint format and CUDA_DEVICE_MAX_CONNECTIONS != 1, as
    // examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh sets them).
    const bool megatronFsdp = l.zero_stage >= 2;
    if (l.zero_stage >= 1)
        arg("--use-distributed-optimizer");
    if (megatronFsdp) {
        arg("--use-megatron-fsdp");
        arg("--data-parallel-sharding-strategy", l.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
        arg("--ckpt-format", "fsdp_dtensor");
    }
    // A shard group smaller than dp: that many distributed-optimizer (or FSDP) copies across dp.
    if (f.partial_shard)
        arg("--num-distributed-optimizer-instances", str(l.dp / f.shard_group));
    if (l.offload_activations > 0) {
        // TransformerConfig.cpu_offloading_num_layers (model_parallel_config.py @ d98e8a64);
        // cpu_offloading itself has no flag (excluded in arguments.py): validate_args sets it when
        // "args.cpu_offloading_num_layers > 0". Activations only (cpu_offloading_activations is on
        // by default, cpu_offloading_weights off).
        arg("--cpu-offloading-num-layers", str(l.offload_activations));
    }
    if (l.offload == Offload::Optimizer) {
        // validate_args: the CPU offload reuses the precision-aware optimizer's code path.
        arg("--optimizer-cpu-offload");
        arg("--use-precision-aware-optimizer");
    }
    if (l.tp_comm_overlap)
        arg("--tp-comm-overlap");  // validate_args: needs --sequence-parallel (the layout has it)
    // The cost model hides the gradients' reduction behind the backward pass (CostModelParams::
    // overlap_grad_reduce): Megatron-LM does that only with --overlap-grad-reduce (arguments.py @
    // d98e8a64: store_true, default False), so every plan with a gradient reduction asks for it.
    if (l.dp * l.cp > 1 || l.expertDataParallel() > 1 || l.overlap_param_gather)
        arg("--overlap-grad-reduce");
    if (l.overlap_param_gather)  // validate_args: needs the distributed optimizer and --overlap-grad-reduce
        arg("--overlap-param-gather");
    arg("--micro-batch-size", str(l.micro_batch));
    arg("--global-batch-size", str(p.training.global_batch));
    if (l.recompute == Recompute::Selective) {
        arg("--recompute-granularity", "selective");
        // TransformerConfig.recompute_modules (transformer_config.py @ d98e8a64), a List[str] field
        // that megatron/training/argument_utils.py's ArgumentGroupFactory turns into
        // --recompute-modules with nargs "+"; left out, Megatron's default ["core_attn"].
        if (l.recompute_modules != 0) {
            std::string names = recomputeModulesToString(l.recompute_modules);
            std::replace(names.begin(), names.end(), '+', ' ');
            arg("--recompute-modules", names);
            // moe_act "is only supported with moe_grouped_gemm" (the exporter sets it for MoE).
        }
    } else if (l.recompute == Recompute::Full) {
        // Every layer's input is kept and the whole layer recomputed: uniform groups of one layer;
        // or the layout's method and count (TransformerConfig @ d98e8a64: recompute_method
        // uniform|block, recompute_num_layers; megatron/core/recompute.py runs them).
        arg("--recompute-granularity", "full");
        arg("--recompute-method", l.recompute_layers > 0 ? toString(l.recompute_method) : "uniform");
        arg("--recompute-num-layers", l.recompute_layers > 0 ? str(l.recompute_layers) : "1");
    }
    switch (p.training.precision) {
    case Precision::BF16Mixed: arg("--bf16"); break;
    case Precision::FP16Mixed: arg("--fp16"); break;
    // FP8/FP4 recipes (megatron/core/transformer/transformer_config.py @ d98e8a64: fp8 as --fp8-format
    // e4m3|hybrid, fp8_recipe tensorwise|delayed|mxfp8|blockwise, fp4 as --fp4-format e2m1 with
    // fp4_recipe nvfp4), the formats Megatron-Bridge's recipes pair them with (mixed_precision.py @
    // 067f987d: hybrid = E4M3 forward, E5M2 gradients; MXFP8 E4M3 throughout).
    case Precision::FP8Tensorwise:
    case Precision::FP8Delayed:
    case Precision::FP8Blockwise:
        arg("--bf16");
        arg("--fp8-format", "hybrid");
        arg("--fp8-recipe", p.training.precision == Precision::FP8Tensorwise ? "tensorwise"
                            : p.training.precision == Precision::FP8Delayed  ? "delayed"
                                                                              : "blockwise");
        break;
    case Precision::MXFP8:
        arg("--bf16");
        arg("--fp8-format", "e4m3");
        arg("--fp8-recipe", "mxfp8");
        break;
    case Precision::NVFP4:
        arg("--bf16");
        arg("--fp4-format", "e2m1");
        arg("--fp4-recipe", "nvfp4");
        break;
    case Precision::FP8Rowwise:
    case Precision::BF16Autocast: break;  // refused above
    case Precision::FP32: break;
    }
    // --bf16 accumulates and reduces the gradients in fp32 unless --grad-reduce-in-bf16
    // (megatron/training/arguments.py @ d98e8a64: it clears accumulate_allreduce_grads_in_fp32;
    // --main-grads-dtype bf16 is the precision-aware optimizer's and needs it).
    if (gradientType(p.training) == DataType::BF16)
        arg("--grad-reduce-in-bf16");
    // What the planner priced for the recipe (QuantizationRecipe.h, Megatron-Bridge's recipes): the
    // first and last layers in bf16 (TransformerConfig first_last_layers_bf16,
    // num_layers_at_start_in_bf16 / num_layers_at_end_in_bf16), the quantized weights as the model's
    // own with the distributed optimizer (--fp8-param-gather / --fp4-param-gather: validate_args
    // needs the distributed optimizer).
    const QuantizationRecipe recipe = quantizationRecipe(p.training.precision);
    if (recipe.bf16_layers_at_start > 0 || recipe.bf16_layers_at_end > 0) {
        arg("--first-last-layers-bf16");
        arg("--num-layers-at-start-in-bf16", str(recipe.bf16_layers_at_start));
        arg("--num-layers-at-end-in-bf16", str(recipe.bf16_layers_at_end));
    }
    if (recipe.primary_weights && (l.zero_stage == 1 || l.zero_stage == 2))
        arg(recipe.gemm_type == DataType::FP4 ? "--fp4-param-gather" : "--fp8-param-gather");
    arg("--num-layers", str(m.layers));
    arg("--hidden-size", str(m.hidden));
    arg("--ffn-hidden-size", str(m.ffn_hidden));
    arg("--num-attention-heads", str(m.heads));
    if (m.head_dim * m.heads != m.hidden && !m.mla.enabled())  // (MLA: its own head sizes)
        arg("--kv-channels", str(m.head_dim));
    if (m.kv_heads != m.heads) {
        arg("--group-query-attention");
        arg("--num-query-groups", str(m.kv_heads));
    }
    arg("--seq-length", str(p.training.seq_len));
    arg("--max-position-embeddings", str(std::max(m.max_seq, p.training.seq_len)));
    arg("--position-embedding-type", megatronPositionType(m));
    if (m.positions == PositionKind::Rotary) {
        char base[32];
        std::snprintf(base, sizeof base, "%.15g", m.rope_base);
        arg("--rotary-base", base);  // an int option in arguments.py
    }
    arg("--normalization", m.norm == NormKind::RmsNorm ? "RMSNorm" : "LayerNorm");
    if (m.mlp == MlpKind::SwiGlu)
        arg("--swiglu");
    if (!m.bias)
        arg("--disable-bias-linear");
    if (!m.tied_embeddings)
        arg("--untie-embeddings-and-output-weights");
    if (m.moe.enabled()) {
        arg("--num-experts", str(m.moe.experts));
        arg("--moe-router-topk", str(m.moe.top_k));
    }
    // norm_eps, qkv bias, qk_norm, sinks, sliding window, RoPE scaling, the rest of MoE.
    for (const CoreSetting& s : megatronModelSettings(refuse, m, false))
        if (!s.option.empty())  // (a field without an option: Megatron-Bridge's)
            arg(s.option, s.cli_value);
    for (const CoreSetting& s : megatronDispatcherSettings(m, l))
        arg(s.option, s.cli_value);
    // ModelParallelConfig.overlap_moe_expert_parallel_comm (model_parallel_config.py @ d98e8a64, an
    // option through ArgumentGroupFactory(TransformerConfig)): the all-to-all of one micro-batch under
    // another's compute, as the planner prices ep_comm_overlap=on (its rules are
    // TransformerConfig.__post_init__'s: ep > 1, alltoall or flex, interleaved under pp, no full
    // recomputation, bf16).
    if (l.ep_comm_overlap)
        arg("--overlap-moe-expert-parallel-comm");
    arg("--attention-backend", p.training.flash_attention ? "auto" : "unfused");
    if (!p.training.dropout) {
        arg("--hidden-dropout", "0");
        arg("--attention-dropout", "0");
    }
    arg("--optimizer", p.training.optimizer == Optimizer::Sgd ? "sgd" : "adam");

    r.notes.push_back("Megatron derives the data-parallel size: " + str(f.devices) + " devices / (tp " + str(l.tp) +
                      " x pp " + str(l.pp) + " x cp " + str(l.cp) + ") = dp " + str(l.dp) + ".");
    r.notes.push_back(str(f.micro_batches) + " micro-batches of " + str(l.micro_batch) +
                      " sequence(s) per data-parallel replica and step.");
    if (m.moe.enabled())
        r.notes.push_back(expertGridNote(m, l));
    r.notes.push_back("Yours to add: data (--data-path or --mock-data), the tokenizer (" + str(m.vocab) +
                      "-entry vocabulary), learning rate and iterations, checkpoints.");

    std::string t = "#!/bin/bash\n";
    t += commentLines({"Megatron-LM launch settings exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Option names: NVIDIA/Megatron-LM megatron/training/arguments.py (commits 307dcf37, d98e8a64)",
                       ""});
    t += commentLines(r.notes);
    if (megatronFsdp)
        t += "unset CUDA_DEVICE_MAX_CONNECTIONS  # validate_args: Megatron-FSDP requires it unset or > 1\n";
    else if ((l.tp > 1 || l.cp > 1) && olderThanBlackwellGpu(p.cluster.node.chip))
        t += "export CUDA_DEVICE_MAX_CONNECTIONS=1  # validate_args: tp > 1 or cp > 1 before Blackwell\n";
    t += "MEGATRON_ARGS=(\n";
    for (const std::string& a : args)
        t += "    " + a + "\n";
    t += ")\n";
    t += torchrunCommand(f, true) + " \\\n"
         "    pretrain_gpt.py \"${MEGATRON_ARGS[@]}\" \"$@\"\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
