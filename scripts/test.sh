#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds, prepares the
# Fashion-MNIST HDF5 files the end-to-end tests train on, and runs ctest
# (labels: unit, mpi, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [[ ! -f data/fashion-mnist/test.h5 ]]; then
  build/hpctrain-data fashion-mnist --out data/fashion-mnist
fi
ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-1}" "$@"
