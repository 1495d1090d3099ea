#include "DeviceMeshWidget.h"
#include "ChartExport.h"
#include "Collectives.h"

#include <QPainter>

#include <algorithm>
#include <cmath>

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
    const struct {
        const char* name;
        double size, stride;
    } dims[] = {{"tp", double(layout_.tp), 1.0},
                {"cp", double(layout_.cp), double(layout_.tp)},
                {"dp", double(layout_.dp), double(layout_.tp) * layout_.cp},
                {"pp", double(layout_.pp), double(layout_.tp) * layout_.cp * layout_.dp}};
    for (const auto& d : dims) {
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
    const int textH = int(lines.size() + 2) * fm.height() + 8;  // one spare line for wrapping
    const QRectF area(8, fm.height() + 12, width() - 16, height() - fm.height() - 20 - textH);
    // Show as many nodes as fit legibly; pipeline stages are far apart in the mesh, so
    // the nodes shown are spread over the cluster (first, ..., last).
    const int cols = std::max(1, int(std::ceil(std::sqrt(double(perNode) * 2))));
    const int rows = (perNode + cols - 1) / cols;
    const int maxShown = std::max(1, std::min(nodes, int(area.width() / (cols * 14 + 16))));
    const double nodeW = area.width() / maxShown;
    const double cell = std::min((nodeW - 12) / cols, (area.height() - fm.height() - 12) / rows);
    const int stride = nodes > maxShown ? (nodes - 1) / std::max(1, maxShown - 1) : 1;
    const double boxH = rows * cell + fm.height() + 10;
    for (int k = 0; k < maxShown; ++k) {
        const int n = std::min(nodes - 1, k * stride);
        const QRectF box(area.left() + k * nodeW + 2, area.top(), nodeW - 4, boxH);
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
            const QRectF c(box.left() + 6 + (i % cols) * cell, box.top() + fm.height() + 6 + (i / cols) * cell,
                           cell - 2, cell - 2);
            const QColor color = QColor::fromHsv(int(240.0 * stage / std::max(1, layout_.pp)) % 360, 150, 220);
            p.fillRect(c, color);
            // A thick left edge starts each tensor-parallel group.
            if (tpRank == 0 && layout_.tp > 1)
                p.fillRect(QRectF(c.left(), c.top(), 2, c.height()), pal.text().color());
            if (cell > fm.horizontalAdvance(QStringLiteral("00")) + 4) {
                p.setPen(Qt::black);
                p.drawText(c, Qt::AlignCenter, QString::number(dpRank));
            }
        }
    }
    p.setPen(pal.text().color());
    const QString legend =
        tr("colour: pipeline stage; number: data-parallel rank; dark edge: start of a tensor-parallel group%1")
            .arg(nodes > maxShown ? tr("; %1 of %2 nodes shown").arg(maxShown).arg(nodes) : QString());
    // The explanation right under the nodes it explains, not at the far bottom of a tall widget.
    const double textTop = std::min(area.top() + boxH + 8, double(height() - textH + 4));
    p.drawText(QRectF(8, textTop, width() - 16, height() - textTop), Qt::TextWordWrap,
               QStringList(legend + QLatin1Char('\n') + lines.join(QLatin1Char('\n'))).join(QString()));
}

} // namespace shardscope
