#include "DeviceMeshWidget.h"
#include "ChartExport.h"
#include "ChartInteraction.h"
#include "Collectives.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardscope {

DeviceMeshWidget::DeviceMeshWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumSize(320, 200);
    installExportMenu(this, QStringLiteral("device-mesh"));
}

void DeviceMeshWidget::setMesh(const Problem& problem, const Layout& layout)
{
    problem_ = problem;
    layout_ = layout;
    valid_ = layout.devices() == problem.cluster.devices() && layout.devices() > 0;
    update();
}

QStringList DeviceMeshWidget::placementLines() const
{
    QStringList lines;
    if (!valid_)
        return lines;
    const NodeType& node = problem_.cluster.node;
    const double domain = double(node.scaleUpChips()) * node.chip.devices_per_chip;
    struct Dim {
        const char* name;
        double size, stride;
    };
    std::vector<Dim> dims{{"tp", double(layout_.tp), 1.0},
                          {"cp", double(layout_.cp), double(layout_.tp)},
                          {"dp", double(layout_.dp), double(layout_.tp) * layout_.cp},
                          {"pp", double(layout_.pp), double(layout_.tp) * layout_.cp * layout_.dp}};
    // A mixture of experts' own grid over each stage's devices, in Megatron's tp-ep-dp order
    // (core/Layout.h): etp innermost, then ep (the all-to-all), then the expert data parallel
    // group (the experts' gradient reduction).
    if (problem_.model.moe.enabled()) {
        const double etp = layout_.expertTensorParallel(), ep = layout_.ep;
        if (etp != layout_.tp)
            dims.push_back({"etp", etp, 1.0});
        dims.push_back({"ep", ep, etp});
        dims.push_back({"edp", double(layout_.expertDataParallel()), etp * ep});
    }
    for (const Dim& d : dims) {
        if (d.size <= 1)
            continue;
        const GroupPlacement g = placeGroup(d.size, d.stride, domain);
        const QString where = g.crossesDomains()
                                  ? tr("across %1 scale-up domains (%2 per domain): node network")
                                        .arg(g.domains)
                                        .arg(g.members_per_domain)
                                  : tr("inside one scale-up domain: %1 link").arg(QLatin1String(toString(node.intra_topology)));
        lines << tr("%1 groups of %2: %3").arg(QLatin1String(d.name)).arg(d.size).arg(where);
    }
    return lines;
}

DeviceMeshWidget::Geometry DeviceMeshWidget::geometry() const
{
    Geometry g;
    if (!valid_)
        return g;
    const QFontMetrics fm(font());
    const NodeType& node = problem_.cluster.node;
    g.perNode = node.devicesPerNode();
    const int nodes = problem_.cluster.nodes;
    const int textH = int(placementLines().size() + 3) * fm.height() + 8;  // spare lines for wrapping
    g.area = QRectF(8, fm.height() + 12, width() - 16, height() - fm.height() - 20 - textH);
    // Show as many nodes as fit legibly; pipeline stages are far apart in the mesh, so
    // the nodes shown are spread over the cluster (first, ..., last).
    g.cols = std::max(1, int(std::ceil(std::sqrt(double(g.perNode) * 2))));
    g.rows = (g.perNode + g.cols - 1) / g.cols;
    g.shown = std::max(1, std::min(nodes, int(g.area.width() / (g.cols * 14 + 16))));
    // Smaller cells rather than one node left out of a few (7 of 8 shown reads like a gap).
    if (g.shown < nodes && nodes <= int(g.area.width() / (g.cols * 10 + 16)))
        g.shown = nodes;
    g.nodeW = g.area.width() / g.shown;
    g.cell = std::min((g.nodeW - 12) / g.cols, (g.area.height() - fm.height() - 12) / g.rows);
    g.stride = nodes > g.shown ? (nodes - 1) / std::max(1, g.shown - 1) : 1;
    g.boxH = g.rows * g.cell + fm.height() + 10;
    g.numbers = g.cell > fm.horizontalAdvance(QString::number(std::max(0, layout_.dp - 1))) + 4 && g.cell > fm.height() * 0.8;
    return g;
}

int DeviceMeshWidget::nodeShown(const Geometry& g, int k) const
{
    // The last box is the last node, so the last pipeline stage is always among those shown.
    return k == g.shown - 1 ? problem_.cluster.nodes - 1 : std::min(problem_.cluster.nodes - 1, k * g.stride);
}

QRectF DeviceMeshWidget::deviceRect(const Geometry& g, int k, int i) const
{
    const QFontMetrics fm(font());
    const QRectF box(g.area.left() + k * g.nodeW + 2, g.area.top(), g.nodeW - 4, g.boxH);
    return QRectF(box.left() + 6 + (i % g.cols) * g.cell, box.top() + fm.height() + 6 + (i / g.cols) * g.cell, g.cell - 2,
                  g.cell - 2);
}

