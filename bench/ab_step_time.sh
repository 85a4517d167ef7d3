#!/usr/bin/env bash
# A/B of two hpctrain binaries on one machine: the step time of inspect --time (forward,
# loss, backward at full speed; its median of 20 steps) for configs/fashion_mnist_resnet18.yaml
# on the CPU, at 1x28x28 (small stem) and 1x64x64 (ImageNet stem: 7x7/2 convolution,
# BatchNorm, ReLU, 3x3/2 max pooling), the binaries' runs interleaved REPS times.
#   bench/ab_step_time.sh OLD_BINARY NEW_BINARY      (REPS=5)
set -euo pipefail
OLD=$1 NEW=$2 REPS=${REPS:-5}
for cfg in "--input 1x28x28" "--input 1x64x64 --set model.stem=imagenet"; do
  for i in $(seq "$REPS"); do
    for b in OLD NEW; do
      bin=${!b}
      # shellcheck disable=SC2086  # cfg holds several arguments
      ms=$("$bin" inspect configs/fashion_mnist_resnet18.yaml $cfg --classes 10 --time \
        --set device=cpu 2>&1 | sed -n 's/^step at batch [0-9]* ([^)]*): \([0-9.]*\) ms.*/\1/p')
      echo "$cfg | $b | $ms ms"
    done
  done
done
