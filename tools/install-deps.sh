#!/usr/bin/env bash
# Installs every Debian package faultline's build, tests and examples need.
# Fast when they are all there already (no apt-get update then).
set -euo pipefail
packages=(
  build-essential cmake pkg-config git
  libunwind-dev libfmt-dev nlohmann-json3-dev doctest-dev libcli11-dev
  libdw-dev libelf-dev libdebuginfod-dev elfutils debuginfod libc6-dbg libcurl4-openssl-dev
  libstdc++6-12-dbg libboost-stacktrace-dev
  libseccomp-dev
  gdb lldb-14 clang-14 libclang-rt-14-dev llvm-14 clang-format binutils libbenchmark-dev strace
  python3 python3-dev python3-pytest python3-jsonschema python3-numpy python3-torch
  python3-setuptools python3-wheel python3-pip python3-venv python3-build dpkg-dev fakeroot
  libpython3.11-testsuite  # CPython's test_faulthandler (test_cpython_faulthandler.py)
  cmark-gfm hyperfine
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu binutils-aarch64-linux-gnu  # the aarch64 stage
  qemu-user-static gdb-multiarch  # aarch64 tests under emulation (doc/aarch64.md)
  debootstrap  # tools/torch-root: the Debian sid root with PyTorch 2.x (torch2 tests)
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
