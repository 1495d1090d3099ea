// Exact parameter counts and FLOPs of ModelSpec against published numbers and
// closed forms (Megatron-LM, Narayanan et al. SC'21, eqs. 2 and 3), and the
// field-level messages of model validation.
#include "ModelSpec.h"

#include <QTest>

#include <cmath>

using namespace shardscope;

namespace {

ModelSpec gptLike(int layers, int hidden, int heads, int vocab, int seq)
{
    ModelSpec m;
    m.name = "gpt";
    m.family = ModelFamily::DecoderOnly;
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = heads;
    m.head_dim = hidden / heads;
    m.ffn_hidden = 4 * hidden;
    m.mlp = MlpKind::Gelu;
    m.vocab = vocab;
    m.max_seq = seq;
    m.positions = PositionKind::Learned;
    m.norm = NormKind::LayerNorm;
    m.bias = true;
    m.tied_embeddings = true;
    m.final_norm = true;
    return m;
}

ModelSpec llamaLike(int layers, int hidden, int heads, int kvHeads, int ffn, int vocab)
{
    ModelSpec m = gptLike(layers, hidden, heads, vocab, 4096);
    m.kv_heads = kvHeads;
    m.ffn_hidden = ffn;
    m.mlp = MlpKind::SwiGlu;
    m.positions = PositionKind::Rotary;
    m.norm = NormKind::RmsNorm;
    m.bias = false;
    m.tied_embeddings = false;
    return m;
}

bool hasError(const FieldErrors& errors, const std::string& path, const std::string& fragment)
{
    for (const FieldError& e : errors)
        if (e.path == path && e.message.find(fragment) != std::string::npos)
            return true;
    return false;
}

} // namespace

