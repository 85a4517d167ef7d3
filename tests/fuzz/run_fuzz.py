#!/usr/bin/env python3
"""Runs one libFuzzer target of the sanitize build and sorts what it finds by where it
happened. libFuzzer runs in fork mode, going on past crashes, hangs and out-of-memory
inputs; each one it saved is then run again alone and its stack read:

- in hpctrain (any frame of ours innermost, or a reader's answer other than a UsageError,
  which the target reports as "fuzz: not a UsageError"): a finding, and the exit code is 1;
- inside the HDF5 library (its innermost frame past the sanitizer, libFuzzer and libc is in
  libhdf5): recorded as the library's, not failing. HDF5 1.10 is not hardened against
  crafted files (its global heap, which holds variable-length strings, is one known
  place); checkpoints reach it only with a whole-file checksum that matches, and a hang
  while opening data is ended by the training watchdog (docs/contracts.md);
- an out-of-memory by peak RSS that names no allocation even when run again with a malloc
  limit (PEAK_MALLOC_LIMIT_MB): recorded as unattributed, not failing, with the reason.

  run_fuzz.py --fuzzer build-sanitize/fuzz_dataset --work DIR --seconds 60 SEEDS...
  run_fuzz.py ... --record bench/results/fuzz_long_runs.json   (adds the run to that file)
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys

# Frames that belong to the machinery around a finding, not to where it happened.
MACHINERY = ("__sanitizer", "__interceptor", "__asan", "__ubsan", "__lsan", "fuzzer::",
             "libc.so", "sysdeps/", "pthread_kill", "raise", "abort", "LLVMFuzzerTestOneInput")
# The C library functions the sanitizer intercepts: a frame of one of them is the call a
# faulty caller made, so the caller is where it happened.
INTERCEPTED = ("malloc", "calloc", "realloc", "free", "strdup", "strndup", "memcpy", "memmove",
               "memset", "memcmp", "strlen", "strnlen", "strcmp", "strncmp", "strcpy",
               "strncpy", "operator new", "operator delete")
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ (?:in )?(.*)$")
# libFuzzer's RSS limit is on the process's peak RSS (getrusage), which an allocation freed
# before its once-a-second check still counts: its report then lists no live allocation of
# the input's. The input is run again with this malloc limit, so that the allocation that
# made the peak stops with its stack; the largest one hpctrain's readers make under the
# targets is a few MiB (a batch of rows, a block of labels).
RSS_OUT_OF_MEMORY = "ERROR: libFuzzer: out-of-memory (used:"
PEAK_MALLOC_LIMIT_MB = 128


def machinery(frame):
    # "main": libFuzzer's (a fuzz target has none of its own).
    return (any(k in frame for k in MACHINERY) or frame.startswith("main (")
            or any(frame.startswith(f + " ") or frame.startswith(f + "(") for f in INTERCEPTED))


def innermost(stderr):
    """The first frame of the first stack in `stderr` that is not machinery."""
    for line in stderr.splitlines():
        m = FRAME.match(line)
        if m and not machinery(m.group(1)):
            return m.group(1)
    return ""


def culprit(stderr):
    """The frame a finding's report blames. Out of memory by the RSS limit: what holds the
    memory is in the live heap's contexts it lists (largest first; libFuzzer's own buffers
    are machinery), not in whichever thread's stack comes first."""
    heap = stderr.split("Live Heap Allocations", 1)
    return innermost(heap[1] if len(heap) == 2 else stderr)


