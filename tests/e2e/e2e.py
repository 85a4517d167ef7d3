#!/usr/bin/env python3
"""End-to-end tests of the hpctrain CLI: whole training runs under mpiexec, their
outputs (summary.json, metrics.csv), and the failure paths (bad config, missing
data, a killed rank). One case per ctest entry: e2e.py CASE --build DIR --data DIR.
HPCTRAIN_E2E_SETS="key=value ..." adds those --sets to every training run of a case
(before its own), e.g. train.cuda_graph=auto to run the cases with CUDA graphs on a GPU.
"""
import argparse
import signal
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
    # the finally below.
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    try:
        fn()
    finally:
        harness.end_sessions()
    print("PASS: " + case)


if __name__ == "__main__":
    main()
