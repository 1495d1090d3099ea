#!/bin/bash
# Issue 16's search-speed goal: the DeepSeek-V3 search on 256 p5 nodes (every layout with ep
# and etp, BM_SearchDeepSeekV3P5x256) against GPT-3 175B on 128 trn1.32xlarge searched
# exhaustively (BM_SearchGpt3Trn1x128Exhaustive), 2 threads each, in the same run of the same
# binary: the ratio must stay <= 4. Prints the minimum and median wall time of each over N
# repetitions and the two ratios. On a shared machine compare binaries alternately, several
# times, and read the minima (noise only adds time).
#   bash bench/search-ratio.sh BUILD/bench/bench_search [N=9]
set -euo pipefail
bin=${1:?usage: search-ratio.sh BENCH_SEARCH_BINARY [REPETITIONS]}
reps=${2:-9}
"$bin" --benchmark_filter='Exhaustive|DeepSeekV3P5x256/threads:2' --benchmark_repetitions="$reps" \
    --benchmark_format=csv 2>/dev/null |
    awk -F, '
        /^"BM_/ && !/_(mean|median|stddev|cv)"/ {
            key = ($1 ~ /DeepSeek/) ? "dsv3" : "gpt3"
            t[key, ++n[key]] = $3 + 0  # real_time, in the benchmarks unit (ms)
        }
        function least(k,   i) { m = t[k, 1]; for (i = 2; i <= n[k]; ++i) if (t[k, i] < m) m = t[k, i]; return m }
        function median(k,   i, j, v, c) {
            c = n[k]
            for (i = 1; i <= c; ++i) v[i] = t[k, i]
            for (i = 2; i <= c; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
            return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
        }
        END {
            if (!n["gpt3"] || !n["dsv3"]) { print "search-ratio: the benchmarks did not run" > "/dev/stderr"; exit 1 }
            g = least("gpt3"); d = least("dsv3"); gm = median("gpt3"); dm = median("dsv3")
            printf "gpt3 exhaustive: min %.1f ms, median %.1f ms\n", g, gm
            printf "deepseek-v3:     min %.1f ms, median %.1f ms\n", d, dm
            printf "ratio: %.2f (minima), %.2f (medians); goal <= 4\n", d / g, dm / gm
        }'
