#!/bin/sh
# demo.sh - FlashTrie in one minute: a seeded demo library, its index, the
# index's numbers, three lookups, a few offline beam searches over NAR-style
# request grids, and then the daemon: "flashtrie serve" on that index (the
# GPU engine when one is usable, else the CPU), the same requests answered
# through it with "flashtrie query" (compared with the offline answers),
# its INFO, and a SIGTERM that drains it.  Run it from anywhere after
#   cmake -S . -B build && cmake --build build
# Environment: FT_BUILD_DIR (default: build/ in the repository this script
# is in), FT_DEMO_KEYS (200000),
# FT_DEMO_URL (default ipc://<temporary folder>/flashtrie.sock).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${FT_BUILD_DIR:-$ROOT/build}
FT=$B/flashtrie
N=${FT_DEMO_KEYS:-200000}
[ -x "$FT" ] || { echo "demo: $FT not found; build it first: cmake -S $ROOT -B $B && cmake --build $B (or set FT_BUILD_DIR)" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/flashtrie_demo.XXXXXX")
SERVER=
trap '[ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null; rm -rf "$W"' EXIT
URL=${FT_DEMO_URL:-ipc://$W/flashtrie.sock}

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

echo
echo "== 5. the daemon: flashtrie serve on $URL"
$FT serve --index "$W/demo.fti" --listen "$URL" 2> "$W/serve.log" &
SERVER=$!
$FT query --url "$URL" --ping --timeout-ms 30000 ||
  { cat "$W/serve.log" >&2; echo "demo: the server did not come up" >&2; exit 1; }
sed 's/^[^ ]* [a-z]* [^ ]* /  /' "$W/serve.log"

echo
echo "== 6. the same requests through the daemon (flashtrie query)"
$FT query --url "$URL" --batch 3 < "$W/req.jsonl" > "$W/served.jsonl"
cat "$W/served.jsonl"
if cmp -s "$W/served.jsonl" "$W/res.jsonl"; then
  echo "  (byte-identical to flashtrie search)"
else
  echo "demo: the daemon's answers differ from flashtrie search's" >&2; exit 1
fi
echo "a few lines of its INFO:"
# A section's heading only above a line picked from it.
$FT query --url "$URL" --info | awk '
  /^# / { head = $0; next }
  /^(keys|engine\.0\.kind|why|total|status\.ok|latency_p50)/ {
    if (head != "") { print "  " head; head = "" }
    print "  " $0
  }'

echo
echo "== 7. SIGTERM: the daemon drains and exits"
kill -TERM "$SERVER"
rc=0; wait "$SERVER" || rc=$?
SERVER=
tail -3 "$W/serve.log" | sed 's/^[^ ]* [a-z]* [^ ]* /  /'
echo "  exit status $rc"
[ $rc -eq 0 ]
