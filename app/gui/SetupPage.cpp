#include "SetupPage.h"
#include "CostModelParams.h"
#include "FrameworkExport.h"
#include "RunStore.h"
#include "SpecCatalog.h"
#include "EntrySummary.h"
#include "ModelDialog.h"
#include "ProblemOverview.h"
#include "SpecEnums.h"
#include "SpecJson.h"
#include "Sweep.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QFontDatabase>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>

namespace shardscope {

namespace {

QSpinBox* spin(int value, int lo, int hi, QWidget* parent)
{
    auto* s = new QSpinBox(parent);
    s->setRange(lo, hi);
    s->setValue(value);
    s->setGroupSeparatorShown(true);
    s->setKeyboardTracking(false);  // re-search when a value is committed, not on every digit
    return s;
}

// "300e9" for 3e11: how people write token budgets (QString::number gives "3e+11"), exactly
// the same number when read back.
QString tokensText(double tokens)
{
    for (int exponent : {12, 9, 6, 3}) {
        const double scale = std::pow(10.0, exponent);
        if (tokens >= scale) {
            const QString text = QString::number(tokens / scale, 'g', 15) + QStringLiteral("e%1").arg(exponent);
            if (text.toDouble() == tokens)
                return text;
            break;
        }
    }
    return QString::number(tokens, 'g', 17);
}

constexpr const char* kFileTermsKey = "\x01file";  // the combo's data for a plan file's own terms

} // namespace

SetupPage::SetupPage(SpecCatalog& catalog, const RunStore& runs, QWidget* parent)
    : QWidget(parent), catalog_(catalog), runs_(runs)
{
    // --- problem ---
    model_ = new QComboBox(this);
    auto* newModel = new QPushButton(tr("&New model..."), this);
    auto* editButton = new QPushButton(tr("Ed&it..."), this);
    modelInfo_ = new QLabel(this);
    modelInfo_->setWordWrap(true);
    node_ = new QComboBox(this);
    nodes_ = spin(64, 1, 1'000'000, this);
    batch_ = spin(1536, 1, 100'000'000, this);
    seq_ = spin(2048, 1, 1 << 24, this);
    precision_ = new QComboBox(this);
    for (const auto& p : kPrecisionNames)
        precision_->addItem(QString::fromLatin1(p.name), int(p.value));
    precision_->setCurrentIndex(precision_->findData(int(Precision::BF16Mixed)));
    mainGrads_ = new QComboBox(this);
    mainGrads_->addItem(tr("default (fp32 for bf16 and FP8/FP4)"), int(MainGrads::Default));
    mainGrads_->addItem(QStringLiteral("fp32"), int(MainGrads::FP32));
    mainGrads_->addItem(QStringLiteral("bf16"), int(MainGrads::BF16));
    mainGrads_->setToolTip(tr("The type the gradients are accumulated and data-parallel reduced in: fp32 as "
                              "Megatron-LM, Megatron-Bridge and torchtitan do by default; bf16 as Megatron's "
                              "--grad-reduce-in-bf16"));
    tokens_ = new QLineEdit(QStringLiteral("300e9"), this);
    tokens_->setToolTip(tr("Tokens to train, for time and cost to train (e.g. 300e9)"));
    flash_ = new QCheckBox(tr("fused (flash) attention"), this);
    dropout_ = new QCheckBox(tr("dropout (masks kept for backward)"), this);
    dropout_->setChecked(true);
    dropout_->setToolTip(tr("Korthikanti et al.'s setting (GPT-3, BERT); Llama-style training has none"));

    auto* modelRow = new QHBoxLayout;
    modelRow->addWidget(model_, 1);
    modelRow->addWidget(newModel);
    modelRow->addWidget(editButton);
    auto* problemForm = new QFormLayout;
    auto* modelLabel = new QLabel(tr("&Model"), this);
    modelLabel->setBuddy(model_);
    problemForm->addRow(modelLabel, modelRow);
    problemForm->addRow(QString(), modelInfo_);
    problemForm->addRow(tr("Node &type"), node_);
    problemForm->addRow(tr("Node co&unt"), nodes_);
    problemForm->addRow(tr("&Global batch (sequences)"), batch_);
    problemForm->addRow(tr("Se&quence length"), seq_);
    problemForm->addRow(tr("Precisi&on"), precision_);
    problemForm->addRow(tr("Gradients"), mainGrads_);
    problemForm->addRow(tr("To&kens to train"), tokens_);
    problemForm->addRow(QString(), flash_);
    problemForm->addRow(QString(), dropout_);
    auto* problemBox = new QGroupBox(tr("Problem"), this);
    problemBox->setLayout(problemForm);

    // --- search ---
    objective_ = new QComboBox(this);
    objective_->addItem(tr("highest throughput"), int(Objective::Throughput));
    objective_->addItem(tr("shortest time to train"), int(Objective::TimeToTrain));
    objective_->addItem(tr("lowest cost to train"), int(Objective::CostToTrain));
    fix_ = new QLineEdit(this);
    fix_->setPlaceholderText(tr("e.g. tp=8,pp=4,recompute=selective"));
    lower_ = new QLineEdit(this);
    lower_->setPlaceholderText(tr("e.g. dp=8,mb=2"));
    upper_ = new QLineEdit(this);
    upper_->setPlaceholderText(tr("e.g. tp=16,pp=8"));
    framework_ = new QComboBox(this);
    framework_->addItem(tr("any"), -1);  // each plan then lists the frameworks that run it
    for (ExportFormat f : exportFormats())
        framework_->addItem(QString::fromLatin1(toString(f)), int(f));
    framework_->setToolTip(tr("Search only the layouts this framework can run, so that the best plan exports, "
                              "and price the layers' element-wise work with its kernels (eager PyTorch: one "
                              "kernel per op) (shardscope-cli plan --framework NAME)"));
    costModel_ = new QComboBox(this);
    costModel_->setToolTip(tr("The cost model's efficiency terms: the built-in default (fitted on published "
                              "training runs) or a profile saved by shardscope-cli calibrate --save NAME"));
    maxMemory_ = new QDoubleSpinBox(this);
    maxMemory_->setRange(0.1, 1.0);
    maxMemory_->setSingleStep(0.05);
    maxMemory_->setValue(0.9);
    maxMemory_->setKeyboardTracking(false);
    minMicroBatches_ = spin(1, 1, 100000, this);
    auto* recomputeRow = new QHBoxLayout;
    const char* modes[3] = {"none", "selective", "full"};
    for (int i = 0; i < 3; ++i) {
        recompute_[i] = new QCheckBox(QString::fromLatin1(modes[i]), this);
        recompute_[i]->setChecked(true);
        recomputeRow->addWidget(recompute_[i]);
    }
    recomputeRow->addStretch();
    auto* searchForm = new QFormLayout;
    searchForm->addRow(tr("Ob&jective"), objective_);
    searchForm->addRow(tr("Cost model"), costModel_);
    searchForm->addRow(tr("Framework"), framework_);
    searchForm->addRow(tr("Fi&x layout keys"), fix_);
    searchForm->addRow(tr("Lower bounds"), lower_);
    searchForm->addRow(tr("Upper &bounds"), upper_);
    searchForm->addRow(tr("Max memor&y (fraction of HBM)"), maxMemory_);
    searchForm->addRow(tr("Min micro-batches per pipeline"), minMicroBatches_);
    searchForm->addRow(tr("Recomputation allowed"), recomputeRow);
    auto* searchBox = new QGroupBox(tr("Search"), this);
    searchBox->setLayout(searchForm);

    // --- explore ---
    sweep_ = new QLineEdit(QStringLiteral("8..256"), this);
    sweep_->setToolTip(tr("Node counts for the scaling curve: a list (8,16,32) or a range of powers of two (8..256)"));
    compare_ = new QListWidget(this);
    compare_->setSelectionMode(QAbstractItemView::MultiSelection);
    compare_->setMaximumHeight(140);
    auto* exploreForm = new QFormLayout;
    exploreForm->addRow(tr("Sca&ling: node counts"), sweep_);
    exploreForm->addRow(tr("Comp&are node types"), compare_);
    auto* exploreBox = new QGroupBox(tr("Explore"), this);
    exploreBox->setLayout(exploreForm);

    messages_ = new QLabel(this);
    messages_->setWordWrap(true);
    messages_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    // What the problem means before any search: sizes, FLOPs, memory, lower bounds.
    overview_ = new QPlainTextEdit(this);
    overview_->setObjectName(QStringLiteral("overview"));
    overview_->setReadOnly(true);
    overview_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));

    auto* columns = new QHBoxLayout;
    auto* left = new QVBoxLayout;
    left->addWidget(problemBox);
    left->addStretch();
    auto* right = new QVBoxLayout;
    right->addWidget(searchBox);
    right->addWidget(exploreBox);
    right->addStretch();
    columns->addLayout(left, 1);
    columns->addLayout(right, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(columns);
    layout->addWidget(messages_);
    layout->addWidget(overview_, 1);

    reloadCatalog();

    // Any edit re-validates; a short delay coalesces bursts of edits into one search.
    auto* debounce = new QTimer(this);
    debounce->setSingleShot(true);
    debounce->setInterval(250);
    connect(debounce, &QTimer::timeout, this, &SetupPage::validateAndAnnounce);
    auto kick = [this, debounce] {
        if (!loading_)
            debounce->start();
    };
    for (QComboBox* c : {model_, node_, precision_, mainGrads_, objective_, costModel_, framework_})
        connect(c, &QComboBox::currentIndexChanged, this, kick);
    for (QSpinBox* s : {nodes_, batch_, seq_, minMicroBatches_})
        connect(s, &QSpinBox::valueChanged, this, kick);
    connect(maxMemory_, &QDoubleSpinBox::valueChanged, this, kick);
    for (QLineEdit* e : {tokens_, fix_, lower_, upper_, sweep_})
        connect(e, &QLineEdit::textChanged, this, kick);
    for (QCheckBox* c : recompute_)
        connect(c, &QCheckBox::toggled, this, kick);
    connect(flash_, &QCheckBox::toggled, this, kick);
    connect(dropout_, &QCheckBox::toggled, this, kick);
    connect(compare_, &QListWidget::itemSelectionChanged, this, kick);
    connect(newModel, &QPushButton::clicked, this, [this] { editModel(true); });
    connect(editButton, &QPushButton::clicked, this, [this] { editModel(false); });
    QTimer::singleShot(0, this, &SetupPage::validateAndAnnounce);
}

