#include "FieldError.h"

#include <cstdio>

namespace shardscope {

std::string joinErrors(const FieldErrors& errors)
{
    std::string out;
    for (const FieldError& e : errors) {
        if (!out.empty())
            out += '\n';
        out += e.text();
    }
    return out;
}

std::string printable(std::string_view text, size_t keep)
{
    std::string out;
    size_t used = 0;
    for (; used < text.size() && out.size() < keep; ++used) {
        const unsigned char c = static_cast<unsigned char>(text[used]);
        if (c < 0x20 || c == 0x7f) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
            out += escaped;
        } else {
            out += char(c);
        }
    }
    // Never end inside a UTF-8 sequence: drop continuation bytes and their lead byte.
    if (used < text.size()) {
        while (used > 0 && (static_cast<unsigned char>(text[used]) & 0xc0) == 0x80) {
            --used;
            out.pop_back();
        }
        out += "... (" + std::to_string(text.size()) + " bytes)";
    }
    return out;
}

std::string nameProblem(std::string_view name)
{
    constexpr size_t kMaxName = 200;
    if (name.empty())
        return "must not be empty";
    if (name.size() > kMaxName)
        return quotedValue(name) + " is longer than " + std::to_string(kMaxName) + " bytes";
    for (size_t i = 0; i < name.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(name[i]);
        if (c < 0x20 || c == 0x7f)
            return quotedValue(name) + " contains a control character at byte " + std::to_string(i);
    }
    return {};
}

std::string quotedValue(std::string_view value, size_t keep)
{
    // Appended rather than `"\"" + printable(...)`, which GCC 12 misreads as an overlapping copy (-Wrestrict).
    std::string out(1, '"');
    out += printable(value, keep);
    out += '"';
    return out;
}

} // namespace shardscope
