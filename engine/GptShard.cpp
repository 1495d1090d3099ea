// GptShard: one device's part of the GPT under tp/sp/pp/ZeRO; see GptShard.h.
// Dimension legend as there: C, Ct, NHt, V, Vt, T, mb, Nm, Ns.
#include "GptShard.h"

#include "KernelCosts.h"
#include "Ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace shardscope::engine {

using Eigen::Index;

namespace {

using MapM = Eigen::Map<Mat<float>>;
using MapV = Eigen::Map<Vec<float>>;
using CMapM = Eigen::Map<const Mat<float>>;
using CMapV = Eigen::Map<const Vec<float>>;

MapM mat(float* p, Index rows, Index cols) { return MapM(p, rows, cols); }
MapV vec(float* p, Index n) { return MapV(p, n); }
CMapM cmat(const float* p, Index rows, Index cols) { return CMapM(p, rows, cols); }
CMapV cvec(const float* p, Index n) { return CMapV(p, n); }

struct Carver {
    float* base = nullptr;
    std::int64_t used = 0;
    float* take(std::int64_t n)
    {
        float* p = base ? base + used : nullptr;
        used += n;
        return p;
    }
};

constexpr DataType kCompute = DataType::FP32;
constexpr double kE = 4;  // fp32 element bytes
const CostArgs kCost{kE, kE};

} // namespace

