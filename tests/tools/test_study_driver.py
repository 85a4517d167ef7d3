"""Unit tests of the driver of `hpctrain study`, with a stand-in hpctrain: what it refuses
before it runs anything (exit 2, one line naming the key or option: training keys that
`hpctrain inspect` refuses, an --out that cannot be a directory, a run made by another
command, rank count or from other contents of the training config, --report-only too, an
allocation smaller than a variant), a report with no finished run, a finished repeat that
cannot be read (left out of the report), plots that fail (exit 1), no all-reduce
measurement without a one-rank variant, --dry-run printing the very commands that run,
and how signals stop it."""

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

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "data-tools" / "python")]

from hpctrain_tools import study, studyfile  # noqa: E402
from tools_helpers import make_run, run_main  # noqa: E402

FAKE_HPCTRAIN = """#!{python}
# hpctrain for the tests: logs its arguments; `inspect` refuses the key train.epoch, a
# config file holding the word 'bad' and strategy async on one rank (--ranks 1), as
# hpctrain does (exit 2, one error line).
import sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if args[:1] == ["inspect"]:
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    if any(s.startswith("train.epoch=") for s in sets):
        print("error: --set train.epoch: unknown key (did you mean 'epochs'?)", file=sys.stderr)
        sys.exit(2)
    ranks = args[args.index("--ranks") + 1] if "--ranks" in args else None
    if "distributed.strategy=async" in sets and ranks == "1":
        print("error: train.yaml: distributed.parameter_servers: 1 leaves no worker: this job "
              "has 1 rank(s)", file=sys.stderr)
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
            # A variant refused for its rank count alone: found before the first run too.
            self.refused("config: train.yaml\nvariants: [{name: a}, {name: b, strategy: "
                         "async}]\n", argv, f"{self.path}: variants[1] (b): train.yaml: "
                         "distributed.parameter_servers: 1 leaves no worker")

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
        with open(os.path.join(self.out, "runs", "a", "r0", study.MARKER)) as f:
            self.assertEqual(json.load(f)["config_sha256"], study.config_sha256(self.config))

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

    def test_a_run_made_by_another_command_or_config_is_neither_kept_nor_resumed(self):
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
        # The same command from other contents of the training config: refused too.
        with open(os.path.join(d, study.MARKER)) as f:
            m = json.load(f)
        m["config_sha256"] = study.config_sha256(self.config)
        with open(os.path.join(d, study.MARKER), "w") as f:
            json.dump(m, f)
        rc, out, err = self.study(text, "--dry-run", "--set", "train.epochs=1")
        self.assertEqual(rc, 0, err)
        with open(self.config, "a") as f:
            f.write("train: {epochs: 7}\n")
        for argv in (["--dry-run"], []):
            rc, out, err = self.study(text, *argv, "--set", "train.epochs=1")
            self.assertEqual((rc, out), (2, ""), err)
            self.assertEqual(err, f"error: --out {self.out}: runs/a/r0 finished when "
                                  f"{self.config} held other contents; use another --out, or "
                                  "remove that run directory to run it again with this one\n")

    def test_a_config_edited_while_the_study_runs_stops_it(self):
        # Edited during the first run, it was the second's: the report mixed both contents.
        text = "config: train.yaml\nrepeats: 2\nvariants: [{name: a}]\n"
        started = []

        def spawn(_driver, cmd, _log):
            started.append(cmd)
            word = next(w for w in cmd if w.startswith("run.dir="))
            run_dir = json.loads(word.split("=", 1)[1])
            made = make_run(self.dir, f"made{len(started)}", [(1, 1.0, 0.1, 0.7)])
            for name in ("summary.json", "metrics.csv"):
                os.replace(os.path.join(made, name), os.path.join(run_dir, name))
            with open(self.config, "a") as f:
                f.write("train: {epochs: 7}\n")
            return 0
        with mock.patch.object(study.Driver, "spawn", spawn):
            rc, _, err = self.study(text, "--no-plots")
        self.assertEqual((rc, len(started)), (2, 1), err)
        self.assertTrue(err.startswith(f"error: {study.shown_path(self.config)}: changed since "
                                       "this study started"), err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "study.json")))

    def finished_run(self, study_text, sets, repeat=0, world_size=1, command=True):
        """A finished repeat of the study's first variant, as `hpctrain study --set
        SETS...` made it (command: its marker keeps the command and the config's digest)."""
        with open(self.path, "w") as f:
            f.write(study_text)
        s = studyfile.load(self.path)
        v = s["variants"][0]
        d = make_run(os.path.join(self.out, "runs", v["name"]), f"r{repeat}",
                     [(1, 1.0, 0.1, 0.7)], world_size=world_size)
        m = {"variant": v["name"], "repeat": repeat, "attempts": 1, "exit_code": 0}
        if command:
            m.update(command=shlex.join(study.train_command(s, self.hpctrain, v, repeat, d,
                                                            sets)),
                     config_sha256=study.config_sha256(self.config))
        with open(os.path.join(d, study.MARKER), "w") as f:
            json.dump(m, f)
        return d

    def test_a_run_of_another_rank_count_is_neither_kept_nor_reported(self):
        # The rank count was left out of the words compared: a run of 2 ranks was kept,
        # and reported, as the variant's run of 4.
        text = "config: train.yaml\nrepeats: 1\nlauncher: mpiexec\nvariants: [{name: a%s}]\n"
        self.finished_run(text % ", ranks: 2", [], world_size=2)
        rc, out, err = self.study(text % ", ranks: 2", "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("done: mpiexec -n 2 "), out)
        for argv in (["--dry-run"], ["--report-only", "--no-plots"], []):
            rc, out, err = self.study(text % ", ranks: 4", *argv)
            self.assertEqual((rc, out), (2, ""), err)
            self.assertTrue(err.startswith(f"error: --out {self.out}: runs/a/r0 finished with "
                                           "another command (mpiexec -n 2 "), err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "study.json")))

    def test_report_only_checks_the_command_that_made_the_runs(self):
        text = "config: train.yaml\nrepeats: 1\nvariants: [{name: a}]\n"
        self.finished_run(text, ["train.epochs=1"])
        for argv in ([], ["--set", "train.epochs=3"]):
            rc, out, err = self.study(text, "--report-only", "--no-plots", *argv)
            self.assertEqual((rc, out), (2, ""), err)
            self.assertTrue(err.startswith(f"error: --out {self.out}: runs/a/r0 finished "
                                           "with another command ("), err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "study.json")))
        rc, out, err = self.study(text, "--report-only", "--no-plots", "--set", "train.epochs=1")
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(os.path.exists(os.path.join(self.out, "study.json")))
        with open(self.config, "a") as f:
            f.write("train: {epochs: 7}\n")
        rc, out, err = self.study(text, "--report-only", "--no-plots", "--set", "train.epochs=1")
        self.assertEqual((rc, out), (2, ""), err)
        self.assertIn(f"runs/a/r0 finished when {self.config} held other contents", err)
        with open(self.log) as f:  # and it skips the inspect check, as study.md says
            self.assertEqual([c for c in f if c.startswith("inspect ")], [])

    def test_a_finished_repeat_that_cannot_be_read_is_left_out_of_the_report(self):
        text = "config: train.yaml\nrepeats: 2\nvariants: [{name: a}]\n"
        self.finished_run(text, [], 0, command=False)
        broken = self.finished_run(text, [], 1, command=False)
        os.remove(os.path.join(broken, "summary.json"))
        rc, out, err = self.study(text, "--report-only", "--no-plots")
        self.assertEqual((rc, err), (0, ""))
        path = os.path.join(broken, "summary.json")
        self.assertEqual([x for x in out.splitlines() if "left out" in x],
                         [f"study: left out of the report: a repeat 2: {path}: No such file or "
                          "directory"])
        with open(os.path.join(self.out, "study.json")) as f:
            self.assertEqual(json.load(f)["variants"][0]["repeats_done"], 1)

    def test_a_kept_all_reduce_measurement_covers_the_gradients_of_now(self):
        # Kept once written, a measurement up to 2 MiB stood for a model of 6.5 MB: the
        # model then used no measured time at that size.
        with open(self.path, "w") as f:
            f.write("config: train.yaml\nvariants: [{name: a}]\n")
        driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])
        measured = []

        def spawn(_driver, cmd, _log):
            top = int(cmd[cmd.index("--max-bytes") + 1])
            measured.append(top)
            with open(cmd[cmd.index("--out") + 1], "w") as f:
                json.dump({"points": [{"bytes": b, "time_s": 1e-6}
                                      for b in study.sweep_sizes(top)]}, f)
            return 0
        with mock.patch.object(study.Driver, "spawn", spawn), \
                contextlib.redirect_stdout(io.StringIO()):
            for top in (1 << 21, 1 << 21, 13025360, 13025360 + 1, 1 << 21):
                self.assertTrue(driver.bench_run("cpu", "ring", 2, top, 0))
        self.assertEqual(measured, [1 << 21, 13025360, 1 << 21])
        self.assertEqual(study.bench_sweep(driver.bench_file("cpu", "ring", 2, 0))[-1], 1 << 21)

    def test_no_all_reduce_measurement_without_a_one_rank_variant(self):
        # Without a one-rank variant there is no model to use it: it only took time.
        for variants, expected in (("[{name: b, ranks: 2}]", []),
                                   ("[{name: b, ranks: 2}, {name: a}]", [("cpu", "ring", 2)])):
            self.out = os.path.join(self.dir, f"out{len(expected)}")
            text = f"config: train.yaml\nrepeats: 1\nvariants: {variants}\n"
            self.finished_run(text, [], world_size=2)
            driver = study.Driver(studyfile.load(self.path), self.out, self.hpctrain, [])
            asked = []
            with mock.patch.object(study.Driver, "bench_run",
                                   lambda _driver, *a: asked.append(a[:3])):
                driver.bench_after_variant(driver.study["variants"][0])
            self.assertEqual(asked, expected, variants)

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
