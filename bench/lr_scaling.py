#!/usr/bin/env python3
"""Learning-rate scaling with the global batch, side by side in one command: the Fashion-MNIST
MLP on 1 rank with batch 128 (the reference, its config's learning rate) against 4 ranks
sharing a global batch of 512 (train.batch_size_is global) with optimizer.lr_scaling
linear (4x the learning rate) and a warm-up of --warmup epochs, and the same without
scaling. Every run trains the same epochs, so it sees the same samples; each runs --reps
times and the median test accuracy counts. CPU, 1 thread per rank.

  bench/lr_scaling.py --build build --data data/fashion-mnist [--epochs 5] [--warmup 1]
      [--reps 3] [--out bench/results/X.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import hpctrain_run

ROOT = hpctrain_run.ROOT


def run(args, ranks, sets, work, name):
    d = args.data
    s, _, _ = hpctrain_run.train(
        args.build, ranks, "configs/fashion_mnist_mlp.yaml", os.path.join(work, name),
        [f"data.train={d}/train.h5", f"data.val={d}/val.h5", f"data.test={d}/test.h5",
         f"train.epochs={args.epochs}", "run.threads=1"] + sets, name)
    return {k: s[k] for k in ("test_accuracy", "global_batch", "world_size", "rank_batches")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist"))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.data = os.path.abspath(args.data)
    big = ["train.batch_size=512", "train.batch_size_is=global"]
    kinds = {
        "one_rank_batch_128": (1, ["train.batch_size=128"]),
        "four_ranks_512_linear_warmup": (4, big + [
            "optimizer.lr_scaling=linear", "optimizer.lr_reference_batch=128",
            f"optimizer.schedule.warmup_epochs={args.warmup}"]),
        "four_ranks_512_unscaled": (4, big),
    }
    runs = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as work:
        for rep in range(args.reps):
            for k, (ranks, sets) in kinds.items():
                runs[k].append(run(args, ranks, sets + [f"run.seed={rep + 1}"], work,
                                   f"{k}_{rep}"))
    result = {
        "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
        "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip(),
        "epochs": args.epochs, "warmup_epochs": args.warmup, "sets": {k: v[1] for k, v in
                                                                     kinds.items()},
    }
    for k in kinds:
        accs = [r["test_accuracy"] for r in runs[k]]
        result[k] = {"test_accuracy_median": statistics.median(accs), "runs": runs[k]}
        print(f"{k}: median test accuracy {statistics.median(accs):.4f} "
              f"({', '.join(f'{a:.4f}' for a in accs)})")
    ref = result["one_rank_batch_128"]["test_accuracy_median"]
    result["linear_warmup_minus_reference"] = (
        result["four_ranks_512_linear_warmup"]["test_accuracy_median"] - ref)
    result["unscaled_minus_reference"] = result["four_ranks_512_unscaled"][
        "test_accuracy_median"] - ref
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
