#!/usr/bin/env python3
"""Uneven ranks, side by side in one command: synchronous all-reduce on 2 ranks of which
rank 1 is slowed FACTOR x (debug.slow_rank), without balancing and with
distributed.balance auto, and asynchronous SGD (strategy async) with 2 workers, worker 1
slowed alike, and 1 parameter server (3 ranks), against the ideal: what the two ranks do
alone, one rank's rate x (1 + 1 / FACTOR) (the slowed rank's compute is stretched by
exactly FACTOR, so its rate alone is the other's / FACTOR). Every run is 1 thread per rank,
CPU, the same model and per-rank batch; a run's rate is the median samples/s of its epochs
after the first two (balance auto re-plans after each epoch, so these are its steady
state); its wall time is the sum of its epochs' training time. Accuracy is measured on
DATA/val.h5 (the training set is DATA/test.h5 unless --train says otherwise).

  bench/uneven_ranks.py --build build --data data/fashion-mnist [--model cnn|mlp]
      [--factor 3] [--epochs 5] [--train FILE.h5] [--sets KEY=VALUE ...]
      [--async-sets KEY=VALUE ...] [--reps N] [--out bench/results/X.json]
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


def shown(path):
    """`path` relative to the repository when it lies inside it, for the record."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


CONFIGS = {"cnn": "configs/fashion_mnist_cnn.yaml", "mlp": "configs/fashion_mnist_mlp.yaml"}


def run(args, ranks, sets, work, name):
    summary, rows, stdout = hpctrain_run.train(
        args.build, ranks, CONFIGS[args.model], os.path.join(work, name),
        [f"data.train={args.train}", "data.val=", f"data.test={args.data}/val.h5",
         f"train.epochs={args.epochs}", "run.threads=1", "optimizer.schedule.type=constant"]
        + args.sets + sets, name)
    rates = [float(r["samples_per_second"]) for r in rows]
    balance = [l for l in stdout.splitlines() if " balance " in f" {l}"]
    return {"epoch_samples_per_second": rates, "steady": statistics.median(rates[2:]),
            "rank_batches": summary["rank_batches"], "balance_log": balance,
            "comm_fraction": summary["comm_fraction"], "train_loss": summary["train_loss"],
            "time_train_s": summary["time_train_s"], "test_accuracy": summary["test_accuracy"],
            "async": summary.get("async"), "sets": args.sets + sets}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist"))
    ap.add_argument("--train", help="training file (default DATA/test.h5, 10,000 samples)")
    ap.add_argument("--model", choices=sorted(CONFIGS), default="cnn")
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--sets", nargs="*", default=[], help="--set values of every run")
    ap.add_argument("--async-sets", nargs="*",
                    default=["distributed.push_every=1", "distributed.pull_every=2",
                             "distributed.max_staleness=8"],
                    help="--set values of the async run")
    ap.add_argument("--reps", type=int, default=1, help="runs of each kind; medians count")
    ap.add_argument("--out")
    args = ap.parse_args()
    args.data = os.path.abspath(args.data)
    args.build = os.path.abspath(args.build)
    args.train = os.path.abspath(args.train or os.path.join(args.data, "test.h5"))
    if args.epochs < 3:
        sys.exit("--epochs must be at least 3 (the first two are not counted)")
    slow = ["debug.slow_rank.rank=1", f"debug.slow_rank.factor={args.factor}"]
    kinds = {"alone": (1, []), "allreduce_equal": (2, slow),
             "allreduce_auto": (2, slow + ["distributed.balance=auto"]),
             "async": (3, slow + ["distributed.strategy=async"] + args.async_sets)}
    runs = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as work:
        for rep in range(args.reps):  # interleaved, so drifts of the machine hit all alike
            for k, (ranks, sets) in kinds.items():
                runs[k].append(run(args, ranks, sets, work, f"{k}_{rep}"))

    def median_of(k):
        rs = runs[k]
        out = {f: statistics.median(r[f] for r in rs)
               for f in ("steady", "time_train_s", "test_accuracy")}
        out["rank_batches"] = rs[-1]["rank_batches"]
        out["runs"] = rs
        return out

    alone, equal = median_of("alone"), median_of("allreduce_equal")
    auto, asgd = median_of("allreduce_auto"), median_of("async")
    ideal = alone["steady"] * (1 + 1 / args.factor)
    result = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d"),
        "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip(),
        "cpus": os.cpu_count(),
        "what": f"2 CPU ranks x 1 thread, rank 1 slowed {args.factor}x; samples/s (median of "
                "epochs 3 on; with --reps, the median over runs of that) against the ideal = "
                "one rank alone x (1 + 1 / factor)",
        "model": args.model, "train": shown(args.train), "epochs": args.epochs,
        "one_rank_alone": alone, "ideal_samples_per_second": ideal,
        "allreduce_equal": equal, "allreduce_auto": auto,
        "equal_fraction_of_ideal": equal["steady"] / ideal,
        "auto_fraction_of_ideal": auto["steady"] / ideal,
        "async_2_workers_1_server": asgd,
        "async_fraction_of_ideal": asgd["steady"] / ideal,
        "async_wall_speedup_over_allreduce_equal": equal["time_train_s"] / asgd["time_train_s"],
        "async_accuracy_minus_allreduce_equal": asgd["test_accuracy"] - equal["test_accuracy"],
    }
    print(f"{args.model}: one rank alone {alone['steady']:.0f} samples/s, ideal for 2 ranks "
          f"(one slowed {args.factor}x) {ideal:.0f}")
    print(f"  allreduce, equal batches: {equal['steady']:.0f} "
          f"({100 * result['equal_fraction_of_ideal']:.1f}% of ideal), batches "
          f"{equal['rank_batches']}")
    print(f"  allreduce, balance auto:  {auto['steady']:.0f} "
          f"({100 * result['auto_fraction_of_ideal']:.1f}% of ideal), batches "
          f"{auto['rank_batches']}")
    print(f"  async, 2 workers + 1 server: {asgd['steady']:.0f} "
          f"({100 * result['async_fraction_of_ideal']:.1f}% of ideal); wall "
          f"{asgd['time_train_s']:.1f} s against allreduce's {equal['time_train_s']:.1f} s "
          f"({result['async_wall_speedup_over_allreduce_equal']:.2f}x); accuracy "
          f"{asgd['test_accuracy']:.4f} against {equal['test_accuracy']:.4f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
