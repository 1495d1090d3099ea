#include "CatalogPage.h"
#include "SpecCatalog.h"
#include "EntrySummary.h"
#include "JsonEntryDialog.h"
#include "ModelDialog.h"
#include "SortHeaderView.h"
#include "SpecJson.h"
#include "Units.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSaveFile>
#include <QLabel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace shardscope {

namespace {

QTableWidget* makeTable(const QStringList& headers, QWidget* parent)
{
    auto* t = new QTableWidget(0, int(headers.size()), parent);
    t->setHorizontalHeader(new SortHeaderView(t));
    t->setHorizontalHeaderLabels(headers);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->setSelectionMode(QAbstractItemView::SingleSelection);
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->verticalHeader()->hide();
    t->setSortingEnabled(true);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setAlternatingRowColors(true);
    return t;
}

constexpr int kSortRole = Qt::UserRole + 1;

// Shows formatted text ("1,315,723,264", "190 TFLOP/s") but sorts by the number behind it.
class NumberItem : public QTableWidgetItem {
public:
    NumberItem(double value, const QString& text) : QTableWidgetItem(text)
    {
        setData(kSortRole, value);
        setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    }
    bool operator<(const QTableWidgetItem& other) const override
    {
        return data(kSortRole).toDouble() < other.data(kSortRole).toDouble();
    }
};

QTableWidgetItem* numberItem(double value, const QString& text) { return new NumberItem(value, text); }

QString q(const std::string& s) { return QString::fromStdString(s); }

} // namespace

CatalogPage::CatalogPage(SpecCatalog& catalog, QWidget* parent) : QWidget(parent), catalog_(catalog)
{
    tabs_ = new QTabWidget(this);
    models_ = makeTable({tr("Name"), tr("Model"), tr("Family"), tr("Layers"), tr("Hidden"), tr("Parameters"),
                         tr("Active"), tr("Origin")},
                        this);
    chips_ = makeTable({tr("Name"), tr("Chip"), tr("BF16 peak"), tr("HBM"), tr("HBM bandwidth"), tr("Devices/chip"),
                        tr("Origin")},
                       this);
    nodes_ = makeTable({tr("Name"), tr("Node type"), tr("Chips"), tr("Devices"), tr("Scale-up link/chip"),
                        tr("Network/node"), tr("Price/h"), tr("Origin")},
                       this);
    tabs_->addTab(models_, tr("Models"));
    tabs_->addTab(chips_, tr("Chips"));
    tabs_->addTab(nodes_, tr("Node types"));

    title_ = new QLabel(this);
    title_->setTextFormat(Qt::PlainText);
    QFont f = title_->font();
    f.setBold(true);
    title_->setFont(f);
    details_ = new QTreeWidget(this);
    details_->setColumnCount(2);
    details_->setHeaderLabels({tr("Field"), tr("Value")});
    details_->setRootIsDecorated(false);
    details_->setWordWrap(true);
    details_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);

    auto* newButton = new QPushButton(tr("&New..."), this);
    auto* newMenu = new QMenu(newButton);
    newMenu->addAction(tr("Model..."), this, [this] { newEntry("model"); });
    newMenu->addAction(tr("Chip (JSON)..."), this, [this] { newEntry("chip"); });
    newMenu->addAction(tr("Node type (JSON)..."), this, [this] { newEntry("node"); });
    newButton->setMenu(newMenu);
    edit_ = new QPushButton(tr("Ed&it..."), this);
    edit_->setToolTip(tr("Edit your entry; a built-in entry is copied under a new name first"));
    auto* exportButton = new QPushButton(tr("E&xport..."), this);
    remove_ = new QPushButton(tr("Re&move"), this);
    connect(edit_, &QPushButton::clicked, this, &CatalogPage::editSelected);
    connect(exportButton, &QPushButton::clicked, this, [this] {
        const std::string name = selectedName();
        if (name.empty())
            return;
        const QString path = QFileDialog::getSaveFileName(this, tr("Export entry"),
                                                          QString::fromStdString(name) + QStringLiteral(".json"),
                                                          tr("JSON (*.json)"));
        if (path.isEmpty())
            return;
        if (const QString error = exportSelected(path); !error.isEmpty())
            QMessageBox::warning(this, tr("Export entry"), error);
    });
    connect(remove_, &QPushButton::clicked, this, [this] {
        const std::string name = selectedName();
        if (name.empty() ||
            QMessageBox::question(this, tr("Remove entry"), tr("Remove %1 from the catalog?").arg(QString::fromStdString(name))) !=
                QMessageBox::Yes)
            return;
        if (const QString error = removeSelected(); !error.isEmpty())
            QMessageBox::warning(this, tr("Remove entry"), error);
    });
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(newButton);
    buttons->addWidget(edit_);
    buttons->addWidget(exportButton);
    buttons->addWidget(remove_);
    buttons->addStretch();

    auto* right = new QWidget(this);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addLayout(buttons);
    rightLayout->addWidget(title_);
    rightLayout->addWidget(details_);

    auto* splitter = new QSplitter(this);
    splitter->addWidget(tabs_);
    splitter->addWidget(right);
    // The tables get five sevenths: the node types' eight columns (prices with their kind) need
    // about 960 px, which two thirds of a 1440-px window no longer gave; the details elide.
    splitter->setStretchFactor(0, 5);
    splitter->setStretchFactor(1, 2);
    splitter->setSizes({1000, 400});
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(splitter);

    for (QTableWidget* t : {models_, chips_, nodes_})
        connect(t, &QTableWidget::itemSelectionChanged, this, [this, t] { showDetails(t); });
    connect(tabs_, &QTabWidget::currentChanged, this,
            [this](int i) { showDetails(qobject_cast<QTableWidget*>(tabs_->widget(i))); });
    reload();
}

