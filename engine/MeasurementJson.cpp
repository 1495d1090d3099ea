// Measurement -> "shardscope.measurement/1" JSON (keys in MeasurementJson.h).
#include "MeasurementJson.h"

#include <QJsonArray>

#include <algorithm>

namespace shardscope::engine {

QJsonObject toJson(const DeviceProfile& p)
{
    return QJsonObject{{"name", QString::fromStdString(p.name)},
                       {"memory_bytes", p.memory_bytes},
                       {"peak_flops_fp32", p.peak_flops_fp32},
                       {"peak_flops_bf16", p.peak_flops_bf16},
                       {"memory_bytes_per_second", p.memory_bytes_per_second},
                       {"kernel_overhead_s", p.kernel_overhead_s},
                       {"host_link_bytes_per_second", p.host_link_bytes_per_second},
                       {"host_memory_bytes_per_second", p.host_memory_bytes_per_second},
                       {"scale", p.scale},
                       {"measured", p.measured}};
}

QJsonObject toJson(const Measurement& m)
{
    const TrainRequest& r = m.request;
    QJsonObject model{{"family", r.model.encoder_decoder ? "encoder-decoder" : r.model.causal ? "decoder" : "encoder"},
                      {"layers", r.model.layers},
                      {"hidden", r.model.hidden},
                      {"heads", r.model.heads},
                      {"kv_heads", r.model.kvHeads()},
                      {"head_dim", r.model.headDim()},
                      {"ffn_hidden", r.model.ffn()},
                      {"mlp", shardscope::toString(r.model.mlp)},
                      {"norm", shardscope::toString(r.model.norm)},
                      {"norm_eps", r.model.norm_eps},
                      {"positions", shardscope::toString(r.model.positions)},
                      {"rope_base", r.model.rope_base},
                      {"bias", r.model.bias},
                      {"qkv_bias", r.model.qkv_bias},
                      {"qk_norm", r.model.qk_norm},
                      {"sliding_window", r.model.sliding_window.size},
                      {"tied_embeddings", r.model.tied_embeddings},
                      {"vocab", r.model.vocab},
                      {"seq", r.model.seq},
                      {"parameters", double(m.parameters)},
                      {"blocks", QString::fromStdString(describe(r.model))}};
    if (const MoeConfig& e = r.model.moe; e.enabled())
        model["moe"] = QJsonObject{{"experts", e.experts},
                                   {"top_k", e.top_k},
                                   {"shared_experts", e.shared_experts},
                                   {"shared_ffn_hidden", e.shared_ffn},
                                   {"ffn_hidden", r.model.expertFfn()},
                                   {"dense_layers", e.dense_layers},
                                   {"layer_interval", e.layer_interval},
                                   {"router", shardscope::toString(e.router)},
                                   {"capacity_factor", e.capacity_factor},
                                   {"aux_loss_coeff", e.aux_loss_coeff}};
    if (const MtpConfig& t = r.model.mtp; t.enabled())
        model["mtp"] = QJsonObject{{"layers", t.layers}, {"loss_scale", t.loss_scale}};
    const Layout& l = r.layout;
    const bool cluster = l.devices() > 1;
    QJsonObject layout{{"devices", int(m.devices.size())},
                       {"dp", l.dp},
                       {"tp", l.tp},
                       {"pp", l.pp},
                       {"cp", l.cp},
                       {"sp", l.sequence_parallel},
                       {"zero", l.zero_stage},
                       {"zero_group", l.zero_stage > 0 ? l.zeroGroupSize() : 0},
                       {"mb", l.micro_batch},
                       {"micro_batches", m.micro_batches},
                       {"schedule", shardscope::toString(l.schedule)},
                       {"text", QString::fromStdString(shardscope::toString(l))},
                       {"batch", r.batch},
                       {"precision", toString(r.precision)},
                       {"recompute", shardscope::toString(l.recompute)},
                       {"ep", std::max(1, l.ep)},
                       {"etp", l.expertTensorParallel()}};
    if (cluster)
        layout["links"] = QJsonObject{{"intra_bytes_per_second", r.links.intra_bytes_per_second},
                                      {"inter_bytes_per_second", r.links.inter_bytes_per_second},
                                      {"intra_latency_s", r.links.intra_latency_s},
                                      {"inter_latency_s", r.links.inter_latency_s},
                                      {"node_devices", r.links.node_devices > 0 ? r.links.node_devices
                                                                                 : int(m.devices.size())}};
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
        QJsonObject byKind, secondsByKind;
        for (int k = 0; k < kKernelKinds; ++k) {
            byKind[toString(KernelKind(k))] = d.counters.flops[size_t(k)];
            secondsByKind[toString(KernelKind(k))] = d.counters.seconds[size_t(k)];
        }
        auto byKindJson = [](const std::map<std::string, double>& values) {
            QJsonObject o;
            for (const auto& [kind, v] : values)
                o[QString::fromStdString(kind)] = v;
            return o;
        };
        QJsonObject resident;
        for (int c = 0; c < kMemoryCategories; ++c)
            resident[toString(MemoryCategory(c))] = d.memory_resident_bytes[size_t(c)];
        QJsonArray deviceTimes, wallTimes;
        for (double s : d.device_step_times_s)
            deviceTimes.append(s);
        for (double s : d.wall_step_times_s)
            wallTimes.append(s);
        const double flops = d.counters.totalFlops();
        const double steps = double(std::max<size_t>(1, m.steps.size()));
        double wall = 0;
        for (double s : d.wall_step_times_s)
            wall += s;
        devices.append(QJsonObject{{"id", d.id},
                                   {"mesh", QJsonObject{{"tp", d.tp_rank}, {"cp", d.cp_rank}, {"dp", d.dp_rank}, {"pp", d.pp_rank},
                                                        {"node", d.node}}},
                                   {"memory_resident_bytes", resident},
                                   {"profile", toJson(d.profile)},
                                   {"threads", d.threads},
                                   {"memory_capacity_bytes", d.profile.memory_bytes},
                                   {"memory_peak_bytes", peaks},
                                   {"flops", flops},
                                   {"flops_per_step", flops / steps},
                                   {"flops_by_kind", byKind},
                                   {"device_seconds_by_kind", secondsByKind},  // the device clock's breakdown
                                   {"bytes_read", d.counters.bytes_read},
                                   {"bytes_written", d.counters.bytes_written},
                                   {"comm_bytes", byKindJson(d.comm_bytes)},
                                   {"comm_bytes_received", byKindJson(d.comm_bytes_received)},
                                   {"comm_calls", byKindJson(d.comm_calls)},
                                   {"comm_seconds", byKindJson(d.comm_seconds)},
                                   {"comm_wait_seconds", d.comm_wait_seconds},
                                   {"moe_peak_copies", d.moe_peak_copies},
                                   {"moe_step_load", d.moe_step_load},
                                   // Optimizer offload: bytes over the host link, host memory passes, their time.
                                   {"host_bytes_to_host", d.counters.host_bytes_to_host},
                                   {"host_bytes_to_device", d.counters.host_bytes_to_device},
                                   {"host_memory_bytes", d.counters.host_memory_bytes},
                                   {"host_seconds", d.counters.host_seconds},
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
    if (r.model.mtp.enabled()) {
        // Multi-token prediction: its loss apart from `losses` (the main one), as Megatron logs it.
        QJsonArray mtp;
        for (const StepRecord& s : m.steps)
            mtp.append(s.mtp_loss);
        o["mtp_losses"] = mtp;
    }
    if (!m.moe_tokens_per_expert.empty()) {
        // The measured load, next to a planner's imbalance factor (issue 16).
        QJsonArray counts;
        for (std::int64_t n : m.moe_tokens_per_expert)
            counts.append(double(n));
        o["moe"] = QJsonObject{{"tokens_per_expert", counts},
                               {"max_over_mean", m.moeMaxOverMean()},
                               {"dropped_copies", double(m.moe_dropped_copies)}};
    }
    if (m.error)
        o["error"] = QJsonObject{{"device", m.error->device},
                                 {"message", QString::fromStdString(m.error->message)},
                                 {"kind", QString::fromLatin1(toString(m.error->kind))}};
    return o;
}

} // namespace shardscope::engine
