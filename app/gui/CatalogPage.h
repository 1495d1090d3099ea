// CatalogPage: browse the catalog's models, chips and node types, with the
// derived figures (parameters, FLOPs) and every hardware figure's source.
#pragma once

#include <QWidget>

#include <string>

class QPushButton;
class QTabWidget;
class QTableWidget;
class QTreeWidget;
class QLabel;

namespace shardscope {

class SpecCatalog;

class CatalogPage : public QWidget {
    Q_OBJECT
public:
    explicit CatalogPage(SpecCatalog& catalog, QWidget* parent = nullptr);

    void reload();
    QTabWidget* kindTabs() const { return tabs_; }
    // The entry selected in the current tab, or empty.
    std::string selectedName() const;
    void select(const std::string& name);

    // Actions on the selected entry (also the buttons). They return an error message or empty.
    QString exportSelected(const QString& path);
    QString removeSelected();

signals:
    void catalogChanged();

private:
    void showDetails(QTableWidget* table);
    void editSelected();
    void newEntry(const char* kind);

    SpecCatalog& catalog_;
    QTabWidget* tabs_ = nullptr;
    QTableWidget* models_ = nullptr;
    QTableWidget* chips_ = nullptr;
    QTableWidget* nodes_ = nullptr;
    QTreeWidget* details_ = nullptr;
    QLabel* title_ = nullptr;
    QPushButton* edit_ = nullptr;
    QPushButton* remove_ = nullptr;
};

} // namespace shardscope