struct GptShard::Layer {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

struct GptShard::Acts {
    float *ln1, *qkv, *atty, *att, *res2, *ln2, *fch, *fchg, *res3;  // ln1, res2, ln2, res3: (C, Ns)
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;                // Ns each
};

// One micro-batch in flight: its saved activations and tokens.
struct GptShard::Slot {
    DeviceBuffer buffer;
    float* input = nullptr;  // (C, Ns): the embedding (stage 0) or what the previous stage sent
    std::vector<Acts> layers;
    float *lnf = nullptr, *lnf_mean = nullptr, *lnf_rstd = nullptr, *probs = nullptr, *losses = nullptr;
    std::vector<int> inputs, targets;  // Nm each, host
};

struct GptShard::Work {
    float *gath, *partial, *dres, *dresFull, *dfch, *dqkv, *datty, *datt;
    float* stageOut;  // (C, Ns): a non-last stage's output, sent on and not needed by its backward
};

// ---------------------------------------------------------------- construction

void GptShard::buildTables(const GptConfig& cfg)
{
    const std::vector<ParameterTensor> full = parameterTable(cfg);
    const std::int64_t C = C_, Ct = Ct_, Vt = Vt_, r = tpRank_;
    auto addUnit = [&](std::string name) {
        ShardUnit u;
        u.name = std::move(name);
        u.offset = P_;
        u.first_tensor = int(tensors_.size());
        units_.push_back(u);
        return int(units_.size()) - 1;
    };
    auto addTensor = [&](const ParameterTensor& f, std::int64_t count, bool replicated, bool spPartial,
                         std::vector<ParameterRun> runs) {
        ShardTensor t;
        t.name = f.name;
        t.offset = P_;
        t.count = count;
        t.decay = f.decay;
        t.tp_replicated = replicated;
        t.sp_partial = spPartial && sp_;
        t.unit = int(units_.size()) - 1;
        t.runs = std::move(runs);
        tensors_.push_back(std::move(t));
        units_.back().tensors += 1;
        units_.back().count += count;
        P_ += count;
    };
    auto whole = [&](const ParameterTensor& f, bool spPartial) {
        addTensor(f, f.count, true, spPartial, {{f.offset, 0, f.count}});
    };
    // The modules outside the layers form one unit, the root (FSDP wraps them so: a tied
    // embedding and head must share a unit), gathered once for a forward and once for a backward.
    if (stage_ == 0 || stage_ == stages_ - 1)
        rootUnit_ = addUnit("root");
    auto addWte = [&](bool tiedCopy) {
        wteUnit_ = rootUnit_;
        wteAt_ = units_.back().count;
        // Vocabulary rows [r Vt, (r+1) Vt) are columns of the (C, V) table: one contiguous run.
        addTensor(full[0], C * Vt, tp_ == 1, false, {{full[0].offset + r * Vt * C, 0, C * Vt}});
        tensors_.back().tied_copy = tiedCopy;
        tensors_.back().word_embedding = true;
    };
    if (stage_ == 0) {
        addWte(false);
        wpeUnit_ = rootUnit_;
        wpeAt_ = units_.back().count;
        whole(full[1], false);
    }
    if (stage_ == stages_ - 1) {
        lnfUnit_ = rootUnit_;
        lnfAt_ = units_.back().count;
        whole(full[size_t(2 + 12 * L_)], true);
        whole(full[size_t(3 + 12 * L_)], true);
        if (stages_ > 1)
            addWte(true);
    }
    firstLayerUnit_ = int(units_.size());
    for (int l = layer0_; l < layer0_ + Ls_; ++l) {
        std::string name = "h";  // built by appending: GCC 12 warns (-Wrestrict) on "h" + to_string
        name += std::to_string(l);
        addUnit(name);
        const ParameterTensor* f = &full[size_t(2 + 12 * l)];
        whole(f[0], true);   // ln1w
        whole(f[1], true);   // ln1b
        std::vector<ParameterRun> runs;
        for (std::int64_t p = 0; p < 3; ++p)  // q, k, v columns of this rank's heads
            runs.push_back({f[2].offset + (p * C + r * Ct) * C, p * Ct * C, Ct * C});
        addTensor(f[2], 3 * Ct * C, false, false, runs);
        runs.clear();
        for (std::int64_t p = 0; p < 3; ++p)
            runs.push_back({f[3].offset + p * C + r * Ct, p * Ct, Ct});
        addTensor(f[3], 3 * Ct, false, false, runs);
        runs.clear();
        for (std::int64_t j = 0; j < C; ++j)  // input rows [r Ct, (r+1) Ct) of every output column
            runs.push_back({f[4].offset + j * C + r * Ct, j * Ct, Ct});
        addTensor(f[4], Ct * C, false, false, runs);
        whole(f[5], false);  // attprojb: from the gathered output gradient, whole on every rank
        whole(f[6], true);   // ln2w
        whole(f[7], true);   // ln2b
        addTensor(f[8], 4 * Ct * C, false, false, {{f[8].offset + r * 4 * Ct * C, 0, 4 * Ct * C}});
        addTensor(f[9], 4 * Ct, false, false, {{f[9].offset + r * 4 * Ct, 0, 4 * Ct}});
        runs.clear();
        for (std::int64_t j = 0; j < C; ++j)
            runs.push_back({f[10].offset + j * 4 * C + r * 4 * Ct, j * 4 * Ct, 4 * Ct});
        addTensor(f[10], 4 * Ct * C, false, false, runs);
        whole(f[11], false);  // fcprojb
    }
    // ZeRO chunks: member k of the shard group owns [count k / g, count (k+1) / g) of each unit.
    const int g = zero_ > 0 ? groups_.shard->size() : 1;
    S_ = 0;
    for (ShardUnit& u : units_) {
        u.chunk_begin = CommGroup::chunkBegin(std::size_t(u.count), g, shardRank_);
        u.chunk_end = CommGroup::chunkBegin(std::size_t(u.count), g, shardRank_ + 1);
        u.shard_offset = zero_ > 0 ? S_ : u.offset;
        S_ += u.chunk_end - u.chunk_begin;
    }
    if (zero_ == 0)
        S_ = P_;
}

GptShard::GptShard(const GptConfig& config, const ShardOptions& options, EmulatedCluster& cluster, int device)
    : cfg_(config), opts_(options), cluster_(cluster), dev_(cluster.device(device)), id_(device),
      groups_(cluster.groups(device))
{
    const Layout& l = cluster.layout();
    const MeshPosition& pos = cluster.position(device);
    tp_ = l.tp;
    tpRank_ = pos.tp;
    stage_ = pos.pp;
    stages_ = l.pp;
    dpRank_ = pos.dp;
    zero_ = l.zero_stage;
    const int g = zero_ > 0 ? l.zeroGroupSize() : 1;
    shardRank_ = zero_ > 0 ? dpRank_ % g : 0;
    replicaIndex_ = zero_ > 0 ? dpRank_ / g : dpRank_;
    sp_ = l.sequence_parallel && tp_ > 1;
    C_ = cfg_.hidden;
    V_ = cfg_.vocab;
    T_ = cfg_.seq;
    L_ = cfg_.layers;
    mb_ = opts_.micro_batch;
    Nm_ = std::int64_t(mb_) * T_;
    if (cfg_.heads % tp_ || V_ % tp_ || L_ % stages_ || (sp_ && Nm_ % tp_))
        throw std::logic_error("GptShard: the layout does not divide the model (validate the request first)");
    Ct_ = C_ / tp_;
    NHt_ = cfg_.heads / tp_;
    Vt_ = V_ / tp_;
    Ls_ = L_ / stages_;
    layer0_ = stage_ * Ls_;
    Ns_ = sp_ ? Nm_ / tp_ : Nm_;
    buildTables(cfg_);

    const std::int64_t C = C_, Ct = Ct_, Nm = Nm_, Ns = Ns_, att = std::int64_t(NHt_) * T_ * Nm;
    DeviceAllocator& alloc = dev_.allocator();
    const std::int64_t wCount = zero_ >= 3 ? S_ : P_, gCount = zero_ >= 2 ? S_ : P_;
    weights_ = alloc.allocate(MemoryCategory::Weights, double(wCount) * kE, size_t(wCount), sizeof(float));
    grads_ = alloc.allocate(MemoryCategory::Gradients, double(gCount) * kE, size_t(gCount), sizeof(float));
    optimizer_ = alloc.allocate(MemoryCategory::Optimizer, double(S_) * 8, size_t(2 * S_), sizeof(float));
    std::int64_t scratch = 0;
    if (opts_.recompute == Recompute::Full)
        scratch = att + 3 * C * Ns + 4 * Ns + 12 * Ct * Nm;  // the carve in forward(): all but res3
    else if (opts_.recompute == Recompute::Selective)
        scratch = att;
    if (scratch > 0)
        scratch_ = alloc.allocate(MemoryCategory::Activations, double(scratch) * kE, size_t(scratch), sizeof(float));
    const std::int64_t spExtra = sp_ ? 2 * C * Nm : 0;  // gath, dresFull
    const std::int64_t stageOut = lastStage() ? 0 : C * Ns;
    const std::int64_t work = spExtra + C * Nm + C * Ns + 4 * Ct * Nm + 3 * Ct * Nm + Ct * Nm + att + stageOut;
    workspace_ = alloc.allocate(MemoryCategory::Workspace, double(work) * kE, size_t(work), sizeof(float));
    ws_ = new Work{};
    Carver w{workspace_.as<float>(), 0};
    ws_->gath = sp_ ? w.take(C * Nm) : nullptr;
    ws_->partial = w.take(C * Nm);
    ws_->dres = w.take(C * Ns);
    ws_->dresFull = sp_ ? w.take(C * Nm) : ws_->dres;
    ws_->dfch = w.take(4 * Ct * Nm);
    ws_->dqkv = w.take(3 * Ct * Nm);
    ws_->datty = w.take(Ct * Nm);
    ws_->datt = w.take(att);
    ws_->stageOut = lastStage() ? nullptr : w.take(C * Ns);
    heldWeights_.resize(units_.size());
    heldGrads_.resize(units_.size());
    weightUsers_.assign(units_.size(), 0);
    gradUsers_.assign(units_.size(), 0);
    stats_.resize(size_t(3 * Nm));
    std::int64_t spCount = 0;
    for (const ShardTensor& t : tensors_)
        if (t.sp_partial)
            spCount += t.count;
    packed_.reserve(size_t(spCount));

    // Every device draws the full model's initial values and keeps its part, so
    // each shard starts exactly where the single-device model starts.
    std::vector<float> fullInit(size_t(parameterCount(cfg_)));
    initializeParameters<float>(parameterTable(cfg_), opts_.seed, opts_.init_std, L_, fullInit.data());
    std::vector<float> local(static_cast<size_t>(P_));
    for (const ShardTensor& t : tensors_)
        for (const ParameterRun& run : t.runs)
            std::copy_n(fullInit.data() + run.full_offset, run.count, local.data() + t.offset + run.local_offset);
    float* wp = weights_.as<float>();
    if (zero_ < 3)
        std::copy(local.begin(), local.end(), wp);
    else
        for (const ShardUnit& u : units_)
            std::copy(local.begin() + u.offset + u.chunk_begin, local.begin() + u.offset + u.chunk_end,
                      wp + u.shard_offset);
}

GptShard::~GptShard() { delete ws_; }

GptShard::Layer GptShard::bind(const float* base, int unit) const
{
    const ShardUnit& u = units_[size_t(unit)];
    float* b = const_cast<float*>(base);
    auto at = [&](int k) { return b + (tensors_[size_t(u.first_tensor + k)].offset - u.offset); };
    return Layer{at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11)};
}

