// shardscope: the desktop application.
//   shardscope [--db PATH] [--screenshots DIR [--size WxH]] [FILE]
// FILE: a plan file (shardscope-cli plan --out) opened instead of searching the default problem.
#include "BuildInfo.h"
#include "CommandHelp.h"
#include "Store.h"
#include "MainWindow.h"
#include "Theme.h"
#include "ValidatePage.h"
#include "Version.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QIcon>
#include <QMessageBox>
#include <QSettings>

#include <cstdio>
#include <stdexcept>

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("shardscope"));
    QApplication::setApplicationDisplayName(QStringLiteral("ShardScope"));
    QApplication::setApplicationVersion(QString::fromLatin1(shardscope::kPackageVersion));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/shardscope.svg")));
    QGuiApplication::setDesktopFileName(QStringLiteral("shardscope"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Plan and validate parallel training layouts"));
    parser.addHelpOption();
    parser.addVersionOption();
    // The options, their help and defaults come from the table the man page is made from.
    auto option = [](const char* name) {
        for (const shardscope::cli::OptionHelp& o : shardscope::cli::guiOptions())
            if (o.name == name)
                return QCommandLineOption(QString::fromStdString(o.name),
                                          QString::fromStdString(o.help + (o.def.empty() ? "" : " (default: " + o.def + ")")),
                                          QString::fromStdString(o.value), QString::fromStdString(o.def));
        throw std::logic_error(std::string("no GUI option --") + name);
    };
    const QCommandLineOption db = option("db"), shots = option("screenshots"), size = option("size"),
                             theme = option("theme");
    parser.addOptions({db, shots, size, theme});
    parser.addPositionalArgument(QStringLiteral("file"), QStringLiteral("a plan file to open (shardscope-cli plan --out)"),
                                 QStringLiteral("[FILE]"));
    parser.process(app);
    if (parser.positionalArguments().size() > 1) {
        std::fprintf(stderr, "shardscope: one plan file at a time (given %lld: %s)\n",
                     static_cast<long long>(parser.positionalArguments().size()),
                     qPrintable(parser.positionalArguments().join(QStringLiteral(", "))));
        return 2;
    }
    const QString planFile = parser.positionalArguments().value(0);
    shardscope::applyTheme(shardscope::themeFromString(
        parser.isSet(theme) ? parser.value(theme) : QSettings().value(QStringLiteral("theme")).toString()));

    const QString dbPath = parser.isSet(db) ? parser.value(db) : shardscope::Store::defaultPath();
    std::unique_ptr<shardscope::Store> store;
    try {
        store = std::make_unique<shardscope::Store>(dbPath);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "shardscope: %s\n", e.what());
        if (QApplication::platformName() != QLatin1String("offscreen"))
            QMessageBox::critical(nullptr, QStringLiteral("ShardScope"), QString::fromUtf8(e.what()));
        return 1;
    }

    shardscope::MainWindow window(*store);
    // The file replaces the default problem's search (which openPlanFile cancels).
    QString openError;
    const bool opened = planFile.isEmpty() || window.openPlanFile(planFile, &openError);
    if (!opened)
        std::fprintf(stderr, "shardscope: cannot open %s: %s\n", qPrintable(planFile), qPrintable(openError));
    if (parser.isSet(shots)) {
        if (!opened)
            return 1;
        const QStringList wh = parser.value(size).split(QLatin1Char('x'));
        bool okW = false, okH = false;
        const int w = wh.value(0).toInt(&okW), h = wh.value(1).toInt(&okH);
        if (wh.size() != 2 || !okW || !okH || w < 320 || h < 240) {
            std::fprintf(stderr, "shardscope: --size %s: expected WIDTHxHEIGHT, at least 320x240\n",
                         qPrintable(parser.value(size)));
            return 2;
        }
        window.resize(w, h);
        window.show();
        // The default problem is searched (or the file's plans priced), its best plan selected, and
        // the sweeps run first.
        QElapsedTimer waited;
        waited.start();
        while ((window.busy() || !window.lastResult()) && waited.elapsed() < 600'000)
            QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
        // A short validation run of the best plan, shown but kept out of the user's history.
        window.validatePage()->setStoresRuns(false);
        window.validatePage()->setSteps(10);
        window.validatePage()->start();
        while (window.busy() && waited.elapsed() < 600'000)
            QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
        const QStringList files = window.saveScreenshots(parser.value(shots));
        for (const QString& f : files)
            std::printf("%s\n", qPrintable(f));
        return files.isEmpty() ? 1 : 0;
    }
    window.show();
    if (!opened && QApplication::platformName() != QLatin1String("offscreen"))
        QMessageBox::warning(&window, QStringLiteral("ShardScope"),
                             QStringLiteral("Cannot open %1:\n\n%2").arg(planFile, openError));
    return app.exec();
}
