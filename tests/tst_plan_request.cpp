// The plan request travels whole: a plan made with a non-default cost-model profile and
// search constraints is saved, reopened by every consumer (predict, export, report and
// validate --plan), and each shows the same layout, step time and memory to the last digit;
// old plan files still open; the JSON forms of the request and its space round-trip.
#include "CliRunner.h"
#include "CostModel.h"
#include "CostModelParams.h"
#include "FrameworkExport.h"
#include "PlanJson.h"
#include "PlanRequest.h"
#include "Search.h"
#include "SpecJson.h"
#include "Store.h"
#include "Sweep.h"
#include "Units.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace shardscope;

namespace {

// A profile that prices every plan differently from the default.
CostModelParams testProfile()
{
    CostModelParams p = defaultCostModelParams();
    p.name = "request-test";
    p.dp_overlap = 0.2;
    p.matmul_half_dim = 2 * p.matmul_half_dim + 96;
    p.inter_node_efficiency *= 0.7;
    return p;
}

} // namespace

class TstPlanRequest : public QObject {
    Q_OBJECT
    std::unique_ptr<QTemporaryDir> dir_;
    std::unique_ptr<Store> store_;

    using RunResult = CliRun;
    RunResult cli(const QStringList& args) const
    {
        return runCli(QStringList{QStringLiteral("--db"), dir_->filePath(QStringLiteral("catalog.sqlite"))} + args,
                      dir_->path());
    }

    QJsonObject readJson(const QString& path) const
    {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object() : QJsonObject{};
    }

    PlanRequest request(const char* model, const char* node, int nodes, int batch, int topK) const
    {
        PlanRequest r;
        r.problem.model = store_->specs().model(model);
        r.problem.cluster.node = store_->specs().node(node);
        r.problem.cluster.nodes = nodes;
        r.problem.training.global_batch = batch;
        r.problem.training.seq_len = 4096;
        r.top_k = topK;
        return r;
    }

    Problem problem() const
    {
        Problem p;
        p.model = store_->specs().model("gpt3-13b");
        p.cluster.node = store_->specs().node("p5.48xlarge");
        p.cluster.nodes = 2;
        p.training.global_batch = 32;
        p.training.seq_len = 2048;
        p.training.tokens_to_train = 300e9;
        return p;
    }

    const QStringList problemArgs{"--model", "gpt3-13b", "--node-type", "p5.48xlarge", "--nodes", "2",
                                  "--global-batch", "32", "--seq", "2048"};
    const QStringList constraintArgs{"--fix", "cp=1,zero=1,schedule=1f1b", "--min", "pp=2", "--max", "tp=4", "--max-mem", "0.9",
                                     "--recompute", "selective,full", "--cost-model", "request-test"};

private slots:
    void initTestCase()
    {
        dir_ = std::make_unique<QTemporaryDir>();
        QVERIFY(dir_->isValid());
        store_ = std::make_unique<Store>(dir_->filePath(QStringLiteral("catalog.sqlite")));
        store_->runs().storeCostProfile(testProfile().name, testProfile());
    }
    void cleanupTestCase()
    {
        store_.reset();
        dir_.reset();
    }

    void searchSpaceTextIsTheInverseOfTheConstraints()
    {
        SearchSpace s;
        QVERIFY(applyFixed(s, "tp=8,cp=1,zero_group=0,sp=on,schedule=interleaved,offload=none").empty());
        QVERIFY(applyBounds(s, "pp=2,dp=4,mb=2", false, "min").empty());
        QVERIFY(applyBounds(s, "pp=16,v=4,zero=2", true, "max").empty());
        QVERIFY(applyRecomputeModes(s, "selective,full").empty());
        SearchSpace back;
        QVERIFY(applyFixed(back, fixedText(s)).empty());
        QVERIFY(applyBounds(back, boundsText(s, false), false, "min").empty());
        QVERIFY(applyBounds(back, boundsText(s, true), true, "max").empty());
        QVERIFY(applyRecomputeModes(back, recomputeModesText(s)).empty());
        back.max_memory_fraction = s.max_memory_fraction;
        back.min_micro_batches = s.min_micro_batches;
        QVERIFY(back == s);
        QCOMPARE(fixedText(SearchSpace{}), std::string());
        QCOMPARE(constraintsText(SearchSpace{}), std::string("none"));
        QCOMPARE(constraintsText(s), std::string("--fix tp=8,cp=1,zero_group=0,sp=on,schedule=interleaved,offload=none "
                                                 "--min dp=4,pp=2,mb=2 --max pp=16,zero=2,v=4 --recompute selective,full"));
    }

