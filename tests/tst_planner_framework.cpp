// What the framework and NeuronX's bf16-autocast precision change in a prediction, against
// hand-computed bytes and passes: the element-wise term of an eager trainer (ElementwisePasses.h),
// the default left exactly as it was, the model states and ZeRO-1 collectives of bf16-autocast.
#include "BuiltinSpecs.h"
#include "CostModel.h"
#include "ElementwisePasses.h"
#include "ModelStateMemory.h"
#include "PlanRequest.h"
#include "SpecEnums.h"

#include <QTest>

#include <cmath>
#include <string>

using namespace shardscope;

namespace {

// Llama-3-8B (h 4096, 32 heads / 8 KV heads of 128, f 14336, RMSNorm, RoPE, SwiGLU), flash
// attention, no dropout, 8192-token sequences.
Problem llama8b(const char* node, int nodes, int globalBatch, Precision precision = Precision::BF16Mixed)
{
    Problem p;
    p.model = BuiltinSpecs::instance().model("llama-3-8b");
    p.cluster.node = BuiltinSpecs::instance().node(node);
    p.cluster.nodes = nodes;
    p.training.global_batch = globalBatch;
    p.training.seq_len = 8192;
    p.training.flash_attention = true;
    p.training.dropout = false;
    p.training.precision = precision;
    return p;
}

// On one p5.48xlarge, FSDP-style: ZeRO-3 over the 8 GPUs.
Problem llamaOnP5() { return llama8b("p5.48xlarge", 1, 32); }

Layout fsdpLayout()
{
    Layout l;
    l.dp = 8;
    l.zero_stage = 3;
    l.micro_batch = 1;
    return l;
}

// On 32 trn1.32xlarge as the trn1-nxd-llama-3.1-8b row runs it (tp 32, sp, ZeRO-1).
Problem llamaOnTrn1(Precision precision) { return llama8b("trn1.32xlarge", 32, 1024, precision); }

Layout trn1Layout()
{
    Layout l;
    l.dp = 32;
    l.tp = 32;
    l.sequence_parallel = true;
    l.zero_stage = 1;
    l.micro_batch = 1;
    l.recompute = Recompute::Selective;
    return l;
}

const LedgerTerm* elementwiseTerm(const CostLedger& ledger)
{
    for (const LedgerTerm& t : ledger.terms)
        if (std::string(t.name).rfind("element-wise ops", 0) == 0)
            return &t;
    return nullptr;
}

double collectiveBytes(const CostLedger& ledger, CommDimension dimension, CommKind kind)
{
    double bytes = 0;
    for (const Collective& c : ledger.collectives)
        if (c.dimension == dimension && c.kind == kind)
            bytes += c.bytes;
    return bytes;
}

} // namespace

class TstPlannerFramework : public QObject {
    Q_OBJECT

private slots:
    // Llama-3-8B, tp 1, per token and layer (passes x elements; the table in ElementwisePasses.h):
    //   fused  fwd 2 x (norm 2 + residual 3) x 4096 + RoPE 2 x (4096 + 1024) + SwiGLU 3 x 14336 = 94208
    //          bwd 2 x (3 + 3) x 4096 + 2 x 5120 + 5 x 14336                                      = 131072
    //   eager  fwd 2 x (18 + 3) x 4096 + 10 x 5120 + 5 x 14336                                   = 294912
    //          bwd 2 x (38 + 3) x 4096 + 8 x 5120 + 9 x 14336                                    = 505856
    void eagerPassesByHand()
    {
        LayerActivationShape s;
        s.tokens = 8192;
        s.hidden = 4096;
        s.q_dim_local = 4096;
        s.kv_dim_local = 1024;
        s.ffn_local = 14336;
        s.gated_mlp = true;
        s.dropout = false;
        const LayerModelKinds llama{true, true};
        const OpPasses fused = layerElementwisePasses(kFusedElementwise, s, llama);
        const OpPasses eager = layerElementwisePasses(kFsdpElementwise, s, llama);
        QCOMPARE(fused.forward, 94208.0);
        QCOMPARE(fused.backward, 131072.0);
        QCOMPARE(eager.forward, 294912.0);
        QCOMPARE(eager.backward, 505856.0);
        // Sequence parallelism over tp 8 puts the norms and residuals on h / 8, the rest is the
        // tp shard the caller gives: 2 x 5 x 512 + 2 x 5120 + 3 x 14336.
        s.tp = 8;
        s.sequence_parallel = true;
        QCOMPARE(layerElementwisePasses(kFusedElementwise, s, llama).forward, 5120.0 + 10240 + 43008);
        // GPT (LayerNorm, GeLU, learned positions, dropout): the eager run differs only in its
        // dropout-residual forward (5.5 against 3.5) and LayerNorm's second backward pass (5 against 3).
        s.tp = 1;
        s.sequence_parallel = false;
        s.gated_mlp = false;
        s.dropout = true;
        const LayerModelKinds gpt{false, false};
        QCOMPARE(layerElementwisePasses(kFusedElementwise, s, gpt).forward, 2 * (2 + 3.5) * 4096 + 2 * 14336.0);
        QCOMPARE(layerElementwisePasses(kDeepSpeedElementwise, s, gpt).forward, 2 * (2 + 5.5) * 4096 + 2 * 14336.0);
        QCOMPARE(layerElementwisePasses(kDeepSpeedElementwise, s, gpt).backward, 2 * (5 + 5.5) * 4096 + 3 * 14336.0);
    }

