// The building blocks the fast kernels of Ops.cpp and OpsBlocks.cpp share, for the engine's
// own .cpp files only (not an API): one GEMM block and one softmax column on the calling
// thread, at the CPU's widest level in a portable build (GemmIsa.h), and the constants of
// the tanh GeLU. Everything here is inline: each kernel file instantiates what it uses.
#pragma once

#include "EigenKernels.h"
#include "GemmIsa.h"

#include <Eigen/Core>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace shardscope::engine::detail {

// Products smaller than this many multiply-adds run on the calling thread:
// splitting them costs more in synchronisation than it saves.
inline constexpr double kParallelGemmMacs = 64.0 * 64 * 64;
// Rows of c one Eigen product takes at most: Eigen packs a kc x rows block of op(a), and with
// every row of a vocabulary head in one block (50257 x 392 floats for GPT-2's) the pack is a
// fresh 79 MB mapping each call (glibc maps blocks above 32 MB and unmaps them on free: 19k page
// faults a step). 48 x 160 rows keep it under 13 MB, which glibc's allocator reuses; a multiple of
// 48 so that every row meets the same GEBP kernel as in one block (Ops.cpp gemm).
inline constexpr std::int64_t kGemmRowChunk = 48 * 160;

// Fixed-size chunk for elementwise kernels that need several passes over the
// same values (they stay in L1 between passes) without heap temporaries.
inline constexpr Eigen::Index kChunk = 256;

// GeLU, tanh approximation: 0.5 x (1 + tanh(kGeluC (x + kGeluA x^3))).
inline constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluA = 0.044715;

// The x86-64 level's GEMM for T in a portable build (GemmIsa.h); nullptr: Eigen here.
template <class T>
auto levelGemm()
{
    const isa::LevelKernels& kernels = isa::levelKernels();
    if constexpr (std::is_same_v<T, float>)
        return kernels.f32;
    else
        return kernels.f64;
}

// softmax((x - max) * scale) of a contiguous column in place, at the CPU's widest level in a
// portable build; returns the max and the sum of the exponentials.
template <class T, class Column>
std::pair<T, T> softmaxColumn(Column&& x, T scale)
{
    const isa::LevelKernels& kernels = isa::levelKernels();
    T mx = 0, sum = 0;
    if constexpr (std::is_same_v<T, float>) {
        if (kernels.softmax32) {
            kernels.softmax32(x.data(), x.size(), scale, &mx, &sum);
            return {mx, sum};
        }
    } else {
        if (kernels.softmax64) {
            kernels.softmax64(x.data(), x.size(), scale, &mx, &sum);
            return {mx, sum};
        }
    }
    return eigenSoftmax(x, scale);
}

// c = op(a) * op(b) (+= when accumulate) for one block, on the calling thread. Every product
// of the engine goes through here, so that a portable build runs all of them at the CPU's
// widest level.
template <class T, class CBlock, class ABlock, class BBlock>
void blockGemm(CBlock&& c, const ABlock& a, bool transA, const BBlock& b, bool transB, bool accumulate)
{
    if (const auto f = levelGemm<T>()) {
        f({c.data(), c.outerStride(), a.data(), a.outerStride(), b.data(), b.outerStride(), c.rows(), c.cols(),
           transA ? a.rows() : a.cols(), transA, transB, accumulate});
        return;
    }
    eigenProduct(c, a, transA, b, transB, accumulate);
}

} // namespace shardscope::engine::detail
