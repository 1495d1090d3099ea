// The mixture-of-experts MLP block, on one device or over an ep group; see MoeMlp.h.
#include "MoeMlp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace shardscope::engine {

namespace {

constexpr double kStat = 4;  // the router's logits and weights are kept in fp32

// Consecutive regions of one allocation.
template <class T>
struct Regions {
    T* base;
    std::int64_t used = 0;
    T* take(std::int64_t n)
    {
        T* p = base + used;
        used += n;
        return p;
    }
};

} // namespace

std::int64_t MoeShape::parameters() const
{
    const std::int64_t C = hidden, E = router.experts;
    return C * E + E * (C * ffnIn() + std::int64_t(ffn) * C) + C * sharedIn() + std::int64_t(shared_ffn) * C;
}

template <class T>
MoeMlp<T>::MoeMlp(Kernels<T>& kernels, MoeShape shape, MoeParallel parallel) : k_(kernels), s_(shape), par_(parallel)
{
    if (s_.hidden < 1 || s_.ffn < 1)
        throw std::invalid_argument("MoeMlp: hidden " + std::to_string(s_.hidden) + " and ffn " +
                                    std::to_string(s_.ffn) + " must be positive");
    if (s_.shared_ffn < 0)
        throw std::invalid_argument("MoeMlp: shared_ffn " + std::to_string(s_.shared_ffn) + " is negative");
    if (s_.router.top_k < 1 || s_.router.top_k > s_.router.experts)
        throw std::invalid_argument("MoeMlp: top_k " + std::to_string(s_.router.top_k) + " must be in [1, experts " +
                                    std::to_string(s_.router.experts) + "]");
    const int ep = par_.epSize();
    if (s_.router.experts % ep != 0)
        throw std::invalid_argument("MoeMlp: ep " + std::to_string(ep) + " does not divide the " +
                                    std::to_string(s_.router.experts) + " experts");
    El_ = s_.router.experts / ep;
    const int etp = par_.etpSize();
    if (s_.ffn % etp != 0)
        throw std::invalid_argument("MoeMlp: etp " + std::to_string(etp) + " does not divide the expert size " +
                                    std::to_string(s_.ffn));
    Fl_ = s_.ffn / etp;
    Finl_ = s_.gated() ? 2 * Fl_ : Fl_;
    stp_ = par_.shared_tp ? par_.shared_tp->size() : 1;
    if (s_.shared_ffn % stp_ != 0)
        throw std::invalid_argument("MoeMlp: tp " + std::to_string(stp_) + " does not divide the shared experts' " +
                                    std::to_string(s_.shared_ffn) + " columns");
    Fsl_ = s_.shared_ffn / stp_;
    Fsinl_ = s_.gated() ? 2 * Fsl_ : Fsl_;
}

template <class T>
void MoeMlp<T>::sharedForward(MoeSaved<T>& s, T* y, const T* x, const MoeWeights<T>& w, std::int64_t N)
{
    const std::int64_t C = s_.hidden, Nf = N * stp_;  // Nf: the tp group's tokens
    const double e = k_.elementBytes();
    CommGroup* tp = par_.shared_tp;
    DeviceBuffer work = k_.device().allocator().allocate(MemoryCategory::Workspace, double(C * Nf * (tp ? 2 : 1)) * e,
                                                         size_t(C * Nf * (tp ? 2 : 1)), sizeof(T), false);
    T* out = work.template as<T>();
    const T* in = x;
    if (tp) {  // the sequence shards gathered (the column-parallel fc1's input)
        T* full = out + C * Nf;
        std::copy_n(x, C * N, full + par_.shared_tp_rank * C * N);
        tp->allGather(par_.shared_tp_rank, full, size_t(C * Nf), par_.element_bytes);
        in = full;
    }
    k_.matmulForward(s.sharedPre, in, w.shared_in, nullptr, nullptr, C, Fsinl_, Nf);
    k_.activationForward(s_.mlp, s.sharedAct, s.sharedPre, Fsl_, Nf);
    k_.matmulForward(out, s.sharedAct, w.shared_out, nullptr, nullptr, Fsl_, C, Nf);
    const T* mine = out;
    if (tp) {  // the row-parallel fc2's partial sums, reduce-scattered to the token shard
        tp->reduceScatter(par_.shared_tp_rank, out, size_t(C * Nf), ReduceOp::Sum, par_.element_bytes);
        mine = out + par_.shared_tp_rank * C * N;
    }
    k_.accumulate(y, mine, C * N);  // + the routed output
}

