#!/usr/bin/env bash
# Installs Debian's Slurm (slurmctld, slurmd, srun), for the tests that start a local two-node
# Slurm (weft-cli/tests/slurm.rs through scripts/slurm-local.sh). Idempotent; needs root (CI
# runs as root). Prints what it did. A failure here is not fatal to the test run: the Slurm
# tests skip with a message when Slurm is missing.
set -euo pipefail
if command -v srun >/dev/null 2>&1 && command -v slurmctld >/dev/null 2>&1 \
   && command -v slurmd >/dev/null 2>&1; then
  echo "install-slurm: Slurm already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-slurm: not root; skipping (the Slurm tests will skip)"
  exit 0
fi
echo "install-slurm: installing slurm-wlm"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm >/dev/null
# The package enables and may start its own daemons (with the system's slurm.conf); the tests
# run their own, so stop any that a package script started.
for svc in slurmctld slurmd; do
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
done
echo "install-slurm: done"
