#include "CostModelParams.h"
#include "HardwareSpec.h"
#include "JsonReader.h"

#include <algorithm>

#include <QFile>
#include <QJsonDocument>

#include <stdexcept>

namespace shardscope {

double CostModelParams::matmulEfficiency(const ChipSpec& chip) const
{
    if (auto it = measured_matmul_flops_by_chip.find(chip.name);
        it != measured_matmul_flops_by_chip.end() && chip.peak_flops_bf16 > 0)
        return std::min(1.0, measured_matmul_sustained_fraction * it->second / chip.peak_flops_bf16);
    if (auto it = matmul_efficiency_by_vendor.find(chip.vendor); it != matmul_efficiency_by_vendor.end())
        return it->second;
    return matmul_efficiency_default;
}

double CostModelParams::matmulEfficiency(const ChipSpec& chip, DataType type) const
{
    if (type == DataType::FP8 && chip.peak_flops_fp8 > 0)
        if (auto it = measured_fp8_matmul_flops_by_chip.find(chip.name); it != measured_fp8_matmul_flops_by_chip.end())
            return std::min(1.0, measured_matmul_sustained_fraction * it->second / chip.peak_flops_fp8);
    return matmulEfficiency(chip);
}

namespace {

QJsonObject mapToJson(const std::map<std::string, double>& m)
{
    QJsonObject o;
    for (const auto& [k, v] : m)
        o.insert(QString::fromStdString(k), v);
    return o;
}

std::map<std::string, double> readFractions(JsonReader r)
{
    std::map<std::string, double> out;
    for (auto it = r.json().begin(); it != r.json().end(); ++it) {
        const std::string key = it.key().toStdString();
        out[key] = r.number(key.c_str(), 0, true, 1e-3, 1.0);
    }
    return out;
}

} // namespace

QJsonObject toJson(const CostModelParams& p)
{
    QJsonObject o{
        {"schema", "shardscope.costmodel/1"},
        {"name", QString::fromStdString(p.name)},
        {"matmul_efficiency",
         QJsonObject{{"default", p.matmul_efficiency_default},
                     {"measured_bf16_flops_by_chip", mapToJson(p.measured_matmul_flops_by_chip)},
                     {"by_vendor", mapToJson(p.matmul_efficiency_by_vendor)}}},
        {"matmul_half_dim", p.matmul_half_dim},
        {"kernel_overhead_s", p.kernel_overhead_s},
        {"elementwise_traffic_factor", p.elementwise_traffic_factor},
        {"network", QJsonObject{{"intra_link_efficiency", p.intra_link_efficiency},
                                {"inter_node_efficiency", p.inter_node_efficiency},
                                {"intra_latency_s", p.intra_latency_s},
                                {"inter_latency_s", p.inter_latency_s},
                                {"collective_launch_s", p.collective_launch_s},
                                {"hierarchical_collectives", p.hierarchical_collectives}}},
        {"dp_overlap", p.dp_overlap},
        {"memory", QJsonObject{{"reserve_fraction", p.reserve_fraction}, {"dp_bucket_bytes", p.dp_bucket_bytes}}},
        {"host_memory_bytes_per_second", p.host_memory_bytes_per_second},
    };
    // The optional parts only when set (a profile saved before them reads and writes as it was).
    if (!p.measured_fp8_matmul_flops_by_chip.empty()) {
        QJsonObject mm = o.value("matmul_efficiency").toObject();
        mm.insert("measured_fp8_flops_by_chip", mapToJson(p.measured_fp8_matmul_flops_by_chip));
        o.insert("matmul_efficiency", mm);
    }
    if (p.measured_matmul_sustained_fraction != 1.0) {
        QJsonObject mm = o.value("matmul_efficiency").toObject();
        mm.insert("sustained_fraction", p.measured_matmul_sustained_fraction);
        o.insert("matmul_efficiency", mm);
    }
    if (p.multi_nic_rings) {
        QJsonObject net = o.value("network").toObject();
        net.insert("multi_nic_rings", true);
        o.insert("network", net);
    }
    if (!p.overlap_grad_reduce)
        o.insert("overlap_grad_reduce", false);
    if (p.step_overhead_s != 0)
        o.insert("step_overhead_s", p.step_overhead_s);
    if (p.grouped_gemm_efficiency != 1.0 || p.moe_layer_overhead_s != 0 || p.ep_overlap != 1.0) {
        QJsonObject moe{{"grouped_gemm_efficiency", p.grouped_gemm_efficiency},
                        {"layer_overhead_s", p.moe_layer_overhead_s}};
        if (p.ep_overlap != 1.0)
            moe.insert("ep_overlap", p.ep_overlap);
        o.insert("moe", moe);
    }
    return o;
}

CostModelParams costModelParamsFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    JsonReader r(json, path, errors);
    checkSchema(r, "costmodel", 1);
    // "notes" and "fitted_on" document provenance; they are kept in the file only. "emulation_wall"
    // belongs to validation (validation/ValidationProfile.h), which reads the same document.
    r.rejectUnknownKeys({"schema", "name", "matmul_efficiency", "matmul_half_dim", "kernel_overhead_s",
                         "elementwise_traffic_factor", "network", "dp_overlap", "overlap_grad_reduce",
                         "step_overhead_s", "memory", "host_memory_bytes_per_second", "moe", "emulation_wall", "notes",
                         "fitted_on", "sources"});
    CostModelParams p;
    p.name = r.string("name", true);
    JsonReader mm = r.object("matmul_efficiency", true);
    mm.rejectUnknownKeys({"default", "measured_bf16_flops_by_chip", "measured_fp8_flops_by_chip", "by_vendor",
                          "sustained_fraction", "sources"});
    p.matmul_efficiency_default = mm.number("default", 0, true, 1e-3, 1.0);
    JsonReader measured = mm.object("measured_bf16_flops_by_chip", true);
    for (auto it = measured.json().begin(); it != measured.json().end(); ++it) {
        const std::string chip = it.key().toStdString();
        p.measured_matmul_flops_by_chip[chip] = measured.quantity(chip.c_str(), QuantityKind::FlopsPerSecond, true);
    }
    if (mm.has("measured_fp8_flops_by_chip")) {
        JsonReader fp8 = mm.object("measured_fp8_flops_by_chip", false);
        for (auto it = fp8.json().begin(); it != fp8.json().end(); ++it) {
            const std::string chip = it.key().toStdString();
            p.measured_fp8_matmul_flops_by_chip[chip] = fp8.quantity(chip.c_str(), QuantityKind::FlopsPerSecond, true);
        }
    }
    p.matmul_efficiency_by_vendor = readFractions(mm.object("by_vendor", true));
    p.measured_matmul_sustained_fraction = mm.number("sustained_fraction", 1.0, false, 0.1, 1.0);
    p.matmul_half_dim = r.number("matmul_half_dim", 0, true, 0, 1e5);
    p.kernel_overhead_s = r.number("kernel_overhead_s", 0, true, 0, 1e-2);
    p.step_overhead_s = r.number("step_overhead_s", 0, false, 0, 10);
    p.elementwise_traffic_factor = r.number("elementwise_traffic_factor", 0, true, 0, 100);
    JsonReader net = r.object("network", true);
    net.rejectUnknownKeys({"intra_link_efficiency", "inter_node_efficiency", "intra_latency_s", "inter_latency_s",
                           "collective_launch_s", "hierarchical_collectives", "multi_nic_rings"});
    p.intra_link_efficiency = net.number("intra_link_efficiency", 0, true, 1e-3, 1.0);
    p.inter_node_efficiency = net.number("inter_node_efficiency", 0, true, 1e-3, 1.0);
    p.intra_latency_s = net.number("intra_latency_s", 0, true, 0, 1e-2);
    p.inter_latency_s = net.number("inter_latency_s", 0, true, 0, 1e-2);
    p.collective_launch_s = net.number("collective_launch_s", 0, false, 0, 1e-2);
    p.hierarchical_collectives = net.boolean("hierarchical_collectives", false);
    p.multi_nic_rings = net.boolean("multi_nic_rings", false);
    p.dp_overlap = r.number("dp_overlap", 0, true, 0, 1.0);
    p.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
    JsonReader mem = r.object("memory", true);
    mem.rejectUnknownKeys({"reserve_fraction", "dp_bucket_bytes"});
    p.reserve_fraction = mem.number("reserve_fraction", 0, true, 0, 0.5);
    p.dp_bucket_bytes = mem.number("dp_bucket_bytes", 0, true, 0, 1e11);
    p.host_memory_bytes_per_second = r.number("host_memory_bytes_per_second", 0, true, 1e6, 1e13);
    if (r.has("moe")) {
        JsonReader moe = r.object("moe", false);
        moe.rejectUnknownKeys({"grouped_gemm_efficiency", "layer_overhead_s", "ep_overlap"});
        p.grouped_gemm_efficiency = moe.number("grouped_gemm_efficiency", 1.0, false, 1e-3, 1.0);
        p.moe_layer_overhead_s = moe.number("layer_overhead_s", 0, false, 0, 1e-1);
        p.ep_overlap = moe.number("ep_overlap", 1.0, false, 0, 1.0);
    }
    return p;
}

const CostModelParams& defaultCostModelParams()
{
    static const CostModelParams params = [] {
        QFile f(QStringLiteral(":/planner/cost-model.json"));
        if (!f.open(QIODevice::ReadOnly))
            throw std::runtime_error("built-in cost model parameters missing (:/planner/cost-model.json)");
        FieldErrors errors;
        const QJsonObject json = parseJsonObject(f.readAll(), "cost-model.json", errors);
        CostModelParams p = costModelParamsFromJson(json, "cost-model.json", errors);
        if (!errors.empty())
            throw std::runtime_error("built-in cost model parameters are invalid:\n" + joinErrors(errors));
        return p;
    }();
    return params;
}

} // namespace shardscope
