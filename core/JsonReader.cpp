#include "JsonReader.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonParseError>

#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

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

// Appends code point `cp` to `out` as UTF-8.
void appendUtf8(std::string& out, char32_t cp)
{
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xc0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += char(0xe0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    } else {
        out += char(0xf0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3f));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    }
}

// Reads the JSON string literal starting at text[i] == '"' and returns it decoded, with
// i left on its closing quote. The text has been parsed by Qt already, so it is well formed;
// escapes are decoded so that "a" and "\u0061" count as the same key.
std::string decodeString(const QByteArray& text, qsizetype& i)
{
    std::string out;
    auto hex4 = [&](qsizetype at) { return char32_t(text.mid(at, 4).toUInt(nullptr, 16)); };
    for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] != '\\') {
            out += text[i];
            continue;
        }
        const char e = i + 1 < text.size() ? text[++i] : '\\';
        switch (e) {
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
            char32_t cp = hex4(i + 1);
            i += 4;
            // A surrogate pair (two escapes) is one code point.
            if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < text.size() && text[i + 1] == '\\' && text[i + 2] == 'u') {
                const char32_t low = hex4(i + 3);
                if (low >= 0xdc00 && low < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                    i += 6;
                }
            }
            appendUtf8(out, cp);
            break;
        }
        default: out += e; break;  // \" \\ \/
        }
    }
    return out;
}

// Qt keeps one value of a key given twice in an object, without a word; such a document
// is ambiguous ("layers": 12 ... "layers": 24), so every key given twice is an error named by
// its path in the document and the lines of both. `text` has been parsed by Qt already.
void findDuplicateKeys(const QByteArray& text, const std::string& where, FieldErrors& errors)
{
    struct Level {
        bool object = false;
        std::map<std::string, int> keys;  // key -> line of its first appearance
        std::string current;              // the key (object) or "[index]" (array) being read
        int index = 0;
    };
    std::vector<Level> stack;
    // Appended piece by piece: GCC 12 misreads `"." + string` here as an overlapping copy.
    auto pathTo = [&](const std::string& key) {
        std::string path;
        auto member = [&](const std::string& name) {
            if (!path.empty())
                path += '.';
            path += printable(name);
        };
        for (size_t l = 0; l + 1 < stack.size(); ++l) {
            if (stack[l].object)
                member(stack[l].current);
            else
                path += stack[l].current;
        }
        member(key);
        return path;
    };
    int line = 1;
    for (qsizetype i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') {
            ++line;
        } else if (c == '{' || c == '[') {
            Level level;
            level.object = c == '{';
            level.current = level.object ? std::string() : "[0]";
            stack.push_back(std::move(level));
        } else if ((c == '}' || c == ']') && !stack.empty()) {
            stack.pop_back();
        } else if (c == ',' && !stack.empty() && !stack.back().object) {
            stack.back().current = std::string(1, '[').append(std::to_string(++stack.back().index)).append("]");
        } else if (c == '"') {
            std::string s = decodeString(text, i);
            qsizetype next = i + 1;
            while (next < text.size() && (text[next] == ' ' || text[next] == '\t' || text[next] == '\r' || text[next] == '\n'))
                ++next;
            if (stack.empty() || !stack.back().object || next >= text.size() || text[next] != ':')
                continue;  // a value, not a key
            Level& object = stack.back();
            if (auto [it, fresh] = object.keys.emplace(s, line); !fresh)
                errors.push_back({pathTo(s), "given twice in " + (where.empty() ? std::string("the document") : where) +
                                                 " (lines " + std::to_string(it->second) + " and " +
                                                 std::to_string(line) + "); give each key once"});
            object.current = std::move(s);
        }
    }
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
            errors_.push_back({fieldPath(printable(it.key().toStdString()).c_str()), "unknown field"});
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
    const size_t before = errors.size();
    findDuplicateKeys(text, path, errors);
    if (errors.size() != before)
        return {};
    return doc.object();
}

void checkSchema(JsonReader& reader, const std::string& kind, int maxVersion)
{
    const std::string schema = reader.string("schema", true);
    if (schema.empty())
        return;
    const std::string prefix = "shardscope." + kind + "/";
    if (schema.rfind(prefix, 0) != 0) {
        reader.error("schema", quotedValue(schema) + " is not a " + kind + " document (expected \"" + prefix + "1\")");
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
        reader.error("schema", quotedValue(schema) + " has no valid version number");
    else if (v > maxVersion)
        reader.error("schema", "version " + std::to_string(v) + " is newer than this ShardScope reads (" +
                                   std::to_string(maxVersion) + ")");
}

} // namespace shardscope
