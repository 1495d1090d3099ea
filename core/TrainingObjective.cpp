#include "TrainingObjective.h"

#include <algorithm>
#include <cmath>

namespace shardscope {

ObjectiveHeadParameters objectiveHeadParameters(const ModelSpec& m)
{
    ObjectiveHeadParameters p;
    if (!maskedLanguageModel(m))
        return p;
    parameterCount(m);  // refuses a model whose counts overflow, before the products below
    const std::int64_t h = m.hidden;
    p.mlm_transform = h * h + h;
    p.mlm_norm = m.norm == NormKind::LayerNorm ? 2 * h : h;
    p.mlm_output_bias = m.vocab;
    p.next_sentence = m.pooler ? 2 * h + 2 : 0;
    p.total = p.mlm_transform + p.mlm_norm + p.mlm_output_bias + p.next_sentence;
    return p;
}

std::int64_t pretrainingParameterCount(const ModelSpec& m)
{
    return parameterCount(m) + objectiveHeadParameters(m).total;
}

int maskedPositionsPerSequence(int seq)
{
    return std::max(1, int(std::lround(0.15 * seq)));
}

double objectiveTransformFlopsPerToken(const ModelSpec& m)
{
    return maskedLanguageModel(m) ? 2.0 * m.hidden * m.hidden : 0.0;
}

double objectivePoolerFlopsPerSequence(const ModelSpec& m)
{
    return maskedLanguageModel(m) && m.pooler ? 2.0 * m.hidden * m.hidden + 2.0 * m.hidden * 2 : 0.0;
}

} // namespace shardscope
