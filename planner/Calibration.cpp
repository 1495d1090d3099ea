#include "Calibration.h"
#include "BuiltinSpecs.h"
#include "CostModel.h"
#include "JsonReader.h"
#include "SpecJson.h"

#include <Eigen/Dense>

#include <QFile>
#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardscope {

std::vector<CalibrationCase> calibrationCasesFromJson(const QJsonObject& json, const SpecLookup& specs,
                                                      FieldErrors& errors)
{
    std::vector<CalibrationCase> out;
    JsonReader r(json, "", errors);
    checkSchema(r, "calibration-cases", 1);
    const QJsonArray cases = json.value(QLatin1String("cases")).toArray();
    for (qsizetype i = 0; i < cases.size(); ++i) {
        const std::string path = "cases[" + std::to_string(i) + "]";
        JsonReader c(cases[i].toObject(), path, errors);
        CalibrationCase cc;
        cc.id = c.string("id", true);
        cc.source = c.string("source", true);
        cc.metric = c.string("metric", true);
        if (cc.metric != "tflops_per_device" && cc.metric != "model_tflops_per_device" && cc.metric != "sequences_per_s" &&
            cc.metric != "tokens_per_s_per_device")
            c.error("metric", "unknown metric \"" + cc.metric + "\"");
        cc.measured = c.number("measured", 0, true, 1e-9, 1e12);
        const size_t before = errors.size();
        auto model = modelFromJson(c.object("model", true).json(), path + ".model", errors);
        auto training = trainingFromJson(c.object("training", true).json(), path + ".training", errors);
        const std::string node = c.string("node", true);
        try {
            cc.problem.cluster.node = specs.node(node);
        } catch (const std::exception& e) {
            c.error("node", e.what());
        }
        cc.problem.cluster.nodes = c.integer("nodes", 1, true, 1, 1'000'000);
        cc.layout = parseLayout(c.string("layout", true), errors);
        if (c.has("implementation")) {
            JsonReader impl = c.object("implementation", false);
            impl.rejectUnknownKeys({"multi_nic_rings", "overlap_grad_reduce", "dp_overlap", "framework", "why"});
            if (impl.has("multi_nic_rings"))
                cc.multi_nic_rings = impl.boolean("multi_nic_rings", true);
            if (impl.has("overlap_grad_reduce"))
                cc.overlap_grad_reduce = impl.boolean("overlap_grad_reduce", true);
            if (impl.has("dp_overlap"))
                cc.dp_overlap = impl.number("dp_overlap", 0, true, 0, 1.0);
            if (impl.has("framework")) {
                const std::string name = impl.string("framework", true);
                cc.framework = exportFormatFromString(name);
                if (!cc.framework)
                    impl.error("framework", "unknown framework \"" + name + "\" (one of: " + exportFormatChoices() + ")");
            }
            cc.implementation_why = impl.string("why", true);
        }
        if (c.has("tuned")) {
            JsonReader tuned = c.object("tuned", false);
            tuned.rejectUnknownKeys({"mb", "why"});
            const QJsonArray sizes = tuned.json().value(QLatin1String("mb")).toArray();
            for (const QJsonValue& v : sizes) {
                const int mb = v.toInt(0);
                if (mb < 1 || double(mb) != v.toDouble())
                    tuned.error("mb", "micro-batch sizes must be positive integers");
                else
                    cc.tuned_micro_batches.push_back(mb);
            }
            if (cc.tuned_micro_batches.empty())
                tuned.error("mb", "expected a list of micro-batch sizes, e.g. [1, 2, 4]");
            cc.tuned_why = tuned.string("why", true);
        }
        if (c.has("left_out_of_fit"))
            cc.left_out_of_fit = c.string("left_out_of_fit", true);
        if (errors.size() != before || !model || !training)
            continue;
        cc.problem.model = *model;
        cc.problem.training = *training;
        cc.family = chipFamily(cc.problem.cluster.node.chip);
        resolveDataParallel(cc.layout, cc.problem.cluster.devices(), errors);
        for (const FieldError& e : validate(cc.layout, cc.problem.model, cc.problem.cluster, cc.problem.training,
                                            path + ".layout"))
            errors.push_back(e);
        out.push_back(cc);
    }
    return out;
}

