// runTraining: validate, build the model on the device, step, measure; device
// failures (out of memory, non-finite loss) end the run with Measurement::error.
// The step loop is the cluster's (TrainingLoop.h), on one device.
#include "Trainer.h"

#include "MaskedLm.h"
#include "TrainingLoop.h"
#include "Units.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace shardscope::engine {

using Clock = std::chrono::steady_clock;

FieldErrors validate(const TrainRequest& r)
{
    FieldErrors e = validate(r.model);
    if (r.batch < 1 || r.batch > (1 << 20))
        e.push_back({"batch", std::to_string(r.batch) + " is out of range [1, 1048576]"});
    if (r.steps < 1 || r.steps > 100'000'000)
        e.push_back({"steps", std::to_string(r.steps) + " is out of range [1, 100000000]"});
    if (!(r.optimizer.lr > 0) || !std::isfinite(r.optimizer.lr))
        e.push_back({"lr", "must be a positive number"});
    if (r.data.empty())
        e.push_back({"data", "must be \"synthetic\" or a file"});
    if (r.model.masked_lm && r.data != "synthetic" && r.model.vocab < 257)
        e.push_back({"vocab", std::to_string(r.model.vocab) + " leaves no [MASK] id beside the 256 bytes of byte-level "
                              "data (the masked-LM objective takes id vocab - 1): at least 257"});
    const Layout& l = r.layout;
    FieldErrors le = validate(l, "layout");
    if (!le.empty() || !e.empty()) {
        e.insert(e.end(), le.begin(), le.end());
        return e;  // the rules below divide by these fields
    }
    auto add = [&](const char* field, const std::string& message) { e.push_back({std::string("layout.") + field, message}); };
    auto s = [](auto v) { return std::to_string(v); };
    for (FieldError& f : validateShardable(r.model, l, l.micro_batch))
        e.push_back(std::move(f));
    const std::int64_t perStep = std::int64_t(l.dp) * l.micro_batch;
    if (r.batch % perStep != 0)
        add("mb", "dp x mb = " + s(perStep) + " does not divide the batch " + s(r.batch));
    else if (l.schedule == PipelineSchedule::Interleaved && (r.batch / perStep) % l.pp != 0)
        add("schedule", "interleaved 1F1B needs the " + s(r.batch / perStep) +
                            " micro-batches per replica to be a multiple of pp " + s(l.pp) +
                            " (Megatron-LM runs them in groups of pp per model chunk)");
    if (l.devices() > 1) {
        if (!(r.links.intra_bytes_per_second > 0))
            e.push_back({"links", "the intra-node link bandwidth must be positive"});
        const int nodeDevices = r.links.node_devices > 0 ? r.links.node_devices : int(l.devices());
        if (nodeDevices < l.devices() && !(r.links.inter_bytes_per_second > 0))
            e.push_back({"links", "the devices span several nodes: the inter-node bandwidth must be positive"});
    }
    return e;
}

std::string weightsCannotFit(const TrainRequest& r, const DeviceProfile& profile)
{
    const Layout& l = r.layout;
    double shards = double(std::max(1, l.tp)) * std::max(1, l.pp);
    if (l.zero_stage >= 3)
        shards *= std::max(1, l.zero_group > 0 ? l.zero_group : l.dp);
    const bool bf16Weights = r.precision == PrecisionMode::BF16RNE || r.precision == PrecisionMode::BF16SR;
    const double bytes = std::ceil(double(parameterCount(r.model)) / shards) * (bf16Weights ? 2.0 : 4.0);
    if (!(profile.memory_bytes > 0) || bytes <= profile.memory_bytes)
        return {};
    const std::int64_t params = parameterCount(r.model);
    return profile.name + ": out of memory before the run: the weights alone need " + formatBytes(bytes) + " (" +
           formatCount(std::int64_t(bytes)) + " bytes: " + formatCount(params) + " parameters over " +
           formatCount(std::int64_t(shards)) + (shards == 1 ? " shard" : " shards") + ") of the device's " +
           formatBytes(profile.memory_bytes);
}

std::unique_ptr<TokenSource> makeTokenSource(const TrainRequest& r)
{
    if (r.data == "synthetic")  // a masked-LM model's data leaves its [MASK] id out
        return std::make_unique<MarkovSource>(dataVocabulary(r.model), r.seed);
    return std::make_unique<ByteFileSource>(r.data, r.seed);
}

double Measurement::moeMaxOverMean() const
{
    if (moe_tokens_per_expert.empty())
        return 0;
    std::int64_t sum = 0, most = 0;
    for (std::int64_t n : moe_tokens_per_expert) {
        sum += n;
        most = std::max(most, n);
    }
    return sum > 0 ? double(most) * double(moe_tokens_per_expert.size()) / double(sum) : 0;
}

std::vector<double> Measurement::losses() const
{
    std::vector<double> l;
    for (const StepRecord& s : steps)
        l.push_back(s.loss);
    return l;
}

