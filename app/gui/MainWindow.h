// MainWindow: the ShardScope desktop window. Pages are tabs; this first version
// has an overview of the default problem and the catalog browser.
#pragma once

#include <QMainWindow>

#include <memory>

class QTabWidget;

namespace shardscope {

class Catalog;
class CatalogPage;
class PlanDetailsPage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(Catalog& catalog, QWidget* parent = nullptr);

    QTabWidget* pages() const { return pages_; }
    // Saves one PNG per page (and per catalog tab) into `dir`; returns the files written.
    QStringList saveScreenshots(const QString& dir);

protected:
    void closeEvent(class QCloseEvent* event) override;

private:
    void importFile();
    void showAbout();

    Catalog& catalog_;
    QTabWidget* pages_ = nullptr;
    CatalogPage* catalogPage_ = nullptr;
    PlanDetailsPage* detailsPage_ = nullptr;
};

} // namespace shardscope
