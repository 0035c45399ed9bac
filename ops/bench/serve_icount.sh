#!/bin/sh
# serve_icount.sh [N [CASE...]] - the server's instructions per request,
# counted by callgrind: the engine (cpu_run, shard/cpu_engine.c) and all
# the rest (nng, decode, validation, queue, batch, encode, send, metrics).
# A count the machine's load barely moves, for before/after comparisons of
# the serving path on a busy or GPU-less host (docs/BENCHMARKS.md, "Server
# CPU per request, by instruction count").
#
# Builds a seeded library of N keys (default 100k) and 256 requests (T = 8,
# K = beam = 100), serves it with `flashtrie serve --engine cpu` over
# ipc:// under callgrind, sends the requests as a warm-up (until each of
# the 64 contexts has had a message), zeroes the counts, sends them again
# with `flashtrie query` (binary frames) and dumps.
# Cases: b1c1 (one request a frame, one at a time: deterministic), b1c16
# (one a frame, 16 in flight: batches form, as many clients make them;
# the batch sizes move with timing), b32 (frames of 32, 4 in flight).
# Each case runs the server twice: counting everything (per request: the
# total and the engine), then with --toggle-collect=cpu_run (the engine
# uncounted: the work outside it, the number to compare, and its top
# functions by self count; a library without symbols, such as Debian's
# libnng, is one line).  The
# connection thread's ticks (conn_main: idle reaping, probes) are counted
# apart: they come by the clock, so their share of a request moves with
# how long callgrind takes.  Environment: FT_BUILD_DIR (./build), FT_SERVE_BIN
# (the server's flashtrie, to compare two builds), FT_SERVE_ARGS (more
# serve flags), FT_QUERY_ARGS (more query flags, e.g. "--checksum on"),
# FT_TOP (25), FT_KEEP (a directory: keep the callgrind files there),
# FT_K (K = beam, 100), FT_R (requests, 256; at least 64 for the b1
# cases' warm-up to reach every context).
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
SRV=${FT_SERVE_BIN:-$FT}
N=${1:-100k}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- b1c1 b1c16 b32
case $N in
*[Mm]) N=$((${N%?} * 1000000)) ;;
*[Kk]) N=$((${N%?} * 1000)) ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_serve_icount.XXXXXX")
PID=
cleanup() {
    if [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null; then
        wait "$PID" || true
    fi
    rm -rf "$W"
}
trap cleanup EXIT
$FT gen keys --n "$N" --seed 1 --format ftk --output "$W/k.ftk" >/dev/null
$FT build --input "$W/k.ftk" --output "$W/k.idx" >/dev/null 2>&1
K=${FT_K:-100}
R=${FT_R:-256}
$FT gen requests --index "$W/k.idx" --n "$R" --T 8 --K "$K" --beam "$K" \
    --seed 2 --output "$W/r.jsonl" >/dev/null
echo "machine: $(nproc) cores; $(date -u +%FT%TZ); $N keys, $R requests, T=8, K=beam=$K"
# run CASE QUERY_ARGS MODE WARM: one server under callgrind, MODE "all"
# (every instruction) or "rest" (--toggle-collect=cpu_run: the engine
# uncounted), WARM passes over the requests before the count.
run() {
    URL="ipc://$W/s.sock"
    tog=
    [ "$3" = all ] || tog="--toggle-collect=cpu_run --collect-atstart=yes"
    # shellcheck disable=SC2086
    valgrind --tool=callgrind $tog --callgrind-out-file="$W/cg.$1.$3.%p" \
        "$SRV" serve --index "$W/k.idx" --listen "$URL" --engine cpu \
        --threads 1 --probe-interval-ms 0 --log-level warn \
        ${FT_SERVE_ARGS:-} 2> "$W/serve.$1.log" &
    PID=$!
    $FT query --url "$URL" --ping --timeout-ms 60000
    # Warm-up: nng hands messages to the 64 contexts in turn, and a
    # context sizes its buffers on its first message: every context gets
    # one before the count (b32: 8 frames a pass, 8 passes).
    i=0
    while [ "$i" -lt "$4" ]; do
        # shellcheck disable=SC2086
        $FT query --url "$URL" $2 < "$W/r.jsonl" > "$W/warm.jsonl"
        i=$((i + 1))
    done
    callgrind_control -z "$PID" >/dev/null 2>&1
    # shellcheck disable=SC2086
    $FT query --url "$URL" $2 < "$W/r.jsonl" > "$W/out.jsonl"
    callgrind_control -d "$PID" >/dev/null 2>&1
    # A SIGTERM that comes while callgrind_control's vgdb is still
    # attached can be lost: sent again every 5 s until the server is gone.
    n=0
    while kill -TERM "$PID" 2>/dev/null && [ "$n" -lt 12 ]; do
        sleep 5
        n=$((n + 1))
    done
    wait "$PID" || true
    PID=
    cmp -s "$W/warm.jsonl" "$W/out.jsonl" || { echo "$1: answers differ" >&2; exit 1; }
    f=$(ls "$W/cg.$1.$3".*.1)
    [ -z "${FT_KEEP:-}" ] || cp "$f" "$FT_KEEP/cg.$1.$3"
}
for c in "$@"; do
    case $c in
    b1c1) qa="--batch 1 --concurrency 1" warm=1 ;;
    b1c16) qa="--batch 1 --concurrency 16" warm=1 ;;
    b32) qa="--batch 32 --concurrency 4" warm=8 ;;
    *) echo "$0: unknown case $c" >&2; exit 2 ;;
    esac
    qa="$qa ${FT_QUERY_ARGS:-}"
    echo "case $c (flashtrie query $qa):"
    run "$c" "$qa" all "$warm"
    python3 "$here/callgrind_split.py" "$f" "$R" cpu_run 0 conn_main
    run "$c" "$qa" rest "$warm"
    echo "  without the engine (--toggle-collect=cpu_run):"
    python3 "$here/callgrind_split.py" "$f" "$R" cpu_run "${FT_TOP:-25}" conn_main
done
