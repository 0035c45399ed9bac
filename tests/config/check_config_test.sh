#!/bin/sh
# check_config_test.sh - "flashtrie check-config" end to end: the example
# file, a good file with an existing index, each exit status (0 usable,
# 1 refused with one error line, 2 bad arguments) and --doc.
# usage: check_config_test.sh FLASHTRIE EXAMPLE
set -u
BIN=$1 EX=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "check_config_test: $*" >&2; exit 1; }

# run WANT_RC ARGS...: runs check-config, output in $TMP/out and $TMP/err.
run() {
  want=$1; shift
  "$BIN" check-config "$@" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  [ $rc -eq "$want" ] || fail "check-config $*: exit $rc, want $want: $(cat "$TMP/err")"
}

# The example loads clean when the files it names are not looked for...
run 0 --no-files "$EX"
[ "$(head -n 1 "$TMP/out")" = "$EX: ok" ] || fail "first line: $(head -n 1 "$TMP/out")"
grep -qx 'engine: auto (file:[0-9]*)' "$TMP/out" || fail "no engine line"
grep -qx 'caps.max_beam: 4096 (file:[0-9]*)' "$TMP/out" || fail "no caps.max_beam line"
[ ! -s "$TMP/err" ] || fail "stderr not empty: $(cat "$TMP/err")"
# ...and is refused, naming the index, when they are.
run 1 "$EX"
line=$(grep -n '^index = ' "$EX" | cut -d: -f1)
[ "$(cat "$TMP/err")" = "$EX:$line: index: /var/lib/flashtrie/library.fti does not exist" ] ||
  fail "missing index: $(cat "$TMP/err")"
[ ! -s "$TMP/out" ] || fail "stdout not empty on error"

# A usable file: every setting dumped, the index from the command line.
: > "$TMP/lib.fti"
cat > "$TMP/good.conf" <<END
index = "$TMP/none.fti";
listeners = ( { url = "ipc://$TMP/ft.ipc"; admin = true; } );
max_batch = 16;
END
run 1 "$TMP/good.conf"
[ "$(cat "$TMP/err")" = "$TMP/good.conf:1: index: $TMP/none.fti does not exist" ] ||
  fail "good.conf: $(cat "$TMP/err")"
run 0 --index "$TMP/lib.fti" --engine cpu "$TMP/good.conf"
[ "$(head -n 1 "$TMP/out")" = "$TMP/good.conf: ok" ] || fail "good.conf: no ok line"
grep -qx "index: $TMP/lib.fti (cli)" "$TMP/out" || fail "no cli index line"
grep -qx "engine: cpu (cli)" "$TMP/out" || fail "no cli engine line"
grep -qx "max_batch: 16 (file:3)" "$TMP/out" || fail "no max_batch line"
grep -qx "listeners\[0\].admin: true (file:2)" "$TMP/out" || fail "no admin line"
grep -qx "queue_depth: 1024 (default)" "$TMP/out" || fail "no default line"
n=$(wc -l < "$TMP/out")
[ "$n" -eq 46 ] || fail "good.conf: $n lines, want 46 (ok, 39 settings shown, 6 listener fields)"

# Refused files: exit 1 and exactly one line.
printf 'index = "x";\nmax_batch = 100;\n' > "$TMP/range.conf"
run 1 "$TMP/range.conf"
[ "$(cat "$TMP/err")" = "$TMP/range.conf:2: max_batch: must be 1..64, got 100" ] ||
  fail "range.conf: $(cat "$TMP/err")"
printf 'index = "x";\ncaps = {\n  max_beams = 3;\n};\n' > "$TMP/unknown.conf"
run 1 "$TMP/unknown.conf"
[ "$(cat "$TMP/err")" = "$TMP/unknown.conf:3: caps.max_beams: unknown setting" ] ||
  fail "unknown.conf: $(cat "$TMP/err")"
printf 'index = "x"\n\nmax_batch = = 3;\n' > "$TMP/syntax.conf"
run 1 "$TMP/syntax.conf"
[ "$(cat "$TMP/err")" = "$TMP/syntax.conf:3: syntax error, at 'max_batch = = 3;'" ] ||
  fail "syntax.conf: $(cat "$TMP/err")"
printf 'max_batch = 3;\n' > "$TMP/noindex.conf"
run 1 "$TMP/noindex.conf"
[ "$(cat "$TMP/err")" = "$TMP/noindex.conf: index: required (set it in the file or give --index)" ] ||
  fail "noindex.conf: $(cat "$TMP/err")"
run 1 "$TMP/absent.conf"
[ "$(cat "$TMP/err")" = "$TMP/absent.conf: cannot open: No such file or directory" ] ||
  fail "absent.conf: $(cat "$TMP/err")"
# a directory: named, with the reason
mkdir "$TMP/dir.conf"
run 1 "$TMP/dir.conf"
[ "$(cat "$TMP/err")" = "$TMP/dir.conf: read failed: Is a directory" ] ||
  fail "dir.conf: $(cat "$TMP/err")"

# Bad arguments: 2.
run 2
run 2 "$TMP/good.conf" "$TMP/good.conf"
run 2 --bogus "$TMP/good.conf"
run 2 --doc "$TMP/good.conf"
run 2 --engine tpu --index "$TMP/lib.fti" "$TMP/good.conf"
[ "$(cat "$TMP/err")" = "flashtrie check-config: --engine: cli: engine: must be one of auto|cpu|gpu|shards, got 'tpu'" ] ||
  fail "--engine tpu: $(cat "$TMP/err")"
run 0 --help

# --doc: the Markdown table, one row per setting and listener field.
run 0 --doc
[ "$(head -n 1 "$TMP/out")" = "| setting | type | default | bounds | reload | description |" ] ||
  fail "--doc header: $(head -n 1 "$TMP/out")"
[ "$(grep -c '^| `' "$TMP/out")" -eq 46 ] || fail "--doc: want 46 rows"
echo "check_config_test: ok"
