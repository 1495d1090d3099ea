// BERT-style encoder ops; see OpsEncoder.h.
#include "OpsEncoder.h"

#include <cmath>

namespace shardscope::engine {

using Eigen::Index;

template <class T>
void token_type_forward(KernelPool& pool, MatRef<T> out, CMatRef<T> wtt, const int* types)
{
    pool.parallelFor(out.cols(), 16, [&](std::int64_t n0, std::int64_t n1) {
        for (Index n = n0; n < n1; ++n)
            out.col(n) += wtt.col(types[n]);
    });
}

template <class T>
void token_type_backward(MatRef<T> dwtt, CMatRef<T> dout, const int* types)
{
    for (Index n = 0; n < dout.cols(); ++n)
        dwtt.col(types[n]) += dout.col(n);
}

template <class T>
void tanh_forward(KernelPool& pool, VecRef<T> out, CVecRef<T> inp)
{
    pool.parallelFor(out.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i)
            out(i) = std::tanh(inp(i));
    });
}

template <class T>
void tanh_backward(KernelPool& pool, VecRef<T> dinp, CVecRef<T> out, CVecRef<T> dout)
{
    pool.parallelFor(dinp.size(), 4096, [&](std::int64_t i0, std::int64_t i1) {
        for (Index i = i0; i < i1; ++i)
            dinp(i) = (T(1) - out(i) * out(i)) * dout(i);
    });
}

#define SHARDSCOPE_ENGINE_ENCODER_OPS(T)                                                   \
    template void token_type_forward<T>(KernelPool&, MatRef<T>, CMatRef<T>, const int*);  \
    template void token_type_backward<T>(MatRef<T>, CMatRef<T>, const int*);              \
    template void tanh_forward<T>(KernelPool&, VecRef<T>, CVecRef<T>);                    \
    template void tanh_backward<T>(KernelPool&, VecRef<T>, CVecRef<T>, CVecRef<T>);

SHARDSCOPE_ENGINE_ENCODER_OPS(float)
SHARDSCOPE_ENGINE_ENCODER_OPS(double)

} // namespace shardscope::engine
