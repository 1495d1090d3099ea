#include "AttentionKernels.h"
#include "HardwareSpec.h"
#include "JsonReader.h"

#include <QFile>
#include <QJsonArray>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardscope {

double AttentionRateCurve::at(double seq_len) const
{
    const double x = std::log2(std::max(1.0, seq_len));
    if (x >= log2_seq[points - 1])
        return std::exp2(log2_rate[points - 1]);
    int i = 1;  // the segment [i - 1, i] holding x, or the first one below the shortest point
    while (i < points - 1 && x > log2_seq[i])
        ++i;
    const double slope = (log2_rate[i] - log2_rate[i - 1]) / (log2_seq[i] - log2_seq[i - 1]);
    return std::exp2(log2_rate[i - 1] + slope * (x - log2_seq[i - 1]));
}

namespace {

std::optional<AttentionRateCurve> curveOf(const std::vector<double>& seq, const std::vector<double>& rate)
{
    if (seq.size() < 2 || seq.size() != rate.size() || int(seq.size()) > AttentionRateCurve::kMaxPoints)
        return std::nullopt;
    AttentionRateCurve c;
    c.points = int(seq.size());
    for (int i = 0; i < c.points; ++i) {
        c.log2_seq[i] = std::log2(seq[size_t(i)]);
        c.log2_rate[i] = std::log2(rate[size_t(i)]);
    }
    return c;
}

// The series of a pass and mask whose head dimension is nearest `headDim` (in log2), or null.
const AttentionRateSeries* nearest(const AttentionKernel& k, AttentionPass pass, bool causal, int headDim)
{
    const AttentionRateSeries* best = nullptr;
    double bestDistance = 0;
    for (const AttentionRateSeries& s : k.series) {
        if (s.pass != pass || s.causal != causal)
            continue;
        const double distance = std::fabs(std::log2(double(s.head_dim)) - std::log2(double(headDim)));
        if (!best || distance < bestDistance) {
            best = &s;
            bestDistance = distance;
        }
    }
    return best;
}

std::vector<double> numbers(const QJsonArray& a)
{
    std::vector<double> out;
    for (const QJsonValue& v : a)
        out.push_back(v.toDouble(-1));
    return out;
}

} // namespace

std::vector<AttentionKernel> attentionKernelsFromJson(const QJsonObject& json, const std::string& path,
                                                      FieldErrors& errors)
{
    JsonReader r(json, path, errors);
    checkSchema(r, "attention", 1);
    r.rejectUnknownKeys({"schema", "notes", "kernels", "not_entered"});
    std::vector<AttentionKernel> kernels;
    const QJsonArray list = json.value("kernels").toArray();
    if (list.isEmpty())
        r.error("kernels", "no kernel listed");
    for (qsizetype i = 0; i < list.size(); ++i) {
        const std::string kpath = path + ".kernels[" + std::to_string(i) + "]";
        const QJsonObject ko = list.at(i).toObject();
        JsonReader k(ko, kpath, errors);
        k.rejectUnknownKeys({"name", "chips", "source", "chips_note", "series", "derived", "not_entered_series"});
        AttentionKernel kernel;
        kernel.name = k.string("name", true);
        kernel.source = k.string("source", true);
        for (const QJsonValue& c : ko.value("chips").toArray())
            kernel.chips.push_back(c.toString().toStdString());
        if (kernel.chips.empty())
            k.error("chips", "no chip named");
        const QJsonArray series = ko.value("series").toArray();
        for (qsizetype j = 0; j < series.size(); ++j) {
            const QJsonObject so = series.at(j).toObject();
            JsonReader s(so, kpath + ".series[" + std::to_string(j) + "]", errors);
            s.rejectUnknownKeys({"pass", "mask", "head_dim", "seq_len", "tflops", "source"});
            AttentionRateSeries out;
            const std::string pass = s.string("pass", true), mask = s.string("mask", true);
            if (pass != "forward" && pass != "backward")
                s.error("pass", "unknown value " + quotedValue(pass) + " (one of: forward, backward)");
            if (mask != "causal" && mask != "none")
                s.error("mask", "unknown value " + quotedValue(mask) + " (one of: causal, none)");
            out.pass = pass == "backward" ? AttentionPass::Backward : AttentionPass::Forward;
            out.causal = mask == "causal";
            out.head_dim = s.integer("head_dim", 0, true, 1, 4096);
            out.source = s.string("source", true);
            out.seq_len = numbers(so.value("seq_len").toArray());
            for (double t : numbers(so.value("tflops").toArray()))
                out.flops_per_second.push_back(t * 1e12);
            const bool ascending = std::is_sorted(out.seq_len.begin(), out.seq_len.end()) &&
                                   std::adjacent_find(out.seq_len.begin(), out.seq_len.end()) == out.seq_len.end();
            const bool positive = std::all_of(out.seq_len.begin(), out.seq_len.end(), [](double v) { return v >= 1; }) &&
                                  std::all_of(out.flops_per_second.begin(), out.flops_per_second.end(),
                                              [](double v) { return v > 0; });
            if (!curveOf(out.seq_len, out.flops_per_second) || !ascending || !positive)
                s.error("tflops", "needs 2 to " + std::to_string(AttentionRateCurve::kMaxPoints) +
                                      " positive rates, one per seq_len, seq_len ascending");
            kernel.series.push_back(std::move(out));
        }
        if (kernel.series.empty())
            k.error("series", "no series listed");
        kernels.push_back(std::move(kernel));
    }
    return kernels;
}

