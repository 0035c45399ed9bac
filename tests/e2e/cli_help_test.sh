#!/bin/bash
# cli_help_test.sh - the program's own help: --version and -V at the top,
# after a command and after a subcommand; "help CMD [SUB]" the same as
# "CMD [SUB] --help"; the top-level help word for word; search and serve
# help lines of issue 38; the man page written from the help texts (one
# section per command); the bash completion's answers.
# usage: cli_help_test.sh FLASHTRIE VERSION MANPAGE COMPLETION
set -u
BIN=$1 VERSION=$2 MAN=$3 COMP=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "cli_help_test: $*" >&2; exit 1; }

# expect RC WANT_STDOUT_FILE ARGS...: exit status and stdout exactly, stderr empty
expect() {
    local rc=$1 want=$2; shift 2
    "$BIN" "$@" > "$TMP/out" 2> "$TMP/err"
    local got=$?
    [ $got -eq "$rc" ] || fail "flashtrie $*: exit $got, want $rc: $(cat "$TMP/err")"
    cmp -s "$TMP/out" "$want" ||
        { diff "$want" "$TMP/out" >&2; fail "flashtrie $*: stdout differs"; }
    [ ! -s "$TMP/err" ] || fail "flashtrie $*: stderr: $(cat "$TMP/err")"
}

echo "flashtrie $VERSION" > "$TMP/version"
for args in "--version" "-V" "search --version" "build --version" \
            "check-config --version" "gen keys --version" \
            "search --index nowhere --version"; do
    # shellcheck disable=SC2086
    expect 0 "$TMP/version" $args
done
# after "--" it is no longer an option: lookup refuses the extra argument
"$BIN" lookup -- --version > "$TMP/out" 2>&1; rc=$?
[ $rc -ne 0 ] || fail "lookup -- --version: exit 0"
grep -qx "flashtrie $VERSION" "$TMP/out" && fail "lookup -- --version printed the version"

# The top-level help, word for word; "help" alone is the same.
cat > "$TMP/top" <<'TOP'
usage: flashtrie <command> [options]
       flashtrie help <command>
       flashtrie --help | --version

commands:
  build         build an index from a keys file (text or .ftk)
  split         cut an index into shards by first token, with a manifest
  info          print an index's counts and section sizes
  lookup        look keys (or prefixes) up in an index
  search        answer a JSON Lines file of search requests
  gen           generate a seeded synthetic library or request grids
  bench         measure engine latency and throughput per beam
  serve         serve searches over nng (tcp, ipc, tls) until SIGTERM
  query         answer a JSON Lines file of requests through a server
  loadtest      load a loopback server with good, bad and oversize messages, every answer checked
  check-config  check a serve configuration file and print its settings
  help          describe a command (the same as 'flashtrie <command> --help')

options:
  -h, --help     print this help
  -V, --version  print the version (also after any command)

'flashtrie <command> --help' describes a command; the search rules are
docs/specification.md.
TOP
expect 0 "$TMP/top" --help
expect 0 "$TMP/top" -h
expect 0 "$TMP/top" help
# No command: the same text on stderr, exit 2.
"$BIN" > "$TMP/out" 2> "$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "no command: exit $rc, want 2"
cmp -s "$TMP/err" "$TMP/top" || fail "no command: stderr is not the help"

