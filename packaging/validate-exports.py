#!/usr/bin/env python3
"""Run ShardScope's Megatron-LM, Megatron-Bridge, DeepSpeed, torchtitan and MaxText exports through the frameworks' own checks.

    validate-exports.py --cli build/app/shardscope-cli [--megatron DIR] [--deepspeed DIR] [--maxtext DIR]
                        [--torchtitan DIR] [--megatron-bridge DIR (with --megatron)]

Each DIR is a checkout (Megatron-LM's megatron/ package; DeepSpeed's deepspeed/, accelerator/ and
op_builder/; MaxText's src/maxtext/; torchtitan's torchtitan/; Megatron-Bridge's src/). Nothing is installed and nothing is downloaded.

What runs, per case (a problem, a layout, a format), each in a process of its own:
  megatron   the exported MEGATRON_ARGS (and its CUDA_DEVICE_MAX_CONNECTIONS line) through
             megatron/training/arguments.py: parse_args() then validate_args(), with WORLD_SIZE
             the plan's device count, plus what the export leaves to the user (--mock-data, a
             NullTokenizer of the model's vocabulary, --train-iters, --lr); for a MoE model also
             core_transformer_config_from_args (megatron/training/argument_utils.py: the
             TransformerConfig pretrain_gpt.py builds, its __post_init__ MoE checks) and
             megatron/core/parallel_state.py initialize_model_parallel at rank 0 with the parsed
             sizes (its world-size and expert-grid checks), the expert groups of rank 0 then
             compared with the plan's (ep, etp, expert data-parallel size);
  deepspeed  the exported ds_config through deepspeed/runtime/config.py: DeepSpeedConfig(config,
             mpu, mesh_device) with the world size deepspeed.initialize would give it (all ranks;
             the pipeline grid's data-parallel ranks for a PipelineModule; the data_parallel mesh
             dimension when the config names sequence_parallel_size and data_parallel_size),
             which runs its batch assertion and sanity checks and the pydantic ZeRO config; with
             an expert_parallel section (AutoEP) also what deepspeed/runtime/engine.py
             _configure_expert_parallel runs before any process group: validate_autoep_config,
             build_folding_spec and validate_folding_global (module_inject/auto_ep_folding.py),
             the folding's ep and expert data-parallel sizes compared with the plan's;
  torchtitan the recipe's ParallelismConfig and config.training values through torchtitan's own
             dataclasses (torchtitan/config/configs.py: __post_init__ checks, Literal choices) and
             ParallelDims.from_config(..., world size) (distributed/parallel_dims.py: with
             expert_parallel_degree, ep divides dp_shard x cp x tp); the flavor must be a key of
             <family>_configs of the family the recipe imports (llama3; qwen3 for MoE) and the base
             recipe a function of its config_registry.py; each layer.attention.rope.<field> the
             recipe sets a field of RoPE.Config (models/common/rope.py, read from the source),
             scaling one of its Literal choices; each layer.moe.<field> a field of MoE.Config
             (models/common/moe.py) and expert_parallel_degree the plan's ep; for a MoE model the
             token dispatcher model_registry's moe_comm_backend selects, built by torchtitan's
             make_token_dispatcher_config (models/common/config_utils.py) and passed through
             update_ep_token_dispatcher_config (models/common/token_dispatcher.py: expert parallelism,
             the per-rank token capacity); for every recipe training.disable_cuda_graphs (the recipe's
             or its base recipe's) through Trainer.Config._validate_cuda_graphs (trainer.py, the
             method's source run on the recipe's values: pipeline parallelism, host-synchronizing EP
             dispatchers);
  megatron-bridge  GPTModelProvider(**the recipe's arguments), MLAModelProvider for multi-head
             latent attention, then its finalize(), which runs Megatron Core's __post_init__ checks
             the providers defer (models/transformer_config.py; they do not check heads against
             tp, the model build does), every cfg.<section>.<field>
             the recipe sets a field of that section's config class (training/config.py and the
             Megatron classes it extends), the mixed_precision name a registered recipe; for a MoE
             model Megatron Core's grid at rank 0 for the provider's sizes, as for Megatron-LM;
  maxtext    every key of the exported YAML against MaxText's pydantic MaxTextConfig fields
             (src/maxtext/configs/types.py) and each value against its field's type; a MoE config's
             expert axis the plan's ep, dividing the experts.

A case with a tenth field passes only when ShardScope refuses the export with a reason naming it.

What cannot run here, and is stood in for (framework_stubs.py): torch, numpy, jax, Transformer Engine
and the other compiled dependencies are stubs, so no check that needs a tensor or a device runs.
The one device figure validate_args asks for, the GPU's compute-capability major
(get_device_arch_version), is given from the plan's GPU: A100 8, H100/H200 9, B200 10 (NVIDIA's
published compute capabilities 8.0, 9.0, 10.0). DeepSpeed's torch.distributed calls are answered
with the rank 0 and the world size above. Python 3.11's typing lacks override (3.12), which
Megatron imports: typing_extensions.override, the same function, is put in its place.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, format, model, node type, nodes, global batch, seq, extra problem flags, layout)
CASES = [
    ("megatron gpt3-175b a100 tp8 pp16 full fp16", "megatron", "gpt3-175b", "dgx-a100-80gb", 128, 1536, 2048,
     ["--precision", "fp16"], "tp=8,pp=16,mb=1,recompute=full"),
    ("megatron llama-2-70b p5 tp8 pp4 interleaved sp zero1 selective", "megatron", "llama-2-70b", "p5.48xlarge",
     64, 1024, 4096, [], "tp=8,pp=4,sp=on,zero=1,mb=1,schedule=interleaved,v=5,recompute=selective"),
    ("megatron mixtral-8x7b p5 tp4 sp zero1", "megatron", "mixtral-8x7b", "p5.48xlarge", 8, 512, 4096, [],
     "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3-8b p5 tp2 cp2 zero1 no dropout flash", "megatron", "llama-3-8b", "p5.48xlarge", 2, 64, 8192,
     ["--no-dropout", "--flash-attention"], "tp=2,cp=2,zero=1"),
    ("megatron llama-2-7b p5 zero3 (Megatron-FSDP)", "megatron", "llama-2-7b", "p5.48xlarge", 4, 256, 4096, [],
     "zero=3"),
    ("megatron llama-2-7b p5 zero1 shard group 8 of 32", "megatron", "llama-2-7b", "p5.48xlarge", 4, 256, 4096, [],
     "zero=1,zero_group=8"),
    ("megatron llama-2-7b p5 zero1 bf16 main grads (--grad-reduce-in-bf16)", "megatron", "llama-2-7b", "p5.48xlarge", 4,
     256, 4096, ["--main-grads", "bf16"], "tp=2,zero=1"),
    ("megatron-bridge llama-2-7b p5 zero1 bf16 main grads (grad_reduce_in_fp32 False)", "megatron-bridge",
     "llama-2-7b", "p5.48xlarge", 4, 256, 4096, ["--main-grads", "bf16"], "tp=2,zero=1"),
    ("megatron llama-2-7b p5 zero1 optimizer offload", "megatron", "llama-2-7b", "p5.48xlarge", 4, 256, 4096, [],
     "zero=1,offload=optimizer"),
    ("megatron llama-2-7b p5 pp2 interleaved v2", "megatron", "llama-2-7b", "p5.48xlarge", 4, 256, 4096, [],
     "pp=2,schedule=interleaved,v=2"),
    ("megatron llama-3-70b b200 tp8 pp2 cp2 zero1", "megatron", "llama-3-70b", "p6-b200.48xlarge", 8, 512, 8192,
     [], "tp=8,pp=2,cp=2,sp=on,zero=1,mb=1,recompute=full"),
    ("deepspeed gpt3-13b p4d zero3 mics8 full", "deepspeed", "gpt3-13b", "p4d.24xlarge", 16, 1024, 2048, [],
     "zero=3,zero_group=8,mb=2,recompute=full"),
    ("deepspeed llama-2-7b p5 autotp2 zero2 offload", "deepspeed", "llama-2-7b", "p5.48xlarge", 4, 256, 4096, [],
     "tp=2,zero=2,mb=1,offload=optimizer"),
    ("deepspeed gpt3-6.7b p4d pp4 zero1 fp16", "deepspeed", "gpt3-6.7b", "p4d.24xlarge", 4, 512, 2048,
     ["--precision", "fp16"], "pp=4,zero=1,mb=1,recompute=full"),
    ("deepspeed llama-2-7b p5 ulysses cp4 zero3", "deepspeed", "llama-2-7b", "p5.48xlarge", 4, 512, 8192, [],
     "cp=4,zero=3,mb=1,recompute=full,cp_comm=a2a"),
    ("deepspeed llama-2-7b p5 cp4 ring refused (Ulysses only)", "deepspeed", "llama-2-7b", "p5.48xlarge", 4, 512,
     8192, [], "cp=4,zero=3,mb=1,recompute=full", "context parallelism as a K/V ring"),
    # fp32 main gradients: data_types.grad_accum_dtype + communication_data_type fp32 (BF16_Optimizer, ZeRO-1
    # without offload); under ZeRO-2/3 DeepSpeed keeps bf16 gradients, refused by name.
    ("deepspeed llama-2-7b p5 zero1 fp32 main grads", "deepspeed", "llama-2-7b", "p5.48xlarge", 4, 256, 4096,
     ["--main-grads", "fp32"], "zero=1,mb=1"),
    ("deepspeed llama-2-7b p5 zero3 fp32 main grads refused", "deepspeed", "llama-2-7b", "p5.48xlarge", 4, 256,
     4096, ["--main-grads", "fp32"], "zero=3,mb=1", "fp32 gradients (main_grads fp32) with ZeRO-3"),
    ("megatron llama-2-7b p5 tp2 cp4 a2a (--cp-comm-type a2a)", "megatron", "llama-2-7b", "p5.48xlarge", 4, 512,
     8192, ["--flash-attention"], "tp=2,sp=on,cp=4,zero=1,mb=1,recompute=full,cp_comm=a2a"),
    ("maxtext llama-2-7b h100 cp4 ulysses zero3", "maxtext", "llama-2-7b", "p5.48xlarge", 4, 512, 8192,
     ["--flash-attention"], "cp=4,zero=3,mb=1,recompute=full,cp_comm=a2a"),
    ("torchtitan llama-3-8b p5 tp2 cp2 fsdp full", "torchtitan", "llama-3-8b", "p5.48xlarge", 4, 256, 8192, [],
     "tp=2,sp=on,cp=2,zero=3,mb=1,recompute=full"),
    ("torchtitan llama-3-70b p5 tp8 pp4 interleaved hsdp zero2 fp8-rowwise", "torchtitan", "llama-3-70b", "p5.48xlarge",
     32, 1024, 8192, ["--precision", "fp8-rowwise"],
     "tp=8,sp=on,pp=4,schedule=interleaved,v=2,zero=2,zero_group=4,mb=1,recompute=full"),
    ("torchtitan llama-3-8b p5 ddp fp32", "torchtitan", "llama-3-8b", "p5.48xlarge", 2, 64, 2048,
     ["--precision", "fp32"], "zero=0,mb=1"),
    ("megatron-bridge llama-2-70b p5 tp8 pp4 interleaved sp zero1 selective", "megatron-bridge", "llama-2-70b",
     "p5.48xlarge", 64, 1024, 4096, [], "tp=8,pp=4,sp=on,zero=1,mb=1,schedule=interleaved,v=5,recompute=selective"),
    ("megatron-bridge gpt3-13b p5 megatron-fsdp hsdp full fp16", "megatron-bridge", "gpt3-13b", "p5.48xlarge", 8,
     512, 2048, ["--precision", "fp16"], "tp=2,zero=3,zero_group=8,mb=2,recompute=full"),
    ("megatron-bridge llama-3-8b p5 tp2 cp2 offload fp8", "megatron-bridge", "llama-3-8b", "p5.48xlarge", 2, 64,
     8192, ["--precision", "fp8", "--no-dropout"], "tp=2,cp=2,zero=1,offload=optimizer"),
    ("maxtext llama-3-70b v5p tp4 fsdp full", "maxtext", "llama-3-70b", "tpu-v5p-host", 64, 1024, 8192, [],
     "tp=4,zero=3,mb=1,recompute=full"),
    ("maxtext llama-2-7b v5e two slices hsdp selective", "maxtext", "llama-2-7b", "tpu-v5e-host", 64, 1024, 4096,
     [], "zero=3,zero_group=256,mb=1,recompute=selective"),
    ("maxtext llama-3-8b h100 pp2 gpipe cp2 zero1 offload flash", "maxtext", "llama-3-8b", "p5.48xlarge", 4, 256,
     8192, ["--flash-attention"], "pp=2,schedule=gpipe,cp=2,zero=1,mb=1,recompute=full,offload=optimizer"),
    # Imported from tests/data/hf/<folder>/config.json ("hf:<folder>"): the model fields a Llama lacks.
    ("megatron qwen2-7b p5 tp4 (qkv bias, norm_eps)", "megatron", "hf:Qwen2-7B", "p5.48xlarge", 4, 256, 4096, [],
     "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron qwen3-8b p5 tp4 (qk-norm)", "megatron", "hf:Qwen3-8B", "p5.48xlarge", 4, 256, 4096, [],
     "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron mistral-7b p5 tp4 (sliding window)", "megatron", "hf:Mistral-7B-v0.1", "p5.48xlarge", 4, 256, 8192,
     [], "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron mixtral-8x7b (hf) p5 tp4 (MoE, aux loss)", "megatron", "hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512,
     4096, [], "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron qwen3-30b-a3b p5 tp4 (MoE, qk-norm)", "megatron", "hf:Qwen3-30B-A3B", "p5.48xlarge", 8, 512, 4096,
     [], "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron gpt-oss-120b p5 tp8 etp1 (sinks, alternating window, YaRN, biased MoE: etp 1)", "megatron", "hf:gpt-oss-120b",
     "p5.48xlarge", 8, 512, 4096, [], "tp=8,sp=on,etp=1,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3.1-8b p5 tp2 (llama3 RoPE scaling)", "megatron", "hf:Llama-3.1-8B", "p5.48xlarge", 2, 64,
     8192, [], "tp=2,sp=on,zero=1,mb=1"),
    ("megatron-bridge qwen3-30b-a3b p5 tp4 (MoE, qk-norm)", "megatron-bridge", "hf:Qwen3-30B-A3B", "p5.48xlarge",
     8, 512, 4096, [], "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron-bridge mistral-7b p5 tp4 (sliding window)", "megatron-bridge", "hf:Mistral-7B-v0.1", "p5.48xlarge",
     4, 256, 8192, [], "tp=4,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron deepseek-v3 (hf) p5 tp8 (MLA, YaRN mscale, MoE: shared expert, expert bias, groups, scaling)",
     "megatron", "hf:DeepSeek-V3", "p5.48xlarge", 32, 1024, 4096, [], "tp=8,sp=on,zero=1,mb=1,recompute=full"),
    ("megatron deepseek-v3 (built-in) p5 tp8 pp2 (MLA, MoE, 61 layers split 31 + 30)", "megatron", "deepseek-v3",
     "p5.48xlarge", 64, 1024, 4096, [], "tp=8,sp=on,pp=2,first_stage_layers=31,zero=1,mb=1,recompute=full"),
    ("megatron-bridge deepseek-v3 p5 tp8 (MLAModelProvider, MoE: dense first layers, expert bias, groups)",
     "megatron-bridge", "deepseek-v3", "p5.48xlarge", 32, 1024, 4096, [], "tp=8,sp=on,zero=1,mb=1,recompute=full"),
    # DeepSpeed: ds_config holds no model, so the fields run with the user's own Hugging Face model
    # (the export's note says so); the ds_config itself is checked as for any model.
    ("deepspeed qwen2-7b p5 zero3 (qkv bias, norm_eps: the user's model)", "deepspeed", "hf:Qwen2-7B",
     "p5.48xlarge", 4, 256, 4096, [], "zero=3,mb=1,recompute=full"),
    ("deepspeed qwen3-30b-a3b p5 ulysses cp2 zero3 (MoE, qk-norm)", "deepspeed", "hf:Qwen3-30B-A3B", "p5.48xlarge",
     8, 512, 8192, [], "cp=2,zero=3,mb=1,recompute=full,cp_comm=a2a"),
    ("deepspeed gpt-oss-120b p5 zero3 (sinks, window, YaRN, MoE)", "deepspeed", "hf:gpt-oss-120b", "p5.48xlarge",
     8, 512, 4096, [], "zero=3,mb=1,recompute=full"),
    ("deepspeed deepseek-v3 without MTP (own data) p5 zero3 (MLA, MoE)", "deepspeed", "hf:DeepSeek-V3-no-mtp",
     "p5.48xlarge", 32, 1024, 4096, [], "zero=3,mb=1,recompute=full"),
    ("deepspeed deepseek-v3 p5 refused (its MTP layer: DeepseekV3ForCausalLM has none)", "deepspeed",
     "hf:DeepSeek-V3", "p5.48xlarge", 32, 1024, 4096, [], "zero=3,mb=1,recompute=full", "multi-token prediction"),
    # torchtitan: the llama3 flavors carry Llama 3.1's RoPE scaling (kept for Llama 3.1, switched off
    # for the Llama 3 built-ins above); the fields its llama3 model lacks are refused by name.
    ("torchtitan llama-3.1-8b p5 tp2 fsdp (llama3 RoPE scaling: the flavor's)", "torchtitan", "hf:Llama-3.1-8B",
     "p5.48xlarge", 2, 64, 8192, [], "tp=2,sp=on,zero=3,mb=1,recompute=full"),
    ("torchtitan qwen3-8b refused (QK-norm)", "torchtitan", "hf:Qwen3-8B", "p5.48xlarge", 4, 256, 4096, [],
     "zero=3,mb=1", "QK-norm"),
    ("torchtitan qwen2-7b refused (qkv bias)", "torchtitan", "hf:Qwen2-7B", "p5.48xlarge", 4, 256, 4096, [],
     "zero=3,mb=1", "biases on q, k and v"),
    ("torchtitan mistral-7b refused (sliding window)", "torchtitan", "hf:Mistral-7B-v0.1", "p5.48xlarge", 4, 256,
     8192, [], "zero=3,mb=1", "a sliding window of 4096"),
    ("torchtitan gpt-oss-120b refused (an auxiliary loss: torchtitan's MoE has none)", "torchtitan",
     "hf:gpt-oss-120b", "p5.48xlarge", 8, 512, 4096, [], "zero=3,mb=1", "an auxiliary load-balancing loss"),
    ("torchtitan qwen3-30b-a3b refused (an auxiliary loss: torchtitan's MoE has none)", "torchtitan",
     "hf:Qwen3-30B-A3B", "p5.48xlarge", 8, 512, 4096, [], "zero=3,mb=1", "an auxiliary load-balancing loss"),
    # torchtitan's MoE flavors beyond qwen3: deepseek_v3 671B (MLA, dense first layers, shared expert,
    # sigmoid routing with groups, the expert bias kept; the model's norm eps on every RMSNorm) on an
    # uneven pipeline split (61 layers over 16 stages: 3 + 14 x 4 + 2 as layers_per_stage 4 with the
    # first and last lightened), and gpt_oss 120b under cp (FlexAttention).
    ("torchtitan deepseek-v3 without MTP (own data) p5 pp16 uneven ep8 zero2 (deepseek_v3 671B flavor)",
     "torchtitan", "hf:DeepSeek-V3-no-mtp", "p5.48xlarge", 32, 1024, 4096, [],
     "dp=16,pp=16,first_stage_layers=3,last_stage_layers=2,ep=8,zero=2,mb=2,recompute=full"),
    ("torchtitan deepseek-v3 p5 pp16 refused (its MTP layer under pipeline parallelism)", "torchtitan",
     "deepseek-v3", "p5.48xlarge", 32, 1024, 4096, [],
     "dp=16,pp=16,first_stage_layers=3,last_stage_layers=2,ep=8,zero=2,mb=2,recompute=full",
     "multi-token prediction"),
    ("torchtitan gpt-oss-120b without aux loss (own data) p5 cp2 ep8 fsdp (gpt_oss 120b flavor, flex)",
     "torchtitan", "hf:gpt-oss-120b-no-aux-loss", "p5.48xlarge", 8, 512, 8192, [],
     "dp=32,cp=2,ep=8,zero=3,mb=1,recompute=full"),
    # MaxText: the export writes Llama decoder blocks only; every other field is refused by name.
    ("maxtext qwen3-8b v5p refused (QK-norm, norm_eps)", "maxtext", "hf:Qwen3-8B", "tpu-v5p-host", 16, 256, 4096,
     [], "zero=3,mb=1,recompute=full", "QK-norm, norm_eps 1e-06"),
    ("maxtext llama-3.1-8b v5p refused (RoPE scaling)", "maxtext", "hf:Llama-3.1-8B", "tpu-v5p-host", 16, 256,
     8192, [], "zero=3,mb=1,recompute=full", "RoPE scaling llama3"),
    ("maxtext qwen3-30b-a3b (hf) v5p zero3 (qwen3_moe: QK-norm, 128 experts, aux loss / top_k)", "maxtext",
     "hf:Qwen3-30B-A3B", "tpu-v5p-host", 16, 256, 4096, [], "zero=3,mb=1,recompute=full"),
    ("maxtext deepseek-v3 v5p refused (MLA)", "maxtext", "deepseek-v3", "tpu-v5p-host", 64, 1024, 4096, [],
     "zero=3,mb=1,recompute=full", "multi-head latent attention"),
    # Expert parallelism (issue 16): Megatron's ep and etp, the expert grid tp-ep-dp per stage.
    ("megatron mixtral-8x7b p5 tp4 ep8 (etp = tp: experts over ep ranks of dp)", "megatron", "mixtral-8x7b",
     "p5.48xlarge", 8, 512, 4096, [], "tp=4,sp=on,ep=8,zero=1,mb=1,recompute=selective"),
    ("megatron mixtral-8x7b p5 tp4 ep8 etp1 (whole experts, ep over tp x dp)", "megatron", "mixtral-8x7b",
     "p5.48xlarge", 8, 512, 4096, [], "tp=4,sp=on,ep=8,etp=1,zero=1,mb=1,recompute=selective"),
    ("megatron deepseek-v3 p5 tp2 pp8 (5 + 6 x 9 + 2 layers) ep8 etp1 (MLA, MoE)", "megatron", "deepseek-v3",
     "p5.48xlarge", 32, 1024, 4096, [],
     "tp=2,sp=on,pp=8,first_stage_layers=5,last_stage_layers=2,ep=8,etp=1,zero=1,mb=1,recompute=full"),
    # An explicit pipeline layout (--pipeline-model-parallel-layout; Bridge's pipeline_model_parallel_layout):
    # DeepSeek-V3 over pp 8 x v 2 as the 26.04.01 B200 recipe lays it out, MTP and loss in the last chunk.
    ("megatron deepseek-v3 b200 pp8 v2 pipeline layout Et*4|(t*4|)*14tmL ep32 DeepEP overlapped", "megatron",
     "deepseek-v3", "p6-b200.48xlarge", 32, 4096, 4096, ["--precision", "mxfp8", "--main-grads", "bf16"],
     "pp=8,zero=1,mb=1,recompute=selective,recompute_modules=mla_up_proj+mlp,ep=32,moe_dispatcher=deepep,"
     "ep_comm_overlap=on,pipeline_layout=Et*4|(t*4|)*14tmL"),
    ("megatron-bridge deepseek-v3 b200 pp8 v2 pipeline layout ep32 DeepEP overlapped", "megatron-bridge",
     "deepseek-v3", "p6-b200.48xlarge", 32, 4096, 4096, ["--precision", "mxfp8", "--main-grads", "bf16"],
     "pp=8,zero=1,mb=1,recompute=selective,recompute_modules=mla_up_proj+mlp,ep=32,moe_dispatcher=deepep,"
     "ep_comm_overlap=on,pipeline_layout=Et*4|(t*4|)*14tmL"),
    ("megatron qwen3-30b-a3b (hf) p5 tp2 ep16 etp1 (128 experts, QK-norm)", "megatron", "hf:Qwen3-30B-A3B",
     "p5.48xlarge", 8, 512, 4096, [], "tp=2,sp=on,ep=16,etp=1,zero=1,mb=1,recompute=selective"),
    ("megatron qwen3-30b-a3b (hf) p5 tp2 ep16 DeepEP, all-to-all overlapped", "megatron", "hf:Qwen3-30B-A3B",
     "p5.48xlarge", 8, 512, 4096, [],
     "tp=2,sp=on,ep=16,etp=1,zero=1,mb=1,recompute=selective,moe_dispatcher=deepep,ep_comm_overlap=on"),
    ("megatron-bridge qwen3-30b-a3b (hf) p5 ep16 HybridEP, all-to-all overlapped", "megatron-bridge",
     "hf:Qwen3-30B-A3B", "p5.48xlarge", 8, 512, 4096, [],
     "ep=16,zero=1,mb=1,moe_dispatcher=hybridep,ep_comm_overlap=on"),
    ("megatron-bridge mixtral-8x7b p5 tp4 ep8 etp1", "megatron-bridge", "mixtral-8x7b", "p5.48xlarge", 8, 512,
     4096, [], "tp=4,sp=on,ep=8,etp=1,zero=1,mb=1,recompute=selective"),
    ("megatron-bridge deepseek-v3 p5 tp2 pp8 ep8 etp1 (MLAModelProvider)", "megatron-bridge", "deepseek-v3",
     "p5.48xlarge", 32, 1024, 4096, [],
     "tp=2,sp=on,pp=8,first_stage_layers=5,last_stage_layers=2,ep=8,etp=1,zero=1,mb=1,recompute=full"),
    ("deepspeed mixtral-8x7b (hf) p5 AutoEP ep8 zero2", "deepspeed", "hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512,
     4096, [], "ep=8,zero=2,mb=1,recompute=full"),
    ("deepspeed qwen3-30b-a3b (hf) p5 AutoEP ep16 zero1", "deepspeed", "hf:Qwen3-30B-A3B", "p5.48xlarge", 8, 512,
     4096, [], "ep=16,zero=1,mb=1,recompute=full"),
    ("deepspeed mixtral-8x7b (hf) refused (etp 2)", "deepspeed", "hf:Mixtral-8x7B-v0.1", "p5.48xlarge", 8, 512,
     4096, [], "ep=8,etp=2,zero=2,mb=1,recompute=full", "expert tensor parallelism (etp=2)"),
    ("deepspeed deepseek-v3 (hf) refused (AutoEP has no expert bias)", "deepspeed", "hf:DeepSeek-V3", "p5.48xlarge",
     32, 1024, 4096, [], "ep=8,zero=2,mb=1,recompute=full", "score-correction bias"),
    ("torchtitan qwen3-30b-a3b without aux loss (own data) p5 tp2 ep16 etp1 fsdp (qwen3 30B-A3B flavor)",
     "torchtitan", "hf:Qwen3-30B-A3B-no-aux-loss", "p5.48xlarge", 8, 512, 4096, [],
     "tp=2,sp=on,ep=16,etp=1,zero=3,mb=1,recompute=full"),
    ("torchtitan qwen3-30b-a3b without aux loss p5 refused (ep with etp = tp)", "torchtitan",
     "hf:Qwen3-30B-A3B-no-aux-loss", "p5.48xlarge", 8, 512, 4096, [], "tp=2,sp=on,ep=16,zero=3,mb=1,recompute=full",
     "expert tensor parallelism (etp=2) with ep=16"),
    # torchtitan's DeepEP and HybridEP dispatchers (model_registry(moe_comm_backend=...), b5bcd76c): both
    # synchronize with the host (HybridEP in its blocking default), so the recipe switches CUDA graphs off;
    # both need expert parallelism; DeepEP is CUDA-only.
    ("torchtitan qwen3-30b-a3b without aux loss (own data) p5 tp2 ep16 DeepEP (moe_comm_backend deepep)",
     "torchtitan", "hf:Qwen3-30B-A3B-no-aux-loss", "p5.48xlarge", 8, 512, 4096, [],
     "tp=2,sp=on,ep=16,etp=1,zero=3,mb=1,recompute=full,moe_dispatcher=deepep"),
    ("torchtitan deepseek-v3 without MTP (own data) p5 pp16 uneven ep8 zero2 HybridEP (moe_comm_backend hybridep)",
     "torchtitan", "hf:DeepSeek-V3-no-mtp", "p5.48xlarge", 32, 1024, 4096, [],
     "dp=16,pp=16,first_stage_layers=3,last_stage_layers=2,ep=8,zero=2,mb=2,recompute=full,moe_dispatcher=hybridep"),
    ("torchtitan gpt-oss-120b without aux loss (own data) p5 cp2 ep8 HybridEP (gpt_oss 120b flavor, flex)",
     "torchtitan", "hf:gpt-oss-120b-no-aux-loss", "p5.48xlarge", 8, 512, 8192, [],
     "dp=32,cp=2,ep=8,zero=3,mb=1,recompute=full,moe_dispatcher=hybridep"),
    ("torchtitan qwen3-30b-a3b without aux loss p5 refused (DeepEP without ep)", "torchtitan",
     "hf:Qwen3-30B-A3B-no-aux-loss", "p5.48xlarge", 8, 512, 4096, [],
     "tp=2,sp=on,zero=3,mb=1,recompute=full,moe_dispatcher=deepep",
     "the deepep MoE token dispatcher without expert parallelism (ep=1)"),
    ("torchtitan qwen3-30b-a3b without aux loss mi300x refused (DeepEP is CUDA-only)", "torchtitan",
     "hf:Qwen3-30B-A3B-no-aux-loss", "mi300x-8", 1, 512, 4096, [],
     "tp=2,sp=on,ep=8,etp=1,zero=3,mb=1,recompute=full,moe_dispatcher=deepep",
     "the deepep MoE token dispatcher on AMD Instinct MI300X"),
    ("maxtext qwen3-30b-a3b (hf) v5p ep8 zero3 (the expert axis out of fsdp)", "maxtext", "hf:Qwen3-30B-A3B",
     "tpu-v5p-host", 16, 256, 4096, [], "ep=8,zero=3,mb=1,recompute=full"),
    ("maxtext mixtral-8x7b (hf) v5p ep4 zero3 (mixtral block, aux loss / top_k)", "maxtext", "hf:Mixtral-8x7B-v0.1",
     "tpu-v5p-host", 32, 256, 4096, [], "ep=4,zero=3,mb=1,recompute=full"),
    ("maxtext qwen3-30b-a3b v5p refused (ep without ZeRO-3)", "maxtext", "hf:Qwen3-30B-A3B", "tpu-v5p-host", 16,
     256, 4096, [], "ep=8,zero=1,mb=1,recompute=full", "expert parallelism (ep=8) without ZeRO-3"),
    ("maxtext deepseek-v3 v5p refused (MLA, shared expert, dense layers, DeepSeek routing)", "maxtext",
     "deepseek-v3", "tpu-v5p-host", 64, 1024, 4096, [], "ep=8,zero=3,mb=1,recompute=full",
     "DeepSeek routing (correction bias, groups or routed scaling)"),
    # FP8/FP4 recipes (issue 15; at the end: the first controls name cases by index): Megatron's --fp8-format/--fp8-recipe, --fp4-format/--fp4-recipe, the
    # bf16 first/last layers and --fp8/fp4-param-gather (validate_args: distributed optimizer), Bridge's
    # registered recipes; torchtitan refuses all but rowwise, Megatron rowwise.
    ("megatron llama-3-8b p5 tp2 zero1 fp8 (current scaling, bf16 ends, fp8 params)", "megatron", "llama-3-8b",
     "p5.48xlarge", 2, 256, 8192, ["--precision", "fp8"], "tp=2,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3-8b p5 tp2 fp8-delayed", "megatron", "llama-3-8b", "p5.48xlarge", 2, 256, 8192,
     ["--precision", "fp8-delayed"], "tp=2,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3-8b p5 tp2 fp8-blockwise", "megatron", "llama-3-8b", "p5.48xlarge", 2, 256, 8192,
     ["--precision", "fp8-blockwise"], "tp=2,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3-70b b200 tp4 pp2 mxfp8", "megatron", "llama-3-70b", "p6-b200.48xlarge", 4, 256, 8192,
     ["--precision", "mxfp8"], "tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3-70b b200 tp4 pp2 nvfp4", "megatron", "llama-3-70b", "p6-b200.48xlarge", 4, 256, 8192,
     ["--precision", "nvfp4"], "tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective"),
    ("megatron-bridge llama-3-70b b200 tp4 pp2 mxfp8", "megatron-bridge", "llama-3-70b", "p6-b200.48xlarge", 4, 256,
     8192, ["--precision", "mxfp8"], "tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective"),
    ("megatron-bridge llama-3-70b b200 tp4 pp2 nvfp4", "megatron-bridge", "llama-3-70b", "p6-b200.48xlarge", 4, 256,
     8192, ["--precision", "nvfp4"], "tp=4,sp=on,pp=2,zero=1,mb=1,recompute=selective"),
    ("megatron-bridge llama-3-8b p5 tp2 fp8-blockwise", "megatron-bridge", "llama-3-8b", "p5.48xlarge", 2, 256, 8192,
     ["--precision", "fp8-blockwise"], "tp=2,sp=on,zero=1,mb=1,recompute=selective"),
    ("megatron llama-3-8b p5 fp8-rowwise (refused)", "megatron", "llama-3-8b", "p5.48xlarge", 2, 256, 8192,
     ["--precision", "fp8-rowwise"], "tp=2,sp=on,zero=1,mb=1,recompute=selective", "fp8-rowwise precision"),
    ("torchtitan llama-3-8b b200 mxfp8 (refused)", "torchtitan", "llama-3-8b", "p6-b200.48xlarge", 2, 64, 8192,
     ["--precision", "mxfp8"], "zero=3,mb=1,recompute=full", "mxfp8 precision"),
]
HF_FIXTURES = os.path.join(os.path.dirname(HERE), "tests", "data", "hf")
# Configs of this script's own (validate-exports-data/README.md), looked up after HF_FIXTURES.
OWN_FIXTURES = os.path.join(HERE, "validate-exports-data")

# A case with a tenth element expects ShardScope to refuse the export with a reason naming it (the
# framework has no setting for that model field): it passes when the refusal names it, fails when the
# export runs.

# Controls: an export changed the way the frameworks' checks must refuse, run after the cases to
# show that the checks can fail here: (name, case index, change of the exported text).
def _drop_max_connections(text):
    return "\n".join(line for line in text.splitlines() if "CUDA_DEVICE_MAX_CONNECTIONS" not in line)


def _batch_off_by_one(text):
    config = json.loads(text)
    config["train_batch_size"] = config["train_batch_size"] + 1
    return json.dumps(config)


def _tp_doubled(text):
    return text.replace("tensor_parallel_degree=2,", "tensor_parallel_degree=4,")


def _misspelt_key(text):
    return text.replace("ici_tensor_parallelism", "ici_tensor_paralelism")


def case_index(prefix):
    return next(i for i, case in enumerate(CASES) if case[0].startswith(prefix))


CONTROLS = [
    ("megatron llama-3-8b tp2 cp2 without CUDA_DEVICE_MAX_CONNECTIONS=1 (H100)", case_index("megatron llama-3-8b p5 tp2 cp2 zero1 no dropout flash"), _drop_max_connections),
    ("deepspeed gpt3-13b with train_batch_size + 1", case_index("deepspeed gpt3-13b p4d zero3 mics8 full"), _batch_off_by_one),
    ("torchtitan llama-3-8b with tensor_parallel_degree doubled", case_index("torchtitan llama-3-8b p5 tp2 cp2 fsdp full"), _tp_doubled),
    ("maxtext llama-3-70b with ici_tensor_parallelism misspelt", case_index("maxtext llama-3-70b v5p tp4 fsdp full"), _misspelt_key),
    ("megatron-bridge llama-2-70b with a misspelt DDP field (use_distributed_optimiser)", case_index("megatron-bridge llama-2-70b p5 tp8 pp4 interleaved sp zero1 selective"),
     lambda text: text.replace("cfg.ddp.use_distributed_optimizer", "cfg.ddp.use_distributed_optimiser")),
    ("megatron-bridge llama-2-70b with a misspelt GPTModelProvider argument (num_atention_heads)", case_index("megatron-bridge llama-2-70b p5 tp8 pp4 interleaved sp zero1 selective"),
     lambda text: text.replace("num_attention_heads=", "num_atention_heads=")),
    ("megatron qwen2-7b with --add-qkv-bias misspelt (--add-qkv-biases)", case_index("megatron qwen2-7b p5 tp4 (qkv bias, norm_eps)"),
     lambda text: text.replace("--add-qkv-bias", "--add-qkv-biases")),
    ("torchtitan llama-3-8b with RoPE scaling \"off\" (not a Literal choice)", case_index("torchtitan llama-3-8b p5 tp2 cp2 fsdp full"),
     lambda text: text.replace('rope.scaling = "none"', 'rope.scaling = "off"')),
    ("megatron deepseek-v3 with --kv-lora-rank misspelt (--kv-lora-ranks)", case_index("megatron deepseek-v3 (hf) p5 tp8 (MLA, YaRN mscale, MoE: shared expert, expert bias, groups, scaling)"),
     lambda text: text.replace("--kv-lora-rank", "--kv-lora-ranks")),
    ("megatron-bridge deepseek-v3 with a misspelt MLAModelProvider field (kv_lora_rnk)", case_index("megatron-bridge deepseek-v3 p5 tp8 (MLAModelProvider, MoE: dense first layers, expert bias, groups)"),
     lambda text: text.replace("kv_lora_rank=", "kv_lora_rnk=")),
    ("megatron-bridge deepseek-v3 with 7 router groups for 256 experts (finalize's check)", case_index("megatron-bridge deepseek-v3 p5 tp8 (MLAModelProvider, MoE: dense first layers, expert bias, groups)"),
     lambda text: text.replace("moe_router_num_groups=8", "moe_router_num_groups=7")),
]


CONTROLS += [
    ("megatron mixtral-8x7b ep8 with 12 experts (validate_args: not a multiple of ep)",
     case_index("megatron mixtral-8x7b p5 tp4 ep8 (etp"),
     lambda text: text.replace("--num-experts 8\n", "--num-experts 12\n")),
    ("megatron deepseek-v3 pp8 with ep 64 (etp x ep x pp = 512 > 256 devices: initialize_model_parallel)",
     case_index("megatron deepseek-v3 p5 tp2 pp8"),
     lambda text: text.replace("--expert-model-parallel-size 8\n", "--expert-model-parallel-size 64\n")),
    ("megatron deepseek-v3 pp8 without the sigmoid score function (TransformerConfig: expert bias needs it)",
     case_index("megatron deepseek-v3 p5 tp2 pp8"),
     lambda text: text.replace("--moe-router-score-function sigmoid\n", "")),
    ("megatron gpt-oss-120b with etp 8 = tp (TransformerConfig: MoE biases only with etp 1, which the export refuses)",
     case_index("megatron gpt-oss-120b"),
     lambda text: text.replace("--expert-tensor-parallel-size 1\n", "--expert-tensor-parallel-size 8\n")),
    ("megatron-bridge deepseek-v3 pp8 with expert_tensor_parallel_size 2 (a valid grid, not the plan's)",
     case_index("megatron-bridge deepseek-v3 p5 tp2 pp8"),
     lambda text: text.replace("expert_tensor_parallel_size=1,", "expert_tensor_parallel_size=2,")),
    ("megatron qwen3-30b-a3b ep16 with etp 2 (a valid grid, not the plan's)", case_index("megatron qwen3-30b-a3b (hf) p5 tp2 ep16"),
     lambda text: text.replace("--expert-tensor-parallel-size 1\n", "--expert-tensor-parallel-size 2\n")),
    ("megatron-bridge mixtral-8x7b ep8 with a misspelt field (expert_model_paralel_size)",
     case_index("megatron-bridge mixtral-8x7b p5 tp4 ep8"),
     lambda text: text.replace("expert_model_parallel_size=", "expert_model_paralel_size=")),
    ("maxtext qwen3-30b-a3b ep8 with ici_expert_parallelism misspelt (ici_experts_parallelism)",
     case_index("maxtext qwen3-30b-a3b (hf) v5p ep8"),
     lambda text: text.replace("ici_expert_parallelism", "ici_experts_parallelism")),
    ("torchtitan qwen3-30b-a3b ep16 with ep 128 (parallel_dims: ep must divide dp_shard x cp x tp = 64)",
     case_index("torchtitan qwen3-30b-a3b without aux loss (own data) p5 tp2"),
     lambda text: text.replace("expert_parallel_degree=16,", "expert_parallel_degree=128,")),
    ("torchtitan qwen3-30b-a3b ep16 with the MoE field misspelt (load_balance_coef)",
     case_index("torchtitan qwen3-30b-a3b without aux loss (own data) p5 tp2"),
     lambda text: text.replace("layer.moe.load_balance_coeff", "layer.moe.load_balance_coef")),
    ("torchtitan qwen3-30b-a3b ep16 DeepEP with CUDA graphs left on (trainer.py _validate_cuda_graphs)",
     case_index("torchtitan qwen3-30b-a3b without aux loss (own data) p5 tp2 ep16 DeepEP"),
     lambda text: "".join(line for line in text.splitlines(True)
                          if not line.startswith("    config.training.disable_cuda_graphs = True"))),
    ("torchtitan qwen3-30b-a3b ep16 with moe_comm_backend \"deep_ep\" (make_token_dispatcher_config)",
     case_index("torchtitan qwen3-30b-a3b without aux loss (own data) p5 tp2 ep16 DeepEP"),
     lambda text: text.replace('moe_comm_backend="deepep"', 'moe_comm_backend="deep_ep"')),
    ("torchtitan gpt-oss-120b ep8 HybridEP (blocking) with CUDA graphs left on (trainer.py _validate_cuda_graphs)",
     case_index("torchtitan gpt-oss-120b without aux loss (own data) p5 cp2 ep8 HybridEP"),
     lambda text: "".join(line for line in text.splitlines(True)
                          if not line.startswith("    config.training.disable_cuda_graphs = True"))),
    ("deepspeed mixtral-8x7b AutoEP with expert_tensor_parallel_size 2 (validate_folding_global)",
     case_index("deepspeed mixtral-8x7b (hf) p5 AutoEP"),
     lambda text: json.dumps({**json.loads(text), "expert_parallel": {
         **json.loads(text)["expert_parallel"], "expert_tensor_parallel_size": 2}})),
]

FRAMEWORKS = ("megatron", "deepspeed", "maxtext", "torchtitan", "megatron-bridge")

# NVIDIA's compute capability (major) of the catalog's GPUs, for get_device_arch_version.
ARCH_MAJOR = {"dgx-a100-80gb": 8, "p4d.24xlarge": 8, "p4de.24xlarge": 8, "p5.48xlarge": 9, "p5e.48xlarge": 9,
              "p5en.48xlarge": 9, "dgx-h100": 9, "p6-b200.48xlarge": 10}


def layout_sizes(layout):
    keys = dict(kv.split("=") for kv in layout.split(","))
    sizes = {k: int(keys[k]) for k in ("dp", "tp", "pp", "cp")}
    sizes["ep"] = int(keys.get("ep", 1))
    sizes["etp"] = int(keys.get("etp", 0)) or sizes["tp"]  # 0: as tp (Megatron's default)
    sizes["edp"] = sizes["tp"] * sizes["cp"] * sizes["dp"] // (sizes["ep"] * sizes["etp"])
    return sizes


# ---------------------------------------------------------------- Megatron-LM
def megatron_command(text):
    """The MEGATRON_ARGS array and the CUDA_DEVICE_MAX_CONNECTIONS line of an export."""
    args, env, unset, inside = [], {}, [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("MEGATRON_ARGS=("):
            inside = True
        elif inside and stripped == ")":
            inside = False
        elif inside:
            args += shlex.split(stripped)
        elif stripped.startswith("export "):
            name, value = shlex.split(stripped.split("#")[0])[1].split("=", 1)
            env[name] = value
        elif stripped.startswith("unset "):
            unset.append(shlex.split(stripped.split("#")[0])[1])
    return args, env, unset


def check_megatron(case):
    sys.path.insert(0, HERE)
    import framework_stubs as fs
    import typing
    import typing_extensions

    fs.real_packaging()
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override
    fs.install(["torch", "numpy", "transformer_engine", "apex", "einops", "flash_attn", "modelopt", "tensorstore",
                "zarr", "wandb", "tqdm", "psutil", "triton", "safetensors", "nvtx", "mamba_ssm", "causal_conv1d"])
    sys.path.insert(0, case["megatron"])
    from megatron.training import arguments

    arch = ARCH_MAJOR[case["node"]]
    arguments.get_device_arch_version = lambda: arch
    # --moe-grouped-gemm: validate_args asserts torch.cuda.get_device_capability()[0] >= 8, the
    # plan's GPU again (a Stub has no number).
    cuda = arguments.torch.cuda
    cuda.get_device_capability = lambda *device: (arch, 0)
    arguments.torch.cuda = cuda
    args, env, unset = megatron_command(case["settings"])
    for name in unset:
        os.environ.pop(name, None)
    os.environ.update(env)
    os.environ["WORLD_SIZE"] = str(case["devices"])
    os.environ["RANK"] = "0"
    user = ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(case["vocab"]),
            "--train-iters", "10", "--lr", "1e-4"]
    sys.argv = ["pretrain_gpt.py"] + args + user
    parsed = arguments.parse_args()
    arguments.validate_args(parsed, {})
    sizes = layout_sizes(case["layout"])
    dp = sizes["dp"]
    assert parsed.data_parallel_size == dp, f"Megatron derived dp {parsed.data_parallel_size}, the plan has {dp}"
    if parsed.num_experts is None:
        return f"parse_args + validate_args passed; data_parallel_size {parsed.data_parallel_size}"
    return (f"parse_args + validate_args passed; data_parallel_size {parsed.data_parallel_size}; "
            + megatron_moe_checks(parsed, sizes, case["devices"]))


def megatron_moe_checks(parsed, sizes, world):
    """The TransformerConfig pretrain_gpt.py builds from the arguments (its __post_init__ checks),
    and Megatron's process-group grid for them (megatron_expert_grid)."""
    from megatron.training.argument_utils import core_transformer_config_from_args

    config = core_transformer_config_from_args(parsed)
    grid = megatron_expert_grid(parsed.tensor_model_parallel_size, parsed.pipeline_model_parallel_size,
                                parsed.context_parallel_size, parsed.expert_model_parallel_size,
                                parsed.expert_tensor_parallel_size, parsed.num_distributed_optimizer_instances,
                                sizes, world)
    return f"{type(config).__name__} built ({config.num_moe_experts} experts, top {config.moe_router_topk}); {grid}"


