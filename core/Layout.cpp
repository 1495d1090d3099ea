#include "Layout.h"
#include "HardwareSpec.h"
#include "KeyValues.h"
#include "ModelSpec.h"
#include "SpecEnums.h"
#include "TrainingSpec.h"

#include <algorithm>
#include <sstream>
#include <string_view>

namespace shardscope {

bool allToAllCpSplitsHeads(const ModelSpec& m, int tp, int cp, int* queryHeads, int* kvHeads)
{
    if (tp < 1 || cp < 1)
        return false;
    const int q = m.heads / tp;
    const int kv = m.mla.enabled() ? q : m.kv_heads % tp == 0 ? m.kv_heads / tp : 1;
    if (queryHeads)
        *queryHeads = q;
    if (kvHeads)
        *kvHeads = kv;
    return q % cp == 0 && kv % cp == 0;
}

int microBatchesPerStep(const Layout& layout, const TrainingSpec& training)
{
    const std::int64_t perStep = std::int64_t(layout.dp) * layout.micro_batch;
    return perStep > 0 ? int(training.global_batch / perStep) : 0;
}

namespace {

// Megatron-LM's names, in TransformerConfig.recompute_modules' documented order (transformer_config.py
// @ d98e8a64); gdn_norm_out, gdp_in_proj, gdp_qkv and mhc belong to layer kinds this model format
// has no counterpart for.
constexpr std::array<std::pair<unsigned, const char*>, 7> kRecomputeModules{{
    {kRecomputeCoreAttn, "core_attn"},
    {kRecomputeMoeAct, "moe_act"},
    {kRecomputeLayernorm, "layernorm"},
    {kRecomputeMlaUpProj, "mla_up_proj"},
    {kRecomputeMlp, "mlp"},
    {kRecomputeMoe, "moe"},
    {kRecomputeSharedExperts, "shared_experts"},
}};

template <class E, size_t N>
void parseEnumValue(const std::array<EnumName<E>, N>& table, const std::string& key, const std::string& value,
                    E& out, FieldErrors& errors)
{
    if (auto v = enumFromString<E>(table, value))
        out = *v;
    else
        errors.push_back({"layout." + key, "unknown value " + quotedValue(value) + " (" + enumChoices<E>(table) + ")"});
}

} // namespace

const char* recomputeModuleName(unsigned module)
{
    for (const auto& [bit, name] : kRecomputeModules)
        if (bit == module)
            return name;
    return "";
}

unsigned recomputeModuleBit(const std::string& name)
{
    for (const auto& [bit, known] : kRecomputeModules)
        if (name == known)
            return bit;
    return 0;
}

std::string recomputeModulesToString(unsigned modules)
{
    std::string out;
    for (const auto& [bit, name] : kRecomputeModules)
        if (modules & bit) {
            if (!out.empty())
                out += '+';
            out += name;
        }
    return out;
}

unsigned parseRecomputeModules(const std::string& text, const std::string& path, FieldErrors& errors)
{
    unsigned modules = 0;
    std::string known;
    for (const auto& [bit, name] : kRecomputeModules) {
        if (!known.empty())
            known += ", ";
        known += name;
    }
    size_t start = 0;
    while (true) {
        const size_t end = text.find('+', start);
        const std::string name = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        const unsigned bit = recomputeModuleBit(name);
        if (bit == 0)
            errors.push_back({path, "unknown module " + quotedValue(name) + " (one of: " + known + "; joined by '+')"});
        else if (modules & bit)
            errors.push_back({path, "module " + quotedValue(name) + " named twice"});
        modules |= bit;
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    return modules;
}

std::string joinPipelineLayoutCommas(const std::string& text)
{
    if (text.find("pipeline_layout=") == std::string::npos)
        return text;
    std::string out;
    bool inLayout = false;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, end - start);
        const bool keyValue = item.find('=') != std::string::npos;
        if (inLayout && !keyValue && !item.empty()) {
            out += item;
        } else {
            if (start > 0)
                out += ',';
            out += item;
            inLayout = item.find("pipeline_layout=") != std::string::npos;
        }
        start = end + 1;
    }
    return out;
}