    // A fixed module list or activation offload brings its recomputation mode (Layout.cpp's rules:
    // modules need selective, offload none), so every candidate honours the fix; a recompute mode
    // fixed with them stays as given (the layout rule then names the conflict).
    void fixedModulesAndOffloadBringTheirRecompute()
    {
        SearchSpace s;
        QVERIFY(s.recomputes.size() > 1);
        QVERIFY(applyFixed(s, "tp=2,offload_activations=4").empty());
        QCOMPARE(s.recomputes, (std::vector<Recompute>{Recompute::None}));
        SearchSpace m;
        QVERIFY(applyFixed(m, "recompute_modules=layernorm+moe_act").empty());
        QCOMPARE(m.recomputes, (std::vector<Recompute>{Recompute::Selective}));
        SearchSpace both;
        QVERIFY(applyFixed(both, "recompute_modules=mlp,offload_activations=2").empty());
        QCOMPARE(both.recomputes, (std::vector<Recompute>{Recompute::None, Recompute::Selective}));
        SearchSpace given;
        QVERIFY(applyFixed(given, "recompute=full,offload_activations=2").empty());
        QCOMPARE(given.recomputes, (std::vector<Recompute>{Recompute::Full}));
    }

    // cp_comm (all-to-all or ring context parallelism) fixes like the other keys, in text and in JSON.
    void cpCommInTheSearchSpace()
    {
        SearchSpace s;
        QVERIFY(applyFixed(s, "cp=4,cp_comm=a2a").empty());
        QCOMPARE(s.cp_comm, std::optional<CpComm>(CpComm::A2A));
        QCOMPARE(constraintsText(s), std::string("--fix cp=4,cp_comm=a2a"));
        SearchSpace back;
        QVERIFY(applyFixed(back, fixedText(s)).empty());
        QVERIFY(back == s);
        FieldErrors errors;
        QVERIFY(searchSpaceFromJson(toJson(s), "space", errors) == s);
        QVERIFY(errors.empty());
        QVERIFY(!searchSpaceFromJson(toJson(SearchSpace{}), "space", errors).cp_comm);
        const FieldErrors bad = applyFixed(back, "cp_comm=ring");
        QVERIFY(!bad.empty() && bad.front().text().find("fix.cp_comm: unknown value \"ring\" (one of: p2p, a2a)") !=
                                    std::string::npos);
        QJsonObject json = toJson(SearchSpace{});
        json.insert("cp_comm", 3);
        searchSpaceFromJson(json, "space", errors);
        QVERIFY(!errors.empty() && errors.front().text().find("space.cp_comm") != std::string::npos);
    }

    // moe_dispatcher fixes like cp_comm, in text and in JSON; bad values named.
    void moeDispatcherInTheSearchSpace()
    {
        SearchSpace s;
        QVERIFY(applyFixed(s, "moe_dispatcher=hybridep").empty());
        QCOMPARE(s.moe_dispatcher, std::optional<MoeDispatcher>(MoeDispatcher::HybridEp));
        QCOMPARE(constraintsText(s), std::string("--fix moe_dispatcher=hybridep"));
        SearchSpace back;
        QVERIFY(applyFixed(back, fixedText(s)).empty() && back == s);
        FieldErrors errors;
        QVERIFY(searchSpaceFromJson(toJson(s), "space", errors) == s && errors.empty());
        QVERIFY(!searchSpaceFromJson(toJson(SearchSpace{}), "space", errors).moe_dispatcher);
        const FieldErrors bad = applyFixed(back, "moe_dispatcher=ncclep");
        QVERIFY(!bad.empty() && bad.front().text().find("fix.moe_dispatcher: unknown value \"ncclep\"") != std::string::npos);
        QJsonObject json = toJson(SearchSpace{});
        json.insert("moe_dispatcher", "flex");
        searchSpaceFromJson(json, "space", errors);
        QVERIFY(!errors.empty() && errors.front().text().find("space.moe_dispatcher") != std::string::npos);
    }

