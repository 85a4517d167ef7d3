#!/usr/bin/env python3
"""Input normalisation and augmentation on the Fashion-MNIST CNN, side by side in one
command: configs/fashion_mnist_cnn.yaml on 2 CPU ranks for --epochs epochs, once as shipped
and once with data.normalize: auto (the training file's mean and std, stored by
`hpctrain-data stats` in a copy of it) and the augmentation --set gives (default
data.augment.flip=true and data.augment.crop_padding=2). Test accuracy per run, and per
epoch the validation accuracy.

  bench/cnn_augment.py --build build --data data/fashion-mnist [--epochs 10]
      [--set data.augment.crop_padding=1]... [--out bench/results/X.json]
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile

import hpctrain_run


def run(args, work, name, train_file, sets):
    d = args.data
    s, rows, _ = hpctrain_run.train(
        args.build, 2, "configs/fashion_mnist_cnn.yaml", os.path.join(work, name),
        [f"data.train={train_file}", f"data.val={d}/val.h5", f"data.test={d}/test.h5",
         f"train.epochs={args.epochs}"] + sets, name)
    val = [float(r["val_accuracy"]) for r in rows]
    print(f"{name}: test accuracy {s['test_accuracy']:.4f}, {s['time_train_s']:.0f} s training",
          flush=True)
    return {"sets": sets, "test_accuracy": s["test_accuracy"], "val_accuracy_per_epoch": val,
            "time_train_s": s["time_train_s"], "samples_per_second": s["samples_per_second"],
            "data_wait_fraction": s["data_wait_fraction"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default="data/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--set", action="append", dest="sets", metavar="KEY=VALUE",
                    help="the augmentation (and any other key) of the second run")
    ap.add_argument("--out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        train_copy = os.path.join(work, "train.h5")
        shutil.copyfile(os.path.join(args.data, "train.h5"), train_copy)
        stats = subprocess.run([os.path.join(args.build, "hpctrain-data"), "stats", train_copy],
                               capture_output=True, text=True, check=True).stdout
        print(stats, flush=True)
        plain = run(args, work, "plain", os.path.join(args.data, "train.h5"), [])
        sets = args.sets or ["data.augment.flip=true", "data.augment.crop_padding=2"]
        augmented = run(args, work, "normalized_augmented", train_copy,
                        ["data.normalize=auto"] + sets)
    result = {"benchmark": "cnn_augment", "epochs": args.epochs, "ranks": 2,
              "stats": stats.strip().splitlines(), "plain": plain,
              "normalized_augmented": augmented}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
