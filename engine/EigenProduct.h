// c = op(a) * op(b), or += when accumulate, with Eigen's GEMM, for any Eigen matrix
// expressions with the runtime transposes the engine's kernels use. Shared by Ops.cpp and
// the per-level GemmKernel.cpp, which instantiates it in its own Eigen namespace: it names
// no Eigen type and includes no Eigen header itself.
#pragma once

namespace shardscope::engine {

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

} // namespace shardscope::engine
