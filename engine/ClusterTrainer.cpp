// runClusterTraining: the layout executed on an EmulatedCluster; see Trainer.h.
// Each worker runs the step loop of TrainingLoop.h on its own ModelExecutor.
#include "Cluster.h"
#include "MaskedLm.h"
#include "MeasurementWire.h"
#include "ModelExecutor.h"
#include "Trainer.h"
#include "TrainingLoop.h"

#include <chrono>
#include <cmath>

namespace shardscope::engine {

using Clock = std::chrono::steady_clock;

Measurement runClusterTraining(const TrainRequest& request, const TokenSource& source, const DeviceProfile& profile,
                               const StepCallback& onStep, const std::atomic<bool>* cancel,
                               const FaultInjection& fault)
{
    FieldErrors errors = validate(request);
    for (FieldError& f : source.check(dataVocabulary(request.model), request.model.seq))
        errors.push_back(f);
    if (!errors.empty())
        throw InputError(errors);

    const auto start = Clock::now();
    const Layout& layout = request.layout;
    Measurement m;
    m.request = request;
    m.parameters = parameterCount(request.model);
    m.data_description = source.description();
    // The source's entropy floors next-token prediction, not the masked-LM objective.
    if (!request.model.masked_lm)
        m.entropy_nats_per_token = source.entropyNatsPerToken();
    const int B = request.batch;
    const int perReplica = B / layout.dp;
    const int micros = perReplica / layout.micro_batch;
    m.micro_batches = micros;

    EmulatedCluster cluster(layout, profile, request.links, cancel, request.backend);
    if (request.keep_parameters && cluster.communicator().processCount() > 1)
        throw std::invalid_argument("keep_parameters: the final parameters are not gathered across MPI ranks");
    const int n = cluster.size();
    std::vector<std::unique_ptr<ModelExecutor<float>>> shards(static_cast<size_t>(n));
    std::vector<WorkerRecord> records(static_cast<size_t>(n));

    ExecutorOptions options;
    options.micro_batch = layout.micro_batch;
    options.global_tokens = lossTokens(request.model, B);
    options.precision = request.precision;
    options.fp32_gradients = request.fp32_gradients;
    options.seed = request.seed;
    options.bucket_bytes = request.bucket_bytes;
    const std::vector<float> initial = initialParameters<float>(request.model, options);  // once, for every device
    options.initial_parameters = &initial;

    auto work = [&](int id) {
        shards[size_t(id)] = std::make_unique<ModelExecutor<float>>(request.model, options, placementIn(cluster, id));
        WorkerContext c;
        c.request = &request;
        c.source = &source;
        c.shard = shards[size_t(id)].get();
        c.device = &cluster.device(id);
        c.position = cluster.position(id);
        c.world = cluster.groups(id).world;
        c.micro_batches = micros;
        c.checkpoint = [&cluster] { cluster.communicator().checkpoint(); };  // a cancel stops every worker here or in a collective
        c.fault = fault;
        c.on_step = id == 0 ? &onStep : nullptr;
        trainWorker(c, records[size_t(id)]);
    };
    const std::optional<WorkerFailure> failure = cluster.run(work);
    if (failure)
        m.error = RunError{failure->device, failure->message, failure->kind};
    m.cancelled = cluster.cancelled();

    // This process's devices, then (MPI) every rank's: each rank assembles the same measurement.
    std::vector<DeviceReport> reports;
    for (int id = 0; id < n; ++id) {
        if (!cluster.runsDevice(id))
            continue;
        const WorkerRecord& r = records[size_t(id)];
        DeviceReport rep;
        DeviceMeasurement& d = rep.device;
        d = measureDevice(cluster.device(id), r.device_s, r.wall_s);
        d.memory_resident_bytes = r.resident;
        const MeshPosition& p = cluster.position(id);
        d.tp_rank = p.tp;
        d.cp_rank = p.cp;
        d.dp_rank = p.dp;
        d.pp_rank = p.pp;
        d.node = p.node;
        rep.loss = r.loss;
        rep.grad_norm = r.grad_norm;
        rep.mtp_loss = r.mtp_loss;
        if (const ModelExecutor<float>* s = shards[size_t(id)].get()) {
            d.moe_peak_copies = double(s->moePeakCopies());
            d.moe_step_load = s->moeStepLoad();
            rep.tokens_per_expert = s->tokensPerExpert();
            rep.dropped_copies = s->droppedCopies();
        }
        reports.push_back(std::move(rep));
    }
    if (cluster.communicator().processCount() > 1) {
        std::vector<char> mine;
        for (const DeviceReport& r : reports)
            appendDeviceReport(mine, r);
        reports.clear();
        for (const std::vector<char>& theirs : cluster.communicator().allGatherBytes(mine))
            for (DeviceReport& r : readDeviceReports(theirs, profile))
                reports.push_back(std::move(r));  // rank order is device order
    }
    // Steps every device completed; the step's time is the slowest device's.
    size_t done = reports[0].loss.size();
    for (const DeviceReport& r : reports)
        done = std::min(done, r.device.device_step_times_s.size());
    for (size_t k = 0; k < done; ++k) {
        StepRecord s{int(k) + 1, reports[0].loss[k], reports[0].grad_norm[k], 0, 0,
                     k < reports[0].mtp_loss.size() ? reports[0].mtp_loss[k] : 0.0};
        for (const DeviceReport& r : reports) {
            s.device_seconds = std::max(s.device_seconds, r.device.device_step_times_s[k]);
            s.wall_seconds = std::max(s.wall_seconds, r.device.wall_step_times_s[k]);
        }
        m.steps.push_back(s);
    }
    for (const DeviceReport& r : reports) {
        m.devices.push_back(r.device);
        if (!r.tokens_per_expert.empty()) {  // every device routed its own tokens: the run's load is the sum
            m.moe_tokens_per_expert.resize(r.tokens_per_expert.size(), 0);
            for (size_t e = 0; e < m.moe_tokens_per_expert.size(); ++e)
                m.moe_tokens_per_expert[e] += r.tokens_per_expert[e];
            m.moe_dropped_copies += r.dropped_copies;
        }
    }
    if (request.keep_parameters && !m.error) {
        m.final_parameters.assign(size_t(m.parameters), 0.0f);
        for (const auto& s : shards)
            if (s)
                s->exportParameters(m.final_parameters.data());
    }
    shards.clear();  // the workers are joined: their device buffers go back from this thread
    m.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
}

} // namespace shardscope::engine
