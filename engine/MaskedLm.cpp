// Masked-LM batches; see MaskedLm.h.
#include "MaskedLm.h"

#include "Random.h"
#include "TrainingObjective.h"

#include <numeric>

namespace shardscope::engine {

int maskToken(const ModelConfig& c) { return c.vocab - 1; }

int dataVocabulary(const ModelConfig& c) { return c.masked_lm ? c.vocab - 1 : c.vocab; }

int predictedPerSequence(const ModelConfig& c) { return c.masked_lm ? maskedPositionsPerSequence(c.seq) : c.seq; }

std::int64_t lossTokens(const ModelConfig& c, int batch) { return std::int64_t(batch) * predictedPerSequence(c); }

void makePretrainingBatch(const ModelConfig& c, std::uint64_t seed, std::int64_t index, int B, int first, int count,
                          const int* tokens, const int* following, PretrainingBatch& out)
{
    const int T = c.seq, k = predictedPerSequence(c), dataV = dataVocabulary(c);
    const size_t n = size_t(count) * size_t(T);
    out.inputs.assign(tokens, tokens + n);
    out.targets.assign(n, -1);
    out.token_types.assign(n, 0);
    out.next_sentence.assign(c.pooler ? size_t(count) : 0, 0);
    std::vector<int> order(static_cast<size_t>(T));
    for (int b = 0; b < count; ++b) {
        Rng rng(hash64(seed ^ 0x4D4C4D00ull, std::uint64_t(index), std::uint64_t(first + b)));
        int* in = out.inputs.data() + size_t(b) * T;
        const int split = T > 1 ? 1 + int(rng.below(std::uint32_t(T - 1))) : T;
        if (c.pooler && rng.uniform() < 0.5) {
            out.next_sentence[size_t(b)] = 1;
            const int* other = b + 1 < count ? tokens + size_t(b + 1) * T : following;
            for (int t = split; t < T; ++t)
                in[t] = B > 1 ? other[t] : tokens[size_t(b) * T + size_t(T - 1 - t)];
        }
        if (c.token_types >= 2)
            for (int t = split; t < T; ++t)
                out.token_types[size_t(b) * T + size_t(t)] = 1;
        // k distinct positions: the first k of a partial Fisher-Yates shuffle.
        std::iota(order.begin(), order.end(), 0);
        for (int i = 0; i < k; ++i) {
            const int j = i + int(rng.below(std::uint32_t(T - i)));
            std::swap(order[size_t(i)], order[size_t(j)]);
            const int p = order[size_t(i)];
            out.targets[size_t(b) * T + size_t(p)] = in[p];
            const double u = rng.uniform();
            if (u < 0.8)
                in[p] = maskToken(c);
            else if (u >= 0.9)
                in[p] = int(rng.below(std::uint32_t(dataV)));
        }
    }
}

} // namespace shardscope::engine
