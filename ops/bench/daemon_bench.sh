#!/bin/sh
# daemon_bench.sh - what the daemon adds to the engine (docs/BENCHMARKS.md,
# "Daemon overhead").
#
#   ops/bench/daemon_bench.sh [N [BW]]        (default: 200k keys, BW = 100)
#
# Builds a seeded library of N keys, generates R requests (T = 8, K = BW,
# beam = BW), starts `flashtrie serve` on it over ipc:// (engine FT_ENGINE,
# cpu or gpu, default cpu, FT_THREADS CPU workers, default 1;
# FT_SERVE_ARGS adds flags, e.g. "--inline-lone on" or "--inline-lone off"
# to compare a lone request run on nng's thread with the hand-off to a
# worker), the same engine in process,
# and runs ft_daemon_bench: at b = 1 the daemon alone, three engines in
# process alone (public, served as serve opens and calls it, sized as
# flashtrie bench opens it), the daemon alone again, then the engine and
# the daemon pair by pair, each daemon loop with the server's stage split;
# the engine in batches of 32, and FT_CLIENTS (64) client
# threads for FT_SECONDS (5) seconds a row (ops/bench/engine_gap.sh runs only
# the b = 1 part, beside `flashtrie bench`).  FT_RUNS (3) repeats the driver
# against the same server.  Environment: FT_BUILD_DIR (./build), FT_SEED
# (1), FT_R (200), FT_ROUNDS (3), FT_SERVE_BIN (the server's flashtrie, to
# compare two builds: default $FT_BUILD_DIR/flashtrie), FT_BENCH_ARGS
# (more ft_daemon_bench flags, e.g. "--kinds search --procs 16"),
# FT_LISTENERS (1: the server's ipc listeners, step 6's own and procs
# clients spread over them), TMPDIR.
# Step 6 runs the FT_CLIENTS threads in four layouts (one shared handle,
# one handle of several connections, a handle each, handles in client
# processes) for SEARCH, PING and an nng echo alone, and SEARCH in a
# fifth (one handle that coalesces calls into shared frames: a row for
# each N of --coalesce N[,N...], 8 and 16 by default): 14 rows of
# FT_SECONDS each ("--kinds search" in FT_BENCH_ARGS: 6).
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
DB=$B/ft_daemon_bench
SRV=${FT_SERVE_BIN:-$FT}
SEED=${FT_SEED:-1}
R=${FT_R:-200}
THR=${FT_THREADS:-1}
ENGINE=${FT_ENGINE:-cpu}
RUNS=${FT_RUNS:-3}
N=${1:-200k}
BW=${2:-100}
case $N in
*[Mm]) N=$((${N%?} * 1000000)) ;;
*[Kk]) N=$((${N%?} * 1000)) ;;
esac
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_daemon_bench.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" || true
    rm -rf "$W"
}
trap cleanup EXIT
echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); $(date -u +%FT%TZ)"
echo "library: $N keys, seed $SEED; $R requests, T=8, K=beam=$BW; serve --engine $ENGINE --threads $THR ${FT_SERVE_ARGS:-}"
$FT gen keys --n "$N" --seed "$SEED" --format ftk --output "$W/k.ftk" >/dev/null
$FT build --input "$W/k.ftk" --output "$W/k.idx" >/dev/null
$FT gen requests --index "$W/k.idx" --n "$R" --T 8 --K "$BW" --beam "$BW" \
    --seed "$((SEED + BW))" --output "$W/r.jsonl" >/dev/null
URL="ipc://$W/ft.sock"
# FT_LISTENERS=N: the server listens on N ipc sockets (nng's REP socket
# sends its replies under one lock: a socket per listener), and the
# clients of step 6's own and procs layouts spread over them.
LISTEN=$URL
i=2
while [ "$i" -le "${FT_LISTENERS:-1}" ]; do
    LISTEN="$LISTEN,ipc://$W/ft$i.sock"
    i=$((i + 1))
done
# shellcheck disable=SC2086
$SRV serve --index "$W/k.idx" --listen "$LISTEN" --engine "$ENGINE" \
    --threads "$THR" --log-level info ${FT_SERVE_ARGS:-} 2> "$W/serve.log" &
PID=$!
$FT query --url "$URL" --ping --timeout-ms 20000
i=1
while [ "$i" -le "$RUNS" ]; do
    echo "run $i:"
    # shellcheck disable=SC2086
    "$DB" --index "$W/k.idx" --url "$LISTEN" --requests "$W/r.jsonl" \
        --engine "$ENGINE" --threads "$THR" --rounds "${FT_ROUNDS:-3}" --clients "${FT_CLIENTS:-64}" \
        --seconds "${FT_SECONDS:-5}" --batch 32 ${FT_BENCH_ARGS:-}
    i=$((i + 1))
done
$FT query --url "$URL" --info | grep -E '^(batches|mean_batch|high_water):' || true
kill -TERM "$PID" && wait "$PID" || true
PID=
# The server's own account at exit: batches by size, inline runs (and, in
# a -DFT_SERVE_TRACE build, where a lone request's time went).
grep -E 'batches by size|trace:' "$W/serve.log" | sed 's/^.*\(info\|warn\) [a-z_]*\.c:[0-9]* //' || true
