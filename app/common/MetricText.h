// A validation run for people: a metric's name in words, its value in its unit, its error,
// and the emulated device. Shared by the Validate page and the report, so both read the same.
#pragma once

#include <QString>

#include <optional>
#include <string>

namespace shardscope {

// "optimizer_bytes" -> "optimizer states", "all_reduce_bytes" -> "all-reduce bytes".
QString metricWords(const std::string& metric);
// In the metric's unit (bytes, seconds, FLOP), SI prefixes, no scientific notation; a value
// that is not finite (a metric not compared: no prediction) is a dash.
QString metricValueText(const std::string& metric, double value);
// predicted / measured - 1 in percent with one decimal ("8.6%", "-2.1%"; "0.0%", never
// "-0.0%"); "n/a" when there is none.
QString relErrorText(const std::optional<double>& error);

// An engine device profile's name ("trainium1:0.000202305", as --device takes it) in words:
// "trainium1 scaled to 0.0202% (memory, FLOP/s, bandwidth)"; other names as they are.
QString deviceText(const QString& profileName);

} // namespace shardscope
