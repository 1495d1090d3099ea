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
    // The plans of a filtered search (the filter's keys fixed on top of the request's space).
    void showFiltered(const SearchResult& result, const QString& filter);
    // The filter text read with the layout grammar: empty, or what is wrong with it.
    static QString filterProblem(const QString& text);
    void selectRow(int row);

    PlansModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    QLabel* status() const { return status_; }
    QLabel* filterStatus() const { return filterStatus_; }
    QPushButton* cancelButton() const { return cancel_; }
    QLineEdit* filter() const { return filter_; }
    QProgressBar* progress() const { return progress_; }
    QCheckBox* showInfeasible() const { return showInfeasible_; }

signals:
    void planSelected(const shardscope::Plan& plan);
    // Double-click or Enter on a row: the user wants that plan's details.
    void planActivated(const shardscope::Plan& plan);
    void cancelRequested();
    // A valid filter was typed (empty: cleared). It filters the whole search space, not the
    // rows shown: the window searches again with the filter's keys fixed.
    void filterRequested(const QString& filter);

private:
    void fillModel();
    void applyFilter();

    Problem problem_;
    SearchResult result_;
    PlansModel* model_ = nullptr;
    QCheckBox* showInfeasible_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    QLabel* status_ = nullptr;
    QLabel* filterStatus_ = nullptr;  // what the filter matched, or why it is refused
    QString lastFilter_;              // the filter last searched
    QLineEdit* filter_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QPushButton* cancel_ = nullptr;
};

} // namespace shardscope
