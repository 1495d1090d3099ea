#include "Validation.h"
#include "EmulatedHardware.h"
#include "ValidationCaseJson.h"
#include "SpecJson.h"

#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

namespace shardscope {

namespace {

double relError(double predicted, double measured)
{
    if (measured == 0)
        return predicted == 0 ? 0.0 : INFINITY;
    return predicted / measured - 1;
}

// The device with the largest value of `value(device)`, and that value.
template <class F>
std::pair<int, double> busiest(const engine::Measurement& m, F value)
{
    int worst = -1;
    double best = -1;
    for (const engine::DeviceMeasurement& d : m.devices) {
        const double v = value(d);
        if (v > best) {
            best = v;
            worst = d.id;
        }
    }
    return {worst, std::max(0.0, best)};
}

} // namespace

double medianOf(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const std::vector<std::string>& validationMetrics()
{
    static const std::vector<std::string> names{"weights_bytes", "gradients_bytes", "optimizer_bytes",
                                                "activations_bytes", "flops", "comm_bytes",
                                                "device_step_time_s", "wall_step_time_s",
                                                "all_reduce_bytes", "reduce_scatter_bytes", "all_gather_bytes",
                                                "send_recv_bytes", "matmul_flops", "all_to_all_bytes"};
    return names;
}

std::string explainDifference(const ValidationResult& r, const std::string& metric)
{
    const MetricComparison* m = r.metric(metric);
    if (!m || m->predicted == m->measured)
        return {};
    const engine::TrainRequest& q = r.c.request;
    if (!m->compared)
        return q.layout.devices() > r.c.host.cores && r.c.host.cores > 0
                   ? "not a prediction: " + std::to_string(q.layout.devices()) + " device threads share " +
                         std::to_string(r.c.host.cores) + " cores, so the wall clock measures the oversubscribed host"
                   : "not a prediction: this host's profile is unknown (measure it: train --remeasure-host)";
    const bool time = metric == "device_step_time_s" || metric == "wall_step_time_s";
    if (time && r.cost_model == "default")
        return "uncalibrated terms: the default cost model was fitted on published GPU and Trainium runs (matmul "
               "efficiency, element-wise traffic factor 2.7); fit this machine's with `shardscope-cli calibrate "
               "--engine --save NAME` and price with --cost-model NAME";
    // A measured routing load and the planner's stated factor, in a sentence.
    auto atLoad = [&](const char* format, double load) {
        char text[240];
        std::snprintf(text, sizeof text, format, load, r.problem.training.moe_imbalance);
        return std::string(text);
    };
    if (metric == "device_step_time_s" && r.moe_step_load > 1.0 + 1e-9)
        return atLoad("routing-dependent: each MoE layer waited for its ep group's busiest rank, %.2fx the mean "
                      "copies over the run (the planner priced %.2fx); device_step_time_s_at_measured_load prices it",
                      r.moe_step_load);
    if (metric == "activations_bytes_at_measured_load" &&
        (q.layout.recomputedModules() & (kRecomputeMoeAct | kRecomputeMoe)) != 0)
        return "routing-dependent: what moe_act or moe rebuild at the peak is one MoE layer's, the one whose backward "
               "runs first, at its own load; the measured load is the mean over the step's MoE layers";
    if (metric == "activations_bytes" && r.moe_measured_load > 0)
        return atLoad("routing-dependent: the busiest device computed %.2fx the balanced token copies (the planner "
                      "priced %.2fx); activations_bytes_at_measured_load prices the measured load",
                      r.moe_measured_load);
    if (metric == "activations_bytes" && r.problem.model.moe.enabled() &&
        (r.c.request.layout.pp > 1 || r.c.request.layout.ep_comm_overlap) &&
        (r.c.request.layout.ep > 1 || r.c.request.layout.expertTensorParallel() > 1))
        return "routing-dependent: the saved sets of the micro-batches in flight grow with the copies each was "
               "routed (the planner prices the stated factor, balanced by default)";
    if ((metric == "all_gather_bytes" || metric == "reduce_scatter_bytes" || metric == "comm_bytes") &&
        r.problem.model.moe.enabled() && r.c.request.layout.expertTensorParallel() > 1)
        return "routing-dependent: expert tensor parallelism gathers each member's received token copies over etp "
               "and reduce-scatters their outputs back (the planner prices the balanced mean)";
    if (metric == "wall_step_time_s" && std::fabs(m->rel_error) < 0.10)
        return {};  // within the host's run-to-run variation
    if (metric == "wall_step_time_s" && q.precision == engine::PrecisionMode::BF16Mixed)
        return "the host emulates bf16 by rounding every stored tensor: passes the wall-clock model does not price";
    if (metric == "wall_step_time_s" && q.layout.sequence_parallel)
        return "sequence parallelism's backward re-gathers: the planner prices them as hidden behind compute "
               "(Megatron-LM overlaps them), the engine runs them synchronously (more barriers than priced)";
    if (metric == "wall_step_time_s")
        return "no known term: part of it is the shared host's run-to-run variation (10-30% per case on 2 cores; "
               "calibrate --engine reports the fit on held-out cases of one run)";
    return {};
}

const std::vector<std::string>& validationTableMetrics()
{
    static const std::vector<std::string> names(validationMetrics().begin(), validationMetrics().begin() + 8);
    return names;
}

bool wallClockComparable(const ValidationCase& c)
{
    return c.host.known() && c.request.layout.devices() <= c.host.cores;
}

Problem ValidationResult::problemAtStepLoad() const
{
    Problem p = problem;
    if (moe_step_load > 0)
        p.training.moe_imbalance = std::clamp(moe_step_load, 1.0, 64.0);
    return p;
}

const MetricComparison* ValidationResult::metric(const std::string& name) const
{
    for (const MetricComparison& m : metrics)
        if (m.metric == name)
            return &m;
    return nullptr;
}

ValidationResult runValidation(const ValidationCase& c, const ValidationProfile& base, const std::atomic<bool>* cancel,
                               const engine::StepCallback& onStep)
{
    ValidationResult r;
    r.c = c;
    // Where the wall clock is not compared, the other metrics are measured in exact_steps.
    if (c.exact_steps > 0 && !wallClockComparable(c))
        r.c.request.steps = std::min(c.request.steps, c.exact_steps);
    const engine::TrainRequest& req = r.c.request;
    if (req.precision == engine::PrecisionMode::BF16RNE || req.precision == engine::PrecisionMode::BF16SR) {
        r.error = "the planner prices fp32 and bf16 mixed precision; pure bf16 (" +
                  std::string(toString(req.precision)) + ") has no planner counterpart";
        return r;
    }
    const int devices = int(req.layout.devices());
    r.problem = emulatedProblem(req.model, req.batch, req.precision, req.fp32_gradients, c.profile, req.links, devices);
    const CostModelParams params = engineCostModelParams(c.profile, req.links, req.bucket_bytes, base.terms);
    const CostModel model(r.problem, params);
    const Layout& priced = req.layout;
    if (FieldErrors errors = validate(priced, r.problem.model, r.problem.cluster, r.problem.training);
        !errors.empty()) {
        r.error = joinErrors(errors);
        return r;
    }
    r.prediction = model.evaluate(priced);
    r.terms = model.explain(priced);
    r.cost_model = base.terms.name;

    try {
        const std::unique_ptr<engine::TokenSource> source = engine::makeTokenSource(req);
        if (devices > 1) {
            r.measurement = engine::runClusterTraining(req, *source, c.profile, onStep, cancel);
        } else {
            engine::EmulatedDevice device(0, c.profile, 1);
            r.measurement = engine::runTraining(req, *source, device, onStep, cancel);
        }
    } catch (const std::exception& e) {  // a request the engine cannot run
        r.error = e.what();
        return r;
    }
    if (r.measurement.error) {
        r.error = r.measurement.error->message;
        return r;
    }
    if (r.measurement.cancelled) {
        r.error = "cancelled";
        return r;
    }
    const engine::Measurement& m = r.measurement;
    const double steps = std::max<std::size_t>(1, m.steps.size());
    auto add = [&](const char* name, double predicted, std::pair<int, double> measured) {
        r.metrics.push_back({name, predicted, measured.second, relError(predicted, measured.second), measured.first, true});
    };
    // The planner predicts the device of its most loaded pipeline stage: compare with that stage's devices.
    const int stage = r.prediction.memory_stage;
    auto peak = [stage](engine::MemoryCategory category) {
        return [category, stage](const engine::DeviceMeasurement& d) {
            return d.pp_rank == stage ? d.memory_peak_bytes[size_t(category)] : -1.0;
        };
    };
    // Model states are compared as held between steps (resident): ZeRO-3's gathered
    // parameters and ZeRO-2's full gradient buffer during backward are transient, which
    // the planner counts as communication buffers.
    auto resident = [stage](engine::MemoryCategory category) {
        return [category, stage](const engine::DeviceMeasurement& d) {
            return d.pp_rank == stage ? d.memory_resident_bytes[size_t(category)] : -1.0;
        };
    };
    const MemoryBreakdown& mem = r.prediction.memory_bytes;
    add("weights_bytes", mem.weights, busiest(m, resident(engine::MemoryCategory::Weights)));
    add("gradients_bytes", mem.gradients, busiest(m, resident(engine::MemoryCategory::Gradients)));
    add("optimizer_bytes", mem.optimizer, busiest(m, resident(engine::MemoryCategory::Optimizer)));
    add("activations_bytes", mem.activations, busiest(m, peak(engine::MemoryCategory::Activations)));
    double flops = 0;
    for (const engine::DeviceMeasurement& d : m.devices)
        flops += d.counters.totalFlops() / steps;
    add("flops", r.prediction.hardware_flops_per_step + r.prediction.vector_flops_per_step, {-1, flops});
    // Matmul FLOPs alone (Megatron's convention, what MFU counts): like with like.
    double matmulFlops = 0;
    for (const engine::DeviceMeasurement& d : m.devices)
        matmulFlops += (d.counters.flops[size_t(engine::KernelKind::Matmul)] +
                        d.counters.flops[size_t(engine::KernelKind::Attention)]) / steps;
    add("matmul_flops", r.prediction.hardware_flops_per_step, {-1, matmulFlops});
    const std::pair<int, double> busiestSender = busiest(m, [&](const engine::DeviceMeasurement& d) {
        double sent = 0;
        for (const auto& [kind, bytes] : d.comm_bytes)
            sent += bytes;
        return sent / steps;
    });
    add("comm_bytes", r.prediction.comm_bytes.total(), busiestSender);
    // Bytes by collective kind, on that same device (the planner's is one device too).
    const CommBytes& kinds = r.prediction.comm_bytes;
    for (const auto& [metric, kind, predicted] :
         {std::tuple{"all_reduce_bytes", "all_reduce", kinds.all_reduce},
          std::tuple{"reduce_scatter_bytes", "reduce_scatter", kinds.reduce_scatter},
          std::tuple{"all_gather_bytes", "all_gather", kinds.all_gather},
          std::tuple{"send_recv_bytes", "send_recv", kinds.send_recv},
          std::tuple{"all_to_all_bytes", "all_to_all", kinds.all_to_all}})
        add(metric, predicted, busiest(m, [&, kind = std::string(kind)](const engine::DeviceMeasurement& d) {
                const auto it = d.comm_bytes.find(kind);
                return d.id != busiestSender.first ? -1.0 : it == d.comm_bytes.end() ? 0.0 : it->second / steps;
            }));
    // (Not one of validationMetrics(): only MoE cases with expert parallelism have it.)
    // MoE with its copies exchanged: the saved sets grow with the copies the router sent to each
    // rank, a measured load; the planner prices the stated factor (1: balanced). Priced again at
    // the busiest device's measured load, the activations must agree exactly (pp = 1 without the
    // combined 1F1B's extra forward: one micro-batch's sets at the peak).
    const ModelSpec& pm = r.problem.model;
    if (pm.moe.enabled() && (priced.ep > 1 || priced.expertTensorParallel() > 1) && priced.pp == 1 &&
        !priced.ep_comm_overlap) {
        const double sp = priced.sequence_parallel ? priced.tp : 1.0;
        // (MTP: each depth's layer of the last layer's kind routes the micro-batch's copies too.)
        const int mtpMoe = pm.mtp.enabled() && pm.moeLayer(pm.layers - 1) ? pm.mtp.layers : 0;
        const double balanced = double(pm.moeLayers(0, pm.layers) + mtpMoe) * priced.micro_batch *
                                double(r.problem.training.seq_len) /
                                priced.cp / sp * pm.moe.top_k * priced.expertTensorParallel();
        double mostCopies = 0;
        for (const engine::DeviceMeasurement& d : m.devices)
            mostCopies = std::max(mostCopies, d.moe_peak_copies);
        r.moe_measured_load = balanced > 0 ? mostCopies / balanced : 0.0;
        Problem atLoad = r.problem;
        atLoad.training.moe_imbalance = std::clamp(r.moe_measured_load, 1.0, 64.0);
        const Prediction loaded = CostModel(atLoad, params).evaluate(priced);
        add("activations_bytes_at_measured_load", loaded.memory_bytes.activations,
            busiest(m, peak(engine::MemoryCategory::Activations)));
    }
    const auto deviceStep = busiest(m, [](const engine::DeviceMeasurement& d) { return d.device_step_time_s; });
    add("device_step_time_s", r.prediction.step_time_s, deviceStep);
    // (Not one of validationMetrics(): MoE cases with expert parallelism only.) Every MoE layer's
    // combine waits for its group's busiest rank, whose copies in a micro-batch of these few tokens
    // are well above the mean while the experts' totals over the run are balanced: the planner's
    // stated factor (1) prices a balanced step. Priced again at the load the steps waited for, the
    // step time checks the cost model's physics apart from the routing it cannot know. (pp = 1:
    // under a pipeline each stage's groups wait for their own loads, which one factor for every
    // stage does not price.)
    if (pm.moe.enabled() && (priced.ep > 1 || priced.expertTensorParallel() > 1) && priced.pp == 1) {
        for (const engine::DeviceMeasurement& d : m.devices)
            r.moe_step_load = std::max(r.moe_step_load, d.moe_step_load);
        if (r.moe_step_load > 0)
            add("device_step_time_s_at_measured_load", CostModel(r.problemAtStepLoad(), params).evaluate(priced).step_time_s,
                deviceStep);
    }
    // Wall clock: the host doing the emulation's work (WallClockModel.h). The median over steps,
    // because the host is shared and the first step also touches fresh memory.
    // A prediction only where it means something: one core per device thread. Elsewhere the
    // emulation's wall time is reported as what it took (the estimate stays in r.wall).
    const auto wallMeasured = busiest(m, [](const engine::DeviceMeasurement& d) { return medianOf(d.wall_step_times_s); });
    if (c.host.known())
        r.wall = estimateWallClock(req, priced, c.host, base);
    if (wallClockComparable(c)) {
        add("wall_step_time_s", r.wall.wall_s, wallMeasured);
    } else {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        r.metrics.push_back({"wall_step_time_s", nan, wallMeasured.second, nan, wallMeasured.first, false});
    }
    return r;
}

std::vector<ValidationCase> validationSuite(const engine::DeviceProfile& profile, int steps)
{
    // Three block sets: GPT-2's (LayerNorm, GeLU, learned positions, MHA, biases, tied head),
    // Llama's (RMSNorm, SwiGLU, RoPE, grouped-query attention, no biases, untied head) and BERT's.
    engine::ModelConfig gpt2{4, 64, 4, 96, 32};  // L, C, NH, V, T: every layout below divides it (pp v = 4 chunks)
    engine::ModelConfig llama{4, 64, 4, 96, 32};
    llama.kv_heads = 2;
    llama.ffn_hidden = 176;  // about 8/3 C, as Llama sizes its SwiGLU, a multiple of tp
    llama.mlp = MlpKind::SwiGlu;
    llama.norm = NormKind::RmsNorm;
    llama.positions = PositionKind::Rotary;
    llama.rope_base = 500000;
    llama.bias = false;
    llama.tied_embeddings = false;
    // Qwen2's: Llama's with biases on the q, k and v projections only.
    engine::ModelConfig qwen2 = llama;
    qwen2.qkv_bias = true;
    // Qwen3's: Llama's with QK-norm (RMSNorm over head_dim on every query and key head).
    engine::ModelConfig qwen3 = llama;
    qwen3.qk_norm = true;
    // Mistral's: Llama's with a sliding window of 8 of the 32 tokens on every layer; GPT-OSS's
    // alternation, the window on layers 0 and 2 only.
    engine::ModelConfig mistral = llama;
    mistral.sliding_window = {8, {}};
    engine::ModelConfig alternating = llama;
    alternating.sliding_window = {8, {0, 2}};
    // T5's (encoder-decoder: relative position bias tables, cross-attention, RMSNorm, ReLU, no
    // biases, tied head scaled by C^-0.5): 2 encoder + 2 decoder layers, t5-base's 32 buckets.
    engine::ModelConfig t5{2, 64, 4, 96, 32};
    t5.encoder_decoder = true;
    t5.decoder_layers = 2;
    t5.relative_buckets = 32;
    t5.positions = PositionKind::Relative;
    t5.mlp = MlpKind::Relu;
    t5.norm = NormKind::RmsNorm;
    t5.norm_eps = 1e-6;
    t5.bias = false;
    // BERT's (post-norm LayerNorm layers, token types, embedding norm, bidirectional attention,
    // the pooler with the next-sentence head, the masked-LM head tied to the word embedding).
    engine::ModelConfig bert{4, 64, 4, 96, 32};
    bert.norm_eps = 1e-12;
    bert.causal = false;
    bert.post_norm = true;
    bert.token_types = 2;
    bert.embedding_norm = true;
    bert.masked_lm = true;
    bert.pooler = true;
    // Mixtral's MoE block on Llama's: 4 routed experts of 64 columns, top 2, softmax renormalised
    // over the 2, a load-balancing loss; and DeepSeek's kind: a shared expert, a dense first
    // layer, sigmoid scores with the correction bias, routed scaling.
    engine::ModelConfig mixtral = llama;
    mixtral.moe.experts = 4;
    mixtral.moe.top_k = 2;
    mixtral.moe.expert_ffn = 64;
    mixtral.moe.router = MoeRouter::SoftmaxNorm;
    mixtral.moe.aux_loss_coeff = 0.01;
    engine::ModelConfig mixtral8 = mixtral;
    mixtral8.moe.experts = 8;
    engine::ModelConfig deepseek = mixtral;
    deepseek.moe.shared_experts = 1;
    deepseek.moe.shared_ffn = 64;
    deepseek.moe.dense_layers = 1;
    deepseek.moe.router = MoeRouter::SigmoidNorm;
    deepseek.moe.score_correction_bias = true;
    deepseek.moe.routed_scaling = 2.5;
    deepseek.moe.aux_loss_coeff = 0;
    // DeepSeek-V3's node-limited routing in small: the 4 experts in 2 groups, a token's 2 in its
    // better group (with ep 2: every copy of a token to one rank).
    deepseek.moe.expert_groups = 2;
    deepseek.moe.group_top_k = 1;
    // DeepSeek-V2/V3's multi-head latent attention on Llama's blocks (MHA heads): a q latent of 16
    // and a kv latent of 12 with their norms, q/k heads of 8 + a shared RoPE key of 4, values of
    // 8, YaRN's score factor as DeepSeek-V3's (mscale 1.369 squared); DeepSeek-V2-Lite's kind
    // without q compression; and DeepSeek-V3's blocks together (MLA and the MoE kind above).
    engine::ModelConfig mla = llama;
    mla.kv_heads = 4;
    mla.head_dim = 12;
    mla.mla = {16, 12, 8, 4, 8, 1.8738};
    engine::ModelConfig mlaPlain = mla;
    mlaPlain.mla.q_lora_rank = 0;
    engine::ModelConfig deepseekV3 = deepseek;
    deepseekV3.kv_heads = 4;
    deepseekV3.head_dim = 12;
    deepseekV3.mla = mla.mla;
    // Multi-token prediction (issue 16; ModelConfig.h): two depths on Llama's blocks, untied (the
    // last stage keeps its own copy of wte under pp); DeepSeek-V3's blocks with its one depth.
    engine::ModelConfig llamaMtp = llama;
    llamaMtp.mtp = {2, 0.3};
    engine::ModelConfig deepseekV3Mtp = deepseekV3;
    deepseekV3Mtp.mtp = {1, 0.1};
    struct Row {
        const char* name;
        const char* layout;
        engine::PrecisionMode precision;
        const engine::ModelConfig* model;
        // bf16 mixed keeps fp32 main gradients (the frameworks' default, TrainingSpec.h MainGrads)
        // unless the row asks for bf16 ones (Megatron-LM's --grad-reduce-in-bf16).
        bool bf16_gradients = false;
    };
    const auto fp32 = engine::PrecisionMode::FP32, bf16 = engine::PrecisionMode::BF16Mixed;
    const Row rows[] = {
        {"single device", "dp=1,mb=8", fp32, &gpt2},
        {"data parallel", "dp=4", fp32, &gpt2},
        {"ZeRO-1", "dp=4,zero=1", fp32, &gpt2},
        {"ZeRO-2", "dp=4,zero=2", fp32, &gpt2},
        {"ZeRO-3", "dp=4,zero=3", fp32, &gpt2},
        {"ZeRO-3 HSDP", "dp=4,zero=3,zero_group=2", fp32, &gpt2},
        {"tensor parallel", "tp=4", fp32, &gpt2},
        {"tensor + sequence parallel", "tp=2,sp=on", fp32, &gpt2},
        {"pipeline 1F1B", "pp=2,mb=2,schedule=1f1b", fp32, &gpt2},
        {"pipeline GPipe", "pp=2,mb=2,schedule=gpipe", fp32, &gpt2},
        {"pipeline 4 stages", "pp=4,mb=1,schedule=1f1b", fp32, &gpt2},
        {"pipeline interleaved", "pp=2,mb=1,schedule=interleaved,v=2", fp32, &gpt2},
        {"full recomputation", "dp=2,recompute=full", fp32, &gpt2},
        {"selective recomputation", "tp=2,recompute=selective", fp32, &gpt2},
        {"3D", "dp=2,tp=2,pp=2,mb=2", fp32, &gpt2},
        {"3D + ZeRO-1 + recompute", "dp=2,tp=2,pp=2,zero=1,sp=on,mb=1,recompute=full", fp32, &gpt2},
        {"pipeline + selective recomputation", "pp=2,mb=2,recompute=selective", fp32, &gpt2},
        {"bf16 mixed, single device", "dp=1,mb=8", bf16, &gpt2},
        {"bf16 mixed, tensor + sequence parallel", "tp=2,sp=on", bf16, &gpt2},
        {"bf16 mixed, ZeRO-1", "dp=4,zero=1", bf16, &gpt2},
        {"bf16 mixed, ZeRO-1, bf16 gradients", "dp=4,zero=1", bf16, &gpt2, true},
        {"Llama blocks, single device", "dp=1,mb=8", fp32, &llama},
        {"Llama blocks, data parallel", "dp=4", fp32, &llama},
        {"Llama blocks, ZeRO-3", "dp=4,zero=3", fp32, &llama},
        {"Llama blocks, tensor + sequence parallel", "tp=2,sp=on", fp32, &llama},
        {"Llama blocks, pipeline 1F1B", "pp=2,mb=2,schedule=1f1b", fp32, &llama},
        {"Llama blocks, pipeline interleaved", "pp=2,mb=1,schedule=interleaved,v=2", fp32, &llama},
        {"Llama blocks, 3D", "dp=2,tp=2,pp=2,mb=2", fp32, &llama},
        {"Llama blocks, full recomputation", "dp=2,recompute=full", fp32, &llama},
        {"Llama blocks, selective recomputation", "tp=2,recompute=selective", fp32, &llama},
        {"Llama blocks, bf16 mixed, tensor parallel", "tp=2", bf16, &llama},
        {"Llama blocks, bf16 mixed, pipeline + ZeRO-1", "dp=2,pp=2,zero=1,mb=2", bf16, &llama},
        {"bf16 mixed, 3D", "dp=2,tp=2,pp=2,mb=2", bf16, &gpt2},
        {"ZeRO-1 + optimizer offload", "dp=4,zero=1,offload=optimizer", fp32, &gpt2},
        {"Llama blocks, bf16 mixed, ZeRO-2 + optimizer offload", "dp=2,tp=2,zero=2,offload=optimizer", bf16, &llama},
        {"context parallel", "cp=2", fp32, &gpt2},
        {"context + tensor parallel", "cp=2,tp=2", fp32, &gpt2},
        {"Llama blocks, context parallel", "cp=2", fp32, &llama},
        {"Llama blocks, context + tensor parallel", "cp=2,tp=2", fp32, &llama},
        {"Qwen2 blocks (q, k, v biases), tensor + sequence parallel", "tp=2,sp=on", fp32, &qwen2},
        {"Qwen2 blocks, pipeline 1F1B + ZeRO-1", "dp=2,pp=2,zero=1,mb=2", fp32, &qwen2},
        {"Qwen3 blocks (QK-norm), tensor + sequence parallel", "tp=2,sp=on", fp32, &qwen3},
        {"Qwen3 blocks, tensor parallel + full recomputation", "tp=2,recompute=full", fp32, &qwen3},
        {"Qwen3 blocks, context parallel + ZeRO-3", "dp=2,cp=2,zero=3", fp32, &qwen3},
        {"Mistral blocks (sliding window), tensor + sequence parallel", "tp=2,sp=on", fp32, &mistral},
        {"Mistral blocks, pipeline 1F1B + selective recomputation", "pp=2,mb=2,recompute=selective", fp32, &mistral},
        {"Alternating sliding window, pipeline interleaved", "pp=2,mb=1,schedule=interleaved,v=2", fp32, &alternating},
        {"Alternating sliding window, ZeRO-2 + full recomputation", "dp=2,zero=2,recompute=full", fp32, &alternating},
        {"T5 blocks, single device", "dp=1,mb=8", fp32, &t5},
        {"T5 blocks, data parallel", "dp=4", fp32, &t5},
        {"T5 blocks, ZeRO-3 HSDP", "dp=4,zero=3,zero_group=2", fp32, &t5},
        {"T5 blocks, tensor + sequence parallel", "tp=2,sp=on", fp32, &t5},
        {"T5 blocks, full recomputation", "dp=2,recompute=full", fp32, &t5},
        {"T5 blocks, selective recomputation", "tp=2,recompute=selective", fp32, &t5},
        {"T5 blocks, bf16 mixed, ZeRO-2 + optimizer offload", "dp=2,tp=2,zero=2,offload=optimizer", bf16, &t5},
        {"BERT blocks, single device", "dp=1,mb=8", fp32, &bert},
        // (BERT's ZeRO rows shard over 2: the next-sentence bias's 2 values leave the root unit
        // indivisible by 4, whose uneven chunks the planner prices as the mean.)
        {"BERT blocks, ZeRO-2", "dp=2,zero=2", fp32, &bert},
        {"BERT blocks, tensor + sequence parallel", "tp=2,sp=on", fp32, &bert},
        {"BERT blocks, pipeline 1F1B", "pp=2,mb=2,schedule=1f1b", fp32, &bert},
        {"BERT blocks, pipeline interleaved", "pp=2,mb=1,schedule=interleaved,v=2", fp32, &bert},
        {"BERT blocks, 3D", "dp=2,tp=2,pp=2,mb=2", fp32, &bert},
        {"BERT blocks, full recomputation", "dp=2,recompute=full", fp32, &bert},
        {"BERT blocks, selective recomputation", "tp=2,recompute=selective", fp32, &bert},
        {"BERT blocks, context parallel", "cp=2", fp32, &bert},
        {"BERT blocks, bf16 mixed, ZeRO-3 HSDP", "dp=4,zero=3,zero_group=2", bf16, &bert},
        {"BERT blocks, bf16 mixed, ZeRO-3 HSDP, bf16 gradients", "dp=4,zero=3,zero_group=2", bf16, &bert, true},
        // Mixture of experts (issue 16): the experts over ep carved out of dp x cp (x tp with etp
        // below tp), their states on the edp group, the tokens dispatched and combined by all-to-all.
        {"Mixtral blocks (MoE), single device", "dp=1,mb=8", fp32, &mixtral},
        {"Mixtral blocks, expert parallel", "dp=4,ep=4", fp32, &mixtral},
        // (etp 1: each expert whole on its ep rank under tp.)
        {"Mixtral blocks, ep + tensor + sequence parallel (etp 1)", "dp=2,tp=2,sp=on,ep=2,etp=1", fp32, &mixtral},
        {"Mixtral blocks, ep carved out of tp x dp (etp 1)", "dp=2,tp=2,sp=on,ep=4,etp=1", fp32, &mixtral},
        {"8 experts, ep across two nodes", "dp=8,ep=8", fp32, &mixtral8},
        {"Mixtral blocks, pipeline 1F1B + ep", "dp=2,pp=2,mb=2,ep=2", fp32, &mixtral},
        {"Mixtral blocks, context parallel + ep", "dp=2,cp=2,ep=4", fp32, &mixtral},
        {"Mixtral blocks, selective recomputation + ep", "dp=4,ep=2,recompute=selective", fp32, &mixtral},
        {"Mixtral blocks, bf16 mixed, expert parallel", "dp=4,ep=4", bf16, &mixtral},
        // Megatron-LM's combined 1F1B (--overlap-moe-expert-parallel-comm, 16-bit training): one
        // more forward in flight, at pp 1 and interleaved (which it needs when pp > 1).
        {"Mixtral blocks, bf16 mixed, ep + all-to-all overlap (combined 1F1B)", "dp=4,mb=1,ep=4,ep_comm_overlap=on", bf16,
         &mixtral},
        {"Mixtral blocks, bf16 mixed, pipeline interleaved + ep + all-to-all overlap",
         "dp=2,pp=2,v=2,schedule=interleaved,mb=1,ep=2,ep_comm_overlap=on", bf16, &mixtral},
        // (Without ep: every copy computed where it is routed, the activations exact.)
        {"Mixtral blocks, full recomputation", "dp=2,recompute=full", fp32, &mixtral},
        {"DeepSeek-style MoE (shared expert, dense first layer, sigmoid), expert parallel", "dp=4,ep=4", fp32,
         &deepseek},
        {"DeepSeek-style MoE, bf16 mixed, ep + dp", "dp=4,ep=2", bf16, &deepseek},
        // Expert tensor parallelism with ep: each expert split over etp, the per-expert counts
        // gathered over tp x ep in one call (Megatron's tp_ep group).
        {"Mixtral blocks, ep + etp 2 (counts gathered over tp x ep)", "dp=2,tp=2,sp=on,ep=2,etp=2", fp32, &mixtral},
        {"DeepSeek-style MoE, ep + etp 2 + shared expert over tp", "dp=2,tp=2,sp=on,ep=2", fp32, &deepseek},
        // (The shared experts split over tp as Megatron-LM's SharedExpertMLP.)
        {"DeepSeek-style MoE, ep + tensor + sequence parallel (shared expert over tp, etp 1)",
         "dp=2,tp=2,sp=on,ep=2,etp=1", fp32, &deepseek},
        // ZeRO on MoE: the routed experts' gradients reduce-scattered and their states sharded over
        // edp, the rest over dp (Megatron's distributed optimizer with its expert buffers).
        {"Mixtral blocks, ZeRO-1 + ep (expert states on edp)", "dp=4,ep=2,zero=1", fp32, &mixtral},
        {"DeepSeek-style MoE, ZeRO-3 + ep (shared expert, dense first layer)", "dp=4,ep=2,zero=3", fp32, &deepseek},
        // Under ZeRO-2/3 with sp (or QK-norm under tp) each device sums over tp its own slice of the
        // norms' and router's gradients (Megatron-FSDP's local shards): uneven, the busiest priced.
        {"DeepSeek-style MoE, ZeRO-3 + ep + tensor + sequence parallel (owned norm slices)",
         "dp=2,tp=2,sp=on,ep=2,etp=1,zero=3", fp32, &deepseek},
        {"Llama blocks, ZeRO-2 + tensor + sequence parallel (owned norm slices)", "dp=2,tp=2,sp=on,zero=2", fp32, &llama},
        {"Qwen3 blocks (QK-norm), ZeRO-3 + tensor parallel (owned QK-norm slices)", "dp=2,tp=2,zero=3", fp32, &qwen3},
        // HSDP on MoE (dp / zero_group replicas, Megatron's --num-distributed-optimizer-instances):
        // the experts' shard group the slice of edp inside a replica (edp x zero_group / dp devices:
        // 2 of 4 here, 1 of 2 below), their owned chunks summed across the replicas with the dense ones.
        {"Mixtral blocks, ZeRO-2 HSDP + ep (expert shards inside each replica)", "dp=8,ep=2,zero=2,zero_group=4", fp32,
         &mixtral},
        {"DeepSeek-style MoE, ZeRO-3 HSDP + ep", "dp=4,ep=2,zero=3,zero_group=2", fp32, &deepseek},
        // Multi-head latent attention (issue 16): the latents duplicated over tp (on the token shard
        // under sp), the up projections split by heads, the RoPE key's gradient reduced over tp.
        {"MLA blocks (DeepSeek-V3 attention), single device", "dp=1,mb=8", fp32, &mla},
        {"MLA blocks, tensor + sequence parallel", "tp=2,sp=on", fp32, &mla},
        {"MLA blocks, tensor parallel without sp", "tp=2", fp32, &mla},
        {"MLA blocks, pipeline 1F1B + ZeRO-1", "dp=2,pp=2,zero=1,mb=2", fp32, &mla},
        {"MLA blocks, tensor + sequence parallel + full recomputation", "tp=2,sp=on,recompute=full", fp32, &mla},
        {"MLA blocks, context parallel", "cp=2", fp32, &mla},
        {"MLA blocks, bf16 mixed, 3D", "dp=2,tp=2,pp=2,mb=2", bf16, &mla},
        {"MLA without q compression (DeepSeek-V2-Lite), tensor + sequence parallel", "tp=2,sp=on", fp32, &mlaPlain},
        {"MLA without q compression, ZeRO-3 + selective recomputation", "dp=2,zero=3,recompute=selective", fp32,
         &mlaPlain},
        {"DeepSeek-V3 blocks (MLA + MoE), expert parallel", "dp=4,ep=4", fp32, &deepseekV3},
        {"DeepSeek-V3 blocks, pipeline 1F1B + ep", "dp=2,pp=2,mb=2,ep=2", fp32, &deepseekV3},
        {"DeepSeek-V3 blocks, ep carved out of tp x dp (etp 1)", "dp=2,tp=2,sp=on,ep=4,etp=1", fp32, &deepseekV3},
        // Multi-token prediction: eh_proj column-parallel (its input gathered under sp, its output
        // pieces gathered along the hidden size), the depths on the last stage, the shared embedding's
        // gradient over the embedding group, the depth's layer recomputed under full recomputation.
        {"Llama blocks + MTP (2 depths), tensor + sequence parallel + pipeline", "tp=2,sp=on,pp=2,mb=2", fp32, &llamaMtp},
        {"Llama blocks + MTP, tensor parallel without sp + ZeRO-1", "dp=2,tp=2,zero=1", fp32, &llamaMtp},
        {"Llama blocks + MTP, pipeline + ZeRO-3 (wte shared with the last stage)", "dp=2,pp=2,zero=3,mb=2", fp32,
         &llamaMtp},
        {"Llama blocks + MTP, full recomputation of the first layer of each stage", "pp=2,mb=2,recompute=full,"
         "recompute_method=block,recompute_layers=1", fp32, &llamaMtp},
        {"Llama blocks + MTP, bf16 mixed, selective recomputation", "dp=2,tp=2,sp=on,recompute=selective", bf16,
         &llamaMtp},
        {"DeepSeek-V3 blocks + MTP (MLA + MoE depth), expert parallel", "dp=4,ep=4", fp32, &deepseekV3Mtp},
        {"DeepSeek-V3 blocks + MTP, pipeline + ep", "dp=2,pp=2,mb=2,ep=2", fp32, &deepseekV3Mtp},
        {"DeepSeek-V3 blocks + MTP, ep carved out of tp x dp + pipeline", "dp=2,tp=2,pp=2,sp=on,ep=4,etp=1,mb=2", fp32,
         &deepseekV3Mtp},
        // All-to-all context parallelism (cp_comm=a2a, TE's AttnFuncWithCPAndQKVOA2A): heads / cp
        // heads over the whole sequence, q, k, v and the output exchanged by all-to-all.
        {"all-to-all context + tensor + sequence parallel", "cp=2,tp=2,sp=on,cp_comm=a2a", fp32, &gpt2},
        {"Llama blocks (GQA), all-to-all context parallel + selective recomputation",
         "cp=2,cp_comm=a2a,recompute=selective", fp32, &llama},
        // Selective recomputation of named modules (Megatron-LM's recompute_modules): the norms the
        // TE spec runs on their own (an MLA layer's input norm, an MoE layer's pre-MLP norm), the
        // experts' activation, the dense MLP checkpointed (its row-parallel reduction run again).
        {"DeepSeek-V3 blocks, ep + recomputed layernorm + moe_act (DeepSeek-V3's and GPT-OSS's recipes)",
         "dp=4,ep=4,recompute=selective,recompute_modules=layernorm+moe_act", fp32, &deepseekV3},
        {"DeepSeek-style MoE, ep + tensor + sequence parallel + recomputed mlp + moe_act (dense first layer)",
         "dp=2,tp=2,sp=on,ep=2,etp=1,recompute=selective,recompute_modules=core_attn+moe_act+mlp", fp32, &deepseek},
        {"Llama blocks, pipeline 1F1B + recomputed mlp", "pp=2,mb=2,recompute=selective,recompute_modules=mlp", fp32,
         &llama},
        {"Mixtral blocks, bf16 mixed, ep + recomputed layernorm + moe_act",
         "dp=4,ep=2,recompute=selective,recompute_modules=core_attn+layernorm+moe_act", bf16, &mixtral},
        {"DeepSeek-V3 blocks, ep + recomputed mla_up_proj + mlp (DeepSeek-V3's 26.04.01 recipe)",
         "dp=4,ep=4,recompute=selective,recompute_modules=mla_up_proj+mlp", fp32, &deepseekV3},
        {"MLA blocks, tensor parallel + recomputed core_attn + mla_up_proj", "tp=2,recompute=selective,"
         "recompute_modules=core_attn+mla_up_proj", fp32, &mla},
        {"DeepSeek-style MoE, ep + recomputed shared_experts", "dp=4,ep=2,recompute=selective,"
         "recompute_modules=core_attn+shared_experts", fp32, &deepseek},
        {"DeepSeek-style MoE, ep + recomputed moe (the block checkpointed, its all-to-alls again)",
         "dp=4,ep=2,recompute=selective,recompute_modules=core_attn+moe", fp32, &deepseek},
        // Activation offload (Megatron-LM's --cpu-offloading-num-layers, TE's cpu_offload): the first
        // layers' tensors to the host on a copy engine while the next layer computes, back one
        // layer ahead of their backward.
        {"Llama blocks, activation offload of 1 layer", "dp=2,offload_activations=1", fp32, &llama},
        {"Llama blocks, bf16 mixed, tensor + sequence parallel + activation offload of 1 layer",
         "dp=2,tp=2,sp=on,offload_activations=1", bf16, &llama},
        {"GPT-2 blocks, ZeRO-1 + activation offload of 2 layers", "dp=2,zero=1,offload_activations=2", fp32, &gpt2},
        // Full recomputation in uniform groups (--recompute-method uniform --recompute-num-layers 2):
        // only each group's input kept, the group rebuilt whole in its last layer's backward.
        {"Llama blocks, tensor + sequence parallel + full recomputation in uniform groups of 2",
         "tp=2,sp=on,recompute=full,recompute_method=uniform,recompute_layers=2", fp32, &llama},
        {"Mixtral blocks, full recomputation in uniform groups of 2",
         "dp=2,recompute=full,recompute_method=uniform,recompute_layers=2", fp32, &mixtral},
    };
    std::vector<ValidationCase> cases;
    for (const Row& row : rows) {
        ValidationCase c;
        c.name = row.name;
        c.profile = profile;
        engine::TrainRequest& r = c.request;
        r.model = *row.model;
        r.batch = 8;
        r.steps = steps;
        r.precision = row.precision;
        r.fp32_gradients = row.precision == bf16 && !row.bf16_gradients;
        FieldErrors errors;
        r.layout = parseLayout(row.layout, errors);
        if (r.layout.dp == 0)
            r.layout.dp = 1;
        // Each step the same as the next (Validation.h): not with routed experts (the routing,
        // hence peak activations and the token exchange, follows each step's tokens) nor with
        // a pipeline (the emulated step time drifts over the first steps).
        if (!r.model.moe.enabled() && r.layout.pp == 1)
            c.exact_steps = kSuiteExactSteps;
        r.links.intra_bytes_per_second = 100e9;
        r.links.inter_bytes_per_second = 12.5e9;
        r.links.intra_latency_s = 5e-6;
        r.links.inter_latency_s = 2e-5;
        r.links.node_devices = 4;
        // The offload rows' host: a PCIe-like link a quarter of the scale-up link's bandwidth, and
        // the host memory bandwidth the default cost model prices CPU Adam at (and caps the
        // activations' copies at).
        if (r.layout.offload == Offload::Optimizer || r.layout.offload_activations > 0) {
            c.profile.host_link_bytes_per_second = r.links.intra_bytes_per_second / 4;
            c.profile.host_memory_bytes_per_second = defaultCostModelParams().host_memory_bytes_per_second;
        }
        cases.push_back(c);
    }
    return cases;
}

MetricSummary summarizeMetric(const std::vector<ValidationResult>& results, const std::string& metric)
{
    std::vector<double> errors;
    for (const ValidationResult& r : results)
        if (const MetricComparison* m = r.metric(metric); m && std::isfinite(m->rel_error))
            errors.push_back(std::fabs(m->rel_error));
    MetricSummary s;
    s.cases = int(errors.size());
    if (errors.empty())
        return s;
    s.median_rel_error = medianOf(errors);
    s.worst_rel_error = *std::max_element(errors.begin(), errors.end());
    return s;
}

QJsonObject validationDocument(const std::vector<ValidationResult>& results)
{
    QJsonArray cases;
    for (const ValidationResult& r : results) {
        QJsonObject metrics;
        for (const MetricComparison& m : r.metrics) {
            QJsonObject o{{"predicted", m.compared ? QJsonValue(m.predicted) : QJsonValue()},
                          {"measured", m.measured},
                          {"rel_error", std::isfinite(m.rel_error) ? QJsonValue(m.rel_error) : QJsonValue()},
                          {"compared", m.compared},
                          {"worst_device", m.worst_device}};
            if (const std::string why = explainDifference(r, m.metric); !why.empty())
                o.insert("known_difference", QString::fromStdString(why));
            metrics.insert(QString::fromStdString(m.metric), o);
        }
        QJsonObject c{{"name", QString::fromStdString(r.c.name)},
                      {"layout", QString::fromStdString(toString(r.c.request.layout))},
                      {"metrics", metrics},
                      {"request", toJson(r.c)}};
        if (!r.error.empty())
            c.insert("error", QString::fromStdString(r.error));
        if (r.error.empty() && !r.measurement.moe_tokens_per_expert.empty()) {
            // The routing the run measured beside the factor the planner priced (issue 16).
            QJsonArray counts;
            for (std::int64_t n : r.measurement.moe_tokens_per_expert)
                counts.append(double(n));
            QJsonObject moe{{"tokens_per_expert", counts},
                            {"expert_max_over_mean", r.measurement.moeMaxOverMean()},
                            {"planner_imbalance", r.problem.training.moe_imbalance}};
            if (r.moe_measured_load > 0)
                moe.insert("busiest_device_load", r.moe_measured_load);
            if (r.moe_step_load > 0)
                moe.insert("step_load", r.moe_step_load);
            c.insert("moe", moe);
        }
        if (r.error.empty()) {
            // The device clock's breakdown on both sides: the planner's named terms, and the engine's
            // time per kernel kind on its slowest device (per step).
            QJsonObject predicted;
            for (const Term& t : r.terms)
                if (t.figure.starts_with("time_s."))
                    predicted.insert(QString::fromStdString(t.figure.substr(7) + ": " + t.name), t.value);
            QJsonObject measured;
            const MetricComparison* step = r.metric("device_step_time_s");
            const double steps = std::max<std::size_t>(1, r.measurement.steps.size());
            for (const engine::DeviceMeasurement& d : r.measurement.devices) {
                if (!step || d.id != step->worst_device)
                    continue;
                for (int k = 0; k < engine::kKernelKinds; ++k)
                    measured.insert(engine::toString(engine::KernelKind(k)), d.counters.seconds[size_t(k)] / steps);
                double comm = 0;
                for (const auto& [kind, seconds] : d.comm_seconds)
                    comm += seconds;
                measured.insert("communication", comm / steps);
                measured.insert("waiting", d.comm_wait_seconds / steps);
                if (d.counters.host_seconds > 0)  // the offloaded optimizer: host link and host passes
                    measured.insert("host (offload)", d.counters.host_seconds / steps);
            }
            c.insert("device_time_breakdown", QJsonObject{{"predicted", predicted}, {"measured", measured}});
        }
        if (r.c.host.known() && r.error.empty()) {  // what the wall-clock prediction is made of
            // Beside it, the collective calls per step the engine made (its busiest caller), by kind.
            QJsonObject calls;
            const double steps = std::max<std::size_t>(1, r.measurement.steps.size());
            for (const engine::DeviceMeasurement& d : r.measurement.devices)
                for (const auto& [kind, n] : d.comm_calls)
                    calls.insert(QString::fromStdString(kind),
                                 std::max(calls.value(QString::fromStdString(kind)).toDouble(), n / steps));
            c.insert("wall_model", QJsonObject{{"critical_s", r.wall.critical_s},
                                               {"busy_s", r.wall.busy_s},
                                               {"oversubscription", r.wall.oversubscription},
                                               {"barriers", r.wall.barriers},
                                               {"hidden_barriers", r.wall.hidden_barriers},
                                               {"compute_s", r.wall.compute_s},
                                               {"engine_collective_calls", calls}});
        }
        cases.append(c);
    }
    QJsonObject summary;
    for (const std::string& metric : validationMetrics()) {
        const MetricSummary s = summarizeMetric(results, metric);
        summary.insert(QString::fromStdString(metric),
                       QJsonObject{{"median_rel_error", s.median_rel_error},
                                   {"worst_rel_error", s.worst_rel_error},
                                   {"cases", s.cases}});
    }
    return QJsonObject{{"schema", "shardscope.validation/1"}, {"cases", cases}, {"summary", summary}};
}

} // namespace shardscope
