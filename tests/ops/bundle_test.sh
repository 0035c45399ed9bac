#!/bin/sh
# bundle_test.sh - ops/pack-gpu-host.sh and ops/install-gpu-host.sh in a
# temporary folder, without network: the runtime packages the pack finds
# (from ldd and dpkg) are given as .debs this test builds with dpkg-deb
# (the right names and versions, no payload: nothing is installed), then
#   - the bundle holds the staged tree, the .debs, the installer and a
#     MANIFEST that says what was packed;
#   - a missing .deb stops the pack, naming it;
#   - the installer's dry run checks the bundle and prints every step, in
#     order, changing nothing; a bundle missing a .deb, another release,
#     an unknown example, a GPU example without a GPU are refused by name;
#   - the GPU checks (bundle marked as built with CUDA 13.0) with stand-in
#     nvidia-smi and ldconfig: no driver, a driver too old, no libcuda,
#     and a good one.
# usage: bundle_test.sh BUILD_DIR OPS_DIR
set -u
BUILD=$1 OPS=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "bundle_test: $*" >&2; exit 1; }
for tool in dpkg dpkg-deb dpkg-query ldd; do
  command -v $tool > /dev/null || { echo "bundle_test: no $tool: not a Debian system"; exit 77; }
done
PACK=$OPS/pack-gpu-host.sh INST=$OPS/install-gpu-host.sh
ARCH=$(dpkg --print-architecture)
VERSION=$("$BUILD/flashtrie" --version | sed -n 's/^flashtrie //p')
NAME=flashtrie-$VERSION-$ARCH

# run WANT_RC LOG CMD...: runs CMD, output (both streams) in LOG.
run() {
  want=$1 log=$2; shift 2
  "$@" > "$log" 2>&1
  rc=$?
  [ $rc -eq "$want" ] || fail "$*: exit $rc, want $want: $(tail -n 5 "$log")"
}
has() { grep -q -F -- "$2" "$1" || fail "$(basename "$1") lacks '$2': $(tail -n 8 "$1")"; }

# The runtime packages: at least the libraries every build links.
run 0 "$TMP/list" sh "$PACK" --build-dir "$BUILD" --list-debs
for p in libconfig9 libjansson4 libxxhash0; do
  grep -q "^$p=" "$TMP/list" || fail "--list-debs lacks $p: $(cat "$TMP/list")"
done
grep -q -e '^libc6=' -e '^libgcc-s1=' "$TMP/list" && fail "--list-debs lists the C runtime"

# Stand-in .debs of exactly those names and versions.
mkdir "$TMP/debs" "$TMP/empty"
while IFS='=' read -r pkg ver; do
  d=$TMP/pkg/$pkg
  mkdir -p "$d/DEBIAN"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <t@example.org>\nDescription: stand-in for bundle_test\n' \
    "$pkg" "$ver" "$ARCH" > "$d/DEBIAN/control"
  dpkg-deb --root-owner-group --build "$d" "$TMP/debs/${pkg}_${ver}_$ARCH.deb" > /dev/null ||
    fail "dpkg-deb --build $pkg"
done < "$TMP/list"
n_debs=$(wc -l < "$TMP/list")

# Packing.
first=$(head -n 1 "$TMP/list")
run 1 "$TMP/log" sh "$PACK" --build-dir "$BUILD" --debs-from "$TMP/empty" --output "$TMP/x.tar.gz"
has "$TMP/log" "pack: --debs-from $TMP/empty has no .deb of ${first%%=*} ${first#*=} ($ARCH)"
[ ! -e "$TMP/x.tar.gz" ] || fail "a failed pack left $TMP/x.tar.gz"
run 2 "$TMP/log" sh "$PACK" --bogus
run 0 "$TMP/log" sh "$PACK" --build-dir "$BUILD" --debs-from "$TMP/debs" --output "$TMP/b.tar.gz"
has "$TMP/log" "pack: wrote $TMP/b.tar.gz"
tar -tzf "$TMP/b.tar.gz" > "$TMP/list.tar" || fail "tar -t"
for f in MANIFEST install.sh root/usr/bin/flashtrie root/usr/lib/systemd/system/flashtrie.service \
         root/usr/lib/sysusers.d/flashtrie.conf root/usr/share/flashtrie/examples/gpu.conf \
         root/usr/share/flashtrie/examples/cpu.conf root/usr/share/flashtrie/examples/cluster-rank1.conf \
         root/usr/share/flashtrie/flashtrie-smoke.sh; do
  grep -qx "$NAME/$f" "$TMP/list.tar" || fail "bundle lacks $NAME/$f"
