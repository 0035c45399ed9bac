#!/bin/sh
# bench_cli_test.sh - the generator and benchmark commands end to end:
# argument errors exit 2; gen keys is thread-proof and round-trips through
# the builder ('flashtrie build' when present, with the values the keys
# file implies); with libmarisa, the MARISA-Int baseline answers generated
# requests byte for byte like the CPU engine.
#   usage: bench_cli_test.sh FLASHTRIE [FT_MARISA_BENCH]
set -eu
FT=$1
MB=${2:-}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Bad arguments: exit 2 with a message naming the option.
for args in "gen keys" "gen keys --n x" "gen keys --n 10 --format xml" \
            "gen requests --n 5" "gen nothing" "bench" "bench --index a --keys b" \
            "bench --gen-keys 10 --beam 0" "bench --gen-keys 10 --engine tpu" \
            "bench --gen-keys 10 --replicas 0" "bench --gen-keys 10 --replicas 9" \
            "bench --gen-keys 10 --replicas x" "bench --gen-keys 10 --launch fast"; do
    set +e
    $FT $args >/dev/null 2>"$D/err"
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "'flashtrie $args' exited $rc, want 2"
    [ -s "$D/err" ] || fail "'flashtrie $args' printed no message"
done

# refused WANT_RC MESSAGE CMD...: CMD exits WANT_RC with exactly MESSAGE
# on stderr
refused() {
    local want=$1 msg=$2 rc; shift 2
    set +e
    "$@" >/dev/null 2>"$D/err"
    rc=$?
    set -e
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, want $want"
    grep -qxF "$msg" "$D/err" || fail "'$*': $(cat "$D/err")"
}

# --engine with no engine in it ran nothing and exited 0; a list option
# longer than its buffer was cut short (the last value changed silently).
for e in "" "," "cpu,,tpu" "cpu$(printf '%070d' 0 | tr 0 ,)tpu" "cpu," ",gpu" "cpu,,gpu"; do
    refused 2 "flashtrie bench: --engine: expected cpu, gpu or cpu,gpu, got '$e'" \
        $FT bench --gen-keys 10 --engine "$e"
done
refused 2 "flashtrie bench: --beam: list longer than 255 characters" \
    $FT bench --gen-keys 10 --engine cpu --beam "1,$(printf '%0250d' 0)1000"

# An empty item in a number list was skipped ("10,,20" ran 10 and 20).
for l in "10,,20" "10," ",10"; do
    refused 2 "flashtrie bench: --beam: an empty item in '$l'" \
        $FT bench --gen-keys 10 --engine cpu --beam "$l"
done

