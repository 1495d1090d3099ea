// runTraining: validate, build the model on the device, step, measure; device
// failures (out of memory, non-finite loss) end the run with Measurement::error.
#include "Trainer.h"

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
    const Layout& l = r.layout;
    FieldErrors le = validate(l, "layout");
    if (!le.empty() || !e.empty()) {
        e.insert(e.end(), le.begin(), le.end());
        return e;  // the rules below divide by these fields
    }
    auto add = [&](const char* field, const std::string& message) { e.push_back({std::string("layout.") + field, message}); };
    auto s = [](auto v) { return std::to_string(v); };
    if (l.cp != 1)
        add("cp", "context parallelism is not executed by the engine (cp must be 1)");
    if (l.schedule == PipelineSchedule::Interleaved)
        add("schedule", "the engine executes gpipe and 1f1b (interleaved is planned only)");
    if (l.offload != Offload::None)
        add("offload", "the engine does not emulate offload");
    if (r.model.heads % l.tp != 0)
        add("tp", s(l.tp) + " does not divide heads " + s(r.model.heads));
    if (r.model.vocab % l.tp != 0)
        add("tp", s(l.tp) + " does not divide vocab " + s(r.model.vocab) + " (vocab-parallel embedding)");
    if (r.model.layers % l.pp != 0)
        add("pp", s(l.pp) + " does not divide the " + s(r.model.layers) + " layers");
    const std::int64_t perStep = std::int64_t(l.dp) * l.micro_batch;
    if (r.batch % perStep != 0)
        add("mb", "dp x mb = " + s(perStep) + " does not divide the batch " + s(r.batch));
    if (l.sequence_parallel && (std::int64_t(l.micro_batch) * r.model.seq) % l.tp != 0)
        add("sp", "tp " + s(l.tp) + " does not divide the micro-batch's " + s(l.micro_batch * r.model.seq) + " tokens");
    if (l.devices() > 1 && r.precision != PrecisionMode::FP32)
        e.push_back({"precision", "the emulated cluster trains in fp32 only"});
    if (l.devices() > 1) {
        if (!(r.links.intra_bytes_per_second > 0))
            e.push_back({"links", "the intra-node link bandwidth must be positive"});
        const int nodeDevices = r.links.node_devices > 0 ? r.links.node_devices : int(l.devices());
        if (nodeDevices < l.devices() && !(r.links.inter_bytes_per_second > 0))
            e.push_back({"links", "the devices span several nodes: the inter-node bandwidth must be positive"});
    }
    return e;
}

std::unique_ptr<TokenSource> makeTokenSource(const TrainRequest& r)
{
    if (r.data == "synthetic")
        return std::make_unique<MarkovSource>(r.model.vocab, r.seed);
    return std::make_unique<ByteFileSource>(r.data, r.seed);
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
    for (FieldError& f : source.check(request.model.vocab, request.model.seq))
        errors.push_back(f);
    if (!errors.empty())
        throw InputError(errors);

    const auto start = Clock::now();
    Measurement m;
    m.request = request;
    m.parameters = parameterCount(request.model);
    m.data_description = source.description();
    m.entropy_nats_per_token = source.entropyNatsPerToken();
    device.resetCounters();
    device.allocator().resetPeaks();

    try {
        ModelOptions options;
        options.batch = request.batch;
        options.precision = request.precision;
        options.recompute = request.recompute;
        options.seed = request.seed;
        GptModel<float> model(request.model, options, device);

        const size_t n = size_t(request.batch) * size_t(request.model.seq);
        std::vector<int> inputs(n), targets(n);
        for (int step = 1; step <= request.steps; ++step) {
            if (cancel && cancel->load(std::memory_order_relaxed)) {
                m.cancelled = true;
                break;
            }
            const auto t0 = Clock::now();
            const double d0 = device.clockSeconds();
            source.batch(step - 1, request.batch, request.model.seq, inputs.data(), targets.data());
            StepRecord r;
            r.step = step;
            r.loss = model.forward(inputs.data(), targets.data());
            model.zeroGrad();
            model.backward();
            r.grad_norm = model.update(request.optimizer, request.grad_clip, step);
            r.device_seconds = device.clockSeconds() - d0;
            r.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            m.steps.push_back(r);
            if (onStep)
                onStep(r);
            if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
                m.error = RunError{device.id(), device.label() + ": step " + std::to_string(step) +
                                                    ": the loss or the gradient norm is not finite (loss " +
                                                    std::to_string(r.loss) + ", gradient norm " +
                                                    std::to_string(r.grad_norm) + ")"};
                break;
            }
        }
        m.devices.push_back(snapshot(device, m.steps));
        if (request.keep_parameters)
            m.final_parameters.assign(model.params(), model.params() + model.parameterCount());
    } catch (const DeviceOutOfMemory& e) {
        m.error = RunError{device.id(), e.what()};
        m.devices.push_back(snapshot(device, m.steps));
    }
    m.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
}

} // namespace shardscope::engine
