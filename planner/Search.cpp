#include "Search.h"
#include "MlaCost.h"
#include "ModelStateMemory.h"
#include "StepTimeBound.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>

namespace shardscope {

bool layoutLess(const Layout& a, const Layout& b)
{
    // Schedules in the order 1f1b, gpipe, interleaved: of two layouts that tie, the default wins.
    auto rank = [](PipelineSchedule s) {
        return s == PipelineSchedule::OneFOneB ? 0 : s == PipelineSchedule::GPipe ? 1 : 2;
    };
    auto key = [&](const Layout& l) {
        return std::make_tuple(l.dp, l.tp, l.pp, l.cp, l.sequence_parallel, l.zero_stage, l.zero_group,
                               l.micro_batch, rank(l.schedule), l.virtual_stages, l.recompute, l.offload,
                               l.tp_comm_overlap, l.overlap_param_gather, l.first_stage_layers,
                               l.last_stage_layers, l.account_for_embedding_in_pipeline_split,
                               l.account_for_loss_in_pipeline_split, l.recompute_method, l.recompute_layers, l.ep, l.etp,
                               l.ep_comm_overlap, l.cp_comm, l.moe_dispatcher, l.recompute_modules,
                               l.offload_activations,
                               std::string_view(l.pipeline_layout ? l.pipeline_layout->text() : std::string_view()));
    };
    return key(a) < key(b);
}

bool samePlanCost(Objective objective, const Plan& a, const Plan& b)
{
    auto same = [](double x, double y) { return std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y)); };
    return same(objectiveValue(objective, a.prediction), objectiveValue(objective, b.prediction)) &&
           same(a.prediction.step_time_s, b.prediction.step_time_s) &&
           same(a.prediction.memory_bytes.total(), b.prediction.memory_bytes.total());
}

std::vector<Plan> collapseVariants(const std::vector<Plan>& ranked, int top_k, Objective objective)
{
    std::vector<Plan> out;
    for (const Plan& p : ranked) {
        if (!out.empty() && samePlanCost(objective, out.back(), p)) {
            if (int(out.back().variants.size()) < kMaxVariants)
                out.back().variants.push_back(p.layout);
            continue;
        }
        if (int(out.size()) == top_k)
            break;
        out.push_back(p);
        out.back().variants.clear();
    }
    return out;
}

bool planBetter(Objective objective, const Plan& a, const Plan& b)
{
    const double oa = objectiveValue(objective, a.prediction), ob = objectiveValue(objective, b.prediction);
    if (oa != ob)
        return oa < ob;
    const double ma = a.prediction.memory_bytes.total(), mb = b.prediction.memory_bytes.total();
    if (ma != mb)
        return ma < mb;
    return layoutLess(a.layout, b.layout);
}

std::string objectiveProblem(Objective objective, const Problem& problem)
{
    if (objective == Objective::CostToTrain && problem.cluster.node.price_per_node_hour_usd <= 0)
        return "the cost objective needs a price, and " + problem.cluster.node.name +
               " has no published price per node-hour; rank by time or throughput instead";
    return {};
}

namespace {

// Model states per device of one transformer layer, at least (memoryLowerBound's terms): of a
// dense layer and of a MoE layer.
struct LayerStateBytes {
    double dense = 0, moe = 0;
    // Of `layers` layers on a stage, `moeLayers` of them MoE and `either` of either kind.
    double stage(double denseLayers, double moeLayers, double either) const
    {
        return denseLayers * dense + moeLayers * moe + either * std::min(dense, moe);
    }
};

LayerStateBytes layerStateBytesByKind(const CostModel& model, const Layout& l)
{
    const Problem& p = model.problem();
    const ModelSpec& m = p.model;
    // Weight matrices of one transformer layer only (no biases, norms, embeddings, cross
    // attention): attention Q, K, V, O and the MLP's 2 (3 when gated) matrices per expert.
    const double h = m.hidden;
    const bool gated = m.mlp == MlpKind::SwiGlu || m.mlp == MlpKind::GeGlu;
    // Per device: tp splits the attention, the dense MLP and the shared experts; the routed experts are E / ep
    // per device, each split over etp.
    const double matrices = gated ? 3.0 : 2.0;
    const double dense = matrices * h * m.ffn_hidden / l.tp;
    const double routed = m.moe.enabled() ? double(m.moe.experts) / l.ep * double(m.expertFfn()) * matrices * h /
                                                l.expertTensorParallel()
                                          : 0.0;
    const double moe = m.moe.enabled() ? routed + m.moe.shared_experts * double(m.moe.shared_ffn_hidden) * matrices * h / l.tp
                                       : dense;
    const double attention = m.mla.enabled() ? mlaMatrixParams(m) : 2.0 * h * m.qDim() + 2.0 * h * m.kvDim();
    // The shard group spans zero_group x cp devices (gradients reduce over dp x cp); the experts'
    // the same share of their edp group (CostModel's rule).
    const int shards = l.zero_stage > 0 ? l.zeroGroupSize() * l.cp : 1;
    const int expertShards =
        l.zero_stage > 0 ? std::max(1, int(std::lround(double(l.expertDataParallel()) * l.zeroGroupSize() / l.dp))) : 1;
    // (An FP8/FP4 recipe's primary quantized weights under ZeRO-1/2 replace the bf16 ones: NVFP4's
    // take fewer bytes than bf16; CostModel.cpp, QuantizationRecipe.h.)
    const QuantizationRecipe recipe = quantizationRecipe(p.training.precision);
    const double weightShare = recipe.quantized && recipe.primary_weights && (l.zero_stage == 1 || l.zero_stage == 2)
                                   ? std::min(1.0, recipe.weight_copy_bytes / 2.0)
                                   : 1.0;
    auto stateBytes = [&](double params, int group) {
        const TrainingSpec& t = p.training;
        const ModelStateBytes s = modelStateBytes(params, l.zero_stage, group, t.precision, t.optimizer, t.main_grads);
        return weightShare * s.weights + s.gradients + (l.offload == Offload::Optimizer ? 0.0 : s.optimizer);
    };
    // Per layer (replicated KV heads only add to this).
    const double denseLayer = stateBytes(attention / l.tp + dense, shards);
    const double moeLayer = stateBytes(attention / l.tp + moe - routed, shards) + stateBytes(routed, expertShards);
    return {denseLayer, m.moe.enabled() ? moeLayer : denseLayer};
}

// Of any layer (a model with dense and MoE layers: the smaller).
double layerStateBytesLowerBound(const ModelSpec& m, const LayerStateBytes& b)
{
    const bool mixed = m.moe.enabled() && m.moeLayers(0, m.layers) < m.layers;
    return !m.moe.enabled() ? b.dense : mixed ? std::min(b.dense, b.moe) : b.moe;
}

// The states of the layers of the stages the memory figure compares (the mesh's first, last
// and middle entries), at least.
std::array<double, 3> stageStateBytes(const StepTimeBound::Mesh& mesh, const LayerStateBytes& states)
{
    std::array<double, 3> out{};
    for (size_t k = 0; k < 3; ++k)
        out[k] = states.stage(mesh.dense[k], mesh.moe[k], mesh.either[k]);
    return out;
}

// The stages the memory figure compares: first, last, and the second under an uneven split
// (with the middle one's costs: CostModel.cpp, memSecond).
int memoryStages(const Layout& l) { return l.unevenPipeline() && l.pp > 2 ? 3 : 2; }

// The memory of the peak stage at least: the most of the stages' states and activations, with the reserve.
double stagesMemoryBytes(const std::array<double, 3>& states, const std::array<double, 3>& activations, int stages,
                         double reserve)
{
    double most = 0;
    for (size_t k = 0; k < size_t(stages); ++k)
        most = std::max(most, states[k] + activations[k]);
    return (reserve + most) * (1 - 1e-9);
}

double reserveBytes(const CostModel& model)
{
    return model.params().reserve_fraction * model.problem().cluster.node.chip.hbmBytesPerDevice();
}

// memoryLowerBound() of a layout whose layers' states are `states`.
double memoryLowerBoundOf(const CostModel& model, const Layout& l, const LayerStateBytes& states)
{
    const ModelSpec& m = model.problem().model;
    return layerStateBytesLowerBound(m, states) * double(m.totalLayers() / l.pp) + reserveBytes(model);
}

} // namespace

