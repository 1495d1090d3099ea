// Spellings of hardware, training and layout enums in JSON and on the command line.
#pragma once

#include "EnumNames.h"
#include "HardwareSpec.h"
#include "Layout.h"
#include "TrainingSpec.h"

#include <array>

namespace shardscope {

inline constexpr std::array kDataTypeNames{
    EnumName<DataType>{DataType::FP32, "fp32"},
    EnumName<DataType>{DataType::BF16, "bf16"},
    EnumName<DataType>{DataType::FP16, "fp16"},
    EnumName<DataType>{DataType::FP8, "fp8"},
    EnumName<DataType>{DataType::FP4, "fp4"},
};
inline constexpr std::array kTopologyNames{
    EnumName<Topology>{Topology::Ring, "ring"},
    EnumName<Topology>{Topology::Torus2D, "torus2d"},
    EnumName<Topology>{Topology::Torus3D, "torus3d"},
    EnumName<Topology>{Topology::Switch, "switch"},
    EnumName<Topology>{Topology::FullyConnected, "fully_connected"},
};
inline constexpr std::array kPrecisionNames{
    EnumName<Precision>{Precision::FP32, "fp32"},
    EnumName<Precision>{Precision::BF16Mixed, "bf16"},
    EnumName<Precision>{Precision::BF16Autocast, "bf16-autocast"},
    EnumName<Precision>{Precision::FP16Mixed, "fp16"},
    EnumName<Precision>{Precision::FP8Tensorwise, "fp8"},
    EnumName<Precision>{Precision::FP8Delayed, "fp8-delayed"},
    EnumName<Precision>{Precision::FP8Blockwise, "fp8-blockwise"},
    EnumName<Precision>{Precision::FP8Rowwise, "fp8-rowwise"},
    EnumName<Precision>{Precision::MXFP8, "mxfp8"},
    EnumName<Precision>{Precision::NVFP4, "nvfp4"},
};
inline constexpr std::array kMainGradsNames{
    EnumName<MainGrads>{MainGrads::Default, "default"},
    EnumName<MainGrads>{MainGrads::FP32, "fp32"},
    EnumName<MainGrads>{MainGrads::BF16, "bf16"},
};
inline constexpr std::array kOptimizerNames{
    EnumName<Optimizer>{Optimizer::AdamW, "adamw"},
    EnumName<Optimizer>{Optimizer::Sgd, "sgd"},
};
inline constexpr std::array kScheduleNames{
    EnumName<PipelineSchedule>{PipelineSchedule::GPipe, "gpipe"},
    EnumName<PipelineSchedule>{PipelineSchedule::OneFOneB, "1f1b"},
    EnumName<PipelineSchedule>{PipelineSchedule::Interleaved, "interleaved"},
};
inline constexpr std::array kRecomputeNames{
    EnumName<Recompute>{Recompute::None, "none"},
    EnumName<Recompute>{Recompute::Selective, "selective"},
    EnumName<Recompute>{Recompute::Full, "full"},
};
inline constexpr std::array kRecomputeMethodNames{
    EnumName<RecomputeMethod>{RecomputeMethod::Uniform, "uniform"},
    EnumName<RecomputeMethod>{RecomputeMethod::Block, "block"},
};
inline constexpr std::array kCpCommNames{
    EnumName<CpComm>{CpComm::P2P, "p2p"},
    EnumName<CpComm>{CpComm::A2A, "a2a"},
};
inline constexpr std::array kMoeDispatcherNames{
    EnumName<MoeDispatcher>{MoeDispatcher::AllToAll, "alltoall"},
    EnumName<MoeDispatcher>{MoeDispatcher::AllGather, "allgather"},
    EnumName<MoeDispatcher>{MoeDispatcher::DeepEp, "deepep"},
    EnumName<MoeDispatcher>{MoeDispatcher::HybridEp, "hybridep"},
};
inline constexpr std::array kOffloadNames{
    EnumName<Offload>{Offload::None, "none"},
    EnumName<Offload>{Offload::Optimizer, "optimizer"},
};

} // namespace shardscope