void CatalogPage::reload()
{
    for (QTableWidget* t : {models_, chips_, nodes_}) {
        t->setSortingEnabled(false);
        t->setRowCount(0);
    }
    auto addRow = [](QTableWidget* t, const QList<QTableWidgetItem*>& items) {
        const int row = t->rowCount();
        t->insertRow(row);
        for (int c = 0; c < items.size(); ++c)
            t->setItem(row, c, items[c]);
    };
    auto origin = [](bool builtin) { return new QTableWidgetItem(builtin ? tr("built-in") : tr("yours")); };
    for (const CatalogEntry& e : catalog_.list()) {
        try {
            switch (e.kind) {
            case EntryKind::Model: {
                const ModelSpec m = catalog_.model(e.name);
                // Active: what one token uses (the top k of each MoE block's experts; a dense
                // model's every parameter).
                const ParameterBreakdown p = parameterBreakdown(m);
                addRow(models_, {new QTableWidgetItem(q(m.name)), new QTableWidgetItem(q(m.display_name)),
                                 new QTableWidgetItem(toString(m.family)),
                                 numberItem(m.totalLayers(), QString::number(m.totalLayers())),
                                 numberItem(m.hidden, QString::number(m.hidden)),
                                 numberItem(double(p.total), q(formatCount(p.total))),
                                 numberItem(double(p.active_per_token), q(formatCount(p.active_per_token))),
                                 origin(e.builtin)});
                break;
            }
            case EntryKind::Chip: {
                const ChipSpec c = catalog_.chip(e.name);
                addRow(chips_, {new QTableWidgetItem(q(c.name)), new QTableWidgetItem(q(c.display_name)),
                                numberItem(c.peak_flops_bf16, c.peak_flops_bf16 > 0
                                                                  ? q(formatSi(c.peak_flops_bf16, "FLOP/s"))
                                                                  : tr("not published")),
                                numberItem(c.hbm_bytes, q(formatBytes(c.hbm_bytes))),
                                numberItem(c.hbm_bytes_per_second, q(formatSi(c.hbm_bytes_per_second, "B/s"))),
                                numberItem(c.devices_per_chip, QString::number(c.devices_per_chip)),
                                origin(e.builtin)});
                break;
            }
            case EntryKind::Node: {
                const NodeType n = catalog_.node(e.name);
                auto known = [](double v, const std::string& unit) {
                    return numberItem(v, v > 0 ? q(formatSi(v, unit)) : tr("not published"));
                };
                addRow(nodes_, {new QTableWidgetItem(q(n.name)), new QTableWidgetItem(q(n.display_name)),
                                numberItem(n.chips_per_node, QString::number(n.chips_per_node) + " x " + q(n.chip.name)),
                                numberItem(n.devicesPerNode(), QString::number(n.devicesPerNode())),
                                known(n.intra_link_bytes_per_second, "B/s"),
                                known(n.inter_node_bytes_per_second, "B/s"),
                                numberItem(n.price_per_node_hour_usd,
                                           n.price_per_node_hour_usd > 0
                                               ? QStringLiteral("$%1%2").arg(n.price_per_node_hour_usd, 0, 'f', 2).arg(
                                                     n.price_kind.empty() ? QString() : QLatin1Char(' ') + q(n.price_kind))
                                               : tr("not published")),
                                origin(e.builtin)});
                break;
            }
            }
        } catch (const std::exception& ex) {
            qWarning("catalog entry %s is invalid: %s", e.name.c_str(), ex.what());
        }
    }
    for (QTableWidget* t : {models_, chips_, nodes_}) {
        t->setSortingEnabled(true);
        t->sortByColumn(0, Qt::AscendingOrder);
        t->resizeColumnsToContents();
        if (t->rowCount() > 0)
            t->selectRow(0);
    }
    showDetails(qobject_cast<QTableWidget*>(tabs_->currentWidget()));
}

std::string CatalogPage::selectedName() const
{
    const auto* table = qobject_cast<QTableWidget*>(tabs_->currentWidget());
    if (!table || table->currentRow() < 0 || !table->item(table->currentRow(), 0))
        return {};
    return table->item(table->currentRow(), 0)->text().toStdString();
}

