#!/bin/sh
# demo.sh - FlashTrie in one minute: a seeded demo library, its index, the
# index's numbers, three lookups and a few beam searches over NAR-style
# request grids.  Run from the repository root after
#   cmake -S . -B build && cmake --build build
# Environment: FT_BUILD_DIR (default ./build), FT_DEMO_KEYS (200000).
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
N=${FT_DEMO_KEYS:-200000}
[ -x "$FT" ] || { echo "demo: $FT not found; run: cmake -S . -B build && cmake --build build" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/flashtrie_demo.XXXXXX")
trap 'rm -rf "$W"' EXIT

echo "== 1. a seeded demo library: $N keys, Zipf tokens over a 2.2M vocabulary"
$FT gen keys --n "$N" --seed 7 --output "$W/demo.keys" --stats 2>&1
echo "first keys:"
head -3 "$W/demo.keys" | sed 's/^/  /'

echo
echo "== 2. its index"
$FT build --input "$W/demo.keys" --output "$W/demo.fti"
$FT info "$W/demo.fti"

echo
echo "== 3. lookups (a key's value is its line number in the keys file)"
{ sed -n '1p;1000p' "$W/demo.keys"; echo "4294967295 1 2"; } > "$W/probe"
$FT lookup "$W/demo.fti" < "$W/probe" > "$W/found"
paste -d'|' "$W/probe" "$W/found" | sed 's/|/  ->  /; s/^/  /'

echo
echo "== 4. beam search: 3 generated requests (T=8, K=B=50, top 5 shown)"
$FT gen requests --index "$W/demo.fti" --n 3 --beam 50 --results 5 --seed 7 > "$W/req.jsonl"
$FT search --index "$W/demo.fti" < "$W/req.jsonl" > "$W/res.jsonl"
cat "$W/res.jsonl"
