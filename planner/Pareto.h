// ParetoFront: the points not dominated when minimising two figures (x, y),
// e.g. (step time, memory per device) or (time to train, cost to train).
//
// a dominates b when a.x <= b.x and a.y <= b.y and a differs from b in one of
// them. Points with exactly the same (x, y) are collapsed to the one whose item
// `Less` orders first, so the front is a function of the set of points alone:
// insertion order, and hence the number of search threads, cannot change it.
// Non-finite points are ignored.
//
// Stored sorted by x ascending; y is then strictly descending.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardscope {

template <class T>
struct ParetoPoint {
    double x = 0;
    double y = 0;
    T item{};
};

template <class T, class Less>
class ParetoFront {
public:
    explicit ParetoFront(Less less = Less()) : less_(less) {}

    // Adds a point; returns whether it is on the front now.
    bool insert(double x, double y, const T& item)
    {
        if (!std::isfinite(x) || !std::isfinite(y))
            return false;
        // First point with x' >= x; every point before it has x' < x and the last of
        // them has the smallest y among them.
        auto it = std::lower_bound(points_.begin(), points_.end(), x,
                                   [](const ParetoPoint<T>& p, double value) { return p.x < value; });
        if (it != points_.begin() && std::prev(it)->y <= y)
            return false;  // dominated by a point of smaller x
        if (it != points_.end() && it->x == x) {
            if (it->y < y)
                return false;  // same x, smaller y
            if (it->y == y) {
                if (!less_(item, it->item))
                    return false;
                it->item = item;  // exact duplicate: keep the item ordered first
                return true;
            }
        }
        // The new point dominates the following points whose y is not smaller (a contiguous run).
        auto end = it;
        while (end != points_.end() && end->y >= y)
            ++end;
        const auto at = it - points_.begin(), last = end - points_.begin();
        it = points_.erase(it, end);
        points_.insert(it, ParetoPoint<T>{x, y, item});
        xs_.erase(xs_.begin() + at, xs_.begin() + last);
        xs_.insert(xs_.begin() + at, x);
        ys_.erase(ys_.begin() + at, ys_.begin() + last);
        ys_.insert(ys_.begin() + at, y);
        return true;
    }

    void merge(const ParetoFront& other)
    {
        for (const ParetoPoint<T>& p : other.points_)
            insert(p.x, p.y, p.item);
    }

    // Whether (x, y) is dominated by, or equal to, a point of the front.
    bool covers(double x, double y) const
    {
        for (const ParetoPoint<T>& p : points_)
            if (p.x <= x && p.y <= y)
                return true;
        return false;
    }

    // Whether a point of the front is at least as good in both and better in one: inserting
    // (x, y) could not change the front (an exact tie might, by its item).
    // By bisection over the coordinates alone (the search asks this of millions of bounds): the
    // last point with x' <= x has the least y' of those (y strictly descending).
    bool dominates(double x, double y) const
    {
        const auto it = std::upper_bound(xs_.begin(), xs_.end(), x);
        if (it == xs_.begin())
            return false;
        const auto i = (it - xs_.begin()) - 1;
        return ys_[i] < y || (ys_[i] == y && xs_[i] < x);
    }

    const std::vector<ParetoPoint<T>>& points() const { return points_; }
    size_t size() const { return points_.size(); }
    bool empty() const { return points_.empty(); }

private:
    Less less_;
    std::vector<ParetoPoint<T>> points_;
    std::vector<double> xs_, ys_;  // the points' coordinates, kept apart for dominates()
};

} // namespace shardscope