def megatron_expert_grid(tp, pp, cp, ep, etp, instances, sizes, world):
    """Megatron Core's process-group grid at rank 0 (parallel_state.initialize_model_parallel with
    torch.distributed answering rank 0 of `world`): its checks, then the expert groups of rank 0
    against the plan's ep, etp and expert data-parallel size."""
    from megatron.core import parallel_state

    dist = parallel_state.torch.distributed
    dist.is_initialized = lambda: True
    dist.get_world_size = lambda group=None: world
    dist.get_rank = lambda group=None: 0
    groups = {}

    def create_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
                     group_desc=None):
        if ranks is not None and 0 in ranks:
            groups.setdefault(group_desc, list(ranks))
        return object()

    parallel_state.create_group = create_group
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, context_parallel_size=cp,
        expert_model_parallel_size=ep, expert_tensor_parallel_size=etp,
        num_distributed_optimizer_instances=instances, create_gloo_process_groups=False)
    ep, etp, edp = (len(groups[name]) for name in ("EXPERT_MODEL_PARALLEL_GROUP", "EXPERT_TENSOR_PARALLEL_GROUP",
                                                   "EXPERT_DATA_PARALLEL_GROUP"))
    assert (ep, etp, edp) == (sizes["ep"], sizes["etp"], sizes["edp"]), \
        f"Megatron's expert groups of rank 0: ep {ep}, etp {etp}, edp {edp}; the plan: {sizes}"
    # tp-ep-dp: the expert-parallel peers of rank 0 are etp ranks apart.
    assert groups["EXPERT_MODEL_PARALLEL_GROUP"] == list(range(0, ep * etp, etp)), groups["EXPERT_MODEL_PARALLEL_GROUP"]
    return (f"initialize_model_parallel: rank 0's expert groups ep {ep} {groups['EXPERT_MODEL_PARALLEL_GROUP'][:4]}"
            f"{'...' if ep > 4 else ''}, etp {etp}, expert dp {edp} (the plan's)")


