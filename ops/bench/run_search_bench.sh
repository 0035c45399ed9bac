#!/bin/sh
# run_search_bench.sh - search latency of the FlashTrie engines against the
# MARISA-Int baseline (libmarisa, paper Appendix B.1) on the same requests.
#
#   ops/bench/run_search_bench.sh N [BW ...]     (default BW: 100 200 500 1000)
#
# For the library of N keys (seeded, docs/workload.md) it builds our index
# and, per beam width BW (K = BW, T = 8), generates R NAR-style requests,
# times them with 'flashtrie bench' (engines: FT_ENGINES, default cpu,gpu;
# one request at a time and in batches) and with 'ft_marisa_bench search' on
# the first M of them, checks that MARISA-Int's results equal ours byte for
# byte, and prints the mean latencies and the ratio.
# Environment: FT_BUILD_DIR (./build), FT_SEED (1), FT_R (200 requests),
# FT_M (10 requests for marisa), FT_ENGINES, FT_THREADS (0 = all cores),
# FT_REPORT_DIR (where bench JSON reports go; default: not kept), TMPDIR.
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
MB=$B/ft_marisa_bench
SEED=${FT_SEED:-1}
R=${FT_R:-200}
M=${FT_M:-10}
ENG=${FT_ENGINES:-cpu,gpu}
THR=${FT_THREADS:-0}
[ $# -ge 1 ] || { echo "usage: $0 N [BW ...]" >&2; exit 2; }
case $1 in
*[Mm]) N=$((${1%?} * 1000000)) ;;
*[Kk]) N=$((${1%?} * 1000)) ;;
*) N=$1 ;;
esac
shift
[ $# -gt 0 ] || set -- 100 200 500 1000
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_search_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "library: $N keys, seed $SEED; requests: $R per BW (marisa: first $M), T=8, K=BW"
$FT gen keys --n "$N" --seed "$SEED" --format ftk --output "$W/k.ftk"
$FT build --input "$W/k.ftk" --output "$W/k.idx" --threads "$THR"
for bw in "$@"; do
    $FT gen requests --index "$W/k.idx" --n "$R" --T 8 --K "$bw" --beam "$bw" \
        --seed "$((SEED + bw))" --output "$W/r.jsonl"
    rep=""
    [ -n "${FT_REPORT_DIR:-}" ] && rep="--report ${FT_REPORT_DIR}/bench_${N}_${bw}.json"
    $FT bench --index "$W/k.idx" --requests "$W/r.jsonl" --engine "$ENG" \
        --threads "$THR" --batch 1,4,8,16,32 $rep > "$W/bench.txt" 2>&1
    cat "$W/bench.txt"
    head -n "$M" "$W/r.jsonl" > "$W/rm.jsonl"
    if [ -x "$MB" ]; then
        "$MB" search --keys "$W/k.ftk" --requests "$W/rm.jsonl" \
            --output "$W/m.out" > "$W/marisa.txt"
        $FT search --index "$W/k.idx" --engine cpu < "$W/rm.jsonl" > "$W/f.out"
        same=no
        cmp -s "$W/m.out" "$W/f.out" && same=yes
        mm=$(sed -n 's/^search.latency_ms.mean: //p' "$W/marisa.txt")
        cm=$(awk '$1 == "cpu" && $2 == '"$bw"' { print $5; exit }' "$W/bench.txt")
        echo "BW=$bw marisa_int_mean_ms=$mm cpu_mean_ms=$cm speedup=$(echo "$mm $cm" | awk '{ printf "%.1fx", $1 / $2 }') results_equal=$same"
    fi
done
