// SetupPage: the problem (model, node type and count, batch, sequence, precision,
// token budget), the search's constraints and objective, and the sweep settings.
// Everything is validated as it is typed with core's field-level messages; only
// a valid setup is announced (changed()), so a bad value never starts a search.
#pragma once

#include "Problem.h"
#include "SearchSpace.h"

#include <QWidget>

#include <optional>
#include <string>
#include <vector>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;

namespace shardscope {

class SpecCatalog;

struct SearchRequest {
    Problem problem;
    SearchSpace space;
    Objective objective = Objective::Throughput;
    std::vector<int> sweep_nodes;           // node counts for the scaling curve
    std::vector<std::string> compare_nodes;  // node types for the comparison
};

class SetupPage : public QWidget {
    Q_OBJECT
public:
    explicit SetupPage(SpecCatalog& catalog, QWidget* parent = nullptr);

    // The setup as a request, or nothing with every problem listed in `errors`.
    std::optional<SearchRequest> request(FieldErrors& errors) const;
    void setProblem(const Problem& problem);  // e.g. from an opened plan file
    void reloadCatalog();

    QLabel* messages() const { return messages_; }
    QComboBox* modelBox() const { return model_; }
    QComboBox* nodeBox() const { return node_; }
    QSpinBox* nodesBox() const { return nodes_; }
    QSpinBox* batchBox() const { return batch_; }
    QSpinBox* seqBox() const { return seq_; }
    QLineEdit* fixEdit() const { return fix_; }

signals:
    void changed();  // the setup is valid and differs from the last announced one

private:
    void validateAndAnnounce();
    void editModel(bool create);

    SpecCatalog& catalog_;
    QComboBox* model_ = nullptr;
    QLabel* modelInfo_ = nullptr;
    QComboBox* node_ = nullptr;
    QSpinBox* nodes_ = nullptr;
    QSpinBox* batch_ = nullptr;
    QSpinBox* seq_ = nullptr;
    QComboBox* precision_ = nullptr;
    QLineEdit* tokens_ = nullptr;
    QCheckBox* flash_ = nullptr;
    QCheckBox* dropout_ = nullptr;
    QComboBox* objective_ = nullptr;
    QLineEdit* fix_ = nullptr;
    QLineEdit* upper_ = nullptr;
    QDoubleSpinBox* maxMemory_ = nullptr;
    QSpinBox* minMicroBatches_ = nullptr;
    QCheckBox* recompute_[3] = {};
    QLineEdit* sweep_ = nullptr;
    QListWidget* compare_ = nullptr;
    QLabel* messages_ = nullptr;
    QPlainTextEdit* overview_ = nullptr;
    QString lastAnnounced_;
    bool loading_ = false;
};

} // namespace shardscope
