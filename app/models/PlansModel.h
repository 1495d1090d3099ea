// PlansModel: the search's ranked plans as a table — layout columns, predicted
// step time, tokens/s, MFU, memory per device, time and cost to train. The expert
// columns (ep, etp) say something only for a mixture of experts: hasExperts(). Display
// text is formatted for people; Qt::UserRole holds the raw number for sorting.
// The model takes a whole snapshot at a time (beginResetModel/endResetModel).
#pragma once

#include "Problem.h"
#include "Search.h"

#include <QAbstractTableModel>

#include <vector>

namespace shardscope {

class PlansModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Rank, Dp, Tp, Pp, Cp, Ep, Etp, Sp, Zero, ZeroGroup, MicroBatch, Schedule, Recompute, Offload,
        StepTime, TokensPerS, Mfu, MemoryPerDevice, MemoryFraction, TimeToTrain, CostToTrain, Feasible,
        ColumnCount
    };
    static constexpr int SortRole = Qt::UserRole;

    explicit PlansModel(QObject* parent = nullptr);

    void setPlans(const Problem& problem, std::vector<Plan> plans);
    void clear();
    const Plan* plan(int row) const;
    const Problem& problem() const { return problem_; }
    // Whether the plans are of a mixture-of-experts model (the ep and etp columns apply).
    bool hasExperts() const { return problem_.model.moe.enabled(); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    Problem problem_;
    std::vector<Plan> plans_;
};

} // namespace shardscope
