// shardscope-cli train: a short, real training run of a small GPT on one
// emulated device (this host, measured, or a catalog chip, optionally scaled
// down), or with --devices/--layout on an emulated cluster executing the layout
// (dp, tp, sp, pp, ZeRO, schedule, recomputation), printing per-step loss and
// times and at the end peak memory by category, FLOPs and achieved FLOP/s, and
// per device the collectives' bytes; --json prints the measurement document.
#include "HostProfileCache.h"
#include "Store.h"
#include "BackendArgs.h"
#include "CliArgs.h"
#include "CostModelParams.h"
#include "Commands.h"
#include "MaskedLm.h"
#include "MeasurementJson.h"
#include "ModelEnums.h"
#include "Trainer.h"
#include "Units.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <ostream>
#include <thread>

namespace shardscope::cli {

using namespace shardscope::engine;

namespace {

std::string fixed(double v, int decimals)
{
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, v);
    return text;
}

// "host" or "NAME[:scale]" with scale in (0, 1] multiplying capacity, FLOP/s and bandwidth.
DeviceProfile resolveDevice(const std::string& spec, int threads, Context& ctx, bool quiet, bool remeasure)
{
    if (spec == "host") {
        // Measured once per machine and thread count, kept in the run store.
        Store store(ctx.db_path, ctx.store_options);
        const CachedHostProfile cached = cachedHostProfile(store.runs(), threads, remeasure);
        const DeviceProfile& p = cached.profile;
        if (!quiet)
            ctx.out << "device: host, " << (cached.measured_now ? "measured now" : "measured " + cached.measured_at)
                    << " with " << threads << " thread" << (threads == 1 ? "" : "s") << ": "
                    << formatSi(p.peak_flops_fp32, "FLOP/s") << " fp32 GEMM, "
                    << formatSi(p.memory_bytes_per_second, "B/s") << " copy bandwidth, "
                    << formatBytes(p.memory_bytes) << " RAM, "
                    << fixed(p.kernel_overhead_s * 1e6, 1) << " us per kernel launch\n";
        return p;
    }
    std::string name = spec;
    double scale = 1;
    if (const size_t colon = spec.find(':'); colon != std::string::npos) {
        name = spec.substr(0, colon);
        const std::string text = spec.substr(colon + 1);
        char* end = nullptr;
        scale = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !(scale > 0 && scale <= 1))
            throw UsageError("--device: scale \"" + text + "\" must be a number in (0, 1] (e.g. trainium1:0.001)");
    }
    if (name.empty())
        throw UsageError("--device: expected host or a chip name from the catalog (shardscope-cli catalog list --kind chips)");
    const Store store(ctx.db_path, ctx.store_options);
    for (const std::string& n : store.notices())
        ctx.err << "shardscope-cli: " << n << "\n";
    const std::optional<ChipSpec> chip = store.specs().findChip(name);
    if (!chip) {
        store.specs().chip(name);  // throws InputError naming the missing chip, with near matches
        throw UsageError("--device: unknown chip " + name);
    }
    DeviceProfile p = profileFromChip(*chip, scale);
    if (!quiet)
        ctx.out << "device: " << p.name << " (one of " << chip->devices_per_chip << " per chip): "
                << formatBytes(p.memory_bytes) << ", " << formatSi(p.peak_flops_bf16, "FLOP/s") << " bf16, "
                << formatSi(p.peak_flops_fp32, "FLOP/s") << " fp32, "
                << formatSi(p.memory_bytes_per_second, "B/s")
                << "; kernel launch overhead not in the catalog (0)\n";
    return p;
}

