"""Unit tests of the study's arithmetic and study file: reading run directories (a file
that cannot be read named once, null step phases, the energy's reason, a repeat of
another rank count refused), mean/min/max over repeats, speedup, efficiency and EDP
normalisation, the scaling model's calibration from a study's runs and the nodes it
predicts for (model.slots_per_node), and the study file's defaults and its bad input
(exit 2, one line naming the key): duplicate keys, values of the wrong type, a seed out of
range for the last repeat. test_study_driver.py tests the driver of `hpctrain study`."""

import json
import os
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "data-tools" / "python")]

from hpctrain_tools import aggregate, report, scaling, study, studyfile  # noqa: E402
from tools_helpers import make_run, run_main  # noqa: E402


class Aggregation(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_resumed_epoch_counts_once_and_an_old_summary_has_no_energy(self):
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
        # A summary.json without energy_whole_run (an earlier release's) has no energy of
        # the whole run.
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

    def test_a_repeat_resumed_for_its_test_phase_alone_has_its_epochs_speed(self):
        # Its last process trained nothing (samples_per_second 0): the speed is that of the
        # epochs in metrics.csv (2 s at 1000/s, 1 s at 4000/s), never 0.
        d = make_run(self.root, "test_only", [(1, 2.0, 0.1, 0.7), (2, 1.0, 0.1, 0.8)],
                     sps=0.0, resumed_from=32)
        path = os.path.join(d, "metrics.csv")
        with open(path) as f:
            rows = f.read().splitlines()
        rows[1] = rows[1].replace(",0.0,0,0", ",1000,0,0")
        rows[2] = rows[2].replace(",0.0,0,0", ",4000,0,0")
        with open(path, "w") as f:
            f.write("\n".join(rows) + "\n")
        r = aggregate.read_run(d)
        self.assertAlmostEqual(r["samples_per_second"], 2000.0)
        self.assertAlmostEqual(r["step_time_s"], 64 / 2000.0)

    def test_unreadable_energy_keeps_its_reason(self):
        d = make_run(self.root, "r", [(1, 1.0, 0.1, 0.7)], energy_j=None)
        r = aggregate.read_run(d)
        self.assertIsNone(r["energy_j"])
        self.assertEqual(r["energy_reason"], "no powercap")

    def test_missing_summary_names_the_file(self):
        os.makedirs(os.path.join(self.root, "empty"))
        with self.assertRaisesRegex(aggregate.RunError, "summary.json") as e:
            aggregate.read_run(os.path.join(self.root, "empty"))
        path = os.path.join(self.root, "empty", "summary.json")
        self.assertEqual(str(e.exception), f"{path}: No such file or directory")
        # Named once (the OSError's message named it again), as is an empty metrics.csv.
        d = make_run(self.root, "no-epochs", [])
        with self.assertRaises(aggregate.RunError) as e:
            aggregate.read_run(d)
        self.assertEqual(str(e.exception), f"{os.path.join(d, 'metrics.csv')}: no epochs")
        os.remove(os.path.join(d, "metrics.csv"))
        with self.assertRaises(aggregate.RunError) as e:
            aggregate.read_run(d)
        self.assertEqual(str(e.exception),
                         f"{os.path.join(d, 'metrics.csv')}: No such file or directory")

    def test_a_repeat_of_another_rank_count_is_not_the_variants(self):
        runs = [aggregate.read_run(make_run(self.root, "r0", [(1, 1.0, 0.1, 0.7)],
                                            world_size=2))]
        with self.assertRaises(aggregate.RunError) as e:
            aggregate.summarise_variant({"name": "cpu-4", "ranks": 4, "devices": 4}, runs)
        self.assertEqual(str(e.exception), f"{os.path.join(self.root, 'r0', 'summary.json')}: "
                                           "world_size 2, but variant cpu-4 runs 4 ranks")
        v = aggregate.summarise_variant({"name": "cpu-2", "ranks": 2, "devices": 2}, runs)
        self.assertEqual(v["repeats_done"], 1)

    def test_a_null_step_phase_is_unavailable(self):
        runs = [aggregate.read_run(make_run(
            self.root, f"r{i}", [(1, 1.0, 0.1, 0.7)],
            step_phase_fractions={"forward": fwd, "backward": bwd}))
            for i, (fwd, bwd) in enumerate([(0.3, None), (0.5, 0.4)])]
        v = aggregate.summarise_variant({"name": "v", "ranks": 1, "devices": 1}, runs)
        self.assertAlmostEqual(v["step_phase_fractions"]["forward"], 0.4)
        self.assertAlmostEqual(v["step_phase_fractions"]["backward"], 0.4)
        v = aggregate.summarise_variant({"name": "v", "ranks": 1, "devices": 1}, runs[:1])
        self.assertIsNone(v["step_phase_fractions"]["backward"])

    def test_energy_of_a_resumed_repeat_is_the_whole_runs(self):
        # summary.json's energy is the last process's; energy_whole_run adds what the
        # checkpoints carried (null for a test phase alone, or with sampling off).
        whole = {"cpu_j": 300.0, "dram_j": None, "dram_reason": "no dram domain",
                 "total_j": 300.0, "seconds": 6.0, "edp": 1800.0}
        for name, own in (("part", {"cpu_j": 100.0, "total_j": 100.0, "seconds": 2.0}),
                          ("test-alone", None)):
            d = make_run(self.root, name, [(1, 1.0, 0.1, 0.7)], energy=own, edp=200.0,
                         resumed_from=40, energy_whole_run=whole)
            r = aggregate.read_run(d)
            self.assertEqual((r["energy_j"], r["edp"], r["energy_reason"]), (300.0, 1800.0, None))
            self.assertEqual(r["energy_sources"], ["cpu"])
            self.assertEqual(r["energy_unread"], {"dram": "no dram domain", "gpu": "not read"})
        unknown = {"cpu_j": None, "cpu_reason": "the checkpoint resumed from carries no energy",
                   "total_j": None, "seconds": 6.0, "edp": None}
        for interval, kw, why in (
                (100, {"energy_whole_run": unknown}, "the checkpoint resumed from carries no"),
                (100, {}, "resumed, and its summary.json has no energy_whole_run"),
                (0, {"energy_whole_run": None}, "energy sampling off (energy.interval_ms: 0)")):
            d = make_run(self.root, f"r{interval}-{len(kw)}-{why[:3]}", [(1, 1.0, 0.1, 0.7)],
                         resumed_from=40, **kw)
            with open(os.path.join(d, "config.yaml"), "w") as f:
                f.write(f"energy: {{interval_ms: {interval}}}\n")
            r = aggregate.read_run(d)
            self.assertIsNone(r["energy_j"])
            self.assertIsNone(r["edp"])
            self.assertTrue(r["energy_reason"].startswith(why), r["energy_reason"])

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
                                            test_s=0.0, energy_j=j, world_size=devices))
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
                                            "ranks_per_node": None, "slots_per_node": None,
                                            "average_every": 8,
                                            "servers": 1}},
                           bench=lambda *a: asked.append(a) or bench)
        model = study.build_model(driver, variants, raw, cuda_devices=2)
        self.assertEqual(model["calibration"], "gpu-1")
        self.assertEqual([a[:3] for a in asked], [("cuda", "ring", 2)])
        self.assertAlmostEqual(model["compute"]["step_s"], 64 / 2000.0)
        self.assertEqual([m["variant"] for m in model["measured_vs_predicted"]], ["gpu-2"])
        self.assertEqual(model["ranks_per_node"], 2)  # 2 GPUs a node, one rank each
        self.assertEqual(sorted({p["ranks"] for p in model["predictions"]}), [2, 4, 8])
        # The predictions' nodes: model.slots_per_node's where given (a cluster's 64
        # cores), else this node's; the measured variants' predictions stay this node's.
        cpu = [[self.run_of(f"c{r}", "cpu", r, 100.0 * r)] for r in (1, 2)]
        cvars = [aggregate.summarise_variant({"name": f"cpu-{r}", "ranks": r, "devices": r},
                                             runs) for r, runs in zip((1, 2), cpu)]
        for slots, given_rpn, rpn, load in ((None, None, 2, 1), (64, None, 64, 1),
                                            (16, 64, 64, 4)):
            driver.study["model"].update(slots_per_node=slots, ranks_per_node=given_rpn,
                                         max_ranks=64)
            with mock.patch.dict(os.environ, {"SLURM_CPUS_ON_NODE": "2"}):
                model = study.build_model(driver, cvars, cpu, cuda_devices=0)
            self.assertEqual((model["slots_per_node"], model["ranks_per_node"]),
                             (slots or 2, rpn))
            self.assertEqual(model["compute"]["slots_per_node"], 2)
            at64 = next(p for p in model["predictions"] if p["ranks"] == 64)
            self.assertAlmostEqual(at64["compute_s"], load * 64 / 100.0)  # rpn ranks a node
        driver.study["model"].update(slots_per_node=None, max_ranks=8)
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

    def test_energy_of_the_active_devices_leaves_the_idle_gpus_out(self):
        # The classic study's figures: a CPU run on a node with two GPUs, 8.48e6 J of the
        # active devices and 1.11e7 J with the idle GPUs; one GPU's run 1.17e6 / 1.28e6 J.
        def run(name, backend, total, active, seconds):
            e = {"cpu_j": active, "gpu_j": total - active, "gpu_active_j": 0.0,
                 "total_j": total, "active_j": active, "seconds": seconds}
            d = make_run(self.root, name, [(1, seconds, 0.0, 0.8)], test_s=0.0, energy=e,
                         edp=total * seconds, edp_active=active * seconds, backend=backend)
            return aggregate.read_run(d)
        cpu = aggregate.summarise_variant({"name": "cpu", "ranks": 1, "devices": 1},
                                          [run("c", "cpu", 1.11e7, 8.48e6, 50000.0)])
        gpu = aggregate.summarise_variant({"name": "gpu-1", "ranks": 1, "devices": 1},
                                          [run("g", "cuda", 1.28e6, 1.17e6, 4000.0)])
        aggregate.add_comparisons([gpu, cpu], ["gpu-1"])
        self.assertEqual(cpu["energy_active_j"]["mean"], 8.48e6)
        self.assertAlmostEqual(cpu["edp_norm"], 1.11e7 * 50000 / (1.28e6 * 4000))
        self.assertAlmostEqual(cpu["edp_active_norm"], 8.48e6 * 50000 / (1.17e6 * 4000))
        row = report.csv_row(cpu, "gpu-1")
        self.assertEqual((row["energy_active_j"], row["edp_active"]), (8.48e6, 8.48e6 * 50000))
        self.assertAlmostEqual(row["edp_active_norm"], cpu["edp_active_norm"])
        md = report.markdown({"study": "s", "config": "c.yaml", "repeats": 1, "written": "now",
                              "baselines": ["gpu-1"], "variants": [gpu, cpu], "model": None})
        self.assertIn("| 5.12e+09 [5.12e+09, 5.12e+09] | 1.00 | 1.17e+06 [1.17e+06, 1.17e+06] "
                      "| 1.00 |", md)
        self.assertIn("| 108.40 | 8.48e+06 [8.48e+06, 8.48e+06] | 90.60 |", md)
        # A baseline whose EDP is 0 (nothing read but a GPU's 0 J) normalises nothing.
        gpu["edp_active"]["mean"] = 0.0
        aggregate.add_comparisons([gpu, cpu], ["gpu-1"])
        self.assertIsNone(cpu["edp_active_norm"])
        # An earlier release's summary.json has no active energy: n/a, not 0.
        old = aggregate.read_run(make_run(self.root, "old", [(1, 1.0, 0.0, 0.8)]))
        self.assertEqual((old["energy_active_j"], old["edp_active"]), (None, None))

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
            (head + "cooldown_seconds: 1e300\n", "cooldown_seconds"),
            (head + "repeats: 100000000000\n", "repeats"),
            (head + "repeats: 1001\n", "repeats"),
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

    def test_every_repeats_seed_must_be_in_range(self):
        head = "config: train.yaml\nvariants: [{name: a}]\nrepeats: 2\n"
        self.assertEqual(self.load_error(head + "seed: 18446744073709551615\n"),
                         ": seed: expected seed + repeats - 1 <= 18446744073709551615 (repeat "
                         "k runs with run.seed = seed + k), got 18446744073709551615 with "
                         "repeats 2")
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "train.yaml").write_text("run: {name: x}\n")
            Path(tmp, "s.yaml").write_text(head + "seed: 18446744073709551614\n")
            self.assertEqual(studyfile.load(os.path.join(tmp, "s.yaml"))["seed"], 2 ** 64 - 2)

    def test_model_slots_per_node(self):
        head = "config: train.yaml\nvariants: [{name: a}]\n"
        for value in ("0", "true", "1.5", "x"):
            err = self.load_error(head + f"model: {{slots_per_node: {value}}}\n")
            self.assertTrue(err.startswith(": model.slots_per_node: expected an integer >= 1, "
                                           "got "), err)
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "train.yaml").write_text("run: {name: x}\n")
            path = os.path.join(tmp, "s.yaml")
            Path(path).write_text(head)
            self.assertIsNone(studyfile.load(path)["model"]["slots_per_node"])
            Path(path).write_text(head + "model: {slots_per_node: 64}\n")
            self.assertEqual(studyfile.load(path)["model"]["slots_per_node"], 64)

    def test_numbers_in_exponent_form(self):
        """1e3 is a number, as in YAML 1.2 and hpctrain's config reader (PyYAML's YAML 1.1
        read it as the string "1e3": expected a finite number)."""
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "train.yaml").write_text("run: {name: x}\n")
            path = os.path.join(tmp, "s.yaml")
            Path(path).write_text("config: train.yaml\nvariants: [{name: a}]\n"
                                  "cooldown_seconds: 1e3\nmodel: {network: {alpha_us: 2E0, "
                                  "bandwidth_gbs: .5e1}}\n")
            s = studyfile.load(path)
        self.assertEqual(s["cooldown_seconds"], 1000.0)
        self.assertEqual((s["model"]["network"]["alpha_us"], s["model"]["network"]["bandwidth_gbs"]),
                         (2.0, 5.0))

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
             ": repeats: expected an integer in [1, 1000], got \"3\""),
            (head + "variants: [{name: a}]\nbaselines: [true]\n",
             ": baselines: expected variant names, got true"),
            (head + "variants: [{name: a}]\ncooldown_seconds: .nan\n",
             ": cooldown_seconds: expected a finite number in [0, 86400], got .nan"),
            (net % "bandwidth_gbs: 1", ": model.network.alpha_us: required, "),
            (net % "name: [x], alpha_us: 1, bandwidth_gbs: 1",
             ": model.network.name: expected a string, got [\"x\"]"),
            ("config: [a]\nvariants: [{name: a}]\n",
             ": config: expected the training config file, got [\"a\"]"),
            (head + "variants: {name: a}\n",
             ": variants: expected a non-empty list of variants, got {\"name\": \"a\"}"),
            (head + "variants: []\n", ": variants: expected a non-empty list of variants, got []"),
            (head + "variants: null\n",
             ": variants: expected a non-empty list of variants, got null"),
            (head, ": variants: required, a list of variants"),
            (head + "variants: [a]\n", ": variants[0]: expected a mapping, got \"a\""),
        ]
        for text, expected in cases:
            err = self.load_error(text)
            self.assertTrue(err.startswith(expected), f"{text}: {err}")
            for word in ("None", "True", "False", "'3'"):
                self.assertNotIn(word, err)
        err = self.load_error("config: .\nvariants: [{name: a}]\n")
        self.assertTrue(err.startswith(": config: ") and err.endswith("/.: is a directory"), err)


if __name__ == "__main__":
    unittest.main()
