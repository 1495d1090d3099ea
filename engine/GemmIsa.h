// The engine's GEMM blocks compiled for several x86-64 levels, chosen at run time for the CPU
// found, so that a portable build (SHARDSCOPE_NATIVE=OFF: what packages ship) multiplies as
// fast as a -march=native one on AVX2 and AVX-512 machines and still runs on any x86-64.
//
// Eigen picks its vector width with the preprocessor (__AVX2__, __AVX512F__), so a function
// attribute cannot widen it: each level is its own translation unit (GemmKernel.cpp), built
// with that level's -march and with Eigen's namespace renamed (-DEigen=Eigen_<level>), so
// that the Eigen templates instantiated there can never be merged by the linker with the
// baseline ones (one definition per ISA, no ODR clash). This header therefore holds no Eigen
// type: a block is passed as pointers, sizes and column strides (column-major).
#pragma once

#include <cstddef>
#include <vector>

namespace shardscope::engine::isa {

// c (m, n) = op(a) * op(b), or += when accumulate; a is stored (m, k), or (k, m) when transA;
// b is stored (k, n), or (n, k) when transB. ld*: distance between columns, in elements.
template <class T>
struct GemmBlock {
    T* c;
    std::ptrdiff_t ldc;
    const T* a;
    std::ptrdiff_t lda;
    const T* b;
    std::ptrdiff_t ldb;
    std::ptrdiff_t m, n, k;
    bool transA, transB, accumulate;
};

// x (n) = softmax((x - max) * scale) in place; *max and *sum (of the exponentials) returned.
template <class T>
using SoftmaxKernel = void (*)(T* x, std::ptrdiff_t n, T scale, T* max, T* sum);

// One level's kernels: the products, and the softmax of the vocabulary (a cross-entropy
// exponentiates V values per token, the largest elementwise work of a step) and attention.
struct LevelKernels {
    const char* level = "";  // "x86-64-v4", "x86-64-v3"; empty: none (the caller's own Eigen code)
    void (*f32)(const GemmBlock<float>&) = nullptr;
    void (*f64)(const GemmBlock<double>&) = nullptr;
    SoftmaxKernel<float> softmax32 = nullptr;
    SoftmaxKernel<double> softmax64 = nullptr;
};

// Every level built into this binary that this CPU (and OS) supports, widest first; empty
// when the build is native (-march=native: Ops.cpp's own Eigen code is already the widest).
std::vector<LevelKernels> supportedLevelKernels();

// The kernels the engine uses, decided once: the widest supported level, unless
// SHARDSCOPE_ENGINE_ISA names a narrower one ("x86-64-v3", or "baseline" for Ops.cpp's own
// code), to compare levels on one machine. An unknown or unsupported name is reported on
// stderr and the widest level used.
const LevelKernels& levelKernels();

} // namespace shardscope::engine::isa
