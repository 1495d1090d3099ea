// SortHeaderView: a horizontal header for sortable tables that reserves room for the
// sort arrow only in the sorted section. QHeaderView reserves it in every section,
// which made wide tables (the plans, the node types) scroll sideways.
#pragma once

#include <QHeaderView>
#include <QStyle>

namespace shardscope {

class SortHeaderView : public QHeaderView {
public:
    explicit SortHeaderView(QWidget* parent) : QHeaderView(Qt::Horizontal, parent)
    {
        // A replacement header is not clickable by default (QTableView makes only its own header
        // so): without this, clicking a column never sorts.
        setSectionsClickable(true);
        setHighlightSections(true);
        // The arrow moves: sections sized to their contents follow it, others widen to it.
        connect(this, &QHeaderView::sortIndicatorChanged, this, [this](int section) {
            resizeSections();
            if (section >= 0 && section < count() && sectionResizeMode(section) == QHeaderView::Interactive &&
                sectionSize(section) < sectionSizeHint(section))
                resizeSection(section, sectionSizeHint(section));
        });
    }

protected:
    QSize sectionSizeFromContents(int logicalIndex) const override
    {
        QSize size = QHeaderView::sectionSizeFromContents(logicalIndex);
        if (isSortIndicatorShown() && logicalIndex != sortIndicatorSection())
            size.rwidth() -= size.height() + style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, this);
        return size;
    }
};

} // namespace shardscope
