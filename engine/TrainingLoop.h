// The step loop one worker runs, the same on one device and on each device of an
// emulated cluster: the pipeline schedule's forwards and backwards over this replica's
// micro-batches, the gradient reductions, the step's one world all-reduce (squared
// gradient norm and loss sum, so every device clips with the same global norm) and the
// update. Internal to the trainers (Trainer.cpp, ClusterTrainer.cpp).
#pragma once

#include "ModelExecutor.h"
#include "Trainer.h"

#include <functional>
#include <vector>

namespace shardscope::engine {

struct PipelineOp {
    int micro;
    bool backward;
    int chunk = 0;  // the device's model chunk (0 unless interleaved): the model's chunk chunk * p + s
};

// The op order of stage s of p with m micro-batches, by the same rules as the planner's
// simulated schedule (planner/PipelineSchedule.cpp): GPipe runs all forwards then all
// backwards; 1F1B runs p - s - 1 warm-up forwards, then one forward one backward, then
// the remaining backwards (PipeDream-Flush); interleaved 1F1B (v >= 2 chunks per device)
// runs Megatron-LM's order: micro-batches in groups of p through chunk 0, 1, ..., v - 1
// (backwards through the chunks in reverse), (p - s - 1) x 2 + (v - 1) x p warm-up
// forwards, then one forward one backward, then the remaining backwards. Interleaved
// needs m % p == 0 (throws std::invalid_argument otherwise, as Megatron-LM refuses it).
// `extra_warmup` more warm-up forwards: Megatron-LM's combined 1F1B (--overlap-moe-expert-
// parallel-comm) schedules one, so that each steady-state forward and backward are of different
// micro-batches (schedules.py @ d98e8a64, get_pp_rank_microbatches; at pp = 1
// combined_1f1b_schedule_for_no_pipelining: F0, then B0 with F1, ..., then the last backward).
// Executed with a send after each op and a receive before it, FIFO per device pair, the
// messages match and nothing waits forever (tst_engine_cluster checks it for many p, v, m).
std::vector<PipelineOp> pipelineOrder(PipelineSchedule schedule, int p, int s, int m, int v = 1, int extra_warmup = 0);

// What one worker records; written by its own thread only, read after the join.
struct WorkerRecord {
    std::vector<double> device_s, wall_s, loss, grad_norm;
    std::vector<double> mtp_loss;  // multi-token prediction: the step's MTP loss (StepRecord::mtp_loss)
    std::array<double, kMemoryCategories> resident{};
};

struct WorkerContext {
    const TrainRequest* request = nullptr;
    const TokenSource* source = nullptr;
    ModelExecutor<float>* shard = nullptr;
    EmulatedDevice* device = nullptr;
    MeshPosition position;
    CommGroup* world = nullptr;          // null on one device
    int micro_batches = 1;               // per replica and step
    std::function<void()> checkpoint;    // called before each step: throws to stop (cancel)
    FaultInjection fault;
    const StepCallback* on_step = nullptr;  // called by this worker after each step when set
};

// Runs request->steps steps. Throws TrainingFault (RunFault.h) naming the device, step and
// micro-batch when a loss or the gradient norm is not finite, and naming the step and the
// losses when the run diverges (request->divergence_factor).
void trainWorker(const WorkerContext& c, WorkerRecord& record);

} // namespace shardscope::engine
