// T5's relative position bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
// with a Unified Text-to-Text Transformer", Section 2.1): each attention score of head h gets a
// learned scalar indexed by the bucket of the key's offset from the query, one (buckets x heads)
// table per stack, computed once and added in every layer of that stack. The bucketing is
// Hugging Face's T5Attention._relative_position_bucket (huggingface/transformers
// src/transformers/models/t5/modeling_t5.py @ 6b8b757, which Megatron-LM's
// megatron/core/models/common/embeddings/relative_pos_embedding.py @ d98e8a6 adapts):
//   relative = key - query; bidirectional (the encoder): half the buckets for keys after the
//   query, |relative| after; causal (the decoder): -min(relative, 0). Of the remaining n buckets
//   the first n/2 are exact offsets, the rest logarithmic up to max_distance, the last bucket
//   holding everything beyond it.
// The bias of the scores' backward is the scores' gradient summed per (head, bucket): over the
// sequences, queries and keys, and (in the executor) over the stack's layers.
#pragma once

#include "OpsBlocks.h"

#include <vector>

namespace shardscope::engine {

// The bucket of one offset (key position - query position), in [0, buckets).
int relativePositionBucket(int relative, bool bidirectional, int buckets, int max_distance);
// (Tq, Tk) buckets, entry t1 * Tk + t2 for query t1 and key t2: ScoreBias::buckets.
std::vector<int> relativePositionBuckets(int Tq, int Tk, bool bidirectional, int buckets, int max_distance);

// dtable (NH, bias.count) += the scores' gradient per (head, bucket): datt (Tk, B*NH*Tq) as
// attention_backward leaves it (masked entries are zero there), divided by the shape's scale.
// Summed in a fixed order (sequence, query, key per head): the same on any thread count.
template <class T>
void relative_bias_backward(KernelPool& pool, T* dtable, CMatRef<T> datt, const ScoreBias<T>& bias,
                            const AttentionShape& s);

} // namespace shardscope::engine
