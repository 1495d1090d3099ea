// SortHeaderView: a horizontal header for sortable tables that reserves room for the
// sort arrow only in the sorted section. QHeaderView reserves it in every section,
// which made wide tables (the plans, the node types) scroll sideways.
#pragma once

#include <QAbstractItemView>
#include <QHeaderView>
#include <QResizeEvent>
#include <QStyle>

#include <algorithm>

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
            share_ = -1;
            resizeSections();
            if (section >= 0 && section < count() && sectionResizeMode(section) == QHeaderView::Interactive &&
                sectionSize(section) < sectionSizeHint(section))
                resizeSection(section, sectionSizeHint(section));
        });
    }

    // Sections sized to their contents share the width left over when the table is wider than
    // they need (a 2560 px window), instead of leaving it blank on the right.
    void setFillsWidth(bool fill)
    {
        fills_ = fill;
        share_ = -1;
        resizeSections();
    }

    void setModel(QAbstractItemModel* model) override
    {
        // New rows may need other widths: the share is measured again (connected before the
        // header's own handlers, which resize the sections).
        if (model && model != this->model()) {
            const auto remeasure = [this] { share_ = -1; };
            connect(model, &QAbstractItemModel::modelReset, this, remeasure);
            connect(model, &QAbstractItemModel::layoutChanged, this, remeasure);
            connect(model, &QAbstractItemModel::rowsInserted, this, remeasure);
            connect(model, &QAbstractItemModel::rowsRemoved, this, remeasure);
            connect(model, &QAbstractItemModel::dataChanged, this, remeasure);
        }
        QHeaderView::setModel(model);
    }

protected:
    QSize sectionSizeFromContents(int logicalIndex) const override
    {
        QSize size = ownSize(logicalIndex);
        if (fills_ && sectionResizeMode(logicalIndex) == QHeaderView::ResizeToContents) {
            if (share_ < 0)
                share_ = measureShare();
            // The whole natural width plus the share: the larger of this and the cells' width is taken.
            size.setWidth(naturalWidth(logicalIndex) + share_);
        }
        return size;
    }

    void resizeEvent(QResizeEvent* event) override
    {
        QHeaderView::resizeEvent(event);
        if (fills_ && event->size().width() != event->oldSize().width()) {
            share_ = -1;
            resizeSections();
        }
    }

private:
    QSize ownSize(int logicalIndex) const
    {
        QSize size = QHeaderView::sectionSizeFromContents(logicalIndex);
        if (isSortIndicatorShown() && logicalIndex != sortIndicatorSection())
            size.rwidth() -= size.height() + style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, this);
        return size;
    }

    // What a section needs: its header or its widest cell.
    int naturalWidth(int logicalIndex) const
    {
        const auto* view = qobject_cast<const QAbstractItemView*>(parentWidget());
        return std::max(ownSize(logicalIndex).width(), view ? view->sizeHintForColumn(logicalIndex) : 0);
    }

    int measureShare() const
    {
        // The sort arrow's section gets its room back from the share (it is wider than its text).
        int natural = 0, sections = 0;
        for (int c = 0; c < count(); ++c) {
            if (isSectionHidden(c))
                continue;
            natural += sectionResizeMode(c) == QHeaderView::ResizeToContents ? naturalWidth(c) : sectionSize(c);
            sections += sectionResizeMode(c) == QHeaderView::ResizeToContents ? 1 : 0;
        }
        const int arrow = isSortIndicatorShown() ? height() + style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, this) : 0;
        const int spare = width() - natural - arrow - 2;
        return sections > 0 && spare > 0 ? spare / sections : 0;
    }

    bool fills_ = false;
    mutable int share_ = -1;
};

} // namespace shardscope