void SetupPage::reloadCatalog()
{
    loading_ = true;
    const QString model = model_->currentData().toString();
    const QString node = node_->currentData().toString();
    // The user's comparison choice survives a catalog change (a model added, a node edited);
    // the first load selects three common node types.
    const bool firstLoad = compare_->count() == 0;
    QStringList compared;
    for (const QListWidgetItem* item : compare_->selectedItems())
        compared << item->data(Qt::UserRole).toString();
    if (firstLoad)
        compared = {QStringLiteral("trn1.32xlarge"), QStringLiteral("p5.48xlarge"), QStringLiteral("trn2.48xlarge")};
    model_->clear();
    node_->clear();
    compare_->clear();
    for (const CatalogEntry& e : catalog_.list(EntryKind::Model))
        model_->addItem(QStringLiteral("%1 — %2").arg(QString::fromStdString(e.name), QString::fromStdString(e.display_name)),
                        QString::fromStdString(e.name));
    for (const CatalogEntry& e : catalog_.list(EntryKind::Node)) {
        const QString name = QString::fromStdString(e.name);
        node_->addItem(name, name);
        auto* item = new QListWidgetItem(name, compare_);
        item->setData(Qt::UserRole, name);
        if (compared.contains(name))
            item->setSelected(true);
    }
    const int m = model_->findData(model.isEmpty() ? QStringLiteral("gpt3-175b") : model);
    model_->setCurrentIndex(m >= 0 ? m : 0);
    const int n = node_->findData(node.isEmpty() ? QStringLiteral("trn1.32xlarge") : node);
    node_->setCurrentIndex(n >= 0 ? n : 0);
    reloadCostModels();
    loading_ = false;
}