template <class T>
void MoeMlp<T>::sharedBackward(MoeSaved<T>& s, T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g,
                               std::int64_t N)
{
    const std::int64_t C = s_.hidden, Nf = N * stp_;
    const double e = k_.elementBytes();
    CommGroup* tp = par_.shared_tp;
    const std::int64_t count = Fsl_ * Nf + Fsinl_ * Nf + (tp ? 3 * C * Nf : 0);
    DeviceBuffer work = k_.device().allocator().allocate(MemoryCategory::Workspace, double(count) * e, size_t(count),
                                                         sizeof(T), false);
    Regions<T> r{work.template as<T>()};
    T* sdact = r.take(Fsl_ * Nf);
    T* sdpre = r.take(Fsinl_ * Nf);
    // shared_experts: their forward again from the kept input (one tp rank), its output live
    // through their backward and dropped.
    DeviceBuffer rebuilt;
    if (s_.recompute_shared) {
        const std::int64_t values = (Fsinl_ + Fsl_ + C) * Nf;
        rebuilt = k_.device().allocator().allocate(MemoryCategory::Activations, double(values) * e, size_t(values),
                                                   sizeof(T), false);
        s.sharedPre = rebuilt.template as<T>();
        s.sharedAct = s.sharedPre + Fsinl_ * Nf;
        T* out = s.sharedAct + Fsl_ * Nf;
        k_.matmulForward(s.sharedPre, s.x, w.shared_in, nullptr, nullptr, C, Fsinl_, Nf);
        k_.activationForward(s_.mlp, s.sharedAct, s.sharedPre, Fsl_, Nf);
        k_.matmulForward(out, s.sharedAct, w.shared_out, nullptr, nullptr, Fsl_, C, Nf);
    }
    auto gather = [&](const T* shard) -> const T* {
        if (!tp)
            return shard;
        T* full = r.take(C * Nf);
        std::copy_n(shard, C * N, full + par_.shared_tp_rank * C * N);
        tp->allGather(par_.shared_tp_rank, full, size_t(C * Nf), par_.element_bytes);
        return full;
    };
    k_.matmulBackward(sdact, g.shared_out, nullptr, gather(dy), s.sharedAct, w.shared_out, Fsl_, C, Nf);
    k_.activationBackward(s_.mlp, sdpre, s.sharedPre, sdact, Fsl_, Nf);
    const T* in = gather(s.x);  // (gathered again: only the shard is kept)
    T* din = tp ? r.take(C * Nf) : dx;
    k_.matmulBackward(din, g.shared_in, nullptr, sdpre, in, w.shared_in, C, Fsinl_, Nf);
    if (tp) {
        tp->reduceScatter(par_.shared_tp_rank, din, size_t(C * Nf), ReduceOp::Sum, par_.element_bytes);
        std::copy_n(din + par_.shared_tp_rank * C * N, C * N, dx);
    }
}

template <class T>
void MoeMlp<T>::copyCopies(T* to, const T* from, std::int64_t count)
{
    std::copy_n(from, count, to);
    k_.chargeCopy(count);
}

template <class T>
void MoeMlp<T>::dropPastCapacity(MoeSaved<T>& s)
{
    const int E = s_.router.experts, K = s_.router.top_k;
    const std::int64_t N = s.N, NK = N * K;
    s.kept = s.counts;
    s.dropped = 0;
    std::vector<int> bins;  // the copies' experts; a dropped copy goes to bin E, sorted after every expert
    if (s_.capacity_factor > 0) {
        // get_capacity(num_tokens = N K, num_experts = E, capacity_factor): ceil(N K / E x factor).
        const auto capacity = std::int64_t(std::ceil(double(NK) / double(E) * s_.capacity_factor));
        std::vector<std::vector<std::int64_t>> copies(static_cast<size_t>(E));
        for (std::int64_t c = 0; c < NK; ++c)
            copies[size_t(s.topIdx[size_t(c)])].push_back(c);
        for (int e = 0; e < E; ++e) {
            std::vector<std::int64_t>& mine = copies[size_t(e)];
            if (std::int64_t(mine.size()) <= capacity)
                continue;
            if (bins.empty())
                bins = s.topIdx;
            // Drop policy "probs": the largest weights stay (torch.topk over the expert's column).
            std::stable_sort(mine.begin(), mine.end(),
                             [&](std::int64_t a, std::int64_t b) { return s.topW[a] > s.topW[b]; });
            for (size_t i = size_t(capacity); i < mine.size(); ++i)
                bins[size_t(mine[i])] = E;
            s.dropped += std::int64_t(mine.size()) - capacity;
            s.kept[size_t(e)] = capacity;
        }
    }
    s.perm = bins.empty() ? permuteByExpert(s.topIdx.data(), N, K, E) : permuteByExpert(bins.data(), N, K, E + 1);
}

