# Megatron-Bridge recipe exported by ShardScope
# llama-2-70b on 64 x p5.48xlarge (512 devices), global batch 1024 x 4096 tokens
# layout dp=16,tp=8,pp=4,cp=1,sp=on,zero=1,zero_group=0,mb=1,schedule=interleaved,v=5,recompute=selective,offload=none
# Names: NVIDIA-NeMo/Megatron-Bridge recipes/common.py, models/gpt_provider.py, training/config.py (commit 067f987d)
#
# Megatron derives the data-parallel size: 512 devices / (tp 8 x pp 4 x cp 1) = dp 16; 64 micro-batches of 1 sequence(s) per replica and step.
# Yours to set: cfg.dataset.blend (mock data until then), the tokenizer (a NullTokenizer of 32000 entries here), learning rate, iterations and checkpoints.
#
# Launch on every node:
#   torchrun --nnodes 64 --nproc_per_node 8 --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 shardscope_bridge_recipe.py
import torch.nn.functional as F
from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training.pretrain import pretrain


def shardscope_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = GPTModelProvider(
        num_layers=80,
        hidden_size=8192,
        ffn_hidden_size=28672,
        num_attention_heads=64,
        num_query_groups=8,
        kv_channels=128,
        normalization="RMSNorm",
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        share_embeddings_and_output_weights=False,
        position_embedding_type="rope",
        rotary_base=10000,
        vocab_size=32000,
        seq_length=4096,
        layernorm_epsilon=1e-05,
        tensor_model_parallel_size=8,
        pipeline_model_parallel_size=4,
        virtual_pipeline_model_parallel_size=5,
        context_parallel_size=1,
        sequence_parallel=True,
        recompute_granularity="selective",
    )
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 32000
    cfg.dataset.seq_length = 4096
    cfg.train.global_batch_size = 1024
    cfg.train.micro_batch_size = 1
    cfg.mixed_precision = "bf16_mixed"
    cfg.ddp.use_distributed_optimizer = True
    cfg.ddp.use_megatron_fsdp = False
    cfg.ddp.data_parallel_sharding_strategy = "no_shard"
    cfg.ddp.overlap_grad_reduce = True
    cfg.ddp.overlap_param_gather = False
    cfg.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] = 1  # Megatron Core with tp/cp before Blackwell
    return cfg


if __name__ == "__main__":
    pretrain(config=shardscope_pretrain_config(), forward_step_func=forward_step)
