// torchtitan: a Python recipe, a function returning a Trainer.Config, and the torchrun line.
//
// torchtitan configures a run in Python now (no TOML): torchtitan/config/README.md at
// pytorch/torchtitan commit b5bcd76c66d0acb1a08b176d9639425bc55e0b2a ("A run is described by a
// full configuration: a function that returns a complete Trainer.Config"), selected with
// `-m torchtitan.train --module MODULE --config FUNCTION` (run_train.sh). Names at that commit:
//   torchtitan/config/configs.py: ParallelismConfig(data_parallel_replicate_degree,
//     data_parallel_shard_degree, fsdp_reshard_after_forward "default"|"always"|"never",
//     tensor_parallel_degree, enable_sequence_parallel (default True), pipeline_parallel_degree,
//     pipeline_parallel_schedule, pipeline_parallel_layers_per_stage,
//     pipeline_parallel_first_stage_less_layers / _last_stage_less_layers (default 1 each),
//     num_pp_microbatches, context_parallel_degree); TrainingConfig(
//     num_tokens_per_microbatch_per_dp_rank, num_tokens_per_train_step, max_context_length,
//     enable_cpu_offload (parameters, gradients and optimizer states), disable_cuda_graphs,
//     mixed_precision_param "bfloat16"|"float32", mixed_precision_reduce "float32" only);
//     CompileConfig(enable, components);
//   torchtitan/trainer.py: gradient accumulation = num_tokens_per_train_step /
//     (num_tokens_per_microbatch_per_dp_rank x num_pp_microbatches x dp); the tokens of a pipeline
//     micro-batch must divide by tp (with sequence parallelism) x 2cp (cp > 1); CUDA graphs
//     (on unless training.disable_cuda_graphs) refuse pipeline parallelism ("CUDA graphs do not
//     support pipeline parallelism yet") and, with expert_parallel_degree > 1, every token dispatcher
//     that synchronizes with the host: all but HybridEP with non_blocking_capacity_factor set and
//     MinimalAsyncEP (Trainer.Config._validate_cuda_graphs: "CUDA graphs support only expert parallel
//     token dispatcher configurations without CPU synchronization");
//   torchtitan/distributed/parallel_dims.py: dp_replicate x dp_shard x cp x tp x pp == WORLD_SIZE;
//   torchtitan/distributed/pipeline_parallel.py: with pipeline_parallel_layers_per_stage, the
//     stage count is ceil((layers + first_less + last_less) / layers_per_stage), single-stage
//     schedules (1F1B, GPipe) need one stage per rank, looped ones (Interleaved1F1B) two or more;
//   torchtitan/distributed/activation_checkpoint.py: FullAC (whole block), SelectiveAC (per-op:
//     saves chosen matmul outputs and recomputes every second matmul), None;
//   torchtitan/models/llama3/__init__.py: model_registry(flavor) with the flavors debugmodel,
//     1B, 3B, 8B, 70B, 405B (dims, heads, KV heads, compute_ffn_hidden_dim multipliers, vocab
//     128256, RoPE theta 500000 with Llama 3.1 scaling, tied embeddings for 1B and 3B);
//   torchtitan/models/llama3/config_registry.py: llama3_8b() (loss, tokenizer assets, AdamW,
//     data, checkpoints), the base the export changes;
//   torchtitan/components/quantization/float8.py: Float8LinearConverter.Config(filter_fqns,
//     model_compile_enabled), as llama3_405b() applies it with compile on;
//   torchtitan/models/common/rope.py: RoPE.Config(scaling "none"|"llama"|"yarn", scaling_factor 8,
//     low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192), a mutable
//     dataclass; make_gqa_config (models/common/config_utils.py) gives each layer's
//     GQAttention.Config a copy of it (.rope), reached as model_spec.model.layers[i].attention.rope.
// RoPE: every llama3 flavor applies Llama 3.1's scaling ("llama", factor 8). The built-in
// llama-3-8b and llama-3-70b are Llama 3 (their Hugging Face meta-llama/Meta-Llama-3-* configs have
// no rope_scaling and 8192 positions), so the recipe switches the scaling off on every layer for a
// model without it, sets the model's own llama3 factors when they differ, and refuses the other
// scalings by name.
// Decisions: the model must be one of the llama3 flavors (torchtitan builds models from its
// registry); ZeRO-1 is refused (FSDP2, torchtitan's only sharding, shards gradients too), ZeRO-2
// is fully_shard without resharding after forward ("never"), ZeRO-3 the default resharding;
// selective recomputation is refused (SelectiveAC is a per-op policy, not the attention-core
// recomputation the plan priced); so are fp16 and optimizer-only offload.
// Mixture of experts at the same commit: torchtitan/models/qwen3/__init__.py flavors "30B-A3B" and
// "235B-A22B" (_build_qwen3_moe_layers: RMSNorm eps 1e-6, QK-norm, fused qkv without bias,
// make_router_config(score_func "softmax", route_norm True), routed experts of moe_hidden_dim, no
// shared experts, untied embeddings, CosSinRoPE), the qwen3_30b_a3b() recipe
// (models/qwen3/config_registry.py) as the base; models/common/moe.py MoE.Config: no auxiliary
// loss, balancing by an expert bias updated at load_balance_coeff (default 1e-3; None: none),
// reached as model_spec.model.layers[i].moe; ParallelismConfig.expert_parallel_degree ("EP
// borrows ranks from FSDP and TP: efsdp = dp_shard * cp * tp / ep", parallel_dims.py: ep must
// divide dp_shard x cp x tp), and models/common/moe_sharding.py: with EP the routed experts are
// sharded on the ep axis only (whole experts: etp 1), without EP split over the TP axis (etp = tp).
// DeepSeek at the same commit: torchtitan/models/deepseek_v3/__init__.py deepseekv3_configs
// "16B", "236B", "671B" (build_mla_moe_layers: MLA with wq or wq_a/q_norm/wq_b, wkv_a, kv_norm,
// wkv_b, wo and Attention.Config.mscale; the first n_dense_layers a dense FeedForward, then MoE
// layers with make_router_config(score_func, num_expert_groups, num_limited_groups, route_scale,
// route_norm) and one shared FeedForward of moe_hidden_dim x num_shared_experts; ComplexRoPE yarn
// factor 40, theta 10000, beta 32/1 over 4096 positions; RMSNorm.Config without eps, so
// models/common/nn_modules.py's default 1e-5), the recipes deepseek_v3_16b and deepseek_v3_671b
// (config_registry.py); make_moe_config's load_balance_coeff 1e-3 is the expert-bias update rate
// (Megatron-LM's moe_router_bias_update_rate default is the same 1e-3).
// GPT-OSS: torchtitan/models/gpt_oss/__init__.py gptoss_configs "20b", "120b" (_build_gptoss_layers:
// biases on wqkv, wo, the router gate and the experts, sinks, a 128 window on the even layers,
// softmax router with route_norm, load_balance_coeff 1e-3, CosSinRoPE yarn x32 theta 150000
// truncate False; inner attention "varlen" by default, which models/common/decoder.py refuses under
// context parallelism: "Use FlexAttention or disable CP"), recipes gpt_oss_20b and gpt_oss_120b.
#include "ExportCommon.h"

