// Checked integer arithmetic for counts derived from what users type (layout products,
// parameter and FLOP counts): an overflow is noticed and reported by name, never wrapped
// into a wrong, often negative, number or into a zero that a later `%` divides by.
#pragma once

#include <cstdint>
#include <optional>

namespace shardscope {

// a * b, or nothing when the product does not fit in int64.
inline std::optional<std::int64_t> checkedMul(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r))
        return std::nullopt;
    return r;
}

// An int64 count that remembers whether any step of its computation overflowed; its
// value is meaningless once overflowed() is true.
class CheckedCount {
public:
    constexpr CheckedCount(std::int64_t v = 0) : value_(v) {}  // NOLINT: counts convert implicitly
    std::int64_t value() const { return value_; }
    bool overflowed() const { return overflow_; }

    friend CheckedCount operator+(CheckedCount a, CheckedCount b)
    {
        CheckedCount r;
        r.overflow_ = a.overflow_ || b.overflow_ || __builtin_add_overflow(a.value_, b.value_, &r.value_);
        return r;
    }
    friend CheckedCount operator-(CheckedCount a, CheckedCount b)
    {
        CheckedCount r;
        r.overflow_ = a.overflow_ || b.overflow_ || __builtin_sub_overflow(a.value_, b.value_, &r.value_);
        return r;
    }
    friend CheckedCount operator*(CheckedCount a, CheckedCount b)
    {
        CheckedCount r;
        r.overflow_ = a.overflow_ || b.overflow_ || __builtin_mul_overflow(a.value_, b.value_, &r.value_);
        return r;
    }
    CheckedCount& operator+=(CheckedCount b) { return *this = *this + b; }

private:
    std::int64_t value_ = 0;
    bool overflow_ = false;
};

} // namespace shardscope
