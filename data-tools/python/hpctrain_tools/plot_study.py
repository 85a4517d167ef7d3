"""The figures of a scaling study (`hpctrain plot study DIR`, and every `hpctrain study`):
accuracy per epoch, phase times, measured and modelled scaling, power and energy, from
study.json and the first repeat's power.csv of each variant (docs/study.md)."""

import math
import os

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from hpctrain_tools.plot_common import (ONE_PANEL, ONE_PANEL_LEGEND, TWO_PANELS,
                                        PlotInputError, _array, _colors, _energy_reason,
                                        _epoch_axis, _legend_right, _log2_axis, _note,
                                        _plot_power, _save, _stat, make_out_dir, plt,
                                        read_power, read_study)

STUDY_PLOTS = ("accuracy.png", "phases.png", "scaling.png", "scaling_model.png", "power.png",
               "energy.png")
# The scaling model's (strategy, overlap) pairs: label, line style, grey level.
MODEL_STYLES = {("allreduce", True): ("model: allreduce, overlapped", "-", "0.15"),
                ("allreduce", False): ("model: allreduce, not overlapped", "--", "0.15"),
                ("average", False): ("model: average", "-.", "0.4"),
                ("async", False): ("model: async", ":", "0.4")}
IDEAL = {"color": "0.7", "linewidth": 3, "zorder": 0}
PHASES = (("time_train_s", "train"), ("time_val_s", "validation"), ("time_test_s", "test"))
LOG_SPREAD = 30  # bars: a log y axis where the largest is over this times the smallest


def study_plot_names():
    """The files plot_study writes into STUDY_DIR/plots, in the order it writes them."""
    return list(STUDY_PLOTS)


def plot_study(study_dir):
    """The six figures of study_plot_names() from study_dir/study.json (and the first
    repeat's power.csv of each variant), written into study_dir/plots. Returns their
    paths. Content of the wrong shape raises PlotInputError naming study.json."""
    path = os.path.join(study_dir, "study.json")
    doc = read_study(path)
    out_dir = os.path.join(study_dir, "plots")
    make_out_dir(out_dir, out_dir)
    figures = (_accuracy_figure, _phases_figure, _scaling_figure, _scaling_model_figure,
               _power_figure, _energy_figure)
    written = []
    try:
        for name, draw in zip(STUDY_PLOTS, figures):
            written.append(_save(draw(doc, study_dir), os.path.join(out_dir, name)))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        plt.close("all")
        raise PlotInputError(f"{path}: unexpected content ({type(e).__name__}: {e})") from e
    return written


def _title(doc, what):
    return f"{doc.get('study', 'study')}: {what}"


def _variant_axis(ax, names):
    """Categorical x axis, one tick per variant; long lists slanted."""
    slant = len(names) > 4
    ax.set_xticks(np.arange(len(names)))
    ax.set_xticklabels(names, rotation=30 if slant else 0, ha="right" if slant else "center")
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_xlabel("variant")
    ax.grid(axis="y", alpha=0.3)


def _log_bottom(tops, lowest=None):
    """None when bars reaching `tops` (None or 0: no bar) read well on a linear y axis: the
    largest at most LOG_SPREAD times the smallest. Else they go on a log axis (on a linear
    one a GPU variant 200x faster than the CPU one is a pixel high), and this is its
    bottom: the power of ten at least 1.5x below the smallest top, or below `lowest` (the
    lowest top of a stacked segment), so that the shortest bar still shows."""
    tops = [t for t in tops if t and t > 0]
    if not tops or max(tops) <= LOG_SPREAD * min(tops):
        return None
    low = min(tops + ([lowest] if lowest else []))
    return 10.0 ** math.floor(math.log10(low / 1.5))


