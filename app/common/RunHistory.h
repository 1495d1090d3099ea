// The run history read back for people: a stored validation run ("shardscope.validation/1")
// as cases and metrics, and two stored runs side by side, case by case and metric by metric
// (the Validate page's history; GUI-free, so the tests read the same thing).
#pragma once

#include "RunStore.h"
#include "Validation.h"

#include <QJsonObject>
#include <QString>
#include <QVector>

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct StoredMetric {
    std::string metric;
    double predicted = 0;  // NaN when the metric was not compared
    double measured = 0;
    std::optional<double> rel_error;  // predicted / measured - 1; none when it was not finite
    int worst_device = -1;
    QString known_difference;         // the model term behind a known difference
};

struct StoredCase {
    QString name;
    QString layout;
    QString error;                    // why the case could not be compared
    std::vector<StoredMetric> metrics;  // in validationMetrics() order
    QVector<double> losses;           // per step; empty for runs stored before losses were kept
    const StoredMetric* metric(const std::string& name) const;
};

struct StoredRun {
    int id = 0;
    QString created_at;  // ISO 8601, UTC
    QString name;
    QString software_version;
    QString cost_model;
    QString device;
    std::vector<StoredCase> cases;
    // The median |error| of a metric over the cases that have it; none when no case has it.
    std::optional<double> medianAbsError(const std::string& metric) const;
};

StoredRun storedRun(const RunStore::ValidationRun& run);
// The cases of a validation document ("shardscope.validation/1"), as storedRun reads them.
std::vector<StoredCase> storedCases(const QJsonObject& document);

// Keeps each case's loss curve in its document (the history can then draw it again):
// "losses" per case, one number per step, in the order of `results`.
void addLossCurves(QJsonObject& document, const std::vector<ValidationResult>& results);

// One metric of one case in both runs.
struct RunComparisonRow {
    QString case_a;    // the case's name in each run (the same, unless both runs have one case)
    QString case_b;
    StoredMetric a;
    StoredMetric b;
};

// The metrics two runs share, case by case: cases are matched by name; two runs of one case
// each are compared whatever their names (two plans validated one after the other). Cases only
// one run has are listed by name in `unmatched`.
struct RunComparison {
    std::vector<RunComparisonRow> rows;
    QStringList unmatched;  // "ZeRO-3 (run 7 only)"
};
RunComparison compareRuns(const StoredRun& a, const StoredRun& b);

} // namespace shardscope
