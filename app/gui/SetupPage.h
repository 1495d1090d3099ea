// SetupPage: the problem (model, node type and count, batch, sequence, precision,
// token budget), the search's constraints and objective, and the sweep settings.
// Everything is validated as it is typed with core's field-level messages; only
// a valid setup is announced (changed()), so a bad value never starts a search.
#pragma once

#include "PlanRequest.h"
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

class RunStore;
class SpecCatalog;

struct SearchRequest {
    PlanRequest plan;                       // problem, cost-model terms, constraints, objective
    std::vector<int> sweep_nodes;           // node counts for the scaling curve
    std::vector<std::string> compare_nodes;  // node types for the comparison
};

class SetupPage : public QWidget {
    Q_OBJECT
public:
    // Specs come from the catalog, cost-model profiles from the run store.
    SetupPage(SpecCatalog& catalog, const RunStore& runs, QWidget* parent = nullptr);

    // The setup as a request, or nothing with every problem listed in `errors`.
    std::optional<SearchRequest> request(FieldErrors& errors) const;
    void setProblem(const Problem& problem);  // the problem only; announces the change
    // Every field from a saved request (e.g. an opened plan file): problem, cost model (the
    // file's own terms when the catalog has no identical profile), constraints and objective.
    // Does not announce a change: the caller shows the saved plans instead of searching.
    void setRequest(const PlanRequest& request);
    void reloadCatalog();
    void reloadCostModels();  // the catalog's profiles (e.g. after a calibration), keeping the choice

    QLabel* messages() const { return messages_; }
    QComboBox* modelBox() const { return model_; }
    QComboBox* nodeBox() const { return node_; }
    QSpinBox* nodesBox() const { return nodes_; }
    QSpinBox* batchBox() const { return batch_; }
    QSpinBox* seqBox() const { return seq_; }
    QCheckBox* flashBox() const { return flash_; }
    QLineEdit* fixEdit() const { return fix_; }
    QLineEdit* lowerEdit() const { return lower_; }
    QLineEdit* upperEdit() const { return upper_; }
    QComboBox* costModelBox() const { return costModel_; }
    QComboBox* frameworkBox() const { return framework_; }
    QDoubleSpinBox* maxMemoryBox() const { return maxMemory_; }

signals:
    void changed();  // the setup is valid and differs from the last announced one

private:
    void validateAndAnnounce();
    void fillProblem(const Problem& problem);
    QString fingerprint(const SearchRequest& request) const;
    void editModel(bool create);

    SpecCatalog& catalog_;
    const RunStore& runs_;
    QComboBox* model_ = nullptr;
    QLabel* modelInfo_ = nullptr;
    QComboBox* node_ = nullptr;
    QSpinBox* nodes_ = nullptr;
    QSpinBox* batch_ = nullptr;
    QSpinBox* seq_ = nullptr;
    QComboBox* precision_ = nullptr;
    QComboBox* mainGrads_ = nullptr;  // TrainingSpec::main_grads
    QLineEdit* tokens_ = nullptr;
    QCheckBox* flash_ = nullptr;
    QCheckBox* dropout_ = nullptr;
    QComboBox* objective_ = nullptr;
    QLineEdit* fix_ = nullptr;
    QLineEdit* lower_ = nullptr;
    QLineEdit* upper_ = nullptr;
    QComboBox* costModel_ = nullptr;        // "default", the catalog's profiles, or a plan file's terms
    QComboBox* framework_ = nullptr;        // any, or the framework the plans must run on
    std::optional<CostModelParams> fileTerms_;  // the terms of an opened plan not in the catalog
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
