// Mixture-of-experts routing, load balancing, dispatch and combine; see OpsMoe.h.
#include "OpsMoe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace shardscope::engine {

namespace {

void checkSpec(const RouterSpec& r)
{
    if (r.experts < 1)
        throw std::invalid_argument("router: experts " + std::to_string(r.experts) + " must be at least 1");
    if (r.top_k < 1 || r.top_k > r.experts)
        throw std::invalid_argument("router: top_k " + std::to_string(r.top_k) + " must be in [1, experts " +
                                    std::to_string(r.experts) + "]");
    if (r.groups == 0 && r.group_top_k == 0)
        return;
    // (Megatron's TransformerConfig checks the first two; the third keeps every top-k full.)
    if (r.groups < 1 || r.groups > 64 || r.experts % r.groups != 0)
        throw std::invalid_argument("router: " + std::to_string(r.groups) + " expert groups must divide the " +
                                    std::to_string(r.experts) + " experts (at most 64 groups)");
    if (r.group_top_k < 1 || r.group_top_k > r.groups)
        throw std::invalid_argument("router: group_top_k " + std::to_string(r.group_top_k) + " must be in [1, groups " +
                                    std::to_string(r.groups) + "]");
    if (r.top_k > r.group_top_k * (r.experts / r.groups) || r.top_k < r.group_top_k)
        throw std::invalid_argument("router: top_k " + std::to_string(r.top_k) + " must be between the " +
                                    std::to_string(r.group_top_k) + " chosen groups and the " +
                                    std::to_string(r.group_top_k * (r.experts / r.groups)) + " experts they hold");
}

// Group-limited routing's mask: bit j set when group j is among the token's best g groups, each
// scored by the sum of its best `picks` choice scores (ties: the lower index). No allocation.
template <class Score>
std::uint64_t chosenGroups(const RouterSpec& r, Score&& choiceScore)
{
    if (r.groups == 0)
        return ~std::uint64_t(0);
    const int per = r.experts / r.groups, picks = r.top_k / r.group_top_k;
    using T = decltype(choiceScore(0));
    T groupScore[64];
    for (int j = 0; j < r.groups; ++j) {
        // The group's best `picks` scores, in order: each pick the best of those ranked below the
        // previous one (score, then the lower index first).
        auto ranksAbove = [&](int a, T sa, int b, T sb) { return sa > sb || (sa == sb && a < b); };
        T sum = 0;
        int prev = -1;
        T prevScore = T(0);
        for (int p = 0; p < picks; ++p) {
            int best = -1;
            T bestScore = T(0);
            for (int e = j * per; e < (j + 1) * per; ++e) {
                const T s = choiceScore(e);
                if (prev >= 0 && !ranksAbove(prev, prevScore, e, s))
                    continue;
                if (best < 0 || ranksAbove(e, s, best, bestScore)) {
                    best = e;
                    bestScore = s;
                }
            }
            sum += bestScore;
            prev = best;
            prevScore = bestScore;
        }
        groupScore[j] = sum;
    }
    std::uint64_t mask = 0;
    for (int k = 0; k < r.group_top_k; ++k) {
        int best = -1;
        for (int j = 0; j < r.groups; ++j)
            if (!(mask >> j & 1) && (best < 0 || groupScore[j] > groupScore[best]))
                best = j;
        mask |= std::uint64_t(1) << best;
    }
    return mask;
}

template <class T>
T sigmoid(T x)
{
    return T(1) / (T(1) + std::exp(-x));
}

} // namespace

