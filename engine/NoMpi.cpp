// A build without Open MPI: the MPI backend says what it needs (MpiSession.h).
#include "MpiSession.h"

#include <cstdlib>

namespace shardscope::engine {

MpiUnavailable::MpiUnavailable()
    : std::runtime_error("--backend mpi needs Open MPI: this build has none (install openmpi-bin and libopenmpi-dev, "
                         "e.g. sh packaging/install-deps.sh, and configure with -DSHARDSCOPE_MPI=ON)")
{
}

bool mpiAvailable() { return false; }

MpiSession::MpiSession() { throw MpiUnavailable(); }

MpiSession::~MpiSession() = default;

// No session exists without MPI (the constructor throws): these are never reached.
void MpiSession::barrier() const {}

bool MpiSession::sameOnEveryRank(std::uint64_t) const { return true; }

void MpiSession::abort(int exit_code) const { std::exit(exit_code); }

std::unique_ptr<Communicator> makeMpiCommunicator(std::vector<EmulatedDevice*>, LinkSpec, const std::atomic<bool>*)
{
    throw MpiUnavailable();
}

} // namespace shardscope::engine
