#include "ModelDialog.h"
#include "EnumNames.h"
#include "ModelEnums.h"
#include "Units.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <initializer_list>

namespace shardscope {

namespace {

template <class E, size_t N>
QComboBox* enumBox(const std::array<EnumName<E>, N>& table, E value, QWidget* parent)
{
    auto* box = new QComboBox(parent);
    for (const auto& e : table)
        box->addItem(QString::fromLatin1(e.name), int(e.value));
    box->setCurrentIndex(box->findData(int(value)));
    return box;
}

QSpinBox* spin(int value, int lo, int hi, QWidget* parent, const char* name)
{
    auto* s = new QSpinBox(parent);
    s->setRange(lo, hi);
    s->setValue(value);
    s->setObjectName(QLatin1String(name));
    s->setGroupSeparatorShown(true);
    return s;
}

} // namespace

ModelDialog::ModelDialog(const ModelSpec& start, QWidget* parent) : QDialog(parent), start_(start)
{
    setWindowTitle(tr("Model"));
    name_ = new QLineEdit(QString::fromStdString(start.name), this);
    displayName_ = new QLineEdit(QString::fromStdString(start.display_name), this);
    family_ = enumBox(kModelFamilyNames, start.family, this);
    layers_ = spin(start.layers, 1, 10000, this, "layers");
    decoderLayers_ = spin(start.decoder_layers, 0, 10000, this, "decoder_layers");
    hidden_ = spin(start.hidden, 1, 1 << 20, this, "hidden");
    heads_ = spin(start.heads, 1, 1 << 14, this, "heads");
    kvHeads_ = spin(start.kv_heads, 1, 1 << 14, this, "kv_heads");
    headDim_ = spin(start.head_dim, 1, 1 << 14, this, "head_dim");
    ffn_ = spin(start.ffn_hidden, 1, 1 << 22, this, "ffn_hidden");
    mlp_ = enumBox(kMlpKindNames, start.mlp, this);
    vocab_ = spin(start.vocab, 1, 1 << 24, this, "vocab");
    maxSeq_ = spin(start.max_seq, 1, 1 << 24, this, "max_seq");
    positions_ = enumBox(kPositionKindNames, start.positions, this);
    norm_ = enumBox(kNormKindNames, start.norm, this);
    bias_ = new QCheckBox(tr("biases on linear layers"), this);
    bias_->setChecked(start.bias);
    qkvBias_ = new QCheckBox(tr("biases on q, k and v only (Qwen2)"), this);
    qkvBias_->setChecked(start.qkv_bias && !start.bias);
    qkNorm_ = new QCheckBox(tr("QK-norm on every query and key head (Qwen3)"), this);
    qkNorm_->setChecked(start.qk_norm);
    sinks_ = new QCheckBox(tr("attention sinks, a logit per head (GPT-OSS)"), this);
    sinks_->setChecked(start.attention_sinks);
    slidingWindow_ = spin(start.sliding_window.size, 0, 1 << 24, this, "sliding_window.size");
    slidingWindow_->setToolTip(tr("Keys each query sees on the sliding layers (0: full attention). The layers "
                                  "come from the document (every layer when it lists none)."));
    tied_ = new QCheckBox(tr("LM head tied to the token embedding"), this);
    tied_->setChecked(start.tied_embeddings);
    embeddingNorm_ = new QCheckBox(tr("norm after the embeddings (BERT)"), this);
    embeddingNorm_->setChecked(start.embedding_norm);
    finalNorm_ = new QCheckBox(tr("final norm after the last layer (pre-norm)"), this);
    finalNorm_->setChecked(start.final_norm);
    pooler_ = new QCheckBox(tr("pooler, dense h x h (BERT)"), this);
    pooler_->setChecked(start.pooler);
    tokenTypes_ = spin(start.token_types, 0, 1 << 16, this, "token_types");
    positionTable_ = spin(start.position_table, 0, 1 << 24, this, "position_table");
    relativeBuckets_ = spin(start.relative_buckets, 0, 1 << 16, this, "relative_buckets");
    ropeBase_ = new QDoubleSpinBox(this);
    ropeBase_->setRange(1, 1e12);
    ropeBase_->setDecimals(0);
    ropeBase_->setValue(start.rope_base);
    ropeBase_->setToolTip(tr("RoPE base (theta) for rotary positions: Llama 3 500000, Mixtral 1000000"));
    experts_ = spin(start.moe.experts, 0, 4096, this, "moe.experts");
    topK_ = spin(start.moe.top_k, 0, 4096, this, "moe.top_k");
    expertFfn_ = spin(start.moe.ffn_hidden, 0, 1 << 22, this, "moe.ffn_hidden");
    sharedExperts_ = spin(start.moe.shared_experts, 0, 4096, this, "moe.shared_experts");
    sharedFfn_ = spin(start.moe.shared_ffn_hidden, 0, 1 << 22, this, "moe.shared_ffn_hidden");
    denseLayers_ = spin(start.moe.dense_layers, 0, 10000, this, "moe.dense_layers");
    layerInterval_ = spin(start.moe.layer_interval, 1, 10000, this, "moe.layer_interval");
    router_ = enumBox(kMoeRouterNames, start.moe.router, this);
    router_->setObjectName(QStringLiteral("moe.router"));
    router_->setToolTip(tr("How a token's expert weights come from the router: softmax or sigmoid scores of the "
                           "top k, as they are or renormalised over the k (Mixtral, Qwen3: softmax-norm; "
                           "DeepSeek-V3: sigmoid-norm)"));
    capacityFactor_ = new QDoubleSpinBox(this);
    capacityFactor_->setObjectName(QStringLiteral("moe.capacity_factor"));
    capacityFactor_->setRange(0, 1000);
    capacityFactor_->setDecimals(2);
    capacityFactor_->setSingleStep(0.25);
    capacityFactor_->setSpecialValueText(tr("dropless"));  // 0: the document leaves the key out
    capacityFactor_->setValue(start.moe.capacity_factor);
    capacityFactor_->setToolTip(tr("Tokens an expert takes, times its even share; those past it are dropped. "
                                   "Dropless: every token reaches its top k."));
    auxLoss_ = new QDoubleSpinBox(this);
    auxLoss_->setObjectName(QStringLiteral("moe.aux_loss_coeff"));
    auxLoss_->setRange(0, 1000);
    auxLoss_->setDecimals(4);
    auxLoss_->setSingleStep(0.001);
    auxLoss_->setValue(start.moe.aux_loss_coeff);
    // Megatron-LM megatron/training/arguments.py @ d98e8a6 (line 3536): --moe-aux-loss-coeff.
    auxLoss_->setToolTip(tr("Weight of the load-balancing loss (Megatron's --moe-aux-loss-coeff)"));
    // Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank 0 is ordinary attention.
    kvLoraRank_ = spin(start.mla.kv_lora_rank, 0, 1 << 20, this, "mla.kv_lora_rank");
    qLoraRank_ = spin(start.mla.q_lora_rank, 0, 1 << 20, this, "mla.q_lora_rank");
    qkNopeHeadDim_ = spin(start.mla.qk_nope_head_dim, 0, 1 << 14, this, "mla.qk_nope_head_dim");
    qkRopeHeadDim_ = spin(start.mla.qk_rope_head_dim, 0, 1 << 14, this, "mla.qk_rope_head_dim");
    vHeadDim_ = spin(start.mla.v_head_dim, 0, 1 << 14, this, "mla.v_head_dim");
    mtpLayers_ = spin(start.mtp.layers, 0, 64, this, "mtp.layers");
    mtpLayers_->setToolTip(tr("Multi-token prediction depths (DeepSeek-V3: 1; Megatron's --mtp-num-layers): each "
                              "one more layer, projection and loss on the last pipeline stage"));
    mtpLossScale_ = new QDoubleSpinBox(this);
    mtpLossScale_->setObjectName(QStringLiteral("mtp.loss_scale"));
    mtpLossScale_->setRange(0, 10);  // validate(): (0, 10]
    mtpLossScale_->setDecimals(3);
    mtpLossScale_->setSingleStep(0.05);
    mtpLossScale_->setValue(start.mtp.loss_scale);
    mtpLossScale_->setToolTip(tr("Weight of the MTP losses' mean in the training loss (Megatron's "
                                 "--mtp-loss-scaling-factor, default 0.1)"));
    kvLoraRank_->setToolTip(tr("Rank of the key-value latent (DeepSeek-V3: 512); 0: not multi-head latent "
                               "attention. With MLA, head dimension = no-RoPE + RoPE part, KV heads = heads."));

    auto* form = new QFormLayout;
    form->addRow(tr("Name (catalog id)"), name_);
    form->addRow(tr("Display name"), displayName_);
    form->addRow(tr("Family"), family_);
    form->addRow(tr("Layers (encoder for enc-dec)"), layers_);
    form->addRow(tr("Decoder layers (enc-dec)"), decoderLayers_);
    form->addRow(tr("Hidden size"), hidden_);
    form->addRow(tr("Attention heads"), heads_);
    form->addRow(tr("KV heads (GQA/MQA)"), kvHeads_);
    form->addRow(tr("Head dimension"), headDim_);
    form->addRow(tr("FFN size"), ffn_);
    form->addRow(tr("MLP"), mlp_);
    form->addRow(tr("Vocabulary"), vocab_);
    form->addRow(tr("Max sequence"), maxSeq_);
    form->addRow(tr("Positions"), positions_);
    form->addRow(tr("RoPE base"), ropeBase_);
    form->addRow(tr("Norm"), norm_);
    form->addRow(QString(), bias_);
    form->addRow(QString(), qkvBias_);
    form->addRow(QString(), qkNorm_);
    form->addRow(QString(), sinks_);
    form->addRow(tr("Sliding window (0: none)"), slidingWindow_);
    // The second column: the structure BERT and T5 differ in, the mixture of experts and
    // multi-head latent attention, each in its own box (one column was taller than a screen).
    auto group = [this](const QString& title) {
        auto* box = new QGroupBox(title, this);
        auto* boxForm = new QFormLayout(box);
        return boxForm;
    };
    QFormLayout* structure = group(tr("Structure"));
    structure->addRow(tr("Learned positions (0: max sequence)"), positionTable_);
    structure->addRow(tr("Relative attention buckets (T5)"), relativeBuckets_);
    structure->addRow(tr("Token types (BERT segments)"), tokenTypes_);
    structure->addRow(QString(), tied_);
    structure->addRow(QString(), embeddingNorm_);
    structure->addRow(QString(), finalNorm_);
    structure->addRow(QString(), pooler_);
    QFormLayout* moe = group(tr("Mixture of experts"));
    moe->addRow(tr("Experts (0: dense)"), experts_);
    moe->addRow(tr("Experts per token"), topK_);
    moe->addRow(tr("Expert FFN size (0: FFN size)"), expertFfn_);
    moe->addRow(tr("Shared experts"), sharedExperts_);
    moe->addRow(tr("Shared expert FFN size"), sharedFfn_);
    moe->addRow(tr("Dense first layers"), denseLayers_);
    moe->addRow(tr("MoE layer every"), layerInterval_);
    moe->addRow(tr("Router"), router_);
    moe->addRow(tr("Capacity factor"), capacityFactor_);
    moe->addRow(tr("Load-balancing loss weight"), auxLoss_);
    QFormLayout* mla = group(tr("Multi-head latent attention"));
    mla->addRow(tr("Key-value rank (0: no MLA)"), kvLoraRank_);
    mla->addRow(tr("Query rank (0: no compression)"), qLoraRank_);
    mla->addRow(tr("Per-head q/k without RoPE"), qkNopeHeadDim_);
    mla->addRow(tr("Per-head RoPE q/k"), qkRopeHeadDim_);
    mla->addRow(tr("Per-head value"), vHeadDim_);
    QFormLayout* mtp = group(tr("Multi-token prediction"));
    mtp->addRow(tr("Depths (0: none)"), mtpLayers_);
    mtp->addRow(tr("Loss weight"), mtpLossScale_);
    auto* second = new QVBoxLayout;
    for (QFormLayout* f : {structure, moe, mla, mtp})
        second->addWidget(f->parentWidget());
    second->addStretch();
    auto* columns = new QHBoxLayout;
    columns->addLayout(form, 1);
    columns->addLayout(second, 1);

    parameters_ = new QLabel(this);
    QFont f = parameters_->font();
    f.setBold(true);
    parameters_->setFont(f);
    messages_ = new QLabel(this);
    messages_->setStyleSheet(QStringLiteral("color: #c0392b"));
    messages_->setWordWrap(true);
    buttons_ = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, this);
    connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(columns);
    layout->addWidget(parameters_);
    layout->addWidget(messages_);
    layout->addWidget(buttons_);