def _short(value):
    """20784.9 -> "20,785", 1.1751 -> "1.18"."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _log_bars(ax, bottom, values, heights, unit):
    """The y axis made log from `bottom`, and each bar's values[i] (None: no bar) written
    above heights[i] (the top of its bar or whisker): read off a log axis, the value of a
    bar decades below the others would be a guess."""
    ax.set_yscale("log")
    top = max(h for h in heights if h)
    ax.set_ylim(bottom, top * (top / bottom) ** 0.15)  # room above the tallest for its value
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    for i, (value, height) in enumerate(zip(values, heights)):
        if value:
            ax.annotate(f"{_short(value)}{unit}", (i, height), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize="small")


def _accuracy_figure(doc, _study_dir):
    variants = doc["variants"]
    colors = _colors([v["name"] for v in variants])
    fig, ax = plt.subplots(figsize=ONE_PANEL_LEGEND)
    skipped = []
    for v in variants:
        acc = v.get("val_accuracy_per_epoch")
        mean = _array(acc["mean"]) if acc else np.array([])
        if not np.isfinite(mean).any():
            skipped.append(v["name"])
            continue
        x, ok = np.array(v["epochs"], dtype=float), np.isfinite(mean)
        lo, hi = _array(acc["min"]), _array(acc["max"])
        ax.plot(x[ok], mean[ok], "o-", color=colors[v["name"]], label=v["name"])
        ax.fill_between(x[ok], lo[ok], hi[ok], color=colors[v["name"]], alpha=0.2, linewidth=0)
    if len(skipped) == len(variants):
        _note(ax, "no validation accuracy in any variant")
        ax.set_title(_title(doc, "validation accuracy (no variant has validation data)"))
        return fig
    title = "validation accuracy per epoch\n(mean over repeats, band: min to max)"
    if skipped:
        title += f"\nno validation data: {', '.join(skipped)}"
    ax.set_title(_title(doc, title))
    _epoch_axis(ax, sorted({e for v in variants for e in v["epochs"]}))
    ax.set_ylabel("validation accuracy (fraction correct)")
    ax.grid(alpha=0.3)
    _legend_right(ax)  # even for one line: it names the variant
    return fig


def _phases_figure(doc, _study_dir):
    """Stacked phase seconds per variant; on a log axis, from _log_bottom's bottom, with
    each total written above its bar, when the totals spread over LOG_SPREAD."""
    variants = doc["variants"]
    x = np.arange(len(variants))
    fig, ax = plt.subplots(figsize=ONE_PANEL)
    tops = np.cumsum([[(_stat(v, key) or (0.0,))[0] for v in variants] for key, _ in PHASES],
                     axis=0)  # tops[k][i]: where phase k of variant i ends in the stack
    totals = [_stat(v, "time_s") for v in variants]
    shown = [t[0] if t else tops[-1][i] for i, t in enumerate(totals)]
    bottom = _log_bottom(shown, tops[tops > 0].min() if (tops > 0).any() else None)
    lower = np.full(len(variants), bottom or 0.0)
    for (_, label), top in zip(PHASES, tops):
        ax.bar(x, np.maximum(top - lower, 0.0), 0.6, bottom=lower, label=label)
        lower = np.maximum(lower, top)
    label = "total: min to max"  # on the first whisker only
    for i, total in enumerate(totals):
        if total:
            ax.errorbar([i], [total[0]], yerr=[[total[0] - total[1]], [total[2] - total[0]]],
                        fmt="none", ecolor="black", capsize=5, label=label)
            label = None
    _variant_axis(ax, [v["name"] for v in variants])
    if bottom:
        _log_bars(ax, bottom, shown, [max(tops[-1][i], t[2] if t else 0.0)
                                      for i, t in enumerate(totals)], " s")
    ax.set_ylabel("time (s)")
    # The repeats that finished (a study stopped early has fewer than it planned).
    done = sorted({v.get("repeats_done", doc.get("repeats", 0)) for v in variants})
    repeats = str(done[0]) if len(done) == 1 else f"{done[0]} to {done[-1]}"
    ax.set_title(_title(doc, f"time per phase (mean of {repeats} repeat"
                             f"{'' if repeats == '1' else 's'})"))
    ax.legend()
    return fig


def _measured(doc):
    """The measured points against baselines[0], one per variant that has a speedup
    against it: {name, devices, speedup: (mean, min, max), speedup_train, efficiency:
    (mean, min, max), efficiency_train}; and the baseline's devices (1 without one)."""
    baselines = doc.get("baselines") or []
    by_name = {v["name"]: v for v in doc["variants"]}
    if not baselines or baselines[0] not in by_name:
        return [], 1
    base_devices = by_name[baselines[0]]["devices"]
    rows = []
    for v in doc["variants"]:
        sp = (v.get("speedup") or {}).get(baselines[0])
        if not sp:
            continue
        scale = v["devices"] / base_devices
        total = (sp["total"], sp.get("total_min", sp["total"]), sp.get("total_max", sp["total"]))
        eff, eff_train = v.get("efficiency"), v.get("efficiency_train")
        rows.append({
            "name": v["name"], "devices": v["devices"],
            "speedup": total, "speedup_train": sp["train"],
            "efficiency": (total[0] / scale if eff is None else eff,
                           total[1] / scale, total[2] / scale),
            "efficiency_train": sp["train"] / scale if eff_train is None else eff_train})
    return rows, base_devices


