// Why a training run stopped before its last step, as a word a script can test
// ("out_of_memory", "not_finite", "diverged", "error"), next to the message a person reads.
// Thrown by the step loop (TrainingFault), carried by the cluster's WorkerFailure and the
// Measurement's RunError, written to the measurement JSON as error.kind.
#pragma once

#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>

namespace shardscope::engine {

enum class RunFaultKind { OutOfMemory, NotFinite, Diverged, Other };

const char* toString(RunFaultKind k);

class TrainingFault : public std::runtime_error {
public:
    TrainingFault(RunFaultKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    RunFaultKind kind() const { return kind_; }

private:
    RunFaultKind kind_;
};

// The kind of whatever a worker threw: DeviceOutOfMemory, a TrainingFault, or Other.
RunFaultKind faultKindOf(const std::exception& e);

// Divergence, as frameworks' loss-spike guards see it: a loss that climbs far above where the
// run started. A freshly initialised model predicts close to uniformly (loss ~ ln V); a healthy
// run only goes down from there, so a step whose loss is more than `factor` times the larger of
// the first step's loss and ln V has left training (`--lr 10` goes 4.0 -> 5999 in one step).
// factor <= 0 disables the check. Every device sees the same reduced loss, so all of them stop
// at the same step and no collective is left waiting.
class DivergenceGuard {
public:
    DivergenceGuard(double factor, int vocab) : factor_(factor), uniform_(std::log(double(vocab > 1 ? vocab : 2))) {}
    // Throws TrainingFault(Diverged) naming the step and both losses.
    void check(int step, double loss);

private:
    double factor_;
    double uniform_;
    double reference_ = 0;  // max(first loss, ln V), set at the first step
};

} // namespace shardscope::engine
