#include "ReportBuilder.h"
#include "ChartAdapters.h"
#include "ChartData.h"
#include "DeviceMeshWidget.h"
#include "MetricText.h"
#include "PipelineTimelineWidget.h"
#include "PlanFigures.h"
#include "RunHistory.h"
#include "Units.h"
#include "Version.h"

#include <QApplication>
#include <QBuffer>
#include <QChartView>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QPixmap>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QUrl>

#include <algorithm>
#include <cmath>

namespace shardscope {

namespace {

// Charts are drawn at the size they are shown, so their text is as large as the GUI's: the
// HTML shows them at 960 px; the PDF's A4 page (96 dpi, 718 px between the margins) at 640 px,
// painted at twice that for print. Drawn at 960 and shrunk to 640, the axis labels came out
// at two thirds of the body text (about 6 pt).
constexpr int kChartWidth = 960;
constexpr int kChartHeight = 440;
constexpr int kPdfChartWidth = 640;
constexpr int kPdfChartHeight = 320;
constexpr double kPdfChartPixelRatio = 2;

QString q(const std::string& s) { return QString::fromStdString(s); }
QString esc(const QString& s) { return s.toHtmlEscaped(); }

// An escaped token with break opportunities after its commas and underscores, for the PDF:
// QTextDocument finds no break in a long layout ("dp=4,tp=8,...,offload=none": a comma before
// a letter is no break opportunity) and breaks it inside a word ("offload=non/e"). A zero-width
// space there; the HTML is left as typed (a browser's page is wide enough for a layout, and the
// text pastes into the CLI as it is).
QString breakable(const QString& s, bool forPdf)
{
    QString out = esc(s);
    if (!forPdf)
        return out;
    const QString mark(QChar(0x200B));
    out.replace(QLatin1Char(','), QLatin1Char(',') + mark);
    out.replace(QLatin1Char('_'), QLatin1Char('_') + mark);
    return out;
}

// The layout keys in which `other` differs from `chosen`: "tp 8 -> 4, zero 1 -> 3".
QString differences(const Layout& chosen, const Layout& other)
{
    QStringList out;
    auto cmp = [&](const char* key, const QString& a, const QString& b) {
        if (a != b)
            out << QStringLiteral("%1 %2 &rarr; %3").arg(QLatin1String(key), esc(a), esc(b));
    };
    cmp("dp", QString::number(chosen.dp), QString::number(other.dp));
    cmp("tp", QString::number(chosen.tp), QString::number(other.tp));
    cmp("pp", QString::number(chosen.pp), QString::number(other.pp));
    cmp("cp", QString::number(chosen.cp), QString::number(other.cp));
    cmp("ep", QString::number(chosen.ep), QString::number(other.ep));
    cmp("etp", QString::number(chosen.etp), QString::number(other.etp));  // the key as written (0: as tp)
    cmp("sp", chosen.sequence_parallel ? "on" : "off", other.sequence_parallel ? "on" : "off");
    cmp("zero", QString::number(chosen.zero_stage), QString::number(other.zero_stage));
    cmp("zero_group", QString::number(chosen.zero_group), QString::number(other.zero_group));
    cmp("mb", QString::number(chosen.micro_batch), QString::number(other.micro_batch));
    cmp("schedule", QLatin1String(toString(chosen.schedule)), QLatin1String(toString(other.schedule)));
    cmp("v", QString::number(chosen.virtual_stages), QString::number(other.virtual_stages));
    cmp("recompute", QLatin1String(toString(chosen.recompute)), QLatin1String(toString(other.recompute)));
    cmp("offload", QLatin1String(toString(chosen.offload)), QLatin1String(toString(other.offload)));
    return out.isEmpty() ? QObject::tr("(same layout)") : out.join(QStringLiteral(", "));
}

} // namespace

struct ReportBuilder::Chart {
    QString name;     // file stem: "memory", "step-time", ...
    QString caption;
    QByteArray png;   // always (the PDF embeds PNG)
    QByteArray svg;   // when SVG charts are asked for
};

QString reportFormatFromPath(const QString& path, ReportFormat& format)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("html") || suffix == QLatin1String("htm"))
        format = ReportFormat::Html;
    else if (suffix == QLatin1String("pdf"))
        format = ReportFormat::Pdf;
    else
        return QObject::tr("%1: a report is .html or .pdf").arg(path);
    return {};
}

