// The worker's step loop; see TrainingLoop.h.
#include "TrainingLoop.h"

#include "RunFault.h"
#include "MaskedLm.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

namespace shardscope::engine {

using Clock = std::chrono::steady_clock;

std::vector<PipelineOp> pipelineOrder(PipelineSchedule schedule, int p, int s, int m, int v, int extra_warmup)
{
    std::vector<PipelineOp> order;
    // Megatron-LM adds the combined schedule's extra warm-up forward in the interleaved schedule
    // only (and at pp = 1, where it does not pipeline): core's layout rules refuse the rest.
    if (extra_warmup > 0 && p > 1 && schedule != PipelineSchedule::Interleaved)
        throw std::invalid_argument("an extra warm-up forward (ep_comm_overlap) at pp = " + std::to_string(p) +
                                    " needs the interleaved schedule");
    if (schedule == PipelineSchedule::Interleaved) {
        // Megatron-LM, megatron/core/pipeline_parallel/schedules.py at commit
        // d98e8a64ddf34856e74b24714e3bedb2f5a39553, forward_backward_pipelining_with_interleaving
        // with microbatch_group_size_per_vp_stage = p (its default): get_schedule_table maps
        // virtual micro-batch k to micro-batch (k / (p v)) p + k % p of chunk (k / p) % v;
        // get_model_chunk_id(k, forward=False) walks the chunks in reverse for backward k;
        // get_pp_rank_microbatches: (p - s - 1) * 2 + (v - 1) * p warm-up forwards, all m v of
        // them when that reaches m v; the steady state runs forward k + warm-up, then
        // backward k; the cool-down the remaining backwards. A final group smaller than p is
        // refused there (m % p == 0 with groups of p).
        if (p < 1 || v < 1 || m % p != 0)
            throw std::invalid_argument("interleaved 1F1B needs the " + std::to_string(m) +
                                        " micro-batches to be a multiple of the " + std::to_string(p) + " stages");
        const int total = m * v;
        auto forwardOp = [&](int k) { return PipelineOp{(k / (p * v)) * p + k % p, false, (k / p) % v}; };
        auto backwardOp = [&](int k) { return PipelineOp{(k / (p * v)) * p + k % p, true, v - 1 - (k / p) % v}; };
        const int warmup = std::min((p - s - 1) * 2 + (v - 1) * p + extra_warmup, total);
        int f = 0, b = 0;
        for (; f < warmup; ++f)
            order.push_back(forwardOp(f));
        while (f < total) {
            order.push_back(forwardOp(f++));
            order.push_back(backwardOp(b++));
        }
        while (b < total)
            order.push_back(backwardOp(b++));
        return order;
    }
    if (schedule == PipelineSchedule::GPipe && extra_warmup == 0) {
        for (int i = 0; i < m; ++i)
            order.push_back({i, false});
        for (int i = 0; i < m; ++i)
            order.push_back({i, true});
        return order;
    }
    // (At pp = 1 the combined schedule is this order whatever the schedule's name: Megatron-LM
    // does not pipeline one stage.)
    const int warmup = std::min(p - s - 1 + extra_warmup, m);
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

void trainWorker(const WorkerContext& c, WorkerRecord& rec)
{
    const TrainRequest& request = *c.request;
    const Layout& layout = request.layout;
    ModelExecutor<float>& shard = *c.shard;
    EmulatedDevice& dev = *c.device;
    const MeshPosition& pos = c.position;
    const int B = request.batch, T = request.model.seq;
    const int perReplica = B / layout.dp;
    const int chunks = layout.schedule == PipelineSchedule::Interleaved ? layout.virtual_stages : 1;
    const std::vector<PipelineOp> order =
        pipelineOrder(layout.schedule, layout.pp, pos.pp, c.micro_batches, chunks, layout.ep_comm_overlap ? 1 : 0);
    // This replica's rows of the global batch only: dp replicas drawing all B rows each
    // made the data quadratic in dp (4,096 replicas drew 16.8M sequences a step). The masked
    // LM's next-sentence pairs also read the row after the replica's last: one more row.
    const bool mlm = request.model.masked_lm;
    std::vector<int> inputs(size_t(perReplica + (mlm ? 1 : 0)) * T), targets(inputs.size());
    PretrainingBatch masked;  // the masked-LM objective's batch (MaskedLm.h), built from the same rows
    auto notFinite = [&](int step, const std::string& what) {
        return TrainingFault(RunFaultKind::NotFinite,
                             dev.label() + ": step " + std::to_string(step) + ", " + what + " is not finite");
    };
    DivergenceGuard divergence(request.divergence_factor, request.model.vocab);
    for (int step = 1; step <= request.steps; ++step) {
        if (c.checkpoint)
            c.checkpoint();
        if (c.fault.device == dev.id() && c.fault.step == step)
            shard.injectNaN();
        const auto t0 = Clock::now();
        const double c0 = dev.clockSeconds();
        // The global batch's rows [dp * B/dp, (dp + 1) * B/dp): the same rows one device would train.
        const int first = pos.dp * perReplica;
        c.source->rows(step - 1, first, perReplica, T, inputs.data(), targets.data());
        if (mlm) {
            const int following = (first + perReplica) % B;
            c.source->rows(step - 1, following, 1, T, inputs.data() + size_t(perReplica) * T,
                           targets.data() + size_t(perReplica) * T);
            makePretrainingBatch(request.model, request.seed, step - 1, B, first, perReplica, inputs.data(),
                                 inputs.data() + size_t(perReplica) * T, masked);
        }
        const int* in = mlm ? masked.inputs.data() : inputs.data();
        const int* tg = mlm ? masked.targets.data() : targets.data();
        double lossSum = 0, mtpSum = 0;
        for (const PipelineOp& op : order) {
            const size_t row = size_t(op.micro) * layout.micro_batch;  // within this replica's rows
            if (op.backward) {
                shard.backward(op.micro, op.chunk);
                continue;
            }
            const int* types = mlm ? masked.token_types.data() + row * T : nullptr;
            const int* nsp = mlm && request.model.pooler ? masked.next_sentence.data() + row : nullptr;
            const double l = shard.forward(op.micro, in + row * T, tg + row * T, op.chunk, types, nsp);
            if (!std::isfinite(l))
                throw notFinite(step, "micro-batch " + std::to_string(op.micro) + ": the loss (" + std::to_string(l) + ")");
            lossSum += l;
            mtpSum += shard.lastMtpLoss();
        }
        // (Multi-token prediction: its loss too, a third scalar, as Megatron-LM all-reduces its MTP
        // losses for the log: MTPLossLoggingHelper.reduce_metrics_in_tracker @ d98e8a64.)
        const bool mtp = request.model.mtp.enabled();
        const bool counts = shard.lastStage() && pos.tp == 0;
        double reduced[3] = {shard.reduceGradients(), counts ? lossSum : 0.0, counts ? mtpSum : 0.0};
        if (c.world)
            c.world->allReduce(dev.id(), reduced, mtp ? 3 : 2);
        const double norm = std::sqrt(reduced[0]);
        if (!std::isfinite(norm))
            throw notFinite(step, "the gradient norm");
        const double scale = (request.grad_clip > 0 && norm > request.grad_clip) ? request.grad_clip / (norm + 1e-6) : 1.0;
        shard.update(request.optimizer, scale, step);
        rec.device_s.push_back(dev.clockSeconds() - c0);
        rec.wall_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        rec.loss.push_back(reduced[1] / double(lossTokens(request.model, B)));
        rec.grad_norm.push_back(norm);
        if (mtp)  // the mean over the step's micro-batches (every replica's) of each one's MTP loss
            rec.mtp_loss.push_back(reduced[2] / (double(B) / layout.micro_batch));
        if (c.on_step && *c.on_step)
            (*c.on_step)(StepRecord{step, rec.loss.back(), norm, rec.device_s.back(), rec.wall_s.back(),
                                    mtp ? rec.mtp_loss.back() : 0.0});
        divergence.check(step, rec.loss.back());  // after the step is recorded: the measurement shows it
    }
    for (int k = 0; k < kMemoryCategories; ++k)
        rec.resident[size_t(k)] = dev.allocator().currentBytes(MemoryCategory(k));
}

} // namespace shardscope::engine
