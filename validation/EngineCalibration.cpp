#include "EngineCalibration.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace shardscope {

EngineCalibration calibrateOnEngine(const EngineCalibrationRequest& request, const std::atomic<bool>* cancel,
                                    const CalibrationProgress& progress)
{
    EngineCalibration out;
    out.host = request.host ? *request.host : emulationHost(engine::measureHostProfile(1));
    const std::vector<ValidationCase> suite = validationSuite(request.device);
    auto cancelled = [&] { return cancel && cancel->load(); };
    for (size_t i = 0; i < suite.size() && !cancelled(); ++i) {
        if (progress)
            progress(int(i), int(suite.size()), suite[i].name);
        ValidationCase c = suite[i];
        c.host = out.host;
        out.results.push_back(runValidation(c, request.start, cancel));
    }
    out.complete = !cancelled() && out.results.size() == suite.size();
    if (out.complete)
        out.fit = fitOnEngine(out.results, request.start, request.holdout);
    return out;
}

std::string engineProfileName()
{
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm local{};
    localtime_r(&now, &local);
    char name[64];
    std::strftime(name, sizeof name, "engine-%Y%m%d-%H%M%S", &local);
    return name;
}

std::string calibrationSummary(const EngineFit& f)
{
    char line[256];
    std::snprintf(line, sizeof line, "held-out device step time %.1f%% -> %.1f%%, wall %.1f%% -> %.1f%% (median)",
                  100 * f.holdout_before, 100 * f.holdout_after, 100 * f.wall.holdout_before.median,
                  100 * f.wall.holdout_after.median);
    return line;
}

} // namespace shardscope
