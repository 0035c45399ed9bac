#!/usr/bin/env bash
# search_manifest_test.sh BIN - `flashtrie search --index MANIFEST` answers
# byte for byte as `flashtrie search --index INDEX` (docs/specification.md
# section 6), for 1, 2, 3, 5 and 8 shards, generated NAR-style requests with
# thresholds, batches of 1 and 32 and 1 or 2 threads.
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "search_manifest_test: $*" >&2; exit 1; }

"$BIN" gen index --n 20000 --seed 7 --output "$TMP/lib.idx" >/dev/null 2>&1 ||
    fail "gen index"
"$BIN" gen requests --index "$TMP/lib.idx" --n 40 --T 6 --K 60 --beam 40 \
    --seed 3 --output "$TMP/req1.jsonl" >/dev/null 2>&1 || fail "gen requests"
"$BIN" gen requests --index "$TMP/lib.idx" --n 20 --T 8 --K 200 --beam 150 \
    --results 30 --theta-tok -12 --theta-sent -60 --seed 4 \
    --output "$TMP/req2.jsonl" >/dev/null 2>&1 || fail "gen requests 2"
# a rejected line and a blank line ride along
cat "$TMP/req1.jsonl" "$TMP/req2.jsonl" > "$TMP/req.jsonl"
echo '{"tokens": [[1, 1]], "logp": [[-1, -2]]}' >> "$TMP/req.jsonl"
"$BIN" search --index "$TMP/lib.idx" --engine cpu < "$TMP/req.jsonl" \
    > "$TMP/want.jsonl" 2>/dev/null || fail "search on the index"
[ "$(wc -l < "$TMP/want.jsonl")" -eq 61 ] || fail "want 61 answer lines"
grep -q '"results": \[{' "$TMP/want.jsonl" || fail "no hits at all"

for n in 1 2 3 5 8; do
    "$BIN" split "$TMP/lib.idx" --shards $n --output "$TMP/m$n.ftm" --quiet \
        >/dev/null 2>&1 || fail "split into $n"
    for b in 1 32; do
        for th in 1 2; do
            "$BIN" search --index "$TMP/m$n.ftm" --engine cpu --batch $b \
                --threads $th < "$TMP/req.jsonl" > "$TMP/got.jsonl" \
                2>"$TMP/err.txt" || fail "search on $n shards: $(cat "$TMP/err.txt")"
            cmp -s "$TMP/want.jsonl" "$TMP/got.jsonl" ||
                fail "$n shards, batch $b, threads $th: answers differ"
        done
    done
done
# the daemon serves the manifest with engine = "shards" from a config file
# (a CPU shard group here): the same answers through flashtrie query
SOCK="$TMP/ft.sock"
cat > "$TMP/serve.conf" <<CONF
index = "$TMP/m5.ftm";
listeners = ( { url = "ipc://$SOCK"; } );
engine = "shards";
cpu_threads = 1;
CONF
"$BIN" serve --config "$TMP/serve.conf" 2> "$TMP/serve.log" &
SPID=$!
"$BIN" query --url "ipc://$SOCK" --ping --timeout-ms 20000 ||
    { kill $SPID; fail "server did not answer: $(tail -3 "$TMP/serve.log")"; }
"$BIN" query --url "ipc://$SOCK" --batch 8 < "$TMP/req.jsonl" > "$TMP/got.jsonl"
qrc=$?
kill -TERM $SPID
wait $SPID
src=$?
[ $src -eq 0 ] || fail "serve exited $src after SIGTERM"
# the one rejected request makes query exit 1; every line is still answered
[ $qrc -le 1 ] || fail "query exit $qrc"
cmp -s "$TMP/want.jsonl" "$TMP/got.jsonl" || fail "served manifest: answers differ"
grep -q "shard group of 5 cpu engines" "$TMP/serve.log" ||
    fail "serve did not say it runs a shard group: $(grep -i engine "$TMP/serve.log" | head -2)"
# a cluster of more ranks than shards is refused at start, saying why
# (clusters themselves: tests/daemon/cluster_test.c)
cat > "$TMP/cluster.conf" <<CONF
index = "$TMP/m5.ftm";
listeners = ( { url = "ipc://$TMP/c.sock"; } );
engine = "cpu";
cluster = { rank = 0; world = 9; coordinator = "ipc://$TMP/boot.sock"; };
CONF
"$BIN" serve --config "$TMP/cluster.conf" 2> "$TMP/cl.log"
crc=$?
[ $crc -eq 1 ] || fail "cluster config: exit $crc, want 1"
grep -q "cannot serve: cluster.world: 9 ranks for the 5 shards of $TMP/m5.ftm: every rank needs a shard" "$TMP/cl.log" ||
    fail "cluster refusal not named: $(tail -1 "$TMP/cl.log")"
# a manifest whose shard is gone is refused with exit 1 and a named error
rm -f "$TMP"/m2.ftm.shard-001-of-002.idx
"$BIN" search --index "$TMP/m2.ftm" < "$TMP/req.jsonl" > /dev/null 2>"$TMP/err.txt"
[ $? -eq 1 ] || fail "missing shard: want exit 1"
grep -q "shard 1" "$TMP/err.txt" || fail "missing shard not named: $(cat "$TMP/err.txt")"
echo "search_manifest_test: ok"
