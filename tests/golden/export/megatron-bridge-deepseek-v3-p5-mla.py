# Megatron-Bridge recipe exported by ShardScope
# deepseek-v3 on 32 x p5.48xlarge (256 devices), global batch 1024 x 4096 tokens
# layout dp=32,tp=8,pp=1,cp=1,sp=on,zero=1,zero_group=0,mb=1,schedule=1f1b,v=1,recompute=full,offload=none
# Names: NVIDIA-NeMo/Megatron-Bridge recipes/common.py, models/gpt_provider.py, training/config.py (commit 067f987d)
#
# Megatron derives the data-parallel size: 256 devices / (tp 8 x pp 1 x cp 1) = dp 32; 32 micro-batches of 1 sequence(s) per replica and step.
# Experts: 256 routed experts over ep 1 (256 per rank), each expert's matrices over etp 8; expert data-parallel size 32 = tp 8 x cp 1 x dp 32 / (ep 1 x etp 8).
# Yours to set: cfg.dataset.blend (mock data until then), the tokenizer (a NullTokenizer of 129280 entries here), learning rate, iterations and checkpoints.
#
# Launch on every node:
#   torchrun --nnodes 32 --nproc_per_node 8 --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port 29500 shardscope_bridge_recipe.py
import torch.nn.functional as F
from megatron.bridge.models.mla_provider import MLAModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.gpt_step import forward_step
from megatron.bridge.training.pretrain import pretrain


def shardscope_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = MLAModelProvider(
        num_layers=61,
        hidden_size=7168,
        ffn_hidden_size=18432,
        num_attention_heads=128,
        num_query_groups=128,
        normalization="RMSNorm",
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        share_embeddings_and_output_weights=False,
        position_embedding_type="rope",
        rotary_base=10000,
        vocab_size=129280,
        seq_length=4096,
        num_moe_experts=256,
        moe_router_topk=8,
        layernorm_epsilon=1e-06,
        multi_latent_attention=True,
        qk_layernorm=True,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_head_dim=128,
        qk_pos_emb_head_dim=64,
        v_head_dim=128,
        rope_type="yarn",
        rotary_scaling_factor=40,
        mscale=1,
        mscale_all_dim=1,
        original_max_position_embeddings=4096,
        beta_fast=32,
        beta_slow=1,
        moe_ffn_hidden_size=2048,
        moe_shared_expert_intermediate_size=2048,
        moe_layer_freq=[0]*3+[1]*58,
        moe_router_score_function="sigmoid",
        moe_router_enable_expert_bias=True,
        moe_router_num_groups=8,
        moe_router_group_topk=4,
        moe_router_topk_scaling_factor=2.5,
        moe_router_load_balancing_type="none",
        moe_aux_loss_coeff=0,
        moe_grouped_gemm=True,
        mtp_num_layers=1,
        mtp_loss_scaling_factor=0.3,
        moe_token_dispatcher_type="alltoall",
        tensor_model_parallel_size=8,
        pipeline_model_parallel_size=1,
        virtual_pipeline_model_parallel_size=None,
        context_parallel_size=1,
        expert_model_parallel_size=1,
        expert_tensor_parallel_size=8,
        sequence_parallel=True,
        recompute_granularity="full",
        recompute_method="uniform",
        recompute_num_layers=1,
    )
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 129280
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
