#include "HostProfileCache.h"

#include <QDateTime>
#include <QFile>
#include <QSysInfo>

namespace shardscope::engine {

std::string cpuModel()
{
    QFile f(QStringLiteral("/proc/cpuinfo"));
    if (f.open(QIODevice::ReadOnly)) {
        for (const QByteArray& line : f.readAll().split('\n'))
            if (line.startsWith("model name")) {
                const qsizetype colon = line.indexOf(':');
                if (colon >= 0)
                    return line.mid(colon + 1).trimmed().toStdString();
            }
    }
    return QSysInfo::currentCpuArchitecture().toStdString();
}

std::string hostId()
{
    QByteArray id = QSysInfo::machineUniqueId();
    if (id.isEmpty())
        id = QSysInfo::machineHostName().toUtf8();
    return id.toStdString() + "/" + cpuModel();
}

std::optional<CachedHostProfile> storedHostProfile(Catalog& catalog, int threads)
{
    const auto stored = catalog.hostProfile(hostId(), threads);
    if (!stored || stored->engine_version != kEngineKernelVersion)
        return std::nullopt;
    CachedHostProfile out;
    DeviceProfile& p = out.profile;
    p.name = "host";
    p.memory_bytes = stored->memory_bytes;
    p.peak_flops_fp32 = stored->gemm_flops_fp32;
    p.peak_flops_bf16 = stored->gemm_flops_fp32;  // bf16 is emulated at the fp32 rate
    p.memory_bytes_per_second = stored->memory_bytes_per_second;
    p.kernel_overhead_s = stored->kernel_overhead_s;
    p.measured = true;
    out.measured_at = stored->measured_at;
    return out;
}

CachedHostProfile hostProfile(Catalog& catalog, int threads, bool remeasure)
{
    if (!remeasure)
        if (auto stored = storedHostProfile(catalog, threads))
            return *stored;
    const std::string id = hostId();
    CachedHostProfile out;
    out.profile = measureHostProfile(threads);
    out.measured_now = true;
    out.measured_at = QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
    HostProfile h;
    h.host_id = id;
    h.cpu = cpuModel();
    h.threads = threads;
    h.gemm_flops_fp32 = out.profile.peak_flops_fp32;
    h.memory_bytes_per_second = out.profile.memory_bytes_per_second;
    h.kernel_overhead_s = out.profile.kernel_overhead_s;
    h.memory_bytes = out.profile.memory_bytes;
    h.measured_at = out.measured_at;
    h.engine_version = kEngineKernelVersion;
    catalog.storeHostProfile(h);
    return out;
}

} // namespace shardscope::engine
