#!/bin/sh
# install-gpu-host.sh - installs FlashTrie on a host without network from a
# bundle made by ops/pack-gpu-host.sh (shipped inside it as install.sh):
# checks the bundle and the host (architecture, distribution release, the
# NVIDIA driver), installs the runtime .debs brought along, the staged
# tree (binary, unit, sysusers file, examples), creates the flashtrie user
# and the folders the unit expects, puts an example configuration in
# /etc/flashtrie unless one is there, checks it, and prints what it did.
# It never starts or enables the service, and never overwrites a config.
#
# usage: install-gpu-host.sh [--dry-run] [--config NAME] [--no-gpu] [--force]
#                            [BUNDLE]
#   BUNDLE      the bundle .tar.gz or its unpacked folder (default: the
#               folder this script is in, when run as BUNDLE/install.sh)
#   --dry-run   check, and print every step without doing it (no root needed)
#   --config N  the example to install as /etc/flashtrie/flashtrie.conf:
#               cpu, gpu, replicas, shards, cluster-rank0, ... (default gpu;
#               cpu with --no-gpu)
#   --no-gpu    a CPU-only host: skip the NVIDIA checks
#   --force     install on another distribution release than the bundle's
# Environment: NVIDIA_SMI (default nvidia-smi) and FT_LDCONFIG (default
#   ldconfig) name the tools the GPU checks run.
# Exit 0 when installed (or, dry, installable); 1 when a check fails; 2
# for bad arguments.
set -eu
DRY=0 CONFIG='' NOGPU=0 FORCE=0 BUNDLE=
usage() { sed -n '/^# usage:/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1; shift ;;
    --config) [ $# -ge 2 ] || usage; CONFIG=$2; shift 2 ;;
    --no-gpu) NOGPU=1; shift ;;
    --force) FORCE=1; shift ;;
    -h|--help) usage ;;
    -*) echo "install: unknown option '$1'" >&2; usage ;;
    *) [ -z "$BUNDLE" ] || usage; BUNDLE=$1; shift ;;
  esac
done
die() { echo "install: $*" >&2; exit 1; }
note() { echo "install: $*"; }
# step DESCRIPTION COMMAND...: runs COMMAND (prints it first), or only
# prints it on a dry run.
step() {
  d=$1; shift
  if [ $DRY -eq 1 ]; then echo "would: $d: $*"; return 0; fi
  echo "doing: $d: $*"
  "$@" || die "$d failed: $*"
}
NVIDIA_SMI=${NVIDIA_SMI:-nvidia-smi}
LDCONFIG=${FT_LDCONFIG:-ldconfig}
command -v "$LDCONFIG" > /dev/null || LDCONFIG=/sbin/ldconfig

# The bundle: a folder, or a tarball unpacked into a temporary one.
W=$(mktemp -d "${TMPDIR:-/tmp}/flashtrie_install.XXXXXX")
trap 'rm -rf "$W"' EXIT
[ -n "$BUNDLE" ] || BUNDLE=$(dirname "$0")
if [ -f "$BUNDLE" ]; then
  tar -C "$W" -xzf "$BUNDLE" 2> "$W/tar.err" || die "$BUNDLE: not a bundle tarball: $(cat "$W/tar.err")"
  set -- "$W"/flashtrie-*/MANIFEST
  [ -f "$1" ] || die "$BUNDLE: no flashtrie-*/MANIFEST inside"
  B=$(dirname "$1")
else
  B=$BUNDLE
fi
M=$B/MANIFEST
[ -f "$M" ] || die "$B: no MANIFEST (not a bundle from ops/pack-gpu-host.sh)"
field() { sed -n "s/^$1 //p" "$M" | head -n 1; }
VERSION=$(field version) ARCH=$(field arch) OS=$(field os) CUDA=$(field cuda)
[ -n "$VERSION" ] && [ -n "$ARCH" ] && [ -n "$OS" ] && [ -n "$CUDA" ] ||
  die "$M: a version, arch, os or cuda line is missing"
