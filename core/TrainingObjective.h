// The pretraining objective a ModelSpec is trained with, and what its heads add to the base
// model that ModelSpec counts. A decoder predicts the next token through its LM head (counted
// by parameterBreakdown). An encoder (family "encoder") is trained as BERT is
// (BertForPreTraining, HF transformers models/bert/modeling_bert.py @ 004ad5f): the masked-LM
// head (BertLMPredictionHead: a transform dense h->h + GeLU + norm, the decoder tied to the word
// embedding plus an output bias of V) and, with a pooler, the next-sentence head (h->2) that
// trains it. parameterBreakdown counts BertModel (embeddings, layers, pooler: bert-base's
// published 109,482,240); pretrainingParameterCount adds the heads (bert-base's
// BertForPreTraining: 110,106,428).
#pragma once

#include "ModelSpec.h"

#include <cstdint>

namespace shardscope {

// BERT-style encoders end each layer in its norm (post-norm) and have no final norm; a model
// without a final norm is post-norm.
inline bool postNorm(const ModelSpec& m) { return !m.final_norm; }
// The masked-LM objective (and the next-sentence head when the model has a pooler).
inline bool maskedLanguageModel(const ModelSpec& m) { return m.family == ModelFamily::EncoderOnly; }

struct ObjectiveHeadParameters {
    std::int64_t mlm_transform = 0;    // dense h x h + bias h
    std::int64_t mlm_norm = 0;         // the transform's norm (2h LayerNorm, h RMSNorm)
    std::int64_t mlm_output_bias = 0;  // V
    std::int64_t next_sentence = 0;    // 2h + 2
    std::int64_t total = 0;
};

// Zero for decoders (their head is the base model's). Throws InputError as parameterCount().
ObjectiveHeadParameters objectiveHeadParameters(const ModelSpec& model);
// parameterCount() + the objective's heads: what training holds.
std::int64_t pretrainingParameterCount(const ModelSpec& model);

// Positions predicted per sequence of `seq` tokens: max(1, round(15% of seq)), as Google's BERT
// (create_pretraining_data.py @ eedf571, create_masked_lm_predictions' num_to_predict with
// masked_lm_prob 0.15) picks them.
int maskedPositionsPerSequence(int seq);

// Forward matmul FLOPs of the heads, 2 per multiply-add: the masked-LM transform per token
// (2h^2; its decoder is the logits, counted by forwardFlopsPerToken), the pooler and the
// next-sentence head per sequence (2h^2 + 4h).
double objectiveTransformFlopsPerToken(const ModelSpec& model);
double objectivePoolerFlopsPerSequence(const ModelSpec& model);

} // namespace shardscope
