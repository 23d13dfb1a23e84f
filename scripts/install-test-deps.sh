#!/usr/bin/env bash
# Installs what the multi-host tests need when missing: iproute2 (`ip netns`, for the test
# hosts scripts/netns.sh makes). Idempotent; needs root (CI runs as root); without root or
# apt-get it only says so, and the namespace tests skip with a message.
set -euo pipefail
if command -v ip >/dev/null 2>&1; then
  echo "install-test-deps: iproute2 already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: iproute2 is missing and cannot be installed here (needs root and apt-get); the network-namespace tests will skip"
  exit 0
fi
echo "install-test-deps: installing iproute2"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends iproute2 >/dev/null
echo "install-test-deps: done"
