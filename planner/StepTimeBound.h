// StepTimeBound: lower bounds on CostModel::evaluate()'s step time and on the activations of its
// memory figure for a layout, cheap enough to test before pricing it, so that the search can skip
// layouts that cannot rank (Search.cpp).
//
// Step time. Every layer and head GEMM priced as the cost model prices it (CostModel.cpp,
// GemmPricer: 2MNK / (peak x efficiency x n / (n + n_half)) with n = min(M, N, K), plus a launch)
// less its memory-bound floor (a max, so this is never more), and the stage's collectives priced
// by the cost model's own links and collective functions (CostModel::linkFor, Collectives.h) with
// only what no overlap option can hide:
//   step >= m x max over the stages the cost model compares (first, last, middle) of
//           3 x (GEMM s per micro-batch)  (+ the recomputed share of the layers' forward)
//           + the tp/sp collectives of the layers (tp-comm-overlap: one chunk of tp exposed)
//           + the MoE all-to-all over ep (ep_comm_overlap: one micro-batch's exposed) and the
//             etp gather and scatter
//           + the cp ring's sends, which together with the attention core they overlap take at
//             least the sends' time (the attention core is not in the GEMMs above)
//         + (pp - 1) / v x (the cost model's typical stage, bounded the same way)
// Every other term (element-wise work, pipeline sends, latency-only collectives) is >= 0 and left
// out; the data-parallel/ZeRO traffic and the optimizer depend on the ZeRO configuration and are
// bounded apart (zeroTerms(), zeroStepTime()). The GEMMs are stageCost()'s: attention
// projections (MLA's own), the dense MLP or, per MoE layer, the local experts' grouped GEMMs
// (imbalance x their share of the top-k copies, at the grouped-GEMM efficiency), the shared
// experts and the router, the logits on the last stage. An encoder-decoder's layers are bounded
// by the cheaper MLP, without their cross attention and without MoE collectives.
//
// Activations. What the stages the memory figure compares (first, last, and the second when an
// uneven split makes it count) keep for the backward, at least: each layer's block inputs
// outside tp (8 sbh / sp bytes of LayerActivationBytes::outside_tp; full recomputation: its
// checkpoints' inputs) and each MoE layer's expert pre-activations and activations of its busiest
// copies, times the schedule's micro-batches in flight (PipelineSchedule.h's peak when
// interleaved). Only for the precisions whose stored bytes these are (activationsBounded()).
#pragma once

#include "Collectives.h"
#include "CostModel.h"
#include "Layout.h"

#include <algorithm>
#include <array>
#include <limits>

namespace shardscope {

class StepTimeBound {
public:
    explicit StepTimeBound(const CostModel& model);

    // What a mesh shape fixes (dp, tp, pp, cp and the pipeline split): the stages the cost model
    // compares and their layers by kind, and the tp and cp groups' placement and links.
    struct Mesh {
        int pp = 1;
        std::array<int, 3> stage{};     // first, last, middle (the cost model's three)
        std::array<int, 3> layers{};    // layers on each
        std::array<int, 3> moe{};       // of them MoE layers (decoder-only models)
        std::array<int, 3> dense{};     // ... dense ones
        std::array<int, 3> either{};    // ... bounded by the cheaper MLP (encoder-decoder)
        GroupPlacement tp_group, cp_group;
        LinkModel tp_link, cp_link;
        // The expert grid's (setExpertGrid): ep members at stride etp, etp neighbours.
        int ep = 1, etp = 1;
        GroupPlacement ep_group, etp_group;
        LinkModel ep_link, etp_link;
    };
    Mesh mesh(const Layout& layout) const;  // (with the layout's expert grid)
    // The ep and etp groups of another expert grid (MoE) of the same mesh shape, into `mesh`.
    void setExpertGrid(Mesh& mesh, const Layout& layout) const;

    // The bound for a layout of that mesh and expert grid (its mb, sp, schedule, v, recomputation
    // and overlap options matter).
    double stepTime(const Mesh& mesh, const Layout& layout) const;
    // The same for every recomputation mode at once: the bound with nothing recomputed.
    double stepTimeWithoutRecompute(const Mesh& mesh, const Layout& layout) const;
    // Either, with its share m x (the slowest stage per micro-batch): `busy_s` <= the step's
    // m x slowest stage, which holds every window the data-parallel traffic hides behind.
    struct Seconds {
        double step_s = 0, busy_s = 0;
    };
    Seconds stepTimeParts(const Mesh& mesh, const Layout& layout, bool recompute) const;

