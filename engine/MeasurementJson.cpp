// Measurement -> "shardscope.measurement/1" JSON (keys in MeasurementJson.h).
#include "MeasurementJson.h"

#include <QJsonArray>

namespace shardscope::engine {

namespace {

QJsonObject profileJson(const DeviceProfile& p)
{
    return QJsonObject{{"name", QString::fromStdString(p.name)},
                       {"memory_bytes", p.memory_bytes},
                       {"peak_flops_fp32", p.peak_flops_fp32},
                       {"peak_flops_bf16", p.peak_flops_bf16},
                       {"memory_bytes_per_second", p.memory_bytes_per_second},
                       {"kernel_overhead_s", p.kernel_overhead_s},
                       {"scale", p.scale},
                       {"measured", p.measured}};
}

} // namespace

QJsonObject toJson(const Measurement& m)
{
    const TrainRequest& r = m.request;
    QJsonObject model{{"family", "decoder"},
                      {"layers", r.model.layers},
                      {"hidden", r.model.hidden},
                      {"heads", r.model.heads},
                      {"vocab", r.model.vocab},
                      {"seq", r.model.seq},
                      {"parameters", double(m.parameters)}};
    QJsonObject layout{{"devices", int(m.devices.size())},
                       {"dp", 1},
                       {"tp", 1},
                       {"pp", 1},
                       {"batch", r.batch},
                       {"precision", toString(r.precision)},
                       {"recompute", shardscope::toString(r.recompute)}};
    QJsonObject training{{"steps", r.steps},
                         {"lr", r.optimizer.lr},
                         {"seed", double(r.seed)},  // the CLI keeps seeds below 2^53, exact in a double
                         {"grad_clip", r.grad_clip},
                         {"data", QString::fromStdString(r.data)},
                         {"data_description", QString::fromStdString(m.data_description)}};
    if (m.entropy_nats_per_token)
        training["entropy_nats_per_token"] = *m.entropy_nats_per_token;

    QJsonArray losses;
    for (const StepRecord& s : m.steps)
        losses.append(s.loss);

    QJsonArray devices;
    for (const DeviceMeasurement& d : m.devices) {
        QJsonObject peaks;
        for (int c = 0; c < kMemoryCategories; ++c)
            peaks[toString(MemoryCategory(c))] = d.memory_peak_bytes[size_t(c)];
        peaks["total"] = d.memory_peak_total_bytes;
        QJsonObject byKind;
        for (int k = 0; k < kKernelKinds; ++k)
            byKind[toString(KernelKind(k))] = d.counters.flops[size_t(k)];
        QJsonObject comm;
        for (const auto& [kind, bytes] : d.comm_bytes)
            comm[QString::fromStdString(kind)] = bytes;
        QJsonArray deviceTimes, wallTimes;
        for (const StepRecord& s : m.steps) {
            deviceTimes.append(s.device_seconds);
            wallTimes.append(s.wall_seconds);
        }
        const double flops = d.counters.totalFlops();
        const double steps = double(std::max<size_t>(1, m.steps.size()));
        double wall = 0;
        for (const StepRecord& s : m.steps)
            wall += s.wall_seconds;
        devices.append(QJsonObject{{"id", d.id},
                                   {"profile", profileJson(d.profile)},
                                   {"threads", d.threads},
                                   {"memory_capacity_bytes", d.profile.memory_bytes},
                                   {"memory_peak_bytes", peaks},
                                   {"flops", flops},
                                   {"flops_per_step", flops / steps},
                                   {"flops_by_kind", byKind},
                                   {"bytes_read", d.counters.bytes_read},
                                   {"bytes_written", d.counters.bytes_written},
                                   {"comm_bytes", comm},
                                   {"device_step_time_s", d.device_step_time_s},
                                   {"wall_step_time_s", d.wall_step_time_s},
                                   {"device_step_times_s", deviceTimes},
                                   {"wall_step_times_s", wallTimes},
                                   {"achieved_flops_per_second", wall > 0 ? flops / wall : 0.0}});
    }

    QJsonObject o{{"schema", kMeasurementSchema},
                  {"model", model},
                  {"layout", layout},
                  {"training", training},
                  {"losses", losses},
                  {"devices", devices},
                  {"wall_seconds", m.wall_seconds},
                  {"cancelled", m.cancelled}};
    if (m.error)
        o["error"] = QJsonObject{{"device", m.error->device}, {"message", QString::fromStdString(m.error->message)}};
    return o;
}

} // namespace shardscope::engine
