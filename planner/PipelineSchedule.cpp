#include "PipelineSchedule.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace shardscope {

namespace {

struct OpId {
    int micro_batch;
    int chunk;
    bool backward;
};

// Calls emit(OpId) for the ops of device `s` in the order it runs them.
template <class F>
void forEachOp(PipelineSchedule schedule, int p, int s, int m, int v, F&& emit)
{
    switch (schedule) {
    case PipelineSchedule::GPipe:
        for (int i = 0; i < m; ++i)
            emit({i, 0, false});
        for (int i = 0; i < m; ++i)
            emit({i, 0, true});
        break;
    case PipelineSchedule::OneFOneB: {
        const int warmup = std::min(p - s - 1, m);
        int f = 0, b = 0;
        for (; f < warmup; ++f)
            emit({f, 0, false});
        while (f < m) {
            emit({f++, 0, false});
            emit({b++, 0, true});
        }
        while (b < m)
            emit({b++, 0, true});
        break;
    }
    case PipelineSchedule::Interleaved: {
        // Megatron-LM's order (megatron/core/pipeline_parallel/schedules.py at commit
        // d98e8a64ddf34856e74b24714e3bedb2f5a39553: get_schedule_table with
        // microbatch_group_size_per_vp_stage = p, get_pp_rank_microbatches' warm-up):
        // forward op k runs chunk (k / p) % v of micro-batch (k / (p v)) p + k % p;
        // backward ops walk the chunks in reverse.
        const int total = m * v;
        auto forwardOp = [&](int k) { return OpId{(k / (p * v)) * p + k % p, (k / p) % v, false}; };
        auto backwardOp = [&](int k) { return OpId{(k / (p * v)) * p + k % p, v - 1 - (k / p) % v, true}; };
        const int warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
        int f = 0, b = 0;
        for (; f < warmup; ++f)
            emit(forwardOp(f));
        while (f < total) {
            emit(forwardOp(f++));
            emit(backwardOp(b++));
        }
        while (b < total)
            emit(backwardOp(b++));
        break;
    }
    }
}

// The order in which device `s` runs its ops.
std::vector<OpId> deviceOrder(PipelineSchedule schedule, int p, int s, int m, int v)
{
    std::vector<OpId> order;
    order.reserve(size_t(2 * m * v));
    forEachOp(schedule, p, s, m, v, [&](const OpId& op) { order.push_back(op); });
    return order;
}

} // namespace

PipelineTimeline simulatePipeline(PipelineSchedule schedule, int p, int m, int v, double forward_s,
                                  double backward_s)
{
    if (schedule != PipelineSchedule::Interleaved)
        v = 1;
    if (p < 1 || m < 1 || v < 1)
        throw std::invalid_argument("pipeline: stages, micro-batches and chunks must be positive");
    if (schedule == PipelineSchedule::Interleaved && m % p != 0)
        throw std::invalid_argument("interleaved 1F1B needs the " + std::to_string(m) +
                                    " micro-batches to be a multiple of the " + std::to_string(p) + " stages");
    PipelineTimeline t;
    t.stages = p;
    t.micro_batches = m;
    t.chunks = v;
    const double fwd = forward_s / v, bwd = backward_s / v;
    const int virtualStages = p * v;

    // end time of forward / backward of (virtual stage, micro-batch); < 0 = not done yet
    std::vector<double> fwdEnd(size_t(virtualStages) * size_t(m), -1), bwdEnd(size_t(virtualStages) * size_t(m), -1);
    auto at = [m](int vs, int i) { return size_t(vs) * size_t(m) + size_t(i); };

    std::vector<std::vector<OpId>> orders(static_cast<size_t>(p));
    for (int s = 0; s < p; ++s)
        orders[size_t(s)] = deviceOrder(schedule, p, s, m, v);
    std::vector<size_t> next(size_t(p), 0);
    std::vector<double> free(size_t(p), 0);
    size_t remaining = size_t(2) * size_t(m) * size_t(v) * size_t(p);
    t.ops.reserve(remaining);

    while (remaining > 0) {
        bool progressed = false;
        for (int s = 0; s < p; ++s) {
            // Run every op of this device whose input is ready, in order.
            while (next[size_t(s)] < orders[size_t(s)].size()) {
                const OpId op = orders[size_t(s)][next[size_t(s)]];
                const int vs = op.chunk * p + s;  // virtual stage
                double ready = 0;
                if (!op.backward) {
                    if (vs > 0) {
                        ready = fwdEnd[at(vs - 1, op.micro_batch)];
                        if (ready < 0)
                            break;
                    }
                } else {
                    ready = vs + 1 < virtualStages ? bwdEnd[at(vs + 1, op.micro_batch)] : fwdEnd[at(vs, op.micro_batch)];
                    if (ready < 0)
                        break;
                }
                const double start = std::max(ready, free[size_t(s)]);
                const double end = start + (op.backward ? bwd : fwd);
                (op.backward ? bwdEnd : fwdEnd)[at(vs, op.micro_batch)] = end;
                free[size_t(s)] = end;
                t.ops.push_back({s, op.micro_batch, op.chunk, op.backward, start, end});
                ++next[size_t(s)];
                --remaining;
                progressed = true;
            }
        }
        if (!progressed)
            throw std::logic_error("pipeline schedule deadlocked");  // a bug in deviceOrder, never user input
    }
    for (int s = 0; s < p; ++s)
        t.makespan_s = std::max(t.makespan_s, free[size_t(s)]);
    t.busy_s = m * (forward_s + backward_s);
    return t;
}

