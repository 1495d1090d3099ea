// The engine's kernels that run per x86-64 level in a portable build (GemmIsa.h), written
// once for any Eigen expressions: shared by Ops.cpp (baseline or native) and GemmKernel.cpp,
// which instantiates them in its own Eigen namespace. So this header names no Eigen type and
// includes no Eigen header itself.
#pragma once

#include <cmath>
#include <cstddef>
#include <utility>

namespace shardscope::engine {

// GeLU, tanh approximation: 0.5 x (1 + tanh(kGeluC (x + kGeluA x^3))).
inline constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluA = 0.044715;
// Fixed-size chunk for elementwise kernels that need several passes over the
// same values (they stay in L1 between passes) without heap temporaries.
inline constexpr std::ptrdiff_t kElementwiseChunk = 256;

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

// out = GeLU(x) for array expressions of one length.
template <class T, class Out, class In>
void eigenGelu(Out&& out, const In& x)
{
    out = T(0.5) * x * (T(1) + (T(kGeluC) * (x + T(kGeluA) * x * x * x)).tanh());
}

// dinp = GeLU'(x) * dout for array expressions of one chunk; t: the caller's storage for
// tanh(u) of the chunk.
template <class T, class Out, class In, class Grad, class Tmp>
void eigenGeluBackward(Out&& dinp, const In& x, const Grad& dout, Tmp&& t)
{
    t = (T(kGeluC) * (x + T(kGeluA) * x * x * x)).tanh();
    const auto grad = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
    dinp = grad * dout;
}

} // namespace shardscope::engine
