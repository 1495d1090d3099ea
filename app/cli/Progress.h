// Progress of the long commands (validate, calibrate --engine, sweep, compare, report) and
// their clean stop on Ctrl-C.
//
// Progress is one line on stderr, redrawn in place, only when stderr is a terminal and
// --quiet was not given: piped or redirected output (scripts, CI logs, the tests) stays
// exactly what it was. Ctrl-C (SIGINT) or SIGTERM asks the running command to stop at its
// next step; it then writes nothing and fails with Interrupted (exit 130, as a shell reports
// a command killed by SIGINT). A second Ctrl-C kills at once.
#pragma once

#include <atomic>
#include <iosfwd>
#include <stdexcept>
#include <string>

namespace shardscope::cli {

// Exit code of a command stopped by Ctrl-C: 128 + SIGINT.
inline constexpr int kExitInterrupted = 130;

class Interrupted : public std::runtime_error {
public:
    Interrupted() : std::runtime_error("interrupted; nothing was written") {}
};

// Installs the SIGINT/SIGTERM handler (once) and returns the flag it sets, for the
// cancel pointers of the planner's search, the engine calibration and the loops here.
const std::atomic<bool>* interruptFlag();
// Throws Interrupted when Ctrl-C was pressed.
void throwIfInterrupted();

class Progress {
public:
    // Shown when `err` is the process's stderr, that is a terminal, and not `quiet`.
    Progress(std::ostream& err, bool quiet);
    ~Progress();  // clears the line
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    bool shown() const { return shown_; }
    // "[3/17] dp=2,tp=2 ..." : replaces the line; cut to the terminal's width.
    void update(const std::string& text);
    void clear();

private:
    std::ostream& err_;
    bool shown_ = false;
    bool drawn_ = false;
    int columns_ = 80;
};

} // namespace shardscope::cli