template <class T>
void MoeMlp<T>::exchange(MoeSaved<T>& s)
{
    // Megatron's preprocess: every ep rank's per-expert counts, then the splits of the all-to-all.
    const int ep = par_.epSize(), E = s_.router.experts;
    s.sendCounts.assign(size_t(ep), 0);
    s.recvCounts.assign(size_t(ep), 0);
    s.chunks.assign(size_t(ep) * size_t(El_), 0);
    for (int e = 0; e < E; ++e)
        s.sendCounts[size_t(e / El_)] += size_t(s.kept[size_t(e)]);
    const int etp = par_.etpSize();
    // The copies each ep rank's experts compute: every sending member's counts for its experts
    // (`rows` members' counts of E experts each, as the preprocess gathered them).
    auto groupLoad = [&](const std::vector<T>& all, size_t rows) {
        double most = 0, sum = 0;
        for (int r = 0; r < ep; ++r) {
            double copies = 0;
            for (size_t row = 0; row < rows; ++row)
                for (int le = 0; le < El_; ++le)
                    copies += double(all[row * size_t(E) + size_t(r * El_ + le)]);
            most = std::max(most, copies);
            sum += copies;
        }
        s.busiest_copies = most;
        s.mean_copies = sum / ep;
    };
    if (par_.tpep) {
        // Megatron's preprocess under etp > 1 (token_dispatcher.py @ d98e8a64, MoEAlltoAllTokenDispatcher:
        // gather_from_sequence_parallel_region(num_local_tokens_per_expert, group=self.tp_ep_group)):
        // every (etp, ep) member's counts in one all-gather, member etp_rank + etp ep_rank at its slot.
        std::vector<T> all(size_t(ep) * size_t(etp) * size_t(E));
        const size_t me = size_t(par_.etp_rank) + size_t(etp) * size_t(par_.ep_rank);
        for (int e = 0; e < E; ++e)
            all[me * size_t(E) + size_t(e)] = T(s.kept[size_t(e)]);
        par_.tpep->allGather(int(me), all.data(), all.size(), 8);  // int64 counts on the link
        groupLoad(all, size_t(ep) * size_t(etp));
        // chunks (etp member m, sending ep rank i, local expert le): the copies member (m, i) sends here.
        s.chunks.assign(size_t(etp) * size_t(ep) * size_t(El_), 0);
        s.etpCounts.assign(size_t(etp), 0);
        for (int m = 0; m < etp; ++m)
            for (int i = 0; i < ep; ++i)
                for (int le = 0; le < El_; ++le) {
                    const auto n = std::int64_t(
                        all[(size_t(m) + size_t(etp) * size_t(i)) * size_t(E) + size_t(par_.ep_rank * El_ + le)]);
                    s.chunks[(size_t(m) * size_t(ep) + size_t(i)) * size_t(El_) + size_t(le)] = n;
                    s.etpCounts[size_t(m)] += size_t(n);
                    if (m == par_.etp_rank)
                        s.recvCounts[size_t(i)] += size_t(n);
                }
        s.received = std::int64_t(s.etpCounts[size_t(par_.etp_rank)]);
        s.own = 0;
        for (int m = 0; m < par_.etp_rank; ++m)
            s.own += std::int64_t(s.etpCounts[size_t(m)]);
    } else if (!par_.ep) {
        for (int e = 0; e < E; ++e)
            s.chunks[size_t(e)] = s.kept[size_t(e)];
        s.recvCounts[0] = s.sendCounts[0];
    } else {
        std::vector<T> all(size_t(ep) * size_t(E));
        for (int e = 0; e < E; ++e)
            all[size_t(par_.ep_rank) * size_t(E) + size_t(e)] = T(s.kept[size_t(e)]);
        par_.ep->allGather(par_.ep_rank, all.data(), all.size(), 8);  // int64 counts on the link
        groupLoad(all, size_t(ep));
        for (int i = 0; i < ep; ++i)
            for (int le = 0; le < El_; ++le) {
                const auto n = std::int64_t(all[size_t(i) * size_t(E) + size_t(par_.ep_rank * El_ + le)]);
                s.chunks[size_t(i) * size_t(El_) + size_t(le)] = n;
                s.recvCounts[size_t(i)] += size_t(n);
            }
    }
    if (!par_.tpep) {
        s.received = 0;
        for (std::size_t n : s.recvCounts)
            s.received += std::int64_t(n);
        s.etpCounts.assign(size_t(etp), 0);
        s.own = 0;
        // Expert tensor parallelism without ep: every etp member's chunks over the etp group (with
        // ep, the tp x ep gather above), the gathered copies member by member.
        if (par_.etp) {
            const size_t each = s.chunks.size();
            std::vector<T> all(size_t(etp) * each);
            for (size_t c = 0; c < each; ++c)
                all[size_t(par_.etp_rank) * each + c] = T(s.chunks[c]);
            par_.etp->allGather(par_.etp_rank, all.data(), all.size(), 8);
            s.chunks.resize(all.size());
            for (size_t c = 0; c < all.size(); ++c) {
                s.chunks[c] = std::int64_t(all[c]);
                s.etpCounts[c / each] += size_t(s.chunks[c]);
            }
            for (int m = 0; m < par_.etp_rank; ++m)
                s.own += std::int64_t(s.etpCounts[size_t(m)]);
        } else {
            s.etpCounts[0] = size_t(s.received);
        }
    }
    s.gathered = 0;
    for (std::size_t n : s.etpCounts)
        s.gathered += std::int64_t(n);
    if (!par_.ep)  // (one ep rank: the group is this rank, its copies the gathered ones)
        s.busiest_copies = s.mean_copies = double(s.gathered);
    // The same splits in values (C a copy), for the collectives.
    auto values = [&](const std::vector<std::size_t>& copies, std::vector<std::size_t>& out) {
        out.resize(copies.size());
        for (size_t i = 0; i < copies.size(); ++i)
            out[i] = copies[i] * size_t(s_.hidden);
    };
    values(s.sendCounts, s.sendValues);
    values(s.recvCounts, s.recvValues);
    values(s.etpCounts, s.etpValues);
}

