#!/bin/bash
# cli_search_test.sh - "flashtrie search" end to end: a tiny index written by
# make_index, a JSON Lines file with good and bad lines, the answer compared
# byte for byte with a golden file, and the exit codes 2 and 1.
# usage: cli_search_test.sh FLASHTRIE MAKE_INDEX DATA_DIR
set -u
BIN=$1 MK=$2 DATA=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "cli_search_test: $*" >&2; exit 1; }

"$MK" "$DATA/cli_keys.txt" "$TMP/idx.ft" || fail "make_index failed"
for eng in cpu auto; do
  for th in 1 2; do
    for b in 1 3 64; do
      "$BIN" search --index "$TMP/idx.ft" --engine $eng --threads $th --batch $b \
        < "$DATA/cli_requests.jsonl" > "$TMP/out.jsonl" 2> "$TMP/err.txt"
      rc=$?
      [ $rc -eq 0 ] || fail "exit $rc (engine $eng threads $th batch $b): $(cat "$TMP/err.txt")"
      cmp "$TMP/out.jsonl" "$DATA/cli_expected.jsonl" ||
        { diff "$TMP/out.jsonl" "$DATA/cli_expected.jsonl" >&2; fail "output differs"; }
    done
  done
done

# unusable arguments: 2
"$BIN" search < /dev/null > /dev/null 2>&1; [ $? -eq 2 ] || fail "no --index: want 2"
"$BIN" search --index "$TMP/idx.ft" --engine tpu < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--engine tpu: want 2"
"$BIN" search --index "$TMP/idx.ft" --threads x < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--threads x: want 2"
"$BIN" search --index "$TMP/idx.ft" --batch 0 < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--batch 0: want 2"
"$BIN" search --index "$TMP/idx.ft" --bogus < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--bogus: want 2"

# unusable index: 1, and the message names the file
"$BIN" search --index "$TMP/missing.ft" < /dev/null > /dev/null 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "missing index: want 1"
grep -q "missing.ft" "$TMP/err.txt" || fail "message does not name the file: $(cat "$TMP/err.txt")"
head -c 100 "$TMP/idx.ft" > "$TMP/short.ft"
"$BIN" search --index "$TMP/short.ft" < /dev/null > /dev/null 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "truncated index: want 1"
grep -q "short.ft" "$TMP/err.txt" || fail "message does not name the file: $(cat "$TMP/err.txt")"

# the cap of --max-beam applies
echo '{"tokens": [[7]], "logp": [[0]], "beam": 5}' |
  "$BIN" search --index "$TMP/idx.ft" --engine cpu --max-beam 4 > "$TMP/out.jsonl" || fail "max-beam exit"
grep -q '"error": "beam: 5 exceeds this server' "$TMP/out.jsonl" || fail "max-beam: $(cat "$TMP/out.jsonl")"
# --max-line-bytes: a longer line is answered with an error (its id still
# echoed), the lines around it as usual; 0 and non-numbers are unusable
printf '%s\n%s\n%s\n' '{"id": 1, "tokens": [[7]], "logp": [[0]]}' \
    '{"id": 2, "tokens": [[7]], "logp": [[0]], "beam": 1}' '{"tokens": [[7]], "logp": [[0]]}' |
  "$BIN" search --index "$TMP/idx.ft" --engine cpu --max-line-bytes 41 > "$TMP/out.jsonl" ||
  fail "max-line-bytes exit"
printf '%s\n%s\n%s\n' \
    '{"id": 1, "results": [{"tokens": [7], "value": 104, "score": 0, "sigma": 0}]}' \
    '{"id": 2, "error": "json: line longer than 41 bytes"}' \
    '{"results": [{"tokens": [7], "value": 104, "score": 0, "sigma": 0}]}' > "$TMP/want.jsonl"
cmp "$TMP/out.jsonl" "$TMP/want.jsonl" || fail "max-line-bytes: $(cat "$TMP/out.jsonl")"
"$BIN" search --index "$TMP/idx.ft" --max-line-bytes 0 < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--max-line-bytes 0: want 2"
"$BIN" search --index "$TMP/idx.ft" --max-line-bytes x < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--max-line-bytes x: want 2"
# a number flag's message gives the range it takes; 0 is none of them
for a in "--batch 0:--batch: expected 1..65536, got '0'" \
         "--max-line-bytes 0:--max-line-bytes: expected 1..1099511627776, got '0'" \
         "--max-beam 0:--max-beam: expected 1..4096, got '0'" \
         "--max-beam 4097:--max-beam: expected 1..4096, got '4097'" \
         "--threads x:--threads: expected 0..1024, got 'x'"; do
  "$BIN" search --index "$TMP/idx.ft" ${a%%:*} < /dev/null > /dev/null 2> "$TMP/err.txt"
  rc=$?
  [ $rc -eq 2 ] || fail "${a%%:*}: exit $rc, want 2"
  [ "$(cat "$TMP/err.txt")" = "flashtrie search: ${a#*:}" ] ||
    fail "${a%%:*}: $(cat "$TMP/err.txt")"