    // Issue 16: the expert grid's keys fix and bound like the others, in text and in JSON.
    void expertKeysInTheSearchSpace()
    {
        SearchSpace s;
        QVERIFY(applyFixed(s, "ep=8,ep_comm_overlap=on").empty());
        QVERIFY(applyBounds(s, "etp=2", true, "max").empty());
        QCOMPARE(s.ep.lo, 8);
        QCOMPARE(s.ep.hi, 8);
        QCOMPARE(s.etp.hi, 2);
        QVERIFY(s.ep_comm_overlap);
        QCOMPARE(constraintsText(s), std::string("--fix ep=8,ep_comm_overlap=on --max etp=2"));
        SearchSpace back;
        QVERIFY(applyFixed(back, fixedText(s)).empty());
        QVERIFY(applyBounds(back, boundsText(s, true), true, "max").empty());
        QVERIFY(back == s);
        FieldErrors errors;
        QVERIFY(searchSpaceFromJson(toJson(s), "space", errors) == s);
        QVERIFY(errors.empty());
        FieldErrors bad = applyFixed(back, "ep=0");
        QVERIFY(!bad.empty() && bad.front().text().find("fix.ep") != std::string::npos);
    }

    // Fixed recomputed modules and activation offload: text and JSON round trips, bad values named.
    void modulesAndOffloadInTheSearchSpace()
    {
        SearchSpace s;
        QVERIFY(applyFixed(s, "recompute_modules=layernorm+mla_up_proj,offload_activations=2").empty());
        QCOMPARE(*s.recompute_modules, unsigned(kRecomputeLayernorm | kRecomputeMlaUpProj));
        QCOMPARE(*s.offload_activations, 2);
        // (Each brings its recompute mode: fixedModulesAndOffloadBringTheirRecompute.)
        QCOMPARE(constraintsText(s), std::string("--fix recompute_modules=layernorm+mla_up_proj,offload_activations=2 "
                                                 "--recompute none,selective"));
        SearchSpace back;
        QVERIFY(applyFixed(back, fixedText(s)).empty());
        QVERIFY(back == s);
        FieldErrors errors;
        QVERIFY(searchSpaceFromJson(toJson(s), "space", errors) == s);
        QVERIFY(errors.empty());
        QCOMPARE(toJson(s).value("recompute_modules").toString(), QStringLiteral("layernorm+mla_up_proj"));
        QVERIFY(toJson(SearchSpace{}).value("recompute_modules").isNull());
        const FieldErrors unknown = applyFixed(back, "recompute_modules=attention");
        QVERIFY(!unknown.empty() && unknown.front().text().find("fix.recompute_modules: unknown module \"attention\"") == 0);
        QVERIFY(!applyFixed(back, "offload_activations=-1").empty());
        QJsonObject json = toJson(s);
        json.insert("recompute_modules", QJsonArray{"moe"});
        json.insert("offload_activations", 1.5);
        errors.clear();
        searchSpaceFromJson(json, "space", errors);
        const QString all = QString::fromStdString(joinErrors(errors));
        QVERIFY2(all.contains("space.recompute_modules: must be module names") &&
                     all.contains("space.offload_activations: must be a layer count"),
                 qPrintable(all));
    }

