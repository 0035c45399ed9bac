#!/bin/sh
# realdata-bench.sh - search latency on the real-data library that
# ops/bench/realdata.sh left in OUTDIR, next to a synthetic library of the
# same number of keys, in the same run.
#
#   ops/bench/realdata-bench.sh [OUTDIR]          (default: ./realdata)
#
# It generates the synthetic library of as many keys ('flashtrie gen keys
# --seed 1', docs/workload.md) and builds it; then for each
# OUTDIR/req-BW.jsonl it makes the synthetic requests with the same options
# and seed and runs 'flashtrie bench --requests' on real.idx and synth.idx
# (engines FT_ENGINES, default cpu; batches FT_BATCH, default 1,32).
# Last, libmarisa: its trie of either library ('ft_marisa_bench build'),
# and MARISA-Int ('ft_marisa_bench search' on keys.txt, the first FT_M
# requests, default 5; skipped without OUTDIR/keys.txt or with FT_M=0),
# whose result lines must equal 'flashtrie search' on
# the same requests byte for byte.  Everything is printed; the bench
# outputs stay in OUTDIR/bench-*.txt, the synthetic files in OUTDIR/synth*.
# Environment: FT_BUILD_DIR (./build), FT_THREADS (0 = all cores), FT_R
# (requests of the synthetic grids, default: as many as the real ones),
# FT_ROUNDS.
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
MB=$B/ft_marisa_bench
OUT=${1:-./realdata}
ENG=${FT_ENGINES:-cpu}
BATCH=${FT_BATCH:-1,32}
THR=${FT_THREADS:-0}
M=${FT_M:-5}
[ -f "$OUT/real.idx" ] || { echo "realdata-bench: no $OUT/real.idx (run ops/bench/realdata.sh first)" >&2; exit 2; }
now() { date +%s.%N; }
since() { echo "$1 $(now)" | awk '{ printf "%.2f", $2 - $1 }'; }
echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%dT%H:%M:%SZ)"

N=$($FT info "$OUT/real.idx" | sed -n 's/^keys: //p')
beams=""
for f in "$OUT"/req-*.jsonl; do
    bw=${f##*/req-}
    bw=${bw%.jsonl}
    case $bw in
    *[!0-9]*|'') continue ;;
    esac
    beams="$beams $bw"
done
beams=$(echo $beams | tr ' ' '\n' | sort -n | tr '\n' ' ')

t=$(now)
$FT gen keys --n "$N" --seed 1 --format ftk --output "$OUT/synth.ftk"
echo "== synthetic, $N keys (seed 1): gen $(since "$t") s"
t=$(now)
$FT build --input "$OUT/synth.ftk" --output "$OUT/synth.idx" --quiet
echo "synthetic build_s: $(since "$t")"
$FT info "$OUT/synth.idx" | grep -E '^(keys|nodes|root_fanout|high_label_nodes|file_bytes|trie_bytes|trie_bytes_per_key|trie_bytes_per_node|value_bytes_per_key):' |
    sed 's/^/synthetic /'

# Real and synthetic alternate per BW and per round (FT_ROUNDS, default 1),
# so that load from other jobs on a shared machine hits both alike.
for bw in $beams; do
    R=$(wc -l < "$OUT/req-$bw.jsonl")
    $FT gen requests --index "$OUT/synth.idx" --n "${FT_R:-$R}" --T 8 --K "$bw" --beam "$bw" \
        --seed "$((${FT_SEED:-1} + bw))" --output "$OUT/synth-req-$bw.jsonl"
    round=1
    while [ "$round" -le "${FT_ROUNDS:-1}" ]; do
        for lib in real synth; do
            req=$OUT/req-$bw.jsonl
            [ $lib = synth ] && req=$OUT/synth-req-$bw.jsonl
            echo "== $lib, $N keys, BW=K=$bw, $(wc -l < "$req") requests, round $round"
            $FT bench --index "$OUT/$lib.idx" --requests "$req" --engine "$ENG" \
                --threads "$THR" --batch "$BATCH" > "$OUT/bench-$lib-$bw-$round.txt" 2>&1
            sed -n '/^engine/,$p' "$OUT/bench-$lib-$bw-$round.txt"
        done
        round=$((round + 1))
    done
done

if [ -x "$MB" ] && [ -f "$OUT/keys.txt" ] && [ "$M" -gt 0 ]; then
    for lib in keys.txt synth.ftk; do
        echo "== marisa build, $lib"
        "$MB" build --keys "$OUT/$lib" | grep -E '^marisa\.(load_s|build_s|bytes_per_key):'
    done
    for bw in $beams; do
        head -n "$M" "$OUT/req-$bw.jsonl" > "$OUT/marisa-req-$bw.jsonl"
        "$MB" search --keys "$OUT/keys.txt" --requests "$OUT/marisa-req-$bw.jsonl" \
            --output "$OUT/marisa-$bw.out" > "$OUT/marisa-$bw.txt"
        $FT search --index "$OUT/real.idx" --engine cpu < "$OUT/marisa-req-$bw.jsonl" > "$OUT/ft-$bw.out"
        same=no
        cmp -s "$OUT/marisa-$bw.out" "$OUT/ft-$bw.out" && same=yes
        mm=$(sed -n 's/^search.latency_ms.mean: //p' "$OUT/marisa-$bw.txt")
        echo "marisa_int real BW=$bw first $M requests: mean_ms=$mm results_equal=$same"
    done
fi