Layout parseLayout(const std::string& text, FieldErrors& errors)
{
    Layout layout;
    layout.dp = 0;  // "fill the remaining devices" unless given
    bool vGiven = false, scheduleGiven = false;
    for (const auto& [key, value] : splitKeyValues(joinPipelineLayoutCommas(text), "layout", errors)) {
        vGiven = vGiven || key == "v";
        scheduleGiven = scheduleGiven || key == "schedule";
        int* intField = nullptr;
        if (key == "dp") intField = &layout.dp;
        else if (key == "tp") intField = &layout.tp;
        else if (key == "pp") intField = &layout.pp;
        else if (key == "cp") intField = &layout.cp;
        else if (key == "zero") intField = &layout.zero_stage;
        else if (key == "zero_group") intField = &layout.zero_group;
        else if (key == "mb") intField = &layout.micro_batch;
        else if (key == "v") intField = &layout.virtual_stages;
        else if (key == "first_stage_layers") intField = &layout.first_stage_layers;
        else if (key == "last_stage_layers") intField = &layout.last_stage_layers;
        else if (key == "recompute_layers") intField = &layout.recompute_layers;
        else if (key == "ep") intField = &layout.ep;
        else if (key == "etp") intField = &layout.etp;
        else if (key == "offload_activations") intField = &layout.offload_activations;

        if (intField) {
            if (!parseWholeInt(value, *intField))
                errors.push_back({"layout." + key, quotedValue(value) + " is not an integer"});
        } else if (key == "sp" || key == "tp_comm_overlap" || key == "overlap_param_gather" || key == "ep_comm_overlap" ||
                   key == "account_for_embedding_in_pipeline_split" || key == "account_for_loss_in_pipeline_split") {
            bool& flag = key == "sp"                ? layout.sequence_parallel
                         : key == "tp_comm_overlap" ? layout.tp_comm_overlap
                         : key == "ep_comm_overlap" ? layout.ep_comm_overlap
                         : key == "account_for_embedding_in_pipeline_split" ? layout.account_for_embedding_in_pipeline_split
                         : key == "account_for_loss_in_pipeline_split"      ? layout.account_for_loss_in_pipeline_split
                                                    : layout.overlap_param_gather;
            if (value == "on" || value == "true" || value == "1")
                flag = true;
            else if (value == "off" || value == "false" || value == "0")
                flag = false;
            else
                errors.push_back({"layout." + key, "unknown value " + quotedValue(value) + " (one of: on, off)"});
        } else if (key == "schedule") {
            parseEnumValue(kScheduleNames, key, value, layout.schedule, errors);
        } else if (key == "recompute") {
            parseEnumValue(kRecomputeNames, key, value, layout.recompute, errors);
        } else if (key == "offload") {
            parseEnumValue(kOffloadNames, key, value, layout.offload, errors);
        } else if (key == "recompute_method") {
            parseEnumValue(kRecomputeMethodNames, key, value, layout.recompute_method, errors);
        } else if (key == "cp_comm") {
            parseEnumValue(kCpCommNames, key, value, layout.cp_comm, errors);
        } else if (key == "moe_dispatcher") {
            parseEnumValue(kMoeDispatcherNames, key, value, layout.moe_dispatcher, errors);
        } else if (key == "recompute_modules") {
            layout.recompute_modules = parseRecomputeModules(value, "layout." + key, errors);
        } else if (key == "pipeline_layout") {
            std::string why;
            if (const std::optional<PipelineLayerLayout> parsed = PipelineLayerLayout::parse(value, why))
                layout.pipeline_layout = internPipelineLayerLayout(*parsed);
            else
                errors.push_back({"layout.pipeline_layout", quotedValue(value) + ": " + why});
        } else {
            errors.push_back({"layout." + printable(key), "unknown key (known: dp, tp, pp, cp, sp, zero, zero_group, mb, "
                                               "schedule, v, recompute, offload, tp_comm_overlap, "
                                               "overlap_param_gather, first_stage_layers, last_stage_layers, "
                                               "account_for_embedding_in_pipeline_split, "
                                               "account_for_loss_in_pipeline_split, recompute_method, "
                                               "recompute_layers, ep, etp, ep_comm_overlap, "
                                               "cp_comm, moe_dispatcher, recompute_modules, offload_activations, "
                                               "pipeline_layout)"});
        }
    }
    // As Megatron-LM does (arguments.py @ d98e8a64): an explicit layout's chunk count sets the
    // virtual stages, and more than one per rank runs the interleaved schedule, unless given.
    if (const PipelineLayerLayout* custom = layout.layerLayout(); custom && layout.pp >= 1) {
        if (!vGiven && custom->chunkCount() % layout.pp == 0)
            layout.virtual_stages = custom->chunkCount() / layout.pp;
        if (!scheduleGiven && layout.virtual_stages > 1)
            layout.schedule = PipelineSchedule::Interleaved;
    }
    return layout;
}

