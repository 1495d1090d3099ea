// StepTimeBound: a lower bound on CostModel::evaluate()'s step time for a layout, cheap enough
// to test before pricing it, so that the search can skip layouts that cannot rank (Search.cpp).
//
// The bound counts only the layer and head GEMMs, each priced as the cost model prices it
// (CostModel.cpp, GemmPricer: 2MNK / (peak x efficiency x n / (n + n_half)) with n = min(M, N, K),
// plus a launch) less its memory-bound floor (a max, so this is never more):
//   step >= m x max over the stages the cost model compares (first, last, middle) of
//           3 x (GEMM s per micro-batch)  (+ the recomputed share of the layers' forward)
//         + (pp - 1) / v x (the cost model's typical stage, bounded the same way)
// Every other term of the step (attention cores, element-wise work, collectives, the optimizer)
// is >= 0 and left out; so is any communication an overlap option could hide. The GEMMs are
// stageCost()'s: attention projections (MLA's own), the dense MLP or, per MoE layer, the local
// experts' grouped GEMMs (imbalance x their share of the top-k copies, at the grouped-GEMM
// efficiency), the shared experts and the router, the logits on the last stage. An
// encoder-decoder's layers are bounded by the cheaper MLP and without their cross attention.
#pragma once

#include "CostModel.h"
#include "Layout.h"

#include <array>

namespace shardscope {

class StepTimeBound {
public:
    explicit StepTimeBound(const CostModel& model);

    // What a mesh shape fixes (dp, tp, pp, cp and the pipeline split): the stages the cost model
    // compares and their layers by kind.
    struct Mesh {
        int pp = 1;
        std::array<int, 3> stage{};     // first, last, middle (the cost model's three)
        std::array<int, 3> layers{};    // layers on each
        std::array<int, 3> moe{};       // of them MoE layers (decoder-only models)
        std::array<int, 3> dense{};     // ... dense ones
        std::array<int, 3> either{};    // ... bounded by the cheaper MLP (encoder-decoder)
    };
    Mesh mesh(const Layout& layout) const;

    // The bound for a layout of that mesh (its mb, sp, schedule, v, recomputation and expert grid matter).
    double stepTime(const Mesh& mesh, const Layout& layout) const;
    // The same for every recomputation mode at once: the bound with nothing recomputed.
    double stepTimeWithoutRecompute(const Mesh& mesh, const Layout& layout) const;

private:
    double gemm(double M, double N, double K, double batch, double efficiency) const;
    double bound(const Mesh& mesh, const Layout& layout, bool recompute) const;

    const CostModel& model_;
    double peak_ = 0, efficiency_ = 0, grouped_efficiency_ = 0, half_dim_ = 0, overhead_s_ = 0;
};

} // namespace shardscope
