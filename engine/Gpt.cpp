// GptModel: buffers, initialisation, forward, backward (with recomputation),
// update, and the roofline cost of every kernel it launches.
// Dimension legend as in Gpt.h: L, C, NH, hs = C/NH, V, T, B, N = B*T, P.
#include "Gpt.h"

#include "Bf16.h"
#include "KernelCosts.h"
#include "Ops.h"
#include "Random.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace shardscope::engine {

using Eigen::Index;

// ---------------------------------------------------------------- config

std::int64_t parameterCount(const GptConfig& c)
{
    const std::int64_t C = c.hidden, V = c.vocab, T = c.seq, L = c.layers;
    return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

FieldErrors validate(const GptConfig& c, const std::string& prefix)
{
    FieldErrors errors;
    auto positive = [&](const char* field, int v, int hi) {
        if (v < 1 || v > hi)
            errors.push_back({prefix + field, std::to_string(v) + " is out of range [1, " + std::to_string(hi) + "]"});
        return v >= 1 && v <= hi;
    };
    positive("layers", c.layers, 1024);
    const bool hiddenOk = positive("hidden", c.hidden, 1 << 16);
    const bool headsOk = positive("heads", c.heads, 1 << 12);
    positive("vocab", c.vocab, 1 << 22);
    positive("seq", c.seq, 1 << 16);
    if (hiddenOk && headsOk && c.hidden % c.heads != 0)
        errors.push_back({prefix + "heads", std::to_string(c.heads) + " does not divide hidden " +
                                                std::to_string(c.hidden)});
    return errors;
}

const char* toString(PrecisionMode p)
{
    switch (p) {
    case PrecisionMode::FP32: return "fp32";
    case PrecisionMode::BF16Mixed: return "bf16-mixed";
    case PrecisionMode::BF16RNE: return "bf16-rne";
    case PrecisionMode::BF16SR: return "bf16-sr";
    }
    return "?";
}

std::optional<PrecisionMode> precisionFromString(const std::string& text)
{
    for (PrecisionMode p : {PrecisionMode::FP32, PrecisionMode::BF16Mixed, PrecisionMode::BF16RNE, PrecisionMode::BF16SR})
        if (text == toString(p))
            return p;
    return std::nullopt;
}

std::optional<Recompute> recomputeFromString(const std::string& text)
{
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
        if (text == shardscope::toString(r))
            return r;
    return std::nullopt;
}

std::vector<ParameterTensor> parameterTable(const GptConfig& cfg)
{
    // wte (C, V), wpe (C, T), then each layer's 12 tensors, then lnf.
    std::vector<ParameterTensor> tensors;
    const std::int64_t C = cfg.hidden, V = cfg.vocab, Tt = cfg.seq;
    auto addTensor = [&](std::string name, std::int64_t count, bool decay) {
        const std::int64_t offset = tensors.empty() ? 0 : tensors.back().offset + tensors.back().count;
        tensors.push_back({std::move(name), offset, count, decay});
    };
    addTensor("wte", C * V, true);
    addTensor("wpe", C * Tt, true);
    for (int l = 0; l < cfg.layers; ++l) {
        std::string h = "h";
        h += std::to_string(l);
        h += '.';
        addTensor(h + "ln1w", C, false);
        addTensor(h + "ln1b", C, false);
        addTensor(h + "qkvw", C * 3 * C, true);
        addTensor(h + "qkvb", 3 * C, false);
        addTensor(h + "attprojw", C * C, true);
        addTensor(h + "attprojb", C, false);
        addTensor(h + "ln2w", C, false);
        addTensor(h + "ln2b", C, false);
        addTensor(h + "fcw", C * 4 * C, true);
        addTensor(h + "fcb", 4 * C, false);
        addTensor(h + "fcprojw", 4 * C * C, true);
        addTensor(h + "fcprojb", C, false);
    }
    addTensor("lnfw", C, false);
    addTensor("lnfb", C, false);
    return tensors;
}

template <class T>
void initializeParameters(const std::vector<ParameterTensor>& tensors, std::uint64_t seed, double init_std,
                          int layers, T* w)
{
    // GPT-2: matrices N(0, std), the two residual projections N(0, std / sqrt(2L));
    // biases 0; LayerNorm weights 1. One stream in table order.
    Rng rng(mix64(seed ^ 0x5EEDF00Dull));
    const double residualStd = init_std / std::sqrt(2.0 * layers);
    for (const ParameterTensor& t : tensors) {
        const std::string& n = t.name;
        const auto endsWith = [&](const char* s) { return n.size() >= std::strlen(s) && n.compare(n.size() - std::strlen(s), std::string::npos, s) == 0; };
        if (endsWith("ln1w") || endsWith("ln2w") || n == "lnfw") {
            std::fill(w + t.offset, w + t.offset + t.count, T(1));
        } else if (t.decay) {
            const double sd = (endsWith("attprojw") || endsWith("fcprojw")) ? residualStd : init_std;
            for (std::int64_t i = 0; i < t.count; ++i)
                w[t.offset + i] = T(rng.normal() * sd);
        } else {
            std::fill(w + t.offset, w + t.offset + t.count, T(0));
        }
    }
}

template void initializeParameters<float>(const std::vector<ParameterTensor>&, std::uint64_t, double, int, float*);
template void initializeParameters<double>(const std::vector<ParameterTensor>&, std::uint64_t, double, int, double*);

// ---------------------------------------------------------------- views

namespace {

template <class T> using MapM = Eigen::Map<Mat<T>>;
template <class T> using MapV = Eigen::Map<Vec<T>>;

template <class T>
MapM<T> mat(T* p, Index rows, Index cols) { return MapM<T>(p, rows, cols); }
template <class T>
MapV<T> vec(T* p, Index n) { return MapV<T>(p, n); }
template <class T>
Eigen::Map<const Mat<T>> cmat(const T* p, Index rows, Index cols) { return Eigen::Map<const Mat<T>>(p, rows, cols); }
template <class T>
Eigen::Map<const Vec<T>> cvec(const T* p, Index n) { return Eigen::Map<const Vec<T>>(p, n); }

// Hands out consecutive regions of a flat buffer; first pass counts, second assigns.
template <class T>
struct Carver {
    T* base = nullptr;
    std::int64_t used = 0;
    T* take(std::int64_t n)
    {
        T* p = base ? base + used : nullptr;
        used += n;
        return p;
    }
};

} // namespace

template <class T>
struct GptModel<T>::Layer {
    T *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

template <class T>
struct GptModel<T>::Acts {
    T *ln1, *qkv, *atty, *att, *res2, *ln2, *fch, *fchg, *res3;  // tensors
    T *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;                // fp32 statistics
};

template <class T>
struct GptModel<T>::Globals {
    T *wte, *wpe, *lnfw, *lnfb;          // parameters
    T *dwte, *dwpe, *dlnfw, *dlnfb;      // gradients
    T *m, *v, *master;                   // optimizer (master null unless bf16-mixed)
    T *encoded, *lnf, *probs;            // activations
    T *lnf_mean, *lnf_rstd, *losses;     // statistics
    T *dres, *dln, *dqkv, *dfch, *datt;  // workspace
};

// ---------------------------------------------------------------- construction

template <class T>
GptModel<T>::GptModel(const GptConfig& config, const ModelOptions& options, EmulatedDevice& device)
    : cfg_(config), opts_(options), dev_(device)
{
    if (FieldErrors e = validate(cfg_); !e.empty())
        throw InputError(e);
    if (opts_.batch < 1)
        throw InputError("batch: must be at least 1");
    const bool bf16 = opts_.precision != PrecisionMode::FP32;
    if (bf16 && !std::is_same_v<T, float>)
        throw std::invalid_argument("GptModel: bf16 modes are emulated on float only");
    B_ = opts_.batch;
    T_ = cfg_.seq;
    C_ = cfg_.hidden;
    V_ = cfg_.vocab;
    L_ = cfg_.layers;
    NH_ = cfg_.heads;
    N_ = std::int64_t(B_) * T_;
    P_ = engine::parameterCount(cfg_);
    compute_ = bf16 ? DataType::BF16 : DataType::FP32;
    eb_ = bf16 ? 2 : 4;
    const std::int64_t C = C_, N = N_, V = V_, att = std::int64_t(NH_) * T_ * N;
    const std::size_t hb = sizeof(T);
    gl_ = new Globals{};
    try {
        tensors_ = parameterTable(cfg_);
        if (tensors_.back().offset + tensors_.back().count != P_)
            throw std::logic_error("GptModel: parameter table does not add up to P");

        // Activations: tensors first (e bytes each), then fp32 statistics.
        const bool full = opts_.recompute == Recompute::Full, selective = opts_.recompute == Recompute::Selective;
        auto carveActs = [&](Carver<T>& ten, Carver<T>& st) {
            a_.assign(size_t(L_), Acts{});
            gl_->encoded = ten.take(C * N);
            gl_->lnf = ten.take(C * N);
            // The softmax over the vocabulary is kept in fp32 whatever the precision, as Megatron-LM's
            // cross-entropy keeps it for backward; the 16-bit logits are transient.
            gl_->probs = st.take(V * N);
            gl_->lnf_mean = st.take(N);
            gl_->lnf_rstd = st.take(N);
            gl_->losses = st.take(N);
            Acts scratch{};
            if (full || selective)
                scratch.att = ten.take(att);
            if (full) {
                scratch.ln1 = ten.take(C * N);
                scratch.qkv = ten.take(3 * C * N);
                scratch.atty = ten.take(C * N);
                scratch.res2 = ten.take(C * N);
                scratch.ln2 = ten.take(C * N);
                scratch.fch = ten.take(4 * C * N);
                scratch.fchg = ten.take(4 * C * N);
                scratch.ln1_mean = st.take(N);
                scratch.ln1_rstd = st.take(N);
                scratch.ln2_mean = st.take(N);
                scratch.ln2_rstd = st.take(N);
            }
            for (Acts& a : a_) {
                if (full) {
                    a = scratch;
                    a.res3 = ten.take(C * N);
                    continue;
                }
                a.ln1 = ten.take(C * N);
                a.qkv = ten.take(3 * C * N);
                a.atty = ten.take(C * N);
                a.att = selective ? scratch.att : ten.take(att);
                a.res2 = ten.take(C * N);
                a.ln2 = ten.take(C * N);
                a.fch = ten.take(4 * C * N);
                a.fchg = ten.take(4 * C * N);
                a.res3 = ten.take(C * N);
                a.ln1_mean = st.take(N);
                a.ln1_rstd = st.take(N);
                a.ln2_mean = st.take(N);
                a.ln2_rstd = st.take(N);
            }
        };
        Carver<T> countTensors, countStats;
        carveActs(countTensors, countStats);
        const std::int64_t workElems = 9 * C * N + att;  // dres, dln, dqkv (3), dfch (4), datt

        DeviceAllocator& alloc = dev_.allocator();
        weights_ = alloc.allocate(MemoryCategory::Weights, double(P_) * eb_, size_t(P_), hb);
        grads_ = alloc.allocate(MemoryCategory::Gradients, double(P_) * eb_, size_t(P_), hb);
        const int optArrays = opts_.precision == PrecisionMode::BF16Mixed ? 3 : 2;
        optimizer_ = alloc.allocate(MemoryCategory::Optimizer, double(P_) * 4 * optArrays,
                                    size_t(P_ * optArrays), hb);
        activations_ = alloc.allocate(MemoryCategory::Activations,
                                      double(countTensors.used) * eb_ + double(countStats.used) * 4,
                                      size_t(countTensors.used + countStats.used), hb);
        workspace_ = alloc.allocate(MemoryCategory::Workspace, double(workElems) * eb_, size_t(workElems), hb);

        Carver<T> ten{activations_.as<T>(), 0}, st{activations_.as<T>() + countTensors.used, 0};
        carveActs(ten, st);
        Carver<T> work{workspace_.as<T>(), 0};
        gl_->dres = work.take(C * N);
        gl_->dln = work.take(C * N);
        gl_->dqkv = work.take(3 * C * N);
        gl_->dfch = work.take(4 * C * N);
        gl_->datt = work.take(att);

        // Parameter and gradient views, in table order.
        auto views = [&](T* base, std::vector<Layer>& layers, T*& wte, T*& wpe, T*& lnfw, T*& lnfb) {
            size_t i = 0;
            auto next = [&] { return base + tensors_[i++].offset; };
            wte = next();
            wpe = next();
            layers.assign(size_t(L_), Layer{});
            for (Layer& y : layers) {
                y.ln1w = next(); y.ln1b = next(); y.qkvw = next(); y.qkvb = next();
                y.attprojw = next(); y.attprojb = next(); y.ln2w = next(); y.ln2b = next();
                y.fcw = next(); y.fcb = next(); y.fcprojw = next(); y.fcprojb = next();
            }
            lnfw = next();
            lnfb = next();
        };
        views(weights_.as<T>(), p_, gl_->wte, gl_->wpe, gl_->lnfw, gl_->lnfb);
        views(grads_.as<T>(), g_, gl_->dwte, gl_->dwpe, gl_->dlnfw, gl_->dlnfb);
        gl_->m = optimizer_.as<T>();
        gl_->v = gl_->m + P_;
        gl_->master = optArrays == 3 ? gl_->v + P_ : nullptr;
    } catch (...) {
        delete gl_;
        gl_ = nullptr;
        throw;
    }

    T* w = weights_.as<T>();
    initializeParameters<T>(tensors_, opts_.seed, opts_.init_std, L_, w);
    if (gl_->master)
        std::copy(w, w + P_, gl_->master);
    if (bf16)
        round(w, P_);
}

template <class T>
GptModel<T>::~GptModel()
{
    delete gl_;
}

template <class T>
const T* GptModel<T>::losses() const
{
    return gl_->losses;
}

template <class T>
void GptModel<T>::round(T* x, std::int64_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        // How the host emulates a bf16 store: the kernel that produced x already charged its
        // bf16 write, so the device clock charges nothing more (a real device has no such pass).
        if (compute_ == DataType::BF16)
            round_to_bf16(dev_.pool(), x, count);
    } else {
        (void)x;
        (void)count;
    }
}

// The bias and residual adds fused into an output projection: their arithmetic (2 FLOPs per
// output) as element-wise work, as the cluster's separate pass counts it; their bytes are the
// product's (KernelCosts.h), so none here.
template <class T>
void GptModel<T>::chargeEpilogue(double outputs)
{
    dev_.charge(KernelKind::Elementwise, {2 * outputs, 0, 0}, compute_);
}

template <class T>
const T* GptModel<T>::layerInput(int l) const
{
    return l == 0 ? gl_->encoded : a_[size_t(l - 1)].res3;
}

// ---------------------------------------------------------------- kernel costs
// FLOPs: 2 per multiply-add for products; for other kernels a per-element count
// of the arithmetic they do (stated at each call). Epilogues fused into a
// product (bias, residual add, the causal softmax inside attention) add bytes
// only. Bytes: device bytes of each tensor read and written once.

// (matmulForwardCost, chargeMatmulBackward: KernelCosts.h)

// ---------------------------------------------------------------- forward

template <class T>
void GptModel<T>::layerForward(int l)
{
    KernelPool& pool = dev_.pool();
    const Layer& w = p_[size_t(l)];
    const Acts& a = a_[size_t(l)];
    const Index C = C_, N = N_;
    const double c = C, n = double(N), att = double(NH_) * T_ * n;
    const CostArgs s{eb_, eb_};
    const T* resIn = layerInput(l);
    const Mat<T> noResidual;  // empty (0 columns): no residual input

    layernorm_forward<T>(pool, mat(a.ln1, C, N), vec(a.ln1_mean, N), vec(a.ln1_rstd, N), cmat(resIn, C, N),
                         cvec(w.ln1w, C), cvec(w.ln1b, C));
    dev_.charge(KernelKind::LayerNorm, {8 * c * n, c * n * s.e + 2 * c * s.we, c * n * s.e + 2 * n * 4}, compute_);
    round(a.ln1, C * N);

    matmul_forward<T>(pool, mat(a.qkv, 3 * C, N), cmat(a.ln1, C, N), cmat(w.qkvw, C, 3 * C), cvec(w.qkvb, 3 * C),
                      noResidual);
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, 3 * c, n, true, false, s), compute_);
    round(a.qkv, 3 * C * N);

    attention_probs_forward<T>(pool, mat(a.att, T_, Index(att / T_)), cmat(a.qkv, 3 * C, N), B_, T_, NH_);
    // scores K^T Q over the full (T, T) per head: 2*T*hs*T per (b, h) = 2*T*C*N in all
    dev_.charge(KernelKind::Attention, {2 * double(T_) * c * n, 2 * c * n * s.e, att * s.e}, compute_);
    round(a.att, Index(att));
    attention_values_forward<T>(pool, mat(a.atty, C, N), cmat(a.att, T_, Index(att / T_)), cmat(a.qkv, 3 * C, N),
                                B_, T_, NH_);
    dev_.charge(KernelKind::Attention, {2 * double(T_) * c * n, att * s.e + c * n * s.e, c * n * s.e}, compute_);
    round(a.atty, C * N);

    matmul_forward<T>(pool, mat(a.res2, C, N), cmat(a.atty, C, N), cmat(w.attprojw, C, C), cvec(w.attprojb, C),
                      cmat(resIn, C, N));
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, c, n, true, true, s), compute_);
    chargeEpilogue(c * n);
    round(a.res2, C * N);

    layernorm_forward<T>(pool, mat(a.ln2, C, N), vec(a.ln2_mean, N), vec(a.ln2_rstd, N), cmat(a.res2, C, N),
                         cvec(w.ln2w, C), cvec(w.ln2b, C));
    dev_.charge(KernelKind::LayerNorm, {8 * c * n, c * n * s.e + 2 * c * s.we, c * n * s.e + 2 * n * 4}, compute_);
    round(a.ln2, C * N);

    matmul_forward<T>(pool, mat(a.fch, 4 * C, N), cmat(a.ln2, C, N), cmat(w.fcw, C, 4 * C), cvec(w.fcb, 4 * C),
                      noResidual);
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, 4 * c, n, true, false, s), compute_);
    round(a.fch, 4 * C * N);

    gelu_forward<T>(pool, vec(a.fchg, 4 * C * N), cvec(a.fch, 4 * C * N));
    // tanh GeLU: about 10 FLOPs per element (cube, scale, tanh counted as one, products)
    dev_.charge(KernelKind::Gelu, {10 * 4 * c * n, 4 * c * n * s.e, 4 * c * n * s.e}, compute_);
    round(a.fchg, 4 * C * N);

    matmul_forward<T>(pool, mat(a.res3, C, N), cmat(a.fchg, 4 * C, N), cmat(w.fcprojw, 4 * C, C),
                      cvec(w.fcprojb, C), cmat(a.res2, C, N));
    dev_.charge(KernelKind::Matmul, matmulForwardCost(4 * c, c, n, true, true, s), compute_);
    chargeEpilogue(c * n);
    round(a.res3, C * N);
}

