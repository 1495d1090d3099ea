// ZeroShardShare: how many values of some marked parameters each member of a ZeRO shard group owns.
// A ZeRO/FSDP unit (a layer, the root) is one flat buffer of its parameters in module order; member k
// of a group of g owns [floor(n k / g), floor(n (k+1) / g)) of its n values (the engine's
// CommGroup::chunkBegin; Megatron-FSDP's uneven per-unit DTensor shards, docs/user-guide/features/
// megatron_fsdp.md @ d98e8a64: "non-uniform or un-even DTensor shards of a (flattened) group of
// parameters associated with an FSDP unit"). What a member holds of a parameter is then its slice of
// the parameter, which can be all of it, part of it or nothing: Megatron-LM all-reduces over tp the
// local slices of the sequence-parallel norms' gradients in one call (finalize_model_grads.py @
// d98e8a64, _allreduce_non_tensor_model_parallel_grads: grad._local_tensor under Megatron-FSDP), and
// so does the engine under ZeRO-2/3 (ModelExecutor::sumAcrossTensorAndPipeline): its bytes are the
// member's own share, not the mean.
// Plain C++ on the stack (the cost model's hot path): a unit of up to kMaxSegments runs, up to
// kMaxRanks members with a share; past that, overflowed() (the caller prices the mean).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace shardscope {

// One unit's buffer as consecutive runs of values, each marked or not.
class UnitLayout {
public:
    static constexpr int kMaxSegments = 16;
    void add(double values, bool marked)
    {
        if (values <= 0)
            return;
        if (count_ < kMaxSegments)
            segments_[size_t(count_)] = {std::int64_t(values + 0.5), marked};  // (> 0: llround's value, without the call)
        ++count_;
    }
    bool valid() const { return count_ <= kMaxSegments; }
    std::int64_t values() const
    {
        std::int64_t n = 0;
        for (int i = 0; i < count_ && i < kMaxSegments; ++i)
            n += segments_[size_t(i)].values;
        return n;
    }
    struct Segment {
        std::int64_t values = 0;
        bool marked = false;
    };
    const Segment* begin() const { return segments_.data(); }
    const Segment* end() const { return segments_.data() + (valid() ? count_ : 0); }

private:
    std::array<Segment, kMaxSegments> segments_{};
    int count_ = 0;
};

// The marked values each member owns, summed over units (each `copies` times: a stage's identical layers).
class MarkedShares {
public:
    static constexpr int kMaxRanks = 128;
    explicit MarkedShares(int members) : members_(members < 1 ? 1 : members) {}

    void addUnit(const UnitLayout& unit, double copies)
    {
        if (!unit.valid()) {
            overflow_ = true;
            return;
        }
        const std::int64_t n = unit.values(), g = members_;
        if (n == 0 || copies <= 0)
            return;
        std::int64_t at = 0;
        for (const UnitLayout::Segment& s : unit) {
            if (s.marked) {
                // Members owning [at, at + values): the owner of position x is ceil((x + 1) g / n) - 1.
                const std::int64_t first = ownerOf(at, n, g), last = ownerOf(at + s.values - 1, n, g);
                // Member k's chunk starts where k - 1's ends: floor(n (k + 1) / g) stepped from
                // floor(n k / g) by n / g and a carry of the remainders (no division per member:
                // a 64-bit division was a tenth of the search's cycles).
                const std::int64_t step = n / g, stepRemainder = n % g;
                std::int64_t begin = n * first / g, remainder = n * first % g;
                for (std::int64_t k = first; k <= last; ++k) {
                    std::int64_t end = begin + step;
                    remainder += stepRemainder;
                    if (remainder >= g) {
                        remainder -= g;
                        ++end;
                    }
                    const std::int64_t lo = std::max(at, begin), hi = std::min(at + s.values, end);
                    if (hi > lo)
                        add(int(k), copies * double(hi - lo));
                    begin = end;
                }
            }
            at += s.values;
        }
        total_ += copies * marked(unit);
    }
    bool overflowed() const { return overflow_; }
    // The most any member owns, and the mean (total / members).
    double most() const
    {
        double m = 0;
        for (int i = 0; i < used_; ++i)
            m = std::max(m, shares_[usedSlots_[size_t(i)]].value);
        return m;
    }
    double mean() const { return total_ / members_; }

private:
    static std::int64_t ownerOf(std::int64_t x, std::int64_t n, std::int64_t g) { return ((x + 1) * g + n - 1) / n - 1; }
    static double marked(const UnitLayout& unit)
    {
        double m = 0;
        for (const UnitLayout::Segment& s : unit)
            m += s.marked ? double(s.values) : 0.0;
        return m;
    }
    // A rank's share by open addressing: a search's group of 256 members spans up to kMaxRanks ranks
    // per unit, and a linear search over them was a quarter of the search's time (bench_search,
    // DeepSeek-V3 on 256 p5). Each rank's values are summed in the order they come, as before. Only
    // the occupancy bits start cleared (the slots are read once set): this runs once per priced
    // layout with sequence parallelism under ZeRO-2/3.
    bool occupied(std::size_t i) const { return (occupied_[i / 64] >> (i % 64)) & 1u; }
    void add(int rank, double value)
    {
        std::size_t i = (std::size_t(rank) * 2654435761u) & (kSlots - 1);
        while (occupied(i) && shares_[i].rank != rank)
            i = (i + 1) & (kSlots - 1);
        if (occupied(i)) {
            shares_[i].value += value;
            return;
        }
        if (used_ == kMaxRanks) {
            overflow_ = true;
            return;
        }
        shares_[i] = {rank, value};
        occupied_[i / 64] |= std::uint64_t(1) << (i % 64);
        usedSlots_[size_t(used_++)] = std::uint16_t(i);
    }
    struct Share {
        int rank;
        double value;
    };
    static constexpr std::size_t kSlots = 2 * kMaxRanks;  // a power of two, at most half full
    std::array<Share, kSlots> shares_;                    // set where occupied
    std::array<std::uint64_t, kSlots / 64> occupied_{};
    std::array<std::uint16_t, kMaxRanks> usedSlots_;      // [0, used_) set
    int used_ = 0;
    int members_ = 1;
    double total_ = 0;
    bool overflow_ = false;
};

} // namespace shardscope
