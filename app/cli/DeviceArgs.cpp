#include "DeviceArgs.h"
#include "CliArgs.h"

#include <cstdlib>

namespace shardscope::cli {

engine::DeviceProfile chipProfileFromArg(const std::string& text, const SpecLookup& specs, double defaultScale)
{
    const size_t colon = text.find(':');
    double scale = defaultScale;
    if (colon != std::string::npos) {
        const std::string number = text.substr(colon + 1);
        char* end = nullptr;
        scale = std::strtod(number.c_str(), &end);
        if (number.empty() || *end != '\0' || !(scale > 0 && scale <= 1))
            throw UsageError("--device: scale \"" + number + "\" must be a number in (0, 1] (e.g. trainium1:0.001)");
    }
    return engine::profileFromChip(specs.chip(text.substr(0, colon)), scale);
}

} // namespace shardscope::cli
