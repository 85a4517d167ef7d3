#!/usr/bin/env bash
# Writes the fuzz targets' seed inputs into tests/fuzz/corpus/{dataset,checkpoint}/ with
# the project's own programs: small data files from hpctrain-data (every sample type, with
# and without deflate, images and tokens) and the checkpoints of a tiny run, without their
# checksum footer (fuzz_checkpoint appends one). The config target reads configs/ as well.
# Usage: tests/fuzz/make_seeds.sh [BUILD_DIR]   (default build/; needs hpctrain-data, hpctrain)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/dataset" "$out/checkpoint"

data() { "$build/hpctrain-data" "$@" >/dev/null; }
data synth --out "$out/dataset/u8.h5" --n 4 --shape 1x4x4 --classes 3 --dtype uint8
data synth --out "$out/dataset/f16-deflate.h5" --n 3 --shape 2x3x3 --classes 2 --deflate 6
data synth --out "$out/dataset/f32.h5" --n 5 --shape 1x2x3 --classes 4 --dtype float32
printf 'The quick brown fox\njumps over the lazy dog.\n' >"$tmp/text.txt"
data text "$tmp/text.txt" --out "$out/dataset/chars.h5" --seq-len 6
data text "$tmp/text.txt" --out "$out/dataset/words.h5" --seq-len 3 --level word

# Two checkpoints of a tiny MLP (12 -> 5 -> 3) on the u8 file.
data synth --out "$tmp/train.h5" --n 12 --shape 1x2x6 --classes 3 --dtype uint8
"$build/hpctrain" train configs/fashion_mnist_mlp.yaml --set "data.train=$tmp/train.h5" \
  --set data.val= --set data.test= --set "run.dir=$tmp/run" --set model.hidden=[5] \
  --set train.epochs=2 --set train.batch_size=4 --set checkpoint.every_steps=3 \
  --set checkpoint.keep=2 --set train.progress_seconds=0 >/dev/null
for f in "$tmp"/run/checkpoints/ckpt-*.h5; do
  size=$(stat -c %s "$f")
  head -c $((size - 24)) "$f" >"$out/checkpoint/$(basename "$f")"
done
ls -l "$out"/dataset "$out"/checkpoint