template <class T>
bool MoeMlp<T>::sortsCopies(const MoeSaved<T>&) const
{
    // Megatron-LM sorts whenever a rank has several local experts (token_dispatcher.py @ d98e8a64,
    // MoEAlltoAllTokenDispatcher.dispatch_postprocess: `if self.num_local_experts > 1`), also where
    // one member's copies are in expert order already (then the sort is an identity copy it runs).
    return El_ > 1;
}

template <class T>
DeviceBuffer MoeMlp<T>::workspace(std::int64_t values)
{
    return k_.device().allocator().allocate(MemoryCategory::Workspace, double(values) * k_.elementBytes(),
                                            size_t(values), sizeof(T), false);
}

template <class T>
void MoeMlp<T>::permuteCopies(const MoeSaved<T>& s, T* dst, const T* src, bool toSorted, std::int64_t width,
                              double elementBytes)
{
    // Chunk c (etp member, sending rank, local expert c % El) at its chunk-order offset, and at
    // its place among its expert's copies in expert-major order.
    const std::int64_t C = width > 0 ? width : s_.hidden;
    std::vector<std::int64_t> at(s.chunks.size() + 1, 0);
    for (size_t c = 0; c < s.chunks.size(); ++c)
        at[c + 1] = at[c] + s.chunks[c];
    std::int64_t sorted = 0;
    for (int le = 0; le < El_; ++le)
        for (size_t c = size_t(le); c < s.chunks.size(); c += size_t(El_)) {
            const std::int64_t n = s.chunks[c] * C;
            if (toSorted)
                std::copy_n(src + at[c] * C, n, dst + sorted);
            else
                std::copy_n(src + sorted, n, dst + at[c] * C);
            sorted += n;
        }
    const double bytes = double(C * s.gathered) * (elementBytes > 0 ? elementBytes : k_.elementBytes());
    k_.device().charge(KernelKind::Elementwise, {0, bytes, bytes}, k_.compute());  // each copy read and written once
}

template <class T>
template <class Run>
void MoeMlp<T>::forEachExpertRun(const MoeSaved<T>& s, const Run& run) const
{
    // The copies lie by chunk (etp member, sending rank, local expert), or sorted by expert
    // (sortsCopies): consecutive copies of one expert are one run, computed as one GEMM per matrix
    // (Megatron's experts see each expert's copies as one batch), not a GEMM per sender.
    if (sortsCopies(s)) {
        std::int64_t o = 0;
        for (int le = 0; le < El_; ++le) {
            std::int64_t n = 0;
            for (size_t c = size_t(le); c < s.chunks.size(); c += size_t(El_))
                n += s.chunks[c];
            if (n > 0)
                run(o, n, std::int64_t(le));
            o += n;
        }
        return;
    }
    std::int64_t o = 0, begin = 0, count = 0, expert = -1;
    for (size_t c = 0; c < s.chunks.size(); ++c) {
        const std::int64_t n = s.chunks[c], le = std::int64_t(c) % El_;
        if (n == 0)
            continue;
        if (le != expert || o != begin + count) {
            if (count > 0)
                run(begin, count, expert);
            begin = o;
            count = 0;
            expert = le;
        }
        count += n;
        o += n;
    }
    if (count > 0)
        run(begin, count, expert);
}