std::vector<CalibrationCase> builtinCalibrationCases()
{
    QFile f(QStringLiteral(":/planner/calibration-cases.json"));
    if (!f.open(QIODevice::ReadOnly))
        throw std::runtime_error("built-in calibration cases missing (:/planner/calibration-cases.json)");
    FieldErrors errors;
    const QJsonObject json = parseJsonObject(f.readAll(), "calibration-cases.json", errors);
    auto cases = calibrationCasesFromJson(json, BuiltinSpecs::instance(), errors);
    if (!errors.empty())
        throw std::runtime_error("built-in calibration cases are invalid:\n" + joinErrors(errors));
    return cases;
}

CostModelParams CalibrationCase::ownTerms(const CostModelParams& params) const
{
    CostModelParams own = params;
    if (multi_nic_rings)
        own.multi_nic_rings = *multi_nic_rings;
    if (overlap_grad_reduce)
        own.overlap_grad_reduce = *overlap_grad_reduce;
    if (dp_overlap)
        own.dp_overlap = *dp_overlap;
    return own;
}

namespace {

double metricOf(const CalibrationCase& c, const Layout& layout, const Prediction& p)
{
    if (c.metric == "tflops_per_device")  // Megatron's paper reports hardware FLOPs (eq. 3, with recomputation)
        return p.hardware_flops_per_step / (p.step_time_s * double(layout.devices())) / 1e12;
    if (c.metric == "model_tflops_per_device")  // Megatron-Core's logs: model FLOPs, no recomputation
        return p.model_flops_per_step / (p.step_time_s * double(layout.devices())) / 1e12;
    if (c.metric == "tokens_per_s_per_device")  // Megatron-Bridge's performance summary: tokens/s/GPU
        return p.tokens_per_s / double(layout.devices());
    return double(c.problem.training.global_batch) / p.step_time_s;
}

} // namespace

CalibrationCase::Predicted CalibrationCase::predicted(const CostModelParams& params) const
{
    const CostModel model(problem, ownTerms(params), framework);
    Predicted best;
    best.layout = layout;
    bool found = false;
    for (int mb : tuned_micro_batches) {
        Layout candidate = layout;
        candidate.micro_batch = mb;
        // whole micro-batches per data-parallel rank, as every framework requires
        if (problem.training.global_batch % (int64_t(candidate.dp) * mb) != 0 ||
            !validate(candidate, problem.model, problem.cluster, problem.training, "layout").empty())
            continue;
        Prediction p = model.evaluate(candidate);
        // a run that happened fitted: prefer what fits, then the fastest
        const bool better = !found || (p.feasible && !best.prediction.feasible) ||
                            (p.feasible == best.prediction.feasible && p.step_time_s < best.prediction.step_time_s);
        if (better) {
            best.layout = candidate;
            best.prediction = std::move(p);
            best.tuned = found = true;
        }
    }
    if (!found)
        best.prediction = model.evaluate(layout);
    return best;
}

Layout CalibrationCase::predictedLayout(const CostModelParams& params) const
{
    return predicted(params).layout;
}

double predictMetric(const CalibrationCase& c, const CostModelParams& params, bool* feasible)
{
    const CalibrationCase::Predicted p = c.predicted(params);
    if (feasible)
        *feasible = p.prediction.feasible;
    return metricOf(c, p.layout, p.prediction);
}

std::vector<CaseResult> evaluateCases(const std::vector<CalibrationCase>& cases, const CostModelParams& params)
{
    std::vector<CaseResult> out;
    out.reserve(cases.size());
    for (const CalibrationCase& c : cases) {
        CaseResult r;
        r.id = c.id;
        r.family = c.family;
        r.measured = c.measured;
        const CalibrationCase::Predicted p = c.predicted(params);
        r.predicted = metricOf(c, p.layout, p.prediction);
        r.feasible = p.prediction.feasible;
        r.micro_batch = p.layout.micro_batch;
        r.micro_batch_tuned = p.tuned;
        r.relative_error = r.predicted / r.measured - 1;
        out.push_back(r);
    }
    return out;
}