template <class T>
void router_topk_forward(const RouterSpec& r, const T* logits, std::int64_t N, const T* expert_bias, int* top_idx,
                         T* top_w)
{
    checkSpec(r);
    if (expert_bias && r.score != RouterScore::Sigmoid)
        throw std::invalid_argument("router: an expert bias steers the sigmoid router only (DeepSeek-V3's noaux_tc)");
    const int E = r.experts, K = r.top_k;
    const T scale = T(r.scaling);
    for (std::int64_t n = 0; n < N; ++n) {
        const T* l = logits + n * E;
        int* idx = top_idx + n * K;
        T* w = top_w + n * K;
        // The score each expert is chosen by.
        auto choiceScore = [&](int e) {
            if (r.score == RouterScore::Softmax)
                return l[e];
            return sigmoid(l[e]) + (expert_bias ? expert_bias[e] : T(0));
        };
        // Groups are scored on what Megatron's top-k sees: the logits (softmax after the top-k),
        // the softmax's numerators (softmax before it: use_pre_softmax), the biased sigmoid.
        T lmax = l[0];
        if (r.groups > 0 && r.score == RouterScore::Softmax && !r.normalize)
            for (int e = 1; e < E; ++e)
                lmax = std::max(lmax, l[e]);
        const std::uint64_t groups = chosenGroups(r, [&](int e) {
            return r.score == RouterScore::Softmax && !r.normalize ? std::exp(l[e] - lmax) : choiceScore(e);
        });
        const int perGroup = r.groups > 0 ? E / r.groups : E;
        for (int k = 0; k < K; ++k) {
            int best = -1;
            T bestScore = T(0);
            for (int e = 0; e < E; ++e) {
                if (!(groups >> (e / perGroup) & 1) || std::find(idx, idx + k, e) != idx + k)
                    continue;
                const T s = choiceScore(e);
                if (best < 0 || s > bestScore) {  // strict: ties keep the lower index
                    best = e;
                    bestScore = s;
                }
            }
            idx[k] = best;
        }
        if (r.score == RouterScore::Softmax) {
            // Normalised: the softmax over the chosen; else over all E (the chosen are the largest).
            const T m = l[idx[0]];
            T sum = 0;
            if (r.normalize)
                for (int k = 0; k < K; ++k)
                    sum += std::exp(l[idx[k]] - m);
            else
                for (int e = 0; e < E; ++e)
                    sum += std::exp(l[e] - m);
            for (int k = 0; k < K; ++k)
                w[k] = std::exp(l[idx[k]] - m) / sum * scale;
        } else {
            T sum = 0;
            for (int k = 0; k < K; ++k)
                sum += (w[k] = sigmoid(l[idx[k]]));
            if (r.normalize && K > 1)
                for (int k = 0; k < K; ++k)
                    w[k] /= sum + T(1e-20);
            for (int k = 0; k < K; ++k)
                w[k] *= scale;
        }
    }
}

template <class T>
std::vector<std::int64_t> tokensPerExpertForAuxLoss(const RouterSpec& r, const T* logits, std::int64_t N)
{
    checkSpec(r);
    const int E = r.experts, K = r.top_k;
    std::vector<std::int64_t> counts(size_t(E), 0);
    std::vector<int> picked(static_cast<size_t>(K));
    for (std::int64_t n = 0; n < N; ++n) {
        const T* l = logits + n * E;
        // The scores' order is the logits' (softmax and sigmoid are monotonic): K times the best
        // not yet picked (ties: the lower index first), as router_topk_forward ranks. A NaN logit
        // never wins a comparison, so every pick is still a distinct expert: the loss check after
        // the forward names the NaN.
        for (int k = 0; k < K; ++k) {
            int best = -1;
            for (int e = 0; e < E; ++e) {
                if (std::find(picked.begin(), picked.begin() + k, e) != picked.begin() + k)
                    continue;
                if (best < 0 || l[e] > l[best])
                    best = e;
            }
            ++counts[size_t(best)];
            picked[size_t(k)] = best;
        }
    }
    return counts;
}

template <class T>
void router_topk_backward(const RouterSpec& r, const T* logits, std::int64_t N, const int* top_idx, const T* top_w,
                          const T* dtop_w, T* dlogits)
{
    checkSpec(r);
    const int E = r.experts, K = r.top_k;
    const T scale = T(r.scaling);
    std::fill(dlogits, dlogits + N * E, T(0));
    for (std::int64_t n = 0; n < N; ++n) {
        const T* l = logits + n * E;
        const int* idx = top_idx + n * K;
        const T* w = top_w + n * K;
        const T* dw = dtop_w + n * K;
        T* dl = dlogits + n * E;
        // g = dL/du for the normalised weights u = w / scale; sum_j u_j g_j.
        T dot = 0;
        for (int k = 0; k < K; ++k)
            dot += (w[k] / scale) * (scale * dw[k]);
        if (r.score == RouterScore::Softmax && r.normalize) {
            for (int k = 0; k < K; ++k)
                dl[idx[k]] = (w[k] / scale) * (scale * dw[k] - dot);
        } else if (r.score == RouterScore::Softmax) {
            // u_k = p(i_k) of the softmax over all E: every logit moves the chosen weights.
            const T m = l[idx[0]];
            T sum = 0;
            for (int e = 0; e < E; ++e)
                sum += std::exp(l[e] - m);
            for (int e = 0; e < E; ++e)
                dl[e] = -std::exp(l[e] - m) / sum * dot;
            for (int k = 0; k < K; ++k)
                dl[idx[k]] += (w[k] / scale) * (scale * dw[k]);
        } else if (K == 1 || !r.normalize) {
            for (int k = 0; k < K; ++k) {
                const T s = sigmoid(l[idx[k]]);
                dl[idx[k]] = scale * dw[k] * s * (T(1) - s);
            }
        } else {
            T sum = 0;
            for (int k = 0; k < K; ++k)
                sum += sigmoid(l[idx[k]]);
            sum += T(1e-20);
            for (int k = 0; k < K; ++k) {
                const T s = sigmoid(l[idx[k]]);
                dl[idx[k]] = (scale * dw[k] - dot) / sum * s * (T(1) - s);
            }
        }
    }
}

