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
    Refusals(const char* format, ExportResult& result) : format_(format), result_(result) {}
    void add(const std::string& feature, const std::string& why)
    {
        result_.refusals.push_back(std::string(format_) + ": " + feature + " is not expressible (" + why + ")");
        result_.refused.push_back({feature, why});
    }
    // Hardware the framework does not run on.
    void device(const std::string& name, const std::string& why)
    {
        result_.refusals.push_back(std::string(format_) + ": " + name + " devices are not supported (" + why + ")");
        result_.refused.push_back({name + " devices", why});
    }
    bool any() const { return !result_.refusals.empty(); }

private:
    const char* format_;
    ExportResult& result_;
};

// CUDA and ROCm GPUs: what the PyTorch GPU frameworks (Megatron, FSDP, torchtitan, ...) run on.
bool isCudaOrRocmGpu(const ChipSpec& chip);
// AWS Trainium (NeuronX Distributed and NxD Training).
bool isTrainium(const ChipSpec& chip);

// Megatron-LM's communication-overlap options (Layout.h) in a framework that has no such
// flags: each one set is refused by name.
void refuseMegatronOverlaps(Refusals& refuse, const Layout& layout);
// What Megatron Core (Megatron-LM and Megatron-Bridge) cannot run: devices, model features,
// the GPipe schedule, tp against the KV heads (MegatronExport.cpp).
void refuseMegatronCoreLimits(Refusals& refuse, const Problem& problem, const Layout& layout);
// Megatron's get_device_arch_version() < 10: CUDA_DEVICE_MAX_CONNECTIONS=1 is required with tp/cp.
bool olderThanBlackwellGpu(const ChipSpec& chip);
// An uneven pipeline split (Megatron-LM's --decoder-first/last-pipeline-num-layers) in a
// framework that splits the layers evenly: refused by name with `why`.
void refuseUnevenPipeline(Refusals& refuse, const Layout& layout, const char* why);
// Full recomputation of some layers only (Megatron-LM's --recompute-method with
// --recompute-num-layers) in a framework that recomputes every layer: refused by name.
void refusePartialRecompute(Refusals& refuse, const Layout& layout, const char* why);
// Selective recomputation of named modules (Megatron-LM's --recompute-modules) and activation
// offload of N layers (--cpu-offloading-num-layers) in a framework without them: refused by name.
void refuseModuleRecomputeAndOffload(Refusals& refuse, const Layout& layout, const char* modulesWhy,
                                     const char* offloadWhy);

// Expert parallelism in a framework that has no setting for it (it replicates the experts on
// every data-parallel rank, or has no MoE at all): ep > 1 and an etp other than tp, each
// refused by name with `why`.
void refuseExpertParallel(Refusals& refuse, const Layout& layout, const std::string& why);
// cp_comm=a2a (Ulysses), refused by the frameworks whose context parallelism is a ring only.
void refuseAllToAllCp(Refusals& refuse, const Layout& layout, const std::string& why);
// moe_dispatcher other than alltoall (Megatron-LM's allgather and flex dispatchers), refused by the
// frameworks that do not have it or whose exporter does not write it.
void refuseMoeDispatcher(Refusals& refuse, const Layout& layout, const std::string& why);
// Multi-token prediction (ModelSpec.h MtpSpec), for the frameworks that have none: `why` says so.
void refuseMultiTokenPrediction(Refusals& refuse, const ModelSpec& model, const std::string& why);
// "Experts: 8 routed experts over ep 8 (1 per rank), each expert's matrices over etp 1; expert
// data-parallel size 4 = tp 4 x cp 1 x dp 8 / (ep 8 x etp 1)."
std::string expertGridNote(const ModelSpec& model, const Layout& layout);

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

// What keeps a model from being Llama-shaped (RMSNorm, SwiGLU, RoPE, no biases, dense,
// heads x head_dim = hidden): "mlp gelu, norm layernorm, biases", empty for a Llama.
std::string nonLlamaFeatures(const ModelSpec& model);
// The model-format fields among them (qkv biases, QK-norm, sliding window, attention sinks, RoPE
// scaling, norm_eps other than Llama's 1e-5, mixture of experts): "QK-norm, norm_eps 1e-06".
std::string modelFieldFeatures(const ModelSpec& model);
// For an export that takes the user's own Hugging Face model (DeepSpeed, FSDP2): a note that the
// model's config carries those fields, empty when there are none.
std::string modelBuildNote(const ModelSpec& model);

std::string str(std::int64_t v);
// A double as the shortest text that reads back the same ("500000", "0.25", "1e-05").
std::string num(double v);
// "torchrun --nnodes N --nproc_per_node M --node_rank $NODE_RANK --master_addr $MASTER_ADDR
// --master_port 29500" (the variables in double quotes when `quoted`, for a shell script).
std::string torchrunCommand(const Figures& figures, bool quoted);
// Python's literals for a bool: "True", "False" (also YAML's, as the NxD Training configs write them).
std::string pyBool(bool v);
// Lines prefixed with "# " (the notes of shell and Python texts).
std::string commentLines(const std::vector<std::string>& lines);

} // namespace shardscope::exportdetail
