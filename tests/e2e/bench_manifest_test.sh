#!/bin/sh
# bench_manifest_test.sh - request generation and bench over a manifest:
# gen requests gives the same bytes for 1, 2 and 5 threads, the bytes the
# serial sampler gave before it went parallel (md5 below), and the same
# bytes over a manifest of the index; bench --index MANIFEST runs its
# shards as a group whose answers (the results digest lines) equal the
# unsharded engine's and the in-process --shards group's on the same
# requests; bench --index MANIFEST --shards N is refused.
#   usage: bench_manifest_test.sh FLASHTRIE
set -eu
FT=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The serial sampler's output for this index and these options (the
# generator uses libm, so this holds on the platform CI runs on).
GOLD=57dd7d323bce9a60452144996b0ab46d
$FT gen index --n 3000 --seed 5 --output "$D/tiny.fti" 2>/dev/null
for t in 1 2 5; do
    $FT gen requests --index "$D/tiny.fti" --n 20 --beam 10 --seed 3 --threads $t \
        --output "$D/t$t.jsonl"
done
cmp "$D/t1.jsonl" "$D/t2.jsonl" || fail "gen requests differs between 1 and 2 threads"
cmp "$D/t1.jsonl" "$D/t5.jsonl" || fail "gen requests differs between 1 and 5 threads"
sum=$(md5sum < "$D/t1.jsonl" | cut -d' ' -f1)
[ "$sum" = "$GOLD" ] || fail "gen requests changed its output: md5 $sum, want $GOLD"

# A manifest of the same keys: the same requests.
$FT gen index --n 20000 --seed 2 --output "$D/g.fti" 2>/dev/null
$FT split "$D/g.fti" --output "$D/g.ftm" --shards 3 --quiet
$FT gen requests --index "$D/g.fti" --n 12 --beam 24 --seed 4 --output "$D/u.jsonl"
$FT gen requests --index "$D/g.ftm" --n 12 --beam 24 --seed 4 --threads 2 --output "$D/m.jsonl"
cmp "$D/u.jsonl" "$D/m.jsonl" || fail "gen requests over the manifest differs from the index"

# bench: the manifest's group answers like the unsharded engine.
B="--n-requests 12 --beam 16,48 --batch 1,3 --warmup 1 --engine cpu --threads 2"
$FT bench --index "$D/g.fti" $B --shards 3 > "$D/u.out"
$FT bench --index "$D/g.ftm" $B --report "$D/m.json" > "$D/m.out"
grep -q "manifest of 3 shards" "$D/m.out" || fail "bench did not see the manifest: $(cat "$D/m.out")"
grep -q '^cpu/s3 ' "$D/m.out" || fail "bench over the manifest has no cpu/s3 row"
grep -q '^cpu ' "$D/m.out" && fail "bench over the manifest ran an unsharded row"
for b in 16 48; do
    u=$(grep "^results cpu  *beam  *$b:" "$D/u.out" | awk '{print $NF}')
    s=$(grep "^results cpu/s3 beam  *$b:" "$D/u.out" | awk '{print $NF}')
    m=$(grep "^results cpu/s3 beam  *$b:" "$D/m.out" | awk '{print $NF}')
    [ -n "$u" ] && [ -n "$m" ] || fail "no results digest for beam $b"
    [ "$u" = "$m" ] || fail "beam $b: manifest group answers $m, unsharded $u"
    [ "$u" = "$s" ] || fail "beam $b: --shards group answers $s, unsharded $u"
    grep -q "\"results_fnv1a64\": \"$m\"" "$D/m.json" || fail "the report lacks digest $m"
done
# Different requests give a different digest (the digest sees answers).
$FT bench --index "$D/g.ftm" $B --seed 5 > "$D/m5.out"
a=$(grep "^results cpu/s3 beam  *16:" "$D/m.out" | awk '{print $NF}')
c=$(grep "^results cpu/s3 beam  *16:" "$D/m5.out" | awk '{print $NF}')
[ "$a" != "$c" ] || fail "the digest ignores the requests"

# --shards has nothing to split in a manifest.
set +e
$FT bench --index "$D/g.ftm" --shards 2 --engine cpu > /dev/null 2> "$D/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "bench --index MANIFEST --shards exited $rc, want 2"
grep -q "is a manifest of 3 shards already" "$D/err" || fail "wrong message: $(cat "$D/err")"
# Nor are replicas of a manifest's group.
set +e
$FT bench --index "$D/g.ftm" --replicas 2 --engine cpu > /dev/null 2> "$D/err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "bench --index MANIFEST --replicas 2 exited $rc, want 2"
grep -q -- "--replicas: .* is a manifest" "$D/err" || fail "wrong message: $(cat "$D/err")"
echo ok