    // Unset, and Megatron's own fused kernels, price exactly as before: the same figures to the bit.
    void defaultUnchanged()
    {
        const Problem p = llamaOnP5();
        const Prediction base = CostModel(p).evaluate(fsdpLayout());
        for (ExportFormat f : {ExportFormat::Megatron, ExportFormat::MegatronBridge, ExportFormat::NeuronX,
                               ExportFormat::NxdTraining, ExportFormat::MaxText}) {
            const Prediction fused = CostModel(p, defaultCostModelParams(), f).evaluate(fsdpLayout());
            QCOMPARE(fused.step_time_s, base.step_time_s);
            QCOMPARE(fused.mfu, base.mfu);
        }
        // The ledger names the default term as before, and a framework's with its name.
        const CostLedger unset = CostModel(p).ledger(fsdpLayout());
        QCOMPARE(std::string(elementwiseTerm(unset)->name), std::string("element-wise ops, forward and backward"));
        const CostLedger megatron = CostModel(p, defaultCostModelParams(), ExportFormat::Megatron).ledger(fsdpLayout());
        QVERIFY(std::string(elementwiseTerm(megatron)->name).find("megatron") != std::string::npos);
    }

    // FSDP's element-wise term is the fused one with its layer part scaled by the eager passes:
    // E_fsdp / E = 1 + k ((294912 / 94208 - 1) + 2 (505856 / 131072 - 1)) / 3, k the share of the
    // stored bytes outside the scores (flash attention keeps 4 bytes per head and token):
    // (8 h + 4 q + 4 kv + 6 f) / (that + 4 x 32) = 139264 / 139392 per token.
    void fsdpElementwiseTerm()
    {
        const Problem p = llamaOnP5();
        const CostLedger fused = CostModel(p).ledger(fsdpLayout());
        const CostLedger fsdp = CostModel(p, defaultCostModelParams(), ExportFormat::Fsdp).ledger(fsdpLayout());
        const LedgerTerm* e0 = elementwiseTerm(fused);
        const LedgerTerm* e1 = elementwiseTerm(fsdp);
        QVERIFY(e0 && e1);
        QVERIFY(std::string(e1->name).find("fsdp") != std::string::npos);
        const double k = 139264.0 / 139392.0;
        const double expected = 1 + k * ((294912.0 / 94208 - 1) + 2 * (505856.0 / 131072 - 1)) / 3;
        QVERIFY2(std::fabs(e1->value / e0->value - expected) < 1e-9,
                 (std::to_string(e1->value / e0->value) + " vs " + std::to_string(expected)).c_str());
        // The step grows by exactly that difference (nothing overlaps element-wise work), so MFU falls.
        const Prediction a = CostModel(p).evaluate(fsdpLayout());
        const Prediction b = CostModel(p, defaultCostModelParams(), ExportFormat::Fsdp).evaluate(fsdpLayout());
        QVERIFY(std::fabs((b.step_time_s - a.step_time_s) - (e1->value - e0->value)) < 1e-9 * a.step_time_s);
        QVERIFY(b.mfu < a.mfu);
        // torchtitan's fused RMSNorm and eager SwiGLU/RoPE sit between the two.
        const Prediction t = CostModel(p, defaultCostModelParams(), ExportFormat::Torchtitan).evaluate(fsdpLayout());
        QVERIFY(t.step_time_s > a.step_time_s && t.step_time_s < b.step_time_s);
    }

    // A plan's request carries its framework to the pricing.
    void requestFramework()
    {
        PlanRequest r;
        r.problem = llamaOnP5();
        const double base = predictLayout(r, fsdpLayout()).step_time_s;
        r.framework = ExportFormat::Fsdp;
        QCOMPARE(predictLayout(r, fsdpLayout()).step_time_s,
                 CostModel(r.problem, r.cost_model, ExportFormat::Fsdp).evaluate(fsdpLayout()).step_time_s);
        QVERIFY(predictLayout(r, fsdpLayout()).step_time_s > base);
    }

