#!/usr/bin/env bash
# Throughput of two commits side by side: builds both (CPU only) in git worktrees under
# $WORK (default /tmp/ht_ab) and trains the MLP (4 epochs on the 55,000 training images) and
# the CNN (1 epoch on the 10,000 test images) on 2 ranks, alternating the two builds REPS
# times (default 7); prints samples/s per run and the medians.
#   bench/ab_commits.sh OLD_REV [NEW_REV] [DATA_DIR]    (NEW_REV: HEAD; DATA_DIR: data/fashion-mnist)
set -euo pipefail
cd "$(dirname "$0")/.."
old="${1:?usage: bench/ab_commits.sh OLD_REV [NEW_REV] [DATA_DIR]}"
new="${2:-HEAD}"
data="$(realpath "${3:-data/fashion-mnist}")"
work="${WORK:-/tmp/ht_ab}"
reps="${REPS:-7}"
mkdir -p "$work"
for side in old new; do
  rev=$([[ $side == old ]] && echo "$old" || echo "$new")
  rm -rf "${work:?}/$side"
  git worktree add -f -q --detach "$work/$side" "$rev"
  cmake -S "$work/$side" -B "$work/$side/build" -DCMAKE_BUILD_TYPE=Release \
    -DHPCTRAIN_WITH_CUDA=OFF -DHPCTRAIN_BUILD_TESTS=OFF > /dev/null
  cmake --build "$work/$side/build" -j "$(nproc)" --target hpctrain > /dev/null
done
results="$work/results.txt"
: > "$results"
for model in mlp cnn; do
  if [[ $model == mlp ]]; then set -- fashion_mnist_mlp "$data/train.h5" 4; else
    set -- fashion_mnist_cnn "$data/test.h5" 1; fi
  for rep in $(seq "$reps"); do
    for side in old new; do
      out="$work/runs/$model-$side-$rep"
      rm -rf "$out"
      (cd "$work/$side" && mpiexec -n 2 build/hpctrain train "configs/$1.yaml" --set "data.train=$2" \
        --set data.val= --set data.test= --set "train.epochs=$3" --set "run.dir=$out" \
        --set energy.interval_ms=0 --set train.progress_seconds=0 > /dev/null)
      echo "$model $side $rep $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['samples_per_second'])" "$out/summary.json")" | tee -a "$results"
    done
  done
done
python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    model, side, _, v = line.split()
    runs[(model, side)].append(float(v))
for model in ("mlp", "cnn"):
    o, n = statistics.median(runs[(model, "old")]), statistics.median(runs[(model, "new")])
    print(f"{model}: old median {o:.0f} samples/s, new median {n:.0f}, new/old {n / o:.3f}")
PY
for side in old new; do git worktree remove --force "$work/$side"; done