std::vector<std::int64_t> tokensPerExpert(const int* top_idx, std::int64_t N, int K, int E)
{
    std::vector<std::int64_t> counts(size_t(E), 0);
    for (std::int64_t c = 0; c < N * K; ++c) {
        if (top_idx[c] < 0 || top_idx[c] >= E)
            throw std::out_of_range("tokensPerExpert: expert " + std::to_string(top_idx[c]) + " outside [0, " +
                                    std::to_string(E) + ")");
        ++counts[size_t(top_idx[c])];
    }
    return counts;
}

template <class T>
double aux_loss_forward_backward(const RouterSpec& r, const T* logits, std::int64_t N,
                                 const std::vector<std::int64_t>& tokens_per_expert, double coeff, T dloss,
                                 T* dlogits, std::int64_t total_tokens)
{
    checkSpec(r);
    const int E = r.experts;
    if (int(tokens_per_expert.size()) != E)
        throw std::invalid_argument("aux loss: " + std::to_string(tokens_per_expert.size()) + " counts for " +
                                    std::to_string(E) + " experts");
    if (N == 0 || coeff == 0)
        return 0;
    const double Tt = total_tokens > 0 ? double(total_tokens) : double(N);
    const double c = coeff * E / (double(r.top_k) * Tt * Tt);
    std::vector<T> p(static_cast<size_t>(E)), s(static_cast<size_t>(E));
    double loss = 0;
    for (std::int64_t n = 0; n < N; ++n) {
        const T* l = logits + n * E;
        // p: the scores the loss is taken over (see OpsMoe.h).
        T sum = 0;
        if (r.score == RouterScore::Softmax) {
            const T m = *std::max_element(l, l + E);
            for (int e = 0; e < E; ++e)
                sum += (p[size_t(e)] = std::exp(l[e] - m));
            for (int e = 0; e < E; ++e)
                p[size_t(e)] /= sum;
        } else {
            for (int e = 0; e < E; ++e)
                sum += (s[size_t(e)] = sigmoid(l[e]));
            sum += T(1e-20);
            for (int e = 0; e < E; ++e)
                p[size_t(e)] = s[size_t(e)] / sum;
        }
        double column = 0;
        for (int e = 0; e < E; ++e)
            column += double(tokens_per_expert[size_t(e)]) * double(p[size_t(e)]);
        loss += c * column;
        if (!dlogits)
            continue;
        // dL/dp(e) = dloss c tokens_e, then through the softmax or the normalised sigmoid.
        T dot = 0;
        for (int e = 0; e < E; ++e)
            dot += p[size_t(e)] * T(c * double(tokens_per_expert[size_t(e)])) * dloss;
        T* dl = dlogits + n * E;
        for (int e = 0; e < E; ++e) {
            const T g = T(c * double(tokens_per_expert[size_t(e)])) * dloss;
            if (r.score == RouterScore::Softmax)
                dl[e] += p[size_t(e)] * (g - dot);
            else
                dl[e] += (g - dot) / sum * s[size_t(e)] * (T(1) - s[size_t(e)]);
        }
    }
    return loss;
}

