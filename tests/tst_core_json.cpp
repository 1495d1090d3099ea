// JSON round trips of every spec and a table of malformed documents, each of
// which must be refused with its field path.
#include "BuiltinSpecs.h"
#include "CatalogDocument.h"
#include "JsonReader.h"
#include "MalformedDocuments.h"
#include "SpecJson.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTest>

using namespace shardscope;

namespace {

ChipSpec h100()
{
    ChipSpec c;
    c.name = "h100-sxm";
    c.vendor = "NVIDIA";
    c.peak_flops_bf16 = 989.4e12;
    c.peak_flops_fp8 = 1978.9e12;
    c.peak_flops_fp32 = 66.9e12;
    c.hbm_bytes = 80e9;
    c.hbm_bytes_per_second = 3350e9;
    c.low_precision_recipes = {"fp8", "fp8-delayed", "fp8-blockwise", "fp8-rowwise"};  // (round-tripped too)
    c.sources["hbm_bytes"] = "[V3]";
    return c;
}

NodeType p5()
{
    NodeType n;
    n.name = "p5.48xlarge";
    n.chip = h100();
    n.chips_per_node = 8;
    n.intra_topology = Topology::Switch;
    n.intra_link_bytes_per_second = 450e9;
    n.inter_node_bytes_per_second = 400e9;
    n.price_per_node_hour_usd = 39.33;
    n.price_kind = "capacity-block";
    return n;
}

ModelSpec t5()
{
    ModelSpec m;
    m.name = "t5-11b";
    m.family = ModelFamily::EncoderDecoder;
    m.layers = 24;
    m.decoder_layers = 24;
    m.hidden = 1024;
    m.heads = 128;
    m.kv_heads = 128;
    m.head_dim = 128;
    m.ffn_hidden = 65536;
    m.mlp = MlpKind::Relu;
    m.vocab = 32128;
    m.max_seq = 512;
    m.relative_buckets = 32;
    m.positions = PositionKind::Relative;
    m.norm = NormKind::RmsNorm;
    m.bias = false;
    return m;
}

ModelSpec mixtral()
{
    ModelSpec m;
    m.name = "mixtral";
    m.layers = 32;
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 8;
    m.head_dim = 128;
    m.ffn_hidden = 14336;
    m.mlp = MlpKind::SwiGlu;
    m.vocab = 32000;
    m.max_seq = 32768;
    m.positions = PositionKind::Rotary;
    m.norm = NormKind::RmsNorm;
    m.bias = false;
    m.tied_embeddings = false;
    m.moe = {8, 2};
    return m;
}

// Through text, as a file would go.
QJsonObject throughText(const QJsonObject& o)
{
    FieldErrors errors;
    const QJsonObject back = parseJsonObject(QJsonDocument(o).toJson(), "test", errors);
    if (!errors.empty())
        qFatal("%s", joinErrors(errors).c_str());
    return back;
}

ChipLookup lookup()
{
    return [](const std::string& name) -> std::optional<ChipSpec> {
        if (name == "h100-sxm")
            return h100();
        return std::nullopt;
    };
}

} // namespace

class TstCoreJson : public QObject {
    Q_OBJECT
private slots:
    // RoPE's base travels with rotary models (Llama 3: 500000, from its config.json) and is
    // refused on other position kinds.
    void ropeBase()
    {
        const ModelSpec llama3 = BuiltinSpecs::instance().model("llama-3-8b");
        QCOMPARE(llama3.rope_base, 500000.0);
        QCOMPARE(BuiltinSpecs::instance().model("llama-2-7b").rope_base, 10000.0);
        QCOMPARE(BuiltinSpecs::instance().model("mixtral-8x7b").rope_base, 1e6);
        FieldErrors errors;
        const auto back = modelFromJson(toJson(llama3), "model", errors);
        QVERIFY(back && errors.empty());
        QCOMPARE(back->rope_base, 500000.0);
        QJsonObject gpt2 = toJson(BuiltinSpecs::instance().model("gpt2-small"));
        QVERIFY(!gpt2.contains("rope_base"));  // learned positions have none
        gpt2.insert("rope_base", 10000);
        errors.clear();
        QVERIFY(!modelFromJson(gpt2, "model", errors));
        QVERIFY2(QString::fromStdString(joinErrors(errors)).contains("model.rope_base"), joinErrors(errors).c_str());
    }

