// T5's relative position buckets and the bias table's gradient; see RelativePosition.h.
#include "RelativePosition.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace shardscope::engine {

int relativePositionBucket(int relative, bool bidirectional, int buckets, int max_distance)
{
    int n = buckets, bucket = 0;
    if (bidirectional) {
        n /= 2;
        bucket += relative > 0 ? n : 0;
        relative = std::abs(relative);
    } else {
        relative = -std::min(relative, 0);
    }
    const int exact = n / 2;
    if (relative < exact)
        return bucket + relative;
    // HF computes the logarithm in float32 and truncates (.to(torch.long)): the same here.
    const float large = std::log(float(relative) / float(exact)) / std::log(float(max_distance) / float(exact)) *
                        float(n - exact);
    return bucket + std::min(exact + int(large), n - 1);
}

std::vector<int> relativePositionBuckets(int Tq, int Tk, bool bidirectional, int buckets, int max_distance)
{
    if (buckets < (bidirectional ? 4 : 2) || max_distance < 1)
        throw std::invalid_argument("relativePositionBuckets: " + std::to_string(buckets) +
                                    " buckets are too few (at least 2, 4 bidirectional: half of them exact offsets)");
    std::vector<int> out(size_t(Tq) * size_t(Tk));
    for (int t1 = 0; t1 < Tq; ++t1)
        for (int t2 = 0; t2 < Tk; ++t2)
            out[size_t(t1) * size_t(Tk) + size_t(t2)] = relativePositionBucket(t2 - t1, bidirectional, buckets, max_distance);
    return out;
}

template <class T>
void relative_bias_backward(KernelPool& pool, T* dtable, CMatRef<T> datt, const ScoreBias<T>& bias,
                            const AttentionShape& s)
{
    using Eigen::Index;
    const Index Tq = s.Tq, Tk = s.Tk, NH = s.NH;
    if (datt.rows() != Tk || datt.cols() != s.probColumns())
        throw std::invalid_argument("relative_bias_backward: datt is not (Tk, B*NH*Tq)");
    const T inv = T(1 / s.scoreScale());
    // One task per head: its row of the table is written by that task alone.
    pool.parallelFor(NH, 1, [&](std::int64_t h0, std::int64_t h1) {
        for (Index h = h0; h < h1; ++h) {
            T* row = dtable + h * bias.count;
            for (Index b = 0; b < s.B; ++b) {
                const auto dS = datt.middleCols((b * NH + h) * Tq, Tq);
                for (Index t1 = 0; t1 < Tq; ++t1)
                    for (Index t2 = 0; t2 < Tk; ++t2)
                        row[bias.buckets[t1 * Tk + t2]] += dS(t2, t1) * inv;
            }
        }
    });
}

template void relative_bias_backward<float>(KernelPool&, float*, CMatRef<float>, const ScoreBias<float>&,
                                            const AttentionShape&);
template void relative_bias_backward<double>(KernelPool&, double*, CMatRef<double>, const ScoreBias<double>&,
                                             const AttentionShape&);

} // namespace shardscope::engine
