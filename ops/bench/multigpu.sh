#!/bin/bash
# multigpu.sh - issue 12 in one go on a host with several GPUs ("Runs on 2,
# 4 and 8 GPUs: NCCL shards across devices, measured"; docs/TESTING.md,
# "Running issue 12").  From the repository root, with a CUDA build:
#
#   ops/bench/multigpu.sh                 (FT_BUILD_DIR=./build)
#
# It counts the GPUs (nvidia-smi -L) and does what fits:
#   1. data: 100M seeded keys, the index (flashtrie gen keys / build, as in
#      docs/BENCHMARKS.md, "Workload and data sets") and request files at BW 100 and 1000
#      (gen requests --threads); kept in FT_WORK between runs;
#   2. tests: gpu_multi_test (one process, shards on several GPUs, NCCL
#      and device exchange; --quick unless FT_FULL=1), gpu_cluster_test.sh
#      (one serve per GPU, GPU ranks over NCCL), gpu_group_test --quick;
#   3. correctness on benchmark requests: flashtrie search --engine gpu
#      over the index and over an N-shard manifest against --engine cpu,
#      byte for byte (cmp);
#   4. capacity: the index split with --shard-bytes below one GPU's share
#      of its trie bytes (so no GPU holds the library), served by one serve
#      (engine "shards" over every GPU) and by a cluster (one serve per
#      GPU); flashtrie query against search --engine cpu (cmp), and each
#      GPU's memory in use while serving;
#   5. numbers: flashtrie bench, 1 GPU unsharded against N shards on N
#      GPUs (--shards 2,4,8 --devices 0..N-1: NCCL), mean/p99 at BW 100
#      and 1000 (b=1), throughput b=1..32, the results digests (equal:
#      equal answers), the per-step split (kernels, exchange, wait) of the
#      same groups with the device exchange (--exchange device --timing:
#      group.c times device copies only); then replicas against shards on
#      the same GPUs through serve: one replica per GPU (engine gpu,
#      devices 0..N-1), one shard group over the GPUs (engine shards) and
#      a cluster of N ranks, each timed by flashtrie query at b=1 and at
#      batch 32 with 16 frames in flight, answers compared with search.
#
# Every command is printed before it runs ("+ ..."), with its wall time;
# everything goes to FT_LOG (default $OUT/multigpu.log when OUT is set).
# Environment: FT_BUILD_DIR (./build), FT_WORK (/tmp/ft_mgpu), FT_N
# (100000000 keys), FT_R (200 requests per BW for latency), FT_RT (1000
# at BW 100, a fifth of it at BW 1000, for throughput through serve),
# FT_STEPS (default "data tests search capacity bench serve": any subset,
# to split the run over two device calls), FT_FULL=1 (the full
# gpu_multi_test), FT_MAX_GPUS (use at most this many).
# FT_DRY_CPU=N runs every step with CPU engines as if N GPUs were there (a
# check of this script on a machine without GPUs; its numbers mean nothing).
# NCCL_NVLS_ENABLE=0 always (NVLink multicast stays off).
# Exit 0 when every check passed, 1 with the first failure named.
set -u
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0
B=${FT_BUILD_DIR:-./build}
FT=$B/flashtrie
WORK=${FT_WORK:-/tmp/ft_mgpu}
N=${FT_N:-100000000}
R=${FT_R:-200}
RT=${FT_RT:-1000}
STEPS=${FT_STEPS:-data tests search capacity bench serve}
LOG=${FT_LOG:-${OUT:+$OUT/multigpu.log}}
if [ -n "$LOG" ]; then
  exec > >(tee -a "$LOG") 2>&1
fi
T0=$(date +%s)
say() { echo "multigpu: $*"; }
die() { say "FAILED: $*"; exit 1; }
step() { case " $STEPS " in *" $1 "*) echo; echo "### $1 ($(( $(date +%s) - T0 )) s in)"; return 0 ;; esac; return 1; }
# run CMD...: prints the command, runs it, prints its wall time; its status.
# (On stderr, so that a command's own output can be redirected alone.)
run() {
  echo "+ $*" >&2
  local t=$(date +%s.%N)
  "$@"
  local rc=$?
  printf '  (%.1f s, exit %d)\n' "$(since "$t")" $rc >&2
  return $rc
}
# since T: seconds from date +%s.%N's T to now; calc EXPR: awk arithmetic.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  PIDS=()
}
trap stop_all EXIT