template <class T>
void MoeMlp<T>::expertsForward(MoeSaved<T>& s, const MoeWeights<T>& w)
{
    const std::int64_t C = s_.hidden, F = Fl_, Fin = Finl_;
    // Several local experts: the copies sorted by expert first, as Megatron-LM's dispatcher does
    // after the all-to-all (token_dispatcher.py @ d98e8a64, dispatch_postprocess:
    // sort_chunks_by_idxs; combine_preprocess restores the order), so each expert computes its
    // copies as one batch; the sorted copies are the ones kept for the backward, and the outputs go
    // back to chunk order for the combine.
    DeviceBuffer temp;
    T* out = s.expertOut;
    if (sortsCopies(s)) {
        temp = workspace(C * s.gathered + s.gathered);
        T* sorted = temp.template as<T>();
        permuteCopies(s, sorted, s.recv, true);
        std::copy_n(sorted, C * s.gathered, s.recv);  // (in place: the copy back is the emulation's, not charged)
        T* sortedProb = sorted + C * s.gathered;      // the weights with their copies
        permuteCopies(s, sortedProb, s.prob, true, 1, kStat);
        std::copy_n(sortedProb, s.gathered, s.prob);
        out = sorted;
    }
    forEachExpertRun(s, [&](std::int64_t o, std::int64_t n, std::int64_t le) {
        k_.matmulForward(s.hidden + o * Fin, s.recv + o * C, w.expert_in + le * C * Fin, nullptr, nullptr, C, Fin, n);
        k_.weightedActivationForward(s_.mlp, s.act + o * F, s.hidden + o * Fin, s.prob + o, F, n);
        k_.matmulForward(out + o * C, s.act + o * F, w.expert_out + le * F * C, nullptr, nullptr, F, C, n);
    });
    if (out != s.expertOut)
        permuteCopies(s, s.expertOut, out, false);
}

