#include "KeyValues.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace shardscope {

std::string trimmedSpaces(std::string_view s)
{
    while (!s.empty() && s.front() == ' ')
        s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ')
        s.remove_suffix(1);
    return std::string(s);
}

bool parseWholeInt(std::string_view text, int& out)
{
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return !text.empty() && ec == std::errc() && ptr == end;
}

std::vector<std::pair<std::string, std::string>> splitKeyValues(const std::string& text, const std::string& path,
                                                                FieldErrors& errors)
{
    std::vector<std::pair<std::string, std::string>> out;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ',')) {
        item = trimmedSpaces(item);
        if (item.empty())
            continue;
        const size_t eq = item.find('=');
        if (eq == std::string::npos) {
            errors.push_back({path, quotedValue(item) + " is not key=value"});
            continue;
        }
        std::string key = trimmedSpaces(std::string_view(item).substr(0, eq));
        std::string value = trimmedSpaces(std::string_view(item).substr(eq + 1));
        // "tp=2,tp=4" is ambiguous: refused rather than letting the last one win.
        const auto same = std::find_if(out.begin(), out.end(), [&](const auto& kv) { return kv.first == key; });
        if (same != out.end()) {
            errors.push_back({path + "." + printable(key), "given twice (" + quotedValue(key + "=" + same->second) +
                                                                " and " + quotedValue(key + "=" + value) +
                                                                "); give each key once"});
            continue;
        }
        out.emplace_back(std::move(key), std::move(value));
    }
    return out;
}

} // namespace shardscope
