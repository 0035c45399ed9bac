#!/bin/sh
# pack-gpu-host.sh - builds the bundle that ops/install-gpu-host.sh installs
# on a GPU host without network: the project's build (cmake --install into
# a staging tree, with the systemd unit, sysusers file and example
# configs), the runtime .debs of every shared library the binary loads
# (found with ldd and dpkg -S, at the versions installed here, so the
# bundle runs what was tested), the installer itself and a MANIFEST.
# Run it on a machine of the same distribution release as the GPU hosts.
#
# usage: ops/pack-gpu-host.sh [--build-dir DIR] [--output FILE.tar.gz]
#                             [--debs-from DIR] [--list-debs]
#   --build-dir DIR   a configured and built tree (default ./build)
#   --output FILE     the bundle (default flashtrie-VERSION-ARCH.tar.gz)
#   --debs-from DIR   take the .debs from DIR (an apt cache, a mirror copy)
#                     instead of "apt-get download"
#   --list-debs       print the runtime packages (name=version) and stop
# Exit 0 with the bundle written; 1 with the reason; 2 for bad arguments.
set -eu
BUILD=./build
OUT=
DEBS_FROM=
LIST=0
usage() { sed -n '/^# usage:/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) [ $# -ge 2 ] || usage; BUILD=$2; shift 2 ;;
    --output) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --debs-from) [ $# -ge 2 ] || usage; DEBS_FROM=$2; shift 2 ;;
    --list-debs) LIST=1; shift ;;
    -h|--help) usage ;;
    *) echo "pack: unknown argument '$1'" >&2; usage ;;
  esac
done
die() { echo "pack: $*" >&2; exit 1; }
say() { [ $LIST -eq 1 ] || echo "pack: $*"; }
for tool in cmake ldd dpkg dpkg-query dpkg-deb tar; do
  command -v $tool > /dev/null || die "$tool is not installed"
done
[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not a configured build tree (no CMakeCache.txt)"
[ -x "$BUILD/flashtrie" ] || die "$BUILD/flashtrie is not built (cmake --build $BUILD)"
[ -z "$DEBS_FROM" ] || [ -d "$DEBS_FROM" ] || die "--debs-from $DEBS_FROM: not a directory"

W=$(mktemp -d "${TMPDIR:-/tmp}/flashtrie_pack.XXXXXX")
trap 'rm -rf "$W"' EXIT
VERSION=$("$BUILD/flashtrie" --version | sed -n 's/^flashtrie //p')
[ -n "$VERSION" ] || die "$BUILD/flashtrie --version printed no version"
ARCH=$(dpkg --print-architecture)
NAME=flashtrie-$VERSION-$ARCH
B=$W/$NAME
mkdir -p "$B/debs"

# 1. The staging tree: what "cmake --install" puts under /usr.
DESTDIR=$B/root cmake --install "$BUILD" --prefix /usr > "$W/install.log" 2>&1 ||
  die "cmake --install failed: $(tail -n 5 "$W/install.log")"
if [ ! -x "$B/root/usr/bin/flashtrie" ]; then
  # A tree from before the top level installed the binary: the file is the
  # same one "cmake --install" will put there.
  install -D -m 0755 "$BUILD/flashtrie" "$B/root/usr/bin/flashtrie"
  say "note: this build has no install rule for the binary; copied $BUILD/flashtrie"
fi
for f in usr/lib/systemd/system/flashtrie.service usr/lib/sysusers.d/flashtrie.conf \
         usr/share/flashtrie/examples/gpu.conf; do
  [ -f "$B/root/$f" ] || die "cmake --install put no /$f into the staging tree (is ops/ in the build?)"
done

# 2. The runtime packages: the owner of every shared library the programs
# load, except the C library and the compiler runtime every Debian system
# has.  dpkg knows a file by the path it shipped it under; with merged
# /usr that may be /usr/lib/... where ldd says /lib/... (or the reverse).
owner() {
  for p in "$1" "/usr$1" "${1#/usr}" "$(readlink -f "$1")"; do
    o=$(dpkg -S "$p" 2> /dev/null | head -n 1)
    [ -n "$o" ] && { echo "${o%%:*}"; return 0; }
  done
  return 1
}
find "$B/root" -type f \( -name flashtrie -o -name '*.so*' \) > "$W/progs"
: > "$W/libs"
while read -r f; do
  ldd "$f" > "$W/ldd" 2>&1 || continue # not a dynamic program
  sed -n 's/.* => \(\/[^ ]*\) .*/\1/p' "$W/ldd" >> "$W/libs"
  ! grep -q 'not found' "$W/ldd" || die "$f: $(grep 'not found' "$W/ldd" | head -n 1)"
done < "$W/progs"
sort -u "$W/libs" > "$W/libs.u"
: > "$W/pkgs"
while read -r lib; do
  pkg=$(owner "$lib") || die "no Debian package owns $lib (needed by flashtrie): install it from a package"
  case $pkg in libc6|libgcc-s1) ;; *) echo "$pkg" >> "$W/pkgs" ;; esac