# ---- the host ----
[ -x "$FT" ] || die "$FT is not built (cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release && cmake --build $B)"
[ -d .debs ] && [ -f ops/device-env.sh ] && . ops/device-env.sh
NGPU=0
command -v nvidia-smi > /dev/null && NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
EGPU=gpu ESHARDS=shards
[ -n "${FT_DRY_CPU:-}" ] && { NGPU=$FT_DRY_CPU EGPU=cpu ESHARDS=cpu; say "DRY RUN: CPU engines as $NGPU GPUs"; }
[ -n "${FT_MAX_GPUS:-}" ] && [ "$NGPU" -gt "$FT_MAX_GPUS" ] && NGPU=$FT_MAX_GPUS
[ "$NGPU" -ge 1 ] || die "no GPU found (nvidia-smi -L)"
# libnccl.so.2: the system's, else the one PyTorch's wheel brings.
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  d=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$d" ] && [ -e "$d/libnccl.so.2" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
NCCL=none
ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 ' && NCCL=system
IFS=: read -ra dirs <<< "${LD_LIBRARY_PATH:-}"
for d in "${dirs[@]}"; do [ -n "$d" ] && [ -e "$d/libnccl.so.2" ] && NCCL=$d/libnccl.so.2; done
CORES=$(nproc)
say "$(date -u +%FT%TZ), $NGPU GPUs, $CORES cores, libnccl.so.2: $NCCL, build $B ($(git log -1 --format=%h 2>/dev/null))"
nvidia-smi -L 2>/dev/null | sed 's/^/  /'
nvidia-smi topo -m 2>/dev/null | head -$((NGPU + 1)) | sed 's/^/  /'
# The shard counts that fit: 2, 4, 8 up to the GPUs, and the GPUs.
COUNTS=
for n in 2 4 8; do [ $n -le "$NGPU" ] && COUNTS="$COUNTS${COUNTS:+,}$n"; done
case ",$COUNTS," in *",$NGPU,"*) ;; *) [ "$NGPU" -ge 2 ] && COUNTS="$COUNTS${COUNTS:+,}$NGPU" ;; esac
DEVS=$(seq -s, 0 $((NGPU - 1)))
DEVL=$(seq -s', ' 0 $((NGPU - 1)))
say "shard counts: ${COUNTS:-none (1 GPU)}; devices $DEVS"
mkdir -p "$WORK" || die "cannot make $WORK"
IDX=$WORK/k.idx
FAILS=0
check() { if "$@"; then return 0; fi; FAILS=$((FAILS + 1)); say "CHECK FAILED: $*"; return 1; }

# ---- 1. data ----
if step data; then
  if [ ! -s "$IDX" ]; then
    run "$FT" gen keys --n "$N" --seed 1 --format ftk --output "$WORK/k.ftk" || die "gen keys"
    run "$FT" build --input "$WORK/k.ftk" --output "$IDX" --threads "$CORES" || die "build"
    rm -f "$WORK/k.ftk"
  else
    say "reusing $IDX"
  fi
  run "$FT" info "$IDX" | grep -E '^(keys|nodes|trie_bytes|root_fanout):'
  for bw in 100 1000; do
    [ -s "$WORK/r$bw.jsonl" ] && continue
    n=$RT; [ $bw = 1000 ] && n=$((RT / 5))
    run "$FT" gen requests --index "$IDX" --n "$n" --T 8 --beam $bw --K $bw --seed 1 \
      --threads "$CORES" --output "$WORK/r$bw.jsonl" || die "gen requests BW $bw"
    head -"$R" "$WORK/r$bw.jsonl" > "$WORK/s$bw.jsonl"
  done
