// From a full-size plan to a validation case the engine can run here: the same layout
// shape on an engine-sized model of the same family, on the plan's chip scaled down so
// that the small model feels the same memory pressure as the full one on the real chip.
//
// The engine trains the plan's own blocks (norms, MLP kind, positions, query groups,
// biases, tied or untied head) at a smaller depth, width, vocabulary and sequence.
// What it cannot execute yet is mapped to the nearest case it can, and said: context
// parallelism (folded into data parallelism) and more than kMaxValidationDevices devices, or the
// caller's maximum (`--max-devices`: an MPI run spreads them over ranks), reduced: data
// parallelism, then pipeline, then tensor degree. Encoders train as BERT does (the
// masked-LM objective, the pooler by its next-sentence head). Architectures it cannot
// express (encoder-decoders, mixture-of-experts) are refused by name.
#pragma once

#include "Validation.h"

#include <string>
#include <vector>

namespace shardscope {

inline constexpr int kMaxValidationDevices = 16;

struct ScaledCase {
    ValidationCase validation;
    std::vector<std::string> adaptations;  // what differs from the plan, for people
    double memory_scale = 1;               // the chip's capacity, FLOP/s and bandwidth are multiplied by this
    Prediction full_prediction;            // the full-size plan priced with the terms it was made with
};

// The engine-sized model of `model` for `layout` (its tp and pp divide it). Throws
// InputError naming what the engine cannot execute (encoder-decoders, MoE).
engine::ModelConfig scaledEngineModel(const ModelSpec& model, const Layout& layout);

// The name a plan's validation runs are stored under in the history.
std::string validationRunName(const Problem& full, const Layout& layout);

// `steps` training steps on at most `max_devices` devices. The memory pressure to reproduce comes
// from the full-size plan priced with `fullTerms` (a plan's own request terms). Throws InputError
// when the plan's chip has no figures to scale or max_devices < 1.
ScaledCase scaledValidationCase(const Problem& full, const Layout& layout, int steps,
                                const CostModelParams& fullTerms = defaultCostModelParams(),
                                int max_devices = kMaxValidationDevices);

} // namespace shardscope
