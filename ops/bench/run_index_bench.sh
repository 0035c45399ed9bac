#!/bin/sh
# run_index_bench.sh - index build rate and size, FlashTrie against
# libmarisa, on seeded synthetic libraries (docs/workload.md).
#
#   ops/bench/run_index_bench.sh [N ...]        (default: 1M 10M 100M)
#
# N may carry a K or M suffix.  For each N it generates the library
# ('flashtrie gen keys', .ftk), builds our index ('flashtrie build', or the
# ft_builder through 'flashtrie gen index' where the build command is
# missing), reads 'flashtrie info', builds the same keys with marisa
# (ft_marisa_bench build: varint-encoded tokens, default config) and prints
# one table.  Environment: FT_BUILD_DIR (default ./build), FT_SEED (1),
# FT_MARISA_MAX_N (skip marisa above this many keys; default: never),
# TMPDIR (where the keys and indexes go; they are removed at the end).
# build_s is wall time of the build command; marisa_s is marisa's
# trie.build alone and m_load_s its reading and encoding of the keys.
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
MB=$B/ft_marisa_bench
SEED=${FT_SEED:-1}
[ -x "$FT" ] || { echo "run_index_bench: $FT not found (build first, or set FT_BUILD_DIR)" >&2; exit 2; }
[ $# -gt 0 ] || set -- 1M 10M 100M
W=$(mktemp -d "${TMPDIR:-/tmp}/ft_index_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT

now() { date +%s.%N; }
num() {
    case $1 in
    *[Mm]) echo $((${1%?} * 1000000)) ;;
    *[Kk]) echo $((${1%?} * 1000)) ;;
    *[!0-9]*|'') echo "run_index_bench: bad N '$1'" >&2; exit 2 ;;
    *) echo "$1" ;;
    esac
}
field() { sed -n "s/^$1: *//p" "$2" | head -1 | cut -d' ' -f1; }

HAVE_BUILD=0
$FT build --help >/dev/null 2>&1 && HAVE_BUILD=1
HAVE_MARISA=0
[ -x "$MB" ] && HAVE_MARISA=1

echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "builder: $([ $HAVE_BUILD = 1 ] && echo 'flashtrie build (parse + sort + build + write)' || echo 'flashtrie gen index (ft_builder on the sorted stream, generation included)')"
echo "marisa:  $([ $HAVE_MARISA = 1 ] && echo 'ft_marisa_bench build (trie.build on a loaded keyset; load time apart)' || echo 'not built (libmarisa-dev missing)')"
echo
ROWS=$W/rows
: > "$ROWS"
for arg in "$@"; do
    n=$(num "$arg")
    K=$W/keys.ftk
    I=$W/index.fti
    t0=$(now)
    $FT gen keys --n "$n" --seed "$SEED" --output "$K" --stats 2> "$W/gen.txt"
    t1=$(now)
    if [ $HAVE_BUILD = 1 ]; then
        $FT build --input "$K" --output "$I" > "$W/build.txt" 2>&1
    else
        $FT gen index --n "$n" --seed "$SEED" --output "$I"
    fi
    t2=$(now)
    $FT info "$I" > "$W/info.txt"
    m_build=- m_load=- m_bpk=-
    if [ $HAVE_MARISA = 1 ] && [ "$n" -le "${FT_MARISA_MAX_N:-999999999999}" ]; then
        "$MB" build --keys "$K" > "$W/marisa.txt"
        m_build=$(field marisa.build_s "$W/marisa.txt")
        m_load=$(field marisa.load_s "$W/marisa.txt")
        m_bpk=$(field marisa.bytes_per_key "$W/marisa.txt")
    fi
    echo "$n $(field nodes "$W/gen.txt") $t0 $t1 $t2 $(field trie_bytes_per_key "$W/info.txt") \
$(field trie_bytes_per_node "$W/info.txt") $(field value_bytes_per_key "$W/info.txt") \
$m_build $m_load $m_bpk" >> "$ROWS"
    rm -f "$K" "$I"
done
awk 'BEGIN { printf "%11s %9s %7s %8s %10s %10s %11s %11s | %8s %8s %12s\n", "keys", "nodes/key", "gen_s", "build_s", "build_k/s", "trie_B/key", "trie_B/node", "value_B/key", "marisa_s", "m_load_s", "marisa_B/key" }
     { printf "%11d %9.3f %7.2f %8.2f %10.0f %10s %11s %11s | %8s %8s %12s\n", $1, $2 / $1, $4 - $3, $5 - $4, $1 / ($5 - $4) / 1000, $6, $7, $8, $9, $10, $11 }' "$ROWS"
