// Levenshtein distance and the "did you mean" candidates it picks, for mistyped
// names: command-line options and commands, catalog entries.
#pragma once

#include <string>
#include <vector>

namespace shardscope {

int editDistance(const std::string& a, const std::string& b);

// The candidates closest to `word` (at most `maxDistance` edits, or containing it /
// contained in it), nearest first, at most `limit` of them.
std::vector<std::string> nearMatches(const std::string& word, const std::vector<std::string>& candidates,
                                     int maxDistance, size_t limit = 3);

} // namespace shardscope
