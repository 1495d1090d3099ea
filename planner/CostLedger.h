// CostLedger: the cost model's figures as the sums of their named terms, and the collectives one
// device runs in a step, each with its dimension, kind, placement, bytes, calls and its time split
// into the exposed part (on the critical path) and the part hidden behind compute.
//
// CostModel::evaluate() adds every term through a TermBook: each time and memory figure of the
// Prediction is the book's sum of that figure's terms, so a figure is the sum of its terms by
// construction. The bytes by dimension and kind (Prediction::comm_bytes) are the sums of the
// reported stage's collectives (commBytesOf). The search keeps only the sums; CostModel::ledger()
// records the terms and collectives too (fixed capacity: no heap on either path). predict --json
// carries the recorded ledger under "ledger".
#pragma once

#include "Prediction.h"

#include <array>
#include <cstdint>
#include <stdexcept>

namespace shardscope {

// The Prediction figure a term adds to (figureKey: its key in predict --json).
enum class Figure : std::uint8_t {
    Compute, Recompute, TpComm, CpComm, PpComm, DpComm, EpComm, Bubble, Optimizer, Offload,  // time_s.*
    Weights, Gradients, OptimizerStates, Activations, Buffers, Reserve,             // memory_bytes.*
    HostActivations,  // memory_bytes.host_activations: in host memory, not in the device's total
};
inline constexpr int kFigureCount = int(Figure::HostActivations) + 1;
const char* figureKey(Figure figure);  // "time_s.compute", "memory_bytes.activations"
inline bool isTimeFigure(Figure figure) { return figure <= Figure::Offload; }

struct LedgerTerm {
    Figure figure;
    const char* name;     // static strings
    double value;         // seconds per step, or bytes per device
    const char* formula;
};

// The mesh dimension a collective runs over: tp (and a MoE layer's expert-tensor-parallel group),
// cp, pp, dp (with ZeRO: the shard group and the replicas across shard groups), ep (a MoE layer's
// token dispatch and combine), edp (the expert gradients' group, tp x cp x dp / (ep x etp)), the tied
// embedding's group of the first and last stage, or every device (the step's loss and
// gradient-norm scalars). The last three count as dp in CommBytes.
enum class CommDimension : std::uint8_t { Tp, Cp, Pp, Dp, Ep, ExpertDp, EmbeddingGroup, AllDevices };  // (commBytesOf indexes them)
enum class CommKind : std::uint8_t { AllReduce, ReduceScatter, AllGather, SendRecv, AllToAll };
// Whether the group sits inside one scale-up domain (a node's NVLink/NeuronLink, an NVL72 rack) or
// spans domains (its cross-domain steps over the node network).
enum class CommPlacement : std::uint8_t { IntraDomain, InterDomain };
const char* toString(CommDimension dimension);  // "tp", "cp", "pp", "dp", "ep", "edp", "embedding_group", "all_devices"
const char* toString(CommKind kind);            // "all_reduce", "reduce_scatter", "all_gather", "send_recv", "all_to_all"
const char* toString(CommPlacement placement);  // "intra_domain", "inter_domain"

// One collective of one device per step (an aggregate: the lists below leave unused slots unset).
struct Collective {
    CommDimension dimension;
    CommKind kind;
    CommPlacement placement;
    const char* what;   // what it moves (static string)
    double bytes;       // sent by the device per step (ring: (n - 1)/n of the buffer, all-reduce twice;
                        // all-to-all: the payload, own share included)
    double calls;       // collective calls per step
    double exposed_s;   // time on the step's critical path
    double hidden_s;    // time overlapped with compute (not in the step)
    double time_s() const { return exposed_s + hidden_s; }
};

// A fixed-capacity list (the evaluation fills it on the stack).
template <class T, int Capacity>
class FixedList {
public:
    void push(const T& item)
    {
        if (count_ == Capacity)
            throw std::length_error("cost ledger: more entries than its fixed capacity");
        items_[size_t(count_++)] = item;
    }
    const T* begin() const { return items_.data(); }
    const T* end() const { return items_.data() + count_; }
    T* begin() { return items_.data(); }
    T* end() { return items_.data() + count_; }
    int size() const { return count_; }

private:
    std::array<T, Capacity> items_;
    int count_ = 0;
};

// The collectives of one device of a stage in one step.
using StepCollectives = FixedList<Collective, 24>;

// Bytes by dimension and kind: the sums of the collectives' bytes (indexed sums: no branches on
// the search's path).
inline CommBytes commBytesOf(const StepCollectives& collectives)
{
    std::array<double, 8> byDimension{};  // CommDimension order
    std::array<double, 5> byKind{};       // CommKind order
    for (const Collective& c : collectives) {
        byDimension[size_t(c.dimension)] += c.bytes;
        byKind[size_t(c.kind)] += c.bytes;
    }
    CommBytes b;
    b.tp = byDimension[size_t(CommDimension::Tp)];
    b.cp = byDimension[size_t(CommDimension::Cp)];
    b.pp = byDimension[size_t(CommDimension::Pp)];
    b.ep = byDimension[size_t(CommDimension::Ep)];
    // The expert gradients', the embedding group's and every device's all-reduces count as
    // data-parallel traffic.
    b.dp = byDimension[size_t(CommDimension::Dp)] + byDimension[size_t(CommDimension::ExpertDp)] +
           byDimension[size_t(CommDimension::EmbeddingGroup)] + byDimension[size_t(CommDimension::AllDevices)];
    b.all_reduce = byKind[size_t(CommKind::AllReduce)];
    b.reduce_scatter = byKind[size_t(CommKind::ReduceScatter)];
    b.all_gather = byKind[size_t(CommKind::AllGather)];
    b.send_recv = byKind[size_t(CommKind::SendRecv)];
    b.all_to_all = byKind[size_t(CommKind::AllToAll)];
    return b;
}

struct CostLedger {
    FixedList<LedgerTerm, 64> terms;
    // The collectives of the stage whose bytes Prediction::comm_bytes reports (bytes_stage). The time
    // terms are those of the slowest stage (time_stage; dp_comm: of the stage holding the most
    // parameters, dp_stage), whose collectives these are when the stages coincide (always at pp = 1).
    StepCollectives collectives;
    int time_stage = 0, dp_stage = 0, bytes_stage = 0;

    double figure(Figure f) const  // the sum of its terms
    {
        double sum = 0;
        for (const LedgerTerm& t : terms)
            if (t.figure == f)
                sum += t.value;
        return sum;
    }
};

// Adds terms to their figures; with a ledger attached, records them too. The evaluation's only way
// to set a time or memory figure.
class TermBook {
public:
    explicit TermBook(CostLedger* ledger) : ledger_(ledger)
    {
        if (ledger_)
            *ledger_ = CostLedger{};  // a ledger passed again is filled afresh
    }
    void add(Figure figure, const char* name, double value, const char* formula)
    {
        sums_[size_t(figure)] += value;
        if (ledger_)
            ledger_->terms.push({figure, name, value, formula});
    }
    double sum(Figure figure) const { return sums_[size_t(figure)]; }

private:
    std::array<double, kFigureCount> sums_{};
    CostLedger* ledger_;
};

} // namespace shardscope
