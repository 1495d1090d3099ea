# Megatron-Bridge recipe exported by ShardScope
# qwen3-30b-a3b on 8 x p5.48xlarge (64 devices), global batch 512 x 4096 tokens
# layout dp=16,tp=4,pp=1,cp=1,sp=on,zero=1,zero_group=0,mb=1,schedule=1f1b,v=1,recompute=selective,offload=none
# Names: NVIDIA-NeMo/Megatron-Bridge recipes/common.py, models/gpt_provider.py, training/config.py (commit 067f987d)
#
# Megatron derives the data-parallel size: 64 devices / (tp 4 x pp 1 x cp 1) = dp 16; 32 micro-batches of 1 sequence(s) per replica and step.
# Experts: 128 routed experts over ep 1 (128 per rank), each expert's matrices over etp 4; expert data-parallel size 16 = tp 4 x cp 1 x dp 16 / (ep 1 x etp 4).
# Yours to set: cfg.dataset.blend (mock data until then), the tokenizer (a NullTokenizer of 151936 entries here), learning rate, iterations and checkpoints.
#
# Launch on every node:
#   torchrun --nnodes 8 --nproc_per_node 8 --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 shardscope_bridge_recipe.py
import torch.nn.functional as F
from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training.pretrain import pretrain


def shardscope_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = GPTModelProvider(
        num_layers=48,
        hidden_size=2048,
        ffn_hidden_size=6144,
        num_attention_heads=32,
        num_query_groups=4,
        kv_channels=128,
        normalization="RMSNorm",
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        share_embeddings_and_output_weights=False,
        position_embedding_type="rope",
        rotary_base=1000000,
        vocab_size=151936,
        seq_length=4096,
        num_moe_experts=128,
        moe_router_topk=8,
        layernorm_epsilon=1e-06,
        qk_layernorm=True,
        moe_ffn_hidden_size=768,
        moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=0.001,
        moe_grouped_gemm=True,
        moe_token_dispatcher_type="alltoall",
        tensor_model_parallel_size=4,
        pipeline_model_parallel_size=1,
        virtual_pipeline_model_parallel_size=None,
        context_parallel_size=1,
        expert_model_parallel_size=1,
        expert_tensor_parallel_size=4,
        sequence_parallel=True,
        recompute_granularity="selective",
    )
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 151936
    cfg.dataset.seq_length = 4096
    cfg.train.global_batch_size = 512
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