void SetupPage::reloadCostModels()
{
    const bool wasLoading = loading_;
    loading_ = true;
    const QString current = costModel_->currentData().toString();
    costModel_->clear();
    costModel_->addItem(QString::fromStdString(defaultCostModelParams().name), QStringLiteral("default"));
    for (const std::string& name : runs_.costProfileNames())
        costModel_->addItem(QString::fromStdString(name), QString::fromStdString(name));
    if (fileTerms_)
        costModel_->addItem(tr("%1 (from the plan file)").arg(QString::fromStdString(fileTerms_->name)),
                            QLatin1String(kFileTermsKey));
    const int i = costModel_->findData(current);
    costModel_->setCurrentIndex(i >= 0 ? i : 0);
    loading_ = wasLoading;
}

void SetupPage::setProblem(const Problem& problem)
{
    fillProblem(problem);
    validateAndAnnounce();
}

void SetupPage::fillProblem(const Problem& problem)
{
    loading_ = true;
    // A model from a plan file may not be in the catalog: show it as a temporary entry.
    int m = model_->findData(QString::fromStdString(problem.model.name));
    if (m < 0 || catalog_.model(problem.model.name) != problem.model) {
        const QString doc = QString::fromUtf8(QJsonDocument(toJson(problem.model)).toJson(QJsonDocument::Compact));
        model_->addItem(tr("%1 (from file)").arg(QString::fromStdString(problem.model.name)), doc);
        m = model_->count() - 1;
    }
    model_->setCurrentIndex(m);
    const int n = node_->findData(QString::fromStdString(problem.cluster.node.name));
    if (n >= 0)
        node_->setCurrentIndex(n);
    nodes_->setValue(problem.cluster.nodes);
    batch_->setValue(problem.training.global_batch);
    seq_->setValue(problem.training.seq_len);
    precision_->setCurrentIndex(precision_->findData(int(problem.training.precision)));
    mainGrads_->setCurrentIndex(mainGrads_->findData(int(problem.training.main_grads)));
    tokens_->setText(tokensText(problem.training.tokens_to_train));
    flash_->setChecked(problem.training.flash_attention);
    dropout_->setChecked(problem.training.dropout);
    loading_ = false;
}

