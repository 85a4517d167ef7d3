#!/usr/bin/env python3
"""Flips every byte of a small checkpoint, one at a time (or a random sample of them), and
checks what hpctrain makes of each file:

- `hpctrain inspect FILE` finishes within the time limit, does not crash, and never
  reports a changed file as valid (exit 2 for every flip);
- for a sample of the flipped files put in place of the newest checkpoint,
  `hpctrain train --resume auto` falls back to the previous checkpoint and ends with the
  parameters of the uninterrupted run (deterministic mode).

    tests/fuzz/checkpoint_flip_sweep.py --build build --data DIR [--sample N] [--resumes K]
                                        [--jobs J] [--out RESULT.json]

DIR holds Fashion-MNIST's test.h5 (hpctrain-data fashion-mnist --out DIR). Without
--sample every byte is flipped; CI runs a sample (tests/e2e, case checkpoint_flip_sample).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

MODEL = ["model.hidden=[3]", "train.epochs=2", "train.batch_size=50", "run.deterministic=true",
         "optimizer.momentum=0.9", "data.val=", "data.test=", "train.progress_seconds=0",
         "checkpoint.keep=10"]


def train(build, data, run_dir, extra, resume=None, ranks=2):
    cmd = ["mpiexec", "-n", str(ranks), os.path.join(build, "hpctrain"), "train",
           "configs/fashion_mnist_mlp.yaml", "--set", f"data.train={data}/test.h5",
           "--set", f"run.dir={run_dir}"]
    for s in MODEL + extra:
        cmd += ["--set", s]
    if resume:
        cmd += ["--resume", resume]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    summary = None
    path = os.path.join(run_dir, "summary.json")
    if p.returncode == 0 and os.path.exists(path):
        with open(path) as f:
            summary = json.load(f)
    return p, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--sample", type=int, default=0, help="bytes to flip (0: every byte)")
    ap.add_argument("--resumes", type=int, default=3, help="flipped files to resume from")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds per inspect")
    ap.add_argument("--jobs", type=int, default=2, help="inspects at a time")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ht_flip_")
    failures = []
    try:
        # 1. An uninterrupted run writes the checkpoints (every 50 steps) and the final sha.
        full = os.path.join(work, "full")
        p, s = train(args.build, args.data, full, ["checkpoint.every_steps=50"])
        if s is None:
            sys.exit(f"the reference run failed:\n{p.stdout}\n{p.stderr}")
        ckpts = sorted(glob.glob(os.path.join(full, "checkpoints", "ckpt-*.h5")))
        newest, previous = ckpts[-2], ckpts[-3]  # ckpts[-1] is the final state
        with open(newest, "rb") as f:
            original = f.read()
        offsets = list(range(len(original)))
        rng = random.Random(args.seed)
        if args.sample:
            offsets = sorted(rng.sample(offsets, min(args.sample, len(offsets))))
        print(f"{os.path.basename(newest)}: {len(original)} bytes, flipping {len(offsets)}",
              flush=True)

        # 2. inspect of each flipped file (--jobs at a time).
        def inspect(i):
            flipped = os.path.join(work, f"ckpt-flipped-{i}.h5")
            b = bytearray(original)
            b[i] ^= 0x01
            with open(flipped, "wb") as f:
                f.write(b)
            t0 = time.monotonic()
            try:
                r = subprocess.run([os.path.join(args.build, "hpctrain"), "inspect", flipped],
                                   capture_output=True, text=True, timeout=args.timeout)
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            os.remove(flipped)
            return i, rc, time.monotonic() - t0

        slowest, codes, late = 0.0, {}, []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(inspect, offsets))
        # A machine busy with other tests can hold a start-up past the limit: a flip that
        # timed out is tried again alone, and counts as a hang only if it times out again.
        for n, (i, rc, _) in enumerate(results):
            if rc == "timeout":
                late.append(i)
                results[n] = inspect(i)
        for i, rc, seconds in results:
            slowest = max(slowest, seconds)
            codes[str(rc)] = codes.get(str(rc), 0) + 1
            if rc != 2:
                failures.append(f"byte {i}: inspect gave {rc}, expected 2")
        print(f"inspect: exit codes {codes}, slowest {slowest:.3f} s"
              f"{f' (timed out at first, tried again alone: bytes {late})' if late else ''}",
              flush=True)

        # 3. --resume auto with a flipped newest checkpoint falls back to the previous one
        # and ends with the uninterrupted run's parameters.
        resumed = []
        for i in rng.sample(offsets, min(args.resumes, len(offsets))):
            run = os.path.join(work, f"resume_{i}")
            os.makedirs(os.path.join(run, "checkpoints"))
            shutil.copy(previous, os.path.join(run, "checkpoints"))
            b = bytearray(original)
            b[i] ^= 0x01
            with open(os.path.join(run, "checkpoints", os.path.basename(newest)), "wb") as f:
                f.write(b)
            p, r = train(args.build, args.data, run, ["checkpoint.every_steps=50"], "auto")
            ok = (r is not None and r["params_sha256"] == s["params_sha256"] and
                  "skipping it for an older checkpoint" in p.stderr and
                  f"loaded checkpoint {os.path.join(run, 'checkpoints', os.path.basename(previous))}"
                  in p.stdout)
            resumed.append({"byte": i, "ok": ok})
            if not ok:
                failures.append(f"byte {i}: --resume auto did not fall back and finish alike:\n"
                                f"{p.stdout}\n{p.stderr}")
        print(f"resume auto: {sum(r['ok'] for r in resumed)}/{len(resumed)} fell back and "
              f"matched the uninterrupted parameters", flush=True)
        result = {"checkpoint_bytes": len(original), "flipped": len(offsets),
                  "inspect_exit_codes": codes, "slowest_inspect_s": round(slowest, 3),
                  "retried_alone": late,
                  "resumes": resumed, "failures": failures[:20]}
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in failures[:20]:
        print("FAIL: " + line)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
