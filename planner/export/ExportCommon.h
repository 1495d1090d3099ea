// Shared by the framework exporters (FrameworkExport.h): refusals that name the
// feature, the figures every exporter derives from a layout, and small text helpers.
// Internal to the planner library.
#pragma once

#include "FrameworkExport.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::exportdetail {

// Collects "<format>: <feature> is not expressible (<why>)" and unsupported devices.
class Refusals {
public:
    Refusals(const char* format, std::vector<std::string>& out) : format_(format), out_(out) {}
    void add(const std::string& feature, const std::string& why)
    {
        out_.push_back(std::string(format_) + ": " + feature + " is not expressible (" + why + ")");
    }
    // Hardware the framework does not run on.
    void device(const std::string& name, const std::string& why)
    {
        out_.push_back(std::string(format_) + ": " + name + " devices are not supported (" + why + ")");
    }
    bool any() const { return !out_.empty(); }

private:
    const char* format_;
    std::vector<std::string>& out_;
};

// Megatron-LM's communication-overlap options (Layout.h) in a framework that has no such
// flags: each one set is refused by name.
void refuseMegatronOverlaps(Refusals& refuse, const Layout& layout);
// An uneven pipeline split (Megatron-LM's --decoder-first/last-pipeline-num-layers) in a
// framework that splits the layers evenly: refused by name with `why`.
void refuseUnevenPipeline(Refusals& refuse, const Layout& layout, const char* why);
// Full recomputation of some layers only (Megatron-LM's --recompute-method with
// --recompute-num-layers) in a framework that recomputes every layer: refused by name.
void refusePartialRecompute(Refusals& refuse, const Layout& layout, const char* why);

// Figures every exporter needs, derived once from problem and layout.
struct Figures {
    int devices_per_node = 0;
    int nodes = 0;
    std::int64_t devices = 0;
    int micro_batches = 0;        // per step and pipeline: global batch / (dp x mb)
    int replica_batch = 0;        // sequences per data-parallel replica and step: global batch / dp
    int shard_group = 0;          // ZeRO shard group in dp ranks (zeroGroupSize)
    bool partial_shard = false;   // zero >= 1 with a shard group smaller than dp (HSDP/MiCS-like)
    bool pipelined = false;       // pp > 1: the schedule matters
};
Figures figures(const Problem& problem, const Layout& layout);

// "llama-2-70b on 64 x p5.48xlarge (512 devices), global batch 1024 x 4096 tokens"
std::string problemLine(const Problem& problem);

std::string str(std::int64_t v);
// Lines prefixed with "# " (the notes of shell and Python texts).
std::string commentLines(const std::vector<std::string>& lines);

} // namespace shardscope::exportdetail