// ---------------------------------------------------------------- ZeRO parameter and gradient units

float* GptShard::acquireWeights(int unit)
{
    const ShardUnit& u = units_[size_t(unit)];
    if (zero_ < 3)
        return weights_.as<float>() + u.offset;
    if (weightUsers_[size_t(unit)]++ == 0) {
        // ZeRO-3: gather the whole unit into a transient buffer (counted as weights while it lives).
        DeviceBuffer& b = heldWeights_[size_t(unit)];
        b = dev_.allocator().allocate(MemoryCategory::Weights, double(u.count) * kE, size_t(u.count), sizeof(float));
        std::copy_n(weights_.as<float>() + u.shard_offset, u.chunk_end - u.chunk_begin, b.as<float>() + u.chunk_begin);
        groups_.shard->allGather(shardRank_, b.as<float>(), size_t(u.count));
    }
    return heldWeights_[size_t(unit)].as<float>();
}

void GptShard::releaseWeights(int unit)
{
    if (zero_ < 3)
        return;
    if (--weightUsers_[size_t(unit)] == 0)
        heldWeights_[size_t(unit)].release();
}

float* GptShard::acquireGrads(int unit)
{
    const ShardUnit& u = units_[size_t(unit)];
    if (zero_ < 2)
        return grads_.as<float>() + u.offset;
    if (gradUsers_[size_t(unit)]++ == 0)
        heldGrads_[size_t(unit)] = dev_.allocator().allocate(MemoryCategory::Gradients, double(u.count) * kE,
                                                             size_t(u.count), sizeof(float));  // zero-filled
    return heldGrads_[size_t(unit)].as<float>();
}

void GptShard::releaseGrads(int unit)
{
    if (zero_ < 2 || --gradUsers_[size_t(unit)] > 0)
        return;
    // ZeRO-2/3: reduce-scatter the unit's gradient over the shard group and accumulate the
    // owned chunk into the shard (the replicas of HSDP sum their shards once per step).
    const ShardUnit& u = units_[size_t(unit)];
    float* b = heldGrads_[size_t(unit)].as<float>();
    groups_.shard->reduceScatter(shardRank_, b, size_t(u.count));
    float* chunk = b + u.chunk_begin;
    const std::int64_t n = u.chunk_end - u.chunk_begin;
    float* dst = grads_.as<float>() + u.shard_offset;
    for (std::int64_t i = 0; i < n; ++i)
        dst[i] += chunk[i];
    dev_.charge(KernelKind::Elementwise, {double(n), 2 * double(n) * kE, double(n) * kE}, kCompute);
    heldGrads_[size_t(unit)].release();
}

float* GptShard::gradPointer(std::int64_t i, int unit)
{
    const ShardUnit& u = units_[size_t(unit)];
    return zero_ < 2 ? grads_.as<float>() + i : grads_.as<float>() + u.shard_offset + (i - u.offset - u.chunk_begin);
}

template <class F>
void GptShard::forEachGradRange(F&& fn, bool whole)
{
    const bool owned = zero_ >= 2 || (zero_ == 1 && !whole);
    for (size_t ui = 0; ui < units_.size(); ++ui) {
        const ShardUnit& u = units_[ui];
        // With ZeRO, only the owned chunk of each unit is reduced (and updated).
        const std::int64_t lo = owned ? u.offset + u.chunk_begin : u.offset;
        const std::int64_t hi = owned ? u.offset + u.chunk_end : u.offset + u.count;
        for (int k = 0; k < u.tensors; ++k) {
            const ShardTensor& t = tensors_[size_t(u.first_tensor + k)];
            const std::int64_t b = std::max(lo, t.offset), e = std::min(hi, t.offset + t.count);
            if (b < e)
                fn(t, b, e - b, gradPointer(b, int(ui)));
        }
    }
}

// ---------------------------------------------------------------- tensor-parallel helpers

const float* GptShard::gatherTokens(const float* shard, float* full)
{
    if (!sp_)
        return shard;
    const std::int64_t n = std::int64_t(C_) * Ns_;
    std::copy_n(shard, n, full + tpRank_ * n);
    groups_.tp->allGather(tpRank_, full, size_t(C_ * Nm_));
    return full;
}

float* GptShard::reduceTokens(float* partial)
{
    if (tp_ == 1)
        return partial;
    if (sp_) {
        groups_.tp->reduceScatter(tpRank_, partial, size_t(C_ * Nm_));
        return partial + std::int64_t(tpRank_) * C_ * Ns_;
    }
    groups_.tp->allReduce(tpRank_, partial, size_t(C_ * Nm_));
    return partial;
}

const float* GptShard::layerInput(const Slot& s, int k) const
{
    return k == 0 ? s.input : s.layers[size_t(k - 1)].res3;
}

// ---------------------------------------------------------------- forward

