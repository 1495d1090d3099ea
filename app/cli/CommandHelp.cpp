#include "CommandHelp.h"

#include "EngineCalibration.h"
#include "EnumNames.h"
#include "FrameworkExport.h"
#include "ModelEnums.h"
#include "PlanRequest.h"
#include "SearchSpace.h"
#include "SpecEnums.h"
#include "Trainer.h"
#include "TrainingSpec.h"
#include "ScaledCase.h"
#include "Validation.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace shardscope::cli {

namespace {

// A number as the code's default holds it: 300e9 -> "3e+11" is unreadable, so %g with
// enough digits and the exponent kept short.
std::string num(double v)
{
    char buf[64];
    // Large counts as people type them: an exponent that is a multiple of three ("300e9").
    for (int exponent : {12, 9, 6}) {
        const double scale = std::pow(10.0, exponent);
        if (v >= scale && v < 1000 * scale) {
            std::snprintf(buf, sizeof buf, "%.10ge%d", v / scale, exponent);
            if (std::strtod(buf, nullptr) == v)
                return buf;
        }
    }
    std::snprintf(buf, sizeof buf, "%.10g", v);
    std::string s = buf;
    if (const size_t e = s.find("e+"); e != std::string::npos)
        s.erase(e + 1, s[e + 2] == '0' ? 2 : 1);  // "3e+11" -> "3e11"
    return s;
}

template <class E, size_t N>
std::vector<std::string> names(const std::array<EnumName<E>, N>& table)
{
    std::vector<std::string> out;
    for (const EnumName<E>& e : table)
        out.emplace_back(e.name);
    return out;
}

std::vector<std::string> split(const std::string& text, char sep)
{
    std::vector<std::string> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, sep))
        out.push_back(item);
    return out;
}

std::string joined(const std::vector<std::string>& items, const char* sep)
{
    std::string out;
    for (size_t i = 0; i < items.size(); ++i)
        out += (i ? sep : "") + items[i];
    return out;
}

OptionHelp flag(std::string name, std::string help)
{
    return OptionHelp{std::move(name), {}, std::move(help), {}, ValueKind::Flag, {}, false, false};
}
OptionHelp value(std::string name, std::string placeholder, std::string help, std::string def = {},
                 ValueKind kind = ValueKind::Text)
{
    return OptionHelp{std::move(name), std::move(placeholder), std::move(help), std::move(def), kind, {}, false, false};
}
OptionHelp required(OptionHelp o)
{
    o.required = true;
    return o;
}
OptionHelp choice(std::string name, std::vector<std::string> choices, std::string help, std::string def = {})
{
    const std::string placeholder = joined(choices, "|");
    return OptionHelp{std::move(name), placeholder, std::move(help), std::move(def), ValueKind::Choice,
                      std::move(choices), false, false};
}
OptionHelp hidden(OptionHelp o)
{
    o.hidden = true;
    return o;
}