ErrorSummary summarize(const std::vector<CaseResult>& results)
{
    ErrorSummary s;
    if (results.empty())
        return s;
    std::vector<double> abs;
    double sq = 0;
    for (const CaseResult& r : results) {
        abs.push_back(std::fabs(r.relative_error));
        const double l = std::log(r.predicted / r.measured);
        sq += l * l;
    }
    std::sort(abs.begin(), abs.end());
    const size_t n = abs.size();
    s.median_abs = n % 2 ? abs[n / 2] : 0.5 * (abs[n / 2 - 1] + abs[n / 2]);
    s.worst_abs = abs.back();
    s.rms_log = std::sqrt(sq / double(n));
    return s;
}

std::vector<std::pair<std::string, ErrorSummary>> summarizeByFamily(const std::vector<CaseResult>& results)
{
    std::vector<std::pair<std::string, ErrorSummary>> out;
    for (const CaseResult& r : results) {
        if (std::any_of(out.begin(), out.end(), [&](const auto& f) { return f.first == r.family; }))
            continue;
        std::vector<CaseResult> family;
        std::copy_if(results.begin(), results.end(), std::back_inserter(family),
                     [&](const CaseResult& x) { return x.family == r.family; });
        out.emplace_back(r.family, summarize(family));
    }
    return out;
}

std::string chipFamily(const ChipSpec& chip) { return chip.name.substr(0, chip.name.find('-')); }

const char* toString(FitTerm term)
{
    switch (term) {
    case FitTerm::VendorMatmulEfficiency: return "matmul_efficiency.by_vendor";
    case FitTerm::SustainedMatmulFraction: return "matmul_efficiency.sustained_fraction";
    case FitTerm::MatmulHalfDim: return "matmul_half_dim";
    case FitTerm::ElementwiseFactor: return "elementwise_traffic_factor";
    case FitTerm::DpOverlap: return "dp_overlap";
    case FitTerm::InterNodeEfficiency: return "network.inter_node_efficiency";
    case FitTerm::IntraLinkEfficiency: return "network.intra_link_efficiency";
    case FitTerm::GroupedGemmEfficiency: return "moe.grouped_gemm_efficiency";
    case FitTerm::MoeLayerOverhead: return "moe.layer_overhead_s";
    case FitTerm::KernelOverhead: return "kernel_overhead_s";
    case FitTerm::StepOverhead: return "step_overhead_s";
    }
    return "?";
}

namespace {

// Unconstrained coordinates: fractions through a logistic, positive values through exp,
// so that Levenberg-Marquardt can step freely and the terms stay physical.
double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double logit(double p) { return std::log(p / (1.0 - p)); }

double get(const CostModelParams& p, FitTerm t, const std::string& vendor)
{
    switch (t) {
    case FitTerm::VendorMatmulEfficiency: {
        auto it = p.matmul_efficiency_by_vendor.find(vendor);
        return logit(it != p.matmul_efficiency_by_vendor.end() ? it->second : p.matmul_efficiency_default);
    }
    case FitTerm::SustainedMatmulFraction:
        return logit(std::clamp(p.measured_matmul_sustained_fraction, 1e-3, 1 - 1e-3));
    case FitTerm::MatmulHalfDim: return std::log(std::max(1e-3, p.matmul_half_dim));
    case FitTerm::ElementwiseFactor: return std::log(std::max(1e-3, p.elementwise_traffic_factor));
    case FitTerm::DpOverlap: return logit(std::clamp(p.dp_overlap, 1e-3, 1 - 1e-3));
    case FitTerm::InterNodeEfficiency: return logit(p.inter_node_efficiency);
    case FitTerm::IntraLinkEfficiency: return logit(p.intra_link_efficiency);
    case FitTerm::GroupedGemmEfficiency: return logit(std::clamp(p.grouped_gemm_efficiency, 1e-3, 1 - 1e-3));
    case FitTerm::MoeLayerOverhead: return std::log(std::max(1e-7, p.moe_layer_overhead_s));
    case FitTerm::KernelOverhead: return std::log(std::max(1e-8, p.kernel_overhead_s));
    case FitTerm::StepOverhead: return std::log(std::max(1e-5, p.step_overhead_s));
    }
    return 0;
}

void set(CostModelParams& p, FitTerm t, double x, const std::string& vendor)
{
    switch (t) {
    case FitTerm::VendorMatmulEfficiency: p.matmul_efficiency_by_vendor[vendor] = logistic(x); break;
    case FitTerm::SustainedMatmulFraction: p.measured_matmul_sustained_fraction = logistic(x); break;
    case FitTerm::MatmulHalfDim: p.matmul_half_dim = std::exp(x); break;
    case FitTerm::ElementwiseFactor: p.elementwise_traffic_factor = std::exp(x); break;
    case FitTerm::DpOverlap: p.dp_overlap = logistic(x); break;
    case FitTerm::InterNodeEfficiency: p.inter_node_efficiency = logistic(x); break;
    case FitTerm::IntraLinkEfficiency: p.intra_link_efficiency = logistic(x); break;
    case FitTerm::GroupedGemmEfficiency: p.grouped_gemm_efficiency = logistic(x); break;
    case FitTerm::MoeLayerOverhead: p.moe_layer_overhead_s = std::exp(x); break;
    case FitTerm::KernelOverhead: p.kernel_overhead_s = std::exp(x); break;
    case FitTerm::StepOverhead: p.step_overhead_s = std::exp(x); break;
    }
}

Eigen::VectorXd residuals(const std::vector<CalibrationCase>& cases, const CostModelParams& p)
{
    Eigen::VectorXd r(Eigen::Index(cases.size()));
    for (size_t i = 0; i < cases.size(); ++i)
        r(Eigen::Index(i)) = std::log(predictMetric(cases[i], p) / cases[i].measured);
    return r;
}

} // namespace