done

# output that cannot be written: exit 1 with a message, never 0 with the
# output lost (info, lookup and bench exited 0 on a full disk)
if [ -w /dev/full ]; then
  for c in "info $TMP/idx.ft" "lookup $TMP/idx.ft" "lookup --prefix $TMP/idx.ft" \
           "bench --index $TMP/idx.ft --engine cpu --n-requests 1 --T 1 --beam 2 --batch 1"; do
    echo 1 | "$BIN" $c > /dev/full 2> "$TMP/err.txt"
    rc=$?
    [ $rc -eq 1 ] || fail "$c > /dev/full: exit $rc, want 1"
    [ "$(cat "$TMP/err.txt")" = "flashtrie ${c%% *}: cannot write the output" ] ||
      fail "$c > /dev/full: $(cat "$TMP/err.txt")"
  done
  "$BIN" --version > /dev/full 2> /dev/null && fail "--version > /dev/full: exit 0"
fi

# input that cannot be read (a directory on stdin: read() fails with
# EISDIR): exit 1 with a message, never 0 as if the input were empty
# (docs/specification.md section 7: every input line gets one output line;
# exit 0 only when every line was answered)
"$BIN" search --index "$TMP/idx.ft" --engine cpu < "$TMP" > "$TMP/out.jsonl" 2> "$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "search < a directory: exit $rc, want 1"
[ "$(cat "$TMP/err.txt")" = "flashtrie search: cannot read the input: Is a directory" ] ||
  fail "search < a directory: $(cat "$TMP/err.txt")"
[ -s "$TMP/out.jsonl" ] && fail "search < a directory: output $(cat "$TMP/out.jsonl")"
# the same for search --ar and lookup
"$BIN" search --index "$TMP/idx.ft" --ar --engine cpu < "$TMP" > "$TMP/out.jsonl" 2> "$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "search --ar < a directory: exit $rc, want 1"
[ "$(cat "$TMP/err.txt")" = "flashtrie search: cannot read the input: Is a directory" ] ||
  fail "search --ar < a directory: $(cat "$TMP/err.txt")"
"$BIN" lookup "$TMP/idx.ft" < "$TMP" > "$TMP/out.txt" 2> "$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || fail "lookup < a directory: exit $rc, want 1"
[ "$(cat "$TMP/err.txt")" = "flashtrie lookup: cannot read the input: Is a directory" ] ||
  fail "lookup < a directory: $(cat "$TMP/err.txt")"
[ -s "$TMP/out.txt" ] && fail "lookup < a directory: output $(cat "$TMP/out.txt")"

# lookup: a line with a NUL byte is no key (it was read as the tokens
# before the NUL)
key=$(grep -v '^#' "$DATA/cli_keys.txt" | head -1 | cut -f1 | cut -d' ' -f1)
printf '%s\0 9\n' "$key" | "$BIN" lookup "$TMP/idx.ft" > "$TMP/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "lookup of a line with a NUL: exit $rc, want 1"
[ "$(cat "$TMP/out.txt")" = "error: line 1: not a list of u32 tokens" ] ||
  fail "lookup of a line with a NUL: $(cat "$TMP/out.txt")"
# lookup: --limit without --prefix has nothing to limit: refused
"$BIN" lookup --limit 5 "$TMP/idx.ft" < /dev/null > /dev/null 2> "$TMP/err.txt"
rc=$?
[ $rc -eq 2 ] || fail "lookup --limit without --prefix: exit $rc, want 2"
[ "$(cat "$TMP/err.txt")" = "flashtrie lookup: --limit applies only with --prefix" ] ||
  fail "lookup --limit without --prefix: $(cat "$TMP/err.txt")"

# build: an --output that is the input file (by name, through another
# path, or a hard link) is refused and the keys stay as they were
printf '1 2\t5\n1 3\t6\n' > "$TMP/keys.txt"
cp "$TMP/keys.txt" "$TMP/keys.orig"
ln "$TMP/keys.txt" "$TMP/keys.link"
for out in "$TMP/keys.txt" "$TMP/../$(basename "$TMP")/keys.txt" "$TMP/keys.link"; do
  for sh in "" "--shards 2"; do
    "$BIN" build --input "$TMP/keys.txt" --output "$out" $sh > /dev/null 2> "$TMP/err.txt"
    rc=$?
    [ $rc -eq 2 ] || fail "build --output $out $sh (the input): exit $rc, want 2"
    [ "$(cat "$TMP/err.txt")" = "flashtrie build: --output $out is the input file: the index would replace the keys; give another path" ] ||
      fail "build onto its input: $(cat "$TMP/err.txt")"
    cmp -s "$TMP/keys.txt" "$TMP/keys.orig" || fail "build onto its input changed the keys"
  done
done
"$BIN" build --input "$TMP/keys.txt" --output "$TMP/keys.ft" --quiet || fail "build of keys.txt failed"
echo "cli_search_test: ok"