const std::vector<AttentionKernel>& attentionKernels()
{
    static const std::vector<AttentionKernel> kernels = [] {
        QFile f(QStringLiteral(":/planner/attention-kernels.json"));
        if (!f.open(QIODevice::ReadOnly))
            throw std::runtime_error("built-in attention kernel rates missing (:/planner/attention-kernels.json)");
        FieldErrors errors;
        const QJsonObject json = parseJsonObject(f.readAll(), "attention-kernels.json", errors);
        std::vector<AttentionKernel> k = attentionKernelsFromJson(json, "attention-kernels.json", errors);
        if (!errors.empty())
            throw std::runtime_error("built-in attention kernel rates are invalid:\n" + joinErrors(errors));
        return k;
    }();
    return kernels;
}

std::optional<AttentionRates> attentionRates(const std::vector<AttentionKernel>& kernels, const ChipSpec& chip,
                                             int headDim, bool causal)
{
    for (const AttentionKernel& k : kernels) {
        if (std::find(k.chips.begin(), k.chips.end(), chip.name) == k.chips.end())
            continue;
        const AttentionRateSeries* fwd = nearest(k, AttentionPass::Forward, causal, headDim);
        const AttentionRateSeries* bwd = nearest(k, AttentionPass::Backward, causal, headDim);
        if (!fwd)
            return std::nullopt;
        AttentionRates rates;
        rates.kernel = k.name;
        rates.source = k.source;
        rates.forward = *curveOf(fwd->seq_len, fwd->flops_per_second);
        if (bwd) {
            rates.backward = *curveOf(bwd->seq_len, bwd->flops_per_second);
            return rates;
        }
        // A causal backward from the unmasked one, scaled by the forward's causal / unmasked ratio.
        const AttentionRateSeries* plain = nearest(k, AttentionPass::Backward, false, headDim);
        const AttentionRateSeries* fwdPlain = nearest(k, AttentionPass::Forward, false, headDim);
        if (!causal || !plain || !fwdPlain)
            return std::nullopt;
        const AttentionRateCurve fwdCausal = rates.forward;
        const AttentionRateCurve fwdUnmasked = *curveOf(fwdPlain->seq_len, fwdPlain->flops_per_second);
        std::vector<double> scaled;
        for (size_t i = 0; i < plain->seq_len.size(); ++i)
            scaled.push_back(plain->flops_per_second[i] * fwdCausal.at(plain->seq_len[i]) /
                             fwdUnmasked.at(plain->seq_len[i]));
        rates.backward = *curveOf(plain->seq_len, scaled);
        return rates;
    }
    return std::nullopt;
}

std::optional<AttentionRates> attentionRates(const ChipSpec& chip, int headDim, bool causal)
{
    return attentionRates(attentionKernels(), chip, headDim, causal);
}

} // namespace shardscope
