#include "EditDistance.h"

#include <algorithm>
#include <utility>

namespace shardscope {

int editDistance(const std::string& a, const std::string& b)
{
    std::vector<int> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
        row[j] = int(j);
    for (size_t i = 1; i <= a.size(); ++i) {
        int diagonal = row[0];
        row[0] = int(i);
        for (size_t j = 1; j <= b.size(); ++j) {
            const int up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

std::vector<std::string> nearMatches(const std::string& word, const std::vector<std::string>& candidates,
                                     int maxDistance, size_t limit)
{
    std::vector<std::pair<int, std::string>> scored;
    for (const std::string& c : candidates) {
        const int d = editDistance(word, c);
        // A prefix or part typed ("--node" for "--node-type"), when long enough to mean something.
        const bool overlap = word.size() >= 3 && c.find(word) != std::string::npos;
        if (d <= maxDistance || overlap)
            scored.emplace_back(d, c);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < scored.size() && i < limit; ++i)
        out.push_back(scored[i].second);
    return out;
}

} // namespace shardscope
