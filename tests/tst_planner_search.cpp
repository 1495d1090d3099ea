// The planner's search against an exhaustive evaluation of the same space.
// The exhaustive side enumerates by brute force over ranges wider than the
// search's domain and lets validate() (core/Layout.h) decide what is legal; the
// domain rules that validate() does not express (which ZeRO shard groups, v only
// for the interleaved schedule) are written out here from SearchSpace.h's
// documentation. Then: thread-count independence, Pareto fronts, constraints,
// infeasible counts by reason, cancellation, the plan document, and the CLI's
// plan / sweep / compare end to end.
#include "BuiltinSpecs.h"
#include "CliRunner.h"
#include "CostModel.h"
#include "PlanJson.h"
#include "Search.h"
#include "StepTimeBound.h"
#include "SpecJson.h"
#include "Sweep.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>

#ifndef SHARDSCOPE_CLI_PATH
#error "SHARDSCOPE_CLI_PATH must name the shardscope-cli executable"
#endif

using namespace shardscope;

namespace {

bool powerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Every layout of the search's documented domain that validate() accepts.
std::vector<Layout> bruteForce(const Problem& p)
{
    std::vector<Layout> out;
    const int D = int(p.cluster.devices());
    const int B = p.training.global_batch;
    const int L = p.model.totalLayers();
    const int nodeDevices = p.cluster.node.devicesPerNode();
    for (int tp = 1; tp <= D; ++tp)
        for (int pp = 1; tp * pp <= D; ++pp)
            for (int cp = 1; tp * pp * cp <= D; ++cp)
                for (int dp = 1; dp * tp * pp * cp <= D; ++dp) {
                    // (cp > 1 only on fused attention, which context parallelism runs on.)
                    if (dp * tp * pp * cp != D || (cp > 1 && !p.training.flash_attention))
                        continue;
                    for (int sp = 0; sp <= 1; ++sp)
                        for (int zero = 0; zero <= 3; ++zero)
                            for (int group = 0; group <= dp; ++group) {
                                // Shard groups: 0, or (ZeRO only) g < dp that shards something and is a
                                // power of two or one node's worth of replicas.
                                if (group > 0 && (zero == 0 || group >= dp || (group == 1 && cp == 1) ||
                                                  !(powerOfTwo(group) || group * tp * cp == nodeDevices)))
                                    continue;
                                for (int mb = 1; mb <= B; ++mb)
                                    for (PipelineSchedule s : {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe,
                                                               PipelineSchedule::Interleaved})
                                        for (int v = 1; v <= (s == PipelineSchedule::Interleaved ? L / pp : 1); ++v)
                                            for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
                                                for (Offload o : {Offload::None, Offload::Optimizer})
                                                for (int ep = 1; ep <= std::max(1, std::min(p.model.moe.experts, D)); ++ep)
                                                for (int etp = 0; etp <= (p.model.moe.enabled() ? nodeDevices : 0);
                                                     etp = etp == 0 ? 1 : 2 * etp) {
                                                    // Expert grids (MoE): ep any up to the devices, etp as tp (0)
                                                    // or a power of two up to a node's devices (etp = tp is
                                                    // written as 0). (v: a chunk holds a layer at least.)
                                                    if (etp == tp)
                                                        continue;
                                                    Layout l;
                                                    l.ep = ep;
                                                    l.etp = etp;
                                                    l.dp = dp;
                                                    l.tp = tp;
                                                    l.pp = pp;
                                                    l.cp = cp;
                                                    l.sequence_parallel = sp == 1;
                                                    l.zero_stage = zero;
                                                    l.zero_group = group;
                                                    l.micro_batch = mb;
                                                    l.schedule = s;
                                                    l.virtual_stages = v;
                                                    l.recompute = r;
                                                    l.offload = o;
                                                    if (validate(l, p.model, p.cluster, p.training).empty())
                                                        out.push_back(l);
                                                }
                            }
                }
    return out;
}

// Every legal layout of a problem with its prediction, enumerated and priced once for all the
// tests that look at the same problem (the brute force and the pricing are most of this test's
// time; the cost model is pure, so a prediction is the same whenever it is asked).
struct Priced {
    std::vector<Layout> layouts;
    std::vector<Prediction> predictions;
};

const Priced& priced(const CostModel& model)
{
    const Problem& p = model.problem();
    const std::string key = p.model.name + "|" + std::to_string(p.model.moe.experts) + "|" + p.cluster.node.name + "|" +
                            std::to_string(p.cluster.nodes) + "|" + std::to_string(p.training.global_batch) + "|" +
                            std::to_string(p.training.seq_len) + "|" + (p.training.flash_attention ? "fused" : "unfused");
    static std::map<std::string, std::unique_ptr<Priced>> cache;
    std::unique_ptr<Priced>& entry = cache[key];
    if (!entry) {
        entry = std::make_unique<Priced>();
        entry->layouts = bruteForce(p);
        entry->predictions.reserve(entry->layouts.size());
        for (const Layout& l : entry->layouts)
            entry->predictions.push_back(model.evaluate(l));
    }
    return *entry;
}

// What the search takes from a priced ZeRO sibling (Search.cpp, ZeroSibling): every step-time term
// but the data-parallel, optimizer and offload ones, and the compute its traffic may hide behind.
double zeroIndependentStep(const Prediction& p)
{
    const TimeBreakdown& t = p.time_s;
    return t.compute + t.recompute + t.tp_comm + t.cp_comm + t.pp_comm + t.ep_comm + t.bubble;
}
double computeWindow(const Prediction& p) { return p.time_s.compute + p.time_s.recompute; }

// A layout with its ZeRO fields cleared: the key its siblings share.
std::string siblingKey(const Layout& l)
{
    Layout key = l;
    key.zero_stage = 0;
    key.zero_group = 0;
    key.offload = Offload::None;
    key.overlap_param_gather = false;
    return toString(key);
}

struct Exhaustive {
    std::vector<Plan> feasible;  // sorted by planBetter
    std::int64_t candidates = 0;
    std::int64_t out_of_memory = 0, over_limit = 0, missing_figure = 0;
};

// Evaluates every layout; feasibility as the search defines it (fits, finite, under the limit).
// (`predictions`: the layouts' own, when already priced.)
Exhaustive exhaustive(const CostModel& model, const std::vector<Layout>& layouts, Objective objective,
                      double maxMemoryFraction = 1.0, const std::vector<Prediction>* predictions = nullptr)
{
    Exhaustive e;
    const double limit = maxMemoryFraction * model.problem().cluster.node.chip.hbmBytesPerDevice();
    for (size_t i = 0; i < layouts.size(); ++i) {
        const Layout& l = layouts[i];
        ++e.candidates;
        const Prediction evaluated = predictions ? Prediction{} : model.evaluate(l);
        const Prediction& p = predictions ? (*predictions)[i] : evaluated;
        if (!p.feasible) {
            ++(p.reason == Infeasibility::OutOfMemory ? e.out_of_memory : e.missing_figure);
            continue;
        }
        if (p.memory_bytes.total() > limit) {
            ++e.over_limit;
            continue;
        }
        e.feasible.push_back({l, p, {}, {}});
    }
    std::sort(e.feasible.begin(), e.feasible.end(),
              [&](const Plan& a, const Plan& b) { return planBetter(objective, a, b); });
    return e;
}

// The Pareto front by its definition, O(n^2): not dominated; exact duplicates collapsed
// to the layout first in canonical order.
std::vector<Layout> naiveFront(const std::vector<Plan>& plans, const std::function<double(const Plan&)>& x,
                               const std::function<double(const Plan&)>& y)
{
    // (The coordinates read once: the pairs are many.)
    std::vector<double> xs, ys;
    for (const Plan& p : plans) {
        xs.push_back(x(p));
        ys.push_back(y(p));
    }
    std::vector<Layout> front;
    for (size_t a = 0; a < plans.size(); ++a) {
        bool keep = true;
        for (size_t b = 0; b < plans.size(); ++b) {
            const bool dominates = xs[b] <= xs[a] && ys[b] <= ys[a] && (xs[b] < xs[a] || ys[b] < ys[a]);
            const bool earlierDuplicate =
                xs[b] == xs[a] && ys[b] == ys[a] && layoutLess(plans[b].layout, plans[a].layout);
            if (dominates || earlierDuplicate) {
                keep = false;
                break;
            }
        }
        if (keep)
            front.push_back(plans[a].layout);
    }
    std::sort(front.begin(), front.end(), layoutLess);
    return front;
}

std::vector<Layout> frontLayouts(const PlanFront& front)
{
    std::vector<Layout> out;
    for (const auto& p : front.points())
        out.push_back(p.item.layout);
    std::sort(out.begin(), out.end(), layoutLess);
    return out;
}

double stepOf(const Plan& p) { return p.prediction.step_time_s; }
double memoryOf(const Plan& p) { return p.prediction.memory_bytes.total(); }
double timeOf(const Plan& p) { return p.prediction.time_to_train_s; }
double costOf(const Plan& p) { return p.prediction.cost_to_train_usd; }

std::int64_t reason(const SearchStats& s, const std::string& key)
{
    auto it = s.infeasible_by_reason.find(key);
    return it == s.infeasible_by_reason.end() ? 0 : it->second;
}

QByteArray describe(const Layout& l) { return QByteArray::fromStdString(toString(l)); }

// Every step-time term but the data-parallel, optimizer and offload ones exactly equal.
bool sameTimeButZero(const TimeBreakdown& a, const TimeBreakdown& b)
{
    return a.compute == b.compute && a.recompute == b.recompute && a.tp_comm == b.tp_comm && a.cp_comm == b.cp_comm &&
           a.pp_comm == b.pp_comm && a.ep_comm == b.ep_comm && a.bubble == b.bubble;
}

} // namespace