ReportBuilder::ReportBuilder(ReportInput input, QString outputPath, ReportFormat format, ChartFormat charts)
    : in_(std::move(input)), path_(std::move(outputPath)), format_(format), charts_(charts)
{
}

ReportBuilder::~ReportBuilder() = default;

QStringList ReportBuilder::chartNames() const
{
    QStringList names{QStringLiteral("memory"), QStringLiteral("step-time"), QStringLiteral("pipeline-timeline"),
                      QStringLiteral("device-mesh")};
    if (!in_.result.pareto_step_memory.points().empty())
        names << QStringLiteral("pareto-step-memory");
    if (!in_.sweep.points.empty())
        names << QStringLiteral("scaling");
    return names;
}

int ReportBuilder::steps() const { return int(chartNames().size()) + 1; }

QString ReportBuilder::stepName(int step) const
{
    const QStringList names = chartNames();
    return step < names.size() ? QObject::tr("rendering the %1 chart").arg(names[step])
                               : QObject::tr("writing the document");
}

void ReportBuilder::runStep(int step)
{
    const QStringList names = chartNames();
    if (step >= names.size())
        return;
    const QString name = names[step];
    const Prediction& prediction = in_.chosen.prediction;
    const Layout& chosen = in_.chosen.layout;
    std::unique_ptr<QWidget> widget;
    QString caption;
    if (name == QLatin1String("memory")) {
        widget.reset(makeStackedBarChart(memoryChartData(prediction)));
        caption = QObject::tr("Memory per device of the most loaded pipeline stage, by category, against the HBM capacity.");
    } else if (name == QLatin1String("step-time")) {
        const StackedBarsData data = stepTimeChartData(prediction);
        widget.reset(makeStackedBarChart(data));
        caption = data.categories.size() > 1
                      ? QObject::tr("Step time on the critical path, by component; under it, hatched, the communication "
                                    "hidden behind compute (it runs beside the compute, off the critical path).")
                      : QObject::tr("Step time on the critical path, by component (nothing hidden behind compute is "
                                    "large enough to draw: the table above lists it).");
    } else if (name == QLatin1String("pipeline-timeline")) {
        auto* timeline = new PipelineTimelineWidget;
        try {
            timeline->setTimeline(pipelineTimelineFor(chosen, prediction), pipelineTitle(chosen, prediction));
        } catch (const std::exception& e) {
            timeline->setTimeline({}, QString::fromUtf8(e.what()));
        }
        widget.reset(timeline);
        caption = QObject::tr("Forward and backward passes of each micro-batch on each stage over one step; grey is idle.");
    } else if (name == QLatin1String("device-mesh")) {
        auto* mesh = new DeviceMeshWidget;
        mesh->setMesh(in_.chosen.request.problem, chosen);
        widget.reset(mesh);
        caption = QObject::tr("Devices coloured by pipeline stage; which groups' traffic stays inside a node.");
    } else if (name == QLatin1String("pareto-step-memory")) {
        widget.reset(makeXYChart(paretoChartData(in_.result, &chosen)));
        caption = QObject::tr("Layouts no other layout beats in both step time and memory; the chosen one in red.");
    } else {
        widget.reset(makeXYChart(scalingChartData(in_.sweep)));
        caption = QObject::tr("Tokens/s per device of the best plan at each node count, against perfect scaling.");
    }
    // Offscreen: laid out and painted without ever appearing on a screen.
    widget->setAttribute(Qt::WA_DontShowOnScreen);
    // The mesh draws a row of nodes and its caption: at a chart's height half of it was blank.
    const bool pdf = format_ == ReportFormat::Pdf;
    const int height = pdf ? kPdfChartHeight : kChartHeight;
    widget->resize(pdf ? kPdfChartWidth : kChartWidth, name == QLatin1String("device-mesh") ? height / 2 : height);
    widget->show();
    QApplication::processEvents();

    auto chart = std::make_unique<Chart>();
    chart->name = name;
    chart->caption = caption;
    QBuffer png(&chart->png);
    png.open(QIODevice::WriteOnly);
    const double ratio = pdf ? kPdfChartPixelRatio : 1.0;
    QPixmap pixels(widget->size() * ratio);
    pixels.setDevicePixelRatio(ratio);
    pixels.fill(Qt::transparent);
    widget->render(&pixels);
    pixels.save(&png, "PNG");
    if (charts_ == ChartFormat::Svg) {
        QBuffer svgBuffer(&chart->svg);
        svgBuffer.open(QIODevice::WriteOnly);
        QSvgGenerator svg;
        svg.setOutputDevice(&svgBuffer);
        svg.setSize(widget->size());
        svg.setViewBox(QRect(QPoint(), widget->size()));
        svg.setResolution(widget->logicalDpiX());  // text at the GUI's size (ChartExport.cpp)
        QPainter painter(&svg);
        if (auto* view = qobject_cast<QChartView*>(widget.get()))
            view->render(&painter, QRectF(QPointF(), widget->size()), view->viewport()->rect());
        else
            widget->render(&painter);
    }
    rendered_.push_back(std::move(chart));
}

