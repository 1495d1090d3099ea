#include "HostMeasurement.h"

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

HostProfile hostProfileRecord(const DeviceProfile& measured, int threads, const std::string& measured_at)
{
    HostProfile h;
    h.host_id = hostId();
    h.cpu = cpuModel();
    h.threads = threads;
    h.gemm_flops_fp32 = measured.peak_flops_fp32;
    h.memory_bytes_per_second = measured.memory_bytes_per_second;
    h.kernel_overhead_s = measured.kernel_overhead_s;
    h.memory_bytes = measured.memory_bytes;
    h.measured_at = measured_at;
    h.engine_version = kEngineKernelVersion;
    return h;
}

DeviceProfile deviceProfileOf(const HostProfile& record)
{
    DeviceProfile p;
    p.name = "host";
    p.memory_bytes = record.memory_bytes;
    p.peak_flops_fp32 = record.gemm_flops_fp32;
    p.peak_flops_bf16 = record.gemm_flops_fp32;  // bf16 is emulated at the fp32 rate
    p.memory_bytes_per_second = record.memory_bytes_per_second;
    p.kernel_overhead_s = record.kernel_overhead_s;
    p.measured = true;
    return p;
}

} // namespace shardscope::engine
