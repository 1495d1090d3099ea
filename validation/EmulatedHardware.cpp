#include "EmulatedHardware.h"

#include <algorithm>

namespace shardscope {

ModelSpec engineModelSpec(const engine::ModelConfig& c)
{
    ModelSpec m;
    m.name = "engine-model-" + std::to_string(c.layers) + "x" + std::to_string(c.hidden);
    m.display_name = "engine model " + std::to_string(c.layers) + " layers x " + std::to_string(c.hidden);
    // The objective decides the family the planner prices: an encoder trains BERT's heads
    // (TrainingObjective.h); a bidirectional model with the next-token loss is priced as a decoder.
    m.family = c.masked_lm ? ModelFamily::EncoderOnly : ModelFamily::DecoderOnly;
    m.layers = c.layers;
    m.hidden = c.hidden;
    m.heads = c.heads;
    m.kv_heads = c.kvHeads();
    m.head_dim = c.headDim();
    m.ffn_hidden = c.ffn();
    m.mlp = c.mlp;
    m.vocab = c.vocab;
    m.max_seq = c.seq;
    m.positions = c.positions;
    m.rope_base = c.rope_base;
    m.norm = c.norm;
    m.bias = c.bias;
    m.qkv_bias = !c.bias && c.qkv_bias;
    m.qk_norm = c.qk_norm;
    m.sliding_window = c.sliding_window;
    m.tied_embeddings = c.tied_embeddings;
    m.final_norm = c.finalNorm();  // post-norm layers end in their own norms (TrainingObjective.h)
    m.token_types = c.token_types;
    m.embedding_norm = c.embedding_norm;
    m.pooler = c.pooler;
    if (c.moe.enabled()) {  // the same MoE block the engine runs (MoeMlp.h)
        m.moe.experts = c.moe.experts;
        m.moe.top_k = c.moe.top_k;
        m.moe.ffn_hidden = c.moe.expert_ffn;
        m.moe.shared_experts = c.moe.shared_experts;
        m.moe.shared_ffn_hidden = c.moe.shared_ffn;
        m.moe.dense_layers = c.moe.dense_layers;
        m.moe.layer_interval = c.moe.layer_interval;
        m.moe.router = c.moe.router;
        m.moe.capacity_factor = c.moe.capacity_factor;
        m.moe.aux_loss_coeff = c.moe.aux_loss_coeff;
        m.moe.score_correction_bias = c.moe.score_correction_bias;
        m.moe.routed_scaling = c.moe.routed_scaling;
        m.moe.expert_groups = c.moe.expert_groups;
        m.moe.group_top_k = c.moe.group_top_k;
    }
    if (c.mla.enabled()) {  // multi-head latent attention (its score factor changes no count)
        m.mla.q_lora_rank = c.mla.q_lora_rank;
        m.mla.kv_lora_rank = c.mla.kv_lora_rank;
        m.mla.qk_nope_head_dim = c.mla.qk_nope_head_dim;
        m.mla.qk_rope_head_dim = c.mla.qk_rope_head_dim;
        m.mla.v_head_dim = c.mla.v_head_dim;
    }
    if (c.mtp.enabled()) {  // multi-token prediction (its loss weight changes no count)
        m.mtp.layers = c.mtp.layers;
        m.mtp.loss_scale = c.mtp.loss_scale;
    }
    if (c.encoder_decoder) {  // T5: decoder layers with cross-attention, one bias table per stack
        m.family = ModelFamily::EncoderDecoder;
        m.decoder_layers = c.decoder_layers;
        m.relative_buckets = c.relative_buckets;
    }
    return m;
}

Precision plannerPrecision(engine::PrecisionMode mode)
{
    return mode == engine::PrecisionMode::FP32 ? Precision::FP32 : Precision::BF16Mixed;
}

NodeType emulatedNodeType(const engine::DeviceProfile& p, const engine::LinkSpec& links, int devices)
{
    NodeType n;
    const int perNode = links.node_devices > 0 ? std::min(links.node_devices, devices) : devices;
    n.name = "emulated-" + p.name;
    n.display_name = "emulated node of " + std::to_string(perNode) + " x " + p.name;
    n.chip.name = p.name;
    n.chip.vendor = "emulated";
    n.chip.display_name = p.name;
    n.chip.peak_flops_fp32 = p.peak_flops_fp32;
    n.chip.peak_flops_bf16 = p.peak_flops_bf16 > 0 ? p.peak_flops_bf16 : p.peak_flops_fp32;
    n.chip.hbm_bytes = p.memory_bytes;
    n.chip.hbm_bytes_per_second = p.memory_bytes_per_second;
    n.chip.devices_per_chip = 1;
    n.chips_per_node = std::max(1, perNode);
    n.intra_topology = Topology::Switch;  // the communicator's links are point to point
    n.intra_link_bytes_per_second = links.intra_bytes_per_second > 0 ? links.intra_bytes_per_second : 1e30;
    n.scale_up_chips = n.chips_per_node;
    // The engine gives each device its share of the node's network.
    n.inter_node_bytes_per_second = links.inter_bytes_per_second * n.chips_per_node;
    n.host_link_bytes_per_second = p.host_link_bytes_per_second;  // one device per emulated chip
    return n;
}

Problem emulatedProblem(const engine::ModelConfig& config, int batch, engine::PrecisionMode precision,
                        bool fp32_gradients, const engine::DeviceProfile& profile, const engine::LinkSpec& links,
                        int devices)
{
    Problem p;
    p.model = engineModelSpec(config);
    p.cluster.node = emulatedNodeType(profile, links, devices);
    p.cluster.nodes = std::max(1, devices / p.cluster.node.chips_per_node);
    p.training.global_batch = batch;
    p.training.seq_len = config.seq;
    p.training.precision = plannerPrecision(precision);
    if (precision == engine::PrecisionMode::BF16Mixed)
        p.training.main_grads = fp32_gradients ? MainGrads::FP32 : MainGrads::BF16;
    p.training.tokens_to_train = 1e9;
    p.training.dropout = false;  // the engine's model has no dropout
    return p;
}

CostModelParams engineCostModelParams(const engine::DeviceProfile& profile, const engine::LinkSpec& links,
                                      std::size_t bucket_bytes, const CostModelParams& base)
{
    CostModelParams p = base;
    p.name = "emulated " + profile.name;
    p.matmul_efficiency_default = 1.0;
    p.measured_matmul_flops_by_chip.clear();
    p.matmul_efficiency_by_vendor.clear();
    p.matmul_half_dim = 0;
    p.kernel_overhead_s = profile.kernel_overhead_s;
    p.intra_link_efficiency = 1.0;
    p.inter_node_efficiency = 1.0;
    p.intra_latency_s = links.intra_latency_s;
    p.inter_latency_s = links.inter_latency_s;
    p.hierarchical_collectives = false;
    // The engine's rings cross emulated nodes over each device's own link (Communicator's clock),
    // its device clock has no host work between steps, and its GEMMs run at the profile's rate.
    p.multi_nic_rings = false;
    p.step_overhead_s = 0;
    p.measured_matmul_sustained_fraction = 1.0;
    // Its expert GEMMs run one by one at the profile's rate, each with the profile's kernel overhead
    // (no grouped-GEMM efficiency of a GPU kernel), and an MoE layer costs the device clock only
    // the kernels it charges (the per-layer host synchronisations of a GPU MoE layer are not there).
    p.grouped_gemm_efficiency = 1.0;
    p.moe_layer_overhead_s = 0;
    // One worker does one thing at a time (Communicator.h): nothing runs under other compute.
    p.dp_overlap = 0;
    p.ep_overlap = 0;
    p.reserve_fraction = 0;
    p.dp_bucket_bytes = double(bucket_bytes);
    // The emulated host of an offloaded optimizer runs at the profile's host memory bandwidth.
    if (profile.host_memory_bytes_per_second > 0)
        p.host_memory_bytes_per_second = profile.host_memory_bytes_per_second;
    return p;
}

} // namespace shardscope