template <class T>
double MoeMlp<T>::forward(MoeSaved<T>& s, T* y, const T* x, const MoeWeights<T>& w, std::int64_t N)
{
    const std::int64_t C = s_.hidden, E = s_.router.experts, K = s_.router.top_k, F = Fl_, Fin = Finl_;
    const std::int64_t Fs = s_.shared_ffn;
    const bool ep = par_.ep != nullptr, etp = par_.etp != nullptr;
    const bool apart = ep || etp;  // the experts' copies in buffers of their own
    const double e = k_.elementBytes();
    s.release();
    s.N = N;
    s.x = x;
    s.topIdx.resize(size_t(K * N));
    // The router's logits and weights (fp32), then the choice.
    s.routing = k_.device().allocator().allocate(MemoryCategory::Activations, double(E * N + K * N) * kStat,
                                                 size_t(E * N + K * N), sizeof(T), false);
    s.logits = s.routing.template as<T>();
    s.topW = s.logits + E * N;
    k_.matmulForward(s.logits, x, w.router, nullptr, nullptr, C, E, N);
    router_topk_forward<T>(s_.router, s.logits, N, w.expert_bias, s.topIdx.data(), s.topW);
    s.counts = engine::tokensPerExpert(s.topIdx.data(), N, int(K), int(E));
    dropPastCapacity(s);
    // The router's scores (E per token) and the copies' moves are memory work.
    k_.device().charge(KernelKind::Softmax, {0, double(E * N) * e, double(K * N) * (e + 4)}, k_.compute());
    exchange(s);
    const std::int64_t NK = N * K, R = s.received, G = s.gathered;

    // Saved for the backward, what Megatron-LM's experts keep: the experts' input copies (the
    // received, etp-gathered ones) and their router weights (fp32), pre-activations and weighted
    // activations (FC2's input); the shared experts' two. The dispatched copies and weights before
    // the all-to-all, the expert outputs before their way back and after it (the combine's input)
    // are only buffers (workspace, released after the forward); on one rank the dispatched copies
    // are the saved inputs themselves. On one device with dropped copies the outputs keep a zero
    // column for each (the combine reads every copy's slot).
    const std::int64_t inputs = apart ? G : NK;  // (one rank: the dispatch writes every copy, dropped ones last)
    // (The shared experts' over the tp group's tokens, their columns' slice.)
    const std::int64_t sharedTokens = N * stp_;
    // (moe_act recomputed: the activations live in the forward's workspace only.)
    const std::int64_t keptAct = s_.recompute_activation ? 0 : F * G;
    const std::int64_t keptShared = s_.recompute_shared ? 0 : (Fsinl_ + Fsl_) * sharedTokens;
    const std::int64_t tensors = C * inputs + Fin * G + keptAct + keptShared;
    s.buffer = k_.device().allocator().allocate(MemoryCategory::Activations, double(tensors) * e, size_t(tensors),
                                                sizeof(T), false);
    s.weights = k_.device().allocator().allocate(MemoryCategory::Activations, double(inputs) * kStat, size_t(inputs),
                                                 sizeof(T), false);
    const std::int64_t movingValues =
                           (apart ? C * NK + C * G + C * NK : C * NK) + (F * G - keptAct) +
                           ((Fsinl_ + Fsl_) * sharedTokens - keptShared),
                       movingWeights = apart ? NK : 0;
    DeviceBuffer moving = k_.device().allocator().allocate(
        MemoryCategory::Workspace, double(movingValues) * e + double(movingWeights) * kStat,
        size_t(movingValues + movingWeights), sizeof(T), false);
    Regions<T> r{s.buffer.template as<T>()};
    s.recv = r.take(C * inputs);
    s.hidden = r.take(Fin * G);
    s.act = s_.recompute_activation ? nullptr : r.take(F * G);
    s.sharedPre = Fs > 0 && !s_.recompute_shared ? r.take(Fsinl_ * sharedTokens) : nullptr;
    s.sharedAct = Fs > 0 && !s_.recompute_shared ? r.take(Fsl_ * sharedTokens) : nullptr;
    s.prob = s.weights.template as<T>();
    Regions<T> m{moving.template as<T>()};
    s.disp = apart ? m.take(C * NK) : s.recv;
    s.expertOut = apart ? m.take(C * G) : nullptr;
    s.combineIn = m.take(C * NK);
    if (!apart)
        s.expertOut = s.combineIn;
    T* dispProb = apart ? m.take(NK) : s.prob;  // the weights in dispatch order
    if (s_.recompute_activation)
        s.act = m.take(F * G);
    if (Fs > 0 && s_.recompute_shared) {  // (in the forward's workspace only)
        s.sharedPre = m.take(Fsinl_ * sharedTokens);
        s.sharedAct = m.take(Fsl_ * sharedTokens);
    }

    moe_dispatch_forward<T>(s.perm, int(K), x, C, s.disp);
    const std::int64_t sent = NK - s.dropped;  // the dispatched copies (the dropped ones sort last)
    for (std::int64_t j = 0; j < NK; ++j)
        dispProb[j] = j < sent ? s.topW[s.perm.order[size_t(j)]] : T(0);
    k_.device().charge(KernelKind::Elementwise,
                       {0, double(C * sent) * e + double(sent) * kStat, double(C * sent) * e + double(sent) * kStat},
                       k_.compute());
    const std::vector<std::size_t>& sendValues = s.sendValues;
    const std::vector<std::size_t>& recvValues = s.recvValues;
    const std::vector<std::size_t>& etpValues = s.etpValues;
    T* mine = s.recv + s.own * C;  // this rank's received copies among the gathered ones
    T* mineProb = s.prob + s.own;
    if (ep) {  // Megatron's token_dispatch: the copies to the ranks of their experts, then their weights
        par_.ep->allToAllV(par_.ep_rank, s.disp, sendValues.data(), mine, recvValues.data(), par_.element_bytes,
                           AllToAllBytes::OwnCopiesOut);
        par_.ep->allToAllV(par_.ep_rank, dispProb, s.sendCounts.data(), mineProb, s.recvCounts.data(), kStat,
                           AllToAllBytes::OwnCopiesOut);
    } else if (etp) {
        copyCopies(mine, s.disp, C * R);
        copyCopies(mineProb, dispProb, R);
    }
    if (etp) {  // dispatch_postprocess: every etp member's copies and weights
        par_.etp->allGatherV(par_.etp_rank, s.recv, etpValues.data(), par_.element_bytes);
        par_.etp->allGatherV(par_.etp_rank, s.prob, s.etpCounts.data(), kStat);
    }
    expertsForward(s, w);
    if (etp)  // combine_preprocess: the partial outputs summed back to the member that received them
        par_.etp->reduceScatterV(par_.etp_rank, s.expertOut, etpValues.data(), ReduceOp::Sum, par_.element_bytes);
    if (ep)  // token_combine: the outputs back
        par_.ep->allToAllV(par_.ep_rank, s.expertOut + s.own * C, recvValues.data(), s.combineIn, sendValues.data(),
                           par_.element_bytes, AllToAllBytes::OwnCopiesBack);
    else if (etp)
        copyCopies(s.combineIn, s.expertOut + s.own * C, C * R);
    std::fill(s.combineIn + C * sent, s.combineIn + C * NK, T(0));  // a dropped copy adds nothing
    moe_combine_forward<T>(s.perm, int(K), s.combineIn, nullptr, C, N, y);  // (the weights are in the outputs)
    k_.device().charge(KernelKind::Elementwise, {double(C * NK), double(C * NK) * e, double(C * N) * e},
                       k_.compute());
    if (Fs > 0)
        sharedForward(s, y, x, w, N);
    k_.round(y, C * N);
    s.disp = s.expertOut = s.combineIn = nullptr;  // (the moving buffers go with `moving`)
    if (s_.recompute_activation)
        s.act = nullptr;
    if (s_.recompute_shared)
        s.sharedPre = s.sharedAct = nullptr;

    // The load-balancing loss over the micro-batch: the counts summed over its token groups.
    s.batchCounts = s_.aux_loss_coeff > 0 && (s_.router.groups > 0 || w.expert_bias)
                        ? tokensPerExpertForAuxLoss<T>(s_.router, s.logits, N)
                        : s.counts;
    s.batchTokens = N;
    if (s_.aux_loss_coeff > 0) {
        std::vector<T> sum(s.batchCounts.begin(), s.batchCounts.end());
        for (int g = 0; g < 2; ++g)
            if (CommGroup* group = par_.token_groups[g]; group && group->size() > 1) {
                group->allReduce(par_.token_ranks[g], sum.data(), sum.size(), ReduceOp::Sum, 8);
                s.batchTokens *= group->size();
            }
        for (size_t i = 0; i < sum.size(); ++i)
            s.batchCounts[i] = std::int64_t(sum[i]);
    }
    return aux_loss_forward_backward<T>(s_.router, s.logits, N, s.batchCounts, s_.aux_loss_coeff, T(0), nullptr,
                                        s.batchTokens);
}

