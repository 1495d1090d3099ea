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

namespace {

DeviceMeasurement snapshot(const EmulatedDevice& d, const std::vector<StepRecord>& steps)
{
    DeviceMeasurement m;
    m.id = d.id();
    m.profile = d.profile();
    m.threads = d.threads();
    for (int c = 0; c < kMemoryCategories; ++c)
        m.memory_peak_bytes[size_t(c)] = d.allocator().peakBytes(MemoryCategory(c));
    m.memory_peak_total_bytes = d.allocator().peakTotalBytes();
    m.counters = d.counters();
    for (const char* kind : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "send_recv"})
        m.comm_bytes[kind] = 0;
    for (const StepRecord& s : steps) {
        m.device_step_time_s += s.device_seconds;
        m.wall_step_time_s += s.wall_seconds;
    }
    if (!steps.empty()) {
        m.device_step_time_s /= double(steps.size());
        m.wall_step_time_s /= double(steps.size());
    }
    return m;
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
    } catch (const DeviceOutOfMemory& e) {
        m.error = RunError{device.id(), e.what()};
        m.devices.push_back(snapshot(device, m.steps));
    }
    m.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
}

} // namespace shardscope::engine
