# torchtitan recipe exported by ShardScope
# llama-3-8b on 4 x p5.48xlarge (32 devices), global batch 256 x 8192 tokens
# layout dp=8,tp=2,pp=1,cp=2,sp=on,zero=3,zero_group=0,mb=1,schedule=1f1b,v=1,recompute=full,offload=none
# Names: pytorch/torchtitan torchtitan/config/configs.py, torchtitan/trainer.py, models/llama3 (commit b5bcd76c)
#
# torchtitan derives nothing from the world size: dp_replicate 1 x dp_shard 8 x cp 2 x tp 2 x pp 1 = 32 ranks, as torchrun starts them.
# fully_shard (ZeRO-3) shards model states over dp_shard x cp = 16 ranks and replicates them across dp_replicate 1.
# Gradient accumulation: 32 micro-batches of 1 sequence(s) per data-parallel rank and step (256 sequences / (8 ranks x 1)).
# The llama3 8B flavor has llama-3-8b's shapes; it applies Llama 3.1's RoPE scaling, which llama-3-8b (Llama 3) has not: the recipe sets scaling "none" on every layer. torchtitan's Llama has no dropout.
# Yours to set: hf_assets_path (tokenizer), the dataset, learning rate and steps (the llama3_8b recipe's values are kept).
#
# Save as shardscope_recipe.py where Python finds it and launch on every node:
#   torchrun --nnodes 4 --nproc_per_node 8 --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 \
#       -m torchtitan.train --module shardscope_recipe --config shardscope_config
from torchtitan.config import CompileConfig, ParallelismConfig
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.models.llama3 import model_registry
from torchtitan.models.llama3.config_registry import llama3_8b
from torchtitan.trainer import Trainer


def shardscope_config() -> Trainer.Config:
    config = llama3_8b()
    config.compile = CompileConfig()
    config.model_spec = model_registry("8B")
    for layer in config.model_spec.model.layers:
        layer.attention.rope.scaling = "none"
    config.hf_assets_path = "./assets/hf/Llama-3.1-8B"
    config.parallelism = ParallelismConfig(
        data_parallel_replicate_degree=1,
        data_parallel_shard_degree=8,
        fsdp_reshard_after_forward="default",
        tensor_parallel_degree=2,
        enable_sequence_parallel=True,
        pipeline_parallel_degree=1,
        context_parallel_degree=2,
    )
    config.training.max_context_length = 8192
    config.training.num_tokens_per_microbatch_per_dp_rank = 8192
    config.training.num_tokens_per_train_step = 2097152
    config.training.mixed_precision_param = "bfloat16"
    config.training.mixed_precision_reduce = "float32"
    config.activation_checkpoint = FullAC.Config()
    return config