void CatalogPage::select(const std::string& name)
{
    for (int t = 0; t < tabs_->count(); ++t) {
        auto* table = qobject_cast<QTableWidget*>(tabs_->widget(t));
        for (int r = 0; table && r < table->rowCount(); ++r)
            if (table->item(r, 0) && table->item(r, 0)->text().toStdString() == name) {
                tabs_->setCurrentIndex(t);
                table->selectRow(r);
                return;
            }
    }
}

QString CatalogPage::exportSelected(const QString& path)
{
    const auto entry = catalog_.find(selectedName());
    if (!entry)
        return tr("select an entry first");
    const QByteArray text = QJsonDocument(entry->document).toJson(QJsonDocument::Indented);
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(text) != text.size() || !f.commit())
        return tr("cannot write %1: %2").arg(path, f.errorString());
    return {};
}

QString CatalogPage::removeSelected()
{
    try {
        catalog_.remove(selectedName());
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    reload();
    emit catalogChanged();
    return {};
}

void CatalogPage::newEntry(const char* kind)
{
    QJsonObject start;
    const std::string selected = selectedName();
    const auto entry = catalog_.find(selected);
    if (std::string(kind) == "model") {
        ModelSpec m;
        if (entry && entry->kind == EntryKind::Model)
            m = catalog_.model(selected);
        else
            m = catalog_.model("gpt2-small");
        m.name = "my-model";
        m.display_name = "My model";
        m.source.clear();
        ModelDialog dialog(m, this);
        if (dialog.exec() != QDialog::Accepted)
            return;
        try {
            catalog_.importDocument(toJson(dialog.model()));
        } catch (const std::exception& e) {
            QMessageBox::warning(this, tr("New model"), QString::fromUtf8(e.what()));
            return;
        }
        reload();
        select(dialog.model().name);
        emit catalogChanged();
        return;
    }
    // A chip or node type starts from the selected one of that kind (or a built-in) as a template.
    const EntryKind want = std::string(kind) == "chip" ? EntryKind::Chip : EntryKind::Node;
    if (entry && entry->kind == want)
        start = entry->document;
    else
        start = catalog_.entry(want == EntryKind::Chip ? "trainium1" : "trn1.32xlarge").document;
    start.insert(QStringLiteral("name"), QStringLiteral("my-%1").arg(QLatin1String(kind)));
    start.remove(QStringLiteral("sources"));
    JsonEntryDialog dialog(catalog_, start, false, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    try {
        const auto names = catalog_.importDocument(dialog.document());
        reload();
        if (!names.empty())
            select(names.front());
        emit catalogChanged();
    } catch (const std::exception& e) {
        QMessageBox::warning(this, tr("New entry"), QString::fromUtf8(e.what()));
    }
}

void CatalogPage::editSelected()
{
    const std::string name = selectedName();
    const auto entry = catalog_.find(name);
    if (!entry)
        return;
    // Built-ins are read-only: editing one edits a copy under a new name.
    const bool copy = entry->builtin;
    try {
        if (entry->kind == EntryKind::Model) {
            ModelSpec m = catalog_.model(name);
            if (copy) {
                m.name += "-custom";
                m.display_name += " (custom)";
                m.source.clear();
            }
            ModelDialog dialog(m, this);
            if (dialog.exec() != QDialog::Accepted)
                return;
            const ModelSpec edited = dialog.model();
            catalog_.importDocument(toJson(edited), !copy && edited.name == name);
            reload();
            select(edited.name);
        } else {
            QJsonObject start = entry->document;
            if (copy) {
                start.insert(QStringLiteral("name"), QString::fromStdString(name + "-custom"));
                start.remove(QStringLiteral("sources"));
            }
            JsonEntryDialog dialog(catalog_, start, !copy, this);
            if (dialog.exec() != QDialog::Accepted)
                return;
            const auto names = catalog_.importDocument(dialog.document(), !copy);
            reload();
            if (!names.empty())
                select(names.front());
        }
        emit catalogChanged();
    } catch (const std::exception& e) {
        QMessageBox::warning(this, tr("Edit entry"), QString::fromUtf8(e.what()));
    }
}

void CatalogPage::showDetails(QTableWidget* table)
{
    details_->clear();
    if (!table || table->currentRow() < 0 || !table->item(table->currentRow(), 0))
        return;
    const std::string name = table->item(table->currentRow(), 0)->text().toStdString();
    const auto entry = catalog_.find(name);
    if (!entry)
        return;
    std::vector<std::pair<std::string, std::string>> rows;
    switch (entry->kind) {
    case EntryKind::Model: rows = describe(catalog_.model(name)); break;
    case EntryKind::Chip: rows = describe(catalog_.chip(name)); break;
    case EntryKind::Node: rows = describe(catalog_.node(name)); break;
    }
    title_->setText(q(entry->display_name.empty() ? name : entry->display_name));
    edit_->setText(entry->builtin ? tr("Copy and ed&it...") : tr("Ed&it..."));
    remove_->setEnabled(!entry->builtin);
    for (const auto& [field, value] : rows) {
        if (value.empty())
            continue;
        auto* item = new QTreeWidgetItem(details_, {q(field), q(value)});
        item->setToolTip(1, q(value));
    }
}

} // namespace shardscope
