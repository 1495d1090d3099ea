#include "Progress.h"

#include <csignal>
#include <iostream>

#include <sys/ioctl.h>
#include <unistd.h>

namespace shardscope::cli {

namespace {

std::atomic<bool> gInterrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler sets it");

extern "C" void onInterrupt(int signal)
{
    if (gInterrupted.exchange(true)) {
        // The second Ctrl-C: the user does not want to wait for the current step.
        std::signal(signal, SIG_DFL);
        std::raise(signal);
    }
}

} // namespace

const std::atomic<bool>* interruptFlag()
{
    static const bool installed = [] {
        struct sigaction action {};
        action.sa_handler = onInterrupt;
        sigemptyset(&action.sa_mask);
        sigaction(SIGINT, &action, nullptr);
        sigaction(SIGTERM, &action, nullptr);
        return true;
    }();
    (void)installed;
    return &gInterrupted;
}

void throwIfInterrupted()
{
    if (interruptFlag()->load())
        throw Interrupted();
}

Progress::Progress(std::ostream& err, bool quiet) : err_(err)
{
    shown_ = !quiet && &err == &std::cerr && isatty(STDERR_FILENO) == 1;
    if (shown_) {
        winsize size{};
        if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
            columns_ = size.ws_col;
    }
}

Progress::~Progress() { clear(); }

void Progress::update(const std::string& text)
{
    if (!shown_)
        return;
    // One column short of the width, so that the terminal never wraps the line.
    const size_t width = size_t(columns_ > 1 ? columns_ - 1 : 1);
    err_ << "\r\033[K" << (text.size() > width ? text.substr(0, width) : text) << std::flush;
    drawn_ = true;
}

void Progress::clear()
{
    if (shown_ && drawn_)
        err_ << "\r\033[K" << std::flush;
    drawn_ = false;
}

} // namespace shardscope::cli
