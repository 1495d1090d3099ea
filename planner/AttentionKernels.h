// AttentionKernels: the published achieved rates of fused (flash) attention kernels
// against sequence length and head dimension (resources/planner/attention-kernels.json,
// compiled in, each series with its source), and the rate curve resolved for one chip,
// head dimension and mask, which the cost model reads on its hot path (fixed arrays,
// no allocation). A chip without an entry has no curve: the cost model then prices the
// attention core as GEMMs at the chip's matmul efficiency, and says so.
#pragma once

#include "FieldError.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct ChipSpec;

enum class AttentionPass { Forward, Backward };

struct AttentionRateSeries {
    AttentionPass pass = AttentionPass::Forward;
    bool causal = false;
    int head_dim = 0;
    std::vector<double> seq_len;           // ascending
    std::vector<double> flops_per_second;  // achieved, as the benchmark counts FLOPs
    std::string source;
};

struct AttentionKernel {
    std::string name;                 // "flashattention-3"
    std::vector<std::string> chips;   // catalog chip names it was measured on (or stands for)
    std::string source;
    std::vector<AttentionRateSeries> series;
};

// Achieved FLOP/s of one kernel call against its key length: power-law segments between the
// published points, the first segment's exponent below the shortest, flat beyond the longest.
struct AttentionRateCurve {
    static constexpr int kMaxPoints = 12;
    int points = 0;
    double log2_seq[kMaxPoints] = {};
    double log2_rate[kMaxPoints] = {};

    double at(double seq_len) const;  // FLOP/s of the chip (not per device)
    bool valid() const { return points >= 2; }
};

struct AttentionRates {
    std::string kernel;       // the kernel's name
    std::string source;       // where its figures come from
    AttentionRateCurve forward, backward;
};

// The built-in table (throws std::runtime_error if the compiled-in file is invalid).
const std::vector<AttentionKernel>& attentionKernels();
std::vector<AttentionKernel> attentionKernelsFromJson(const QJsonObject& json, const std::string& path,
                                                      FieldErrors& errors);

// The curves for a chip, head dimension and mask, from `kernels`: the nearest published head
// dimension of each pass and mask; a causal pass without its own series is the unmasked one
// scaled at each length by the forward's causal / unmasked ratio. Empty when the chip has no
// entry or a pass has no series.
std::optional<AttentionRates> attentionRates(const std::vector<AttentionKernel>& kernels, const ChipSpec& chip,
                                             int head_dim, bool causal);
std::optional<AttentionRates> attentionRates(const ChipSpec& chip, int head_dim, bool causal);

} // namespace shardscope
