// Reports, headless: the HTML references every chart and each image is not blank
// (pixel variance); SVG charts are written beside the HTML; the PDF has the page count
// the document laid out; bad requests exit 2 naming what is wrong.
#include "MetricText.h"
#include "PlanFigures.h"
#include "ReportBuilder.h"
#include "Search.h"
#include "Units.h"

#include <QApplication>
#include <QFile>
#include <QFontInfo>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QAbstractTextDocumentLayout>
#include <QTextBlock>
#include <QTextDocument>
#include <QUrl>

#include <cmath>

using namespace shardscope;

namespace {

struct Run {
    int exitCode = -1;
    QByteArray out, err;
};

Run cli(const QTemporaryDir& dir, const QStringList& args)
{
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(SHARDSCOPE_CLI_PATH), QStringList{"--db", dir.filePath("c.sqlite")} + args);
    p.waitForFinished(300'000);
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
            p.readAllStandardError()};
}

double pixelVariance(const QImage& image)
{
    double sum = 0, sq = 0;
    int n = 0;
    for (int y = 0; y < image.height(); y += 3)
        for (int x = 0; x < image.width(); x += 3) {
            const double g = qGray(image.pixel(x, y));
            sum += g;
            sq += g * g;
            ++n;
        }
    const double mean = sum / n;
    return sq / n - mean * mean;
}

QByteArray read(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

} // namespace

class TstAppReport : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString plan_;

