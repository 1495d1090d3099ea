#!/bin/bash
# One fp32 GPT-2-small training step (12 layers, 768 hidden, 12 heads, vocab 50257, seq 64,
# batch 4: forward, backward, AdamW) of our engine (bench_engine_step, BM_StepGpt2Small)
# against llm.c's CPU reference trainer, Karpathy's train_gpt2.c (same shape: its main
# hardcodes B = 4, T = 64), at the same thread count. Prints, per thread count, the median
# and best step time of each and the ratios llm.c / ShardScope (the engine's goal: >= 4).
#   bash bench/llmc-compare.sh BUILD [LLMC_DIR]
# e.g.  cmake --build build --target bench_engine_step llmc_inputs -j2
#       bash bench/llmc-compare.sh build
#
# Nothing is downloaded and no llm.c code lives in this repository. llm.c's sources
# (train_gpt2.c and its llmc/*.h) come from LLMC_DIR (the argument, or the environment), a
# checkout of github.com/karpathy/llm.c; without one they are extracted (git archive) from
# the bare mirror LLMC_GIT (default /work/.mirror/karpathy+llm.c/repo) at LLMC_REV (default
# HEAD; measured with f1e2ace651495b74ae22d45d1723443fd00ecd3a). They are compiled as llm.c's
# Makefile does on Linux with OpenMP: CFLAGS = -Ofast -Wno-unused-result -Wno-ignored-pragmas
# -Wno-unknown-attributes (line 2), CFLAGS_COND = -march=native (line 6), -fopenmp -DOMP and
# -lgomp (lines 187-188), LDLIBS = -lm (line 4). train_gpt2 reads gpt2_124M.bin and the
# tinyshakespeare token files from its working directory, which python scripts would
# download; BUILD/bench/llmc_inputs writes them instead (random GPT-2 weights, uniform random
# tokens; the values do not change the step's time).
#
# llm.c: train_gpt2 runs with OMP_NUM_THREADS=T; it prints "step N: train loss X (took Y ms)"
# for each step, timing only the step (batch load, forward, zero-grad, backward, AdamW; not
# its validation at step 0 and 10 nor its sampling at step 20). It is stopped after STEPS
# steps (<= 20, so that it never samples); the median excludes step 0 (first touch of every
# buffer). Its update has no gradient clipping and its classifier is padded to 50304 rows.
# ShardScope: bench_engine_step --benchmark_filter=BM_StepGpt2Small/T/ with REPS
# repetitions (each the mean of 3 steps after a warm-up step; the step includes clipping);
# the median and the fastest of the repetitions. Ratios are llm.c / ours, of medians and of bests.
#
# On a shared machine (other builds on the same cores) the figures are disturbed: before each
# measurement the script waits up to QUIET_WAIT seconds for the CPUs to be >= 90% idle, and
# "others%" is the share of all CPUs that other processes used during it. Trust rows where
# it is near 0 (at T threads of N cores, up to (N - T) / N of it can sit on the idle cores,
# still sharing caches and memory); the best times are the least disturbed ones.
# Measured on 2026-12-01 (2-core AVX-512 Xeon, llm.c f1e2ace, a portable build of the model
# executor, a quiet machine: others% 0-2), medians: 1 thread llm.c 11.55 s, ours 1.71 s
# (6.8x); 2 threads llm.c 6.37 s, ours 0.90 s (7.1x).
# Measured on 2026-12-02 (2-core AMD EPYC Zen 4, family 25 model 17: AVX-512 on two 256-bit FMA
# pipes, so the GEMM reaches ~100 GFLOP/s a core against ~190 on the Xeon), medians: 1 thread
# llm.c 8.07 s, ours 2.29 s (3.52x); 2 threads llm.c 4.33 s, ours 1.18 s (3.66x). The goal (4x)
# is out of reach there with this GEMM: the step's 191.6 GFLOP at the GEMM rate alone take 2.0 s
# (llm.c / that = 4.1x); perf of the timed steps, 1 thread: Eigen's gebp 78.9%, its packing 7.9%,
# AdamW 6.1% (bandwidth-bound, 32 B a parameter), GeLU 1.3%, the rest < 1% each.
#
# Environment: THREADS (default "1 2"), STEPS (default 10), REPS (default 5), QUIET_WAIT
# (default 300), LLMC_DIR, LLMC_GIT, LLMC_REV, CC (default gcc), WORK (default
# BUILD/llmc-work: the compiled trainer, the ~500 MB checkpoint and the logs, kept for the
# next run; delete it to regenerate). A run of the defaults takes about 5-10 minutes.
set -euo pipefail

