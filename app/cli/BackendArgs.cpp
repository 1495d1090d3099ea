#include "BackendArgs.h"

#include <QCoreApplication>
#include <QFileInfo>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <streambuf>
#include <unistd.h>
#include <vector>

namespace shardscope::cli {

namespace {

// Open MPI's launcher sets OMPI_COMM_WORLD_SIZE in every rank it starts (orterun's environment
// for the application, ompi/runtime docs "mpirun ... OMPI_COMM_WORLD_SIZE").
bool underMpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

class NullBuffer : public std::streambuf {
protected:
    int overflow(int c) override { return c == EOF ? 0 : c; }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

} // namespace

std::optional<int> startBackend(const CliArgs& a, BackendRun& run)
{
    const std::string name = a.value("backend").value_or("threads");
    if (name != "threads" && name != "mpi")
        throw UsageError("--backend: \"" + name + "\" is not threads or mpi");
    run.backend = name == "mpi" ? engine::ClusterBackend::Mpi : engine::ClusterBackend::Threads;
    if (const auto hosts = a.value("hosts")) {
        if (run.backend != engine::ClusterBackend::Mpi)
            throw UsageError("--hosts: the hosts of an MPI run; give --backend mpi with it");
        if (underMpirun())
            throw UsageError("--hosts: this command already runs under mpirun, whose own --hostfile decides the "
                             "hosts; drop --hosts");
        if (!QFileInfo(QString::fromStdString(*hosts)).isReadable())
            throw InputError("hosts: cannot read the host file " + *hosts);
        if (!engine::mpiAvailable())
            throw engine::MpiUnavailable();
        // The same command line under mpirun, one rank per slot of the host file.
        const QStringList self = QCoreApplication::arguments();
        std::vector<std::string> argv{"mpirun", "--hostfile", *hosts,
                                      QCoreApplication::applicationFilePath().toStdString()};
        for (qsizetype i = 1; i < self.size(); ++i) {
            const std::string s = self[i].toStdString();
            if (s == "--hosts") {
                ++i;
                continue;
            }
            if (s.rfind("--hosts=", 0) == 0)
                continue;
            argv.push_back(s);
        }
        std::vector<char*> raw;
        for (std::string& s : argv)
            raw.push_back(s.data());
        raw.push_back(nullptr);
        std::fflush(nullptr);
        execvp(raw[0], raw.data());
        throw std::runtime_error("--hosts: cannot start mpirun: " + std::string(std::strerror(errno)) +
                                 " (Open MPI's launcher, package openmpi-bin)");
    }
    if (run.backend == engine::ClusterBackend::Mpi)
        run.session = std::make_unique<engine::MpiSession>();
    return std::nullopt;
}

int runWithBackend(const std::vector<std::string>& args, const CommandHelp& help, Context& ctx,
                   int (*command)(const std::vector<std::string>&, Context&, const BackendRun&))
{
    BackendRun run;
    if (const std::optional<int> code = startBackend(CliArgs(args, help), run))
        return *code;
    Context quiet = quietContext(ctx);
    Context& used = run.writes() ? ctx : quiet;
    if (!run.session)
        return command(args, used, run);
    try {
        return command(args, used, run);
    } catch (const std::exception& e) {
        const bool input = dynamic_cast<const InputError*>(&e) != nullptr;
        ctx.err << "shardscope-cli: rank " << run.session->rank() << " of " << run.session->size() << ": "
                << (input ? "" : "error: ") << e.what() << "; stopping every rank\n" << std::flush;
        run.session->abort(input ? kExitUsage : kExitFailure);
    }
}

std::uint64_t fingerprint(const engine::DeviceProfile& p)
{
    char text[512];
    std::snprintf(text, sizeof text, "%s|%a|%a|%a|%a|%a|%a|%a|%a", p.name.c_str(), p.memory_bytes, p.peak_flops_fp32,
                  p.peak_flops_bf16, p.memory_bytes_per_second, p.kernel_overhead_s, p.host_link_bytes_per_second,
                  p.host_memory_bytes_per_second, p.scale);
    return std::uint64_t(std::hash<std::string>{}(text));
}

Context quietContext(const Context& ctx)
{
    static NullBuffer buffer;
    static std::ostream nowhere(&buffer);
    return Context{ctx.db_path, nowhere, ctx.err, ctx.store_options};
}

} // namespace shardscope::cli
