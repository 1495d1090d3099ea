// "shardscope.prediction/1": a Prediction as JSON, with the named terms when given.
#pragma once

#include "CostModel.h"
#include "Prediction.h"

#include <QJsonObject>

#include <vector>

namespace shardscope {

QJsonObject toJson(const Prediction& prediction, const std::vector<Term>& terms = {});

} // namespace shardscope
