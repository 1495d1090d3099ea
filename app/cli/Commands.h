// The subcommands of shardscope-cli. Each returns an exit code (CliArgs.h) and
// throws UsageError/InputError (exit 2) or anything else (exit 1) on failure.
#pragma once

#include "Database.h"

#include <QString>

#include <iosfwd>
#include <string>
#include <vector>

namespace shardscope::cli {

struct Context {
    QString db_path;      // catalog database file
    std::ostream& out;
    std::ostream& err;
    // How commands open the catalog: a file another process holds locked is waited for, and
    // the wait is said on stderr instead of hanging silently.
    DatabaseOptions store_options;
};

int runCatalog(const std::vector<std::string>& args, Context& ctx);
int runDemo(const std::vector<std::string>& args, Context& ctx);
int runTrain(const std::vector<std::string>& args, Context& ctx);
int runCalibrate(const std::vector<std::string>& args, Context& ctx);
int runPredict(const std::vector<std::string>& args, Context& ctx);
int runReport(const std::vector<std::string>& args, Context& ctx);
int runValidate(const std::vector<std::string>& args, Context& ctx);
int runHistory(const std::vector<std::string>& args, Context& ctx);
int runPlan(const std::vector<std::string>& args, Context& ctx);
int runSweep(const std::vector<std::string>& args, Context& ctx);
int runCompare(const std::vector<std::string>& args, Context& ctx);
int runExport(const std::vector<std::string>& args, Context& ctx);

std::string mainHelp();

} // namespace shardscope::cli
