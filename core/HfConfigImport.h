// HfConfigImport: a Hugging Face transformers config.json read as a ModelSpec, for the
// architectures whose meaning we have read in the transformers source (each field cited in
// HfConfigImport.cpp): LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM, GPT2LMHeadModel, BertForMaskedLM, T5ForConditionalGeneration, and the
// mixtures of experts MixtralForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM and
// DeepseekV3ForCausalLM (multi-head latent attention).
// A missing field takes the default of the architecture's config class; an unknown
// architecture, a key we do not know to leave the shape alone, or a value we cannot express
// is refused by name, and nothing is returned.
#pragma once

#include "FieldError.h"
#include "ModelSpec.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

// A config.json rather than one of our documents: no "schema", and "architectures" or "model_type".
bool isHfConfig(const QJsonObject& document);

// The architectures read (the names in a config's "architectures").
std::vector<std::string> hfArchitectures();

struct HfImportNames {
    std::string name;          // catalog name; empty: from _name_or_path or the file's directory
    std::string display_name;  // empty: the last part of _name_or_path or the directory name
    std::string file_path;     // where the config was read (for the names and the source)
};

// The architecture the config names ("architectures"[0], else the model_type's causal-LM
// class), or empty.
std::string hfArchitecture(const QJsonObject& config);

// Errors name the config's key ("num_key_value_heads: ..."); the ModelSpec is also validated.
std::optional<ModelSpec> modelFromHfConfig(const QJsonObject& config, const HfImportNames& names, FieldErrors& errors);

// The model document (SpecJson) of a config, as catalog import stores it; throws InputError
// "nothing imported from this Hugging Face config (ARCH):" with every problem otherwise.
QJsonObject modelDocumentFromHfConfig(const QJsonObject& config, const HfImportNames& names);

} // namespace shardscope
