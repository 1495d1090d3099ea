#include "StepTimeBound.h"
#include "MlaCost.h"

#include <algorithm>

namespace shardscope {

StepTimeBound::StepTimeBound(const CostModel& model)
    : model_(model), rate_(model.peakFlopsPerDevice() * model.matmulEfficiency())
{
}

double StepTimeBound::perLayerFlopsPerToken(int tp) const
{
    const ModelSpec& m = model_.problem().model;
    const double h = m.hidden;
    // Attention projections (CostModel.cpp: gemm(T, q + 2 kv, h) + gemm(T, h, q); MLA: its gemms);
    // KV heads split when tp divides them, else one replicated head per device.
    double attention = 0;
    if (m.mla.enabled()) {
        const MlaDeviceShapes mla = mlaDeviceShapes(m, tp);
        for (int i = 0; i < mla.gemm_count; ++i)
            attention += 2 * mla.gemms[size_t(i)].n * mla.gemms[size_t(i)].k;
    } else {
        const double q = double(m.qDim()) / tp;
        const double kv = (m.kv_heads % tp == 0 ? double(m.kv_heads / tp) : 1.0) * m.head_dim;
        attention = 2 * h * (q + 2 * kv) + 2 * h * q;
    }
    const double matrices = m.mlp == MlpKind::SwiGlu || m.mlp == MlpKind::GeGlu ? 3 : 2;
    const double dense = 2 * h * matrices * double(m.ffn_hidden) / tp;
    if (!m.moe.enabled())
        return attention + dense;
    // Per token of the device's T: the routed copies (imbalance x top-k of the T / sp tokens,
    // each through ffn / etp on etp ranks: ep and etp cancel), the shared experts over tp, the
    // router over the T / sp tokens. sp is tp under MoE (core's rule); T / tp is the least either way.
    const double sequenceShard = tp;
    const double imbalance = model_.problem().training.moe_imbalance;
    const double routed = 2 * imbalance * m.moe.top_k * h * matrices * double(m.expertFfn()) / sequenceShard;
    const double shared = 2 * h * matrices * m.moe.shared_experts * double(m.moe.shared_ffn_hidden) / tp;
    const double router = 2 * h * double(m.moe.experts) / sequenceShard;
    const double moe = routed + shared + router;
    // A model with dense layers too: the cheaper MLP for every layer.
    return attention + (m.moeLayers(0, m.layers) < m.layers ? std::min(moe, dense) : moe);
}

StepTimeBound::Mesh StepTimeBound::mesh(const Layout& l) const
{
    const Problem& p = model_.problem();
    const ModelSpec& m = p.model;
    Mesh out;
    out.pp = l.pp;
    out.stage = {0, l.pp - 1, l.pp > 2 ? l.pp / 2 : 0};
    const double layerS = perLayerFlopsPerToken(l.tp) / rate_;
    // Logits: gemm(T, V / tp, h) on the last stage.
    const double headS = 2 * double(m.vocab) / l.tp * m.hidden / rate_;
    for (size_t i = 0; i < 3; ++i) {
        out.layers[i] = l.stageLayers(m.totalLayers(), out.stage[i]);
        out.layer_s[i] = out.layers[i] * layerS;
        out.head_s[i] = out.stage[i] == l.pp - 1 ? headS : 0.0;
    }
    out.tokens_per_replica = double(p.training.global_batch / l.dp) * (double(p.training.seq_len) / l.cp);
    return out;
}

double StepTimeBound::bound(const Mesh& mesh, const Layout& l, bool recompute) const
{
    const TrainingSpec& t = model_.problem().training;
    const double v = l.schedule == PipelineSchedule::Interleaved ? l.virtual_stages : 1;
    const double tokens = l.micro_batch * (double(t.seq_len) / l.cp);  // T
    const double m = microBatchesPerStep(l, t);
    std::array<double, 3> stage{};  // seconds per micro-batch, at least
    for (size_t i = 0; i < 3; ++i) {
        // Full recomputation repeats its share of the layers' forward (CostModel: recomputed x fwdLayers).
        const int chunkLayers = std::max(1, mesh.layers[i] / int(v));
        const double share = recompute ? double(l.recomputedLayers(chunkLayers)) / chunkLayers : 0.0;
        stage[i] = tokens * (3 * (mesh.layer_s[i] + mesh.head_s[i]) + share * mesh.layer_s[i]);
    }
    // The slowest stage is the cost model's argmax of these three; the bubble's typical stage
    // the middle one, or the mean of the ends.
    const double slowest = std::max({stage[0], stage[1], stage[2]});
    const double typical = mesh.pp > 2 ? stage[2] : 0.5 * (stage[0] + stage[1]);
    const double seconds = m * slowest + (mesh.pp - 1) * typical / v;
    // (A margin for the rounding of sums taken in another order than the cost model's.)
    return seconds * (1 - 1e-9);
}

double StepTimeBound::stepTime(const Mesh& mesh, const Layout& l) const { return bound(mesh, l, true); }

double StepTimeBound::stepTimeWithoutRecompute(const Mesh& mesh, const Layout& l) const
{
    return bound(mesh, l, false);
}

} // namespace shardscope
