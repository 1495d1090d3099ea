#include "CliArgs.h"
#include "EditDistance.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardscope::cli {

std::string didYouMean(const std::string& word, const std::vector<std::string>& known, const std::string& prefix)
{
    // One edit in a short word already changes its meaning ("--top" vs "--tp").
    const std::vector<std::string> near = nearMatches(word, known, word.size() <= 4 ? 1 : 2);
    std::string out;
    for (size_t k = 0; k < near.size(); ++k)
        out += (k ? ", " : "; did you mean ") + prefix + near[k];
    return near.empty() ? out : out + "?";
}

CliArgs::CliArgs(const std::vector<std::string>& args, const std::set<std::string>& valued,
                 const std::set<std::string>& flags)
{
    parse(args, valued, flags, {});
}

CliArgs::CliArgs(const std::vector<std::string>& args, const CommandHelp& command)
{
    std::set<std::string> valued, flags;
    for (const OptionHelp& o : command.options)
        (o.flag() ? flags : valued).insert(o.name);
    parse(args, valued, flags, command.name);
}

void CliArgs::parse(const std::vector<std::string>& args, const std::set<std::string>& valued,
                    const std::set<std::string>& flags, const std::string& command)
{
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a.rfind("--", 0) != 0 || a == "--") {
            positional_.push_back(a);
            continue;
        }
        std::string name = a.substr(2);
        std::optional<std::string> inlineValue;
        if (const size_t eq = name.find('='); eq != std::string::npos) {
            inlineValue = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        if (valued.count(name)) {
            std::string value;
            if (inlineValue)
                value = *inlineValue;
            else if (i + 1 < args.size())
                value = args[++i];
            else
                throw UsageError("option --" + name + " needs a value");
            // "--nodes 1 --nodes 2" is ambiguous: refused rather than letting the last one win.
            if (const auto seen = values_.find(name); seen != values_.end())
                throw UsageError("option --" + name + " given twice (\"" + seen->second + "\" and \"" + value +
                                 "\"); give each option once");
            values_[name] = std::move(value);
        } else if (flags.count(name)) {
            if (inlineValue)
                throw UsageError("option --" + name + " takes no value");
            if (!flags_.insert(name).second)
                throw UsageError("option --" + name + " given twice; give each option once");
        } else {
            std::vector<std::string> known(valued.begin(), valued.end());
            known.insert(known.end(), flags.begin(), flags.end());
            std::string message = "unknown option --" + name;
            if (!command.empty())
                message += " for " + command;
            const std::string near = didYouMean(name, known, "--");
            message += near;
            if (!command.empty())
                message += " (see shardscope-cli " + command + " --help)";
            else if (near.empty() && !known.empty())
                message += " (this command takes: --" + [&] {
                    std::string list;
                    for (size_t k = 0; k < known.size(); ++k)
                        list += (k ? ", --" : "") + known[k];
                    return list;
                }() + ")";
            throw UsageError(message);
        }
    }
}

std::optional<std::string> CliArgs::value(const std::string& name) const
{
    auto it = values_.find(name);
    if (it == values_.end())
        return std::nullopt;
    return it->second;
}

namespace {

// The whole text, as written: decimal digits with an optional '-' (integers), or a decimal
// number with an optional fraction and exponent. Refused: spaces, '+', hexadecimal ("0x10" is
// not 16 here), "inf", "nan", anything after the number.
template <class N>
bool parseWhole(const std::string& text, N& out)
{
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return !text.empty() && ec == std::errc() && ptr == end;
}

} // namespace

int CliArgs::integer(const std::string& name, int fallback, int lo, int hi) const
{
    const auto text = value(name);
    if (!text)
        return fallback;
    long long v = 0;
    if (!parseWhole(*text, v))
        throw UsageError("--" + name + ": \"" + *text + "\" is not an integer (decimal digits, e.g. --" + name +
                         " " + std::to_string(std::max(lo, 1)) + ")");
    if (v < lo || v > hi)
        throw UsageError("--" + name + ": " + *text + " is out of range [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
    return int(v);
}

double CliArgs::number(const std::string& name, double fallback, double lo, double hi) const
{
    const auto text = value(name);
    if (!text)
        return fallback;
    double v = 0;
    if (!parseWhole(*text, v) || !std::isfinite(v))
        throw UsageError("--" + name + ": \"" + *text + "\" is not a number");
    if (v < lo || v > hi) {
        char range[96];
        std::snprintf(range, sizeof range, "[%.10g, %.10g]", lo, hi);
        throw UsageError("--" + name + ": " + *text + " is out of range " + range);
    }
    return v;
}

void CliArgs::expectPositional(size_t count, const std::string& usage) const
{
    if (positional_.size() < count)
        throw UsageError("missing argument; usage: " + usage);
    if (positional_.size() > count)
        throw UsageError("unexpected argument \"" + positional_[count] + "\"; usage: " + usage);
}

} // namespace shardscope::cli