    for (QSpinBox* s : {layers_, decoderLayers_, hidden_, heads_, kvHeads_, headDim_, ffn_, vocab_, maxSeq_, experts_,
                        topK_, tokenTypes_, positionTable_, relativeBuckets_, slidingWindow_, expertFfn_,
                        sharedExperts_, sharedFfn_, denseLayers_, layerInterval_, kvLoraRank_, qLoraRank_,
                        qkNopeHeadDim_, qkRopeHeadDim_, vHeadDim_, mtpLayers_})
        connect(s, &QSpinBox::valueChanged, this, &ModelDialog::refresh);
    for (QDoubleSpinBox* s : {ropeBase_, capacityFactor_, auxLoss_, mtpLossScale_})
        connect(s, &QDoubleSpinBox::valueChanged, this, &ModelDialog::refresh);
    for (QComboBox* c : {family_, mlp_, positions_, norm_, router_})
        connect(c, &QComboBox::currentIndexChanged, this, &ModelDialog::refresh);
    for (QCheckBox* c : {bias_, qkvBias_, qkNorm_, sinks_, tied_, embeddingNorm_, finalNorm_, pooler_})
        connect(c, &QCheckBox::toggled, this, &ModelDialog::refresh);
    connect(name_, &QLineEdit::textChanged, this, &ModelDialog::refresh);
    refresh();
}