class TstPlannerSearch : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<QTemporaryDir> dir_;
    const SpecLookup* catalog_ = &BuiltinSpecs::instance();  // the built-in specs, no database

    Problem problem(const char* model, const char* node, int nodes, int batch, int seq = 2048) const
    {
        Problem p;
        p.model = catalog_->model(model);
        p.cluster.node = catalog_->node(node);
        p.cluster.nodes = nodes;
        p.training.global_batch = batch;
        p.training.seq_len = seq;
        p.training.tokens_to_train = 300e9;
        return p;
    }

    using RunResult = CliRun;
    RunResult cli(const QStringList& args) const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SHARDSCOPE_DB"), dir_->filePath(QStringLiteral("env-default.sqlite")));
        return runCli(QStringList{QStringLiteral("--db"), dir_->filePath(QStringLiteral("cli.sqlite"))} + args,
                      dir_->path(), env, 120'000);
    }

    static QJsonObject json(const QByteArray& text)
    {
        QJsonParseError error;
        const QJsonDocument doc = QJsonDocument::fromJson(text, &error);
        return doc.object();
    }

    // Rows shared by the exhaustive tests: small enough to enumerate, with every kind of
    // model rule (MHA, GQA with replicated KV heads, MoE, encoder-decoder) and of infeasibility.
    // With `bothPrunings`, each row twice: with the step-time pruning (a `prune` column) and without.
    void smallProblems(bool bothPrunings = false)
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("node");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("batch");
        if (bothPrunings) {
            QTest::addColumn<bool>("prune");
            QTest::addColumn<bool>("fused");  // fused (flash) attention: cp searched
        }
        struct Row {
            const char *name, *model, *node;
            int nodes, batch;
            bool fused = false;  // (a row of the both-prunings set only)
        };
        const Row rows[] = {
            {"gpt3-13b on 1 x p5 (OOM and offload)", "gpt3-13b", "p5.48xlarge", 1, 16},
            {"gpt3-1.3b on 1 x trn1 (2 devices per chip, no host link)", "gpt3-1.3b", "trn1.32xlarge", 1, 32},
            {"llama-3-8b on 2 x p5 (GQA, KV heads replicated at tp 16)", "llama-3-8b", "p5.48xlarge", 2, 16},
            {"mixtral-8x7b on 2 x p5 (MoE)", "mixtral-8x7b", "p5.48xlarge", 2, 8},
            {"t5-3b on 1 x p4d (encoder-decoder)", "t5-3b", "p4d.24xlarge", 1, 24},
            {"gpt3-13b on 1 x p5, fused attention", "gpt3-13b", "p5.48xlarge", 1, 16, true},
            {"llama-3-8b on 1 x p5, fused attention (GQA, cp)", "llama-3-8b", "p5.48xlarge", 1, 16, true},
            {"mixtral-8x7b on 1 x p5, fused attention (MoE with ep and etp, cp)", "mixtral-8x7b", "p5.48xlarge", 1, 8,
             true},
        };
        for (const Row& r : rows) {
            if (r.fused && !bothPrunings)
                continue;
            if (!bothPrunings) {
                QTest::newRow(r.name) << r.model << r.node << r.nodes << r.batch;
                continue;
            }
            for (bool prune : {true, false})
                QTest::addRow("%s%s", r.name, prune ? "" : ", no time pruning")
                    << r.model << r.node << r.nodes << r.batch << prune << r.fused;
        }
    }

    // The current bound row's problem (boundProblems()), with fused attention or not: fused, a MoE
    // row on one node (the exhaustive MoE rows' size; its cp and ep then stay in the node, the
    // dense rows' cross it).
    Problem boundProblem(bool flash) const
    {
        QFETCH(QString, model);
        QFETCH(QString, node);
        QFETCH(int, nodes);
        QFETCH(int, batch);
        Problem p = problem(qPrintable(model), qPrintable(node), nodes, batch);
        if (p.model.moe.experts > 16)
            p.model.moe.experts = 16;
        p.training.flash_attention = flash;
        p.cluster.nodes = flash && p.model.moe.enabled() ? 1 : nodes;
        return p;
    }

    // The exhaustive rows, and DeepSeek-V3 (its 256 experts cut to 16, so that the brute force
    // stays small; MLA, the shared expert, the dense first layers and the router kept).
    void boundProblems()
    {
        smallProblems();
        QTest::newRow("deepseek-v3 with 16 experts on 1 x p5 (MLA, MoE with dense layers)")
            << "deepseek-v3" << "p5.48xlarge" << 1 << 4;
    }

