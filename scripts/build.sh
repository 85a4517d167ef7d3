#!/usr/bin/env bash
# Configures and builds hpctrain (Release, build/) with all cores.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
