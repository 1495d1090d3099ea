// A helper of tst_engine_mpi_cli, started under mpirun: trains a small dp=2,tp=2,pp=2 case on
// the MPI backend with device `argv[1]` poisoning a weight with NaN before step 2 (the
// engine's FaultInjection, which the CLI does not expose). Every rank must stop, the failing
// one naming the error: the test reads mpirun's exit code and stderr.
#include "MpiSession.h"
#include "Trainer.h"

#include <cstdio>
#include <cstdlib>

using namespace shardscope;
using namespace shardscope::engine;

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: mpi_nan_run DEVICE\n");
        return 2;
    }
    MpiSession mpi;
    TrainRequest r;
    r.model = ModelConfig{4, 32, 4, 32, 8};
    r.batch = 8;
    r.steps = 4;
    r.layout.dp = 2;
    r.layout.tp = 2;
    r.layout.pp = 2;
    r.links.intra_bytes_per_second = 1e11;
    r.links.inter_bytes_per_second = 1e10;
    r.backend = ClusterBackend::Mpi;
    DeviceProfile p;
    p.name = "test";
    p.memory_bytes = 1e12;
    p.peak_flops_fp32 = 1e12;
    p.memory_bytes_per_second = 1e11;
    const auto source = makeTokenSource(r);
    const Measurement m = runClusterTraining(r, *source, p, {}, nullptr, FaultInjection{std::atoi(argv[1]), 2});
    std::printf("finished: %zu steps%s\n", m.steps.size(), m.error ? " with an error" : "");
    return m.error ? 1 : 0;
}
