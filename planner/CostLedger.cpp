#include "CostLedger.h"

namespace shardscope {

const char* figureKey(Figure figure)
{
    switch (figure) {
    case Figure::Compute: return "time_s.compute";
    case Figure::Recompute: return "time_s.recompute";
    case Figure::TpComm: return "time_s.tp_comm";
    case Figure::CpComm: return "time_s.cp_comm";
    case Figure::PpComm: return "time_s.pp_comm";
    case Figure::DpComm: return "time_s.dp_comm";
    case Figure::EpComm: return "time_s.ep_comm";
    case Figure::Bubble: return "time_s.bubble";
    case Figure::Optimizer: return "time_s.optimizer";
    case Figure::Offload: return "time_s.offload";
    case Figure::Weights: return "memory_bytes.weights";
    case Figure::Gradients: return "memory_bytes.gradients";
    case Figure::OptimizerStates: return "memory_bytes.optimizer";
    case Figure::Activations: return "memory_bytes.activations";
    case Figure::Buffers: return "memory_bytes.buffers";
    case Figure::Reserve: return "memory_bytes.reserve";
    case Figure::HostActivations: return "memory_bytes.host_activations";
    }
    return "?";
}

const char* toString(CommDimension dimension)
{
    switch (dimension) {
    case CommDimension::Tp: return "tp";
    case CommDimension::Cp: return "cp";
    case CommDimension::Pp: return "pp";
    case CommDimension::Dp: return "dp";
    case CommDimension::Ep: return "ep";
    case CommDimension::ExpertDp: return "edp";
    case CommDimension::EmbeddingGroup: return "embedding_group";
    case CommDimension::AllDevices: return "all_devices";
    }
    return "?";
}

const char* toString(CommKind kind)
{
    switch (kind) {
    case CommKind::AllReduce: return "all_reduce";
    case CommKind::ReduceScatter: return "reduce_scatter";
    case CommKind::AllGather: return "all_gather";
    case CommKind::SendRecv: return "send_recv";
    case CommKind::AllToAll: return "all_to_all";
    }
    return "?";
}

const char* toString(CommPlacement placement)
{
    return placement == CommPlacement::InterDomain ? "inter_domain" : "intra_domain";
}

} // namespace shardscope