def _baseline_pair(doc):
    """The (strategy, overlap) pair of the model that the first baseline ran (overlap: the
    NCCL all-reduce, as the model's calibration has it); None without the baseline."""
    by_name = {v["name"]: v for v in doc["variants"]}
    b = by_name.get((doc.get("baselines") or [None])[0])
    if b is None:
        return None
    strategy = b.get("strategy") or "allreduce"
    return strategy, strategy == "allreduce" and b.get("algorithm") == "nccl"


def _model_lines(ax, model, key, max_ranks=None, base=1, ref=None):
    """The model's `key` (speedup or efficiency) against ranks, one line per (strategy,
    overlap) pair, ranks up to max_ranks. The model's figures are against one rank; with a
    baseline of `base` ranks that ran the pair `ref`, every line is divided by ref's value
    there, as the measured points are by the baseline's (S(n)/S_ref(base), and
    E(n)/E_ref(base) for the efficiency, which is that over n/base); without a prediction
    for ref at `base` no line is drawn."""
    pairs = {}
    for p in (model or {}).get("predictions", []):
        if max_ranks is None or p["ranks"] <= max_ranks:
            pairs.setdefault((p["strategy"], bool(p["overlap"])), []).append(
                (p["ranks"], p[key]))
    at_base = 1.0 if base == 1 else dict(pairs.get(ref, [])).get(base)
    if not at_base:
        return
    order = list(MODEL_STYLES)
    for pair in sorted(pairs, key=lambda k: order.index(k) if k in order else len(order)):
        label, style, color = MODEL_STYLES.get(pair, (f"model: {pair[0]}", "-", "0.5"))
        ax.plot(*zip(*[(n, v / at_base) for n, v in sorted(pairs[pair])]), linestyle=style,
                color=color, linewidth=1.5, label=label)


def _layout_points(ax, model, key, rows, base, base_devices):
    """The model's prediction for each measured variant as it ran (its ranks per node and
    measured all-reduce), where the lines assume model.ranks_per_node; at the variant's
    devices, and, for a baseline `base` of more than one device, against the prediction
    for it, as the measured points are (none where it has no prediction)."""
    entries = (model or {}).get("measured_vs_predicted", [])
    devices = {r["name"]: r["devices"] for r in rows}
    at_base = 1.0 if base_devices == 1 else next(  # one device: the model's own reference
        (m["predicted_speedup"] for m in entries if m["variant"] == base), None)
    if not at_base:
        return
    pts = []
    for m in entries:
        if m.get(key) is None or m["variant"] not in devices:
            continue
        speedup = m["predicted_speedup"] / at_base
        n = devices[m["variant"]]
        pts.append((n, speedup if key == "predicted_speedup" else speedup * base_devices / n))
    if pts:
        ax.plot(*zip(*pts), "x", color="black", markersize=9, markeredgewidth=2, zorder=4,
                label="model, as measured")


def _measured_points(ax, rows, colors, key, train=True):
    """rows[key]: the total (filled circle, bars min to max) and, with train, the training
    phase (hollow triangle), coloured per variant."""
    for r in rows:
        c = colors[r["name"]]
        mean, lo, hi = r[key]
        ax.errorbar([r["devices"]], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", color=c,
                    capsize=4, markersize=7, zorder=3)
        if train:
            ax.plot([r["devices"]], [r[key + "_train"]], "^", markerfacecolor="none",
                    markeredgecolor=c, markersize=9, markeredgewidth=1.5, zorder=3)


