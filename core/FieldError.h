// FieldError: one problem found while validating or reading a spec, named by
// the field path it concerns ("layout.tp", "model.heads"). Validation collects
// every problem instead of stopping at the first, so a user fixes them in one go.
#pragma once

#include <stdexcept>
#include <string>
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