    void modelRoundTrip_data()
    {
        QTest::addColumn<int>("which");
        QTest::newRow("encoder-decoder, head_dim != hidden/heads") << 0;
        QTest::newRow("mixture of experts, GQA") << 1;
    }
    void modelRoundTrip()
    {
        QFETCH(int, which);
        const ModelSpec m = which == 0 ? t5() : mixtral();
        const QJsonObject json = throughText(toJson(m));
        QCOMPARE(json.value("schema").toString(), QString("shardscope.model/1"));
        QCOMPARE(json.value("parameters").toDouble(), double(parameterCount(m)));
        QCOMPARE(json.value("flops_per_token").toDouble(), double(forwardFlopsPerToken(m, m.max_seq)));
        FieldErrors errors;
        const auto back = modelFromJson(json, "model", errors);
        QVERIFY2(back.has_value(), joinErrors(errors).c_str());
        QVERIFY(*back == m);
    }

    void hardwareRoundTrip()
    {
        FieldErrors errors;
        const auto chip = chipFromJson(throughText(toJson(h100())), "chip", errors);
        QVERIFY2(chip.has_value(), joinErrors(errors).c_str());
        QVERIFY(*chip == h100());
        const auto node = nodeFromJson(throughText(toJson(p5())), "node", errors, lookup());
        QVERIFY2(node.has_value(), joinErrors(errors).c_str());
        QVERIFY(*node == p5());
        QCOMPARE(toJson(p5()).value("devices_per_node").toInt(), 8);
    }

