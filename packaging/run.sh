#!/bin/sh
# One command on a fresh Debian 12 machine: install what is missing, build,
# start ShardScope. Without a display it runs the command-line demo instead.
#   ./packaging/run.sh [ARGS...]   (ARGS go to shardscope, or to shardscope-cli demo when headless)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")

sh "$here/build.sh"

if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "run.sh: no display (DISPLAY and WAYLAND_DISPLAY unset): running the command-line demo"
  exec "$top/build/app/shardscope-cli" demo "$@"
fi
exec "$top/build/app/shardscope" "$@"
