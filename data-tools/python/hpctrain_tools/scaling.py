"""An alpha-beta model of a data-parallel training step, calibrated from measurements.

A step on P ranks is the compute of one rank (forward, backward, optimizer, input wait:
what one rank alone takes per step) plus the communication the strategy adds. Messages
cost alpha + bytes x beta per hop (alpha: latency, beta: seconds per byte = 1/bandwidth):

- allreduce (ring): 2(P-1) alpha + 2(P-1)/P n beta per step for n gradient bytes. With
  overlap (NCCL buckets summed while backward runs) only what outlasts backward is exposed.
- average (rank-0 parameter averaging every K steps): a reduce to rank 0 and a broadcast,
  each about 2(P-1)/P n beta + ceil(log2 P) alpha, once per K steps, never overlapped.
- async (S parameter servers, W = P - S workers): each worker pushes n gradient bytes and
  pulls n parameter bytes per step (2 alpha + 2 n beta on its own link); each server
  receives and sends n/S bytes per worker step. The rate is the lesser of what the workers
  compute and what the servers' links carry.

Ranks that share a node share its compute slots (cores for CPU ranks, GPUs for GPU ranks):
with r ranks per node each using u slots of s, compute slows by max(1, r u / s).

Speedup is measured in samples per second against one rank alone (per-rank batch fixed,
as in data-parallel training), so a step on P ranks does P times the samples.
"""

import argparse
import json
import math
import sys
from dataclasses import dataclass


@dataclass
class Network:
    """Latency (s) and inverse bandwidth (s/byte) of one hop; `name` says where from."""

    name: str
    alpha_s: float
    beta_s_per_byte: float

    def as_dict(self):
        return {"name": self.name, "alpha_us": self.alpha_s * 1e6,
                "bandwidth_GBps": 1e-9 / self.beta_s_per_byte if self.beta_s_per_byte else None}


@dataclass
class Compute:
    """One rank alone: seconds per step and the part of it that backward takes, the
    gradient bytes, and how ranks share a node (slots per node, slots per rank)."""

    step_s: float
    backward_fraction: float
    param_bytes: float
    slots_per_node: int = 1
    slots_per_rank: int = 1
    calibration_ranks_per_node: int = 1

    def as_dict(self):
        return dict(self.__dict__)


@dataclass
class Layout:
    """How a strategy runs: averaging period, parameter servers."""

    average_every: int = 8
    servers: int = 1


def ring_allreduce_s(net, ranks, nbytes):
    """Seconds of a ring all-reduce of `nbytes` on `ranks` ranks."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) * net.alpha_s + 2 * (ranks - 1) / ranks * nbytes * net.beta_s_per_byte


def fit_ring(points, ranks, name):
    """Fits alpha and beta to measured ring all-reduce times (bench allreduce points of
    algorithm "ring"): least squares on relative error, so small and large messages count
    alike. Returns a Network."""
    rows = [(p["bytes"], p["time_s"]) for p in points if p.get("algorithm") == "ring"]
    if ranks < 2 or len(rows) < 2:
        raise ValueError(f"need ring points on 2 or more ranks to fit, got {len(rows)}")
    a_coef = 2 * (ranks - 1)
    b_coef = 2 * (ranks - 1) / ranks
    # Minimise sum ((a_coef alpha + b_coef n beta - t) / t)^2: a 2x2 linear system.
    s11 = s12 = s22 = r1 = r2 = 0.0
    for n, t in rows:
        x1, x2 = a_coef / t, b_coef * n / t
        s11 += x1 * x1
        s12 += x1 * x2
        s22 += x2 * x2
        r1 += x1
        r2 += x2
    det = s11 * s22 - s12 * s12
    alpha = (r1 * s22 - r2 * s12) / det
    beta = (s11 * r2 - s12 * r1) / det
    if alpha < 0 or beta <= 0:  # latency lost in noise: fit bandwidth alone
        alpha = 0.0
        beta = r2 / s22
    return Network(name, alpha, beta)


def measured_time(points, nbytes):
    """The all-reduce time of `nbytes` read off measured points (one algorithm): log-log
    interpolation between the two sizes around it; None outside the measured range."""
    pts = sorted((p["bytes"], p["time_s"]) for p in points)
    for (n0, t0), (n1, t1) in zip(pts, pts[1:]):
        if n0 <= nbytes <= n1:
            f = math.log(nbytes / n0) / math.log(n1 / n0)
            return math.exp(math.log(t0) + f * math.log(t1 / t0))
    return None


def compute_step_s(comp, ranks_per_node):
    """One rank's compute per step when `ranks_per_node` ranks share a node."""
    def load(r):
        return max(1.0, r * comp.slots_per_rank / comp.slots_per_node)
    return comp.step_s * load(ranks_per_node) / load(comp.calibration_ranks_per_node)


