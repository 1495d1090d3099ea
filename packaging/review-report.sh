#!/bin/sh
# Renders a plan's reports as a person sees them, for review by eye (not a CTest test: it needs
# headless Chromium and poppler, `sh packaging/install-deps.sh --review`):
#   - the HTML report in headless Chromium (Debian's chromium): one full-page screenshot, and the
#     same cut into screen-high pieces a file viewer shows at full size;
#   - every page of the PDF report through pdftoppm.
#   sh packaging/review-report.sh [OUT_DIR]        (default /tmp/shardscope-review)
# BUILD_DIR names the build (default build/); the plan is the README's gpt3-175b on 64 trn1
# nodes unless PLAN names a plan file (shardscope-cli plan --out).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
build=${BUILD_DIR:-$top/build}
out=${1:-/tmp/shardscope-review}
cli=$build/app/shardscope-cli

missing=""
[ -x "$cli" ] || { echo "review-report: $cli not built (cmake --build $build --target shardscope-cli)" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v pdftoppm >/dev/null 2>&1 || missing="$missing poppler-utils"
command -v convert >/dev/null 2>&1 || missing="$missing imagemagick"
if [ -n "$missing" ]; then
  echo "review-report: missing:$missing (sh packaging/install-deps.sh --review)" >&2
  exit 1
fi

mkdir -p "$out"
rm -f "$out"/html-*.png "$out"/pdf-page-*.png
db=$out/catalog.sqlite
export QT_QPA_PLATFORM=offscreen
plan=${PLAN:-}
if [ -z "$plan" ]; then
  plan=$out/plan.json
  "$cli" --db "$db" plan --model gpt3-175b --node-type trn1.32xlarge --nodes 64 --global-batch 1536 \
    --seq 2048 --out "$plan" >/dev/null
fi
"$cli" --db "$db" report --plan "$plan" --out "$out/report.html" --charts svg --quiet
"$cli" --db "$db" report --plan "$plan" --out "$out/report.pdf" --quiet

# The browser: a private profile, no network, no GPU (the flags Debian's headless Chromium needs
# on a machine without a network or a display); a window as wide as a laptop's and tall enough
# for the whole page, the blank below the page trimmed.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1280,12000 \
  --screenshot="$out/html-full.png" "file://$out/report.html" 2>"$out/chromium.log" ||
  { echo "review-report: chromium failed (see $out/chromium.log)" >&2; exit 1; }
convert "$out/html-full.png" -trim +repage -bordercolor white -border 8 "$out/html-full.png"
convert "$out/html-full.png" -crop 1296x1100 +repage "$out/html-part-%02d.png"

pdftoppm -r 80 -png "$out/report.pdf" "$out/pdf-page"

echo "review-report: look at each of these:"
ls -1 "$out"/html-part-*.png "$out"/pdf-page-*.png
