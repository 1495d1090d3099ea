// FieldError: one problem found while validating or reading a spec, named by
// the field path it concerns ("layout.tp", "model.heads"). Validation collects
// every problem instead of stopping at the first, so a user fixes them in one go.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

struct FieldError {
    std::string path;     // e.g. "layout.tp", "entries[2].hbm_bytes"
    std::string message;  // e.g. "3 does not divide heads 32"

    std::string text() const { return path.empty() ? message : path + ": " + message; }
    bool operator==(const FieldError&) const = default;
};

using FieldErrors = std::vector<FieldError>;

// All messages, one per line.
std::string joinErrors(const FieldErrors& errors);

// Text from the user as an error message shows it: control characters escaped (a NUL would
// end the message wherever it is printed as a C string) and cut after `keep` characters with
// the whole length named, so that a 10 MB value is named, not echoed.
std::string printable(std::string_view text, size_t keep = 60);
// What is wrong with the name of a catalog entry, or empty when nothing is: names are printed
// in every message and table, so they are not empty, not longer than 200 bytes, and have no
// control characters (fuzz_json: a NUL in a model's name cut the messages that named it).
std::string nameProblem(std::string_view name);
// The same in double quotes: "abc", "abcdef... (10000000 bytes)".
std::string quotedValue(std::string_view value, size_t keep = 60);

// Thrown at boundaries for bad user input (a file, a flag, a name).
// The CLI maps it to exit code 2; everything else that fails is exit code 1.
class InputError : public std::runtime_error {
public:
    explicit InputError(const std::string& message) : std::runtime_error(message) {}
    explicit InputError(const FieldErrors& errors)
        : std::runtime_error(joinErrors(errors)), errors_(errors) {}
    const FieldErrors& errors() const { return errors_; }

private:
    FieldErrors errors_;
};

} // namespace shardscope
