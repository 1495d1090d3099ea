#include "Theme.h"

#include <QApplication>
#include <QPainter>
#include <QPalette>
#include <QProxyStyle>
#include <QStyle>
#include <QStyleFactory>
#include <QStyleOption>

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

// Fusion with check boxes and radio buttons whose edge is seen on a dark palette: Fusion draws
// it a shade darker than the window, which on a dark window is about 1.3:1 (an unchecked box
// all but disappears). The edge here is mid-way between the text and the window colours,
// over 3:1 against the window (WCAG 2.1, non-text contrast).
class ContrastStyle : public QProxyStyle {
public:
    ContrastStyle() : QProxyStyle(QStyleFactory::create(QStringLiteral("Fusion"))) {}

    void drawPrimitive(PrimitiveElement element, const QStyleOption* option, QPainter* painter,
                       const QWidget* widget = nullptr) const override
    {
        QProxyStyle::drawPrimitive(element, option, painter, widget);
        const bool box = element == PE_IndicatorCheckBox || element == PE_IndicatorItemViewItemCheck;
        if ((!box && element != PE_IndicatorRadioButton) || option->palette.color(QPalette::Window).lightness() >= 128)
            return;
        const QColor text = option->palette.color(QPalette::Active, QPalette::Text);
        const QColor window = option->palette.color(QPalette::Window);
        QColor edge = QColor::fromRgbF((text.redF() + window.redF()) / 2, (text.greenF() + window.greenF()) / 2,
                                       (text.blueF() + window.blueF()) / 2);
        if (!(option->state & State_Enabled))
            edge = edge.darker(140);
        painter->save();
        painter->setRenderHint(QPainter::Antialiasing, element == PE_IndicatorRadioButton);
        painter->setPen(QPen(edge, 1));
        painter->setBrush(Qt::NoBrush);
        const QRectF r = QRectF(option->rect).adjusted(0.5, 0.5, -0.5, -0.5);
        if (element == PE_IndicatorRadioButton)
            painter->drawEllipse(r);
        else
            painter->drawRect(r);
        painter->restore();
    }
};

} // namespace

void applyTheme(Theme theme)
{
    QApplication::setStyle(new ContrastStyle);
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
