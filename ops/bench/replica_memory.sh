#!/bin/sh
# replica_memory.sh - GPU memory in use by `flashtrie serve` with R GPU
# replicas on one GPU (docs/BENCHMARKS.md, "GPU memory per replica"):
# engines on one index and GPU share one device copy of the index, so R
# replicas cost one index copy plus R sets of search buffers.
#
#   ops/bench/replica_memory.sh [N [R...]]     (default: 10M keys, R = 1 2 4)
#
# Builds a seeded library of N keys, then for each R starts `flashtrie
# serve --engine gpu --replicas R` with its metrics on a loopback port,
# reads flashtrie_gpu_memory_bytes{state="used"} once the server answers,
# stops it (SIGTERM) and prints one line per R.  Environment: FT_BUILD_DIR
# (./build), FT_SEED (1), FT_PORT (17790), FT_SERVE_ARGS (more flags),
# TMPDIR.
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
N=${1:-10M}
[ $# -gt 0 ] && shift
RS=${*:-1 2 4}
case $N in
*[Mm]) N=$((${N%?} * 1000000)) ;;
*[Kk]) N=$((${N%?} * 1000)) ;;
esac
PORT=${FT_PORT:-17790}
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_replica_mem.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" || true
    rm -rf "$W"
}
trap cleanup EXIT
echo "machine: $(nproc) cores; $(date -u +%FT%TZ)"
$FT gen keys --n "$N" --seed "${FT_SEED:-1}" --format ftk --output "$W/k.ftk" >/dev/null
$FT build --input "$W/k.ftk" --output "$W/k.idx" --quiet
echo "library: $N keys, index $(wc -c < "$W/k.idx") bytes"
metric() {
    python3 -c 'import sys, urllib.request
for l in urllib.request.urlopen(sys.argv[1]).read().decode().splitlines():
    if l.startswith("flashtrie_gpu_memory_bytes{") and "state=\"used\"" in l:
        print(l.split()[-1]); break' "http://127.0.0.1:$PORT/metrics"
}
for R in $RS; do
    URL="ipc://$W/ft.sock"
    # shellcheck disable=SC2086
    $FT serve --index "$W/k.idx" --listen "$URL" --engine gpu --replicas "$R" \
        --metrics "http://127.0.0.1:$PORT" ${FT_SERVE_ARGS:-} 2> "$W/serve.log" &
    PID=$!
    $FT query --url "$URL" --ping --timeout-ms 120000 >/dev/null
    used=$(metric)
    echo "replicas $R: GPU memory used $used bytes ($(( used / 1048576 )) MiB)"
    kill -TERM "$PID" && wait "$PID" || true
    PID=
done
