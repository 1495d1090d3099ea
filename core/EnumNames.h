// Table-driven enum <-> string conversion, so that every enum's JSON and CLI
// spelling lives in exactly one table next to its type.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shardscope {

template <class E>
struct EnumName {
    E value;
    const char* name;
};

template <class E>
const char* enumToString(std::span<const EnumName<E>> table, E value)
{
    for (const EnumName<E>& e : table)
        if (e.value == value)
            return e.name;
    return "?";
}

template <class E>
std::optional<E> enumFromString(std::span<const EnumName<E>> table, std::string_view name)
{
    for (const EnumName<E>& e : table)
        if (name == e.name)
            return e.value;
    return std::nullopt;
}

// "one of: gelu, relu, swiglu"
template <class E>
std::string enumChoices(std::span<const EnumName<E>> table)
{
    std::string out = "one of: ";
    for (size_t i = 0; i < table.size(); ++i) {
        if (i)
            out += ", ";
        out += table[i].name;
    }
    return out;
}

} // namespace shardscope
