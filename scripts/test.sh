#!/usr/bin/env bash
# Runs every test: unit and multi-process tests (cargo test), the loom model of the
# wake-up handshake, and rsmpi's examples built against Weft. Installs what the tests need
# first (MPICH and Open MPI, for the "programs built against MPICH" and Hydra tests; iproute2,
# for the multi-host tests across network namespaces in weft-cli/tests/hosts.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-mpi-peers.sh
bash scripts/install-test-deps.sh

echo "== cargo test (unit, sans-IO engine, shm, launcher, multi-process at 1-8 ranks, multi-host over network namespaces)"
cargo test --workspace --quiet

echo "== loom model of the sleep/wake handshake"
LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p weft --release --lib --quiet loom

echo "== rsmpi's examples against Weft"
python3 scripts/rsmpi-examples.py --ranks 4
