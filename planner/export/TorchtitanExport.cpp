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
//     refuse pipeline parallelism ("CUDA graphs do not support pipeline parallelism yet");
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


} // namespace

ExportResult exportTorchtitan(const Problem& p, const Layout& l)
{
    ExportResult r;
    Refusals refuse("torchtitan", r);
    refuseMegatronOverlaps(refuse, l);
    const ModelSpec& m = p.model;
    const Figures f = figures(p, l);
    const Flavor* flavor = flavorOf(m);

    if (!isCudaOrRocmGpu(p.cluster.node.chip))
        refuse.device(p.cluster.node.chip.display_name, "torchtitan trains on CUDA and ROCm GPUs");
    // The model fields a llama3 flavor cannot carry, each by name (torchtitan @ b5bcd76c:
    // models/llama3/__init__.py builds RMSNorm blocks with make_gqa_config(...) attention and no
    // qk_norm argument, whose default is None (models/common/config_utils.py), wqkv as
    // Linear.Config with bias False (models/common/linear.py), full causal attention, ComplexRoPE
    // with scaling "llama", a dense feed-forward).
    if (m.qk_norm)
        refuse.add("QK-norm", "torchtitan has no QK-norm in its llama3 model");
    if (m.qkv_bias && !m.bias)
        refuse.add("biases on q, k and v", "torchtitan's llama3 attention projections have no bias");
    if (m.sliding_window.enabled())
        refuse.add("a sliding window of " + str(m.sliding_window.size),
                   "torchtitan's llama3 model attends over the whole causal context");
    if (m.attention_sinks)
        refuse.add("attention sinks", "torchtitan's llama3 attention has no sink logits");
    if (m.moe.enabled())
        refuse.add("mixture of experts (" + str(m.moe.experts) + " experts, top " + str(m.moe.top_k) + ")",
                   "the export takes torchtitan's dense llama3 model");
    refuseExpertParallel(refuse, l, "the export takes torchtitan's dense llama3 model (no expert_parallel_degree)");
    if (m.mla.enabled())
        refuse.add("multi-head latent attention", "the export takes torchtitan's llama3 model (grouped-query attention)");
    const RopeScaling& rope = m.rope_scaling;
    if (rope.enabled() && rope.type != RopeScalingKind::Llama3)
        refuse.add(std::string("RoPE scaling ") + toString(rope.type),
                   "the export writes torchtitan's llama (Llama 3.1) scaling or none");
    if (!flavor) {
        std::string names;
        for (const Flavor& fl : llama3Flavors())
            names += (names.empty() ? "" : ", ") + std::string(fl.name);
        refuse.add("the model " + m.name,
                   "torchtitan builds models from its registry; the export takes the llama3 flavors (" + names +
                       ": RMSNorm, SwiGLU, RoPE theta 500000, vocabulary 128256) and " + m.name + " is none of them");
    }
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
    if (p.training.optimizer != Optimizer::AdamW)
        refuse.add(std::string("the optimizer ") + toString(p.training.optimizer),
                   "the export keeps the llama3 recipe's default_adamw");
    const std::int64_t microTokens = std::int64_t(l.micro_batch) * p.training.seq_len;
    const std::int64_t divisor = (l.sequence_parallel ? l.tp : 1) * (l.cp > 1 ? 2 * l.cp : 1);
    if (microTokens % divisor != 0)
        refuse.add("a micro-batch of " + str(microTokens) + " tokens",
                   "trainer.py needs the tokens of a micro-batch to divide by " + str(divisor) +
                       " (tp with sequence parallelism x 2cp)");
    if (refuse.any())
        return r;

    const bool fsdp = l.zero_stage >= 2;
    const int shard = fsdp ? f.shard_group : 1;
    const int replicate = l.dp / shard;
    const bool fp8 = p.training.precision == Precision::FP8Mixed;
    const char* schedule = !f.pipelined                                   ? "1F1B"
                           : l.schedule == PipelineSchedule::GPipe        ? "GPipe"
                           : l.schedule == PipelineSchedule::Interleaved ? "Interleaved1F1B"
                                                                          : "1F1B";
    const int layersPerStage = m.layers / (l.pp * l.virtual_stages);

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
                          " layers per stage; no gradient accumulation.");
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
    std::vector<std::string> ropeLines;
    if (!rope.enabled()) {
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
    r.notes.push_back("Yours to set: hf_assets_path (tokenizer), the dataset, learning rate and steps "
                      "(the llama3_8b recipe's values are kept).");

    std::string t;
    t += commentLines({"torchtitan recipe exported by ShardScope", problemLine(p), "layout " + toString(l),
                       "Names: pytorch/torchtitan torchtitan/config/configs.py, torchtitan/trainer.py, "
                       "models/llama3 (commit b5bcd76c)",
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
    t += "from torchtitan.models.llama3 import model_registry\n";
    t += "from torchtitan.models.llama3.config_registry import llama3_8b\n";
    t += "from torchtitan.trainer import Trainer\n\n\n";
    t += "def shardscope_config() -> Trainer.Config:\n";
    t += "    config = llama3_8b()\n";
    if (fp8) {
        t += "    config.compile = CompileConfig(enable=True, components=[\"model\", \"loss\"])\n";
        t += "    config.model_spec = model_registry(\n        \"" + std::string(flavor->name) +
             "\",\n        converters=[Float8LinearConverter.Config(filter_fqns=[\"lm_head\"], "
             "model_compile_enabled=True)],\n    )\n";
    } else {
        t += "    config.compile = CompileConfig()\n";
        t += "    config.model_spec = model_registry(\"" + std::string(flavor->name) + "\")\n";
    }
    if (!ropeLines.empty()) {
        t += "    for layer in config.model_spec.model.layers:\n";
        for (const std::string& line : ropeLines)
            t += "        " + line + "\n";
    }
    t += "    config.hf_assets_path = \"./assets/hf/Llama-3.1-" + std::string(flavor->name) + "\"\n";
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
        t += "        pipeline_parallel_first_stage_less_layers=0,\n";
        t += "        pipeline_parallel_last_stage_less_layers=0,\n";
        t += "        num_pp_microbatches=" + str(f.micro_batches) + ",\n";
    }
    t += "        context_parallel_degree=" + str(l.cp) + ",\n";
    t += "    )\n";
    t += "    config.training.max_context_length = " + str(p.training.seq_len) + "\n";
    t += "    config.training.num_tokens_per_microbatch_per_dp_rank = " + str(microTokens) + "\n";
    t += "    config.training.num_tokens_per_train_step = " + str(p.training.tokensPerStep()) + "\n";
    t += std::string("    config.training.mixed_precision_param = \"") +
         (p.training.precision == Precision::FP32 ? "float32" : "bfloat16") + "\"\n";
    t += "    config.training.mixed_precision_reduce = \"float32\"\n";
    if (f.pipelined)
        t += "    config.training.disable_cuda_graphs = True  # CUDA graphs refuse pipeline parallelism\n";
    t += std::string("    config.activation_checkpoint = ") +
         (l.recompute == Recompute::Full ? "FullAC.Config()" : "None") + "\n";
    t += "    return config\n";
    r.text = t;
    return r;
}

} // namespace shardscope::exportdetail
