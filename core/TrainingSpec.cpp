#include "TrainingSpec.h"
#include "SpecEnums.h"

#include <cmath>

namespace shardscope {

DataType computeType(Precision p)
{
    switch (p) {
    case Precision::FP32: return DataType::FP32;
    case Precision::BF16Mixed:
    case Precision::BF16Autocast: return DataType::BF16;
    case Precision::FP16Mixed: return DataType::FP16;
    case Precision::FP8Tensorwise:
    case Precision::FP8Delayed:
    case Precision::FP8Blockwise:
    case Precision::FP8Rowwise:
    case Precision::MXFP8: return DataType::FP8;
    case Precision::NVFP4: return DataType::FP4;
    }
    return DataType::BF16;
}

bool quantizedRecipe(Precision p)
{
    const DataType t = computeType(p);
    return t == DataType::FP8 || t == DataType::FP4;
}

DataType gradientType(Precision p, MainGrads g)
{
    switch (p) {
    case Precision::FP32:
    case Precision::BF16Autocast: return DataType::FP32;
    case Precision::FP16Mixed: return DataType::FP16;
    default: return g == MainGrads::BF16 ? DataType::BF16 : DataType::FP32;
    }
}

FieldErrors validate(const TrainingSpec& t, const std::string& path)
{
    FieldErrors errors;
    // A precision that fixes its gradients' type takes only that type (or the default).
    const bool fixed = t.precision == Precision::FP32 || t.precision == Precision::FP16Mixed ||
                       t.precision == Precision::BF16Autocast;
    if (fixed && t.main_grads != MainGrads::Default &&
        !(t.main_grads == MainGrads::FP32 && gradientType(t) == DataType::FP32))
        errors.push_back({path + ".main_grads",
                          std::string(toString(t.main_grads)) + " gradients with " + toString(t.precision) +
                              " precision: it keeps " + toString(gradientType(t)) +
                              " gradients (main_grads applies to bf16 and the FP8/FP4 recipes)"});
    if (t.global_batch < 1 || t.global_batch > 100'000'000)
        errors.push_back({path + ".global_batch", std::to_string(t.global_batch) + " is out of range [1, 1e8]"});
    if (t.seq_len < 1 || t.seq_len > (1 << 24))
        errors.push_back({path + ".seq_len", std::to_string(t.seq_len) + " is out of range [1, 16777216]"});
    if (!std::isfinite(t.tokens_to_train) || t.tokens_to_train <= 0 || t.tokens_to_train > 1e16)
        errors.push_back({path + ".tokens_to_train", "must be positive and at most 1e16"});
    if (!std::isfinite(t.moe_imbalance) || t.moe_imbalance < 1 || t.moe_imbalance > 64)
        errors.push_back({path + ".moe_imbalance", "must be between 1 (perfectly balanced experts) and 64 (the busiest "
                                                   "rank's tokens over the mean)"});
    return errors;
}

const char* toString(Precision v) { return enumToString<Precision>(kPrecisionNames, v); }
const char* toString(Optimizer v) { return enumToString<Optimizer>(kOptimizerNames, v); }
const char* toString(MainGrads v) { return enumToString<MainGrads>(kMainGradsNames, v); }

} // namespace shardscope
