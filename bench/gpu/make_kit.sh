#!/usr/bin/env bash
# Packs what bench/gpu/device.sh needs on a GPU machine without Debian packages into
# KIT (default .dev, ignored by git): the stripped binaries of BUILD (default build) and
# its CUDA backend module (KIT/lib/hpctrain, where the programs in KIT/bin look), MPICH's
# launcher, the Debian shared libraries they load (all but glibc, libstdc++ and CUDA's,
# which the GPU machine has) and UCX's cma module, xz-compressed, the Fashion-MNIST files
# (xz) and the build's share/hpctrain (the Python tools of hpctrain study), and the build's
# test shims (KIT/test-shims: e2e cases preload them to hold or fail an fsync).
set -euo pipefail
BUILD=${BUILD:-build}
KIT=${KIT:-.dev}
mkdir -p "$KIT/bin" "$KIT/fmnist"
bins=("$BUILD/hpctrain" "$BUILD/hpctrain-data" "$BUILD/ht_gpu_tests" "$BUILD/ht_gpu_mixed_tests"
  /usr/bin/mpiexec.hydra /usr/bin/h5dump
  /usr/bin/hydra_pmi_proxy)
# eu-stack (elfutils, scripts/install-deps.sh --bench): the threads' stacks of a run that
# hangs (device.sh probe).
[[ -x /usr/bin/eu-stack ]] && bins+=(/usr/bin/eu-stack)
cp "${bins[@]}" "$KIT/bin/"
# The symbol tables stay (2.4 MB), so that eu-stack names hpctrain's functions.
strip --strip-debug "$KIT"/bin/*
mkdir -p "$KIT/lib/hpctrain"
cp "$BUILD/lib/hpctrain/libhpctrain_cuda.so" "$KIT/lib/hpctrain/"
strip --strip-debug "$KIT/lib/hpctrain/libhpctrain_cuda.so"
bins+=("$BUILD/lib/hpctrain/libhpctrain_cuda.so")  # for its libraries below
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir "$staging/lib"
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
  grep -v -E '/usr/local/cuda|/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so' |
  xargs -I{} cp -L {} "$staging/lib/"
# UCX's cma transport, a module UCX loads from the ucx folder beside its libucs: without it
# the ranks of one node sent large messages over TCP, and MPICH 4.0's MPI_Finalize could
# hang there (docs/contracts.md).
mkdir "$staging/lib/ucx"
cp -L /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0 "$staging/lib/ucx/"
tar cf - -C "$staging" lib | xz -T0 -6 >"$KIT/libs.tar.xz"
rm -f "$KIT"/fmnist/*
for f in /usr/share/datasets/fashion-mnist/*.gz; do  # xz: 4 MB less than gzip
  zcat "$f" | xz -T0 -9 >"$KIT/fmnist/$(basename "$f" .gz).xz"
done
rm -rf "$KIT/share" "$KIT/test-shims"
cp -r "$BUILD/share" "$KIT/share"
cp -r "$BUILD/test-shims" "$KIT/test-shims"
du -sh "$KIT"
