"""PNG plots of one training run (metrics.csv, power.csv), of a scaling study (study.json and
its runs' power.csv; plot_study.py) and of an all-reduce benchmark (`hpctrain bench
allreduce --out`).

Each plot_* function returns the paths it wrote; main() is `hpctrain plot`. A missing or
malformed input raises PlotInputError, whose message names the file (main: exit 2).
"""

import math
import os
import sys

from matplotlib.ticker import FuncFormatter

from hpctrain_tools.plot_common import (ONE_PANEL, ONE_PANEL_LEGEND, TWO_PANELS,
                                        PlotInputError, _colors, _epoch_axis, _legend_right,
                                        _plot_power,
                                        _read_json, _save, make_out_dir, plt, read_metrics,
                                        read_power)
from hpctrain_tools.plot_study import plot_study, study_plot_names
from hpctrain_tools.scaling import OneLineParser

__all__ = ["plot_run", "plot_study", "plot_allreduce", "study_plot_names", "main",
           "PlotInputError"]


def plot_run(run_dir, out_dir=None):
    """curves.png (loss and accuracy per epoch, train and validation) and, when
    run_dir/power.csv has rows, power.png (power per device over time), written into
    out_dir (default run_dir/plots). Returns the paths written."""
    epochs = read_metrics(os.path.join(run_dir, "metrics.csv"))
    power = read_power(os.path.join(run_dir, "power.csv"))
    if out_dir:
        make_out_dir(out_dir, f"--out {out_dir}")
    else:
        out_dir = os.path.join(run_dir, "plots")
        make_out_dir(out_dir, out_dir)
    name = "/".join(os.path.abspath(run_dir).split(os.sep)[-2:])  # runs/cpu-1/r0: cpu-1/r0

    fig, axes = plt.subplots(1, 2, figsize=TWO_PANELS)
    for ax, what, label in zip(axes, ("loss", "accuracy"), ("cross-entropy loss", "accuracy")):
        for split, style, legend in (("train", "o-", "train"), ("val", "s--", "validation")):
            points = [(e, r[f"{split}_{what}"]) for e, r in epochs.items()
                      if r[f"{split}_{what}"] is not None]
            if points:
                ax.plot(*zip(*points), style, label=legend)
        _epoch_axis(ax, list(epochs))
        ax.set_ylabel(label)
        ax.set_title(f"{label} per epoch")
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend()  # one line too: it says whether that is training or validation
    fig.suptitle(f"run {name}: {len(epochs)} epoch{'' if len(epochs) == 1 else 's'}")
    written = [_save(fig, os.path.join(out_dir, "curves.png"))]
    if power:
        fig, ax = plt.subplots(figsize=ONE_PANEL_LEGEND if len(power) > 1 else ONE_PANEL)
        _plot_power(ax, power, _colors(power))
        if len(power) > 1:
            _legend_right(ax)
        ax.set_title(f"run {name}: power per device")
        written.append(_save(fig, os.path.join(out_dir, "power.png")))
    return written


def _human_bytes(n):
    """4096 -> "4 KiB", 2**28 -> "256 MiB"."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    k = 0
    while n >= 1024 and k < len(units) - 1:
        n /= 1024
        k += 1
    return f"{n:g} {units[k]}"


def plot_allreduce(json_path, out_path=None):
    """Bus bandwidth against message size, one line per algorithm, from the JSON of
    `hpctrain bench allreduce --out`; written to out_path (default: the JSON's path with
    .png). Returns [out_path]."""
    doc = _read_json(json_path)
    points = doc.get("points") if isinstance(doc, dict) else None
    if not isinstance(points, list) or not points:
        raise PlotInputError(f"{json_path}: expected an object with a non-empty 'points' list")
    lines = {}
    for i, p in enumerate(points):
        try:
            size, busbw = float(p["bytes"]), float(p["busbw_GBps"])
        except (KeyError, TypeError, ValueError) as e:
            raise PlotInputError(f"{json_path}: points[{i}]: expected bytes and busbw_GBps "
                                 f"numbers ({type(e).__name__}: {e})") from e
        if not (0 < size < math.inf) or not math.isfinite(busbw):
            raise PlotInputError(f"{json_path}: points[{i}]: expected finite numbers, bytes "
                                 f"> 0 (got bytes {p['bytes']}, busbw_GBps {p['busbw_GBps']})")
        lines.setdefault(str(p.get("algorithm", "?")), []).append((size, busbw))
    shown = f"--out {out_path}" if out_path else None
    out_path = out_path or os.path.splitext(json_path)[0] + ".png"
    if os.path.isdir(out_path):
        raise PlotInputError(f"{shown or out_path}: a directory, not a PNG file name")
    make_out_dir(os.path.dirname(os.path.abspath(out_path)), shown or out_path)

    fig, ax = plt.subplots(figsize=ONE_PANEL)
    for algorithm, pts in lines.items():
        ax.plot(*zip(*sorted(pts)), "o-", markersize=4, label=algorithm)
    sizes = [b for pts in lines.values() for b, _ in pts]
    lo, hi = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    step = max(1, math.ceil((hi - lo + 1) / 9))  # at most about 9 labelled ticks
    ax.set_xscale("log", base=2)
    ax.set_xticks([2.0 ** k for k in range(lo, hi + 1, step)])
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _human_bytes(x)))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    # Counts for the title only: any other value there is left out of it.
    reps, runs = (v if isinstance(v, int) and not isinstance(v, bool) else None
                  for v in (doc.get("reps"), doc.get("runs")))
    median = f"median of {reps} repetitions" if reps else ""
    if runs and runs > 1:  # a study's merged file: each size's faster run
        median = f"faster of {runs} runs" + (f" (each a {median})" if median else "")
    ax.set_title(f"all-reduce bus bandwidth on {doc.get('ranks', '?')} ranks"
                 + (f", {median}" if median else ""))
    ax.grid(alpha=0.3, which="both")
    if len(lines) > 1:
        ax.legend(title="algorithm")
    return [_save(fig, out_path)]


def main(argv):
    """`hpctrain plot run RUN_DIR [--out DIR] | study STUDY_DIR | allreduce FILE.json
    [--out FILE.png]`: prints "wrote PATH" per PNG; a bad input is one line on stderr
    and exit code 2."""
    ap = OneLineParser(
        prog="hpctrain plot", description="PNG plots of a run, a study or an all-reduce benchmark")
    sub = ap.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="curves.png and power.png of one training run")
    run.add_argument("run_dir")
    run.add_argument("--out", help="folder for the PNGs (default RUN_DIR/plots)")
    study = sub.add_parser("study", help="the study's figures, into STUDY_DIR/plots")
    study.add_argument("study_dir")
    bench = sub.add_parser("allreduce", help="bus bandwidth of `hpctrain bench allreduce`")
    bench.add_argument("json")
    bench.add_argument("--out", help="the PNG (default: FILE with .png)")
    args = ap.parse_args(argv)
    try:
        if args.what == "run":
            written = plot_run(args.run_dir, args.out)
        elif args.what == "study":
            written = plot_study(args.study_dir)
        else:
            written = plot_allreduce(args.json, args.out)
    except PlotInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a PNG that cannot be written
        name = str(e.filename or "")
        given = getattr(args, "out", None)
        if given and os.path.abspath(name) == os.path.abspath(given):
            name = f"--out {given}"
        print(f"error: {name}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