template <class T>
double GptModel<T>::forward(const int* inputs, const int* targets)
{
    KernelPool& pool = dev_.pool();
    const Index C = C_, N = N_, V = V_;
    const double c = C, n = double(N), v = V;
    const CostArgs s{eb_, eb_};
    for (Index i = 0; i < N; ++i)
        if (inputs[i] < 0 || inputs[i] >= V_ || targets[i] < 0 || targets[i] >= V_)
            throw std::out_of_range("GptModel::forward: token id outside [0, vocab)");
    inputs_.assign(inputs, inputs + N);
    targets_.assign(targets, targets + N);
    const Eigen::Map<const Eigen::VectorXi> in(inputs_.data(), N), tg(targets_.data(), N);

    encoder_forward<T>(mat(gl_->encoded, C, N), in, cmat(gl_->wte, C, V), cmat(gl_->wpe, C, T_), B_, T_);
    dev_.charge(KernelKind::Embedding, {c * n, 2 * c * n * s.we + n * 4, c * n * s.e}, compute_);
    round(gl_->encoded, C * N);

    for (int l = 0; l < L_; ++l)
        layerForward(l);

    const T* last = layerInput(L_);
    layernorm_forward<T>(pool, mat(gl_->lnf, C, N), vec(gl_->lnf_mean, N), vec(gl_->lnf_rstd, N), cmat(last, C, N),
                         cvec(gl_->lnfw, C), cvec(gl_->lnfb, C));
    dev_.charge(KernelKind::LayerNorm, {8 * c * n, c * n * s.e + 2 * c * s.we, c * n * s.e + 2 * n * 4}, compute_);
    round(gl_->lnf, C * N);

    // LM head tied to wte: logits (V, N) = wte^T (V, C) * lnf (C, N), written into probs.
    matmul_forward<T>(pool, mat(gl_->probs, V, N), cmat(gl_->lnf, C, N), cmat(gl_->wte, C, V), Vec<T>(),
                      Mat<T>());
    dev_.charge(KernelKind::Matmul, matmulForwardCost(c, v, n, false, false, s), compute_);

    softmax_crossentropy_forward<T>(pool, mat(gl_->probs, V, N), vec(gl_->losses, N), tg);
    // max, subtract, exp, sum, scale: about 5 FLOPs per logit; fp32 probabilities out
    dev_.charge(KernelKind::Softmax, {5 * v * n, v * n * s.e, v * n * 4 + n * 4}, compute_);

    double sum = 0;
    for (Index i = 0; i < N; ++i)
        sum += double(gl_->losses[i]);
    return sum / double(N);
}

