// shardscope-cli: ShardScope without a GUI. Exit codes: 0 success, 1 runtime
// failure, 2 bad usage or bad input; errors go to stderr.
#include "Store.h"
#include "CliArgs.h"
#include "Commands.h"
#include "Version.h"

#include <QApplication>
#include <QCoreApplication>

#include <memory>

#include <iostream>

namespace shardscope::cli {

std::string mainHelp()
{
    return R"(shardscope-cli — plan and validate parallel training layouts for transformer models

Usage: shardscope-cli [--db PATH] COMMAND [ARGS...]

Commands:
  demo                        what ShardScope computes for the default problem
                              (GPT-3 175B on 64 x trn1.32xlarge)
  catalog list [--kind models|chips|nodes] [--json]
  catalog show NAME [--json]  one entry, with units and sources
  catalog import FILE.json [--replace]
                              add models, chips or node types (all-or-nothing)
  catalog export NAME [--out FILE.json]
  catalog remove NAME         remove one of your own entries
  predict --model NAME|FILE --node-type NAME --nodes N --global-batch B --seq S
          --layout "dp=8,tp=8,pp=4,sp=on,zero=1,mb=1,schedule=1f1b,recompute=selective"
          [--precision bf16] [--tokens 300e9] [--flash-attention] [--no-dropout] [--json] [--explain]
                              step time, memory, throughput, MFU, time and cost to
                              train for one layout; keys left out of --layout take
                              defaults (dp fills the devices)
  validate --suite [--profile host|chip] [--device NAME[:scale]] [--cost-model NAME] [--json]
  validate --plan plan.json [--layout "..."] [--steps N] [--profile host|chip] [--json]
  validate --layers L --hidden H --heads A --vocab V --seq T --batch B --layout "..."
                              the planner's predictions against real engine runs
                              of the same cases (a plan: scaled down to run here),
                              metric by metric; stored in the run history
  history [--limit N] [--json]
                              past validation runs
  report --plan plan.json --out report.html|report.pdf [--charts png|svg]
                              a self-contained report of a plan with its charts
                              (rendered offscreen; works without a display)
  calibrate [--fit] [--save NAME] [--json] [--out PROFILE.json]
  calibrate --engine [--holdout 0.3] [--device NAME[:scale]] [--save NAME]
  calibrate --from-history [--holdout 0.3] [--save NAME]
                              the cost model against published training runs
                              (calibration-cases.md); --fit refits its efficiency terms;
                              --engine fits them on fresh engine runs of the suite,
                              --from-history on the stored validation runs
  predict --plan plan.json [--layout ...] [--json] [--explain]
                              the prediction for a saved plan's best layout (or --layout)
  export --plan plan.json --format megatron|deepspeed|neuronx|fsdp [--layout ...] [--out FILE]
                              a saved plan's best layout (or --layout) as the launch
                              settings of Megatron-LM, DeepSpeed, NeuronX Distributed
                              or PyTorch FSDP; a feature the framework cannot express
                              is refused by name (exit 2)
  plan --model NAME|FILE --node-type NAME --nodes N --global-batch B --seq S
       [--objective throughput|time|cost] [--top K] [--fix tp=8,pp=2,...]
       [--min dp=8,...] [--max tp=16,...] [--max-mem 0.9] [--min-micro-batches N]
       [--recompute none,selective,full] [--threads N] [--json] [--out plan.json]
                              search every legal layout: the top plans, the Pareto
                              front (step time vs memory), counts of evaluated,
                              pruned and infeasible layouts by reason; exit 1 when
                              none is feasible
  sweep --nodes 1,2,4,...|1..512 (and the options of plan but --out)
                              the best plan at each cluster size, scaling efficiency
  compare --node-types A,B,C --nodes N|N1,N2,N3 (and the options of plan but --out)
                              the best plan, time and cost to train per node type
  train --layers L --hidden H --heads A --vocab V --seq T --batch B --steps N
        [--precision fp32|bf16-mixed|bf16-rne|bf16-sr] [--recompute none|full|selective]
        [--data synthetic|FILE] [--device host|NAME[:scale]] [--lr X] [--seed S]
        [--threads K] [--json]
                              a real training run of a small GPT on one emulated
                              device: loss, device-clock and wall time per step,
                              peak memory by category, FLOPs (scale in (0, 1]
                              shrinks a catalog chip's memory, FLOP/s, bandwidth)

Options:
  --db PATH                   catalog database (default: $SHARDSCOPE_DB, else
                              ~/.local/share/shardscope/catalog.sqlite)
  -h, --help                  this help
  --version                   print the version

Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad input.
)";
}

namespace {

int run(std::vector<std::string> args)
{
    QString db = Store::defaultPath();
    std::string command;
    std::vector<std::string> rest;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        // --db may come anywhere; help and version only before the command or as its option,
        // so that an entry named "help" can still be shown.
        if (a == "--db") {
            if (i + 1 >= args.size())
                throw UsageError("option --db needs a PATH");
            db = QString::fromStdString(args[++i]);
        } else if (a.rfind("--db=", 0) == 0) {
            db = QString::fromStdString(a.substr(5));
        } else if (a == "--help" || a == "-h" || (command.empty() && a == "help")) {
            std::cout << mainHelp();
            return kExitOk;
        } else if (a == "--version" && command.empty()) {
            std::cout << "shardscope-cli " << kVersion << "\n";
            return kExitOk;
        } else if (command.empty()) {
            if (a.rfind("-", 0) == 0)
                throw UsageError("unknown option " + a + " (see shardscope-cli --help)");
            command = a;
        } else {
            rest.push_back(a);
        }
    }
    if (command.empty())
        throw UsageError("missing command\n\n" + mainHelp());
    Context ctx{db, std::cout, std::cerr};
    if (command == "catalog")
        return runCatalog(rest, ctx);
    if (command == "demo")
        return runDemo(rest, ctx);
    if (command == "train")
        return runTrain(rest, ctx);
    if (command == "calibrate")
        return runCalibrate(rest, ctx);
    if (command == "predict")
        return runPredict(rest, ctx);
    if (command == "report")
        return runReport(rest, ctx);
    if (command == "validate")
        return runValidate(rest, ctx);
    if (command == "history")
        return runHistory(rest, ctx);
    if (command == "plan")
        return runPlan(rest, ctx);
    if (command == "sweep")
        return runSweep(rest, ctx);
    if (command == "compare")
        return runCompare(rest, ctx);
    if (command == "export")
        return runExport(rest, ctx);
    throw UsageError("unknown command \"" + command + "\" (see shardscope-cli --help)");
}

} // namespace
} // namespace shardscope::cli

namespace {

// The command word: the first argument that is neither an option nor --db's value.
std::string commandOf(int argc, char** argv)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--db") {
            ++i;
            continue;
        }
        if (a.rfind("-", 0) != 0)
            return a;
    }
    return {};
}

} // namespace

int main(int argc, char** argv)
{
    using namespace shardscope::cli;
    // Reports render charts with widgets and need a QApplication; everything else runs on
    // QCoreApplication. Without a display the report renders offscreen.
    std::unique_ptr<QCoreApplication> app;
    if (commandOf(argc, argv) == "report") {
        if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
            qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");
        app = std::make_unique<QApplication>(argc, argv);
    } else {
        app = std::make_unique<QCoreApplication>(argc, argv);
    }
    QCoreApplication::setApplicationName(QStringLiteral("shardscope"));
    QCoreApplication::setApplicationVersion(QString::fromLatin1(shardscope::kVersion));
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i)
        args.emplace_back(argv[i]);
    try {
        return run(args);
    } catch (const shardscope::InputError& e) {
        std::cerr << "shardscope-cli: " << e.what() << "\n";
        return kExitUsage;
    } catch (const std::exception& e) {
        std::cerr << "shardscope-cli: error: " << e.what() << "\n";
        return kExitFailure;
    }
}
