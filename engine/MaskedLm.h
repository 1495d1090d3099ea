// The masked-LM objective's batches (BERT pretraining) from a token source's sequences,
// deterministic under the seed: batch `index` row b draws from hash64(seed, index, b) only,
// so every replica of a cluster builds its own rows of the same global batch.
//
// Per sequence of T tokens (after Google's create_pretraining_data.py @ eedf571):
//  - sentence pair: a split s uniform in [1, T-1]; segment A is [0, s), segment B [s, T).
//    With a pooler (next-sentence head) segment B is, half of the time, replaced by the same
//    positions of the next row of the batch (row (b+1) mod B; a one-row batch: its own tokens
//    reversed), label 1 "random next", else label 0 "is next" (HF's next_sentence_label).
//  - token types: 0 on segment A, 1 on segment B when the model has 2 or more types, else 0.
//  - masking: k = maskedPositionsPerSequence(T) distinct positions (a seeded partial shuffle);
//    each is the target (its original token) and its input becomes [MASK] 80% of the time, a
//    random data token 10%, itself 10%. Every other target is -1 (ignored, PyTorch's
//    ignore_index): the loss is the mean over the B k predicted positions.
// [MASK] is the last id, V - 1, which the data never produces: the Markov source of an MLM
// model draws from V - 1 states, and a byte file needs V >= 257.
#pragma once

#include "ModelConfig.h"

#include <cstdint>
#include <vector>

namespace shardscope::engine {

int maskToken(const ModelConfig& c);       // V - 1
int dataVocabulary(const ModelConfig& c);  // ids the data may use: V - 1 for masked LM, else V
// Positions a sequence predicts: T (next token), or k (masked LM).
int predictedPerSequence(const ModelConfig& c);
// The step's loss denominator: batch x predictedPerSequence.
std::int64_t lossTokens(const ModelConfig& c, int batch);

struct PretrainingBatch {
    std::vector<int> inputs, targets, token_types;  // B*T each
    std::vector<int> next_sentence;                 // B labels (pooler only, else empty)
};

// Rows [first, first + count) of batch `index` of B rows: `tokens` holds those count rows of a
// TokenSource batch (ids < dataVocabulary), `following` row (first + count) mod B, the next row
// of the last one (a data-parallel replica builds only its own rows; out has count rows).
void makePretrainingBatch(const ModelConfig& c, std::uint64_t seed, std::int64_t index, int B, int first, int count,
                          const int* tokens, const int* following, PretrainingBatch& out);
// The whole batch (B rows in `tokens`).
inline void makePretrainingBatch(const ModelConfig& c, std::uint64_t seed, std::int64_t index, int B,
                                 const int* tokens, PretrainingBatch& out)
{
    makePretrainingBatch(c, seed, index, B, 0, B, tokens, tokens, out);
}

} // namespace shardscope::engine
