// PipelineSchedule: the order and timing of forward and backward passes of every
// micro-batch on every pipeline stage, simulated from the schedule's rules:
//  - GPipe: all forwards, then all backwards (Huang et al. 2019);
//  - 1F1B: p - s - 1 warm-up forwards on stage s, then one forward one backward,
//    then the remaining backwards (Narayanan et al. 2021, PipeDream-Flush);
//  - interleaved 1F1B: v model chunks per device, micro-batches in groups of p per
//    chunk, warm-up (p - s - 1) x 2 + (v - 1) x p (Narayanan et al. 2021, Section 2.2.2).
// Each op starts when its device is free and its input (previous stage's forward, next
// stage's backward) is done. The makespan reproduces the bubble formulas; the GUI draws it.
#pragma once

#include "Layout.h"

#include <algorithm>
#include <string>
#include <vector>

namespace shardscope {

struct PipelineOp {
    int stage = 0;        // device (pipeline rank)
    int micro_batch = 0;
    int chunk = 0;        // model chunk on the device (0 unless interleaved)
    bool backward = false;
    double start_s = 0;
    double end_s = 0;
};

struct PipelineTimeline {
    int stages = 0;
    int micro_batches = 0;
    int chunks = 1;
    std::vector<PipelineOp> ops;  // in start order per stage
    double makespan_s = 0;
    double busy_s = 0;            // sum of op durations on the busiest stage
    // Idle fraction of the makespan on the busiest stage = bubble / makespan.
    // (At least 0: the ops summed one by one can end an ulp before m x (forward + backward).)
    double bubbleFraction() const { return makespan_s > 0 ? std::max(0.0, 1 - busy_s / makespan_s) : 0; }
};

// Forward and backward time of one micro-batch through a whole stage (all its chunks).
// Throws std::invalid_argument for an impossible schedule (e.g. interleaved with m % p != 0).
PipelineTimeline simulatePipeline(PipelineSchedule schedule, int stages, int microBatches, int chunks,
                                  double forward_s, double backward_s);

// The peak of the activations stage `stage` holds in the schedule's op order (the order
// simulatePipeline runs, and the engine's step loop): a (micro-batch, chunk) is held from its
// forward to its backward. chunk_bytes[c]: what the device's chunk c keeps per micro-batch;
// its size is v when interleaved, else one entry. Throws std::invalid_argument as
// simulatePipeline does.
double peakInFlightBytes(PipelineSchedule schedule, int stages, int stage, int microBatches,
                         const std::vector<double>& chunk_bytes);
// The same over `chunks` values at chunk_bytes (the cost model's stack buffer: no allocation),
// from the schedule's periodic structure in O(p v) rather than O(m v).
// `extra_warmup` more forwards before the first backward (Megatron-LM's combined 1F1B with
// overlap_moe_expert_parallel_comm schedules one: schedules.py @ d98e8a64, interleaved).
double peakInFlightBytes(PipelineSchedule schedule, int stages, int stage, int microBatches, const double* chunk_bytes,
                         int chunks, int extra_warmup = 0);
// The same by walking every op in order: the reference the tests hold the fast one to.
double peakInFlightBytesByWalk(PipelineSchedule schedule, int stages, int stage, int microBatches,
                               const double* chunk_bytes, int chunks);

} // namespace shardscope
