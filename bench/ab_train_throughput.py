#!/usr/bin/env python3
"""A/B of two hpctrain binaries on one machine: CPU training throughput (samples/s from
summary.json) of the same jobs bench/train_throughput.sh runs (mlp: 2 ranks x 1 thread;
cnn and lstm: 1 rank x 2 threads; mlp4: 4 ranks x 1 thread; per-rank batch 64, training set only,
constant learning rate),
the two binaries' runs interleaved REPS times, alternating which goes first. Prints the
median of each side, the ratio NEW / OLD and each side's spread (max / min - 1, the noise),
and writes OUT as JSON.

  bench/ab_train_throughput.py --old OLD/hpctrain --new build/hpctrain \\
      --data data/fashion-mnist [--models mlp,cnn,mlp4,lstm] [--reps 7] [--epochs 2] [--out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = {
    "mlp": {"config": "configs/fashion_mnist_mlp.yaml", "ranks": 2, "threads": 1},
    # More ranks than cores on a 2-core machine: how waiting ranks share the cores.
    "mlp4": {"config": "configs/fashion_mnist_mlp.yaml", "ranks": 4, "threads": 1},
    "cnn": {"config": "configs/fashion_mnist_cnn.yaml", "ranks": 1, "threads": 2},
    # LSTM 128 over the image rows: many short parallel regions per step (28 time steps).
    "lstm": {"config": "configs/fashion_mnist_lstm.yaml", "ranks": 1, "threads": 2},
}


def run(binary, model, data, epochs, work):
    job = JOBS[model]
    run_dir = tempfile.mkdtemp(dir=work)
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(job["ranks"]), binary, "train",
           os.path.join(ROOT, job["config"]), "--set", "device=cpu",
           "--set", f"data.train={data}/train.h5", "--set", "data.val=", "--set", "data.test=",
           "--set", f"train.epochs={epochs}", "--set", "train.batch_size=64",
           "--set", "optimizer.schedule.type=constant", "--set", f"run.threads={job['threads']}",
           "--set", "train.progress_seconds=0", "--set", f"run.dir={run_dir}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{binary} {model} failed:\n{p.stdout}\n{p.stderr}")
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)["samples_per_second"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    data = os.path.abspath(args.data)
    result = {"what": "CPU training samples/s, NEW against OLD, interleaved runs",
              "old": args.old, "new": args.new,
              "epochs": args.epochs, "reps": args.reps, "models": {}}
    with tempfile.TemporaryDirectory() as work:
        for model in args.models.split(","):
            sides = {"old": [], "new": []}
            for rep in range(args.reps):
                order = ["old", "new"] if rep % 2 == 0 else ["new", "old"]
                for side in order:
                    sides[side].append(run(getattr(args, side), model, data, args.epochs, work))
            med = {s: statistics.median(v) for s, v in sides.items()}
            spread = {s: max(v) / min(v) - 1 for s, v in sides.items()}
            result["models"][model] = {
                **{f"{s}_samples_per_second": v for s, v in sides.items()},
                "old_median": med["old"], "new_median": med["new"],
                "ratio_new_over_old": med["new"] / med["old"],
                "old_spread": spread["old"], "new_spread": spread["new"],
                "ranks": JOBS[model]["ranks"], "threads": JOBS[model]["threads"]}
            print(f"{model}: old {med['old']:.0f} new {med['new']:.0f} samples/s (medians of "
                  f"{args.reps}), new/old {med['new'] / med['old']:.3f}; spread old "
                  f"{100 * spread['old']:.1f}% new {100 * spread['new']:.1f}%", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
