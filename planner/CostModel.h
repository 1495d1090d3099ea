// CostModel: predicts step time, memory per device, throughput, MFU, time and
// cost to train for one layout of one problem (Calculon's split: the problem is
// fixed when the model is built, evaluate() prices a layout).
//
// evaluate() is pure and allocation-free: everything that depends only on the
// problem is resolved in the constructor. Every time and memory figure of the
// Prediction is the sum of its named terms by construction, and the bytes by kind
// the sum of the collectives' (CostLedger.h); pass a ledger to receive them
// (ledger(), explain()).
//
// Placement: the device mesh is tp innermost, then cp, dp, pp (Megatron's order).
// Formulas cite their sources in CostModel.cpp.
#pragma once

#include <cstdint>

#include "AttentionKernels.h"
#include "CostLedger.h"
#include "CostModelParams.h"
#include "ElementwisePasses.h"
#include "Layout.h"
#include "Prediction.h"
#include "Problem.h"
#include "QuantizationRecipe.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

// A named term of a figure: `figure` is the Prediction field ("time_s.compute",
// "memory_bytes.activations"), `name` the term, `formula` how it was computed.
struct Term {
    std::string figure;
    std::string name;
    double value = 0;
    std::string formula;
};

class CostModel {
public:
    // `framework`: the framework the plan runs on prices the layers' element-wise work with its own
    // kernels (ElementwisePasses.h); unset, with the fused kernels the terms were fitted on.
    explicit CostModel(const Problem& problem, const CostModelParams& params = defaultCostModelParams(),
                       std::optional<ExportFormat> framework = std::nullopt);

    // The layout must satisfy validate(layout, model, cluster, training); evaluate() does not check rules.
    // With a ledger: its terms and the reported stage's collectives recorded too (the figures are
    // the same either way).
    Prediction evaluate(const Layout& layout, CostLedger* ledger = nullptr) const;
    CostLedger ledger(const Layout& layout) const;
    std::vector<Term> explain(const Layout& layout) const;  // the ledger's terms, as strings

    // One-shot convenience with the default parameters.
    static Prediction evaluate(const Problem& problem, const Layout& layout);

    const Problem& problem() const { return problem_; }
    const CostModelParams& params() const { return params_; }
    std::optional<ExportFormat> framework() const { return framework_; }
    double peakFlopsPerDevice() const { return peak_flops_device_; }
    double matmulEfficiency() const { return matmul_efficiency_; }
    // Whether optimizer offload can be priced: the node type publishes its host link.
    bool offloadPriced() const { return host_link_bytes_per_second_device_ > 0; }
    // The published fused-attention rates the attention core is priced at when the problem trains
    // fused (flash) attention on a chip with an entry in resources/planner/attention-kernels.json;
    // null: GEMM pricing.
    const AttentionRates* attentionRates() const { return attention_ ? &*attention_ : nullptr; }
    // The links a group of `size` devices at mesh `stride` runs its collectives on (public for
    // StepTimeBound, which prices the same collectives on the same links).
    struct LinkModel linkFor(double size, double stride) const;
    // Bytes per element of the activations the collectives move and the layers keep.
    double activationBytes() const { return activation_bytes_; }
    double hbmBytesPerSecondDevice() const { return hbm_bytes_per_second_device_; }
    double hostLinkBytesPerSecondDevice() const { return host_link_bytes_per_second_device_; }

private:
    struct StageCost;
    StageCost stageCost(const Layout& layout, int stage) const;
    // The data-parallel / ZeRO collectives of one device of stage `sc` per step (time and bytes),
    // hidden behind the slowest stage's compute as far as they overlap; their groups and windows
    // resolved once per layout.
    struct DataParallelGroups;
    DataParallelGroups dataParallelGroups(const Layout& layout, const StageCost& slow, double m) const;
    void dataParallelCollectives(const Layout& layout, const DataParallelGroups& groups, const StageCost& sc,
                                 bool timed, StepCollectives& out) const;
    Problem problem_;
    CostModelParams params_;
    // This model's identity for caches of figures that depend on the problem and a few layout
    // fields only (a CostModel does not change after construction; a copy has the same figures).
    std::uint64_t id_ = 0;
    std::optional<ExportFormat> framework_;
    const ElementwiseProfile* elementwise_ = nullptr;  // the framework's element-wise kernels; null: fused

    // Resolved once per problem.
    double peak_flops_device_ = 0;     // dense peak of the training precision per device (an FP8/FP4
                                       // recipe's: its linear layers' GEMMs)
    double matmul_efficiency_ = 0;     // large-GEMM efficiency for this chip (at that peak)
    // The GEMMs outside the linear layers (attention core, logits head, router) under an FP8/FP4
    // recipe run in bf16: its peak and efficiency (the same as above without a recipe).
    double bf16_peak_flops_device_ = 0;
    double bf16_matmul_efficiency_ = 0;
    QuantizationRecipe recipe_;        // QuantizationRecipe.h: not quantized unless an FP8/FP4 recipe
    double hbm_bytes_per_second_device_ = 0;
    double hbm_capacity_device_ = 0;
    double host_link_bytes_per_second_device_ = 0;
    double domain_devices_ = 1;        // devices in one scale-up domain
    double intra_bytes_per_second_device_ = 0;   // all of the chip's scale-up links, per device
    double devices_per_chip_ = 1;
    double domain_chips_ = 1;
    double inter_bytes_per_second_device_ = 0;
    double model_flops_per_token_ = 0;  // forward, Megatron convention
    // Forward FLOPs per token in the other MFU conventions (evaluate() takes 3x): PaLM's (6N + 12 L H Q T,
    // over 3) and the causal-aware one (Megatron's with the causal self-attention scores halved).
    double palm_flops_per_token_ = 0;
    double causal_flops_per_token_ = 0;
    // Fused-attention rates per device (FLOP/s) by context-parallel block, resolved once per problem
    // for every cp dividing the sequence (evaluate() looks them up, no log/pow on the hot path).
    std::optional<AttentionRates> attention_;
    struct BlockRates {
        int cp;
        double forward, backward;
    };
    std::vector<BlockRates> attention_by_cp_;
    void attentionRatesFor(int cp, double& forward, double& backward) const;
    double weight_bytes_ = 2, grad_bytes_ = 2, optimizer_bytes_ = 12, activation_bytes_ = 2;
    double gather_bytes_ = 2;  // per parameter on the data-parallel all-gather (StateBytesPerParameter::gathered)
};

} // namespace shardscope
