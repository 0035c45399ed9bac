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
#   env:   FT_FUZZ_BUILD (build folder, default build-fuzz), CC (clang)
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

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# libconfig's own leaks on refused files (tests/fuzz/lsan.supp says which).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp}
status=0
printf '%-16s %12s %8s %6s %s\n' target executions exec/s cov result
for t in $TARGETS; do
  seeds=tests/fuzz/corpus/$t
  [ "$t" = config ] && seeds=tests/config/corpus
  work=$B/corpus/$t
  art=$B/artifacts/$t
  mkdir -p "$work" "$art"
  log=$B/fuzz_$t.log
  # -timeout: an input that runs 10 s is a hang; -rss_limit_mb: one that
  # needs 2 GiB is a memory bug.
  "$B/fuzz_${t}_libfuzzer" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "$seeds" > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  res=ok
  if [ $rc -ne 0 ]; then
    res="FAILED (exit $rc; $log, $(ls "$art" | head -1))"
    status=1
  fi
  printf '%-16s %12s %8s %6s %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "$res"
done
exit $status