template <class T>
void MoeMlp<T>::expertsBackward(MoeSaved<T>& s, const MoeWeights<T>& w, const MoeGrads<T>& g, const T* dout, T* dact,
                                T* dhidden, T* din, T* dprob)
{
    const std::int64_t C = s_.hidden, F = Fl_, Fin = Finl_;
    // (Sorted as the forward sorted them: the output gradients by expert, the input and weight
    // gradients back.)
    DeviceBuffer temp;
    const T* dy = dout;
    T* dx = din;
    T* dw = dprob;
    if (sortsCopies(s)) {
        temp = workspace(2 * C * s.gathered + s.gathered);
        T* sorted = temp.template as<T>();
        permuteCopies(s, sorted, dout, true);
        dy = sorted;
        dx = sorted + C * s.gathered;
        dw = dx + C * s.gathered;
    }
    // moe_act: the activations again, from the kept pre-activations and weights (the same kernel,
    // the same values), live until FC2's weight gradient has read them.
    DeviceBuffer rebuilt;
    const T* act = s.act;
    if (s_.recompute_activation) {
        // (An activation again, as the planner's working set counts it: not a workspace.)
        rebuilt = k_.device().allocator().allocate(MemoryCategory::Activations, double(F * s.gathered) * k_.elementBytes(),
                                                   size_t(F * s.gathered), sizeof(T), false);
        T* a = rebuilt.template as<T>();
        forEachExpertRun(s, [&](std::int64_t o, std::int64_t n, std::int64_t) {
            k_.weightedActivationForward(s_.mlp, a + o * F, s.hidden + o * Fin, s.prob + o, F, n);
        });
        act = a;
    }
    forEachExpertRun(s, [&](std::int64_t o, std::int64_t n, std::int64_t le) {
        k_.matmulBackward(dact + o * F, g.expert_out + le * F * C, nullptr, dy + o * C, act + o * F,
                          w.expert_out + le * F * C, F, C, n);
        k_.weightedActivationBackward(s_.mlp, dhidden + o * Fin, dw + o, s.hidden + o * Fin, s.prob + o, dact + o * F,
                                      F, n);
        k_.matmulBackward(dx + o * C, g.expert_in + le * C * Fin, nullptr, dhidden + o * Fin, s.recv + o * C,
                          w.expert_in + le * C * Fin, C, Fin, n);
    });
    if (dx != din) {
        permuteCopies(s, din, dx, false);
        permuteCopies(s, dprob, dw, false, 1, kStat);
    }
}