double peakInFlightBytes(PipelineSchedule schedule, int p, int stage, int m, const std::vector<double>& chunk_bytes)
{
    return peakInFlightBytes(schedule, p, stage, m, chunk_bytes.data(), int(chunk_bytes.size()));
}

namespace {

void checkPeakArguments(PipelineSchedule schedule, int p, int stage, int m, int v, int chunks)
{
    if (p < 1 || m < 1 || v < 1 || stage < 0 || stage >= p || chunks < 1)
        throw std::invalid_argument("pipeline: stages, micro-batches and chunks must be positive, the stage one of them");
    if (schedule == PipelineSchedule::Interleaved && m % p != 0)
        throw std::invalid_argument("interleaved 1F1B needs the " + std::to_string(m) +
                                    " micro-batches to be a multiple of the " + std::to_string(p) + " stages");
}

} // namespace

// Without walking the 2 m v ops (the search prices this for every stage of every layout): the
// three schedules are forEachOp's W forwards, then (forward, backward) pairs, then backwards.
// The peak is right after a forward: after the warm-up, S_F(W), or in the pairs, after the
// pair k's forward, D(k) = S_F(W + k + 1) - S_B(k), S_F(n) / S_B(n) the bytes of the first n
// forward / backward ops. The op sequences repeat every P = p v ops (interleaved: p
// micro-batches over all v chunks; otherwise P = 1), adding the same bytes to both sums, so
// D(k + P) = D(k): the largest D is among the first P pairs. Sums of the same values in the
// same order as the walk's, so the result is the walk's (peakInFlightBytesByWalk) exactly
// when the bytes are whole numbers, as they are here.
double peakInFlightBytes(PipelineSchedule schedule, int p, int stage, int m, const double* chunk_bytes, int chunks,
                         int extra_warmup)
{
    const int v = schedule == PipelineSchedule::Interleaved ? chunks : 1;
    checkPeakArguments(schedule, p, stage, m, v, chunks);
    const std::int64_t total = std::int64_t(m) * v;
    if (schedule == PipelineSchedule::GPipe)
        return double(m) * chunk_bytes[0];
    const std::int64_t warmup = schedule == PipelineSchedule::OneFOneB
                                    ? std::min<std::int64_t>(p - stage - 1 + std::max(0, extra_warmup), m)
                                    : std::min<std::int64_t>(std::int64_t(p - stage - 1) * 2 + std::int64_t(v - 1) * p +
                                                                 std::max(0, extra_warmup),
                                                             total);
    const std::int64_t period = schedule == PipelineSchedule::Interleaved ? std::int64_t(p) * v : 1;
    double perPeriod = 0;  // the bytes one period adds to either sum
    for (int c = 0; c < v; ++c)
        perPeriod += chunk_bytes[c];
    perPeriod *= double(period / v);
    // Forward op k runs chunk (k / p) % v, backward op k chunk v - 1 - (k / p) % v (interleaved).
    auto sum = [&](std::int64_t n, bool backward) {
        if (schedule != PipelineSchedule::Interleaved)
            return double(n) * chunk_bytes[0];
        const std::int64_t rem = n % period;
        double s = double(n / period) * perPeriod;
        for (std::int64_t j = 0; j < rem / p; ++j)
            s += double(p) * chunk_bytes[backward ? v - 1 - j : j];
        const std::int64_t last = rem / p;
        if (rem % p)
            s += double(rem % p) * chunk_bytes[backward ? v - 1 - last : last];
        return s;
    };
    double peak = warmup > 0 ? sum(warmup, false) : 0.0;
    const std::int64_t pairs = std::min(total - warmup, period);
    for (std::int64_t k = 0; k < pairs; ++k)
        peak = std::max(peak, sum(warmup + k + 1, false) - sum(k, true));
    return peak;
}

double peakInFlightBytesByWalk(PipelineSchedule schedule, int p, int stage, int m, const double* chunk_bytes,
                               int chunks)
{
    const int v = schedule == PipelineSchedule::Interleaved ? chunks : 1;
    checkPeakArguments(schedule, p, stage, m, v, chunks);
    // Held from a forward's start to its backward's end: the peak is right after a forward.
    double held = 0, peak = 0;
    forEachOp(schedule, p, stage, m, v, [&](const OpId& op) {
        const double bytes = chunk_bytes[op.chunk];
        if (op.backward) {
            held -= bytes;
        } else {
            held += bytes;
            peak = std::max(peak, held);
        }
    });
    return peak;
}

} // namespace shardscope
