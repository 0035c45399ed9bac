#!/bin/sh
# bench_report_test.sh - 'flashtrie bench --report DIR/' on a tiny generated
# index: DIR/results.json is valid JSON with the report's keys, DIR/plots.gp
# is written, and where gnuplot is installed the PNGs are non-empty PNGs;
# without gnuplot on PATH the run warns, still writes the JSON and exits 0.
# A path ending in .json keeps the old single-file form.
#   usage: bench_report_test.sh FLASHTRIE
set -eu
FT=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# is_png FILE: non-empty and starting with the 8-byte PNG signature.
is_png() {
    [ -s "$1" ] || return 1
    [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
}

# check_json FILE: parses, and holds the report's top-level keys and one
# run per (engine, beam) with the latency and throughput fields.
check_json() {
    python3 - "$1" <<'PY' || fail "$1 is not the expected report"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("command", "machine", "index", "workload", "runs", "skipped", "ratios"):
    assert k in r, k
assert r["index"]["keys"] == 3000, r["index"]
assert r["machine"]["cores"] >= 1
runs = [x for x in r["runs"] if x["engine"] == "cpu"]
assert sorted(x["beam"] for x in runs) == [8, 16], runs
for x in runs:
    assert x["requests"] == 4
    assert set(x["latency_ms_b1"]) == {"mean", "p50", "p90", "p95", "p99"}
    assert list(x["throughput_qps"]) == ["1", "2"]
    assert all(v > 0 for v in x["throughput_qps"].values())
PY
}

$FT gen index --n 3000 --seed 5 --output "$D/t.fti"
BENCH="bench --index $D/t.fti --n-requests 4 --beam 8,16 --batch 1,2 --warmup 1 --engine cpu"

# A folder (named with a space and a quote: both must survive the script)
# that does not exist yet, marked by its trailing slash.
R="$D/rep o'k"
$FT $BENCH --report "$R/" > "$D/out" 2> "$D/err" || fail "bench --report DIR/ failed: $(cat "$D/err")"
check_json "$R/results.json"
[ -s "$R/plots.gp" ] || fail "no plots.gp"
grep -q "^if (!exists(\"dir\")) dir = '.*rep o''k'\$" "$R/plots.gp" || fail "the folder is not quoted in plots.gp"
if command -v gnuplot >/dev/null 2>&1; then
    for p in latency throughput; do
        is_png "$R/$p.png" || fail "$p.png is missing or not a PNG"
    done
    # CPU only, no --shards: no speed-up or shard plot.
    [ ! -e "$R/speedup.png" ] || fail "speedup.png without a GPU run"
    [ ! -e "$R/shards.png" ] || fail "shards.png without --shards"
    grep -q "^plots: " "$D/out" || fail "bench did not name its plots"
    # The script redraws the same files on its own.
    rm "$R/latency.png"
    gnuplot "$R/plots.gp" || fail "plots.gp does not redraw"
    is_png "$R/latency.png" || fail "plots.gp did not redraw latency.png"

    # An existing folder without the slash, and --shards: the shard plot.
    mkdir "$D/sh"
    $FT $BENCH --shards 2 --report "$D/sh" > /dev/null 2> "$D/err" || fail "bench --shards --report failed: $(cat "$D/err")"
    check_json "$D/sh/results.json"
    is_png "$D/sh/shards.png" || fail "shards.png is missing or not a PNG"
else
    echo "gnuplot not installed: PNGs not checked"
fi

# Without gnuplot: a warning, the JSON and the script, exit 0, no PNG.
PATH=/nonexistent "$FT" $BENCH --report "$D/nog/" > /dev/null 2> "$D/err" \
    || fail "bench without gnuplot exited non-zero"
grep -q "warning: gnuplot not found" "$D/err" || fail "no warning without gnuplot: $(cat "$D/err")"
check_json "$D/nog/results.json"
[ -s "$D/nog/plots.gp" ] || fail "no plots.gp without gnuplot"
ls "$D/nog" | grep -q '\.png$' && fail "PNGs without gnuplot"

# The old form: a .json path is the file itself.
$FT $BENCH --report "$D/old.json" > /dev/null
check_json "$D/old.json"

# A folder that cannot be made fails before the run, naming the path.
set +e
$FT $BENCH --report "$D/no/such/dir/" > /dev/null 2> "$D/err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "an unmakeable folder exited $rc, want 1"
grep -q "cannot make the folder $D/no/such/dir/" "$D/err" || fail "wrong message: $(cat "$D/err")"
echo ok
