#!/usr/bin/env python3
"""Asynchronous SGD on the Fashion-MNIST MLP, side by side in one command: allreduce on 2
ranks against strategy async with 2 workers and 1 server (push_every 1, pull_every 2,
max_staleness 8 unless --async-sets says otherwise) for the same epochs (the same samples
seen), then async with 2 workers and 2 servers; the optimizer settings of --sets apply to
every run (default AdamW, lr 0.002, weight decay 0.01). Each runs --reps times
(interleaved); reports the median test accuracy and samples/s, the staleness histogram
and each server's load. CPU, 1 thread per rank.

  bench/async_mlp.py --build build --data data/fashion-mnist [--epochs 5] [--reps 3]
      [--sets KEY=VALUE ...] [--async-sets KEY=VALUE ...] [--out bench/results/X.json]
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
    return {k: s[k] for k in ("test_accuracy", "samples_per_second", "time_train_s",
                              "world_size", "async")} | {"sets": sets}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist"))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--async-sets", nargs="*",
                    default=["distributed.push_every=1", "distributed.pull_every=2",
                             "distributed.max_staleness=8"])
    ap.add_argument("--sets", nargs="*",
                    default=["optimizer.name=adamw", "optimizer.lr=0.002",
                             "optimizer.weight_decay=0.01"],
                    help="--set values of every run")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.data = os.path.abspath(args.data)
    a = args.sets + ["distributed.strategy=async"] + args.async_sets
    kinds = {"allreduce": (2, args.sets), "async_1_server": (3, a),
             "async_2_servers": (4, a + ["distributed.parameter_servers=2"])}
    runs = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as work:
        for rep in range(args.reps):
            for k, (ranks, sets) in kinds.items():
                runs[k].append(run(args, ranks, sets, work, f"{k}_{rep}"))

    def med(k):
        acc = statistics.median(r["test_accuracy"] for r in runs[k])
        rate = statistics.median(r["samples_per_second"] for r in runs[k])
        return {"test_accuracy_median": acc, "samples_per_second_median": rate,
                "runs": runs[k]}

    allreduce, one, two = med("allreduce"), med("async_1_server"), med("async_2_servers")
    result = {
        "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
        "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip(),
        "cpus": os.cpu_count(), "epochs": args.epochs,
        "allreduce_2_ranks": allreduce, "async_2_workers_1_server": one,
        "async_2_workers_2_servers": two,
        "async_accuracy_minus_allreduce": (one["test_accuracy_median"] -
                                           allreduce["test_accuracy_median"]),
    }
    for name, r in (("allreduce, 2 ranks", allreduce), ("async, 2 workers + 1 server", one),
                    ("async, 2 workers + 2 servers", two)):
        accs = ", ".join(f"{x['test_accuracy']:.4f}" for x in r["runs"])
        print(f"{name}: median test accuracy {r['test_accuracy_median']:.4f} ({accs}), "
              f"{r['samples_per_second_median']:.0f} samples/s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
