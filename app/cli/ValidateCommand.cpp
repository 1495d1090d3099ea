// shardscope-cli validate: the planner's prediction against a real engine run of the
// same case, metric by metric (planner/validation/Validation.h).
//   validate --suite [--device NAME[:scale]] [--json]
#include "Catalog.h"
#include "CliArgs.h"
#include "Commands.h"
#include "Validation.h"

#include <QJsonDocument>

#include <cmath>
#include <cstdio>
#include <ostream>

namespace shardscope::cli {

namespace {

engine::DeviceProfile suiteProfile(const Catalog& catalog, const std::string& text)
{
    const size_t colon = text.find(':');
    const std::string name = text.substr(0, colon);
    double scale = 1e-3;
    if (colon != std::string::npos) {
        char* end = nullptr;
        scale = std::strtod(text.c_str() + colon + 1, &end);
        if (*end != '\0' || !(scale > 0 && scale <= 1))
            throw UsageError("--device: scale must be a number in (0, 1] (e.g. trainium1:0.001)");
    }
    return engine::profileFromChip(catalog.chip(name), scale);
}

std::string percent(double x)
{
    if (!std::isfinite(x))
        return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
    return buf;
}

} // namespace

int runValidate(const std::vector<std::string>& args, Context& ctx)
{
    const char* usage = "shardscope-cli validate --suite [--device NAME[:scale]] [--json]";
    const CliArgs a(args, {"device"}, {"suite", "json"});
    a.expectPositional(0, usage);
    if (!a.flag("suite"))
        throw UsageError(std::string("give --suite; usage: ") + usage);
    Catalog catalog(ctx.db_path);
    const engine::DeviceProfile profile = suiteProfile(catalog, a.value("device").value_or("trainium1:0.001"));

    std::vector<ValidationResult> results;
    for (const ValidationCase& c : validationSuite(profile))
        results.push_back(runValidation(c));

    if (a.flag("json")) {
        ctx.out << QJsonDocument(validationDocument(results)).toJson(QJsonDocument::Indented).toStdString();
        return kExitOk;
    }
    char line[256];
    std::snprintf(line, sizeof line, "%-30s", "case");
    ctx.out << line;
    for (const std::string& metric : validationMetrics()) {
        std::snprintf(line, sizeof line, " %12.12s", metric.c_str());
        ctx.out << line;
    }
    ctx.out << "\n";
    for (const ValidationResult& r : results) {
        std::snprintf(line, sizeof line, "%-30.30s", r.c.name.c_str());
        ctx.out << line;
        if (!r.error.empty()) {
            ctx.out << " " << r.error << "\n";
            continue;
        }
        for (const std::string& metric : validationMetrics()) {
            const MetricComparison* m = r.metric(metric);
            std::snprintf(line, sizeof line, " %12s", m ? percent(m->rel_error).c_str() : "-");
            ctx.out << line;
        }
        ctx.out << "\n";
    }
    ctx.out << "\nerror of the prediction (predicted / measured - 1); summary over the cases:\n";
    for (const std::string& metric : validationMetrics()) {
        const MetricSummary s = summarizeMetric(results, metric);
        std::snprintf(line, sizeof line, "  %-20s median |error| %6.1f%%, worst %6.1f%% (%d cases)\n", metric.c_str(),
                      100 * s.median_rel_error, 100 * s.worst_rel_error, s.cases);
        ctx.out << line;
    }
    ctx.out << "device: " << profile.name << "\n";
    return kExitOk;
}

} // namespace shardscope::cli
