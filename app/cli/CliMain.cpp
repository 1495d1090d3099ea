// shardscope-cli: ShardScope without a GUI. Exit codes: 0 success, 1 runtime
// failure, 2 bad usage or bad input; errors go to stderr.
#include "BuildInfo.h"
#include "Store.h"
#include "CliArgs.h"
#include "Commands.h"
#include "Progress.h"

#include <QApplication>
#include <QCoreApplication>

#include <memory>

#include <iostream>

namespace shardscope::cli {

std::string mainHelp() { return mainHelpText(); }

namespace {

// The help of `command` and, for a group (catalog), of the verb among `words`.
std::string helpFor(const std::string& command, const std::vector<std::string>& words)
{
    const std::vector<std::string> verbs = commandNames(command);
    if (!verbs.empty()) {
        for (const std::string& w : words) {
            if (w.rfind("-", 0) == 0)
                continue;
            if (const CommandHelp* c = findCommandHelp(command + " " + w))
                return commandHelpText(*c);
            throw UsageError("unknown " + command + " verb \"" + w + "\"" + didYouMean(w, verbs) +
                             " (see shardscope-cli help " + command + ")");
        }
        return groupHelpText(command);
    }
    if (const CommandHelp* c = findCommandHelp(command))
        return commandHelpText(*c);
    throw UsageError("unknown command \"" + command + "\"" + didYouMean(command, commandNames()) +
                     " (see shardscope-cli --help)");
}

int run(std::vector<std::string> args)
{
    QString db = Store::defaultPath();
    std::string command;
    std::vector<std::string> rest;
    bool help = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        // --db may come anywhere. --help/-h before the command is the global help, after it the
        // command's; "help" only as the command word, so that an entry named "help" can be shown.
        if (a == "--db") {
            if (i + 1 >= args.size())
                throw UsageError("option --db needs a PATH");
            db = QString::fromStdString(args[++i]);
        } else if (a.rfind("--db=", 0) == 0) {
            db = QString::fromStdString(a.substr(5));
        } else if (a == "--help" || a == "-h") {
            if (command.empty()) {
                std::cout << mainHelp();
                return kExitOk;
            }
            help = true;
        } else if (a == "--version" && command.empty()) {
            std::cout << "shardscope-cli " << kPackageVersion;
            if (*kGitCommit)
                std::cout << " (commit " << kGitCommit << ", " << kGitDate << ")";
            std::cout << "\n";
            return kExitOk;
        } else if (command.empty()) {
            if (a.rfind("-", 0) == 0) {
                std::vector<std::string> known;
                for (const OptionHelp& o : globalOptions())
                    known.push_back(o.name);
                std::string bare = a;
                bare.erase(0, bare.find_first_not_of('-'));
                throw UsageError("unknown option " + a + didYouMean(bare, known, "--") + " (see shardscope-cli --help)");
            }
            command = a;
        } else {
            rest.push_back(a);
        }
    }
    if (command == "help") {
        if (rest.empty()) {
            std::cout << mainHelp();
            return kExitOk;
        }
        std::cout << helpFor(rest.front(), {rest.begin() + 1, rest.end()});
        return kExitOk;
    }
    if (help) {
        std::cout << helpFor(command, rest);
        return kExitOk;
    }
    if (command.empty())
        throw UsageError("missing command\n\n" + mainHelp());
    Context ctx{db, std::cout, std::cerr, {}};
    ctx.store_options.on_wait = [](const std::string& message) {
        std::cerr << "shardscope-cli: " << message << "\n";
    };
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
    throw UsageError("unknown command \"" + command + "\"" + didYouMean(command, commandNames()) +
                     " (see shardscope-cli --help)");
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
    QCoreApplication::setApplicationVersion(QString::fromLatin1(shardscope::kPackageVersion));
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i)
        args.emplace_back(argv[i]);
    try {
        return run(args);
    } catch (const Interrupted& e) {
        std::cerr << "shardscope-cli: " << e.what() << "\n";
        return kExitInterrupted;
    } catch (const shardscope::InputError& e) {
        std::cerr << "shardscope-cli: " << e.what() << "\n";
        return kExitUsage;
    } catch (const std::exception& e) {
        std::cerr << "shardscope-cli: error: " << e.what() << "\n";
        return kExitFailure;
    }
}
