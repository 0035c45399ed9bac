#!/bin/bash
# ar_search_test.sh - "flashtrie search --ar" (the autoregressive step API
# driven one step at a time, sparse and dense rows) answers byte for byte
# what "flashtrie search" answers: on the recorded CLI requests (good and
# bad lines) and on seeded generated libraries and requests, shuffled,
# rounded to coarse log-probs (ties) and with every the specification parameter varied.
# usage: ar_search_test.sh FLASHTRIE DATA_DIR ENGINE [PYTHON]
# ENGINE is cpu or gpu; with gpu it exits 77 (skipped) when no GPU engine
# can start.
set -u
BIN=$1 DATA=$2 ENG=$3 PY=${4:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "ar_search_test: $*" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)

"$BIN" build --input "$DATA/cli_keys.txt" --output "$TMP/cli.ft" --quiet ||
  fail "build failed"
if [ "$ENG" = gpu ]; then
  echo '{"tokens":[[1]],"logp":[[0]]}' |
    "$BIN" search --index "$TMP/cli.ft" --engine gpu --ar > /dev/null 2> "$TMP/err.txt"
  if [ $? -ne 0 ]; then
    echo "ar_search_test: skipped: no GPU step: $(cat "$TMP/err.txt")"
    exit 77
  fi
fi

check() { # INDEX REQUESTS WHAT
  "$BIN" search --index "$1" --engine cpu < "$2" > "$TMP/want.jsonl" ||
    fail "$3: search failed"
  for form in sparse dense; do
    "$BIN" search --index "$1" --engine "$ENG" --ar $form < "$2" \
      > "$TMP/got.jsonl" 2> "$TMP/err.txt" ||
      fail "$3: search --ar $form --engine $ENG failed: $(cat "$TMP/err.txt")"
    cmp -s "$TMP/want.jsonl" "$TMP/got.jsonl" || {
      diff "$TMP/want.jsonl" "$TMP/got.jsonl" | head -20 >&2
      fail "$3: --ar $form --engine $ENG differs from search"
    }
  done
}

check "$TMP/cli.ft" "$DATA/cli_requests.jsonl" "cli requests"
cmp -s "$TMP/want.jsonl" "$DATA/cli_expected.jsonl" || fail "search itself moved"

# --ar takes sparse or dense, and no manifest
"$BIN" search --index "$TMP/cli.ft" --ar bogus < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--ar bogus: want 2"
"$BIN" search --index "$TMP/cli.ft" --ar=dense < /dev/null > /dev/null 2>&1
[ $? -eq 0 ] || fail "--ar=dense: want 0"

n=0
for spec in "3000 40 1" "20000 300 2" "800 6000 3"; do
  set -- $spec
  keys=$1 vocab=$2 seed=$3
  "$BIN" gen keys --n "$keys" --vocab "$vocab" --seed "$seed" \
    --output "$TMP/k$seed.txt" || fail "gen keys $spec"
  "$BIN" build --input "$TMP/k$seed.txt" --output "$TMP/k$seed.ft" --quiet ||
    fail "build $spec"
  for K in 1 7 40; do
    for T in 1 5 12; do
      n=$((n + 1))
      "$BIN" gen requests --index "$TMP/k$seed.ft" --n 6 --T $T --K $K \
        --beam 8 --seed $n > "$TMP/gen.jsonl" || fail "gen requests"
      check "$TMP/k$seed.ft" "$TMP/gen.jsonl" "keys $spec K $K T $T (plain)"
      "$PY" "$HERE/ar_mutate.py" $n < "$TMP/gen.jsonl" > "$TMP/mut.jsonl" ||
        fail "ar_mutate.py failed"
      check "$TMP/k$seed.ft" "$TMP/mut.jsonl" "keys $spec K $K T $T (mutated)"
    done
  done
done
echo "ar_search_test: $n request files equal on $ENG (sparse and dense)"