build=${1:?usage: bash bench/llmc-compare.sh BUILD [LLMC_DIR]}
llmc_dir=${2:-${LLMC_DIR:-}}
threads_list=${THREADS:-1 2}
steps=${STEPS:-10}
reps=${REPS:-5}
quiet_wait=${QUIET_WAIT:-300}
cc=${CC:-gcc}
llmc_git=${LLMC_GIT:-/work/.mirror/karpathy+llm.c/repo}
llmc_rev=${LLMC_REV:-HEAD}
work=${WORK:-$build/llmc-work}

ours=$build/bench/bench_engine_step
gen=$build/bench/llmc_inputs
for b in "$ours" "$gen"; do
  [ -x "$b" ] || { echo "no $b (build the bench_engine_step and llmc_inputs targets)" >&2; exit 1; }
done
if [ "$steps" -lt 3 ] || [ "$steps" -gt 20 ]; then
  echo "STEPS must be in 3..20 (train_gpt2 samples text at step 20)" >&2; exit 1
fi
[ "$reps" -ge 2 ] || { echo "REPS must be >= 2 (Google Benchmark reports a median from 2 repetitions)" >&2; exit 1; }
mkdir -p "$work"
work=$(cd "$work" && pwd)

# llm.c's sources: a checkout, or the mirror at LLMC_REV.
if [ -n "$llmc_dir" ]; then
  [ -f "$llmc_dir" ] && llmc_dir=$(dirname "$llmc_dir")  # the path of train_gpt2.c itself
  [ -f "$llmc_dir/train_gpt2.c" ] && [ -d "$llmc_dir/llmc" ] ||
    { echo "no train_gpt2.c and llmc/ in $llmc_dir" >&2; exit 1; }
  commit=$(git -C "$llmc_dir" rev-parse HEAD 2>/dev/null || echo "unknown (not a git checkout)")
  src=$(cd "$llmc_dir" && pwd)
elif git --git-dir="$llmc_git" rev-parse --verify -q "$llmc_rev^{commit}" >/dev/null 2>&1; then
  commit=$(git --git-dir="$llmc_git" rev-parse "$llmc_rev^{commit}")
  src=$work/llmc-$commit
  if [ ! -f "$src/train_gpt2.c" ]; then
    rm -rf "$src" && mkdir -p "$src"
    git --git-dir="$llmc_git" archive "$commit" train_gpt2.c llmc | tar -x -C "$src"
  fi
else
  echo "no llm.c: pass LLMC_DIR (a checkout of github.com/karpathy/llm.c) or LLMC_GIT (a git mirror of it)" >&2
  exit 1
fi

trainer=$work/train_gpt2-${commit:0:12}
if [ ! -x "$trainer" ] || [ "$src/train_gpt2.c" -nt "$trainer" ]; then
  echo "compiling $src/train_gpt2.c" >&2
  (cd "$src" && "$cc" -Ofast -Wno-unused-result -Wno-ignored-pragmas -Wno-unknown-attributes \
     -march=native -fopenmp -DOMP train_gpt2.c -lm -lgomp -o "$trainer")
fi

run=$work/run
if [ ! -f "$run/gpt2_124M.bin" ] || [ ! -f "$run/dev/data/tinyshakespeare/tiny_shakespeare_val.bin" ]; then
  "$gen" "$run" >&2
fi

# The machine may be shared (other builds on the same cores): before each measurement wait up
# to QUIET_WAIT seconds for the CPUs to be >= 90% idle over 2 s, and report the share of the
# CPUs that other processes used during it ("others %": all busy time in /proc/stat minus
# the measured program's own CPU time). Figures with others % well above 0 are disturbed.
cpu_ticks() {  # busy and total clock ticks of all CPUs since boot
  awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6 }' /proc/stat
}
wait_quiet() {
  local waited=0 b0 t0 b1 t1
  while :; do
    read -r b0 t0 < <(cpu_ticks); sleep 2; read -r b1 t1 < <(cpu_ticks)
    [ $(( (b1 - b0) * 10 )) -le $(( t1 - t0 )) ] && return 0
    waited=$((waited + 2))
    if [ "$waited" -ge "$quiet_wait" ]; then
      echo "warning: the CPUs are still busy after ${quiet_wait} s; measuring anyway" >&2; return 0
    fi
  done
}
# Runs "$@" in a subshell that reports, after reaping it, its CPU ticks (cutime + cstime) in
# $1.cpu; the command's pid goes to $1.pid. Usage: spawn PREFIX CMD...
spawn() {
  local prefix=$1; shift
  ( "$@" & echo $! >"$prefix.pid"; wait $! || true
    awk '{ print $16 + $17 }' "/proc/$BASHPID/stat" >"$prefix.cpu" ) &
}
others_pct() {  # others' share of the CPUs between two cpu_ticks samples, given our own ticks
  awk -v b0="$1" -v t0="$2" -v b1="$3" -v t1="$4" -v own="$5" \
    'BEGIN { o = (b1 - b0 - own) / (t1 - t0) * 100; printf "%.0f", o < 0 ? 0 : o }'
}

