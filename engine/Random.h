// Deterministic random numbers for the engine, identical on every platform and
// independent of how work is split over threads: initialisation, synthetic data
// and stochastic rounding all draw from these, never from <random>'s
// distributions (whose output the standard leaves to the implementation).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace shardscope::engine {

// SplitMix64 finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijective 64-bit mix, good enough to turn a
// counter into independent-looking bits.
constexpr std::uint64_t mix64(std::uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Counter-based: the same (seed, a, b) gives the same bits whichever thread asks,
// so stochastic rounding of element i at step s does not depend on the partition.
constexpr std::uint64_t hash64(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0)
{
    return mix64(mix64(mix64(seed + 0x9E3779B97F4A7C15ull) ^ a) ^ (b * 0xD6E8FEB86659FD93ull));
}

// A sequential stream (SplitMix64) for initialisation and data.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next()
    {
        state_ += 0x9E3779B97F4A7C15ull;
        return mix64(state_);
    }
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return double(next() >> 11) * 0x1.0p-53; }
    // Uniform integer in [0, n), n > 0 (multiply-shift; bias below 2^-32 for n < 2^32).
    std::uint32_t below(std::uint32_t n) { return std::uint32_t(((next() >> 32) * std::uint64_t(n)) >> 32); }
    // Standard normal by Box-Muller (one value per call; the pair's twin is dropped for simplicity).
    double normal()
    {
        const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }

private:
    std::uint64_t state_;
};

} // namespace shardscope::engine
