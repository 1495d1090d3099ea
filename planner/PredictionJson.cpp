#include "PredictionJson.h"

#include <QJsonArray>

namespace shardscope {

QJsonObject toJson(const CostLedger& ledger)
{
    QJsonArray terms;
    for (const LedgerTerm& t : ledger.terms)
        terms.append(QJsonObject{{"figure", QLatin1String(figureKey(t.figure))},
                                 {"name", QString::fromUtf8(t.name)},
                                 {"value", t.value},
                                 {"formula", QString::fromUtf8(t.formula)}});
    QJsonArray collectives;
    for (const Collective& c : ledger.collectives)
        collectives.append(QJsonObject{{"dimension", QLatin1String(toString(c.dimension))},
                                       {"kind", QLatin1String(toString(c.kind))},
                                       {"placement", QLatin1String(toString(c.placement))},
                                       {"what", QString::fromUtf8(c.what)},
                                       {"bytes", c.bytes},
                                       {"calls", c.calls},
                                       {"time_s", c.time_s()},
                                       {"overlap", QJsonObject{{"exposed_s", c.exposed_s}, {"hidden_s", c.hidden_s}}}});
    return QJsonObject{{"terms", terms},
                       {"collectives", collectives},
                       {"stages", QJsonObject{{"time", ledger.time_stage},
                                              {"dp_comm", ledger.dp_stage},
                                              {"bytes", ledger.bytes_stage}}}};
}

QJsonObject toJson(const Prediction& p, const std::vector<Term>& terms, const CostLedger* ledger)
{
    const MemoryBreakdown& m = p.memory_bytes;
    const TimeBreakdown& t = p.time_s;
    QJsonObject o{
        {"schema", "shardscope.prediction/1"},
        {"feasible", p.feasible},
        {"reason", QLatin1String(toString(p.reason))},
        {"memory_bytes", QJsonObject{{"weights", m.weights},
                                     {"gradients", m.gradients},
                                     {"optimizer", m.optimizer},
                                     {"activations", m.activations},
                                     {"buffers", m.buffers},
                                     {"reserve", m.reserve},
                                     {"total", m.total()},
                                     {"capacity", m.capacity},
                                     {"experts", m.experts},
                                     {"host_activations", m.host_activations}}},
        {"memory_stage", p.memory_stage},
        {"time_s", QJsonObject{{"step", p.step_time_s},
                               {"compute", t.compute},
                               {"recompute", t.recompute},
                               {"tp_comm", t.tp_comm},
                               {"cp_comm", t.cp_comm},
                               {"pp_comm", t.pp_comm},
                               {"dp_comm", t.dp_comm},
                               {"ep_comm", t.ep_comm},
                               {"bubble", t.bubble},
                               {"optimizer", t.optimizer},
                               {"offload", t.offload},
                               // Communication overlapped with compute (not in the step): exposed +
                               // hidden is each kind's whole collective time.
                               {"hidden", QJsonObject{{"tp_comm", t.hidden.tp_comm},
                                                      {"cp_comm", t.hidden.cp_comm},
                                                      {"dp_comm", t.hidden.dp_comm},
                                                      {"ep_comm", t.hidden.ep_comm}}}}},
        {"comm_bytes", QJsonObject{{"tp", p.comm_bytes.tp},
                                   {"cp", p.comm_bytes.cp},
                                   {"pp", p.comm_bytes.pp},
                                   {"dp", p.comm_bytes.dp},
                                   {"ep", p.comm_bytes.ep},
                                   {"total", p.comm_bytes.total()},
                                   {"by_kind", QJsonObject{{"all_reduce", p.comm_bytes.all_reduce},
                                                           {"reduce_scatter", p.comm_bytes.reduce_scatter},
                                                           {"all_gather", p.comm_bytes.all_gather},
                                                           {"send_recv", p.comm_bytes.send_recv},
                                                           {"all_to_all", p.comm_bytes.all_to_all}}}}},
        {"micro_batches", p.micro_batches},
        {"tokens_per_s", p.tokens_per_s},
        {"mfu", p.mfu},
        {"mfu_palm", p.mfu_palm},
        {"mfu_causal", p.mfu_causal},
        {"mfu_conventions",
         QJsonObject{{"mfu", "Megatron/Korthikanti: every GEMM of forward and backward with the full s x s attention "
                             "scores (Narayanan et al. SC'21 eq. 3 without recomputation)"},
                     {"mfu_palm", "PaLM (Chowdhery et al. 2022, appendix B): 6 N + 12 L H Q T per token, N the "
                                  "non-embedding (active) parameters"},
                     {"mfu_causal", "causal-aware: Megatron/Korthikanti's with a causal self-attention's scores "
                                    "halved (those above the diagonal are not computed)"}}},
        {"hfu", p.hfu},
        {"flops_per_step", p.model_flops_per_step},
        {"hardware_flops_per_step", p.hardware_flops_per_step},
        {"vector_flops_per_step", p.vector_flops_per_step},
        {"time_to_train_s", p.time_to_train_s},
        {"cost_to_train_usd", p.cost_to_train_usd},
    };
    if (!terms.empty()) {
        QJsonArray a;
        for (const Term& term : terms)
            a.append(QJsonObject{{"figure", QString::fromStdString(term.figure)},
                                 {"name", QString::fromStdString(term.name)},
                                 {"value", term.value},
                                 {"formula", QString::fromStdString(term.formula)}});
        o.insert("terms", a);
    }
    if (ledger)
        o.insert("ledger", toJson(*ledger));
    if (p.missing_figure)
        o.insert(QLatin1String("missing_figure"), QString::fromUtf8(p.missing_figure));
    return o;
}

} // namespace shardscope
