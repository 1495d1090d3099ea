// shardscope-cli export: a saved plan's layout as the launch settings of a training framework
// (planner/FrameworkExport.h). A layout feature the framework cannot express is bad input
// (exit 2), every such feature named.
//
// --json prints one object for machines (schema "shardscope.export/1"), the same keys whether
// the framework runs the layout or not:
//   schema, format, layout, runs (bool), file_extension, settings (the text, "" when refused),
//   notes (array of strings), refusals (array of {feature, reason, message}).
// A refused layout still exits 2, after printing the object.
#include "CliArgs.h"
#include "Commands.h"
#include "OutputFile.h"
#include "FrameworkExport.h"
#include "PlanCommand.h"
#include "ProblemArgs.h"


#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <ostream>

namespace shardscope::cli {

namespace {

QJsonObject exportJson(ExportFormat format, const Layout& layout, const ExportResult& result)
{
    QJsonArray notes;
    for (const std::string& note : result.notes)
        notes.append(QString::fromStdString(note));
    QJsonArray refusals;
    for (size_t i = 0; i < result.refused.size(); ++i)
        refusals.append(QJsonObject{{"feature", QString::fromStdString(result.refused[i].feature)},
                                    {"reason", QString::fromStdString(result.refused[i].reason)},
                                    {"message", QString::fromStdString(result.refusals.at(i))}});
    return QJsonObject{{"schema", "shardscope.export/1"},
                       {"format", toString(format)},
                       {"layout", QString::fromStdString(toString(layout))},
                       {"runs", result.ok()},
                       {"file_extension", exportFileExtension(format)},
                       {"settings", QString::fromStdString(result.text)},
                       {"notes", notes},
                       {"refusals", refusals}};
}

} // namespace

int runExport(const std::vector<std::string>& args, Context& ctx)
{
    const CommandHelp& help = commandHelp("export");
    const std::string usage = usageText(help);
    const CliArgs a(args, help);
    a.expectPositional(0, usage);
    const auto planFile = a.value("plan");
    if (!planFile)
        throw UsageError("missing --plan\nusage: " + usage);
    const auto formatName = a.value("format");
    if (!formatName)
        throw UsageError("missing --format\nusage: " + usage);
    const std::optional<ExportFormat> format = exportFormatFromString(*formatName);
    if (!format)
        throw UsageError("--format: unknown format \"" + *formatName + "\" (one of: " + exportFormatChoices() + ")");

    const PlanDocument plan = loadPlanFile(*planFile, ctx.err);
    Layout layout;
    if (auto text = a.value("layout")) {
        layout = layoutFromArg(*text, plan.problem);
    } else {
        if (!plan.best)
            throw InputError(*planFile + ": best: the plan has no feasible layout; give one with --layout");
        layout = *plan.best;
    }

    const ExportResult result = exportSettings(*format, plan.problem, layout);
    if (a.flag("json")) {
        ctx.out << QJsonDocument(exportJson(*format, layout, result)).toJson(QJsonDocument::Indented).toStdString();
        if (!result.ok())
            return kExitUsage;
        if (auto out = a.value("out")) {
            writeOutputFile(*out, QByteArray::fromStdString(result.text));
            ctx.err << "wrote " << *out << " (" << toString(*format) << ")\n";
        }
        return kExitOk;
    }
    if (!result.ok()) {
        std::string message = "cannot export layout " + toString(layout) + ":";
        for (const std::string& refusal : result.refusals)
            message += "\n  " + refusal;
        throw InputError(message);
    }
    if (!result.notes_in_text)
        for (const std::string& note : result.notes)
            ctx.err << "note: " << note << "\n";

    if (auto out = a.value("out")) {
        writeOutputFile(*out, QByteArray::fromStdString(result.text));
        ctx.err << "wrote " << *out << " (" << toString(*format) << ")\n";
    } else {
        ctx.out << result.text;
    }
    return kExitOk;
}

} // namespace shardscope::cli
