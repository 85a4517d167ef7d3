#!/usr/bin/env python3
"""End-to-end tests of the hpctrain CLI: whole training runs under mpiexec, their
outputs (summary.json, metrics.csv), and the failure paths (bad config, missing
data, a killed rank). One case per ctest entry: e2e.py CASE --build DIR --data DIR.
HPCTRAIN_E2E_SETS="key=value ..." adds those --sets to every training run of a case
(before its own), e.g. train.cuda_graph=auto to run the cases with CUDA graphs on a GPU.
HPCTRAIN_E2E_CASE_SECONDS=N ends a case after N s (exit 124) and HPCTRAIN_E2E_STACKS=EU_STACK
prints the stacks of its jobs still running when a case or a run is cut short.
"""
import argparse
import os
import signal
import subprocess
import sys

import cases_async
import cases_batches
import cases_data
import cases_disk
import cases_export
import cases_hardening
import cases_hotpath
import cases_models
import cases_resume
import cases_runs
import cases_study
import cases_text
import cases_workflow
import harness


def over_time(limit):
    harness.dump_stacks(f"{harness.ARGS.case}: over HPCTRAIN_E2E_CASE_SECONDS ({limit} s)")
    sys.exit(124)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--build", required=True)
    ap.add_argument("--data", required=True)
    vars(harness.ARGS).update(vars(ap.parse_args()))
    case = harness.ARGS.case
    fn = None
    for module in (cases_runs, cases_resume, cases_models, cases_batches, cases_async,
                   cases_study, cases_text, cases_hardening, cases_disk, cases_workflow,
                   cases_export, cases_data, cases_hotpath):
        fn = fn or getattr(module, "case_" + case, None)
    if fn is None:
        harness.fail("no such case: " + case)
    # A timeout's TERM (device.sh's; ctest's timeout kills outright) ends the case through
    # the finally below. HPCTRAIN_E2E_CASE_SECONDS (device.sh's, below its TERM) ends it
    # first, with the stacks of its jobs still running (harness.dump_stacks), before the TERM
    # reaches them too.
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    limit = int(os.environ.get("HPCTRAIN_E2E_CASE_SECONDS", "0"))
    if limit > 0:
        signal.signal(signal.SIGALRM, lambda *_: over_time(limit))
        signal.alarm(limit)
    try:
        fn()
    except subprocess.TimeoutExpired as e:
        # A job the case waited for with a timeout: what it printed, and where it waits
        # (harness.train prints its own run's, and its jobs are gone by now).
        texts = [t if isinstance(t, str) else t.decode(errors="replace")
                 for t in (e.stdout, e.stderr) if t]
        if texts:
            print(f"(cut short after {e.timeout} s: its output so far follows)", file=sys.stderr)
            print("\n".join(texts), file=sys.stderr)
        harness.dump_stacks(f"{case}: a job timed out")
        raise
    finally:
        signal.alarm(0)
        harness.end_sessions()
    print("PASS: " + case)


if __name__ == "__main__":
    main()
