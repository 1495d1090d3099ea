// CliArgs: the command line split into positional words and --options.
// "--key value", "--key=value" and boolean "--flag" forms; the caller states
// which options take a value, so "--json plan" is never misread.
#pragma once

#include "CommandHelp.h"
#include "FieldError.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardscope::cli {

// Exit codes shared by every subcommand.
enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

// Bad usage: unknown option, missing argument. Exit code 2.
class UsageError : public InputError {
public:
    using InputError::InputError;
};

// "; did you mean plan?" for a mistyped word among `known` (prefixed with `prefix`, e.g.
// "--"), or "" when nothing is close.
std::string didYouMean(const std::string& word, const std::vector<std::string>& known, const std::string& prefix = {});

class CliArgs {
public:
    // `valued`: options that take a value; `flags`: options that do not.
    CliArgs(const std::vector<std::string>& args, const std::set<std::string>& valued,
            const std::set<std::string>& flags);
    // The options of `command` (CommandHelp.h): an unknown one is named with the nearest
    // known ones ("did you mean --objective?") and a pointer to the command's help.
    CliArgs(const std::vector<std::string>& args, const CommandHelp& command);

    const std::vector<std::string>& positional() const { return positional_; }
    bool flag(const std::string& name) const { return flags_.count(name) > 0; }
    std::optional<std::string> value(const std::string& name) const;
    // Numeric option values, checked: "--nodes x" is a UsageError naming --nodes.
    int integer(const std::string& name, int fallback, int lo, int hi) const;
    double number(const std::string& name, double fallback, double lo, double hi) const;

    // The positional words, checked for count: throws UsageError naming `usage`.
    void expectPositional(size_t count, const std::string& usage) const;

private:
    void parse(const std::vector<std::string>& args, const std::set<std::string>& valued,
               const std::set<std::string>& flags, const std::string& command);

    std::vector<std::string> positional_;
    std::set<std::string> flags_;
    std::map<std::string, std::string> values_;
};

} // namespace shardscope::cli