double memoryLowerBound(const CostModel& model, const Layout& l)
{
    return memoryLowerBoundOf(model, l, layerStateBytesByKind(model, l));
}

double stageMemoryLowerBound(const CostModel& model, const StepTimeBound& bound, const Layout& l)
{
    const StepTimeBound::Mesh mesh = bound.mesh(l);
    return std::max(memoryLowerBound(model, l), stagesMemoryBytes(stageStateBytes(mesh, layerStateBytesByKind(model, l)),
                                                                  bound.activationBytes(mesh, l), memoryStages(l),
                                                                  reserveBytes(model)));
}

namespace {

using Clock = std::chrono::steady_clock;

// Reasons counted by index in the hot loop, named when merged.
enum ReasonIndex : int {
    kOutOfMemory,
    kOverLimit,
    kMissingFigure,
    kNoFinite,
    kSpSequence,
    kInterleavedMicroBatches,
    kReasonCount
};
const char* reasonName(int r)
{
    switch (r) {
    case kOutOfMemory: return kReasonOutOfMemory;
    case kOverLimit: return kReasonOverLimit;
    case kMissingFigure: return toString(Infeasibility::MissingHardwareFigure);
    case kNoFinite: return kReasonNoFinitePrediction;
    case kSpSequence: return "sp: tp x cp does not divide the sequence";
    case kInterleavedMicroBatches: return "interleaved: micro-batches not a multiple of pp";
    }
    return "?";
}

struct MeshShape {
    int dp, tp, pp, cp;
    int first_stage_layers = 0, last_stage_layers = 0;  // the shape's pipeline split (0: even)
    PipelineLayoutRef pipeline_layout;                   // ... or the space's explicit layout

    // A layout of this shape, every other field at its default.
    Layout layout() const
    {
        Layout l;
        l.dp = dp;
        l.tp = tp;
        l.pp = pp;
        l.cp = cp;
        l.first_stage_layers = first_stage_layers;
        l.last_stage_layers = last_stage_layers;
        l.pipeline_layout = pipeline_layout;
        if (pipeline_layout) {  // its chunks over pp set v, and the schedule when more than one
            l.virtual_stages = std::max(1, pipeline_layout->chunkCount() / std::max(1, pp));
            if (l.virtual_stages > 1)
                l.schedule = PipelineSchedule::Interleaved;
        }
        return l;
    }
};

// The pipeline split the search gives pp stages of `layers` layers: the space's fixed one, else
// the even split, else (pp not dividing the layers; decoder or encoder stacks) Megatron-LM's
// uneven one with the end stages lighter (they also hold the embedding and the loss): the most
// layers k <= the middle stages' share on each end (126 over 16: 7 + 14 x 8 + 7), at pp = 2
// the extra layer on the first. Empty when there is none.
std::optional<std::pair<int, int>> pipelineSplit(const SearchSpace& space, const ModelSpec& m, int pp)
{
    const int layers = m.totalLayers();
    if (space.pipeline_layout)  // (the layout's own stages: pp must divide its chunks)
        return space.pipeline_layout->chunkCount() % pp == 0 ? std::optional(std::pair{0, 0})
                                                                                 : std::nullopt;
    if (space.first_stage_layers || space.last_stage_layers)
        return std::pair{space.first_stage_layers.value_or(0), space.last_stage_layers.value_or(0)};
    if (layers % pp == 0)
        return std::pair{0, 0};
    if (m.family == ModelFamily::EncoderDecoder || pp < 2)
        return std::nullopt;
    if (pp == 2)
        return std::pair{layers - layers / 2, layers / 2};
    for (int k = layers / pp; k >= 1; --k)
        if ((layers - 2 * k) % (pp - 2) == 0 && k <= (layers - 2 * k) / (pp - 2))
            return std::pair{k, k};
    // No equal ends: the middle stages' share m as large as leaves the two ends 1..m layers each,
    // the first the extra one (as at pp = 2; DeepSeek-V3's 61 layers over 16 stages: 3 + 14 x 4 + 2).
    for (int m = (layers + pp - 1) / pp; m >= 1; --m) {
        const int rest = layers - (pp - 2) * m;
        if (rest >= 2 && rest <= 2 * m)
            return std::pair{rest - rest / 2, rest / 2};
    }
    return std::nullopt;
}

std::vector<std::int64_t> divisors(std::int64_t n)
{
    std::vector<std::int64_t> small, large;
    for (std::int64_t d = 1; d * d <= n; ++d)
        if (n % d == 0) {
            small.push_back(d);
            if (d != n / d)
                large.push_back(n / d);
        }
    small.insert(small.end(), large.rbegin(), large.rend());
    return small;
}

bool powerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// What one worker found. Merged after all workers joined.
struct WorkerResult {
    explicit WorkerResult(Objective o) : objective(o) {}
    Objective objective;
    std::vector<Plan> heap;  // top-k, worst on top (std heap ordered by planBetter)
    std::vector<Plan> infeasible_heap;  // the same for priced layouts that do not fit
    double heap_worst = 0, infeasible_worst = 0;  // the objective of each heap's front (once it has one)
    PlanFront step_memory;
    PlanFront time_cost;
    std::array<std::int64_t, kReasonCount> reasons{};
    std::map<std::string, std::int64_t> other_reasons;
    std::int64_t candidates = 0, evaluated = 0, pruned = 0, pruned_by_time = 0, feasible = 0;
};

class Searcher {
public:
    Searcher(const CostModel& model, const SearchSpace& space, const SearchOptions& options)
        : model_(model), space_(space), options_(options), problem_(model.problem()), time_bound_(model)
    {
        capacity_ = problem_.cluster.node.chip.hbmBytesPerDevice();
        limit_ = space.max_memory_fraction * capacity_;
        top_k_ = std::max(1, options.top_k);
        // Room for the variants folded into the top plans (collapseVariants).
        keep_k_ = top_k_ * kVariantHeadroom;
        space_framework_ = options.framework;
        // Fixed keys the generator passes on as they are, for validate() to name the layouts they
        // make illegal; without them the generator's layouts are legal by construction.
        generator_legal_ = !space.zero_group && !space.first_stage_layers && !space.last_stage_layers &&
                           !space.pipeline_layout &&
                           !space.recompute_method && !space.recompute_layers && !space.recompute_modules &&
                           !space.offload_activations && !space.cp_comm && !space.moe_dispatcher;
        if (space_framework_)
            frameworkReason_ = std::string("not runnable by ") + toString(*space_framework_);
    }

