"""What the tests of the Python tools share: a run directory as training writes it, and
a command's main() run with its output caught."""

import contextlib
import io
import json
import os

HEADER = ("epoch,train_loss,train_accuracy,val_loss,val_accuracy,lr,time_train_s,time_val_s,"
          "samples_per_second,data_wait_s,comm_s\n")


def make_run(root, name, epochs, test_s=0.5, energy_j=100.0, sps=1000.0, batch=64,
             **summary):
    """A run directory: metrics.csv rows (epoch, train_s, val_s, val_acc) and summary.json
    (with the `summary` keys replaced: world_size=2, resumed_from=40)."""
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "metrics.csv"), "w") as f:
        f.write(HEADER)
        for e, tr, va, acc in epochs:
            f.write(f"{e},0.5,0.8,0.4,{acc},0.1,{tr},{va},{sps},0,0\n")
    energy = {"cpu_j": energy_j, "total_j": energy_j, "seconds": 2.0} if energy_j else \
        {"cpu_j": None, "cpu_reason": "no powercap", "total_j": None, "seconds": 2.0}
    s = {"backend": "cpu", "strategy": "allreduce", "algorithm": "ring", "world_size": 1,
         "threads_per_rank": 1, "global_batch": batch, "param_count": 1000,
         "samples_per_second": sps, "time_test_s": test_s, "test_accuracy": 0.8,
         "energy": energy, "edp": energy_j * 2.0 if energy_j else None,
         "step_phase_fractions": None, "step_phases_s": None, **summary}
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(s, f)
    return d


def run_main(main, argv):
    """(exit code, stdout, stderr) of a command's main(argv); SystemExit counts as a return."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()