void SetupPage::setRequest(const PlanRequest& request)
{
    fillProblem(request.problem);
    loading_ = true;
    objective_->setCurrentIndex(objective_->findData(int(request.objective)));
    framework_->setCurrentIndex(std::max(0, framework_->findData(request.framework ? int(*request.framework) : -1)));
    // The catalog's profile of the same name when its terms are the file's, else the file's own terms.
    const CostModelParams& terms = request.cost_model;
    std::optional<CostModelParams> stored;
    try {
        stored = runs_.costModelParamsNamed(terms.name);
    } catch (const std::exception&) {
    }
    fileTerms_.reset();
    if (!stored || !(*stored == terms))
        fileTerms_ = terms;
    reloadCostModels();
    const QString key = fileTerms_ ? QLatin1String(kFileTermsKey)
                                   : (terms.name == defaultCostModelParams().name && terms == defaultCostModelParams()
                                          ? QStringLiteral("default")
                                          : QString::fromStdString(terms.name));
    costModel_->setCurrentIndex(std::max(0, costModel_->findData(key)));
    const SearchSpace& space = request.space;
    fix_->setText(QString::fromStdString(fixedText(space)));
    lower_->setText(QString::fromStdString(boundsText(space, false)));
    upper_->setText(QString::fromStdString(boundsText(space, true)));
    maxMemory_->setValue(space.max_memory_fraction);
    minMicroBatches_->setValue(space.min_micro_batches);
    const Recompute modes[3] = {Recompute::None, Recompute::Selective, Recompute::Full};
    for (int i = 0; i < 3; ++i)
        recompute_[i]->setChecked(space.allows(modes[i]));
    loading_ = false;
    // Shown, not announced: the caller shows the saved plans of this very request.
    FieldErrors errors;
    if (const auto r = this->request(errors))
        lastAnnounced_ = fingerprint(*r);
    validateAndAnnounce();
}

std::optional<SearchRequest> SetupPage::request(FieldErrors& errors) const
{
    SearchRequest out;
    PlanRequest& r = out.plan;
    const QString modelKey = model_->currentData().toString();
    try {
        if (modelKey.startsWith(QLatin1Char('{'))) {  // a model from a file, kept as its document
            auto m = modelFromJson(QJsonDocument::fromJson(modelKey.toUtf8()).object(), "model", errors);
            if (m)
                r.problem.model = *m;
        } else {
            r.problem.model = catalog_.model(modelKey.toStdString());
        }
        r.problem.cluster.node = catalog_.node(node_->currentData().toString().toStdString());
    } catch (const std::exception& e) {
        errors.push_back({"setup", e.what()});
        return std::nullopt;
    }
    r.problem.cluster.nodes = nodes_->value();
    r.problem.training.global_batch = batch_->value();
    r.problem.training.seq_len = seq_->value();
    r.problem.training.precision = Precision(precision_->currentData().toInt());
    r.problem.training.main_grads = MainGrads(mainGrads_->currentData().toInt());
    r.problem.training.flash_attention = flash_->isChecked();
    r.problem.training.dropout = dropout_->isChecked();
    bool ok = false;
    const double tokens = tokens_->text().trimmed().toDouble(&ok);
    if (!ok || !std::isfinite(tokens) || tokens <= 0)
        errors.push_back({"training.tokens_to_train",
                          tr("\"%1\" is not a positive number").arg(tokens_->text()).toStdString()});
    else
        r.problem.training.tokens_to_train = tokens;
    for (const FieldError& e : validate(r.problem))
        errors.push_back(e);

    r.objective = Objective(objective_->currentData().toInt());
    if (const std::string why = objectiveProblem(r.objective, r.problem); !why.empty())
        errors.push_back({"objective", why});
    if (const int f = framework_->currentData().toInt(); f >= 0)
        r.framework = ExportFormat(f);
    const QString terms = costModel_->currentData().toString();
    if (terms == QLatin1String(kFileTermsKey) && fileTerms_) {
        r.cost_model = *fileTerms_;
    } else {
        try {
            r.cost_model = runs_.costModelParamsNamed(terms.isEmpty() ? "default" : terms.toStdString());
        } catch (const std::exception& e) {
            errors.push_back({"cost_model", e.what()});
        }
    }
    for (const FieldError& e : applyFixed(r.space, fix_->text().toStdString(), "fix"))
        errors.push_back(e);
    for (const FieldError& e : applyBounds(r.space, lower_->text().toStdString(), false, "lower"))
        errors.push_back(e);
    for (const FieldError& e : applyBounds(r.space, upper_->text().toStdString(), true, "upper"))
        errors.push_back(e);
    r.space.max_memory_fraction = maxMemory_->value();
    r.space.min_micro_batches = minMicroBatches_->value();
    std::string modes;
    QStringList allowed;
    for (QCheckBox* c : recompute_)
        if (c->isChecked())
            allowed << c->text();
    modes = allowed.join(QLatin1Char(',')).toStdString();
    if (modes.empty())
        errors.push_back({"recompute", "allow at least one recomputation mode"});
    else
        for (const FieldError& e : applyRecomputeModes(r.space, modes, "recompute"))
            errors.push_back(e);
    out.sweep_nodes = parseNodeCounts(sweep_->text().toStdString(), "sweep", errors);
    for (const QListWidgetItem* item : compare_->selectedItems())
        out.compare_nodes.push_back(item->data(Qt::UserRole).toString().toStdString());
    if (!errors.empty())
        return std::nullopt;
    return out;
}