#include <cmath>

namespace shardscope::exportdetail {

namespace {

// compute_ffn_hidden_dim in torchtitan/models/common/feed_forward.py (b5bcd76c).
int ffnHiddenDim(int dim, int multipleOf, double multiplier)
{
    int hidden = int(2 * 4 * dim / 3.0);
    hidden = int(multiplier * hidden);
    return multipleOf * ((hidden + multipleOf - 1) / multipleOf);
}

struct Flavor {
    const char* name;
    int dim, layers, heads, kv_heads, ffn;
    bool tied;
};

// torchtitan/models/llama3/__init__.py (b5bcd76c): _1b, _3b, _8b, _70b, _405b.
const std::vector<Flavor>& llama3Flavors()
{
    static const std::vector<Flavor> flavors{
        {"1B", 2048, 16, 32, 8, ffnHiddenDim(2048, 1024, 1.5), true},
        {"3B", 3072, 28, 24, 8, ffnHiddenDim(3072, 1024, 1.0), true},
        {"8B", 4096, 32, 32, 8, ffnHiddenDim(4096, 1024, 1.3), false},
        {"70B", 8192, 80, 64, 8, ffnHiddenDim(8192, 4096, 1.3), false},
        {"405B", 16384, 126, 128, 8, ffnHiddenDim(16384, 4096, 1.2), false},
    };
    return flavors;
}
constexpr int kLlama3Vocab = 128256;
constexpr double kLlama3RopeTheta = 500000;

const Flavor* flavorOf(const ModelSpec& m)
{
    if (m.family != ModelFamily::DecoderOnly || m.mlp != MlpKind::SwiGlu || m.norm != NormKind::RmsNorm ||
        m.positions != PositionKind::Rotary || m.bias || m.moe.enabled() || m.vocab != kLlama3Vocab ||
        m.rope_base != kLlama3RopeTheta || m.head_dim * m.heads != m.hidden)
        return nullptr;
    for (const Flavor& f : llama3Flavors())
        if (f.dim == m.hidden && f.layers == m.layers && f.heads == m.heads && f.kv_heads == m.kv_heads &&
            f.ffn == m.ffn_hidden && f.tied == m.tied_embeddings)
            return &f;
    return nullptr;
}


// "1B, 3B, 8B, ...": the names of a flavor table, for a refusal.
template <class F> std::string flavorNames(const std::vector<F>& flavors)
{
    std::string names;
    for (const F& f : flavors)
        names += (names.empty() ? "" : ", ") + std::string(f.name);
    return names;
}

// The torchtitan MoE model a model spec is: its family (the module under torchtitan/models/),
// flavor (a key of the family's configs dict), base recipe and tokenizer assets.
struct MoeRecipe {
    const char* family;  // "qwen3", "deepseek_v3", "gpt_oss"
    const char* flavor;
    const char* base;    // the config_registry.py function the export changes
    const char* assets;  // hf_assets_path
};

struct Qwen3MoeFlavor {
    MoeRecipe recipe;
    int dim, layers, heads, kv_heads, head_dim, moe_hidden, experts, top_k;
    double rope_theta;
};

// torchtitan/models/qwen3/__init__.py (b5bcd76c): _30b_a3b, _235b_a22b (the qwen3_30b_a3b recipe
// is the base of both).
const std::vector<Qwen3MoeFlavor>& qwen3MoeFlavors()
{
    static const std::vector<Qwen3MoeFlavor> flavors{
        {{"qwen3", "30B-A3B", "qwen3_30b_a3b", "Qwen3-30B-A3B"}, 2048, 48, 32, 4, 128, 768, 128, 8, 1000000.0},
        {{"qwen3", "235B-A22B", "qwen3_30b_a3b", "Qwen3-235B-A22B"}, 4096, 94, 64, 4, 128, 1536, 128, 8, 5000000.0},
    };
    return flavors;
}
constexpr int kQwen3Vocab = 151936;
constexpr double kQwen3NormEps = 1e-6;  // _EPS
constexpr double kTorchtitanNormEps = 1e-5;  // RMSNorm.Config's default (models/common/nn_modules.py)

const Qwen3MoeFlavor* qwen3MoeFlavorOf(const ModelSpec& m)
{
    const MoeSpec& e = m.moe;
    if (m.family != ModelFamily::DecoderOnly || m.mlp != MlpKind::SwiGlu || m.norm != NormKind::RmsNorm ||
        m.positions != PositionKind::Rotary || m.bias || m.qkv_bias || !m.qk_norm || m.tied_embeddings ||
        m.norm_eps != kQwen3NormEps || m.vocab != kQwen3Vocab || m.mla.enabled() || m.rope_scaling.enabled() ||
        m.sliding_window.enabled() || m.attention_sinks || e.router != MoeRouter::SoftmaxNorm ||
        e.shared_experts > 0 || e.dense_layers > 0 || e.layer_interval > 1 || e.expert_groups > 0 ||
        e.routed_scaling > 0)
        return nullptr;
    for (const Qwen3MoeFlavor& f : qwen3MoeFlavors())
        if (f.dim == m.hidden && f.layers == m.layers && f.heads == m.heads && f.kv_heads == m.kv_heads &&
            f.head_dim == m.head_dim && f.moe_hidden == m.expertFfn() && f.experts == m.moe.experts &&
            f.top_k == m.moe.top_k && f.rope_theta == m.rope_base)
            return &f;
    return nullptr;
}

struct DeepSeekFlavor {
    MoeRecipe recipe;
    int dim, layers, vocab, heads;
    MlaSpec mla;
    double mscale;  // Attention.Config.mscale: the yarn mscale_all_dim of the softmax scale
    int dense_hidden, moe_hidden, shared_experts, experts, dense_layers, top_k;
    MoeRouter router;
    int expert_groups, group_top_k;
    double route_scale;
};

// torchtitan/models/deepseek_v3/__init__.py (b5bcd76c): _16b, _236b, _671b. The 236B flavor has no
// recipe of its own: the 671B recipe is its base.
const std::vector<DeepSeekFlavor>& deepSeekFlavors()
{
    static const std::vector<DeepSeekFlavor> flavors{
        {{"deepseek_v3", "16B", "deepseek_v3_16b", "deepseek-moe-16b-base"}, 2048, 27, 102400, 16,
         MlaSpec{0, 512, 128, 64, 128}, 0.70, 10944, 1408, 2, 64, 1, 6, MoeRouter::Softmax, 0, 0, 1.0},
        {{"deepseek_v3", "236B", "deepseek_v3_671b", "DeepSeek-V2"}, 5120, 60, 102400, 128,
         MlaSpec{1536, 512, 128, 64, 128}, 1.0, 12288, 1536, 2, 160, 1, 6, MoeRouter::Softmax, 8, 3, 16.0},
        {{"deepseek_v3", "671B", "deepseek_v3_671b", "DeepSeek-V3.1-Base"}, 7168, 61, 129280, 128,
         MlaSpec{1536, 512, 128, 64, 128}, 1.0, 18432, 2048, 1, 256, 3, 8, MoeRouter::SigmoidNorm, 8, 4, 2.5},
    };
    return flavors;
}

const DeepSeekFlavor* deepSeekFlavorOf(const ModelSpec& m)
{
    const MoeSpec& e = m.moe;
    const RopeScaling& r = m.rope_scaling;
    // Every flavor: yarn x40 over 4096 positions, theta 10000, beta 32/1 (ComplexRoPE.Config).
    if (m.family != ModelFamily::DecoderOnly || m.mlp != MlpKind::SwiGlu || m.norm != NormKind::RmsNorm ||
        m.positions != PositionKind::Rotary || m.bias || m.qkv_bias || m.qk_norm || m.tied_embeddings ||
        m.sliding_window.enabled() || m.attention_sinks || !m.mla.enabled() || m.rope_base != 10000 ||
        r.type != RopeScalingKind::Yarn || r.factor != 40 || r.original_max_position_embeddings != 4096 ||
        r.beta_fast != 32 || r.beta_slow != 1 || e.layer_interval > 1 || e.shared_experts < 1)
        return nullptr;
    for (const DeepSeekFlavor& f : deepSeekFlavors()) {
        const double scale = e.routed_scaling > 0 ? e.routed_scaling : 1.0;
        // torchtitan builds one shared FeedForward of moe_hidden x num_shared_experts.
        const bool shared = std::int64_t(e.shared_experts) * e.shared_ffn_hidden ==
                            std::int64_t(f.shared_experts) * f.moe_hidden;
        if (f.dim == m.hidden && f.layers == m.layers && f.vocab == m.vocab && f.heads == m.heads &&
            f.mla == m.mla && f.mscale == (r.mscale_all_dim > 0 ? r.mscale_all_dim : 1.0) &&
            f.dense_hidden == m.ffn_hidden && f.moe_hidden == m.expertFfn() && shared && f.experts == e.experts &&
            f.dense_layers == e.dense_layers && f.top_k == e.top_k && f.router == e.router &&
            f.expert_groups == e.expert_groups && f.group_top_k == e.group_top_k && f.route_scale == scale)
            return &f;
    }
    return nullptr;
}

struct GptOssFlavor {
    MoeRecipe recipe;
    int layers, experts;
};

// torchtitan/models/gpt_oss/__init__.py (b5bcd76c): _20b, _120b; both dim 2880, hidden 2880, 64
// heads of 64, 8 KV heads, top 4, vocabulary 201088.
const std::vector<GptOssFlavor>& gptOssFlavors()
{
    static const std::vector<GptOssFlavor> flavors{
        {{"gpt_oss", "20b", "gpt_oss_20b", "gpt-oss-20b"}, 24, 32},
        {{"gpt_oss", "120b", "gpt_oss_120b", "gpt-oss-120b"}, 36, 128},
    };
    return flavors;
}

const GptOssFlavor* gptOssFlavorOf(const ModelSpec& m)
{
    const MoeSpec& e = m.moe;
    const RopeScaling& r = m.rope_scaling;
    bool evenWindows = m.sliding_window.size == 128 && int(m.sliding_window.layers.size()) == (m.layers + 1) / 2;
    for (size_t i = 0; evenWindows && i < m.sliding_window.layers.size(); ++i)
        evenWindows = m.sliding_window.layers[i] == int(2 * i);
    if (m.family != ModelFamily::DecoderOnly || m.mlp != MlpKind::SwiGlu || m.norm != NormKind::RmsNorm ||
        m.positions != PositionKind::Rotary || !m.bias || m.qk_norm || m.tied_embeddings || !m.attention_sinks ||
        !evenWindows || m.mla.enabled() || m.hidden != 2880 || m.heads != 64 || m.kv_heads != 8 ||
        m.head_dim != 64 || m.vocab != 201088 || m.norm_eps != kTorchtitanNormEps || m.rope_base != 150000 ||
        r.type != RopeScalingKind::Yarn || r.factor != 32 || r.original_max_position_embeddings != 4096 ||
        r.beta_fast != 32 || r.beta_slow != 1 || r.truncate || e.router != MoeRouter::SoftmaxNorm ||
        e.shared_experts > 0 || e.dense_layers > 0 || e.layer_interval > 1 || e.expert_groups > 0 ||
        e.routed_scaling > 0 || e.top_k != 4 || m.expertFfn() != 2880)
        return nullptr;
    for (const GptOssFlavor& f : gptOssFlavors())
        if (f.layers == m.layers && f.experts == e.experts)
            return &f;
    return nullptr;
}

const MoeRecipe* moeRecipeOf(const ModelSpec& m)
{
    if (const Qwen3MoeFlavor* f = qwen3MoeFlavorOf(m))
        return &f->recipe;
    if (const DeepSeekFlavor* f = deepSeekFlavorOf(m))
        return &f->recipe;
    if (const GptOssFlavor* f = gptOssFlavorOf(m))
        return &f->recipe;
    return nullptr;
}

bool isFamily(const MoeRecipe* recipe, const char* family)
{
    return recipe && std::string(recipe->family) == family;
}

// What no torchtitan MoE flavor carries, and the expert layouts torchtitan cannot run.
void refuseTorchtitanMoe(Refusals& refuse, const ModelSpec& m, const Layout& l, int shard)
{
    const MoeSpec& e = m.moe;
    const MoeRecipe* recipe = moeRecipeOf(m);
    if (!recipe) {
        std::string flavors;
        for (const Qwen3MoeFlavor& f : qwen3MoeFlavors())
            flavors += std::string(flavors.empty() ? "" : ", ") + "qwen3 " + f.recipe.flavor;
        for (const DeepSeekFlavor& f : deepSeekFlavors())
            flavors += std::string(", deepseek_v3 ") + f.recipe.flavor;
        for (const GptOssFlavor& f : gptOssFlavors())
            flavors += std::string(", gpt_oss ") + f.recipe.flavor;
        refuse.add("the MoE model " + m.name,
                   "the export takes torchtitan's MoE flavors (" + flavors +
                       ": each flavor's shapes, router, shared experts, dense layers, norms and RoPE) and " +
                       m.name + " is none of them");
    }
    if (e.aux_loss_coeff > 0)
        refuse.add("an auxiliary load-balancing loss (aux_loss_coeff " + num(e.aux_loss_coeff) + ")",
                   "torchtitan's MoE has no auxiliary loss; it balances by an expert bias (models/common/moe.py "
                   "load_balance_coeff)");
    if (e.score_correction_bias && !isFamily(recipe, "deepseek_v3"))
        refuse.add("a score-correction bias without a stated update rate",
                   "torchtitan updates its expert bias at load_balance_coeff, which the model format does not give");
    if (e.capacity_factor > 0)
        refuse.add("a capacity factor of " + num(e.capacity_factor),
                   "the export writes the flavors' dropless routed experts");
    if (l.ep > 1) {
        if (l.expertTensorParallel() != 1)
            refuse.add("expert tensor parallelism (etp=" + str(l.expertTensorParallel()) + ") with ep=" + str(l.ep),
                       "with expert parallelism torchtitan shards the routed experts on the ep axis only "
                       "(moe_sharding.py): etp 1");
        const std::int64_t sparse = std::int64_t(shard) * l.cp * l.tp;
        if (sparse % l.ep != 0)
            refuse.add("expert parallelism (ep=" + str(l.ep) + ") beyond dp_shard x cp x tp = " + str(sparse),
                       "parallel_dims.py: expert_parallel_degree must divide dp_shard * cp * tp (dp_replicate is "
                       "outside the expert region)");
    } else if (l.etp > 0 && l.etp != l.tp) {
        refuse.add("expert tensor parallelism (etp=" + str(l.etp) + " with tp=" + str(l.tp) + ") without ep",
                   "without expert parallelism torchtitan splits the routed experts over the tp axis");
    }
}

} // namespace

ExportResult exportTorchtitan(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("torchtitan", r);
    refuseModuleRecomputeAndOffload(refuse, l,
                                    "torchtitan's activation checkpointing is full or selective by op or layer "
                                    "count, not by Megatron's modules",
                                    "torchtitan's config has no activation offload to the host");
    refuseMegatronOverlaps(refuse, l);
    // torchtitan's MoE token dispatchers (torchtitan @ b5bcd76c): make_token_dispatcher_config
    // (models/common/config_utils.py) builds every MoE layer's from the comm_backend the family's
    // model_registry(flavor, moe_comm_backend=...) passes on (models/qwen3, deepseek_v3, gpt_oss
    // __init__.py): "standard" (AllToAllTokenDispatcher, the default), "deepep" (DeepEPTokenDispatcher),
    // "hybridep" (HybridEPTokenDispatcher), "minimal_async_ep"; no allgather one.
    if (l.moe_dispatcher == MoeDispatcher::AllGather)
        refuseMoeDispatcher(refuse, l,
                            "torchtitan has no allgather dispatcher (its EP dispatchers: all-to-all, DeepEP, HybridEP, "
                            "MinimalAsyncEP)");
    const bool flexEp = flexDispatcher(l.moe_dispatcher);
    const std::string commBackend = l.moe_dispatcher == MoeDispatcher::DeepEp    ? "deepep"
                                    : l.moe_dispatcher == MoeDispatcher::HybridEp ? "hybridep"
                                                                                  : "standard";
    const std::string dispatcherClass =
        l.moe_dispatcher == MoeDispatcher::DeepEp ? "DeepEPTokenDispatcher" : "HybridEPTokenDispatcher";
    // update_ep_token_dispatcher_config (models/common/token_dispatcher.py @ b5bcd76c, run by
    // decoder.py's update_from_config): "<DeepEP|HybridEP>TokenDispatcher.Config requires expert
    // parallelism (expert_parallel_degree > 1)". (Its other rule, num_tokens_per_microbatch_per_dp_rank
    // divisible by cp x tp, holds for every legal layout: a MoE model under tp > 1 has sequence
    // parallelism, whose tp x cp divides the sequence, core/Layout.cpp.)
    if (flexEp && l.ep == 1)
        refuse.add("the " + commBackend + " MoE token dispatcher without expert parallelism (ep=1)",
                   "torchtitan's " + dispatcherClass + " requires expert_parallel_degree > 1 "
                   "(models/common/token_dispatcher.py update_ep_token_dispatcher_config)");
    // Both run deepseek-ai/DeepEP's kernels (the deep_ep package; HybridEP is its hybrid-ep branch),
    // built for CUDA only: tests/integration_tests/h100.py @ b5bcd76c skips the HybridEP test on ROCm
    // ("deep_ep/NVSHMEM is CUDA-only").
    if (flexEp && p.cluster.node.chip.vendor == "AMD")
        refuse.add("the " + commBackend + " MoE token dispatcher on " + p.cluster.node.chip.display_name,
                   "torchtitan's " + dispatcherClass + " runs deep_ep's kernels, which are CUDA-only (deep_ep/NVSHMEM; "
                   "tests/integration_tests/h100.py skips them on ROCm)");
    refuseAllToAllCp(refuse, l, "torchtitan's context parallelism rotates K/V around a ring (context_parallel_rotate_method "
                                "allgather or alltoall moves the K/V blocks, not the heads)");
    const ModelSpec& m = p.model;
    const Figures f = figures(p, l);
    const bool moe = m.moe.enabled();
    const Flavor* flavor = moe ? nullptr : flavorOf(m);
    const MoeRecipe* moeRecipe = moe ? moeRecipeOf(m) : nullptr;
    const int shardDegree = l.zero_stage >= 2 ? f.shard_group : 1;

    if (!isCudaOrRocmGpu(p.cluster.node.chip))
        refuse.device(p.cluster.node.chip.display_name, "torchtitan trains on CUDA and ROCm GPUs");
    // The model fields a llama3 flavor cannot carry, each by name (torchtitan @ b5bcd76c:
    // models/llama3/__init__.py builds RMSNorm blocks with make_gqa_config(...) attention and no
    // qk_norm argument, whose default is None (models/common/config_utils.py), wqkv as
    // Linear.Config with bias False (models/common/linear.py), full causal attention, ComplexRoPE
    // with scaling "llama", a dense feed-forward). A MoE model is matched against whole flavors
    // (its attention, norms and RoPE included) in refuseTorchtitanMoe.
    if (!moe) {
        if (m.qk_norm)
            refuse.add("QK-norm", "torchtitan has no QK-norm in its llama3 model");
        if (m.qkv_bias && !m.bias)
            refuse.add("biases on q, k and v", "torchtitan's llama3 attention projections have no bias");
        if (m.sliding_window.enabled())
            refuse.add("a sliding window of " + str(m.sliding_window.size),
                       "torchtitan's llama3 model attends over the whole causal context");
        if (m.attention_sinks)
            refuse.add("attention sinks", "torchtitan's llama3 attention has no sink logits");
        if (m.mla.enabled())
            refuse.add("multi-head latent attention",
                       "the export takes torchtitan's llama3 model (grouped-query attention) for a dense model");
    } else {
        refuseTorchtitanMoe(refuse, m, l, shardDegree);
        // Multi-token prediction (torchtitan @ b5bcd76c models/deepseek_v3/MTP.md, mtp.py): DeepSeek-V3's
        // model_registry(..., num_mtp_layers=N) builds the MTP layers from the last decoder layer and
        // MTPLoss(mtp_scale) weighs their mean loss; MTPDecoder refuses pipeline and context
        // parallelism ("MTP does not support pipeline parallelism yet").
        if (m.mtp.enabled() && (!moeRecipe || std::string(moeRecipe->family) != "deepseek_v3"))
            refuse.add("multi-token prediction", "torchtitan builds MTP layers in its deepseek_v3 model only");
        if (m.mtp.enabled() && l.pp > 1)
            refuse.add("multi-token prediction with pipeline parallelism (pp=" + str(l.pp) + ")",
                       "torchtitan's MTP does not support pipeline parallelism yet (models/deepseek_v3/mtp.py)");
        if (m.mtp.enabled() && l.cp > 1)
            refuse.add("multi-token prediction with context parallelism (cp=" + str(l.cp) + ")",
                       "torchtitan's MTP does not support context parallelism yet (models/deepseek_v3/mtp.py)");
        if (quantizedRecipe(p.training.precision))
            refuse.add(std::string(toString(p.training.precision)) + " precision with a MoE model",
                       "the export converts the llama3 recipe's linears only");
    }
    // models/common/decoder.py: tensor_parallel_degree must divide n_heads and n_kv_heads (an MLA
    // model's KV heads are its heads).
    const int kvHeads = m.mla.enabled() ? m.heads : m.kv_heads;
    if (l.tp > 1 && kvHeads % l.tp != 0)
        refuse.add("tp=" + str(l.tp) + " over " + str(kvHeads) + " KV heads",
                   "models/common/decoder.py: tensor_parallel_degree must divide n_kv_heads");
    // torchtitan's float8 training is torchao's Float8LinearConverter, recipe_name "rowwise" or
    // "rowwise_with_gw_hp" (torchtitan/components/quantization/float8.py @ b5bcd76c): no per-tensor,
    // block or FP4 recipe of Transformer Engine's.
    if (quantizedRecipe(p.training.precision) && p.training.precision != Precision::FP8Rowwise && !moe)
        refuse.add(std::string(toString(p.training.precision)) + " precision",
                   "torchtitan's Float8LinearConverter runs torchao's rowwise recipe (fp8-rowwise) only");
    const RopeScaling& rope = m.rope_scaling;
    if (!moe && rope.enabled() && rope.type != RopeScalingKind::Llama3)
        refuse.add(std::string("RoPE scaling ") + toString(rope.type),
                   "the export writes torchtitan's llama (Llama 3.1) scaling or none");
    if (!moe && !flavor)
        refuse.add("the model " + m.name,
                   "torchtitan builds models from its registry; the export takes the llama3 flavors (" +
                       flavorNames(llama3Flavors()) + ": RMSNorm, SwiGLU, RoPE theta 500000, vocabulary 128256) and " +
                       m.name + " is none of them");
    if (l.zero_stage == 1)
        refuse.add("ZeRO-1 (optimizer states only)", "FSDP2's fully_shard, torchtitan's sharding, shards gradients too");
    if (l.cp > 1 && l.zero_stage == 0)
        refuse.add("context parallelism (cp=" + str(l.cp) + ") without ZeRO",
                   "parallel_dims.py shards parameters with fully_shard over dp_shard x cp, so cp > 1 always shards "
                   "model states");
    if (l.offload == Offload::Optimizer)
        refuse.add("optimizer-only offload",
                   "training.enable_cpu_offload offloads parameters, gradients and optimizer states together");
    if (l.recompute == Recompute::Selective)
        refuse.add("selective recomputation (the core attention only)",
                   "torchtitan's SelectiveAC is a per-op policy (saves chosen matmuls, recomputes every second one), "
                   "not the attention-core recomputation the plan priced");
    if (p.training.precision == Precision::FP16Mixed)
        refuse.add("fp16 precision", "mixed_precision_param takes bfloat16 or float32");
    if (gradientType(p.training) == DataType::BF16)
        refuse.add("bf16 gradients (main_grads bf16)",
                   "mixed_precision_reduce takes \"float32\" only (torchtitan/config/configs.py @ b5bcd76)");
    if (p.training.precision == Precision::BF16Autocast)
        refuse.add("bf16-autocast precision",
                   "NeuronX Distributed's precision keeps bf16 weights with fp32 gradient accumulation; "
                   "mixed_precision_param bfloat16 keeps FSDP2's sharded parameters in fp32 (a different set of "
                   "states)");
    if (p.training.optimizer != Optimizer::AdamW)
        refuse.add(std::string("the optimizer ") + toString(p.training.optimizer),
                   "the export keeps the llama3 recipe's default_adamw");
    const std::int64_t microTokens = std::int64_t(l.micro_batch) * p.training.seq_len;
    const std::int64_t divisor = (l.sequence_parallel ? l.tp : 1) * (l.cp > 1 ? 2 * l.cp : 1);
    if (microTokens % divisor != 0)
        refuse.add("a micro-batch of " + str(microTokens) + " tokens",
                   "trainer.py needs the tokens of a micro-batch to divide by " + str(divisor) +
                       " (tp with sequence parallelism x 2cp)");
    // torchtitan/distributed/pipeline_parallel.py: ceil((layers + first_less + last_less) /
    // layers_per_stage) stages, the first and last lightened by their "less" layers (input and
    // output weights) and only those two of all the virtual stages. An uneven split with ends
    // lighter than the middle is that: layers_per_stage = a middle stage's layers.
    int layersPerStage = m.layers / (l.pp * l.virtual_stages), firstLess = 0, lastLess = 0;
    if (l.splitAccountsForEnds()) {
        // Megatron's account_for_* split is that one: every chunk of (layers + ends) / (pp x v)
        // layers, the first and the last virtual stage one lighter for the embedding / the loss.
        layersPerStage = l.fullChunkLayers(m.layers, 0);
        firstLess = l.account_for_embedding_in_pipeline_split ? 1 : 0;
        lastLess = l.account_for_loss_in_pipeline_split ? 1 : 0;
    } else if (l.unevenPipeline()) {
        const int first = l.stageLayers(m.layers, 0), last = l.stageLayers(m.layers, l.pp - 1);
        const int middle = l.pp > 2 ? l.stageLayers(m.layers, 1) : std::max(first, last);
        if (l.virtual_stages > 1)
            refuse.add("an uneven pipeline split with v=" + str(l.virtual_stages),
                       "torchtitan lightens only the first and the last virtual stage (pipeline_parallel.py), not "
                       "every chunk of the end ranks");
        else if (first > middle || last > middle)
            refuse.add("end stages heavier than the middle ones (" + str(first) + " + ... + " + str(last) + ")",
                       "pipeline_parallel_first/last_stage_less_layers only lighten the end stages");
        // An explicit layout may give its middle stages different counts: torchtitan cannot.
        for (int stage = 2; l.layerLayout() && stage < l.pp - 1; ++stage)
            if (l.stageLayers(m.layers, stage) != middle) {
                refuse.add("pipeline_layout=" + l.layerLayout()->text() + " (middle stages of " + str(middle) +
                               " and " + str(l.stageLayers(m.layers, stage)) + " layers)",
                           "torchtitan gives every stage but the first and the last pipeline_parallel_layers_per_stage "
                           "layers (pipeline_parallel.py)");
                break;
            }
        layersPerStage = middle;
        firstLess = middle - first;
        lastLess = middle - last;
    }
    if (refuse.any())
        return r;

    const bool fsdp = l.zero_stage >= 2;
    const int shard = shardDegree;
    const int replicate = l.dp / shard;
    const bool fp8 = p.training.precision == Precision::FP8Rowwise;
    const char* schedule = !f.pipelined                                   ? "1F1B"
                           : l.schedule == PipelineSchedule::GPipe        ? "GPipe"
                           : l.schedule == PipelineSchedule::Interleaved ? "Interleaved1F1B"
                                                                          : "1F1B";

    r.notes.push_back("torchtitan derives nothing from the world size: dp_replicate " + str(replicate) +
                      " x dp_shard " + str(shard) + " x cp " + str(l.cp) + " x tp " + str(l.tp) + " x pp " +
                      str(l.pp) + " = " + str(f.devices) + " ranks, as torchrun starts them.");
    if (fsdp)
        r.notes.push_back(std::string("fully_shard (") + (l.zero_stage == 2 ? "ZeRO-2: no resharding after forward" : "ZeRO-3") +
                          ") shards model states over dp_shard x cp = " + str(shard * l.cp) +
                          " ranks and replicates them across dp_replicate " + str(replicate) + ".");
    if (f.pipelined)
        r.notes.push_back(str(f.micro_batches) + " pipeline micro-batches of " + str(l.micro_batch) +
                          " sequence(s) per data-parallel rank and step, " + str(layersPerStage) +
                          " layers per stage" +
                          (l.unevenPipeline() ? " (first " + str(layersPerStage - firstLess) + ", last " +
                                                    str(layersPerStage - lastLess) + ")"
                                              : std::string()) +
                          "; no gradient accumulation.");
    else
        r.notes.push_back("Gradient accumulation: " + str(f.micro_batches) + " micro-batches of " +
                          str(l.micro_batch) + " sequence(s) per data-parallel rank and step (" +
                          str(p.training.global_batch) + " sequences / (" + str(l.dp) + " ranks x " +
                          str(l.micro_batch) + ")).");
    // The flavor's RoPE as the model's: torchtitan's llama scaling values (rope.py's defaults,
    // which the flavors keep) and those of a llama3-scaled model, where it says them.
    const double factor = rope.factor, low = rope.low_freq_factor > 0 ? rope.low_freq_factor : 1.0,
                 high = rope.high_freq_factor > 0 ? rope.high_freq_factor : 4.0;
    const int original = rope.original_max_position_embeddings > 0 ? rope.original_max_position_embeddings : 8192;
    const bool llama31 = rope.type == RopeScalingKind::Llama3 && factor == 8 && low == 1 && high == 4 && original == 8192;
    std::vector<std::string> ropeLines, layerLines, modelLines;
    if (moe) {
        const std::string family = moeRecipe->family;
        const bool deepseek = family == "deepseek_v3";
        // The flavor's expert-bias balancing where the model has a correction bias (DeepSeek-V3:
        // load_balance_coeff's 1e-3 default is the update rate, as Megatron's); otherwise off, as
        // the model has neither that bias nor a load-balancing loss (refused above). DeepSeek's
        // first layers are dense (layer.moe is None there).
        const std::string balance =
            m.moe.score_correction_bias ? std::string() : std::string("layer.moe.load_balance_coeff = None");
        if (!balance.empty())
            layerLines.push_back(deepseek ? "if layer.moe is not None:\n            " + balance : balance);
        // RMSNorm.Config's eps: the qwen3 flavors set the model's 1e-6, deepseek_v3 leaves the 1e-5
        // default, which the model's own eps replaces on every norm.
        if (deepseek && m.norm_eps != kTorchtitanNormEps) {
            const std::string eps = num(m.norm_eps);
            layerLines.push_back("layer.attention_norm.eps = " + eps);
            layerLines.push_back("layer.ffn_norm.eps = " + eps);
            if (m.mla.q_lora_rank > 0)
                layerLines.push_back("layer.attention.q_norm.eps = " + eps);
            layerLines.push_back("layer.attention.kv_norm.eps = " + eps);
            modelLines.push_back("config.model_spec.model.norm.eps = " + eps);
        }
        const std::string balanceNote =
            m.moe.score_correction_bias
                ? "its expert-bias balancing is kept at load_balance_coeff's default 1e-3 (the bias update rate; " +
                      m.name + "'s correction bias)"
                : "its expert-bias balancing (load_balance_coeff) is switched off on every layer, as " + m.name +
                      " has neither a load-balancing loss nor a correction bias";
        r.notes.push_back("The " + family + " " + moeRecipe->flavor + " flavor has " + m.name + "'s shapes; " +
                          balanceNote +
                          (deepseek && m.norm_eps != kTorchtitanNormEps
                               ? "; the recipe sets the model's norm eps " + num(m.norm_eps) +
                                     " on every RMSNorm (the flavor keeps the 1e-5 default)"
                               : std::string()) +
                          ". torchtitan's model has no dropout.");
        r.notes.push_back(expertGridNote(m, l) + " torchtitan: efsdp = dp_shard x cp x tp / ep = " +
                          str(std::int64_t(shard) * l.cp * l.tp / l.ep) + ".");
        // update_ep_token_dispatcher_config (models/common/token_dispatcher.py @ b5bcd76c) sets the
        // buffers' num_max_tokens_per_rank to num_tokens_per_microbatch_per_dp_rank / (cp x tp).
        const std::string perRank = str(microTokens / (std::int64_t(l.cp) * l.tp));
        if (l.moe_dispatcher == MoeDispatcher::DeepEp)
            r.notes.push_back("MoE tokens move with DeepEP (moe_comm_backend \"deepep\": DeepEPTokenDispatcher, DeepEP "
                              "v2's ElasticBuffer; deep_ep to be installed), its buffer sized by torchtitan for " +
                              perRank + " tokens per rank (a micro-batch's tokens / (cp x tp)).");
        else if (l.moe_dispatcher == MoeDispatcher::HybridEp)
            r.notes.push_back("MoE tokens move with HybridEP (moe_comm_backend \"hybridep\": HybridEPTokenDispatcher; "
                              "deep_ep's hybrid-ep branch to be installed) in its blocking mode "
                              "(non_blocking_capacity_factor None, the default: every routed token kept, counted on "
                              "the host after each dispatch), its buffer sized by torchtitan for " +
                              perRank + " tokens per rank (a micro-batch's tokens / (cp x tp)). The non-blocking "
                              "mode (non_blocking_capacity_factor, a model_registry argument of deepseek_v3 only) "
                              "would keep CUDA graphs but sizes its output for the worst-case routing, memory the "
                              "plan does not price.");
        if (l.ep > 1)
            r.notes.push_back(std::string("CUDA graphs are off (training.disable_cuda_graphs): with expert parallelism "
                                          "trainer.py refuses them over a token dispatcher that synchronizes with the "
                                          "host, as the ") +
                              (l.moe_dispatcher == MoeDispatcher::DeepEp     ? "DeepEP"
                               : l.moe_dispatcher == MoeDispatcher::HybridEp ? "blocking HybridEP"
                                                                             : "all-to-all") +
                              " one does.");
    } else if (!rope.enabled()) {
        ropeLines.push_back("layer.attention.rope.scaling = \"none\"");
        r.notes.push_back(std::string("The llama3 ") + flavor->name + " flavor has " + m.name +
                          "'s shapes; it applies Llama 3.1's RoPE scaling, which " + m.name +
                          " (Llama 3) has not: the recipe sets scaling \"none\" on every layer. torchtitan's Llama "
                          "has no dropout.");
    } else if (llama31) {
        r.notes.push_back(std::string("The llama3 ") + flavor->name + " flavor has " + m.name +
                          "'s shapes and its RoPE scaling (Llama 3.1's: llama, factor 8); torchtitan's Llama has no "
                          "dropout.");
    } else {
        ropeLines.push_back("layer.attention.rope.scaling_factor = " + num(factor));
        ropeLines.push_back("layer.attention.rope.low_freq_factor = " + num(low));
        ropeLines.push_back("layer.attention.rope.high_freq_factor = " + num(high));
        ropeLines.push_back("layer.attention.rope.original_max_position_embeddings = " + str(original));
        r.notes.push_back(std::string("The llama3 ") + flavor->name + " flavor has " + m.name +
                          "'s shapes; the recipe sets " + m.name + "'s llama3 RoPE scaling (factor " + num(factor) +
                          ") on every layer. torchtitan's Llama has no dropout.");
    }
    const std::string family = moe ? moeRecipe->family : "llama3", base = moe ? moeRecipe->base : "llama3_8b";
    const std::string flavorName = moe ? moeRecipe->flavor : flavor->name;
    // gpt_oss builds VarlenAttention by default, which context parallelism refuses
    // (models/common/decoder.py: "Use FlexAttention or disable CP").
    const std::string backend = family == "gpt_oss" && l.cp > 1 ? ", attn_backend=\"flex\"" : "";
    const std::string mtpArgument = m.mtp.enabled() ? "        num_mtp_layers=" + str(m.mtp.layers) + ",\n" : "";
    // model_registry(..., moe_comm_backend=...) for DeepEP and HybridEP; HybridEP in its blocking mode,
    // non_blocking_capacity_factor None (HybridEPTokenDispatcher.Config's default and
    // make_token_dispatcher_config's): the permuted tokens counted exactly on the host, none dropped.
    // Nothing else is theirs to set: num_max_tokens_per_rank and hidden_dim are filled in by
    // update_ep_token_dispatcher_config, HybridEP's SMs are distributed/deepep/hybridep.py's fixed 16 for
    // dispatch and 16 for combine (the HYBRIDEP_NUM_SMS_* variables config_utils.py's docstring names
    // are read nowhere), DeepEP's come from deep_ep's own heuristic (deepep.py _resolve_dispatch_num_sms).
    const std::string dispatcherArgument = flexEp ? ", moe_comm_backend=\"" + commBackend + "\"" : "";
    if (!backend.empty())
        r.notes.push_back("Context parallelism needs FlexAttention: the gpt_oss flavor is built with attn_backend "
                          "\"flex\" (its default, varlen, is refused under cp).");
    r.notes.push_back("Yours to set: hf_assets_path (tokenizer), the dataset, learning rate and steps "
                      "(the " + base + " recipe's values are kept).");

    std::string t;
    t += commentLines({"torchtitan recipe exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Names: pytorch/torchtitan torchtitan/config/configs.py, torchtitan/trainer.py, "
                       "models/" + family + " (commit b5bcd76c)",
                       ""});
    t += commentLines(r.notes);
    t += commentLines({"", "Save as shardscope_recipe.py where Python finds it and launch on every node:",
                       "  " + torchrunCommand(f, false) + " \\",
                       "      -m torchtitan.train --module shardscope_recipe --config shardscope_config"});
    if (fp8)
        t += "from torchtitan.components.quantization import Float8LinearConverter\n";
    t += "from torchtitan.config import CompileConfig, ParallelismConfig\n";
    if (l.recompute == Recompute::Full)
        t += "from torchtitan.distributed.activation_checkpoint import FullAC\n";
    if (m.mtp.enabled())
        t += "from torchtitan.models.common.config_utils import decoder_vocab_size\n";
    t += "from torchtitan.models." + family + " import model_registry\n";
    if (m.mtp.enabled())
        t += "from torchtitan.models.deepseek_v3.mtp import MTPLoss\n";
    t += "from torchtitan.models." + family + ".config_registry import " + base + "\n";
    t += "from torchtitan.trainer import Trainer\n\n\n";
    t += "def shardscope_config() -> Trainer.Config:\n";
    t += "    config = " + base + "()\n";
    if (fp8) {
        t += "    config.compile = CompileConfig(enable=True, components=[\"model\", \"loss\"])\n";
        t += "    config.model_spec = model_registry(\n        \"" + flavorName + "\",\n" + mtpArgument +
             (flexEp ? "        moe_comm_backend=\"" + commBackend + "\",\n" : std::string()) +
             "        converters=[Float8LinearConverter.Config(recipe_name=\"rowwise\", filter_fqns=[\"lm_head\"], "
             "model_compile_enabled=True)],\n    )\n";
    } else {
        t += "    config.compile = CompileConfig()\n";
        t += "    config.model_spec = model_registry(\"" + flavorName + "\"" + backend +
             (m.mtp.enabled() ? ", num_mtp_layers=" + str(m.mtp.layers) : std::string()) + dispatcherArgument + ")\n";
    }
    if (m.mtp.enabled())
        t += "    config.loss = MTPLoss.Config(\n        global_vocab_size=decoder_vocab_size(config.model_spec),\n"
             "        mtp_scale=" + num(m.mtp.loss_scale) + ",\n    )\n";
    for (const std::string& line : ropeLines)
        layerLines.push_back(line);
    if (!layerLines.empty()) {
        t += "    for layer in config.model_spec.model.layers:\n";
        for (const std::string& line : layerLines)
            t += "        " + line + "\n";
    }
    for (const std::string& line : modelLines)
        t += "    " + line + "\n";
    t += "    config.hf_assets_path = \"./assets/hf/" +
         (moe ? std::string(moeRecipe->assets) : "Llama-3.1-" + flavorName) + "\"\n";
    t += "    config.parallelism = ParallelismConfig(\n";
    t += "        data_parallel_replicate_degree=" + str(replicate) + ",\n";
    t += "        data_parallel_shard_degree=" + str(shard) + ",\n";
    if (fsdp)
        t += std::string("        fsdp_reshard_after_forward=\"") + (l.zero_stage == 2 ? "never" : "default") + "\",\n";
    t += "        tensor_parallel_degree=" + str(l.tp) + ",\n";
    t += "        enable_sequence_parallel=" + pyBool(l.sequence_parallel) + ",\n";
    t += "        pipeline_parallel_degree=" + str(l.pp) + ",\n";
    if (f.pipelined) {
        t += std::string("        pipeline_parallel_schedule=\"") + schedule + "\",\n";
        t += "        pipeline_parallel_layers_per_stage=" + str(layersPerStage) + ",\n";
        t += "        pipeline_parallel_first_stage_less_layers=" + str(firstLess) + ",\n";
        t += "        pipeline_parallel_last_stage_less_layers=" + str(lastLess) + ",\n";
        t += "        num_pp_microbatches=" + str(f.micro_batches) + ",\n";
    }
    t += "        context_parallel_degree=" + str(l.cp) + ",\n";
    if (moe)
        t += "        expert_parallel_degree=" + str(l.ep) + ",\n";
    t += "    )\n";
    t += "    config.training.max_context_length = " + str(p.training.seq_len) + "\n";
    t += "    config.training.num_tokens_per_microbatch_per_dp_rank = " + str(microTokens) + "\n";
    t += "    config.training.num_tokens_per_train_step = " + str(p.training.tokensPerStep()) + "\n";
    t += std::string("    config.training.mixed_precision_param = \"") +
         (p.training.precision == Precision::FP32 ? "float32" : "bfloat16") + "\"\n";
    t += "    config.training.mixed_precision_reduce = \"float32\"\n";
    // The recipes this one starts from leave CUDA graphs on (qwen3_30b_a3b, gpt_oss_*) or off
    // (deepseek_v3_*); they are switched off wherever trainer.py refuses them: under pipeline
    // parallelism and with expert parallelism over the all-to-all, DeepEP or blocking HybridEP
    // dispatcher (each synchronizes with the host: AllToAllTokenDispatcher's token-count exchange,
    // DeepEP's compact training path, HybridEP's cudaStreamSynchronize after dispatch;
    // models/common/token_dispatcher.py, distributed/deepep/hybridep.py).
    const bool hostSyncedEp = moe && l.ep > 1;
    if (f.pipelined || hostSyncedEp)
        t += std::string("    config.training.disable_cuda_graphs = True  # CUDA graphs refuse ") +
             (f.pipelined && hostSyncedEp ? "pipeline parallelism and host-synchronizing EP dispatchers"
              : f.pipelined               ? "pipeline parallelism"
                                          : "host-synchronizing EP dispatchers") +
             "\n";
    t += std::string("    config.activation_checkpoint = ") +
         (l.recompute == Recompute::Full ? "FullAC.Config()" : "None") + "\n";
    t += "    return config\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
