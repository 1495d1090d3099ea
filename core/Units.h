// Quantities written the way hardware sources write them ("820 GiB/s",
// "800 Gbps", "190 TFLOP/s", "900 GB/s bidi") parsed into SI base units,
// and formatted back for people. Catalog files keep the source's unit so that
// each figure can be checked against its source by eye.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shardscope {

enum class QuantityKind { Bytes, BytesPerSecond, FlopsPerSecond, Seconds };

struct ParsedQuantity {
    double value = 0.0;     // SI base unit of the kind (bytes, bytes/s, FLOP/s, s)
    std::string error;      // empty when parsing succeeded
};

// "32 GiB" -> 34359738368; "800 Gbps" -> 1e11; "900 GB/s bidi" -> 4.5e11 (one direction).
ParsedQuantity parseQuantity(const std::string& text, QuantityKind kind);

// Human-readable, with binary prefixes for bytes and decimal for rates:
// formatBytes(34359738368) == "32.0 GiB", formatRate(1.9e14, "FLOP/s") == "190 TFLOP/s".
std::string formatBytes(double bytes);
std::string formatSi(double value, const std::string& unit, int significant = 3);
std::string formatCount(std::int64_t n);           // 124439808 -> "124,439,808"
std::string formatDuration(double seconds);        // 93784 -> "1.09 d"

} // namespace shardscope
