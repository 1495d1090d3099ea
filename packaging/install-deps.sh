#!/bin/sh
# Installs the Debian 12 packages ShardScope needs, only those missing. Idempotent.
# lintian, man-db, bash-completion, desktop-file-utils and appstream check the package
# (CTest's packaging_deb): lintian, the man pages (man -l), the completion, the desktop
# file and the AppStream metadata.
# Runs apt as root directly, or through sudo when not root.
#   sh packaging/install-deps.sh            # build + headless tests (what CI needs)
#   sh packaging/install-deps.sh --review   # + Xvfb, screenshot/PDF/SVG viewing tools, headless Chromium
#   sh packaging/install-deps.sh --no-mpi   # without Open MPI: the engine's MPI backend is not built
#                                           # (SHARDSCOPE_MPI=AUTO finds none; --backend mpi says so)
set -eu

PKGS="build-essential cmake file
  qt6-base-dev libqt6opengl6-dev qt6-charts-dev qt6-svg-dev
  libqt6sql6-sqlite qt6-qpa-plugins
  libeigen3-dev libsqlite3-dev libbenchmark-dev
  fontconfig fonts-dejavu-core
  lintian man-db bash-completion desktop-file-utils appstream clang libclang-rt-dev"
# The engine's MPI backend (CMake SHARDSCOPE_MPI=AUTO builds it when these are there).
MPI_PKGS="openmpi-bin libopenmpi-dev"
REVIEW_PKGS="xvfb xauth x11-utils x11-apps imagemagick poppler-utils librsvg2-bin chromium"

mpi=yes
for arg in "$@"; do
  case "$arg" in
    --review) PKGS="$PKGS $REVIEW_PKGS" ;;
    --no-mpi) mpi=no ;;
    *) echo "install-deps: unknown option $arg (--review, --no-mpi)" >&2; exit 2 ;;
  esac
done
[ "$mpi" = yes ] && PKGS="$PKGS $MPI_PKGS"

missing=""
for p in $PKGS; do
  # "installed" only; half-installed or config-files-only counts as missing.
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != "installed" ]; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: not root and no sudo; install them as root and re-run" >&2
    exit 1
  fi
fi

echo "install-deps: installing:$missing"
# Wait (up to 10 min) instead of failing if another apt/dpkg holds the lock.
APT="apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3"
$SUDO env DEBIAN_FRONTEND=noninteractive $APT update -qq
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive $APT install -y -qq --no-install-recommends $missing