def _marker_handles(rows, colors, train=True):
    """Legend entries: one colour per measured variant, then the marker styles."""
    handles = [Line2D([], [], color=colors[r["name"]], marker="o", linestyle="none",
                      label=r["name"]) for r in rows]
    handles.append(Line2D([], [], color="black", marker="o", linestyle="none",
                          label="measured total\n(bars: min to max)"))
    if train:
        handles.append(Line2D([], [], color="black", marker="^", markerfacecolor="none",
                              linestyle="none", label="measured training phase"))
    return handles


def _scaling_figure(doc, _study_dir):
    rows, base_devices = _measured(doc)
    base = (doc.get("baselines") or ["?"])[0]
    fig, (ax_s, ax_e) = plt.subplots(1, 2, figsize=TWO_PANELS, sharex=True)
    fig.suptitle(_title(doc, f"scaling against {base} ({base_devices} device"
                             f"{'s' if base_devices > 1 else ''}), mean of repeats"))
    if not rows:
        for ax in (ax_s, ax_e):
            _note(ax, f"no speedups against the baseline {base}")
        return fig
    colors = _colors([v["name"] for v in doc["variants"]])
    model = doc.get("model")
    largest = max(r["devices"] for r in rows)
    right = 2 * largest if model else largest
    ideal_x = np.array(sorted({base_devices, right} | {r["devices"] for r in rows}))
    ax_s.plot(ideal_x, ideal_x / base_devices, label="ideal", **IDEAL)
    ref = _baseline_pair(doc)
    _model_lines(ax_s, model, "speedup", right, base_devices, ref)
    _layout_points(ax_s, model, "predicted_speedup", rows, base, base_devices)
    _measured_points(ax_s, rows, colors, "speedup")
    ax_s.set_ylabel(f"speedup over {base} (x)")
    ax_s.set_title("speedup")
    ax_e.axhline(1.0, **IDEAL)
    _model_lines(ax_e, model, "efficiency", right, base_devices, ref)
    _layout_points(ax_e, model, "predicted_efficiency", rows, base, base_devices)
    _measured_points(ax_e, rows, colors, "efficiency")
    ax_e.set_ylabel("parallel efficiency (speedup / ideal)")
    ax_e.set_title("parallel efficiency")
    ax_e.set_ylim(bottom=0)
    for ax in (ax_s, ax_e):
        ax.set_xlabel("devices")
        ax.grid(alpha=0.3)
    if largest >= 8:
        _log2_axis(ax_s, min(ideal_x), right)
    else:
        ax_s.xaxis.set_major_locator(MaxNLocator(integer=True))
    _legend_right(ax_e, ax_s.get_legend_handles_labels()[0] + _marker_handles(rows, colors))
    return fig


def _scaling_model_figure(doc, _study_dir):
    rows, base_devices = _measured(doc)
    model = doc.get("model")
    colors = _colors([v["name"] for v in doc["variants"]])
    fig, ax = plt.subplots(figsize=ONE_PANEL_LEGEND)
    ax.axhline(1.0, label="ideal", **IDEAL)
    _model_lines(ax, model, "efficiency", base=base_devices, ref=_baseline_pair(doc))
    _measured_points(ax, rows, colors, "efficiency", train=False)
    ranks = [p["ranks"] for p in (model or {}).get("predictions", [])]
    ranks += [r["devices"] for r in rows]
    _log2_axis(ax, min(ranks + [2]), max(ranks + [2]))  # predictions reach max_ranks
    ax.set_xlabel("ranks (measured points: devices)")
    ax.set_ylabel("parallel efficiency (speedup / ideal)")
    ax.set_ylim(0, max(1.1, ax.dataLim.ymax * 1.05))  # every point and line shows
    if (model or {}).get("predictions"):
        what = "predicted parallel efficiency"
    elif model:  # calibrated, but nothing to extrapolate with: the note says why
        what = "no predictions" + (f":\n{model['note']}" if model.get("note") else "")
    else:
        what = "no scaling model in study.json"
    ax.set_title(_title(doc, what))
    ax.grid(alpha=0.3)
    _legend_right(ax, ax.get_legend_handles_labels()[0] + _marker_handles(rows, colors, False))
    return fig


