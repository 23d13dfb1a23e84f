#!/usr/bin/env bash
# Test "hosts" on one machine: network namespaces joined by a bridge, each with its own
# address, for multi-host `weft run` tests (`weft run --hosts ... --rsh scripts/netns-rsh`).
#
#   netns.sh up N [PREFIX [SUBNET]]  create namespaces PREFIX1..PREFIXN (default prefix weft-h)
#   netns.sh down [PREFIX]           remove them, their links and the bridge (idempotent)
#   netns.sh cut HOST | heal HOST    set HOST's link down / up (a host cut off mid-job)
#   netns.sh addr HOST | bridge-addr [PREFIX]   print an address
#   netns.sh check                   exit 0 when namespaces can be created here (root, iproute2)
#
# Topology: bridge PREFIXbr in the root namespace holds SUBNET.1/24; namespace PREFIXi has
# lo up and `eth0` (a veth whose other end, PREFIXi-r, is a port of the bridge) holding
# SUBNET.(i+1)/24. SUBNET is the first three octets of a /24, default $WEFT_NETNS_SUBNET or
# 10.77.0 (inside 10.0.0.0/8 but unlikely to be in use; pick another one when it is, and
# give parallel test runs distinct prefixes and subnets). Namespaces share the file system,
# /dev/shm included, and the host name (no UTS namespace): only the network is separate.
# Link names are limited to 15 characters, so keep PREFIX within 10.
set -euo pipefail

die() { echo "netns.sh: $*" >&2; exit 1; }

need_ip() {
  command -v ip >/dev/null 2>&1 || die "the ip command (iproute2) is not installed: apt-get install -y iproute2"
}

check_prefix() {
  [[ "$1" =~ ^[A-Za-z][A-Za-z0-9_-]{0,9}$ ]] ||
    die "prefix ${1@Q} must be 1-10 characters [A-Za-z0-9_-] starting with a letter (link names are limited to 15)"
}

check_subnet() {
  [[ "$1" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
    die "subnet ${1@Q} must be the first three octets of a /24, such as 10.77.0"
  local o
  for o in "${BASH_REMATCH[@]:1}"; do
    ((o <= 255)) || die "subnet ${1@Q}: octet $o is over 255"
  done
}

hosts_of() { # the namespaces named PREFIX<digits>
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1[0-9]+\$" || true
}

cmd_up() {
  local n=${1:-} prefix=${2:-weft-h} subnet=${3:-${WEFT_NETNS_SUBNET:-10.77.0}}
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 250)) || die "up: N=${n@Q} must be a number from 1 to 250"
  check_prefix "$prefix"
  check_subnet "$subnet"
  need_ip
  local br="${prefix}br"
  [[ -z "$(hosts_of "$prefix")" ]] && ! ip link show "$br" >/dev/null 2>&1 ||
    die "up: namespaces or bridge with prefix $prefix exist already (netns.sh down $prefix first)"
  if ip -4 -o addr show | grep -qF " $subnet."; then
    die "up: subnet $subnet.0/24 is already in use here; choose another (third argument or WEFT_NETNS_SUBNET)"
  fi
  # Undo a half-made setup on any failure.
  trap 'cmd_down "$prefix" >/dev/null 2>&1 || true' ERR
  ip link add "$br" type bridge
  # Bridged frames must not go through iptables (a FORWARD policy of DROP would eat them).
  ip link set "$br" type bridge nf_call_iptables 0 nf_call_ip6tables 0 2>/dev/null || true
  ip addr add "$subnet.1/24" dev "$br"
  ip link set "$br" up
  local i ns
  for ((i = 1; i <= n; i++)); do
    ns="$prefix$i"
    ip netns add "$ns"
    ip link add "$ns-r" type veth peer name eth0 netns "$ns"
    ip link set "$ns-r" master "$br"
    ip link set "$ns-r" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  trap - ERR
  echo "netns.sh: up $n hosts ${prefix}1..$prefix$n on $subnet.0/24 (bridge $br at $subnet.1)"
}

cmd_down() {
  local prefix=${1:-weft-h}
  check_prefix "$prefix"
  need_ip
  local ns
  for ns in $(hosts_of "$prefix"); do
    # Processes still inside keep nothing alive that matters here: the namespace goes away
    # once they exit, its veth with it. Kill them so nothing is left behind.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
    ip link del "$ns-r" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "${prefix}br" 2>/dev/null || true
}

host_link() {
  local host=${1:-}
  [[ -n "$host" ]] || die "$2: which host?"
  need_ip
  ip netns list | awk '{print $1}' | grep -qxF "$host" || die "$2: no namespace named ${host@Q}"
  echo "$host-r"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down "$@" ;;
  cut) link=$(host_link "${2:-}" cut); ip link set "$link" down ;;
  heal) link=$(host_link "${2:-}" heal); ip link set "$link" up ;;
  addr)
    host_link "${2:-}" addr >/dev/null
    ip -n "$2" -4 -o addr show dev eth0 | awk '{sub("/.*", "", $4); print $4}' ;;
  bridge-addr)
    prefix=${2:-weft-h}; check_prefix "$prefix"; need_ip
    ip -4 -o addr show dev "${prefix}br" | awk '{sub("/.*", "", $4); print $4}' ;;
  check)
    [[ $(id -u) == 0 ]] || die "check: not root (network namespaces need root)"
    need_ip
    probe="weftchk$$"
    ip netns add "$probe" 2>/dev/null || die "check: ip netns add failed (no permission for network namespaces here?)"
    ok=0
    ip link add "${probe}b" type bridge 2>/dev/null && ok=1
    ip link del "${probe}b" 2>/dev/null || true
    ip netns del "$probe"
    ((ok)) || die "check: cannot create a bridge here"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
    exit 2 ;;
esac
