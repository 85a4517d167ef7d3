#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds, and runs ctest on the release
# build (every label; the e2e tests convert Fashion-MNIST into build/), then builds the
# sanitize preset (Clang, ASan + UBSan, build-sanitize/) and runs its unit, MPI and fuzz
# tests. Arguments go to the first ctest; HPCTRAIN_SANITIZE_TESTS=0 skips the second stage.
# The release tests run one at a time (CTEST_JOBS, default 1: most are MPI jobs that keep
# every core busy); the sanitize tests side by side on every core, since each fuzz target
# runs for a fixed time on one core (351 s one at a time on 2 cores, 202 s two at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-1}" "$@"
if [[ "${HPCTRAIN_SANITIZE_TESTS:-1}" != 0 ]]; then
  cmake --preset sanitize >/dev/null
  cmake --build --preset sanitize -j "$(nproc)"
  ctest --preset sanitize -j "${CTEST_JOBS:-$(nproc)}"
fi