    void requestJsonRoundTrips()
    {
        PlanRequest r;
        r.problem = problem();
        r.cost_model = testProfile();
        QVERIFY(applyFixed(r.space, "cp=1,zero=1,sp=off").empty());
        QVERIFY(applyBounds(r.space, "tp=4", true, "max").empty());
        r.space.max_memory_fraction = 0.85;
        r.space.min_micro_batches = 4;
        r.objective = Objective::TimeToTrain;
        r.top_k = 7;
        const QByteArray text = QJsonDocument(toJson(r)).toJson();
        FieldErrors errors;
        const auto back = planRequestFromJson(QJsonDocument::fromJson(text).object(), "request", errors);
        QVERIFY2(back, joinErrors(errors).c_str());
        QVERIFY(back->problem == r.problem);
        QVERIFY(back->cost_model == r.cost_model);  // every term, to the last bit
        QVERIFY(back->space == r.space);
        QVERIFY(*back == r);

        // Bad spaces are refused with the field named.
        QJsonObject json = toJson(r);
        QJsonObject space = json.value("space").toObject();
        QJsonObject bounds = space.value("bounds").toObject();
        bounds.insert("tp", QJsonArray{4, 2});
        bounds.insert("pp", QJsonArray{1, 1e300});  // past int: refused, never cast
        space.insert("zero_group", -1e300);
        space.insert("bounds", bounds);
        space.insert("recompute", QJsonArray{"sometimes"});
        space.insert("first_stage_layers", 1e300);  // past int: refused, never cast
        space.insert("recompute_layers", 2.5);
        json.insert("space", space);
        errors.clear();
        QVERIFY(!planRequestFromJson(json, "request", errors));
        const QString all = QString::fromStdString(joinErrors(errors));
        QVERIFY2(all.contains("request.space.bounds.tp") && all.contains("request.space.recompute[0]"), qPrintable(all));
        QVERIFY2(all.contains("first_stage_layers: must be a layer count") && all.contains("recompute_layers: must be") &&
                     all.contains("request.space.bounds.pp") && all.contains("zero_group: must be"),
                 qPrintable(all));
    }

    void savedPlansArePricedAsSearched()
    {
        PlanRequest r;
        r.problem = problem();
        r.cost_model = testProfile();
        QVERIFY(applyFixed(r.space, "cp=1").empty());
        r.top_k = 5;
        const SearchResult searched = search(r);
        QVERIFY(searched.best());
        QVERIFY(searched.request == r);
        const QByteArray text = QJsonDocument(planDocument(searched)).toJson();
        FieldErrors errors;
        const auto doc = planDocumentFromJson(QJsonDocument::fromJson(text).object(), "plan", errors);
        QVERIFY2(doc, joinErrors(errors).c_str());
        QVERIFY(doc->notes.empty());
        QVERIFY(doc->request == r);
        const SearchResult saved = savedResult(*doc);
        QCOMPARE(saved.top.size(), searched.top.size());
        for (size_t i = 0; i < saved.top.size(); ++i) {
            QVERIFY(saved.top[i].layout == searched.top[i].layout);
            QVERIFY(saved.top[i].variants == searched.top[i].variants);  // folded layouts come back
            QCOMPARE(saved.top[i].prediction.step_time_s, searched.top[i].prediction.step_time_s);
            QCOMPARE(saved.top[i].prediction.memory_bytes.total(), searched.top[i].prediction.memory_bytes.total());
        }
        QCOMPARE(saved.pareto_step_memory.size(), searched.pareto_step_memory.size());
        QCOMPARE(saved.stats.evaluated, searched.stats.evaluated);
        // The default terms would say otherwise: the file's terms are the ones used.
        QVERIFY(CostModel(r.problem).evaluate(searched.best()->layout).step_time_s !=
                saved.best()->prediction.step_time_s);
    }

