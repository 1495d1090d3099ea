#!/bin/sh
# Builds the libFuzzer targets (CMake preset "fuzz": Clang, ASan + UBSan) and runs each for a
# fixed time on its seeds and the kept regressions. A finding (crash, sanitizer report, broken
# property, hang over 10 s) stops that target with its input saved under
# build-fuzz/findings/<target>/; fix it, then keep the input as a test:
#   cp build-fuzz/findings/<target>/crash-* fuzz/regressions/<target>/
# (CTest replays fuzz/regressions/ in every build: fuzz_json_regressions, fuzz_layout_regressions,
# fuzz_hfconfig_regressions once its folder holds an input.)
#   sh fuzz/run-fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s, fuzz_json fuzz_layout fuzz_hfconfig
# Needs clang and its libFuzzer runtime (clang, libclang-rt-dev: packaging/install-deps.sh).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-fuzz_json fuzz_layout fuzz_hfconfig}
jobs=${JOBS:-2}

cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs"

status=0
for t in $targets; do
  case "$t" in
    fuzz_json) dict=fuzz/json.dict ;;
    fuzz_layout) dict=fuzz/layout.dict ;;
    fuzz_hfconfig) dict=fuzz/hfconfig.dict ;;
    *) echo "run-fuzz: unknown target $t (fuzz_json, fuzz_layout, fuzz_hfconfig)" >&2; exit 2 ;;
  esac
  corpus=build-fuzz/corpus/$t        # grows as the fuzzer finds new paths; not committed
  findings=build-fuzz/findings/$t
  mkdir -p "$corpus" "$findings"
  echo "run-fuzz: $t for $seconds s"
  # The first folder receives new inputs; seeds and regressions are only read.
  if ! "build-fuzz/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
       -dict="$dict" -artifact_prefix="$findings/" -print_final_stats=1 \
       "$corpus" "fuzz/seeds/$t" $(ls -d "fuzz/regressions/$t" 2>/dev/null); then
    echo "run-fuzz: $t found a problem; its input is in $findings/" >&2
    status=1
  fi
done
exit $status