    SearchResult run();

private:
    void enumerateMeshShapes(SearchResult& result);
    void worker(WorkerResult& out);
    bool searchShape(const MeshShape& shape, WorkerResult& out);
    struct ZeroSibling;
    ZeroSibling consider(const Layout& layout, double bound, WorkerResult& out);
    struct RankBound {
        double step, objective, tokens_per_s;
    };
    RankBound rankBound(double step) const;
    // Time and cost to train at a throughput: CostModel::evaluate's expressions (monotone in it).
    std::pair<double, double> timeAndCost(double tokensPerS) const;
    bool cannotRank(const RankBound& bound, double memoryBound, const WorkerResult& out) const;
    void orderMeshShapes();
    bool cancelled() const { return options_.cancel && options_.cancel->load(std::memory_order_relaxed); }

    const CostModel& model_;
    const SearchSpace& space_;
    const SearchOptions& options_;
    const Problem& problem_;
    StepTimeBound time_bound_;
    double capacity_ = 0, limit_ = 0;
    bool generator_legal_ = false;
    int top_k_ = 1;
    static constexpr int kVariantHeadroom = 8;
    int keep_k_ = kVariantHeadroom;  // plans each worker keeps: the top-k and their likely variants
    std::optional<ExportFormat> space_framework_;  // only layouts this framework runs
    std::string frameworkReason_;

    std::vector<MeshShape> shapes_;
    std::atomic<std::size_t> next_{0};
    std::atomic<std::int64_t> done_{0};
    std::atomic<std::int64_t> evaluated_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
    int running_ = 0;
};

void Searcher::enumerateMeshShapes(SearchResult& result)
{
    const ModelSpec& m = problem_.model;
    const TrainingSpec& t = problem_.training;
    const std::int64_t devices = problem_.cluster.devices();
    auto count = [&](const std::string& reason) { ++result.stats.infeasible_by_reason[reason]; };
    for (std::int64_t tp : divisors(devices)) {
        if (!space_.tp.contains(int(std::min<std::int64_t>(tp, INT_MAX))))
            continue;
        for (std::int64_t pp : divisors(devices / tp)) {
            if (!space_.pp.contains(int(std::min<std::int64_t>(pp, INT_MAX))))
                continue;
            for (std::int64_t cp : divisors(devices / tp / pp)) {
                const std::int64_t dp = devices / tp / pp / cp;
                if (!space_.cp.contains(int(std::min<std::int64_t>(cp, INT_MAX))) ||
                    !space_.dp.contains(int(std::min<std::int64_t>(dp, INT_MAX))))
                    continue;
                ++result.stats.mesh_shapes;
                MeshShape s{int(dp), int(tp), int(pp), int(cp)};
                // The model's rules, cheapest first; the first broken one is the reason.
                if (m.heads % s.tp != 0) {
                    count("mesh: tp does not divide heads");
                    continue;
                }
                if (m.kv_heads % s.tp != 0 && s.tp % m.kv_heads != 0) {
                    count("mesh: tp neither divides nor is a multiple of kv_heads");
                    continue;
                }
                if (m.ffn_hidden % s.tp != 0) {
                    count("mesh: tp does not divide ffn_hidden");
                    continue;
                }
                const std::optional<std::pair<int, int>> split = pipelineSplit(space_, m, s.pp);
                if (!split) {
                    count("mesh: pp does not divide layers");
                    continue;
                }
                s.first_stage_layers = split->first;
                s.last_stage_layers = split->second;
                s.pipeline_layout = space_.pipeline_layout;
                if (t.seq_len % s.cp != 0) {
                    count("mesh: cp does not divide the sequence");
                    continue;
                }
                if (s.cp > 1 && !t.flash_attention) {
                    // Transformer Engine runs context parallelism on fused attention only (d0067d0,
                    // dot_product_attention/utils.py): not a layout of a problem that trains unfused
                    // attention. (predict prices one as fused, which is what would run.)
                    count(kReasonCpNeedsFusedAttention);
                    continue;
                }
                if (t.global_batch % s.dp != 0) {
                    count("mesh: dp does not divide the global batch");
                    continue;
                }
                if (space_.zero_group && *space_.zero_group > 0 && s.dp % *space_.zero_group != 0) {
                    count("mesh: zero_group does not divide dp");
                    continue;
                }
                // The rules of core/Layout.h have the last word (a rule added there and not here
                // is counted under its own message instead of being searched).
                Layout probe = s.layout();
                // MoE under tp is trained with sp (core's rule); the mesh is legal if that layout is.
                probe.sequence_parallel = m.moe.enabled() && s.tp > 1;
                const FieldErrors errors = validate(probe, m, problem_.cluster, t);
                if (!errors.empty()) {
                    count("mesh: " + errors.front().text());
                    continue;
                }
                shapes_.push_back(s);
            }
        }
    }
}

// What every ZeRO sibling of a priced layout (the same fields but zero_stage, zero_group,
// offload and overlap_param_gather) takes at least, read from its prediction: the step time
// less the terms that depend on the ZeRO configuration (data-parallel/ZeRO traffic, the
// optimizer step, offload); on the priced layout's peak-memory stage, its activations, its
// buffers (ZeRO-3's gathered parameters aside: all of them unless priced under ZeRO-3) and the
// reserve, to which a sibling adds at least its own states of the stage's layers. (Margins for
// the rounding of sums taken in another order than the cost model's.)
struct Searcher::ZeroSibling {
    double step_s = std::numeric_limits<double>::quiet_NaN();  // NaN: not priced
    double memory_bytes = 0;
    int memory_stage = 0;
    // The slowest stage's compute and recomputation per step: no ZeRO configuration's
    // data-parallel traffic hides behind more (StepTimeBound::zeroStepTime).
    double window_s = 0;