done
[ "$(grep -c "^$NAME/debs/.*\.deb\$" "$TMP/list.tar")" -eq "$n_debs" ] || fail "bundle: want $n_debs .debs"
mkdir "$TMP/u"
tar -C "$TMP/u" -xzf "$TMP/b.tar.gz"
B=$TMP/u/$NAME
OS=$(. /etc/os-release && echo "$ID $VERSION_ID")
cuda=off
if grep -q '^FT_WITH_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  # A CUDA build records its compiler's major.minor.
  cuda=$(sed -n 's/^cuda //p' "$B/MANIFEST")
  echo "$cuda" | grep -qx '[0-9][0-9]*\.[0-9][0-9]*' || fail "MANIFEST: cuda '$cuda' of a CUDA build"
fi
{ echo "# flashtrie bundle: read by install.sh"; echo "version $VERSION"; echo "arch $ARCH"
  echo "os $OS"; echo "cuda $cuda"
  while IFS='=' read -r pkg ver; do echo "deb $pkg $ver ${pkg}_${ver}_$ARCH.deb"; done < "$TMP/list"
} > "$TMP/manifest.want"
cmp -s "$B/MANIFEST" "$TMP/manifest.want" ||
  fail "MANIFEST: $(diff "$B/MANIFEST" "$TMP/manifest.want")"
grep -q "^ExecStart=/usr/bin/flashtrie serve " "$B/root/usr/lib/systemd/system/flashtrie.service" ||
  fail "the staged unit does not start /usr/bin/flashtrie"
cmp -s "$B/install.sh" "$INST" || fail "the bundle's install.sh is not ops/install-gpu-host.sh"

# The dry run of the tarball, as packed: every step, in order.
run 0 "$TMP/dry" sh "$INST" --dry-run --no-gpu "$TMP/b.tar.gz"
has "$TMP/dry" "install: bundle: flashtrie $VERSION for $OS $ARCH, CUDA $cuda"
has "$TMP/dry" "install: checked: $n_debs runtime packages, the staged tree, example cpu.conf"
has "$TMP/dry" "install: checked: the bundle's flashtrie loads cpu.conf"
has "$TMP/dry" "install: GPU checks skipped (--no-gpu)"
sed -n 's/^would: \([^:]*\):.*/\1/p' "$TMP/dry" > "$TMP/steps"
printf '%s\n' "install the runtime packages" "copy the staged tree into /" \
  "create the user flashtrie" "create the index folder" "create the configuration folder" \
  > "$TMP/steps.want"
if [ ! -e /etc/flashtrie/flashtrie.conf ]; then
  echo "install the cpu example as the configuration" >> "$TMP/steps.want"
fi
echo "check the configuration (the index need not be there yet)" >> "$TMP/steps.want"
[ -d /run/systemd/system ] && echo "make systemd read the unit" >> "$TMP/steps.want"
cmp -s "$TMP/steps" "$TMP/steps.want" || fail "dry-run steps: $(diff "$TMP/steps" "$TMP/steps.want")"
grep -q '^doing: ' "$TMP/dry" && fail "a dry run did something"
has "$TMP/dry" "install: dry run: nothing was changed"
# The unpacked folder works as well as the tarball.
run 0 "$TMP/log" sh "$INST" --dry-run --no-gpu "$B"