# ---------------------------------------------------------------- DeepSpeed
def check_deepspeed(case):
    sys.path.insert(0, HERE)
    import framework_stubs as fs

    fs.real_packaging()
    fs.install(["torch", "hjson", "numpy", "psutil", "cpuinfo", "einops", "tqdm", "msgpack", "ninja",
                "deepspeed.ops", "deepspeed.moe", "deepspeed.model_implementations", "deepspeed.inference.v2"])
    sys.path.insert(0, case["deepspeed"])
    package = fs.bare_package("deepspeed", os.path.join(case["deepspeed"], "deepspeed"))
    package.HAS_TRITON = False  # deepspeed/__init__.py sets it from an optional import
    # module_inject's __init__ imports the inference kernels; its AutoEP config modules, which
    # DeepSpeedConfig reads the expert_parallel section with, are imported for real.
    fs.bare_package("deepspeed.module_inject", os.path.join(case["deepspeed"], "deepspeed", "module_inject"))
    from deepspeed import comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    config = json.loads(case["settings"])
    sizes = layout_sizes(case["layout"])
    world = {"all": case["devices"]}
    dist.get_rank = lambda group=None: 0
    dist.get_world_size = lambda group=None: world["all"] if group is None else group

    class Mesh:  # deepspeed/__init__.py builds (data_parallel, sequence_parallel) from the two keys
        def get_group(self, mesh_dim):
            return config["data_parallel_size"] if mesh_dim == "data_parallel" else config["sequence_parallel_size"]

    class PipeGrid:  # PipelineEngine passes the pipeline grid: data-parallel ranks = devices / pp
        def get_data_parallel_world_size(self):
            return sizes["dp"] * sizes["tp"]

    mpu = PipeGrid() if "pipeline" in config else None
    mesh = Mesh() if "sequence_parallel_size" in config and "data_parallel_size" in config else None
    ds = DeepSpeedConfig(config, mpu, mesh_device=mesh)
    sequences = ds.train_micro_batch_size_per_gpu * ds.gradient_accumulation_steps * sizes["dp"]
    assert sequences == case["global_batch"], f"{sequences} sequences per step, the plan has {case['global_batch']}"
    autoep = deepspeed_autoep_checks(ds, config, sizes, case["devices"]) if "expert_parallel" in config else ""
    return (f"DeepSpeedConfig passed: train_batch_size {ds.train_batch_size} over world size {ds.world_size}, "
            f"micro {ds.train_micro_batch_size_per_gpu} x accumulation {ds.gradient_accumulation_steps} x dp "
            f"{sizes['dp']} = {sequences} sequences, ZeRO stage {ds.zero_optimization_stage}{autoep}")


