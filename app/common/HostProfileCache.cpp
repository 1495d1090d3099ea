#include "HostProfileCache.h"
#include "HostMeasurement.h"

#include <QDateTime>

namespace shardscope {

std::optional<CachedHostProfile> storedHostProfile(const RunStore& runs, int threads)
{
    const auto stored = runs.hostProfile(engine::hostId(), threads);
    if (!stored || stored->engine_version != engine::kEngineKernelVersion)
        return std::nullopt;
    return CachedHostProfile{engine::deviceProfileOf(*stored), false, stored->measured_at};
}

CachedHostProfile cachedHostProfile(RunStore& runs, int threads, bool remeasure)
{
    if (!remeasure)
        if (auto stored = storedHostProfile(runs, threads))
            return *stored;
    CachedHostProfile out;
    out.profile = engine::measureHostProfile(threads);
    out.measured_now = true;
    out.measured_at = QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
    runs.storeHostProfile(engine::hostProfileRecord(out.profile, threads, out.measured_at));
    return out;
}

} // namespace shardscope