// ---------------------------------------------------------------- backward

template <class T>
void GptModel<T>::zeroGrad()
{
    T* g = grads_.as<T>();
    dev_.pool().parallelFor(P_, 1 << 14, [&](std::int64_t i0, std::int64_t i1) { std::fill(g + i0, g + i1, T(0)); });
    dev_.charge(KernelKind::Elementwise, {0, 0, double(P_) * eb_}, compute_);
}

template <class T>
void GptModel<T>::layerBackward(int l)
{
    KernelPool& pool = dev_.pool();
    const Layer& w = p_[size_t(l)];
    const Layer& d = g_[size_t(l)];
    const Acts& a = a_[size_t(l)];
    const Index C = C_, N = N_;
    const double c = C, n = double(N), att = double(NH_) * T_ * n;
    const Index attCols = Index(att / T_);
    const CostArgs s{eb_, eb_};
    const T* resIn = layerInput(l);
    T *dres = gl_->dres, *dln = gl_->dln, *dqkv = gl_->dqkv, *dfch = gl_->dfch;

    // Recomputation: full redoes the whole layer from its saved input; selective redoes the
    // attention core from the saved qkv, as Megatron-LM's checkpoint of it does: the
    // probabilities and the attention over V (whose output, also saved, comes out the same).
    if (opts_.recompute == Recompute::Full) {
        layerForward(l);
    } else if (opts_.recompute == Recompute::Selective) {
        attention_probs_forward<T>(pool, mat(a.att, T_, attCols), cmat(a.qkv, 3 * C, N), B_, T_, NH_);
        dev_.charge(KernelKind::Attention, {2 * double(T_) * c * n, 2 * c * n * s.e, att * s.e}, compute_);
        round(a.att, Index(att));
        attention_values_forward<T>(pool, mat(a.atty, C, N), cmat(a.att, T_, attCols), cmat(a.qkv, 3 * C, N), B_, T_,
                                    NH_);
        dev_.charge(KernelKind::Attention, {2 * double(T_) * c * n, att * s.e + c * n * s.e, c * n * s.e}, compute_);
        round(a.atty, C * N);
    }

    // MLP: res3 = res2 + fcproj(gelu(fc(ln2(res2)))); dres holds d res3 and becomes d res2.
    matmul_backward<T>(pool, mat(dfch, 4 * C, N), mat(d.fcprojw, 4 * C, C), vec(d.fcprojb, C), cmat(dres, C, N),
                       cmat(a.fchg, 4 * C, N), cmat(w.fcprojw, 4 * C, C));
    chargeMatmulBackward(dev_, 4 * c, c, n, true, s, compute_);
    round(dfch, 4 * C * N);
    gelu_backward<T>(pool, vec(dfch, 4 * C * N), cvec(a.fch, 4 * C * N), cvec(dfch, 4 * C * N));
    dev_.charge(KernelKind::Gelu, {16 * 4 * c * n, 2 * 4 * c * n * s.e, 4 * c * n * s.e}, compute_);
    round(dfch, 4 * C * N);
    matmul_backward<T>(pool, mat(dln, C, N), mat(d.fcw, C, 4 * C), vec(d.fcb, 4 * C), cmat(dfch, 4 * C, N),
                       cmat(a.ln2, C, N), cmat(w.fcw, C, 4 * C));
    chargeMatmulBackward(dev_, c, 4 * c, n, true, s, compute_);
    round(dln, C * N);
    layernorm_backward<T>(pool, mat(dres, C, N), vec(d.ln2w, C), vec(d.ln2b, C), cmat(dln, C, N), cmat(a.res2, C, N),
                          cvec(w.ln2w, C), cvec(a.ln2_mean, N), cvec(a.ln2_rstd, N));
    dev_.charge(KernelKind::LayerNorm, {14 * c * n, 3 * c * n * s.e + 2 * n * 4 + 3 * c * s.we,
                                        c * n * s.e + 2 * c * s.we}, compute_);
    round(dres, C * N);

    // Attention: res2 = res_in + attproj(attention(qkv(ln1(res_in)))); dres becomes d res_in.
    T* datty = dln;  // dln is free again: its last reader was layernorm_backward above
    matmul_backward<T>(pool, mat(datty, C, N), mat(d.attprojw, C, C), vec(d.attprojb, C), cmat(dres, C, N),
                       cmat(a.atty, C, N), cmat(w.attprojw, C, C));
    chargeMatmulBackward(dev_, c, c, n, true, s, compute_);
    round(datty, C * N);
    attention_backward<T>(pool, mat(dqkv, 3 * C, N), mat(gl_->datt, T_, attCols), cmat(datty, C, N),
                          cmat(a.att, T_, attCols), cmat(a.qkv, 3 * C, N), B_, T_, NH_);
    // four (T, T) x hs products per head: dV, d probs, dQ, dK
    dev_.charge(KernelKind::Attention, {8 * double(T_) * c * n, 4 * c * n * s.e + att * s.e,
                                        3 * c * n * s.e + att * s.e}, compute_);
    round(dqkv, 3 * C * N);
    matmul_backward<T>(pool, mat(dln, C, N), mat(d.qkvw, C, 3 * C), vec(d.qkvb, 3 * C), cmat(dqkv, 3 * C, N),
                       cmat(a.ln1, C, N), cmat(w.qkvw, C, 3 * C));
    chargeMatmulBackward(dev_, c, 3 * c, n, true, s, compute_);
    round(dln, C * N);
    layernorm_backward<T>(pool, mat(dres, C, N), vec(d.ln1w, C), vec(d.ln1b, C), cmat(dln, C, N), cmat(resIn, C, N),
                          cvec(w.ln1w, C), cvec(a.ln1_mean, N), cvec(a.ln1_rstd, N));
    dev_.charge(KernelKind::LayerNorm, {14 * c * n, 3 * c * n * s.e + 2 * n * 4 + 3 * c * s.we,
                                        c * n * s.e + 2 * c * s.we}, compute_);
    round(dres, C * N);
}

