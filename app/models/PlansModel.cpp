#include "PlansModel.h"
#include "Units.h"

#include <QBrush>
#include <QGuiApplication>
#include <QPalette>

namespace shardscope {

PlansModel::PlansModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlansModel::setPlans(const Problem& problem, std::vector<Plan> plans)
{
    beginResetModel();
    problem_ = problem;
    plans_ = std::move(plans);
    endResetModel();
}

void PlansModel::clear()
{
    beginResetModel();
    plans_.clear();
    endResetModel();
}

const Plan* PlansModel::plan(int row) const
{
    return row >= 0 && row < int(plans_.size()) ? &plans_[size_t(row)] : nullptr;
}

int PlansModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(plans_.size()); }
int PlansModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant PlansModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    static const char* names[ColumnCount] = {"#",         "dp",        "tp",        "pp",        "cp",
                                             "ep",        "etp",       "sp",        "ZeRO",      "shard grp",
                                             "mb",        "schedule",  "recompute", "offload",   "step time",
                                             "tokens/s",  "MFU",       "memory/device", "of HBM", "time to train",
                                             "cost to train", "feasible"};
    // The expert flags: Megatron-LM megatron/core/model_parallel_config.py @ d98e8a6
    // (expert_model_parallel_size, expert_tensor_parallel_size, made --expert-model-parallel-size
    // and --expert-tensor-parallel-size by megatron/training/argument_utils.py).
    static const char* tips[ColumnCount] = {
        "rank by the objective", "data-parallel replicas", "tensor-parallel degree", "pipeline stages",
        "context-parallel degree",
        "expert-parallel degree: the routed experts split over this many ranks carved out of dp x cp "
        "(Megatron's --expert-model-parallel-size)",
        "expert tensor-parallel degree: each expert's matrices split this many ways "
        "(--expert-tensor-parallel-size; as tp unless set)",
        "sequence parallelism", "ZeRO stage", "ZeRO shard group (0: whole dp group)",
        "micro-batch size", "pipeline schedule (v chunks when interleaved)", "activation recomputation",
        "optimizer offload", "predicted time per optimizer step", "training tokens per second",
        "model FLOPs utilisation", "predicted memory of the most loaded device", "memory per device / HBM",
        "time to train the token budget", "cost to train the token budget", "fits in memory"};
    if (section < 0 || section >= ColumnCount)
        return {};
    if (role == Qt::DisplayRole)
        return tr(names[section]);
    if (role == Qt::ToolTipRole)
        return tr(tips[section]);
    return {};
}

QVariant PlansModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(plans_.size()))
        return {};
    const Plan& plan = plans_[size_t(index.row())];
    const Layout& l = plan.layout;
    const Prediction& p = plan.prediction;
    const double memFraction = p.memory_bytes.capacity > 0 ? p.memory_bytes.total() / p.memory_bytes.capacity : 0;
    auto q = [](const std::string& s) { return QString::fromStdString(s); };

    const bool runs = p.feasible && plan.infeasible.empty();
    const QString why = plan.infeasible.empty() ? QString::fromLatin1(toString(p.reason))
                                                : QString::fromStdString(plan.infeasible);
    if (role == Qt::ForegroundRole && !runs)
        return QBrush(QGuiApplication::palette().color(QPalette::Disabled, QPalette::Text));
    if (role == Qt::ToolTipRole && !runs)
        return tr("not feasible: %1").arg(why);
    if (role == Qt::ToolTipRole && index.column() == CostToTrain && p.cost_to_train_usd > 0) {
        const NodeType& node = problem_.cluster.node;
        return tr("%1 node-hours at $%2 per node-hour%3")
            .arg(q(formatCount(std::int64_t(p.cost_to_train_usd / node.price_per_node_hour_usd + 0.5))))
            .arg(node.price_per_node_hour_usd)
            .arg(node.price_kind.empty() ? QString() : tr(" (%1 price)").arg(q(node.price_kind)));
    }
    if (role == Qt::ToolTipRole && !plan.variants.empty()) {
        // Layouts the cost model cannot tell apart from this one: one choice, shown once.
        QStringList same;
        for (const Layout& v : plan.variants)
            same << q(toString(v));
        return tr("The same cost as %n other layout(s):\n%1", nullptr, int(plan.variants.size()))
            .arg(same.join(QLatin1Char('\n')));
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() >= StepTime || index.column() <= MicroBatch ? int(Qt::AlignRight | Qt::AlignVCenter)
                                                                           : int(Qt::AlignLeft | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != SortRole)
        return {};
    const bool display = role == Qt::DisplayRole;
    switch (index.column()) {
    case Rank: return runs || !display ? QVariant(index.row() + 1) : QVariant(QStringLiteral("-"));
    case Dp: return l.dp;
    case Tp: return l.tp;
    case Pp: return l.pp;
    case Cp: return l.cp;
    case Ep: return l.ep;
    case Etp: return l.expertTensorParallel();  // etp 0 in the layout: as tp
    case Sp: return display ? QVariant(l.sequence_parallel ? tr("on") : tr("off")) : QVariant(int(l.sequence_parallel));
    case Zero: return l.zero_stage;
    case ZeroGroup: return l.zero_group;
    case MicroBatch: return l.micro_batch;
    case Schedule:
        return l.schedule == PipelineSchedule::Interleaved
                   ? QStringLiteral("interleaved v=%1").arg(l.virtual_stages)
                   : QString::fromLatin1(toString(l.schedule));
    case Recompute: return QString::fromLatin1(toString(l.recompute));
    case Offload: return QString::fromLatin1(toString(l.offload));
    case StepTime: return display ? QVariant(q(formatDuration(p.step_time_s))) : QVariant(p.step_time_s);
    case TokensPerS: return display ? QVariant(q(formatSi(p.tokens_per_s, ""))) : QVariant(p.tokens_per_s);
    case Mfu: return display ? QVariant(QStringLiteral("%1%").arg(100 * p.mfu, 0, 'f', 1)) : QVariant(p.mfu);
    case MemoryPerDevice:
        return display ? QVariant(q(formatBytes(p.memory_bytes.total()))) : QVariant(p.memory_bytes.total());
    case MemoryFraction: return display ? QVariant(QStringLiteral("%1%").arg(100 * memFraction, 0, 'f', 0)) : QVariant(memFraction);
    case TimeToTrain: return display ? QVariant(q(formatDuration(p.time_to_train_s))) : QVariant(p.time_to_train_s);
    case CostToTrain:
        if (p.cost_to_train_usd <= 0)
            return display ? QVariant(tr("no price")) : QVariant(0.0);
        return display ? QVariant(QStringLiteral("$%1").arg(q(formatCount(std::int64_t(p.cost_to_train_usd + 0.5)))))
                       : QVariant(p.cost_to_train_usd);
    case Feasible: return display ? QVariant(runs ? tr("yes") : why) : QVariant(int(runs));
    }
    return {};
}

} // namespace shardscope