def predict(comp, net, ranks, strategy, overlap, ranks_per_node, layout=None,
            allreduce_s=None):
    """Predicted step for `ranks` ranks: dict with step_s (seconds per step; under async
    per round in which every worker does one step), samples_per_step (in one-rank batches),
    speedup over one rank alone and efficiency (speedup / ranks). `allreduce_s`, when
    given, is the measured all-reduce time of the gradients, used instead of alpha-beta."""
    layout = layout or Layout()
    rpn = max(1, min(ranks, ranks_per_node))
    tc = compute_step_s(comp, rpn)
    n = comp.param_bytes
    if strategy == "allreduce":
        comm = allreduce_s if allreduce_s is not None else ring_allreduce_s(net, ranks, n)
        bwd = tc * comp.backward_fraction
        step = tc - bwd + max(bwd, comm) if overlap else tc + comm
        samples = ranks
    elif strategy == "average":
        hops = math.ceil(math.log2(ranks)) if ranks > 1 else 0
        per_sync = 2 * (hops * net.alpha_s + (2 * (ranks - 1) / ranks) * n * net.beta_s_per_byte)
        step = tc + per_sync / layout.average_every
        samples = ranks
    elif strategy == "async":
        servers = layout.servers
        workers = ranks - servers
        if workers < 1:
            raise ValueError(f"async needs more ranks than servers ({ranks} <= {servers})")
        worker = tc + 2 * net.alpha_s + 2 * n * net.beta_s_per_byte
        server = workers * 2 * (n / servers) * net.beta_s_per_byte
        step = max(worker, server)
        samples = workers
    else:
        raise ValueError(f"unknown strategy {strategy}")
    speedup = samples * comp.step_s / step
    return {"ranks": ranks, "strategy": strategy, "overlap": overlap, "step_s": step,
            "compute_s": tc, "samples_per_step": samples, "speedup": speedup,
            "efficiency": speedup / ranks}


def prediction_table(comp, net, ranks_list, ranks_per_node, layout=None):
    """Every strategy (allreduce with and without overlap, average, async) at each count."""
    layout = layout or Layout()
    rows = []
    for p in ranks_list:
        if p < 2:
            continue
        rows.append(predict(comp, net, p, "allreduce", True, ranks_per_node, layout))
        rows.append(predict(comp, net, p, "allreduce", False, ranks_per_node, layout))
        rows.append(predict(comp, net, p, "average", False, ranks_per_node, layout))
        if p > layout.servers:
            rows.append(predict(comp, net, p, "async", False, ranks_per_node, layout))
    return rows


def powers_of_two(lo, hi):
    """2, 4, ..., up to hi."""
    out, p = [], max(2, lo)
    while p <= hi:
        out.append(p)
        p *= 2
    return out


def format_table(rows):
    """A Markdown table of predictions."""
    lines = ["| ranks | strategy | overlap | step (ms) | speedup | efficiency |",
             "|---:|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['ranks']} | {r['strategy']} | {'yes' if r['overlap'] else 'no'} | "
                     f"{r['step_s'] * 1e3:.2f} | {r['speedup']:.2f} | "
                     f"{100 * r['efficiency']:.1f}% |")
    return "\n".join(lines)


def parse_ranks(text):
    """The counts of --ranks: 'A-B' (A, 2A, 4A, ... up to B, from 2 when A is 1) or a
    comma list, every count >= 2. ValueError saying what is wrong."""
    is_range = "-" in text
    try:
        if is_range:
            lo, hi = (int(x) for x in text.split("-"))
        else:
            ranks = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"expected A-B or a comma list, got '{text}'") from None
    if not is_range:
        if min(ranks) < 2:
            raise ValueError(f"expected counts >= 2, got '{text}'")
        return ranks
    if not 1 <= lo <= hi or hi < 2:
        raise ValueError(f"expected A-B with 1 <= A <= B and B >= 2, got '{text}'")
    return powers_of_two(lo, hi)


# The numeric options of `hpctrain scaling` and the values each takes.
OPTION_RANGES = {
    "step_ms": (lambda v: v > 0, "a finite number > 0"),
    "backward_fraction": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "params": (lambda v: v > 0, "a finite number > 0"),
    "bytes_per_param": (lambda v: v > 0, "a finite number > 0"),
    "alpha_us": (lambda v: v >= 0, "a finite number >= 0"),
    "bandwidth_gbs": (lambda v: v > 0, "a finite number > 0"),
    "ranks_per_node": (lambda v: v >= 1, "an integer >= 1"),
    "slots_per_node": (lambda v: v >= 0, "an integer >= 0"),
    "average_every": (lambda v: v >= 1, "an integer >= 1"),
    "servers": (lambda v: v >= 1, "an integer >= 1"),
}


