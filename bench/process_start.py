#!/usr/bin/env python3
"""What one hpctrain process costs before it works: wall time and peak memory (median of
--runs, interleaved) of commands that use no GPU, for a build with the CUDA backend and,
side by side, a CPU-only build (the peer: what a process costs with no CUDA at all).
`--version` loads the CUDA backend's module, as a rank that makes a CUDA backend does, so
it is the cost a CPU rank of a CUDA build no longer pays.

  bench/record.sh bench/results/process_start_cpu.json -- python3 bench/process_start.py \\
      --builds build build-cpu --data build/e2e-data/fashion-mnist \\
      --out bench/results/process_start_cpu.json
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def measure(cmd):
    """Wall seconds and peak resident KiB of one run of `cmd` (GNU time)."""
    with tempfile.NamedTemporaryFile("r") as t:
        subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%e %M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall, kib = t.read().split()[-2:]
    return float(wall), int(kib)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builds", nargs="+", required=True, help="build folders to compare")
    p.add_argument("--data", required=True, help="a Fashion-MNIST folder (test.h5)")
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    commands = {
        "--help": ["--help"],
        "inspect test.h5": ["inspect", os.path.join(a.data, "test.h5")],
        "--version": ["--version"],
    }
    samples = {(b, c): [] for b in a.builds for c in commands}
    for _ in range(a.runs):  # interleaved: every build and command once per round
        for b in a.builds:
            for c, args in commands.items():
                samples[(b, c)].append(measure([os.path.join(b, "hpctrain")] + args))
    result = {"runs": a.runs, "results": []}
    for (b, c), s in samples.items():
        version = subprocess.run([os.path.join(b, "hpctrain"), "--version"], capture_output=True,
                                 text=True).stdout
        row = {"build": b, "cuda": "backends: cpu, cuda" in version, "command": "hpctrain " + c,
               "median_s": statistics.median(w for w, _ in s),
               "median_max_rss_mib": round(statistics.median(k for _, k in s) / 1024, 1)}
        result["results"].append(row)
        print(f"{b:12} {row['command']:24} {row['median_s']:.3f} s "
              f"{row['median_max_rss_mib']:7.1f} MiB")
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
