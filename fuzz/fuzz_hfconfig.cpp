// libFuzzer target: the Hugging Face config.json importer (HfConfigImport, `catalog import`
// of a config.json). Any input must be imported or refused with errors that name the key —
// never a crash, a hang or a sanitizer report — and what is imported must hold together:
// counts positive, and the model document stored for it reads back (SpecJson) to the same spec.
#include "FuzzCheck.h"
#include "HfConfigImport.h"
#include "JsonReader.h"
#include "SpecJson.h"

#include <QByteArray>

#include <cstddef>
#include <cstdint>

using namespace shardscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const QByteArray text(reinterpret_cast<const char*>(data), qsizetype(size));
    FieldErrors errors;
    const QJsonObject json = parseJsonObject(text, "config.json", errors);
    if (!errors.empty())
        return 0;
    (void)isHfConfig(json);
    (void)hfArchitecture(json);

    const HfImportNames names{"", "", "/fuzz/model/config.json"};
    FieldErrors e;
    const auto model = modelFromHfConfig(json, names, e);
    for (const FieldError& fe : e) {
        FUZZ_CHECK(!fe.message.empty(), "an empty error message");
        FUZZ_CHECK(fe.message.size() < 4096, "an error message longer than 4 KiB (a value echoed whole?)");
        FUZZ_CHECK(fe.text().find('\0') == std::string::npos, "a NUL inside an error message");
    }
    if (!model) {
        FUZZ_CHECK(!e.empty(), "a config refused without an error");
        return 0;
    }
    FUZZ_CHECK(e.empty(), "a config imported with errors");
    // Validated: the counts fit (ModelSpec.h), so these neither throw nor wrap.
    const ParameterBreakdown p = parameterBreakdown(*model);
    FUZZ_CHECK(p.total > 0 && p.active_per_token > 0 && p.active_per_token <= p.total,
               "parameter counts of an imported model out of order");
    FUZZ_CHECK(forwardFlopsPerToken(*model, model->max_seq) > 0, "FLOPs per token of an imported model not positive");
    // What catalog import stores must read back as the same model.
    const QJsonObject document = modelDocumentFromHfConfig(json, names);
    FieldErrors again;
    const auto back = modelFromJson(document, "model", again);
    FUZZ_CHECK(back.has_value() && again.empty(), "an imported model's document does not read back");
    FUZZ_CHECK(*back == *model, "an imported model's document reads back different");
    return 0;
}