QString SetupPage::fingerprint(const SearchRequest& r) const
{
    // The whole request (terms and constraints included) and the explore settings.
    QString f = QString::fromUtf8(QJsonDocument(toJson(r.plan)).toJson(QJsonDocument::Compact));
    for (int n : r.sweep_nodes)
        f += QStringLiteral(",%1").arg(n);
    for (const std::string& node : r.compare_nodes)
        f += QStringLiteral(";") + QString::fromStdString(node);
    return f;
}

void SetupPage::validateAndAnnounce()
{
    FieldErrors errors;
    const auto r = request(errors);
    try {
        const QString key = model_->currentData().toString();
        const ModelSpec m = key.startsWith(QLatin1Char('{')) ? (r ? r->plan.problem.model : ModelSpec{})
                                                             : catalog_.model(key.toStdString());
        modelInfo_->setText(QString::fromStdString(summarize(m)));
    } catch (const std::exception&) {
        modelInfo_->clear();
    }
    if (!r) {
        messages_->setStyleSheet(QStringLiteral("color: #c0392b"));
        messages_->setText(tr("Fix the setup to search:\n%1").arg(QString::fromStdString(joinErrors(errors))));
        lastAnnounced_.clear();
        return;
    }
    messages_->setStyleSheet(QString());
    overview_->setPlainText(QString::fromStdString(problemOverview(r->plan.problem)));
    messages_->setText(tr("%1 devices (%2 per node). The search runs on its own when the setup changes.")
                           .arg(r->plan.problem.cluster.devices())
                           .arg(r->plan.problem.cluster.node.devicesPerNode()));
    // Announce only real changes, so that re-validating does not restart a search.
    const QString now = fingerprint(*r);
    if (now == lastAnnounced_)
        return;
    lastAnnounced_ = now;
    emit changed();
}

void SetupPage::editModel(bool create)
{
    ModelSpec start;
    try {
        start = catalog_.model(model_->currentData().toString().toStdString());
    } catch (const std::exception&) {
    }
    const auto entry = catalog_.find(start.name);
    const bool builtin = entry && entry->builtin;
    if (create)  // the selected model's sizes, but its family's structure: nothing unseen is kept
        start = ModelDialog::withFamilyDefaults(start);
    if (create || builtin) {
        start.name = create ? "my-model" : start.name + "-custom";
        start.display_name = create ? "My model" : start.display_name + " (custom)";
        start.source.clear();
    }
    ModelDialog dialog(start, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    const ModelSpec m = dialog.model();
    try {
        const bool replace = !create && !builtin && m.name == start.name;
        catalog_.importDocument(toJson(m), replace);
    } catch (const std::exception& e) {
        QMessageBox::warning(this, tr("Save model"), tr("The model was not saved:\n\n%1").arg(QString::fromUtf8(e.what())));
        return;
    }
    reloadCatalog();
    model_->setCurrentIndex(model_->findData(QString::fromStdString(m.name)));
}

} // namespace shardscope
