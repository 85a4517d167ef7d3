#!/usr/bin/env bash
# Quick start: installs dependencies, builds, converts Debian's Fashion-MNIST to
# HDF5 and trains the classic 784-192-10 MLP on 2 MPI ranks (CPU cores, or one GPU a rank
# where GPUs are visible). Options given are
# passed to `hpctrain train`; paths in them are relative to the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [[ ! -f data/fashion-mnist/test.h5 ]]; then
  build/hpctrain-data fashion-mnist --out data/fashion-mnist
fi
mpiexec -n "${RANKS:-2}" build/hpctrain train configs/fashion_mnist_mlp.yaml "$@"