template <class T>
void GptModel<T>::backward()
{
    if (inputs_.empty())
        throw std::logic_error("GptModel::backward: no forward to differentiate");
    KernelPool& pool = dev_.pool();
    const Index C = C_, N = N_, V = V_;
    const double c = C, n = double(N), v = V;
    const CostArgs s{eb_, eb_};
    const Eigen::Map<const Eigen::VectorXi> in(inputs_.data(), N), tg(targets_.data(), N);

    // d mean loss / d logits, written over the probabilities.
    crossentropy_softmax_backward<T>(pool, mat(gl_->probs, V, N), cmat(gl_->probs, V, N), tg, T(1.0 / double(N)));
    dev_.charge(KernelKind::Softmax, {2 * v * n, v * n * 4, v * n * s.e}, compute_);
    round(gl_->probs, V * N);

    // LM head: dlnf (C, N) = wte * dlogits; dwte += lnf * dlogits^T.
    Vec<T> noBias;  // the head has no bias: empty, skipped
    matmul_backward<T>(pool, mat(gl_->dln, C, N), mat(gl_->dwte, C, V), noBias,
                       cmat(gl_->probs, V, N), cmat(gl_->lnf, C, N), cmat(gl_->wte, C, V));
    chargeMatmulBackward(dev_, c, v, n, false, s, compute_);
    round(gl_->dln, C * N);

    std::fill(gl_->dres, gl_->dres + C * N, T(0));
    dev_.charge(KernelKind::Elementwise, {0, 0, c * n * s.e}, compute_);
    layernorm_backward<T>(pool, mat(gl_->dres, C, N), vec(gl_->dlnfw, C), vec(gl_->dlnfb, C), cmat(gl_->dln, C, N),
                          cmat(layerInput(L_), C, N), cvec(gl_->lnfw, C), cvec(gl_->lnf_mean, N),
                          cvec(gl_->lnf_rstd, N));
    dev_.charge(KernelKind::LayerNorm, {14 * c * n, 3 * c * n * s.e + 2 * n * 4 + 3 * c * s.we,
                                        c * n * s.e + 2 * c * s.we}, compute_);
    round(gl_->dres, C * N);

    for (int l = L_ - 1; l >= 0; --l)
        layerBackward(l);

    encoder_backward<T>(mat(gl_->dwte, C, V), mat(gl_->dwpe, C, T_), cmat(gl_->dres, C, N), in, B_, T_);
    dev_.charge(KernelKind::Embedding, {2 * c * n, c * n * s.e + 2 * c * n * s.we, 2 * c * n * s.we}, compute_);
    round(grads_.as<T>(), P_);  // bf16 gradients: stored rounded once accumulated
}