def deepspeed_autoep_checks(ds, config, sizes, world):
    """What deepspeed/runtime/engine.py _configure_expert_parallel runs on the parsed expert_parallel
    section before it creates any group (no mpu: pp 1), and the folding's sizes against the plan."""
    from deepspeed.module_inject.auto_ep_config import validate_autoep_config
    from deepspeed.module_inject.auto_ep_folding import build_folding_spec, validate_folding_global

    autoep = ds.expert_parallel_config
    assert autoep.enabled, "expert_parallel is not enabled"
    tp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    sp = config.get("sequence_parallel_size", 1)
    validate_autoep_config(autoep, world, 1, tp, sp)
    spec = build_folding_spec(world_size=world, pp_size=1, tp_size=max(tp, 1), ep_size=autoep.autoep_size,
                              etp_size=autoep.expert_tensor_parallel_size, mp_mode="tp" if tp > 1 else "sp")
    offload = "offload_optimizer" in config.get("zero_optimization", {})
    validate_folding_global(spec, zero_stage=ds.zero_optimization_stage, sp_size=sp, autoep_enabled=True,
                            zero_offload_optimizer=offload)
    assert (spec.ep_size, spec.etp_size, spec.edp_size) == (sizes["ep"], sizes["etp"], sizes["edp"]), \
        f"AutoEP folding ep {spec.ep_size}, etp {spec.etp_size}, edp {spec.edp_size}; the plan: {sizes}"
    return f"; AutoEP validated: ep {spec.ep_size} x etp {spec.etp_size} x edp {spec.edp_size} per stage (the plan's)"


