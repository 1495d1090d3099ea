// libFuzzer target: the layout parser ("dp=8,tp=8,pp=4,...", --layout and the GUI's layout
// field) and the layout's rules against a real problem (gpt2-small on one trn1.32xlarge, and
// llama-2-70b on 4). Any text must parse or be refused with errors naming layout.<key>: never
// a crash (issue 19: pp=65536,v=65536 divided by a wrapped zero), and an accepted layout
// prints back to the same layout.
#include "BuiltinSpecs.h"
#include "FuzzCheck.h"
#include "Layout.h"
#include "TrainingSpec.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace shardscope;

namespace {

struct Case {
    ModelSpec model;
    ClusterSpec cluster;
    TrainingSpec training;
};

Case makeCase(const char* model, int nodes, int batch, int seq)
{
    const BuiltinSpecs& specs = BuiltinSpecs::instance();
    Case c;
    c.model = specs.model(model);
    c.cluster.node = specs.node("trn1.32xlarge");
    c.cluster.nodes = nodes;
    c.training.global_batch = batch;
    c.training.seq_len = seq;
    return c;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const Case cases[] = {makeCase("gpt2-small", 1, 32, 1024), makeCase("llama-2-70b", 4, 1024, 4096)};
    const std::string text(reinterpret_cast<const char*>(data), size);
    FieldErrors errors;
    Layout layout = parseLayout(text, errors);
    for (const FieldError& e : errors) {
        FUZZ_CHECK(e.path.rfind("layout", 0) == 0, "a layout error not under layout.");
        FUZZ_CHECK(e.text().size() < 4096, "a layout error longer than 4 KiB (a value echoed whole?)");
    }
    if (!errors.empty())
        return 0;
    for (const Case& c : cases) {
        Layout l = layout;
        FieldErrors e;
        resolveDataParallel(l, c.cluster.devices(), e);
        const FieldErrors own = validate(l);
        const FieldErrors rules = validate(l, c.model, c.cluster, c.training);
        if (own.empty()) {
            FieldErrors again;
            FUZZ_CHECK(parseLayout(toString(l), again) == l && again.empty(), "a valid layout does not print back");
        }
        if (e.empty() && rules.empty())
            FUZZ_CHECK(l.devices() == c.cluster.devices(), "an accepted layout does not cover the cluster");
    }
    return 0;
}
