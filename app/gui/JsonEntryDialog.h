// JsonEntryDialog: create or edit a catalog entry (a chip or a node type, or any
// entry) as its JSON document, with every problem named by field as it is typed —
// the same checks an import makes — and Save only when there is none.
#pragma once

#include <QDialog>
#include <QJsonObject>

class QDialogButtonBox;
class QLabel;
class QPlainTextEdit;

namespace shardscope {

class SpecCatalog;

class JsonEntryDialog : public QDialog {
    Q_OBJECT
public:
    // `replace`: the document may overwrite the user entry of the same name.
    JsonEntryDialog(const SpecCatalog& catalog, const QJsonObject& start, bool replace, QWidget* parent = nullptr);

    QJsonObject document() const { return document_; }
    QPlainTextEdit* editor() const { return editor_; }
    QLabel* messages() const { return messages_; }
    bool acceptable() const;

private:
    void check();

    const SpecCatalog& catalog_;
    bool replace_;
    QJsonObject document_;
    QPlainTextEdit* editor_ = nullptr;
    QLabel* messages_ = nullptr;
    QDialogButtonBox* buttons_ = nullptr;
};

} // namespace shardscope