void GptShard::layerForward(int k, Slot& s)
{
    KernelPool& pool = dev_.pool();
    const int unit = firstLayerUnit_ + k;
    const Layer w = bind(acquireWeights(unit), unit);
    const Acts& a = s.layers[size_t(k)];
    const Index C = C_, Ct = Ct_, Nm = Index(Nm_), Ns = Index(Ns_);
    const double c = C, ct = Ct, nm = double(Nm), ns = double(Ns), att = double(NHt_) * T_ * nm;
    const float* x = layerInput(s, k);
    const Mat<float> none;
    const Vec<float> noBias;

    layernorm_forward<float>(pool, mat(a.ln1, C, Ns), vec(a.ln1_mean, Ns), vec(a.ln1_rstd, Ns), cmat(x, C, Ns),
                             cvec(w.ln1w, C), cvec(w.ln1b, C));
    dev_.charge(KernelKind::LayerNorm, {8 * c * ns, c * ns * kE + 2 * c * kE, c * ns * kE + 2 * ns * 4}, kCompute);
    const float* ln1 = gatherTokens(a.ln1, ws_->gath);
    matmul_forward<float>(pool, mat(a.qkv, 3 * Ct, Nm), cmat(ln1, C, Nm), cmat(w.qkvw, C, 3 * Ct),
                          cvec(w.qkvb, 3 * Ct), none);
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, 3 * ct, nm, true, false, kCost), kCompute);
    const Index attCols = Index(att / T_);
    attention_probs_forward<float>(pool, mat(a.att, T_, attCols), cmat(a.qkv, 3 * Ct, Nm), mb_, T_, NHt_);
    dev_.charge(KernelKind::Attention, {2 * double(T_) * ct * nm, 2 * ct * nm * kE, att * kE}, kCompute);
    attention_values_forward<float>(pool, mat(a.atty, Ct, Nm), cmat(a.att, T_, attCols), cmat(a.qkv, 3 * Ct, Nm),
                                    mb_, T_, NHt_);
    dev_.charge(KernelKind::Attention, {2 * double(T_) * ct * nm, att * kE + ct * nm * kE, ct * nm * kE}, kCompute);

    // Row-split projection: partial sums, reduced over tp, then bias and residual on the (C, Ns) result.
    auto rowParallel = [&](float* out, const float* inp, Index ic, const float* weight, const float* bias,
                           const float* residual) {
        matmul_forward<float>(pool, mat(ws_->partial, C, Nm), cmat(inp, ic, Nm), cmat(weight, ic, C), noBias, none);
        dev_.charge(KernelKind::Matmul, matmulForwardCost(double(ic), c, nm, false, false, kCost), kCompute);
        const float* red = reduceTokens(ws_->partial);
        for (Index n = 0; n < Ns; ++n)
            for (Index i = 0; i < C; ++i)
                out[n * C + i] = (red[n * C + i] + bias[i]) + residual[n * C + i];
        dev_.charge(KernelKind::Elementwise, {2 * c * ns, 2 * c * ns * kE + c * kE, c * ns * kE}, kCompute);
    };
    rowParallel(a.res2, a.atty, Ct, w.attprojw, w.attprojb, x);

    layernorm_forward<float>(pool, mat(a.ln2, C, Ns), vec(a.ln2_mean, Ns), vec(a.ln2_rstd, Ns), cmat(a.res2, C, Ns),
                             cvec(w.ln2w, C), cvec(w.ln2b, C));
    dev_.charge(KernelKind::LayerNorm, {8 * c * ns, c * ns * kE + 2 * c * kE, c * ns * kE + 2 * ns * 4}, kCompute);
    const float* ln2 = gatherTokens(a.ln2, ws_->gath);
    matmul_forward<float>(pool, mat(a.fch, 4 * Ct, Nm), cmat(ln2, C, Nm), cmat(w.fcw, C, 4 * Ct), cvec(w.fcb, 4 * Ct),
                          none);
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, 4 * ct, nm, true, false, kCost), kCompute);
    gelu_forward<float>(pool, vec(a.fchg, 4 * Ct * Nm), cvec(a.fch, 4 * Ct * Nm));
    dev_.charge(KernelKind::Gelu, {10 * 4 * ct * nm, 4 * ct * nm * kE, 4 * ct * nm * kE}, kCompute);
    rowParallel(a.res3, a.fchg, 4 * Ct, w.fcprojw, w.fcprojb, a.res2);
    releaseWeights(unit);
}

void GptShard::embedForward(Slot& s, const int* inputs)
{
    const Index C = C_, Nm = Index(Nm_);
    s.inputs.assign(inputs, inputs + Nm);
    const float* wte = acquireWeights(wteUnit_) + wteAt_;
    const float* wpe = acquireWeights(wpeUnit_) + wpeAt_;
    if (tp_ == 1) {
        const Eigen::Map<const Eigen::VectorXi> in(s.inputs.data(), Nm);
        encoder_forward<float>(mat(s.input, C, Nm), in, cmat(wte, C, V_), cmat(wpe, C, T_), mb_, T_);
    } else {
        // Vocab-parallel: this rank's rows, zero for the others' tokens; rank 0 adds the positions.
        const int lo = tpRank_ * Vt_;
        for (Index n = 0; n < Nm; ++n) {
            float* col = ws_->partial + n * C;
            const int tok = s.inputs[size_t(n)];
            const float* pos = wpe + (n % T_) * C;
            const bool own = tok >= lo && tok < lo + Vt_;
            const float* emb = wte + std::int64_t(tok - lo) * C;
            for (Index i = 0; i < C; ++i)
                col[i] = (own ? emb[i] : 0.0f) + (tpRank_ == 0 ? pos[i] : 0.0f);
        }
        const float* red = reduceTokens(ws_->partial);
        std::copy_n(red, C * Ns_, s.input);
    }
    dev_.charge(KernelKind::Embedding, {double(C) * double(Nm), 2 * double(C) * double(Nm) * kE + double(Nm) * 4,
                                        double(C) * double(Nm) * kE}, kCompute);
    releaseWeights(wpeUnit_);
    releaseWeights(wteUnit_);
}

