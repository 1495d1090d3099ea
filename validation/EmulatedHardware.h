// The planner's view of an emulated cluster: the engine's device profile and link
// model as a ChipSpec and NodeType, the engine's model as a ModelSpec, and the cost
// model's efficiency terms for a machine that is exactly a roofline (the emulated
// device's clock is max(FLOPs / peak, bytes / bandwidth) + overhead per kernel).
// With these, the same CostModel that prices full-size plans predicts an engine run.
#pragma once

#include "Communicator.h"
#include "CostModelParams.h"
#include "Device.h"
#include "ModelConfig.h"
#include "Problem.h"

namespace shardscope {

// The engine model's architecture block by block (norm, MLP, positions, heads, biases, head).
ModelSpec engineModelSpec(const engine::ModelConfig& config);

// Precision as the planner names it: fp32 or bf16 mixed (pure bf16 modes keep 16-bit
// weights; the planner has no such mode, so they are refused by the caller).
Precision plannerPrecision(engine::PrecisionMode mode);

// One emulated node type: devices of `profile`, `node_devices` per node (0: all in one).
NodeType emulatedNodeType(const engine::DeviceProfile& profile, const engine::LinkSpec& links, int devices);

// The problem the planner prices for an engine run of `config` at `batch` sequences per step;
// `fp32_gradients` the run's bf16-mixed gradients (engine::TrainRequest): main_grads fp32, else bf16.
Problem emulatedProblem(const engine::ModelConfig& config, int batch, engine::PrecisionMode precision,
                        bool fp32_gradients, const engine::DeviceProfile& profile, const engine::LinkSpec& links,
                        int devices);

// Efficiency terms of an ideal roofline device: every matmul at peak, links at their
// bandwidth, nothing hidden behind compute (the engine's collectives are synchronous),
// no reserve. `base` supplies the terms the engine has no counterpart for.
CostModelParams engineCostModelParams(const engine::DeviceProfile& profile, const engine::LinkSpec& links,
                                      std::size_t bucket_bytes, const CostModelParams& base);

} // namespace shardscope
