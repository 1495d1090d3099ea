#!/bin/sh
# One command on a fresh Debian 12 machine: install what is missing, build,
# run the whole CTest suite headless. Exits non-zero on any failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")

sh "$here/build.sh"

export QT_QPA_PLATFORM=offscreen
# Qt wants a private runtime dir (mode 0700); root without a login session has none.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  export XDG_RUNTIME_DIR
fi
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir "$top/build" --output-on-failure -j "$jobs"