# ---------------------------------------------------------------- MaxText
def check_maxtext(case):
    """Every key of the YAML is a field of MaxText's pydantic MaxTextConfig and its value validates
    against that field's type. (The mesh against jax.devices() and the model validators need jax.)"""
    sys.path.insert(0, HERE)
    import framework_stubs as fs
    import yaml
    from pydantic import TypeAdapter

    fs.real_packaging()
    fs.install(["jax", "jaxlib", "numpy", "omegaconf", "tensorflow", "flax", "optax", "orbax", "google", "grain",
                "ml_dtypes", "absl", "etils", "pathwaysutils", "qwix", "tokamax", "transformers", "tensorboardX",
                "aqt", "psutil", "cloud_tpu_diagnostics", "cloud_accelerator_diagnostics"])
    src = os.path.join(case["maxtext"], "src")
    sys.path.insert(0, src)
    fs.bare_package("maxtext", os.path.join(src, "maxtext"))
    from maxtext.configs import types

    fields = types.MaxTextConfig.model_fields
    config = yaml.safe_load(case["settings"])
    base = os.path.join(src, "maxtext", "configs", config.pop("base_config"))
    assert os.path.exists(base), f"base_config {base} does not exist"
    unknown = sorted(k for k in config if k not in fields)
    assert not unknown, f"keys MaxTextConfig does not have: {', '.join(unknown)}"
    for key, value in config.items():
        TypeAdapter(fields[key].annotation).validate_python(value)
    ici = [v for k, v in config.items() if k.startswith("ici_")]
    dcn = [v for k, v in config.items() if k.startswith("dcn_")]
    product = lambda values: eval("*".join(map(str, values)) or "1")
    assert product(ici) * product(dcn) == case["devices"], "the mesh does not cover the devices"
    experts = ""
    if config.get("num_experts", 1) > 1:
        # The expert axis (base.yml logical_axis_rules: 'exp' over 'expert') must be the plan's ep
        # and split the experts evenly.
        ep = config["ici_expert_parallelism"] * config["dcn_expert_parallelism"]
        sizes = layout_sizes(case["layout"])
        assert ep == sizes["ep"], f"expert axis {ep}, the plan's ep {sizes['ep']}"
        assert config["num_experts"] % ep == 0, f"{config['num_experts']} experts over an expert axis of {ep}"
        assert config["base_mlp_dim"] == config["base_moe_mlp_dim"], "types.py: a fully MoE model has " \
            "base_mlp_dim = base_moe_mlp_dim"
        experts = f"; {config['num_experts']} experts over the expert axis {ep} (the plan's ep)"
    return (f"{len(config)} keys are MaxTextConfig fields and validate; ici {product(ici)} x dcn {product(dcn)} = "
            f"{case['devices']} devices{experts}")


