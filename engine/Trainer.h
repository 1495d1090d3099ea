// runTraining: a short, real training run of a model (ModelExecutor) on one
// EmulatedDevice, measured: per-step loss, device-clock and wall time, peak memory
// by category, FLOPs and bytes by kernel kind. runClusterTraining: the same on an
// emulated cluster, one Measurement::devices entry per device.
//
// Errors a run can hit on the device (out of memory, a non-finite loss, divergence) are
// reported in Measurement::error and the caller keeps going; bad requests are
// InputError (field named) thrown before anything runs.
#pragma once

#include "AdamW.h"
#include "Communicator.h"
#include "Data.h"
#include "Device.h"
#include "ModelConfig.h"
#include "RunFault.h"

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::engine {

struct TrainRequest {
    ModelConfig model;
    int batch = 1;                 // sequences per step (B)
    int steps = 1;
    PrecisionMode precision = PrecisionMode::FP32;
    // bf16-mixed: gradients accumulated unrounded in fp32, 4 bytes held and on the wire (the frameworks'
    // fp32 main grads, core/TrainingSpec.h MainGrads); false: bf16 gradients. Other modes ignore it.
    bool fp32_gradients = false;
    AdamWSettings optimizer{1e-3, 0.9, 0.95, 1e-8, 0.0};
    double grad_clip = 1.0;        // global-norm clipping; <= 0 disables
    std::uint64_t seed = 1;        // initialisation, data, stochastic rounding
    std::string data = "synthetic";  // "synthetic" or a file path (bytes)
    // The layout: layout.devices() emulated devices (runClusterTraining) or one
    // (runTraining); `batch` is the global batch, split into dp replicas of
    // batch / (dp x mb) micro-batches of mb sequences; recomputation is the layout's.
    Layout layout;                 // default: one device, micro-batches of 1
    LinkSpec links;                // links between the devices (ignored on one device)
    std::size_t bucket_bytes = std::size_t(25) << 20;  // DP gradient all-reduce buckets
    bool keep_parameters = false;  // return the final parameters (Measurement::final_parameters)
    // Stop with a "diverged" error when a step's loss exceeds this many times the run's start
    // (the larger of the first loss and ln V; RunFault.h DivergenceGuard); <= 0: never stop.
    double divergence_factor = 2.0;
    // What carries a cluster run's collectives (runClusterTraining): this process's threads, or
    // the ranks of an mpirun job (every rank calls with the same request; MpiSession.h).
    ClusterBackend backend = ClusterBackend::Threads;
};

// Field names are the CLI's option names without dashes ("heads", "batch", "data"),
// layout problems "layout.KEY" ("layout.tp: 3 does not divide heads 4").
FieldErrors validate(const TrainRequest& r);

// The synthetic Markov source for `vocab` or the bytes of the file; throws
// InputError naming "data" when the file cannot be read.
std::unique_ptr<TokenSource> makeTokenSource(const TrainRequest& r);

// What no run of `r` on devices of `profile` can do without: each device holds at least its
// share of the weights (the whole model over tp x pp, and over the shard group under ZeRO-3,
// at 2 bytes a value in the bf16 modes, 4 in fp32). Checked before the token source is built
// (a million-token synthetic chain takes a minute to build); the full check is the run's own.
// Returns the out-of-memory text naming the device and bytes, or an empty string.
std::string weightsCannotFit(const TrainRequest& r, const DeviceProfile& profile);

struct StepRecord {
    int step = 0;                 // 1-based
    double loss = 0;              // mean cross-entropy, nats per token
    double grad_norm = 0;         // before clipping
    double device_seconds = 0;    // device clock for this step
    double wall_seconds = 0;      // host wall clock for this step
    // Multi-token prediction: the mean over the depths and micro-batches of each depth's mean
    // cross-entropy (Megatron's logged "mtp_k loss"), unweighted; not in `loss`. 0 without MTP.
    double mtp_loss = 0;
};

struct DeviceMeasurement {
    int id = 0;
    DeviceProfile profile;
    int threads = 1;
    std::array<double, kMemoryCategories> memory_peak_bytes{};
    double memory_peak_total_bytes = 0;
    DeviceCounters counters;                  // whole run
    std::map<std::string, double> comm_bytes; // bytes sent, by collective kind; zero on one device
    std::map<std::string, double> comm_bytes_received;
    std::map<std::string, double> comm_calls;
    std::map<std::string, double> comm_seconds;  // device-clock link time by kind
    double comm_wait_seconds = 0;             // device-clock time waiting for peers
    double moe_peak_copies = 0;  // MoE: the most token copies its layers computed in one micro-batch (ModelExecutor)
    // MoE: its ep group's busiest rank's copies over the mean, over the run's layer calls (1: balanced;
    // ModelExecutor::moeStepLoad), the load its step waited for; 0 without MoE.
    double moe_step_load = 0;
    std::array<double, kMemoryCategories> memory_resident_bytes{};  // held after the last step
    double device_step_time_s = 0;            // mean over steps
    double wall_step_time_s = 0;              // mean over steps
    std::vector<double> device_step_times_s;  // this device's clock per step
    std::vector<double> wall_step_times_s;
    int tp_rank = 0, cp_rank = 0, dp_rank = 0, pp_rank = 0, node = 0;
};

struct RunError {
    int device = -1;              // -1: not a device's failure
    std::string message;
    RunFaultKind kind = RunFaultKind::Other;  // JSON error.kind: out_of_memory, not_finite, diverged, error
};

struct Measurement {
    TrainRequest request;
    std::int64_t parameters = 0;
    std::string data_description;
    std::optional<double> entropy_nats_per_token;
    std::vector<StepRecord> steps;
    std::vector<DeviceMeasurement> devices;
    double wall_seconds = 0;      // the whole run, setup included
    bool cancelled = false;
    std::optional<RunError> error;
    int micro_batches = 1;        // per replica and step
    std::vector<float> final_parameters;  // the full model's flat buffer, when keep_parameters
    // Mixture of experts: the token copies each expert computed over the run (every MoE layer,
    // micro-batch and step, all devices); empty for a dense model. The measured load.
    std::vector<std::int64_t> moe_tokens_per_expert;
    std::int64_t moe_dropped_copies = 0;  // capacity mode: the copies past an expert's capacity
    // max over mean of those counts (1: perfectly balanced); 0 for a dense model.
    double moeMaxOverMean() const;

    std::vector<double> losses() const;
};

using StepCallback = std::function<void(const StepRecord&)>;

// A device's counters, memory and comm figures as a DeviceMeasurement.
DeviceMeasurement measureDevice(const EmulatedDevice& d, const std::vector<double>& device_step_s,
                                const std::vector<double>& wall_step_s);

// Validates the request (InputError; its layout must have one device), builds the
// model on `device` and trains. `cancel` is polled once per step. Out of memory and
// non-finite losses end the run with Measurement::error set; the device is left with
// nothing allocated.
Measurement runTraining(const TrainRequest& request, const TokenSource& source, EmulatedDevice& device,
                        const StepCallback& onStep = {}, const std::atomic<bool>* cancel = nullptr);

// Fault injection for tests: device `device` poisons a weight with NaN before step `step`.
struct FaultInjection {
    int device = -1;
    int step = 0;
};

// The same run on an emulated cluster laid out by request.layout: one ModelExecutor
// per device on its own worker thread, the pipeline schedule's micro-batches,
// the layout's collectives. Losses and the final parameters reproduce
// runTraining's in fp32 up to floating-point reordering. Measurement::devices
// has one entry per device (mesh ranks, memory, FLOPs, bytes per collective
// kind, clocks). The first device to fail (out of memory, a non-finite loss)
// stops all the others; Measurement::error names it. `cancel` stops every
// worker at its next step or collective. onStep is called on device 0's worker.
Measurement runClusterTraining(const TrainRequest& request, const TokenSource& source, const DeviceProfile& profile,
                               const StepCallback& onStep = {}, const std::atomic<bool>* cancel = nullptr,
                               const FaultInjection& fault = {});

} // namespace shardscope::engine
