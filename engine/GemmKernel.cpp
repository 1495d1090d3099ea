// One x86-64 level's GEMM block (see GemmIsa.h): compiled once per level with
// SHARDSCOPE_GEMM_LEVEL=<name> (v3, v4), that level's -march, and -DEigen=Eigen_<name>.
// Nothing here may include an engine header that uses Eigen types (EigenKernels.h names none).
#include "EigenKernels.h"
#include "GemmIsa.h"

#include <Eigen/Core>

#include <tuple>

#ifndef SHARDSCOPE_GEMM_LEVEL
#error "SHARDSCOPE_GEMM_LEVEL names the level this file is built for"
#endif

namespace shardscope::engine::isa::SHARDSCOPE_GEMM_LEVEL {

namespace {

template <class T>
using Stored = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;

template <class T>
void gemm(const GemmBlock<T>& g)
{
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>> c(
        g.c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
    const Stored<T> a(g.a, g.transA ? g.k : g.m, g.transA ? g.m : g.k, Eigen::OuterStride<>(g.lda));
    const Stored<T> b(g.b, g.transB ? g.n : g.k, g.transB ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
    eigenProduct(c, a, g.transA, b, g.transB, g.accumulate);
}

template <class T>
void softmax(T* x, std::ptrdiff_t n, T scale, T* max, T* sum)
{
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> v(x, n);
    std::tie(*max, *sum) = eigenSoftmax(v, scale);
}

} // namespace

void gemmF32(const GemmBlock<float>& g) { gemm(g); }
void gemmF64(const GemmBlock<double>& g) { gemm(g); }
void softmaxF32(float* x, std::ptrdiff_t n, float scale, float* max, float* sum) { softmax(x, n, scale, max, sum); }
void softmaxF64(double* x, std::ptrdiff_t n, double scale, double* max, double* sum) { softmax(x, n, scale, max, sum); }

} // namespace shardscope::engine::isa::SHARDSCOPE_GEMM_LEVEL
