// CostModelParams: the cost model's efficiency terms — everything that is not a
// published hardware figure or a formula: achieved matmul efficiency, how it
// falls for small per-device matrices, memory traffic of element-wise ops,
// achieved link efficiency and latency, how much data-parallel traffic hides
// behind compute, and the memory reserve. The defaults live in
// resources/planner/cost-model.json with the calibration rows that set them;
// calibration profiles are the same document with other values.
#pragma once

#include "FieldError.h"
#include "HardwareSpec.h"

#include <QJsonObject>

#include <map>
#include <string>

namespace shardscope {

struct CostModelParams {
    std::string name;

    // Achieved fraction of dense peak for large matmuls: the measured maximum achievable
    // bf16 matmul rate over the chip's peak where one is published (hardware.md section 4),
    // else a fraction fitted per vendor, else the default.
    double matmul_efficiency_default = 0;
    std::map<std::string, double> measured_matmul_flops_by_chip;  // chip name -> bf16 FLOP/s
    // The same table's FP8 measurements (FP8 training's GEMMs run at these; a chip without one at
    // its bf16 fraction of the FP8 peak). Optional in JSON.
    std::map<std::string, double> measured_fp8_matmul_flops_by_chip;
    std::map<std::string, double> matmul_efficiency_by_vendor;    // vendor -> fraction
    // The share of a measured maximum matmul rate that a training step's GEMMs sustain: the
    // measurement (mamf-finder) is the best shape of a short burst, a step runs every shape of the
    // model back to back at the clocks the chip holds under sustained power, with the
    // communication kernels beside it. Fitted on the calibration rows of the chips that have a
    // measurement (optional in JSON: 1).
    double measured_matmul_sustained_fraction = 1.0;

    // Shape curve: a GEMM whose smallest per-device dimension is n runs at
    // efficiency x n / (n + matmul_half_dim): narrow shards after heavy TP, short
    // sequences and small head dimensions lose throughput.
    double matmul_half_dim = 0;
    double kernel_overhead_s = 0;  // per kernel launch
    // Fixed host work per optimizer step, whatever the model's size: the loss and gradient-norm
    // synchronisations, the optimizer's kernel launches, the next batch from the data loader,
    // logging (what published throughputs include: "data loading, optimizer steps,
    // communication, and logging", Megatron-LM README). Optional in JSON (0).
    double step_overhead_s = 0;

    // Element-wise ops (norms, activations, softmax, dropout, residuals) are memory-bound:
    // forward traffic = factor x the layer's stored activation bytes; backward twice that.
    double elementwise_traffic_factor = 0;

    // Collectives: achieved fraction of link bandwidth and per-step latency.
    double intra_link_efficiency = 0;
    double inter_node_efficiency = 0;
    double intra_latency_s = 0;
    double inter_latency_s = 0;
    double collective_launch_s = 0;  // per collective call (optional in JSON, 0: not fitted on published runs)
    // Two-level collectives across scale-up domains (reduce-scatter inside first) instead of
    // flat rings. The calibration runs (Megatron-LM and DeepSpeed on Selene, 2021) used flat rings.
    bool hierarchical_collectives = false;
    // Flat rings across domains cross over every NIC of the domain at once, as NCCL's rings do
    // (Collectives.h); off: each member's crossing hop at its own share of the node network.
    // Optional in JSON (false).
    bool multi_nic_rings = false;

    // Fraction of the overlap window (backward compute; forward + backward for ZeRO-3)
    // that hides data-parallel / ZeRO traffic.
    double dp_overlap = 0;
    // Whether the gradients' collectives (ZeRO 0-2) start during the backward pass, bucket by
    // bucket (PyTorch DDP, FSDP, DeepSpeed's overlap_comm, Megatron-LM's --overlap-grad-reduce,
    // which its exporter sets), or after it (Megatron-LM of 2021). Optional in JSON (true).
    bool overlap_grad_reduce = true;

    double reserve_fraction = 0;          // of HBM, for allocator fragmentation and the runtime
    double dp_bucket_bytes = 0;           // gradient bucket size for bucketed all-reduce
    double host_memory_bytes_per_second = 0;  // CPU Adam on offloaded optimizer states, per device

    // Mixture of experts (optional in JSON; fitted on the MoE rows of calibration-cases.md):
    // the fraction of the dense GEMMs' efficiency the experts' grouped GEMMs reach (variable
    // per-expert batches, one kernel over all local experts), and a fixed time per MoE layer and
    // pass (router top-k, the token counts synchronised to the host before the all-to-all,
    // permutation index building: Megatron-LM's dispatcher syncs on them).
    double grouped_gemm_efficiency = 1.0;
    double moe_layer_overhead_s = 0;
    // With ep_comm_overlap (combined 1F1B), the share of the other micro-batch's compute under which
    // the dispatch and combine run: 1 where they have a stream of their own (Megatron-LM's
    // set_streams in combined_1f1b.py); 0 on a device that does one thing at a time (the engine's
    // emulated device). Optional in JSON ("moe": {"ep_overlap"}, 1).
    double ep_overlap = 1.0;

    double matmulEfficiency(const struct ChipSpec& chip) const;
    // For a data type: FP8 at the measured FP8 rate where there is one.
    double matmulEfficiency(const ChipSpec& chip, DataType type) const;
    bool operator==(const CostModelParams&) const = default;
};

// The built-in default profile (resources/planner/cost-model.json, compiled in). Other
// profiles by name come from the run store (store/RunStore.h, costModelParamsNamed).
const CostModelParams& defaultCostModelParams();

QJsonObject toJson(const CostModelParams& params);
// Every field is required: a profile is complete or refused.
CostModelParams costModelParamsFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);

} // namespace shardscope
