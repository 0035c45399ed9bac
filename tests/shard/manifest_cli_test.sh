#!/bin/bash
# manifest_cli_test.sh - sharded libraries end to end: "flashtrie build
# --shards", "flashtrie split" (by count and by byte budget), and "info" and
# "lookup" on a manifest answering as on the unsharded index; the exit codes
# and messages of the partition limits, bad arguments and a missing shard.
# usage: manifest_cli_test.sh FLASHTRIE
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "manifest_cli_test: $*" >&2; exit 1; }
FIELDS='^(keys|nodes|max_depth|max_key_len|root_fanout|high_label_nodes|label_high_bits|leaves|unary_nodes|value_bits):'

"$BIN" gen keys --n 6000 --seed 3 --output "$TMP/keys.txt" 2> /dev/null || fail "gen keys"
# the same keys with explicit values (not their line numbers)
awk '{ print $0 "\t" ((NR * 7919) % 1000003) }' "$TMP/keys.txt" > "$TMP/vkeys.txt"

for K in keys vkeys; do
  "$BIN" build --input "$TMP/$K.txt" --output "$TMP/$K.idx" --quiet || fail "$K: build"
  "$BIN" build --input "$TMP/$K.txt" --output "$TMP/$K.ftm" --shards 3 --quiet ||
    fail "$K: build --shards 3"
  for i in 000 001 002; do
    [ -f "$TMP/$K.ftm.shard-$i-of-003.idx" ] || fail "$K: shard $i missing"
  done
  ls "$TMP" | grep -q 'whole\|\.tmp\.\|\.new\.' && fail "$K: temporary files left: $(ls "$TMP")"
  # build --shards is split of the built index, byte for byte
  mkdir -p "$TMP/s"
  "$BIN" split "$TMP/$K.idx" --shards 3 --output "$TMP/s/$K.ftm" --quiet || fail "$K: split 3"
  for f in "$K.ftm" "$K.ftm.shard-000-of-003.idx" "$K.ftm.shard-002-of-003.idx"; do
    cmp "$TMP/$f" "$TMP/s/$f" || fail "$K: $f differs between build --shards and split"
  done
  "$BIN" split "$TMP/$K.idx" --shards 5 --output "$TMP/$K-5.ftm" --threads 2 --quiet ||
    fail "$K: split 5"
  "$BIN" split "$TMP/$K.idx" --shard-bytes 40K --output "$TMP/$K-b.ftm" --quiet ||
    fail "$K: split --shard-bytes 40K"

  # queries: every key, keys with a token more or less, changed first
  # tokens, prefixes of one and two tokens, the empty prefix
  cut -f1 "$TMP/$K.txt" > "$TMP/q.txt"
  awk '{ print $0 " 4294967295"; $1 = $1 + 1; print; if (NF > 1) { NF = NF - 1; print } }' \
    "$TMP/q.txt" >> "$TMP/q.txt.more"
  cat "$TMP/q.txt.more" >> "$TMP/q.txt"
  rm -f "$TMP/q.txt.more"
  { echo; cut -d' ' -f1 "$TMP/q.txt" | sort -u; cut -d' ' -f1-2 "$TMP/q.txt" | sort -u | head -500; } \
    > "$TMP/p.txt"
  "$BIN" info "$TMP/$K.idx" | grep -E "$FIELDS" > "$TMP/info.want" || fail "$K: info"
  "$BIN" lookup "$TMP/$K.idx" < "$TMP/q.txt" > "$TMP/look.want"
  "$BIN" lookup --prefix --limit 0 "$TMP/$K.idx" < "$TMP/p.txt" > "$TMP/pre.want"
  "$BIN" lookup --prefix --limit 7 "$TMP/$K.idx" < "$TMP/p.txt" > "$TMP/pre7.want"
  [ "$(grep -c . "$TMP/look.want")" -gt 20000 ] || fail "$K: too few lookups"
  # --limit 0 lists every key under the prefix (the help says so), the
  # default 100 of them
  nkeys=$(sed -n 's/^keys: //p' "$TMP/info.want")
  [ "$(echo | "$BIN" lookup --prefix --limit 0 "$TMP/$K.idx" | grep -c .)" = "$nkeys" ] ||
    fail "$K: the empty prefix with --limit 0 does not list all $nkeys keys"
  [ "$(echo | "$BIN" lookup --prefix "$TMP/$K.idx" | grep -c .)" = 100 ] ||
    fail "$K: the empty prefix without --limit does not list 100 keys"
  grep -q "not found" "$TMP/look.want" || fail "$K: no misses among the queries"
  for L in "$K.ftm" "$K-5.ftm" "$K-b.ftm"; do
    "$BIN" info "$TMP/$L" > "$TMP/info.txt" || fail "$L: info"
    grep -E "$FIELDS" "$TMP/info.txt" | cmp - "$TMP/info.want" ||
      fail "$L: info differs from the index's: $(cat "$TMP/info.txt")"
    grep -q '^shard\.0: tokens 0\.\.' "$TMP/info.txt" || fail "$L: no shard.0 line"
    grep -q '^shard\.[0-9]*: tokens [0-9]*\.\.4294967295 ' "$TMP/info.txt" ||
      fail "$L: the last shard does not end at 4294967295"
    grep -q '^shard_balance: [0-9.]*$' "$TMP/info.txt" || fail "$L: no balance"
    "$BIN" lookup "$TMP/$L" < "$TMP/q.txt" | cmp - "$TMP/look.want" ||
      fail "$L: lookup differs from the index's"
    "$BIN" lookup --prefix --limit 0 "$TMP/$L" < "$TMP/p.txt" | cmp - "$TMP/pre.want" ||
      fail "$L: prefix lookup differs from the index's"
    "$BIN" lookup --prefix --limit 7 "$TMP/$L" < "$TMP/p.txt" | cmp - "$TMP/pre7.want" ||
      fail "$L: prefix lookup --limit 7 differs from the index's"
  done
  grep -q '^shards: 5$' <("$BIN" info "$TMP/$K-5.ftm") || fail "$K: not 5 shards"
  # a budget: every shard within it
  "$BIN" info "$TMP/$K-b.ftm" | awk '/^shard\.[0-9]+:/ { if ($9 > 40960) bad = 1; n++ }
    END { exit (bad || n < 2) }' || fail "$K: --shard-bytes 40K: $("$BIN" info "$TMP/$K-b.ftm")"