def _power_figure(doc, study_dir):
    variants = doc["variants"]
    series = {v["name"]: read_power(os.path.join(study_dir, v["runs"][0], "power.csv"))
              if v.get("runs") else {} for v in variants}
    if not any(series.values()):
        fig, ax = plt.subplots(figsize=ONE_PANEL)
        _note(ax, f"no power readings: {_energy_reason(variants, 'no power.csv rows')}")
        ax.set_title(_title(doc, "power per device"))
        return fig
    colors = _colors(sorted(set().union(*series.values())))
    cols = min(len(variants), 3)
    rows = math.ceil(len(variants) / cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False, sharey=True,
                             figsize=(TWO_PANELS[0] if cols > 1 else ONE_PANEL_LEGEND[0],
                                      3.6 * rows + 0.6))
    for ax, v in zip(axes.flat, variants):
        if series[v["name"]]:
            _plot_power(ax, series[v["name"]], colors)
        else:
            _note(ax, "no power readings:\n" + (v.get("energy_reason") or "no power.csv rows"))
        ax.set_title(v["name"])
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    for ax in axes[:, 1:].flat:
        ax.set_ylabel("")  # shared with the first column
    if len(colors) > 1:
        _legend_right(axes[0, -1], [Line2D([], [], color=c, label=d) for d, c in colors.items()])
    fig.suptitle(_title(doc, "power per device, first repeat of each variant"))
    return fig


def _energy_figure(doc, _study_dir):
    """Energy per variant (the active devices' hatched inside where the idle GPUs used
    some) and EDP normalised to the baseline, each panel on a log axis (values written
    above the bars) when its bars spread over LOG_SPREAD."""
    variants = doc["variants"]
    energy = [_stat(v, "energy_j") for v in variants]
    if not any(energy):
        fig, ax = plt.subplots(figsize=ONE_PANEL)
        _note(ax, f"no energy readings: {_energy_reason(variants, 'no energy in study.json')}")
        ax.set_title(_title(doc, "energy and energy-delay product"))
        return fig
    base = (doc.get("baselines") or ["?"])[0]
    colors = _colors([v["name"] for v in variants])
    edp = [v.get("edp_norm") for v in variants]
    # The active devices' (the idle GPUs left out), hatched over each variant's bar.
    active = [(v.get("energy_active_j") or {}).get("mean") for v in variants]
    bottom_j = _log_bottom([e and e[0] for e in energy], min(filter(None, active), default=None))
    bottom_edp = _log_bottom(edp)
    fig, (ax_j, ax_edp) = plt.subplots(1, 2, figsize=TWO_PANELS)
    for i, v in enumerate(variants):
        if energy[i]:
            mean, lo, hi = energy[i]
            ax_j.bar(i, mean - (bottom_j or 0.0), 0.6, bottom=bottom_j or 0.0,
                     color=colors[v["name"]], yerr=[[mean - lo], [hi - mean]], capsize=5)
            if active[i] is not None and active[i] < mean:
                ax_j.bar(i, active[i] - (bottom_j or 0.0), 0.3, bottom=bottom_j or 0.0,
                         color="none", edgecolor="black", hatch="//", linewidth=0.8)
        if edp[i] is not None:
            ax_edp.bar(i, edp[i] - (bottom_edp or 0.0), 0.6, bottom=bottom_edp or 0.0,
                       color=colors[v["name"]])
    for ax, values in ((ax_j, energy), (ax_edp, edp)):
        for i, value in enumerate(values):
            if value is None:
                ax.text(i, 0.02, "n/a", ha="center", va="bottom", color="0.35",
                        transform=ax.get_xaxis_transform())
        _variant_axis(ax, [v["name"] for v in variants])
    if bottom_j:
        _log_bars(ax_j, bottom_j, [e and e[0] for e in energy], [e and e[2] for e in energy],
                  " J")
    if bottom_edp:
        _log_bars(ax_edp, bottom_edp, edp, edp, "x")
    ax_j.set_ylabel("energy (J)")
    ax_j.set_title("energy per run (mean, bars: min to max)")
    if any(a is not None and e and a < e[0] for a, e in zip(active, energy)):
        ax_j.legend(handles=[Patch(facecolor="none", edgecolor="black", hatch="//",
                                   label="active devices (idle GPUs left out)")],
                    fontsize="small", loc="best")
    ax_edp.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax_edp.set_ylabel(f"EDP / EDP of {base}")
    ax_edp.set_title("energy-delay product (J x s), normalised")
    missing = None in energy or None in edp
    fig.suptitle(_title(doc, "energy (n/a: no reading)" if missing else "energy"))
    return fig