QSpinBox* ModelDialog::field(const char* name) const { return findChild<QSpinBox*>(QLatin1String(name)); }

ModelSpec ModelDialog::withFamilyDefaults(ModelSpec m)
{
    const ModelSpec plain;  // the format's defaults: no pooler, no token types, a final norm
    m.pooler = plain.pooler;
    m.token_types = plain.token_types;
    m.embedding_norm = plain.embedding_norm;
    m.final_norm = plain.final_norm;
    m.position_table = plain.position_table;
    m.relative_buckets = plain.relative_buckets;
    m.rope_base = plain.rope_base;
    m.decoder_layers = m.family == ModelFamily::EncoderDecoder ? m.decoder_layers : 0;
    // Settings the dialog has no control for (the sliding layers, RoPE scaling, eps, DeepSeek's
    // group-limited routing and its correction bias) start from the format's defaults too.
    m.sliding_window = plain.sliding_window;
    m.rope_scaling = plain.rope_scaling;
    m.norm_eps = plain.norm_eps;
    m.moe.score_correction_bias = plain.moe.score_correction_bias;
    m.moe.expert_groups = plain.moe.expert_groups;
    m.moe.group_top_k = plain.moe.group_top_k;
    m.moe.routed_scaling = plain.moe.routed_scaling;
    switch (m.family) {
    case ModelFamily::EncoderOnly:  // BERT (Devlin et al. 2019): post-norm with an embedding norm
        m.embedding_norm = true;
        m.final_norm = false;
        m.pooler = true;
        m.token_types = 2;
        break;
    case ModelFamily::EncoderDecoder:  // T5 (Raffel et al. 2020): relative attention buckets
        if (m.positions == PositionKind::Relative)
            m.relative_buckets = 32;
        break;
    case ModelFamily::DecoderOnly:
        break;
    }
    return m;
}

