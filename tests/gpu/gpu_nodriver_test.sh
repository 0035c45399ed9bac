#!/bin/bash
# gpu_nodriver_test.sh - on a host with no NVIDIA driver the GPU engine
# says so in words ("no NVIDIA driver found"), not with the CUDA runtime's
# "CUDA driver version is insufficient for CUDA runtime version", which
# reads as if an upgrade would help.  Skipped (77) in a build without CUDA
# and on a host with a driver (libcuda.so.1 in the loader's cache).
# usage: gpu_nodriver_test.sh FLASHTRIE DATA_DIR
set -u
BIN=$1 DATA=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "gpu_nodriver_test: $*" >&2; exit 1; }
"$BIN" build --input "$DATA/cli_keys.txt" --output "$TMP/small.fti" > /dev/null ||
  fail "build"
"$BIN" search --index "$TMP/small.fti" --engine gpu < "$DATA/cli_requests.jsonl" \
  > /dev/null 2> "$TMP/err"
rc=$?
if grep -q "built without CUDA" "$TMP/err"; then
  echo "SKIP: built without CUDA"; exit 77
fi
if ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 ' || [ -e /proc/driver/nvidia/version ]; then
  echo "SKIP: this host has an NVIDIA driver"; exit 77
fi
[ $rc -eq 1 ] || fail "search --engine gpu without a driver: exit $rc, want 1"
want="flashtrie search: GPU engine: no usable GPU: no NVIDIA driver found (no GPU, or its driver is not installed)"
[ "$(cat "$TMP/err")" = "$want" ] || fail "got '$(cat "$TMP/err")', want '$want'"
# serve with engine = auto logs the same reason when it falls back to the CPU.
"$BIN" serve --index "$TMP/small.fti" --listen "ipc://$TMP/sock" --engine auto \
  --threads 1 2> "$TMP/log" &
PID=$!
"$BIN" query --url "ipc://$TMP/sock" --ping --timeout-ms 20000 || { kill $PID; fail "serve did not answer"; }
kill -TERM $PID
wait $PID
grep -q "cpu: no usable GPU (engine = auto; .*no NVIDIA driver found (no GPU, or its driver is not installed))" "$TMP/log" ||
  fail "serve's log: $(grep 'engine' "$TMP/log")"
# engine = shards names itself, not auto, when it falls back the same way.
"$BIN" serve --index "$TMP/small.fti" --listen "ipc://$TMP/sock2" --engine shards \
  --threads 1 2> "$TMP/log2" &
PID=$!
"$BIN" query --url "ipc://$TMP/sock2" --ping --timeout-ms 20000 || { kill $PID; fail "serve --engine shards did not answer"; }
kill -TERM $PID
wait $PID
grep -q "cpu: no usable GPU (engine = shards; .*no NVIDIA driver found" "$TMP/log2" ||
  fail "serve --engine shards' log: $(grep 'engine' "$TMP/log2")"
echo "gpu_nodriver_test: ok"