    static ZeroSibling of(const Prediction& pr, const Layout& l)
    {
        const TimeBreakdown& t = pr.time_s;
        const MemoryBreakdown& m = pr.memory_bytes;
        ZeroSibling z;
        z.step_s = (t.compute + t.recompute + t.tp_comm + t.cp_comm + t.pp_comm + t.ep_comm + t.bubble) * (1 - 1e-9);
        z.memory_bytes = (m.activations + (l.zero_stage == 3 ? 0.0 : m.buffers) + m.reserve) * (1 - 1e-9);
        z.memory_stage = pr.memory_stage;
        z.window_s = t.compute + t.recompute;
        return z;
    }
};

// A step-time bound with the objective, time and cost it implies, computed by the cost model's
// own expressions (CostModel.cpp, evaluate), which are monotone in the step time: a layout's
// figures can only be worse (rounding is monotone too).
Searcher::RankBound Searcher::rankBound(double step) const
{
    const TrainingSpec& t = problem_.training;
    const double tokensPerS = double(t.global_batch) * t.seq_len / step;
    if (options_.objective == Objective::Throughput)
        return {step, -tokensPerS, tokensPerS};  // (the time and cost only where cannotRank needs them)
    const auto [time, cost] = timeAndCost(tokensPerS);
    return {step, options_.objective == Objective::TimeToTrain ? time : cost, tokensPerS};
}

std::pair<double, double> Searcher::timeAndCost(double tokensPerS) const
{
    const double time = problem_.training.tokens_to_train / tokensPerS;
    return {time, time / 3600.0 * problem_.cluster.nodes * problem_.cluster.node.price_per_node_hour_usd};
}

// Whether no layout with a step time >= b.step and memory >= memoryBound can change this
// worker's results: its objective is worse than the worst of a full infeasible top and, unless
// it cannot fit under the limit (then it is priced into that top only, Searcher::consider), of a
// full top (keep_k_: the variants too), and each front has a point that dominates it. Strictly
// worse objectives only, so that no tie broken by memory or layout could let it in.
bool Searcher::cannotRank(const RankBound& b, double memoryBound, const WorkerResult& out) const
{
    if (!std::isfinite(b.step) || !(b.step > 0))
        return false;
    if (int(out.infeasible_heap.size()) < top_k_ ||
        !(b.objective > out.infeasible_worst))
        return false;
    if (memoryBound > limit_)
        return true;
    if (int(out.heap.size()) < keep_k_)
        return false;
    if (!(b.objective > out.heap_worst) ||
        !out.step_memory.dominates(b.step, memoryBound))
        return false;
    const auto [time, cost] = timeAndCost(b.tokens_per_s);
    return out.time_cost.dominates(time, cost);
}

// Likely-good shapes first (the least step-time bound at one sample per micro-batch), so that
// the heaps and fronts fill with good plans early and the bound prunes more. Any order gives
// the same results.
void Searcher::orderMeshShapes()
{
    std::vector<std::pair<double, std::size_t>> keyed;
    keyed.reserve(shapes_.size());
    for (std::size_t i = 0; i < shapes_.size(); ++i) {
        const Layout l = shapes_[i].layout();
        keyed.emplace_back(time_bound_.stepTimeWithoutRecompute(time_bound_.mesh(l), l), i);
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<MeshShape> ordered;
    ordered.reserve(shapes_.size());
    for (const auto& [key, i] : keyed)
        ordered.push_back(shapes_[i]);
    shapes_ = std::move(ordered);
}

// Every layout of one mesh shape. Returns false when cancelled.
bool Searcher::searchShape(const MeshShape& s, WorkerResult& out)
{
    const ModelSpec& m = problem_.model;
    const TrainingSpec& t = problem_.training;
    const int perReplica = t.global_batch / s.dp;
    // Interleaving splits every stage's layers into v chunks: v divides each stage's count.
    Layout split;
    split.pp = s.pp;
    split.first_stage_layers = s.first_stage_layers;
    split.last_stage_layers = s.last_stage_layers;
    split.pipeline_layout = s.pipeline_layout;
    const int layersPerStage = std::gcd(std::gcd(split.stageLayers(m.totalLayers(), 0),
                                                 split.stageLayers(m.totalLayers(), s.pp - 1)),
                                        split.stageLayers(m.totalLayers(), s.pp > 2 ? 1 : 0));
    const int devicesPerNode = problem_.cluster.node.devicesPerNode();
    const int nodeReplicas = devicesPerNode % (s.tp * s.cp) == 0 ? devicesPerNode / (s.tp * s.cp) : 0;

    // Micro-batch sizes (with their micro-batch count) inside the bounds.
    std::vector<std::pair<int, int>> mbs;
    for (std::int64_t mb : divisors(perReplica)) {
        const int micro = perReplica / int(mb);
        if (space_.mb.contains(int(mb)) && micro >= space_.min_micro_batches)
            mbs.emplace_back(int(mb), micro);
    }
    // Schedules with their v.
    std::vector<std::pair<PipelineSchedule, int>> schedules;
    // An explicit layout fixes v (its chunks over pp): that v's schedules alone.
    const int layoutV = s.pipeline_layout ? s.pipeline_layout->chunkCount() / s.pp : 0;
    if (layoutV > 0) {
        if (layoutV == 1 && space_.v.contains(1)) {
            for (PipelineSchedule sc : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
                if (space_.allows(sc))
                    schedules.emplace_back(sc, 1);
        } else if (layoutV > 1 && s.pp >= 2 && space_.allows(PipelineSchedule::Interleaved) &&
                   space_.v.contains(layoutV)) {
            schedules.emplace_back(PipelineSchedule::Interleaved, layoutV);
        }
    } else if (space_.v.contains(1)) {
        for (PipelineSchedule sc : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe})
            if (space_.allows(sc))
                schedules.emplace_back(sc, 1);
    }
    if (layoutV == 0 && s.pp >= 2 && space_.allows(PipelineSchedule::Interleaved)) {
        for (std::int64_t v : divisors(layersPerStage))
            if (v >= 2 && space_.v.contains(int(v)))
                schedules.emplace_back(PipelineSchedule::Interleaved, int(v));
    }
    std::vector<bool> sps;
    for (bool sp : {false, true}) {
        if ((space_.sequence_parallel && *space_.sequence_parallel != sp) || (sp && s.tp == 1))
            continue;
        if (!sp && s.tp > 1 && m.moe.enabled())
            continue;  // MoE under tp trains with sp (core's rule, Megatron-LM's)
        sps.push_back(sp);
    }
    // ZeRO stage, shard group, offload.
    struct ZeroConfig {
        int stage, group;
        Offload offload;
    };
    std::vector<ZeroConfig> meshZeros;
    for (int z = std::max(0, space_.zero.lo); z <= std::min(3, space_.zero.hi); ++z) {
        if (z == 0 && space_.zero_group && *space_.zero_group > 0)
            continue;  // a fixed shard group implies ZeRO
        std::vector<int> groups;
        if (space_.zero_group) {
            groups.push_back(*space_.zero_group);  // validate() decides (a group needs zero >= 1)
        } else {
            groups.push_back(0);
            if (z >= 1)
                for (std::int64_t g : divisors(s.dp))
                    if (g < s.dp && (g > 1 || s.cp > 1) && (powerOfTwo(int(g)) || g == nodeReplicas))
                        groups.push_back(int(g));
        }
        for (int g : groups)
            for (Offload o : {Offload::None, Offload::Optimizer})
                if (space_.allows(o) && (o == Offload::None || z >= 1))
                    meshZeros.push_back({z, g, o});
    }

    // Expert grids (MoE): every ep dividing the routed experts, with etp = tp (the default, 0) or
    // a power of two up to a node's devices dividing the experts' ffn_hidden, ep x etp dividing
    // the stage's tp x cp x dp devices (Layout.h: Megatron-LM's expert grid).
    struct ExpertConfig {
        int ep, etp;
    };
    std::vector<ExpertConfig> expertGrids;
    if (!m.moe.enabled()) {
        expertGrids.push_back({1, 0});
    } else {
        const std::int64_t stageDevices = std::int64_t(s.tp) * s.cp * s.dp;
        std::vector<int> etps;
        for (int etp = 1; etp <= devicesPerNode; etp *= 2)
            if (m.expertFfn() % etp == 0)
                etps.push_back(etp);
        if (std::find(etps.begin(), etps.end(), s.tp) == etps.end() && m.expertFfn() % s.tp == 0)
            etps.push_back(s.tp);
        for (std::int64_t ep : divisors(m.moe.experts))
            for (int etp : etps)
                if (space_.ep.contains(int(ep)) && space_.etp.contains(etp) && stageDevices % (ep * etp) == 0)
                    expertGrids.push_back({int(ep), etp == s.tp ? 0 : etp});
    }

    Layout l = s.layout();
    // The sequence exchange of cp > 1 (SearchSpace::cp_comm): all-to-all where asked for (and for
    // DeepSpeed, whose context parallelism is Ulysses') and the heads split over cp, else the ring.
    if (s.cp > 1 && space_.cp_comm.value_or(space_framework_ == ExportFormat::DeepSpeed ? CpComm::A2A : CpComm::P2P) ==
                        CpComm::A2A) {
        if (allToAllCpSplitsHeads(problem_.model, s.tp, s.cp))
            l.cp_comm = CpComm::A2A;
    }
    StepTimeBound::Mesh meshBound = time_bound_.mesh(l);
    const double reserve = reserveBytes(model_);
    const int stages = memoryStages(l);
    const bool overlapPrecision = t.precision != Precision::FP32;
    // A recomputation mode with what goes with it: its method and layers, the all-to-all overlap.
    auto setRecompute = [&](Layout& layout, Recompute r) {
        layout.recompute = r;
        layout.ep_comm_overlap = space_.ep_comm_overlap && layout.ep > 1 && r != Recompute::Full &&
                                 layout.moe_dispatcher != MoeDispatcher::AllGather &&
                                 (s.pp == 1 || layout.schedule == PipelineSchedule::Interleaved) && overlapPrecision;
        const bool partial = r == Recompute::Full;
        layout.recompute_method = partial ? space_.recompute_method.value_or(RecomputeMethod::Uniform)
                                          : RecomputeMethod::Uniform;
        layout.recompute_layers = partial ? space_.recompute_layers.value_or(0) : 0;
        layout.recompute_modules = r == Recompute::Selective ? space_.recompute_modules.value_or(0) : 0;
        layout.offload_activations = r == Recompute::None ? space_.offload_activations.value_or(0) : 0;
        if (layout.recomputes(kRecomputeMoe))  // (Megatron-LM overlaps no recomputed MoE layer: Layout.cpp)
            layout.ep_comm_overlap = false;
    };
    // The ZeRO configurations innermost: they change only the data-parallel, optimizer and offload
    // terms of the step (CostModel.cpp: stageCost() and every other term of evaluate() read no
    // ZeRO field), so the first one priced bounds its siblings' step time and memory (ZeroSibling).
    // The ZeRO configurations of one expert grid: HSDP's replicas must divide its edp (core's rule,
    // Megatron-LM's distributed-optimizer instances).
    std::vector<ZeroConfig> zeros;
    zeros.reserve(meshZeros.size());
    std::vector<double> memoryBounds(meshZeros.size());
    // The states of each memory stage's layers (first, last, middle), at least.
    std::vector<std::array<double, 3>> stageStates(meshZeros.size());
    std::vector<StepTimeBound::ZeroTerms> zeroTerms(meshZeros.size());
    std::vector<char> zeroTermsKnown(meshZeros.size());  // (computed when first asked for, per expert grid)
    std::vector<std::size_t> unbounded;  // siblings the step-time bound does not apply to
    std::vector<char> bounded(meshZeros.size());  // ... and whether it applies, by sibling
    // The token dispatcher of a MoE model (SearchSpace::moe_dispatcher): the fixed one on the expert
    // grids that can run it (DeepEP: etp x ep > 1, NVLink domains of at most 8 GPUs; Layout.cpp's
    // rules), else Megatron-LM's alltoall.
    const ClusterSpec& cluster = problem_.cluster;
    const bool wideDomain = cluster.node.scaleUpChips() * cluster.node.chip.devices_per_chip > 8;
    auto dispatcherFor = [&](int ep, int etp) {
        const MoeDispatcher d = space_.moe_dispatcher.value_or(MoeDispatcher::AllToAll);
        const std::int64_t group = std::int64_t(ep) * (etp > 0 ? etp : s.tp);
        if (!m.moe.enabled() || (d == MoeDispatcher::DeepEp && (group < 2 || (wideDomain && group > 8))))
            return MoeDispatcher::AllToAll;
        return d;
    };
    for (const ExpertConfig& e : expertGrids) {
        l.ep = e.ep;
        l.etp = e.etp;
        l.moe_dispatcher = dispatcherFor(e.ep, e.etp);
        time_bound_.setExpertGrid(meshBound, l);
        zeros.clear();
        const int edp = l.expertDataParallel();
        for (const ZeroConfig& z : meshZeros)  // (a fixed group not dividing dp: validate() names it)
            if (z.group == 0 || s.dp % z.group != 0 || edp % (s.dp / z.group) == 0)
                zeros.push_back(z);
        // Depends only on the mesh shape, the ZeRO configuration and the expert grid: once per pair.
        unbounded.clear();
        for (std::size_t i = 0; i < zeros.size(); ++i) {
            l.zero_stage = zeros[i].stage;
            l.zero_group = zeros[i].group;
            l.offload = zeros[i].offload;
            const LayerStateBytes states = layerStateBytesByKind(model_, l);
            memoryBounds[i] = memoryLowerBoundOf(model_, l, states);
            stageStates[i] = stageStateBytes(meshBound, states);
            zeroTermsKnown[i] = 0;
            // The step-time bound applies only where the checks before pricing would not reject
            // the layout anyway (those keep their own reasons).
            bounded[i] = !(memoryBounds[i] > limit_ || (l.offload == Offload::Optimizer && !model_.offloadPriced()));
            if (!bounded[i])
                unbounded.push_back(i);
        }
        const auto boundedSiblings = std::int64_t(zeros.size() - unbounded.size());
        // The least memory of the siblings the bound applies to, with a memory stage's activations
        // (the stages' least states each: no more than any one sibling's).
        std::array<double, 3> fewestStates{};
        fewestStates.fill(std::numeric_limits<double>::infinity());
        double fewestBound = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < zeros.size(); ++i)
            if (bounded[i]) {
                fewestBound = std::min(fewestBound, memoryBounds[i]);
                for (size_t k = 0; k < 3; ++k)
                    fewestStates[k] = std::min(fewestStates[k], stageStates[i][k]);
            }
        auto leastMemory = [&](const std::array<double, 3>& activations) {
            return std::max(fewestBound, stagesMemoryBytes(fewestStates, activations, stages, reserve));
        };
        auto zeroTermsOf = [&](std::size_t i) -> const StepTimeBound::ZeroTerms& {
            if (!zeroTermsKnown[i]) {
                Layout z = l;
                z.zero_stage = zeros[i].stage;
                z.zero_group = zeros[i].group;
                z.offload = zeros[i].offload;
                zeroTerms[i] = time_bound_.zeroTerms(meshBound, z);
                zeroTermsKnown[i] = 1;
            }
            return zeroTerms[i];
        };
        // A group of siblings none of which can rank: those the bound applies to counted as
        // candidates pruned by time (without validate(), as below), the others considered.
        auto skipSiblings = [&] {
            out.candidates += boundedSiblings;
            out.pruned += boundedSiblings;
            out.pruned_by_time += boundedSiblings;
            for (std::size_t i : unbounded) {
                const ZeroConfig& z = zeros[i];
                l.zero_stage = z.stage;
                l.zero_group = z.group;
                l.offload = z.offload;
                l.overlap_param_gather = space_.overlap_param_gather && z.stage >= 1 && z.stage <= 2;
                consider(l, memoryBounds[i], out);
            }
        };
        for (bool sp : sps) {
            l.sequence_parallel = sp;
            l.tp_comm_overlap = space_.tp_comm_overlap && sp;
            for (const auto& [mb, micro] : mbs) {
                l.micro_batch = mb;
                if (cancelled())
                    return false;
                // The whole micro-batch size at once: the least step-time bound of its schedules with
                // nothing recomputed and every overlap on that the layout can take, and the least
                // activations of its schedules and recomputation modes (each bound is monotone in
                // them). If no sibling can rank with those, none of the size's layouts can.
                const StepTimeBound::MicroBatch perMb = time_bound_.microBatch(meshBound, l);
                bool wholeSizeSkipped = false;
                if (options_.prune_by_time && boundedSiblings > 0 && !(sp && t.seq_len % (s.tp * s.cp) != 0)) {
                    Layout probe = l;
                    double step = std::numeric_limits<double>::infinity();
                    std::array<double, 3> fewest{};
                    fewest.fill(std::numeric_limits<double>::infinity());
                    for (const auto& [schedule, v] : schedules) {
                        if (schedule == PipelineSchedule::Interleaved && micro % s.pp != 0)
                            continue;
                        probe.schedule = schedule;
                        probe.virtual_stages = v;
                        // (Set up as no recomputation: every mode's bound is at least this one.)
                        setRecompute(probe, Recompute::None);
                        step = std::min(step, time_bound_.stepTimeParts(meshBound, perMb, probe, false).step_s);
                        for (Recompute r : space_.recomputes) {
                            setRecompute(probe, r);
                            const std::array<double, 3> activations = time_bound_.activationBytes(meshBound, perMb, probe);
                            for (size_t k = 0; k < 3; ++k)
                                fewest[k] = std::min(fewest[k], activations[k]);
                        }
                    }
                    const double least = leastMemory(fewest);
                    wholeSizeSkipped = std::isfinite(step) && std::isfinite(least) && cannotRank(rankBound(step), least, out);
                }
                for (const auto& [schedule, v] : schedules) {
                    l.schedule = schedule;
                    l.virtual_stages = v;
                    // Under fused attention, selective recomputation recomputes nothing (the kernel
                    // already does): its step-time terms are those of no recomputation (CostModel.cpp
                    // reads Recompute::Selective only without flash, apart from memory), so the two
                    // bound each other's ZeRO siblings' time, not their memory.
                    ZeroSibling notFull;  // the first priced of a mode other than full recomputation
                    for (Recompute r : space_.recomputes) {
                        setRecompute(l, r);
                        // Rules that depend on the inner keys (not on ZeRO): every ZeRO sibling breaks them.
                        const auto siblings = std::int64_t(zeros.size());
                        if (sp && t.seq_len % (s.tp * s.cp) != 0) {
                            out.reasons[kSpSequence] += siblings;
                            continue;
                        }
                        if (schedule == PipelineSchedule::Interleaved && micro % s.pp != 0) {
                            out.reasons[kInterleavedMicroBatches] += siblings;
                            continue;
                        }
                        if (wholeSizeSkipped) {
                            skipSiblings();
                            continue;
                        }
                        // (Recomputed modules other than core_attn, or offloaded activations, add time of
                        // their own: no sharing then.)
                        const bool sharesTime = t.flash_attention && r != Recompute::Full &&
                                                (l.recomputedModules() & ~unsigned(kRecomputeCoreAttn)) == 0 &&
                                                l.offload_activations == 0;
                        const StepTimeBound::Seconds own = time_bound_.stepTimeParts(meshBound, perMb, l, true);
                        // Configuration i's step at least: the bound with its ZeRO traffic net of the
                        // overlap behind the bound's busy time and its optimizer step, or a priced
                        // sibling's ZeRO-independent terms with its traffic net of that one's compute.
                        auto siblingStep = [&](std::size_t i, const ZeroSibling& priced) {
                            double step = own.step_s + time_bound_.zeroStepTime(zeroTermsOf(i), micro, time_bound_.busyWindow(own));
                            if (sharesTime && !std::isnan(notFull.step_s))
                                step = std::max(step, notFull.step_s +
                                                          time_bound_.zeroStepTime(zeroTermsOf(i), micro, notFull.window_s));
                            if (!std::isnan(priced.step_s))
                                step = std::max(step, priced.step_s + time_bound_.zeroStepTime(zeroTermsOf(i), micro, priced.window_s));
                            return step;
                        };
                        // Each sibling's memory at least: the states of a memory stage's layers with
                        // that stage's activations (StepTimeBound) and the reserve. When the least of
                        // them cannot rank, no sibling the bound applies to can: all skipped at once.
                        std::array<double, 3> activations{};
                        if (options_.prune_by_time) {
                            activations = time_bound_.activationBytes(meshBound, perMb, l);
                            // (The ZeRO terms, >= 0, are left to each sibling's own test below.)
                            const double fastest =
                                std::max(own.step_s, sharesTime && !std::isnan(notFull.step_s) ? notFull.step_s : 0.0);
                            if (boundedSiblings > 0 && cannotRank(rankBound(fastest), leastMemory(activations), out)) {
                                skipSiblings();
                                continue;
                            }
                        }
                        ZeroSibling sibling;  // the first ZeRO configuration priced
                        size_t siblingStage = 0;  // its peak memory stage's entry of the mesh (first, last, middle)
                        for (std::size_t i = 0; i < zeros.size(); ++i) {
                            const ZeroConfig& z = zeros[i];
                            l.zero_stage = z.stage;
                            l.zero_group = z.group;
                            l.offload = z.offload;
                            // Overlap options are the framework's, not a search dimension: on wherever
                            // the space turns them on and the layout can use them.
                            l.overlap_param_gather = space_.overlap_param_gather && z.stage >= 1 && z.stage <= 2;
                            const double bound = memoryBounds[i];
                            // (A sibling's memory: at least the priced one's ZeRO-independent bytes
                            // on its peak stage plus this configuration's states of that stage's layers.)
                            const double strong =
                                options_.prune_by_time
                                    ? std::max(bound, stagesMemoryBytes(stageStates[i], activations, stages, reserve))
                                    : bound;
                            const double memoryBound =
                                std::isnan(sibling.step_s)
                                    ? strong
                                    : std::max(strong, sibling.memory_bytes + stageStates[i][siblingStage] * (1 - 1e-9));
                            // The step-time bound applies only where the checks before pricing would
                            // not reject the layout anyway (those keep their own reasons).
                            const bool timeBounded = options_.prune_by_time && bound <= limit_ &&
                                                     (l.offload != Offload::Optimizer || model_.offloadPriced());
                            if (timeBounded && cannotRank(rankBound(siblingStep(i, sibling)), memoryBound, out)) {
                                // Counted as a candidate without validate(): the generator makes the
                                // layouts validate() accepts (it checks every evaluated one).
                                ++out.candidates;
                                ++out.pruned;
                                ++out.pruned_by_time;
                                continue;
                            }
                            const ZeroSibling priced = consider(l, bound, out);
                            if (std::isnan(sibling.step_s) && std::isfinite(priced.step_s) &&
                                std::isfinite(priced.memory_bytes)) {
                                sibling = priced;
                                // (The second stage's costs are the middle one's: CostModel.cpp, memSecond.)
                                siblingStage = priced.memory_stage == 0 ? 0 : priced.memory_stage == s.pp - 1 ? 1 : 2;
                                if (sharesTime && std::isnan(notFull.step_s))
                                    notFull = priced;
                            }
                        }
                    }
                }
            }
        }
    }
    return true;
}

// Prices one layout into the worker's result. Returns what it bounds of its ZeRO siblings (step_s
// NaN when it was not priced).
Searcher::ZeroSibling Searcher::consider(const Layout& l, double bound, WorkerResult& out)
{
    const ZeroSibling kNotPriced;
    // Over the memory bound with a space whose layouts are legal by construction: counted as
    // the time bound counts its layouts, without validate() (the rules' integer divisions were
    // a tenth of a MoE search's cycles, mostly for these).
    if (generator_legal_ && bound > limit_ && (l.offload != Offload::Optimizer || model_.offloadPriced())) {
        ++out.candidates;
        ++out.pruned;
        ++out.reasons[bound > capacity_ ? kOutOfMemory : kOverLimit];
        return kNotPriced;
    }
    // The generator above makes only legal layouts; validate() is the rule book that
    // `predict` uses, so the two cannot drift apart silently: every priced layout passes it.
    // It allocates only on error.
    const FieldErrors errors = validate(l, problem_.model, problem_.cluster, problem_.training);
    if (!errors.empty()) {
        ++out.other_reasons["rule: " + errors.front().text()];
        return kNotPriced;
    }
    ++out.candidates;
    // The cost model cannot price offload without the host link's bandwidth: say so without asking it.
    if (l.offload == Offload::Optimizer && !model_.offloadPriced()) {
        ++out.pruned;
        ++out.reasons[kMissingFigure];
        return kNotPriced;
    }
    if (bound > limit_) {
        ++out.pruned;
        ++out.reasons[bound > capacity_ ? kOutOfMemory : kOverLimit];
        return kNotPriced;
    }
    const Prediction pr = model_.evaluate(l);
    ++out.evaluated;
    const double memory = pr.memory_bytes.total();
    auto worse = [&](const Plan& a, const Plan& b) { return planBetter(out.objective, a, b); };
    auto keep = [&](std::vector<Plan>& heap, const Layout& layout, const Prediction& prediction, const char* why) {
        const int k = &heap == &out.heap ? keep_k_ : top_k_;
        if (int(heap.size()) < k) {
            heap.push_back({layout, prediction, why, {}});
            std::push_heap(heap.begin(), heap.end(), worse);
        } else if (planBetter(out.objective, Plan{layout, prediction, why, {}}, heap.front())) {
            std::pop_heap(heap.begin(), heap.end(), worse);
            heap.back() = {layout, prediction, why, {}};
            std::push_heap(heap.begin(), heap.end(), worse);
        }
        (&heap == &out.heap ? out.heap_worst : out.infeasible_worst) =
            objectiveValue(out.objective, heap.front().prediction);
    };
    if (!std::isfinite(pr.step_time_s) || !(pr.tokens_per_s > 0) || !std::isfinite(memory)) {
        ++out.reasons[pr.feasible ? kNoFinite : pr.reason == Infeasibility::OutOfMemory ? kOutOfMemory : kMissingFigure];
        return ZeroSibling::of(pr, l);
    }
    if (!pr.feasible) {
        const bool oom = pr.reason == Infeasibility::OutOfMemory;
        ++out.reasons[oom ? kOutOfMemory : kMissingFigure];
        if (oom)
            keep(out.infeasible_heap, l, pr, kReasonOutOfMemory);
        return ZeroSibling::of(pr, l);
    }
    if (memory > limit_) {
        ++out.reasons[kOverLimit];
        keep(out.infeasible_heap, l, pr, kReasonOverLimit);
        return ZeroSibling::of(pr, l);
    }
    ++out.feasible;
    const Plan plan{l, pr, {}, {}};
    if (space_framework_) {
        // Checked only when the plan would rank (enter the top or a front): the exporter builds
        // text, and a plan that cannot rank needs no answer. The result is exact; the count of
        // refused layouts covers the ones that were asked.
        const bool ranks = int(out.heap.size()) < keep_k_ || planBetter(out.objective, plan, out.heap.front()) ||
                           !out.step_memory.dominates(pr.step_time_s, memory) ||
                           !out.time_cost.dominates(pr.time_to_train_s, pr.cost_to_train_usd);
        if (!ranks)
            return ZeroSibling::of(pr, l);
        if (const ExportResult exported = exportSettings(*space_framework_, problem_, l); !exported.ok()) {
            --out.feasible;
            // Counted under each feature the framework refused ("not runnable by torchtitan
            // (QK-norm)"), so that plan --framework says what keeps the layouts out; a layout
            // refused for several features counts under each of them.
            for (const ExportRefusal& refused : exported.refused)
                ++out.other_reasons[frameworkReason_ + " (" + refused.feature + ")"];
            return ZeroSibling::of(pr, l);
        }
    }
    keep(out.heap, l, pr, "");
    out.step_memory.insert(pr.step_time_s, memory, plan);
    out.time_cost.insert(pr.time_to_train_s, pr.cost_to_train_usd, plan);
    return ZeroSibling::of(pr, l);
}

void Searcher::worker(WorkerResult& out)
{
    for (;;) {
        const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
        if (i >= shapes_.size() || cancelled())
            break;
        const std::int64_t before = out.evaluated;
        const bool finished = searchShape(shapes_[i], out);
        evaluated_.fetch_add(out.evaluated - before, std::memory_order_relaxed);
        if (!finished)
            break;
        done_.fetch_add(1, std::memory_order_relaxed);
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        --running_;
    }
    wake_.notify_one();
}

SearchResult Searcher::run()
{
    const Clock::time_point start = Clock::now();
    SearchResult result;
    result.objective = options_.objective;
    result.error = objectiveProblem(options_.objective, problem_);
    if (!result.error.empty())
        return result;

    enumerateMeshShapes(result);
    if (options_.prune_by_time)
        orderMeshShapes();

    int threads = options_.threads > 0 ? options_.threads : int(std::thread::hardware_concurrency());
    threads = std::clamp(threads, 1, std::max(1, int(shapes_.size())));
    result.stats.threads = threads;

    std::vector<WorkerResult> results(std::size_t(threads), WorkerResult(options_.objective));
    std::vector<std::thread> pool;
    running_ = threads;
    pool.reserve(std::size_t(threads));
    for (int i = 0; i < threads; ++i)
        pool.emplace_back([this, &results, i] { worker(results[std::size_t(i)]); });

    auto report = [&] {
        if (!options_.progress)
            return;
        SearchProgress p;
        p.done = done_.load(std::memory_order_relaxed);
        p.total = std::int64_t(shapes_.size());
        p.evaluated = evaluated_.load(std::memory_order_relaxed);
        p.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
        p.remaining_s = p.done > 0 ? p.elapsed_s * double(p.total - p.done) / double(p.done) : 0.0;
        options_.progress(p);
    };
    {
        // Progress every 50 ms on this thread, until the last worker leaves.
        constexpr auto kInterval = std::chrono::milliseconds(50);
        Clock::time_point next = start + kInterval;
        std::unique_lock<std::mutex> lock(mutex_);
        while (!wake_.wait_until(lock, next, [this] { return running_ == 0; })) {
            lock.unlock();
            report();
            lock.lock();
            next = std::max(next + kInterval, Clock::now());
        }
    }
    for (std::thread& t : pool)
        t.join();

    // Merge: every operation below is order-independent (sums, a total order, fronts).
    SearchStats& st = result.stats;
    std::vector<Plan> all, allInfeasible;
    for (WorkerResult& w : results) {
        allInfeasible.insert(allInfeasible.end(), w.infeasible_heap.begin(), w.infeasible_heap.end());
        st.candidates += w.candidates;
        st.evaluated += w.evaluated;
        st.pruned += w.pruned;
        st.pruned_by_time += w.pruned_by_time;
        st.feasible += w.feasible;
        for (int r = 0; r < kReasonCount; ++r)
            if (w.reasons[std::size_t(r)] > 0)
                st.infeasible_by_reason[reasonName(r)] += w.reasons[std::size_t(r)];
        for (const auto& [reason, n] : w.other_reasons)
            st.infeasible_by_reason[reason] += n;
        all.insert(all.end(), w.heap.begin(), w.heap.end());
        result.pareto_step_memory.merge(w.step_memory);
        result.pareto_time_cost.merge(w.time_cost);
    }
    std::sort(all.begin(), all.end(),
              [&](const Plan& a, const Plan& b) { return planBetter(options_.objective, a, b); });
    // The global top keep_k_ first (the same for any thread count), then folded.
    if (int(all.size()) > keep_k_)
        all.resize(std::size_t(keep_k_));
    result.top = collapseVariants(all, top_k_, options_.objective);
    std::sort(allInfeasible.begin(), allInfeasible.end(),
              [&](const Plan& a, const Plan& b) { return planBetter(options_.objective, a, b); });
    if (int(allInfeasible.size()) > top_k_)
        allInfeasible.resize(std::size_t(top_k_));
    result.top_infeasible = std::move(allInfeasible);
    st.cancelled = done_.load() < std::int64_t(shapes_.size());
    st.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    report();
    return result;
}

} // namespace

SearchResult search(const CostModel& model, const SearchSpace& space, const SearchOptions& options)
{
    Searcher searcher(model, space, options);
    SearchResult result = searcher.run();
    result.request = PlanRequest{model.problem(), model.params(), space, options.objective, options.top_k,
                                 options.framework};
    return result;
}

SearchResult search(const Problem& problem, const SearchSpace& space, const SearchOptions& options)
{
    const CostModel model(problem);
    return search(model, space, options);
}

SearchResult search(const PlanRequest& request, const SearchControl& control)
{
    SearchOptions options;
    options.objective = request.objective;
    options.top_k = request.top_k;
    options.threads = control.threads;
    options.cancel = control.cancel;
    options.progress = control.progress;
    options.framework = request.framework;
    SearchResult result = search(CostModel(request.problem, request.cost_model, request.framework), request.space, options);
    result.request.framework = request.framework;
    return result;
}

} // namespace shardscope
