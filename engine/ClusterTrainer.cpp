// runClusterTraining: the layout executed on an EmulatedCluster; see Trainer.h.
// Each worker runs its stage's pipeline schedule over its replica's micro-batches,
// reduces gradients, joins the step's one world all-reduce (squared gradient norm
// and loss sum, so every device clips with the same global norm) and updates.
#include "Cluster.h"
#include "GptShard.h"
#include "Trainer.h"

#include <chrono>
#include <cmath>

namespace shardscope::engine {

using Clock = std::chrono::steady_clock;

namespace {

struct PipelineOp {
    int micro;
    bool backward;
};

// The op order of stage s of p with m micro-batches, by the same rules as the
// planner's simulated schedule (planner/PipelineSchedule.cpp): GPipe runs all
// forwards then all backwards; 1F1B runs p - s - 1 warm-up forwards, then one
// forward one backward, then the remaining backwards (PipeDream-Flush).
std::vector<PipelineOp> pipelineOrder(PipelineSchedule schedule, int p, int s, int m)
{
    std::vector<PipelineOp> order;
    if (schedule == PipelineSchedule::GPipe) {
        for (int i = 0; i < m; ++i)
            order.push_back({i, false});
        for (int i = 0; i < m; ++i)
            order.push_back({i, true});
        return order;
    }
    const int warmup = std::min(p - s - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f)
        order.push_back({f, false});
    while (f < m) {
        order.push_back({f++, false});
        order.push_back({b++, true});
    }
    while (b < m)
        order.push_back({b++, true});
    return order;
}

// What one worker records; written by its own thread only, read after the join.
struct WorkerRecord {
    std::vector<double> device_s, wall_s, loss, grad_norm;
    std::array<double, kMemoryCategories> resident{};
};

} // namespace

Measurement runClusterTraining(const TrainRequest& request, const TokenSource& source, const DeviceProfile& profile,
                               const StepCallback& onStep, const std::atomic<bool>* cancel,
                               const FaultInjection& fault)
{
    FieldErrors errors = validate(request);
    for (FieldError& f : source.check(request.model.vocab, request.model.seq))
        errors.push_back(f);
    if (!errors.empty())
        throw InputError(errors);

    const auto start = Clock::now();
    const Layout& layout = request.layout;
    Measurement m;
    m.request = request;
    m.parameters = parameterCount(request.model);
    m.data_description = source.description();
    m.entropy_nats_per_token = source.entropyNatsPerToken();
    const int B = request.batch, T = request.model.seq;
    const int perReplica = B / layout.dp;
    const int micros = perReplica / layout.micro_batch;
    m.micro_batches = micros;

    EmulatedCluster cluster(layout, profile, request.links, cancel);
    const int n = cluster.size();
    std::vector<std::unique_ptr<GptShard>> shards(static_cast<size_t>(n));
    std::vector<WorkerRecord> records(static_cast<size_t>(n));

    ShardOptions options;
    options.micro_batch = layout.micro_batch;
    options.global_tokens = std::int64_t(B) * T;
    options.recompute = layout.recompute;
    options.seed = request.seed;
    options.bucket_bytes = request.bucket_bytes;

    auto work = [&](int id) {
        EmulatedDevice& dev = cluster.device(id);
        WorkerRecord& rec = records[size_t(id)];
        const MeshPosition& pos = cluster.position(id);
        shards[size_t(id)] = std::make_unique<GptShard>(request.model, options, cluster, id);
        GptShard& shard = *shards[size_t(id)];
        CommGroup& world = *cluster.groups(id).world;
        const std::vector<PipelineOp> order = pipelineOrder(layout.schedule, layout.pp, pos.pp, micros);
        std::vector<int> inputs(size_t(B) * T), targets(size_t(B) * T);
        for (int step = 1; step <= request.steps; ++step) {
            cluster.communicator().checkpoint();  // a cancel stops every worker here or in a collective
            if (fault.device == id && fault.step == step)
                shard.injectNaN();
            const auto t0 = Clock::now();
            const double c0 = dev.clockSeconds();
            // The global batch, as on one device; this replica takes rows [dp * B/dp, ...).
            source.batch(step - 1, B, T, inputs.data(), targets.data());
            double lossSum = 0;
            for (const PipelineOp& op : order) {
                const size_t row = size_t(pos.dp) * perReplica + size_t(op.micro) * layout.micro_batch;
                if (op.backward) {
                    shard.backward(op.micro);
                    continue;
                }
                const double l = shard.forward(op.micro, inputs.data() + row * T, targets.data() + row * T);
                if (!std::isfinite(l))
                    throw std::runtime_error(dev.label() + ": step " + std::to_string(step) + ", micro-batch " +
                                             std::to_string(op.micro) + ": the loss is not finite (" +
                                             std::to_string(l) + ")");
                lossSum += l;
            }
            double reduced[2] = {shard.reduceGradients(), shard.lastStage() && pos.tp == 0 ? lossSum : 0.0};
            world.allReduce(id, reduced, 2);
            const double norm = std::sqrt(reduced[0]);
            if (!std::isfinite(norm))
                throw std::runtime_error(dev.label() + ": step " + std::to_string(step) +
                                         ": the gradient norm is not finite");
            const double scale = (request.grad_clip > 0 && norm > request.grad_clip)
                                     ? request.grad_clip / (norm + 1e-6) : 1.0;
            shard.update(request.optimizer, scale, step);
            rec.device_s.push_back(dev.clockSeconds() - c0);
            rec.wall_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            rec.loss.push_back(reduced[1] / double(std::int64_t(B) * T));
            rec.grad_norm.push_back(norm);
            if (id == 0 && onStep)
                onStep(StepRecord{step, rec.loss.back(), norm, rec.device_s.back(), rec.wall_s.back()});
        }
        for (int c = 0; c < kMemoryCategories; ++c)
            rec.resident[size_t(c)] = dev.allocator().currentBytes(MemoryCategory(c));
    };
    const std::optional<WorkerFailure> failure = cluster.run(work);
    if (failure)
        m.error = RunError{failure->device, failure->message};
    m.cancelled = cluster.cancelled();

    // Steps every device completed; the step's time is the slowest device's.
    size_t done = records[0].loss.size();
    for (const WorkerRecord& r : records)
        done = std::min(done, r.device_s.size());
    for (size_t k = 0; k < done; ++k) {
        StepRecord s{int(k) + 1, records[0].loss[k], records[0].grad_norm[k], 0, 0};
        for (const WorkerRecord& r : records) {
            s.device_seconds = std::max(s.device_seconds, r.device_s[k]);
            s.wall_seconds = std::max(s.wall_seconds, r.wall_s[k]);
        }
        m.steps.push_back(s);
    }
    for (int id = 0; id < n; ++id) {
        const WorkerRecord& r = records[size_t(id)];
        DeviceMeasurement d = measureDevice(cluster.device(id), r.device_s, r.wall_s);
        d.memory_resident_bytes = r.resident;
        const MeshPosition& p = cluster.position(id);
        d.tp_rank = p.tp;
        d.dp_rank = p.dp;
        d.pp_rank = p.pp;
        d.node = p.node;
        m.devices.push_back(d);
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