done < "$W/libs.u"
sort -u -o "$W/pkgs" "$W/pkgs"
[ -s "$W/pkgs" ] || die "found no runtime packages for $BUILD/flashtrie (ldd failed?)"
: > "$W/pkgver"
while read -r pkg; do
  ver=$(dpkg-query -W -f='${Version}' "$pkg") || die "dpkg-query: $pkg is not installed"
  echo "${pkg%%:*} $ver" >> "$W/pkgver"
done < "$W/pkgs"
if [ $LIST -eq 1 ]; then
  sed 's/ /=/' "$W/pkgver"
  exit 0
fi

# 3. The .debs, at exactly those versions.
while read -r pkg ver; do
  if [ -n "$DEBS_FROM" ]; then
    found=
    for d in "$DEBS_FROM"/*.deb; do
      [ -f "$d" ] || continue
      [ "$(dpkg-deb -f "$d" Package 2> /dev/null)" = "$pkg" ] || continue
      [ "$(dpkg-deb -f "$d" Version)" = "$ver" ] || continue
      a=$(dpkg-deb -f "$d" Architecture)
      [ "$a" = "$ARCH" ] || [ "$a" = all ] || continue
      found=$d
      break
    done
    [ -n "$found" ] || die "--debs-from $DEBS_FROM has no .deb of $pkg $ver ($ARCH)"
    cp "$found" "$B/debs/"
  else
    (cd "$B/debs" && apt-get download -q "$pkg=$ver" > "$W/apt.log" 2>&1) ||
      die "apt-get download $pkg=$ver failed: $(tail -n 2 "$W/apt.log")"
  fi
done < "$W/pkgver"

# 4. The installer and the MANIFEST it checks the bundle and the host with.
cp "$(dirname "$0")/install-gpu-host.sh" "$B/install.sh"
chmod 0755 "$B/install.sh"
cuda=off
if grep -q '^FT_WITH_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  cuda=$(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\([0-9]*\.[0-9]*\).*/\1/p' \
         "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake 2> /dev/null | head -n 1)
  [ -n "$cuda" ] || die "$BUILD builds CUDA but its CUDA compiler version is not in CMakeFiles"
fi
# In a subshell: os-release sets NAME, VERSION and more.
OS=$(. /etc/os-release && echo "$ID $VERSION_ID")
{
  echo "# flashtrie bundle: read by install.sh"
  echo "version $VERSION"
  echo "arch $ARCH"
  echo "os $OS"
  echo "cuda $cuda"
  for d in "$B"/debs/*.deb; do
    echo "deb $(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version) $(basename "$d")"
  done
} > "$B/MANIFEST"

[ -n "$OUT" ] || OUT=$NAME.tar.gz
tar -C "$W" -czf "$OUT" "$NAME" || die "cannot write $OUT"
say "wrote $OUT ($(du -k "$OUT" | cut -f1) KiB): flashtrie $VERSION for $OS $ARCH, CUDA $cuda"
say "$(grep -c '^deb ' "$B/MANIFEST") runtime packages: $(grep '^deb ' "$B/MANIFEST" | cut -d' ' -f2 | tr '\n' ' ')"
say "on the GPU host: tar xzf $(basename "$OUT") && sudo $NAME/install.sh --dry-run"