    // Layouts the cost model cannot tell apart (GPipe and 1F1B at pp = 1 with one micro-batch
    // here; dp/cp permutations cost differently since the ring's steps are priced) are one row
    // with variants, so the top plans are different choices.
    void sameCostLayoutsAreOneRow()
    {
        const PlanRequest r = request("llama-2-7b", "trn1.32xlarge", 4, 64, 8);
        const SearchResult result = search(r);
        QCOMPARE(result.top.size(), size_t(8));
        size_t folded = 0;
        for (size_t i = 0; i < result.top.size(); ++i) {
            const Plan& plan = result.top[i];
            folded += plan.variants.size();
            if (i > 0)
                QVERIFY(!samePlanCost(r.objective, result.top[i - 1], plan));
            for (const Layout& v : plan.variants) {
                QVERIFY(!(v == plan.layout));
                const Plan again{v, predictLayout(r, v), {}, {}};
                QVERIFY(samePlanCost(r.objective, again, plan));
            }
        }
        QVERIFY2(folded > 0, "this problem has layouts of the same cost");
        const QJsonObject best = planDocument(result).value("best").toObject();
        QCOMPARE(best.value("variants").toArray().size(), qsizetype(result.top.front().variants.size()));
    }

    // A model feature a framework lacks keeps every layout out, and the reason says which
    // (torchtitan's llama3 model has no QK-norm: Llama 3 8B with qk_norm, as Qwen3 has it).
    void searchForAFrameworkNamesTheModelFeature()
    {
        PlanRequest r = request("llama-3-8b", "p5.48xlarge", 1, 64, 5);
        r.problem.model.qk_norm = true;
        r.framework = ExportFormat::Torchtitan;
        const SearchResult result = search(r);
        QVERIFY(!result.best());
        // Every refused layout is counted under QK-norm, and under its other refusals as well.
        const auto& reasons = result.stats.infeasible_by_reason;
        const auto qkNorm = reasons.find("not runnable by torchtitan (QK-norm)");
        QVERIFY(qkNorm != reasons.end() && qkNorm->second > 0);
        int others = 0;
        for (const auto& [reason, n] : reasons)
            if (reason.rfind("not runnable by torchtitan (", 0) == 0 && reason != qkNorm->first) {
                QVERIFY2(n <= qkNorm->second, reason.c_str());
                ++others;
            }
        QVERIFY(others > 0);  // the model is no llama3 flavor either, and some layouts ask for ZeRO-1
    }