ModelSpec ModelDialog::model() const
{
    ModelSpec m = start_;
    m.name = name_->text().trimmed().toStdString();
    m.display_name = displayName_->text().trimmed().toStdString();
    m.family = ModelFamily(family_->currentData().toInt());
    m.layers = layers_->value();
    m.decoder_layers = m.family == ModelFamily::EncoderDecoder ? decoderLayers_->value() : 0;
    m.hidden = hidden_->value();
    m.heads = heads_->value();
    m.kv_heads = kvHeads_->value();
    m.head_dim = headDim_->value();
    m.ffn_hidden = ffn_->value();
    m.mlp = MlpKind(mlp_->currentData().toInt());
    m.vocab = vocab_->value();
    m.max_seq = maxSeq_->value();
    m.positions = PositionKind(positions_->currentData().toInt());
    m.norm = NormKind(norm_->currentData().toInt());
    m.bias = bias_->isChecked();
    m.qkv_bias = qkvBias_->isChecked() && !m.bias;
    m.qk_norm = qkNorm_->isChecked();
    m.attention_sinks = sinks_->isChecked();
    m.sliding_window.size = slidingWindow_->value();
    if (m.sliding_window.size == 0)
        m.sliding_window.layers.clear();
    m.tied_embeddings = tied_->isChecked();
    m.embedding_norm = embeddingNorm_->isChecked();
    m.final_norm = finalNorm_->isChecked();
    m.pooler = pooler_->isChecked();
    m.token_types = tokenTypes_->value();
    m.position_table = positionTable_->value();
    m.relative_buckets = relativeBuckets_->value();
    m.rope_base = ropeBase_->value();
    m.moe.experts = experts_->value();
    m.moe.top_k = topK_->value();
    m.moe.ffn_hidden = expertFfn_->value();
    m.moe.shared_experts = sharedExperts_->value();
    m.moe.shared_ffn_hidden = sharedFfn_->value();
    m.moe.dense_layers = denseLayers_->value();
    m.moe.layer_interval = layerInterval_->value();
    m.moe.router = MoeRouter(router_->currentData().toInt());
    m.moe.capacity_factor = capacityFactor_->value();
    m.moe.aux_loss_coeff = auxLoss_->value();
    // kv_lora_rank 0: not MLA, whatever the other MLA boxes hold (they are disabled then).
    m.mla = kvLoraRank_->value() > 0 ? MlaSpec{qLoraRank_->value(), kvLoraRank_->value(), qkNopeHeadDim_->value(),
                                               qkRopeHeadDim_->value(), vHeadDim_->value()}
                                     : MlaSpec{};
    m.mtp.layers = mtpLayers_->value();
    m.mtp.loss_scale = mtpLossScale_->value();
    return m;
}