    // bf16-autocast per parameter: bf16 weights 2, fp32 gradient accumulation 4, fp32 master and
    // Adam moments 12 (ZeRO-1 shards these), the all-gather at fp32 4.
    void autocastStateBytes()
    {
        QCOMPARE(enumFromString<Precision>(kPrecisionNames, "bf16-autocast"), std::optional(Precision::BF16Autocast));
        QCOMPARE(std::string(toString(Precision::BF16Autocast)), std::string("bf16-autocast"));
        QCOMPARE(computeType(Precision::BF16Autocast), DataType::BF16);
        QVERIFY(!quantizedRecipe(Precision::BF16Autocast));
        const StateBytesPerParameter s = stateBytesPerParameter(Precision::BF16Autocast, Optimizer::AdamW, {});
        QCOMPARE(s.weights, 2.0);
        QCOMPARE(s.gradients, 4.0);
        QCOMPARE(s.optimizer, 12.0);
        QCOMPARE(s.gathered, 4.0);
        QCOMPARE(stateBytesPerParameter(Precision::BF16Mixed, Optimizer::AdamW, MainGrads::Default).gathered, 2.0);
        const ModelStateBytes z1 = modelStateBytes(1e9, 1, 32, Precision::BF16Autocast, Optimizer::AdamW, {});
        QCOMPARE(z1.weights, 2e9);
        QCOMPARE(z1.gradients, 4e9);
        QCOMPARE(z1.optimizer, 12e9 / 32);
    }

    // On the Trainium row: the gradients' memory and the ZeRO-1 reduce-scatter and all-gather bytes
    // are twice bf16's (with bf16 gradients), the matmuls and activations the same. Against bf16 with
    // its default fp32 main gradients only the all-gather differs (bf16 parameters gathered).
    void autocastOnTrainium()
    {
        Problem bf16Grads = llamaOnTrn1(Precision::BF16Mixed);
        bf16Grads.training.main_grads = MainGrads::BF16;
        const CostModel bf16(bf16Grads);
        const CostModel autocast(llamaOnTrn1(Precision::BF16Autocast));
        const CostModel fp32Grads(llamaOnTrn1(Precision::BF16Mixed));
        const CostLedger lf = fp32Grads.ledger(trn1Layout());
        QCOMPARE(fp32Grads.evaluate(trn1Layout()).memory_bytes.gradients,
                 autocast.evaluate(trn1Layout()).memory_bytes.gradients);
        const Prediction a = bf16.evaluate(trn1Layout()), b = autocast.evaluate(trn1Layout());
        QCOMPARE(b.memory_bytes.gradients, 2 * a.memory_bytes.gradients);
        QCOMPARE(b.memory_bytes.weights, a.memory_bytes.weights);
        QCOMPARE(b.memory_bytes.optimizer, a.memory_bytes.optimizer);
        QCOMPARE(b.memory_bytes.activations, a.memory_bytes.activations);
        const CostLedger la = bf16.ledger(trn1Layout()), lb = autocast.ledger(trn1Layout());
        const double rs = collectiveBytes(la, CommDimension::Dp, CommKind::ReduceScatter);
        const double ag = collectiveBytes(la, CommDimension::Dp, CommKind::AllGather);
        QVERIFY(rs > 0 && ag > 0);
        QCOMPARE(collectiveBytes(lb, CommDimension::Dp, CommKind::ReduceScatter), 2 * rs);
        QCOMPARE(collectiveBytes(lb, CommDimension::Dp, CommKind::AllGather), 2 * ag);
        QCOMPARE(collectiveBytes(lf, CommDimension::Dp, CommKind::ReduceScatter), 2 * rs);
        QCOMPARE(collectiveBytes(lf, CommDimension::Dp, CommKind::AllGather), ag);
        // Tensor-parallel collectives move bf16 activations either way (parallel_layers_reduce_dtype bf16).
        QCOMPARE(collectiveBytes(lb, CommDimension::Tp, CommKind::ReduceScatter),
                 collectiveBytes(la, CommDimension::Tp, CommKind::ReduceScatter));
        QCOMPARE(b.time_s.compute, a.time_s.compute);
        QVERIFY(b.step_time_s > a.step_time_s);
    }
};

QTEST_GUILESS_MAIN(TstPlannerFramework)
#include "tst_planner_framework.moc"