class TstCoreModel : public QObject {
    Q_OBJECT
private slots:
    void publishedCounts_data()
    {
        QTest::addColumn<int>("kind");  // 0 gpt-like, 1 llama-like
        QTest::addColumn<QList<int>>("shape");
        QTest::addColumn<qint64>("expected");
        // GPT-2 small: Hugging Face openai-community/gpt2, 124,439,808 parameters.
        QTest::newRow("gpt2-small") << 0 << QList<int>{12, 768, 12, 50257, 1024} << qint64(124'439'808);
        // Llama-2-7B: 6,738,415,616 (Hugging Face meta-llama/Llama-2-7b-hf).
        QTest::newRow("llama-2-7b") << 1 << QList<int>{32, 4096, 32, 32, 11008, 32000} << qint64(6'738'415'616);
        // Llama-3-8B: 8,030,261,248 (GQA with 8 KV heads, 128,256 vocabulary).
        QTest::newRow("llama-3-8b") << 1 << QList<int>{32, 4096, 32, 8, 14336, 128256} << qint64(8'030'261'248);
    }
    void publishedCounts()
    {
        QFETCH(int, kind);
        QFETCH(QList<int>, shape);
        QFETCH(qint64, expected);
        const ModelSpec m = kind == 0 ? gptLike(shape[0], shape[1], shape[2], shape[3], shape[4])
                                      : llamaLike(shape[0], shape[1], shape[2], shape[3], shape[4], shape[5]);
        QVERIFY(validate(m).empty());
        QCOMPARE(qint64(parameterCount(m)), expected);
    }

    // Megatron eq. 2: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) = 12 l h^2 + 13 l h + (V + s) h.
    // Its setting: learned positions, tied embeddings, biases, LayerNorm, 4h GeLU MLP;
    // the formula leaves out the final LayerNorm (2h), which a real model has.
    void megatronParameterFormula_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("hidden");
        QTest::addColumn<int>("heads");
        QTest::addColumn<double>("publishedBillions");  // Table 1, "Params (B)"
        QTest::newRow("1.7B") << 24 << 2304 << 24 << 1.7;
        QTest::newRow("3.6B") << 30 << 3072 << 32 << 3.6;
        QTest::newRow("7.5B") << 36 << 4096 << 32 << 7.5;
        QTest::newRow("18.4B") << 40 << 6144 << 48 << 18.4;
        QTest::newRow("39.1B") << 48 << 8192 << 64 << 39.1;
        QTest::newRow("76.1B") << 60 << 10240 << 80 << 76.1;
        QTest::newRow("145.6B") << 80 << 12288 << 96 << 145.6;
        QTest::newRow("310.1B") << 96 << 16384 << 128 << 310.1;
        QTest::newRow("529.6B") << 105 << 20480 << 128 << 529.6;
        QTest::newRow("1008.0B") << 128 << 25600 << 160 << 1008.0;
    }
    void megatronParameterFormula()
    {
        QFETCH(int, layers);
        QFETCH(int, hidden);
        QFETCH(int, heads);
        QFETCH(double, publishedBillions);
        const std::int64_t V = 51200, s = 2048, l = layers, h = hidden;
        const ModelSpec m = gptLike(layers, hidden, heads, int(V), int(s));
        const std::int64_t formula = 12 * l * h * h + 13 * l * h + (V + s) * h;
        QCOMPARE(qint64(parameterCount(m) - 2 * h), qint64(formula));
        QCOMPARE(std::round(double(formula) / 1e8) / 10.0, publishedBillions);
    }

    // Megatron eq. 3 counts per token, forward: l (24 h^2 + 4 s h) + 2 h V; with
    // recomputation the layers run 4x (1 + 2 + 1) and the logits 3x, giving
    // F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
    void megatronFlopsFormula_data() { megatronParameterFormula_data(); }
    void megatronFlopsFormula()
    {
        QFETCH(int, layers);
        QFETCH(int, hidden);
        QFETCH(int, heads);
        const std::int64_t V = 51200, s = 2048, l = layers, h = hidden;
        const ModelSpec m = gptLike(layers, hidden, heads, int(V), int(s));
        const std::int64_t perToken = forwardFlopsPerToken(m, int(s));
        QCOMPARE(qint64(perToken), qint64(l * (24 * h * h + 4 * s * h) + 2 * h * V));

        const double B = 512;
        const double logits = 2.0 * double(h) * double(V);
        const double ours = B * double(s) * (4.0 * (double(perToken) - logits) + 3.0 * logits);
        const double eq3 = 96.0 * B * double(s) * double(l) * double(h) * double(h) *
                           (1.0 + double(s) / (6.0 * double(h)) + double(V) / (16.0 * double(l) * double(h)));
        QVERIFY2(std::fabs(ours - eq3) <= 1e-12 * eq3, qPrintable(QString("%1 vs %2").arg(ours).arg(eq3)));
    }

    // Independent derivation for GQA + SwiGLU: forward matmul FLOPs per token are
    // 2 x (weights used in matmuls) + 4 l s (heads x head_dim) for the attention scores.
    void gqaSwigluFlops()
    {
        const ModelSpec m = llamaLike(32, 4096, 32, 8, 14336, 128256);
        const std::int64_t seq = 8192;
        const std::int64_t norms = (2 * 32 + 1) * 4096;
        const std::int64_t embeddingLookup = 128256LL * 4096;  // a lookup, not a matmul
        const std::int64_t matmulWeights = parameterCount(m) - norms - embeddingLookup;
        const std::int64_t expected = 2 * matmulWeights + 4 * 32 * seq * 4096;
        QCOMPARE(qint64(forwardFlopsPerToken(m, int(seq))), qint64(expected));
        QCOMPARE(qint64(expected), qint64(19'304'284'160));
    }

    // Mixtral 8x7B: 46,702,792,704 parameters, of which ~12.9B are active per token
    // (Jiang et al. 2024: "13B active parameters").
    void mixtureOfExperts()
    {
        ModelSpec m = llamaLike(32, 4096, 32, 8, 14336, 32000);
        m.moe = {8, 2};
        QVERIFY(validate(m).empty());
        const ParameterBreakdown b = parameterBreakdown(m);
        QCOMPARE(qint64(b.total), qint64(46'702'792'704));
        QCOMPARE(std::round(double(b.active_per_token) / 1e8) / 10.0, 12.9);
        // FLOPs count only the 2 active experts of 8.
        ModelSpec dense = m;
        dense.moe = {};
        const std::int64_t expertMatmuls = 2LL * 3 * 4096 * 14336;
        QCOMPARE(qint64(forwardFlopsPerToken(m, 1024) - forwardFlopsPerToken(dense, 1024)),
                 qint64(32 * (expertMatmuls + 2LL * 4096 * 8)));  // + second expert + router
    }

    void encoderDecoderFlopsIncludeCrossAttention()
    {
        ModelSpec t5 = gptLike(12, 768, 12, 32128, 512);
        t5.family = ModelFamily::EncoderDecoder;
        t5.decoder_layers = 12;
        t5.bias = false;
        const std::int64_t s = 512, h = 768;
        ModelSpec encoderOnly = t5;
        encoderOnly.family = ModelFamily::DecoderOnly;
        encoderOnly.decoder_layers = 0;
        encoderOnly.layers = 24;
        // 24 self-attention layers + 12 cross attentions (4 h^2 projections x 2 FLOPs + 4 s h scores).
        QCOMPARE(qint64(forwardFlopsPerToken(t5, int(s)) - forwardFlopsPerToken(encoderOnly, int(s))),
                 qint64(12 * (8 * h * h + 4 * s * h)));
    }

    void validationNamesEveryField()
    {
        ModelSpec m = gptLike(12, 768, 48, 50257, 1024);
        m.kv_heads = 5;
        m.layers = 0;
        m.vocab = -3;
        const FieldErrors errors = validate(m);
        QVERIFY(hasError(errors, "model.heads", "kv_heads 5"));
        QVERIFY(hasError(errors, "model.layers", "out of range"));
        QVERIFY(hasError(errors, "model.vocab", "-3"));
        QCOMPARE(errors.size(), size_t(3));
    }

    void validationMoeAndPositions()
    {
        ModelSpec m = gptLike(12, 768, 12, 50257, 1024);
        m.moe = {8, 9};
        m.position_table = 512;
        const FieldErrors errors = validate(m);
        QVERIFY(hasError(errors, "model.moe.top_k", "between 1 and experts 8"));
        QVERIFY(hasError(errors, "model.position_table", "max_seq 1024"));
    }
};

QTEST_GUILESS_MAIN(TstCoreModel)
#include "tst_core_model.moc"