DeviceMeasurement measureDevice(const EmulatedDevice& d, const std::vector<double>& device_step_s,
                                const std::vector<double>& wall_step_s)
{
    DeviceMeasurement m;
    m.id = d.id();
    m.profile = d.profile();
    m.threads = d.threads();
    for (int c = 0; c < kMemoryCategories; ++c) {
        m.memory_peak_bytes[size_t(c)] = d.allocator().peakBytes(MemoryCategory(c));
        m.memory_resident_bytes[size_t(c)] = d.allocator().currentBytes(MemoryCategory(c));
    }
    m.memory_peak_total_bytes = d.allocator().peakTotalBytes();
    m.counters = d.counters();
    const CommCounters& comm = d.comm();
    for (int k = 0; k < kCommKinds; ++k) {
        const char* kind = toString(CommKind(k));
        m.comm_bytes[kind] = comm.bytes_sent[size_t(k)];
        m.comm_bytes_received[kind] = comm.bytes_received[size_t(k)];
        m.comm_calls[kind] = double(comm.calls[size_t(k)]);
        m.comm_seconds[kind] = comm.seconds[size_t(k)];
    }
    m.comm_wait_seconds = comm.wait_seconds;
    m.device_step_times_s = device_step_s;
    m.wall_step_times_s = wall_step_s;
    for (double s : device_step_s)
        m.device_step_time_s += s;
    for (double s : wall_step_s)
        m.wall_step_time_s += s;
    if (!device_step_s.empty())
        m.device_step_time_s /= double(device_step_s.size());
    if (!wall_step_s.empty())
        m.wall_step_time_s /= double(wall_step_s.size());
    return m;
}

namespace {

DeviceMeasurement snapshot(const EmulatedDevice& d, const std::vector<StepRecord>& steps)
{
    std::vector<double> dev, wall;
    for (const StepRecord& s : steps) {
        dev.push_back(s.device_seconds);
        wall.push_back(s.wall_seconds);
    }
    return measureDevice(d, dev, wall);
}

} // namespace

Measurement runTraining(const TrainRequest& request, const TokenSource& source, EmulatedDevice& device,
                        const StepCallback& onStep, const std::atomic<bool>* cancel)
{
    FieldErrors errors = validate(request);
    for (FieldError& f : source.check(dataVocabulary(request.model), request.model.seq))
        errors.push_back(f);
    if (!errors.empty())
        throw InputError(errors);

    const auto start = Clock::now();
    Measurement m;
    m.request = request;
    m.parameters = parameterCount(request.model);
    m.data_description = source.description();
    // The source's entropy floors next-token prediction, not the masked-LM objective.
    if (!request.model.masked_lm)
        m.entropy_nats_per_token = source.entropyNatsPerToken();
    device.resetCounters();
    device.allocator().resetPeaks();

    if (request.layout.devices() != 1)
        throw InputError("layout: runTraining runs one device; the layout has " +
                         std::to_string(request.layout.devices()) + " (run it on a cluster)");
    ExecutorOptions options;
    options.micro_batch = request.layout.micro_batch;
    options.global_tokens = lossTokens(request.model, request.batch);
    options.precision = request.precision;
    options.fp32_gradients = request.fp32_gradients;
    options.seed = request.seed;
    options.bucket_bytes = request.bucket_bytes;
    m.micro_batches = request.batch / request.layout.micro_batch;
    WorkerRecord record;
    struct Cancelled {};
    try {
        ModelExecutor<float> model(request.model, options, singleDevice(device, request.layout));
        WorkerContext c;
        c.request = &request;
        c.source = &source;
        c.shard = &model;
        c.device = &device;
        c.micro_batches = m.micro_batches;
        c.checkpoint = [cancel] {
            if (cancel && cancel->load(std::memory_order_relaxed))
                throw Cancelled{};
        };
        c.on_step = &onStep;
        try {
            trainWorker(c, record);
        } catch (const Cancelled&) {
            m.cancelled = true;
        } catch (const DeviceOutOfMemory&) {
            throw;
        } catch (const TrainingFault& e) {  // a non-finite loss or gradient norm, divergence
            m.error = RunError{device.id(), e.what(), e.kind()};
        } catch (const std::runtime_error& e) {
            m.error = RunError{device.id(), e.what(), RunFaultKind::Other};
        }
        if (request.keep_parameters && !m.error) {
            m.final_parameters.assign(size_t(m.parameters), 0.0f);
            model.exportParameters(m.final_parameters.data());
        }
        m.moe_tokens_per_expert = model.tokensPerExpert();
        m.moe_dropped_copies = model.droppedCopies();
    } catch (const DeviceOutOfMemory& e) {
        m.error = RunError{device.id(), e.what(), RunFaultKind::OutOfMemory};
    }
    for (size_t k = 0; k < record.device_s.size(); ++k)
        m.steps.push_back(StepRecord{int(k) + 1, record.loss[k], record.grad_norm[k], record.device_s[k], record.wall_s[k],
                                     k < record.mtp_loss.size() ? record.mtp_loss[k] : 0.0});
    m.devices.push_back(snapshot(device, m.steps));
    m.devices.back().memory_resident_bytes = record.resident;
    m.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
}

} // namespace shardscope::engine
