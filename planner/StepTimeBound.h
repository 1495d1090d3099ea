// StepTimeBound: a lower bound on CostModel::evaluate()'s step time for a layout, cheap enough
// to test before pricing it, so that the search can skip layouts that cannot rank (Search.cpp).
//
// The bound counts only the layer and head GEMMs, at the chip's best matmul rate (peak x matmul
// efficiency: the cost model's shape curve n/(n + n_half) and the grouped-GEMM efficiency are
// <= 1, its memory-bound floor and launch overheads only add):
//   step >= m x max over the stages the cost model compares (first, last, middle) of
//           3 x T x (matmul s per token)  (+ the recomputed share of the layers' forward)
//         + (pp - 1) / v x (the cost model's typical stage, bounded the same way)
// with T = mb x seq / cp tokens per micro-batch. Every other term of the step (attention cores,
// element-wise work, collectives, the optimizer) is >= 0 and left out; so is any communication
// an overlap option could hide. The GEMM FLOPs per token are the cost model's (CostModel.cpp,
// stageCost): attention projections (MLA's own), the dense MLP or, per MoE layer, the routed
// copies (imbalance x top-k per token, independent of ep and etp), the shared experts and the
// router; a layer of a mixed dense/MoE model is bounded by the cheaper of its two MLPs.
#pragma once

#include "CostModel.h"
#include "Layout.h"

#include <array>

namespace shardscope {

class StepTimeBound {
public:
    explicit StepTimeBound(const CostModel& model);

    // What a mesh shape fixes (dp, tp, pp, cp and the pipeline split; the expert grid does not
    // change the GEMM FLOPs): per compared stage, its layers and matmul seconds per token.
    struct Mesh {
        int pp = 1;
        std::array<int, 3> stage{};          // first, last, middle (the cost model's three)
        std::array<int, 3> layers{};         // layers on each
        std::array<double, 3> layer_s{};     // forward GEMM seconds per token of the stage's layers
        std::array<double, 3> head_s{};      // forward GEMM seconds per token of the head (last stage)
        double tokens_per_replica = 0;       // global batch / dp x seq / cp: m x T, whatever mb
    };
    Mesh mesh(const Layout& layout) const;

    // The bound for a layout of that mesh (its mb, schedule, v and recomputation matter).
    double stepTime(const Mesh& mesh, const Layout& layout) const;
    // The same for every recomputation mode at once: the bound with nothing recomputed.
    double stepTimeWithoutRecompute(const Mesh& mesh, const Layout& layout) const;

private:
    double perLayerFlopsPerToken(int tp) const;  // forward GEMM FLOPs of one layer on one device
    double bound(const Mesh& mesh, const Layout& layout, bool recompute) const;

    const CostModel& model_;
    double rate_ = 0;  // FLOP/s: peak x matmul efficiency
};

} // namespace shardscope