# Refusals, each naming what is wrong.
run 2 "$TMP/log" sh "$INST" --dry-run --bogus "$B"
run 1 "$TMP/log" sh "$INST" --dry-run --no-gpu --config nosuch "$B"
has "$TMP/log" "install: --config nosuch: no example nosuch.conf (have: "
run 1 "$TMP/log" sh "$INST" --dry-run --no-gpu --config gpu "$B"
has "$TMP/log" "install: --config gpu: its engine needs a GPU, and --no-gpu was given; use --config cpu"
cp -r "$B" "$TMP/nodeb"
rm "$TMP/nodeb/debs/${first%%=*}_"*.deb
run 1 "$TMP/log" sh "$INST" --dry-run --no-gpu "$TMP/nodeb"
has "$TMP/log" "install: $TMP/nodeb/MANIFEST: ${first%%=*}: ${first%%=*}_${first#*=}_$ARCH.deb is not in $TMP/nodeb/debs"
cp -r "$B" "$TMP/other"
sed -i 's/^os .*/os debian 99/' "$TMP/other/MANIFEST"
run 1 "$TMP/log" sh "$INST" --dry-run --no-gpu "$TMP/other"
has "$TMP/log" "install: this host runs $OS, the bundle was packed on debian 99: its .debs may not fit (--force to install anyway)"
run 0 "$TMP/log" sh "$INST" --dry-run --no-gpu --force "$TMP/other"
has "$TMP/log" "install: warning: host $OS, bundle debian 99 (--force)"

# The GPU checks, on a bundle that says it was built with CUDA 13.0.
cp -r "$B" "$TMP/gpu"
sed -i 's/^cuda .*/cuda 13.0/' "$TMP/gpu/MANIFEST"
mkdir "$TMP/bin"
cat > "$TMP/bin/smi" <<'SMI'
#!/bin/sh
# A stand-in nvidia-smi: its banner and one H200.
if [ "${1:-}" = "--query-gpu=index,name,memory.total,driver_version" ]; then
  echo "0, NVIDIA H200, 143771 MiB, 580.159"
  exit 0
fi
echo "| NVIDIA-SMI 580.159    Driver Version: 580.159    CUDA Version: ${FAKE_CUDA:-13.0}     |"
SMI
printf '#!/bin/sh\necho "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"\n' > "$TMP/bin/ldc-yes"
printf '#!/bin/sh\necho "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6"\n' > "$TMP/bin/ldc-no"
chmod +x "$TMP/bin/"*
run 1 "$TMP/log" env NVIDIA_SMI="$TMP/bin/none" sh "$INST" --dry-run "$TMP/gpu"
has "$TMP/log" "install: no $TMP/bin/none: install the NVIDIA driver (one for CUDA 13.0 or newer), or pass --no-gpu for a CPU-only host"
run 1 "$TMP/log" env NVIDIA_SMI="$TMP/bin/smi" FAKE_CUDA=12.4 FT_LDCONFIG="$TMP/bin/ldc-yes" sh "$INST" --dry-run "$TMP/gpu"
has "$TMP/log" "install: the driver supports CUDA 12.4, this build needs CUDA 13.x (driver for CUDA 13.0 or newer)"
run 1 "$TMP/log" env NVIDIA_SMI="$TMP/bin/smi" FT_LDCONFIG="$TMP/bin/ldc-no" sh "$INST" --dry-run "$TMP/gpu"
has "$TMP/log" "install: libcuda.so.1 is not in the loader's cache ($TMP/bin/ldc-no -p): the driver's user-space library is missing"
run 0 "$TMP/log" env NVIDIA_SMI="$TMP/bin/smi" FAKE_CUDA=13.1 FT_LDCONFIG="$TMP/bin/ldc-yes" sh "$INST" --dry-run "$TMP/gpu"
has "$TMP/log" "install: GPUs (driver for CUDA 13.1):"
has "$TMP/log" "install:   0, NVIDIA H200, 143771 MiB, 580.159"
has "$TMP/log" "install: checked: $n_debs runtime packages, the staged tree, example gpu.conf"
grep -q "^would: install the gpu example" "$TMP/log" || [ -e /etc/flashtrie/flashtrie.conf ] ||
  fail "the GPU dry run does not install gpu.conf"
echo "bundle_test: ok ($n_debs runtime packages)"