std::string toString(const Layout& l)
{
    std::ostringstream out;
    out << "dp=" << l.dp << ",tp=" << l.tp << ",pp=" << l.pp << ",cp=" << l.cp
        << ",sp=" << (l.sequence_parallel ? "on" : "off") << ",zero=" << l.zero_stage
        << ",zero_group=" << l.zero_group << ",mb=" << l.micro_batch << ",schedule=" << toString(l.schedule)
        << ",v=" << l.virtual_stages << ",recompute=" << toString(l.recompute) << ",offload=" << toString(l.offload);
    if (l.tp_comm_overlap)
        out << ",tp_comm_overlap=on";
    if (l.overlap_param_gather)
        out << ",overlap_param_gather=on";
    if (l.first_stage_layers > 0)
        out << ",first_stage_layers=" << l.first_stage_layers;
    if (l.last_stage_layers > 0)
        out << ",last_stage_layers=" << l.last_stage_layers;
    if (l.account_for_embedding_in_pipeline_split)
        out << ",account_for_embedding_in_pipeline_split=on";
    if (l.account_for_loss_in_pipeline_split)
        out << ",account_for_loss_in_pipeline_split=on";
    if (l.recompute_layers > 0)
        out << ",recompute_method=" << toString(l.recompute_method) << ",recompute_layers=" << l.recompute_layers;
    if (l.ep > 1)
        out << ",ep=" << l.ep;
    if (l.etp > 0)
        out << ",etp=" << l.etp;
    if (l.ep_comm_overlap)
        out << ",ep_comm_overlap=on";
    if (l.cp_comm != CpComm::P2P)
        out << ",cp_comm=" << toString(l.cp_comm);
    if (l.moe_dispatcher != MoeDispatcher::AllToAll)
        out << ",moe_dispatcher=" << toString(l.moe_dispatcher);
    if (l.recompute_modules != 0)
        out << ",recompute_modules=" << recomputeModulesToString(l.recompute_modules);
    if (l.offload_activations > 0)
        out << ",offload_activations=" << l.offload_activations;
    if (const PipelineLayerLayout* custom = l.layerLayout())
        out << ",pipeline_layout=" << custom->text();
    return out.str();
}

void resolveDataParallel(Layout& layout, std::int64_t devices, FieldErrors& errors)
{
    if (layout.dp != 0)
        return;
    // Before validate(): the degrees may be anything the text said, so their product is
    // checked (found by fuzz_layout: tp=1000100,pp=15516105,cp=10000800 overflowed int64).
    const auto tpPp = checkedMul(layout.tp, layout.pp);
    const auto model = tpPp ? checkedMul(*tpPp, layout.cp) : std::nullopt;
    if (!model || *model <= 0 || devices % *model != 0) {
        errors.push_back({"layout.dp", "tp x pp x cp = " + (model ? std::to_string(*model) : "more than 9.2e18") +
                                           " does not divide the " + std::to_string(devices) + " devices"});
        layout.dp = 1;
        return;
    }
    layout.dp = int(devices / *model);
}