CostModelParams fitTerms(const std::function<std::vector<double>(const CostModelParams&)>& residualsVector,
                         const CostModelParams& start, const std::vector<FitTerm>& terms, const std::string& vendor,
                         int* iterations)
{
    auto residualsOf = [&](const CostModelParams& p) {
        const std::vector<double> r = residualsVector(p);
        return Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(r.data(), Eigen::Index(r.size())));
    };
    const Eigen::Index n = Eigen::Index(terms.size());
    Eigen::VectorXd x(n);
    for (Eigen::Index j = 0; j < n; ++j)
        x(j) = get(start, terms[size_t(j)], vendor);
    auto paramsAt = [&](const Eigen::VectorXd& at) {
        CostModelParams p = start;
        for (Eigen::Index j = 0; j < n; ++j)
            set(p, terms[size_t(j)], at(j), vendor);
        return p;
    };
    Eigen::VectorXd r = residualsOf(paramsAt(x));
    double cost = r.squaredNorm();
    double lambda = 1e-2;
    int it = 0;
    for (; it < 100; ++it) {
        // Forward-difference Jacobian of the residuals.
        Eigen::MatrixXd J(r.size(), n);
        for (Eigen::Index j = 0; j < n; ++j) {
            Eigen::VectorXd xp = x;
            const double step = 1e-4 * std::max(1.0, std::fabs(x(j)));
            xp(j) += step;
            J.col(j) = (residualsOf(paramsAt(xp)) - r) / step;
        }
        const Eigen::MatrixXd A = J.transpose() * J;
        const Eigen::VectorXd g = J.transpose() * r;
        bool improved = false, converged = false;
        for (int tries = 0; tries < 10 && !improved; ++tries) {
            Eigen::MatrixXd damped = A;
            damped.diagonal() += lambda * A.diagonal().cwiseMax(1e-9);
            const Eigen::VectorXd xn = x + damped.ldlt().solve(-g);
            const Eigen::VectorXd rn = residualsOf(paramsAt(xn));
            const double cn = rn.squaredNorm();
            if (std::isfinite(cn) && cn < cost) {
                converged = cost - cn < 1e-10 * cost;
                x = xn;
                r = rn;
                cost = cn;
                lambda = std::max(1e-7, lambda / 3);
                improved = true;
            } else {
                lambda *= 4;
            }
        }
        if (!improved || converged)
            break;
    }
    if (iterations)
        *iterations = it + 1;
    return paramsAt(x);
}

FitResult fitCostModel(const std::vector<CalibrationCase>& cases, const CostModelParams& start,
                       const std::vector<FitTerm>& terms, const std::string& vendor)
{
    FitResult out;
    out.before = summarize(evaluateCases(cases, start));
    out.params = fitTerms(
        [&](const CostModelParams& p) {
            const Eigen::VectorXd r = residuals(cases, p);
            return std::vector<double>(r.data(), r.data() + r.size());
        },
        start, terms, vendor, &out.iterations);
    out.after = summarize(evaluateCases(cases, out.params));
    return out;
}

} // namespace shardscope
