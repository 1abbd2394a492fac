#!/usr/bin/env bash
# install-deps.sh — installs the Debian/Ubuntu packages dtrain needs, only when missing.
# Runs `apt-get update` first on a machine that has never fetched package lists.
# Elsewhere (no apt, no root) it prints what to install and leaves the rest to CMake.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libopenblas-dev
      liblapacke-dev zlib1g-dev dataset-fashion-mnist librandom123-dev libinih-dev
      libcjson-dev libcmocka-dev python3 libprotobuf-c-dev protobuf-c-compiler
      fortunes fortunes-min)   # fortunes*: data.kind text's default corpus (text.h)
if [ "${1:-}" = "--with-torch" ]; then
  PKGS+=(python3-torch python3-numpy)   # only for regenerating reference files
fi
if [ "${1:-}" = "--with-fuzz" ]; then
  PKGS+=(clang libclang-rt-dev)         # only for `make fuzz` (libFuzzer, sanitizers)
fi
if [ "${1:-}" = "--with-mpich" ]; then
  PKGS+=(mpich libmpich-dev)            # only for `make test-mpich` (Open MPI stays the default)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no apt-get here; install the equivalents of: ${missing[*]}" >&2
  echo "install-deps: then run cmake yourself (see README.md, 'Other systems')" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them first" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
# A fresh machine has no package lists: update once before the first install.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ] ||
   ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
