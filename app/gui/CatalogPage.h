// CatalogPage: browse the catalog's models, chips and node types, with the
// derived figures (parameters, FLOPs) and every hardware figure's source.
#pragma once

#include <QWidget>

class QTabWidget;
class QTableWidget;
class QTreeWidget;
class QLabel;

namespace shardscope {

class Catalog;

class CatalogPage : public QWidget {
    Q_OBJECT
public:
    explicit CatalogPage(Catalog& catalog, QWidget* parent = nullptr);

    void reload();
    QTabWidget* kindTabs() const { return tabs_; }

private:
    void showDetails(QTableWidget* table);

    Catalog& catalog_;
    QTabWidget* tabs_ = nullptr;
    QTableWidget* models_ = nullptr;
    QTableWidget* chips_ = nullptr;
    QTableWidget* nodes_ = nullptr;
    QTreeWidget* details_ = nullptr;
    QLabel* title_ = nullptr;
};

} // namespace shardscope
