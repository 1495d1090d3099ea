#include "ChartData.h"

#include <QObject>

namespace shardscope {

StackedBarsData memoryChartData(const Prediction& p)
{
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    const MemoryBreakdown& m = p.memory_bytes;
    StackedBarsData d;
    d.title = QObject::tr("Memory per device (stage %1) vs HBM %2 GiB")
                  .arg(p.memory_stage)
                  .arg(m.capacity / GiB, 0, 'g', 3);
    d.value_axis = QObject::tr("GiB");
    d.categories = {QObject::tr("device")};
    d.sets = {{QObject::tr("weights"), {m.weights / GiB}},
              {QObject::tr("gradients"), {m.gradients / GiB}},
              {QObject::tr("optimizer"), {m.optimizer / GiB}},
              {QObject::tr("activations"), {m.activations / GiB}},
              {QObject::tr("buffers"), {m.buffers / GiB}},
              {QObject::tr("reserve"), {m.reserve / GiB}}};
    d.limit = m.capacity / GiB;
    d.limit_name = QObject::tr("HBM capacity");
    return d;
}

StackedBarsData stepTimeChartData(const Prediction& p)
{
    const TimeBreakdown& t = p.time_s;
    StackedBarsData d;
    d.title = QObject::tr("Step time %1 s").arg(p.step_time_s, 0, 'g', 3);
    d.value_axis = QObject::tr("seconds per step");
    d.categories = {QObject::tr("step")};
    d.horizontal = true;
    const std::pair<QString, double> parts[] = {
        {QObject::tr("compute"), t.compute},     {QObject::tr("recompute"), t.recompute},
        {QObject::tr("TP/SP comm"), t.tp_comm},  {QObject::tr("CP comm"), t.cp_comm},
        {QObject::tr("PP comm"), t.pp_comm},     {QObject::tr("DP/ZeRO comm"), t.dp_comm},
        {QObject::tr("bubble"), t.bubble},       {QObject::tr("optimizer"), t.optimizer},
        {QObject::tr("offload"), t.offload}};
    int color = 0;
    for (const auto& [name, value] : parts) {
        if (value > 0)
            d.sets.push_back({name, {value}, color});
        ++color;
    }
    return d;
}

} // namespace shardscope
