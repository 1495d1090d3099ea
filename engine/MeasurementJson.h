// The measurement as a "shardscope.measurement/1" JSON document (QtCore only;
// kept apart from the kernels). Keys, all in SI units:
// {"schema", "model": {layers, hidden, heads, vocab, seq, parameters, moe?: {experts, top_k,
//            shared_experts, shared_ffn_hidden, ffn_hidden, dense_layers, layer_interval, router,
//            capacity_factor, aux_loss_coeff}},
//  "layout": {devices, dp, tp, pp, cp, sp, zero, zero_group, mb, micro_batches, schedule, ep, etp,
//             text (the --layout string), batch, precision, recompute,
//             links?: {intra_bytes_per_second, inter_bytes_per_second, intra_latency_s,
//                      inter_latency_s, node_devices}}   (links: clusters only),
//  "training": {steps, lr, seed, grad_clip, data, data_description, entropy_nats_per_token?},
//  "losses": [...],
//  "devices": [{id, mesh: {tp, dp, pp, node}, profile: {...}, threads, memory_capacity_bytes,
//               memory_peak_bytes: {weights, gradients, optimizer, activations, workspace, total},
//               memory_resident_bytes: {weights, ...} (held after the last step),
//               flops, flops_per_step, flops_by_kind: {...}, bytes_read, bytes_written,
//               comm_bytes: {all_reduce, reduce_scatter, all_gather, broadcast, send_recv,
//                            all_to_all} (sent; all_to_all: the token copies the device dispatches
//                            and combines, its own share included, Communicator.h AllToAllBytes),
//               comm_bytes_received: {...}, comm_calls: {...}, comm_seconds: {...} (link time),
//               comm_wait_seconds, device_seconds_by_kind, device_step_time_s, wall_step_time_s,
//               device_step_times_s: [...], wall_step_times_s: [...], achieved_flops_per_second}],
//  "moe"?: {tokens_per_expert: [...] (copies each expert computed over the run, all devices),
//           max_over_mean, dropped_copies (capacity mode)} (MoE models: the measured load),
//  "wall_seconds", "cancelled", "error"?: {device, message}}
#pragma once

#include "Trainer.h"

#include <QJsonObject>

namespace shardscope::engine {

inline constexpr const char* kMeasurementSchema = "shardscope.measurement/1";

QJsonObject toJson(const Measurement& m);

// A device profile: name, memory_bytes, peak_flops_fp32, peak_flops_bf16,
// memory_bytes_per_second, kernel_overhead_s, scale, measured.
QJsonObject toJson(const DeviceProfile& p);

} // namespace shardscope::engine
