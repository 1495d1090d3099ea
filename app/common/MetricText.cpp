#include "MetricText.h"
#include "Units.h"

#include <QObject>

#include <cmath>

namespace shardscope {

QString metricWords(const std::string& metric)
{
    static const std::pair<const char*, const char*> words[] = {
        {"weights_bytes", QT_TRANSLATE_NOOP("MetricText", "weights")},
        {"gradients_bytes", QT_TRANSLATE_NOOP("MetricText", "gradients")},
        {"optimizer_bytes", QT_TRANSLATE_NOOP("MetricText", "optimizer states")},
        {"activations_bytes", QT_TRANSLATE_NOOP("MetricText", "activations")},
        {"flops", QT_TRANSLATE_NOOP("MetricText", "FLOPs")},
        {"matmul_flops", QT_TRANSLATE_NOOP("MetricText", "matmul FLOPs")},
        {"comm_bytes", QT_TRANSLATE_NOOP("MetricText", "collective bytes")},
        {"all_reduce_bytes", QT_TRANSLATE_NOOP("MetricText", "all-reduce bytes")},
        {"reduce_scatter_bytes", QT_TRANSLATE_NOOP("MetricText", "reduce-scatter bytes")},
        {"all_gather_bytes", QT_TRANSLATE_NOOP("MetricText", "all-gather bytes")},
        {"send_recv_bytes", QT_TRANSLATE_NOOP("MetricText", "send/recv bytes")},
        {"device_step_time_s", QT_TRANSLATE_NOOP("MetricText", "device step time")},
        {"wall_step_time_s", QT_TRANSLATE_NOOP("MetricText", "wall step time")},
        {"all_to_all_bytes", QT_TRANSLATE_NOOP("MetricText", "all-to-all bytes")},
        {"activations_bytes_at_measured_load", QT_TRANSLATE_NOOP("MetricText", "activations at the measured MoE load")},
        {"device_step_time_s_at_measured_load",
         QT_TRANSLATE_NOOP("MetricText", "device step time at the measured MoE load")},
    };
    for (const auto& [key, text] : words)
        if (metric == key)
            return QObject::tr(text);
    return QString::fromStdString(metric);
}

QString metricValueText(const std::string& metric, double value)
{
    if (!std::isfinite(value))
        return QStringLiteral("—");  // not compared: no prediction
    if (metric.find("bytes") != std::string::npos)
        return QString::fromStdString(formatBytes(value));
    if ((metric.size() > 2 && metric.compare(metric.size() - 2, 2, "_s") == 0) ||
        metric.find("_time_s_") != std::string::npos)  // (device_step_time_s_at_measured_load)
        return QString::fromStdString(formatDuration(value));
    return QString::fromStdString(formatSi(value, "FLOP"));
}

QString relErrorText(const std::optional<double>& error)
{
    if (!error || !std::isfinite(*error))
        return QObject::tr("n/a");
    // Rounded first: -0.00001 prints as "-0.0%" otherwise.
    const double percent = std::round(1000 * *error) / 10;
    return QStringLiteral("%1%").arg(percent == 0 ? 0.0 : percent, 0, 'f', 1);
}

QString deviceText(const QString& profileName)
{
    const qsizetype colon = profileName.lastIndexOf(QLatin1Char(':'));
    bool ok = false;
    const double scale = colon > 0 ? profileName.mid(colon + 1).toDouble(&ok) : 0.0;
    if (!ok || !(scale > 0 && scale < 1))
        return profileName;
    // The factor profileFromChip applies to capacity, FLOP/s and bandwidth (engine/Device.h).
    return QObject::tr("%1 scaled to %2% (memory, FLOP/s, bandwidth)")
        .arg(profileName.left(colon), QString::number(100 * scale, 'g', 3));
}

} // namespace shardscope
