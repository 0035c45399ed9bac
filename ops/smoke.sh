#!/bin/sh
# smoke.sh - does this flashtrie binary serve?  Starts "flashtrie serve" on
# a generated demo library, waits for it to answer a ping, checks its INFO,
# sends generated requests through "flashtrie query" and compares every
# answer with what "flashtrie search" prints offline for the same requests
# (byte for byte: every engine gives the same results), then stops it with
# SIGTERM and expects a clean drain (exit 0).  Nothing is left behind.
#
# usage: ops/smoke.sh [FLASHTRIE]   (default: $FT_BUILD_DIR/flashtrie, else
#                                    flashtrie on PATH)
# Environment: FT_SMOKE_ENGINE (auto|cpu|gpu, default auto),
#   FT_SMOKE_KEYS (library size, default 20000), FT_SMOKE_URL (default an
#   ipc:// socket in the work folder, so that no port is taken),
#   FT_SMOKE_START_S (how long start may take, default 60: a GPU engine
#   uploads the index first).
# Exit 0 when all is well; 1 with the reason and the server's log tail.
set -u
FT=${1:-}
if [ -z "$FT" ]; then
  if [ -x "${FT_BUILD_DIR:-./build}/flashtrie" ]; then FT=${FT_BUILD_DIR:-./build}/flashtrie
  else FT=$(command -v flashtrie) || { echo "smoke: no flashtrie binary" >&2; exit 1; }; fi
fi
ENGINE=${FT_SMOKE_ENGINE:-auto}
N=${FT_SMOKE_KEYS:-20000}
START_S=${FT_SMOKE_START_S:-60}
W=$(mktemp -d "${TMPDIR:-/tmp}/flashtrie_smoke.XXXXXX")
URL=${FT_SMOKE_URL:-ipc://$W/smoke.ipc}
PID=
cleanup() {
  if [ -n "$PID" ]; then kill -KILL "$PID" 2> /dev/null; wait "$PID" 2> /dev/null; fi
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "smoke: FAILED: $*" >&2
  [ -s "$W/serve.log" ] && { echo "smoke: server log (last 20 lines):" >&2; tail -n 20 "$W/serve.log" >&2; }
  exit 1
}
say() { echo "smoke: $*"; }

"$FT" gen index --n "$N" --seed 3 --output "$W/lib.fti" > /dev/null 2> "$W/gen.err" ||
  fail "gen index: $(cat "$W/gen.err")"
"$FT" gen requests --index "$W/lib.fti" --n 64 --beam 20 --results 5 --seed 4 \
  > "$W/req.jsonl" 2> "$W/gen.err" || fail "gen requests: $(cat "$W/gen.err")"
# One request the server must refuse the way search does.
echo '{"tokens": [[1]], "logp": [[-1]], "beam": 0}' >> "$W/req.jsonl"
"$FT" search --index "$W/lib.fti" --engine cpu < "$W/req.jsonl" > "$W/want.jsonl" 2> "$W/search.err" ||
  fail "search: $(cat "$W/search.err")"
say "library of $N keys, $(wc -l < "$W/req.jsonl") requests"

"$FT" serve --index "$W/lib.fti" --listen "$URL" --engine "$ENGINE" 2> "$W/serve.log" &
PID=$!
"$FT" query --url "$URL" --ping --timeout-ms $((START_S * 1000)) > /dev/null 2> "$W/q.err" || {
  kill -0 "$PID" 2> /dev/null || { wait "$PID"; fail "serve exited $? before it answered"; }
  fail "no answer to a ping at $URL within $START_S s: $(cat "$W/q.err")"
}
"$FT" query --url "$URL" --info > "$W/info" 2> "$W/q.err" || fail "query --info: $(cat "$W/q.err")"
grep -q "^keys: $N\$" "$W/info" || fail "INFO does not say 'keys: $N': $(grep '^keys' "$W/info")"
kind=$(sed -n 's/^engine\.0\.kind: //p' "$W/info")
[ -n "$kind" ] || fail "INFO names no engine.0.kind"
[ "$ENGINE" = auto ] || [ "$kind" = "$ENGINE" ] || fail "engine $ENGINE asked for, INFO says $kind"
say "serving at $URL (pid $PID), engine $kind"

for b in 1 16; do
  "$FT" query --url "$URL" --batch $b < "$W/req.jsonl" > "$W/got.jsonl" 2> "$W/q.err" ||
    fail "query --batch $b exited $?: $(cat "$W/q.err")"
  cmp -s "$W/got.jsonl" "$W/want.jsonl" ||
    fail "query --batch $b: answers differ from search's (first: $(diff "$W/got.jsonl" "$W/want.jsonl" | head -n 2 | tr '\n' ' '))"
done
say "$(wc -l < "$W/got.jsonl") answers equal search's, batch 1 and 16"

kill -TERM "$PID"
i=0
while kill -0 "$PID" 2> /dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$PID" 2> /dev/null && fail "still running 30 s after SIGTERM"
wait "$PID"
rc=$?
PID=
[ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM, want 0"
grep -q "drained: every request answered" "$W/serve.log" || fail "no drain line in the log"
say "ok: SIGTERM drained and exited 0"
