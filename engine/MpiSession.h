// The MPI side of the engine, as the rest of the program sees it, in every build: the MPI
// session of a process started by mpirun, and the MPI communicator of an emulated cluster.
// Built with Open MPI (CMake option SHARDSCOPE_MPI, MpiSession.cpp and MpiCommunicator.cpp),
// these run on MPI; built without it (NoMpi.cpp) they throw MpiUnavailable, which says that
// `--backend mpi` needs Open MPI.
#pragma once

#include "Communicator.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace shardscope::engine {

class MpiUnavailable : public std::runtime_error {
public:
    MpiUnavailable();
};

// Whether this build has the MPI backend.
bool mpiAvailable();

// MPI_Init_thread (MPI_THREAD_MULTIPLE: every device's worker thread may call MPI) for the
// life of the object, MPI_Finalize after it. One per process, made before any MPI cluster.
// Throws MpiUnavailable without MPI, std::runtime_error when MPI cannot give thread support.
class MpiSession {
public:
    MpiSession();
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
    int rank() const { return rank_; }
    int size() const { return size_; }
    void barrier() const;  // every rank; the waiting ones sleep (ranks may oversubscribe the cores)
    // Whether every rank passed the same value (e.g. a fingerprint of what each one resolved).
    bool sameOnEveryRank(std::uint64_t value) const;
    // Stops every rank of the job with this exit code (MPI_Abort): what a rank does on an error
    // the others may not share, since they would wait for it in MPI forever.
    [[noreturn]] void abort(int exit_code) const;

private:
    int rank_ = 0;
    int size_ = 1;
};

// The MPI communicator of a cluster of `devices` (MpiCommunicator.h); needs an MpiSession.
std::unique_ptr<Communicator> makeMpiCommunicator(std::vector<EmulatedDevice*> devices, LinkSpec links,
                                                  const std::atomic<bool>* cancel);

} // namespace shardscope::engine
