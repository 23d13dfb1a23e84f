#!/usr/bin/env bash
# Installs Debian's MPICH and Open MPI (the peers we test against and compare with), and libpmix
# (for the `pmix` feature), when missing.
# Idempotent; needs root (CI runs as root). Prints what it did.
set -euo pipefail
need=()
command -v mpiexec.hydra >/dev/null 2>&1 && command -v mpicc.mpich >/dev/null 2>&1 || need+=(mpich libmpich-dev)
command -v mpirun.openmpi >/dev/null 2>&1 && command -v mpicc.openmpi >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
# libpmix for the optional `pmix` feature's tests (srun --mpi=pmix, Open MPI's mpirun).
pkg-config --exists pmix >/dev/null 2>&1 || need+=(pkg-config libpmix-dev)
if [ ${#need[@]} -eq 0 ]; then
  echo "install-mpi-peers: MPICH, Open MPI and libpmix already installed"
  exit 0
fi
echo "install-mpi-peers: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "install-mpi-peers: done"