# A vocabulary too small for the keys asked for is said so (it was "out
# of memory"), as is one too small for the count outright.
for a in "5 3" "100000000 3"; do
    refused 1 "flashtrie gen keys: a vocabulary of ${a#* } tokens is too small for ${a% *} distinct keys; give a larger --vocab" \
        $FT gen keys --n ${a% *} --vocab ${a#* } --output "$D/v.txt"
    # a failed run leaves no partial file under the name (it left the keys
    # written before the failure), nor one written aside
    [ ! -e "$D/v.txt" ] || fail "'gen keys --n ${a% *} --vocab ${a#* }' left $D/v.txt"
done
# ... and a file that was there stays as it was
echo "kept" > "$D/v.txt"
set +e
$FT gen keys --n 100000 --vocab 3 --output "$D/v.txt" 2>/dev/null
rc=$?
set -e
[ $rc -eq 1 ] && [ "$(cat "$D/v.txt")" = kept ] || fail "a failed gen keys changed the file there (exit $rc)"
ls "$D" | grep -q '\.tmp\.' && fail "a failed gen keys left $(ls "$D" | grep '\.tmp\.')"

# Determinism: same seed, any threads, same bytes; another seed differs.
$FT gen keys --n 120000 --seed 11 --threads 1 --output "$D/a.txt"
$FT gen keys --n 120000 --seed 11 --threads 2 > "$D/b.txt"
cmp "$D/a.txt" "$D/b.txt" || fail "gen keys differs with the thread count"
$FT gen keys --n 120000 --seed 12 --output "$D/c.txt"
cmp -s "$D/a.txt" "$D/c.txt" && fail "gen keys ignores the seed"
[ "$(wc -l < "$D/a.txt")" -eq 120000 ] || fail "gen keys wrote the wrong count"
$FT gen keys --n 120000 --seed 11 --output "$D/a.ftk"

# The index: 'gen index' always; 'flashtrie build' where it exists, and
# then both must agree (same keys, nodes and values).
$FT gen index --n 120000 --seed 11 --output "$D/g.fti"
IDX="$D/g.fti"
if $FT build --help >/dev/null 2>&1; then
    $FT build --input "$D/a.txt" --output "$D/t.fti" >/dev/null
    $FT build --input "$D/a.ftk" --output "$D/f.fti" >/dev/null
    for x in t f; do
        $FT info "$D/$x.fti" | grep -E '^(keys|nodes|root_fanout|trie_bytes):' > "$D/$x.info"
    done
    $FT info "$D/g.fti" | grep -E '^(keys|nodes|root_fanout|trie_bytes):' > "$D/g.info"
    cmp "$D/g.info" "$D/t.info" || fail "built index (text) differs from gen index"
    cmp "$D/g.info" "$D/f.info" || fail "built index (ftk) differs from gen index"
    sed -n '1p;500p;77777p' "$D/a.txt" > "$D/probe"
    $FT lookup "$D/t.fti" < "$D/probe" > "$D/v1"
    printf '0\n499\n77776\n' > "$D/want"
    cmp "$D/v1" "$D/want" || fail "values of the built index are not line numbers"
    IDX="$D/t.fti"
fi

# Requests: the generated grids pass the validator (search answers them all).
$FT gen requests --index "$IDX" --n 6 --beam 40 --K 120 --head 12 --seed 2 > "$D/r1.jsonl"
$FT gen requests --index "$IDX" --n 6 --beam 40 --K 120 --head 12 --seed 2 > "$D/r1b.jsonl"
cmp "$D/r1.jsonl" "$D/r1b.jsonl" || fail "gen requests is not deterministic"
$FT gen requests --index "$IDX" --n 6 --beam 64 --K 64 --head 0 --seed 3 --alpha 0.5 \
    --theta-tok -7 --theta-sent -25 --results 17 >> "$D/r1.jsonl"
$FT search --index "$IDX" --engine cpu < "$D/r1.jsonl" > "$D/ours.jsonl"
grep -q '"error"' "$D/ours.jsonl" && fail "a generated request was rejected"
[ "$(wc -l < "$D/ours.jsonl")" -eq 12 ] || fail "search answered the wrong count"

# bench runs end to end on a tiny case and writes its report.
$FT bench --index "$IDX" --n-requests 5 --beam 20,40 --batch 1,4 --warmup 1 \
    --engine cpu,gpu --report "$D/rep.json" > "$D/bench.out"
grep -q '"throughput_qps"' "$D/rep.json" || fail "bench report lacks throughput"
grep -q '"cpu_model"' "$D/rep.json" || fail "bench report lacks machine info"
# where no GPU answers, the skip line names the reason once
if grep -q '^gpu engine: skipped' "$D/bench.out"; then
    grep -qE '^gpu engine: skipped \((no usable GPU|not supported)[:)]' "$D/bench.out" &&
        ! grep -q 'no usable GPU: no usable GPU' "$D/bench.out" ||
        fail "skip line: $(grep '^gpu engine' "$D/bench.out")"
fi
$FT bench --index "$IDX" --requests "$D/r1.jsonl" --batch 1,2 --warmup 0 --engine cpu \
    > "$D/bench2.out" || fail "bench --requests failed"

# --replicas: the row runs two engines (row cpu/r2), its b=1 answers the
# same as one engine's (equal digests).
$FT bench --index "$IDX" --requests "$D/r1.jsonl" --batch 1,4 --warmup 0 --engine cpu \
    --threads 1 --replicas 2 > "$D/bench3.out" || fail "bench --replicas failed"
grep -q '^cpu/r2 ' "$D/bench3.out" || fail "bench --replicas: no cpu/r2 row"
d1=$(grep '^results' "$D/bench2.out" | awk '{print $NF}' | sort | tr '\n' ' ')
d2=$(grep '^results' "$D/bench3.out" | awk '{print $NF}' | sort | tr '\n' ' ')
[ -n "$d1" ] && [ "$d1" = "$d2" ] || fail "bench --replicas: digests '$d2', want '$d1'"
# refused ARGS MESSAGE: flashtrie ARGS exits 2 with MESSAGE on stderr.
refused() {
    rc=0
    $FT $1 2>"$D/err" || rc=$?
    [ "$rc" = 2 ] || fail "$1: exit $rc, want 2"
    grep -q -- "$2" "$D/err" || fail "$1: message '$(cat "$D/err")'"
}
refused "bench --gen-keys 10 --replicas 9" "--replicas: at most 8, got 9"
refused "bench --gen-keys 10 --launch fast" "--launch: expected graph or plain, got 'fast'"
refused "bench --gen-keys 10 --select-local 70000" \
    "^flashtrie bench: --select-local: expected an integer in 1..65536, got '70000'"
refused "bench --gen-keys 10 --prefetch maybe" "--prefetch: expected on or off, got 'maybe'"
refused "bench --gen-keys 10 --round1-items 0" \
    "^flashtrie bench: --round1-items: expected an integer in 1..16777216, got '0'"
refused "bench --gen-keys 10 --select-local-cache 0" \
    "^flashtrie bench: --select-local-cache: expected an integer in 1..65536, got '0'"
refused "gen requests --index $IDX --T 0" \
    "^flashtrie gen requests: --T: expected an integer in 1..64, got '0'"
refused "gen requests --index $IDX --alpha 11" \
    "^flashtrie gen requests: --alpha: bad value '11'"
refused "gen keys --n 3 --threads 999" \
    "^flashtrie gen keys: --threads: expected an integer in 0..256, got '999'"

# MARISA-Int answers exactly like the CPU engine.
if [ -n "$MB" ]; then
    "$MB" search --keys "$D/a.txt" --requests "$D/r1.jsonl" --output "$D/marisa.jsonl" > /dev/null
    cmp "$D/ours.jsonl" "$D/marisa.jsonl" || fail "MARISA-Int results differ from the CPU engine"
fi
echo ok
