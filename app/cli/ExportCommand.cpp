// shardscope-cli export: a saved plan's layout as the launch settings of Megatron-LM,
// DeepSpeed, NeuronX Distributed or PyTorch FSDP (planner/FrameworkExport.h).
// A layout feature the framework cannot express is bad input (exit 2), every such
// feature named.
#include "CliArgs.h"
#include "Commands.h"
#include "OutputFile.h"
#include "FrameworkExport.h"
#include "PlanCommand.h"
#include "ProblemArgs.h"


#include <ostream>

namespace shardscope::cli {

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
