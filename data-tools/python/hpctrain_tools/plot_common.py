"""What the plotting modules share: matplotlib set up for files (Agg), figure sizes, the
readers of metrics.csv, power.csv (power averaged over a sliding window) and study.json, and
small drawing helpers. A missing or malformed input raises PlotInputError, whose message
names the file."""

import csv
import json
import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

DPI = 110
ONE_PANEL = (7, 4.5)
ONE_PANEL_LEGEND = (9, 4.5)  # a panel with its legend on the right
TWO_PANELS = (11, 4.5)
METRICS_COLUMNS = ("epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy")
POWER_COLUMNS = ("time_s", "device", "power_w")  # energy_j too, where present
POWER_WINDOW_S = 0.5  # the power plotted: averaged over this many seconds (window_power)


class PlotInputError(Exception):
    """A missing or malformed input file, or an output folder that cannot be made: the
    message is one line that names the file (or the option)."""


def make_out_dir(path, shown):
    """Makes the folder the PNGs go into; PlotInputError naming `shown` (the option and
    its value, or the folder) when it is a file or cannot be made."""
    folder = "" if shown.endswith(path) else f" {path}"
    if os.path.exists(path) and not os.path.isdir(path):
        raise PlotInputError(f"{shown}:{folder}{' is' if folder else ''} not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise PlotInputError(f"{shown}: cannot create{folder}: {e.strerror}") from e


def _read_rows(path, columns):
    """The rows of a CSV file as dicts, after checking that the header has `columns`.
    Rows with a missing field (a file cut short by a killed run) are left out."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in columns if c not in header]
            if missing:
                raise PlotInputError(f"{path}: header lacks {', '.join(missing)}")
            return [r for r in reader if all(r.get(c) is not None for c in columns)]
    except OSError as e:
        raise PlotInputError(f"{path}: cannot read: {e.strerror}") from e
    except (UnicodeDecodeError, csv.Error) as e:
        raise PlotInputError(f"{path}: not a CSV file: {e}") from e


def _number(path, row, key):
    """row[key] as a float; None for an empty field."""
    text = row[key].strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError as e:
        raise PlotInputError(f"{path}: {key}: expected a number, got {text!r}") from e


def read_metrics(path):
    """metrics.csv as {epoch: {column: float or None}}, sorted by epoch. A resumed run
    appends rows, so the last row of an epoch is the current one."""
    epochs = {}
    for row in _read_rows(path, METRICS_COLUMNS):
        epoch = _number(path, row, "epoch")
        if epoch is None:
            raise PlotInputError(f"{path}: a row without an epoch")
        epochs[int(epoch)] = {k: _number(path, row, k) for k in METRICS_COLUMNS[1:]}
    if not epochs:
        raise PlotInputError(f"{path}: no epoch rows")
    return dict(sorted(epochs.items()))


def window_power(times, joules, window_s=POWER_WINDOW_S):
    """The power at each sample averaged over the last window_s seconds, from a counter of
    joules since time 0: (E_i - E_j) / (t_i - t_j), j the latest sample at or before
    t_i - window_s, and (0 s, 0 J) before the first sample; a sample less than window_s
    after time 0 averages from there (a shorter window). The RAPL and NVML counters behind
    power.csv advance in coarse steps, so power_w, the power of one interval (100 ms),
    jumps from step to step (an idle GPU reads 75, 155, 75 W; a 700 W GPU reads 1009 W)
    while over half a second the steps average out. times ascending. A sample whose joules
    is None gets None (the caller keeps its power_w) and starts no later window; one with
    no earlier time to average from (t = 0) gets None too."""
    start_t, start_j = [0.0], [0.0]  # the samples a window can start from
    first = 0  # index into start_*: the latest at or before t - window_s seen so far
    watts = []
    for t, j in zip(times, joules):
        if j is None:
            watts.append(None)
            continue
        # 1e-6: times have 1 ms resolution, and 0.6 - 0.5 is a little below 0.1 in floats
        while first + 1 < len(start_t) and start_t[first + 1] <= t - window_s + 1e-6:
            first += 1
        dt = t - start_t[first]
        watts.append((j - start_j[first]) / dt if dt > 0 else None)
        start_t.append(t)
        start_j.append(j)
    return watts


def read_power(path):
    """power.csv as {device: (times in s, watts, averaged)}, devices sorted; {} when the
    file does not exist or has no rows. watts is window_power's average over
    POWER_WINDOW_S from energy_j; a row without energy_j (an empty field, or a file
    without the column) keeps its power_w, and averaged (a bool per sample) says which."""
    if not os.path.exists(path):
        return {}
    rows = {}
    for row in _read_rows(path, POWER_COLUMNS):
        t, w = _number(path, row, "time_s"), _number(path, row, "power_w")
        j = _number(path, row, "energy_j") if row.get("energy_j") is not None else None
        if t is not None and (w is not None or j is not None):
            rows.setdefault(row["device"], []).append((t, w, j))
    series = {}
    for device, samples in sorted(rows.items()):
        times, raw, joules = zip(*samples)
        points = [(t, a if a is not None else w, a is not None)
                  for t, w, a in zip(times, raw, window_power(times, joules))
                  if a is not None or w is not None]
        if points:
            series[device] = tuple(list(column) for column in zip(*points))
    return series


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise PlotInputError(f"{path}: cannot read: {e.strerror}") from e
    except ValueError as e:
        raise PlotInputError(f"{path}: not valid JSON: {e}") from e


def read_study(path):
    """study.json, after checking the keys every study figure needs."""
    doc = _read_json(path)
    variants = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(variants, list) or not variants:
        raise PlotInputError(f"{path}: expected an object with a non-empty 'variants' list")
    for i, v in enumerate(variants):
        if not isinstance(v, dict) or not isinstance(v.get("name"), str):
            raise PlotInputError(f"{path}: variants[{i}]: expected an object with a 'name'")
        if not isinstance(v.get("devices"), int) or v["devices"] < 1:
            raise PlotInputError(f"{path}: variants[{i}] ({v['name']}): devices: expected an "
                                 f"integer >= 1, got {v.get('devices')!r}")
    if not isinstance(doc.get("baselines", []), list):
        raise PlotInputError(f"{path}: baselines: expected a list of variant names")
    model = doc.get("model")
    if model is not None and not isinstance((model or 0) and model.get("predictions"), list):
        raise PlotInputError(f"{path}: model: expected null or an object with 'predictions'")
    return doc


def _save(fig, path):
    """Writes the figure through a temporary file renamed over `path`: a symbolic link found
    there is replaced, never written through, and a failed write leaves no half file."""
    fig.tight_layout()
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        fig.savefig(tmp, dpi=DPI, format=os.path.splitext(path)[1][1:] or "png")
        os.replace(tmp, path)
    except OSError as e:  # named by the file asked for, not the temporary
        raise OSError(e.errno, e.strerror, path) from e
    finally:
        plt.close(fig)
        if os.path.lexists(tmp):
            os.remove(tmp)
    return path


def _legend_right(ax, handles=None):
    """The legend outside the axes, on the right (tight_layout makes room for it)."""
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")


def _note(ax, text):
    """Centred text on an empty panel (tick_params: the ticks of shared axes stay)."""
    note = ax.text(0.5, 0.5, textwrap.fill(text, 60), ha="center", va="center",
                   transform=ax.transAxes)
    note.set_in_layout(False)  # else tight_layout shrinks the axes around the long text
    ax.tick_params(left=False, bottom=False, labelleft=False, labelbottom=False)


def _array(values):
    return np.array([math.nan if x is None else x for x in values], dtype=float)


def _stat(v, key):
    """(mean, min, max) of one of a variant's {mean, min, max} figures, or None."""
    s = v.get(key)
    return (s["mean"], s["min"], s["max"]) if s else None


def _colors(names):
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {name: cycle[i % len(cycle)] for i, name in enumerate(names)}


def _log2_axis(ax, lo, hi):
    """A log2 x axis from lo to hi, a tick labelled at every power of two."""
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xticks([2 ** k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)])
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))


def _epoch_axis(ax, epochs):
    """An x axis of whole epochs, half an epoch of room either side (around one epoch
    matplotlib's own limits ticked 0.975, 0.990, 1.005), integer ticks even where one
    integer is in view."""
    ax.set_xlabel("epoch")
    if epochs:
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _energy_reason(variants, fallback):
    return next((v["energy_reason"] for v in variants if v.get("energy_reason")), fallback)


def _power_label(series):
    """The y label of read_power's `series`: it says over how long the power is averaged,
    and whether some samples (those without energy_j) are single intervals instead."""
    averaged = [a for _, _, flags in series.values() for a in flags]
    if not any(averaged):
        return "power (W), per sample"
    label = f"power (W), mean over {POWER_WINDOW_S:g} s"
    return label if all(averaged) else label + "\n(per sample where no energy_j)"


def _plot_power(ax, series, colors):
    """One line per device of read_power's `series`, coloured by colors[device]."""
    for device, (times, watts, _) in series.items():
        ax.plot(times, watts, label=device, linewidth=1.2, color=colors[device])
    ax.set_xlabel("time (s)")
    ax.set_ylabel(_power_label(series))
    ax.grid(alpha=0.3)