// ---------------------------------------------------------------- update

template <class T>
double GptModel<T>::update(const AdamWSettings& settings, double max_norm, int step)
{
    KernelPool& pool = dev_.pool();
    const double p = double(P_);
    const double norm = std::sqrt(sum_of_squares<T>(pool, grads_.as<T>(), P_));
    dev_.charge(KernelKind::Optimizer, {2 * p, p * eb_, 0}, compute_);
    const double scale = (max_norm > 0 && norm > max_norm) ? max_norm / (norm + 1e-6) : 1.0;

    WeightRounding rounding = WeightRounding::None;
    if (opts_.precision == PrecisionMode::BF16RNE)
        rounding = WeightRounding::Bf16NearestEven;
    else if (opts_.precision == PrecisionMode::BF16SR)
        rounding = WeightRounding::Bf16Stochastic;
    T* w = weights_.as<T>();
    const T* g = grads_.as<T>();
    for (const ParameterTensor& t : tensors_)
        adamw_update<T>(pool, w + t.offset, g + t.offset, gl_->m + t.offset, gl_->v + t.offset,
                        gl_->master ? gl_->master + t.offset : nullptr, t.count, settings, t.decay, step, scale,
                        rounding, opts_.seed, std::uint64_t(t.offset));
    // Per parameter: read weight, gradient, m, v (+ master), write weight, m, v (+ master);
    // about 12 FLOPs (moments, bias corrections, sqrt, divide, decay, step).
    const double master = gl_->master ? 4 : 0;
    dev_.charge(KernelKind::Optimizer, {12 * p, p * (2 * eb_ + 8 + master), p * (eb_ + 8 + master)}, compute_);
    return norm;
}

template class GptModel<float>;
template class GptModel<double>;

} // namespace shardscope::engine
