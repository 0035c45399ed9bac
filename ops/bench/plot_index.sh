#!/bin/sh
# plot_index.sh - index build time and size against library size, as PNGs.
#
#   ops/bench/plot_index.sh OUTDIR [N ...]      (default N: 100K 300K 1M)
#
# For each N it generates a seeded library ('flashtrie gen keys', .ftk, in
# a temporary folder), builds it with 'flashtrie build' (wall time of the
# whole command, as in docs/BENCHMARKS.md, "Index build rate"), reads 'flashtrie
# info', and then draws with gnuplot OUTDIR/index_build.png (build seconds
# and keys/s) and OUTDIR/index_size.png (trie and value bytes per key, and
# the file in MB).  OUTDIR also gets index.dat (the numbers) and index.gp
# (the script: 'gnuplot index.gp' in OUTDIR redraws).  Environment:
# FT_BUILD_DIR (default ./build), FT_SEED (1), TMPDIR.
set -eu
[ $# -ge 1 ] || { echo "usage: plot_index.sh OUTDIR [N ...]" >&2; exit 2; }
OUT=$1
shift
[ $# -gt 0 ] || set -- 100K 300K 1M
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
SEED=${FT_SEED:-1}
[ -x "$FT" ] || { echo "plot_index: $FT not found (build first, or set FT_BUILD_DIR)" >&2; exit 2; }
command -v gnuplot >/dev/null 2>&1 || { echo "plot_index: gnuplot not found (Debian: gnuplot-nox)" >&2; exit 2; }
$FT build --help >/dev/null 2>&1 || { echo "plot_index: this flashtrie has no build command" >&2; exit 2; }
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_plot_index.XXXXXX")
trap 'rm -rf "$W"' EXIT

num() {
    case $1 in
    *[Mm]) echo $((${1%?} * 1000000)) ;;
    *[Kk]) echo $((${1%?} * 1000)) ;;
    *[!0-9]*|'') echo "plot_index: bad N '$1'" >&2; exit 2 ;;
    *) echo "$1" ;;
    esac
}
field() { sed -n "s/^$1: *//p" "$2" | head -1 | cut -d' ' -f1; }
now() { date +%s.%N; }

printf '# keys build_s keys_per_s trie_B_per_key value_B_per_key file_MB\n' > "$OUT/index.dat"
for a in "$@"; do
    n=$(num "$a")
    "$FT" gen keys --n "$n" --seed "$SEED" --output "$W/k.ftk"
    t0=$(now)
    "$FT" build --input "$W/k.ftk" --output "$W/i.fti" > /dev/null
    t1=$(now)
    "$FT" info "$W/i.fti" > "$W/info"
    awk -v n="$n" -v t0="$t0" -v t1="$t1" -v tb="$(field trie_bytes "$W/info")" \
        -v vb="$(field value_bytes "$W/info")" -v fb="$(field file_bytes "$W/info")" \
        'BEGIN { s = t1 - t0; printf "%d %.4f %.0f %.4f %.4f %.3f\n", n, s, n / s, tb / n, vb / n, fb / 1e6 }' \
        >> "$OUT/index.dat"
    rm -f "$W/k.ftk" "$W/i.fti"
done

CORES=$(nproc)
# x tics at the sizes that ran; the range a little wider than them.
XT=$(awk '!/^#/ { printf "%s%d", s, $1; s = ", " }' "$OUT/index.dat")
XLO=$(awk '!/^#/ && (m == "" || $1 < m) { m = $1 } END { print m / 1.2 }' "$OUT/index.dat")
XHI=$(awk '!/^#/ && $1 > m { m = $1 } END { print m * 1.2 }' "$OUT/index.dat")
CPU=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1 | tr -d "'")
cat > "$OUT/index.gp" <<GP
# index.gp - made by ops/bench/plot_index.sh; run it in this folder.
set terminal pngcairo size 900,520 font 'sans,10' noenhanced
set grid
set key outside right top box Left reverse width 2
set logscale x
set xlabel 'library size (keys)'
set format x '%.0s%c'
set xtics ($XT)
set xrange [$XLO:$XHI]
sub = 'flashtrie build of generated keys (seed $SEED) | $CORES cores, $CPU'
set output 'index_build.png'
set title "Index build time vs library size\n".sub
set ylabel 'build time (s, whole command)'
set y2label 'build rate (keys/s)'
set format y2 '%.1s%c'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
plot 'index.dat' using 1:2 with linespoints lt 1 pt 7 title 'build time (s)', \\
     'index.dat' using 1:3 axes x1y2 with linespoints lt 2 pt 5 dt 2 title 'keys/s (right axis)'
set output 'index_size.png'
set title "Index size vs library size\n".sub
set ylabel 'bytes per key'
set y2label 'index file (MB)'
set format y2 '%g'
plot 'index.dat' using 1:4 with linespoints lt 1 pt 7 title 'trie (B/key)', \\
     'index.dat' using 1:5 with linespoints lt 3 pt 9 title 'values (B/key)', \\
     'index.dat' using 1:6 axes x1y2 with linespoints lt 2 pt 5 dt 2 title 'file (MB, right axis)'
unset output
GP
(cd "$OUT" && gnuplot index.gp)
cat "$OUT/index.dat"
echo "plot_index: $OUT/index_build.png $OUT/index_size.png"