# ---------------------------------------------------------------- torchtitan
def recipe_calls(text):
    """From an exported recipe: the keyword arguments of each call by callee name, the
    `config.<section>.<field> = value` assignments, and the first argument of model_registry."""
    import ast

    calls, assigned = {}, {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            keywords = {}
            for k in node.keywords:
                try:
                    keywords[k.arg] = ast.literal_eval(k.value)
                except ValueError:
                    keywords[k.arg] = ast.unparse(k.value)
            args = [ast.literal_eval(a) if isinstance(a, ast.Constant) else ast.unparse(a) for a in node.args]
            calls.setdefault(name, []).append((args, keywords))
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute):
            target = ast.unparse(node.targets[0])
            try:
                assigned[target] = ast.literal_eval(node.value)
            except ValueError:
                assigned[target] = ast.unparse(node.value)
    return calls, assigned


def literal_choices_hold(cls, values):
    import dataclasses
    import typing

    for field in dataclasses.fields(cls):
        if field.name in values and typing.get_origin(field.type) is typing.Literal:
            assert values[field.name] in typing.get_args(field.type), \
                f"{cls.__name__}.{field.name}={values[field.name]!r} is none of {typing.get_args(field.type)}"


def check_torchtitan(case):
    """ParallelismConfig and TrainingConfig (torchtitan/config/configs.py) built from the recipe's values
    (their __post_init__ checks and Literal choices), ParallelDims.from_config against the world size
    (parallel_dims.py), the llama3 flavor a key of llama3_configs and llama3_8b a recipe function."""
    import ast
    import typing

    sys.path.insert(0, HERE)
    import framework_stubs as fs

    fs.real_packaging()
    fs.install(["torch", "tyro", "numpy", "spmd_types", "torchft", "torchcomms"])
    root = case["torchtitan"]
    sys.path.insert(0, root)
    for package in ("torchtitan", "torchtitan.config", "torchtitan.distributed"):
        fs.bare_package(package, os.path.join(root, *package.split(".")))
    from torchtitan.config.configs import ParallelismConfig, TrainingConfig
    from torchtitan.distributed.parallel_dims import ParallelDims

    # configs.py annotates with `from __future__`-free types; resolve them for the Literal check.
    for cls in (ParallelismConfig, TrainingConfig):
        for field in cls.__dataclass_fields__.values():
            if isinstance(field.type, str):
                field.type = typing.get_type_hints(cls)[field.name]
    calls, assigned = recipe_calls(case["settings"])
    (_, parallel), = calls["ParallelismConfig"]
    literal_choices_hold(ParallelismConfig, parallel)
    parallelism = ParallelismConfig(**parallel)
    training = {k.split(".")[-1]: v for k, v in assigned.items() if k.startswith("config.training.")}
    literal_choices_hold(TrainingConfig, training)
    TrainingConfig(**training)
    dims = ParallelDims.from_config(parallelism, case["devices"])
    # The model family and base recipe the recipe imports (llama3 / llama3_8b, qwen3 / qwen3_30b_a3b):
    # the flavor a key of <family>_configs, the base a function of its config_registry.py.
    tree = ast.parse(case["settings"])
    imports = {alias.name: node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               for alias in node.names}
    family = imports["model_registry"].split(".")[-1]
    base = next(name for name, module in imports.items() if module == f"torchtitan.models.{family}.config_registry")
    flavor = calls["model_registry"][0][0][0]
    models = os.path.join(root, "torchtitan", "models", family)
    init = ast.parse(open(os.path.join(models, "__init__.py")).read())
    # The flavors dict of the family's __init__.py: llama3_configs, qwen3_configs, deepseekv3_configs,
    # gptoss_configs (the module name without its underscores).
    configs = f"{family.replace('_', '')}_configs"
    flavors = [k.value for n in ast.walk(init) if isinstance(n, ast.Assign)
               and ast.unparse(n.targets[0]) == configs for k in n.value.keys]
    assert flavors, f"no {configs} in models/{family}/__init__.py"
    assert flavor in flavors, f"flavor {flavor!r} is none of {flavors}"
    # model_registry's keyword arguments (attn_backend) must be parameters of the family's model_registry.
    registry_fn = next(n for n in init.body if isinstance(n, ast.FunctionDef) and n.name == "model_registry")
    parameters = {a.arg for a in registry_fn.args.args + registry_fn.args.kwonlyargs}
    for keyword, value in calls["model_registry"][0][1].items():
        assert keyword in parameters, f"model_registry has no parameter {keyword} ({', '.join(sorted(parameters))})"
    registry = ast.parse(open(os.path.join(models, "config_registry.py")).read())
    assert any(isinstance(n, ast.FunctionDef) and n.name == base for n in registry.body), f"no recipe {base}"
    rope = check_torchtitan_rope(root, assigned)
    moe = check_torchtitan_moe(root, assigned, parallel, case)
    norms = check_torchtitan_norms(root, assigned)
    dispatch = check_torchtitan_dispatch(root, calls, training, parallelism, init, registry, flavor, base, case)
    return (f"ParallelismConfig, TrainingConfig and ParallelDims accept it: dp_replicate {dims.dp_replicate} x "
            f"dp_shard {dims.dp_shard} x cp {dims.cp} x tp {dims.tp} x pp {dims.pp} = {dims.world_size}"
            f"{f', ep {dims.ep}' if moe else ''}; {family} flavor {flavor}, base recipe {base}{rope}{moe}{norms}"
            f"{dispatch}")


def _keyword_default(function, name):
    """The default of parameter `name` of a FunctionDef, literal_eval'd; KeyError without one."""
    import ast

    args = function.args
    positional = args.posonlyargs + args.args
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        if arg.arg == name:
            return ast.literal_eval(default)
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if arg.arg == name and default is not None:
            return ast.literal_eval(default)
    raise KeyError(name)


