// --backend threads|mpi and --hosts FILE of `train` and `validate`: which backend carries the
// emulated cluster's collectives, the MPI session of a rank of an mpirun job, and the rank
// that writes (rank 0: the measurement, the document, the run history; the others are quiet).
#pragma once

#include "CliArgs.h"
#include "Commands.h"
#include "Communicator.h"
#include "MpiSession.h"

#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace shardscope::cli {

struct BackendRun {
    engine::ClusterBackend backend = engine::ClusterBackend::Threads;
    std::unique_ptr<engine::MpiSession> session;  // --backend mpi: for the command's life
    bool writes() const { return !session || session->rank() == 0; }
    int ranks() const { return session ? session->size() : 1; }
};

// Reads --backend and --hosts. --hosts FILE (outside mpirun) starts the same command line, without
// --hosts, as `mpirun --hostfile FILE` and returns its exit code; otherwise returns nothing and
// `run` holds the backend (with --backend mpi, MPI is initialized). UsageError for a bad
// --backend or --hosts without --backend mpi; engine::MpiUnavailable in a build without MPI.
std::optional<int> startBackend(const CliArgs& a, BackendRun& run);

// The context a rank that does not write runs the command with: its output goes nowhere.
Context quietContext(const Context& ctx);

// Runs `command` with the backend of its arguments: on the ranks that do not write with
// quietContext(ctx), and an error on any rank stops every rank (MpiSession::abort with the exit
// code main() would give it, the message on stderr naming the rank): never a rank left waiting.
int runWithBackend(const std::vector<std::string>& args, const CommandHelp& help, Context& ctx,
                   int (*command)(const std::vector<std::string>&, Context&, const BackendRun&));

// A fingerprint of what a device profile says, for MpiSession::sameOnEveryRank.
std::uint64_t fingerprint(const engine::DeviceProfile& p);

} // namespace shardscope::cli
