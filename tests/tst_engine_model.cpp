// The model executor on one EmulatedDevice, for every block kind: parameter counts
// against the published GPT-2 figure and core's ModelSpec formula; the allocator's
// peak bytes per category against the sizes written out here from ModelExecutor.h;
// whole-model gradient checks in double precision (GPT-2, Llama-style, GeGLU/MQA with
// an independent head size, ReLU bidirectional); recomputation changes memory and
// FLOPs but not the gradients; FLOPs against core's formula; bf16 storage; seeds;
// out of memory reported by the run, which the process survives.
#include "Bf16.h"
#include "BuiltinSpecs.h"
#include "MaskedLm.h"
#include "ModelExecutor.h"
#include "ModelSpec.h"
#include "Trainer.h"
#include "TrainingObjective.h"
#include "Units.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace shardscope;
using namespace shardscope::engine;

Q_DECLARE_METATYPE(shardscope::engine::PrecisionMode)
Q_DECLARE_METATYPE(shardscope::Recompute)
Q_DECLARE_METATYPE(shardscope::engine::ModelConfig)

namespace {

DeviceProfile roomyProfile(double capacity = 1e12)
{
    DeviceProfile p;
    p.name = "test";
    p.memory_bytes = capacity;
    p.peak_flops_fp32 = 1e12;
    p.peak_flops_bf16 = 4e12;
    p.memory_bytes_per_second = 1e11;
    return p;
}

ModelSpec specOf(const ModelConfig& c)
{
    ModelSpec m;
    m.name = "engine-model";
    m.family = c.masked_lm ? ModelFamily::EncoderOnly : ModelFamily::DecoderOnly;
    m.layers = c.layers;
    m.hidden = c.hidden;
    m.heads = c.heads;
    m.kv_heads = c.kvHeads();
    m.head_dim = c.headDim();
    m.ffn_hidden = c.ffn();
    m.mlp = c.mlp;
    m.vocab = c.vocab;
    m.max_seq = c.seq;
    m.positions = c.positions;
    m.norm = c.norm;
    m.bias = c.bias;
    m.qkv_bias = c.qkv_bias;
    m.qk_norm = c.qk_norm;
    m.sliding_window = c.sliding_window;
    m.tied_embeddings = c.tied_embeddings;
    m.final_norm = c.finalNorm();
    m.token_types = c.token_types;
    m.embedding_norm = c.embedding_norm;
    m.pooler = c.pooler;
    if (c.moe.enabled()) {
        m.moe.experts = c.moe.experts;
        m.moe.top_k = c.moe.top_k;
        m.moe.ffn_hidden = c.moe.expert_ffn;
        m.moe.shared_experts = c.moe.shared_experts;
        m.moe.shared_ffn_hidden = c.moe.shared_ffn;
        m.moe.dense_layers = c.moe.dense_layers;
        m.moe.layer_interval = c.moe.layer_interval;
        m.moe.router = c.moe.router;
        m.moe.aux_loss_coeff = c.moe.aux_loss_coeff;
        m.moe.score_correction_bias = c.moe.score_correction_bias;
        m.moe.routed_scaling = c.moe.routed_scaling;
    }
    if (c.encoder_decoder) {
        m.family = ModelFamily::EncoderDecoder;
        m.decoder_layers = c.decoder_layers;
        m.relative_buckets = c.relative_buckets;
    }
    if (c.mla.enabled()) {
        m.mla.q_lora_rank = c.mla.q_lora_rank;
        m.mla.kv_lora_rank = c.mla.kv_lora_rank;
        m.mla.qk_nope_head_dim = c.mla.qk_nope_head_dim;
        m.mla.qk_rope_head_dim = c.mla.qk_rope_head_dim;
        m.mla.v_head_dim = c.mla.v_head_dim;
    }
    return m;
}

// T5's blocks: an encoder of L layers and a decoder of Ld, relative position bias tables of
// `buckets` per head and stack, RMSNorm, ReLU (v1.0, tied) or GeGLU (v1.1, untied), no biases.
ModelConfig t5Like(int L, int Ld, int C, int NH, int F, int V, int T, int buckets, MlpKind mlp = MlpKind::Relu)
{
    ModelConfig c{L, C, NH, V, T};
    c.encoder_decoder = true;
    c.decoder_layers = Ld;
    c.relative_buckets = buckets;
    c.relative_max_distance = 2 * buckets;
    c.positions = PositionKind::Relative;
    c.ffn_hidden = F;
    c.mlp = mlp;
    c.norm = NormKind::RmsNorm;
    c.norm_eps = 1e-6;
    c.bias = false;
    c.tied_embeddings = mlp == MlpKind::Relu;
    return c;
}

// BERT's blocks: post-norm LayerNorm layers, GeLU, learned positions, token types, the
// embedding norm, bidirectional attention, the pooler with the next-sentence head, masked LM.
ModelConfig bertLike(int L, int C, int NH, int V, int T, int types = 2)
{
    ModelConfig c{L, C, NH, V, T};
    c.norm_eps = 1e-12;  // BERT's layer_norm_eps
    c.causal = false;
    c.post_norm = true;
    c.token_types = types;
    c.embedding_norm = true;
    c.masked_lm = true;
    c.pooler = true;
    return c;
}

// A pre-norm encoder: final norm then the masked-LM transform; RMSNorm, RoPE, untied, no pooler.
ModelConfig preNormEncoder(int L, int C, int NH, int V, int T)
{
    ModelConfig c{L, C, NH, V, T};
    c.norm = NormKind::RmsNorm;
    c.positions = PositionKind::Rotary;
    c.tied_embeddings = false;
    c.bias = false;
    c.causal = false;
    c.masked_lm = true;
    return c;
}

// One step's data for any objective: next-token pairs, or the masked-LM batch built from them.
struct StepData {
    std::vector<int> in, tg, types, nsp;
    const int* typesOrNull() const { return types.empty() ? nullptr : types.data(); }
    const int* nspOrNull() const { return nsp.empty() ? nullptr : nsp.data(); }
};
StepData stepData(const ModelConfig& c, int B, std::uint64_t seed)
{
    StepData d;
    MarkovSource src(dataVocabulary(c), seed);
    d.in.resize(size_t(B) * size_t(c.seq));
    d.tg.resize(d.in.size());
    src.batch(0, B, c.seq, d.in.data(), d.tg.data());
    if (c.masked_lm) {
        PretrainingBatch p;
        makePretrainingBatch(c, seed, 0, B, d.in.data(), p);
        d.in = p.inputs;
        d.tg = p.targets;
        d.types = p.token_types;
        d.nsp = p.next_sentence;
    }
    return d;
}

// Whether no two of the B sequences of T tokens (one micro-batch) open with the same token (with
// learned positions, then no two positions have the same history).
bool distinctOpenings(const std::vector<int>& tokens, int B, int T)
{
    for (int b = 0; b < B; ++b)
        for (int c = 0; c < b; ++c)
            if (tokens[size_t(b) * size_t(T)] == tokens[size_t(c) * size_t(T)])
                return false;
    return true;
}

// Llama's blocks: RMSNorm, SwiGLU, RoPE, grouped-query attention, untied head, no biases.
ModelConfig llamaLike(int L, int C, int NH, int NKV, int F, int V, int T)
{
    ModelConfig c{L, C, NH, V, T};
    c.kv_heads = NKV;
    c.ffn_hidden = F;
    c.mlp = MlpKind::SwiGlu;
    c.norm = NormKind::RmsNorm;
    c.positions = PositionKind::Rotary;
    c.rope_base = 500000;
    c.bias = false;
    c.tied_embeddings = false;
    return c;
}

// Mixtral's MoE blocks on Llama's: E experts of F_e, top-k softmax renormalised, every layer.
ModelConfig mixtralLike(int L, int C, int NH, int NKV, int Fe, int E, int K, int V, int T)
{
    ModelConfig c = llamaLike(L, C, NH, NKV, 4 * C, V, T);
    c.moe.experts = E;
    c.moe.top_k = K;
    c.moe.expert_ffn = Fe;
    c.moe.router = MoeRouter::SoftmaxNorm;
    c.moe.aux_loss_coeff = 0.02;
    return c;
}

// DeepSeek-V3's MoE blocks (without MLA): one dense first layer of F, then sigmoid top-k
// normalised and scaled, the score-correction bias, shared experts.
ModelConfig deepseekLike(int L, int C, int NH, int F, int Fe, int E, int K, int S, int Fs, int V, int T)
{
    ModelConfig c = llamaLike(L, C, NH, NH, F, V, T);
    c.moe.experts = E;
    c.moe.top_k = K;
    c.moe.expert_ffn = Fe;
    c.moe.shared_experts = S;
    c.moe.shared_ffn = Fs;
    c.moe.dense_layers = 1;
    c.moe.router = MoeRouter::SigmoidNorm;
    c.moe.score_correction_bias = true;
    c.moe.routed_scaling = 2.5;
    c.moe.aux_loss_coeff = 0.01;
    return c;
}

// DeepSeek-V2/V3's multi-head latent attention on Llama's blocks (MHA heads, head_dim = Nd + P).
ModelConfig mlaLike(int L, int C, int NH, int Q, int R, int Nd, int P, int Vd, int F, int V, int T)
{
    ModelConfig c = llamaLike(L, C, NH, NH, F, V, T);
    c.mla = {Q, R, Nd, P, Vd};
    c.head_dim = Nd + P;
    return c;
}

// Qwen2's blocks: Llama's with biases on the q, k and v projections only.
ModelConfig qwen2Like(int L, int C, int NH, int NKV, int F, int V, int T)
{
    ModelConfig c = llamaLike(L, C, NH, NKV, F, V, T);
    c.qkv_bias = true;
    return c;
}

// Qwen3's blocks: Llama's with QK-norm (RMSNorm over head_dim on every q and k head, before RoPE).
ModelConfig qwen3Like(int L, int C, int NH, int NKV, int F, int V, int T)
{
    ModelConfig c = llamaLike(L, C, NH, NKV, F, V, T);
    c.qk_norm = true;
    return c;
}

// Mistral's blocks: Llama's with a sliding window of `window` keys on every layer, or on the
// layers listed (GPT-OSS alternates sliding and full layers).
ModelConfig mistralLike(int L, int C, int NH, int NKV, int F, int V, int T, int window, std::vector<int> layers = {})
{
    ModelConfig c = llamaLike(L, C, NH, NKV, F, V, T);
    c.sliding_window = {window, std::move(layers)};
    return c;
}

// GeGLU, MQA and a head size that is not hidden / heads; LayerNorm, biases, tied.
ModelConfig gegluMqa(int L, int C, int NH, int hd, int F, int V, int T)
{
    ModelConfig c{L, C, NH, V, T};
    c.kv_heads = 1;
    c.head_dim = hd;
    c.ffn_hidden = F;
    c.mlp = MlpKind::GeGlu;
    c.positions = PositionKind::Rotary;
    return c;
}

// ReLU, bidirectional attention, RMSNorm with learned positions.
ModelConfig reluEncoder(int L, int C, int NH, int V, int T)
{
    ModelConfig c{L, C, NH, V, T};
    c.mlp = MlpKind::Relu;
    c.norm = NormKind::RmsNorm;
    c.norm_eps = 1e-6;
    c.causal = false;
    return c;
}

// Deterministic tokens for a batch.
void tokens(int B, int T, int V, std::uint64_t seed, std::vector<int>& in, std::vector<int>& tg)
{
    MarkovSource src(V, seed);
    in.resize(size_t(B) * T);
    tg.resize(size_t(B) * T);
    src.batch(0, B, T, in.data(), tg.data());
}

Layout oneDevice(int micro_batch, Recompute recompute = Recompute::None)
{
    Layout l;
    l.micro_batch = micro_batch;
    l.recompute = recompute;
    return l;
}

ExecutorOptions optionsFor(int B, int T, PrecisionMode p = PrecisionMode::FP32)
{
    ExecutorOptions o;
    o.micro_batch = B;
    o.global_tokens = std::int64_t(B) * T;
    o.precision = p;
    return o;
}

} // namespace

