// PlansPage: the search's results — a sortable, filterable table of the ranked
// plans, the counts of evaluated / pruned / infeasible candidates by reason, and
// the running search's progress with a Cancel button.
#pragma once

#include "Search.h"

#include <QWidget>

class QCheckBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace shardscope {

class PlansModel;

class PlansPage : public QWidget {
    Q_OBJECT
public:
    explicit PlansPage(QWidget* parent = nullptr);

    void searchStarted();
    void searchProgress(double fraction, const QString& text);
    void showResult(const Problem& problem, const SearchResult& result);
    void searchEnded(bool cancelled);
    void showError(const QString& message);
    void selectRow(int row);

    PlansModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    QLabel* status() const { return status_; }
    QPushButton* cancelButton() const { return cancel_; }
    QLineEdit* filter() const { return filter_; }
    QProgressBar* progress() const { return progress_; }
    QCheckBox* showInfeasible() const { return showInfeasible_; }

signals:
    void planSelected(const shardscope::Plan& plan);
    // Double-click or Enter on a row: the user wants that plan's details.
    void planActivated(const shardscope::Plan& plan);
    void cancelRequested();

private:
    void fillModel();

    Problem problem_;
    SearchResult result_;
    PlansModel* model_ = nullptr;
    QCheckBox* showInfeasible_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    QLabel* status_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QPushButton* cancel_ = nullptr;
};

} // namespace shardscope
