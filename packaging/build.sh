#!/bin/sh
# Shared by run.sh and test.sh: install missing Debian packages, then configure
# and build Release into build/. Idempotent; a second run only rebuilds what changed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")

sh "$here/install-deps.sh"

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$top" -B "$top/build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$top/build" -j "$jobs"