double GptShard::headForward(Slot& s, const int* targets)
{
    KernelPool& pool = dev_.pool();
    const Index C = C_, Nm = Index(Nm_), Ns = Index(Ns_), Vt = Vt_;
    const double c = C, nm = double(Nm), ns = double(Ns), vt = Vt;
    s.targets.assign(targets, targets + Nm);
    const float* x = layerInput(s, Ls_);
    const float* lnf = acquireWeights(lnfUnit_) + lnfAt_;
    layernorm_forward<float>(pool, mat(s.lnf, C, Ns), vec(s.lnf_mean, Ns), vec(s.lnf_rstd, Ns), cmat(x, C, Ns),
                             cvec(lnf, C), cvec(lnf + C, C));
    dev_.charge(KernelKind::LayerNorm, {8 * c * ns, c * ns * kE + 2 * c * kE, c * ns * kE + 2 * ns * 4}, kCompute);
    releaseWeights(lnfUnit_);
    const float* lnfFull = gatherTokens(s.lnf, ws_->gath);
    const float* wte = acquireWeights(wteUnit_) + wteAt_;
    matmul_forward<float>(pool, mat(s.probs, Vt, Nm), cmat(lnfFull, C, Nm), cmat(wte, C, Vt), Vec<float>(),
                          Mat<float>());
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, vt, nm, false, false, kCost), kCompute);
    releaseWeights(wteUnit_);
    const Eigen::Map<const Eigen::VectorXi> tg(s.targets.data(), Nm);
    if (tp_ == 1) {
        softmax_crossentropy_forward<float>(pool, mat(s.probs, Vt, Nm), vec(s.losses, Nm), tg);
    } else {
        // Vocab-parallel cross-entropy (Megatron): the max and then the sum of exponentials and the
        // target's logit (owned by one rank, zero elsewhere) are all-reduced over tp.
        // fp32 statistics, as Megatron-LM sends them: 3 values per token.
        float* mx = stats_.data();
        float* sumTarget = mx + Nm;  // [sum exp (Nm), target logit (Nm)]
        const int lo = tpRank_ * Vt_;
        for (Index n = 0; n < Nm; ++n) {
            const float* col = s.probs + n * Vt;
            mx[n] = *std::max_element(col, col + Vt);
        }
        groups_.tp->allReduce(tpRank_, mx, size_t(Nm), ReduceOp::Max);
        for (Index n = 0; n < Nm; ++n) {
            const float* col = s.probs + n * Vt;
            const float m = mx[n];
            float sum = 0;
            for (Index v = 0; v < Vt; ++v)
                sum += std::exp(col[v] - m);
            sumTarget[n] = sum;
            const int t = s.targets[size_t(n)];
            sumTarget[Nm + n] = (t >= lo && t < lo + Vt_) ? col[t - lo] : 0.0f;
        }
        groups_.tp->allReduce(tpRank_, sumTarget, size_t(2 * Nm));
        for (Index n = 0; n < Nm; ++n) {
            float* col = s.probs + n * Vt;
            const float m = mx[n];
            const float inv = 1.0f / sumTarget[n];
            for (Index v = 0; v < Vt; ++v)
                col[v] = std::exp(col[v] - m) * inv;
            s.losses[n] = std::log(sumTarget[n]) - (sumTarget[Nm + n] - m);
        }
    }
    dev_.charge(KernelKind::Softmax, {5 * vt * nm, vt * nm * kE, vt * nm * kE + nm * 4}, kCompute);
    double sum = 0;
    for (Index n = 0; n < Nm; ++n)
        sum += double(s.losses[n]);
    return sum;
}

double GptShard::forward(int micro, const int* inputs, const int* targets)
{
    if (size_t(micro) >= slots_.size())
        slots_.resize(size_t(micro) + 1);
    if (!slots_[size_t(micro)])
        slots_[size_t(micro)] = std::make_unique<Slot>();
    Slot& s = *slots_[size_t(micro)];
    const std::int64_t C = C_, Ct = Ct_, Nm = Nm_, Ns = Ns_, att = std::int64_t(NHt_) * T_ * Nm;
    const bool full = opts_.recompute == Recompute::Full, selective = opts_.recompute == Recompute::Selective;

    // This micro-batch's saved activations: one allocation, released after its backward.
    auto carve = [&](Carver& ten, Carver& scr) {
        s.input = ten.take(C * Ns);
        s.layers.assign(size_t(Ls_), Acts{});
        Acts shared{};
        if (full || selective)
            shared.att = scr.take(att);
        if (full) {
            shared.ln1 = scr.take(C * Ns);
            shared.ln1_mean = scr.take(Ns);
            shared.ln1_rstd = scr.take(Ns);
            shared.qkv = scr.take(3 * Ct * Nm);
            shared.atty = scr.take(Ct * Nm);
            shared.res2 = scr.take(C * Ns);
            shared.ln2 = scr.take(C * Ns);
            shared.ln2_mean = scr.take(Ns);
            shared.ln2_rstd = scr.take(Ns);
            shared.fch = scr.take(4 * Ct * Nm);
            shared.fchg = scr.take(4 * Ct * Nm);
        }
        // A stage's output is sent to the next stage and its own backward does not read it (Megatron-LM
        // frees it once sent): only the last stage keeps it, as the final norm's input.
        auto output = [&](const Acts& a) { return &a == &s.layers.back() && !lastStage() ? ws_->stageOut : ten.take(C * Ns); };
        for (Acts& a : s.layers) {
            if (full) {
                a = shared;
                a.res3 = output(a);  // the next layer's input: the only tensor kept
                continue;
            }
            a.ln1 = ten.take(C * Ns);
            a.ln1_mean = ten.take(Ns);
            a.ln1_rstd = ten.take(Ns);
            a.qkv = ten.take(3 * Ct * Nm);
            a.att = selective ? shared.att : ten.take(att);
            a.atty = ten.take(Ct * Nm);
            a.res2 = ten.take(C * Ns);
            a.ln2 = ten.take(C * Ns);
            a.ln2_mean = ten.take(Ns);
            a.ln2_rstd = ten.take(Ns);
            a.fch = ten.take(4 * Ct * Nm);
            a.fchg = ten.take(4 * Ct * Nm);
            a.res3 = output(a);
        }

        if (lastStage()) {
            s.lnf = ten.take(C * Ns);
            s.lnf_mean = ten.take(Ns);
            s.lnf_rstd = ten.take(Ns);
            s.probs = ten.take(std::int64_t(Vt_) * Nm);
            s.losses = ten.take(Nm);
        }
    };
    Carver countTen, countScr;
    carve(countTen, countScr);
    s.buffer = dev_.allocator().allocate(MemoryCategory::Activations, double(countTen.used) * kE,
                                         size_t(countTen.used), sizeof(float));
    Carver ten{s.buffer.as<float>(), 0}, scr{scratch_.as<float>(), 0};
    carve(ten, scr);

    // The root unit is gathered once for the whole forward (FSDP's root), released at its end.
    if (rootUnit_ >= 0)
        acquireWeights(rootUnit_);
    if (firstStage())
        embedForward(s, inputs);
    else
        cluster_.communicator().recv(id_, cluster_.stageNeighbour(id_, -1), s.input, size_t(C * Ns));
    for (int k = 0; k < Ls_; ++k)
        layerForward(k, s);
    double loss = 0;
    if (lastStage())
        loss = headForward(s, targets);
    else
        cluster_.communicator().send(id_, cluster_.stageNeighbour(id_, +1), layerInput(s, Ls_), size_t(C * Ns));
    if (rootUnit_ >= 0)
        releaseWeights(rootUnit_);
    return loss;
}

