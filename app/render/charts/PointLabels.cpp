#include "PointLabels.h"

#include <QChart>
#include <QGraphicsSimpleTextItem>
#include <QLogValueAxis>
#include <QPointer>
#include <QScatterSeries>
#include <QValueAxis>
#include <QXYSeries>

#include <algorithm>
#include <vector>

namespace shardscope {

namespace {

// The labels of one chart, a child of the chart kept in its property kSetProperty (no
// Q_OBJECT: findChild could not tell it from the chart's other children).
class PointLabelSet : public QObject {
public:
    explicit PointLabelSet(QChart* chart) : QObject(chart) {}

    struct Entry {
        QPointer<QXYSeries> series;  // the chart deletes its series before its children
        qsizetype index;
        QGraphicsSimpleTextItem* item;
    };
    std::vector<Entry> entries;
    std::vector<QAbstractAxis*> watched;  // axes whose range changes move the labels
};

constexpr const char* kSetProperty = "shardscope_point_label_set";

PointLabelSet* existingSet(const QChart* chart)
{
    return static_cast<PointLabelSet*>(chart->property(kSetProperty).value<QObject*>());
}

PointLabelSet* labelSet(QChart* chart)
{
    if (PointLabelSet* set = existingSet(chart))
        return set;
    auto* set = new PointLabelSet(chart);
    chart->setProperty(kSetProperty, QVariant::fromValue<QObject*>(set));
    QObject::connect(chart, &QChart::plotAreaChanged, set, [chart] { placePointLabels(chart); });
    return set;
}

// Half the size of the series' markers (0 for a line without them).
double markerRadius(const QXYSeries* series)
{
    if (const auto* scatter = qobject_cast<const QScatterSeries*>(series))
        return scatter->markerSize() / 2;
    return series->pointsVisible() ? series->markerSize() / 2 : 0.0;
}

} // namespace

void addPointLabels(QChart* chart, QXYSeries* series, const QStringList& tags)
{
    PointLabelSet* set = labelSet(chart);
    const QColor text = chart->titleBrush().color();
    QFont font = chart->legend()->font();
    for (qsizetype i = 0; i < tags.size() && i < series->count(); ++i) {
        if (tags[i].isEmpty())
            continue;
        auto* item = new QGraphicsSimpleTextItem(tags[i], chart);
        item->setBrush(text);
        item->setFont(font);
        item->setZValue(10);  // above the series
        item->setData(0, QString::fromLatin1(kPointLabelName));
        set->entries.push_back({series, i, item});
    }
    // Zoom changes the axes' ranges, not the plot area.
    for (QAbstractAxis* axis : series->attachedAxes()) {
        if (std::find(set->watched.begin(), set->watched.end(), axis) != set->watched.end())
            continue;
        set->watched.push_back(axis);
        if (auto* value = qobject_cast<QValueAxis*>(axis))
            QObject::connect(value, &QValueAxis::rangeChanged, set, [chart] { placePointLabels(chart); });
        else if (auto* log = qobject_cast<QLogValueAxis*>(axis))
            QObject::connect(log, &QLogValueAxis::rangeChanged, set, [chart] { placePointLabels(chart); });
    }
    placePointLabels(chart);
}

void placePointLabels(QChart* chart)
{
    PointLabelSet* set = existingSet(chart);
    if (!set)
        return;
    const QRectF plot = chart->plotArea();
    // What a label must not cover: every marker of the chart, then the labels placed so far.
    std::vector<QRectF> taken;
    for (QAbstractSeries* s : chart->series()) {
        auto* xy = qobject_cast<QXYSeries*>(s);
        const double r = xy && xy->isVisible() ? markerRadius(xy) : 0.0;
        if (r <= 0)
            continue;
        for (qsizetype i = 0; i < xy->count(); ++i) {
            const QPointF c = chart->mapToPosition(xy->at(i), xy);
            taken.push_back(QRectF(c.x() - r, c.y() - r, 2 * r, 2 * r));
        }
    }
    for (const PointLabelSet::Entry& e : set->entries) {
        if (!e.series || !chart->series().contains(e.series.data())) {
            e.item->hide();
            continue;
        }
        const QPointF p = chart->mapToPosition(e.series->at(e.index), e.series);
        if (!e.series->isVisible() || !plot.contains(p)) {
            e.item->hide();
            continue;
        }
        const QSizeF size = e.item->boundingRect().size();
        const double w = size.width(), h = size.height();
        const double gap = markerRadius(e.series) + 3;
        // The four corners first, then centred above and below, then a line further out.
        const QPointF candidates[] = {
            {p.x() + gap, p.y() - gap - h},     {p.x() + gap, p.y() + gap},     {p.x() - gap - w, p.y() - gap - h},
            {p.x() - gap - w, p.y() + gap},     {p.x() - w / 2, p.y() - gap - h}, {p.x() - w / 2, p.y() + gap},
            {p.x() - w / 2, p.y() - gap - 2 * h}, {p.x() - w / 2, p.y() + gap + h},
            {p.x() + gap, p.y() - gap - 2 * h}, {p.x() + gap, p.y() + gap + h},
        };
        bool placed = false;
        for (const QPointF& at : candidates) {
            const QRectF box(at, size);
            if (!plot.contains(box))
                continue;
            const bool free = std::none_of(taken.begin(), taken.end(), [&](const QRectF& t) { return t.intersects(box); });
            if (!free)
                continue;
            e.item->setPos(at);
            e.item->show();
            taken.push_back(box);
            placed = true;
            break;
        }
        if (!placed)
            e.item->hide();
    }
}

} // namespace shardscope
