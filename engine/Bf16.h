// bfloat16 emulated bit-exactly on fp32: the top 16 bits of an IEEE-754 float.
// Two roundings from fp32: round-to-nearest-even (what hardware casts do) and
// stochastic rounding (Trainium's option for pure-bf16 training), which rounds
// up with probability equal to the discarded fraction so that small updates
// survive on average. Plain C++, no allocation: used in engine kernels.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace shardscope::engine {

// fp32 -> bf16 bits, round to nearest, ties to even. NaN stays a (quiet) NaN.
inline std::uint16_t bf16FromFloatNearestEven(float x)
{
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
    if (std::isnan(x))
        return std::uint16_t((bits >> 16) | 0x0040u);  // keep sign and payload top, force quiet
    const std::uint32_t lsb = (bits >> 16) & 1u;
    const std::uint32_t rounded = bits + 0x7FFFu + lsb;  // overflow to inf is the correct result
    return std::uint16_t(rounded >> 16);
}

// fp32 -> bf16 bits, stochastic: `random16` is a uniform 16-bit random number.
// Rounds away from zero in magnitude with probability (discarded bits) / 2^16.
inline std::uint16_t bf16FromFloatStochastic(float x, std::uint16_t random16)
{
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
    if (std::isnan(x) || std::isinf(x))
        return bf16FromFloatNearestEven(x);
    return std::uint16_t((bits + random16) >> 16);
}

inline float floatFromBf16(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

inline float roundToBf16NearestEven(float x) { return floatFromBf16(bf16FromFloatNearestEven(x)); }
inline float roundToBf16Stochastic(float x, std::uint16_t random16)
{
    return floatFromBf16(bf16FromFloatStochastic(x, random16));
}

} // namespace shardscope::engine
