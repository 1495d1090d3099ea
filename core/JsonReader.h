// JsonReader: reads fields of a JSON object into C++ values and records every
// problem with its field path ("model.layers: 1e+30 is out of range [1, 10000]")
// instead of stopping at the first, so an import reports all of them at once.
#pragma once

#include "EnumNames.h"
#include "FieldError.h"
#include "Units.h"

#include <QJsonObject>
#include <QStringList>

#include <initializer_list>
#include <span>
#include <string>

namespace shardscope {

class JsonReader {
public:
    JsonReader(const QJsonObject& object, std::string path, FieldErrors& errors)
        : object_(object), path_(std::move(path)), errors_(errors) {}

    const std::string& path() const { return path_; }
    std::string fieldPath(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
    bool has(const char* key) const { return object_.contains(QLatin1String(key)); }
    void error(const char* key, const std::string& message) { errors_.push_back({fieldPath(key), message}); }

    int integer(const char* key, int fallback, bool required, int lo, int hi);
    double number(const char* key, double fallback, bool required, double lo, double hi);
    // A number in base units or a string with a unit ("32 GiB"); 0 when absent and optional.
    double quantity(const char* key, QuantityKind kind, bool required);
    std::string string(const char* key, bool required);
    bool boolean(const char* key, bool fallback);
    JsonReader object(const char* key, bool required);

    template <class E>
    E enumeration(const char* key, std::span<const EnumName<E>> table, E fallback, bool required)
    {
        const std::string text = string(key, required);
        if (text.empty())
            return fallback;
        if (auto v = enumFromString<E>(table, text))
            return *v;
        error(key, "unknown value " + quotedValue(text) + " (" + enumChoices<E>(table) + ")");
        return fallback;
    }

    // Keys not in `known` are errors: a typo ("hiden") must not silently fall back to a default.
    void rejectUnknownKeys(std::initializer_list<const char*> known);

    const QJsonObject& json() const { return object_; }

private:
    QJsonObject object_;
    std::string path_;
    FieldErrors& errors_;
};

// Parses text into a JSON object; a syntax error (truncated file, stray comma) is
// reported with its line and column under `path`.
QJsonObject parseJsonObject(const QByteArray& text, const std::string& path, FieldErrors& errors);

// "schema": "shardscope.<kind>/1": checks the kind and that the version is one we read.
void checkSchema(JsonReader& reader, const std::string& kind, int maxVersion);

} // namespace shardscope
