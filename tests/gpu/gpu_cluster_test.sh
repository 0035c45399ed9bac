#!/bin/bash
# gpu_cluster_test.sh - multi-process shard groups on GPUs (issue 12, run
# mode (b): one "flashtrie serve" per GPU, GPU ranks exchanging through
# NCCL, router/cluster_nccl.c, the unique id handed out over nng):
#   - for world 2 over 3 shards, and world W over W shards for W = 2, 4
#     and 8 where that many GPUs are found: rank r on GPU r (engine gpu,
#     devices = [r]), bootstrapped over ipc://; "flashtrie query" through
#     rank 0 at batch 1 and 32 answers byte for byte what "flashtrie
#     search --index INDEX --engine cpu" answers on the unsharded index
#     (generated requests plus lines search rejects); INFO names the GPU
#     cluster;
#   - rank 1 killed (SIGKILL) while idle: the next requests get exactly
#     {"id": I, "error": "cluster: rank 1: the connection was lost"}, and rank 0
#     still exits 0 on SIGTERM;
#   - SIGTERM on rank 0 of a whole cluster: every rank exits 0.
# usage: gpu_cluster_test.sh FLASHTRIE [--cpu]
#   --cpu runs the same cases with CPU ranks (engine cpu), which checks the
#   script's plumbing on a machine without GPUs.
# Exits 77 (with a SKIP line) with fewer than 2 GPUs or without
# libnccl.so.2.  Everything listens on ipc:// in a temporary folder;
# FT_KEEP=1 keeps it.  NCCL_NVLS_ENABLE=0 always (NVLink multicast off).
set -u
BIN=$1
MODE=${2:-gpu}
export NCCL_NVLS_ENABLE=0
TMP=$(mktemp -d /tmp/ft_gpu_cluster_XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  [ -n "${FT_KEEP:-}" ] && echo "gpu_cluster_test: kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "gpu_cluster_test: $*" >&2
  for f in "$TMP"/log*; do [ -f "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
  exit 1
}

if [ "$MODE" = --cpu ]; then
  ENGINE=cpu NGPU=8
else
  ENGINE=gpu
  command -v nvidia-smi > /dev/null || { echo "SKIP: no nvidia-smi (no GPU driver)"; exit 77; }
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  [ "$NGPU" -ge 2 ] || { echo "SKIP: $NGPU GPU(s) found; GPU clusters need 2 or more"; exit 77; }
  found=0
  ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 ' && found=1
  IFS=: read -ra dirs <<< "${LD_LIBRARY_PATH:-}"
  for d in "${dirs[@]}"; do [ -n "$d" ] && [ -e "$d/libnccl.so.2" ] && found=1; done
  [ $found -eq 1 ] || { echo "SKIP: libnccl.so.2 not found (ldconfig, LD_LIBRARY_PATH)"; exit 77; }
fi
URL="ipc://$TMP/c.sock"

"$BIN" gen keys --n 20000 --seed 5 --output "$TMP/k.keys" 2> /dev/null || fail "gen keys"
"$BIN" build --input "$TMP/k.keys" --output "$TMP/lib.idx" > /dev/null || fail "build"
"$BIN" gen requests --index "$TMP/lib.idx" --n 200 --beam 20 --results 7 --seed 9 \
  > "$TMP/req.jsonl" 2> /dev/null || fail "gen requests"
"$BIN" gen requests --index "$TMP/lib.idx" --n 20 --beam 300 --K 64 --results 50 --seed 11 \
  >> "$TMP/req.jsonl" 2> /dev/null || fail "gen requests (beam 300)"
# Lines search rejects: the error lines are compared too.
printf '{"tokens": [[1]]}\n{"tokens": [[1,1]], "logp": [[-1,-2]]}\nnot json\n' >> "$TMP/req.jsonl"
"$BIN" search --index "$TMP/lib.idx" --engine cpu < "$TMP/req.jsonl" > "$TMP/want.jsonl" ||
  fail "search (cpu, unsharded)"
if [ $ENGINE = gpu ]; then
  # A build without CUDA, or a driver the runtime cannot use, has no GPU
  # engine: skipped as the C GPU tests skip.
  head -1 "$TMP/req.jsonl" | "$BIN" search --index "$TMP/lib.idx" --engine gpu \
    > /dev/null 2> "$TMP/probe.err" ||
    { echo "SKIP: no usable GPU engine ($(tail -1 "$TMP/probe.err"))"; exit 77; }
fi

# conf R W MANIFEST: the config of rank R of a world of W.
conf() {
  local f=$TMP/r$1.conf
  {
    echo "index = \"$TMP/$3\";"
    [ "$1" -eq 0 ] && echo "listeners = ( { url = \"$URL\"; } );"
    echo "engine = \"$ENGINE\";"
    [ $ENGINE = gpu ] && echo "devices = [ $1 ];" || echo "cpu_threads = 1;"
    echo "max_batch = 16;"
    echo "max_wait_us = 2000;"
    echo "cluster = { rank = $1; world = $2; coordinator = \"ipc://$TMP/boot.sock\";"
    echo "            join_timeout_ms = 120000; step_timeout_ms = 30000; };"
  } > "$f"
}

# start W MANIFEST: starts ranks W-1..0, waits for rank 0's ping.
start() {
  PIDS=()
  for ((r = $1 - 1; r >= 0; r--)); do
    conf $r "$1" "$2"
    "$BIN" serve --config "$TMP/r$r.conf" 2> "$TMP/log$r" &
    PIDS[$r]=$!
  done
  "$BIN" query --url "$URL" --ping --timeout-ms 120000 ||
    fail "world $1 over $2: rank 0 did not answer a ping"
}

# wait_exit R LIMIT_S: waits for rank R to exit; its status in WRC (not
# in a subshell: only this shell can wait for its children).
wait_exit() {
  local p=${PIDS[$1]}
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$p" 2>/dev/null && fail "rank $1 did not exit within $2 s"
  wait "$p"
  WRC=$?
  PIDS[$1]=
}

# check W MANIFEST: the answers at batch 1 and 32 equal search's.
check() {
  for b in 1 32; do
    "$BIN" query --url "$URL" --batch $b --concurrency 4 --timeout-ms 60000 \
      < "$TMP/req.jsonl" > "$TMP/got.jsonl"
    rc=$?
    cmp -s "$TMP/got.jsonl" "$TMP/want.jsonl" ||
      { diff "$TMP/got.jsonl" "$TMP/want.jsonl" | head -6 >&2;
        fail "world $1 over $2 ($ENGINE ranks), batch $b: query (exit $rc) differs from search"; }
  done
  "$BIN" query --url "$URL" --info > "$TMP/info" || fail "world $1: --info"
  grep -q "$ENGINE: cluster rank 0 of $1" "$TMP/info" ||
    fail "world $1: INFO does not say '$ENGINE: cluster rank 0 of $1'"
  local x=nng
  [ $ENGINE = gpu ] && x=nccl
  grep -q "session started: cluster of $1 ranks .*, $ENGINE engines, $x transport" "$TMP/log0" ||
    fail "world $1: rank 0's log lacks '$ENGINE engines, $x transport'"
  echo "gpu_cluster_test: world $1 over $2 ($ENGINE ranks): $(wc -l < "$TMP/want.jsonl") answers equal to search at batch 1 and 32"
}

runs=0
for spec in 2:3 2:2 4:4 8:8; do
  W=${spec%%:*} S=${spec#*:}
  [ "$W" -le "$NGPU" ] || { echo "gpu_cluster_test: world $W skipped: $NGPU GPUs"; continue; }
  "$BIN" split "$TMP/lib.idx" --shards "$S" --output "$TMP/m$S.ftm" --quiet > /dev/null ||
    fail "split --shards $S"
  start "$W" "m$S.ftm"
  check "$W" "m$S.ftm"
  if [ "$spec" = 2:3 ]; then
    # A rank lost while idle: its connection goes, the next requests fail
    # naming it; the coordinator still drains and exits 0.
    kill -KILL "${PIDS[1]}"
    wait "${PIDS[1]}" 2>/dev/null
    PIDS[1]=
    why='"error": "cluster: rank 1: the connection was lost"}'
    want="{\"id\": 0, $why"
    head -1 "$TMP/req.jsonl" > "$TMP/one.jsonl"
    got=
    for ((i = 0; i < 100; i++)); do
      got=$("$BIN" query --url "$URL" --timeout-ms 30000 < "$TMP/one.jsonl")
      [ "$got" = "$want" ] && break
      sleep 0.1
    done
    [ "$got" = "$want" ] || fail "after rank 1 was killed: '$got', want '$want'"
    for i in 0 1 2 3 4; do echo "{\"id\": $i, $why"; done > "$TMP/want5.jsonl"
    head -5 "$TMP/req.jsonl" | "$BIN" query --url "$URL" --batch 5 > "$TMP/got5.jsonl"
    cmp -s "$TMP/got5.jsonl" "$TMP/want5.jsonl" ||
      fail "after rank 1 was killed, a batch of 5: $(head -2 "$TMP/got5.jsonl")"
    kill -TERM "${PIDS[0]}"
    wait_exit 0 60
    [ "$WRC" = 0 ] || fail "rank 0 exited $WRC after SIGTERM (rank 1 lost)"
    echo "gpu_cluster_test: rank 1 killed: '$want'; rank 0 exit 0 on SIGTERM"
  else
    kill -TERM "${PIDS[0]}"
    for ((r = 0; r < W; r++)); do
      wait_exit $r 60
      [ "$WRC" = 0 ] || fail "world $W: rank $r exited $WRC after SIGTERM on rank 0"
    done
  fi
  runs=$((runs + 1))
done
[ $ENGINE = gpu ] && on=" on $NGPU GPUs" || on=""
echo "gpu_cluster_test: ok, $runs clusters of $ENGINE ranks$on"