def classify(fuzzer, artifact, env, timeout=5, malloc_limit_mb=None):
    """Where `artifact` fails when run again. A timeout that stops in hpctrain's code is run
    once more with 60 s: an input that is only slow on a loaded machine (over the fuzzing
    run's 10 s) is not a hang. An out-of-memory report with no frame to blame is run once
    more with a malloc limit far below the RSS one (PEAK_MALLOC_LIMIT_MB)."""
    cmd = [fuzzer, f"-timeout={timeout}", "-rss_limit_mb=2048", artifact]
    if malloc_limit_mb is not None:
        cmd.insert(-1, f"-malloc_limit_mb={malloc_limit_mb}")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode == 0:
        return "not reproduced", ""
    if "fuzz: not a UsageError" in p.stderr:
        line = next(l for l in p.stderr.splitlines() if "fuzz: not a UsageError" in l)
        return "hpctrain", line.strip()
    frame = culprit(p.stderr)
    if "libhdf5" in frame:
        return "hdf5", frame[:300]
    if timeout < 60 and "ERROR: libFuzzer: timeout" in p.stderr:
        return classify(fuzzer, artifact, env, timeout=60)
    if not frame and RSS_OUT_OF_MEMORY in p.stderr:
        if malloc_limit_mb is None:
            return classify(fuzzer, artifact, env, timeout, PEAK_MALLOC_LIMIT_MB)
        return "unattributed", (f"peak RSS over 2048 MB with no live allocation and none "
                                f"over {malloc_limit_mb} MB to blame")
    return "hpctrain", frame[:300]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuzzer", required=True)
    ap.add_argument("--work", required=True, help="scratch folder: corpus, artifacts, logs")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--record", help="JSON file to add this run to")
    ap.add_argument("seeds", nargs="*")
    args = ap.parse_args()
    fuzzer = os.path.abspath(args.fuzzer)
    name = os.path.basename(fuzzer)
    work = os.path.abspath(args.work)
    found = os.path.join(work, "found")
    shutil.rmtree(found, ignore_errors=True)
    os.makedirs(found)
    os.makedirs(os.path.join(work, "corpus"), exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TMPDIR=work,
               LSAN_OPTIONS="suppressions=" + os.path.join(here, "lsan.supp"))
    cmd = [fuzzer, "-fork=1", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1",
           f"-max_total_time={args.seconds}", "-timeout=10", "-rss_limit_mb=2048",
           f"-artifact_prefix={found}/", os.path.join(work, "corpus")]
    cmd += [os.path.abspath(s) for s in args.seeds]
    print("+ " + " ".join(cmd), flush=True)
    log = os.path.join(work, "fuzz.log")
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=work,
                           timeout=args.seconds + 600)
    with open(log) as f:
        text = f.read()
    for scratch in glob.glob(os.path.join(work, "hpctrain-fuzz-*")):  # each job's input file
        os.remove(scratch)
    runs = [int(m) for m in re.findall(r"^#(\d+):", text, re.M)]
    executions = max(runs) if runs else None
    findings = []
    for artifact in sorted(glob.glob(os.path.join(found, "*"))):
        where, frame = classify(fuzzer, artifact, env)
        kind = os.path.basename(artifact).split("-")[0]
        findings.append({"input": os.path.basename(artifact), "kind": kind, "where": where,
                         "frame": frame})
        print(f"{name}: {kind} in {where}: {frame}  ({artifact})")
    ours = [f for f in findings if f["where"] == "hpctrain"]
    print(f"{name}: fuzz exit {p.returncode}, {executions} executions in {args.seconds} s; "
          f"{len(findings)} finding(s), {len(ours)} in hpctrain")
    if args.record:
        record = {"runs": []}
        if os.path.exists(args.record):
            with open(args.record) as f:
                record = json.load(f)
        record["runs"] = [r for r in record["runs"] if r["target"] != name]
        record["runs"].append({
            "target": name, "seconds": args.seconds, "executions": executions,
            "findings_in_hpctrain": len(ours),
            "findings_in_hdf5": sum(f["where"] == "hdf5" for f in findings),
            "not_reproduced": sum(f["where"] == "not reproduced" for f in findings),
            "unattributed": sum(f["where"] == "unattributed" for f in findings),
            "findings": findings,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "tests/fuzz/run_fuzz.py " + " ".join(
                "SCRATCH" if a == args.work else a for a in sys.argv[1:])})
        record["runs"].sort(key=lambda r: r["target"])
        with open(args.record, "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
    if p.returncode != 0 and executions is None:
        print(text[-3000:])
        sys.exit(1)
    sys.exit(1 if ours else 0)


if __name__ == "__main__":
    main()
