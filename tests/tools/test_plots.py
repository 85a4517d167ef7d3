"""Tests of hpctrain_tools.plots: every figure of a run, a study and an all-reduce benchmark
is a PNG of a readable size, the figures without data (no energy, no power, no validation,
no model) are still written, and bad input is exit code 2 naming the file.

Run: /usr/bin/python3 -m unittest tests/tools/test_plots.py -v (needs matplotlib)."""

import contextlib
import io
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data-tools" / "python"))

from hpctrain_tools import plots  # noqa: E402

METRICS_HEADER = ("epoch,train_loss,train_accuracy,val_loss,val_accuracy,lr,time_train_s,"
                  "time_val_s,samples_per_second,data_wait_s,comm_s\n")
POWER_HEADER = "time_s,device,power_w,energy_j\n"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_metrics(path, epochs, skip_val=(), resumed=False):
    """metrics.csv with `epochs` rows (no validation in `skip_val`); `resumed` repeats
    epoch 2 first with other values, as a resumed run does."""
    rows = [METRICS_HEADER]
    if resumed:
        rows.append("2,9.0,0.1,9.0,0.1,0.01,1.0,0.1,100,0,0\n")
    for e in range(1, epochs + 1):
        val = ",," if e in skip_val else f"{0.9 / e:.3f},{0.6 + 0.05 * e:.3f},"
        rows.append(f"{e},{1.0 / e:.3f},{0.55 + 0.06 * e:.3f},{val}0.01,1.5,0.2,1000,0.01,0.1\n")
    Path(path).write_text("".join(rows))


def write_power(path, devices, samples=20):
    rows = [POWER_HEADER]
    for i in range(samples):
        for k, d in enumerate(devices):
            rows.append(f"{0.5 * i:.3f},{d},{30 + 10 * k + (i % 4):.3f},{15.0 * i:.3f}\n")
    Path(path).write_text("".join(rows))


def stat(mean, spread=0.05):
    return {"mean": mean, "min": mean * (1 - spread), "max": mean * (1 + spread)}


def per_epoch(values):
    return {"mean": values, "min": [x - 0.01 for x in values], "max": [x + 0.01 for x in values]}


def variant(name, devices, train_s, energy=True, validation=True):
    """One study.json variant with cpu-1 (5.0 s of training) as its baseline."""
    scale = 5.0 / train_s
    acc = [0.70 + 0.05 * e - 0.02 * devices for e in range(3)]
    return {
        "name": name, "ranks": devices, "devices": devices, "device": "cpu", "repeats_done": 2,
        "time_train_s": stat(train_s), "time_val_s": stat(0.4), "time_test_s": stat(0.2),
        "time_s": stat(train_s + 0.6), "step_time_s": stat(0.01 * train_s),
        "samples_per_second": stat(12000 / train_s),
        "speedup": {"cpu-1": {"total": 5.6 / (train_s + 0.6), "train": scale,
                              "total_min": 5.6 / (train_s + 0.6) * 0.95,
                              "total_max": 5.6 / (train_s + 0.6) * 1.05}},
        "efficiency": 5.6 / (train_s + 0.6) / devices, "efficiency_train": scale / devices,
        "energy_j": stat(300.0 * train_s / 5.0 * devices ** 0.5) if energy else None,
        "energy_reason": None if energy else "no RAPL counters readable",
        "edp": stat(1000.0) if energy else None, "edp_norm": 1.0 / devices if energy else None,
        "test_accuracy": stat(0.8, 0.01), "epochs": [1, 2, 3],
        "val_accuracy_per_epoch": per_epoch(acc) if validation else None,
        "train_accuracy_per_epoch": per_epoch(acc), "train_loss_per_epoch": per_epoch(acc),
        "val_loss_per_epoch": per_epoch(acc) if validation else None,
        "runs": [f"runs/{name}/r0", f"runs/{name}/r1"],
    }


def model_doc():
    preds = []
    for p in [2 ** k for k in range(1, 13)]:
        for strategy, overlap, loss in (("allreduce", True, 0.02), ("allreduce", False, 0.05),
                                        ("average", False, 0.03), ("async", False, 0.08)):
            eff = 1.0 / (1.0 + loss * (p ** 0.5))
            preds.append({"ranks": p, "strategy": strategy, "overlap": overlap,
                          "step_s": 0.01 / eff, "speedup": eff * p, "efficiency": eff})
    return {"predictions": preds, "measured_vs_predicted": [
        {"variant": "cpu-2", "ranks": 2, "measured_step_s": 0.02, "predicted_step_s": 0.021,
         "error": 0.05}]}


