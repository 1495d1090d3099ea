#include "ChartExport.h"

#include <QAction>
#include <QChartView>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSvgGenerator>

namespace shardscope {

namespace {

// Charts render through their view so that PDF and SVG keep vectors (toolchain.md).
void renderInto(QWidget* widget, QPainter& painter, const QRectF& target)
{
    if (auto* view = qobject_cast<QChartView*>(widget))
        view->render(&painter, target, view->viewport()->rect(), Qt::KeepAspectRatio);
    else {
        painter.save();
        const double scale = std::min(target.width() / widget->width(), target.height() / widget->height());
        painter.translate(target.topLeft());
        painter.scale(scale, scale);
        widget->render(&painter, QPoint(), QRegion(), QWidget::DrawChildren);
        painter.restore();
    }
}

} // namespace

QString exportWidget(QWidget* widget, const QString& path)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("png")) {
        if (!widget->grab().save(path, "PNG"))
            return QObject::tr("cannot write %1").arg(path);
        return {};
    }
    if (suffix == QLatin1String("svg")) {
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(widget->size());
        svg.setViewBox(QRect(QPoint(), widget->size()));
        // The widget's resolution: at QSvgGenerator's default 72 dpi a 9 pt font is written as
        // font-size 9 in a viewBox of screen pixels (where it is 12 px): text at three quarters.
        svg.setResolution(widget->logicalDpiX());
        svg.setTitle(widget->windowTitle());
        QPainter painter;
        if (!painter.begin(&svg))
            return QObject::tr("cannot write %1").arg(path);
        renderInto(widget, painter, QRectF(QPointF(), widget->size()));
        painter.end();
        return {};
    }
    if (suffix == QLatin1String("pdf")) {
        QPdfWriter pdf(path);
        pdf.setPageSize(QPageSize(QPageSize::A4));
        pdf.setPageOrientation(QPageLayout::Landscape);
        pdf.setResolution(300);
        QPainter painter;
        if (!painter.begin(&pdf))
            return QObject::tr("cannot write %1").arg(path);
        const QRect page = pdf.pageLayout().paintRectPixels(pdf.resolution());
        renderInto(widget, painter, QRectF(0, 0, page.width(), page.height()));
        painter.end();
        return {};
    }
    return QObject::tr("unknown format \"%1\": use .png, .svg or .pdf").arg(suffix);
}

void installExportMenu(QWidget* widget, const QString& suggestedName)
{
    widget->setContextMenuPolicy(Qt::ActionsContextMenu);
    for (const char* format : {"PNG", "SVG", "PDF"}) {
        auto* action = new QAction(QObject::tr("Export as %1...").arg(QLatin1String(format)), widget);
        const QString suffix = QString::fromLatin1(format).toLower();
        QObject::connect(action, &QAction::triggered, widget, [widget, suggestedName, suffix, format] {
            const QString path = QFileDialog::getSaveFileName(
                widget, QObject::tr("Export chart"), suggestedName + QLatin1Char('.') + suffix,
                QStringLiteral("%1 (*.%2)").arg(QLatin1String(format), suffix));
            if (path.isEmpty())
                return;
            const QString error = exportWidget(widget, path);
            if (!error.isEmpty())
                QMessageBox::warning(widget, QObject::tr("Export chart"), error);
        });
        widget->addAction(action);
    }
}

} // namespace shardscope