template <class T>
void MoeMlp<T>::backward(MoeSaved<T>& s, T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g, T aux_grad)
{
    const std::int64_t C = s_.hidden, E = s_.router.experts, K = s_.router.top_k, F = Fl_, Fin = Finl_, N = s.N,
                       NK = N * K, R = s.received, G = s.gathered;
    const std::int64_t Fs = s_.shared_ffn;
    const bool ep = par_.ep != nullptr, etp = par_.etp != nullptr, apart = ep || etp;
    const double e = k_.elementBytes();
    // Temporaries: d combine input, d weights, [d received outputs], d activations, d
    // pre-activations, [d received copies], d copies, d logits, d x scratch; the computed copies'
    // weight gradients [and the dispatched ones'] (fp32).
    const std::int64_t count = C * NK + K * N + (apart ? C * G : 0) + F * G + Fin * G + (apart ? C * G : 0) + C * NK +
                               E * N + C * N;
    const std::int64_t weightCount = G + (apart ? NK : 0);
    DeviceBuffer work =
        k_.device().allocator().allocate(MemoryCategory::Workspace, double(count) * e + double(weightCount) * kStat,
                                         size_t(count + weightCount), sizeof(T), false);
    Regions<T> r{work.template as<T>()};
    T* dCombineIn = r.take(C * NK);
    T* dTopW = r.take(K * N);
    T* dExpertOut = apart ? r.take(C * G) : dCombineIn;
    T* dact = r.take(F * G);
    T* dhidden = r.take(Fin * G);
    T* dRecv = apart ? r.take(C * G) : nullptr;
    T* ddisp = r.take(C * NK);
    if (!apart)
        dRecv = ddisp;
    T* dlogits = r.take(E * N);
    T* scratch = r.take(C * N);
    T* dprob = r.take(G);
    T* dDispProb = apart ? r.take(NK) : dprob;

    // Shared experts: d x from them first (overwrites dx).
    if (Fs > 0) {
        sharedBackward(s, dx, dy, w, g, N);
    } else {
        std::fill(dx, dx + C * N, T(0));
    }
    // Combine, experts (over the ep group: the gradients go the copies' way), dispatch.
    moe_combine_backward<T>(s.perm, int(K), dy, nullptr, nullptr, C, N, dCombineIn, nullptr);  // a copy each
    k_.device().charge(KernelKind::Elementwise, {0, double(C * N) * e, double(C * NK) * e}, k_.compute());
    const std::vector<std::size_t>& sendValues = s.sendValues;
    const std::vector<std::size_t>& recvValues = s.recvValues;
    const std::vector<std::size_t>& etpValues = s.etpValues;
    if (ep)
        par_.ep->allToAllV(par_.ep_rank, dCombineIn, sendValues.data(), dExpertOut + s.own * C, recvValues.data(),
                           par_.element_bytes, AllToAllBytes::OwnCopiesOut);
    else if (etp)
        copyCopies(dExpertOut + s.own * C, dCombineIn, C * R);
    if (etp)
        par_.etp->allGatherV(par_.etp_rank, dExpertOut, etpValues.data(), par_.element_bytes);
    expertsBackward(s, w, g, dExpertOut, dact, dhidden, dRecv, dprob);
    if (etp) {  // each slice's part of every copy's input and weight gradient, summed back to its receiver
        par_.etp->reduceScatterV(par_.etp_rank, dRecv, etpValues.data(), ReduceOp::Sum, par_.element_bytes);
        par_.etp->reduceScatterV(par_.etp_rank, dprob, s.etpCounts.data(), ReduceOp::Sum, kStat);
    }
    if (ep) {  // the weights' gradients first, as Megatron's backward launches the probs' all-to-all first
        par_.ep->allToAllV(par_.ep_rank, dprob + s.own, s.recvCounts.data(), dDispProb, s.sendCounts.data(), kStat,
                           AllToAllBytes::OwnCopiesBack);
        par_.ep->allToAllV(par_.ep_rank, dRecv + s.own * C, recvValues.data(), ddisp, sendValues.data(),
                           par_.element_bytes, AllToAllBytes::OwnCopiesBack);
    } else if (etp) {
        copyCopies(ddisp, dRecv + s.own * C, C * R);
        copyCopies(dDispProb, dprob + s.own, R);
    }
    // The router weights' gradients back at their copies (a dropped copy's: none).
    std::fill(dTopW, dTopW + K * N, T(0));
    for (std::int64_t j = 0; j < NK - s.dropped; ++j)
        dTopW[s.perm.order[size_t(j)]] = dDispProb[j];
    std::fill(ddisp + C * (NK - s.dropped), ddisp + C * NK, T(0));  // nothing flows back from a dropped copy
    moe_dispatch_backward<T>(s.perm, int(K), ddisp, C, dx);
    k_.device().charge(KernelKind::Elementwise, {double(C * NK), double(C * NK) * e + double(C * N) * e,
                                                 double(C * N) * e}, k_.compute());
    // Router: through the weights and the load-balancing loss, then its product.
    router_topk_backward<T>(s_.router, s.logits, N, s.topIdx.data(), s.topW, dTopW, dlogits);
    aux_loss_forward_backward<T>(s_.router, s.logits, N, s.batchCounts, s_.aux_loss_coeff, aux_grad, dlogits,
                                 s.batchTokens);
    k_.device().charge(KernelKind::Softmax, {0, double(E * N) * e + double(K * N) * (e + 4), double(E * N) * e},
                       k_.compute());
    k_.matmulBackward(scratch, g.router, nullptr, dlogits, s.x, w.router, C, E, N);
    k_.accumulate(dx, scratch, C * N);
    s.release();
}

template class MoeMlp<float>;
template class MoeMlp<double>;

} // namespace shardscope::engine