def make_study(root, energy=True, power=True, validation=True, model=True):
    """A study directory with cpu-1, cpu-2 and cpu-8 (a log2 devices axis), two runs each;
    cpu-8 has no energy."""
    variants = [variant("cpu-1", 1, 5.0, energy, validation),
                variant("cpu-2", 2, 2.7, energy, validation),
                variant("cpu-8", 8, 0.9, False, validation)]
    for v in variants:
        for run in v["runs"]:
            d = Path(root, run)
            d.mkdir(parents=True)
            write_metrics(d / "metrics.csv", 3)
            if power:
                write_power(d / "power.csv", ["cpu0", "dram0"])
            else:
                Path(d / "power.csv").write_text(POWER_HEADER)
    doc = {"study": "study_test", "repeats": 2, "baselines": ["cpu-1"], "variants": variants,
           "model": model_doc() if model else None}
    Path(root, "study.json").write_text(json.dumps(doc, indent=1))
    return root


def make_allreduce(path, algorithms=("ring", "mpi", "nccl")):
    points = []
    for k in range(12, 29):
        for i, a in enumerate(algorithms):
            bw = 10.0 * (1 + i) * (2 ** k) / (2 ** k + 2 ** 20)
            points.append({"algorithm": a, "bytes": 2 ** k, "time_s": 2 ** k / bw / 1e9,
                           "algbw_GBps": bw, "busbw_GBps": bw})
    Path(path).write_text(json.dumps({"benchmark": "allreduce", "ranks": 4,
                                      "chunk_bytes": 1 << 20, "reps": 9, "points": points}))
    return path


class PlotsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_plots_")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def assert_png(self, path, min_width=500, min_height=300):
        """A PNG file whose IHDR chunk gives at least min_width x min_height pixels."""
        data = Path(path).read_bytes()
        self.assertEqual(data[:8], PNG_SIGNATURE, path)
        self.assertEqual(data[12:16], b"IHDR", path)
        width, height = struct.unpack(">II", data[16:24])
        self.assertGreaterEqual(width, min_width, path)
        self.assertGreaterEqual(height, min_height, path)

    def run_main(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = plots.main(argv)
        return rc, out.getvalue(), err.getvalue()

    def test_study_writes_every_figure(self):
        study = make_study(self.tmp)
        written = plots.plot_study(study)
        names = plots.study_plot_names()
        self.assertEqual(len(names), 6)
        self.assertEqual(written, [os.path.join(study, "plots", n) for n in names])
        for path in written:
            self.assert_png(path)
        self.assert_png(os.path.join(study, "plots", "scaling.png"), min_width=1000)

    def test_study_without_energy_power_validation_or_model(self):
        study = make_study(self.tmp, energy=False, power=False, validation=False, model=False)
        written = plots.plot_study(study)
        self.assertEqual([os.path.basename(p) for p in written], plots.study_plot_names())
        for name in ("energy.png", "power.png", "accuracy.png", "scaling_model.png"):
            self.assert_png(os.path.join(study, "plots", name))

    def test_run_with_resume_and_power(self):
        run = Path(self.tmp, "run")
        run.mkdir()
        write_metrics(run / "metrics.csv", 4, skip_val=(3,), resumed=True)
        write_power(run / "power.csv", ["cpu0", "dram0", "gpu0"])
        written = plots.plot_run(str(run))
        self.assertEqual(written, [str(run / "plots" / "curves.png"),
                                   str(run / "plots" / "power.png")])
        self.assert_png(written[0], min_width=1000)
        self.assert_png(written[1])

    def test_run_metrics_last_row_of_an_epoch_wins(self):
        path = Path(self.tmp, "metrics.csv")
        write_metrics(path, 3, skip_val=(3,), resumed=True)
        epochs = plots.read_metrics(str(path))
        self.assertEqual(list(epochs), [1, 2, 3])
        self.assertAlmostEqual(epochs[2]["train_loss"], 0.5)
        self.assertIsNone(epochs[3]["val_accuracy"])

    def test_run_without_power_writes_curves_only(self):
        run = Path(self.tmp, "run")
        run.mkdir()
        write_metrics(run / "metrics.csv", 2)
        out = Path(self.tmp, "elsewhere")
        self.assertEqual(plots.plot_run(str(run), str(out)), [str(out / "curves.png")])

    def test_allreduce(self):
        path = make_allreduce(os.path.join(self.tmp, "ar.json"))
        written = plots.plot_allreduce(path)
        self.assertEqual(written, [os.path.join(self.tmp, "ar.png")])
        self.assert_png(written[0])
        self.assertEqual(plots._human_bytes(4096), "4 KiB")
        self.assertEqual(plots._human_bytes(256 << 20), "256 MiB")

    def test_main_prints_what_it_wrote(self):
        study = make_study(os.path.join(self.tmp, "study"))
        rc, out, _ = self.run_main(["study", study])
        self.assertEqual(rc, 0)
        self.assertEqual(out.splitlines(), [f"wrote {os.path.join(study, 'plots', n)}"
                                            for n in plots.study_plot_names()])
        bench = make_allreduce(os.path.join(self.tmp, "ar.json"), ("ring", "mpi"))
        png = os.path.join(self.tmp, "out", "bw.png")
        rc, out, _ = self.run_main(["allreduce", bench, "--out", png])
        self.assertEqual((rc, out), (0, f"wrote {png}\n"))
        self.assert_png(png)

    def test_main_bad_input_is_exit_2_naming_the_file(self):
        study = os.path.join(self.tmp, "study")
        os.makedirs(study)
        bad = os.path.join(study, "study.json")
        for text in ('{"variants": [', '{"variants": []}', '{"variants": [{"name": "a"}]}',
                     '{"variants": [{"name": "a", "devices": 1, "time_s": 3}]}'):
            Path(bad).write_text(text)
            rc, out, err = self.run_main(["study", study])
            self.assertEqual(rc, 2, text)
            self.assertEqual(out, "")
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(bad, err)
        missing = os.path.join(self.tmp, "no_run")
        rc, _, err = self.run_main(["run", missing])
        self.assertEqual(rc, 2)
        self.assertIn(os.path.join(missing, "metrics.csv"), err)
        bench = os.path.join(self.tmp, "ar.json")
        Path(bench).write_text('{"points": [{"algorithm": "ring"}]}')
        rc, _, err = self.run_main(["allreduce", bench])
        self.assertEqual(rc, 2)
        self.assertIn(bench, err)
        for argv in ([], ["run"], ["bogus", "x"]):  # argument errors: one line too
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
                plots.main(argv)
            self.assertEqual(e.exception.code, 2)
            self.assertEqual(len(err.getvalue().splitlines()), 1, err.getvalue())

    def test_main_out_that_cannot_be_made_is_exit_2_naming_out(self):
        run = Path(self.tmp, "run")
        run.mkdir()
        write_metrics(run / "metrics.csv", 2)
        bench = make_allreduce(os.path.join(self.tmp, "ar.json"))
        afile = os.path.join(self.tmp, "afile")
        Path(afile).write_text("")
        cases = [(["run", str(run), "--out", afile], f"--out {afile}: not a directory"),
                 (["run", str(run), "--out", "/proc/nope"], "--out /proc/nope: cannot create: "),
                 (["run", str(run), "--out", os.path.join(afile, "x")],
                  f"--out {os.path.join(afile, 'x')}: cannot create: "),
                 (["allreduce", bench, "--out", self.tmp], f"--out {self.tmp}: a directory"),
                 (["allreduce", bench, "--out", os.path.join(afile, "x.png")],
                  f"--out {os.path.join(afile, 'x.png')}: {afile} is not a directory"),
                 (["allreduce", bench, "--out", "/proc/nope/x.png"],
                  "--out /proc/nope/x.png: cannot create /proc/nope: "),
                 (["allreduce", bench, "--out", "/proc/x.png"], "--out /proc/x.png: cannot write")]
        for argv, start in cases:
            rc, out, err = self.run_main(argv)
            self.assertEqual((rc, out), (2, ""), argv)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("error: " + start), err)
        study = make_study(os.path.join(self.tmp, "study"))
        Path(study, "plots").write_text("")
        rc, out, err = self.run_main(["study", study])
        self.assertEqual((rc, err), (2, f"error: {study}/plots: not a directory\n"))


if __name__ == "__main__":
    unittest.main()
