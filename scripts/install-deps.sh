#!/usr/bin/env bash
# Installs hpctrain's build and test dependencies from Debian packages (Debian 12).
# Run as root. On clusters without root, load MPI/HDF5/yaml-cpp/OpenBLAS modules
# (or Spack packages) instead: CMake finds them from the environment.
#   scripts/install-deps.sh          build + tests
#   scripts/install-deps.sh --bench  also PyTorch (CPU) for the benchmarks, and elfutils
#                                    (eu-stack, for the GPU kit: bench/gpu/make_kit.sh)
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  mpich libmpich-dev
  libhdf5-dev hdf5-tools zlib1g-dev
  libyaml-cpp-dev
  libopenblas-dev
  libgtest-dev googletest
  clang-format clang libclang-rt-14-dev
  python3 python3-yaml python3-matplotlib python3-h5py
  dataset-fashion-mnist fortunes
  slurm-wlm munge
  libstb-dev
  dpkg-dev file environment-modules
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch python3-numpy elfutils)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or provide them through modules/Spack" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
