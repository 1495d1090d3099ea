#include "ProblemArgs.h"
#include "EnumNames.h"
#include "JsonReader.h"
#include "SpecEnums.h"
#include "SpecJson.h"

#include <QFile>
#include <QFileInfo>

#include <type_traits>

namespace shardscope::cli {

ModelSpec modelFromArg(const std::string& arg, const SpecLookup& specs)
{
    const QString path = QString::fromStdString(arg);
    if (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".json") == 0) {
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly))
            throw InputError("--model: cannot read " + arg + ": " + f.errorString().toStdString());
        FieldErrors errors;
        const QJsonObject json = parseJsonObject(f.readAll(), arg, errors);
        if (!errors.empty())
            throw InputError(errors);
        auto model = modelFromJson(json, "model", errors);
        if (!model)
            throw InputError(errors);
        return *model;
    }
    return specs.model(arg);
}

Layout layoutFromArg(const std::string& text, const Problem& problem)
{
    FieldErrors errors;
    Layout layout = parseLayout(text, errors);
    if (errors.empty()) {
        const bool dpGiven = layout.dp != 0;
        resolveDataParallel(layout, problem.cluster.devices(), errors);
        // Every broken rule at once; when dp could not be filled in, its device-count
        // message already says what the rules would repeat about dp.
        for (const FieldError& e : validate(layout, problem.model, problem.cluster, problem.training))
            if (dpGiven || errors.empty() || e.path != "layout.dp")
                errors.push_back(e);
    }
    if (!errors.empty())
        throw InputError(errors);
    return layout;
}

Problem problemFromArgs(const CliArgs& a, const SpecLookup& specs)
{
    auto required = [&](const char* name) {
        auto v = a.value(name);
        if (!v)
            throw UsageError(std::string("missing --") + name);
        return *v;
    };
    Problem p;
    p.model = modelFromArg(required("model"), specs);
    p.cluster.node = specs.node(required("node-type"));
    required("nodes");
    p.cluster.nodes = a.integer("nodes", 1, 1, 1'000'000);
    required("global-batch");
    p.training.global_batch = a.integer("global-batch", 1, 1, 100'000'000);
    required("seq");
    p.training.seq_len = a.integer("seq", 1, 1, 1 << 24);
    p.training.tokens_to_train = a.number("tokens", TrainingSpec{}.tokens_to_train, 1, 1e16);
    p.training.flash_attention = a.flag("flash-attention");
    p.training.dropout = !a.flag("no-dropout");
    p.training.moe_imbalance = a.number("moe-imbalance", 1.0, 1, 64);
    // An enum option's value by its spelling, or its field left as it is.
    auto option = [&](const char* name, const auto& names, auto& field) {
        using E = std::remove_reference_t<decltype(field)>;
        if (auto text = a.value(name)) {
            auto v = enumFromString<E>(names, *text);
            if (!v)
                throw UsageError(std::string("--") + name + ": unknown value \"" + *text + "\" (" +
                                 enumChoices<E>(names) + ")");
            field = *v;
        }
    };
    option("precision", kPrecisionNames, p.training.precision);
    option("main-grads", kMainGradsNames, p.training.main_grads);
    if (FieldErrors errors = validate(p); !errors.empty())
        throw InputError(errors);
    return p;
}

} // namespace shardscope::cli