FieldErrors validate(const Layout& l, const std::string& path)
{
    FieldErrors errors;
    auto add = [&](const char* field, const std::string& message) {
        errors.push_back({path + "." + field, message});
    };
    auto positive = [&](const char* field, int value) {
        if (value < 1 || value > 1'000'000)
            add(field, std::to_string(value) + " is out of range [1, 1000000]");
    };
    positive("dp", l.dp);
    positive("tp", l.tp);
    positive("pp", l.pp);
    positive("cp", l.cp);
    positive("mb", l.micro_batch);
    positive("v", l.virtual_stages);
    positive("ep", l.ep);
    if (l.etp < 0 || l.etp > 1'000'000)
        add("etp", std::to_string(l.etp) + " is out of range [0 (as tp), 1000000]");
    // Each degree in range does not keep their products in range: pp=65536 with v=65536
    // wrapped an int to 0, and a later "layers % (pp x v)" divided by it.
    if (errors.empty()) {
        auto s = [](auto v) { return std::to_string(v); };
        const auto mesh = checkedMul(std::int64_t(l.dp) * l.tp, std::int64_t(l.pp) * l.cp);
        if (!mesh || *mesh > kMaxLayoutProduct)
            add("dp", "dp x tp x pp x cp = " + s(l.dp) + " x " + s(l.tp) + " x " + s(l.pp) + " x " + s(l.cp) + " = " +
                          (mesh ? s(*mesh) : std::string("more than 9.2e18")) + " devices overflows the limit of " +
                          s(kMaxLayoutProduct));
        const std::int64_t chunks = std::int64_t(l.pp) * l.virtual_stages;
        if (chunks > kMaxLayoutProduct)
            add("v", "pp x v = " + s(l.pp) + " x " + s(l.virtual_stages) + " = " + s(chunks) +
                         " model chunks overflows the limit of " + s(kMaxLayoutProduct));
        // Megatron-LM (parallel_state.py @ d98e8a64): "world_size is not divisible by
        // expert_tensor_model_pipeline_parallel size"; per stage, ep x etp must divide tp x cp x dp.
        if (mesh && *mesh <= kMaxLayoutProduct && l.expertDataParallel() == 0) {
            const int etp = l.expertTensorParallel();
            if (etp == l.tp)
                add("ep", "ep " + s(l.ep) + " does not divide dp x cp = " + s(l.dp) + " x " + s(l.cp) + " = " +
                              s(std::int64_t(l.dp) * l.cp) + " (the experts are split over ep ranks carved out of "
                              "dp x cp, etp = tp = " + s(l.tp) + ")");
            else
                add("ep", "ep x etp = " + s(l.ep) + " x " + s(etp) + " = " + s(std::int64_t(l.ep) * etp) +
                              " does not divide tp x cp x dp = " + s(l.tp) + " x " + s(l.cp) + " x " + s(l.dp) +
                              " = " + s(std::int64_t(l.tp) * l.cp * l.dp) + " (a pipeline stage's devices)");
        }
    }
    for (const auto& [field, value] : {std::pair{"first_stage_layers", l.first_stage_layers},
                                       std::pair{"last_stage_layers", l.last_stage_layers}}) {
        if (value < 0 || value > 1'000'000)
            add(field, std::to_string(value) + " is out of range [0 (even split), 1000000]");
        else if (value > 0 && l.pp < 2)
            add(field, "an uneven pipeline split needs pp >= 2");
    }
    // Megatron-LM's rules (transformer_config.py @ d98e8a6): a method and a layer count belong to
    // full recomputation; selective recomputation takes neither.
    if (l.recompute_layers < 0 || l.recompute_layers > 1'000'000)
        add("recompute_layers", std::to_string(l.recompute_layers) + " is out of range [0 (every layer), 1000000]");
    else if (l.recompute_layers > 0 && l.recompute != Recompute::Full)
        add("recompute_layers", "a number of recomputed layers needs recompute=full (selective recomputation covers "
                                "every layer's attention core)");
    if (l.recompute_method == RecomputeMethod::Block && l.recompute_layers == 0)
        add("recompute_method", "block recomputation needs recompute_layers (the layers of each stage recomputed)");
    if (l.zero_stage < 0 || l.zero_stage > 3)
        add("zero", std::to_string(l.zero_stage) + " is not a ZeRO stage (0-3)");
    if (l.zero_group < 0)
        add("zero_group", std::to_string(l.zero_group) + " must be 0 (whole dp group) or positive");
    else if (l.zero_group > 0) {
        if (l.zero_stage == 0)
            add("zero_group", "a shard group needs zero >= 1");
        else if (l.dp >= 1 && l.dp % l.zero_group != 0)
            add("zero_group", std::to_string(l.zero_group) + " does not divide dp " + std::to_string(l.dp));
        else if (const int edp = l.expertDataParallel(); l.dp >= 1 && edp > 0 && edp % (l.dp / l.zero_group) != 0)
            // HSDP's dp / zero_group replicas are Megatron-LM's distributed-optimizer instances, which
            // split every expert-data-parallel group too: "Expert data parallel size should be
            // divisible by partial DistOpt shard factor" (parallel_state.py @ d98e8a64).
            add("zero_group", std::to_string(l.dp / l.zero_group) + " ZeRO replicas (dp " + std::to_string(l.dp) +
                                  " / zero_group " + std::to_string(l.zero_group) +
                                  ") do not divide the expert-data-parallel group edp = tp x cp x dp / (ep x etp) = " +
                                  std::to_string(edp));
    }
    if (l.sequence_parallel && l.tp == 1)
        add("sp", "sequence parallelism splits over the tensor-parallel group and needs tp > 1");
    if (l.schedule == PipelineSchedule::Interleaved) {
        if (l.pp < 2)
            add("schedule", "interleaved 1F1B needs pp >= 2");
        if (l.virtual_stages < 2)
            add("v", "interleaved 1F1B needs v >= 2 model chunks per device");
    } else if (l.virtual_stages != 1) {
        add("v", "v = " + std::to_string(l.virtual_stages) + " needs schedule=interleaved");
    }
    if (l.offload == Offload::Optimizer && l.zero_stage == 0)
        add("offload", "optimizer offload works on the ZeRO optimizer partition and needs zero >= 1");
    if (l.tp_comm_overlap && !l.sequence_parallel)
        add("tp_comm_overlap", "TP communication/GEMM overlap needs sequence parallelism (sp=on), as Megatron-LM "
                               "requires");
    // Megatron-LM's rules (transformer_config.py @ d98e8a64, overlap_moe_expert_parallel_comm).
    if (l.ep_comm_overlap) {
        if (l.ep < 2)
            add("ep_comm_overlap", "overlapping the MoE all-to-all needs expert parallelism (ep > 1)");
        if (l.recompute == Recompute::Full)
            add("ep_comm_overlap", "overlapping the MoE all-to-all does not run with full recomputation (Megatron-LM)");
        if (l.pp > 1 && l.schedule != PipelineSchedule::Interleaved)
            add("ep_comm_overlap", "overlapping the MoE all-to-all with pp > 1 needs the interleaved schedule "
                                   "(Megatron-LM asks for virtual pipeline stages)");
        if (l.recomputes(kRecomputeMoe))
            add("ep_comm_overlap", "overlapping the MoE all-to-all does not run with the MoE layers recomputed "
                                   "(Megatron-LM: \"disable moe in recompute_modules when enabling "
                                   "overlap_moe_expert_parallel_comm\")");
    }
    if (l.cp_comm == CpComm::A2A && l.cp < 2)
        add("cp_comm", "all-to-all context parallelism (cp_comm=a2a) needs cp > 1");
    // Megatron-LM (transformer_config.py @ d98e8a64): "overlap_moe_expert_parallel_comm is supported with
    // alltoall/flex token dispatcher"; token_dispatcher.py MoEFlexTokenDispatcher: "DeepEP dispatcher
    // requires TPxEP > 1" (its group is the etp x ep one).
    if (l.ep_comm_overlap && l.moe_dispatcher == MoeDispatcher::AllGather)
        add("moe_dispatcher", "the allgather dispatcher has no all-to-all to overlap (Megatron-LM runs "
                              "ep_comm_overlap with the alltoall or flex dispatchers only)");
    if (l.moe_dispatcher == MoeDispatcher::DeepEp && std::int64_t(l.ep) * l.expertTensorParallel() < 2)
        add("moe_dispatcher", "the DeepEP dispatcher needs etp x ep > 1 (Megatron-LM: \"DeepEP dispatcher requires "
                              "TPxEP > 1\")");
    // Megatron-LM's rules (transformer_config.py @ d98e8a64): the modules belong to selective
    // recomputation; CPU offloading runs neither with recomputation nor with pipeline parallelism.
    if ((l.recompute_modules & ~kRecomputeModuleMask) != 0)
        add("recompute_modules", "unknown module bits " + std::to_string(l.recompute_modules & ~kRecomputeModuleMask));
    else if (l.recompute_modules != 0 && l.recompute != Recompute::Selective)
        add("recompute_modules", "recomputed modules (" + recomputeModulesToString(l.recompute_modules) +
                                     ") need recompute=selective (Megatron-LM's --recompute-granularity selective)");
    if (l.offload_activations < 0 || l.offload_activations > 1'000'000)
        add("offload_activations", std::to_string(l.offload_activations) + " is out of range [0 (none), 1000000]");
    else if (l.offload_activations > 0) {
        if (l.pp > 1)
            add("offload_activations", "activation offload does not run with pipeline parallelism (Megatron-LM: "
                                       "\"no support for Pipeline parallelism with CPU offloading\"): pp must be 1, "
                                       "not " + std::to_string(l.pp));
        if (l.recompute != Recompute::None)
            add("offload_activations", "activation offload does not run with recomputation (Megatron-LM: \"CPU "
                                       "offloading does not work when activation recomputation is enabled\")");
    }
    if (l.overlap_param_gather && (l.zero_stage < 1 || l.zero_stage > 2))
        add("overlap_param_gather", "overlapping the parameter all-gather needs the distributed optimizer (zero=1 "
                                    "or 2); ZeRO-3 gathers parameters per layer anyway");
    return errors;
}

