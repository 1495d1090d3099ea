// Spellings of the ModelSpec enums in JSON and on the command line.
#pragma once

#include "EnumNames.h"
#include "ModelSpec.h"

#include <array>

namespace shardscope {

inline constexpr std::array kModelFamilyNames{
    EnumName<ModelFamily>{ModelFamily::DecoderOnly, "decoder"},
    EnumName<ModelFamily>{ModelFamily::EncoderOnly, "encoder"},
    EnumName<ModelFamily>{ModelFamily::EncoderDecoder, "encoder-decoder"},
};
inline constexpr std::array kMlpKindNames{
    EnumName<MlpKind>{MlpKind::Gelu, "gelu"},
    EnumName<MlpKind>{MlpKind::Relu, "relu"},
    EnumName<MlpKind>{MlpKind::SwiGlu, "swiglu"},
    EnumName<MlpKind>{MlpKind::GeGlu, "geglu"},
};
inline constexpr std::array kPositionKindNames{
    EnumName<PositionKind>{PositionKind::Learned, "learned"},
    EnumName<PositionKind>{PositionKind::Rotary, "rotary"},
    EnumName<PositionKind>{PositionKind::Relative, "relative"},
    EnumName<PositionKind>{PositionKind::None, "none"},
};
inline constexpr std::array kNormKindNames{
    EnumName<NormKind>{NormKind::LayerNorm, "layernorm"},
    EnumName<NormKind>{NormKind::RmsNorm, "rmsnorm"},
};
// Hugging Face's rope_type spellings (transformers modeling_rope_utils.py ROPE_INIT_FUNCTIONS).
inline constexpr std::array kRopeScalingKindNames{
    EnumName<RopeScalingKind>{RopeScalingKind::None, "default"},
    EnumName<RopeScalingKind>{RopeScalingKind::Linear, "linear"},
    EnumName<RopeScalingKind>{RopeScalingKind::Dynamic, "dynamic"},
    EnumName<RopeScalingKind>{RopeScalingKind::Yarn, "yarn"},
    EnumName<RopeScalingKind>{RopeScalingKind::Llama3, "llama3"},
};
inline constexpr std::array kMoeRouterNames{
    EnumName<MoeRouter>{MoeRouter::Softmax, "softmax"},
    EnumName<MoeRouter>{MoeRouter::SoftmaxNorm, "softmax-norm"},
    EnumName<MoeRouter>{MoeRouter::Sigmoid, "sigmoid"},
    EnumName<MoeRouter>{MoeRouter::SigmoidNorm, "sigmoid-norm"},
};

} // namespace shardscope