def _base_disables_cuda_graphs(registry, base, default):
    """training.disable_cuda_graphs as the base recipe of config_registry.py leaves it: its
    TrainingConfig(disable_cuda_graphs=...) or `config.training.disable_cuda_graphs = ...`, else that of
    the recipe it starts from (`config = other()`), else TrainingConfig's default."""
    import ast

    functions = {n.name: n for n in registry.body if isinstance(n, ast.FunctionDef)}
    value = default
    for node in (node for statement in functions[base].body for node in ast.walk(statement)):  # in order
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "TrainingConfig":
            for k in node.keywords:
                if k.arg == "disable_cuda_graphs":
                    value = ast.literal_eval(k.value)
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "config.training.disable_cuda_graphs":
            value = ast.literal_eval(node.value)
        elif (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "config"
              and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) in functions):
            value = _base_disables_cuda_graphs(registry, ast.unparse(node.value.func), default)
    return value


def check_torchtitan_dispatch(root, calls, training, parallelism, init, registry, flavor, base, case):
    """The MoE token dispatcher and CUDA graphs, through torchtitan's own code: the recipe's
    model_registry(moe_comm_backend=..., non_blocking_capacity_factor=...) (or the flavor builder's
    default) through make_token_dispatcher_config (models/common/config_utils.py), the dispatcher config
    it returns through update_ep_token_dispatcher_config (models/common/token_dispatcher.py: DeepEP,
    HybridEP and MinimalAsyncEP need expert parallelism and the per-rank token capacity), and the
    recipe's training.disable_cuda_graphs (or its base recipe's) through Trainer.Config's
    _validate_cuda_graphs (trainer.py, read from the source and run as written: its class imports need
    the whole trainer) with that dispatcher on every MoE layer. A dense recipe runs the last only."""
    import ast
    import dataclasses
    import types

    import framework_stubs as fs

    # token_dispatcher.py imports torchtitan.config (bare here), triton through minimal_async_ep's kernels,
    # and TORCH_DTYPE_MAP from torchtitan.config inside maybe_update_minimal_async_ep_config: the
    # package's names set from the modules that define them, TORCH_DTYPE_MAP as __init__.py builds it.
    fs.install(["triton"])
    import torch
    import torchtitan.config.configs as configs
    from torchtitan.config.configurable import Configurable

    package = sys.modules["torchtitan.config"]
    package.Configurable = Configurable
    for name in ("CommConfig", "CompileConfig", "DebugConfig", "ParallelismConfig", "TrainingConfig"):
        setattr(package, name, getattr(configs, name))
    package.TORCH_DTYPE_MAP = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}
    for name in ("torchtitan.models", "torchtitan.models.common"):
        fs.bare_package(name, os.path.join(root, *name.split(".")))
    from torchtitan.models.common import config_utils, token_dispatcher as td

    moe = case.get("moe")
    layers = []
    summary = ""
    if moe:
        registry_fn = next(n for n in init.body if isinstance(n, ast.FunctionDef) and n.name == "model_registry")
        keywords = calls["model_registry"][0][1]
        backend = keywords.get("moe_comm_backend", _keyword_default(registry_fn, "moe_comm_backend"))
        if backend is None:
            # qwen3's model_registry passes nothing on: the flavor builder's default.
            family_configs = next(n.value for n in ast.walk(init) if isinstance(n, ast.Assign)
                                  and ast.unparse(n.targets[0]).endswith("_configs"))
            builder = next(ast.unparse(v) for k, v in zip(family_configs.keys, family_configs.values)
                           if k.value == flavor)
            backend = _keyword_default(next(n for n in init.body if isinstance(n, ast.FunctionDef)
                                            and n.name == builder), "moe_comm_backend")
        dispatcher = config_utils.make_token_dispatcher_config(
            num_experts=moe["experts"], top_k=moe["top_k"], comm_backend=backend,
            non_blocking_capacity_factor=keywords.get("non_blocking_capacity_factor"))
        layers = [types.SimpleNamespace(moe=types.SimpleNamespace(
            routed_experts=types.SimpleNamespace(token_dispatcher=dispatcher)))]
        model = types.SimpleNamespace(dim=case["hidden"], layers=layers)
        runtime = types.SimpleNamespace(parallelism=parallelism, training=configs.TrainingConfig(**training))
        td.update_ep_token_dispatcher_config(model, runtime)
        summary = f"; moe_comm_backend {backend!r}: {type(dispatcher).__qualname__}"
        if getattr(dispatcher, "num_max_tokens_per_rank", None):
            summary += f" (num_max_tokens_per_rank {dispatcher.num_max_tokens_per_rank})"
    # Trainer.Config._validate_cuda_graphs, run on the recipe's values.
    trainer = ast.parse(open(os.path.join(root, "torchtitan", "trainer.py")).read())
    trainer_cls = next(n for n in trainer.body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
    config_cls = next(n for n in trainer_cls.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    validate = next(n for n in config_cls.body if isinstance(n, ast.FunctionDef) and n.name == "_validate_cuda_graphs")
    scope = {"LocalTokenDispatcher": td.LocalTokenDispatcher, "HybridEPTokenDispatcher": td.HybridEPTokenDispatcher,
             "MinimalAsyncEPTokenDispatcher": td.MinimalAsyncEPTokenDispatcher}
    exec(compile(ast.Module(body=[validate], type_ignores=[]), "torchtitan/trainer.py", "exec"), scope)
    default = next(f.default for f in dataclasses.fields(configs.TrainingConfig) if f.name == "disable_cuda_graphs")
    disabled = training.get("disable_cuda_graphs", _base_disables_cuda_graphs(registry, base, default))

    def traverse(cls):
        return [(f"layers.{i}.moe.routed_experts.token_dispatcher", layer.moe.routed_experts.token_dispatcher, None,
                 None) for i, layer in enumerate(layers)
                if isinstance(layer.moe.routed_experts.token_dispatcher, cls)]

    model_spec = types.SimpleNamespace(model=types.SimpleNamespace(traverse=traverse))
    trainer_config = types.SimpleNamespace(training=types.SimpleNamespace(disable_cuda_graphs=disabled),
                                           parallelism=parallelism, model_spec=model_spec)
    scope["_validate_cuda_graphs"](trainer_config)
    return summary + f"; _validate_cuda_graphs passes (CUDA graphs {'off' if disabled else 'on'})"


def check_torchtitan_norms(root, assigned):
    """The recipe's `<...>norm.eps = value` lines (the model's norm eps on a flavor that keeps the
    default): `eps` a float field of RMSNorm.Config (models/common/nn_modules.py, read from the
    source), each norm one the family's blocks have."""
    import ast

    settings = {k: v for k, v in assigned.items() if k.endswith("norm.eps")}
    if not settings:
        return ""
    tree = ast.parse(open(os.path.join(root, "torchtitan", "models", "common", "nn_modules.py")).read())
    norm = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RMSNorm")
    config = next(n for n in norm.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    fields = {n.target.id: ast.unparse(n.annotation) for n in config.body if isinstance(n, ast.AnnAssign)}
    assert fields.get("eps") == "float", f"RMSNorm.Config has no float eps (fields: {fields})"
    known = {"layer.attention_norm.eps", "layer.ffn_norm.eps", "layer.attention.q_norm.eps",
             "layer.attention.kv_norm.eps", "config.model_spec.model.norm.eps"}
    for name, value in settings.items():
        assert name in known, f"{name}: not a norm of the blocks ({', '.join(sorted(known))})"
        assert isinstance(value, float) and 0 < value < 1, f"{name} = {value!r}"
    return f"; RMSNorm.Config eps {next(iter(settings.values()))!r} on {len(settings)} norms"


def check_torchtitan_moe(root, assigned, parallel, case):
    """A MoE recipe: each `layer.moe.<field> = value` a field of MoE.Config (models/common/moe.py,
    read from the source), and expert_parallel_degree the plan's ep."""
    import ast

    settings = {k.split(".")[-1]: v for k, v in assigned.items() if k.startswith("layer.moe.")}
    if "expert_parallel_degree" not in parallel:
        assert not settings, "MoE settings without expert_parallel_degree"
        return ""
    tree = ast.parse(open(os.path.join(root, "torchtitan", "models", "common", "moe.py")).read())
    moe = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MoE")
    config = next(n for n in moe.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    fields = {n.target.id for n in config.body if isinstance(n, ast.AnnAssign)}
    for name in settings:
        assert name in fields, f"MoE.Config has no field {name} (fields: {', '.join(sorted(fields))})"
    ep = layout_sizes(case["layout"])["ep"]
    assert parallel["expert_parallel_degree"] == ep, f"expert_parallel_degree {parallel['expert_parallel_degree']}, the plan's ep {ep}"
    return "; MoE.Config fields " + ", ".join(f"{k}={v!r}" for k, v in settings.items())


def check_torchtitan_rope(root, assigned):
    """The recipe's `layer.attention.rope.<field> = value` lines (the model's RoPE scaling written
    on each layer): each a field of RoPE.Config (models/common/rope.py), "scaling" one of its
    Literal choices, read from the source (the module needs torch)."""
    import ast

    settings = {k.split(".")[-1]: v for k, v in assigned.items() if k.startswith("layer.attention.rope.")}
    if not settings:
        return ""
    tree = ast.parse(open(os.path.join(root, "torchtitan", "models", "common", "rope.py")).read())
    rope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RoPE")
    config = next(n for n in rope.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    fields = {n.target.id: n.annotation for n in config.body if isinstance(n, ast.AnnAssign)}
    for name, value in settings.items():
        assert name in fields, f"RoPE.Config has no field {name} (fields: {', '.join(fields)})"
        annotation = fields[name]
        if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "Literal":
            choices = ast.literal_eval(annotation.slice)
            assert value in choices, f"RoPE.Config.{name}={value!r} is none of {choices}"
    return "; RoPE.Config fields " + ", ".join(f"{k}={v!r}" for k, v in settings.items())


# ---------------------------------------------------------------- Megatron-Bridge
def _class_fields(module_path, class_name, resolve_import):
    """Annotated field names of a dataclass in a source file and, through its imported bases, of
    the Megatron classes it extends (imported for real from the Megatron-LM checkout)."""
    import ast
    import dataclasses

    tree = ast.parse(open(module_path).read())
    imports = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for base in cls.bases:
        base_name = ast.unparse(base)
        if base_name in imports:
            module, name = imports[base_name]
            base_class = getattr(resolve_import(module), name)
            assert dataclasses.is_dataclass(base_class), f"{class_name}'s base {module}.{name} did not import"
            names |= {f.name for f in dataclasses.fields(base_class)}
        elif any(isinstance(n, ast.ClassDef) and n.name == base_name for n in tree.body):
            names |= _class_fields(module_path, base_name, resolve_import)
    return names


def check_megatron_bridge(case):
    """GPTModelProvider (MLAModelProvider) (**the recipe's arguments) (models/gpt_provider.py,
    models/mla_provider.py) and finalize() (Megatron Core's deferred __post_init__ checks), every cfg.<section>.<field> the recipe sets a field of that section's
    config class (training/config.py and the Megatron classes it extends), the mixed_precision name a
    registered recipe (training/mixed_precision.py)."""
    import ast
    import importlib
    import typing
    import typing_extensions

    sys.path.insert(0, HERE)
    import framework_stubs as fs

    fs.real_packaging()
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override
    fs.install(["torch", "numpy", "transformer_engine", "apex", "einops", "flash_attn", "modelopt", "tensorstore",
                "zarr", "wandb", "tqdm", "psutil", "triton", "safetensors", "nvtx", "mamba_ssm", "causal_conv1d",
                "transformers", "datasets", "huggingface_hub", "rich", "omegaconf", "hydra", "nemo_run",
                "accelerate", "tensorboard", "sentencepiece", "tiktoken", "regex", "filelock", "peft", "timm", "PIL",
                "megatron.energon", "lightning", "nvidia_resiliency_ext", "pynvml", "scipy",
                "megatron.bridge.models.conversion", "megatron.bridge.models.hf_pretrained"])
    sys.path.insert(0, case["megatron"])
    bridge = os.path.join(case["megatron-bridge"], "src", "megatron", "bridge")
    import megatron

    megatron.__path__.append(os.path.dirname(bridge))
    for package in ("megatron.bridge", "megatron.bridge.models", "megatron.bridge.data"):
        fs.bare_package(package, bridge + package[len("megatron.bridge"):].replace(".", "/"))
    from megatron.bridge.models.gpt_provider import GPTModelProvider

    calls, assigned = recipe_calls(case["settings"])
    # A model with multi-head latent attention: MLAModelProvider (models/mla_provider.py), Megatron
    # Core's MLATransformerConfig on a GPTModelProvider.
    mla = "MLAModelProvider" in calls
    (_, model), = calls["MLAModelProvider" if mla else "GPTModelProvider"]
    if model.get("activation_func") == "F.silu":
        import torch.nn.functional as F

        model["activation_func"] = F.silu
    if isinstance(model.get("moe_layer_freq"), str):  # a list expression such as [0]*3+[1]*58
        model["moe_layer_freq"] = eval(model["moe_layer_freq"], {"__builtins__": {}})
    if mla:
        from megatron.bridge.models.mla_provider import MLAModelProvider

        provider = MLAModelProvider(**model)
    else:
        provider = GPTModelProvider(**model)
    # The providers defer Megatron Core's __post_init__ checks to finalize()
    # (models/transformer_config.py), which the model build calls: run them.
    provider.finalize()
    config = os.path.join(bridge, "training", "config.py")
    sections = {"train": (config, "TrainingConfig"), "ddp": (config, "DistributedDataParallelConfig"),
                "optimizer": (config, "OptimizerConfig"), "checkpoint": (config, "CheckpointConfig"),
                "dataset": (config, "GPTDatasetConfig"),
                "tokenizer": (os.path.join(bridge, "training", "tokenizers", "config.py"), "TokenizerConfig"),
                "mixed_precision": (os.path.join(bridge, "training", "mixed_precision.py"), "MixedPrecisionConfig")}
    container = _class_fields(config, "ConfigContainer", importlib.import_module)
    checked = 0
    for target in assigned:
        parts = target.split(".")
        if parts[0] != "cfg" or parts[1] == "model":
            continue
        if len(parts) == 2 or parts[1] == "env_vars":
            assert parts[1] in container, f"ConfigContainer has no field {parts[1]}"
        else:
            path, name = sections[parts[1]]
            assert parts[2] in _class_fields(path, name, importlib.import_module), f"{name} has no field {parts[2]}"
        checked += 1
    grid = ""
    if provider.num_moe_experts:
        grid = "; " + megatron_expert_grid(
            provider.tensor_model_parallel_size, provider.pipeline_model_parallel_size,
            provider.context_parallel_size, provider.expert_model_parallel_size,
            provider.expert_tensor_parallel_size, assigned.get("cfg.ddp.num_distributed_optimizer_instances", 1),
            layout_sizes(case["layout"]), case["devices"])
    recipes = ast.parse(open(os.path.join(bridge, "training", "mixed_precision.py")).read())
    registered = {n.name for n in recipes.body if isinstance(n, ast.FunctionDef)
                  and any(ast.unparse(d) == "register" for d in n.decorator_list)}
    precision = assigned.get("cfg.mixed_precision")
    # A recipe resolved to its config to change a field (bf16 gradients): get_mixed_precision_config(name).
    if calls.get("get_mixed_precision_config"):
        (args, _), = calls["get_mixed_precision_config"]
        assert precision == f"get_mixed_precision_config({args[0]!r})", precision
        precision = args[0]
    assert precision is None or precision in registered, f"mixed_precision {precision!r} is not a registered recipe"
    return (f"{type(provider).__name__} built ({provider.num_layers} layers, tp {provider.tensor_model_parallel_size}, pp "
            f"{provider.pipeline_model_parallel_size}); {checked} cfg fields exist; mixed_precision {precision}{grid}")


# ---------------------------------------------------------------- driver
def run_case(cli, checkouts, work, case, change=None):
    name, fmt, model, node, nodes, batch, seq, flags, layout = case[:9]
    expected_refusal = case[9] if len(case) > 9 else None
    plan = os.path.join(work, "plan.json")
    problem = ["--model", model, "--node-type", node, "--nodes", str(nodes), "--global-batch", str(batch),
               "--seq", str(seq)] + flags
    # DeepSpeed's cases are priced with its own bf16 default, bf16 gradients (engine.py: grad_accum_dtype None
    # is the model's dtype), unless a case states the gradients' type.
    precision = flags[flags.index("--precision") + 1] if "--precision" in flags else "bf16"
    if fmt == "deepspeed" and "--main-grads" not in flags and precision == "bf16":
        problem += ["--main-grads", "bf16"]
    db = ["--db", os.path.join(work, "catalog.sqlite")]
    if model.startswith("hf:"):
        # catalog import names the model after its folder (lowercase); importing it again is refused.
        folder = model[3:]
        config = os.path.join(HF_FIXTURES, folder, "config.json")
        if not os.path.exists(config):
            config = os.path.join(OWN_FIXTURES, folder, "config.json")
        subprocess.run([cli] + db + ["catalog", "import", config], capture_output=True)
        model = folder.lower()
        problem[1] = model
    # The plan file carries the problem; its search may find the fixed layout infeasible (exit 1,
    # the file is written all the same), which does not matter to the export of --layout. The
    # search's --fix takes no ep/etp (the export's --layout does): they are left out of it. A
    # plan file left by an earlier case must not stand in for this one's.
    if os.path.exists(plan):
        os.remove(plan)
    fixed = ",".join(kv for kv in layout.split(",") if kv.split("=")[0] not in ("ep", "etp"))
    subprocess.run([cli] + db + ["plan"] + problem + ["--fix", fixed, "--out", plan], capture_output=True)
    if not os.path.exists(plan):
        return False, "shardscope-cli plan wrote no plan file"
    out = subprocess.run([cli] + db + ["export", "--plan", plan, "--format", fmt, "--layout", layout, "--json"],
                         capture_output=True, text=True)
    exported = json.loads(out.stdout)
    refusals = "; ".join(r["message"] for r in exported["refusals"])
    if expected_refusal:
        if exported["runs"]:
            return False, f"exported, but a refusal naming {expected_refusal!r} was expected"
        if expected_refusal not in refusals:
            return False, f"refused without naming {expected_refusal!r}: {refusals}"
        return True, "refused by name, as it must: " + refusals
    if not exported["runs"]:
        return False, "ShardScope refused: " + refusals
    model_json = subprocess.run([cli] + db + ["catalog", "show", model, "--json"], capture_output=True, text=True)
    spec = json.loads(model_json.stdout) if model_json.returncode == 0 else {}
    vocab = spec.get("vocab", 32000)
    sizes = layout_sizes(exported["layout"])
    payload = {"settings": exported["settings"], "layout": exported["layout"], "node": node, "global_batch": batch,
               "devices": sizes["dp"] * sizes["tp"] * sizes["pp"] * sizes["cp"], "vocab": vocab,
               "hidden": spec.get("hidden"), "moe": spec.get("moe"), "format": fmt, **checkouts}
    if change:
        payload["settings"] = change(payload["settings"])
    check = subprocess.run([sys.executable, os.path.abspath(__file__), "--check"], input=json.dumps(payload),
                           capture_output=True, text=True)
    if check.returncode == 0:
        return True, check.stdout.strip().splitlines()[-1]
    lines = [l for l in check.stderr.strip().splitlines() if l.strip()]
    return False, lines[-1] if lines else f"exit {check.returncode}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli")
    for framework in FRAMEWORKS:
        parser.add_argument("--" + framework, help=f"a {framework} checkout")
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.check:
        case = json.loads(sys.stdin.read())
        checks = {"megatron": check_megatron, "deepspeed": check_deepspeed, "maxtext": check_maxtext,
                  "torchtitan": check_torchtitan, "megatron-bridge": check_megatron_bridge}
        print(checks[case["format"]](case))
        return 0
    checkouts = {f: os.path.abspath(getattr(a, f.replace("-", "_"))) for f in FRAMEWORKS
                 if getattr(a, f.replace("-", "_"))}
    failed = ran = 0
    with tempfile.TemporaryDirectory() as work:
        for case in CASES:
            if case[1] not in checkouts:
                print(f"SKIP  {case[0]} (no --{case[1]} checkout)")
                continue
            ok, message = run_case(a.cli, checkouts, work, case)
            ran += 1
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}  {case[0]}\n      {message}")
        for name, index, change in CONTROLS:
            case = CASES[index]
            if case[1] not in checkouts:
                continue
            ok, message = run_case(a.cli, checkouts, work, case, change)
            failed += ok  # a control must be refused
            print(f"{'REFUSED (as it must)' if not ok else 'ACCEPTED (the check is blind!)'}  control: {name}\n"
                  f"      {message}")
    print(f"{ran} case(s) passed, every control refused" if not failed else f"{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
