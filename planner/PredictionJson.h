// "shardscope.prediction/1": a Prediction as JSON, with the named terms and the cost ledger when
// given ("ledger": {"terms", "collectives", "stages"}: each term's figure, name, value and formula;
// each collective's dimension, kind, placement, bytes, calls, time and overlap {exposed_s,
// hidden_s}; the stages the time terms, dp_comm and the bytes are of).
#pragma once

#include "CostModel.h"
#include "Prediction.h"

#include <QJsonObject>

#include <vector>

namespace shardscope {

QJsonObject toJson(const Prediction& prediction, const std::vector<Term>& terms = {},
                   const CostLedger* ledger = nullptr);
QJsonObject toJson(const CostLedger& ledger);

} // namespace shardscope
