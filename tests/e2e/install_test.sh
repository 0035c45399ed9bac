#!/bin/sh
# install_test.sh - the installed library works for a program outside the
# tree: "cmake --install" into a temporary prefix, then a consumer (see
# consumer/) built with find_package(flashtrie) (shared and static) and
# with pkg-config (shared, and static with --static), each run once.  It
# checks the version, builds a tiny index and reads it back.
#   usage: install_test.sh CMAKE BUILD_DIR CONSUMER_SRC CC VERSION
set -eu
CMAKE=$1 BUILD=$2 SRC=$3 CC=$4 VERSION=$5
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
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
# No private header leaks into the install.
[ "$(ls "$P/include")" = "$(printf 'flashtrie.h\nflashtrie_version.h')" ] ||
    fail "unexpected headers: $(ls "$P/include")"
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
echo "install_test: ok"
