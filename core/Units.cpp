#include "Units.h"
#include "FieldError.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace shardscope {

namespace {

struct UnitFactor {
    std::string_view unit;
    QuantityKind kind;
    double factor;
};

constexpr double kKi = 1024.0;
constexpr std::array kUnits{
    UnitFactor{"B", QuantityKind::Bytes, 1.0},
    UnitFactor{"KB", QuantityKind::Bytes, 1e3},
    UnitFactor{"MB", QuantityKind::Bytes, 1e6},
    UnitFactor{"GB", QuantityKind::Bytes, 1e9},
    UnitFactor{"TB", QuantityKind::Bytes, 1e12},
    UnitFactor{"KiB", QuantityKind::Bytes, kKi},
    UnitFactor{"MiB", QuantityKind::Bytes, kKi * kKi},
    UnitFactor{"GiB", QuantityKind::Bytes, kKi * kKi * kKi},
    UnitFactor{"TiB", QuantityKind::Bytes, kKi * kKi * kKi * kKi},
    UnitFactor{"B/s", QuantityKind::BytesPerSecond, 1.0},
    UnitFactor{"KB/s", QuantityKind::BytesPerSecond, 1e3},
    UnitFactor{"MB/s", QuantityKind::BytesPerSecond, 1e6},
    UnitFactor{"GB/s", QuantityKind::BytesPerSecond, 1e9},
    UnitFactor{"GBps", QuantityKind::BytesPerSecond, 1e9},
    UnitFactor{"TB/s", QuantityKind::BytesPerSecond, 1e12},
    UnitFactor{"GiB/s", QuantityKind::BytesPerSecond, kKi * kKi * kKi},
    UnitFactor{"TiB/s", QuantityKind::BytesPerSecond, kKi * kKi * kKi * kKi},
    // Network figures are quoted in bits per second.
    UnitFactor{"Mbps", QuantityKind::BytesPerSecond, 1e6 / 8},
    UnitFactor{"Gbps", QuantityKind::BytesPerSecond, 1e9 / 8},
    UnitFactor{"Gb/s", QuantityKind::BytesPerSecond, 1e9 / 8},
    UnitFactor{"Tbps", QuantityKind::BytesPerSecond, 1e12 / 8},
    UnitFactor{"Tb/s", QuantityKind::BytesPerSecond, 1e12 / 8},
    UnitFactor{"FLOP/s", QuantityKind::FlopsPerSecond, 1.0},
    UnitFactor{"GFLOP/s", QuantityKind::FlopsPerSecond, 1e9},
    UnitFactor{"TFLOP/s", QuantityKind::FlopsPerSecond, 1e12},
    UnitFactor{"PFLOP/s", QuantityKind::FlopsPerSecond, 1e15},
    UnitFactor{"s", QuantityKind::Seconds, 1.0},
    UnitFactor{"ms", QuantityKind::Seconds, 1e-3},
    UnitFactor{"us", QuantityKind::Seconds, 1e-6},
    UnitFactor{"ns", QuantityKind::Seconds, 1e-9},
};

const char* kindName(QuantityKind kind)
{
    switch (kind) {
    case QuantityKind::Bytes: return "a size in bytes (e.g. \"32 GiB\")";
    case QuantityKind::BytesPerSecond: return "a bandwidth (e.g. \"820 GiB/s\", \"800 Gbps\")";
    case QuantityKind::FlopsPerSecond: return "a compute rate (e.g. \"190 TFLOP/s\")";
    case QuantityKind::Seconds: return "a duration (e.g. \"5 us\")";
    }
    return "a quantity";
}

std::string trim(std::string_view s)
{
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
        ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
        --e;
    return std::string(s.substr(b, e - b));
}

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The length of the decimal number at the start of `s` ("-1.5e3 GiB" -> 6), 0 when there
// is none. Only what catalog sources write: digits, a fraction, an exponent. strtod alone
// would also read "0x10" as 16 and "+8", "infinity" or "nan" as numbers.
size_t decimalLength(std::string_view s)
{
    size_t i = 0;
    auto digits = [&] {
        const size_t start = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9')
            ++i;
        return i - start;
    };
    if (i < s.size() && s[i] == '-')
        ++i;
    size_t mantissa = digits();
    if (i < s.size() && s[i] == '.') {
        ++i;
        mantissa += digits();
    }
    if (mantissa == 0)
        return 0;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        const size_t mark = i;
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-'))
            ++i;
        if (digits() == 0)
            i = mark;  // "5 E" is not an exponent: leave it to the unit
    }
    // "0x10": a hexadecimal prefix after a leading zero is not a decimal number.
    if (i < s.size() && (s[i] == 'x' || s[i] == 'X'))
        return 0;
    return i;
}

} // namespace

