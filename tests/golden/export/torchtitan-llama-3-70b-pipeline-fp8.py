# torchtitan recipe exported by ShardScope
# llama-3-70b on 32 x p5.48xlarge (256 devices), global batch 1024 x 8192 tokens
# layout dp=8,tp=8,pp=4,cp=1,sp=on,zero=2,zero_group=4,mb=1,schedule=interleaved,v=2,recompute=full,offload=none
# Names: pytorch/torchtitan torchtitan/config/configs.py, torchtitan/trainer.py, models/llama3 (commit b5bcd76c)
#
# torchtitan derives nothing from the world size: dp_replicate 2 x dp_shard 4 x cp 1 x tp 8 x pp 4 = 256 ranks, as torchrun starts them.
# fully_shard (ZeRO-2: no resharding after forward) shards model states over dp_shard x cp = 4 ranks and replicates them across dp_replicate 2.
# 128 pipeline micro-batches of 1 sequence(s) per data-parallel rank and step, 10 layers per stage; no gradient accumulation.
# The llama3 70B flavor has llama-3-70b's shapes; it applies Llama 3.1's RoPE scaling, which llama-3-70b (Llama 3) has not: the recipe sets scaling "none" on every layer. torchtitan's Llama has no dropout.
# Yours to set: hf_assets_path (tokenizer), the dataset, learning rate and steps (the llama3_8b recipe's values are kept).
#
# Save as shardscope_recipe.py where Python finds it and launch on every node:
#   torchrun --nnodes 32 --nproc_per_node 8 --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 \
#       -m torchtitan.train --module shardscope_recipe --config shardscope_config
from torchtitan.components.quantization import Float8LinearConverter
from torchtitan.config import CompileConfig, ParallelismConfig
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.models.llama3 import model_registry
from torchtitan.models.llama3.config_registry import llama3_8b
from torchtitan.trainer import Trainer


def shardscope_config() -> Trainer.Config:
    config = llama3_8b()
    config.compile = CompileConfig(enable=True, components=["model", "loss"])
    config.model_spec = model_registry(
        "70B",
        converters=[Float8LinearConverter.Config(recipe_name="rowwise", filter_fqns=["lm_head"], model_compile_enabled=True)],
    )
    for layer in config.model_spec.model.layers:
        layer.attention.rope.scaling = "none"
    config.hf_assets_path = "./assets/hf/Llama-3.1-70B"
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=2,
        data_parallel_shard_degree=4,
        fsdp_reshard_after_forward="never",
        tensor_parallel_degree=8,
        enable_sequence_parallel=True,
        pipeline_parallel_degree=4,
        pipeline_parallel_schedule="Interleaved1F1B",
        pipeline_parallel_layers_per_stage=10,
        pipeline_parallel_first_stage_less_layers=0,
        pipeline_parallel_last_stage_less_layers=0,
        num_pp_microbatches=128,
        context_parallel_degree=1,
    )
    config.training.max_context_length = 8192
    config.training.num_tokens_per_microbatch_per_dp_rank = 8192
    config.training.num_tokens_per_train_step = 8388608
    config.training.mixed_precision_param = "bfloat16"
    config.training.mixed_precision_reduce = "float32"
    config.training.disable_cuda_graphs = True  # CUDA graphs refuse pipeline parallelism
    config.activation_checkpoint = FullAC.Config()
    return config
