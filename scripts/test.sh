#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds, and runs ctest
# (labels: unit, mpi, e2e; the e2e tests convert Fashion-MNIST into build/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-1}" "$@"
