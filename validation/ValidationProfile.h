// ValidationProfile: what prices an engine run — the planner's efficiency terms (on top of
// the emulated hardware's roofline, EmulatedHardware.h) and the emulation's own host
// wall-clock terms. The wall terms describe this machine running the engine, not any
// accelerator, so they live here and not in the planner's CostModelParams.
//
// Stored as the planner's "shardscope.costmodel/1" document with an optional
// "emulation_wall" object: the planner reads the same file and ignores that key, so a profile
// fitted by `calibrate --engine --save NAME` is usable by both.
#pragma once

#include "CostModelParams.h"
#include "FieldError.h"

#include <QJsonObject>

#include <string>

namespace shardscope {

// How the engine's emulated cluster spends host wall-clock time (WallClockModel.h): fitted on
// this machine's engine runs (calibrate --engine). The defaults are the uncalibrated model: a
// pure roofline of the host.
struct EmulationWallTerms {
    double compute_factor = 1;         // real time of the device work / its roofline time on the host profile
    double sync_s = 0;                 // per barrier (a collective's start or ring step) that cores idle for
    double hidden_sync_s = 0;          // per barrier whose wait other workers fill (switches remain)
    bool operator==(const EmulationWallTerms&) const = default;
};

struct ValidationProfile {
    CostModelParams terms = defaultCostModelParams();
    EmulationWallTerms wall;

    ValidationProfile() = default;
    // A profile of the planner's terms alone (published-run fits): the uncalibrated wall clock.
    ValidationProfile(const CostModelParams& t) : terms(t) {}  // NOLINT: implicit on purpose
    ValidationProfile(const CostModelParams& t, const EmulationWallTerms& w) : terms(t), wall(w) {}
    bool operator==(const ValidationProfile&) const = default;
};

QJsonObject toJson(const ValidationProfile& profile);
// Every planner term is required (as costModelParamsFromJson); "emulation_wall" is optional.
ValidationProfile validationProfileFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors);

} // namespace shardscope
