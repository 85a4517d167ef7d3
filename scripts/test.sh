#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds, and runs ctest on the release
# build (every label; the e2e tests convert Fashion-MNIST into build/), then builds the
# sanitize preset (Clang, ASan + UBSan, build-sanitize/) and runs its unit, MPI and fuzz
# tests. Arguments go to the first ctest; HPCTRAIN_SANITIZE_TESTS=0 skips the second stage.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-1}" "$@"
if [[ "${HPCTRAIN_SANITIZE_TESTS:-1}" != 0 ]]; then
  cmake --preset sanitize >/dev/null
  cmake --build --preset sanitize -j "$(nproc)"
  ctest --preset sanitize -j "${CTEST_JOBS:-1}"
fi
