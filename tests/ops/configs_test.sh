#!/bin/sh
# configs_test.sh - every example of ops/config/ loads clean with
# "flashtrie check-config --no-files" (first line "FILE: ok", exit 0,
# nothing on stderr) and says what its comments promise: its engine, its
# devices, its cluster rank; and each drains within the unit's stop
# timeout.  A broken copy is refused, so the check itself can fail.
# usage: configs_test.sh FLASHTRIE OPS_DIR
set -u
BIN=$1 OPS=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "configs_test: $*" >&2; exit 1; }

# The unit's stop timeout, in ms: every example's drain must end before it.
stop_s=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$OPS/systemd/flashtrie.service")
[ -n "$stop_s" ] || fail "no TimeoutStopSec=N (seconds) in the unit"
stop_ms=$((stop_s * 1000))

# expect FILE SETTING VALUE: the dump of FILE has "SETTING: VALUE (...)".
expect() {
  grep -q "^$2: $3 (" "$TMP/$(basename "$1").out" ||
    fail "$1: want '$2: $3', dump has '$(grep "^$2: " "$TMP/$(basename "$1").out")'"
}

n=0
for f in "$OPS"/config/*.conf; do
  out=$TMP/$(basename "$f").out
  "$BIN" check-config --no-files "$f" > "$out" 2> "$TMP/err" ||
    fail "$f: check-config exit $?: $(cat "$TMP/err")"
  [ "$(head -n 1 "$out")" = "$f: ok" ] || fail "$f: first line '$(head -n 1 "$out")'"
  [ ! -s "$TMP/err" ] || fail "$f: stderr: $(cat "$TMP/err")"
  drain=$(sed -n 's/^drain_timeout_ms: \([0-9]*\) .*/\1/p' "$out")
  [ -n "$drain" ] && [ "$drain" -lt "$stop_ms" ] ||
    fail "$f: drain_timeout_ms '$drain' is not below the unit's TimeoutStopSec ($stop_ms ms)"
  # The admin socket, where there is one, is in the unit's RuntimeDirectory.
  if grep -q '^listeners\[[0-9]*\]\.url: ipc://' "$out"; then
    grep -q '^listeners\[[0-9]*\]\.url: ipc:///run/flashtrie/' "$out" ||
      fail "$f: an ipc:// listener outside /run/flashtrie (the unit's RuntimeDirectory)"
  fi
  n=$((n + 1))
done
[ $n -eq 6 ] || fail "want 6 example configs, found $n"

C=$OPS/config
expect "$C/cpu.conf" engine cpu
expect "$C/cpu.conf" replicas 2
expect "$C/gpu.conf" engine gpu
expect "$C/gpu.conf" devices 0
expect "$C/gpu.conf" replicas 2
expect "$C/replicas.conf" engine gpu
expect "$C/replicas.conf" devices 0,1,2,3
expect "$C/replicas.conf" replicas 2
expect "$C/replicas.conf" 'listeners\[0\].tls.verify_client' true
expect "$C/shards.conf" engine shards
expect "$C/shards.conf" devices 0,1,2,3
for r in 0 1; do
  expect "$C/cluster-rank$r.conf" engine shards
  expect "$C/cluster-rank$r.conf" cluster.rank $r
  expect "$C/cluster-rank$r.conf" cluster.world 2
  expect "$C/cluster-rank$r.conf" cluster.coordinator tcp://10.0.0.1:7711
done

# The two ranks differ only where a rank must (rank 1 has no listeners:
# rank 0 takes the clients).
diff "$C/cluster-rank0.conf" "$C/cluster-rank1.conf" | grep '^[<>]' |
  grep -v -e 'rank' -e '^[<>] *#' -e 'url = ' -e 'metrics = ' -e 'default_deadline_ms' \
          -e '^< listeners = ($' -e '^< );$' \
          -e '^[<>] *$' > "$TMP/d"
[ ! -s "$TMP/d" ] || fail "cluster ranks differ beyond rank, addresses and comments: $(cat "$TMP/d")"

# A rank outside the world is refused, naming the line: the test can fail.
sed 's/rank = 1;/rank = 2;/' "$C/cluster-rank1.conf" > "$TMP/bad.conf"
line=$(grep -n 'rank = 2;' "$TMP/bad.conf" | cut -d: -f1)
"$BIN" check-config --no-files "$TMP/bad.conf" > /dev/null 2> "$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "rank 2 of 2: exit $rc, want 1"
grep -q "^$TMP/bad.conf:$line: cluster.rank: " "$TMP/err" || fail "rank 2 of 2: $(cat "$TMP/err")"
echo "configs_test: ok ($n examples)"