// ---------------------------------------------------------------- backward

void GptShard::layerBackward(int k, Slot& s)
{
    KernelPool& pool = dev_.pool();
    const int unit = firstLayerUnit_ + k;
    const Index C = C_, Ct = Ct_, Nm = Index(Nm_), Ns = Index(Ns_);
    const double c = C, ct = Ct, nm = double(Nm), ns = double(Ns), att = double(NHt_) * T_ * nm;
    const Index attCols = Index(att / T_);
    const float* x = layerInput(s, k);
    const Layer w = bind(acquireWeights(unit), unit);
    const Acts& a = s.layers[size_t(k)];

    if (opts_.recompute == Recompute::Full) {
        layerForward(k, s);
    } else if (opts_.recompute == Recompute::Selective) {
        attention_probs_forward<float>(pool, mat(a.att, T_, attCols), cmat(a.qkv, 3 * Ct, Nm), mb_, T_, NHt_);
        dev_.charge(KernelKind::Attention, {2 * double(T_) * ct * nm, 2 * ct * nm * kE, att * kE}, kCompute);
        // The attention over V too, as Megatron-LM's checkpoint of the attention core does.
        attention_values_forward<float>(pool, mat(a.atty, Ct, Nm), cmat(a.att, T_, attCols), cmat(a.qkv, 3 * Ct, Nm),
                                        mb_, T_, NHt_);
        dev_.charge(KernelKind::Attention, {2 * double(T_) * ct * nm, att * kE + ct * nm * kE, ct * nm * kE}, kCompute);
    }
    const Layer d = bind(acquireGrads(unit), unit);
    float* dres = ws_->dres;  // (C, Ns): d res3 on entry, d x on exit

    // MLP. The row-split product needs the whole output gradient: under SP gather it.
    const float* dout = gatherTokens(dres, ws_->dresFull);
    matmul_backward<float>(pool, mat(ws_->dfch, 4 * Ct, Nm), mat(d.fcprojw, 4 * Ct, C), vec(d.fcprojb, C),
                           cmat(dout, C, Nm), cmat(a.fchg, 4 * Ct, Nm), cmat(w.fcprojw, 4 * Ct, C));
    chargeMatmulBackward(dev_, 4 * ct, c, nm, true, kCost, kCompute);
    gelu_backward<float>(pool, vec(ws_->dfch, 4 * Ct * Nm), cvec(a.fch, 4 * Ct * Nm), cvec(ws_->dfch, 4 * Ct * Nm));
    dev_.charge(KernelKind::Gelu, {16 * 4 * ct * nm, 2 * 4 * ct * nm * kE, 4 * ct * nm * kE}, kCompute);
    const float* ln2 = gatherTokens(a.ln2, ws_->gath);
    matmul_backward<float>(pool, mat(ws_->partial, C, Nm), mat(d.fcw, C, 4 * Ct), vec(d.fcb, 4 * Ct),
                           cmat(ws_->dfch, 4 * Ct, Nm), cmat(ln2, C, Nm), cmat(w.fcw, C, 4 * Ct));
    chargeMatmulBackward(dev_, c, 4 * ct, nm, true, kCost, kCompute);
    const float* dln2 = reduceTokens(ws_->partial);
    layernorm_backward<float>(pool, mat(dres, C, Ns), vec(d.ln2w, C), vec(d.ln2b, C), cmat(dln2, C, Ns),
                              cmat(a.res2, C, Ns), cvec(w.ln2w, C), cvec(a.ln2_mean, Ns), cvec(a.ln2_rstd, Ns));
    dev_.charge(KernelKind::LayerNorm, {14 * c * ns, 3 * c * ns * kE + 2 * ns * 4 + 3 * c * kE,
                                        c * ns * kE + 2 * c * kE}, kCompute);

    // Attention.
    dout = gatherTokens(dres, ws_->dresFull);
    matmul_backward<float>(pool, mat(ws_->datty, Ct, Nm), mat(d.attprojw, Ct, C), vec(d.attprojb, C),
                           cmat(dout, C, Nm), cmat(a.atty, Ct, Nm), cmat(w.attprojw, Ct, C));
    chargeMatmulBackward(dev_, ct, c, nm, true, kCost, kCompute);
    attention_backward<float>(pool, mat(ws_->dqkv, 3 * Ct, Nm), mat(ws_->datt, T_, attCols),
                              cmat(ws_->datty, Ct, Nm), cmat(a.att, T_, attCols), cmat(a.qkv, 3 * Ct, Nm), mb_, T_,
                              NHt_);
    dev_.charge(KernelKind::Attention, {8 * double(T_) * ct * nm, 4 * ct * nm * kE + att * kE,
                                        3 * ct * nm * kE + att * kE}, kCompute);
    const float* ln1 = gatherTokens(a.ln1, ws_->gath);
    matmul_backward<float>(pool, mat(ws_->partial, C, Nm), mat(d.qkvw, C, 3 * Ct), vec(d.qkvb, 3 * Ct),
                           cmat(ws_->dqkv, 3 * Ct, Nm), cmat(ln1, C, Nm), cmat(w.qkvw, C, 3 * Ct));
    chargeMatmulBackward(dev_, c, 3 * ct, nm, true, kCost, kCompute);
    const float* dln1 = reduceTokens(ws_->partial);
    layernorm_backward<float>(pool, mat(dres, C, Ns), vec(d.ln1w, C), vec(d.ln1b, C), cmat(dln1, C, Ns),
                              cmat(x, C, Ns), cvec(w.ln1w, C), cvec(a.ln1_mean, Ns), cvec(a.ln1_rstd, Ns));
    dev_.charge(KernelKind::LayerNorm, {14 * c * ns, 3 * c * ns * kE + 2 * ns * 4 + 3 * c * kE,
                                        c * ns * kE + 2 * c * kE}, kCompute);
    releaseGrads(unit);
    releaseWeights(unit);
}

