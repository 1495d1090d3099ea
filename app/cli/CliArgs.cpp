#include "CliArgs.h"
#include "EditDistance.h"

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
            if (inlineValue) {
                values_[name] = *inlineValue;
            } else if (i + 1 < args.size()) {
                values_[name] = args[++i];
            } else {
                throw UsageError("option --" + name + " needs a value");
            }
        } else if (flags.count(name)) {
            if (inlineValue)
                throw UsageError("option --" + name + " takes no value");
            flags_.insert(name);
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

int CliArgs::integer(const std::string& name, int fallback, int lo, int hi) const
{
    const double v = number(name, fallback, lo, hi);
    if (v != std::floor(v))
        throw UsageError("--" + name + ": " + *value(name) + " is not an integer");
    return int(v);
}

double CliArgs::number(const std::string& name, double fallback, double lo, double hi) const
{
    const auto text = value(name);
    if (!text)
        return fallback;
    char* end = nullptr;
    const double v = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || !std::isfinite(v))
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