def option_error(args):
    """The first numeric option of `args` out of its range (nan and inf are), as a line
    naming it; None when all are in range."""
    for name, (ok, expected) in OPTION_RANGES.items():
        value = getattr(args, name)
        if (isinstance(value, float) and not math.isfinite(value)) or not ok(value):
            return f"--{name.replace('_', '-')}: expected {expected}, got {value!r}"
    return None


def finite_or_null(x):
    """`x` with every non-finite float replaced by None (JSON has no NaN or Infinity)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite_or_null(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_or_null(v) for v in x]
    return x


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2, and which
    keeps an option's value whole whatever it starts with (`--out -x` is the folder "-x", as
    in hpctrain's own commands; argparse took "-x" for an option)."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {message}\n")

    def parse_known_args(self, args=None, namespace=None):
        if args is not None:
            takes_value = {o for a in self._actions if a.option_strings and a.nargs is None
                           and isinstance(a, (argparse._StoreAction, argparse._AppendAction))
                           for o in a.option_strings}
            joined, i = [], 0
            while i < len(args):
                if args[i] == "--":
                    joined += args[i:]
                    break
                if args[i] in takes_value and i + 1 < len(args):
                    joined.append(f"{args[i]}={args[i + 1]}")
                    i += 2
                else:
                    joined.append(args[i])
                    i += 1
            args = joined
        return super().parse_known_args(args, namespace)


def main(argv):
    """`hpctrain scaling`: predictions from figures given on the command line."""
    ap = OneLineParser(
        prog="hpctrain scaling",
        description="Predict data-parallel step time, speedup and efficiency at 2..N ranks "
                    "with an alpha-beta model (docs/study.md).")
    ap.add_argument("--step-ms", type=float, required=True,
                    help="one rank alone: milliseconds per training step")
    ap.add_argument("--backward-fraction", type=float, default=0.6,
                    help="part of the step that backward takes (overlap window; default 0.6)")
    ap.add_argument("--params", type=float, required=True,
                    help="parameters of the model (gradient bytes = 4 x params)")
    ap.add_argument("--bytes-per-param", type=float, default=4.0)
    ap.add_argument("--alpha-us", type=float, required=True, help="latency per hop (us)")
    ap.add_argument("--bandwidth-gbs", type=float, required=True,
                    help="bandwidth per link (GB/s, 1e9 bytes)")
    ap.add_argument("--network", default="given", help="a name for the network")
    ap.add_argument("--ranks", default="2-4096",
                    help="counts >= 2: 'A-B' (A, 2A, 4A, ... up to B) or a comma list "
                         "(default 2-4096)")
    ap.add_argument("--ranks-per-node", type=int, default=1)
    ap.add_argument("--slots-per-node", type=int, default=0,
                    help="GPUs (or cores at one per rank) of a node; default: ranks per node, "
                         "so no two ranks share a device")
    ap.add_argument("--average-every", type=int, default=8)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    bad = option_error(a)
    if bad:
        ap.error(bad)
    if not math.isfinite(a.params * a.bytes_per_param):
        ap.error(f"--bytes-per-param: --params x --bytes-per-param is beyond a double "
                 f"({a.params!r} x {a.bytes_per_param!r})")
    try:
        ranks = parse_ranks(a.ranks)
    except ValueError as e:
        ap.error(f"--ranks: {e}")
    comp = Compute(a.step_ms / 1e3, a.backward_fraction, a.params * a.bytes_per_param,
                   slots_per_node=a.slots_per_node or a.ranks_per_node)
    net = Network(a.network, a.alpha_us * 1e-6, 1e-9 / a.bandwidth_gbs)
    rows = prediction_table(comp, net, ranks, a.ranks_per_node,
                            Layout(a.average_every, a.servers))
    if a.json:  # a figure beyond a double (from extreme options) is null: valid JSON
        print(json.dumps(finite_or_null({"compute": comp.as_dict(), "network": net.as_dict(),
                                         "predictions": rows}), indent=1, allow_nan=False))
    else:
        print(f"network {net.name}: alpha {a.alpha_us:g} us, {a.bandwidth_gbs:g} GB/s; "
              f"one rank {a.step_ms:g} ms per step, {comp.param_bytes / 1e6:.1f} MB of gradients")
        print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
