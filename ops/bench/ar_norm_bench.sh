#!/bin/sh
# ar_norm_bench.sh - the autoregressive step's forms, several builds side
# by side (docs/BENCHMARKS.md, "Autoregressive steps" and "On an H100, and
# the whole-row log-softmax").
#
#   ops/bench/ar_norm_bench.sh BUILD_DIR [BUILD_DIR...]
#
# Writes the semantic-id library once (ops/bench/ar_sem_ids.py, numpy;
# built with the first BUILD_DIR's flashtrie), then for every V and beam
# count runs each build's ar_step_bench back to back (mid-decode: FT_WARM
# steps from the root) and prints one line per build: µs a step of the
# fused step, the step with a log-softmax over the whole row and over
# the allowed children, the mask form, and the top-8 form after a
# log-softmax over the row (the normalisation nearly alone; empty for a
# build without that row) (graph rows on the GPU, stream rows on the
# CPU).  Each BUILD_DIR holds ar_step_bench (a build folder's
# root); the first also flashtrie, unless FT_SEM names the library.
# Environment: FT_N (10000000 items), FT_VS ("32768 262144"), FT_BEAMS
# ("64 256 1024"), FT_ITERS (20), FT_WARM (3), FT_ENGINE (gpu; cpu runs
# the CPU step, one thread unless FT_THREADS), FT_SEM (a library built
# before, to reuse), TMPDIR.
# Exit 0; 1 with the reason (a missing binary, a run that failed); 2 for
# bad arguments.
set -eu
[ $# -ge 1 ] || { sed -n '/^#   ops/p' "$0" | sed 's/^# *//' >&2; exit 2; }
for b in "$@"; do
    [ -x "$b/ar_step_bench" ] || { echo "ar_norm_bench: $b/ar_step_bench: not built" >&2; exit 1; }
done
[ -n "${FT_SEM:-}" ] || [ -x "$1/flashtrie" ] ||
    { echo "ar_norm_bench: $1/flashtrie: not built (it builds the library; or set FT_SEM)" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
N=${FT_N:-10000000}
VS=${FT_VS:-32768 262144}
BEAMS=${FT_BEAMS:-64 256 1024}
ITERS=${FT_ITERS:-20}
WARM=${FT_WARM:-3}
ENGINE=${FT_ENGINE:-gpu}
THREADS=${FT_THREADS:-1}
W=$(mktemp -d "${TMPDIR:-/tmp}/ar_norm_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
SEM=${FT_SEM:-}
if [ -z "$SEM" ]; then
    SEM=$W/sem.ft
    python3 "$HERE/ar_sem_ids.py" "$W/sem.ftk" "$N" >/dev/null ||
        { echo "ar_norm_bench: ar_sem_ids.py failed (numpy?)" >&2; exit 1; }
    "$1/flashtrie" build --input "$W/sem.ftk" --output "$SEM" --quiet \
        --threads "$(nproc)" || { echo "ar_norm_bench: build failed" >&2; exit 1; }
    rm -f "$W/sem.ftk"
fi
ROW=graph
[ "$ENGINE" = gpu ] || ROW=stream
LIB="$N semantic ids"
[ -z "${FT_SEM:-}" ] || LIB="library $FT_SEM"
echo "ar_norm_bench: $LIB, engine $ENGINE, $ITERS iterations, $WARM steps from the root; $(date -u +%FT%TZ)"
printf '%-8s %-6s %-28s %10s %10s %10s %10s %10s\n' V beams build fused "lsm(row)" "lsm(allow)" mask "top8+lsm"
for V in $VS; do
    for B in $BEAMS; do
        for b in "$@"; do
            "$b/ar_step_bench" --index "$SEM" --engine "$ENGINE" --beams "$B" \
                --vocab "$V" --iters "$ITERS" --warm-steps "$WARM" \
                --threads "$THREADS" > "$W/out" 2>&1 ||
                { cat "$W/out" >&2; echo "ar_norm_bench: $b: ar_step_bench failed" >&2; exit 1; }
            # the number before "us/step" of the first row whose form and
            # timing match
            pick() {
                awk -v f="$1" -v r="$ROW" '{
                    line = $0; sub(/^ +/, "", line)
                    if (index(line, f) == 1 && index(line, " " r " ") > 0) {
                        for (i = 1; i < NF; i++)
                            if ($(i + 1) == "us/step") { print $i; exit }
                    }
                }' "$W/out"
            }
            printf '%-8s %-6s %-28s %10s %10s %10s %10s %10s\n' "$V" "$B" "$b" \
                "$(pick 'step dense bf16  ')" "$(pick 'step dense bf16 log-softmax(row)')" \
                "$(pick 'step dense bf16 log-softmax(allowed)')" "$(pick 'mask ')" \
                "$(pick 'top-8 dense bf16 log-softmax(row)')"
        done
    done
done