class TstEngineModel : public QObject {
    Q_OBJECT

private slots:
    void parameterCount()
    {
        // GPT-2 small (124M): 124,439,808 parameters with its 1024-position table (Radford et al. 2019,
        // as counted by HF transformers with the tied head).
        QCOMPARE(engine::parameterCount(ModelConfig{12, 768, 12, 50257, 1024}), std::int64_t(124'439'808));
        // Llama 2 7B at its published size: 6,738,415,616 parameters (HF transformers' count).
        QCOMPARE(engine::parameterCount(llamaLike(32, 4096, 32, 32, 11008, 32000, 4096)), std::int64_t(6'738'415'616));
        // T5 base (12 + 12 layers, 768 hidden, 32 buckets up to distance 128, tied): HF transformers'
        // T5ForConditionalGeneration.num_parameters() of google-t5/t5-base, 222,903,552.
        ModelConfig t5base = t5Like(12, 12, 768, 12, 3072, 32128, 512, 32);
        t5base.relative_max_distance = 128;
        QCOMPARE(engine::parameterCount(t5base), std::int64_t(222'903'552));
        QCOMPARE(engine::parameterCount(t5base), shardscope::parameterCount(specOf(t5base)));
        for (const ModelConfig& c : {t5Like(2, 3, 32, 4, 64, 40, 8, 8), t5Like(3, 1, 24, 4, 40, 50, 7, 6, MlpKind::GeGlu)})
            QCOMPARE(engine::parameterCount(c), shardscope::parameterCount(specOf(c)));
        ModelConfig qkNormLayerNorm = gegluMqa(2, 24, 4, 10, 40, 33, 6);  // QK-norm's LayerNorm: weight and bias
        qkNormLayerNorm.qk_norm = true;
        for (const ModelConfig& c : {ModelConfig{12, 768, 12, 50257, 64}, ModelConfig{2, 16, 2, 37, 8},
                                     llamaLike(2, 32, 4, 2, 88, 40, 8), qwen2Like(2, 32, 4, 2, 88, 40, 8),
                                     qwen3Like(2, 32, 4, 2, 88, 40, 8), qkNormLayerNorm,
                                     gegluMqa(2, 24, 4, 10, 40, 33, 6),
                                     reluEncoder(2, 16, 2, 21, 5), bertLike(2, 16, 2, 21, 8), bertLike(2, 16, 2, 21, 8, 1),
                                     preNormEncoder(2, 16, 2, 21, 8)})
            QCOMPARE(engine::parameterCount(c), shardscope::pretrainingParameterCount(specOf(c)));
        // BERT base: BertModel's published 109,482,240 parameters (HF transformers' num_parameters() of
        // google-bert/bert-base-uncased, tst_store_catalog's figure), plus BertForPreTraining's heads
        // (modeling_bert.py @ 004ad5f: transform 768 x 768 + 768, LayerNorm 2 x 768, output bias 30522,
        // seq_relationship 768 x 2 + 2): 110,106,428 trained by the engine.
        const ModelConfig bertBase = bertLike(12, 768, 12, 30522, 512);
        QCOMPARE(shardscope::parameterCount(specOf(bertBase)), std::int64_t(109'482'240));
        QCOMPARE(engine::parameterCount(bertBase), std::int64_t(110'106'428));
        // MoE: the engine's router, experts and shared experts count as core counts them, at the
        // published sizes too: Mixtral 8x7B 46,702,792,704 (HF transformers' num_parameters() of
        // mistralai/Mixtral-8x7B-v0.1, tst_core_model and tst_core_hfimport).
        ModelConfig mixtral = mixtralLike(32, 4096, 32, 8, 14336, 8, 2, 32000, 4096);
        mixtral.rope_base = 1e6;
        QCOMPARE(engine::parameterCount(mixtral), std::int64_t(46'702'792'704));
        ModelConfig interval = mixtralLike(4, 16, 4, 2, 12, 4, 1, 21, 6);
        interval.moe.layer_interval = 2;
        interval.mlp = MlpKind::Gelu;
        interval.moe.router = MoeRouter::Softmax;
        for (const ModelConfig& c : {mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6), interval,
                                     deepseekLike(3, 16, 4, 40, 12, 6, 2, 2, 8, 21, 6)})
            QCOMPARE(engine::parameterCount(c), shardscope::parameterCount(specOf(c)));
        // MLA: the down product, latent norms and up products count as core counts them, with and
        // without q compression, RMSNorm and LayerNorm.
        ModelConfig mlaLayerNorm = mlaLike(2, 32, 4, 0, 12, 6, 4, 5, 40, 21, 6);
        mlaLayerNorm.norm = NormKind::LayerNorm;
        for (const ModelConfig& c : {mlaLike(2, 32, 4, 16, 12, 6, 4, 5, 40, 21, 6), mlaLayerNorm})
            QCOMPARE(engine::parameterCount(c), shardscope::parameterCount(specOf(c)));
        EmulatedDevice d(0, roomyProfile());
        const ModelConfig cfg = llamaLike(3, 24, 4, 2, 40, 50, 7);
        ModelExecutor<float> m(cfg, optionsFor(1, 7), singleDevice(d, oneDevice(1)));
        QCOMPARE(m.localParameters(), engine::parameterCount(cfg));
        std::int64_t sum = 0;
        for (const ShardTensor& t : m.tensors())
            sum += t.count;
        QCOMPARE(sum, m.localParameters());
    }

    static ModelSpec spec8Experts(const SpecLookup& specs)
    {
        ModelSpec s = specs.model("mixtral-8x7b");
        s.moe.expert_groups = 2;
        s.moe.group_top_k = 1;
        return s;
    }

    // Catalog MoE models scaled down (engine::scaledMoe): Mixtral 8x7B keeps its 8 experts, top-2
    // and softmax-renormalised router, its expert width ratio (14336 / 4096); DeepSeek-V3's MoE
    // part (its MLA attention is not executed by the engine: validation refuses the model by name)
    // 8 of its 256 experts in 2 groups, top-2 of them within the best group (its top 4 of 8 groups,
    // 2 experts each), the sigmoid router with its scaling and correction bias,
    // the shared expert, one dense first layer. Each trains as a valid model counted as core counts it.
    void catalogMoeModelsScaleDown()
    {
        const SpecLookup& specs = BuiltinSpecs::instance();
        for (const char* name : {"mixtral-8x7b", "deepseek-v3"}) {
            const ModelSpec spec = specs.model(name);
            for (const int ep : {1, 2, 4}) {
                ModelConfig c = llamaLike(4, 64, 4, 2, 4 * 64, 64, 16);
                c.moe = scaledMoe(spec, c.hidden, c.layers, ep);
                const MoeConfig& m = c.moe;
                QCOMPARE(m.experts, std::min(spec.moe.experts, 8));
                QCOMPARE(m.experts % ep, 0);
                if (spec.moe.expert_groups == 0) {
                    QCOMPARE(m.top_k, std::min(spec.moe.top_k, m.experts / 2));
                } else {  // DeepSeek-V3's node-limited routing: 1 of 2 groups of 4, 2 experts in it (8 = 4 x 2)
                    QCOMPARE(m.expert_groups, 2);
                    QCOMPARE(m.group_top_k, 1);
                    QCOMPARE(m.top_k, 2);
                }
                QCOMPARE(m.router, spec.moe.router);
                QCOMPARE(m.score_correction_bias, spec.moe.score_correction_bias);
                QCOMPARE(m.routed_scaling, spec.moe.routed_scaling);
                QCOMPARE(m.shared_experts, spec.moe.shared_experts);
                QVERIFY(std::fabs(double(c.expertFfn()) / c.hidden - double(spec.expertFfn()) / spec.hidden) < 2.0 / c.hidden);
                QCOMPARE(m.dense_layers, std::min(spec.moe.dense_layers, 1));
                QVERIFY2(validate(c).empty(), joinErrors(validate(c)).c_str());
                QCOMPARE(engine::parameterCount(c), shardscope::parameterCount(specOf(c)));
            }
        }
        QCOMPARE(scaledMoe(specs.model("mixtral-8x7b"), 64, 4).expert_ffn, 224);  // 3.5 x 64
        QCOMPARE(scaledMoe(specs.model("llama-3-8b"), 64, 4).enabled(), false);
        {
            // A group-limited model small enough already keeps its routing: 8 experts in 2 groups,
            // the best 1 chosen, top-2 within it (top-1 would leave a softmax-after-top-k router no
            // gradient); 160 experts, top-6 in 3 of 8 groups (DeepSeek-V2's shape) keeps 2 picks per group.
            ModelSpec small = spec8Experts(specs);
            const MoeConfig m = scaledMoe(small, 64, 4);
            QCOMPARE(m.experts, 8);
            QCOMPARE(m.expert_groups, 2);
            QCOMPARE(m.group_top_k, 1);
            QCOMPARE(m.top_k, 2);
            ModelSpec v2 = small;
            v2.moe.experts = 160;
            v2.moe.top_k = 6;
            v2.moe.expert_groups = 8;
            v2.moe.group_top_k = 3;
            const MoeConfig m2 = scaledMoe(v2, 64, 4);
            QCOMPARE(m2.experts, 8);
            QCOMPARE(m2.expert_groups, 2);
            QCOMPARE(m2.group_top_k, 1);
            QCOMPARE(m2.top_k, 2);  // 8 experts: top-4 at most, 1 group of 4 chosen, 2 picks
        }
        // The scaled Mixtral trains: 2 steps, every token's copies routed.
        TrainRequest r;
        r.model = llamaLike(2, 32, 4, 2, 4 * 32, 32, 8);
        r.model.moe = scaledMoe(specs.model("mixtral-8x7b"), r.model.hidden, r.model.layers);
        r.batch = 4;
        r.steps = 2;
        r.layout.micro_batch = 4;
        EmulatedDevice d(0, roomyProfile());
        const auto src = makeTokenSource(r);
        const Measurement run = runTraining(r, *src, d);
        QVERIFY2(!run.error, run.error ? run.error->message.c_str() : "");
        std::int64_t copies = 0;
        for (std::int64_t n : run.moe_tokens_per_expert)
            copies += n;
        QCOMPARE(copies, std::int64_t(2) * 4 * 8 * 2 * 2);  // steps x batch x seq x top-2 x MoE layers
    }

    // The masked-LM batches (MaskedLm.h): k = round(15% T) positions a sequence, each the target
    // of its original token, [MASK] 80% / random 10% / kept 10%; two segments with their token
    // types; the next-sentence label half of the time; the same batch for the same (seed, index).
    void maskedLmBatchesAreBerts()
    {
        const ModelConfig c = bertLike(2, 16, 2, 50, 40);
        QCOMPARE(predictedPerSequence(c), 6);  // round(0.15 x 40)
        QCOMPARE(lossTokens(c, 8), std::int64_t(48));
        QCOMPARE(maskToken(c), 49);
        QCOMPARE(dataVocabulary(c), 49);
        const int B = 400;
        MarkovSource src(dataVocabulary(c), 3);
        std::vector<int> tokens(size_t(B) * 40), shifted(tokens.size());
        src.batch(0, B, 40, tokens.data(), shifted.data());
        PretrainingBatch p, again, other;
        makePretrainingBatch(c, 5, 0, B, tokens.data(), p);
        makePretrainingBatch(c, 5, 0, B, tokens.data(), again);
        makePretrainingBatch(c, 5, 1, B, tokens.data(), other);
        QVERIFY(p.inputs == again.inputs && p.targets == again.targets && p.next_sentence == again.next_sentence);
        QVERIFY(p.targets != other.targets);
        int masked = 0, kept = 0, random = 0, randomNext = 0;
        for (int b = 0; b < B; ++b) {
            int predicted = 0, split = -1;
            for (int t = 0; t < 40; ++t) {
                const size_t i = size_t(b) * 40 + size_t(t);
                QVERIFY(tokens[i] < 49);  // the data never produces [MASK]
                const int type = p.token_types[i];
                if (type == 1 && split < 0)
                    split = t;
                QCOMPARE(type, split >= 0 && t >= split ? 1 : 0);  // segment A then segment B
                if (p.targets[i] < 0) {
                    QVERIFY(p.inputs[i] != 49);
                    continue;
                }
                ++predicted;
                masked += p.inputs[i] == 49;
                kept += p.inputs[i] == p.targets[i];
                random += p.inputs[i] != 49 && p.inputs[i] != p.targets[i];
            }
            QCOMPARE(predicted, 6);
            QVERIFY(split >= 1 && split <= 39);
            // Segment A is the row's own tokens; "is next" keeps segment B, "random next" takes the next row's.
            const int label = p.next_sentence[size_t(b)];
            randomNext += label;
            const int* own = tokens.data() + size_t(b) * 40;
            const int* next = tokens.data() + size_t((b + 1) % B) * 40;
            for (int t = 0; t < 40; ++t) {
                const size_t i = size_t(b) * 40 + size_t(t);
                const int original = p.targets[i] >= 0 ? p.targets[i] : p.inputs[i];
                QCOMPARE(original, t < split || label == 0 ? own[t] : next[t]);
            }
        }
        const double n = 6.0 * B;
        QVERIFY2(std::fabs(masked / n - 0.8) < 0.03, qPrintable(QString::number(masked / n)));
        // A random replacement can draw the original token (1 in 49): counted as kept.
        QVERIFY2(std::fabs(kept / n - 0.1) < 0.02 && std::fabs(random / n - 0.1) < 0.02,
                 qPrintable(QString("%1 %2").arg(kept / n).arg(random / n)));
        QVERIFY2(std::fabs(randomNext / double(B) - 0.5) < 0.08, qPrintable(QString::number(randomNext)));
        // One token type (RoBERTa): every id 0.
        const ModelConfig one = bertLike(2, 16, 2, 50, 40, 1);
        PretrainingBatch q;
        makePretrainingBatch(one, 5, 0, B, tokens.data(), q);
        QVERIFY(std::all_of(q.token_types.begin(), q.token_types.end(), [](int t) { return t == 0; }));
        // BERT's options refused by name without their objective.
        ModelConfig bad{2, 16, 2, 50, 40};
        bad.pooler = true;
        bad.token_types = 2;
        const FieldErrors e = validate(bad);
        QCOMPARE(e.size(), size_t(2));
        QCOMPARE(e[0].path, std::string("token_types"));
        QCOMPARE(e[1].path, std::string("pooler"));
        ModelConfig causalMlm = bertLike(2, 16, 2, 50, 40);
        causalMlm.causal = true;
        QCOMPARE(validate(causalMlm).at(0).path, std::string("causal"));
    }

    void invalidConfigsAreNamed()
    {
        // MoE settings the engine does not execute, or that contradict each other, by field.
        {
            auto named = [](const ModelConfig& c, const char* field) {
                for (const FieldError& f : validate(c))
                    if (f.path == field)
                        return true;
                return false;
            };
            ModelConfig c = mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6);
            c.moe.top_k = 5;
            QVERIFY(named(c, "moe.top_k"));
            c = mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6);
            c.moe.score_correction_bias = true;  // a softmax router
            QVERIFY(named(c, "moe.score_correction_bias"));
            c = mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6);
            c.moe.dense_layers = 2;
            QVERIFY(named(c, "moe.dense_layers"));
            c = mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6);
            c.bias = true;
            QVERIFY(named(c, "bias"));
            c = mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6);
            c.moe.shared_ffn = 8;  // without shared experts
            QVERIFY(named(c, "moe.shared_ffn"));
            QVERIFY(validate(mixtralLike(2, 16, 4, 2, 12, 4, 2, 21, 6)).empty());
        }
        const FieldErrors e = validate(ModelConfig{2, 64, 5, 10, 8});
        QCOMPARE(e.size(), size_t(1));
        QCOMPARE(e[0].path, std::string("heads"));
        QVERIFY(e[0].message.find("does not divide hidden 64") != std::string::npos);
        QCOMPARE(validate(ModelConfig{0, 64, 4, 0, 8}).size(), size_t(2));  // layers and vocab
        ModelConfig gqa = llamaLike(2, 64, 4, 3, 128, 16, 8);
        const FieldErrors g = validate(gqa);
        QCOMPARE(g.size(), size_t(1));
        QCOMPARE(g[0].path, std::string("kv_heads"));
        ModelConfig odd = gegluMqa(2, 24, 4, 5, 40, 33, 6);  // RoPE needs an even head size
        QCOMPARE(validate(odd).at(0).path, std::string("head_dim"));
        ModelConfig bothBiases = qwen2Like(2, 32, 4, 2, 88, 40, 8);  // every linear bias and "q, k, v only"
        bothBiases.bias = true;
        QCOMPARE(validate(bothBiases).size(), size_t(1));
        QCOMPARE(validate(bothBiases).at(0).path, std::string("qkv_bias"));
        ModelConfig postNormQk = bertLike(2, 16, 2, 21, 8);  // QK-norm runs in pre-norm decoder layers only
        postNormQk.qk_norm = true;
        QCOMPARE(validate(postNormQk).at(0).path, std::string("qk_norm"));
        QCOMPARE(validate(mistralLike(2, 32, 4, 2, 88, 40, 8, 4, {2})).at(0).path,
                 std::string("sliding_window.layers"));  // layer 2 of 2
        ModelConfig bidirectionalWindow = reluEncoder(2, 16, 2, 21, 5);
        bidirectionalWindow.sliding_window = {3, {}};
        QCOMPARE(validate(bidirectionalWindow).at(0).path, std::string("sliding_window"));
        EmulatedDevice d(0, roomyProfile());
        QVERIFY_THROWS_EXCEPTION(InputError, ModelExecutor<float>(ModelConfig{2, 64, 5, 10, 8}, optionsFor(1, 8),
                                                                  singleDevice(d, oneDevice(1))));
        // tp must divide the key/value heads (Megatron-LM's query groups).
        Layout tp4;
        tp4.tp = 4;
        const FieldErrors s = validateShardable(llamaLike(2, 64, 8, 2, 128, 16, 8), tp4, 1);
        QCOMPARE(s.size(), size_t(1));
        QVERIFY2(s[0].path == "layout.tp" && s[0].message.find("kv_heads 2") != std::string::npos, s[0].message.c_str());
    }

    void memoryPeaksAreExact_data()
    {
        QTest::addColumn<PrecisionMode>("precision");
        QTest::addColumn<Recompute>("recompute");
        QTest::addColumn<bool>("llama");
        for (bool llama : {false, true})
            for (PrecisionMode p : {PrecisionMode::FP32, PrecisionMode::BF16Mixed, PrecisionMode::BF16RNE, PrecisionMode::BF16SR})
                for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
                    QTest::newRow(qPrintable(QString("%1 %2 recompute=%3")
                                                 .arg(llama ? "llama" : "gpt2")
                                                 .arg(toString(p))
                                                 .arg(shardscope::toString(r))))
                        << p << r << llama;
    }
    void memoryPeaksAreExact()
    {
        QFETCH(PrecisionMode, precision);
        QFETCH(Recompute, recompute);
        QFETCH(bool, llama);
        const std::int64_t L = 3, C = 16, NH = 4, V = 37, T = 8, B = 3, N = B * T;
        // GPT-2: MHA, F = 4C, LayerNorm (2 statistics), biases, learned positions, tied.
        // Llama-like: 2 kv heads, F = 40 gated (2F in, F out), RMSNorm (1 statistic), no biases, untied.
        const std::int64_t NKV = llama ? 2 : NH, hd = C / NH, qd = NH * hd, kvd = NKV * hd, F = llama ? 40 : 4 * C;
        const std::int64_t Fin = llama ? 2 * F : F;
        const ModelConfig cfg = llama ? llamaLike(int(L), int(C), int(NH), int(NKV), int(F), int(V), int(T))
                                      : ModelConfig{int(L), int(C), int(NH), int(V), int(T)};
        // P written out: embeddings, per layer norms, qkv, projection, MLP, then the final norm and head.
        const std::int64_t normP = llama ? C : 2 * C;
        const std::int64_t layerP = 2 * normP + C * (qd + 2 * kvd) + qd * C + C * Fin + F * C +
                                    (llama ? 0 : (qd + 2 * kvd) + C + Fin + C);
        const std::int64_t P = V * C + (llama ? 0 : T * C) + L * layerP + normP + (llama ? V * C : 0);
        QCOMPARE(engine::parameterCount(cfg), P);
        const double e = precision == PrecisionMode::FP32 ? 4 : 2;
        const double master = precision == PrecisionMode::BF16Mixed ? 4 : 0;

        // Saved activations, element counts: per layer ln1, qkv, att, atty, res2, ln2, fch, fchg, res3.
        const std::int64_t att = NH * T * T * B;
        const std::int64_t perLayer = C * N + (qd + 2 * kvd) * N + att + qd * N + C * N + C * N + Fin * N + F * N + C * N;
        const std::int64_t global = C * N + C * N;  // the embedding (the first layer's input), lnf
        const std::int64_t normStats = llama ? N : 2 * N;  // RMSNorm keeps rstd only
        // fp32 whatever the precision: the norms' statistics, the vocabulary softmax, the losses.
        const std::int64_t globalStats = V * N + normStats + N;
        std::int64_t tensors = 0, stats = 0;
        switch (recompute) {
        case Recompute::None: tensors = L * perLayer + global; stats = L * 2 * normStats + globalStats; break;
        case Recompute::Selective: tensors = L * (perLayer - att) + att + global; stats = L * 2 * normStats + globalStats; break;
        case Recompute::Full: tensors = L * C * N + (perLayer - C * N) + global; stats = 2 * normStats + globalStats; break;
        }
        // Workspace: the tp partial sum, the residual gradient, the MLP gradients (gated: two), dqkv, datty, datt.
        const std::int64_t workspace = C * N + C * N + Fin * N + (llama ? F * N : 0) + (qd + 2 * kvd) * N + qd * N + att;

        EmulatedDevice d(0, roomyProfile());
        {
            ModelExecutor<float> m(cfg, optionsFor(int(B), int(T), precision), singleDevice(d, oneDevice(int(B), recompute)));
            std::vector<int> in, tg;
            tokens(int(B), int(T), int(V), 5, in, tg);
            m.forward(0, in.data(), tg.data());
            m.backward(0);
            m.reduceGradients();
            m.update(AdamWSettings{}, 1.0, 1);
        }
        const DeviceAllocator& a = d.allocator();
        QCOMPARE(a.peakBytes(MemoryCategory::Weights), double(P) * e);
        QCOMPARE(a.peakBytes(MemoryCategory::Gradients), double(P) * e);
        QCOMPARE(a.peakBytes(MemoryCategory::Optimizer), double(P) * (8 + master));
        QCOMPARE(a.peakBytes(MemoryCategory::Activations), double(tensors) * e + double(stats) * 4);
        QCOMPARE(a.peakBytes(MemoryCategory::Workspace), double(workspace) * e);
        QCOMPARE(a.peakTotalBytes(), double(P) * (2 * e + 8 + master) + double(tensors) * e + double(stats) * 4 +
                                         double(workspace) * e);
        QCOMPARE(a.usedBytes(), 0.0);  // everything returned when the model went away
    }

    void wholeModelGradientCheck_data()
    {
        QTest::addColumn<ModelConfig>("config");
        QTest::newRow("gpt2") << ModelConfig{2, 8, 2, 11, 5};
        QTest::newRow("llama: rmsnorm swiglu rope gqa untied no-bias") << llamaLike(2, 16, 4, 2, 24, 11, 5);
        QTest::newRow("qwen2: llama + q, k, v biases only") << qwen2Like(2, 16, 4, 2, 24, 11, 5);
        QTest::newRow("qwen3: llama + qk-norm (rmsnorm over head_dim)") << qwen3Like(2, 16, 4, 2, 24, 11, 5);
        ModelConfig qkLayerNorm = gegluMqa(2, 12, 3, 6, 20, 11, 5);
        qkLayerNorm.qk_norm = true;
        QTest::newRow("qk-norm layernorm (weight and bias) mqa head_dim 6") << qkLayerNorm;
        QTest::newRow("mistral: llama + sliding window 3 of 5") << mistralLike(2, 16, 4, 2, 24, 11, 5, 3);
        QTest::newRow("gpt-oss-like: window 2 on layer 0 only") << mistralLike(2, 16, 4, 2, 24, 11, 5, 2, {0});
        QTest::newRow("geglu mqa head_dim 6 tied bias") << gegluMqa(2, 12, 3, 6, 20, 11, 5);
        QTest::newRow("relu bidirectional rmsnorm learned") << reluEncoder(2, 8, 2, 11, 5);
        // T5: relative bias tables (exact and logarithmic buckets at T = 6), cross-attention, tied
        // head scaled by C^-0.5; and v1.1's GeGLU with an untied head.
        QTest::newRow("t5 relu tied relative bias cross-attention") << t5Like(2, 2, 8, 2, 16, 11, 6, 8);
        QTest::newRow("t5 v1.1 geglu untied") << t5Like(1, 2, 8, 2, 12, 11, 6, 4, MlpKind::GeGlu);
        QTest::newRow("bert: post-norm, token types, embedding norm, pooler + NSP, masked LM") << bertLike(2, 8, 2, 11, 6);
        QTest::newRow("pre-norm encoder: final norm + masked-LM transform, rmsnorm rope untied") << preNormEncoder(2, 8, 2, 11, 6);
        // MoE: router, experts, load-balancing loss in the objective (ties avoided by the seed).
        QTest::newRow("mixtral-like moe: 4 experts top-2 softmax renormalised, aux loss") << mixtralLike(2, 8, 2, 2, 6, 4, 2, 11, 5);
        ModelConfig gelu = mixtralLike(3, 8, 2, 2, 6, 4, 1, 11, 5);
        gelu.mlp = MlpKind::Gelu;
        gelu.moe.router = MoeRouter::Softmax;
        gelu.moe.layer_interval = 2;
        QTest::newRow("moe every 2nd layer: gelu top-1 softmax not renormalised") << gelu;
        ModelConfig capacity = mixtralLike(2, 8, 2, 2, 6, 4, 2, 11, 5);
        capacity.moe.capacity_factor = 0.75;  // 4 of a micro-batch's 20 copies an expert: some dropped
        capacity.positions = PositionKind::Learned;  // no exact ties (see the check)
        QTest::newRow("moe capacity factor 0.75 (Megatron's drop policy probs)") << capacity;
        QTest::newRow("deepseek-like moe: dense first layer, sigmoid scaled, bias, 2 shared experts")
            << deepseekLike(2, 8, 2, 12, 6, 6, 2, 2, 4, 11, 5);
        // MLA: q and kv latents with their norms, the shared RoPE key, q/k heads of 4 + 2 and values of 3,
        // YaRN's score factor; and without q compression, LayerNorm latents (weights and biases).
        ModelConfig mla = mlaLike(2, 8, 2, 6, 5, 4, 2, 3, 12, 11, 5);
        mla.mla.softmax_mscale = 1.3;
        QTest::newRow("mla: q rank 6, kv rank 5, rope 2, v 3, mscale 1.3") << mla;
        ModelConfig mlaPlain = mlaLike(2, 8, 2, 0, 5, 4, 2, 3, 12, 11, 5);
        mlaPlain.norm = NormKind::LayerNorm;
        QTest::newRow("mla without q compression, layernorm latents") << mlaPlain;
        // Multi-token prediction (ModelConfig.h): enorm, hnorm, eh_proj, the depth's layer and final norm,
        // the shared embedding and head; two depths chain their hidden states; DeepSeek-V3's blocks
        // (MLA + MoE last layer) for the depth's layer; tied, with LayerNorm (weights and biases).
        ModelConfig mtp = llamaLike(2, 16, 4, 2, 24, 11, 5);
        mtp.mtp = {2, 0.3};
        QTest::newRow("mtp: 2 depths on llama blocks, untied, loss scale 0.3") << mtp;
        ModelConfig mtpDs = mlaLike(2, 8, 2, 6, 5, 4, 2, 3, 12, 11, 5);
        mtpDs.moe = deepseekLike(2, 8, 2, 12, 6, 6, 2, 2, 4, 11, 5).moe;
        mtpDs.mtp = {1, 0.1};
        QTest::newRow("mtp: deepseek-v3 blocks (mla + moe depth layer), 1 depth") << mtpDs;
        ModelConfig mtpTied = gegluMqa(2, 12, 3, 6, 20, 11, 5);
        mtpTied.positions = PositionKind::Rotary;
        mtpTied.mtp = {1, 0.5};
        QTest::newRow("mtp: tied head, layernorm, biases, geglu mqa, 1 depth") << mtpTied;
    }
    void wholeModelGradientCheck()
    {
        // Double precision, every parameter, central differences of the mean loss.
        QFETCH(ModelConfig, config);
        const int B = 2, T = config.seq;
        EmulatedDevice d(0, roomyProfile());
        ExecutorOptions o = optionsFor(B, T);
        o.init_std = 0.3;  // gradients well away from zero everywhere
        o.seed = 3;
        o.global_tokens = lossTokens(config, B);
        ModelExecutor<double> m(config, o, singleDevice(d, oneDevice(B)));
        // Capacity mode drops by router weight, where two tokens with the same history tie exactly:
        // its model has learned positions, and the data seed is the first from 9 whose two
        // sequences open with different tokens.
        std::uint64_t dataSeed = 9;
        while (config.moe.capacity_factor > 0 && !distinctOpenings(stepData(config, B, dataSeed).in, B, T))
            ++dataSeed;
        const StepData data = stepData(config, B, dataSeed);
        const std::vector<int>&in = data.in, &tg = data.tg;
        const double tokensN = double(lossTokens(config, B));
        // The objective: the mean loss, plus each MoE layer's load-balancing loss weighted as the
        // executor weighs it (this micro-batch's loss tokens over the step's: 1 here).
        auto loss = [&] {
            const double lm = m.forward(0, in.data(), tg.data(), 0, data.typesOrNull(), data.nspOrNull()) / tokensN;
            const double mtp = config.mtp.loss_scale * m.lastMtpLoss();  // 0 without MTP
            return lm + (m.lastAuxLoss() + mtp) * tokensN / double(o.global_tokens);
        };
        loss();
        m.backward(0);
        const std::int64_t P = m.localParameters();
        const std::vector<double> analytic(m.localGrads(), m.localGrads() + P);
        double* w = m.localWeights();
        double worst = 0, largest = 0;
        const double h = 1e-5;
        for (std::int64_t i = 0; i < P; ++i) {
            const double old = w[i];
            w[i] = old + h;
            const double lp = loss();
            w[i] = old - h;
            const double lm = loss();
            w[i] = old;
            const double numeric = (lp - lm) / (2 * h);
            worst = std::max(worst, std::fabs(numeric - analytic[size_t(i)]) / std::max(1e-3, std::fabs(numeric)));
            largest = std::max(largest, std::fabs(numeric));
        }
        QVERIFY2(worst < 1e-5, qPrintable(QString("worst relative error %1").arg(worst)));
        qInfo("worst relative error %.3g over %lld parameters", worst, (long long)P);
        QVERIFY(largest > 1e-2);  // the check saw real gradients
        // Every tensor receives gradient (wiring: head, positions, every layer).
        for (const ShardTensor& t : m.tensors()) {
            double s = 0;
            for (std::int64_t i = 0; i < t.count; ++i)
                s += std::fabs(analytic[size_t(t.offset + i)]);
            // DeepSeek-V3's score-correction bias steers the choice only: no gradient.
            if (t.role == TensorRole::ExpertBias)
                QCOMPARE(s, 0.0);
            else
                QVERIFY2(s > 0, t.name.c_str());
        }
        if (config.moe.enabled() && config.moe.aux_loss_coeff > 0)
            QVERIFY(m.lastAuxLoss() > 0);
        if (config.moe.capacity_factor > 0)
            QVERIFY(m.droppedCopies() > 0);
        if (config.mtp.enabled()) {
            // A depth's loss is a cross-entropy over V outcomes near the uniform ln V at this scale.
            QVERIFY(m.lastMtpLoss() > 0.5 * std::log(double(config.vocab)));
            QVERIFY(m.lastMtpLoss() < 3 * std::log(double(config.vocab)));
        }
    }

    void recomputationKeepsGradients()
    {
        for (const ModelConfig& cfg : {ModelConfig{3, 16, 4, 23, 6}, llamaLike(3, 16, 4, 2, 24, 23, 6),
                                       mlaLike(3, 16, 4, 8, 6, 4, 2, 3, 24, 23, 6),
                                       t5Like(2, 2, 16, 4, 24, 23, 6, 8), bertLike(3, 16, 4, 23, 6)}) {
            const StepData data = stepData(cfg, 2, 4);
            std::vector<std::vector<double>> grads;
            std::vector<double> losses;
            for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
                EmulatedDevice d(0, roomyProfile(), 2);
                ExecutorOptions o = optionsFor(2, 6);
                o.init_std = 0.2;
                o.global_tokens = lossTokens(cfg, 2);
                ModelExecutor<double> m(cfg, o, singleDevice(d, oneDevice(2, r)));
                losses.push_back(m.forward(0, data.in.data(), data.tg.data(), 0, data.typesOrNull(), data.nspOrNull()));
                m.backward(0);
                grads.emplace_back(m.localGrads(), m.localGrads() + m.localParameters());
            }
            for (size_t k = 1; k < grads.size(); ++k) {
                QCOMPARE(losses[k], losses[0]);
                double diff = 0;
                for (size_t i = 0; i < grads[0].size(); ++i)
                    diff = std::max(diff, std::fabs(grads[k][i] - grads[0][i]));
                QVERIFY2(diff < 1e-12, qPrintable(QString("mode %1: %2").arg(k).arg(diff)));
            }
        }
    }

    void flopsMatchCoreFormula_data()
    {
        QTest::addColumn<Recompute>("recompute");
        QTest::addColumn<bool>("llama");
        QTest::addColumn<int>("window");  // a sliding window on layer 0 (llama only); 0: none
        for (bool llama : {false, true}) {
            QTest::newRow(llama ? "llama none" : "gpt2 none") << Recompute::None << llama << 0;
            QTest::newRow(llama ? "llama selective" : "gpt2 selective") << Recompute::Selective << llama << 0;
            QTest::newRow(llama ? "llama full" : "gpt2 full") << Recompute::Full << llama << 0;
        }
        for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
            QTest::newRow(qPrintable(QString("llama, window 5 on layer 0, ") + toString(r))) << r << true << 5;
    }
    void flopsMatchCoreFormula()
    {
        QFETCH(Recompute, recompute);
        QFETCH(bool, llama);
        QFETCH(int, window);
        ModelConfig cfg = llama ? llamaLike(2, 32, 4, 2, 88, 41, 12) : ModelConfig{2, 32, 4, 41, 12};
        if (window > 0)
            cfg.sliding_window = {window, {0}};
        const int B = 3;
        const double N = B * cfg.seq;
        // Products of one step: forward + backward (twice the forward) = 3x core's forward FLOPs;
        // full recomputation adds the layers' forward again (all but the logits), selective the
        // attention core: scores and attention over V (2 x 2*T*qd per token and layer).
        const double forward = double(forwardFlopsPerToken(specOf(cfg), cfg.seq)) * N;
        const double layersForward = forward - 2.0 * cfg.hidden * cfg.vocab * N;
        double expected = 3 * forward;
        if (recompute == Recompute::Full)
            expected += layersForward;
        // (A sliding layer's core over its window of keys: core's attentionKeys.)
        if (recompute == Recompute::Selective)
            for (int l = 0; l < cfg.layers; ++l)
                expected += 2 * 2.0 * double(attentionKeys(specOf(cfg), cfg.seq, cfg.windowOf(l) > 0)) * cfg.qDim() * N;
        EmulatedDevice d(0, roomyProfile());
        ModelExecutor<float> m(cfg, optionsFor(B, cfg.seq), singleDevice(d, oneDevice(B, recompute)));
        std::vector<int> in, tg;
        tokens(B, cfg.seq, cfg.vocab, 1, in, tg);
        m.forward(0, in.data(), tg.data());
        m.backward(0);
        m.reduceGradients();
        m.update(AdamWSettings{}, 1.0, 1);
        const DeviceCounters& c = d.counters();
        QCOMPARE(c.flops[size_t(KernelKind::Matmul)] + c.flops[size_t(KernelKind::Attention)], expected);
        QVERIFY(d.clockSeconds() > 0);
        QVERIFY(c.bytes_read > 0 && c.bytes_written > 0);
    }

    // MLA's products: core's forward count (its projections, Q K^T over Nd + P and P V over Vd
    // per head) x 3, full recomputation adding the layers' forward again.
    void mlaFlopsMatchCoreFormula()
    {
        for (Recompute recompute : {Recompute::None, Recompute::Full})
            for (int Q : {0, 12}) {
                const ModelConfig cfg = mlaLike(2, 32, 4, Q, 10, 6, 4, 5, 88, 41, 12);
                const int B = 3;
                const double N = B * cfg.seq;
                const double forward = double(forwardFlopsPerToken(specOf(cfg), cfg.seq)) * N;
                const double layersForward = forward - 2.0 * cfg.hidden * cfg.vocab * N;
                const double expected = 3 * forward + (recompute == Recompute::Full ? layersForward : 0.0);
                EmulatedDevice d(0, roomyProfile());
                ModelExecutor<float> m(cfg, optionsFor(B, cfg.seq), singleDevice(d, oneDevice(B, recompute)));
                std::vector<int> in, tg;
                tokens(B, cfg.seq, cfg.vocab, 1, in, tg);
                m.forward(0, in.data(), tg.data());
                m.backward(0);
                const DeviceCounters& c = d.counters();
                QCOMPARE(c.flops[size_t(KernelKind::Matmul)] + c.flops[size_t(KernelKind::Attention)], expected);
            }
    }

    void t5FlopsMatchCoreFormula_data()
    {
        QTest::addColumn<Recompute>("recompute");
        QTest::newRow("t5 none") << Recompute::None;
        QTest::newRow("t5 selective") << Recompute::Selective;
        QTest::newRow("t5 full") << Recompute::Full;
    }
    void t5FlopsMatchCoreFormula()
    {
        // Core's encoder-decoder formula per decoder token: encoder layers, decoder layers with
        // cross-attention (its q, k, v, projection and attention over the T encoder tokens), logits.
        QFETCH(Recompute, recompute);
        const ModelConfig cfg = t5Like(2, 3, 32, 4, 64, 41, 12, 8);
        const int B = 3;
        const double N = B * cfg.seq;
        const double forward = double(forwardFlopsPerToken(specOf(cfg), cfg.seq)) * N;
        double expected = 3 * forward;
        if (recompute == Recompute::Full)
            expected += forward - 2.0 * cfg.hidden * cfg.vocab * N;
        if (recompute == Recompute::Selective)  // each decoder layer recomputes two attention cores
            expected += double(cfg.layers + 2 * cfg.decoder_layers) * 2 * 2.0 * cfg.seq * cfg.qDim() * N;
        EmulatedDevice d(0, roomyProfile());
        ModelExecutor<float> m(cfg, optionsFor(B, cfg.seq), singleDevice(d, oneDevice(B, recompute)));
        std::vector<int> in, tg;
        tokens(B, cfg.seq, cfg.vocab, 1, in, tg);
        m.forward(0, in.data(), tg.data());
        m.backward(0);
        const DeviceCounters& c = d.counters();
        QCOMPARE(c.flops[size_t(KernelKind::Matmul)] + c.flops[size_t(KernelKind::Attention)], expected);
    }

    void t5RefusesWhatItDoesNotExecute()
    {
        // Named refusals: biases, absolute positions in an encoder-decoder, relative buckets
        // elsewhere, pipeline stages and context parallelism.
        ModelConfig biased = t5Like(2, 2, 16, 4, 32, 16, 8, 8);
        biased.bias = true;
        QCOMPARE(engine::validate(biased).size(), size_t(1));
        QCOMPARE(engine::validate(biased)[0].path, std::string("bias"));
        ModelConfig learned = t5Like(2, 2, 16, 4, 32, 16, 8, 8);
        learned.positions = PositionKind::Learned;
        QCOMPARE(engine::validate(learned)[0].path, std::string("positions"));
        ModelConfig decoderOnly{2, 16, 4, 16, 8};
        decoderOnly.positions = PositionKind::Relative;
        QCOMPARE(engine::validate(decoderOnly)[0].path, std::string("positions"));
        Layout pp;
        pp.pp = 2;
        Layout cp;
        cp.cp = 2;
        QCOMPARE(validateShardable(t5Like(2, 2, 16, 4, 32, 16, 8, 8), pp, 1)[0].path, std::string("layout.pp"));
        QCOMPARE(validateShardable(t5Like(2, 2, 16, 4, 32, 16, 8, 8), cp, 1)[0].path, std::string("layout.cp"));
        QVERIFY(describe(t5Like(2, 2, 16, 4, 32, 16, 8, 8)).find("T5 style encoder-decoder") != std::string::npos);
    }

    void bf16ModesStoreBf16Values()
    {
        for (const ModelConfig& cfg : {ModelConfig{2, 16, 2, 19, 6}, llamaLike(2, 16, 4, 2, 24, 19, 6)})
            for (PrecisionMode p : {PrecisionMode::BF16Mixed, PrecisionMode::BF16RNE, PrecisionMode::BF16SR}) {
                EmulatedDevice d(0, roomyProfile());
                ModelExecutor<float> m(cfg, optionsFor(2, 6, p), singleDevice(d, oneDevice(2)));
                std::vector<int> in, tg;
                tokens(2, 6, 19, 2, in, tg);
                m.forward(0, in.data(), tg.data());
                m.backward(0);
                m.reduceGradients();
                for (std::int64_t i = 0; i < m.localParameters(); ++i)
                    QCOMPARE(m.localGrads()[i], roundToBf16NearestEven(m.localGrads()[i]));
                m.update(AdamWSettings{1e-2, 0.9, 0.95, 1e-8, 0.1}, 1.0, 1);
                for (std::int64_t i = 0; i < m.localParameters(); ++i)
                    QCOMPARE(m.localWeights()[i], roundToBf16NearestEven(m.localWeights()[i]));
            }
    }

    void sameSeedSameLosses()
    {
        TrainRequest r;
        r.model = llamaLike(2, 32, 4, 2, 64, 29, 16);
        r.batch = 4;
        r.steps = 6;
        r.seed = 42;
        r.layout.micro_batch = 2;
        auto losses = [&](const TrainRequest& req, int threads) {
            EmulatedDevice d(0, roomyProfile(), threads);
            const auto src = makeTokenSource(req);
            return runTraining(req, *src, d).losses();
        };
        const std::vector<double> a = losses(r, 2);
        QCOMPARE(a.size(), size_t(6));
        QCOMPARE(losses(r, 1), a);  // bitwise, whatever the thread count
        r.precision = PrecisionMode::BF16SR;
        const std::vector<double> sr = losses(r, 2);
        QCOMPARE(losses(r, 1), sr);
        r.precision = PrecisionMode::FP32;
        r.seed = 43;
        QVERIFY(losses(r, 2) != a);
    }

    // Optimizer offload: the states in host memory, the gradients down and the weights up the host
    // link each step, the same training as on the device.
    void optimizerOffloadMovesStatesToTheHost()
    {
        TrainRequest r;
        r.model = llamaLike(2, 32, 4, 2, 64, 29, 16);
        r.batch = 4;
        r.steps = 3;
        r.layout.micro_batch = 4;
        r.layout.zero_stage = 1;
        const auto src = makeTokenSource(r);
        DeviceProfile profile = roomyProfile();
        profile.host_link_bytes_per_second = 2e10;
        profile.host_memory_bytes_per_second = 5e10;
        EmulatedDevice onDevice(0, profile);
        const Measurement kept = runTraining(r, *src, onDevice);
        r.layout.offload = Offload::Optimizer;
        EmulatedDevice offloaded(0, profile);
        const Measurement m = runTraining(r, *src, offloaded);
        QVERIFY2(!m.error, m.error ? m.error->message.c_str() : "");
        QCOMPARE(m.losses(), kept.losses());  // the same AdamW, wherever it runs
        const double P = double(engine::parameterCount(r.model));
        const DeviceMeasurement& d = m.devices.at(0);
        QCOMPARE(d.memory_peak_bytes[size_t(MemoryCategory::Optimizer)], 0.0);
        QCOMPARE(d.memory_peak_bytes[size_t(MemoryCategory::Host)], 8 * P);  // fp32 m and v
        QCOMPARE(kept.devices.at(0).memory_peak_bytes[size_t(MemoryCategory::Optimizer)], 8 * P);
        // Host memory is not the device's: the device's peak is smaller by the states.
        QCOMPARE(d.memory_peak_total_bytes, kept.devices.at(0).memory_peak_total_bytes - 8 * P);
        QCOMPARE(d.counters.host_bytes_to_host, 3 * 4 * P);    // fp32 gradients down, every step
        QCOMPARE(d.counters.host_bytes_to_device, 3 * 4 * P);  // the updated weights up
        // Per step and parameter the host reads the gradient, reads and writes m and v, reads and
        // writes the fp32 weight: 4 + 16 + 8 bytes; the clock pays link and host memory time.
        QCOMPARE(d.counters.host_memory_bytes, 3 * 28 * P);
        QCOMPARE(d.counters.host_seconds, 3 * (8 * P / 2e10 + 28 * P / 5e10));
        QCOMPARE(d.counters.flops[size_t(KernelKind::Optimizer)], 0.0);  // AdamW ran on the host
        // No host link: refused by name before anything runs.
        EmulatedDevice bare(0, roomyProfile());
        try {
            runTraining(r, *src, bare);
            QFAIL("offload without a host link was accepted");
        } catch (const InputError& e) {
            QVERIFY2(std::string(e.what()).find("layout.offload") != std::string::npos, e.what());
        }
        QCOMPARE(bare.allocator().usedBytes(), 0.0);
    }

    void outOfMemoryIsReportedAndSurvived()
    {
        TrainRequest r;
        r.model = ModelConfig{2, 32, 4, 29, 16};
        r.batch = 4;
        r.steps = 2;
        const double P = double(engine::parameterCount(r.model));
        // Weights and gradients fit (8P bytes), AdamW's two moments (8P more) do not.
        EmulatedDevice d(7, roomyProfile(12 * P));
        const auto src = makeTokenSource(r);
        const Measurement m = runTraining(r, *src, d);
        QVERIFY(m.error.has_value());
        QCOMPARE(m.error->device, 7);
        const QString msg = QString::fromStdString(m.error->message);
        QVERIFY2(msg.contains("device 7 (test)") && msg.contains("optimizer") && msg.contains("requested") &&
                     msg.contains("free"),
                 qPrintable(msg));
        QVERIFY2(msg.contains(QString::fromStdString(formatCount(std::int64_t(8 * P)))), qPrintable(msg));
        QVERIFY(m.steps.empty());
        QCOMPARE(m.devices.size(), size_t(1));
        QCOMPARE(m.devices[0].memory_peak_bytes[size_t(MemoryCategory::Weights)], 4 * P);
        QCOMPARE(d.allocator().usedBytes(), 0.0);
        // The same device runs a model that fits.
        r.model = ModelConfig{1, 8, 2, 29, 4};
        const Measurement ok = runTraining(r, *src, d);
        QVERIFY(!ok.error);
        QCOMPARE(ok.steps.size(), size_t(2));
    }
};

QTEST_GUILESS_MAIN(TstEngineModel)
#include "tst_engine_model.moc"
