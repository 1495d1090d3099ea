// The mixture-of-experts MLP block on one device; see MoeMlp.h.
#include "MoeMlp.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shardscope::engine {

std::int64_t MoeShape::parameters() const
{
    const std::int64_t C = hidden, E = router.experts;
    return C * E + E * (C * ffnIn() + std::int64_t(ffn) * C) + C * sharedIn() + std::int64_t(shared_ffn) * C;
}

template <class T>
MoeMlp<T>::MoeMlp(Kernels<T>& kernels, MoeShape shape) : k_(kernels), s_(shape)
{
    if (s_.hidden < 1 || s_.ffn < 1)
        throw std::invalid_argument("MoeMlp: hidden " + std::to_string(s_.hidden) + " and ffn " +
                                    std::to_string(s_.ffn) + " must be positive");
    if (s_.shared_ffn < 0)
        throw std::invalid_argument("MoeMlp: shared_ffn " + std::to_string(s_.shared_ffn) + " is negative");
    if (s_.router.top_k < 1 || s_.router.top_k > s_.router.experts)
        throw std::invalid_argument("MoeMlp: top_k " + std::to_string(s_.router.top_k) + " must be in [1, experts " +
                                    std::to_string(s_.router.experts) + "]");
}

template <class T>
double MoeMlp<T>::forward(T* y, const T* x, const MoeWeights<T>& w, std::int64_t N)
{
    const std::int64_t C = s_.hidden, E = s_.router.experts, K = s_.router.top_k, F = s_.ffn, Fin = s_.ffnIn();
    N_ = N;
    x_ = x;
    logits_.resize(size_t(E * N));
    topIdx_.resize(size_t(K * N));
    topW_.resize(size_t(K * N));
    k_.matmulForward(logits_.data(), x, w.router, nullptr, nullptr, C, E, N);
    router_topk_forward<T>(s_.router, logits_.data(), N, nullptr, topIdx_.data(), topW_.data());
    counts_ = engine::tokensPerExpert(topIdx_.data(), N, int(K), int(E));
    perm_ = permuteByExpert(topIdx_.data(), N, int(K), int(E));
    const double e = k_.elementBytes();
    // The router's scores (E per token, fp32) and the copies' moves are memory work.
    k_.device().charge(KernelKind::Softmax, {0, double(E * N) * e, double(K * N) * (e + 4)}, k_.compute());

    disp_.resize(size_t(C * N * K));
    moe_dispatch_forward<T>(perm_, int(K), x, C, disp_.data());
    k_.device().charge(KernelKind::Elementwise, {0, double(C * N * K) * e, double(C * N * K) * e}, k_.compute());
    hidden_.resize(size_t(Fin * N * K));
    act_.resize(size_t(F * N * K));
    expertOut_.resize(size_t(C * N * K));
    for (std::int64_t x0 = 0; x0 < E; ++x0) {
        const std::int64_t o = perm_.offsets[size_t(x0)], n = perm_.offsets[size_t(x0) + 1] - o;
        if (n == 0)
            continue;
        k_.matmulForward(hidden_.data() + o * Fin, disp_.data() + o * C, w.expert_in + x0 * C * Fin, nullptr, nullptr,
                         C, Fin, n);
        k_.activationForward(s_.mlp, act_.data() + o * F, hidden_.data() + o * Fin, F, n);
        k_.matmulForward(expertOut_.data() + o * C, act_.data() + o * F, w.expert_out + x0 * F * C, nullptr, nullptr,
                         F, C, n);
    }
    moe_combine_forward<T>(perm_, int(K), expertOut_.data(), topW_.data(), C, N, y);
    k_.device().charge(KernelKind::Elementwise, {2 * double(C * N * K), double(C * N * K) * e, double(C * N) * e},
                       k_.compute());
    if (s_.shared_ffn > 0) {
        const std::int64_t Fs = s_.shared_ffn, Fsin = s_.sharedIn();
        sharedPre_.resize(size_t(Fsin * N));
        sharedAct_.resize(size_t(Fs * N));
        k_.matmulForward(sharedPre_.data(), x, w.shared_in, nullptr, nullptr, C, Fsin, N);
        k_.activationForward(s_.mlp, sharedAct_.data(), sharedPre_.data(), Fs, N);
        sharedOut_.resize(size_t(C * N));
        k_.matmulForward(sharedOut_.data(), sharedAct_.data(), w.shared_out, nullptr, nullptr, Fs, C, N);
        k_.accumulate(y, sharedOut_.data(), C * N);  // + the routed output
    }
    return aux_loss_forward_backward<T>(s_.router, logits_.data(), N, counts_, s_.aux_loss_coeff, T(0), nullptr);
}

