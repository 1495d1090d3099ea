// "Did you mean" for a mistyped name: the closest known names by edit distance (or
// containing what was typed), so that an error names what the user probably meant.
#pragma once

#include <string>
#include <vector>

namespace shardscope {

// " (did you mean: a, b?)" with up to four of `known`, or "" when none is close.
std::string didYouMean(const std::string& name, const std::vector<std::string>& known);

} // namespace shardscope
