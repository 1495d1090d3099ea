// The engine's kernels that run per x86-64 level in a portable build (GemmIsa.h), written
// once for any Eigen expressions: shared by Ops.cpp (baseline or native) and GemmKernel.cpp,
// which instantiates them in its own Eigen namespace. So this header names no Eigen type and
// includes no Eigen header itself.
#pragma once

#include <cmath>
#include <utility>

namespace shardscope::engine {

// c = op(a) * op(b), or += when accumulate, with Eigen's GEMM, with the runtime transposes
// the engine's kernels use.
template <class CBlock, class ABlock, class BBlock>
void eigenProduct(CBlock&& c, const ABlock& a, bool transA, const BBlock& b, bool transB, bool accumulate)
{
    if (!transA && !transB) {
        if (accumulate) c.noalias() += a * b;
        else c.noalias() = a * b;
    } else if (transA && !transB) {
        if (accumulate) c.noalias() += a.transpose() * b;
        else c.noalias() = a.transpose() * b;
    } else if (!transA && transB) {
        if (accumulate) c.noalias() += a * b.transpose();
        else c.noalias() = a * b.transpose();
    } else {
        if (accumulate) c.noalias() += a.transpose() * b.transpose();
        else c.noalias() = a.transpose() * b.transpose();
    }
}

// x = softmax((x - max) * scale) in place for a column vector expression; returns the max
// and the sum of the exponentials (a cross-entropy's loss is log(sum) - (x_target - max)).
template <class T, class Column>
std::pair<T, T> eigenSoftmax(Column&& x, T scale)
{
    const T mx = x.maxCoeff();
    x = ((x.array() - mx) * scale).exp().matrix();
    const T sum = x.sum();
    x *= T(1) / sum;
    return {mx, sum};
}

} // namespace shardscope::engine
