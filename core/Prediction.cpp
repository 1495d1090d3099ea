#include "Prediction.h"

namespace shardscope {

const char* toString(Infeasibility reason)
{
    switch (reason) {
    case Infeasibility::None: return "";
    case Infeasibility::OutOfMemory: return "out of memory";
    case Infeasibility::MissingHardwareFigure: return "a hardware figure it needs is not published";
    }
    return "?";
}

} // namespace shardscope
