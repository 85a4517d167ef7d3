"""Unit tests of the alpha-beta scaling model behind `hpctrain study` and `hpctrain
scaling`: its formulas, the fit, the interpolation between measured sizes, the strategies,
and bad input to `hpctrain scaling` (exit 2, one line naming the option), whose --json
stays valid JSON."""

import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "data-tools" / "python")]

from hpctrain_tools import scaling  # noqa: E402
from tools_helpers import run_main  # noqa: E402


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

    def test_json_stays_json_when_a_figure_is_beyond_a_double(self):
        # 1e-320 GB/s is finite, but a second per byte of it is not: null, not Infinity.
        rc, out, err = run_main(scaling.main, ["--step-ms", "10", "--params", "1e6",
                                               "--alpha-us", "1", "--bandwidth-gbs", "1e-320",
                                               "--ranks", "2", "--json"])
        self.assertEqual((rc, err), (0, ""))

        def refuse(constant):
            raise ValueError(f"not JSON: {constant}")
        doc = json.loads(out, parse_constant=refuse)
        self.assertIsNone(doc["predictions"][1]["step_s"])  # allreduce without overlap

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
        # A product beyond a double: refused, not printed as Infinity (not JSON).
        rc, out, err = run_main(scaling.main, ["--step-ms", "10", "--params", "1e308",
                                               "--bytes-per-param", "10", "--alpha-us", "1",
                                               "--bandwidth-gbs", "10", "--json"])
        self.assertEqual((rc, out), (2, ""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("--bytes-per-param", err)
        rc, out, err = run_main(scaling.main, ["--step-ms", "10"])
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("--params", err)


class OptionValues(unittest.TestCase):
    """An option's value is kept whole whatever it starts with, as in hpctrain's own
    commands (`hpctrain study S.yaml --out -o` was argparse's "expected one argument")."""

    def test_a_value_that_starts_with_a_dash(self):
        ap = scaling.OneLineParser(prog="t")
        ap.add_argument("study")
        ap.add_argument("--out")
        ap.add_argument("--set", action="append", default=[])
        ap.add_argument("--dry-run", action="store_true")
        a = ap.parse_args(["s.yaml", "--out", "-o", "--set", "-x=1", "--dry-run",
                           "--set=--y"])
        self.assertEqual((a.study, a.out, a.set, a.dry_run),
                         ("s.yaml", "-o", ["-x=1", "--y"], True))
        top = scaling.OneLineParser(prog="p")
        run = top.add_subparsers(dest="what").add_parser("run")  # as `hpctrain plot` has
        run.add_argument("run_dir")
        run.add_argument("--out")
        a = top.parse_args(["run", "--out", "-plots", "r"])
        self.assertEqual((a.what, a.out, a.run_dir), ("run", "-plots", "r"))
        # Words after "--" are positional, as argparse has them.
        a = ap.parse_args(["--out", "o", "--", "--set"])
        self.assertEqual((a.study, a.set), ("--set", []))


if __name__ == "__main__":
    unittest.main()