private slots:
    void initTestCase()
    {
        dir_ = std::make_unique<QTemporaryDir>();
        QVERIFY(dir_->isValid());
    }
    void cleanupTestCase()
    {
        dir_.reset();
    }

    // ---- the search equals an exhaustive evaluation ----

    // Both ways: pruned by the step-time bound (the default) and not; the results are the same.
    void exhaustiveEqualsSearch_data() { smallProblems(true); }
    void exhaustiveEqualsSearch()
    {
        QFETCH(QString, model);
        QFETCH(QString, node);
        QFETCH(int, nodes);
        QFETCH(int, batch);
        QFETCH(bool, prune);
        QFETCH(bool, fused);
        Problem p = problem(qPrintable(model), qPrintable(node), nodes, batch);
        p.training.flash_attention = fused;
        const CostModel cm(p);
        const Priced& all = priced(cm);
        QVERIFY(all.layouts.size() > 1000);
        const Exhaustive e = exhaustive(cm, all.layouts, Objective::Throughput, 1.0, &all.predictions);
        QVERIFY2(!e.feasible.empty(), "the row should have feasible layouts");

        SearchOptions options;
        options.top_k = 25;
        options.threads = 2;
        options.prune_by_time = prune;
        const SearchResult r = search(cm, SearchSpace{}, options);
        QVERIFY(r.error.empty());
        QCOMPARE(r.stats.candidates, e.candidates);
        QCOMPARE(r.stats.evaluated + r.stats.pruned, r.stats.candidates);
        QVERIFY(r.stats.evaluated < e.candidates || r.stats.pruned == 0);
        // A layout skipped by the step-time bound is neither feasible nor counted under a reason:
        // exact counts without that pruning, bounds with it (and it prunes something on these rows).
        const std::int64_t byTime = r.stats.pruned_by_time;
        QCOMPARE(byTime == 0, !prune);
        QVERIFY(r.stats.feasible <= std::int64_t(e.feasible.size()));
        QVERIFY(r.stats.feasible + byTime >= std::int64_t(e.feasible.size()));
        QVERIFY(reason(r.stats, kReasonOutOfMemory) <= e.out_of_memory);
        QVERIFY(reason(r.stats, kReasonOutOfMemory) + byTime >= e.out_of_memory);
        if (!prune) {
            QCOMPARE(r.stats.feasible, std::int64_t(e.feasible.size()));
            QCOMPARE(reason(r.stats, kReasonOutOfMemory), e.out_of_memory);
        }
        QCOMPARE(reason(r.stats, toString(Infeasibility::MissingHardwareFigure)), e.missing_figure);

        // The same top-k, in the same order, with the same predictions and the same variants:
        // the exhaustive ranking folded the same way (plans of the same cost are one choice).
        std::vector<Plan> ranked = e.feasible;
        if (ranked.size() > 25 * 8)
            ranked.resize(25 * 8);  // the search's headroom for variants
        const std::vector<Plan> folded = collapseVariants(ranked, 25, Objective::Throughput);
        QCOMPARE(r.top.size(), folded.size());
        for (size_t i = 0; i < r.top.size(); ++i) {
            QVERIFY2(r.top[i].layout == folded[i].layout,
                     describe(r.top[i].layout) + " vs " + describe(folded[i].layout));
            QCOMPARE(r.top[i].prediction.step_time_s, folded[i].prediction.step_time_s);
            QCOMPARE(r.top[i].prediction.memory_bytes.total(), folded[i].prediction.memory_bytes.total());
            QVERIFY(r.top[i].variants == folded[i].variants);
            for (const Layout& v : r.top[i].variants) {  // each variant really costs the same
                const Plan again{v, cm.evaluate(v), {}, {}};
                QVERIFY(samePlanCost(Objective::Throughput, again, r.top[i]));
            }
            if (i > 0)  // and distinct rows really differ
                QVERIFY(!samePlanCost(Objective::Throughput, r.top[i - 1], r.top[i]));
        }
        // The best priced layouts that do not fit: each really does not fit, with its reason,
        // ranked by the same objective.
        QVERIFY(r.top_infeasible.size() <= 25);
        // Priced but out of memory = out-of-memory count minus those the bound pruned (the rest of
        // the pruned layouts are offload on a node type without a published host link).
        const std::int64_t prunedByBound = r.stats.pruned - byTime - (cm.offloadPriced() ? 0 : e.missing_figure);
        const std::int64_t pricedOutOfMemory = e.out_of_memory - prunedByBound;
        // (Pruned by time only once 25 of them are known: the same count either way.)
        QCOMPARE(r.top_infeasible.size(), size_t(std::min<std::int64_t>(25, std::max<std::int64_t>(0, pricedOutOfMemory))));
        for (size_t i = 0; i < r.top_infeasible.size(); ++i) {
            const Plan& plan = r.top_infeasible[i];
            const Prediction again = cm.evaluate(plan.layout);
            QCOMPARE(again.step_time_s, plan.prediction.step_time_s);
            QCOMPARE(plan.infeasible, std::string(kReasonOutOfMemory));
            QVERIFY(!again.feasible && again.memory_bytes.total() > again.memory_bytes.capacity);
            if (i > 0)
                QVERIFY(!planBetter(Objective::Throughput, plan, r.top_infeasible[i - 1]));
        }
        for (const Plan& plan : r.top)
            QVERIFY(plan.infeasible.empty());
        // The same fronts.
        QVERIFY(frontLayouts(r.pareto_step_memory) == naiveFront(e.feasible, stepOf, memoryOf));
        QVERIFY(frontLayouts(r.pareto_time_cost) == naiveFront(e.feasible, timeOf, costOf));
    }

    // The pruning bounds are lower bounds of the cost model's memory for every legal layout: the
    // memory pruning's (states of the layers) and the step-time pruning's (the memory stages'
    // states by kind with their activations), fused attention or not.
    void memoryBoundIsALowerBound_data() { boundProblems(); }
    void memoryBoundIsALowerBound()
    {
        for (bool flash : {false, true}) {
            const Problem p = boundProblem(flash);
            const CostModel cm(p);
            const StepTimeBound timeBound(cm);
            QVERIFY(timeBound.activationsBounded());
            const Priced& all = priced(cm);
            int checked = 0;
            double tightest = 0;
            for (size_t i = 0; i < all.layouts.size(); ++i) {
                const Layout& l = all.layouts[i];
                const double bound = memoryLowerBound(cm, l), stages = stageMemoryLowerBound(cm, timeBound, l);
                const double actual = all.predictions[i].memory_bytes.total();
                if (bound > actual || stages > actual || stages < bound)
                    QFAIL(qPrintable(QStringLiteral("bounds %1 and %2 vs predicted %3 for %4")
                                         .arg(bound)
                                         .arg(stages)
                                         .arg(actual)
                                         .arg(QString::fromStdString(toString(l)))));
                tightest = std::max(tightest, stages / actual);
                ++checked;
            }
            QVERIFY(checked > 1000);
            QVERIFY2(tightest > 0.6, qPrintable(QString::number(tightest)));  // a bound that can prune
        }
    }

    // ... and under the FP8/FP4 recipes, whose primary quantized weights (ZeRO-1/2) can take fewer
    // bytes than bf16 (NVFP4), and whose time terms only add to the bf16 layers' (the step-time
    // bound prices every GEMM at the recipe's rate).
    void boundsHoldUnderQuantizedRecipes_data()
    {
        QTest::addColumn<int>("precision");
        for (Precision r : {Precision::NVFP4, Precision::MXFP8, Precision::FP8Tensorwise})
            QTest::newRow(toString(r)) << int(r);
    }
    void boundsHoldUnderQuantizedRecipes()
    {
        QFETCH(int, precision);
        Problem p = problem("llama-3-8b", "p6-b200.48xlarge", 1, 16);
        p.training.precision = Precision(precision);
        QVERIFY(validate(p).empty());
        const CostModel cm(p);
        const StepTimeBound time(cm);
        int checked = 0;
        for (const Layout& l : bruteForce(p)) {
            const Prediction pr = cm.evaluate(l);
            QVERIFY2(memoryLowerBound(cm, l) <= pr.memory_bytes.total(), toString(l).c_str());
            QVERIFY2(time.stepTime(time.mesh(l), l) <= pr.step_time_s, toString(l).c_str());
            ++checked;
        }
        QVERIFY(checked > 1000);
    }

    // The step-time bound the search prunes by is a lower bound of the cost model's step time for
    // every legal layout, with every overlap option the layout can take on or off (dense, GQA,
    // MoE, MLA with MoE, encoder-decoder; every recomputation mode, schedule and ZeRO stage).
    void stepTimeBoundIsALowerBound_data() { boundProblems(); }
    void stepTimeBoundIsALowerBound()
    {
        for (bool flash : {false, true}) {
            const Problem p = boundProblem(flash);
            const CostModel cm(p);
            const StepTimeBound bound(cm);
            int checked = 0, siblings = 0;
            double tightest = 0, tightestWithZero = 0;
            // The first priced of each group of ZeRO siblings, as the search prices them.
            std::map<std::string, Prediction> first;
            // (Every layout of the small rows; an even sample of at most ~8000 of the others,
            // each with its overlap options off and on.)
            const Priced& all = priced(cm);
            const size_t stride = std::max<size_t>(1, all.layouts.size() / 8000);
            for (size_t i = 0; i < all.layouts.size(); i += stride) {
                Layout l = all.layouts[i];
                for (bool overlaps : {false, true}) {
                    l.tp_comm_overlap = overlaps && l.sequence_parallel;
                    l.ep_comm_overlap = overlaps && l.ep > 1;
                    l.cp_comm = overlaps && l.cp > 1 && allToAllCpSplitsHeads(p.model, l.tp, l.cp) ? CpComm::A2A
                                                                                                  : CpComm::P2P;
                    l.overlap_param_gather = overlaps && (l.zero_stage == 1 || l.zero_stage == 2);
                    // (The token dispatchers in turn: the bound counts the alltoall one's collectives only.)
                    l.moe_dispatcher = overlaps && p.model.moe.enabled() ? MoeDispatcher(i % 4) : MoeDispatcher::AllToAll;
                    if (l.moe_dispatcher == MoeDispatcher::AllGather)
                        l.ep_comm_overlap = false;
                    if (overlaps && !validate(l, p.model, p.cluster, p.training).empty())
                        continue;
                    const Prediction pr = overlaps ? cm.evaluate(l) : all.predictions[i];
                    const double step = pr.step_time_s, micro = microBatchesPerStep(l, p.training);
                    const StepTimeBound::Mesh mesh = bound.mesh(l);
                    const StepTimeBound::Seconds parts = bound.stepTimeParts(mesh, l, true);
                    const double lower = bound.stepTime(mesh, l);
                    QCOMPARE(parts.step_s, lower);
                    QVERIFY(parts.busy_s <= parts.step_s);
                    QVERIFY(bound.stepTimeWithoutRecompute(mesh, l) <= lower);
                    // With the layout's own ZeRO terms: behind the bound's busy time, and behind a
                    // priced sibling's compute on top of that sibling's ZeRO-independent terms.
                    const StepTimeBound::ZeroTerms zero = bound.zeroTerms(mesh, l);
                    const double withZero = lower + bound.zeroStepTime(zero, micro, bound.busyWindow(parts));
                    QVERIFY(bound.zeroStepTime(zero, micro, -1) <= bound.zeroStepTime(zero, micro, 0));
                    const auto [it, inserted] = first.try_emplace(siblingKey(l), pr);
                    const double fromSibling =
                        zeroIndependentStep(it->second) + bound.zeroStepTime(zero, micro, computeWindow(it->second));
                    if (!(lower > 0 && lower <= step && withZero <= step && fromSibling <= step))
                        QFAIL(qPrintable(QStringLiteral("bounds %1 s, %2 s with ZeRO terms, %3 s by a sibling vs step "
                                                        "%4 s for %5")
                                             .arg(lower)
                                             .arg(withZero)
                                             .arg(fromSibling)
                                             .arg(step)
                                             .arg(QString::fromStdString(toString(l)))));
                    tightest = std::max(tightest, lower / step);
                    tightestWithZero = std::max(tightestWithZero, withZero / step);
                    siblings += inserted ? 0 : 1;
                    ++checked;
                }
            }
            QVERIFY(checked > 1000);
            QVERIFY(siblings > 100);
            QVERIFY2(tightest > 0.15, qPrintable(QString::number(tightest)));  // a bound that can prune
            QVERIFY(tightestWithZero >= tightest);
        }
    }

    // The search bounds a layout's ZeRO siblings (the same layout but for zero_stage, zero_group,
    // offload and overlap_param_gather) by a priced one: every step-time term but the
    // data-parallel, optimizer and offload ones, and the activations, the buffers but ZeRO-3's
    // gathered parameters and the reserve of a stage, are the same for all of them.
    void zeroSiblingsShareTheOtherTerms_data() { smallProblems(); }
    void zeroSiblingsShareTheOtherTerms()
    {
        QFETCH(QString, model);
        QFETCH(QString, node);
        QFETCH(int, nodes);
        QFETCH(int, batch);
        const Problem p = problem(qPrintable(model), qPrintable(node), nodes, batch);
        const CostModel cm(p);
        std::map<std::string, Prediction> first;  // by the layout with its ZeRO fields cleared
        int compared = 0;
        const Priced& all = priced(cm);
        for (size_t i = 0; i < all.layouts.size(); ++i) {
            const Layout& l = all.layouts[i];
            if (l.zero_stage == 3)
                continue;  // (its buffers hold the gathered parameters: the search leaves them out)
            const Prediction& pr = all.predictions[i];
            const auto [it, inserted] = first.try_emplace(siblingKey(l), pr);
            if (inserted)
                continue;
            const Prediction& a = it->second;
            QVERIFY2(sameTimeButZero(pr.time_s, a.time_s), describe(l));
            if (pr.memory_stage == a.memory_stage) {
                QCOMPARE(pr.memory_bytes.activations, a.memory_bytes.activations);
                QCOMPARE(pr.memory_bytes.buffers, a.memory_bytes.buffers);
                QCOMPARE(pr.memory_bytes.reserve, a.memory_bytes.reserve);
            }
            ++compared;
        }
        QVERIFY(compared > 1000);
        // Under fused attention selective recomputation costs no time: its step-time terms are
        // those of no recomputation (the search bounds the one by the other).
        Problem fused = p;
        fused.training.flash_attention = true;
        const CostModel fusedModel(fused);
        int pairs = 0;
        const Priced& allFused = priced(fusedModel);
        for (size_t i = 0; i < allFused.layouts.size(); ++i) {
            Layout l = allFused.layouts[i];
            if (l.recompute != Recompute::Selective || pairs == 5000)
                continue;
            const Prediction& selective = allFused.predictions[i];
            l.recompute = Recompute::None;
            const Prediction none = fusedModel.evaluate(l);
            QVERIFY2(sameTimeButZero(selective.time_s, none.time_s), describe(l));
            ++pairs;
        }
        QVERIFY(pairs > 100);
    }

    // ---- determinism ----

    void threadCountIndependence()
    {
        const CostModel cm(problem("gpt3-175b", "trn1.32xlarge", 8, 512));
        SearchOptions options;
        options.top_k = 50;
        options.threads = 1;
        const SearchResult one = search(cm, SearchSpace{}, options);
        QVERIFY(one.best());
        QVERIFY(one.stats.candidates > 100'000);
        for (int threads : {2, 3, 8}) {
            options.threads = threads;
            const SearchResult r = search(cm, SearchSpace{}, options);
            QCOMPARE(r.stats.threads, threads);
            QCOMPARE(r.stats.candidates, one.stats.candidates);
            // What the step-time bound skips depends on what each worker has seen: the counts
            // of evaluated layouts are the same for any thread count without it (below).
            QCOMPARE(r.stats.evaluated + r.stats.pruned, one.stats.evaluated + one.stats.pruned);
            QCOMPARE(r.stats.pruned - r.stats.pruned_by_time, one.stats.pruned - one.stats.pruned_by_time);
            QCOMPARE(r.top.size(), one.top.size());
            for (size_t i = 0; i < r.top.size(); ++i) {
                QVERIFY(r.top[i].layout == one.top[i].layout);
                QCOMPARE(r.top[i].prediction.tokens_per_s, one.top[i].prediction.tokens_per_s);
            }
            QVERIFY(frontLayouts(r.pareto_step_memory) == frontLayouts(one.pareto_step_memory));
            QVERIFY(frontLayouts(r.pareto_time_cost) == frontLayouts(one.pareto_time_cost));
        }
        // Without the step-time pruning every count is the same too.
        options.prune_by_time = false;
        options.threads = 1;
        const SearchResult all = search(cm, SearchSpace{}, options);
        QCOMPARE(all.stats.pruned_by_time, std::int64_t(0));
        options.threads = 3;
        const SearchResult three = search(cm, SearchSpace{}, options);
        QCOMPARE(three.stats.evaluated, all.stats.evaluated);
        QCOMPARE(three.stats.pruned, all.stats.pruned);
        QCOMPARE(three.stats.feasible, all.stats.feasible);
        QVERIFY(three.stats.infeasible_by_reason == all.stats.infeasible_by_reason);
        QVERIFY(one.stats.evaluated < all.stats.evaluated);  // the bound prunes this problem
        QCOMPARE(one.top.size(), all.top.size());
        for (size_t i = 0; i < all.top.size(); ++i) {
            QVERIFY(one.top[i].layout == all.top[i].layout);
            QVERIFY(one.top[i].variants == all.top[i].variants);
        }
        QVERIFY(frontLayouts(one.pareto_step_memory) == frontLayouts(all.pareto_step_memory));
        QVERIFY(frontLayouts(one.pareto_time_cost) == frontLayouts(all.pareto_time_cost));
    }

    // ---- Pareto fronts ----

    void paretoFrontDefinition()
    {
        const Problem p = problem("gpt3-13b", "p5.48xlarge", 1, 16);
        const CostModel cm(p);
        const Exhaustive e = exhaustive(cm, bruteForce(p), Objective::Throughput);
        const SearchResult r = search(cm, SearchSpace{}, SearchOptions{});
        const auto& front = r.pareto_step_memory.points();
        QVERIFY(front.size() >= 3);
        for (size_t i = 1; i < front.size(); ++i) {  // sorted by step time, memory falling
            QVERIFY(front[i - 1].x < front[i].x);
            QVERIFY(front[i - 1].y > front[i].y);
        }
        // No front point is dominated by any feasible layout...
        for (const auto& f : front)
            for (const Plan& q : e.feasible)
                QVERIFY(!(stepOf(q) <= f.x && memoryOf(q) <= f.y && (stepOf(q) < f.x || memoryOf(q) < f.y)));
        // ...and every feasible layout off the front is dominated by (or equal to) a front point.
        for (const Plan& q : e.feasible)
            QVERIFY(r.pareto_step_memory.covers(stepOf(q), memoryOf(q)));
    }

    void paretoFrontIgnoresInsertionOrder()
    {
        struct IntLess {
            bool operator()(int a, int b) const { return a < b; }
        };
        std::vector<ParetoPoint<int>> points{{1, 9, 0}, {2, 7, 1}, {2, 7, 2}, {3, 8, 3}, {3, 3, 4},
                                             {5, 3, 5}, {6, 1, 6}, {6, 1, 7}, {1, 9, 8}, {4, 2, 9}};
        std::vector<int> expected;
        {
            ParetoFront<int, IntLess> f;
            for (const auto& p : points)
                f.insert(p.x, p.y, p.item);
            for (const auto& p : f.points())
                expected.push_back(p.item);
        }
        // (1,9) first of 0/8, (2,7) first of 1/2, (3,3), (4,2), (6,1) first of 6/7.
        QCOMPARE(expected, (std::vector<int>{0, 1, 4, 9, 6}));
        std::mt19937 rng(42);
        for (int round = 0; round < 50; ++round) {
            std::shuffle(points.begin(), points.end(), rng);
            ParetoFront<int, IntLess> f;
            for (const auto& p : points)
                f.insert(p.x, p.y, p.item);
            std::vector<int> got;
            for (const auto& p : f.points())
                got.push_back(p.item);
            QCOMPARE(got, expected);
        }
    }

    // ---- constraints: the search under a constraint equals the exhaustive set filtered by it ----

    void constraints_data()
    {
        QTest::addColumn<QString>("fix");
        QTest::addColumn<QString>("lower");
        QTest::addColumn<QString>("upper");
        QTest::addColumn<QString>("recompute");
        QTest::addColumn<double>("maxMem");
        QTest::addColumn<int>("minMicro");
        const QString none;
        QTest::newRow("--fix tp=2,pp=2") << "tp=2,pp=2" << none << none << none << 1.0 << 1;
        QTest::newRow("--fix sp=on,schedule=interleaved,v=2")
            << "sp=on,schedule=interleaved,v=2" << none << none << none << 1.0 << 1;
        QTest::newRow("--fix zero=1,offload=optimizer") << "zero=1,offload=optimizer" << none << none << none << 1.0 << 1;
        QTest::newRow("--fix mb=1,recompute=full,cp=1") << "mb=1,recompute=full,cp=1" << none << none << none << 1.0 << 1;
        QTest::newRow("--max tp=2,zero=1") << none << none << "tp=2,zero=1" << none << 1.0 << 1;
        QTest::newRow("--min dp=2,pp=2") << none << "dp=2,pp=2" << none << none << 1.0 << 1;
        QTest::newRow("--recompute none,selective") << none << none << none << "none,selective" << 1.0 << 1;
        QTest::newRow("--max-mem 0.5") << none << none << none << none << 0.5 << 1;
        QTest::newRow("--min-micro-batches 4") << none << none << none << none << 1.0 << 4;
    }
    void constraints()
    {
        QFETCH(QString, fix);
        QFETCH(QString, lower);
        QFETCH(QString, upper);
        QFETCH(QString, recompute);
        QFETCH(double, maxMem);
        QFETCH(int, minMicro);
        const Problem p = problem("gpt3-13b", "p5.48xlarge", 1, 16);
        const CostModel cm(p);
        SearchSpace space;
        QVERIFY(applyFixed(space, fix.toStdString()).empty());
        QVERIFY(applyBounds(space, lower.toStdString(), false, "min").empty());
        QVERIFY(applyBounds(space, upper.toStdString(), true, "max").empty());
        if (!recompute.isEmpty())
            QVERIFY(applyRecomputeModes(space, recompute.toStdString()).empty());
        space.max_memory_fraction = maxMem;
        space.min_micro_batches = minMicro;

        // The constraint as a predicate, written from the option's meaning.
        auto inSpace = [&](const Layout& l) {
            auto within = [](const IntBounds& b, int v) { return v >= b.lo && v <= b.hi; };
            return within(space.dp, l.dp) && within(space.tp, l.tp) && within(space.pp, l.pp) &&
                   within(space.cp, l.cp) && within(space.mb, l.micro_batch) && within(space.v, l.virtual_stages) &&
                   within(space.zero, l.zero_stage) &&
                   (!space.sequence_parallel || *space.sequence_parallel == l.sequence_parallel) &&
                   space.allows(l.schedule) && space.allows(l.recompute) && space.allows(l.offload) &&
                   microBatchesPerStep(l, p.training) >= minMicro;
        };
        std::vector<Layout> filtered;
        for (const Layout& l : bruteForce(p))
            if (inSpace(l))
                filtered.push_back(l);
        const Exhaustive e = exhaustive(cm, filtered, Objective::Throughput, maxMem);
        QVERIFY2(!e.feasible.empty(), "the constraint should leave feasible layouts");

        SearchOptions options;
        options.top_k = 1'000'000;  // every feasible layout
        const SearchResult r = search(cm, space, options);
        QCOMPARE(r.stats.candidates, e.candidates);
        // Every feasible layout, each run of the same cost folded into one plan.
        const std::vector<Plan> folded = collapseVariants(e.feasible, options.top_k, Objective::Throughput);
        QCOMPARE(r.top.size(), folded.size());
        for (size_t i = 0; i < r.top.size(); ++i) {
            QVERIFY(r.top[i].layout == folded[i].layout);
            QVERIFY(r.top[i].variants == folded[i].variants);
            QVERIFY(inSpace(r.top[i].layout));
            QVERIFY(r.top[i].prediction.memory_bytes.total() <= maxMem * r.top[i].prediction.memory_bytes.capacity);
            QVERIFY(r.top[i].prediction.micro_batches >= minMicro);
        }
        if (maxMem < 1)
            QVERIFY(reason(r.stats, kReasonOverLimit) > 0);
    }

    void fixedShardGroup()
    {
        SearchSpace space;
        QVERIFY(applyFixed(space, "zero_group=2").empty());
        SearchOptions options;
        options.top_k = 100'000;
        Problem p = problem("gpt3-13b", "p5.48xlarge", 1, 16);
        p.training.flash_attention = true;  // (cp searched too)
        const SearchResult r = search(p, space, options);
        QVERIFY(!r.top.empty());
        for (const Plan& plan : r.top) {
            QCOMPARE(plan.layout.zero_group, 2);
            QVERIFY(plan.layout.zero_stage >= 1);
        }
        QCOMPARE(reason(r.stats, "mesh: zero_group does not divide dp"), std::int64_t(10));  // the 10 shapes with dp = 1
    }

    // cp_comm (Layout.h): the ring unless asked, all-to-all where the space says so and the heads
    // split over cp, and for DeepSpeed (Ulysses) without being asked.
    void allToAllContextParallelism()
    {
        SearchOptions options;
        options.top_k = 100'000;
        Problem p = problem("llama-2-7b", "p5.48xlarge", 1, 16, 8192);
        p.training.flash_attention = true;
        auto cpLayouts = [](const SearchResult& r, CpComm want) {
            int n = 0;
            for (const Plan& plan : r.top)
                if (plan.layout.cp > 1) {
                    if (plan.layout.cp_comm != want)
                        return -1;
                    ++n;
                }
            return n;
        };
        const SearchResult ring = search(p, SearchSpace{}, options);
        QVERIFY(cpLayouts(ring, CpComm::P2P) > 0);
        SearchSpace a2a;
        QVERIFY(applyFixed(a2a, "cp_comm=a2a").empty());
        const SearchResult ulysses = search(p, a2a, options);
        // (llama-2-7b: 32 heads, MHA; tp x cp <= 8 always splits them.) TE's a2a keeps its
        // head-split output beside the out-projection's copy (CostModel.cpp): the layouts it
        // loses against the ring are ones that no longer fit: as many fewer feasible as more out of memory.
        const int a2aCount = cpLayouts(ulysses, CpComm::A2A), ringCount = cpLayouts(ring, CpComm::P2P);
        QVERIFY(a2aCount > 0 && a2aCount < ringCount);
        QCOMPARE(ring.stats.feasible - ulysses.stats.feasible,
                 reason(ulysses.stats, kReasonOutOfMemory) - reason(ring.stats, kReasonOutOfMemory));
        for (const Plan& plan : ulysses.top)
            QVERIFY(plan.layout.cp > 1 || plan.layout.cp_comm == CpComm::P2P);
        options.framework = ExportFormat::DeepSpeed;
        const SearchResult deepspeed = search(p, SearchSpace{}, options);
        QVERIFY(cpLayouts(deepspeed, CpComm::A2A) > 0);
    }

    // moe_dispatcher (Layout.h): not searched; fixed, on every expert grid that can run it (DeepEP:
    // etp x ep > 1), the others keep alltoall; allgather takes no ep_comm_overlap.
    void fixedMoeDispatcher()
    {
        SearchOptions options;
        options.top_k = 100'000;
        const Problem p = problem("mixtral-8x7b", "p5.48xlarge", 2, 64, 4096);
        const SearchResult plain = search(p, SearchSpace{}, options);
        QVERIFY(!plain.top.empty());
        for (const Plan& plan : plain.top)
            QCOMPARE(plan.layout.moe_dispatcher, MoeDispatcher::AllToAll);
        SearchSpace deepep;
        QVERIFY(applyFixed(deepep, "moe_dispatcher=deepep,ep_comm_overlap=on").empty());
        const SearchResult flex = search(p, deepep, options);
        int flexPlans = 0;
        for (const Plan& plan : flex.top) {
            const Layout& l = plan.layout;
            const bool runs = std::int64_t(l.ep) * l.expertTensorParallel() > 1;
            QCOMPARE(l.moe_dispatcher, runs ? MoeDispatcher::DeepEp : MoeDispatcher::AllToAll);
            flexPlans += runs ? 1 : 0;
        }
        QVERIFY(flexPlans > 0);
        SearchSpace gather;
        QVERIFY(applyFixed(gather, "moe_dispatcher=allgather,ep_comm_overlap=on").empty());
        for (const Plan& plan : search(p, gather, options).top) {
            QCOMPARE(plan.layout.moe_dispatcher, MoeDispatcher::AllGather);
            QVERIFY(!plan.layout.ep_comm_overlap);
        }
    }

    void constraintParsing_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("path");
        QTest::newRow("fix tp=x") << "fix" << "tp=x" << "fix.tp";
        QTest::newRow("fix unknown key") << "fix" << "tensor=2" << "fix.tensor";
        QTest::newRow("fix schedule") << "fix" << "schedule=zigzag" << "fix.schedule";
        QTest::newRow("fix not key=value") << "fix" << "tp" << "fix";
        QTest::newRow("max sp") << "max" << "sp=1" << "max.sp";
        QTest::newRow("max tp=0") << "max" << "tp=0" << "max.tp";
        QTest::newRow("recompute fast") << "recompute" << "none,fast" << "recompute";
    }
    void constraintParsing()
    {
        QFETCH(QString, kind);
        QFETCH(QString, text);
        QFETCH(QString, path);
        SearchSpace space;
        const FieldErrors errors = kind == "fix"   ? applyFixed(space, text.toStdString())
                                   : kind == "max" ? applyBounds(space, text.toStdString(), true, "max")
                                                   : applyRecomputeModes(space, text.toStdString());
        QCOMPARE(errors.size(), size_t(1));
        QCOMPARE(QString::fromStdString(errors.front().path), path);
    }

    // ---- infeasible layouts by reason ----

    void infeasibleReasons_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("node");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("seq");
        QTest::addColumn<QString>("fix");
        QTest::addColumn<double>("maxMem");
        QTest::addColumn<QString>("expected");
        QTest::addColumn<bool>("anyFeasible");
        QTest::newRow("tp=8 vs 12 heads") << "gpt2-small" << "p5.48xlarge" << 1 << 16 << 1024 << "tp=8" << 1.0
                                          << "mesh: tp does not divide heads" << false;
        QTest::newRow("pp=8 vs 12 layers") << "gpt2-small" << "p5.48xlarge" << 1 << 16 << 1024 << "pp=8" << 1.0
                                           << "mesh: pp does not divide layers" << false;
        QTest::newRow("dp=8 vs batch 12") << "gpt2-small" << "p5.48xlarge" << 1 << 12 << 1024 << "dp=8" << 1.0
                                          << "mesh: dp does not divide the global batch" << false;
        QTest::newRow("cp=8 vs seq 1020") << "gpt2-small" << "p5.48xlarge" << 1 << 16 << 1020 << "cp=8" << 1.0
                                          << "mesh: cp does not divide the sequence" << false;
        QTest::newRow("sp with tp x cp = 8 vs seq 1020") << "gpt2-small" << "p5.48xlarge" << 1 << 16 << 1020
                                                         << "tp=4,cp=2,sp=on" << 1.0
                                                         << "sp: tp x cp does not divide the sequence" << false;
        QTest::newRow("interleaved, 2 micro-batches on pp=4") << "gpt2-small" << "p5.48xlarge" << 1 << 4 << 1024
                                                              << "pp=4,mb=1,schedule=interleaved" << 1.0
                                                              << "interleaved: micro-batches not a multiple of pp"
                                                              << true;
        QTest::newRow("175B on one node") << "gpt3-175b" << "p5.48xlarge" << 1 << 16 << 2048 << "" << 1.0
                                          << kReasonOutOfMemory << false;
        QTest::newRow("offload without a host link figure")
            << "gpt3-1.3b" << "trn1.32xlarge" << 1 << 32 << 2048 << "offload=optimizer" << 1.0
            << toString(Infeasibility::MissingHardwareFigure) << false;
        QTest::newRow("max-mem 0.2") << "gpt3-13b" << "p5.48xlarge" << 1 << 16 << 2048 << "" << 0.2
                                     << kReasonOverLimit << true;
    }
    void infeasibleReasons()
    {
        QFETCH(QString, model);
        QFETCH(QString, node);
        QFETCH(int, nodes);
        QFETCH(int, batch);
        QFETCH(int, seq);
        QFETCH(QString, fix);
        QFETCH(double, maxMem);
        QFETCH(QString, expected);
        QFETCH(bool, anyFeasible);
        SearchSpace space;
        QVERIFY(applyFixed(space, fix.toStdString()).empty());
        space.max_memory_fraction = maxMem;
        Problem pr = problem(qPrintable(model), qPrintable(node), nodes, batch, seq);
        pr.training.flash_attention = true;  // (so that cp is searched)
        const SearchResult r = search(pr, space);
        QVERIFY2(reason(r.stats, expected.toStdString()) > 0,
                 qPrintable(QString::fromStdString([&] {
                     std::string all;
                     for (const auto& [k, n] : r.stats.infeasible_by_reason)
                         all += k + " = " + std::to_string(n) + "; ";
                     return all;
                 }())));
        QCOMPARE(r.best() != nullptr, anyFeasible);
        // Every legal layout is accounted for: feasible, infeasible for a layout-level reason, or
        // skipped by the step-time bound (it could not rank, feasible or not).
        std::int64_t layoutReasons = 0;
        for (const auto& [key, n] : r.stats.infeasible_by_reason)
            if (key.rfind("mesh: ", 0) != 0 && key.rfind("sp: ", 0) != 0 && key.rfind("interleaved: ", 0) != 0)
                layoutReasons += n;
        QCOMPARE(r.stats.feasible + layoutReasons + r.stats.pruned_by_time, r.stats.candidates);
    }

    // Context parallelism runs on fused attention only (Transformer Engine): a problem that trains
    // unfused attention is searched without cp, each such mesh shape counted under its reason.
    void contextParallelNeedsFusedAttention()
    {
        Problem p = problem("gpt2-small", "p5.48xlarge", 1, 16, 1024);
        const SearchResult unfused = search(p, SearchSpace{});
        QVERIFY(unfused.best());
        // 8 devices: the shapes with tp and pp in {1, 2, 4} (dividing 12 heads and 12 layers) and
        // cp = 2 (6 of them), 4 (3) or 8 (1).
        QCOMPARE(reason(unfused.stats, kReasonCpNeedsFusedAttention), std::int64_t(10));
        for (const auto& point : unfused.pareto_step_memory.points())
            QCOMPARE(point.item.layout.cp, 1);
        p.training.flash_attention = true;
        const SearchResult fused = search(p, SearchSpace{});
        QCOMPARE(reason(fused.stats, kReasonCpNeedsFusedAttention), std::int64_t(0));
        QVERIFY(fused.stats.candidates > unfused.stats.candidates);
    }

    // Where pp does not divide the layers the search offers Megatron-LM's uneven split with the
    // lighter ends (Llama 3 405B's 126 layers over 16 stages: 7 + 14 x 8 + 7); where it does, the
    // even split; a fixed split is taken as given.
    void unevenSplitWherePpDoesNotDivideTheLayers()
    {
        Problem p = problem("llama-3-405b", "p5.48xlarge", 128, 1024, 4096);
        p.training.flash_attention = true;
        SearchSpace space;
        QVERIFY(applyFixed(space, "tp=8,pp=16,cp=1").empty());
        const SearchResult r = search(p, space);
        QVERIFY(r.best());
        for (const Plan& plan : r.top) {
            QCOMPARE(plan.layout.first_stage_layers, 7);
            QCOMPARE(plan.layout.last_stage_layers, 7);
        }
        QCOMPARE(reason(r.stats, "mesh: pp does not divide layers"), std::int64_t(0));
        SearchSpace even;
        QVERIFY(applyFixed(even, "tp=8,pp=2,cp=1").empty());
        for (const Plan& plan : search(p, even).top)
            QVERIFY(!plan.layout.unevenPipeline());  // 63 + 63
        SearchSpace fixed = space;
        QVERIFY(applyFixed(fixed, "first_stage_layers=6").empty());
        QCOMPARE(fixedText(fixed), std::string("tp=8,pp=16,cp=1,first_stage_layers=6"));
        const SearchResult f = search(p, fixed);
        QVERIFY(f.best());
        QCOMPARE(f.best()->layout.first_stage_layers, 6);  // the other 120 layers: 8 on each of 15 stages
        QCOMPARE(f.best()->layout.last_stage_layers, 0);
        QCOMPARE(f.best()->layout.stageLayers(126, 15), 8);
        // No equal ends: DeepSeek-V3's 61 layers over 16 stages as 3 + 14 x 4 + 2 (and over 8: 7 + 6 x 8 + 6).
        Problem ds = problem("deepseek-v3", "p5.48xlarge", 256, 4096, 4096);
        ds.training.flash_attention = true;
        for (const auto& [fix, first, last] : {std::tuple{"tp=1,pp=16,cp=1,ep=64", 3, 2}, std::tuple{"tp=1,pp=8,cp=1,ep=64", 7, 6}}) {
            SearchSpace odd;
            QVERIFY(applyFixed(odd, fix).empty());
            const SearchResult d = search(ds, odd);
            QVERIFY2(d.best() || !d.top.empty() || d.stats.candidates > 0, fix);
            QCOMPARE(reason(d.stats, "mesh: pp does not divide layers"), std::int64_t(0));
            for (const Plan& plan : d.top) {
                QCOMPARE(plan.layout.first_stage_layers, first);
                QCOMPARE(plan.layout.last_stage_layers, last);
            }
        }
    }

    // Partial full recomputation is searched as fixed (--fix recompute_method=block,recompute_layers=N):
    // every layout with recompute=full carries it, the others none.
    void fixedPartialRecomputation()
    {
        SearchSpace space;
        QVERIFY(applyFixed(space, "pp=2,recompute_method=block,recompute_layers=3").empty());
        QCOMPARE(fixedText(space), std::string("pp=2,recompute_method=block,recompute_layers=3"));
        SearchOptions options;
        options.top_k = 1000;
        const SearchResult r = search(problem("gpt3-13b", "p5.48xlarge", 1, 16), space, options);
        int full = 0;
        for (const Plan& plan : r.top) {
            const bool partial = plan.layout.recompute == Recompute::Full;
            full += partial ? 1 : 0;
            QCOMPARE(plan.layout.recompute_layers, partial ? 3 : 0);
            QVERIFY(!partial || plan.layout.recompute_method == RecomputeMethod::Block);
        }
        QVERIFY(full > 0);
    }

    // Recomputed modules and activation offload are searched as fixed (--fix recompute_modules=...,
    // offload_activations=N): the selective layouts carry the modules, the layouts without
    // recomputation the offload (pp = 1 only: Megatron's rule), and the bounds that prune the
    // search stay below what the cost model prices (the same best plan with and without pruning).
    void fixedModulesAndOffload_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("fixed");
        QTest::newRow("dense, mlp and offload") << "gpt3-13b" << "recompute_modules=core_attn+mlp,offload_activations=4";
        QTest::newRow("moe, experts' activation and norms") << "mixtral-8x7b" << "recompute_modules=moe_act+layernorm";
        QTest::newRow("moe, whole layers") << "mixtral-8x7b" << "recompute_modules=moe";
    }
    void fixedModulesAndOffload()
    {
        QFETCH(QString, model);
        QFETCH(QString, fixed);
        SearchSpace space;
        QVERIFY(applyFixed(space, fixed.toStdString()).empty());
        QCOMPARE(fixedText(space), fixed.toStdString());
        Problem p = problem(qPrintable(model), "p5.48xlarge", 2, 64);
        p.training.flash_attention = true;
        SearchOptions options;
        options.top_k = 1000;
        const SearchResult r = search(p, space, options);
        QVERIFY(r.error.empty() && !r.top.empty());
        int offloaded = 0, selective = 0;
        for (const Plan& plan : r.top) {
            const Layout& l = plan.layout;
            selective += l.recompute == Recompute::Selective ? 1 : 0;
            QCOMPARE(l.recompute_modules, l.recompute == Recompute::Selective ? *space.recompute_modules : 0u);
            QCOMPARE(l.offload_activations, l.recompute == Recompute::None ? space.offload_activations.value_or(0) : 0);
            QVERIFY(l.offload_activations == 0 || l.pp == 1);
            offloaded += l.offload_activations > 0 ? 1 : 0;
        }
        QCOMPARE(offloaded > 0, space.offload_activations.has_value());
        QVERIFY(selective > 0);
        options.top_k = 5;
        options.prune_by_time = false;
        const SearchResult unpruned = search(p, space, options);
        options.prune_by_time = true;
        const SearchResult pruned = search(p, space, options);
        QVERIFY(pruned.best() && unpruned.best());
        QCOMPARE(toString(pruned.best()->layout), toString(unpruned.best()->layout));
        QCOMPARE(pruned.best()->prediction.step_time_s, unpruned.best()->prediction.step_time_s);
    }

    // ---- objectives ----

    void objectives()
    {
        const Problem p = problem("gpt3-13b", "p5.48xlarge", 2, 32);
        SearchOptions options;
        options.top_k = 5;
        options.objective = Objective::Throughput;
        const SearchResult byThroughput = search(p, SearchSpace{}, options);
        options.objective = Objective::TimeToTrain;
        const SearchResult byTime = search(p, SearchSpace{}, options);
        options.objective = Objective::CostToTrain;
        const SearchResult byCost = search(p, SearchSpace{}, options);
        QVERIFY(byThroughput.best() && byTime.best() && byCost.best());
        // On one cluster, time and cost are both the token budget over the throughput (times a price).
        QVERIFY(byTime.best()->layout == byThroughput.best()->layout);
        QVERIFY(byCost.best()->layout == byThroughput.best()->layout);
        for (size_t i = 1; i < byThroughput.top.size(); ++i)
            QVERIFY(byThroughput.top[i - 1].prediction.tokens_per_s >= byThroughput.top[i].prediction.tokens_per_s);

        // No price: the cost objective says so instead of ranking zeros.
        const SearchResult unpriced = search(problem("gpt3-13b", "trn1n.32xlarge", 1, 32), SearchSpace{}, options);
        QVERIFY(unpriced.top.empty());
        QVERIFY(QString::fromStdString(unpriced.error).contains("trn1n.32xlarge"));
        QVERIFY(QString::fromStdString(unpriced.error).contains("price"));
    }

    // ---- cancellation and progress ----

    void cancelBeforeStart()
    {
        std::atomic<bool> cancel{true};
        SearchOptions options;
        options.cancel = &cancel;
        const SearchResult r = search(problem("gpt3-175b", "trn1.32xlarge", 128, 1536), SearchSpace{}, options);
        QVERIFY(r.stats.cancelled);
        QCOMPARE(r.stats.evaluated, std::int64_t(0));
        QVERIFY(r.top.empty());
    }

    void cancelFromProgress()
    {
        // A large search on one thread; the first progress report (after about 50 ms) cancels it.
        // (Fused attention: context parallelism is searched too.)
        Problem p = problem("gpt3-175b", "trn1.32xlarge", 512, 2048);
        p.training.flash_attention = true;
        const CostModel cm(p);
        std::atomic<bool> cancel{false};
        SearchOptions options;
        options.threads = 1;
        options.cancel = &cancel;
        std::vector<SearchProgress> reports;
        std::chrono::steady_clock::time_point cancelledAt;
        options.progress = [&](const SearchProgress& p) {
            reports.push_back(p);
            if (!cancel.exchange(true))
                cancelledAt = std::chrono::steady_clock::now();
        };
        const SearchResult r = search(cm, SearchSpace{}, options);
        const double afterCancel = std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelledAt).count();
        QVERIFY(r.stats.cancelled);
        QVERIFY(reports.size() >= 2);  // the one that cancelled and the final one
        QVERIFY(reports.back().done < reports.back().total);
        QVERIFY(reports.front().elapsed_s > 0);
        // Prompt: the worker checks the flag between micro-batch sizes. Generous bound,
        // a safety net against a worker that ignores the flag, not a performance goal.
        QVERIFY2(afterCancel < 2.0, qPrintable(QString::number(afterCancel)));
    }

    void progressReachesTotal()
    {
        SearchOptions options;
        std::vector<SearchProgress> reports;
        options.progress = [&](const SearchProgress& p) { reports.push_back(p); };
        const SearchResult r = search(problem("gpt3-13b", "p5.48xlarge", 2, 32), SearchSpace{}, options);
        QVERIFY(!reports.empty());
        QCOMPARE(reports.back().done, reports.back().total);
        QCOMPARE(reports.back().evaluated, r.stats.evaluated);
        QVERIFY(!r.stats.cancelled);
        for (size_t i = 1; i < reports.size(); ++i)
            QVERIFY(reports[i].done >= reports[i - 1].done);
    }

    // ---- sweeps ----

    void sweepOverNodeCounts()
    {
        FieldErrors errors;
        const std::vector<int> nodes = parseNodeCounts("1..8", "nodes", errors);
        QVERIFY(errors.empty());
        QCOMPARE(nodes, (std::vector<int>{1, 2, 4, 8}));
        QCOMPARE(parseNodeCounts("3,5", "nodes", errors), (std::vector<int>{3, 5}));
        QVERIFY(parseNodeCounts("0,2", "nodes", errors).empty());
        QCOMPARE(errors.size(), size_t(1));

        SearchOptions options;
        options.top_k = 1;
        const Problem base = problem("gpt3-13b", "p5.48xlarge", 1, 64);
        const SweepResult s = sweepNodes(base, nodes, SearchSpace{}, options);
        QCOMPARE(s.points.size(), size_t(4));
        QCOMPARE(s.reference, 0);
        QCOMPARE(s.points[0].scaling_efficiency, 1.0);
        for (size_t i = 0; i < s.points.size(); ++i) {
            QCOMPARE(s.points[i].problem.cluster.nodes, nodes[i]);
            QVERIFY(s.points[i].result.best());
            QVERIFY(s.points[i].scaling_efficiency > 0 && std::isfinite(s.points[i].scaling_efficiency));
            // The point equals a search of that size on its own.
            Problem alone = base;
            alone.cluster.nodes = nodes[i];
            const SearchResult r = search(alone, SearchSpace{}, options);
            QVERIFY(r.best()->layout == s.points[i].result.best()->layout);
        }
        QVERIFY(!s.pareto_time_cost.empty());

        // A node type without a network figure cannot be swept past one node; the point says why.
        const SweepResult g = sweepNodes(problem("gpt3-1.3b", "gaudi2-8", 1, 64), {1, 2}, SearchSpace{}, options);
        QVERIFY(g.points[0].error.empty() && g.points[0].result.best());
        QVERIFY(QString::fromStdString(g.points[1].error).contains("inter_node"));
    }

    // ---- the plan document ----

    void planDocumentRoundTrip()
    {
        const Problem p = problem("gpt3-13b", "p5.48xlarge", 2, 32);
        const CostModel cm(p);
        SearchOptions options;
        options.top_k = 4;
        const SearchResult r = search(cm, SearchSpace{}, options);
        QVERIFY(r.best());
        const QJsonObject doc = planDocument(r);
        // The keys the issue names.
        QCOMPARE(doc.value("schema").toString(), QStringLiteral("shardscope.plan/2"));
        for (const char* key : {"problem", "best", "alternatives", "pareto", "search"})
            QVERIFY2(doc.contains(QLatin1String(key)), key);
        const QJsonObject best = doc.value("best").toObject();
        QVERIFY(best.value("layout").isObject());
        QCOMPARE(best.value("prediction").toObject().value("schema").toString(),
                 QStringLiteral("shardscope.prediction/1"));
        const QJsonObject stats = doc.value("search").toObject();
        for (const char* key : {"evaluated", "pruned", "infeasible_by_reason", "seconds"})
            QVERIFY2(stats.contains(QLatin1String(key)), key);
        QCOMPARE(stats.value("evaluated").toInteger(), r.stats.evaluated);
        QCOMPARE(doc.value("alternatives").toArray().size(), qsizetype(3));
        QCOMPARE(doc.value("pareto").toArray().size(), qsizetype(r.pareto_step_memory.size()));

        // Through text and back.
        const QByteArray text = QJsonDocument(doc).toJson();
        FieldErrors errors;
        const auto back = planDocumentFromJson(QJsonDocument::fromJson(text).object(), "plan.json", errors);
        QVERIFY2(back, joinErrors(errors).c_str());
        QVERIFY(back->problem == p);
        QVERIFY(back->best && *back->best == r.best()->layout);
        QCOMPARE(back->alternatives.size(), size_t(3));
        for (size_t i = 0; i < 3; ++i)
            QVERIFY(back->alternatives[i] == r.top[i + 1].layout);
        // Re-predicted from the document, the best plan is what the search said.
        QCOMPARE(CostModel(back->problem).evaluate(*back->best).step_time_s, r.best()->prediction.step_time_s);
    }

    void planDocumentErrors()
    {
        const Problem p = problem("gpt3-13b", "p5.48xlarge", 1, 16);
        const SearchResult r = search(p, SearchSpace{}, SearchOptions{});
        const QJsonObject good = planDocument(r);
        {
            QJsonObject bad = good;
            bad.insert("schema", "shardscope.model/1");
            FieldErrors errors;
            QVERIFY(!planDocumentFromJson(bad, "plan", errors));
            QVERIFY(QString::fromStdString(joinErrors(errors)).contains("plan.schema"));
        }
        {
            QJsonObject bad = good;
            QJsonObject best = bad.value("best").toObject();
            QJsonObject layout = best.value("layout").toObject();
            layout.insert("tp", 3);  // does not divide 40 heads or the 8 devices
            best.insert("layout", layout);
            bad.insert("best", best);
            FieldErrors errors;
            QVERIFY(!planDocumentFromJson(bad, "plan", errors));
            QVERIFY2(QString::fromStdString(joinErrors(errors)).contains("plan.best.layout.tp"), joinErrors(errors).c_str());
        }
        {
            QJsonObject empty = good;
            empty.insert("best", QJsonValue::Null);
            FieldErrors errors;
            const auto doc = planDocumentFromJson(empty, "plan", errors);
            QVERIFY(doc && !doc->best);
        }
    }

    // ---- the command line ----

    void cliPlan()
    {
        const QStringList problemArgs{"--model", "gpt3-13b", "--node-type", "p5.48xlarge", "--nodes", "2",
                                      "--global-batch", "32", "--seq", "2048"};
        const QString out = dir_->filePath(QStringLiteral("plan.json"));
        RunResult r = cli(QStringList{"plan"} + problemArgs + QStringList{"--top", "3", "--json", "--out", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject doc = json(r.out);
        QCOMPARE(doc.value("schema").toString(), QStringLiteral("shardscope.plan/2"));
        for (const char* key : {"request", "problem", "best", "alternatives", "pareto", "search"})
            QVERIFY2(doc.contains(QLatin1String(key)), key);
        QCOMPARE(doc.value("alternatives").toArray().size(), qsizetype(2));
        for (const char* key : {"evaluated", "pruned", "infeasible_by_reason", "seconds"})
            QVERIFY2(doc.value("search").toObject().contains(QLatin1String(key)), key);
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        FieldErrors errors;
        const auto loaded = planDocumentFromJson(QJsonDocument::fromJson(f.readAll()).object(), "plan.json", errors);
        QVERIFY2(loaded && loaded->best, joinErrors(errors).c_str());
        FieldErrors none;
        QVERIFY(*loaded->best == *layoutFromJson(doc.value("best").toObject().value("layout").toObject(), "", none));

        // The readable table and counts.
        r = cli(QStringList{"plan"} + problemArgs + QStringList{"--fix", "tp=4", "--max-mem", "0.9"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        for (const char* word : {"tokens/s", "MFU", "memory/device", "evaluated", "pruned", "Pareto front"})
            QVERIFY2(r.out.contains(word), word);
    }

    void cliPlanErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        const QStringList p13{"--model", "gpt3-13b", "--node-type", "p5.48xlarge", "--nodes", "1",
                              "--global-batch", "16", "--seq", "2048"};
        QTest::newRow("nothing feasible") << (QStringList{"plan", "--model", "gpt3-175b", "--node-type", "p5.48xlarge",
                                                          "--nodes", "1", "--global-batch", "16", "--seq", "2048"})
                                          << 1 << "no feasible layout";
        QTest::newRow("--fix unknown key") << (QStringList{"plan"} + p13 + QStringList{"--fix", "tensor=2"}) << 2
                                           << "--fix.tensor";
        QTest::newRow("--objective unknown") << (QStringList{"plan"} + p13 + QStringList{"--objective", "speed"}) << 2
                                             << "--objective";
        QTest::newRow("--objective cost without a price")
            << (QStringList{"plan", "--model", "gpt3-1.3b", "--node-type", "trn1n.32xlarge", "--nodes", "1",
                            "--global-batch", "32", "--seq", "2048", "--objective", "cost"})
            << 2 << "price";
        QTest::newRow("--max-mem 2") << (QStringList{"plan"} + p13 + QStringList{"--max-mem", "2"}) << 2 << "--max-mem";
        QTest::newRow("missing --model") << (QStringList{"plan", "--nodes", "1"}) << 2 << "--model";
        QTest::newRow("sweep --nodes abc") << (QStringList{"sweep"} + p13.mid(0, 4) +
                                               QStringList{"--nodes", "abc", "--global-batch", "16", "--seq", "2048"})
                                           << 2 << "--nodes";
        QTest::newRow("compare unknown node type")
            << (QStringList{"compare", "--model", "gpt3-1.3b", "--node-types", "p5.48xlarge,nonesuch", "--nodes", "1",
                            "--global-batch", "16", "--seq", "2048"})
            << 2 << "nonesuch";
        QTest::newRow("compare counts mismatch")
            << (QStringList{"compare", "--model", "gpt3-1.3b", "--node-types", "p5.48xlarge,p4d.24xlarge", "--nodes",
                            "1,2,4", "--global-batch", "16", "--seq", "2048"})
            << 2 << "--nodes";
    }
    void cliPlanErrors()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        const RunResult r = cli(args);
        QVERIFY2(r.exitCode == exitCode, (QByteArray::number(r.exitCode) + "\n" + r.out + r.err).constData());
        QVERIFY2(r.err.contains(message.toUtf8()), r.err.constData());
    }

    void cliSweep()
    {
        const RunResult r = cli({"sweep", "--model", "gpt3-13b", "--node-type", "p5.48xlarge", "--nodes", "1..4",
                                 "--global-batch", "64", "--seq", "2048", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject doc = json(r.out);
        QCOMPARE(doc.value("schema").toString(), QStringLiteral("shardscope.sweep/1"));
        const QJsonArray points = doc.value("points").toArray();
        QCOMPARE(points.size(), qsizetype(3));
        int expectedNodes = 1;
        for (const QJsonValue& v : points) {
            const QJsonObject p = v.toObject();
            QCOMPARE(p.value("nodes").toInt(), expectedNodes);
            expectedNodes *= 2;
            QVERIFY(p.value("best").toObject().contains("layout"));
            QVERIFY(p.value("scaling_efficiency").toDouble() > 0);
            QVERIFY(p.value("search").toObject().contains("evaluated"));
        }
        QCOMPARE(doc.value("reference_nodes").toInt(), 1);

        const RunResult table = cli({"sweep", "--model", "gpt3-13b", "--node-type", "p5.48xlarge", "--nodes", "1,2",
                                     "--global-batch", "64", "--seq", "2048"});
        QVERIFY2(table.exitCode == 0, table.err.constData());
        QVERIFY(table.out.contains("scaling"));
    }

    void cliCompare()
    {
        const RunResult r = cli({"compare", "--model", "gpt3-13b", "--node-types", "p5.48xlarge,p4d.24xlarge,gaudi2-8",
                                 "--nodes", "1", "--global-batch", "32", "--seq", "2048", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject doc = json(r.out);
        QCOMPARE(doc.value("schema").toString(), QStringLiteral("shardscope.compare/1"));
        const QJsonArray entries = doc.value("entries").toArray();
        QCOMPARE(entries.size(), qsizetype(3));
        QCOMPARE(entries[0].toObject().value("node_type").toString(), QStringLiteral("p5.48xlarge"));
        for (const QJsonValue& v : entries) {
            const QJsonObject e = v.toObject();
            QVERIFY(e.value("best").toObject().contains("prediction"));
            QVERIFY(e.value("time_to_train_s").toDouble() > 0);
            QVERIFY(e.contains("cost_to_train_usd"));
        }
        QVERIFY(entries[0].toObject().value("cost_to_train_usd").toDouble() > 0);  // p5 has a price
        QVERIFY(entries[2].toObject().value("cost_to_train_usd").isNull());       // gaudi2-8 has none

        const RunResult table = cli({"compare", "--model", "gpt3-13b", "--node-types", "p5.48xlarge,p4d.24xlarge",
                                     "--nodes", "1,2", "--global-batch", "32", "--seq", "2048"});
        QVERIFY2(table.exitCode == 0, table.err.constData());
        QVERIFY(table.out.contains("p4d.24xlarge"));
    }

    void cliHelpAndDemo()
    {
        const RunResult help = cli({"--help"});
        QCOMPARE(help.exitCode, 0);
        for (const char* word : {"plan ", "sweep ", "compare "})
            QVERIFY2(help.out.contains(word), word);
        // The search's options are in each search command's own help (issue 20).
        for (const char* command : {"plan", "sweep", "compare"}) {
            const RunResult own = cli({command, "--help"});
            QCOMPARE(own.exitCode, 0);
            for (const char* word : {"--objective", "--max-mem", "--fix", "--recompute"})
                QVERIFY2(own.out.contains(word), (std::string(command) + " --help lacks " + word).c_str());
        }
        const RunResult demo = cli({"demo"});
        QVERIFY2(demo.exitCode == 0, demo.err.constData());
        QVERIFY(demo.out.contains("174,604,259,328"));
        QVERIFY(demo.out.contains("global batch 1024"));
        QVERIFY(demo.out.contains("tokens/s"));
        QVERIFY(demo.out.contains("best layout dp="));
    }
};

QTEST_GUILESS_MAIN(TstPlannerSearch)
#include "tst_planner_search.moc"
