#!/usr/bin/env bash
# A/B of two hpctrain binaries on one machine: the step time of inspect --time (forward,
# loss, backward at full speed; its median of 20 steps) for configs/fashion_mnist_resnet18.yaml
# on the CPU, at 1x28x28 (small stem) and 1x64x64 (ImageNet stem: 7x7/2 convolution,
# BatchNorm, ReLU, 3x3/2 max pooling), the binaries' runs interleaved REPS times. With
# PYTORCH=1, bench/pytorch_resnet_step.py (the same model in PyTorch, same batch and
# threads) runs in the same rotation as the peer.
#   [PYTORCH=1] bench/ab_step_time.sh OLD_BINARY NEW_BINARY      (REPS=5)
set -euo pipefail
declare -A bins=([OLD]=$1 [NEW]=$2)
threads=$(nproc)
arms=(OLD NEW)
[[ -n ${PYTORCH:-} ]] && arms+=(PYTORCH)
for stem in small imagenet; do
  input=1x28x28
  [[ $stem == imagenet ]] && input=1x64x64
  for _ in $(seq "${REPS:-5}"); do
    for arm in "${arms[@]}"; do
      if [[ $arm == PYTORCH ]]; then
        out=$(/usr/bin/python3 bench/pytorch_resnet_step.py --input "$input" --stem "$stem" \
          --threads "$threads")
      else
        out=$("${bins[$arm]}" inspect configs/fashion_mnist_resnet18.yaml --input "$input" \
          --classes 10 --set model.stem="$stem" --time --set device=cpu \
          --set run.threads="$threads" 2>&1)
      fi
      echo "$input $stem | $arm | $(sed -n 's/^step at batch [0-9]*[^:]*: \([0-9.]*\) ms.*/\1/p' <<<"$out") ms"
    done
  done
done
