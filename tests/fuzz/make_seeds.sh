#!/bin/bash
# make_seeds.sh - writes the binary seeds of the index, index_noverify and
# manifest fuzz targets with the flashtrie program: real small indexes
# (one with tokens past 2^16 and values, one of a single key) and a
# two-shard library packed in fuzz_manifest.c's input format (u8 name
# length, name, u32 LE length, data; the manifest first).  Run it again
# when the index or manifest format changes, and commit the result.
#   usage: tests/fuzz/make_seeds.sh FLASHTRIE
set -eu
BIN=$1
C=$(cd "$(dirname "$0")" && pwd)/corpus
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '1\t5\n1 2\t6\n1 2 3\t7\n1 70000\t8\n9 4294967295\t9\n70000 1 2 3 4\t10\n' > "$TMP/a.txt"
printf '42\n' > "$TMP/b.txt"
"$BIN" build --input "$TMP/a.txt" --output "$TMP/a.idx" --quiet
"$BIN" build --input "$TMP/b.txt" --output "$TMP/b.idx" --quiet
mkdir -p "$C/index" "$C/index_noverify" "$C/manifest"
rm -f "$C/index/short.bin"
for d in index index_noverify; do
  cp "$TMP/a.idx" "$C/$d/small.idx"
  cp "$TMP/b.idx" "$C/$d/one.idx"
done
head -c 12 "$TMP/a.idx" > "$C/index/short.bin"

# pack FILE NAME...: the fuzz_manifest input of the manifest FILE (first)
# and the shard files beside it, under their own names.
u32le() { local n=$1; printf "\\$(printf %03o $((n & 255)))\\$(printf %03o $((n >> 8 & 255)))\\$(printf %03o $((n >> 16 & 255)))\\$(printf %03o $((n >> 24 & 255)))"; }
pack() {
  local first=1
  for f in "$@"; do
    local name=m
    [ $first = 1 ] || name=$(basename "$f")
    first=0
    printf "\\$(printf %03o ${#name})"
    printf '%s' "$name"
    u32le "$(stat -c %s "$f")"
    cat "$f"
  done
}
"$BIN" split "$TMP/a.idx" --output "$TMP/m" --shards 2 > /dev/null 2>&1
pack "$TMP/m" "$TMP"/m.shard-*.idx > "$C/manifest/two_shards.bin"
"$BIN" split "$TMP/a.idx" --output "$TMP/s" --shards 1 > /dev/null 2>&1
# the one-shard manifest is renamed m: its shard keeps the name s.shard-...
pack "$TMP/s" "$TMP"/s.shard-*.idx > "$C/manifest/one_shard.bin"
ls -l "$C/index" "$C/index_noverify" "$C/manifest"
