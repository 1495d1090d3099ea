// ReportBuilder: a self-contained report of one plan — the problem, the chosen layout
// and why (its rank, the runner-up alternatives and what separates them), memory and
// step-time breakdowns, the pipeline timeline, the device mesh, the Pareto front, the
// scaling curve, the named terms — as HTML (PNG or SVG charts embedded: one file)
// or PDF (QPdfWriter through QTextDocument, so pages break cleanly).
//
// Charts are rendered offscreen with the GUI's chart adapters, so the report and the
// window draw the same thing. The work is split into steps (one chart each) so that
// the GUI can run them from its event loop with progress and cancel, and the CLI in a
// loop. Widgets are used, so steps run on the GUI thread of a QApplication.
#pragma once

#include "Search.h"
#include "Sweep.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

class QTextDocument;

namespace shardscope {

enum class ReportFormat { Html, Pdf };
enum class ChartFormat { Png, Svg };

struct ReportInput {
    PricedPlan chosen;     // the reported plan, priced by its request's terms (problem included)
    SearchResult result;   // alternatives and the Pareto front; may be empty
    SweepResult sweep;     // the scaling curve; may be empty
    QString title;
    // The latest validation of this plan from the run history ("shardscope.validation/1"), if any.
    std::optional<QJsonObject> validation;
    QString validation_when;
};

class ReportBuilder {
public:
    ReportBuilder(ReportInput input, QString outputPath, ReportFormat format, ChartFormat charts);
    ~ReportBuilder();

    int steps() const;                 // charts to render + the document
    QString stepName(int step) const;  // for progress
    void runStep(int step);            // in order, 0 .. steps() - 1
    // Writes the document after all steps; returns an error message or empty.
    QString finish();

    QStringList chartNames() const;    // "memory", "step-time", ... in report order
    int pageCount() const { return pages_; }  // PDF pages written
    // The PDF's document laid out on its A4 pages, after all steps (finish() prints it).
    std::unique_ptr<QTextDocument> pdfDocument() const;

private:
    struct Chart;
    QString html(bool forPdf) const;

    ReportInput in_;
    QString path_;
    ReportFormat format_;
    ChartFormat charts_;
    std::vector<std::unique_ptr<Chart>> rendered_;
    int pages_ = 0;
};

// Where a laid-out document breaks a line inside a word ("offload=non/e"): each as the text
// around it with "/" at the break. A report has none.
QStringList midWordBreaks(const QTextDocument& doc);

// Derives a file format from the file name (.html/.htm or .pdf); empty error on success.
QString reportFormatFromPath(const QString& path, ReportFormat& format);

} // namespace shardscope