fi
[ -s "$IDX" ] || die "no index at $IDX (run the data step)"
TRIE=$("$FT" info "$IDX" | sed -n 's/^trie_bytes: \([0-9]*\).*/\1/p')
[ -n "$TRIE" ] || die "flashtrie info $IDX gave no trie_bytes"
# want FILE: search --engine cpu over the unsharded index (kept).
want() {
  [ -s "$1.want" ] || run "$FT" search --index "$IDX" --engine cpu --threads "$CORES" \
    < "$1" > "$1.want" || die "search --engine cpu < $1"
}

# ---- 2. tests ----
if step tests; then
  q=--quick; [ -n "${FT_FULL:-}" ] && q=
  run "$B/gpu_multi_test" $q; rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || check false "gpu_multi_test exit $rc"
  run bash tests/gpu/gpu_cluster_test.sh "$FT" ${FT_DRY_CPU:+--cpu}; rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || check false "gpu_cluster_test.sh exit $rc"
  run "$B/gpu_group_test" --quick; rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || check false "gpu_group_test exit $rc"
fi

# ---- 3. benchmark requests: GPU over the index and a manifest ----
if step search; then
  for bw in 100 1000; do
    want "$WORK/s$bw.jsonl"
    run "$FT" search --index "$IDX" --engine $EGPU < "$WORK/s$bw.jsonl" > "$WORK/got.jsonl"
    check cmp "$WORK/got.jsonl" "$WORK/s$bw.jsonl.want" &&
      say "BW $bw: search --engine gpu = --engine cpu on $R requests"
    for n in ${COUNTS//,/ }; do
      [ -s "$WORK/m$n.ftm" ] || run "$FT" split "$IDX" --shards "$n" --output "$WORK/m$n.ftm" \
        --threads "$CORES" --quiet > /dev/null || die "split --shards $n"
      run "$FT" search --index "$WORK/m$n.ftm" --engine $EGPU < "$WORK/s$bw.jsonl" > "$WORK/got.jsonl"
      check cmp "$WORK/got.jsonl" "$WORK/s$bw.jsonl.want" &&
        say "BW $bw: search --engine gpu over $n shards (one GPU) = --engine cpu unsharded"
    done
  done
fi

# serve_conf NAME INDEX ENGINE DEVICES [REPLICAS [RANK WORLD]]: WORK/NAME.conf.
serve_conf() {
  {
    echo "index = \"$2\";"
    [ "${6:-0}" -eq 0 ] && echo "listeners = ( { url = \"ipc://$WORK/srv.sock\"; } );"
    echo "engine = \"$3\";"
    echo "devices = [ $4 ];"
    echo "replicas = ${5:-1};"
    echo "max_batch = 32;"
    echo "max_wait_us = 200;"
    [ -n "${7:-}" ] && echo "cluster = { rank = $6; world = $7; coordinator = \"ipc://$WORK/boot.sock\"; join_timeout_ms = 300000; step_timeout_ms = 60000; };"
  } > "$WORK/$1.conf"
}
URL=ipc://$WORK/srv.sock
# serve_start NAME: one serve on WORK/NAME.conf; serve_cluster MANIFEST W:
# W ranks, rank r on GPU r.  Both wait for rank 0's ping.
serve_start() {
  echo "+ $FT serve --config $WORK/$1.conf   # $(tr '\n' ' ' < "$WORK/$1.conf")"
  "$FT" serve --config "$WORK/$1.conf" 2> "$WORK/$1.log" &
  PIDS=($!)
  "$FT" query --url "$URL" --ping --timeout-ms 600000 || { tail "$WORK/$1.log"; die "serve $1 did not start"; }
}
serve_cluster() {
  PIDS=()
  for ((r = $2 - 1; r >= 0; r--)); do
    serve_conf "cl$r" "$1" $EGPU "$r" 1 "$r" "$2"
    "$FT" serve --config "$WORK/cl$r.conf" 2> "$WORK/cl$r.log" &
    PIDS+=($!)
  done
  echo "+ $2 x $FT serve --config $WORK/clR.conf   # $(tr '\n' ' ' < "$WORK/cl0.conf")"
  "$FT" query --url "$URL" --ping --timeout-ms 600000 || { tail "$WORK"/cl*.log; die "cluster over $1 did not start"; }
  grep -h "session started" "$WORK/cl0.log" | sed 's/^/  /'
}
gpu_mem() {
  nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader 2>/dev/null |
    head -"$NGPU" | sed 's/^/  GPU /'
}
# query_check FILE [LABEL]: query at batch 32 against search (cmp).
query_check() {
  want "$1"
  run "$FT" query --url "$URL" --batch 32 --concurrency 8 --timeout-ms 600000 < "$1" > "$WORK/got.jsonl"
  check cmp "$WORK/got.jsonl" "$1.want" && say "${2:-}: query = search --engine cpu on $(wc -l < "$1") requests ($(basename "$1"))"
}

# ---- 4. capacity: shards no single GPU could be asked to hold ----
if step capacity && { [ "$NGPU" -ge 2 ] || { say "capacity: skipped (1 GPU)"; false; }; }; then
  SB=$((TRIE / NGPU * 9 / 10))
  say "trie bytes $TRIE; one GPU's share $((TRIE / NGPU)); --shard-bytes $SB"
  if [ ! -s "$WORK/cap.ftm" ]; then
    # One first token's subtree larger than the budget is refused
    # (FT_ELIMIT, docs/sharding.md); then twice as many shards as GPUs.
    if ! run "$FT" split "$IDX" --shard-bytes "$SB" --output "$WORK/cap.ftm" \
         --threads "$CORES" --quiet > /dev/null; then
      SB=
      run "$FT" split "$IDX" --shards $((2 * NGPU)) --output "$WORK/cap.ftm" \
        --threads "$CORES" --quiet > /dev/null || die "split --shards $((2 * NGPU))"
    fi
  fi
  "$FT" info "$WORK/cap.ftm" > "$WORK/cap.info"
  grep -E '^(shards|trie_bytes|shard_trie_bytes_max|shard_trie_bytes_mean|shard_balance):' "$WORK/cap.info" | sed 's/^/  /'
  S=$(grep -c '^shard\.[0-9]*:' "$WORK/cap.info")
  MAX=$(sed -n 's/^shard_trie_bytes_max: \([0-9]*\).*/\1/p' "$WORK/cap.info")
  [ -z "$SB" ] || check [ "$MAX" -le "$SB" ]
  check [ "$S" -gt "$NGPU" ] && say "capacity: $S shards, the largest $MAX trie bytes (library $TRIE)"
  # What each GPU is given: engine "shards" puts shard i on GPU i % N, a
  # cluster gives rank r the block [r*S/N, (r+1)*S/N); each sum must be
  # below the library's trie bytes.
  for how in spread block; do
    sed -n 's/^shard\.\([0-9]*\):.* trie_bytes \([0-9]*\) .*/\1 \2/p' "$WORK/cap.info" |
      awk -v n="$NGPU" -v s="$S" -v how=$how -v all="$TRIE" '
        { g = $1 % n
          if (how == "block")
            for (r = 0; r < n; r++) if (int(r * s / n) <= $1 && $1 < int((r + 1) * s / n)) g = r
          b[g] += $2 }
        END { bad = 0; line = "";
              for (g = 0; g < n; g++) { line = line sprintf(" GPU%d %d", g, b[g]); if (b[g] >= all) bad = 1 }
              print "  trie bytes per GPU (" how "):" line; exit bad }' ||
      check false "a GPU holds the whole library ($how)"
  done
  serve_conf cap "$WORK/cap.ftm" $ESHARDS "$DEVL"
  serve_start cap
  gpu_mem
  for bw in 100 1000; do query_check "$WORK/s$bw.jsonl" "capacity, one serve, shards over $NGPU GPUs, BW $bw"; done
  "$FT" query --url "$URL" --info | grep -E '^(shards|replicas|engine\.0)' | sed 's/^/  /'
  stop_all
  serve_cluster "$WORK/cap.ftm" "$NGPU"
  gpu_mem
  for bw in 100 1000; do query_check "$WORK/s$bw.jsonl" "capacity, cluster of $NGPU ranks, BW $bw"; done
  stop_all
fi

# ---- 5a. bench: 1 GPU unsharded against N shards on N GPUs ----
if step bench; then
  nb=$COUNTS
  args=()
  [ -n "$nb" ] && args=(--shards "$nb" --devices "$DEVS")
  run "$FT" bench --index "$IDX" --n-requests "$R" --T 8 --beam 100,1000 --engine $EGPU \
    --batch 1,4,8,16,32 --threads "$CORES" "${args[@]}" --report "$WORK/bench.json" | tee "$WORK/bench.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || check false "bench (NCCL shards)"
  for bw in 100 1000; do
    d=$(grep -E "^results .* beam +$bw:" "$WORK/bench.txt" | awk '{print $NF}' | sort -u | wc -l)
    check [ "$d" -eq 1 ] && say "BW $bw: every row's results digest is the same ($(grep -cE "^results .* beam +$bw:" "$WORK/bench.txt") rows)"
  done
  if [ -n "$nb" ]; then
    # the per-step split: group.c times the device exchange (copies)
    run "$FT" bench --index "$IDX" --n-requests "$R" --T 8 --beam 100,1000 --engine $EGPU \
      --batch 1,32 --threads "$CORES" --shards "$nb" --devices "$DEVS" --exchange device \
      --copy-lists --timing --report "$WORK/bench_dev.json" | tee "$WORK/bench_dev.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || check false "bench (device exchange, timing)"
  fi
fi

# ---- 5b. replicas against shards on the same GPUs, through serve ----
# tput FILE LABEL: b=1 one at a time (mean latency through the daemon) and
# batch 32 with 16 frames in flight (throughput); answers against search.
tput() {
  local n t
  n=$(wc -l < "$1")
  want "$1"
  head -"$R" "$1" > "$WORK/lat.jsonl"
  echo "+ $FT query --url $URL --batch 1 --concurrency 1 < $WORK/lat.jsonl   # $R requests"
  t=$(date +%s.%N)
  "$FT" query --url "$URL" --batch 1 --concurrency 1 --timeout-ms 600000 < "$WORK/lat.jsonl" > "$WORK/got1.jsonl"
  t=$(since "$t")
  say "$2: b=1 through serve, $R requests one at a time: mean $(calc %.3f "$t * 1000 / $R") ms"
  echo "+ $FT query --url $URL --batch 32 --concurrency 16 < $1"
  t=$(date +%s.%N)
  "$FT" query --url "$URL" --batch 32 --concurrency 16 --timeout-ms 600000 < "$1" > "$WORK/got.jsonl"
  t=$(since "$t")
  say "$2: batch 32 x 16 in flight, $n requests in $t s: $(calc %.0f "$n / $t") q/s"
  check cmp "$WORK/got.jsonl" "$1.want"
}
if step serve && { [ "$NGPU" -ge 2 ] || { say "serve: skipped (1 GPU)"; false; }; }; then
  [ -s "$WORK/m$NGPU.ftm" ] || run "$FT" split "$IDX" --shards "$NGPU" --output "$WORK/m$NGPU.ftm" \
    --threads "$CORES" --quiet > /dev/null || die "split --shards $NGPU"
  for bw in 100 1000; do
    serve_conf one "$IDX" $EGPU 0
    serve_start one
    tput "$WORK/r$bw.jsonl" "BW $bw, 1 GPU unsharded"
    stop_all
    serve_conf rep "$IDX" $EGPU "$DEVL"
    serve_start rep
    tput "$WORK/r$bw.jsonl" "BW $bw, $NGPU replicas (one per GPU)"
    stop_all
    serve_conf shd "$WORK/m$NGPU.ftm" $ESHARDS "$DEVL"
    serve_start shd
    tput "$WORK/r$bw.jsonl" "BW $bw, $NGPU shards over $NGPU GPUs (one process)"
    stop_all
    serve_cluster "$WORK/m$NGPU.ftm" "$NGPU"
    tput "$WORK/r$bw.jsonl" "BW $bw, cluster of $NGPU ranks (one serve per GPU, NCCL)"
    stop_all
  done
fi

[ -n "${OUT:-}" ] && [ -d "$OUT" ] && for f in bench.json bench_dev.json; do
  [ -s "$WORK/$f" ] && cp "$WORK/$f" "$OUT/$f"
done
echo
say "done in $(( $(date +%s) - T0 )) s, $FAILS failed check(s)${LOG:+; log $LOG}"
[ "$FAILS" -eq 0 ]