median() {  # the median of the numbers on stdin, one a line
  sort -g | awk '{ v[++n] = $1 } END { if (n == 0) exit 1
                   print (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# llm.c: prints "median best others%". train_gpt2 runs 41 steps and samples at 20 and 40:
# it is stopped once it has printed STEPS steps.
llmc_measure() {
  local t=$1 log=$work/train_gpt2-t$1.log p=$work/train_gpt2-t$1 b0 t0 b1 t1 times
  rm -f "$p.pid" "$p.cpu"
  wait_quiet
  read -r b0 t0 < <(cpu_ticks)
  spawn "$p" env -C "$run" OMP_NUM_THREADS="$t" stdbuf -oL "$trainer" >"$log" 2>&1
  local sub=$!
  until [ -s "$p.pid" ]; do sleep 0.05; done
  while kill -0 "$(cat "$p.pid")" 2>/dev/null && [ "$(grep -c '^step [0-9]*: ' "$log")" -lt "$steps" ]; do
    sleep 0.2
  done
  kill "$(cat "$p.pid")" 2>/dev/null || true
  wait "$sub" || true
  read -r b1 t1 < <(cpu_ticks)
  [ "$(grep -c '^step [0-9]*: ' "$log")" -ge "$steps" ] ||
    { echo "train_gpt2 stopped before $steps steps; see $log" >&2; tail -5 "$log" >&2; exit 1; }
  times=$(sed -n 's/^step \([0-9]*\): train loss .* (took \([0-9.]*\) ms)$/\1 \2/p' "$log" |
          awk -v n="$steps" '$1 >= 1 && $1 < n { print $2 }')
  echo "$(median <<<"$times") $(sort -g <<<"$times" | head -1) $(others_pct "$b0" "$t0" "$b1" "$t1" "$(cat "$p.cpu")")"
}

# ShardScope: prints "median best others%" (best: the fastest repetition, itself a mean of 3 steps).
ours_measure() {
  local t=$1 json=$work/bench_engine_step-t$1.json p=$work/bench_engine_step-t$1 b0 t0 b1 t1
  rm -f "$p.pid" "$p.cpu"
  wait_quiet
  read -r b0 t0 < <(cpu_ticks)
  spawn "$p" env OMP_NUM_THREADS="$t" "$ours" --benchmark_filter="^BM_StepGpt2Small/$t/" \
    --benchmark_repetitions="$reps" --benchmark_format=json >"$json" 2>/dev/null
  wait $!
  read -r b1 t1 < <(cpu_ticks)
  # Each repetition's run, then the aggregates; "aggregate_name" precedes "real_time" in a
  # run, and time_unit is ms (kMillisecond).
  awk -F': *' '/"run_type"/ { agg = ($2 ~ /aggregate/) }
               /"aggregate_name"/ { name = $2 }
               /"real_time"/ { sub(/,$/, "", $2)
                               if (!agg && (best == "" || $2 + 0 < best + 0)) best = $2
                               if (agg && name ~ /"median"/) med = $2 }
               END { if (med == "" || best == "") exit 1; print med, best }' "$json" |
    tr '\n' ' '
  others_pct "$b0" "$t0" "$b1" "$t1" "$(cat "$p.cpu")"
  echo
}

echo "llm.c $commit, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
     "$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || { grep -qw avx2 /proc/cpuinfo && echo AVX2 || echo 'no AVX2'; })"
echo "llm.c: steps 1..$((steps - 1)) of a run; ShardScope: $reps repetitions of 3 steps; times in ms"
printf '%7s %10s %10s %7s %12s %12s %7s %11s %11s\n' threads "llm.c med" "llm.c best" "others%" \
  "ours median" "ours best" "others%" "ratio(med)" "ratio(best)"
for t in $threads_list; do
  read -r am ab ao < <(llmc_measure "$t")
  read -r bm bb bo < <(ours_measure "$t")
  printf '%7s %10.1f %10.1f %7s %12.1f %12.1f %7s %11.2f %11.2f\n' "$t" "$am" "$ab" "$ao" "$bm" "$bb" "$bo" \
    "$(awk -v a="$am" -v b="$bm" 'BEGIN { print a / b }')" "$(awk -v a="$ab" -v b="$bb" 'BEGIN { print a / b }')"
done