void printDevices(const Measurement& m, Context& ctx)
{
    const double steps = double(std::max<size_t>(1, m.steps.size()));
    for (const DeviceMeasurement& d : m.devices) {
        ctx.out << "device " << d.id << " (tp " << d.tp_rank << (m.request.layout.cp > 1 ? ", cp " + std::to_string(d.cp_rank) : std::string())
                << ", dp " << d.dp_rank << ", pp " << d.pp_rank
                << ", node " << d.node << "): peak " << formatBytes(d.memory_peak_total_bytes) << " (";
        for (int c = 0; c < kMemoryCategories; ++c)
            ctx.out << (c ? ", " : "") << toString(MemoryCategory(c)) << " "
                    << formatBytes(d.memory_peak_bytes[size_t(c)]);
        ctx.out << "), " << formatSi(d.counters.totalFlops() / steps, "FLOP") << "/step, device "
                << formatDuration(d.device_step_time_s) << "/step";
        bool any = false;
        for (const auto& [kind, bytes] : d.comm_bytes) {
            if (bytes <= 0)
                continue;
            ctx.out << (any ? ", " : "; sent per step: ") << kind << " " << formatBytes(bytes / steps);
            any = true;
        }
        ctx.out << "; waited " << formatDuration(d.comm_wait_seconds / steps) << "/step\n";
    }
}

// What the loss is for the masked-LM objective (its source entropy floors next-token prediction only).
std::string objectiveNote(const ModelConfig& c)
{
    if (!c.masked_lm)
        return {};
    return " (masked LM: cross-entropy on " + std::to_string(predictedPerSequence(c)) + " of " + std::to_string(c.seq) +
           " positions a sequence" + (c.pooler ? ", + next-sentence loss" : "") + ")";
}

// Mixture of experts: the measured load (copies routed to each expert over the run).
void printMoeLoad(const Measurement& m, Context& ctx)
{
    if (m.moe_tokens_per_expert.empty())
        return;
    ctx.out << "experts' load: token copies per expert";
    for (size_t e = 0; e < m.moe_tokens_per_expert.size(); ++e)
        ctx.out << (e ? ", " : " ") << m.moe_tokens_per_expert[e];
    ctx.out << " (max/mean " << fixed(m.moeMaxOverMean(), 3) << ")";
    if (m.moe_dropped_copies > 0)
        ctx.out << "; " << m.moe_dropped_copies << " copies dropped past the experts' capacity";
    ctx.out << "\n";
}

void printSummary(const Measurement& m, Context& ctx)
{
    if (m.devices.empty())
        return;
    printMoeLoad(m, ctx);
    if (m.devices.size() > 1) {
        printDevices(m, ctx);
        if (!m.steps.empty())
            ctx.out << "step time: device clock " << formatDuration(m.steps.back().device_seconds)
                    << " (slowest device, last step), wall " << formatDuration(m.steps.back().wall_seconds) << "\n";
        if (!m.steps.empty())
            ctx.out << "loss: " << fixed(m.steps.front().loss, 4) << " -> " << fixed(m.steps.back().loss, 4)
                    << objectiveNote(m.request.model) << "; wall " << formatDuration(m.wall_seconds) << " in all\n";
        return;
    }
    const DeviceMeasurement& d = m.devices.front();
    ctx.out << "peak memory:";
    for (int c = 0; c < kMemoryCategories; ++c)
        ctx.out << (c ? ", " : " ") << toString(MemoryCategory(c)) << " " << formatBytes(d.memory_peak_bytes[size_t(c)]);
    ctx.out << "; total " << formatBytes(d.memory_peak_total_bytes) << " of " << formatBytes(d.profile.memory_bytes)
            << "\n";
    if (m.steps.empty())
        return;
    const double steps = double(m.steps.size());
    const double flopsPerStep = d.counters.totalFlops() / steps;
    ctx.out << "FLOPs per step: " << formatSi(flopsPerStep, "FLOP") << " (";
    bool first = true;
    for (int k = 0; k < kKernelKinds; ++k) {
        const double f = d.counters.flops[size_t(k)];
        if (f <= 0)
            continue;
        ctx.out << (first ? "" : ", ") << toString(KernelKind(k)) << " " << fixed(100 * f / d.counters.totalFlops(), 1)
                << "%";
        first = false;
    }
    ctx.out << "); bytes moved per step: " << formatBytes((d.counters.bytes_read + d.counters.bytes_written) / steps)
            << "\n";
    const DataType compute = m.request.precision == PrecisionMode::FP32 ? DataType::FP32 : DataType::BF16;
    const double peak = d.profile.peakFlops(compute);
    ctx.out << "step time: device clock " << formatDuration(d.device_step_time_s) << " (" 
            << formatSi(flopsPerStep / d.device_step_time_s, "FLOP/s")
            << (peak > 0 ? ", " + fixed(100 * flopsPerStep / d.device_step_time_s / peak, 1) + "% of peak" : "")
            << "), wall " << formatDuration(d.wall_step_time_s) << " (achieved "
            << formatSi(flopsPerStep / d.wall_step_time_s, "FLOP/s") << " on this host)\n";
    const double last = m.steps.back().loss;
    ctx.out << "loss: " << fixed(m.steps.front().loss, 4) << " -> " << fixed(last, 4);
    ctx.out << objectiveNote(m.request.model);
    if (m.entropy_nats_per_token)
        ctx.out << " (source entropy " << fixed(*m.entropy_nats_per_token, 4) << " nats/token, gap "
                << fixed(last - *m.entropy_nats_per_token, 4) << ")";
    ctx.out << "; wall " << formatDuration(m.wall_seconds) << " in all\n";
}

} // namespace

