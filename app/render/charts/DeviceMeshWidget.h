// DeviceMeshWidget: the cluster's nodes and devices with the layout's groups — device
// colour = pipeline stage, outlined blocks = tensor-parallel groups, label = data-parallel
// rank — and, in words, which groups' traffic stays inside a node and which crosses nodes.
#pragma once

#include "Layout.h"
#include "Problem.h"

#include <QWidget>

namespace shardscope {

class DeviceMeshWidget : public QWidget {
    Q_OBJECT
public:
    explicit DeviceMeshWidget(QWidget* parent = nullptr);

    void setMesh(const Problem& problem, const Layout& layout);
    QSize sizeHint() const override { return {640, 320}; }
    // "tp groups of 2: inside one scale-up domain: switch link" ... one line per parallel
    // dimension; a mixture of experts adds its ep, edp (and etp when it is not tp) groups.
    QStringList placementLines() const;
    // The device under a point: "node 21, device 5 (rank 677): tp rank 5, cp rank 0, dp rank 1,
    // pipeline stage 5"; empty off the devices.
    QString toolTipAt(const QPointF& at) const;

    // Where the devices are drawn (shared by painting and hit testing).
    struct Geometry {
        QRectF area;
        int perNode = 0, cols = 1, rows = 1, shown = 0, stride = 1;
        double nodeW = 0, cell = 0, boxH = 0;
        bool numbers = false;  // cells big enough for their data-parallel rank
    };
    Geometry geometry() const;
    int nodeShown(const Geometry& g, int k) const;       // the node in the k-th box
    QRectF deviceRect(const Geometry& g, int k, int i) const;  // device i of the k-th box

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    Problem problem_;
    Layout layout_;
    bool valid_ = false;
};

} // namespace shardscope
