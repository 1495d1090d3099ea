#include "RunFault.h"

#include "Device.h"

#include <algorithm>
#include <cstdio>

namespace shardscope::engine {

const char* toString(RunFaultKind k)
{
    switch (k) {
    case RunFaultKind::OutOfMemory: return "out_of_memory";
    case RunFaultKind::NotFinite: return "not_finite";
    case RunFaultKind::Diverged: return "diverged";
    case RunFaultKind::Other: break;
    }
    return "error";
}

RunFaultKind faultKindOf(const std::exception& e)
{
    if (dynamic_cast<const DeviceOutOfMemory*>(&e))
        return RunFaultKind::OutOfMemory;
    if (const auto* f = dynamic_cast<const TrainingFault*>(&e))
        return f->kind();
    return RunFaultKind::Other;
}

void DivergenceGuard::check(int step, double loss)
{
    if (!(factor_ > 0))
        return;
    if (reference_ == 0)
        reference_ = std::max(loss, uniform_);
    if (!(loss > factor_ * reference_))
        return;
    char text[320];
    std::snprintf(text, sizeof text,
                  "step %d: the loss %.4g is more than %gx the run's start (%.4g: the larger of the first step's loss "
                  "and ln V = %.4g, a uniform guess): the run diverged; a lower learning rate usually helps",
                  step, loss, factor_, reference_, uniform_);
    throw TrainingFault(RunFaultKind::Diverged, text);
}

} // namespace shardscope::engine
