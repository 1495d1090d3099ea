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
    // "tp: inside a node (switch)" ... one line per parallel dimension.
    QStringList placementLines() const;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    Problem problem_;
    Layout layout_;
    bool valid_ = false;
};

} // namespace shardscope