note "bundle: flashtrie $VERSION for $OS $ARCH, CUDA $CUDA ($B)"

# 1. The bundle is whole: every .deb the MANIFEST lists, and the tree.
n=0
while read -r kind pkg ver file; do
  [ "$kind" = deb ] || continue
  d=$B/debs/$file
  [ -f "$d" ] || die "$M: $pkg: $file is not in $B/debs"
  got=$(dpkg-deb -f "$d" Package Version 2> /dev/null | tr '\n' ' ') ||
    die "$d: not a .deb"
  [ "$got" = "Package: $pkg Version: $ver " ] ||
    die "$d: holds $got, the MANIFEST says $pkg $ver"
  n=$((n + 1))
done < "$M"
[ $n -gt 0 ] || die "$M: lists no .deb"
R=$B/root
for f in usr/bin/flashtrie usr/lib/systemd/system/flashtrie.service \
         usr/lib/sysusers.d/flashtrie.conf; do
  [ -f "$R/$f" ] || die "$B: root/$f is missing"
done
# Without a GPU engine (a bundle built without CUDA, or --no-gpu) only
# the CPU example can serve.
GPU=1
[ $NOGPU -eq 0 ] && [ "$CUDA" != off ] || GPU=0
[ -n "$CONFIG" ] || { [ $GPU -eq 1 ] && CONFIG=gpu || CONFIG=cpu; }
EX=$R/usr/share/flashtrie/examples/$CONFIG.conf
[ -f "$EX" ] || die "--config $CONFIG: no example $CONFIG.conf (have: $(ls "$R/usr/share/flashtrie/examples" | sed -n 's/\.conf$//p' | tr '\n' ' '))"
if [ $GPU -eq 0 ] && ! grep -q '^engine = "cpu";' "$EX"; then
  die "--config $CONFIG: its engine needs a GPU, and $([ $NOGPU -eq 1 ] && echo "--no-gpu was given" || echo "the bundle was built without CUDA"); use --config cpu"
fi
note "checked: $n runtime packages, the staged tree, example $CONFIG.conf"
# The bundle's own binary checks the example, where it can run here (its
# libraries come with the .debs, which a dry run does not install).
if "$R/usr/bin/flashtrie" --version > /dev/null 2>&1; then
  "$R/usr/bin/flashtrie" check-config --no-files "$EX" > "$W/cc" 2>&1 ||
    die "the bundle's flashtrie refuses $CONFIG.conf: $(cat "$W/cc")"
  note "checked: the bundle's flashtrie loads $CONFIG.conf"
else
  note "not checked yet: $CONFIG.conf (the bundle's flashtrie needs its runtime packages first)"
fi

# 2. The host: same architecture and release as the bundle.
[ "$(dpkg --print-architecture)" = "$ARCH" ] ||
  die "this host is $(dpkg --print-architecture), the bundle is for $ARCH"
HOST_OS=$(. /etc/os-release && echo "$ID $VERSION_ID")
if [ "$HOST_OS" != "$OS" ]; then
  [ $FORCE -eq 1 ] || die "this host runs $HOST_OS, the bundle was packed on $OS: its .debs may not fit (--force to install anyway)"
  note "warning: host $HOST_OS, bundle $OS (--force)"
fi
[ $DRY -eq 1 ] || [ "$(id -u)" = 0 ] || die "run as root (or with --dry-run)"

# 3. The GPU: the driver is all FlashTrie needs (the CUDA runtime is linked
# in statically), new enough for the CUDA it was built with.
if [ $NOGPU -eq 1 ]; then
  note "GPU checks skipped (--no-gpu): only engine = \"cpu\" will serve"
elif [ "$CUDA" = off ]; then
  note "GPU checks skipped: the bundle was built without CUDA; only engine = \"cpu\" will serve"
