#include "JsonEntryDialog.h"
#include "SpecCatalog.h"
#include "JsonReader.h"

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QJsonDocument>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace shardscope {

JsonEntryDialog::JsonEntryDialog(const SpecCatalog& catalog, const QJsonObject& start, bool replace, QWidget* parent)
    : QDialog(parent), catalog_(catalog), replace_(replace)
{
    setWindowTitle(tr("Catalog entry (JSON)"));
    resize(720, 640);
    editor_ = new QPlainTextEdit(this);
    editor_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    editor_->setPlainText(QString::fromUtf8(QJsonDocument(start).toJson(QJsonDocument::Indented)));
    messages_ = new QLabel(this);
    messages_->setWordWrap(true);
    messages_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* help = new QLabel(tr("Quantities take units as the sources write them: \"32 GiB\", \"820 GiB/s\", "
                               "\"800 Gbps\", \"900 GB/s bidi\", \"190 TFLOP/s\"."),
                            this);
    help->setWordWrap(true);
    buttons_ = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, this);
    connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(help);
    layout->addWidget(editor_, 1);
    layout->addWidget(messages_);
    layout->addWidget(buttons_);
    connect(editor_, &QPlainTextEdit::textChanged, this, &JsonEntryDialog::check);
    check();
}

bool JsonEntryDialog::acceptable() const { return buttons_->button(QDialogButtonBox::Save)->isEnabled(); }

void JsonEntryDialog::check()
{
    FieldErrors errors;
    document_ = parseJsonObject(editor_->toPlainText().toUtf8(), "document", errors);
    if (errors.empty())
        errors = catalog_.checkImport(document_, replace_);
    buttons_->button(QDialogButtonBox::Save)->setEnabled(errors.empty());
    messages_->setStyleSheet(errors.empty() ? QString() : QStringLiteral("color: #c0392b"));
    messages_->setText(errors.empty() ? tr("Valid.") : QString::fromStdString(joinErrors(errors)));
}

} // namespace shardscope
