#!/bin/bash
# build_kill_test.sh - a "flashtrie build" killed with SIGKILL leaves nothing
# under the final name, and its leftovers (sorted runs
# .flashtrie-run-<pid>-*, OUT.tmp.<pid>) are removed by the next build of
# that output, or by "flashtrie build --clean", with a log line each; files
# of live processes and files that only look alike are kept.
# usage: build_kill_test.sh FLASHTRIE [KEYS]   (KEYS: input size, default
# 3000000; sanitizer builds pass fewer)
set -u
BIN=$1
N=${2:-3000000}
TMP=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "build_kill_test: $*" >&2; exit 1; }

"$BIN" gen keys --n "$N" --seed 7 --output "$TMP/keys.txt" 2>/dev/null ||
  fail "gen keys failed"
OUT=$TMP/lib.idx
# A small memory budget and one thread: the build spills many runs and
# takes long enough to be killed in the middle.
"$BIN" build --input "$TMP/keys.txt" --output "$OUT" --max-memory 1M \
  --threads 1 --quiet 2> "$TMP/build1.err" &
PID=$!
runs=0
for _ in $(seq 1 600); do   # at most 60 s
  runs=$(ls -A "$TMP" | grep -c "^\.flashtrie-run-$PID-")
  [ "$runs" -ge 2 ] && break
  kill -0 "$PID" 2>/dev/null || fail "the build ended before it spilled: $(cat "$TMP/build1.err")"
  sleep 0.1
done
[ "$runs" -ge 2 ] || fail "no sorted runs after 60 s"
kill -9 "$PID"
wait "$PID" 2>/dev/null
DEAD=$PID
PID=
[ -e "$OUT" ] && fail "a killed build left $OUT"
left=$(ls -A "$TMP" | grep -c "^\.flashtrie-run-$DEAD-")
[ "$left" -ge 2 ] || fail "want the killed build's runs left behind, found $left"
killed=$left

# What a kill during the write leaves, for the same dead pid; a live
# process's (this shell's) and look-alikes must stay.
echo partial > "$OUT.tmp.$DEAD"
echo live > "$OUT.tmp.$$"
echo live > "$TMP/.flashtrie-run-$$-abcdef"
echo other > "$OUT.tmpx.$DEAD"
echo other > "$TMP/.flashtrie-run-x$DEAD-abcdef"

"$BIN" build --input "$TMP/keys.txt" --output "$OUT" --quiet 2> "$TMP/build2.err" ||
  fail "second build failed: $(cat "$TMP/build2.err")"
[ -e "$OUT.tmp.$DEAD" ] && fail "$OUT.tmp.$DEAD not removed"
left=$(ls -A "$TMP" | grep -c "^\.flashtrie-run-$DEAD-")
[ "$left" -eq 0 ] || fail "$left runs of the killed build remain"
got=$(grep -c "removed what a killed build (pid $DEAD) left behind" "$TMP/build2.err")
[ "$got" -eq $((killed + 1)) ] || fail "want $((killed + 1)) removals logged, got $got: $(cat "$TMP/build2.err")"
for f in "$OUT.tmp.$$" "$TMP/.flashtrie-run-$$-abcdef" "$OUT.tmpx.$DEAD" \
         "$TMP/.flashtrie-run-x$DEAD-abcdef"; do
  [ -e "$f" ] || fail "$f removed, but it is not a dead build's"
done
"$BIN" info "$OUT" > "$TMP/info.txt" 2>&1 || fail "info: $(cat "$TMP/info.txt")"
grep -q "keys *[:=]* *$N\b" "$TMP/info.txt" || grep -q "\"keys\": *$N\b" "$TMP/info.txt" ||
  fail "the rebuilt index does not hold $N keys: $(head -5 "$TMP/info.txt")"

# --clean alone: removes, says how many, builds nothing; a second --clean
# finds nothing.
echo partial > "$OUT.tmp.$DEAD"
echo run > "$TMP/.flashtrie-run-$DEAD-zzzzzz"
"$BIN" build --clean --output "$OUT" 2> "$TMP/clean.err" || fail "--clean failed: $(cat "$TMP/clean.err")"
grep -q "removed 2 stale temporary files" "$TMP/clean.err" || fail "--clean: $(cat "$TMP/clean.err")"
[ -e "$OUT.tmp.$DEAD" ] || [ -e "$TMP/.flashtrie-run-$DEAD-zzzzzz" ] && fail "--clean left files"
"$BIN" build --clean --output "$OUT" 2> "$TMP/clean.err" || fail "--clean failed"
grep -q "removed 0 stale temporary files" "$TMP/clean.err" || fail "second --clean: $(cat "$TMP/clean.err")"
# runs in another --tmp-dir are found there
mkdir "$TMP/t"
echo run > "$TMP/t/.flashtrie-run-$DEAD-yyyyyy"
"$BIN" build --clean --output "$OUT" --tmp-dir "$TMP/t" 2> "$TMP/clean.err" || fail "--clean --tmp-dir failed"
[ -e "$TMP/t/.flashtrie-run-$DEAD-yyyyyy" ] && fail "--clean --tmp-dir left the run"
"$BIN" build --clean --output "$TMP/nodir/x" 2> "$TMP/clean.err"
[ $? -eq 1 ] || fail "--clean of an unreadable folder: want exit 1"
grep -q "nodir: cannot read the directory" "$TMP/clean.err" || fail "--clean nodir: $(cat "$TMP/clean.err")"
echo "build_kill_test: ok ($killed runs of killed pid $DEAD removed)"
