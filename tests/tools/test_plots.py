"""Tests of hpctrain_tools.plots: every figure of a run, a study and an all-reduce benchmark
is a PNG of a readable size, the figures without data (no energy, no power, no validation,
no model) are still written, and bad input is exit code 2 naming the file. Also: power is
averaged over a window from energy_j, bars that spread over decades go on a log axis, the
model's lines are against the baseline's strategy, and titles say what is drawn.

Run: /usr/bin/python3 -m unittest tests/tools/test_plots.py -v (needs matplotlib)."""

import contextlib
import io
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data-tools" / "python"))

from hpctrain_tools import plot_common, plot_study, plots  # noqa: E402

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


def study_doc(root, energies=None, edp_norm=None, train_s=None):
    """make_study's study.json as a dict, with each variant's energy_j mean (None: no
    reading), edp_norm or training seconds replaced where given."""
    make_study(root)
    doc = json.loads(Path(root, "study.json").read_text())
    for i, v in enumerate(doc["variants"]):
        if energies is not None:
            v["energy_j"] = energies[i] and stat(energies[i])
            v["energy_reason"] = None if energies[i] else "no RAPL counters readable"
        if edp_norm is not None:
            v["edp_norm"] = edp_norm[i]
        if train_s is not None:
            v["time_train_s"], v["time_s"] = stat(train_s[i]), stat(train_s[i] + 0.6)
    return doc


