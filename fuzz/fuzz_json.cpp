// libFuzzer target: the JSON readers of user files (plan and catalog imports, --model FILE).
// Any input must be read or refused with field errors — never a crash, a hang or a sanitizer
// report — and what is accepted must hold together: counts positive, every spec round-trips
// through its JSON to an equal spec, and no error message echoes a long value whole.
#include "CatalogDocument.h"
#include "FuzzCheck.h"
#include "JsonReader.h"
#include "SpecJson.h"

#include <QByteArray>

#include <cstddef>
#include <cstdint>

using namespace shardscope;

namespace {

// A message may name the value it refuses, cut (FieldError.h): a few hundred bytes, plus
// the path of a deeply nested key.
void checkErrors(const FieldErrors& errors)
{
    for (const FieldError& e : errors) {
        FUZZ_CHECK(e.message.size() < 4096, "an error message longer than 4 KiB (a value echoed whole?)");
        FUZZ_CHECK(e.text().find('\0') == std::string::npos, "a NUL inside an error message");
    }
}

template <class Spec, class Read>
void roundTrip(const Spec& spec, Read read)
{
    FieldErrors again;
    const auto back = read(toJson(spec), again);
    FUZZ_CHECK(back.has_value() && again.empty(), "an accepted spec does not read back from its own JSON");
    FUZZ_CHECK(*back == spec, "an accepted spec reads back different from its own JSON");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const QByteArray text(reinterpret_cast<const char*>(data), qsizetype(size));
    FieldErrors errors;
    const QJsonObject json = parseJsonObject(text, "fuzz.json", errors);
    checkErrors(errors);
    if (!errors.empty())
        return 0;

    // A catalog import: one entry or a bundle, chips resolved within it.
    {
        FieldErrors e;
        const auto entries = parseEntries(entryDocuments(json, e), e, [](const std::string&) { return std::nullopt; });
        checkErrors(e);
    }
    const auto noChips = [](const std::string&) -> std::optional<ChipSpec> { return std::nullopt; };
    {
        FieldErrors e;
        if (auto m = modelFromJson(json, "model", e)) {
            FUZZ_CHECK(e.empty(), "a model accepted with errors");
            // Validated: the counts fit (ModelSpec.h), so these neither throw nor wrap.
            const ParameterBreakdown p = parameterBreakdown(*m);
            FUZZ_CHECK(p.total > 0 && p.active_per_token > 0 && p.active_per_token <= p.total,
                       "parameter counts of an accepted model out of order");
            FUZZ_CHECK(forwardFlopsPerToken(*m, m->max_seq) > 0, "FLOPs per token of an accepted model not positive");
            roundTrip(*m, [](const QJsonObject& o, FieldErrors& er) { return modelFromJson(o, "model", er); });
        }
        checkErrors(e);
    }
    {
        FieldErrors e;
        if (auto c = chipFromJson(json, "chip", e))
            roundTrip(*c, [](const QJsonObject& o, FieldErrors& er) { return chipFromJson(o, "chip", er); });
        checkErrors(e);
    }
    {
        FieldErrors e;
        nodeFromJson(json, "node", e, noChips);
        checkErrors(e);
    }
    {
        FieldErrors e;
        if (auto l = layoutFromJson(json, "layout", e)) {
            FUZZ_CHECK(l->devices() > 0 && l->devices() <= kMaxLayoutProduct, "an accepted layout's devices out of range");
            roundTrip(*l, [](const QJsonObject& o, FieldErrors& er) { return layoutFromJson(o, "layout", er); });
        }
        checkErrors(e);
    }
    {
        FieldErrors e;
        if (auto t = trainingFromJson(json, "training", e))
            roundTrip(*t, [](const QJsonObject& o, FieldErrors& er) { return trainingFromJson(o, "training", er); });
        checkErrors(e);
    }
    {
        FieldErrors e;
        if (auto p = problemFromJson(json, "problem", e))
            FUZZ_CHECK(forwardFlopsPerToken(p->model, p->training.seq_len) > 0, "FLOPs of an accepted problem");
        checkErrors(e);
    }
    return 0;
}
