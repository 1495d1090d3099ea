// A validation case as JSON, stored with each case of a validation document under
// "request", so a stored run can be priced again with other cost-model terms
// (`calibrate --from-history`) without running the engine again.
#pragma once

#include "Validation.h"

#include <QJsonObject>

namespace shardscope {

QJsonObject toJson(const ValidationCase& c);

// Every problem is named by its field under `path` ("cases[3].request.model.heads: ...");
// throws InputError listing them.
ValidationCase validationCaseFromJson(const QJsonObject& o, const std::string& path);

// A stored case of a validation document (name, request, metrics) as a result the fit can
// use: the planner's problem is rebuilt from the request, the measurements are the stored
// ones. Throws InputError when the request is missing or malformed.
ValidationResult validationResultFromJson(const QJsonObject& storedCase, const std::string& path);

} // namespace shardscope