done

# the limits of top-level partitioning
F=$(grep '^root_fanout:' "$TMP/info.want" | cut -d' ' -f2)
N=$((F + 1))
"$BIN" split "$TMP/keys.idx" --shards $N --output "$TMP/x.ftm" 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "--shards $N: want exit 1"
echo "flashtrie split: the root has $F children (first tokens), fewer than the $N shards asked for: top-level partitioning cannot make more shards than first tokens" |
  cmp - "$TMP/err.txt" || fail "--shards $N: $(cat "$TMP/err.txt")"
"$BIN" split "$TMP/keys.idx" --shard-bytes 1K --output "$TMP/x.ftm" 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "--shard-bytes 1K: want exit 1"
grep -qE '^flashtrie split: first token [0-9]+: subtree of [0-9.]+ KB \([0-9]+ bytes\) exceeds --shard-bytes 1.0 KB \(1024 bytes\): top-level partitioning cannot split it$' \
  "$TMP/err.txt" || fail "--shard-bytes 1K: $(cat "$TMP/err.txt")"
"$BIN" build --input "$TMP/keys.txt" --output "$TMP/x.ftm" --shard-bytes 1K --quiet 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "build --shard-bytes 1K: want exit 1"
grep -q '^flashtrie build: first token' "$TMP/err.txt" || fail "build --shard-bytes 1K: $(cat "$TMP/err.txt")"
[ -z "$(ls "$TMP" | grep '^x\.ftm')" ] || fail "a failed split left files: $(ls "$TMP")"

# unusable arguments: 2
for args in "--shards 2" "$TMP/keys.idx --shards 2" "$TMP/keys.idx --output $TMP/x.ftm" \
            "$TMP/keys.idx --output $TMP/x.ftm --shards 2 --shard-bytes 1M" \
            "$TMP/keys.idx --output $TMP/x.ftm --shards 0" \
            "$TMP/keys.idx --output $TMP/x.ftm --shard-bytes 1X" \
            "$TMP/keys.idx $TMP/keys.idx --output $TMP/x.ftm --shards 2"; do
  "$BIN" split $args > /dev/null 2>&1
  [ $? -eq 2 ] || fail "split $args: want exit 2"
