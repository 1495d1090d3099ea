// Light and dark palettes (Fusion style, so they look the same everywhere), and
// whether the current palette is dark (charts pick their theme from it).
#pragma once

#include <QString>

namespace shardscope {

enum class Theme { System, Light, Dark };

void applyTheme(Theme theme);
bool paletteIsDark();
Theme themeFromString(const QString& text);  // "system", "light", "dark"
QString toString(Theme theme);

} // namespace shardscope
