#include "HardwareSpec.h"
#include "SpecEnums.h"

#include <cmath>

namespace shardscope {

double ChipSpec::peakFlops(DataType type) const
{
    switch (type) {
    case DataType::FP32: return peak_flops_fp32;
    case DataType::BF16: return peak_flops_bf16;
    case DataType::FP16: return peak_flops_fp16 > 0 ? peak_flops_fp16 : peak_flops_bf16;
    case DataType::FP8: return peak_flops_fp8;
    case DataType::FP4: return peak_flops_fp4;
    }
    return 0;
}

bool ChipSpec::runsRecipe(const std::string& precision) const
{
    for (const std::string& r : low_precision_recipes)
        if (r == precision)
            return true;
    return false;
}

namespace {

// Bounds that catch unit slips (GB typed as bytes, or bits as bytes x 1e9) without
// excluding any real or plausible future part.
void checkFigure(FieldErrors& errors, const std::string& path, const char* field, double value,
                 double hi, bool required)
{
    if (std::isnan(value) || value < 0 || value > hi)
        errors.push_back({path + "." + field, "value " + std::to_string(value) + " is out of range"});
    else if (required && value == 0)
        errors.push_back({path + "." + field, "is required and must be positive"});
}

} // namespace

FieldErrors validate(const ChipSpec& c, const std::string& path)
{
    FieldErrors errors;
    if (const std::string problem = nameProblem(c.name); !problem.empty())
        errors.push_back({path + ".name", problem});
    checkFigure(errors, path, "peak_flops.fp32", c.peak_flops_fp32, 1e18, false);
    checkFigure(errors, path, "peak_flops.bf16", c.peak_flops_bf16, 1e18, false);
    checkFigure(errors, path, "peak_flops.fp16", c.peak_flops_fp16, 1e18, false);
    checkFigure(errors, path, "peak_flops.fp8", c.peak_flops_fp8, 1e18, false);
    checkFigure(errors, path, "peak_flops.fp4", c.peak_flops_fp4, 1e18, false);
    if (c.peak_flops_fp32 == 0 && c.peak_flops_bf16 == 0 && c.peak_flops_fp16 == 0 && c.peak_flops_fp8 == 0 &&
        c.peak_flops_fp4 == 0)
        errors.push_back({path + ".peak_flops", "at least one data type's peak is required"});
    checkFigure(errors, path, "hbm_bytes", c.hbm_bytes, 1e15, true);
    checkFigure(errors, path, "hbm_bytes_per_second", c.hbm_bytes_per_second, 1e15, true);
    if (c.devices_per_chip < 1 || c.devices_per_chip > 256)
        errors.push_back({path + ".devices_per_chip",
                          std::to_string(c.devices_per_chip) + " is out of range [1, 256]"});
    return errors;
}

FieldErrors validate(const NodeType& n, const std::string& path)
{
    FieldErrors errors;
    if (const std::string problem = nameProblem(n.name); !problem.empty())
        errors.push_back({path + ".name", problem});
    for (const FieldError& e : validate(n.chip, path + ".chip"))
        errors.push_back(e);
    if (n.chips_per_node < 1 || n.chips_per_node > 4096)
        errors.push_back({path + ".chips_per_node", std::to_string(n.chips_per_node) + " is out of range [1, 4096]"});
    checkFigure(errors, path, "intra_link_bytes_per_second", n.intra_link_bytes_per_second, 1e15,
                n.chips_per_node > 1);
    if (n.scale_up_chips != 0 && (n.scale_up_chips < n.chips_per_node || n.scale_up_chips > 1'000'000))
        errors.push_back({path + ".scale_up_chips", std::to_string(n.scale_up_chips) +
                                                         " must be at least chips_per_node " +
                                                         std::to_string(n.chips_per_node)});
    checkFigure(errors, path, "inter_node_bytes_per_second", n.inter_node_bytes_per_second, 1e15, false);
    checkFigure(errors, path, "host_link_bytes_per_second", n.host_link_bytes_per_second, 1e15, false);
    checkFigure(errors, path, "price_per_node_hour_usd", n.price_per_node_hour_usd, 1e6, false);
    return errors;
}

FieldErrors validate(const ClusterSpec& c, const std::string& path)
{
    FieldErrors errors = validate(c.node, path + ".node");
    if (c.nodes < 1 || c.nodes > 1'000'000)
        errors.push_back({path + ".nodes", std::to_string(c.nodes) + " is out of range [1, 1000000]"});
    // A multi-node cluster needs the network figure; never guess one the sources lack.
    if (c.nodes > 1 && c.node.inter_node_bytes_per_second <= 0 &&
        c.chips() > c.node.scaleUpChips())
        errors.push_back({path + ".node.inter_node_bytes_per_second",
                          "unknown for " + c.node.name +
                              " (not published); set it on a custom node type to use more than one node"});
    return errors;
}

const char* toString(DataType v) { return enumToString<DataType>(kDataTypeNames, v); }
const char* toString(Topology v) { return enumToString<Topology>(kTopologyNames, v); }

} // namespace shardscope