def stepped_counter(watts, step_s, interval_s=0.1, seconds=5.0):
    """One device's samples (times, power_w, energy_j) at a constant `watts` whose energy
    counter advances only every step_s, as NVML's and RAPL's do, read every interval_s."""
    times = [round(interval_s * (k + 1), 3) for k in range(round(seconds / interval_s))]
    joules = [watts * step_s * math.floor(t / step_s + 1e-9) for t in times]
    power = [(j - j0) / (t - t0)
             for t, j, t0, j0 in zip(times, joules, [0.0] + times, [0.0] + joules)]
    return times, power, joules


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

    def test_one_epoch_is_ticked_in_whole_epochs(self):
        # matplotlib's own limits around one point ticked 0.975, 0.990, 1.005 epochs.
        for epochs in ([1], [1, 2], list(range(1, 31))):
            fig, ax = plot_common.plt.subplots()
            ax.plot(epochs, [0.5] * len(epochs))
            plot_common._epoch_axis(ax, epochs)
            fig.canvas.draw()
            lo, hi = ax.get_xlim()
            ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
            self.assertTrue(ticks and all(t == int(t) for t in ticks), (epochs, ticks))
            plot_common.plt.close(fig)

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

    def test_a_link_where_a_plot_goes_is_replaced_not_written_through(self):
        run = Path(self.tmp, "run")
        run.mkdir()
        write_metrics(run / "metrics.csv", 2)
        victim = Path(self.tmp, "victim.txt")
        victim.write_text("precious\n")
        (run / "plots").mkdir()
        (run / "plots" / "curves.png").symlink_to(victim)
        plots.plot_run(str(run))
        self.assertEqual(victim.read_text(), "precious\n")
        self.assertFalse((run / "plots" / "curves.png").is_symlink())
        self.assertEqual((run / "plots" / "curves.png").read_bytes()[:4], b"\x89PNG")
        self.assertEqual(sorted(os.listdir(run / "plots")), ["curves.png"])

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
        # NaN, infinite sizes (1e400) and bandwidths: Python's json reads them (a traceback,
        # exit 1, where the ticks took the log of one)
        for text in ('{"points": [{"algorithm": "ring"}]}',
                     '{"points": [{"bytes": NaN, "busbw_GBps": 1}]}',
                     '{"points": [{"bytes": 4096, "busbw_GBps": 1}, {"bytes": 1e400, '
                     '"busbw_GBps": 1}]}',
                     '{"points": [{"bytes": 4096, "busbw_GBps": Infinity}]}'):
            Path(bench).write_text(text)
            rc, _, err = self.run_main(["allreduce", bench])
            self.assertEqual(rc, 2, text)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(bench, err)
        # A "runs" or "reps" that is not a count is left out of the title ('>' of a str).
        Path(bench).write_text('{"points": [{"bytes": 4096, "busbw_GBps": 1}], "runs": "2", '
                               '"reps": [3]}')
        rc, _, err = self.run_main(["allreduce", bench])
        self.assertEqual((rc, err), (0, ""))
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

    def test_power_is_averaged_over_a_window_from_energy(self):
        # 77 W on a counter that advances every 150 ms, read every 100 ms: power_w is 0 W
        # or 115.5 W from one interval to the next.
        times, power, joules = stepped_counter(77.0, 0.15)
        self.assertLess(min(power[5:]), 1.0)
        self.assertGreater(max(power[5:]), 1.4 * 77)
        window = plot_common.POWER_WINDOW_S
        self.assertEqual(window, 0.5)
        smooth = plot_common.window_power(times, joules)
        after = [w for t, w in zip(times, smooth) if t >= window]
        # Half a second holds 3 or 4 of the counter's steps: off by at most one step
        # (11.55 J) over the window, and right on average.
        for w in after:
            self.assertLessEqual(abs(w - 77.0), 77.0 * 0.15 / window + 1e-6)
        self.assertAlmostEqual(sum(after) / len(after), 77.0, delta=0.03 * 77)
        # A counter stepping every 40 ms (power_w: 61.6 or 92.4 W): within 5 %.
        times, power, joules = stepped_counter(77.0, 0.04)
        self.assertGreater(max(power) - min(power), 30.0)
        for t, w in zip(times, plot_common.window_power(times, joules)):
            if t >= window:
                self.assertAlmostEqual(w, 77.0, delta=0.05 * 77, msg=t)
        # The formula: from (0 s, 0 J) until 0.5 s have passed, then from the latest
        # sample at or before t - 0.5 s (at 0.8 s: 0.2 s, 70 J over 0.6 s); None for no
        # reading or no time to average over.
        w = plot_common.window_power([0.1, 0.2, 0.6, 0.8, 1.1], [10, 30, 60, 100, 190])
        self.assertEqual([round(x, 6) for x in w], [100, 150, 100, 116.666667, 260])
        self.assertEqual(plot_common.window_power([0.0, 0.1, 0.2, 0.3], [0, 10, None, 30]),
                         [None, 100, None, 100])

    def test_read_power_averages_and_falls_back_to_power_w(self):
        times, power, joules = stepped_counter(77.0, 0.15, seconds=2.0)
        path = Path(self.tmp, "power.csv")
        rows = [POWER_HEADER]
        for t, p, j in zip(times, power, joules):
            rows.append(f"{t:.3f},gpu0,{p:.3f},{j:.3f}\n")
            rows.append(f"{t:.3f},cpu0,{40 + (t * 10) % 3:.3f},\n")  # no energy_j
        path.write_text("".join(rows))
        series = plot_common.read_power(str(path))
        self.assertEqual(list(series), ["cpu0", "gpu0"])
        t, watts, averaged = series["gpu0"]
        self.assertEqual(t, times)
        expected = plot_common.window_power(times, [round(j, 3) for j in joules])
        self.assertEqual([round(w, 6) for w in watts], [round(w, 6) for w in expected])
        self.assertTrue(all(averaged))
        t, watts, averaged = series["cpu0"]
        self.assertEqual(watts, [round(40 + (x * 10) % 3, 3) for x in times])
        self.assertFalse(any(averaged))
        fig, ax = plot_common.plt.subplots()
        plot_common._plot_power(ax, {"gpu0": series["gpu0"]}, {"gpu0": "C0"})
        self.assertEqual(ax.get_ylabel(), "power (W), mean over 0.5 s")
        plot_common._plot_power(ax, series, {"gpu0": "C0", "cpu0": "C1"})
        self.assertIn("per sample where no energy_j", ax.get_ylabel())
        plot_common.plt.close(fig)
        # A file without the energy_j column: power_w as it is.
        path.write_text("time_s,device,power_w\n0.1,cpu0,30\n0.2,cpu0,50\n")
        self.assertEqual(plot_common.read_power(str(path)),
                         {"cpu0": ([0.1, 0.2], [30.0, 50.0], [False, False])})
        run = Path(self.tmp, "run")
        run.mkdir()
        write_metrics(run / "metrics.csv", 2)
        path.rename(run / "power.csv")
        self.assertEqual(len(plots.plot_run(str(run))), 2)

    def test_energy_title_says_na_only_when_a_reading_is_missing(self):
        doc = study_doc(self.tmp, energies=[300.0, 250.0, 400.0], edp_norm=[1.0, 0.8, 0.5])
        fig = plot_study._energy_figure(doc, self.tmp)
        self.assertEqual([t.get_text() for t in fig.texts], ["study_test: energy"])
        plot_common.plt.close(fig)
        doc = study_doc(os.path.join(self.tmp, "b"), energies=[300.0, 250.0, None],
                        edp_norm=[1.0, 0.8, None])
        fig = plot_study._energy_figure(doc, self.tmp)
        self.assertEqual([t.get_text() for t in fig.texts],
                         ["study_test: energy (n/a: no reading)"])
        self.assertIn("n/a", [t.get_text() for t in fig.axes[0].texts])
        plot_common.plt.close(fig)

    def test_titles_and_axes_say_what_ran(self):
        # A study stopped early: 3 repeats planned, 2 and 1 finished; the phases title
        # counts those, not the plan.
        doc = study_doc(self.tmp)
        doc["repeats"] = 3
        doc["variants"][2]["repeats_done"] = 1
        fig = plot_study._phases_figure(doc, self.tmp)
        self.assertIn("mean of 1 to 2 repeats", fig.axes[0].get_title())
        plot_common.plt.close(fig)
        # Without predictions the ranks axis ends near the measured devices (8), not 4096.
        doc["model"] = None
        fig = plot_study._scaling_model_figure(doc, self.tmp)
        self.assertLess(fig.axes[0].get_xlim()[1], 16)
        plot_common.plt.close(fig)

    def test_model_lines_share_the_reference_of_the_measured_points(self):
        # Baseline cpu-2, which ran allreduce without overlap: every model line is divided
        # by that pair's prediction at 2 ranks (each line was by its own, so a better pair
        # started at 100% too and a worse one could end above the measured points' scale).
        doc = study_doc(self.tmp)
        doc["baselines"] = ["cpu-2"]
        base = doc["variants"][1]
        for v in doc["variants"]:
            t = base["time_s"]["mean"] / v["time_s"]["mean"]
            v["speedup"]["cpu-2"] = {"total": t, "train": t}
            v["efficiency"] = v["efficiency_train"] = t * 2 / v["devices"]
        doc["model"]["measured_vs_predicted"][0].update(predicted_speedup=1.9,
                                                        predicted_efficiency=0.95)
        preds = {(p["strategy"], p["overlap"], p["ranks"]): p["efficiency"]
                 for p in doc["model"]["predictions"]}
        ref = preds[("allreduce", False, 2)]
        for draw in (plot_study._scaling_figure, plot_study._scaling_model_figure):
            fig = draw(doc, self.tmp)
            lines = {ln.get_label(): dict(zip(ln.get_xdata(), ln.get_ydata()))
                     for ln in fig.axes[-1].get_lines()}
            self.assertAlmostEqual(lines["model: allreduce, not overlapped"][2], 1.0)
            self.assertAlmostEqual(lines["model: allreduce, overlapped"][2],
                                   preds[("allreduce", True, 2)] / ref)
            self.assertAlmostEqual(lines["model: average"][4], preds[("average", False, 4)] / ref)
            plot_common.plt.close(fig)

    def test_a_model_without_predictions_says_so(self):
        doc = study_doc(self.tmp)
        doc["model"] = {"predictions": [], "measured_vs_predicted": [],
                        "note": "no multi-rank variant measured: no network to extrapolate with"}
        fig = plot_study._scaling_model_figure(doc, self.tmp)
        self.assertEqual(fig.axes[0].get_title(), "study_test: no predictions:\nno multi-rank "
                         "variant measured: no network to extrapolate with")
        plot_common.plt.close(fig)

    def test_a_merged_allreduce_file_says_each_point_is_the_faster_run(self):
        path = make_allreduce(os.path.join(self.tmp, "ar.json"), ("ring",))
        doc = json.loads(Path(path).read_text())
        titles = []
        with mock.patch.object(plots, "_save",
                               lambda fig, out: titles.append(fig.axes[0].get_title()) or out):
            plots.plot_allreduce(path)
            Path(path).write_text(json.dumps(dict(doc, runs=2)))
            plots.plot_allreduce(path)
        self.assertEqual(titles, [
            "all-reduce bus bandwidth on 4 ranks, median of 9 repetitions",
            "all-reduce bus bandwidth on 4 ranks, faster of 2 runs (each a median of 9 "
            "repetitions)"])

    def test_bars_that_spread_over_decades_go_on_a_log_axis(self):
        # 200x: the small bars would be a pixel high on a linear axis.
        doc = study_doc(self.tmp, energies=[60000.0, 300.0, 450.0],
                        edp_norm=[1.0, 0.005, 0.0075], train_s=[200.0, 0.9, 1.2])
        fig = plot_study._energy_figure(doc, self.tmp)
        for ax in fig.axes:
            self.assertEqual(ax.get_yscale(), "log")
            bottom = ax.get_ylim()[0]
            self.assertGreater(bottom, 0)
            for bar in ax.patches:  # every bar starts at the bottom and shows
                self.assertAlmostEqual(bar.get_y(), bottom)
                self.assertGreaterEqual(bar.get_y() + bar.get_height(), 1.5 * bottom)
        self.assertEqual([t.get_text() for t in fig.axes[0].texts],
                         ["60,000 J", "300 J", "450 J"])
        self.assertEqual([t.get_text() for t in fig.axes[1].texts], ["1x", "0.005x", "0.0075x"])
        plot_common.plt.close(fig)
        fig = plot_study._phases_figure(doc, self.tmp)
        ax = fig.axes[0]
        self.assertEqual(ax.get_yscale(), "log")
        self.assertEqual([t.get_text() for t in ax.texts], ["201 s", "1.5 s", "1.8 s"])
        bottom = ax.get_ylim()[0]
        train = ax.patches[:3]  # stacked: train, then validation and test on top
        for bar in train:
            self.assertAlmostEqual(bar.get_y(), bottom)
            self.assertGreaterEqual(bar.get_height(), 0.5 * bottom)
        for below, above in zip(ax.patches, ax.patches[3:]):
            self.assertAlmostEqual(above.get_y(), below.get_y() + below.get_height())
        plot_common.plt.close(fig)
        # 2x: linear, from 0, as before, no values written.
        doc = study_doc(os.path.join(self.tmp, "b"), energies=[300.0, 450.0, 600.0],
                        edp_norm=[1.0, 0.7, 0.5], train_s=[2.0, 3.0, 4.0])
        for draw in (plot_study._energy_figure, plot_study._phases_figure):
            fig = draw(doc, self.tmp)
            for ax in fig.axes:
                self.assertEqual(ax.get_yscale(), "linear")
                self.assertEqual(ax.get_ylim()[0], 0)
                self.assertEqual([t for t in ax.texts if t.get_text() != "n/a"], [])
            plot_common.plt.close(fig)


if __name__ == "__main__":
    unittest.main()
