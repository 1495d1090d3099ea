#include "NameSuggestions.h"

#include <algorithm>
#include <utility>

namespace shardscope {

namespace {

// Levenshtein distance.
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

} // namespace

std::string didYouMean(const std::string& name, const std::vector<std::string>& known)
{
    // Three edits cover a typo and a missing suffix ("llama-3-8" for "llama-3-8b") without
    // suggesting unrelated short names.
    constexpr int kMaxEdits = 3;
    constexpr size_t kMaxSuggestions = 4;
    std::vector<std::pair<int, std::string>> scored;
    for (const std::string& k : known) {
        const int d = editDistance(name, k);
        if (d <= kMaxEdits || k.find(name) != std::string::npos)
            scored.emplace_back(d, k);
    }
    std::sort(scored.begin(), scored.end());
    std::string out;
    for (size_t i = 0; i < scored.size() && i < kMaxSuggestions; ++i)
        out += (i ? ", " : "") + scored[i].second;
    return out.empty() ? std::string() : " (did you mean: " + out + "?)";
}

} // namespace shardscope
