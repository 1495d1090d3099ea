// Problem: a model to train on a cluster with training settings.
#pragma once

#include "HardwareSpec.h"
#include "ModelSpec.h"
#include "TrainingSpec.h"

namespace shardscope {

struct Problem {
    ModelSpec model;
    ClusterSpec cluster;
    TrainingSpec training;
    bool operator==(const Problem&) const = default;
};

// Every problem of the three parts plus their combination (sequence vs positions).
FieldErrors validate(const Problem& problem);

} // namespace shardscope