    // --framework: the search keeps only layouts that framework runs, so the top plan exports;
    // exactly the best runnable layouts (an exhaustive filter agrees), the fronts too.
    void searchForAFramework()
    {
        // (Llama 2 13B: its free best uses sp with tp; Llama 2 7B's, cp without tp, DeepSpeed runs as Ulysses.)
        PlanRequest r = request("llama-2-13b", "p5.48xlarge", 2, 64, 5);
        const SearchResult free = search(r);
        QVERIFY(free.best());
        QVERIFY2(!frameworkRuns(ExportFormat::DeepSpeed, r.problem, free.best()->layout),
                 "the unconstrained best should need a feature DeepSpeed lacks (sp, cp with AutoTP, ...)");
        r.framework = ExportFormat::DeepSpeed;
        const SearchResult ds = search(r);
        QVERIFY(ds.best());
        QVERIFY(ds.request.framework == ExportFormat::DeepSpeed);
        for (const Plan& p : ds.top)
            QVERIFY(frameworkRuns(ExportFormat::DeepSpeed, r.problem, p.layout));
        for (const auto& point : ds.pareto_step_memory.points())
            QVERIFY(frameworkRuns(ExportFormat::DeepSpeed, r.problem, point.item.layout));
        // The same as the free search's ranking filtered by the exporter (a deep enough list).
        PlanRequest wide = r;
        wide.framework.reset();
        wide.top_k = 1000;
        const SearchResult all = search(wide);
        std::vector<Layout> runnable;
        for (const Plan& p : all.top) {
            if (frameworkRuns(ExportFormat::DeepSpeed, r.problem, p.layout))
                runnable.push_back(p.layout);
            for (const Layout& v : p.variants)
                if (frameworkRuns(ExportFormat::DeepSpeed, r.problem, v))
                    runnable.push_back(v);
        }
        QVERIFY(!runnable.empty());
        // (The framework's search prices the element-wise work with DeepSpeed's eager kernels,
        // ElementwisePasses.h: the runnable layouts compared at that pricing.)
        const double best = predictLayout(r, ds.best()->layout).tokens_per_s;
        for (const Layout& l : runnable)
            QVERIFY2(predictLayout(r, l).tokens_per_s <= best * (1 + 1e-12), toString(l).c_str());
        QCOMPARE(ds.best()->prediction.tokens_per_s, best);
        // Each refused layout is counted under the features DeepSpeed refused, by name, and those
        // are the refusals of its exporter for the free best.
        int named = 0;
        for (const auto& [reason, n] : ds.stats.infeasible_by_reason) {
            QVERIFY2(reason != "not runnable by deepspeed", "the reason names no feature");
            if (reason.rfind("not runnable by deepspeed (", 0) == 0 && reason.back() == ')' && n > 0)
                ++named;
        }
        QVERIFY(named > 0);
        const ExportResult refusedBest = exportSettings(ExportFormat::DeepSpeed, r.problem, free.best()->layout);
        QVERIFY(!refusedBest.refused.empty());
        bool bestReasonFound = false;
        for (const auto& [reason, n] : ds.stats.infeasible_by_reason)
            bestReasonFound |= reason.find(refusedBest.refused.front().feature) != std::string::npos;
        QVERIFY2(bestReasonFound, refusedBest.refused.front().feature.c_str());
        // The request and each plan's frameworks in the document.
        const QJsonObject doc = planDocument(ds);
        QCOMPARE(doc.value("request").toObject().value("framework").toString(), QStringLiteral("deepspeed"));
        QVERIFY(doc.value("best").toObject().value("frameworks").toArray().contains(QStringLiteral("deepspeed")));
        FieldErrors errors;
        const auto back = planDocumentFromJson(doc, "plan", errors);
        QVERIFY2(back, joinErrors(errors).c_str());
        QVERIFY(back->request.framework == ExportFormat::DeepSpeed);
        const RunResult bad = cli(QStringList{"plan"} + problemArgs + QStringList{"--framework", "jax"});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains("--framework") && bad.err.contains("megatron"), bad.err.constData());
    }

    void planVersion1StillOpens()
    {
        // What ShardScope wrote before plan/2: a problem, an objective, a profile's name only.
        const Problem p = problem();
        const SearchResult r = search(p, SearchSpace{}, SearchOptions{});
        QVERIFY(r.best());
        QJsonObject old{{"schema", "shardscope.plan/1"},
                        {"problem", toJson(p)},
                        {"objective", "throughput"},
                        {"cost_model", "engine-20261129"},
                        {"best", QJsonObject{{"layout", toJson(r.best()->layout)}}},
                        {"alternatives", QJsonArray{}}};
        FieldErrors errors;
        const auto doc = planDocumentFromJson(old, "old.json", errors);
        QVERIFY2(doc, joinErrors(errors).c_str());
        QCOMPARE(doc->version, 1);
        QVERIFY(doc->request.cost_model == defaultCostModelParams());
        QVERIFY(doc->request.space == SearchSpace{});
        QCOMPARE(doc->notes.size(), size_t(1));
        const QString note = QString::fromStdString(doc->notes.front());
        QVERIFY2(note.contains("default terms") && note.contains("without constraints") &&
                     note.contains("engine-20261129"),
                 qPrintable(note));
        QCOMPARE(savedResult(*doc).best()->prediction.step_time_s, r.best()->prediction.step_time_s);
    }

    void everyConsumerShowsTheSavedPlan()
    {
        const QString planPath = dir_->filePath(QStringLiteral("plan.json"));
        RunResult run = cli(QStringList{"plan"} + problemArgs + constraintArgs + QStringList{"--out", planPath});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        const QJsonObject plan = readJson(planPath);
        QCOMPARE(plan.value("schema").toString(), QStringLiteral("shardscope.plan/2"));
        const QJsonObject request = plan.value("request").toObject();
        QCOMPARE(request.value("cost_model").toObject().value("name").toString(), QStringLiteral("request-test"));
        QCOMPARE(request.value("cost_model").toObject().value("dp_overlap").toDouble(), testProfile().dp_overlap);
        QCOMPARE(request.value("space").toObject().value("constraints").toString(),
                 QStringLiteral("--fix cp=1,zero=1,schedule=1f1b --min pp=2 --max tp=4 --recompute selective,full --max-mem 0.9"));
        const QJsonObject best = plan.value("best").toObject();
        const QString layoutText = best.value("layout_text").toString();
        const double step = best.value("prediction").toObject().value("step_time_s").toDouble();
        const double memory =
            best.value("prediction").toObject().value("memory_bytes").toObject().value("total").toDouble();
        FieldErrors none;
        const Layout layout = *layoutFromJson(best.value("layout").toObject(), "", none);
        QVERIFY(layout.cp == 1 && layout.zero_stage == 1 && layout.pp >= 2 && layout.tp <= 4);
        QVERIFY(layout.recompute != Recompute::None);
        // The unconstrained search with the default terms picks another layout, or prices it otherwise.
        const SearchResult free = search(problem(), SearchSpace{}, SearchOptions{});
        QVERIFY(free.best());
        QVERIFY(!(free.best()->layout == layout) || free.best()->prediction.step_time_s != step);

        // predict --plan: the same figures, to the last digit, with the file's terms.
        run = cli({"predict", "--plan", planPath, "--json"});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        const QJsonObject predicted = QJsonDocument::fromJson(run.out).object();
        QCOMPARE(predicted.value("cost_model").toString(), QStringLiteral("request-test"));
        QCOMPARE(predicted.value("step_time_s").toDouble(), step);
        QCOMPARE(predicted.value("memory_bytes").toObject().value("total").toDouble(), memory);
        // Other terms for a plan file are refused by name.
        run = cli({"predict", "--plan", planPath, "--cost-model", "default"});
        QCOMPARE(run.exitCode, 2);
        QVERIFY2(run.err.contains("carries its own cost-model terms"), run.err.constData());

        // export --plan: the saved layout.
        run = cli({"export", "--plan", planPath, "--format", "megatron"});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        QVERIFY2(run.out.contains(("# layout " + toString(layout)).c_str()), run.out.constData());

        // report --plan: the saved plan, its terms and constraints.
        const QString reportPath = dir_->filePath(QStringLiteral("report.html"));
        run = cli({"report", "--plan", planPath, "--out", reportPath});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        QFile f(reportPath);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString html = QString::fromUtf8(f.readAll());
        QVERIFY(html.contains(layoutText));
        QVERIFY(html.contains("request-test"));
        QVERIFY(html.contains("--fix cp=1,zero=1,schedule=1f1b --min pp=2 --max tp=4"));
        QVERIFY(html.contains(QString::fromStdString(formatDuration(step))));
        QVERIFY(html.contains(QStringLiteral("Rank 1 of")));

        // validate --plan: the full-size plan's memory pressure priced by the file's terms.
        run = cli({"validate", "--plan", planPath, "--steps", "2", "--json"});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        const QJsonObject validation = QJsonDocument::fromJson(run.out).object();
        const QJsonObject full = validation.value("full_size").toObject();
        QCOMPARE(full.value("cost_model").toString(), QStringLiteral("request-test"));
        QCOMPARE(full.value("layout").toString(), layoutText);
        QCOMPARE(full.value("prediction").toObject().value("step_time_s").toDouble(), step);
        QCOMPARE(full.value("prediction").toObject().value("memory_bytes").toObject().value("total").toDouble(), memory);

        // A sweep and a comparison write their request too.
        run = cli(QStringList{"sweep", "--model", "gpt3-13b", "--node-type", "p5.48xlarge", "--nodes", "1,2",
                              "--global-batch", "32", "--seq", "2048", "--cost-model", "request-test", "--json"});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        const QJsonObject sweep = QJsonDocument::fromJson(run.out).object();
        QCOMPARE(sweep.value("request").toObject().value("cost_model").toObject().value("name").toString(),
                 QStringLiteral("request-test"));
    }
};

QTEST_MAIN(TstPlanRequest)
#include "tst_plan_request.moc"