using Options = std::vector<OptionHelp>;
Options operator+(Options a, const Options& b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

const std::string kSuiteDevice = std::string(kSuiteChip) + ":" + num(kSuiteChipScale);

Options jsonOption(const char* what) { return {flag("json", std::string("print ") + what + " as JSON on stdout")}; }
Options quietOption() { return {flag("quiet", "no progress on stderr (it is shown only when stderr is a terminal)")}; }

// train's and validate's: what carries the emulated cluster's collectives (BackendArgs.h).
Options backendOptions()
{
    return Options{choice("backend", {"threads", "mpi"},
                          "what carries the emulated cluster's collectives: this process's threads, or MPI ranks "
                          "(run under mpirun -np N, or give --hosts; rank 0 writes the output)",
                          "threads"),
                   value("hosts", "FILE",
                         "--backend mpi: start the command under mpirun --hostfile FILE (one rank per slot)", {},
                         ValueKind::File)};
}

// The problem of predict, plan, sweep and compare (ProblemArgs.h).
Options problemOptions(bool nodesRequired = true)
{
    const TrainingSpec training;
    OptionHelp nodes = value("nodes", "N", "number of nodes of the node type");
    nodes.required = nodesRequired;
    return {required(value("model", "NAME|FILE", "the model: a catalog name or a model JSON file", {}, ValueKind::Model)),
            required(value("node-type", "NAME", "the node type (catalog list --kind nodes)", {}, ValueKind::Node)),
            nodes,
            required(value("global-batch", "B", "sequences per optimizer step")),
            required(value("seq", "S", "tokens per sequence")),
            choice("precision", names(kPrecisionNames), "training precision", toString(training.precision)),
            choice("main-grads", names(kMainGradsNames),
                   "bf16/FP8/FP4: the gradients' accumulation and reduction type (default: fp32, as Megatron-LM, "
                   "Megatron-Bridge and torchtitan)",
                   toString(training.main_grads)),
            value("tokens", "T", "tokens to train, for time and cost to train", num(training.tokens_to_train)),
            flag("flash-attention", "fused attention: no stored probabilities, scores recomputed"),
            flag("no-dropout", "the model trains without dropout (no masks kept)"),
            value("moe-imbalance", "X",
                  "MoE: the busiest expert-parallel rank's tokens over the mean (1: force-balanced routing)", "1")};
}

Options costModelOption()
{
    return {value("cost-model", "NAME",
                  "the cost model's terms: a profile saved by calibrate --save NAME", "default")};
}

// The search of plan, sweep and compare (planner/SearchSpace.h).
Options searchOptions(int top)
{
    const SearchSpace space;
    return Options{choice("objective", {"throughput", "time", "cost"}, "what the plans are ranked by", "throughput"),
            value("top", "K", "how many plans to keep", std::to_string(top)),
            value("fix", "KEY=V,...", "fix layout keys (tp=8,pp=2,sp=on,zero=1,...)"),
            value("min", "KEY=N,...", "lower bounds (dp, tp, pp, cp, zero, mb, v)"),
            value("max", "KEY=N,...", "upper bounds (dp, tp, pp, cp, zero, mb, v)"),
            value("max-mem", "F", "the fraction of HBM a plan may use", num(space.max_memory_fraction)),
            value("min-micro-batches", "N", "at least this many micro-batches per step",
                  std::to_string(space.min_micro_batches)),
            value("recompute", "LIST", "recomputation modes to search (none,selective,full)", "all"),
            value("threads", "N", "worker threads (0: one per core)", "0"),
            choice("framework", split(exportFormatChoices(), '|'),
                   "keep only layouts this framework can run, so that the top plan exports, and price their "
                   "element-wise work with its kernels", "any")} +
           costModelOption() + jsonOption("the result");
}

std::vector<CommandHelp> makeCommands()
{
    const engine::TrainRequest train;
    const PlanRequest plan;
    std::vector<CommandHelp> c;

    c.push_back({"demo", "what ShardScope computes for the default problem",
                 {"demo [--model NAME] [--node-type NAME] [--nodes N] [--seq S] [--tokens T]"},
                 "The default problem (GPT-3 175B on 64 x trn1.32xlarge): the model's exact parameters and FLOPs, "
                 "the cluster, and the planner's best layouts for it.",
                 {value("model", "NAME", "another catalog model", "the default problem's", ValueKind::Model),
                  value("node-type", "NAME", "another node type", "the default problem's", ValueKind::Node),
                  value("nodes", "N", "number of nodes", "the default problem's"),
                  value("seq", "S", "tokens per sequence", "the default problem's, at most the model's maximum"),
                  value("tokens", "T", "tokens to train", "the default problem's")},
                 {"demo", "demo --model llama-3-8b --node-type p5.48xlarge --nodes 8"}});

    c.push_back({"catalog list", "the models, chips and node types of the catalog",
                 {"catalog list [--kind models|chips|nodes] [--names] [--json]"},
                 "One line per entry: name, kind, built-in or user, summary.",
                 Options{choice("kind", {"models", "chips", "nodes"}, "only entries of this kind", "all"),
                  flag("names", "only the names, one per line (for scripts and shell completion)")} +
                     jsonOption("the entries"),
                 {"catalog list --kind chips"}});
    c.push_back({"catalog show", "one entry, with units and sources",
                 {"catalog show NAME [--json]"},
                 "Every field of a model, chip or node type, with its unit and the source of each hardware figure.",
                 jsonOption("the entry's document"),
                 {"catalog show llama-3-8b", "catalog show trn1.32xlarge --json"},
                 ValueKind::Model});
    c.push_back({"catalog import", "add models, chips or node types from a JSON file",
                 {"catalog import FILE.json [--replace]", "catalog import config.json [--name NAME] [--display-name TEXT] [--replace]"},
                 "All-or-nothing: one invalid entry imports nothing, and the error names its field. A Hugging Face "
                 "config.json (a file with \"architectures\" or \"model_type\") is read as a model of its architecture: "
                 "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel, "
                 "BertForMaskedLM, T5ForConditionalGeneration, MixtralForCausalLM, Qwen3MoeForCausalLM or "
                 "GptOssForCausalLM; an unknown architecture or key is refused by name. Its "
                 "name comes from --name, else from _name_or_path or the file's directory.",
                 {flag("replace", "replace user entries of the same name (built-ins are never replaced)"),
                  value("name", "NAME", "catalog name of a model read from a Hugging Face config.json"),
                  value("display-name", "TEXT", "display name of a model read from a Hugging Face config.json")},
                 {"catalog import my-models.json", "catalog import Llama-2-7b-hf/config.json --name my-llama"},
                 ValueKind::File});
    c.push_back({"catalog export", "one entry as a JSON document",
                 {"catalog export NAME [--out FILE.json]"},
                 "The entry's document, as catalog import reads it.",
                 {value("out", "FILE.json", "write it to this file instead of stdout", {}, ValueKind::File)},
                 {"catalog export gpt2-small --out gpt2-small.json"},
                 ValueKind::Model});
    c.push_back({"catalog remove", "remove one of your own entries",
                 {"catalog remove NAME"},
                 "Built-in entries are read-only.",
                 {},
                 {"catalog remove my-model"},
                 ValueKind::Model});

    c.push_back({"predict", "the prediction for one layout",
                 {"predict --model NAME|FILE --node-type NAME --nodes N --global-batch B --seq S --layout \"...\" "
                  "[OPTIONS]",
                  "predict --plan plan.json [--layout \"...\"] [--json] [--explain]"},
                 "Step time, memory per device, throughput, MFU, time and cost to train for one layout; keys left "
                 "out of --layout take defaults (dp fills the devices). With --plan: the saved plan's best layout "
                 "(or --layout), priced with the plan's own terms.",
                 problemOptions() +
                     Options{value("layout", "KEYS",
                                   "the layout: dp, tp, pp, cp, sp, zero, zero_group, mb, schedule, v, recompute, "
                                   "offload, ep, etp, cp_comm, moe_dispatcher, recompute_modules, offload_activations "
                                   "(e.g. \"tp=8,pp=4,sp=on,zero=1\"; MoE: \"ep=8\", etp defaults to tp; "
                                   "moe_dispatcher=alltoall (default), allgather, deepep or hybridep: Megatron-LM's "
                                   "token dispatchers; cp_comm=a2a: "
                                   "Ulysses all-to-all context parallelism, p2p the ring; with recompute=selective, "
                                   "recompute_modules=layernorm+moe_act names Megatron-LM's modules (core_attn, "
                                   "moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts; default core_attn); "
                                   "offload_activations=N: the first N layers' activations to host memory; "
                                   "pipeline_layout=Et*4|(t*4|)*14tmL: Megatron-LM's --pipeline-model-parallel-layout, "
                                   "E embedding, t layer, m MTP layer, L loss, '|' between chunks, v from its chunks)"),
                             value("plan", "FILE", "a plan file (plan --out) instead of the problem options", {},
                                   ValueKind::File),
                             choice("framework", split(exportFormatChoices(), '|'),
                                    "price the layers' element-wise work with this framework's kernels (eager "
                                    "PyTorch: one kernel per op; a plan file: its own framework)",
                                    "fused kernels")} +
                     costModelOption() +
                     jsonOption("the prediction with its ledger (each figure's terms; the collectives: dimension, "
                                "kind, placement, bytes, calls, exposed and hidden time)") +
                     Options{flag("explain", "list the terms behind every figure")},
                 {"predict --model gpt3-175b --node-type trn1.32xlarge --nodes 64 --global-batch 1536 --seq 2048 "
                  "--layout \"tp=8,pp=8,sp=on,zero=1,recompute=selective\""}});

    c.push_back({"plan", "search every legal layout: top plans, Pareto front, why the rest fail",
                 {"plan --model NAME|FILE --node-type NAME --nodes N --global-batch B --seq S [OPTIONS]"},
                 "Searches every legal layout of the problem and prints the top plans, the Pareto front (step time "
                 "vs memory) and counts of evaluated, pruned and infeasible layouts by reason. Exit 1 when no layout "
                 "is feasible.",
                 problemOptions() + searchOptions(plan.top_k) +
                     Options{value("out", "FILE", "also write the plan file (for predict, export, report, validate)",
                                   {}, ValueKind::File)},
                 {"plan --model gpt3-175b --node-type trn1.32xlarge --nodes 64 --global-batch 1536 --seq 2048 "
                  "--max tp=8 --out plan.json"}});
    c.push_back({"sweep", "the best plan at each cluster size, scaling efficiency",
                 {"sweep --model NAME|FILE --node-type NAME --nodes 1,2,4,...|1..512 --global-batch B --seq S "
                  "[OPTIONS]"},
                 "The search of plan at each node count, its best plan, and tokens/s per device relative to the "
                 "smallest size with a plan.",
                 [] {
                     Options o = problemOptions();
                     for (OptionHelp& x : o)
                         if (x.name == "nodes") {
                             x.value = "LIST";
                             x.help = "node counts: a list (1,2,4) or a range of powers of two (1..512)";
                         }
                     return o;
                 }() + searchOptions(1) + quietOption(),
                 {"sweep --model gpt3-175b --node-type trn1.32xlarge --nodes 1..512 --global-batch 1536 --seq 2048"}});
    c.push_back({"compare", "the best plan, time and cost per node type",
                 {"compare --model NAME|FILE --node-types A,B,C --nodes N|N1,N2,N3 --global-batch B --seq S "
                  "[OPTIONS]"},
                 "The search of plan on each node type (one node count for all, or one per type).",
                 [] {
                     Options o;
                     for (OptionHelp x : problemOptions()) {
                         if (x.name == "node-type") {
                             o.push_back(required(value("node-types", "A,B,C", "the node types to compare")));
                             o.push_back(hidden(x));  // refused with a pointer to --node-types
                             continue;
                         }
                         if (x.name == "nodes") {
                             x.value = "N|N1,N2,...";
                             x.help = "one node count for all types, or one per type";
                         }
                         o.push_back(x);
                     }
                     return o;
                 }() + searchOptions(1) + quietOption(),
                 {"compare --model gpt3-175b --node-types trn1.32xlarge,p5.48xlarge,tpu-v5p-host --nodes 64 "
                  "--global-batch 1536 --seq 2048"}});

    c.push_back({"train", "a real training run of a small transformer on emulated devices",
                 {"train --layers L --hidden H --heads A --vocab V --seq T --batch B --steps N [OPTIONS]",
                  "train ... --devices N --layout \"dp=2,tp=2,pp=2,zero=1,sp=on,schedule=1f1b,mb=2\" [OPTIONS]"},
                 "Trains a small transformer for real on one emulated device (this host, measured, or a catalog chip "
                 "scaled down), or with --devices/--layout on an emulated cluster executing the layout. The blocks "
                 "default to GPT-2's (LayerNorm, GeLU, learned positions, MHA, biases, tied head); --norm, --mlp, "
                 "--positions, --kv-heads and the others choose a Llama-style model and the rest, --encoder BERT's, "
                 "--experts mixture-of-experts layers (the layout's ep and etp split the experts over ep ranks and "
                 "each expert over etp). Prints loss, "
                 "device-clock and wall time per step, peak memory by category, FLOPs and, per device, the bytes of "
                 "each collective.",
                 Options{required(value("layers", "L", "transformer blocks")), required(value("hidden", "H", "hidden size")),
                  required(value("heads", "A", "attention heads")), required(value("vocab", "V", "vocabulary size")),
                  required(value("seq", "T", "tokens per sequence")),
                  required(value("batch", "B", "sequences per step")), required(value("steps", "N", "training steps")),
                  value("kv-heads", "K", "key/value heads (GQA; 1: MQA)", "heads"),
                  value("head-dim", "D", "size of one head", "hidden / heads"),
                  value("ffn", "F", "MLP inner size", "4 x hidden"),
                  choice("mlp", names(kMlpKindNames), "MLP activation (swiglu, geglu: gated)", "gelu"),
                  choice("norm", names(kNormKindNames), "normalisation", "layernorm"),
                  value("norm-eps", "E", "normalisation epsilon", "1e-05"),
                  choice("positions", {"learned", "rotary", "relative"}, "position encoding (relative: T5's bias)",
                         "learned"),
                  value("rope-base", "THETA", "RoPE base (rotary positions)", "10000"),
                  value("decoder-layers", "L", "an encoder-decoder (T5): --layers encoder and L decoder layers "
                                               "(cross-attention; --positions relative, --no-bias)"),
                  value("relative-buckets", "N", "T5's relative position buckets per head and stack", "32"),
                  value("relative-max-distance", "D", "offsets from D on share T5's last bucket", "128"),
                  choice("bias", {"all", "qkv", "none"}, "linear biases: every layer, q, k and v only (Qwen2), or none",
                         "all"),
                  flag("no-bias", "linear layers without biases (--bias none)"),
                  flag("qk-norm", "QK-norm (Qwen3): the norm over the head size on every query and key head, "
                                  "before RoPE"),
                  value("sliding-window", "W", "sliding-window attention on every layer (Mistral): each query sees "
                                               "itself and the W - 1 keys before it"),
                  flag("untied", "an LM head of its own (not the token embedding)"),
                  value("experts", "E", "mixture of experts: E routed experts in the MoE layers (no linear biases)"),
                  value("top-k", "K", "routed experts a token passes through (--experts)", "2"),
                  value("shared-experts", "S", "experts every token passes through (--experts)", "0"),
                  value("shared-ffn", "F", "inner size of each shared expert", "--ffn"),
                  value("expert-ffn", "F", "inner size of each routed expert", "--ffn"),
                  choice("router", names(kMoeRouterNames),
                         "the router's scores: softmax or sigmoid, the top k renormalised (-norm) or not",
                         "softmax-norm"),
                  value("aux-loss-coeff", "X", "load-balancing loss coefficient (Megatron's --moe-aux-loss-coeff)",
                        "0"),
                  value("moe-dense-layers", "N", "first layers with the dense MLP", "0"),
                  value("moe-layer-interval", "N", "an MoE block in the last layer of every N after them", "1"),
                  value("capacity-factor", "X",
                        "expert capacity: at most ceil(X tokens top-k / experts) copies an expert, the lowest router "
                        "weights dropped (Megatron's); 0: dropless",
                        "0"),
                  value("routed-scaling", "X", "factor on the routed experts' weights (DeepSeek-V3)", "1"),
                  value("mtp-layers", "D", "multi-token prediction (DeepSeek-V3): D depths, each predicting one token "
                                           "further (--positions rotary)"),
                  value("mtp-loss-scale", "X", "the MTP losses' weight in the loss (Megatron's "
                                               "--mtp-loss-scaling-factor)", "0.1"),
                  flag("encoder", "BERT: bidirectional, post-norm, token types, embedding norm, pooler + "
                                  "next-sentence head, masked-LM objective (15% of positions, [MASK] = vocab - 1)"),
                  value("token-types", "N", "segment embeddings (--encoder)", "2"),
                  flag("no-pooler", "no pooler and no next-sentence head (--encoder)"),
                  flag("post-norm", "norm after each residual add, no final norm (--encoder implies it)"),
                  choice("precision", {"fp32", "bf16-mixed", "bf16-rne", "bf16-sr"}, "precision mode",
                         engine::toString(train.precision)),
                  choice("recompute", {"none", "full", "selective"}, "activation recomputation (a --layout may say it)",
                         toString(train.layout.recompute)),
                  value("data", "synthetic|FILE", "token source: synthetic (known entropy) or a text file's bytes",
                        train.data, ValueKind::File),
                  value("device", "host|NAME[:scale]", "the device: this host (measured) or a catalog chip scaled by "
                                                       "scale in (0, 1]",
                        "host", ValueKind::Chip),
                  flag("remeasure-host", "measure this host again instead of using the stored profile"),
                  value("lr", "X", "AdamW learning rate", num(train.optimizer.lr)),
                  value("seed", "S", "initialisation, data and rounding seed", std::to_string(train.seed)),
                  value("divergence-factor", "X",
                        "stop with a named error when a loss exceeds X times the run's start (the first loss or "
                        "ln V, whichever is larger); 0: never stop",
                        num(train.divergence_factor)),
                  value("threads", "K", "kernel threads per device", "one per core"),
                  value("devices", "N", "devices of the emulated cluster"),
                  value("layout", "KEYS", "the layout the cluster executes (dp fills what tp x pp leave)"),
                  value("node-type", "NAME[:scale]", "device and links from a catalog node type", {}, ValueKind::Node),
                  value("node-devices", "K", "devices per node"),
                  value("intra-bw", "B/s", "link bandwidth inside a node"),
                  value("inter-bw", "B/s", "link bandwidth between nodes"),
                  value("intra-latency", "S", "link latency inside a node, seconds"),
                  value("inter-latency", "S", "link latency between nodes, seconds"),
                  value("host-bw", "B/s", "a device's host link, one direction (optimizer offload)",
                        "the node type's"),
                  value("bucket-bytes", "N", "data-parallel gradient all-reduce bucket size",
                        std::to_string(train.bucket_bytes))} +
                     backendOptions() +
                     jsonOption("the measurement"),
                 {"train --layers 2 --hidden 64 --heads 4 --vocab 32 --seq 32 --batch 8 --steps 200",
                  "train --layers 2 --hidden 64 --heads 4 --vocab 32 --seq 32 --batch 8 --steps 20 --devices 8 "
                  "--layout \"dp=2,tp=2,pp=2,zero=1\"",
                  "train --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 176 --mlp swiglu --norm rmsnorm "
                  "--positions rotary --rope-base 500000 --no-bias --untied --vocab 64 --seq 32 --batch 8 --steps 20",
                  "train --layers 2 --hidden 64 --heads 4 --encoder --vocab 64 --seq 32 --batch 8 --steps 20 --devices 4 "
                  "--layout \"tp=2,pp=2,sp=on,mb=2\"",
                  "train --layers 2 --hidden 64 --heads 4 --mlp swiglu --norm rmsnorm --positions rotary --experts 8 "
                  "--top-k 2 --shared-experts 1 --aux-loss-coeff 0.01 --vocab 64 --seq 32 --batch 8 --steps 20 "
                  "--devices 4 --layout \"dp=4,ep=4\"",
                  "mpirun -np 4 shardscope-cli train --layers 2 --hidden 64 --heads 4 --vocab 32 --seq 32 --batch 16 "
                  "--steps 5 --devices 16 --layout \"dp=4,tp=2,pp=2\" --backend mpi"}});

    c.push_back({"validate", "the planner's predictions against real engine runs",
                 {"validate --suite [--profile host|chip] [--device NAME[:scale]] [--cost-model NAME] [--json]",
                  "validate --plan plan.json [--layout \"...\"] [--steps N] [--profile host|chip] [--json]",
                  "validate --model NAME|FILE --node-type NAME (--nodes N | --devices N) --global-batch B --seq S "
                  "--layout \"...\" [--steps N] [--json]",
                  "validate --layers L --hidden H --heads A --vocab V --seq T --batch B --layout \"...\" "
                  "[--devices N] [--node-devices K] [--steps N] [--json]"},
                 "Runs the engine on the same cases the planner prices and compares them metric by metric: memory "
                 "by category, FLOPs, bytes per collective kind, device-clock and wall-clock step time. A plan or a "
                 "full-size case is scaled down to run here. Every run is stored in the history.",
                 Options{flag("suite", "the built-in cases covering every parallel dimension"),
                         value("plan", "FILE", "a plan file: its best layout (or --layout), scaled down", {},
                               ValueKind::File),
                         value("layout", "KEYS", "the layout to validate"),
                         value("steps", "N", "training steps per case", "3 (the suite: its own)"),
                         choice("profile", {"host", "chip"}, "the device: this host (measured) or a scaled chip",
                                "chip"),
                         value("device", "NAME[:scale]", "the chip of the cases", kSuiteDevice, ValueKind::Chip),
                         value("layers", "L", "an engine-sized case: transformer blocks"),
                         value("hidden", "H", "an engine-sized case: hidden size"),
                         value("heads", "A", "an engine-sized case: attention heads"),
                         value("vocab", "V", "an engine-sized case: vocabulary size"),
                         value("batch", "B", "an engine-sized case: sequences per step"),
                         value("devices", "N", "devices (a full-size case: instead of --nodes)"),
                         value("node-devices", "K", "an engine-sized case: devices per node"),
                         value("max-devices", "N",
                               "a plan or full-size case keeps its group sizes up to N devices (more with MPI ranks)",
                               std::to_string(kMaxValidationDevices))} +
                     backendOptions() +
                     [] {
                         Options o = problemOptions(false);
                         for (OptionHelp& x : o)
                             x.required = false;
                         return o;
                     }() +
                     costModelOption() + jsonOption("the validation document") + quietOption(),
                 {"validate --suite", "validate --plan plan.json --steps 10",
                  "validate --plan plan.json --max-devices 64 --backend mpi --hosts hosts.txt",
                  "validate --model llama-2-7b --node-type trn1.32xlarge --devices 64 --global-batch 256 --seq 4096 "
                  "--layout \"tp=8,pp=2,zero=1,mb=1,recompute=full\""}});
    c.push_back({"history", "past validation runs",
                 {"history [--limit N] [--json]"},
                 "The validation runs stored in the catalog, newest first.",
                 Options{value("limit", "N", "how many runs", "20")} + jsonOption("the runs"),
                 {"history --limit 5"}});
    c.push_back({"report", "a self-contained HTML or PDF report of a plan, with charts",
                 {"report --plan plan.json --out report.html|report.pdf [--charts png|svg] [--layout \"...\"]"},
                 "The plan's layouts, breakdowns, Pareto front, scaling curve and latest validation, with the GUI's "
                 "charts rendered offscreen (no display needed). The file appears only when it is complete.",
                 Options{required(value("plan", "FILE", "the plan file", {}, ValueKind::File)),
                         required(value("out", "FILE", "report.html or report.pdf", {}, ValueKind::File)),
                         choice("charts", {"png", "svg"}, "chart format (svg: HTML reports only)", "png"),
                         value("layout", "KEYS", "report this layout instead of the plan's best")} +
                     quietOption(),
                 {"report --plan plan.json --out report.html --charts svg"}});
    c.push_back({"calibrate", "the cost model against published runs or engine runs",
                 {"calibrate [--fit [--terms a,b,...] [--holdout 0.3]] [--save NAME] [--json] [--out PROFILE.json]",
                  "calibrate --engine [--holdout 0.3] [--device NAME[:scale]] [--save NAME] [--json]",
                  "calibrate --from-history [--holdout 0.3] [--save NAME] [--json]"},
                 "Without options: the cost model's predictions of the published training runs "
                 "(calibration-cases.md). --fit refits its efficiency terms on them; --engine fits the element-wise "
                 "and wall-clock terms on fresh engine runs of the validation suite, --from-history on the stored "
                 "validation runs, each reporting held-out cases.",
                 Options{flag("fit", "refit the efficiency terms on the published runs"),
                         value("terms", "a,b,...", "the terms --fit may move, on every row",
                               "the shipped procedure: matmul_efficiency.by_vendor, "
                               "matmul_efficiency.sustained_fraction, elementwise_traffic_factor, step_overhead_s, "
                               "dp_overlap on the dense rows, then moe.grouped_gemm_efficiency, moe.layer_overhead_s on "
                               "the MoE rows"),
                         value("holdout", "F", "share of the cases held out of the fit",
                               "0 with --fit, " + num(kCalibrationHoldout) + " with --engine/--from-history"),
                         flag("engine", "fit on fresh engine runs of the validation suite"),
                         flag("from-history", "fit on the stored validation runs"),
                         value("device", "NAME[:scale]", "the chip of the engine runs", kSuiteDevice, ValueKind::Chip),
                         value("save", "NAME", "store the fitted terms as a cost-model profile"),
                         value("out", "FILE", "write the terms as a profile JSON file", {}, ValueKind::File)} +
                     jsonOption("the result") + quietOption(),
                 {"calibrate --fit --holdout 0.3", "calibrate --engine --save engine"}});
    c.push_back({"export", "a plan's layout as launch settings of a training framework",
                 {"export --plan plan.json --format " + exportFormatChoices() +
                  " [--layout \"...\"] [--out FILE] [--json]"},
                 "The saved plan's best layout (or --layout) as the settings of Megatron-LM, Megatron-Bridge, "
                 "DeepSpeed, NeuronX Distributed, NxD Training, PyTorch FSDP2, torchtitan or MaxText. A feature the "
                 "framework cannot express is refused by name (exit 2). --json prints schema, format, layout, runs, "
                 "file_extension, settings, notes and refusals (each feature, reason, message), refused or not.",
                 Options{required(value("plan", "FILE", "the plan file", {}, ValueKind::File)),
                  [] {
                      OptionHelp f = choice("format", split(exportFormatChoices(), '|'), "the framework");
                      f.required = true;
                      return f;
                  }(),
                  value("layout", "KEYS", "export this layout instead of the plan's best"),
                  value("out", "FILE", "write to this file instead of stdout", {}, ValueKind::File)} +
                     jsonOption("the settings, notes and refusals"),
                 {"export --plan plan.json --format megatron --out launch.sh",
                  "export --plan plan.json --format maxtext --json"}});
    c.push_back({"help", "the help of a command", {"help [COMMAND [VERB]]"},
                 "The options of COMMAND, with their defaults and an example; the same as COMMAND --help.", {},
                 {"help plan", "help catalog list"}});
    return c;
}

std::string wrap(const std::string& text, size_t width, const std::string& indent)
{
    std::string out, line;
    std::stringstream words(text);
    std::string w;
    while (words >> w) {
        if (!line.empty() && line.size() + 1 + w.size() > width) {
            out += indent + line + "\n";
            line.clear();
        }
        line += (line.empty() ? "" : " ") + w;
    }
    if (!line.empty())
        out += indent + line + "\n";
    return out;
}

std::string optionLabel(const OptionHelp& o)
{
    return "--" + o.name + (o.flag() ? std::string() : " " + o.value);
}

std::string optionText(const OptionHelp& o)
{
    std::string text = o.help;
    if (o.required)
        text += " (required)";
    else if (!o.def.empty())
        text += " (default: " + o.def + ")";
    return text;
}

void appendOptions(std::string& out, const std::vector<OptionHelp>& options)
{
    constexpr size_t kColumn = 28;
    for (const OptionHelp& o : options) {
        if (o.hidden)
            continue;
        const std::string label = "  " + optionLabel(o);
        const std::string body = wrap(optionText(o), 78 - kColumn, std::string(kColumn, ' '));
        if (label.size() + 2 <= kColumn)
            out += label + std::string(kColumn - label.size(), ' ') + body.substr(kColumn);
        else
            out += label + "\n" + body;
    }
}

std::string upperCase(std::string s)
{
    for (char& ch : s)
        ch = char(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

// roff: backslashes doubled, every "-" an ASCII hyphen-minus (\-) so that options can be
// copied and searched, and a line starting with "." or "'" protected.
std::string roff(const std::string& text)
{
    std::string out;
    for (char ch : text) {
        if (ch == '\\')
            out += "\\e";
        else if (ch == '-')
            out += "\\-";
        else
            out += ch;
    }
    std::string protectedOut;
    bool lineStart = true;
    for (char ch : out) {
        if (lineStart && (ch == '.' || ch == '\''))
            protectedOut += "\\&";
        protectedOut += ch;
        lineStart = ch == '\n';
    }
    return protectedOut;
}

void appendManOptions(std::string& out, const std::vector<OptionHelp>& options)
{
    for (const OptionHelp& o : options) {
        if (o.hidden)
            continue;
        // Appended piece by piece: GCC 12 warns wrongly (-Wrestrict, bug 105329) on "literal" + string.
        out += ".TP\n\\fB\\-\\-";
        out += roff(o.name);
        out += "\\fR";
        if (!o.flag()) {
            out += " \\fI";
            out += roff(o.value);
            out += "\\fR";
        }
        out += "\n";
        out += roff(optionText(o));
        out += "\n";
    }
}

} // namespace

const std::vector<CommandHelp>& commandHelps()
{
    static const std::vector<CommandHelp> commands = makeCommands();
    return commands;
}

const CommandHelp* findCommandHelp(const std::string& name)
{
    for (const CommandHelp& c : commandHelps())
        if (c.name == name)
            return &c;
    return nullptr;
}

const CommandHelp& commandHelp(const std::string& name)
{
    if (const CommandHelp* c = findCommandHelp(name))
        return *c;
    throw std::logic_error("no help for command \"" + name + "\"");
}

const std::vector<OptionHelp>& globalOptions()
{
    static const std::vector<OptionHelp> options{
        value("db", "PATH", "the catalog database ($SHARDSCOPE_DB, else ~/.local/share/shardscope/catalog.sqlite)",
              {}, ValueKind::File),
        flag("help", "this help, or with a command its help (also -h)"),
        flag("version", "print the version and the commit it was built from")};
    return options;
}

const std::vector<OptionHelp>& guiOptions()
{
    static const std::vector<OptionHelp> options{
        value("db", "PATH", "the catalog database ($SHARDSCOPE_DB, else ~/.local/share/shardscope/catalog.sqlite)",
              {}, ValueKind::File),
        choice("theme", {"system", "light", "dark"}, "the palette; remembered for the next start (at first: system)"),
        value("screenshots", "DIR",
              "search the default problem (or open FILE), save a PNG of every page and chart into DIR, then exit", {},
              ValueKind::File),
        value("size", "WxH", "window size for --screenshots", "1440x900"),
        flag("help", "the options (also -h)"), flag("version", "print the version")};
    return options;
}

std::vector<std::string> commandNames(const std::string& group)
{
    std::vector<std::string> out;
    for (const CommandHelp& c : commandHelps()) {
        const size_t space = c.name.find(' ');
        const std::string head = c.name.substr(0, space);
        if (group.empty()) {
            if (out.empty() || out.back() != head)
                out.push_back(head);
        } else if (head == group && space != std::string::npos) {
            out.push_back(c.name.substr(space + 1));
        }
    }
    return out;
}

std::string mainHelpText()
{
    std::string out = "shardscope-cli — plan and validate parallel training layouts for transformer models\n\n"
                      "Usage: shardscope-cli [--db PATH] COMMAND [OPTIONS...]\n"
                      "       shardscope-cli help COMMAND     (or COMMAND --help): its options, defaults, examples\n\n"
                      "Commands:\n";
    for (const CommandHelp& c : commandHelps()) {
        const std::string label = "  " + c.name;
        out += label + std::string(label.size() < 20 ? 20 - label.size() : 1, ' ') + c.summary + "\n";
    }
    out += "\nOptions:\n";
    std::vector<OptionHelp> options = globalOptions();
    appendOptions(out, options);
    out += "\nExit codes: 0 success, 1 runtime failure, 2 bad usage or bad input, 130 interrupted (Ctrl-C).\n"
           "See also: man shardscope-cli\n";
    return out;
}

std::string usageText(const CommandHelp& c)
{
    std::string out;
    for (size_t i = 0; i < c.usage.size(); ++i)
        out += std::string(i ? "\n       " : "") + "shardscope-cli " + c.usage[i];
    return out;
}

std::string commandHelpText(const CommandHelp& c)
{
    std::string out;
    for (size_t i = 0; i < c.usage.size(); ++i)
        out += std::string(i ? "       " : "Usage: ") + "shardscope-cli " + c.usage[i] + "\n";
    out += "\n" + wrap(c.description, 78, "");
    bool any = false;
    for (const OptionHelp& o : c.options)
        any = any || !o.hidden;
    if (any) {
        out += "\nOptions:\n";
        appendOptions(out, c.options);
    }
    out += "\nGlobal options: --db PATH (the catalog database), -h/--help\n";
    if (!c.examples.empty()) {
        out += c.examples.size() == 1 ? "\nExample:\n" : "\nExamples:\n";
        for (const std::string& e : c.examples)
            out += "  shardscope-cli " + e + "\n";
    }
    return out;
}

std::string groupHelpText(const std::string& group)
{
    std::string out = "Usage: shardscope-cli " + group + " VERB [OPTIONS...]\n\nVerbs:\n";
    for (const std::string& verb : commandNames(group)) {
        const CommandHelp& c = commandHelp(group + " " + verb);
        out += "  " + c.usage.front() + "\n" + wrap(c.summary, 70, "      ");
    }
    out += "\nshardscope-cli help " + group + " VERB (or " + group + " VERB --help): the options of one verb\n";
    return out;
}

namespace {

// A man page: title, name, synopsis (roff), description, options, then `body` (roff: more
// sections), the environment and the other page.
std::string manPage(const std::string& program, const std::string& summary, const std::string& synopsis,
                    const std::string& description, const std::vector<OptionHelp>& options, const std::string& body,
                    const std::string& seeAlso, const std::string& version, const std::string& date)
{
    std::string m = ".\\\" Generated from app/cli/CommandHelp.cpp by shardscope-docgen; do not edit.\n";
    m += ".TH " + roff(upperCase(program)) + " 1 \"" + date + "\" \"shardscope " + roff(version) + "\" \"User Commands\"\n";
    m += ".SH NAME\n" + roff(program) + " \\- " + roff(summary) + "\n";
    m += ".SH SYNOPSIS\n.B " + roff(program) + "\n" + synopsis + "\n";
    m += ".SH DESCRIPTION\n" + roff(description) + "\n.SH OPTIONS\n";
    appendManOptions(m, options);
    m += body;
    m += ".SH ENVIRONMENT\n.TP\n.B SHARDSCOPE_DB\n" + roff("the catalog database when --db is not given") + "\n";
    m += ".SH SEE ALSO\n.BR " + roff(seeAlso) + " (1)\n";
    return m;
}

} // namespace

std::string cliManPage(const std::string& version, const std::string& date)
{
    std::string body = ".SH COMMANDS\n";
    for (const CommandHelp& c : commandHelps()) {
        body += ".SS " + roff(c.name) + "\n";
        for (const std::string& u : c.usage)
            body += ".B shardscope\\-cli\n" + roff(u) + "\n.br\n";
        body += ".PP\n" + roff(c.description) + "\n";
        appendManOptions(body, c.options);
        for (const std::string& e : c.examples)
            body += ".PP\nExample:\n.RS\n.EX\nshardscope\\-cli " + roff(e) + "\n.EE\n.RE\n";
    }
    body += ".SH EXIT STATUS\n.TP\n0\nsuccess\n.TP\n1\nruntime failure (also: no feasible layout)\n.TP\n2\n" +
            roff("bad usage or bad input; the message names the field (model.heads: 48 is not divisible by "
                 "kv_heads 5)") +
            "\n.TP\n130\n" + roff("interrupted (Ctrl-C); nothing was written") + "\n";
    body += ".SH FILES\n.TP\n.I ~/.local/share/shardscope/catalog.sqlite\n" +
            roff("the catalog: models, chips, node types, saved cost-model profiles and the validation history; "
                 "created on first use") +
            "\n";
    return manPage("shardscope-cli", "plan and validate parallel training layouts for transformer models",
                   "[\\fB\\-\\-db\\fR \\fIPATH\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR...]",
                   "shardscope-cli is ShardScope without a GUI. A planner searches the parallelism and memory layouts "
                   "of training a transformer model on a cluster of AI chips (data, tensor, pipeline, sequence and "
                   "context parallelism, ZeRO/FSDP sharding, recomputation, offload, micro-batching, pipeline "
                   "schedules) and predicts step time, memory per device, throughput, MFU, time and cost to train. "
                   "An embedded engine trains scaled-down models for real on an emulated cluster with the same "
                   "layout and measures what the planner predicted. Long commands show their progress on stderr "
                   "when it is a terminal (not with --quiet).",
                   globalOptions(), body, "shardscope", version, date);
}

std::string guiManPage(const std::string& version, const std::string& date)
{
    return manPage("shardscope", "desktop planner of parallel training layouts for transformer models",
                   "[\\fIOPTIONS\\fR] [\\fIFILE\\fR]",
                   "ShardScope's desktop window: choose a model and a cluster, browse the plans of every legal layout "
                   "(memory against capacity, step-time breakdown, pipeline schedule, device mesh), explore Pareto "
                   "fronts, scaling curves and chip types, and validate a plan against real training runs on an "
                   "emulated cluster. FILE, if given, is a plan file (shardscope-cli plan --out, or File > Save "
                   "plans) opened at start instead of searching the default problem.",
                   guiOptions(), {}, "shardscope-cli", version, date);
}

std::string bashCompletion()
{
    // Per command: its options, and which take a value of what kind. The catalog names come
    // from the installed CLI itself (catalog list --names), with the --db of the command line.
    std::string s =
        "# bash completion for shardscope-cli. Generated from app/cli/CommandHelp.cpp by shardscope-docgen.\n"
        "_shardscope_cli_names()\n{\n"
        "    local kind=${1:-} db=() i\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        case ${COMP_WORDS[i]} in\n"
        "            --db) db=(--db \"${COMP_WORDS[i + 1]}\") ;;\n"
        "            --db=*) db=(--db \"${COMP_WORDS[i]#--db=}\") ;;\n"
        "        esac\n"
        "    done\n"
        "    \"${COMP_WORDS[0]}\" \"${db[@]}\" catalog list --names ${kind:+--kind $kind} 2>/dev/null\n"
        "}\n\n"
        "_shardscope_cli()\n{\n"
        "    local cur prev words cword\n"
        "    _init_completion -s || return\n"
        "    local cmd= verb= i w\n"
        "    for ((i = 1; i < cword; i++)); do\n"
        "        w=${words[i]}\n"
        "        if [[ $w == --db ]]; then ((i++)); continue; fi\n"
        "        [[ $w == -* ]] && continue\n"
        "        if [[ -z $cmd ]]; then cmd=$w; elif [[ $cmd == catalog && -z $verb ]]; then verb=$w; fi\n"
        "    done\n"
        "    if [[ $prev == --db ]]; then _filedir; return; fi\n"
        "    if [[ -z $cmd ]]; then\n"
        "        COMPREPLY=($(compgen -W '" +
        joined(commandNames(), " ") +
        " --db --help --version' -- \"$cur\"))\n"
        "        return\n"
        "    fi\n"
        "    if [[ $cmd == help ]]; then\n"
        "        COMPREPLY=($(compgen -W '" +
        joined(commandNames(), " ") +
        "' -- \"$cur\"))\n"
        "        return\n"
        "    fi\n"
        "    if [[ $cmd == catalog && -z $verb ]]; then\n"
        "        COMPREPLY=($(compgen -W '" +
        joined(commandNames("catalog"), " ") +
        "' -- \"$cur\"))\n"
        "        return\n"
        "    fi\n"
        "    local key=$cmd${verb:+ $verb} opts= positional=\n"
        "    case $key in\n";
    auto completeValue = [](const OptionHelp& o) -> std::string {
        switch (o.kind) {
        case ValueKind::File: return "_filedir";
        case ValueKind::Model:
            return "COMPREPLY=($(compgen -W \"$(_shardscope_cli_names models)\" -- \"$cur\")); _filedir json";
        case ValueKind::Node:
            return "COMPREPLY=($(compgen -W \"$(_shardscope_cli_names nodes)\" -- \"$cur\"))";
        case ValueKind::Chip:
            return "COMPREPLY=($(compgen -W \"host $(_shardscope_cli_names chips)\" -- \"$cur\"))";
        case ValueKind::Choice: return "COMPREPLY=($(compgen -W '" + joined(o.choices, " ") + "' -- \"$cur\"))";
        case ValueKind::Text:
        case ValueKind::Flag: break;
        }
        return "COMPREPLY=()";
    };
    for (const CommandHelp& c : commandHelps()) {
        std::vector<std::string> opts;
        for (const OptionHelp& o : c.options)
            if (!o.hidden)
                opts.push_back("--" + o.name);
        opts.push_back("--help");
        s += "        '" + c.name + "')\n            opts='" + joined(opts, " ") + "'\n";
        // The value of the option before the cursor.
        s += "            case $prev in\n";
        for (const OptionHelp& o : c.options)
            if (!o.flag() && !o.hidden)
                s += "                --" + o.name + ") " + completeValue(o) + "; return ;;\n";
        s += "            esac\n";
        if (c.positional == ValueKind::Model)
            s += "            positional=names\n";
        else if (c.positional == ValueKind::File)
            s += "            positional=file\n";
        s += "            ;;\n";
    }
    s += "    esac\n"
         "    if [[ $cur == -* || -z $positional ]]; then\n"
         "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
         "    elif [[ $positional == names ]]; then\n"
         "        COMPREPLY=($(compgen -W \"$(_shardscope_cli_names)\" -- \"$cur\"))\n"
         "    else\n"
         "        _filedir json\n"
         "    fi\n"
         "}\n"
         "complete -F _shardscope_cli shardscope-cli\n";
    return s;
}

} // namespace shardscope::cli