else
  command -v "$NVIDIA_SMI" > /dev/null ||
    die "no $NVIDIA_SMI: install the NVIDIA driver (one for CUDA $CUDA or newer), or pass --no-gpu for a CPU-only host"
  "$NVIDIA_SMI" > "$W/smi" 2>&1 || die "$NVIDIA_SMI failed: $(head -n 2 "$W/smi")"
  drv_cuda=$(sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' "$W/smi" | head -n 1)
  [ -n "$drv_cuda" ] || die "$NVIDIA_SMI does not say which CUDA version the driver supports"
  want_major=${CUDA%%.*} have_major=${drv_cuda%%.*}
  [ "$have_major" -ge "$want_major" ] ||
    die "the driver supports CUDA $drv_cuda, this build needs CUDA $want_major.x (driver for CUDA $CUDA or newer)"
  "$NVIDIA_SMI" --query-gpu=index,name,memory.total,driver_version --format=csv,noheader \
    > "$W/gpus" 2> /dev/null || die "$NVIDIA_SMI --query-gpu failed"
  [ -s "$W/gpus" ] || die "$NVIDIA_SMI lists no GPU"
  note "GPUs (driver for CUDA $drv_cuda):"
  sed 's/^/install:   /' "$W/gpus"
  "$LDCONFIG" -p 2> /dev/null | grep -q 'libcuda\.so\.1 ' ||
    die "libcuda.so.1 is not in the loader's cache ($LDCONFIG -p): the driver's user-space library is missing"
  [ -c /dev/nvidia-uvm ] ||
    note "warning: no /dev/nvidia-uvm yet: the service cannot create it (NoNewPrivileges); load it at boot (echo nvidia-uvm > /etc/modules-load.d/nvidia-uvm.conf) or enable nvidia-persistenced"
fi

# 4. The steps.
step "install the runtime packages" sh -c "dpkg -i '$B'/debs/*.deb > /dev/null"
step "copy the staged tree into /" sh -c "tar -C '$R' -cf - . | tar -C / -xf - --no-same-owner --keep-directory-symlink"
if command -v systemd-sysusers > /dev/null; then
  step "create the user flashtrie" systemd-sysusers /usr/lib/sysusers.d/flashtrie.conf
else
  step "create the user flashtrie" sh -c "getent passwd flashtrie > /dev/null || useradd --system --user-group --home-dir /var/lib/flashtrie --no-create-home --shell /usr/sbin/nologin flashtrie"
fi
# The index folder belongs to root: the service reads it (group flashtrie)
# and cannot change it, even without the unit's ReadOnlyPaths.
step "create the index folder" install -d -m 0750 -o root -g flashtrie /var/lib/flashtrie
step "create the configuration folder" install -d -m 0750 -o root -g flashtrie /etc/flashtrie
if [ -e /etc/flashtrie/flashtrie.conf ]; then
  note "kept: /etc/flashtrie/flashtrie.conf exists (the example is in /usr/share/flashtrie/examples/$CONFIG.conf)"
else
  step "install the $CONFIG example as the configuration" \
    install -m 0640 -o root -g flashtrie "/usr/share/flashtrie/examples/$CONFIG.conf" /etc/flashtrie/flashtrie.conf
fi
step "check the configuration (the index need not be there yet)" \
  /usr/bin/flashtrie check-config --no-files /etc/flashtrie/flashtrie.conf
if [ -d /run/systemd/system ]; then
  step "make systemd read the unit" systemctl daemon-reload
else
  note "systemd is not running here: no daemon-reload"
fi
if [ $DRY -eq 1 ]; then
  note "dry run: nothing was changed"
else
  note "installed flashtrie $VERSION"
fi
note "next: put the index where /etc/flashtrie/flashtrie.conf says (index = ...), then"
note "      systemctl enable --now flashtrie && flashtrie query --url tcp://127.0.0.1:7710 --ping"