void GptShard::headBackward(Slot& s)
{
    KernelPool& pool = dev_.pool();
    const Index C = C_, Nm = Index(Nm_), Ns = Index(Ns_), Vt = Vt_;
    const double c = C, nm = double(Nm), ns = double(Ns), vt = Vt;
    // Every token's loss enters the step's mean over all replicas and micro-batches.
    const float dloss = float(1.0 / double(opts_.global_tokens));
    const Eigen::Map<const Eigen::VectorXi> tg(s.targets.data(), Nm);
    if (tp_ == 1) {
        crossentropy_softmax_backward<float>(pool, mat(s.probs, Vt, Nm), cmat(s.probs, Vt, Nm), tg, dloss);
    } else {
        const int lo = tpRank_ * Vt_;
        for (Index n = 0; n < Nm; ++n) {
            float* col = s.probs + n * Vt;
            for (Index v = 0; v < Vt; ++v)
                col[v] *= dloss;
            const int t = s.targets[size_t(n)];
            if (t >= lo && t < lo + Vt_)
                col[t - lo] -= dloss;
        }
    }
    dev_.charge(KernelKind::Softmax, {2 * vt * nm, vt * nm * kE, vt * nm * kE}, kCompute);

    const float* wte = acquireWeights(wteUnit_) + wteAt_;
    float* dwte = acquireGrads(wteUnit_) + wteAt_;
    const float* lnfFull = gatherTokens(s.lnf, ws_->gath);
    Vec<float> noBias;
    matmul_backward<float>(pool, mat(ws_->partial, C, Nm), mat(dwte, C, Vt), noBias, cmat(s.probs, Vt, Nm),
                           cmat(lnfFull, C, Nm), cmat(wte, C, Vt));
    chargeMatmulBackward(dev_, c, vt, nm, false, kCost, kCompute);
    releaseGrads(wteUnit_);
    releaseWeights(wteUnit_);
    const float* dlnf = reduceTokens(ws_->partial);

    std::fill(ws_->dres, ws_->dres + C * Ns, 0.0f);
    const float* lnf = acquireWeights(lnfUnit_) + lnfAt_;
    float* dlnfw = acquireGrads(lnfUnit_) + lnfAt_;
    layernorm_backward<float>(pool, mat(ws_->dres, C, Ns), vec(dlnfw, C), vec(dlnfw + C, C), cmat(dlnf, C, Ns),
                              cmat(layerInput(s, Ls_), C, Ns), cvec(lnf, C), cvec(s.lnf_mean, Ns),
                              cvec(s.lnf_rstd, Ns));
    dev_.charge(KernelKind::LayerNorm, {14 * c * ns, 3 * c * ns * kE + 2 * ns * 4 + 3 * c * kE,
                                        c * ns * kE + 2 * c * kE}, kCompute);
    releaseGrads(lnfUnit_);
    releaseWeights(lnfUnit_);
}

void GptShard::embedBackward(Slot& s)
{
    const Index C = C_, Nm = Index(Nm_);
    const float* dout = gatherTokens(ws_->dres, ws_->dresFull);
    float* dwte = acquireGrads(wteUnit_) + wteAt_;
    float* dwpe = acquireGrads(wpeUnit_) + wpeAt_;
    if (tp_ == 1) {
        const Eigen::Map<const Eigen::VectorXi> in(s.inputs.data(), Nm);
        encoder_backward<float>(mat(dwte, C, V_), mat(dwpe, C, T_), cmat(dout, C, Nm), in, mb_, T_);
    } else {
        const int lo = tpRank_ * Vt_;
        for (Index n = 0; n < Nm; ++n) {
            const float* d = dout + n * C;
            const int tok = s.inputs[size_t(n)];
            float* pos = dwpe + (n % T_) * C;
            for (Index i = 0; i < C; ++i)
                pos[i] += d[i];
            if (tok >= lo && tok < lo + Vt_) {
                float* emb = dwte + std::int64_t(tok - lo) * C;
                for (Index i = 0; i < C; ++i)
                    emb[i] += d[i];
            }
        }
    }
    dev_.charge(KernelKind::Embedding, {2 * double(C) * double(Nm), 3 * double(C) * double(Nm) * kE,
                                        2 * double(C) * double(Nm) * kE}, kCompute);
    releaseGrads(wpeUnit_);
    releaseGrads(wteUnit_);
}

void GptShard::backward(int micro)
{
    Slot& s = *slots_.at(size_t(micro));
    const std::size_t n = size_t(C_ * Ns_);
    // The root unit is held across the whole backward (FSDP's root: gathered once, its gradient
    // reduced once at the end; with one stage the tied embedding's gradient comes from the
    // head first and the embedding last).
    if (rootUnit_ >= 0) {
        acquireWeights(rootUnit_);
        acquireGrads(rootUnit_);
    }
    if (lastStage())
        headBackward(s);
    else
        cluster_.communicator().recv(id_, cluster_.stageNeighbour(id_, +1), ws_->dres, n);
    for (int k = Ls_ - 1; k >= 0; --k)
        layerBackward(k, s);
    if (firstStage())
        embedBackward(s);
    else
        cluster_.communicator().send(id_, cluster_.stageNeighbour(id_, -1), ws_->dres, n);
    if (rootUnit_ >= 0) {
        releaseGrads(rootUnit_);
        releaseWeights(rootUnit_);
    }
    s.buffer.release();
}

// ---------------------------------------------------------------- step

