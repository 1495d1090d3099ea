// Prediction: what the cost model says about one layout of one problem.
// Every figure is per device of the most loaded pipeline stage unless stated,
// and each is a sum of named terms (planner's explain() lists them).
#pragma once

namespace shardscope {

struct MemoryBreakdown {      // bytes per device
    double weights = 0;
    double gradients = 0;
    double optimizer = 0;     // optimizer states, incl. fp32 master weights in mixed precision
    double activations = 0;   // stored for backward, over the schedule's in-flight micro-batches
    double buffers = 0;       // communication buffers, gathered ZeRO-3 parameters
    double reserve = 0;       // allocator fragmentation and runtime reserve
    double capacity = 0;      // HBM per device (shared HBM divided among the chip's devices)
    // Of weights + gradients + optimizer: the routed experts' share (MoE; 0 for a dense model).
    // A part of those three, not a fourth term: not in total().
    double experts = 0;
    // Activations offloaded to pinned host memory (offload_activations): not on the device, not in total().
    double host_activations = 0;

    double total() const { return weights + gradients + optimizer + activations + buffers + reserve; }
};

struct TimeBreakdown {        // seconds per optimizer step, on the critical path
    double compute = 0;       // forward + backward matmuls and memory-bound element-wise ops
    double recompute = 0;     // activation recomputation
    double tp_comm = 0;       // tensor/sequence-parallel collectives, exposed
    double cp_comm = 0;       // context-parallel K/V exchange, exposed part
    double pp_comm = 0;       // pipeline point-to-point
    double dp_comm = 0;       // data-parallel / ZeRO collectives not hidden behind compute
                              // (with MoE also the expert gradients' reduction over edp)
    double ep_comm = 0;       // MoE token dispatch and combine (all-to-all over ep), exposed
    double bubble = 0;        // pipeline fill and drain
    double optimizer = 0;     // optimizer step (memory-bound)
    double offload = 0;       // optimizer offload transfers over the host link; activation offload's exposed copies

    // Communication the cost model hides behind compute, by kind (predict --json time_s.hidden):
    // it runs in a stream of its own while the compute above runs, so it is not in sum().
    // For each kind, exposed + hidden is the collective's whole time.
    struct Hidden {
        double tp_comm = 0;   // tp-comm-overlap: SP all-gather/reduce-scatter chunks under the GEMMs
        double cp_comm = 0;   // CP ring send/recv under each ring step's attention
        double dp_comm = 0;   // data-parallel / ZeRO collectives under the backward (ZeRO-3: the step)
        double ep_comm = 0;   // all-to-all under the shared experts' or another micro-batch's compute
        double sum() const { return tp_comm + cp_comm + dp_comm + ep_comm; }
    } hidden;

    double sum() const
    {
        return compute + recompute + tp_comm + cp_comm + pp_comm + dp_comm + ep_comm + bubble + optimizer + offload;
    }
};

// Bytes one device sends per step by collective kind (ring algorithms: reduce-scatter and
// all-gather send (n - 1)/n of the buffer, all-reduce twice that; point-to-point the message;
// all-to-all the token copies a device dispatches and combines, its own share included, so that
// a dropless MoE's count does not depend on where the router sent the tokens).
struct CommBytes {
    double tp = 0;   // tensor/sequence-parallel collectives
    double cp = 0;   // context-parallel K/V exchange
    double pp = 0;   // pipeline activations and gradients
    double dp = 0;   // data-parallel all-reduce / ZeRO reduce-scatter and all-gather (+ expert edp)
    double ep = 0;   // expert-parallel token dispatch and combine

    // The same bytes by collective kind: all_reduce + reduce_scatter + all_gather + send_recv +
    // all_to_all equals total().
    double all_reduce = 0, reduce_scatter = 0, all_gather = 0, send_recv = 0, all_to_all = 0;

    double total() const { return tp + cp + pp + dp + ep; }
};

enum class Infeasibility {
    None,
    OutOfMemory,          // the most loaded device needs more than its HBM
    MissingHardwareFigure,  // e.g. offload without a published host link
};

struct Prediction {
    bool feasible = true;
    Infeasibility reason = Infeasibility::None;
    // MissingHardwareFigure: which figure, and what needs it (a static text: no allocation on the
    // search's path); null otherwise.
    const char* missing_figure = nullptr;

    MemoryBreakdown memory_bytes;
    TimeBreakdown time_s;
    CommBytes comm_bytes;          // per device of the slowest stage (dp: of the stage with the most parameters)
    double step_time_s = 0;

    int micro_batches = 0;         // per step and pipeline
    int memory_stage = 0;          // the stage whose device holds the most
    double tokens_per_s = 0;
    double model_flops_per_step = 0;     // forward + backward (3x forward), all devices, no recompute
    double hardware_flops_per_step = 0;  // + recomputation
    // Vector (non-matmul) FLOPs, all devices, per step: norms, activations, bias and residual adds,
    // the vocabulary softmax, embeddings, the optimizer. Not part of MFU or HFU (Megatron's convention).
    double vector_flops_per_step = 0;
    // MFU in named conventions, each model FLOPs per step / (step time x devices x dense peak):
    double mfu = 0;         // Megatron/Korthikanti's: every GEMM of forward and backward, the full
                            // s x s attention scores even when causal ([M21] eq. 3 without recompute)
    double mfu_palm = 0;    // PaLM's (Chowdhery et al. 2022, App. B): 6 N (non-embedding parameters,
                            // active ones for MoE) + 12 L H Q T per token
    double mfu_causal = 0;  // causal-aware: Megatron's with a causal self-attention's scores halved
                            // (only those below the diagonal are computed)
    double hfu = 0;                // hardware FLOPs / (step time x devices x peak)
    double time_to_train_s = 0;
    double cost_to_train_usd = 0;  // 0 when the node type has no published price
};

const char* toString(Infeasibility reason);

} // namespace shardscope