void ModelDialog::refresh()
{
    decoderLayers_->setEnabled(ModelFamily(family_->currentData().toInt()) == ModelFamily::EncoderDecoder);
    ropeBase_->setEnabled(PositionKind(positions_->currentData().toInt()) == PositionKind::Rotary);
    qkvBias_->setEnabled(!bias_->isChecked());
    slidingWindow_->setEnabled(ModelFamily(family_->currentData().toInt()) == ModelFamily::DecoderOnly);
    for (QWidget* w : std::initializer_list<QWidget*>{expertFfn_, sharedExperts_, sharedFfn_, denseLayers_,
                                                      layerInterval_, router_, capacityFactor_, auxLoss_})
        w->setEnabled(experts_->value() > 0);
    for (QSpinBox* s : {qLoraRank_, qkNopeHeadDim_, qkRopeHeadDim_, vHeadDim_})
        s->setEnabled(kvLoraRank_->value() > 0);
    mtpLossScale_->setEnabled(mtpLayers_->value() > 0);
    const ModelSpec m = model();
    const FieldErrors errors = validate(m);
    buttons_->button(QDialogButtonBox::Save)->setEnabled(errors.empty());
    if (!errors.empty()) {
        parameters_->setText(tr("Parameters: -"));
        messages_->setText(QString::fromStdString(joinErrors(errors)));
        return;
    }
    messages_->clear();
    const ParameterBreakdown p = parameterBreakdown(m);
    QString text = tr("Parameters: %1").arg(QString::fromStdString(formatCount(p.total)));
    if (m.moe.enabled())
        text += tr(" (%1 active per token)").arg(QString::fromStdString(formatCount(p.active_per_token)));
    if (m.mtp.enabled())  // outside the total, as DeepSeek-V3's 671B leaves its MTP module out
        text += tr(" + %1 in multi-token prediction").arg(QString::fromStdString(formatCount(p.mtp)));
    text += tr("; forward FLOPs per token at %1: %2")
                .arg(m.max_seq)
                .arg(QString::fromStdString(formatSi(double(forwardFlopsPerToken(m, m.max_seq)), "FLOP")));
    parameters_->setText(text);
}

} // namespace shardscope
