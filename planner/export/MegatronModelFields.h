// The model fields beyond a Llama as Megatron Core settings (MegatronModelFields.cpp): shared by
// the Megatron-LM and Megatron-Bridge exporters. Internal to the planner library.
#pragma once

#include "ExportCommon.h"

#include <string>
#include <vector>

namespace shardscope::exportdetail {

// One model setting: the pretrain_gpt.py option with its value ("" for a switch) and the
// TransformerConfig / GPTModelProvider field with its Python value ("" field: Megatron-LM only;
// "" option: Megatron-Bridge only).
struct CoreSetting {
    std::string option;
    std::string cli_value;
    std::string field;
    std::string py_value;
};

// --position-embedding-type / position_embedding_type: "rope", "yarn" or "learned_absolute".
std::string megatronPositionType(const ModelSpec& model);

// The settings for norm_eps, qkv bias, qk_norm, attention sinks, sliding window, RoPE scaling and
// MoE (beyond the expert count and top-k); what Megatron Core cannot express is refused by name.
// `bridge`: for Megatron-Bridge, which lacks the fields of some Megatron-LM options.
std::vector<CoreSetting> megatronModelSettings(Refusals& refuse, const ModelSpec& model, bool bridge);
// The MoE token dispatcher of the layout (Layout.h MoeDispatcher): moe_token_dispatcher_type and, for
// DeepEP and HybridEP, moe_flex_dispatcher_backend (nothing without MoE).
std::vector<CoreSetting> megatronDispatcherSettings(const ModelSpec& model, const Layout& layout);

} // namespace shardscope::exportdetail
