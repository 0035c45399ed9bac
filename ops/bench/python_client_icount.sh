#!/bin/sh
# python_client_icount.sh URL REQUESTS CASE... - instructions per call of
# the Python client's cases, the C search replayed (no server time in it),
# counted by valgrind: the N=300 run less the N=100 run, over 200.  A
# count the machine's load does not move, for before/after comparisons on
# a busy host.  Cases: py.search py.search_arr py.arrays py.arrays_bB
# py.batch_bB, and base.* with FT_BASELINE=DIR (see
# python_client_bench.py's --baseline).  Environment: FLASHTRIE_CLIENT_LIB,
# FT_BATCH (16), PYTHON (/usr/bin/python3).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 URL REQUESTS CASE..." >&2; exit 2; }
url=$1 reqs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
count() { # count CASE N: valgrind's I refs of N replayed calls
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