// The tensor-parallel and pipeline sums: the norms' gradients under sequence parallelism (each
// tp rank saw its own tokens) and the tied embedding's between the pipeline's ends.
void GptShard::sumAcrossTensorAndPipeline(bool whole)
{
    // Sequence parallel: the LayerNorms saw only this rank's tokens; sum over tp in one message.
    if (sp_) {
        packed_.clear();
        forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, float* p) {
            if (t.sp_partial)
                packed_.insert(packed_.end(), p, p + n);
        }, whole);
        groups_.tp->allReduce(tpRank_, packed_.data(), packed_.size());
        size_t at = 0;
        forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, float* p) {
            if (t.sp_partial) {
                std::copy_n(packed_.data() + at, n, p);
                at += size_t(n);
            }
        }, whole);
    }
    // Tied embedding across the pipeline: the first and last stage add their wte gradients.
    if (groups_.embedding) {
        const int rank = groups_.embedding->rankOf(id_);
        forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, float* p) {
            if (t.word_embedding)
                groups_.embedding->allReduce(rank, p, size_t(n));
        }, whole);
    }
}

double GptShard::reduceGradients()
{
    KernelPool& pool = dev_.pool();
    float* g = grads_.as<float>();
    // Megatron-LM's order where gradients are held whole (no ZeRO, ZeRO-1): the tensor-parallel
    // and pipeline sums of whole tensors first, then the data-parallel reduction.
    if (zero_ <= 1)
        sumAcrossTensorAndPipeline(true);
    // Data parallel without gradient sharding: all-reduce in buckets, the last layers'
    // first (the order a backward produces them, as PyTorch DDP does).
    if (zero_ == 0 && groups_.dp->size() > 1) {
        const std::int64_t bucket = std::max<std::int64_t>(1, std::int64_t(opts_.bucket_bytes / sizeof(float)));
        for (std::int64_t end = P_; end > 0; end -= bucket) {
            const std::int64_t begin = std::max<std::int64_t>(0, end - bucket);
            groups_.dp->allReduce(dpRank_, g + begin, size_t(end - begin));
        }
    }
    // ZeRO-1: each member updates only the chunk it owns, so it needs only that chunk
    // reduced: reduce-scatter over the shard group (then all-reduce the chunk over the
    // replicas, HSDP), half the bytes of an all-reduce; the update all-gathers the weights.
    if (zero_ == 1 && groups_.dp->size() > 1)
        for (size_t ui = units_.size(); ui-- > 0;) {
            const ShardUnit& u = units_[ui];
            groups_.shard->reduceScatter(shardRank_, g + u.offset, size_t(u.count));
            groups_.replica->allReduce(replicaIndex_, g + u.offset + u.chunk_begin, size_t(u.chunk_end - u.chunk_begin));
        }
    // ZeRO-2/3 with HSDP: the accumulated shards are summed over the replicas, once per step.
    if (zero_ >= 2 && groups_.replica->size() > 1)
        groups_.replica->allReduce(replicaIndex_, g, size_t(S_));
    // Under ZeRO-2/3 only the owned shards exist: their tensor-parallel and pipeline sums come last.
    if (zero_ >= 2)
        sumAcrossTensorAndPipeline(false);
    // This device's share of the squared norm: every value of the model counted once.
    const bool countsReplicas = zero_ >= 1 ? replicaIndex_ == 0 : dpRank_ == 0;
    double sumSq = 0;
    forEachGradRange([&](const ShardTensor& t, std::int64_t, std::int64_t n, float* p) {
        if (countsReplicas && !t.tied_copy && !(t.tp_replicated && tpRank_ != 0))
            sumSq += sum_of_squares<float>(pool, p, n);
    });
    const double gc = zero_ >= 1 ? double(S_) : double(P_);
    dev_.charge(KernelKind::Optimizer, {2 * gc, gc * kE, 0}, kCompute);
    return sumSq;
}

void GptShard::update(const AdamWSettings& settings, double grad_scale, int step)
{
    KernelPool& pool = dev_.pool();
    float* w = weights_.as<float>();
    float* m = optimizer_.as<float>();
    float* v = m + S_;
    for (size_t ui = 0; ui < units_.size(); ++ui) {
        const ShardUnit& u = units_[ui];
        const std::int64_t lo = u.offset + u.chunk_begin, hi = u.offset + u.chunk_end;
        for (int k = 0; k < u.tensors; ++k) {
            const ShardTensor& t = tensors_[size_t(u.first_tensor + k)];
            const std::int64_t b = std::max(lo, t.offset), e = std::min(hi, t.offset + t.count);
            if (b >= e)
                continue;
            const std::int64_t s = u.shard_offset + (b - lo);  // place in the optimizer (and ZeRO-3 weight) shard
            adamw_update<float>(pool, zero_ >= 3 ? w + s : w + b, gradPointer(b, int(ui)), m + s, v + s, nullptr,
                                e - b, settings, t.decay, step, grad_scale, WeightRounding::None, opts_.seed,
                                std::uint64_t(b));
        }
    }
    const double p = double(S_);
    dev_.charge(KernelKind::Optimizer, {12 * p, p * (2 * kE + 8), p * (kE + 8)}, kCompute);
    if (zero_ == 1 || zero_ == 2)
        for (const ShardUnit& u : units_)
            groups_.shard->allGather(shardRank_, w + u.offset, size_t(u.count));
    float* g = grads_.as<float>();
    std::fill(g, g + grads_.elements(), 0.0f);
    dev_.charge(KernelKind::Elementwise, {0, 0, double(grads_.elements()) * kE}, kCompute);
}

void GptShard::injectNaN()
{
    weights_.as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
}

void GptShard::exportParameters(float* full) const
{
    const float* w = weights_.as<float>();
    for (const ShardTensor& t : tensors_) {
        const ShardUnit& u = units_[size_t(t.unit)];
        for (const ParameterRun& run : t.runs)
            for (std::int64_t i = 0; i < run.count; ++i) {
                const std::int64_t li = t.offset + run.local_offset + i;
                if (zero_ < 3) {
                    full[run.full_offset + i] = w[li];
                } else if (li >= u.offset + u.chunk_begin && li < u.offset + u.chunk_end) {
                    full[run.full_offset + i] = w[u.shard_offset + (li - u.offset - u.chunk_begin)];
                }
            }
    }
}

} // namespace shardscope::engine