QString ReportBuilder::html(bool forPdf) const
{
    const Problem& p = in_.chosen.request.problem;
    const Layout& l = in_.chosen.layout;
    const Prediction& pr = in_.chosen.prediction;

    auto imageSource = [&](const Chart& c) {
        if (forPdf)
            return QStringLiteral("chart-%1.png").arg(c.name);  // a QTextDocument resource
        if (charts_ == ChartFormat::Svg)  // inline too: the report stays one file
            return QStringLiteral("data:image/svg+xml;base64,") + QString::fromLatin1(c.svg.toBase64());
        return QStringLiteral("data:image/png;base64,") + QString::fromLatin1(c.png.toBase64());
    };

    QString h;
    h += QStringLiteral("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%1</title>\n")
             .arg(esc(in_.title));
    h += QStringLiteral("<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
                        "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #bbb;padding:3px 6px;"
                        "text-align:left}th{background:#eee}td.n{text-align:right;white-space:nowrap}img{max-width:100%}"
                        ".caption{color:#555;font-size:90%}</style></head><body>\n");
    h += QStringLiteral("<h1>%1</h1>\n").arg(esc(in_.title));
    h += QStringLiteral("<p>ShardScope %1, %2. Every figure below is computed by the cost model from the model's "
                        "architecture and the catalog's sourced hardware figures.</p>\n")
             .arg(QLatin1String(kVersion), QDateTime::currentDateTimeUtc().toString(Qt::ISODate));

    // The problem.
    h += QStringLiteral("<h2>Problem</h2>\n<table>");
    auto row = [&](const QString& k, const QString& v) {
        h += QStringLiteral("<tr><th>%1</th><td>%2</td></tr>").arg(esc(k), esc(v));
    };
    const ParameterBreakdown counts = parameterBreakdown(p.model);
    row(QObject::tr("Model"), QStringLiteral("%1 (%2 parameters%3)")
                                  .arg(q(p.model.display_name.empty() ? p.model.name : p.model.display_name),
                                       q(formatCount(counts.total)),
                                       p.model.moe.enabled()
                                           ? QObject::tr(", %1 active per token").arg(q(formatCount(counts.active_per_token)))
                                           : QString()));
    row(QObject::tr("Cluster"), QStringLiteral("%1 x %2: %3 chips, %4 devices")
                                    .arg(p.cluster.nodes)
                                    .arg(q(p.cluster.node.name))
                                    .arg(p.cluster.chips())
                                    .arg(p.cluster.devices()));
    row(QObject::tr("Training"), QStringLiteral("global batch %1 x %2 tokens, %3, %4 tokens to train")
                                     .arg(q(formatCount(p.training.global_batch)), q(formatCount(p.training.seq_len)))
                                     .arg(QLatin1String(toString(p.training.precision)))
                                     .arg(q(formatSi(p.training.tokens_to_train, ""))));
    // The request the figures come from: the terms and the constraints the plan was made with.
    row(QObject::tr("Cost model"), q(in_.chosen.request.cost_model.name));
    h += QStringLiteral("<tr><th>%1</th><td>%2</td></tr>")
             .arg(esc(QObject::tr("Constraints")), breakable(q(constraintsText(in_.chosen.request.space)), forPdf));
    h += QStringLiteral("</table>\n");

    // The chosen layout and why.
    h += QStringLiteral("<h2>Chosen layout</h2>\n<p><b><code>%1</code></b></p>\n").arg(breakable(q(toString(l)), forPdf));
    h += QStringLiteral("<p>%1</p>\n").arg(esc(predictionSummary(p, pr)));
    if (const QString experts = expertSummary(p, l, pr); !experts.isEmpty())
        h += QStringLiteral("<p>%1</p>\n").arg(esc(experts));
    const auto& top = in_.result.top;
    const auto chosenAt = std::find_if(top.begin(), top.end(), [&](const Plan& plan) { return plan.layout == l; });
    if (chosenAt != top.end()) {
        const int rank = int(chosenAt - top.begin()) + 1;
        h += QStringLiteral("<p>Rank %1 of %2 feasible layouts by %3 (%4 candidates searched).</p>\n")
                 .arg(rank)
                 .arg(q(formatCount(in_.result.stats.feasible)))
                 .arg(QLatin1String(toString(in_.result.objective)))
                 .arg(q(formatCount(in_.result.stats.candidates)));
    }
    if (!top.empty()) {
        h += QStringLiteral("<h3>Alternatives and what separates them</h3>\n<table><tr><th>#</th><th>step</th>"
                            "<th>tokens/s</th><th>MFU</th><th>memory/device</th><th>vs chosen</th>"
                            "<th>differs in</th></tr>\n");
        for (size_t i = 0; i < top.size() && i < 6; ++i) {
            const Prediction& a = top[i].prediction;
            h += QStringLiteral("<tr><td class=n>%1</td><td class=n>%2</td><td class=n>%3</td><td class=n>%4%</td>"
                                "<td class=n>%5</td><td class=n>%6%</td><td>%7</td></tr>\n")
                     .arg(i + 1)
                     .arg(esc(q(formatDuration(a.step_time_s))), esc(q(formatSi(a.tokens_per_s, ""))))
                     .arg(100 * a.mfu, 0, 'f', 1)
                     .arg(esc(q(formatBytes(a.memory_bytes.total()))))
                     .arg(100 * (a.step_time_s / pr.step_time_s - 1), 0, 'f', 1)
                     .arg(differences(l, top[i].layout));
        }
        h += QStringLiteral("</table>\n");
    }

    // The step time: every component, with what hides behind compute (the chart leaves out
    // what is too small to draw).
    h += QStringLiteral("<h3>Step time %1</h3>\n<table><tr><th>component</th><th>on the critical path</th>"
                        "<th>share</th><th>hidden behind compute</th></tr>\n")
             .arg(esc(q(formatDuration(pr.step_time_s))));
    for (const StepTimePart& part : stepTimeParts(pr.time_s)) {
        if (part.exposed <= 0 && part.hidden <= 0)
            continue;
        h += QStringLiteral("<tr><td>%1</td><td class=n>%2</td><td class=n>%3%</td><td class=n>%4</td></tr>\n")
                 .arg(esc(part.name), esc(q(formatDuration(part.exposed))))
                 .arg(pr.step_time_s > 0 ? 100 * part.exposed / pr.step_time_s : 0.0, 0, 'f', 1)
                 .arg(part.hidden > 0 ? esc(q(formatDuration(part.hidden))) : QString());
    }
    h += QStringLiteral("</table>\n");

    // Charts.
    // On the PDF the charts start a page: the heading alone at the foot of the first one
    // read as an empty section.
    h += forPdf ? QStringLiteral("<h2 style=\"page-break-before: always\">Charts</h2>\n") : QStringLiteral("<h2>Charts</h2>\n");
    for (const auto& c : rendered_)
        h += QStringLiteral("<p><img src=\"%1\" width=\"%2\" alt=\"%3\"><br><span class=caption>%4</span></p>\n")
                 .arg(imageSource(*c))
                 .arg(forPdf ? kPdfChartWidth : kChartWidth)
                 .arg(esc(c->name), esc(c->caption));

    // The latest validation of this plan.
    if (in_.validation) {
        // A page of its own on the PDF: after the charts its table was cut after the first row.
        h += QStringLiteral("<h2%1>Validation: predicted vs measured</h2>\n<p>The plan's layout run for real on an "
                            "emulated cluster (%2), scaled down to run here; %3.</p>\n")
                 .arg(forPdf ? QStringLiteral(" style=\"page-break-before: always\"") : QString())
                 .arg(esc(deviceText(in_.validation->value(QLatin1String("device")).toString())), esc(in_.validation_when));
        for (const QJsonValue& note : in_.validation->value(QLatin1String("adaptations")).toArray())
            h += QStringLiteral("<p class=caption>adapted: %1</p>\n").arg(esc(note.toString()));
        // The metrics in words and units, in the CLI's order (the JSON object is sorted by key);
        // a metric not compared (wall time on shared cores) has no prediction: a dash.
        const std::vector<StoredCase> cases = storedCases(*in_.validation);
        if (!cases.empty()) {
            h += QStringLiteral("<table><tr><th>metric</th><th>predicted</th><th>measured</th><th>error</th></tr>\n");
            for (const StoredMetric& m : cases.front().metrics) {
                const bool compared = std::isfinite(m.predicted);
                h += QStringLiteral("<tr><td>%1</td><td class=n>%2</td><td class=n>%3</td><td class=n>%4</td></tr>\n")
                         .arg(esc(metricWords(m.metric)), esc(metricValueText(m.metric, m.predicted)),
                              esc(metricValueText(m.metric, m.measured)),
                              esc(compared ? relErrorText(m.rel_error) : QObject::tr("not predicted")));
            }
            h += QStringLiteral("</table>\n");
        }
    }

    // The terms.
    h += QStringLiteral("<h2>Where the figures come from</h2>\n<table><tr><th>figure</th><th>term</th><th>value</th>"
                        "<th>how</th></tr>\n");
    for (const Term& t : in_.chosen.terms) {
        const bool bytes = t.figure.rfind("memory", 0) == 0;
        h += QStringLiteral("<tr><td>%1</td><td>%2</td><td class=n>%3</td><td>%4</td></tr>\n")
                 .arg(esc(figureName(t.figure)), esc(q(t.name)),
                      esc(q(bytes ? formatBytes(t.value) : formatDuration(t.value))), esc(q(t.formula)));
    }
    h += QStringLiteral("</table>\n</body></html>\n");
    return h;
}