# help CMD [SUB] == CMD [SUB] --help, for every listed command.
cmds=$(sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' "$TMP/top" | grep -vx help)
[ "$(echo "$cmds" | wc -l)" -eq 11 ] || fail "want 11 commands, got: $cmds"
for c in $cmds "gen keys" "gen index" "gen requests"; do
    # shellcheck disable=SC2086
    "$BIN" $c --help > "$TMP/want" 2>&1 || fail "$c --help: exit $?"
    [ -s "$TMP/want" ] || fail "$c --help printed nothing"
    # shellcheck disable=SC2086
    expect 0 "$TMP/want" help $c
done
# An unknown command, alone or after help: exit 2, named on stderr.
for args in "nosuch" "help nosuch"; do
    # shellcheck disable=SC2086
    "$BIN" $args > "$TMP/out" 2> "$TMP/err"; rc=$?
    [ $rc -eq 2 ] || fail "$args: exit $rc, want 2"
    [ "$(head -n 1 "$TMP/err")" = "flashtrie: unknown command 'nosuch'" ] ||
        fail "$args: stderr: $(head -n 1 "$TMP/err")"
    [ ! -s "$TMP/out" ] || fail "$args: stdout not empty"
done

# search --help: the sentence about input order is whole again.
"$BIN" search --help > "$TMP/out"
grep -qx '  answers one JSON request per input line with one result line, in' "$TMP/out" &&
grep -qx '  input order (docs/specification.md section 7).  INDEX is an index' "$TMP/out" ||
    fail "search --help: $(cat "$TMP/out")"
# lookup --help says what --limit 0 does.
"$BIN" lookup --help > "$TMP/out"
grep -qx '  the keys under it (TAB value), at most N (default 100;' "$TMP/out" &&
grep -qx '  0: all of them).' "$TMP/out" || fail "lookup --help: $(cat "$TMP/out")"
# serve --help names --log-file (and every flag of the settings table).
"$BIN" serve --help > "$TMP/out"
for f in --log-file --log-level --max-beam --metrics; do
    grep -q -- "\[$f " "$TMP/out" || fail "serve --help does not list $f"
done
# ...and every engine the setting takes, shards too.
grep -qF -- "[--engine auto|cpu|gpu|shards]" "$TMP/out" ||
    fail "serve --help: --engine: $(grep -o -- '\[--engine [^]]*\]' "$TMP/out")"
# The help texts point at docs/specification.md, not at a file users
# do not have.
for c in build split info lookup search serve query check-config gen bench loadtest; do
    "$BIN" "$c" --help 2>&1 | grep -q 'SPEC' && fail "$c --help says SPEC"
done

# The man page: the version, one section per command and subcommand, in
# the order of the help.
[ "$(sed -n 3p "$MAN")" = ".TH FLASHTRIE 1 \"\" \"flashtrie $VERSION\" \"User Commands\"" ] ||
    fail "man page header: $(sed -n 3p "$MAN")"
want_ss=$(for c in $cmds; do echo ".SS \"flashtrie $c\""; [ "$c" = gen ] &&
    printf '.SS "flashtrie gen %s"\n' keys index requests; done)
[ "$(grep '^\.SS' "$MAN")" = "$want_ss" ] ||
    fail "man page sections: $(grep '^\.SS' "$MAN")"
grep -q 'answered.  \\-\\-log\\-file appends the log to F' "$MAN" || fail "man page lacks serve's help text"
if command -v groff > /dev/null; then
    warn=$(groff -man -Tutf8 -ww -z "$MAN" 2>&1)
    [ -z "$warn" ] || fail "groff warns: $warn"
fi

# The bash completion, run as bash runs it.
comp() { # comp WANT WORDS...: the completions of the last word
    local want=$1; shift
    local got
    got=$(bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1));
                   _flashtrie; echo "${COMPREPLY[*]}"' _ "$COMP" "$BIN" "$@") ||
        fail "completion of '$*' failed"
    [ "$got" = "$want" ] || fail "completion of '$*': '$got', want '$want'"
}
comp "build split info lookup search gen bench serve query loadtest check-config help --help --version -h -V" ""
comp "check-config" ch
comp "lookup loadtest" help l
comp "keys index requests" gen ""
comp "--format" gen keys --f
comp "--max-beam --max-line-bytes" search --ma
comp "--log-file --log-level" serve --log-
comp "warn" serve --log-level w
comp "auto cpu gpu" search --engine ""
comp "auto cpu gpu shards" serve --engine ""
comp "auto text ftk" build --format ""
bash -c 'source "$1"; complete -p flashtrie' _ "$COMP" | grep -q -- '-F _flashtrie flashtrie$' ||
    fail "completion is not registered for flashtrie"
echo "cli_help_test: ok"
