// Figures of one priced plan shared by the Plan details page and the report: the
// pipeline timeline derived from a prediction, and a one-line summary for people.
#pragma once

#include "Layout.h"
#include "PipelineSchedule.h"
#include "Prediction.h"
#include "Problem.h"

#include <QString>

namespace shardscope {

// The schedule of the slowest stage's per-micro-batch work for a predicted layout:
// forward is a third of the compute, backward the rest plus recomputation; collectives
// split evenly. Throws std::invalid_argument for a schedule that cannot run.
PipelineTimeline pipelineTimelineFor(const Layout& layout, const Prediction& prediction);

// The pipeline timeline's title: "Pipeline schedule: interleaved, 8 stages, 96 micro-batches,
// v = 4" ("1 stage", "1 micro-batch": the counts agree with their nouns).
QString pipelineTitle(const Layout& layout, const Prediction& prediction);

// A term's figure in words: "time_s.dp_comm" -> "Step time: data-parallel / ZeRO communication"
// (the key itself for a figure this does not know).
QString figureName(const std::string& figure);

// A mixture of experts' layout in words: "Experts: 8 routed over ep 4 (2 per device), etp 1,
// expert data parallel 4", the experts' share of weights + gradients + optimizer
// (memory_bytes.experts) and the all-to-all (time_s.ep_comm, hidden.ep_comm) when the prediction
// has them. Empty for a dense model.
QString expertSummary(const Problem& problem, const Layout& layout, const Prediction& prediction);

// One-line summary of a prediction for people: "14.0 s/step, 599K tokens/s, MFU 35.7%, ...".
QString predictionSummary(const Problem& problem, const Prediction& prediction);

} // namespace shardscope
