"""One `hpctrain train` run of a CPU benchmark in bench/: the command (MPIEXEC or mpiexec,
the config of the repository, the CPU, no progress lines, the run directory, then the
benchmark's --set values), echoed before it runs; a failure ends the benchmark with the
run's output. Returns the run's summary.json, its metrics.csv rows and its stdout."""
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train(build, ranks, config, run_dir, sets, name):
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(ranks),
           os.path.join(build, "hpctrain"), "train", os.path.join(ROOT, config),
           "--set", "device=cpu", "--set", "train.progress_seconds=0",
           "--set", f"run.dir={run_dir}"]
    for s in sets:
        cmd += ["--set", s]
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{name} failed:\n{p.stdout}\n{p.stderr}")
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    return summary, rows, p.stdout
