#!/bin/sh
# install_test.sh - the installed library works for a program outside the
# tree: "cmake --install" into a temporary prefix, then a consumer (see
# consumer/) built with find_package(flashtrie) (shared and static) and
# with pkg-config (shared, and static with --static), each run once.  It
# checks the version, builds a tiny index and reads it back.  The C client
# library the same way (find_package and pkg-config, shared and static),
# its programs pinging and searching the installed "flashtrie serve" of
# that index, and the Python client loading the installed client library
# ($FLASHTRIE_CLIENT_LIB, $LD_LIBRARY_PATH, the package's own prefix).
# The shared libraries are sealed: each exports exactly the functions its
# public header declares with FT_API.
#   usage: install_test.sh CMAKE BUILD_DIR CONSUMER_SRC CC VERSION
set -eu
CMAKE=$1 BUILD=$2 SRC=$3 CC=$4 VERSION=$5
ROOT=$(cd "$SRC/../../.." && pwd)
D=$(mktemp -d)
SERVER=
cleanup() {
    [ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || :; }
    rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$D/prefix" >"$D/install.log" 2>&1 ||
    { cat "$D/install.log" >&2; fail "cmake --install failed"; }
P=$D/prefix
[ -x "$P/bin/flashtrie" ] || fail "bin/flashtrie not installed"
[ -f "$P/include/flashtrie.h" ] || fail "include/flashtrie.h not installed"
[ -f "$P/include/flashtrie_version.h" ] || fail "flashtrie_version.h not installed"
LIB=$(dirname "$(find "$P" -name libflashtrie.a | head -n 1)")
[ -f "$LIB/libflashtrie.a" ] || fail "libflashtrie.a not installed"
[ -f "$LIB/libflashtrie.so.$VERSION" ] || fail "libflashtrie.so.$VERSION not installed"
[ "$(readlink "$LIB/libflashtrie.so.0")" = "libflashtrie.so.$VERSION" ] ||
    fail "libflashtrie.so.0 does not point at libflashtrie.so.$VERSION"
[ "$(readlink "$LIB/libflashtrie.so")" = "libflashtrie.so.0" ] ||
    fail "libflashtrie.so does not point at libflashtrie.so.0"
[ -f "$LIB/libflashtrie_client.a" ] || fail "libflashtrie_client.a not installed"
[ -f "$LIB/libflashtrie_client.so.$VERSION" ] ||
    fail "libflashtrie_client.so.$VERSION not installed"
[ "$(readlink "$LIB/libflashtrie_client.so")" = "libflashtrie_client.so.0" ] ||
    fail "libflashtrie_client.so does not point at libflashtrie_client.so.0"
[ -f "$LIB/pkgconfig/flashtrie_client.pc" ] || fail "flashtrie_client.pc not installed"
# No private header leaks into the install.
[ "$(ls "$P/include")" = "$(printf 'flashtrie.h\nflashtrie_client.h\nflashtrie_version.h')" ] ||
    fail "unexpected headers: $(ls "$P/include")"

# Sealed: the dynamic symbols a shared library defines are exactly the
# FT_API functions of its header (each declared with its name on the
# FT_API line), and the client library's are its header's and the few
# calls of flashtrie.h it carries (CLIENT_ALSO, flashtrie_client.h says
# which).
api() { sed -n 's/^FT_API[^(]*[ *]\(ft_[a-z0-9_]*\)(.*/\1/p' "$@" | sort -u; }
exports() { nm -D --defined-only "$1" | awk '{print $NF}' | sort -u; }
CLIENT_ALSO="ft_err_name ft_request_init ft_request_validate ft_strerror"
api "$P/include/flashtrie.h" >"$D/api.txt"
api "$P/include/flashtrie_client.h" >"$D/capi.txt"
printf '%s\n' $CLIENT_ALSO >>"$D/capi.txt"
sort -u -o "$D/capi.txt" "$D/capi.txt"
[ "$(wc -l <"$D/api.txt")" -ge 60 ] || fail "FT_API list of flashtrie.h too short"
for w in $CLIENT_ALSO; do
    grep -qx "$w" "$D/api.txt" || fail "$w is no FT_API function of flashtrie.h"
done
exports "$LIB/libflashtrie.so.$VERSION" >"$D/exp.txt"
exports "$LIB/libflashtrie_client.so.$VERSION" >"$D/cexp.txt"
diff "$D/api.txt" "$D/exp.txt" >"$D/exp.diff" ||
    { cat "$D/exp.diff" >&2; fail "libflashtrie.so exports other than flashtrie.h's FT_API ('>': exported only, '<': declared only)"; }
diff "$D/capi.txt" "$D/cexp.txt" >"$D/cexp.diff" ||
    { cat "$D/cexp.diff" >&2; fail "libflashtrie_client.so exports other than flashtrie_client.h's FT_API"; }
"$P/bin/flashtrie" --version | grep -qx "flashtrie $VERSION" ||
    fail "flashtrie --version does not say $VERSION"
# The man page (written from the help texts) and the bash completion.
MANP=$(find "$P" -path '*/man1/flashtrie.1')
[ -f "$MANP" ] || fail "man1/flashtrie.1 not installed"
grep -q "flashtrie $VERSION" "$MANP" || fail "flashtrie.1 does not say $VERSION"
grep -qx ".I $P/[^ ]*/specification.md" "$MANP" ||
    fail "flashtrie.1 does not name the installed docs/specification.md"
DOCS=$(dirname "$(grep -x ".I $P/[^ ]*/specification.md" "$MANP" | sed 's/^\.I //')")
[ -f "$DOCS/specification.md" ] || fail "$DOCS/specification.md not installed"
[ -f "$P/share/bash-completion/completions/flashtrie" ] ||
    fail "share/bash-completion/completions/flashtrie not installed"

run() { # run NAME: the consumer NAME must build and read its index
    out=$("$@" "$D/$(basename "$1").idx" "$VERSION") ||
        fail "$1 failed: $out"
    [ "$out" = "flashtrie $VERSION ok" ] || fail "$1 printed '$out'"
}

# find_package(flashtrie)
"$CMAKE" -S "$SRC" -B "$D/cm" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
    >"$D/cm.log" 2>&1 || { cat "$D/cm.log" >&2; fail "consumer configure failed"; }
"$CMAKE" --build "$D/cm" >>"$D/cm.log" 2>&1 ||
    { cat "$D/cm.log" >&2; fail "consumer build failed"; }
run "$D/cm/consumer_shared"
run "$D/cm/consumer_static"
for c in client_shared client_static; do
    [ -x "$D/cm/$c" ] || fail "$c not built"
done
ldd "$D/cm/client_shared" | grep -q "$LIB/libflashtrie_client.so.0" ||
    fail "client_shared does not load $LIB/libflashtrie_client.so.0"
ldd "$D/cm/client_static" | grep -q libflashtrie && fail "client_static loads a libflashtrie"
ldd "$D/cm/client_shared" | grep -q "libflashtrie\.so" && fail "client_shared loads libflashtrie.so"
# The shared consumer found the installed library through its RUNPATH,
# not the build tree.
LD_LIBRARY_PATH= ldd "$D/cm/consumer_shared" | grep -q "$LIB/libflashtrie.so.0" ||
    fail "consumer_shared does not load $LIB/libflashtrie.so.0"

# pkg-config
export PKG_CONFIG_PATH="$LIB/pkgconfig"
[ "$(pkg-config --modversion flashtrie)" = "$VERSION" ] || fail "pkg-config version"
# shellcheck disable=SC2046
"$CC" -o "$D/pc_shared" "$SRC/main.c" $(pkg-config --cflags --libs flashtrie) ||
    fail "pkg-config shared build failed"
export LD_LIBRARY_PATH="$LIB"
run "$D/pc_shared"
unset LD_LIBRARY_PATH
# Static: the same flags with --static, the archive asked for by name.
# shellcheck disable=SC2046
"$CC" -o "$D/pc_static" "$SRC/main.c" $(pkg-config --cflags flashtrie) \
    $(pkg-config --static --libs flashtrie | sed 's/-lflashtrie/-l:libflashtrie.a/') ||
    fail "pkg-config static build failed"
run "$D/pc_static"
ldd "$D/pc_static" | grep -q libflashtrie && fail "pc_static loads libflashtrie.so"

# The C client library through pkg-config, shared and static.
[ "$(pkg-config --modversion flashtrie_client)" = "$VERSION" ] ||
    fail "pkg-config flashtrie_client version"
# shellcheck disable=SC2046
"$CC" -o "$D/pc_client_shared" "$SRC/client_main.c" \
    $(pkg-config --cflags --libs flashtrie_client) ||
    fail "pkg-config client shared build failed"
# shellcheck disable=SC2046
"$CC" -o "$D/pc_client_static" "$SRC/client_main.c" $(pkg-config --cflags flashtrie_client) \
    $(pkg-config --static --libs flashtrie_client |
      sed 's/-lflashtrie_client/-l:libflashtrie_client.a/') ||
    fail "pkg-config client static build failed"
ldd "$D/pc_client_static" | grep -q libflashtrie && fail "pc_client_static loads a libflashtrie"

# The client programs against the installed server, serving the index
# consumer_shared built.
URL="ipc://$D/ft.sock"
"$P/bin/flashtrie" serve --index "$D/consumer_shared.idx" --engine cpu \
    --listen "$URL" 2>"$D/serve.log" &
SERVER=$!
crun() { # crun PROGRAM [ENV...]: a client program pings and searches
    p=$1
    shift
    out=$(env "$@" "$p" "$URL" "$VERSION" 2>&1) ||
        { cat "$D/serve.log" >&2; fail "$p failed: $out"; }
    [ "$out" = "flashtrie_client $VERSION ok" ] || fail "$p printed '$out'"
}
crun "$D/cm/client_shared"
crun "$D/cm/client_static"
crun "$D/pc_client_shared" LD_LIBRARY_PATH="$LIB"
crun "$D/pc_client_static"

# The Python client on the installed library (no sanitized library: it
# would need its runtime preloaded into python).  It is found through
# $FLASHTRIE_CLIENT_LIB, through $LD_LIBRARY_PATH (the system's search
# path), and, for a package installed into the same prefix (pip install
# --prefix), in that prefix's library directory with no setting at all.
if pkg-config --libs flashtrie_client | grep -q -- -fsanitize; then
    echo "install_test: sanitized build, Python client not checked"
else
    PYCHECK='import sys, numpy as np, flashtrie, flashtrie._lib as L
with flashtrie.Client(sys.argv[1], timeout=20.0) as c:
    c.ping()
    h = c.search(np.array([[4], [2]]), np.array([[-0.5], [-0.25]]), beam=4)
assert [x.value for x in h] == [42], h
print(L.path_of(L.load()))'
    pyrun() { # pyrun WANT_PATH PYTHONPATH [ENV...]
        want=$1 pp=$2
        shift 2
        out=$(env -u FLASHTRIE_CLIENT_LIB "$@" PYTHONPATH="$pp" PYTHONDONTWRITEBYTECODE=1 \
              /usr/bin/python3 -c "$PYCHECK" "$URL" 2>&1) ||
            fail "Python client ($*): $out"
        case $out in
        "$want") ;;
        *) fail "Python client ($*) loaded '$out', want '$want'" ;;
        esac
    }
    pyrun "$LIB/libflashtrie_client.so.0" "$ROOT/python" \
        FLASHTRIE_CLIENT_LIB="$LIB/libflashtrie_client.so.0"
    pyrun "libflashtrie_client.so.0" "$ROOT/python" LD_LIBRARY_PATH="$LIB"
    SITE=$P/lib/python3/site-packages
    mkdir -p "$SITE"
    cp -r "$ROOT/python/flashtrie" "$SITE/"
    pyrun "$LIB/libflashtrie_client.so.0" "$SITE"
fi
echo "install_test: ok"