FieldErrors validate(const Layout& l, const ModelSpec& m, const ClusterSpec& c, const TrainingSpec& t,
                     const std::string& path)
{
    FieldErrors errors = validate(l, path);
    if (!errors.empty())
        return errors;  // the rules below divide by these fields
    auto add = [&](const char* field, const std::string& message) {
        errors.push_back({path + "." + field, message});
    };
    auto s = [](auto v) { return std::to_string(v); };

    if (l.devices() != c.devices())
        add("dp", "dp x tp x pp x cp = " + s(l.dp) + " x " + s(l.tp) + " x " + s(l.pp) + " x " + s(l.cp) + " = " +
                      s(l.devices()) + " does not equal the cluster's " + s(c.devices()) + " devices");
    if (m.heads % l.tp != 0)
        add("tp", s(l.tp) + " does not divide heads " + s(m.heads));
    // KV heads are split when tp divides them, replicated when they divide tp (Megatron, NxD).
    else if (m.kv_heads % l.tp != 0 && l.tp % m.kv_heads != 0)
        add("tp", s(l.tp) + " neither divides nor is a multiple of kv_heads " + s(m.kv_heads));
    if (m.ffn_hidden % l.tp != 0)
        add("tp", s(l.tp) + " does not divide ffn_hidden " + s(m.ffn_hidden));
    const int chunks = l.pp * l.virtual_stages;
    if (const PipelineLayerLayout* custom = l.layerLayout()) {
        // Megatron-LM's rules (transformer_config.py @ d98e8a64 __post_init__, "PP layout";
        // pipeline_parallel_layer_layout.py validate_layer_layout), and what is modelled here.
        if (l.first_stage_layers > 0 || l.last_stage_layers > 0 || l.splitAccountsForEnds())
            add("pipeline_layout", "cannot be set with first_stage_layers, last_stage_layers or account_for_* "
                                   "(Megatron-LM: \"pipeline_model_parallel_layout cannot be set with other pipeline "
                                   "layout arguments\")");
        else if (m.family == ModelFamily::EncoderDecoder)
            add("pipeline_layout", "an explicit pipeline layout is for decoder or encoder stacks, not an "
                                   "encoder-decoder (Megatron-LM: \"Encoder layer is not supported for flexible "
                                   "pipeline layout\")");
        else if (const std::vector<std::string> problems =
                     custom->problems(l.pp, m.totalLayers(), m.mtp.enabled() ? m.mtp.layers : 0);
                 !problems.empty()) {
            std::string all;
            for (const std::string& p : problems)
                all += (all.empty() ? "" : "; ") + p;
            add("pipeline_layout", all);
        } else if (custom->chunkCount() != chunks)
            add("v", "the layout's " + s(custom->chunkCount()) + " model chunks over pp = " + s(l.pp) + " make v = " +
                         s(custom->chunkCount() / l.pp) + ", not " + s(l.virtual_stages) +
                         " (Megatron-LM: \"virtual_pipeline_model_parallel_size conflicts with "
                         "pipeline_model_parallel_layout\")");
    } else if (l.splitAccountsForEnds()) {
        // Megatron-LM's rules (transformer_config.py @ d98e8a64 __post_init__, transformer_block.py
        // get_num_layers_to_build): not with first/last stage counts; layers + 1 per end counted
        // divisible by pp, each rank's share by v (Megatron lets a chunk hold the embedding or the
        // loss alone; a whole stage without a transformer layer is not modelled here).
        const int layers = m.totalLayers(), counted = layers + l.endLayers();
        const char* field = l.account_for_embedding_in_pipeline_split ? "account_for_embedding_in_pipeline_split"
                                                                    : "account_for_loss_in_pipeline_split";
        if (l.first_stage_layers > 0 || l.last_stage_layers > 0)
            add(field, "cannot be set at the same time as first_stage_layers / last_stage_layers (Megatron-LM's "
                       "num_layers_in_first/last_pipeline_stage)");
        else if (m.family == ModelFamily::EncoderDecoder)
            add(field, "counting the embedding or loss in the pipeline split is for decoder or encoder stacks, "
                       "not an encoder-decoder");
        else if (counted % l.pp != 0)
            add(field, "the " + s(layers) + " layers + " + s(l.endLayers()) + " (embedding/loss counted) = " +
                           s(counted) + " are not divisible by pp = " + s(l.pp));
        else if (counted / l.pp % l.virtual_stages != 0)
            add(field, "the " + s(counted / l.pp) + " layers on each pipeline rank (embedding/loss counted) are not "
                           "divisible by v = " + s(l.virtual_stages));
        else if (l.stageLayers(layers, 0) < 1 || l.stageLayers(layers, l.pp - 1) < 1)
            add(field, "the first or last stage would hold no transformer layer (" + s(counted / l.pp) +
                           " per rank, embedding/loss counted): a stage of the embedding or loss alone is not "
                           "modelled");
    } else if (!l.unevenPipeline()) {
        if (m.totalLayers() % chunks != 0)
            add("pp", "pp x v = " + s(chunks) + " does not divide the " + s(m.totalLayers()) + " layers");
    } else if (m.family == ModelFamily::EncoderDecoder) {
        add("first_stage_layers", "an uneven pipeline split is for decoder or encoder stacks (Megatron-LM's "
                                  "--decoder-first/last-pipeline-num-layers), not an encoder-decoder");
    } else {
        // Megatron-LM's rules (megatron/core/transformer/transformer_config.py @ d98e8a6, "Uneven PP"):
        // the rest split evenly over the other stages, middle layers iff middle stages, and with
        // interleaving every stage's count a multiple of v.
        const int first = l.first_stage_layers, last = l.last_stage_layers, layers = m.totalLayers();
        const int middleStages = l.pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
        const int rest = layers - first - last;
        if (rest < 0 || (rest > 0) != (middleStages > 0))
            add("first_stage_layers", "first " + s(first) + " + last " + s(last) + " layers leave " + s(rest) +
                                          " for " + s(middleStages) + " other stages of the " + s(layers) + " layers");
        else if (middleStages > 0 && rest % middleStages != 0)
            add("first_stage_layers", "the " + s(rest) + " layers besides the first and last stage's do not split "
                                      "evenly over the other " + s(middleStages) + " stages");
        else
            for (int stage : {0, l.pp - 1, 1})
                if (stage < l.pp && l.stageLayers(layers, stage) % l.virtual_stages != 0) {
                    add(stage == 0 ? "first_stage_layers" : stage == l.pp - 1 ? "last_stage_layers" : "v",
                        "stage " + s(stage) + "'s " + s(l.stageLayers(layers, stage)) +
                            " layers are not a multiple of v = " + s(l.virtual_stages));
                    break;
                }
    }
    if (l.recompute_method == RecomputeMethod::Block && l.recompute_layers > 0) {
        const int chunkLayers = l.fullChunkLayers(m.totalLayers(), l.pp > 2 ? 1 : 0);
        if (chunkLayers > 0 && l.recompute_layers > chunkLayers)
            add("recompute_layers", s(l.recompute_layers) + " exceeds the " + s(chunkLayers) +
                                        " layers of a stage's model chunk (Megatron-LM: between 1 and the layers "
                                        "per pipeline rank)");
    }
    if (l.expertParallel() && !m.moe.enabled()) {
        if (l.ep > 1)
            add("ep", "expert parallelism needs a mixture-of-experts model; " + m.name + " has no routed experts");
        if (l.etp > 0 && l.etp != l.tp)
            add("etp", "expert tensor parallelism needs a mixture-of-experts model; " + m.name +
                           " has no routed experts");
    }
    if (l.moe_dispatcher != MoeDispatcher::AllToAll && !m.moe.enabled())
        add("moe_dispatcher", std::string("a token dispatcher (") + toString(l.moe_dispatcher) +
                                  ") needs a mixture-of-experts model; " + m.name + " has no routed experts");
    // DeepEP's internode kernels forward inside a node of at most 8 NVLink peers (csrc/kernels/legacy/
    // internode.cu @ dd758caf: LEGACY_NUM_MAX_NVL_PEERS == 8); Megatron-LM: "Currently only "hybridep"
    // backend supports the MNNVL case" (transformer_config.py @ d98e8a64).
    if (l.moe_dispatcher == MoeDispatcher::DeepEp && c.node.scaleUpChips() * c.node.chip.devices_per_chip > 8 &&
        std::int64_t(l.ep) * l.expertTensorParallel() > 8)
        add("moe_dispatcher", "DeepEP forwards inside NVLink domains of at most 8 GPUs; " + c.node.name + " has " +
                                  s(c.node.scaleUpChips() * c.node.chip.devices_per_chip) +
                                  " (a multi-node NVLink domain: use moe_dispatcher=hybridep)");
    if (m.moe.enabled()) {
        // Megatron-LM (arguments.py @ d98e8a64): "Number of experts should be a multiple of
        // expert model parallel_size."
        if (m.moe.experts % l.ep != 0)
            add("ep", "ep " + s(l.ep) + " does not divide the " + s(m.moe.experts) + " routed experts");
        if (m.expertFfn() % l.expertTensorParallel() != 0)
            add(l.etp > 0 ? "etp" : "tp", "etp " + s(l.expertTensorParallel()) +
                                              " does not divide the routed experts' ffn_hidden " + s(m.expertFfn()));
        // Shared experts are split over the attention's tp group (Megatron's SharedExpertMLP).
        if (m.moe.shared_experts > 0 && m.moe.shared_ffn_hidden % l.tp != 0)
            add("tp", s(l.tp) + " does not divide the shared experts' ffn_hidden " + s(m.moe.shared_ffn_hidden));
        // Megatron-LM (megatron/core/transformer/moe/moe_layer.py @ d98e8a64, MoELayer.forward):
        // training with tp > 1 and without sequence parallelism raises a ValueError.
        if (l.tp > 1 && !l.sequence_parallel)
            add("sp", "a mixture-of-experts model with tp > 1 is trained with sequence parallelism (Megatron-LM "
                      "refuses MoE layers under tp without it): set sp=on");
    }
    // Recomputed modules the model has (Megatron-LM's rules, transformer_config.py @ d98e8a64:
    // "mla_up_proj in recompute_modules is only supported with multi_latent_attention"; moe_act
    // with delayed FP8 scaling refused; modules of layer kinds the model lacks named here, as
    // Megatron would recompute nothing for them).
    // (Only the modules beyond the default core_attn have rules; messages built only on error.)
    if (const unsigned modules = l.recomputedModules() & ~unsigned(kRecomputeCoreAttn); modules != 0) {
        auto lacks = [&](unsigned bit, const char* what, const char* lacking) {
            if (modules & bit)
                add("recompute_modules", std::string(recomputeModuleName(bit)) + " recomputes " + what + "; " + m.name +
                                             lacking);
        };
        if (!m.mla.enabled())
            lacks(kRecomputeMlaUpProj, "multi-latent attention's up projections", " has no MLA");
        if (!m.moe.enabled()) {
            lacks(kRecomputeMoeAct, "the routed experts' activation", " has no routed experts");
            lacks(kRecomputeMoe, "the MoE layers", " has no routed experts");
            lacks(kRecomputeSharedExperts, "the shared experts", " has no routed experts");
        } else if (m.moe.shared_experts == 0) {
            lacks(kRecomputeSharedExperts, "the shared experts", " has none");
        }
        if ((modules & kRecomputeMlp) && m.moe.enabled() && m.family != ModelFamily::EncoderDecoder &&
            m.moeLayers(0, m.layers) == m.layers)
            add("recompute_modules", "mlp recomputes the dense layers' MLP; every layer of " + m.name + " is a MoE layer");
        if (t.precision == Precision::FP8Delayed && (modules & (kRecomputeMoeAct | kRecomputeLayernorm)))
            add("recompute_modules", "moe_act and layernorm recomputation do not run with delayed FP8 scaling "
                                     "(Megatron-LM: \"Delayed scaling does not support moe_act and layernorm "
                                     "recompute for fp8\")");
    }
    // Megatron-LM (transformer_config.py @ d98e8a64): "CPU offloading can be done only for layers
    // less than num_layers" (pp = 1: the stage's layers are the model's).
    if (l.offload_activations > 0 && l.offload_activations >= m.totalLayers())
        add("offload_activations", s(l.offload_activations) + " offloaded layers: must be fewer than the " +
                                       s(m.totalLayers()) + " layers on the stage (Megatron-LM offloads layers "
                                       "less than num_layers)");
    if (l.ep_comm_overlap && t.precision == Precision::FP32)
        add("ep_comm_overlap", "overlapping the MoE all-to-all needs 16-bit training (Megatron-LM: bf16 or fp16)");
    if (t.seq_len % l.cp != 0)
        add("cp", s(l.cp) + " does not divide the sequence length " + s(t.seq_len));
    int qHeads = 0, kvHeads = 0;
    if (l.cp_comm == CpComm::A2A && m.heads % l.tp == 0 && !allToAllCpSplitsHeads(m, l.tp, l.cp, &qHeads, &kvHeads))
        add("cp_comm", "all-to-all context parallelism needs cp = " + s(l.cp) + " to divide a device's " + s(qHeads) +
                           " query and " + s(kvHeads) + " key/value heads (heads / tp; Transformer Engine's a2a)");
    if (l.sequence_parallel && t.seq_len % (l.cp * l.tp) != 0)
        add("sp", "sequence parallelism needs tp x cp = " + s(l.cp * l.tp) + " to divide the sequence length " +
                      s(t.seq_len));
    // Encoder-decoder (T5): Megatron-LM trains it on one pipeline stage and without context
    // parallelism (examples/t5/pretrain_t5.py @ d98e8a6: model_provider raises "Pipeline parallelism
    // is not supported for T5.", and its get_batch does not split the batch over cp ranks as
    // pretrain_gpt.py's get_batch_on_this_cp_rank does); the engine likewise. So the search does not
    // propose them and a plan asking for them is refused by name.
    if (m.family == ModelFamily::EncoderDecoder && l.pp > 1)
        add("pp", "an encoder-decoder model (T5) is trained on one pipeline stage (Megatron-LM refuses pipeline "
                  "parallelism for T5): pp must be 1, not " + s(l.pp));
    if (m.family == ModelFamily::EncoderDecoder && l.cp > 1)
        add("cp", "an encoder-decoder model (T5) has no context parallelism (Megatron-LM does not split its "
                  "batches over cp ranks): cp must be 1, not " + s(l.cp));
    const std::int64_t perStep = std::int64_t(l.dp) * l.micro_batch;
    if (t.global_batch % perStep != 0)
        add("mb", "dp x mb = " + s(perStep) + " does not divide the global batch " + s(t.global_batch));
    else if (l.schedule == PipelineSchedule::Interleaved && microBatchesPerStep(l, t) % l.pp != 0)
        add("schedule", "interleaved 1F1B needs the " + s(microBatchesPerStep(l, t)) +
                            " micro-batches to be a multiple of pp " + s(l.pp));
    return errors;
}

const char* toString(PipelineSchedule v) { return enumToString<PipelineSchedule>(kScheduleNames, v); }
const char* toString(Recompute v) { return enumToString<Recompute>(kRecomputeNames, v); }
const char* toString(Offload v) { return enumToString<Offload>(kOffloadNames, v); }
const char* toString(RecomputeMethod v) { return enumToString<RecomputeMethod>(kRecomputeMethodNames, v); }
const char* toString(CpComm v) { return enumToString<CpComm>(kCpCommNames, v); }
const char* toString(MoeDispatcher v) { return enumToString<MoeDispatcher>(kMoeDispatcherNames, v); }

} // namespace shardscope
