#include "StepTimeBound.h"
#include "MlaCost.h"

#include <algorithm>

namespace shardscope {

StepTimeBound::StepTimeBound(const CostModel& model)
    : model_(model),
      peak_(model.peakFlopsPerDevice()),
      efficiency_(model.matmulEfficiency()),
      grouped_efficiency_(model.matmulEfficiency() * model.params().grouped_gemm_efficiency),
      half_dim_(model.params().matmul_half_dim),
      overhead_s_(model.params().kernel_overhead_s)
{
}

double StepTimeBound::gemm(double M, double N, double K, double batch, double efficiency) const
{
    // GemmPricer's compute time and launch (its max with the memory-bound time can only add).
    const double n = std::min({M, N, K});
    return 2 * M * N * K * batch / (peak_ * (efficiency * n / (n + half_dim_))) + overhead_s_;
}

StepTimeBound::Mesh StepTimeBound::mesh(const Layout& l) const
{
    const ModelSpec& m = model_.problem().model;
    Mesh out;
    out.pp = l.pp;
    out.stage = {0, l.pp - 1, l.pp > 2 ? l.pp / 2 : 0};
    const bool encoderDecoder = m.family == ModelFamily::EncoderDecoder;
    for (size_t i = 0; i < 3; ++i) {
        const int layers = l.stageLayers(m.totalLayers(), out.stage[i]);
        out.layers[i] = layers;
        if (encoderDecoder || !m.moe.enabled()) {
            (encoderDecoder && m.moe.enabled() ? out.either : out.dense)[i] = layers;
            continue;
        }
        out.moe[i] = m.moeLayers(l.stageFirstLayer(m.totalLayers(), out.stage[i]), layers);
        out.dense[i] = layers - out.moe[i];
    }
    return out;
}

double StepTimeBound::bound(const Mesh& mesh, const Layout& l, bool recompute) const
{
    const Problem& p = model_.problem();
    const ModelSpec& m = p.model;
    const TrainingSpec& t = p.training;
    const double h = m.hidden, tp = l.tp;
    const double T = l.micro_batch * (double(t.seq_len) / l.cp);  // tokens per micro-batch
    const double matrices = m.mlp == MlpKind::SwiGlu || m.mlp == MlpKind::GeGlu ? 3 : 2;
    // One layer's GEMMs, forward (CostModel.cpp, stageCost).
    double projections = 0;
    if (m.mla.enabled()) {
        const MlaDeviceShapes mla = mlaDeviceShapes(m, l.tp);
        for (int i = 0; i < mla.gemm_count; ++i)
            projections += gemm(T, mla.gemms[size_t(i)].n, mla.gemms[size_t(i)].k, 1, efficiency_);
    } else {
        const double q = double(m.qDim()) / tp;
        const double kv = (m.kv_heads % l.tp == 0 ? double(m.kv_heads / l.tp) : 1.0) * m.head_dim;
        projections = gemm(T, q + 2 * kv, h, 1, efficiency_) + gemm(T, h, q, 1, efficiency_);
    }
    const double f = double(m.ffn_hidden) / tp;
    const double dense = gemm(T, (matrices - 1) * f, h, 1, efficiency_) + gemm(T, h, f, 1, efficiency_);
    double moe = 0;
    if (m.moe.enabled()) {
        const double tokens = T / (l.sequence_parallel ? tp : 1.0);  // T_moe
        const double etp = l.expertTensorParallel();
        const double localExperts = double(m.moe.experts) / l.ep;
        const double expertFfn = double(m.expertFfn()) / etp;
        // The busiest rank's tokens per local expert: imbalance x T_moe x top-k x etp / local experts.
        const double busy = t.moe_imbalance * tokens * m.moe.top_k * etp / localExperts;
        const double shared = m.moe.shared_experts * double(m.moe.shared_ffn_hidden) / tp;
        moe = gemm(busy, (matrices - 1) * expertFfn, h, localExperts, grouped_efficiency_) +
              gemm(busy, h, expertFfn, localExperts, grouped_efficiency_) +
              (shared > 0 ? gemm(T, (matrices - 1) * shared, h, 1, efficiency_) + gemm(T, h, shared, 1, efficiency_)
                          : 0.0) +
              gemm(tokens, m.moe.experts, h, 1, efficiency_);
    }
    const double head = gemm(T, double(m.vocab) / tp, h, 1, efficiency_);  // logits, last stage

    const double v = l.schedule == PipelineSchedule::Interleaved ? l.virtual_stages : 1;
    std::array<double, 3> stage{};  // seconds per micro-batch, at least
    for (size_t i = 0; i < 3; ++i) {
        const double layersForward = mesh.layers[i] * projections + mesh.moe[i] * moe + mesh.dense[i] * dense +
                                     mesh.either[i] * (m.moe.enabled() ? std::min(moe, dense) : dense);
        // Full recomputation repeats its share of the layers' forward (CostModel: recomputed x fwdLayers).
        const int chunkLayers = std::max(1, mesh.layers[i] / int(v));
        const double share = recompute ? double(l.recomputedLayers(chunkLayers)) / chunkLayers : 0.0;
        // Backward: 2x the forward's GEMMs (activation and weight gradients).
        stage[i] = 3 * (layersForward + (mesh.stage[i] == l.pp - 1 ? head : 0.0)) + share * layersForward;
    }
    // The slowest stage is the cost model's argmax of these three; the bubble's typical stage
    // the middle one, or the mean of the ends.
    const double micro = microBatchesPerStep(l, t);
    const double slowest = std::max({stage[0], stage[1], stage[2]});
    const double typical = mesh.pp > 2 ? stage[2] : 0.5 * (stage[0] + stage[1]);
    const double seconds = micro * slowest + (mesh.pp - 1) * typical / v;
    // (A margin for the rounding of sums taken in another order than the cost model's.)
    return seconds * (1 - 1e-9);
}

double StepTimeBound::stepTime(const Mesh& mesh, const Layout& l) const { return bound(mesh, l, true); }

double StepTimeBound::stepTimeWithoutRecompute(const Mesh& mesh, const Layout& l) const
{
    return bound(mesh, l, false);
}

} // namespace shardscope
