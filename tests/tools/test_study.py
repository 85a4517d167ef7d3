"""Unit tests of the study's arithmetic: reading run directories, mean/min/max over
repeats, speedup, efficiency and EDP normalisation, the study file's defaults, and the
alpha-beta scaling model (its formulas, the fit, the interpolation), and bad input to
`hpctrain study` and `hpctrain scaling` (exit 2, one line naming the key or option)."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data-tools" / "python"))

from hpctrain_tools import aggregate, scaling, study, studyfile  # noqa: E402

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
        resumed = aggregate.read_run(d, resumed=True)
        self.assertIsNone(resumed["energy_j"])
        self.assertIsNone(resumed["edp"])
        self.assertIn("resumed", resumed["energy_reason"])

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
        self.assertEqual(sets[-2], "run.dir=/runs/a/r1")

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


class Model(unittest.TestCase):
    net = scaling.Network("test", 2e-6, 1e-9)  # 2 us, 1 GB/s

    def test_ring_formula(self):
        self.assertEqual(scaling.ring_allreduce_s(self.net, 1, 1e6), 0.0)
        self.assertAlmostEqual(scaling.ring_allreduce_s(self.net, 4, 1e6),
                               6 * 2e-6 + 1.5 * 1e6 * 1e-9)

    def test_fit_recovers_alpha_and_beta(self):
        points = [{"algorithm": "ring", "bytes": n,
                   "time_s": scaling.ring_allreduce_s(self.net, 4, n)}
                  for n in (4096, 65536, 1 << 20, 1 << 24)]
        fit = scaling.fit_ring(points, 4, "fit")
        self.assertAlmostEqual(fit.alpha_s / 2e-6, 1.0, places=6)
        self.assertAlmostEqual(fit.beta_s_per_byte / 1e-9, 1.0, places=6)
        with self.assertRaises(ValueError):
            scaling.fit_ring(points[:1], 4, "one point")

    def test_interpolation_between_measured_sizes(self):
        points = [{"bytes": 1000, "time_s": 1e-5}, {"bytes": 4000, "time_s": 4e-5}]
        self.assertAlmostEqual(scaling.measured_time(points, 2000), 2e-5)
        self.assertIsNone(scaling.measured_time(points, 8000))

    def test_allreduce_overlap_and_oversubscription(self):
        comp = scaling.Compute(step_s=0.010, backward_fraction=0.5, param_bytes=4e6,
                               slots_per_node=2, slots_per_rank=1)
        comm = scaling.ring_allreduce_s(self.net, 2, 4e6)  # 4 ms
        plain = scaling.predict(comp, self.net, 2, "allreduce", False, 2)
        self.assertAlmostEqual(plain["step_s"], 0.010 + comm)
        self.assertAlmostEqual(plain["speedup"], 2 * 0.010 / (0.010 + comm))
        hidden = scaling.predict(comp, self.net, 2, "allreduce", True, 2)
        self.assertAlmostEqual(hidden["step_s"], 0.010)  # 4 ms hide behind 5 ms of backward
        crowded = scaling.predict(comp, self.net, 4, "allreduce", False, 4)
        self.assertAlmostEqual(crowded["compute_s"], 0.020)  # 4 ranks on 2 slots
        given = scaling.predict(comp, self.net, 2, "allreduce", False, 2, allreduce_s=0.001)
        self.assertAlmostEqual(given["step_s"], 0.011)

    def test_average_and_async(self):
        comp = scaling.Compute(step_s=0.010, backward_fraction=0.5, param_bytes=1e6)
        avg = scaling.predict(comp, self.net, 8, "average", False, 1,
                              scaling.Layout(average_every=4))
        per_sync = 2 * (3 * 2e-6 + 2 * 7 / 8 * 1e6 * 1e-9)
        self.assertAlmostEqual(avg["step_s"], 0.010 + per_sync / 4)
        # 9 ranks, 1 server: 8 workers push and pull 1 MB each per round through one
        # server: 16 ms of server link against a worker's 10 + 2 ms.
        ps = scaling.predict(comp, self.net, 9, "async", False, 1, scaling.Layout(servers=1))
        self.assertAlmostEqual(ps["step_s"], 8 * 2 * 1e6 * 1e-9)
        self.assertAlmostEqual(ps["speedup"], 8 * 0.010 / ps["step_s"])
        with self.assertRaises(ValueError):
            scaling.predict(comp, self.net, 1, "async", False, 1)

    def test_command_line(self):
        self.assertEqual(scaling.main(["--step-ms", "100", "--params", "1e6", "--alpha-us",
                                       "5", "--bandwidth-gbs", "10", "--ranks", "2,8"]), 0)
        with self.assertRaises(SystemExit):
            scaling.main(["--step-ms", "0", "--params", "1", "--alpha-us", "1",
                          "--bandwidth-gbs", "1"])

    def test_ranks(self):
        self.assertEqual(scaling.parse_ranks("2-16"), [2, 4, 8, 16])
        self.assertEqual(scaling.parse_ranks("1-4"), [2, 4])
        self.assertEqual(scaling.parse_ranks("3-3"), [3])
        self.assertEqual(scaling.parse_ranks("8,2"), [8, 2])
        for text in ("8-2", "0-8", "1-1", "1", "1,2", "0", "", "2-4-8", "x", "2,,4"):
            with self.assertRaises(ValueError, msg=text):
                scaling.parse_ranks(text)

    def test_bad_options_are_one_line_exit_2_naming_the_option(self):
        given = {"--step-ms": "10", "--params": "1e6", "--alpha-us": "1",
                 "--bandwidth-gbs": "10", "--ranks": "2-4"}
        cases = [("--servers", "0"), ("--average-every", "0"), ("--ranks-per-node", "0"),
                 ("--slots-per-node", "-1"), ("--step-ms", "nan"), ("--alpha-us", "nan"),
                 ("--alpha-us", "-1"), ("--bandwidth-gbs", "inf"), ("--params", "0"),
                 ("--bytes-per-param", "nan"), ("--backward-fraction", "1.5"),
                 ("--backward-fraction", "nan"), ("--ranks", "8-2"), ("--ranks", "1"),
                 ("--servers", "1.5")]
        for option, value in cases:
            argv = [w for k, v in dict(given, **{option: value}).items() for w in (k, v)]
            rc, out, err = run_main(scaling.main, argv)
            self.assertEqual((rc, out), (2, ""), f"{option} {value}")
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(option, err)
        rc, out, err = run_main(scaling.main, ["--step-ms", "10"])
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("--params", err)


if __name__ == "__main__":
    unittest.main()