done
"$BIN" build --input "$TMP/keys.txt" --output "$TMP/x.ftm" --shards 2 --shard-bytes 1M \
  > /dev/null 2>&1
[ $? -eq 2 ] || fail "build --shards --shard-bytes: want exit 2"
# a manifest is not what split takes (2), and it is named as one
"$BIN" split "$TMP/keys.ftm" --shards 2 --output "$TMP/x.ftm" 2> "$TMP/err.txt"
[ $? -eq 2 ] || fail "split MANIFEST: want exit 2"
echo "flashtrie split: $TMP/keys.ftm is a shard manifest; split takes an unsharded index" |
  cmp - "$TMP/err.txt" || fail "split MANIFEST: $(cat "$TMP/err.txt")"
# anything else that is not an index: exit 1, the file and the reason
"$BIN" split "$TMP/keys.txt" --shards 2 --output "$TMP/x.ftm" 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "split KEYS: want exit 1"
echo "flashtrie split: $TMP/keys.txt: not a FlashTrie index (bad magic)" |
  cmp - "$TMP/err.txt" || fail "split KEYS: $(cat "$TMP/err.txt")"
[ -z "$(ls "$TMP" | grep '^x\.ftm')" ] || fail "a refused split left files: $(ls "$TMP")"

# progress through the logger
"$BIN" split "$TMP/keys.idx" --shards 2 --output "$TMP/p.ftm" --progress 2> "$TMP/err.txt" ||
  fail "split --progress"
grep -q 'split: shard 1 of 2: first tokens' "$TMP/err.txt" || fail "no progress: $(cat "$TMP/err.txt")"

# a split into another count over the same manifest removes the earlier
# split's shard files (the manifest naming them is replaced), saying so,
# and nothing else (they stayed behind before)
mkdir "$TMP/re"
"$BIN" split "$TMP/keys.idx" --shards 3 --output "$TMP/re/m.ftm" --quiet || fail "re: split 3"
touch "$TMP/re/m.ftm.shard-000-of-003.idx.bak" "$TMP/re/n.ftm.shard-000-of-003.idx"
"$BIN" split "$TMP/keys.idx" --shards 2 --output "$TMP/re/m.ftm" 2> "$TMP/err.txt" || fail "re: split 2"
[ "$(grep -c 'removed' "$TMP/err.txt")" -eq 3 ] || fail "re: $(cat "$TMP/err.txt")"
grep -qxF "flashtrie split: removed $TMP/re/m.ftm.shard-001-of-003.idx (shard 1 of an earlier split into 3)" "$TMP/err.txt" ||
  fail "re: $(cat "$TMP/err.txt")"
[ "$(cd "$TMP/re" && ls | sort | tr '\n' ' ')" = "m.ftm m.ftm.shard-000-of-002.idx m.ftm.shard-000-of-003.idx.bak m.ftm.shard-001-of-002.idx n.ftm.shard-000-of-003.idx " ] ||
  fail "re: left $(ls "$TMP/re")"
"$BIN" info "$TMP/re/m.ftm" > /dev/null || fail "re: the new manifest does not open"

# a missing shard: the manifest is refused, naming the shard
rm "$TMP/keys-5.ftm.shard-002-of-005.idx"
"$BIN" info "$TMP/keys-5.ftm" > /dev/null 2> "$TMP/err.txt"
[ $? -eq 1 ] || fail "missing shard: want exit 1"
echo "flashtrie: $TMP/keys-5.ftm: shard 2: $TMP/keys-5.ftm.shard-002-of-005.idx: cannot open: No such file or directory" |
  cmp - "$TMP/err.txt" || fail "missing shard: $(cat "$TMP/err.txt")"
echo "1" | "$BIN" lookup "$TMP/keys-5.ftm" > /dev/null 2>&1
[ $? -eq 1 ] || fail "lookup, missing shard: want exit 1"
echo "manifest_cli_test: ok"
