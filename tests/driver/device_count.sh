#!/usr/bin/env bash
# The CUDA device count of a build with the CUDA backend (backend/cuda_module.cpp) as the
# runtime's would be, through a stand-in driver library (fake_libcuda.c) first on
# LD_LIBRARY_PATH: the devices it reports where its CUDA version is the backend's major
# version or newer, none where it is older ("insufficient driver": device auto trains on
# the CPU), none where it reports none; without the stand-in, whatever this machine has. A
# training run with device cpu never initialises the driver.
#   bash tests/driver/device_count.sh HPCTRAIN FAKE_DRIVER_DIR CUDA_MAJOR
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
hpctrain=$1
driver_dir=$2
major=$3
count() {  # count DRIVER_VERSION DEVICES: the count hpctrain --version prints
  LD_LIBRARY_PATH=$driver_dir FAKE_CUDA_DRIVER_VERSION=$1 FAKE_CUDA_DEVICES=$2 "$hpctrain" --version |
    sed -n 's/.*CUDA devices: \([0-9]*\)).*/\1/p'
}
[[ $(count $((major * 1000)) 2) == 2 ]] || fail "driver $major.0 with 2 devices: $(count $((major * 1000)) 2)"
[[ $(count $((major * 1000 + 20)) 3) == 3 ]] || fail "a newer minor version with 3 devices"
[[ $(count $(((major - 1) * 1000 + 80)) 2) == 0 ]] || fail "an older driver counted its devices"
[[ $(count $((major * 1000)) 0) == 0 ]] || fail "a driver without devices"
[[ $("$hpctrain" --version | sed -n 's/.*CUDA devices: \([0-9]*\)).*/\1/p') =~ ^[0-9]+$ ]] ||
  fail "no count without the stand-in"
# A run with device cpu asks no driver; one with device auto does (and, with no device
# reported, trains on the CPU).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$(dirname "$hpctrain")/hpctrain-data" synth --out "$work/d.h5" --n 64 --shape 1x8x8 \
  --classes 2 >/dev/null
for device in cpu auto; do
  LD_LIBRARY_PATH=$driver_dir FAKE_CUDA_DRIVER_VERSION=$((major * 1000)) FAKE_CUDA_DEVICES=0 \
    FAKE_CUDA_INIT_LOG=$work/init-$device "$hpctrain" train \
    "$(dirname "$0")/../../configs/fashion_mnist_mlp.yaml" --set run.dir="$work/run-$device" --set data.train="$work/d.h5" --set data.val= \
    --set data.test= --set train.epochs=1 --set device=$device >/dev/null 2>&1 ||
    fail "device $device: training failed"
done
[[ ! -e $work/init-cpu ]] || fail "a run with device cpu initialised the CUDA driver"
[[ -s $work/init-auto ]] || fail "a run with device auto did not ask the driver (the check sees nothing)"
echo "PASS: the device count follows the driver's version and devices; device cpu asks no driver"
