#!/bin/sh
# engine_gap.sh - issue 35: the GPU engine inside the daemon against the
# same engine in process (docs/BENCHMARKS.md, "Daemon overhead").
#
#   ops/bench/engine_gap.sh [N [BW...]]     (default: 1M keys, BW 100 1000)
#
# Builds a seeded library of N keys and R requests per BW (T = 8, K = beam
# = BW), serves it with `flashtrie serve --engine $FT_ENGINE` (gpu) over
# ipc://, prints the engine's open line from the server's log (its slots
# and how its host waits for the GPU), then per BW:
#   - ft_daemon_bench with no batch or client phase: the daemon alone
#     before the driver has a CUDA context, the driver's three engines
#     alone (public: ft_engine_search on default options; served: the
#     daemon's own call on an engine opened as serve opens it; sized: as
#     flashtrie bench opens it), the daemon alone again, the paired loop;
#     each daemon loop with the server's stage split (decode, queue,
#     engine, encode, send) of that loop alone and what lies outside the
#     server; the C client's encode and decode of these requests and
#     answers in process, nng's own REQ/REP echo over ipc:// at a PING's
#     size and at these frames' sizes, and the split of what lies outside
#     the server into those and the rest;
#   - `flashtrie bench` on the same library and requests (b = 1 and 32),
#     whose b = 1 mean is what the "sized" engine's mean should match.
# It fails (exit 1) where an answer differs.  About 30 s on the H200 host.
# Environment: FT_BUILD_DIR (./build: flashtrie and ft_daemon_bench),
# FT_ENGINE (gpu), FT_R (200), FT_ROUNDS (3), FT_SEED (1), FT_SERVE_ARGS
# (more serve flags, e.g. "--inline-lone off"), TMPDIR.
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
DB=$B/ft_daemon_bench
ENGINE=${FT_ENGINE:-gpu}
SEED=${FT_SEED:-1}
R=${FT_R:-200}
ROUNDS=${FT_ROUNDS:-3}
N=${1:-1M}
[ $# -gt 0 ] && shift
BWS=${*:-100 1000}
case $N in
*[Mm]) N=$((${N%?} * 1000000)) ;;
*[Kk]) N=$((${N%?} * 1000)) ;;
esac
TH=$(nproc)
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_engine_gap.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" || true
    rm -rf "$W"
}
trap cleanup EXIT
T0=$(date +%s)
echo "machine: $TH cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); $(date -u +%FT%TZ)"
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader || true
echo "library: $N keys, seed $SEED; $R requests per BW ($BWS), T=8, K=beam=BW; serve --engine $ENGINE ${FT_SERVE_ARGS:-}"
$FT gen keys --n "$N" --seed "$SEED" --format ftk --threads "$TH" --output "$W/k.ftk" >/dev/null
$FT build --input "$W/k.ftk" --output "$W/k.idx" --threads "$TH" >/dev/null
for BW in $BWS; do
    $FT gen requests --index "$W/k.idx" --n "$R" --T 8 --K "$BW" --beam "$BW" \
        --seed "$((SEED + BW))" --threads "$TH" --output "$W/r$BW.jsonl" >/dev/null
done
URL="ipc://$W/ft.sock"
# shellcheck disable=SC2086
$FT serve --index "$W/k.idx" --listen "$URL" --engine "$ENGINE" \
    --log-level info ${FT_SERVE_ARGS:-} 2> "$W/serve.log" &
PID=$!
i=0
until $FT query --url "$URL" --ping --timeout-ms 500 >/dev/null 2>&1; do
    i=$((i + 1))
    if ! kill -0 "$PID" 2>/dev/null || [ "$i" -ge 60 ]; then
        echo "the server did not answer; its log:"
        tail -20 "$W/serve.log"
        exit 1
    fi
done
echo "library and server ready in $(($(date +%s) - T0)) s"
echo "server's engine:"
grep -E 'GPU engine on device|engine (cpu|gpu) x' "$W/serve.log" |
    sed 's/^.*\(info\|warn\) [a-z_]*\.c:[0-9]* /  /' || true
rc=0
for BW in $BWS; do
    echo
    echo "== BW = $BW: ft_daemon_bench (us)"
    "$DB" --index "$W/k.idx" --url "$URL" --requests "$W/r$BW.jsonl" \
        --engine "$ENGINE" --rounds "$ROUNDS" --clients 0 --batch 0 \
        2> "$W/db$BW.log" || rc=1
    # the driver's engines, in the order it opens them: public, sized,
    # served
    grep -E 'GPU engine on device' "$W/db$BW.log" |
        sed 's/^.*\(info\|warn\) [a-z_]*\.c:[0-9]* /  driver: /' || true
    grep -vE 'GPU engine on device|index generation [0-9]* .* closed|^\S* info ' \
        "$W/db$BW.log" | head -5 || true
    echo "== BW = $BW: flashtrie bench (ms)"
    "$FT" bench --index "$W/k.idx" --requests "$W/r$BW.jsonl" \
        --engine "$ENGINE" --batch 1,32 2>/dev/null |
        grep -E '^(timed|engine|gpu|cpu) ' || rc=1
done
echo
echo "server's INFO: $($FT query --url "$URL" --info | grep -E '^(batches|mean_batch):' | tr '\n' ' ')"
kill -TERM "$PID" && wait "$PID" || true
PID=
grep -E 'batches by size' "$W/serve.log" | sed 's/^.*info [a-z_]*\.c:[0-9]* /server: /' || true
echo "done in $(($(date +%s) - T0)) s"
exit $rc
