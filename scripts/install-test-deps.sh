#!/usr/bin/env bash
# Installs what the tests need from Debian when missing:
# - iproute2 (`ip netns`), for the test hosts scripts/netns.sh makes (multi-host tests);
# - libclang (libclang1-14, with its C headers), for bindgen in rsmpi's own `mpi-sys`, which
#   scripts/rsmpi-examples.py --native builds against Weft's C ABI.
# Idempotent; needs root (CI runs as root); without root or apt-get it only says so, and the
# tests that need the missing packages skip with a message.
set -euo pipefail
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if ! ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1; then
  missing+=(libclang1-14 libclang-common-14-dev)
fi
if [ ${#missing[@]} = 0 ]; then
  echo "install-test-deps: iproute2 and libclang already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: ${missing[*]} missing and cannot be installed here (needs root and apt-get); the tests that need them will skip"
  exit 0
fi
echo "install-test-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-test-deps: done"