MoePermutation permuteByExpert(const int* top_idx, std::int64_t N, int K, int E)
{
    const std::vector<std::int64_t> counts = tokensPerExpert(top_idx, N, K, E);
    MoePermutation p;
    p.offsets.assign(size_t(E) + 1, 0);
    for (int e = 0; e < E; ++e)
        p.offsets[size_t(e) + 1] = p.offsets[size_t(e)] + counts[size_t(e)];
    std::vector<std::int64_t> next(p.offsets.begin(), p.offsets.end() - 1);
    p.order.assign(size_t(N * K), 0);
    p.slot.assign(size_t(N * K), 0);
    for (std::int64_t c = 0; c < N * K; ++c) {  // copies in token order, then k: stable per expert
        const std::int64_t s = next[size_t(top_idx[c])]++;
        p.order[size_t(s)] = c;
        p.slot[size_t(c)] = s;
    }
    return p;
}

template <class T>
void moe_dispatch_forward(const MoePermutation& p, int K, const T* in, std::int64_t C, T* out)
{
    for (size_t s = 0; s < p.order.size(); ++s) {
        const T* src = in + (p.order[s] / K) * C;
        std::copy(src, src + C, out + std::int64_t(s) * C);
    }
}

template <class T>
void moe_dispatch_backward(const MoePermutation& p, int K, const T* dout, std::int64_t C, T* din)
{
    for (size_t s = 0; s < p.order.size(); ++s) {
        T* dst = din + (p.order[s] / K) * C;
        const T* src = dout + std::int64_t(s) * C;
        for (std::int64_t i = 0; i < C; ++i)
            dst[i] += src[i];
    }
}

template <class T>
void moe_combine_forward(const MoePermutation& p, int K, const T* expert_out, const T* top_w, std::int64_t C,
                         std::int64_t N, T* out)
{
    for (std::int64_t n = 0; n < N; ++n) {
        T* o = out + n * C;
        std::fill(o, o + C, T(0));
        for (int k = 0; k < K; ++k) {
            const std::int64_t copy = n * K + k;
            const T* x = expert_out + p.slot[size_t(copy)] * C;
            if (!top_w) {
                for (std::int64_t i = 0; i < C; ++i)
                    o[i] += x[i];
                continue;
            }
            const T w = top_w[copy];
            for (std::int64_t i = 0; i < C; ++i)
                o[i] += w * x[i];
        }
    }
}

template <class T>
void moe_combine_backward(const MoePermutation& p, int K, const T* dout, const T* expert_out, const T* top_w,
                          std::int64_t C, std::int64_t N, T* dexpert_out, T* dtop_w)
{
    for (std::int64_t n = 0; n < N; ++n) {
        const T* g = dout + n * C;
        for (int k = 0; k < K; ++k) {
            const std::int64_t copy = n * K + k, s = p.slot[size_t(copy)];
            T* dx = dexpert_out + s * C;
            if (!top_w) {  // unweighted: each copy's gradient is its token's
                std::copy(g, g + C, dx);
                continue;
            }
            const T* x = expert_out + s * C;
            const T w = top_w[copy];
            T dot = 0;
            for (std::int64_t i = 0; i < C; ++i) {
                dx[i] = w * g[i];
                dot += x[i] * g[i];
            }
            dtop_w[copy] = dot;
        }
    }
}

#define SHARDSCOPE_MOE_INSTANTIATE(T)                                                                            \
    template void router_topk_forward<T>(const RouterSpec&, const T*, std::int64_t, const T*, int*, T*);          \
    template void router_topk_backward<T>(const RouterSpec&, const T*, std::int64_t, const int*, const T*,       \
                                          const T*, T*);                                                         \
    template std::vector<std::int64_t> tokensPerExpertForAuxLoss<T>(const RouterSpec&, const T*, std::int64_t);  \
    template double aux_loss_forward_backward<T>(const RouterSpec&, const T*, std::int64_t,                       \
                                                 const std::vector<std::int64_t>&, double, T, T*, std::int64_t);  \
    template void moe_dispatch_forward<T>(const MoePermutation&, int, const T*, std::int64_t, T*);                \
    template void moe_dispatch_backward<T>(const MoePermutation&, int, const T*, std::int64_t, T*);               \
    template void moe_combine_forward<T>(const MoePermutation&, int, const T*, const T*, std::int64_t,            \
                                         std::int64_t, T*);                                                      \
    template void moe_combine_backward<T>(const MoePermutation&, int, const T*, const T*, const T*, std::int64_t, \
                                          std::int64_t, T*, T*);
SHARDSCOPE_MOE_INSTANTIATE(float)
SHARDSCOPE_MOE_INSTANTIATE(double)
#undef SHARDSCOPE_MOE_INSTANTIATE

} // namespace shardscope::engine
