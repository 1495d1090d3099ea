#include "NameSuggestions.h"
#include "EditDistance.h"

namespace shardscope {

std::string didYouMean(const std::string& name, const std::vector<std::string>& known)
{
    // Three edits cover a typo and a missing suffix ("llama-3-8" for "llama-3-8b") without
    // suggesting unrelated short names.
    constexpr int kMaxEdits = 3;
    constexpr size_t kMaxSuggestions = 4;
    std::string out;
    for (const std::string& near : nearMatches(name, known, kMaxEdits, kMaxSuggestions))
        out += (out.empty() ? std::string() : std::string(", ")) + near;
    return out.empty() ? std::string() : " (did you mean: " + out + "?)";
}

} // namespace shardscope
