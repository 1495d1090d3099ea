// ModelDialog: create or edit a custom model, with the exact parameter count and
// forward FLOPs shown live and every invalid field named as it is typed.
#pragma once

#include "ModelSpec.h"

#include <QDialog>

class QCheckBox;
class QDoubleSpinBox;
class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace shardscope {

class ModelDialog : public QDialog {
    Q_OBJECT
public:
    explicit ModelDialog(const ModelSpec& start, QWidget* parent = nullptr);

    ModelSpec model() const;
    QLabel* parameters() const { return parameters_; }
    QLabel* messages() const { return messages_; }
    QSpinBox* field(const char* name) const;

    // A model's structural fields as its family has them (decoder: a final norm and nothing
    // else; encoder: BERT's embedding norm, token types and pooler; encoder-decoder: T5's
    // relative buckets), its sizes kept: where "New model..." starts.
    static ModelSpec withFamilyDefaults(ModelSpec start);

private:
    void refresh();

    QLineEdit* name_ = nullptr;
    QLineEdit* displayName_ = nullptr;
    QComboBox* family_ = nullptr;
    QComboBox* mlp_ = nullptr;
    QComboBox* positions_ = nullptr;
    QComboBox* norm_ = nullptr;
    QCheckBox* bias_ = nullptr;
    QCheckBox* qkvBias_ = nullptr;  // Qwen2's biases on q, k and v only
    QCheckBox* qkNorm_ = nullptr;   // Qwen3's QK-norm
    QCheckBox* sinks_ = nullptr;    // GPT-OSS's attention sinks
    QSpinBox* slidingWindow_ = nullptr;
    QCheckBox* tied_ = nullptr;
    // The structure BERT- and T5-style models differ in: each changes the count or the export.
    QCheckBox* embeddingNorm_ = nullptr;
    QCheckBox* finalNorm_ = nullptr;
    QCheckBox* pooler_ = nullptr;
    QSpinBox *tokenTypes_ = nullptr, *positionTable_ = nullptr, *relativeBuckets_ = nullptr;
    QDoubleSpinBox* ropeBase_ = nullptr;
    // The MoE router and its training settings; MLA's ranks and per-head sizes (issue 16).
    QComboBox* router_ = nullptr;
    QDoubleSpinBox *capacityFactor_ = nullptr, *auxLoss_ = nullptr;
    QSpinBox *kvLoraRank_ = nullptr, *qLoraRank_ = nullptr, *qkNopeHeadDim_ = nullptr, *qkRopeHeadDim_ = nullptr,
             *vHeadDim_ = nullptr;
    // Multi-token prediction (DeepSeek-V3): its depths and the weight of their mean loss.
    QSpinBox* mtpLayers_ = nullptr;
    QDoubleSpinBox* mtpLossScale_ = nullptr;
    QSpinBox *layers_ = nullptr, *decoderLayers_ = nullptr, *hidden_ = nullptr, *heads_ = nullptr,
             *kvHeads_ = nullptr, *headDim_ = nullptr, *ffn_ = nullptr, *vocab_ = nullptr, *maxSeq_ = nullptr,
             *experts_ = nullptr, *topK_ = nullptr, *expertFfn_ = nullptr, *sharedExperts_ = nullptr,
             *sharedFfn_ = nullptr, *denseLayers_ = nullptr, *layerInterval_ = nullptr;
    QLabel* parameters_ = nullptr;
    QLabel* messages_ = nullptr;
    QDialogButtonBox* buttons_ = nullptr;
    ModelSpec start_;
};

} // namespace shardscope
