#!/usr/bin/env bash
# setup.sh - installs the Debian packages FlashTrie builds against (as root,
# or through sudo).  CUDA 13 is expected in /usr/local/cuda; without it,
# configure with -DFT_WITH_CUDA=OFF and the GPU engine reports "not supported".
# clang and its runtimes (libFuzzer, ASan) are for the fuzz builds
# (-DFT_FUZZ=ON, ops/fuzz.sh).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config ca-certificates clang libclang-rt-dev \
  libxxhash-dev libjansson-dev libmarisa-dev libnng-dev libconfig-dev \
  nng-utils openssl python3-numpy python3-pytest python3-torch gnuplot-nox >/dev/null
echo "setup: packages installed"