QString DeviceMeshWidget::toolTipAt(const QPointF& at) const
{
    const Geometry g = geometry();
    for (int k = 0; k < g.shown; ++k)
        for (int i = 0; i < g.perNode; ++i)
            if (deviceRect(g, k, i).contains(at)) {
                const int n = nodeShown(g, k);
                const std::int64_t device = std::int64_t(n) * g.perNode + i;
                return tr("node %1, device %2 (rank %3): tp rank %4, cp rank %5, dp rank %6, pipeline stage %7")
                    .arg(n)
                    .arg(i)
                    .arg(device)
                    .arg(device % layout_.tp)
                    .arg((device / layout_.tp) % layout_.cp)
                    .arg((device / (std::int64_t(layout_.tp) * layout_.cp)) % layout_.dp)
                    .arg(device / (std::int64_t(layout_.tp) * layout_.cp * layout_.dp));
            }
    return {};
}

bool DeviceMeshWidget::event(QEvent* event)
{
    // A tooltip asked for without a move (keyboard, touch) too.
    if (event->type() == QEvent::ToolTip)
        return answerToolTip(this, event, toolTipAt(static_cast<QHelpEvent*>(event)->pos()));
    return QWidget::event(event);
}

void DeviceMeshWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.base());
    const QFontMetrics fm(font());
    p.setPen(pal.text().color());
    if (!valid_) {
        p.drawText(rect(), Qt::AlignCenter, tr("no layout selected"));
        return;
    }
    const NodeType& node = problem_.cluster.node;
    const int perNode = node.devicesPerNode();
    const int nodes = problem_.cluster.nodes;
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    const QString title = tr("Device mesh: %1 x %2, %3 devices (tp %4, cp %5, dp %6, pp %7)")
                              .arg(nodes)
                              .arg(QString::fromStdString(node.name))
                              .arg(problem_.cluster.devices())
                              .arg(layout_.tp)
                              .arg(layout_.cp)
                              .arg(layout_.dp)
                              .arg(layout_.pp);
    p.drawText(QRect(0, 2, width(), fm.height() + 6), Qt::AlignHCenter | Qt::AlignVCenter, title);
    p.setFont(font());

    const QStringList lines = placementLines();
    const Geometry g = geometry();
    // The group edge in the text colour: it stands out from the stage colours in both themes.
    const QColor edge = pal.text().color();
    for (int k = 0; k < g.shown; ++k) {
        const int n = nodeShown(g, k);
        const QRectF box(g.area.left() + k * g.nodeW + 2, g.area.top(), g.nodeW - 4, g.boxH);
        p.setPen(QPen(pal.text().color(), 1));
        p.setBrush(Qt::NoBrush);
        p.drawRoundedRect(box, 4, 4);
        p.drawText(QRectF(box.left(), box.top() + 2, box.width(), fm.height()), Qt::AlignHCenter,
                   tr("node %1").arg(n));
        for (int i = 0; i < perNode; ++i) {
            const std::int64_t device = std::int64_t(n) * perNode + i;
            const int tpRank = int(device % layout_.tp);
            const int dpRank = int((device / (std::int64_t(layout_.tp) * layout_.cp)) % layout_.dp);
            const int stage = int(device / (std::int64_t(layout_.tp) * layout_.cp * layout_.dp));
            const QRectF c = deviceRect(g, k, i);
            const QColor color = QColor::fromHsv(int(240.0 * stage / std::max(1, layout_.pp)) % 360, 150, 220);
            p.fillRect(c, color);
            // A thick left edge starts each tensor-parallel group.
            if (tpRank == 0 && layout_.tp > 1)
                p.fillRect(QRectF(c.left(), c.top(), std::max(2.0, g.cell / 8), c.height()), edge);
            if (g.numbers) {
                p.setPen(Qt::black);  // on the light stage colours in both themes
                p.drawText(c, Qt::AlignCenter, QString::number(dpRank));
            }
        }
    }
    const int maxShown = g.shown;
    const double boxH = g.boxH;
    const QRectF area = g.area;
    const int textH = int(lines.size() + 3) * fm.height() + 8;
    p.setPen(pal.text().color());
    // The caption says what is drawn: rank numbers only where the cells have room for them.
    const QString legend =
        tr("colour: pipeline stage; %1thick edge: start of a tensor-parallel group%2%3")
            .arg(g.numbers ? tr("number: data-parallel rank; ") : QString(),
                 nodes > maxShown ? tr("; %1 of %2 nodes shown (first to last)").arg(maxShown).arg(nodes) : QString(),
                 isVisible() && !testAttribute(Qt::WA_DontShowOnScreen) ? tr("; hover a device for its ranks")
                                                                        : QString());  // not in a report's picture
    // The explanation right under the nodes it explains, not at the far bottom of a tall widget.
    const double textTop = std::min(area.top() + boxH + 8, double(height() - textH + 4));
    p.drawText(QRectF(8, textTop, width() - 16, height() - textTop), Qt::TextWordWrap,
               QStringList(legend + QLatin1Char('\n') + lines.join(QLatin1Char('\n'))).join(QString()));
}

} // namespace shardscope