namespace {

int train(const std::vector<std::string>& args, Context& ctx, const BackendRun& backend)
{
    const CommandHelp& help = commandHelp("train");
    const std::string usage = usageText(help);
    const CliArgs a(args, help);
    a.expectPositional(0, usage);
    for (const OptionHelp& o : help.options)
        if (o.required && !a.value(o.name))
            throw UsageError("--" + o.name + ": missing; usage: " + usage);

    TrainRequest r;
    r.model.layers = a.integer("layers", 0, 1, 1024);
    r.model.hidden = a.integer("hidden", 0, 1, 1 << 16);
    r.model.heads = a.integer("heads", 0, 1, 1 << 12);
    r.model.vocab = a.integer("vocab", 0, 1, 1 << 22);
    r.model.seq = a.integer("seq", 0, 1, 1 << 16);
    r.model.kv_heads = a.integer("kv-heads", 0, 1, 1 << 12);
    r.model.head_dim = a.integer("head-dim", 0, 1, 1 << 12);
    r.model.ffn_hidden = a.integer("ffn", 0, 1, 1 << 20);
    auto enumOption = [&](const char* name, auto table, auto fallback) {
        const auto text = a.value(name);
        if (!text)
            return fallback;
        if (const auto v = enumFromString<decltype(fallback)>(table, *text))
            return *v;
        throw UsageError(std::string("--") + name + ": \"" + *text + "\" is not " + enumChoices<decltype(fallback)>(table));
    };
    r.model.mlp = enumOption("mlp", std::span<const EnumName<MlpKind>>(kMlpKindNames), MlpKind::Gelu);
    r.model.norm = enumOption("norm", std::span<const EnumName<NormKind>>(kNormKindNames), NormKind::LayerNorm);
    r.model.norm_eps = a.number("norm-eps", r.model.norm_eps, 1e-30, 0.5);
    r.model.positions = enumOption("positions", std::span<const EnumName<PositionKind>>(kPositionKindNames),
                                   PositionKind::Learned);
    r.model.rope_base = a.number("rope-base", r.model.rope_base, 1, 1e12);
    // Mixture of experts (issue 16; engine/ModelConfig.h): --experts routed experts, --top-k of them a
    // token, --shared-experts of --shared-ffn every token passes through, the router kind, the
    // load-balancing loss, the dense first layers and the interval of MoE layers.
    MoeConfig& moe = r.model.moe;
    moe.experts = a.integer("experts", 0, 1, 1 << 16);
    moe.top_k = a.integer("top-k", moe.experts > 0 ? std::min(2, moe.experts) : 0, 1, 1 << 16);
    moe.shared_experts = a.integer("shared-experts", 0, 0, 1 << 12);
    for (const char* option : {"top-k", "shared-experts", "shared-ffn", "expert-ffn", "router", "aux-loss-coeff",
                               "moe-dense-layers", "moe-layer-interval", "capacity-factor", "routed-scaling"})
        if (moe.experts == 0 && a.value(option))
            throw UsageError(std::string("--") + option + ": a mixture-of-experts setting: give --experts E");
    if (moe.experts > 0) {
        moe.expert_ffn = a.integer("expert-ffn", 0, 1, 1 << 20);
        moe.shared_ffn = a.integer("shared-ffn", moe.shared_experts > 0 ? r.model.ffn() : 0, 1, 1 << 20);
        moe.router =
            enumOption("router", std::span<const EnumName<MoeRouter>>(kMoeRouterNames), MoeRouter::SoftmaxNorm);
        moe.aux_loss_coeff = a.number("aux-loss-coeff", 0, 0, 1000);
        moe.dense_layers = a.integer("moe-dense-layers", 0, 0, 1024);
        moe.layer_interval = a.integer("moe-layer-interval", 1, 1, 1024);
        moe.capacity_factor = a.number("capacity-factor", 0, 0, 1e6);
        moe.routed_scaling = a.number("routed-scaling", 0, 0, 1000);
    }
    // Linear biases: on every layer (GPT-2), on q, k and v only (Qwen2), or none; --no-bias is --bias none.
    // MoE blocks have none (Mixtral, Qwen-MoE, DeepSeek): the default with --experts.
    const std::string bias = a.value("bias").value_or(a.flag("no-bias") || moe.experts > 0 ? "none" : "all");
    if (bias != "all" && bias != "qkv" && bias != "none")
        throw UsageError("--bias: \"" + bias + "\" is not one of all, qkv, none");
    if (a.flag("no-bias") && bias != "none")
        throw UsageError("--no-bias contradicts --bias " + bias);
    r.model.bias = bias == "all";
    r.model.qkv_bias = bias == "qkv";
    r.model.qk_norm = a.flag("qk-norm");
    // Sliding-window attention on every layer (Mistral): each query sees itself and W - 1 keys before it.
    r.model.sliding_window.size = a.integer("sliding-window", 0, 1, 1 << 16);
    r.model.tied_embeddings = !a.flag("untied");
    // Multi-token prediction (DeepSeek-V3's MTP; engine/ModelConfig.h): D depths on the last stage,
    // their losses' mean weighted by --mtp-loss-scale (Megatron's mtp_loss_scaling_factor).
    r.model.mtp.layers = a.integer("mtp-layers", 0, 1, 64);
    if (r.model.mtp.layers == 0 && a.value("mtp-loss-scale"))
        throw UsageError("--mtp-loss-scale: the multi-token prediction losses' weight: give --mtp-layers D");
    r.model.mtp.loss_scale = a.number("mtp-loss-scale", r.model.mtp.loss_scale, 1e-9, 10);
    r.model.decoder_layers = a.integer("decoder-layers", 0, 1, 1024);
    r.model.encoder_decoder = r.model.decoder_layers > 0;  // T5 (engine/ModelConfig.h)
    if (r.model.encoder_decoder) {
        r.model.relative_buckets = a.integer("relative-buckets", 32, 1, 1 << 12);
        r.model.relative_max_distance = a.integer("relative-max-distance", 128, 1, 1 << 20);
    }

    // BERT's blocks and objective (ModelConfig.h): bidirectional attention, post-norm layers, token
    // types, the embedding norm, the pooler with its next-sentence head, the masked-LM head.
    const bool encoder = a.flag("encoder");
    if (encoder && r.model.encoder_decoder)
        throw UsageError("--encoder: BERT's encoder and --decoder-layers (T5's encoder-decoder) are two different models");
    if (!encoder && a.value("token-types"))
        throw UsageError("--token-types: segment embeddings come with --encoder (BERT's sentence pairs)");
    if (!encoder && a.flag("no-pooler"))
        throw UsageError("--no-pooler: the pooler comes with --encoder");
    r.model.post_norm = a.flag("post-norm") || encoder;
    if (encoder) {
        r.model.causal = false;
        r.model.masked_lm = true;
        r.model.embedding_norm = true;
        r.model.token_types = a.integer("token-types", 2, 0, 1 << 16);
        r.model.pooler = !a.flag("no-pooler");
    }
    r.batch = a.integer("batch", 0, 1, 1 << 20);
    r.steps = a.integer("steps", 0, 1, 100'000'000);
    r.optimizer.lr = a.number("lr", r.optimizer.lr, 1e-12, 10);
    r.seed = std::uint64_t(a.number("seed", 1, 0, 9007199254740992.0));  // integers exact in a double
    r.divergence_factor = a.number("divergence-factor", r.divergence_factor, 0, 1e6);
    if (auto p = a.value("precision")) {
        const auto mode = precisionFromString(*p);
        if (!mode)
            throw UsageError("--precision: \"" + *p + "\" is not one of fp32, bf16-mixed, bf16-rne, bf16-sr");
        r.precision = *mode;
    }
    Recompute recompute = Recompute::None;
    if (auto p = a.value("recompute")) {
        const auto mode = recomputeFromString(*p);
        if (!mode)
            throw UsageError("--recompute: \"" + *p + "\" is not one of none, full, selective");
        recompute = *mode;
    }
    r.data = a.value("data").value_or("synthetic");
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = a.integer("threads", cores, 1, 1024);
    const bool json = a.flag("json");

    // The cluster: --layout (core's layout keys) over --devices; dp fills what tp x pp leave.
    const bool clusterRun = a.value("layout") || a.value("devices");
    std::string layoutText = a.value("layout").value_or("");
    if (clusterRun) {
        FieldErrors layoutErrors;
        r.layout = parseLayout(layoutText, layoutErrors);
        if (!layoutErrors.empty())
            throw InputError(layoutErrors);
        if (layoutText.find("recompute") == std::string::npos)
            r.layout.recompute = recompute;  // --recompute applies when the layout does not say
        const int devices = a.integer("devices", 0, 1, 4096);
        if (r.layout.dp == 0) {
            if (devices > 0)
                resolveDataParallel(r.layout, devices, layoutErrors);
            else
                r.layout.dp = 1;
        }
        if (!layoutErrors.empty())
            throw InputError(layoutErrors);
        if (devices > 0 && r.layout.devices() != devices)
            throw UsageError("--devices: " + std::to_string(devices) + " devices, but the layout " + layoutText +
                             " has dp x tp x pp x cp = " + std::to_string(r.layout.devices()));
        r.bucket_bytes = std::size_t(a.number("bucket-bytes", double(r.bucket_bytes), 4, 1e12));
    } else {
        // One device trains the whole batch as one micro-batch, as a single-GPU trainer does.
        r.layout.recompute = recompute;
        r.layout.micro_batch = std::max(1, r.batch);
    }

    // Every problem with the request at once, named by option (the links are checked
    // once the device and node type are known).
    FieldErrors errors;
    for (FieldError& f : validate(r))
        if (f.path != "links")
            errors.push_back(f);
    // A file source opens at once and is checked with the rest; the synthetic chain is built
    // once the device is known and the weights can fit on it (it takes a minute at V = 1e6).
    std::unique_ptr<TokenSource> source;
    try {
        if (r.data != "synthetic") {
            source = makeTokenSource(r);
            for (FieldError& f : source->check(dataVocabulary(r.model), r.model.seq))
                errors.push_back(f);
        }
    } catch (const InputError& e) {
        errors.push_back({"data", e.what()});
    }
    for (FieldError& f : errors) {
        // "data: cannot read ..." from the source already names its field once.
        if (f.message.rfind(f.path + ": ", 0) == 0)
            f.message = f.message.substr(f.path.size() + 2);
        // Model fields by their option names (ffn_hidden is --ffn, kv_heads --kv-heads, ...).
        if (f.path == "ffn_hidden")
            f.path = "ffn";
        // The MoE fields by their option names (moe.top_k is --top-k, moe.dense_layers --moe-dense-layers).
        static const std::pair<const char*, const char*> moeOptions[] = {
            {"moe.experts", "experts"},           {"moe.top_k", "top-k"},
            {"moe.shared_experts", "shared-experts"}, {"moe.shared_ffn", "shared-ffn"},
            {"moe.expert_ffn", "expert-ffn"},     {"moe.aux_loss_coeff", "aux-loss-coeff"},
            {"moe.dense_layers", "moe-dense-layers"}, {"moe.layer_interval", "moe-layer-interval"},
            {"moe.capacity_factor", "capacity-factor"}, {"moe.routed_scaling", "routed-scaling"},
            {"moe", "experts"}, {"mtp.layers", "mtp-layers"}, {"mtp.loss_scale", "mtp-loss-scale"},
            {"mtp", "mtp-layers"}};
        for (const auto& [field, option] : moeOptions)
            if (f.path == field)
                f.path = option;
        std::replace(f.path.begin(), f.path.end(), '_', '-');
        f.path = "--" + f.path;
    }
    if (!errors.empty())
        throw InputError(errors);

    // A node type gives the device (its chip, scaled) and the links, unless --device names the device.
    std::optional<NodeType> node;
    double nodeScale = 1;
    if (auto spec = a.value("node-type")) {
        std::string name = *spec;
        if (const size_t colon = spec->find(':'); colon != std::string::npos) {
            name = spec->substr(0, colon);
            char* end = nullptr;
            const std::string text = spec->substr(colon + 1);
            nodeScale = std::strtod(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !(nodeScale > 0 && nodeScale <= 1))
                throw UsageError("--node-type: scale \"" + text + "\" must be a number in (0, 1]");
        }
        const Store store(ctx.db_path, ctx.store_options);
        node = store.specs().node(name);  // InputError naming the missing node type
    }
    char scaleText[32];
    std::snprintf(scaleText, sizeof scaleText, ":%g", nodeScale);
    const std::string deviceSpec = a.value("device").value_or(
        node ? node->chip.name + (nodeScale != 1 ? std::string(scaleText) : std::string()) : std::string("host"));
    if (backend.session && !clusterRun)
        throw UsageError("--backend mpi: spreads a cluster over MPI ranks; give --devices or --layout");
    // MPI: rank 0 measures this host (or reads it from the history) first, the other ranks then
    // read what it stored; ranks on other hosts must arrive at the same profile (a catalog --device).
    if (backend.session && !backend.writes())
        backend.session->barrier();
    DeviceProfile profile = resolveDevice(deviceSpec, clusterRun ? 1 : threads, ctx, json,
                                          a.flag("remeasure-host") && backend.writes());
    if (backend.session && backend.writes())
        backend.session->barrier();
    if (backend.session && !backend.session->sameOnEveryRank(fingerprint(profile)))
        throw InputError("device: the MPI ranks resolved different device profiles for \"" + deviceSpec +
                         "\" (each host measured itself): give the same catalog chip on every host with --device NAME");
    r.backend = backend.backend;
    // Optimizer offload's host side: the node type's host link per device (scaled like the
    // device) or --host-bw, and the host memory bandwidth the cost model prices CPU Adam at.
    if (node && node->host_link_bytes_per_second > 0)
        profile.host_link_bytes_per_second =
            node->host_link_bytes_per_second / std::max(1, node->chip.devices_per_chip) * nodeScale;
    profile.host_link_bytes_per_second = a.number("host-bw", profile.host_link_bytes_per_second, 1, 1e15);
    if (profile.host_link_bytes_per_second > 0)
        profile.host_memory_bytes_per_second =
            defaultCostModelParams().host_memory_bytes_per_second * (node ? nodeScale : 1.0);
    if (clusterRun) {
        LinkSpec& l = r.links;
        if (node) {
            // Per device, one direction: the chip's scale-up link shared by its devices, the
            // node network shared by the node's devices; scaled like the device profile.
            l.intra_bytes_per_second = node->intra_link_bytes_per_second / std::max(1, node->chip.devices_per_chip) * nodeScale;
            l.inter_bytes_per_second = node->inter_node_bytes_per_second / std::max(1, node->devicesPerNode()) * nodeScale;
            l.node_devices = node->devicesPerNode();
        } else if (profile.measured) {
            // This host's shared memory: a copy reads and writes, so half the measured copy rate.
            l.intra_bytes_per_second = l.inter_bytes_per_second = profile.memory_bytes_per_second / 2;
        }
        l.intra_bytes_per_second = a.number("intra-bw", l.intra_bytes_per_second, 1, 1e15);
        l.inter_bytes_per_second = a.number("inter-bw", l.inter_bytes_per_second, 1, 1e15);
        // Link latencies are not in the catalog: 0 unless given.
        l.intra_latency_s = a.number("intra-latency", 0, 0, 1);
        l.inter_latency_s = a.number("inter-latency", 0, 0, 1);
        l.node_devices = a.integer("node-devices", l.node_devices, 1, 4096);
        FieldErrors linkErrors;
        for (const FieldError& f : validate(r))
            if (f.path == "links")
                linkErrors.push_back({"--intra-bw/--inter-bw", f.message + " (--node-type or the flags)"});
        if (!linkErrors.empty())
            throw InputError(linkErrors);
    }
    if (profile.peakFlops(r.precision == PrecisionMode::FP32 ? DataType::FP32 : DataType::BF16) <= 0)
        throw InputError("--device: " + profile.name + " has no published peak " +
                         (r.precision == PrecisionMode::FP32 ? std::string("fp32") : std::string("bf16")) +
                         " FLOP/s in the catalog; choose another --precision or device");
    if (profile.memory_bytes_per_second <= 0)
        throw InputError("--device: " + profile.name + " has no published memory bandwidth in the catalog");
    if (const std::string tooSmall = weightsCannotFit(r, profile); !tooSmall.empty()) {
        if (json)  // the measurement document's error object, without a run
            ctx.out << QJsonDocument(QJsonObject{{"error", QJsonObject{{"device", 0},
                                                                       {"kind", toString(RunFaultKind::OutOfMemory)},
                                                                       {"message", QString::fromStdString(tooSmall)}}}})
                           .toJson(QJsonDocument::Indented)
                           .toStdString();
        ctx.err << "shardscope-cli: train: " << tooSmall << "\n";
        return kExitFailure;
    }
    if (!source)
        source = makeTokenSource(r);
    if (!json) {
        ctx.out << "model: " << r.model.totalLayers() << " layers, hidden " << r.model.hidden << ", " << r.model.heads
                << " heads, vocab " << r.model.vocab << ", seq " << r.model.seq << " (" << describe(r.model) << "): "
                << formatCount(parameterCount(r.model)) << " parameters; batch " << r.batch << ", "
                << toString(r.precision) << ", recompute " << shardscope::toString(r.layout.recompute) << "\n";
        ctx.out << "data: " << source->description() << "\n";
        if (clusterRun) {
            const LinkSpec& l = r.links;
            const int perNode = l.node_devices > 0 ? std::min<int>(l.node_devices, int(r.layout.devices()))
                                                   : int(r.layout.devices());
            ctx.out << "cluster: " << r.layout.devices() << " devices (" << shardscope::toString(r.layout) << "), "
                    << (r.layout.devices() + perNode - 1) / perNode << " node(s) of " << perNode
                    << "; links per device: intra-node " << formatSi(l.intra_bytes_per_second, "B/s") << ", "
                    << fixed(l.intra_latency_s * 1e6, 1) << " us, inter-node "
                    << formatSi(l.inter_bytes_per_second, "B/s") << ", " << fixed(l.inter_latency_s * 1e6, 1)
                    << " us; " << r.batch / (r.layout.dp * r.layout.micro_batch) << " micro-batch(es) of "
                    << r.layout.micro_batch << " per replica\n";
        }
    }
    const int width = int(std::to_string(r.steps).size());
    auto onStep = [&](const StepRecord& s) {
        if (json)
            return;
        char line[192];
        // (Multi-token prediction: its loss apart, as Megatron logs "mtp_1 loss" beside "lm loss".)
        char mtp[32] = "";
        if (r.model.mtp.enabled())
            std::snprintf(mtp, sizeof mtp, "  mtp loss %.4f", s.mtp_loss);
        std::snprintf(line, sizeof line, "step %*d/%d  loss %.4f%s  grad norm %.3f  device %s  wall %s\n", width, s.step,
                      r.steps, s.loss, mtp, s.grad_norm, formatDuration(s.device_seconds).c_str(),
                      formatDuration(s.wall_seconds).c_str());
        ctx.out << line << std::flush;
    };
    Measurement m;
    if (clusterRun) {
        m = runClusterTraining(r, *source, profile, onStep);
    } else {
        EmulatedDevice device(0, profile, threads);
        m = runTraining(r, *source, device, onStep);
    }

    if (json)
        ctx.out << QJsonDocument(toJson(m)).toJson(QJsonDocument::Indented).toStdString();
    else
        printSummary(m, ctx);
    if (m.error) {
        ctx.err << "shardscope-cli: train: " << m.error->message << "\n";
        return kExitFailure;
    }
    return kExitOk;
}

} // namespace

int runTrain(const std::vector<std::string>& args, Context& ctx)
{
    return runWithBackend(args, commandHelp("train"), ctx, train);
}

} // namespace shardscope::cli