QString ReportBuilder::finish()
{
    if (format_ == ReportFormat::Html) {
        const QByteArray text = html(false).toUtf8();
        QSaveFile f(path_);
        if (!f.open(QIODevice::WriteOnly) || f.write(text) != text.size() || !f.commit())
            return QObject::tr("cannot write %1: %2").arg(path_, f.errorString());
        pages_ = 1;
        return {};
    }
    QPdfWriter pdf(path_);
    pdf.setPageSize(QPageSize(QPageSize::A4));
    pdf.setResolution(96);  // the document's pixels are screen pixels
    pdf.setTitle(in_.title);
    pdf.setCreator(QStringLiteral("ShardScope %1").arg(QLatin1String(kVersion)));
    const std::unique_ptr<QTextDocument> doc = pdfDocument();
    pages_ = doc->pageCount();
    doc->print(&pdf);
    if (!QFileInfo::exists(path_) || QFileInfo(path_).size() == 0)
        return QObject::tr("cannot write %1").arg(path_);
    return {};
}

std::unique_ptr<QTextDocument> ReportBuilder::pdfDocument() const
{
    auto doc = std::make_unique<QTextDocument>();
    for (const auto& c : rendered_) {
        QImage image;
        image.loadFromData(c->png, "PNG");
        doc->addResource(QTextDocument::ImageResource, QUrl(QStringLiteral("chart-%1.png").arg(c->name)), image);
    }
    doc->setHtml(html(true));
    // A4 at 96 dpi with QPdfWriter's default margins, as finish() prints it.
    QPdfWriter probe(QString{});
    probe.setPageSize(QPageSize(QPageSize::A4));
    probe.setResolution(96);
    doc->setPageSize(probe.pageLayout().paintRectPixels(probe.resolution()).size());
    return doc;
}

QStringList midWordBreaks(const QTextDocument& doc)
{
    QStringList breaks;
    (void)doc.size();  // lays the whole document out (layout is lazy)
    for (QTextBlock block = doc.begin(); block.isValid(); block = block.next()) {
        const QTextLayout* layout = block.layout();
        const QString text = block.text();
        for (int i = 0; layout && i + 1 < layout->lineCount(); ++i) {
            const QTextLine line = layout->lineAt(i);
            const int end = line.textStart() + line.textLength();  // the next line's first character
            if (end <= 0 || end >= text.size())
                continue;
            if (text[end - 1].isLetterOrNumber() && text[end].isLetterOrNumber())
                breaks << text.mid(std::max(0, end - 12), 12) + QLatin1Char('/') + text.mid(end, 12);
        }
    }
    // Table cells' blocks are among the document's blocks: they are checked too.
    return breaks;
}

} // namespace shardscope