private slots:
    static Layout parseLayoutOrDie(const char* text)
    {
        FieldErrors errors;
        Layout layout = parseLayout(text, errors);
        resolveDataParallel(layout, 4, errors);
        return layout;
    }

    // A small problem priced in-process (no catalog).
    static ReportInput tinyInput()
    {
        Problem p;
        p.model.name = "tiny";
        p.model.layers = 4;
        p.model.hidden = 256;
        p.model.heads = 4;
        p.model.kv_heads = 4;
        p.model.head_dim = 64;
        p.model.ffn_hidden = 1024;
        p.model.vocab = 1000;
        p.model.max_seq = 512;
        p.cluster.node.name = std::string("test-node");
        p.cluster.node.chip.name = std::string("test-chip");
        p.cluster.node.chip.peak_flops_bf16 = 1e14;
        p.cluster.node.chip.hbm_bytes = 16e9;
        p.cluster.node.chip.hbm_bytes_per_second = 1e12;
        p.cluster.node.chips_per_node = 4;
        p.cluster.node.intra_link_bytes_per_second = 1e11;
        p.cluster.nodes = 1;
        p.training.global_batch = 16;
        p.training.seq_len = 512;
        PlanRequest request;
        request.problem = p;
        ReportInput input;
        input.chosen = pricePlan(request, parseLayoutOrDie("dp=2,pp=2"));
        input.title = "tiny";
        return input;
    }

    void initTestCase()
    {
        plan_ = dir_.filePath("plan.json");
        const Run r = cli(dir_, {"plan", "--model", "llama-2-7b", "--node-type", "p5.48xlarge", "--nodes", "4",
                                 "--global-batch", "256", "--seq", "4096", "--out", plan_});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    void htmlEmbedsEveryChart()
    {
        const QString out = dir_.filePath("report.html");
        const Run r = cli(dir_, {"report", "--plan", plan_, "--out", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QString html = QString::fromUtf8(read(out));
        for (const char* text : {"Chosen layout", "Alternatives and what separates them", "Where the figures come from",
                                 "llama-2-7b", "6,738,415,616"})
            QVERIFY2(html.contains(QLatin1String(text)), text);
        const QRegularExpression image(QStringLiteral("<img src=\"data:image/png;base64,([^\"]+)\"[^>]*alt=\"([^\"]+)\""));
        QStringList names;
        for (auto it = image.globalMatch(html); it.hasNext();) {
            const auto m = it.next();
            names << m.captured(2);
            QImage chart;
            QVERIFY(chart.loadFromData(QByteArray::fromBase64(m.captured(1).toLatin1()), "PNG"));
            QVERIFY2(pixelVariance(chart) > 50, qPrintable(m.captured(2) + " is blank"));
        }
        QCOMPARE(names, (QStringList{"memory", "step-time", "pipeline-timeline", "device-mesh", "pareto-step-memory",
                                     "scaling"}));
    }

    // Once the plan has been validated, its report shows the latest validation.
    void validatedPlanReportShowsTheValidation()
    {
        const QString out = dir_.filePath("validated.html");
        const Run before = cli(dir_, {"report", "--plan", plan_, "--out", out});
        QVERIFY2(before.exitCode == 0, before.err.constData());
        QVERIFY(!read(out).contains("Validation: predicted vs measured"));
        const Run validate = cli(dir_, {"validate", "--plan", plan_, "--steps", "2"});
        QVERIFY2(validate.exitCode == 0, validate.err.constData());
        const Run after = cli(dir_, {"report", "--plan", plan_, "--out", out});
        QVERIFY2(after.exitCode == 0, after.err.constData());
        const QString html = QString::fromUtf8(read(out));
        QVERIFY(html.contains("Validation: predicted vs measured"));
        // (gui18) The metrics in words and units, in the CLI's order; no scientific notation, no
        // "-0.0%"; the wall time (not predicted) has a dash, not 0; the device in words.
        const qsizetype table = html.indexOf(QLatin1String("<th>metric</th>"));
        QVERIFY(table > 0);
        const QString validation = html.mid(table, html.indexOf(QLatin1String("</table>"), table) - table);
        qsizetype at = 0;
        for (const char* metric : {"<td>weights</td>", "<td>optimizer states</td>", "<td>activations</td>",
                                   "<td>device step time</td>", "<td>wall step time</td>", "<td>all-reduce bytes</td>",
                                   "<td>matmul FLOPs</td>"}) {
            const qsizetype next = validation.indexOf(QLatin1String(metric), at);
            QVERIFY2(next > at, metric);
            at = next;
        }
        for (const char* raw : {"weights_bytes", "device_step_time_s", "e+0", "-0.0%"})
            QVERIFY2(!validation.contains(QLatin1String(raw)), raw);
        QVERIFY(validation.contains(QLatin1String(" KiB</td>")) || validation.contains(QLatin1String(" MiB</td>")));
        QVERIFY(QRegularExpression(QStringLiteral("<td>wall step time</td><td class=n>—</td><td class=n>[0-9.]+ m?s</td>"
                                                  "<td class=n>not predicted</td>"))
                    .match(validation)
                    .hasMatch());
        QVERIFY2(QRegularExpression(QStringLiteral("cluster \\([a-z0-9-]+ scaled to [0-9.]+% \\(memory, FLOP/s, bandwidth\\)\\)"))
                     .match(html)
                     .hasMatch(),
                 qPrintable(html.mid(html.indexOf("emulated"), 120)));
        // The search's counts with their thousands separators.
        QVERIFY(QRegularExpression(QStringLiteral("Rank \\d+ of [0-9,]+ feasible layouts by \\w+ \\(\\d{1,3}(,\\d{3})+ "
                                                  "candidates searched\\)"))
                    .match(html)
                    .hasMatch());
    }

    // (gui18) A validation metric in words and units, as the report and the Validate page show it.
    void validationTextForPeople()
    {
        QCOMPARE(relErrorText(-1e-7), QStringLiteral("0.0%"));  // never "-0.0%"
        QCOMPARE(relErrorText(0.0862), QStringLiteral("8.6%"));
        QCOMPARE(relErrorText(-0.021), QStringLiteral("-2.1%"));
        QCOMPARE(relErrorText(std::nullopt), QStringLiteral("n/a"));
        QCOMPARE(metricValueText("wall_step_time_s", std::nan("")), QStringLiteral("—"));
        QCOMPARE(metricValueText("device_step_time_s", 0.2444), QStringLiteral("244 ms"));
        QCOMPARE(metricValueText("device_step_time_s_at_measured_load", 0.2444), QStringLiteral("244 ms"));
        QCOMPARE(metricWords("device_step_time_s_at_measured_load"), QStringLiteral("device step time at the measured MoE load"));
        QCOMPARE(metricValueText("weights_bytes", 425'800.0), QStringLiteral("415.8 KiB"));
        QCOMPARE(metricValueText("flops", 2.666e9), QStringLiteral("2.67 GFLOP"));
        QCOMPARE(metricWords("send_recv_bytes"), QStringLiteral("send/recv bytes"));
        QCOMPARE(metricWords("optimizer_bytes"), QStringLiteral("optimizer states"));
        QCOMPARE(deviceText(QStringLiteral("trainium1:0.000202305")),
                 QStringLiteral("trainium1 scaled to 0.0202% (memory, FLOP/s, bandwidth)"));
        QCOMPARE(deviceText(QStringLiteral("host")), QStringLiteral("host"));
        QCOMPARE(deviceText(QStringLiteral("trainium1:1")), QStringLiteral("trainium1:1"));
    }

    // (gui18) The timeline's title: counts agree with their nouns ("1 stage", not "1 stages").
    void pipelineTitleCountsAgree()
    {
        Layout one;
        one.schedule = PipelineSchedule::OneFOneB;
        Prediction single;
        single.micro_batches = 1;
        QCOMPARE(pipelineTitle(one, single), QStringLiteral("Pipeline schedule: 1f1b, 1 stage, 1 micro-batch"));
        Layout interleaved = one;
        interleaved.pp = 8;
        interleaved.schedule = PipelineSchedule::Interleaved;
        interleaved.virtual_stages = 4;
        Prediction many;
        many.micro_batches = 96;
        QCOMPARE(pipelineTitle(interleaved, many),
                 QStringLiteral("Pipeline schedule: interleaved, 8 stages, 96 micro-batches, v = 4"));
    }

    // (gui18) The PDF's charts are drawn at the size they are printed (their text as large as the
    // GUI's, not shrunk to two thirds), at twice the pixels for print; the charts and the
    // validation each start a page (a heading alone at a page's foot, a table cut after a row).
    void pdfChartsAtPrintSize()
    {
        ReportInput input = tinyInput();
        input.validation = QJsonDocument::fromJson(R"({"device": "trainium1:0.001", "cases": [{"name": "plan",
            "metrics": {"weights_bytes": {"predicted": 1024, "measured": 1024, "rel_error": 0}}}]})")
                               .object();
        ReportBuilder builder(input, dir_.filePath("print.pdf"), ReportFormat::Pdf, ChartFormat::Png);
        for (int i = 0; i < builder.steps(); ++i)
            builder.runStep(i);
        const std::unique_ptr<QTextDocument> doc = builder.pdfDocument();
        for (const QString& name : builder.chartNames()) {
            const QImage image = doc->resource(QTextDocument::ImageResource, QUrl(QStringLiteral("chart-%1.png").arg(name)))
                                     .value<QImage>();
            QVERIFY2(!image.isNull(), qPrintable(name));
            QCOMPARE(image.width(), 2 * 640);
        }
        const QString html = doc->toHtml();
        QVERIFY(html.contains(QLatin1String("width=\"640\"")));
        const double page = doc->pageSize().height();
        for (const QString& title : {QStringLiteral("Charts"), QStringLiteral("Validation: predicted vs measured")}) {
            QTextBlock heading;
            for (QTextBlock b = doc->begin(); b.isValid(); b = b.next())
                if (b.text() == title)
                    heading = b;
            QVERIFY2(heading.isValid(), qPrintable(title));
            const double top = doc->documentLayout()->blockBoundingRect(heading).top();
            QVERIFY2(top >= page && std::fmod(top, page) < 0.1 * page,
                     qPrintable(QStringLiteral("%1 at %2 of pages %3 high").arg(title).arg(top).arg(page)));
        }
        QVERIFY(doc->toPlainText().contains(QStringLiteral("trainium1 scaled to 0.1% (memory, FLOP/s, bandwidth)")));
    }

    // --charts svg: vector charts inside the one HTML file (data: URIs), no folder beside it.
    void svgChartsInsideTheHtml()
    {
        const QString out = dir_.filePath("svg-report.html");
        const Run r = cli(dir_, {"report", "--plan", plan_, "--out", out, "--charts", "svg"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QString html = QString::fromUtf8(read(out));
        const QRegularExpression image(QStringLiteral("<img src=\"data:image/svg\\+xml;base64,([A-Za-z0-9+/=]+)\""));
        int count = 0;
        // (gui18) Text at the GUI's size: font-size in the viewBox's pixels, as the font's pixel
        // size on screen (at QSvgGenerator's default 72 dpi a 9 pt font came out as 9, not 12).
        const QByteArray screenPx = "font-size=\"" + QByteArray::number(QFontInfo(QApplication::font()).pixelSize()) + '"';
        for (auto it = image.globalMatch(html); it.hasNext(); ++count) {
            const QByteArray svg = QByteArray::fromBase64(it.next().captured(1).toLatin1());
            QVERIFY(svg.contains("<svg"));
            QVERIFY(svg.contains("</svg>"));
            QVERIFY(svg.size() > 2000);
            QVERIFY2(svg.contains(screenPx), screenPx.constData());
        }
        QCOMPARE(count, 6);
        QVERIFY(!html.contains(QLatin1String("data:image/png")));
        QVERIFY(!QFileInfo::exists(dir_.filePath("svg-report_files")));
    }

    void pdfHasTheLaidOutPages()
    {
        const QString out = dir_.filePath("report.pdf");
        const Run r = cli(dir_, {"report", "--plan", plan_, "--out", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QRegularExpression pages(QStringLiteral("(\\d+) pages"));
        const auto m = pages.match(QString::fromUtf8(r.out));
        QVERIFY2(m.hasMatch(), r.out.constData());
        const int expected = m.captured(1).toInt();
        QVERIFY(expected >= 3);
        const QByteArray pdf = read(out);
        QVERIFY(pdf.startsWith("%PDF"));
        // One "/Type /Page" object per page ("/Type /Pages" is the page tree).
        const int objects = int(pdf.count("/Type /Page\n") + pdf.count("/Type /Page ") + pdf.count("/Type /Page/") +
                                pdf.count("/Type /Page>"));
        QCOMPARE(objects, expected);
    }

    void badRequests_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown format") << QStringList{"--out", "report.txt"} << "html or .pdf";
        QTest::newRow("svg in a pdf") << QStringList{"--out", "r.pdf", "--charts", "svg"} << "SVG";
        QTest::newRow("unknown chart format") << QStringList{"--out", "r.html", "--charts", "gif"} << "gif";
        QTest::newRow("bad layout") << QStringList{"--out", "r.html", "--layout", "tp=3"} << "layout.tp";
    }
    void badRequests()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const Run r = cli(dir_, QStringList{"report", "--plan", plan_} + args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(QString::fromUtf8(r.err).contains(message), r.err.constData());
        const Run missing = cli(dir_, {"report", "--plan", dir_.filePath("nope.json"), "--out", "r.html"});
        QCOMPARE(missing.exitCode, 2);
    }

    // The PDF never breaks a word across lines ("offload=non/e"): long layouts and keys wrap
    // between their parts.
    void pdfBreaksNoWord()
    {
        // The check itself finds a word broken for want of room.
        QTextDocument narrow;
        narrow.setHtml(QStringLiteral("<p><code>dp=4,tp=8,pp=16,cp=4,sp=on,zero=3,zero_group=1,mb=2,"
                                      "schedule=interleaved,v=3,recompute=selective,offload=none</code></p>"));
        narrow.setTextWidth(300);
        QVERIFY(!midWordBreaks(narrow).isEmpty());

        ReportInput input = tinyInput();
        input.chosen = pricePlan(input.chosen.request, parseLayoutOrDie("dp=1,tp=2,pp=2,zero=1,mb=1,schedule=gpipe,recompute=selective"));
        ReportBuilder builder(input, dir_.filePath("tiny.pdf"), ReportFormat::Pdf, ChartFormat::Png);
        for (int i = 0; i < builder.steps(); ++i)
            builder.runStep(i);
        const std::unique_ptr<QTextDocument> doc = builder.pdfDocument();
        QVERIFY(doc->toPlainText().contains(QStringLiteral("offload=none")) ||
                doc->toPlainText().remove(QChar(0x200B)).contains(QStringLiteral("offload=none")));
        const QStringList breaks = midWordBreaks(*doc);
        QVERIFY2(breaks.isEmpty(), qPrintable(breaks.join(QStringLiteral(" | "))));
        QVERIFY(builder.finish().isEmpty());
        QVERIFY(builder.pageCount() >= 1);
        // The HTML keeps the layout as typed (no invisible characters to paste into the CLI).
        ReportBuilder html(input, dir_.filePath("tiny-breaks.html"), ReportFormat::Html, ChartFormat::Png);
        for (int i = 0; i < html.steps(); ++i)
            html.runStep(i);
        QVERIFY(html.finish().isEmpty());
        const QByteArray text = read(dir_.filePath("tiny-breaks.html"));
        QVERIFY(!text.contains("\xe2\x80\x8b"));
        QVERIFY(text.contains("offload=none"));
    }

    // (issue 16) A mixture of experts' report: the expert line under the chosen layout and the
    // all-to-all in the step-time table, from MoE figures filled by hand (the cost model's part).
    void mixtureOfExpertsInTheReport()
    {
        ReportInput input = tinyInput();
        input.chosen.request.problem.model.moe = {4, 2};
        input.chosen = pricePlan(input.chosen.request, parseLayoutOrDie("dp=2,pp=2,ep=2"));
        Prediction& p = input.chosen.prediction;
        p.memory_bytes.experts = 0.5 * (p.memory_bytes.weights + p.memory_bytes.gradients + p.memory_bytes.optimizer);
        p.time_s.ep_comm = 0.25 * p.step_time_s;
        p.time_s.hidden.ep_comm = 0.125 * p.step_time_s;
        p.step_time_s = p.time_s.sum();
        const QString out = dir_.filePath("tiny-moe.html");
        ReportBuilder html(input, out, ReportFormat::Html, ChartFormat::Png);
        for (int i = 0; i < html.steps(); ++i)
            html.runStep(i);
        QVERIFY(html.finish().isEmpty());
        const QString text = QString::fromUtf8(read(out));
        QVERIFY2(text.contains(QLatin1String("Experts: 4 routed over ep 2 (2 per device), etp 1, expert data parallel 1; "
                                             "their weights, gradients and optimizer states ")),
                 qPrintable(text));
        const ParameterBreakdown counts = parameterBreakdown(input.chosen.request.problem.model);
        QVERIFY2(text.contains(QStringLiteral("(%1 parameters, %2 active per token)")
                                   .arg(QString::fromStdString(formatCount(counts.total)),
                                        QString::fromStdString(formatCount(counts.active_per_token)))),
                 qPrintable(text));
        QVERIFY(counts.active_per_token < counts.total);
        QVERIFY(text.contains(QStringLiteral("<tr><td>EP all-to-all</td><td class=n>%1</td>")
                                  .arg(QString::fromStdString(formatDuration(p.time_s.ep_comm)))));
    }

    // The builder in-process, as the GUI uses it.
    void builderSteps()
    {
        Problem p;
        p.model.name = "tiny";
        p.model.layers = 4;
        p.model.hidden = 256;
        p.model.heads = 4;
        p.model.kv_heads = 4;
        p.model.head_dim = 64;
        p.model.ffn_hidden = 1024;
        p.model.vocab = 1000;
        p.model.max_seq = 512;
        p.cluster.node.name = std::string("test-node");
        p.cluster.node.chip.name = std::string("test-chip");
        p.cluster.node.chip.peak_flops_bf16 = 1e14;
        p.cluster.node.chip.hbm_bytes = 16e9;
        p.cluster.node.chip.hbm_bytes_per_second = 1e12;
        p.cluster.node.chips_per_node = 4;
        p.cluster.node.intra_link_bytes_per_second = 1e11;
        p.cluster.nodes = 1;
        p.training.global_batch = 16;
        p.training.seq_len = 512;
        Layout layout;
        layout.dp = 2;
        layout.pp = 2;
        PlanRequest request;
        request.problem = p;
        ReportInput input;
        input.chosen = pricePlan(request, layout);
        input.title = "tiny";
        ReportBuilder builder(input, dir_.filePath("tiny.html"), ReportFormat::Html, ChartFormat::Png);
        // No search and no sweep: the four charts of the plan itself.
        QCOMPARE(builder.chartNames().size(), 4);
        QCOMPARE(builder.steps(), 5);
        for (int i = 0; i < builder.steps(); ++i)
            builder.runStep(i);
        QVERIFY(builder.finish().isEmpty());
        QVERIFY(read(dir_.filePath("tiny.html")).contains("pipeline-timeline"));
    }
};

QTEST_MAIN(TstAppReport)
#include "tst_app_report.moc"
