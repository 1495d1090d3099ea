# Megatron-Bridge recipe exported by ShardScope
# gpt3-13b on 8 x p5.48xlarge (64 devices), global batch 512 x 2048 tokens
# layout dp=32,tp=2,pp=1,cp=1,sp=off,zero=3,zero_group=8,mb=2,schedule=1f1b,v=1,recompute=full,offload=none
# Names: NVIDIA-NeMo/Megatron-Bridge recipes/common.py, models/gpt_provider.py, training/config.py (commit 067f987d)
#
# Megatron derives the data-parallel size: 64 devices / (tp 2 x pp 1 x cp 1) = dp 32; 8 micro-batches of 2 sequence(s) per replica and step.
# Yours to set: cfg.dataset.blend (mock data until then), the tokenizer (a NullTokenizer of 50257 entries here), learning rate, iterations and checkpoints.
#
# Launch on every node:
#   torchrun --nnodes 8 --nproc_per_node 8 --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 shardscope_bridge_recipe.py
from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training.pretrain import pretrain


def shardscope_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = GPTModelProvider(
        num_layers=40,
        hidden_size=5120,
        ffn_hidden_size=20480,
        num_attention_heads=40,
        num_query_groups=40,
        kv_channels=128,
        normalization="LayerNorm",
        add_bias_linear=True,
        share_embeddings_and_output_weights=True,
        position_embedding_type="learned_absolute",
        vocab_size=50257,
        seq_length=2048,
        layernorm_epsilon=1e-05,
        tensor_model_parallel_size=2,
        pipeline_model_parallel_size=1,
        virtual_pipeline_model_parallel_size=None,
        context_parallel_size=1,
        sequence_parallel=False,
        recompute_granularity="full",
        recompute_method="uniform",
        recompute_num_layers=1,
    )
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 50257
    cfg.dataset.seq_length = 2048
    cfg.train.global_batch_size = 512
    cfg.train.micro_batch_size = 2
    cfg.mixed_precision = "fp16_mixed"
    cfg.ddp.use_distributed_optimizer = True
    cfg.ddp.use_megatron_fsdp = True
    cfg.ddp.data_parallel_sharding_strategy = "optim_grads_params"
    cfg.ddp.num_distributed_optimizer_instances = 4
    cfg.ddp.overlap_grad_reduce = True
    cfg.ddp.overlap_param_gather = False
    cfg.checkpoint.ckpt_format = "fsdp_dtensor"  # Megatron-FSDP requires it
    return cfg


if __name__ == "__main__":
    pretrain(config=shardscope_pretrain_config(), forward_step_func=forward_step)
