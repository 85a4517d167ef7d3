"""What the plotting modules share: matplotlib set up for files (Agg), figure sizes, the
readers of metrics.csv, power.csv and study.json, and small drawing helpers. A missing or
malformed input raises PlotInputError, whose message names the file."""

import csv
import json
import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

DPI = 110
ONE_PANEL = (7, 4.5)
ONE_PANEL_LEGEND = (9, 4.5)  # a panel with its legend on the right
TWO_PANELS = (11, 4.5)
METRICS_COLUMNS = ("epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy")
POWER_COLUMNS = ("time_s", "device", "power_w")


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


def read_power(path):
    """power.csv as {device: (times in s, watts)}, devices sorted; {} when the file does
    not exist or has no rows."""
    if not os.path.exists(path):
        return {}
    series = {}
    for row in _read_rows(path, POWER_COLUMNS):
        t, w = _number(path, row, "time_s"), _number(path, row, "power_w")
        if t is not None and w is not None:
            times, watts = series.setdefault(row["device"], ([], []))
            times.append(t)
            watts.append(w)
    return dict(sorted(series.items()))


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
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
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


def _energy_reason(variants, fallback):
    return next((v["energy_reason"] for v in variants if v.get("energy_reason")), fallback)


def _plot_power(ax, series, colors):
    """One line per device of read_power's `series`, coloured by colors[device]."""
    for device, (times, watts) in series.items():
        ax.plot(times, watts, label=device, linewidth=1.2, color=colors[device])
    ax.set_xlabel("time (s)")
    ax.set_ylabel("power (W)")
    ax.grid(alpha=0.3)