    // What a micro-batch of the layout's size and sp fixes on a mesh and expert grid: one layer's
    // forward GEMMs by kind, one pass's collectives per layer, the bytes a layer keeps at least.
    // The search computes it once for all the schedules and recomputation modes of that size.
    struct MicroBatch {
        double projections_s = 0, dense_s = 0, moe_s = 0, head_s = 0;
        double tp_call_s = 0;      // one tp layer collective (sp: reduce-scatter and all-gather)
        double a2a_s = 0;          // a MoE layer's dispatch and combine over ep
        double etp_s = 0;          // ... its gather and scatter over etp
        // A layer's cp exchange, forward and backward: the ring's sends (cp_comm=p2p), or the exposed
        // all-to-alls of q, k, v and the output (cp_comm=a2a), the same each way.
        double cp_forward_s = 0, cp_backward_s = 0;
        double outside_bytes = 0, input_bytes = 0, expert_bytes = 0;
    };
    MicroBatch microBatch(const Mesh& mesh, const Layout& layout) const;
    Seconds stepTimeParts(const Mesh& mesh, const MicroBatch& mb, const Layout& layout, bool recompute) const;

    // What a ZeRO configuration (zero stage and group, offload) adds to the step at least, on each
    // stage the cost model may take the data-parallel time from (first, last, middle: the one
    // holding the most parameters): its data-parallel/ZeRO collectives before any overlap, once a
    // step and per micro-batch, and its optimizer step or offload transfers. Each collective is
    // priced once on all the stage's bytes, by the cost model's links and Collectives.h's
    // functions: their time is affine in the bytes with a launch and latency >= 0, so one call
    // on the whole is never more than the cost model's call per unit or bucket.
    struct ZeroTerms {
        std::array<double, 3> once_s{}, per_micro_batch_s{}, optimizer_s{};
    };
    ZeroTerms zeroTerms(const Mesh& mesh, const Layout& layout) const;
    // The least over the stages of the traffic the overlap leaves exposed, when it hides at most
    // dp_overlap x `window_s` (a per-step time that holds every window the cost model hides it
    // behind: a priced sibling's compute and recomputation), plus the optimizer's; with no window
    // known (< 0), the optimizer's alone. It adds to a priced sibling's ZeRO-independent terms,
    // or to the step-time bound with its busy_s as the window (busyWindow()): the step is at
    // least x + max(0, traffic - overlap x) + ... for x = m x the slowest stage >= busy_s, and
    // that grows with x when overlap <= 1.
    // (Inline: the search asks for it for every ZeRO configuration of every group of siblings.)
    double zeroStepTime(const ZeroTerms& terms, double micro, double window_s) const
    {
        const double hidden = dp_overlap_ * window_s;
        double least = std::numeric_limits<double>::infinity();
        for (size_t i = 0; i < 3; ++i) {
            const double exposed =
                window_s >= 0 ? std::max(0.0, terms.once_s[i] + micro * terms.per_micro_batch_s[i] - hidden) : 0.0;
            least = std::min(least, exposed + terms.optimizer_s[i]);
        }
        return least * (1 - 1e-9);
    }
    double busyWindow(const Seconds& bound) const { return dp_overlap_ <= 1 ? bound.busy_s : -1.0; }

    // Whether activationBytes() bounds the cost model's activations for this problem's precision.
    bool activationsBounded() const { return activations_bounded_; }
    // Activations kept for the backward, at least, on the first, the last and the second stage
    // (0 where the memory figure does not look at it; all 0 unless activationsBounded()).
    std::array<double, 3> activationBytes(const Mesh& mesh, const Layout& layout) const;
    std::array<double, 3> activationBytes(const Mesh& mesh, const MicroBatch& mb, const Layout& layout) const;

private:
    double gemm(double M, double N, double K, double batch, double efficiency) const;


    const CostModel& model_;
    double peak_ = 0, efficiency_ = 0, grouped_efficiency_ = 0, half_dim_ = 0, overhead_s_ = 0;
    double activation_bytes_ = 2;
    bool sliding_ = false;  // the model has sliding-window layers (their attention core is cheaper)
    bool activations_bounded_ = false;
    double grad_bytes_ = 2, weight_bytes_ = 2, optimizer_bytes_ = 12, gather_bytes_ = 2;
    double dp_overlap_ = 0;
};

} // namespace shardscope
