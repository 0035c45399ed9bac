#!/bin/sh
# demo_test.sh BUILD_DIR OPS_DIR: ops/demo.sh run from another folder on a
# small library (FT_DEMO_KEYS=20000): it exits 0, its lookups find the
# first and the 1000th key (values 0 and 999) and not the key that is no
# key, the daemon's answers are byte-identical to the offline ones, and the
# drained server exits 0.  Its temporary folder is gone afterwards.
set -eu
B=$1
OPS=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/ft_demo_test.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "demo_test: $*" >&2; sed 's/^/  | /' "$T/out" >&2; exit 1; }
cd "$T"
rc=0
TMPDIR=$T FT_BUILD_DIR=$B FT_DEMO_KEYS=20000 sh "$OPS/demo.sh" > "$T/out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "exit status $rc, want 0"
for want in \
  '^== 1\. a seeded demo library: 20000 keys' \
  '^  keys: 20000$' \
  '  ->  0$' \
  '  ->  999$' \
  '^  4294967295 1 2  ->  not found$' \
  '^  (byte-identical to flashtrie search)$' \
  '^  status\.ok: 3$' \
  '^  exit status 0$'; do
  grep -q -- "$want" "$T/out" || fail "no line matching '$want'"
done
# Three answers offline and three through the daemon, each with 5 hits.
n=$(grep -c '^{"id": [0-2], "results": \[' "$T/out")
[ "$n" -eq 6 ] || fail "$n answer lines, want 6"
# The demo's own folder (made under TMPDIR) was removed by its trap.
left=$(find "$T" -maxdepth 1 -name 'flashtrie_demo.*' | wc -l)
[ "$left" -eq 0 ] || fail "the demo left its temporary folder behind"
echo "demo_test: ok"