ParsedQuantity parseQuantity(const std::string& input, QuantityKind kind)
{
    ParsedQuantity out;
    std::string text = trim(input);
    if (text.size() != input.size()) {
        out.error = quotedValue(input) + " has spaces around it: write the quantity alone, e.g. \"32 GiB\"";
        return out;
    }
    double directionFactor = 1.0;
    if (endsWith(text, " bidi")) {
        if (kind != QuantityKind::BytesPerSecond) {
            out.error = "\"bidi\" only applies to a bandwidth";
            return out;
        }
        // Both directions added by the source; the model works per direction.
        directionFactor = 0.5;
        text = trim(text.substr(0, text.size() - 5));
    } else if (endsWith(text, " uni")) {
        text = trim(text.substr(0, text.size() - 4));
    }

    const size_t length = decimalLength(text);
    if (length == 0) {
        const std::string lower = [&] {
            std::string l;
            for (char c : text.substr(0, 3))
                l += char(std::tolower(static_cast<unsigned char>(c)));
            return l;
        }();
        out.error = lower == "inf" || lower == "nan" ? quotedValue(input) + " is not a finite number"
                                                     : quotedValue(input) + " is not " + kindName(kind) +
                                                           " (a decimal number, then a unit)";
        return out;
    }
    const double number = std::strtod(text.substr(0, length).c_str(), nullptr);
    const std::string unit = trim(std::string_view(text).substr(length));
    double factor = 0.0;
    if (unit.empty()) {
        factor = 1.0;  // plain number: already in base units
    } else {
        for (const UnitFactor& u : kUnits) {
            if (u.kind == kind && u.unit == unit) {
                factor = u.factor;
                break;
            }
        }
    }
    if (factor == 0.0) {
        out.error = "unknown unit " + quotedValue(unit) + " in " + quotedValue(input) + ": expected " + kindName(kind);
        return out;
    }
    if (!std::isfinite(number)) {
        out.error = quotedValue(input) + " is not a finite number";
        return out;
    }
    out.value = number * factor * directionFactor;
    return out;
}

std::string formatSi(double value, const std::string& unit, int significant)
{
    static constexpr std::array<const char*, 9> prefixes{"", "K", "M", "G", "T", "P", "E", "Z", "Y"};
    size_t i = 0;
    double v = value;
    while (std::fabs(v) >= 1000.0 && i + 1 < prefixes.size()) {
        v /= 1000.0;
        ++i;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g %s%s", significant, v, prefixes[i], unit.c_str());
    return buf;
}

std::string formatBytes(double bytes)
{
    static constexpr std::array<const char*, 6> units{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t i = 0;
    double v = bytes;
    while (std::fabs(v) >= 1024.0 && i + 1 < units.size()) {
        v /= 1024.0;
        ++i;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s" : "%.1f %s", v, units[i]);
    return buf;
}

std::string formatCount(std::int64_t n)
{
    std::string digits = std::to_string(n < 0 ? -n : n);
    std::string out;
    const int len = static_cast<int>(digits.size());
    for (int i = 0; i < len; ++i) {
        if (i > 0 && (len - i) % 3 == 0)
            out += ',';
        out += digits[static_cast<size_t>(i)];
    }
    return n < 0 ? "-" + out : out;
}

std::string formatDuration(double seconds)
{
    if (seconds < 0)
        return std::string("-").append(formatDuration(-seconds));
    char buf[64];
    if (seconds == 0)
        return "0 s";  // nothing, not "0 us"
    if (seconds < 1e-3)
        std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
    else if (seconds < 1.0)
        std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
    else if (seconds < 120.0)
        std::snprintf(buf, sizeof buf, "%.3g s", seconds);
    else if (seconds < 2 * 3600.0)
        std::snprintf(buf, sizeof buf, "%.3g min", seconds / 60.0);
    else if (seconds < 2 * 86400.0)
        std::snprintf(buf, sizeof buf, "%.3g h", seconds / 3600.0);
    else if (seconds < 999.5 * 86400.0)
        std::snprintf(buf, sizeof buf, "%.3g d", seconds / 86400.0);
    else  // no scientific notation for long runs ("1150 d", not "1.15e+03 d")
        std::snprintf(buf, sizeof buf, "%.0f d", seconds / 86400.0);
    return buf;
}

} // namespace shardscope