template <class T>
void MoeMlp<T>::backward(T* dx, const T* dy, const MoeWeights<T>& w, const MoeGrads<T>& g, T aux_grad)
{
    const std::int64_t C = s_.hidden, E = s_.router.experts, K = s_.router.top_k, F = s_.ffn, Fin = s_.ffnIn(),
                       N = N_;
    const double e = k_.elementBytes();
    std::vector<T> scratch(size_t(C * N));
    // Shared experts: d x from them first (overwrites dx).
    if (s_.shared_ffn > 0) {
        const std::int64_t Fs = s_.shared_ffn, Fsin = s_.sharedIn();
        std::vector<T> dact(size_t(Fs * N)), dpre(size_t(Fsin * N));
        k_.matmulBackward(dact.data(), g.shared_out, nullptr, dy, sharedAct_.data(), w.shared_out, Fs, C, N);
        k_.activationBackward(s_.mlp, dpre.data(), sharedPre_.data(), dact.data(), Fs, N);
        k_.matmulBackward(dx, g.shared_in, nullptr, dpre.data(), x_, w.shared_in, C, Fsin, N);
    } else {
        std::fill(dx, dx + C * N, T(0));
    }
    // Combine, experts, dispatch.
    std::vector<T> dExpertOut(size_t(C * N * K)), dTopW(size_t(K * N));
    moe_combine_backward<T>(perm_, int(K), dy, expertOut_.data(), topW_.data(), C, N, dExpertOut.data(), dTopW.data());
    k_.device().charge(KernelKind::Elementwise, {4 * double(C * N * K), double(C * N) * e + double(C * N * K) * e,
                                                 double(C * N * K) * e}, k_.compute());
    std::vector<T> dact(size_t(F * N * K)), dhidden(size_t(Fin * N * K)), ddisp(size_t(C * N * K));
    for (std::int64_t x0 = 0; x0 < E; ++x0) {
        const std::int64_t o = perm_.offsets[size_t(x0)], n = perm_.offsets[size_t(x0) + 1] - o;
        if (n == 0)
            continue;
        k_.matmulBackward(dact.data() + o * F, g.expert_out + x0 * F * C, nullptr, dExpertOut.data() + o * C,
                          act_.data() + o * F, w.expert_out + x0 * F * C, F, C, n);
        k_.activationBackward(s_.mlp, dhidden.data() + o * Fin, hidden_.data() + o * Fin, dact.data() + o * F, F, n);
        k_.matmulBackward(ddisp.data() + o * C, g.expert_in + x0 * C * Fin, nullptr, dhidden.data() + o * Fin,
                          disp_.data() + o * C, w.expert_in + x0 * C * Fin, C, Fin, n);
    }
    moe_dispatch_backward<T>(perm_, int(K), ddisp.data(), C, dx);
    k_.device().charge(KernelKind::Elementwise, {double(C * N * K), double(C * N * K) * e + double(C * N) * e,
                                                 double(C * N) * e}, k_.compute());
    // Router: through the weights and the load-balancing loss, then its product.
    std::vector<T> dlogits(size_t(E * N));
    router_topk_backward<T>(s_.router, logits_.data(), N, topIdx_.data(), topW_.data(), dTopW.data(), dlogits.data());
    aux_loss_forward_backward<T>(s_.router, logits_.data(), N, counts_, s_.aux_loss_coeff, aux_grad, dlogits.data());
    k_.device().charge(KernelKind::Softmax, {0, double(E * N) * e + double(K * N) * (e + 4), double(E * N) * e},
                       k_.compute());
    k_.matmulBackward(scratch.data(), g.router, nullptr, dlogits.data(), x_, w.router, C, E, N);
    k_.accumulate(dx, scratch.data(), C * N);
}

template class MoeMlp<float>;
template class MoeMlp<double>;

} // namespace shardscope::engine
