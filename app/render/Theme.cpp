#include "Theme.h"

#include <QApplication>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace shardscope {

namespace {

QPalette darkPalette()
{
    QPalette p;
    const QColor window(45, 47, 51), base(32, 34, 37), text(225, 228, 232), disabled(125, 128, 133);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, window);
    p.setColor(QPalette::ToolTipBase, base);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Link, QColor(110, 170, 255));
    p.setColor(QPalette::Highlight, QColor(52, 120, 200));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::PlaceholderText, disabled);
    for (auto role : {QPalette::Text, QPalette::WindowText, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, disabled);
    return p;
}

} // namespace

void applyTheme(Theme theme)
{
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    switch (theme) {
    case Theme::Dark: QApplication::setPalette(darkPalette()); break;
    case Theme::Light: QApplication::setPalette(QApplication::style()->standardPalette()); break;
    case Theme::System: QApplication::setPalette(QPalette()); break;
    }
}

bool paletteIsDark() { return QApplication::palette().color(QPalette::Window).lightness() < 128; }

Theme themeFromString(const QString& text)
{
    if (text == QLatin1String("dark"))
        return Theme::Dark;
    if (text == QLatin1String("light"))
        return Theme::Light;
    return Theme::System;
}

QString toString(Theme theme)
{
    switch (theme) {
    case Theme::Dark: return QStringLiteral("dark");
    case Theme::Light: return QStringLiteral("light");
    case Theme::System: return QStringLiteral("system");
    }
    return {};
}

} // namespace shardscope
