#!/bin/sh
# bench_engine_step of a portable build (SHARDSCOPE_NATIVE=OFF, what packages ship) against a
# native one (-march=native), in the same run: the two binaries alternate for ROUNDS rounds
# so that both meet the same machine load, and the best time of each benchmark is kept
# (the least disturbed run). Prints, per benchmark, the portable/native ratio of step time.
#   sh bench/portable-vs-native.sh PORTABLE_BUILD NATIVE_BUILD [ROUNDS] [FILTER]
# e.g.  cmake -S . -B build-native -DCMAKE_BUILD_TYPE=Release -DSHARDSCOPE_NATIVE=ON -DBUILD_TESTING=OFF
#       cmake --build build-native --target bench_engine_step -j2
#       sh bench/portable-vs-native.sh build build-native 3
set -eu
portable=$1/bench/bench_engine_step
native=$2/bench/bench_engine_step
rounds=${3:-3}
filter=${4:-Step}
for b in "$portable" "$native"; do
  [ -x "$b" ] || { echo "no $b (build the bench_engine_step target)"; exit 1; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$rounds" ]; do
  for kind in portable native; do
    eval bin=\$$kind
    # CSV: name,iterations,real_time,cpu_time,time_unit,...
    "$bin" --benchmark_filter="$filter" --benchmark_format=csv 2>/dev/null |
      awk -F, -v kind="$kind" 'NR > 1 && $1 !~ /_(mean|median|stddev|cv)"?$/ { gsub(/"/, "", $1); print kind, $1, $3, $4 }' >>"$out"
  done
  i=$((i + 1))
done
printf '%-44s %12s %12s %8s %12s %12s %8s\n' benchmark "native ms" "portable ms" ratio "native cpu" "portable cpu" ratio
awk '{ k = $2; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
       if (!((k, $1, "r") in best) || $3 < best[k, $1, "r"]) best[k, $1, "r"] = $3
       if (!((k, $1, "c") in best) || $4 < best[k, $1, "c"]) best[k, $1, "c"] = $4 }
     END { for (i = 1; i <= n; i++) { k = order[i]
             printf "%-44s %12.1f %12.1f %8.3f %12.1f %12.1f %8.3f\n", k, best[k, "native", "r"], best[k, "portable", "r"],
                    best[k, "portable", "r"] / best[k, "native", "r"], best[k, "native", "c"], best[k, "portable", "c"],
                    best[k, "portable", "c"] / best[k, "native", "c"] } }' "$out"
