"""Unit tests of the study's arithmetic: reading run directories, mean/min/max over
repeats, speedup, efficiency and EDP normalisation, the scaling model's calibration from a
study's runs, the study file's defaults, and bad input to `hpctrain study` (exit 2, one
line naming the key or option): study
files with duplicate keys or values of the wrong type, training keys that a stand-in
`hpctrain inspect` refuses, an --out that cannot be a directory, a report with no finished
run; plots that fail (exit 1), and --dry-run printing the very commands that run."""

import contextlib
import io
import json
import os
import shlex
import signal
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data-tools" / "python"))

from hpctrain_tools import aggregate, report, scaling, study, studyfile  # noqa: E402

HEADER = ("epoch,train_loss,train_accuracy,val_loss,val_accuracy,lr,time_train_s,time_val_s,"
          "samples_per_second,data_wait_s,comm_s\n")


def make_run(root, name, epochs, test_s=0.5, energy_j=100.0, sps=1000.0, batch=64):
    """A run directory: metrics.csv rows (epoch, train_s, val_s, val_acc) and summary.json."""
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
         "step_phase_fractions": None, "step_phases_s": None}
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(s, f)
    return d


class Aggregation(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_resumed_epoch_counts_once_and_loses_its_energy(self):
        # Epoch 2 was interrupted and trained again: its last row is the one that counts.
        d = make_run(self.root, "r", [(1, 2.0, 0.1, 0.7), (2, 9.0, 0.1, 0.1),
                                      (2, 2.0, 0.1, 0.8)])
        r = aggregate.read_run(d)
        self.assertAlmostEqual(r["time_train_s"], 4.0)
        self.assertAlmostEqual(r["time_s"], 4.0 + 0.2 + 0.5)
        self.assertEqual(r["epochs"][2]["val_accuracy"], 0.8)
        self.assertEqual(r["energy_j"], 100.0)
        self.assertAlmostEqual(r["step_time_s"], 64 / 1000.0)
        self.assertFalse(r["resumed"])
        # Resumed is what summary.json says (resumed_from), not how often the driver
        # started the run: a first attempt that failed before any checkpoint resumes nothing.
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
        s["resumed_from"] = 40
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(s, f)
        resumed = aggregate.read_run(d)
        self.assertTrue(resumed["resumed"])
        self.assertIsNone(resumed["energy_j"])
        self.assertIsNone(resumed["edp"])
        self.assertIn("resumed", resumed["energy_reason"])

    def test_null_and_non_finite_figures_count_as_missing(self):
        # hpctrain writes a non-finite figure as null: left out, never counted as 0.
        good = make_run(self.root, "good", [(1, 1.0, 0.1, 0.7)], sps=1000.0)
        null = make_run(self.root, "null", [(1, 1.0, 0.1, 0.7)], sps=1000.0)
        with open(os.path.join(null, "summary.json")) as f:
            s = json.load(f)
        s["samples_per_second"] = None
        s["test_accuracy"] = float("nan")
        with open(os.path.join(null, "summary.json"), "w") as f:
            json.dump(s, f)
        runs = [aggregate.read_run(good), aggregate.read_run(null)]
        self.assertIsNone(runs[1]["step_time_s"])
        v = aggregate.summarise_variant({"name": "v", "ranks": 1, "devices": 1}, runs)
        self.assertEqual(v["samples_per_second"]["mean"], 1000.0)
        self.assertEqual(v["test_accuracy"]["mean"], 0.8)
        self.assertIsNone(aggregate.stats([float("inf"), float("nan")]))

    def test_unreadable_energy_keeps_its_reason(self):
        d = make_run(self.root, "r", [(1, 1.0, 0.1, 0.7)], energy_j=None)
        r = aggregate.read_run(d)
        self.assertIsNone(r["energy_j"])
        self.assertEqual(r["energy_reason"], "no powercap")

    def test_missing_summary_names_the_file(self):
        os.makedirs(os.path.join(self.root, "empty"))
        with self.assertRaisesRegex(aggregate.RunError, "summary.json"):
            aggregate.read_run(os.path.join(self.root, "empty"))

    def test_stats_and_per_epoch_bands(self):
        self.assertEqual(aggregate.stats([3.0, None, 1.0, 2.0]),
                         {"mean": 2.0, "median": 2.0, "min": 1.0, "max": 3.0})
        self.assertEqual(aggregate.stats([4.0, 1.0])["median"], 2.5)
        self.assertIsNone(aggregate.stats([None]))
        runs = [aggregate.read_run(make_run(self.root, f"r{i}", [(1, 1, 0, a), (2, 1, 0, b)]))
                for i, (a, b) in enumerate([(0.5, 0.7), (0.6, 0.9)])]
        band = aggregate.per_epoch(runs, "val_accuracy")
        self.assertEqual(band["min"], [0.5, 0.7])
        self.assertEqual(band["max"], [0.6, 0.9])
        self.assertAlmostEqual(band["mean"][1], 0.8)

    def variant(self, name, devices, times, energies):
        runs = [aggregate.read_run(make_run(self.root, f"{name}{i}", [(1, t, 0.0, 0.8)],
                                            test_s=0.0, energy_j=j))
                for i, (t, j) in enumerate(zip(times, energies))]
        return aggregate.summarise_variant({"name": name, "ranks": devices,
                                            "devices": devices}, runs)

    def run_of(self, name, backend, ranks, sps, energy=None):
        """A finished repeat of `backend` on `ranks` ranks (1 epoch of 10 s)."""
        d = make_run(self.root, name, [(1, 10.0, 0.0, 0.8)], test_s=0.0, sps=sps)
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
        s.update(backend=backend, world_size=ranks, energy=energy or s["energy"])
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(s, f)
        return aggregate.read_run(d)

    def test_the_model_calibrates_on_the_backend_of_its_multi_rank_variants(self):
        # The classic study: the CPU first, then 1 GPU and 2 GPUs. The model's compute comes
        # from the 1-GPU variant; from the CPU's, the GPU variants fell outside the model
        # and it had no network ("no multi-rank variant measured").
        raw = [[self.run_of("cpu", "cpu", 1, 8.0)], [self.run_of("gpu1", "cuda", 1, 2000.0)],
               [self.run_of("gpu2", "cuda", 2, 3600.0)]]
        variants = [aggregate.summarise_variant({"name": n, "ranks": r, "devices": r}, runs)
                    for n, r, runs in zip(("cpu", "gpu-1", "gpu-2"), (1, 1, 2), raw)]
        bench = os.path.join(self.root, "bench.json")
        net = scaling.Network("n", 10e-6, 1e-10)
        with open(bench, "w") as f:
            json.dump({"points": [{"bytes": n, "time_s": scaling.ring_allreduce_s(net, 2, n)}
                                  for n in (1 << 12, 1 << 16, 1 << 20)]}, f)
        asked = []
        driver = mock.Mock(study={"model": {"network": "measured", "max_ranks": 8,
                                            "ranks_per_node": None, "average_every": 8,
                                            "servers": 1}},
                           bench=lambda *a: asked.append(a) or bench)
        model = study.build_model(driver, variants, raw, cuda_devices=2)
        self.assertEqual(model["calibration"], "gpu-1")
        self.assertEqual([a[:3] for a in asked], [("cuda", "ring", 2)])
        self.assertAlmostEqual(model["compute"]["step_s"], 64 / 2000.0)
        self.assertEqual([m["variant"] for m in model["measured_vs_predicted"]], ["gpu-2"])
        self.assertEqual(model["ranks_per_node"], 2)  # 2 GPUs a node, one rank each
        self.assertEqual(sorted({p["ranks"] for p in model["predictions"]}), [2, 4, 8])
        # Without multi-rank variants, the first one-rank variant, as before.
        model = study.build_model(driver, variants[:2], raw[:2], cuda_devices=2)
        self.assertEqual(model["calibration"], "cpu")

    def test_energy_names_its_sources_and_what_was_not_read(self):
        unread = {"cpu_j": None, "cpu_reason": "no powercap", "dram_j": None,
                  "dram_reason": "no powercap", "gpu_j": 480.0, "total_j": 480.0,
                  "seconds": 1.0}
        runs = [self.run_of("g", "cuda", 1, 2000.0, unread)]
        g = aggregate.summarise_variant({"name": "gpu-1", "ranks": 1, "devices": 1}, runs)
        self.assertEqual((g["energy_sources"], g["energy_unread"]),
                         (["gpu"], {"cpu": "no powercap", "dram": "no powercap"}))
        c = self.variant("cpu", 1, [2280.0], [100.0])  # RAPL read: cpu only
        aggregate.add_comparisons([g, c], ["gpu-1"])
        md = report.markdown({"study": "s", "config": "c.yaml", "repeats": 1, "written": "now",
                              "baselines": ["gpu-1"], "variants": [g, c], "model": None})
        self.assertIn("| gpu-1 | 0.8000 [0.8000, 0.8000] | 480 [480, 480] | gpu |", md)
        self.assertIn("| cpu | 0.8000 [0.8000, 0.8000] | 100 [100, 100] | cpu |", md)
        self.assertIn("Not in the energy of gpu-1: cpu and dram (no powercap).", md)
        self.assertIn("Not in the energy of cpu: dram and gpu (not read).", md)
        # A speedup under 0.1 keeps two significant digits: 10 s against 2280 s.
        self.assertIn("| cpu | 0.0044x [0.0044, 0.0044] | 0.0044x |", md)

    def test_a_baseline_without_a_finished_run_is_named(self):
        two = self.variant("two", 2, [6.0], [50.0])
        aggregate.add_comparisons([two], ["one"])
        md = report.markdown({"study": "s", "config": "c.yaml", "repeats": 1, "written": "now",
                              "baselines": ["one"], "variants": [two], "model": None})
        self.assertIn("No run of the baseline one has finished: no speedup against it.", md)
        self.assertIn("No one-rank variant of this study has a finished run", md)

    def test_speedup_efficiency_and_edp_against_the_baseline(self):
        base = self.variant("one", 1, [10.0, 12.0, 14.0], [100.0, 100.0, 100.0])
        two = self.variant("two", 2, [6.0, 7.0, 8.0], [50.0, 50.0, 50.0])
        four = self.variant("four", 4, [4.0, 4.0], [None, None])
        aggregate.add_comparisons([base, two, four], ["one", "two"])
        sp = two["speedup"]["one"]
        self.assertAlmostEqual(sp["total"], 12.0 / 7.0)
        self.assertAlmostEqual(sp["total_min"], 12.0 / 8.0)
        self.assertAlmostEqual(sp["total_max"], 12.0 / 6.0)
        self.assertAlmostEqual(two["efficiency"], 12.0 / 7.0 / 2)
        self.assertAlmostEqual(four["efficiency"], 3.0 / 4)
        self.assertAlmostEqual(four["speedup"]["two"]["total"], 7.0 / 4.0)
        self.assertAlmostEqual(base["edp_norm"], 1.0)
        # EDP = energy x seconds sampled (2 s in make_run): 50 x 2 / (100 x 2).
        self.assertAlmostEqual(two["edp_norm"], 0.5)
        self.assertIsNone(four["edp_norm"])
        self.assertEqual(base["repeats_done"], 3)
        self.assertEqual(base["time_train_s"],
                         {"mean": 12.0, "median": 12.0, "min": 10.0, "max": 14.0})


def run_main(main, argv):
    """(exit code, stdout, stderr) of a command's main(argv); SystemExit counts as a return."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


class StudyFile(unittest.TestCase):
    def test_defaults_and_the_order_of_sets(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "train.yaml"), "w") as f:
                f.write("run: {name: x}\n")
            path = os.path.join(tmp, "s.yaml")
            with open(path, "w") as f:
                f.write("config: train.yaml\nset: [train.epochs=2]\nvariants:\n"
                        "  - {name: a, ranks: 2, device: cpu, set: [train.epochs=3]}\n")
            s = studyfile.load(path)
        self.assertEqual(s["repeats"], 3)
        self.assertEqual(s["baselines"], ["a"])
        self.assertEqual(s["config"], os.path.join(tmp, "train.yaml"))
        v = s["variants"][0]
        self.assertEqual(v["devices"], 2)
        sets = study.run_sets(s, v, 1, "/runs/a/r1", ["train.epochs=4"])
        self.assertEqual(sets[0], "run.seed=2")
        order = [x for x in sets if x.startswith("train.epochs=") or x.startswith("device=")]
        self.assertEqual(order, ["train.epochs=2", "device=cpu", "train.epochs=3",
                                 "train.epochs=4"])
        self.assertEqual(sets[-3], 'run.dir="/runs/a/r1"')
        # Quoted: a directory with ' #' or ': ' in its name stays one YAML string.
        sets = study.run_sets(s, v, 0, "/runs/o #1: x/r0", [])
        self.assertEqual(sets[-3], 'run.dir="/runs/o #1: x/r0"')
        self.assertEqual(sets[-2], 'run.name="s-a-r0"')
        # Each run's checkpoints in its run directory, whatever the config's checkpoint.dir
        # (shared, the later runs resumed the first one's final model and trained nothing).
        sets = study.run_sets(s, v, 0, "/r0", ["checkpoint.dir=/scratch/ck"])
        self.assertEqual(sets[-1], 'checkpoint.dir=""')

    def test_wrong_types_are_exit_2_naming_the_file_and_key(self):
        head = "config: train.yaml\nvariants: [{name: a}]\n"
        net = head + "model: {network: {name: IB, alpha_us: %s, bandwidth_gbs: %s}}\n"
        cases = [
            (head + "baselines: [[x]]\n", "baselines"),
            (head + "baselines: [{a: 1}]\n", "baselines"),
            (head + "baselines: [1]\n", "baselines"),
            (head + "cooldown_seconds: .inf\n", "cooldown_seconds"),
            (head + "cooldown_seconds: .nan\n", "cooldown_seconds"),
            (net % (".nan", "1"), "model.network.alpha_us"),
            (net % ("1", "1.0e+999"), "model.network.bandwidth_gbs"),
            (net.replace("IB", "[x]") % ("1", "1"), "model.network.name"),
            (head + "model: 0\n", "model"),
            (head + "model: []\n", "model"),
            ("config: train.yaml\nvariants: [{name: \"a\\n\"}]\n", "variants[0].name"),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "train.yaml"), "w") as f:
                f.write("run: {name: x}\n")
            path = os.path.join(tmp, "s.yaml")
            for text, key in cases:
                with open(path, "w") as f:
                    f.write(text)
                rc, out, err = run_main(study.main, [path, "--dry-run"])
                self.assertEqual((rc, out), (2, ""), text)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn(f"{path}: {key}: ", err, text)
            with open(path, "wb") as f:
                f.write(b"config: train.yaml\nvariants: [{name: \xff}]\n")
            with self.assertRaisesRegex(studyfile.StudyError, "not UTF-8"):
                studyfile.load(path)
            with open(path, "w") as f:
                f.write("config: train.yaml\nvariants: [{name: a}]\nmodel:\n")
            self.assertEqual(studyfile.load(path)["model"]["network"], "measured")

    def load_error(self, text):
        """The one error line of loading `text` as s.yaml, without the file name."""
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "train.yaml"), "w") as f:
                f.write("run: {name: x}\n")
            path = os.path.join(tmp, "s.yaml")
            with open(path, "w") as f:
                f.write(text)
            rc, out, err = run_main(study.main, [path, "--dry-run"])
        self.assertEqual((rc, out), (2, ""), text)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith(f"error: {path}"), err)
        return err[len(f"error: {path}"):].rstrip("\n")

    def test_duplicate_keys_at_any_depth(self):
        head = "config: train.yaml\n"
        cases = [
            (head + "repeats: 1\nrepeats: 2\nvariants: [{name: a}]\n",
             ":3: repeats: duplicate key (first given at line 2)"),
            (head + "variants:\n  - name: a\n  - name: b\n    ranks: 2\n    ranks: 3\n",
             ":6: variants[1].ranks: duplicate key (first given at line 5)"),
            (head + "variants: [{name: a}]\nmodel:\n  network: {name: x, name: y}\n",
             ":4: model.network.name: duplicate key (first given at line 4)"),
            (head + "variants: [{name: a}]\nconfig: other.yaml\n",
             ":3: config: duplicate key (first given at line 1)"),
        ]
        for text, expected in cases:
            self.assertEqual(self.load_error(text), expected, text)

    def test_values_are_spelled_as_in_yaml(self):
        head = "config: train.yaml\n"
        net = head + "variants: [{name: a}]\nmodel: {network: {%s}}\n"
        cases = [
            (head + "variants: [{ranks: 2}]\n", ": variants[0].name: required, "),
            (head + "variants: [{name: null}]\n", ": variants[0].name: expected letters, "
                                                   "digits, '_.+-', got null"),
            (head + "variants: [{name: a, ranks: true}]\n",
             ": variants[0].ranks: expected an integer >= 1, got true"),
            (head + "variants: [{name: a, devices: 1.5}]\n",
             ": variants[0].devices: expected an integer >= 1, got 1.5"),
            (head + "variants: [{name: a, device: false}]\n",
             ": variants[0].device: expected one of auto, cpu, cuda, got false"),
            (head + "variants: [{name: a}]\nrepeats: '3'\n",
             ": repeats: expected an integer >= 1, got \"3\""),
            (head + "variants: [{name: a}]\nbaselines: [true]\n",
             ": baselines: expected variant names, got true"),
            (head + "variants: [{name: a}]\ncooldown_seconds: .nan\n",
             ": cooldown_seconds: expected a finite number >= 0, got .nan"),
            (net % "bandwidth_gbs: 1", ": model.network.alpha_us: required, "),
            (net % "name: [x], alpha_us: 1, bandwidth_gbs: 1",
             ": model.network.name: expected a string, got [\"x\"]"),
            ("config: [a]\nvariants: [{name: a}]\n",
             ": config: expected the training config file, got [\"a\"]"),
        ]
        for text, expected in cases:
            err = self.load_error(text)
            self.assertTrue(err.startswith(expected), f"{text}: {err}")
            for word in ("None", "True", "False", "'3'"):
                self.assertNotIn(word, err)


FAKE_HPCTRAIN = """#!{python}
# hpctrain for the tests: logs its arguments; `inspect` refuses the key train.epoch and a
# config file holding the word 'bad', as hpctrain does (exit 2, one error line).
import sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if args[:1] == ["inspect"]:
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    if any(s.startswith("train.epoch=") for s in sets):
        print("error: --set train.epoch: unknown key (did you mean 'epochs'?)", file=sys.stderr)
        sys.exit(2)
    with open(args[1]) as f:
        if "bad" in f.read():
            print(f"error: {{args[1]}}:1: bad: unknown key", file=sys.stderr)
            sys.exit(2)
"""


class StudyChecks(unittest.TestCase):
    """What `hpctrain study` refuses before it runs anything, with a stand-in hpctrain."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.log = os.path.join(self.dir, "calls.log")
        self.hpctrain = os.path.join(self.dir, "hpctrain")
        with open(self.hpctrain, "w") as f:
            f.write(FAKE_HPCTRAIN.format(python=sys.executable, log=self.log))
        os.chmod(self.hpctrain, 0o755)
        self.config = os.path.join(self.dir, "train.yaml")
        with open(self.config, "w") as f:
            f.write("run: {name: x}\n")
        self.path = os.path.join(self.dir, "s.yaml")
        self.out = os.path.join(self.dir, "out")
        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT,
                                                       signal.SIGUSR1)}
        self.addCleanup(lambda: [signal.signal(s, h) for s, h in handlers.items()])

    def tearDown(self):
        self.tmp.cleanup()

    def study(self, text, *argv):
        with open(self.path, "w") as f:
            f.write(text)
        return run_main(study.main, [self.path, "--out", self.out,
                                     f"--hpctrain={self.hpctrain}", *argv])

    def refused(self, text, argv, start, code=2):
        """The study is exit `code` with one line starting with `start`, and runs nothing."""
        rc, out, err = self.study(text, *argv)
        self.assertEqual((rc, out), (code, ""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("error: " + start), err)
        self.assertFalse(os.path.exists(self.out), "the study made its directory")
        if os.path.exists(self.log):
            with open(self.log) as f:
                self.assertEqual([c for c in f if not c.startswith("inspect ")], [])
        return err

    def test_training_keys_are_checked_before_anything_runs(self):
        two = "config: train.yaml\n%svariants:\n  - {name: a}\n  - {name: b%s}\n"
        typo = "--set train.epoch: unknown key (did you mean 'epochs'?)\n"
        for argv in ([], ["--dry-run"]):
            err = self.refused(two % ("set: [train.epoch=2]\n", ""), argv,
                               f"{self.path}: variants[0] (a): ")
            self.assertTrue(err.endswith(typo), err)
            self.refused(two % ("", ", set: [train.epoch=2]"), argv,
                         f"{self.path}: variants[1] (b): --set train.epoch: ")
            self.refused(two % ("", ""), argv + ["--set", "train.epoch=2"],
                         "--set train.epoch: unknown key")
            with open(self.config, "a") as f:
                f.write("bad: 1\n")
            self.refused(two % ("", ""), argv, f"{self.path}: config: {self.config}:1: bad")
            with open(self.config, "w") as f:
                f.write("run: {name: x}\n")

    def test_dry_run_prints_the_commands_that_run(self):
        text = "config: train.yaml\nrepeats: 1\nlauncher: mpiexec\nvariants: [{name: a}]\n"
        rc, out, err = self.study(text, "--dry-run", "--set", "train.epochs=1")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out.splitlines()), 1, out)
        self.assertIn(" train " + self.config + " --resume auto --set ", out)
        started = []

        def spawn(_driver, cmd, _log):
            started.append(cmd)
            return 1
        with mock.patch.object(study.Driver, "spawn", spawn):
            rc, _, err = self.study(text, "--set", "train.epochs=1")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "to run: " + shlex.join(started[0]) + "\n")

    def test_out_that_cannot_be_a_directory(self):
        text = "config: train.yaml\nvariants: [{name: a}]\n"
        afile = os.path.join(self.dir, "afile")
        with open(afile, "w"):
            pass
        cases = [(afile, [], "not a directory"), (afile, ["--dry-run"], "not a directory"),
                 (afile, ["--report-only"], "not a directory"),
                 (os.path.join(afile, "sub"), ["--dry-run"], "is not a directory"),
                 ("/proc/nope", [], "cannot create: ")]
        for out, argv, why in cases:
            self.out = out
            rc, stdout, err = self.study(text, *argv)
            self.assertEqual((rc, stdout), (2, ""), err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith(f"error: --out {out}: "), err)
            self.assertIn(why, err)

    def test_report_without_runs_and_failed_plots(self):
        text = "config: train.yaml\nrepeats: 1\nvariants: [{name: a}]\n"
        rc, out, err = self.study(text, "--report-only")
        self.assertEqual((rc, out), (2, ""), err)
        self.assertEqual(err, f"error: --out {self.out}: no run of the study has finished "
                              "there; nothing to report\n")
        self.assertFalse(os.path.exists(self.out))
        run = make_run(os.path.join(self.out, "runs", "a"), "r0", [(1, 1.0, 0.1, 0.7)])
        with open(os.path.join(run, study.MARKER), "w") as f:
            json.dump({"variant": "a", "repeat": 0, "attempts": 1, "exit_code": 0}, f)
        with open(os.path.join(self.out, "plots"), "w"):
            pass  # a file where the plots' folder goes
        rc, out, err = self.study(text, "--report-only")
        self.assertEqual(rc, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("error: the plots failed (exit 2: ", err)
        self.assertIn(f"hpctrain plot study {self.out}", err)
        self.assertTrue(os.path.exists(os.path.join(self.out, "study.md")))
        rc, out, err = self.study(text, "--report-only", "--no-plots")
        self.assertEqual((rc, err), (0, ""))

    def test_a_run_made_by_another_command_is_neither_kept_nor_resumed(self):
        text = "config: train.yaml\nrepeats: 1\nvariants: [{name: a}]\n"
        with open(self.path, "w") as f:
            f.write(text)
        s = studyfile.load(self.path)
        d = os.path.join(self.out, "runs", "a", "r0")
        cmd = study.train_command(s, "/elsewhere/hpctrain", s["variants"][0], 0,
                                  "/moved/runs/a/r0", ["train.epochs=1"])
        os.makedirs(d)
        with open(os.path.join(d, study.MARKER), "w") as f:
            json.dump({"variant": "a", "repeat": 0, "attempts": 1, "exit_code": 0,
                       "command": shlex.join(["srun", "-n", "1"] + cmd)}, f)
        # Another launcher, binary or study directory: the same run, kept.
        rc, out, err = self.study(text, "--dry-run", "--set", "train.epochs=1")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("done: "), out)
        for argv in (["--dry-run"], []):
            rc, out, err = self.study(text, *argv, "--set", "train.epochs=3")
            self.assertEqual((rc, out), (2, ""), err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith(f"error: --out {self.out}: runs/a/r0 finished with "
                                           "another command ("), err)

    def test_a_signal_during_the_checks_stops_before_anything_runs(self):
        text = "config: train.yaml\nrepeats: 1\nvariants: [{name: a}]\n"
        checks = study.check_configs

        def check_then_signal(driver):
            checks(driver)
            os.kill(os.getpid(), signal.SIGUSR1)
        started = []
        with mock.patch.object(study, "check_configs", check_then_signal), \
                mock.patch.object(study.Driver, "spawn", lambda *a: started.append(a) or 0):
            rc, _, err = self.study(text)
        self.assertEqual(rc, 75, err)
        self.assertEqual(started, [])

    def test_report_only_measures_nothing(self):
        with open(self.path, "w") as f:
            f.write("config: train.yaml\nvariants: [{name: a}]\n")
        driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])
        driver.run_nothing = True
        with mock.patch.object(study.Driver, "spawn", side_effect=AssertionError("ran")):
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertIsNone(driver.bench("cpu", "ring", 2, 1 << 16))

    def test_runs_start_in_a_process_group_of_their_own(self):
        with open(self.path, "w") as f:
            f.write("config: train.yaml\nvariants: [{name: a}]\n")
        driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])
        log = os.path.join(self.dir, "x.log")
        rc = driver.spawn([sys.executable, "-c", "import os; print(os.getpgid(0) == os.getpid())"],
                          log)
        self.assertEqual(rc, 0)
        with open(log) as f:
            self.assertEqual(f.read().splitlines()[-1], "True")

    def test_a_stop_reaches_a_run_however_early_and_ends_a_cooldown(self):
        with open(self.path, "w") as f:
            f.write("config: train.yaml\ncooldown_seconds: 30\nvariants: [{name: a}]\n")
        driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])
        log = os.path.join(self.dir, "x.log")
        # A signal while the run was being started (before the driver knew its child) was
        # not passed on: the run trained to its end.
        driver.stop_signal = signal.SIGUSR1
        t0 = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            rc = driver.spawn(["sleep", "20"], log)
        self.assertEqual(rc, -signal.SIGUSR1)
        self.assertLess(time.monotonic() - t0, 10)
        # A stop during the cool-down between runs ends it (it slept the whole of it).
        t0 = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()), self.assertRaises(study.Stopped):
            driver.train(driver.study["variants"][0], 0, 2, 2, cooldown=True)
        self.assertLess(time.monotonic() - t0, 10)

    def test_an_allocation_smaller_than_a_variant_is_refused_first(self):
        text = ("config: train.yaml\nvariants: [{name: one}, {name: four, ranks: 4}]\n")
        with mock.patch.dict(os.environ, {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"}):
            self.refused(text, [], f"{self.path}: variant four runs 4 ranks, but the "
                                   "allocation holds 2 tasks (SLURM_NTASKS)")

    def test_ctrl_c_during_the_checks_is_a_stop_not_a_failure(self):
        # The terminal's SIGINT also ended `hpctrain inspect` (exit -2): that was reported
        # as the variant's failure, exit 1.
        with open(self.path, "w") as f:
            f.write("config: train.yaml\nvariants: [{name: a}, {name: b}]\n")
        driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])

        def interrupted(*_):
            driver.stop_signal = signal.SIGINT
            return -signal.SIGINT, "hpctrain inspect failed (exit -2)"
        with mock.patch.object(study, "inspect_error", interrupted):
            study.check_configs(driver)  # no RuntimeError: main stops with 75

    def test_a_launcher_that_cannot_start_is_one_line(self):
        with open(self.path, "w") as f:
            f.write("config: train.yaml\nvariants: [{name: a}]\n")
        driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])
        log = os.path.join(self.dir, "x.log")
        with self.assertRaises(RuntimeError) as e:
            driver.spawn([os.path.join(self.dir, "no-mpiexec"), "-n", "1"], log)
        self.assertIn("cannot start", str(e.exception))
        self.assertIn(log, str(e.exception))


if __name__ == "__main__":
    unittest.main()
