#!/usr/bin/env bash
# fuzz.sh - builds every libFuzzer target with clang (-DFT_FUZZ=ON: the
# library itself carries coverage counters, ASan and UBSan) and runs each
# for SECONDS (default 60), one after the other, printing the executions,
# coverage and outcome of each.  New inputs go to a working corpus under
# the build folder (seeded from tests/fuzz/corpus/<target>, or
# tests/config/corpus), never into the repository; a crash, a leak or a
# sanitizer report leaves its input in build-fuzz/artifacts/<target>/ and
# makes the script exit 1 once every target has run.
#   usage: ops/fuzz.sh [SECONDS] [TARGET...]
#   env:   FT_FUZZ_BUILD (build folder, default build-fuzz), CC (clang),
#          FT_FUZZ_RUNS (stop each target after this many executions too)
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
shift || true
ALL="request frame keys index index_noverify manifest config"
TARGETS=${*:-$ALL}
B=${FT_FUZZ_BUILD:-build-fuzz}
export CC=${CC:-clang} CXX=${CXX:-clang++}
mkdir -p "$B"
cmake -S . -B "$B" -DFT_FUZZ=ON -DFT_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  > "$B/configure.log" 2>&1 || { cat "$B/configure.log"; exit 2; }
tg=()
for t in $TARGETS; do tg+=(--target "fuzz_${t}_libfuzzer"); done
cmake --build "$B" -j"$(nproc)" "${tg[@]}" > "$B/build.log" 2>&1 ||
  { tail -40 "$B/build.log"; exit 2; }

# A 64 MB quarantine instead of 256: use-after-free of the last few
# thousand inputs' blocks is still caught, and RSS stays low.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:quarantine_size_mb=64}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# libconfig's own leaks on refused files (tests/fuzz/lsan.supp says which).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp}
# flags_of prints a target's own libFuzzer flags.  -max_len bounds the
# inputs to what the format needs (the seeds fit): a longer keys or config
# file costs time in proportion and reaches no other code; a manifest
# input packs a manifest and up to five small indexes.  config: libconfig
# 1.5 leaks a few bytes on most refused files (tests/fuzz/lsan.supp), and
# libFuzzer answers every input that frees less than it allocates with a
# second run and a full LeakSanitizer scan, 90% of the target's time; so
# config runs without the per-input check, and LeakSanitizer's scan at
# exit (still on, suppressions and all) fails the run on any leak of ours
# from any input of it (replay the working corpus with -detect_leaks=1 to
# find which).
flags_of() {
  case $1 in
    keys) echo -max_len=2048 ;;
    index | index_noverify) echo -max_len=4096 ;;
    manifest) echo -max_len=8192 ;;
    config) echo -max_len=6144 -detect_leaks=0 ;;
  esac
}
status=0
printf '%-16s %12s %8s %6s %7s %7s %s\n' target executions exec/s cov corpus rss_mb result
for t in $TARGETS; do
  seeds=tests/fuzz/corpus/$t
  [ "$t" = config ] && seeds=tests/config/corpus
  work=$B/corpus/$t
  art=$B/artifacts/$t
  mkdir -p "$work" "$art"
  log=$B/fuzz_$t.log
  # -timeout: an input that runs 10 s is a hang.  -rss_limit_mb: 10M-run
  # processes peak at 130-270 MB (libFuzzer's corpus, ASan's quarantine
  # above, config's libconfig leaks), so one past 1 GiB, or a single
  # allocation past 256 MB (-malloc_limit_mb), is a memory bug.
  # shellcheck disable=SC2046
  "$B/fuzz_${t}_libfuzzer" -max_total_time="$SECS" -timeout=10 \
    -rss_limit_mb=1024 -malloc_limit_mb=256 $(flags_of "$t") \
    ${FT_FUZZ_RUNS:+-runs=$FT_FUZZ_RUNS} \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "$seeds" > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$')
  corp=$(find "$work" -type f | wc -l)
  res=ok
  if [ $rc -ne 0 ]; then
    res="FAILED (exit $rc; $log, $(ls "$art" | head -1))"
    status=1
  fi
  printf '%-16s %12s %8s %6s %7s %7s %s\n' "$t" "${execs:-?}" "${speed:-?}" \
    "${cov:-?}" "$corp" "${rss:-?}" "$res"
done
exit $status