    void unitsInDocuments()
    {
        // The catalog's source-unit form reads to the same SI values as the plain form.
        const QByteArray text = R"({"schema":"shardscope.chip/1","name":"trainium1","devices_per_chip":2,
            "peak_flops":{"bf16":"190 TFLOP/s","fp32":"47.5 TFLOP/s"},
            "hbm_bytes":"32 GiB","hbm_bytes_per_second":"820 GiB/s"})";
        FieldErrors errors;
        const auto c = chipFromJson(parseJsonObject(text, "chip", errors), "chip", errors);
        QVERIFY2(c.has_value(), joinErrors(errors).c_str());
        QCOMPARE(c->peak_flops_bf16, 190e12);
        QCOMPARE(c->hbm_bytes, 32.0 * 1024 * 1024 * 1024);
        QCOMPARE(c->hbmBytesPerDevice(), 16.0 * 1024 * 1024 * 1024);
    }

    // HBM capacities are the usable bytes the driver reports where that is published (CUDA/HIP
    // deviceQuery), else the product's GiB of stacks (NVIDIA's NVML mock): "80GB" is not 80e9.
    void hbmCapacitiesAreWhatTheDriverReports_data()
    {
        QTest::addColumn<QString>("chip");
        QTest::addColumn<double>("bytes");
        QTest::newRow("h100 deviceQuery") << "h100-sxm" << 85045477376.0;
        QTest::newRow("a100-80 deviceQuery") << "a100-80gb" << 85100068864.0;
        QTest::newRow("mi300x hip") << "mi300x" << 196592.0 * 1024 * 1024;
        QTest::newRow("a100-40 stacks") << "a100-40gb" << 40960.0 * 1024 * 1024;
        QTest::newRow("h200 stacks") << "h200-sxm" << 144384.0 * 1024 * 1024;
        QTest::newRow("b200 stacks") << "b200-sxm" << 184320.0 * 1024 * 1024;
        QTest::newRow("trainium1 (AWS: GiB)") << "trainium1" << 32.0 * 1024 * 1024 * 1024;
    }
    void hbmCapacitiesAreWhatTheDriverReports()
    {
        QFETCH(QString, chip);
        QFETCH(double, bytes);
        const ChipSpec c = BuiltinSpecs::instance().chip(chip.toStdString());
        QCOMPARE(c.hbm_bytes, bytes);
        QVERIFY2(c.sources.count("hbm_bytes") && !c.sources.at("hbm_bytes").empty(), "every capacity names its source");
    }

    void layoutTrainingProblemRoundTrip()
    {
        Layout l;
        l.dp = 4;
        l.tp = 8;
        l.pp = 4;
        l.cp = 2;
        l.sequence_parallel = true;
        l.zero_stage = 1;
        l.zero_group = 2;
        l.micro_batch = 2;
        l.schedule = PipelineSchedule::Interleaved;
        l.virtual_stages = 3;
        l.recompute = Recompute::Full;
        l.offload = Offload::Optimizer;
        FieldErrors errors;
        const auto layout = layoutFromJson(throughText(toJson(l)), "layout", errors);
        QVERIFY2(layout && *layout == l, joinErrors(errors).c_str());

        Problem p;
        p.model = mixtral();
        p.cluster.node = p5();
        p.cluster.nodes = 16;
        p.training.global_batch = 512;
        p.training.seq_len = 4096;
        p.training.precision = Precision::FP8Tensorwise;
        p.training.tokens_to_train = 1e12;
        p.training.flash_attention = true;
        p.training.dropout = false;
        const auto problem = problemFromJson(throughText(toJson(p)), "problem", errors);
        QVERIFY2(problem.has_value(), joinErrors(errors).c_str());
        QVERIFY(*problem == p);
        // Documents written before "dropout" existed read as with dropout (the published setting).
        QJsonObject older = toJson(p.training);
        older.remove("dropout");
        const auto training = trainingFromJson(older, "training", errors);
        QVERIFY2(training && training->dropout, joinErrors(errors).c_str());
    }

    // main_grads: written only when set, read back; unknown values and settings a precision cannot
    // take named.
    void mainGradsRoundTripAndRefusals()
    {
        FieldErrors errors;
        TrainingSpec t;
        t.global_batch = 64;
        t.seq_len = 2048;
        QVERIFY(!toJson(t).contains("main_grads"));  // the default, fp32 for bf16
        QCOMPARE(gradientType(t), DataType::FP32);
        t.main_grads = MainGrads::BF16;
        const QJsonObject json = toJson(t);
        QCOMPARE(json.value("main_grads").toString(), QString("bf16"));
        const auto back = trainingFromJson(throughText(json), "training", errors);
        QVERIFY2(back && *back == t, joinErrors(errors).c_str());
        QCOMPARE(gradientType(*back), DataType::BF16);
        QJsonObject bad = json;
        bad.insert("main_grads", "fp8");
        QVERIFY(!trainingFromJson(bad, "training", errors));
        QVERIFY2(joinErrors(errors).find("training.main_grads: unknown value \"fp8\"") != std::string::npos,
                 joinErrors(errors).c_str());
        // bf16 gradients where the precision fixes them: fp32 training, fp16 (fp16 gradients), and
        // bf16-autocast (fp32 accumulation); fp32 with fp32 precision is the same run and accepted.
        for (const Precision p : {Precision::FP32, Precision::FP16Mixed, Precision::BF16Autocast}) {
            t.precision = p;
            const FieldErrors e = validate(t);
            QVERIFY2(!e.empty() && e.front().text().find("training.main_grads: bf16 gradients with") == 0,
                     toString(p));
        }
        t.main_grads = MainGrads::FP32;
        t.precision = Precision::FP16Mixed;
        QVERIFY(!validate(t).empty());
        for (const Precision p : {Precision::FP32, Precision::BF16Autocast, Precision::BF16Mixed, Precision::MXFP8}) {
            t.precision = p;
            QVERIFY2(validate(t).empty(), toString(p));
        }
    }

    // cp_comm=a2a: written in text and JSON only when set, read back, and refused where it cannot apply.
    void allToAllContextParallelLayout()
    {
        FieldErrors errors;
        Layout l = parseLayout("dp=2,cp=4,cp_comm=a2a", errors);
        QVERIFY(errors.empty());
        QCOMPARE(l.cp_comm, CpComm::A2A);
        QVERIFY(toString(l).find(",cp_comm=a2a") != std::string::npos);
        const auto back = layoutFromJson(toJson(l), "layout", errors);
        QVERIFY(back && *back == l && errors.empty());
        QCOMPARE(toJson(l).value("cp_comm").toString(), QStringLiteral("a2a"));
        l.cp_comm = CpComm::P2P;
        QVERIFY(toString(l).find("cp_comm") == std::string::npos && !toJson(l).contains("cp_comm"));
        parseLayout("cp=2,cp_comm=ulysses", errors);
        QVERIFY(!errors.empty() && errors.front().text().find("layout.cp_comm: unknown value \"ulysses\" (one of: p2p, a2a)") !=
                                       std::string::npos);
        const FieldErrors one = validate(parseLayout("dp=2,cp_comm=a2a", errors));
        QVERIFY(!one.empty() && one.front().text().find("cp_comm=a2a) needs cp > 1") != std::string::npos);
    }

    // pipeline_layout (Megatron-LM's --pipeline-model-parallel-layout): written in text and JSON only
    // when set, without its cosmetic commas, read back equal (the same interned layout); v and the
    // interleaved schedule follow from its chunks when not given (text and JSON alike); a malformed
    // string is refused naming the key, with the reason.
    void pipelineLayoutRoundTrip()
    {
        FieldErrors errors;
        const Layout l = parseLayout("dp=2,pp=4,pipeline_layout=Et*3,t|(t*4|)*6t*3L", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QVERIFY(l.layerLayout());
        QCOMPARE(l.virtual_stages, 2);
        QCOMPARE(l.schedule, PipelineSchedule::Interleaved);
        QVERIFY(toString(l).ends_with(",pipeline_layout=Et*3t|(t*4|)*6t*3L"));
        const Layout again = parseLayout(toString(l), errors);
        QVERIFY(errors.empty() && again == l);
        const QJsonObject json = toJson(l);
        QCOMPARE(json.value("pipeline_layout").toString(), QString("Et*3t|(t*4|)*6t*3L"));
        const auto back = layoutFromJson(throughText(json), "layout", errors);
        QVERIFY2(back && *back == l && errors.empty(), joinErrors(errors).c_str());
        QJsonObject bare = json;  // without v and schedule: both from the layout
        bare.remove("v");
        bare.remove("schedule");
        const auto inferred = layoutFromJson(bare, "layout", errors);
        QVERIFY2(inferred && *inferred == l, joinErrors(errors).c_str());
        const Layout plain = parseLayout("dp=8", errors);
        QVERIFY(toString(plain).find("pipeline_layout") == std::string::npos && !toJson(plain).contains("pipeline_layout"));
        parseLayout("dp=8,pipeline_layout=Et*3|tq", errors);
        QVERIFY2(!errors.empty() && errors.front().path == "layout.pipeline_layout" &&
                     errors.front().text().find("unknown item 'q'") != std::string::npos,
                 joinErrors(errors).c_str());
        QJsonObject bad = json;
        bad.insert("pipeline_layout", "(Et*3|");
        errors.clear();
        QVERIFY(!layoutFromJson(bad, "layout", errors) && joinErrors(errors).find("layout.pipeline_layout") != std::string::npos);
    }

    // moe_dispatcher: written in text and JSON only when not alltoall, read back; bad values and the
    // layout's own rules named.
    void moeDispatcherLayout()
    {
        for (const char* name : {"allgather", "deepep", "hybridep"}) {
            FieldErrors errors;
            Layout l = parseLayout(std::string("dp=8,ep=8,moe_dispatcher=") + name, errors);
            QVERIFY(errors.empty());
            QCOMPARE(std::string(toString(l.moe_dispatcher)), std::string(name));
            QVERIFY(toString(l).ends_with(std::string(",moe_dispatcher=") + name));
            const QJsonObject json = toJson(l);
            QCOMPARE(json.value("moe_dispatcher").toString(), QString::fromLatin1(name));
            const auto back = layoutFromJson(throughText(json), "layout", errors);
            QVERIFY2(back && *back == l && errors.empty(), joinErrors(errors).c_str());
        }
        FieldErrors errors;
        Layout l = parseLayout("dp=8,ep=8,moe_dispatcher=alltoall", errors);
        QVERIFY(errors.empty() && l.moe_dispatcher == MoeDispatcher::AllToAll);
        QVERIFY(toString(l).find("moe_dispatcher") == std::string::npos && !toJson(l).contains("moe_dispatcher"));
        parseLayout("dp=8,moe_dispatcher=flex", errors);
        QVERIFY(!errors.empty() && errors.front().text().find("layout.moe_dispatcher: unknown value \"flex\" (one of: "
                                                              "alltoall, allgather, deepep, hybridep)") != std::string::npos);
        QJsonObject bad = toJson(l);
        bad.insert("moe_dispatcher", "nccl");
        errors.clear();
        QVERIFY(!layoutFromJson(bad, "layout", errors) && joinErrors(errors).find("moe_dispatcher") != std::string::npos);
        const FieldErrors overlap = validate(parseLayout("dp=8,ep=8,ep_comm_overlap=on,moe_dispatcher=allgather", errors));
        QVERIFY(!overlap.empty() && overlap.front().path == "layout.moe_dispatcher");
        // (Nor does Megatron-LM overlap the dispatch of recomputed MoE layers.)
        const FieldErrors recomputed =
            validate(parseLayout("dp=8,ep=8,ep_comm_overlap=on,recompute=selective,recompute_modules=moe", errors));
        QVERIFY(!recomputed.empty() && recomputed.front().text().find("disable moe in recompute_modules") !=
                                           std::string::npos);
        const FieldErrors lone = validate(parseLayout("dp=8,moe_dispatcher=deepep", errors));
        QVERIFY(!lone.empty() && lone.front().text().find("DeepEP dispatcher requires TPxEP > 1") != std::string::npos);
    }

    // Recomputed modules and activation offload: text and JSON (Megatron's list) only when set, read
    // back; bad names and values named.
    void recomputeModulesAndOffloadLayout()
    {
        FieldErrors errors;
        Layout l = parseLayout("dp=8,recompute=selective,recompute_modules=moe_act+layernorm", errors);
        QVERIFY(errors.empty());
        QCOMPARE(l.recompute_modules, unsigned(kRecomputeMoeAct | kRecomputeLayernorm));
        QVERIFY(toString(l).ends_with(",recompute_modules=moe_act+layernorm"));
        const QJsonObject json = toJson(l);
        QCOMPARE(json.value("recompute_modules").toArray(), (QJsonArray{"moe_act", "layernorm"}));
        auto back = layoutFromJson(throughText(json), "layout", errors);
        QVERIFY(back && *back == l && errors.empty());
        // Selective alone is Megatron's default, core_attn: nothing written.
        l.recompute_modules = 0;
        QVERIFY(toString(l).find("recompute_modules") == std::string::npos && !toJson(l).contains("recompute_modules"));
        QCOMPARE(l.recomputedModules(), unsigned(kRecomputeCoreAttn));
        Layout o = parseLayout("dp=8,offload_activations=3", errors);
        QVERIFY(errors.empty() && o.offload_activations == 3 && toString(o).ends_with(",offload_activations=3"));
        back = layoutFromJson(throughText(toJson(o)), "layout", errors);
        QVERIFY(back && *back == o && errors.empty());
        QCOMPARE(toJson(o).value("offload_activations").toInt(), 3);
        o.offload_activations = 0;
        QVERIFY(!toJson(o).contains("offload_activations"));
        // JSON: an unknown name, one named twice, an empty list, a string for the list.
        const auto bad = layoutFromJson(
            parseJsonObject(R"({"dp":8,"recompute":"selective","recompute_modules":["moe_act","router","moe_act"]})",
                            "layout", errors),
            "layout", errors);
        QVERIFY(!bad);
        const std::string all = joinErrors(errors);
        QVERIFY2(all.find("layout.recompute_modules[1]: unknown module \"router\"") != std::string::npos, all.c_str());
        QVERIFY2(all.find("layout.recompute_modules[2]: \"moe_act\" named twice") != std::string::npos, all.c_str());
        errors.clear();
        QVERIFY(!layoutFromJson(parseJsonObject(R"({"dp":8,"recompute":"selective","recompute_modules":[]})", "layout",
                                                errors),
                                "layout", errors));
        QVERIFY2(joinErrors(errors).find("layout.recompute_modules: an empty list") != std::string::npos,
                 joinErrors(errors).c_str());
        errors.clear();
        QVERIFY(!layoutFromJson(parseJsonObject(R"({"dp":8,"offload_activations":-1})", "layout", errors), "layout",
                                errors));
        QVERIFY2(joinErrors(errors).find("layout.offload_activations") != std::string::npos, joinErrors(errors).c_str());
        // Text: modules without selective recomputation.
        errors.clear();
        const FieldErrors rule = validate(parseLayout("dp=8,recompute_modules=mlp", errors));
        QVERIFY(errors.empty() && !rule.empty() && rule.front().path == "layout.recompute_modules");
    }

    void layoutErrors()
    {
        FieldErrors errors;
        const auto l = layoutFromJson(
            parseJsonObject(R"({"dp":8,"tp":0,"zero":5,"schedule":"zigzag","pp":"two"})", "layout", errors), "layout",
            errors);
        QVERIFY(!l.has_value());
        const std::string all = joinErrors(errors);
        for (const char* fragment : {"layout.tp: 0 is out of range", "layout.zero: 5", "layout.schedule: unknown value",
                                     "layout.pp: expected an integer"})
            QVERIFY2(all.find(fragment) != std::string::npos, all.c_str());
    }

    // Issue 19: every key given twice is named by its path in the document and both lines.
    void duplicateKeysNamedByPath_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("top level") << QByteArray("{\"a\": 1,\n \"a\": 2}") << "a: given twice in file.json (lines 1 and 2)";
        QTest::newRow("nested object") << QByteArray(R"({"moe": {"experts": 8, "top_k": 2, "experts": 4}})")
                                       << "moe.experts: given twice";
        QTest::newRow("in an array")
            << QByteArray(R"({"entries": [{"name": "x"}, {"name": "y", "name": "z"}]})") << "entries[1].name: given twice";
    }
    void duplicateKeysNamedByPath()
    {
        QFETCH(QByteArray, text);
        QFETCH(QString, expected);
        FieldErrors errors;
        const QJsonObject o = parseJsonObject(text, "file.json", errors);
        QVERIFY(o.isEmpty());
        QVERIFY2(QString::fromStdString(joinErrors(errors)).contains(expected), joinErrors(errors).c_str());
    }
    void equalKeysInDifferentObjectsAreFine()
    {
        FieldErrors errors;
        const QJsonObject o = parseJsonObject(
            R"({"name": "a", "x": {"name": "b"}, "list": [{"name": "c"}, {"name": "d"}], "s": "name"})", "f", errors);
        QVERIFY2(errors.empty(), joinErrors(errors).c_str());
        QCOMPARE(o.value("name").toString(), QString("a"));
    }

    // Issue 19: a 10 MB value was echoed whole in the error; a NUL cut the message; a number
    // as the schema was shown as "".
    void longAndControlValuesInErrors()
    {
        const QString big(10'000'000, 'x');
        FieldErrors errors;
        QJsonObject model = parseJsonObject(malformed::validModel(), "", errors);
        model["mlp"] = big;
        model[big] = 1;
        QVERIFY(!modelFromJson(model, "model", errors));
        const std::string all = joinErrors(errors);
        QVERIFY2(all.size() < 2000, all.substr(0, 2000).c_str());
        QVERIFY2(all.find("model.mlp: unknown value \"xxx") != std::string::npos, all.c_str());
        QVERIFY2(all.find("(10000000 bytes)") != std::string::npos, all.c_str());

        QJsonObject nul = model;
        nul.remove(big);
        nul["mlp"] = "gelu";
        nul["schema"] = QString::fromUtf8("shardscope.mo\0del/1", 19);
        FieldErrors nulErrors;
        parseEntries(entryDocuments(nul, nulErrors), nulErrors, nullptr);
        const std::string nulText = joinErrors(nulErrors);
        QVERIFY2(nulText.find("\"shardscope.mo\\u0000del/1\" is not a model") != std::string::npos, nulText.c_str());
        QVERIFY(nulText.find('\0') == std::string::npos);

        QJsonObject number = nul;
        number["schema"] = 2147483647;
        FieldErrors numberErrors;
        parseEntries(entryDocuments(number, numberErrors), numberErrors, nullptr);
        const std::string numberText = joinErrors(numberErrors);
        QVERIFY2(numberText.find("document.schema: expected a string such as \"shardscope.model/1\", got the number "
                                 "2147483647") != std::string::npos,
                 numberText.c_str());
    }

    // Issue 16's bad input in the model format: each refused with the field named and the
    // reason, the document read into no model. Each starts from a built-in that reads cleanly.
    void mixtureOfExpertsBadInput_data()
    {
        QTest::addColumn<QString>("builtin");
        QTest::addColumn<QString>("object");  // "moe", "mla" or "" (the model itself)
        QTest::addColumn<QString>("key");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("message");  // the first error, path and text
        QTest::newRow("top_k past the experts")
            << "mixtral-8x7b" << "moe" << "top_k" << QJsonValue(9) << "model.moe.top_k: 9 must be between 1 and experts 8";
        QTest::newRow("top_k 0") << "qwen3-30b-a3b" << "moe" << "top_k" << QJsonValue(0)
                                 << "model.moe.top_k: 0 is out of range [1, 4096]";
        QTest::newRow("capacity factor 0 (dropless is left out)")
            << "mixtral-8x7b" << "moe" << "capacity_factor" << QJsonValue(0)
            << "model.moe.capacity_factor: 0 must be > 0 when given (leave capacity_factor out: dropless routing, "
               "every token to its top k)";
        QTest::newRow("capacity factor negative")
            << "qwen3-235b-a22b" << "moe" << "capacity_factor" << QJsonValue(-1.5)
            << "model.moe.capacity_factor: -1.5 must be > 0 when given (leave capacity_factor out: dropless "
               "routing, every token to its top k)";
        QTest::newRow("expert ffn 0") << "qwen3-30b-a3b" << "moe" << "ffn_hidden" << QJsonValue(0)
                                      << "model.moe.ffn_hidden: 0 must be > 0 when given (leave ffn_hidden out: each "
                                         "routed expert has the model's ffn_hidden)";
        QTest::newRow("expert ffn negative")
            << "gpt-oss-120b" << "moe" << "ffn_hidden" << QJsonValue(-768)
            << "model.moe.ffn_hidden: -768 must be > 0 when given (leave ffn_hidden out: each routed expert has the "
               "model's ffn_hidden)";
        QTest::newRow("shared experts without a size")
            << "mixtral-8x22b" << "moe" << "shared_experts" << QJsonValue(2)
            << "model.moe.shared_ffn_hidden: is required with shared experts";
        QTest::newRow("a shared size without shared experts")
            << "qwen3-30b-a3b" << "moe" << "shared_ffn_hidden" << QJsonValue(768)
            << "model.moe.shared_ffn_hidden: without shared experts: set moe.shared_experts";
        QTest::newRow("kv_lora_rank past hidden")
            << "deepseek-v3" << "mla" << "kv_lora_rank" << QJsonValue(7169)
            << "model.mla.kv_lora_rank: 7169 is out of range [1, 7168] (at most hidden: a low-rank bottleneck no "
               "wider than the model)";
        QTest::newRow("q_lora_rank past hidden")
            << "deepseek-v3" << "mla" << "q_lora_rank" << QJsonValue(8192)
            << "model.mla.q_lora_rank: 8192 is out of range [1, 7168] (or null: no query compression)";
        QTest::newRow("mtp layers 0")
            << "deepseek-v3" << "mtp" << "layers" << QJsonValue(0)
            << "model.mtp.layers: 0 is out of range [1, 64] (leave mtp out: no multi-token prediction)";
        QTest::newRow("mtp loss scale 0")
            << "deepseek-v3" << "mtp" << "loss_scale" << QJsonValue(0)
            << "model.mtp.loss_scale: 0 is out of range (0, 10]: the MTP losses' weight";
        QTest::newRow("mtp unknown key")
            << "deepseek-v3" << "mtp" << "depth" << QJsonValue(2)
            << "model.mtp.depth: unknown field";
        QTest::newRow("mtp on an encoder")
            << "bert-base" << "mtp" << "layers" << QJsonValue(1)
            << "model.mtp: multi-token prediction applies to decoder-only models";
    }
    void mixtureOfExpertsBadInput()
    {
        QFETCH(QString, builtin);
        QFETCH(QString, object);
        QFETCH(QString, key);
        QFETCH(QJsonValue, value);
        QFETCH(QString, message);
        QJsonObject doc = toJson(BuiltinSpecs::instance().model(builtin.toStdString()));
        FieldErrors errors;
        QVERIFY2(modelFromJson(throughText(doc), "model", errors), joinErrors(errors).c_str());
        if (object.isEmpty()) {
            doc.insert(key, value);
        } else {
            QJsonObject inner = doc.value(object).toObject();
            inner.insert(key, value);
            doc.insert(object, inner);
        }
        QVERIFY(!modelFromJson(throughText(doc), "model", errors).has_value());
        QVERIFY(!errors.empty());
        QCOMPARE(QString::fromStdString(errors.front().path + ": " + errors.front().message), message);
    }

    void malformedDocuments_data() { malformed::addRows(); }
    void malformedDocuments()
    {
        QFETCH(QByteArray, text);
        QFETCH(QString, path);
        QFETCH(QString, message);
        FieldErrors errors;
        const QJsonObject json = parseJsonObject(text, "", errors);
        if (errors.empty()) {
            const std::string kind = schemaKind(json);
            bool ok = false;
            if (kind == "chip")
                ok = chipFromJson(json, "chip", errors).has_value();
            else if (kind == "node")
                ok = nodeFromJson(json, "node", errors, lookup()).has_value();
            else
                ok = modelFromJson(json, "model", errors).has_value();
            QVERIFY(!ok);
        }
        QVERIFY(!errors.empty());
        bool found = false;
        for (const FieldError& e : errors)
            found |= QString::fromStdString(e.path).contains(path) &&
                     QString::fromStdString(e.message).contains(message);
        QVERIFY2(found, joinErrors(errors).c_str());
    }
};

QTEST_GUILESS_MAIN(TstCoreJson)
#include "tst_core_json.moc"
