#!/bin/sh
# python_client_icount.sh URL REQUESTS CASE... - instructions per call of
# the Python client's cases, the C search replayed (no server time in it),
# counted by valgrind: the N=300 run less the N=100 run, over 200.  A
# count the machine's load does not move, for before/after comparisons on
# a busy host.  Cases: py.search py.search_arr py.arrays py.arrays_bB
# py.batch_bB, and base.* with FT_BASELINE=DIR (see
# python_client_bench.py's --baseline).  Environment: FLASHTRIE_CLIENT_LIB,
# FT_BATCH (16), PYTHON (/usr/bin/python3), FT_ICOUNT: replay (default)
# or calls: real calls to the server (--calls-only), the calling thread
# alone counted (callgrind --separate-threads=yes): the C client's work
# is in it, the same for every package, and none of the replay's Python
# stubs (which stand for C calls and cost more than they do).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 URL REQUESTS CASE..." >&2; exit 2; }
url=$1 reqs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
mode=${FT_ICOUNT:-replay}
# A fixed string hash seed: a random one moves the interpreter's start-up
# (numpy's import: dict collisions) by up to millions of instructions.
export PYTHONHASHSEED=${PYTHONHASHSEED:-0}
count() { # count CASE N: valgrind's I refs of N replayed (or real) calls
    if [ "$mode" = calls ]; then
        out=$(mktemp -d)
        valgrind --tool=callgrind --separate-threads=yes \
            --callgrind-out-file="$out/cg" "$py" \
            "$here/python_client_bench.py" --url "$url" --requests "$reqs" \
            --limit 16 --batch "${FT_BATCH:-16}" --calls-only "$1:$2" \
            ${FT_BASELINE:+--baseline "$FT_BASELINE"} >/dev/null 2>&1
        sed -n 's/^summary: *//p' "$out/cg-01"
        rm -rf "$out"
        return
    fi
    set -- valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file=/dev/null "$py" "$here/python_client_bench.py" \
        --url "$url" --requests "$reqs" --limit 16 --batch "${FT_BATCH:-16}" \
        --replay-only "$1:$2" ${FT_BASELINE:+--baseline "$FT_BASELINE"}
    "$@" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,
}
for c in "$@"; do
    a=$(count "$c" 100)
    b=$(count "$c" 300)
    [ -n "$a" ] && [ -n "$b" ] || { echo "$c: valgrind failed" >&2; exit 1; }
    echo "$c $(( (b - a) / 200 )) instructions per call"
done
