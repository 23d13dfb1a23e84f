#!/usr/bin/env bash
# MPICH's rma directory (scripts/mpich-tests.py) with the ranks on two test hosts (network
# namespaces, scripts/netns.sh) in round robin: every window of two or more ranks spans both,
# so its members on the other host are reached by messages over TCP (issue 12, item 8).
# Known failures: scripts/mpich-known-failures-hosts.txt. More arguments go to mpich-tests.py.
# Skips when namespaces cannot be made here, unless WEFT_REQUIRE_NETNS=1.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! why=$(bash scripts/netns.sh check 2>&1); then
  if [ "${WEFT_REQUIRE_NETNS:-0}" = 1 ]; then
    echo "mpich-rma-two-hosts: WEFT_REQUIRE_NETNS=1 but network namespaces are unavailable: $why" >&2
    exit 1
  fi
  echo "mpich-rma-two-hosts: skipped: network namespaces are unavailable here: $why"
  exit 0
fi
prefix="wmr$(($$ % 100000))"
subnet="${WEFT_NETNS_SUBNET_RMA:-10.79.$(($$ % 200 + 20))}"
bash scripts/netns.sh up 2 "$prefix" "$subnet"
trap 'bash scripts/netns.sh down "$prefix" >/dev/null 2>&1 || true' EXIT
# The two hosts share this machine's CPUs, which neither knows: each sees a CPU per rank of its
# own and spins while it waits, beside the other host's spinning ranks (put_flush_get took 59 s
# so, 3.3 s with the wait policy of an oversubscribed node). WEFT_HOSTS_RUN_ARGS: more.
waits="-x WEFT_SPIN_COUNT=10 -x WEFT_YIELD_COUNT=2000"
python3 scripts/mpich-tests.py --dirs rma --known scripts/mpich-known-failures-hosts.txt \
  --out target/mpich-two-hosts \
  --run-args "--hosts ${prefix}1:8,${prefix}2:8 --map-by round-robin --oversubscribe --rsh $PWD/scripts/netns-rsh --head-addr $subnet.1 $waits ${WEFT_HOSTS_RUN_ARGS:-}" \
  "$@"
