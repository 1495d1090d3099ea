#include "JsonReader.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonParseError>

#include <cmath>
#include <cstdio>

namespace shardscope {

namespace {

std::string typeName(const QJsonValue& v)
{
    switch (v.type()) {
    case QJsonValue::Null: return "null";
    case QJsonValue::Bool: return "a boolean";
    case QJsonValue::Double: return "a number";
    case QJsonValue::String: return "a string";
    case QJsonValue::Array: return "an array";
    case QJsonValue::Object: return "an object";
    case QJsonValue::Undefined: return "missing";
    }
    return "?";
}

std::string numberText(double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return buf;
}

} // namespace

int JsonReader::integer(const char* key, int fallback, bool required, int lo, int hi)
{
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isUndefined()) {
        if (required)
            error(key, "is required");
        return fallback;
    }
    if (!v.isDouble()) {
        error(key, "expected an integer, got " + typeName(v));
        return fallback;
    }
    const double d = v.toDouble();
    if (d != std::floor(d)) {
        error(key, numberText(d) + " is not an integer");
        return fallback;
    }
    if (d < lo || d > hi) {
        error(key, numberText(d) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return fallback;
    }
    return int(d);
}

double JsonReader::number(const char* key, double fallback, bool required, double lo, double hi)
{
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isUndefined()) {
        if (required)
            error(key, "is required");
        return fallback;
    }
    if (!v.isDouble()) {
        error(key, "expected a number, got " + typeName(v));
        return fallback;
    }
    const double d = v.toDouble();
    if (!(d >= lo && d <= hi)) {
        error(key, numberText(d) + " is out of range [" + numberText(lo) + ", " + numberText(hi) + "]");
        return fallback;
    }
    return d;
}

double JsonReader::quantity(const char* key, QuantityKind kind, bool required)
{
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isUndefined()) {
        if (required)
            error(key, "is required");
        return 0;
    }
    double value = 0;
    if (v.isDouble()) {
        value = v.toDouble();
    } else if (v.isString()) {
        const ParsedQuantity q = parseQuantity(v.toString().toStdString(), kind);
        if (!q.error.empty()) {
            error(key, q.error);
            return 0;
        }
        value = q.value;
    } else {
        error(key, "expected a number or a string with a unit, got " + typeName(v));
        return 0;
    }
    if (!std::isfinite(value) || value <= 0) {
        error(key, numberText(value) + " must be positive");
        return 0;
    }
    return value;
}

std::string JsonReader::string(const char* key, bool required)
{
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isUndefined()) {
        if (required)
            error(key, "is required");
        return {};
    }
    if (!v.isString()) {
        error(key, "expected a string, got " + typeName(v));
        return {};
    }
    const std::string s = v.toString().toStdString();
    if (required && s.empty())
        error(key, "must not be empty");
    return s;
}

bool JsonReader::boolean(const char* key, bool fallback)
{
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isUndefined())
        return fallback;
    if (!v.isBool()) {
        error(key, "expected true or false, got " + typeName(v));
        return fallback;
    }
    return v.toBool();
}

JsonReader JsonReader::object(const char* key, bool required)
{
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isUndefined()) {
        if (required)
            error(key, "is required");
    } else if (!v.isObject()) {
        error(key, "expected an object, got " + typeName(v));
    }
    return JsonReader(v.toObject(), fieldPath(key), errors_);
}

void JsonReader::rejectUnknownKeys(std::initializer_list<const char*> known)
{
    for (auto it = object_.begin(); it != object_.end(); ++it) {
        bool ok = false;
        for (const char* k : known)
            if (it.key() == QLatin1String(k)) {
                ok = true;
                break;
            }
        if (!ok)
            errors_.push_back({fieldPath(it.key().toUtf8().constData()), "unknown field"});
    }
}

QJsonObject parseJsonObject(const QByteArray& text, const std::string& path, FieldErrors& errors)
{
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(text, &parseError);
    if (parseError.error != QJsonParseError::NoError) {
        int line = 1, column = 1;
        for (int i = 0; i < parseError.offset && i < text.size(); ++i) {
            if (text[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        errors.push_back({path, "invalid JSON at line " + std::to_string(line) + ", column " +
                                    std::to_string(column) + ": " + parseError.errorString().toStdString()});
        return {};
    }
    if (!doc.isObject()) {
        errors.push_back({path, "expected a JSON object at the top level"});
        return {};
    }
    return doc.object();
}

void checkSchema(JsonReader& reader, const std::string& kind, int maxVersion)
{
    const std::string schema = reader.string("schema", true);
    if (schema.empty())
        return;
    const std::string prefix = "shardscope." + kind + "/";
    if (schema.rfind(prefix, 0) != 0) {
        reader.error("schema", "\"" + schema + "\" is not a " + kind + " document (expected \"" + prefix + "1\")");
        return;
    }
    const std::string version = schema.substr(prefix.size());
    int v = 0;
    for (char c : version) {
        if (c < '0' || c > '9' || v > 1000) {
            v = -1;
            break;
        }
        v = v * 10 + (c - '0');
    }
    if (v < 1)
        reader.error("schema", "\"" + schema + "\" has no valid version number");
    else if (v > maxVersion)
        reader.error("schema", "version " + std::to_string(v) + " is newer than this ShardScope reads (" +
                                   std::to_string(maxVersion) + ")");
}

} // namespace shardscope
