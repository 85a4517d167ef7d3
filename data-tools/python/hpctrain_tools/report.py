"""Writes a study's figures: study.json (everything), study.csv (one row per variant) and
study.md (the tables a person reads, with the plots)."""

import csv
import json
import os

from hpctrain_tools.scaling import finite_or_null

CSV_COLUMNS = [
    "variant", "ranks", "devices", "backend", "strategy", "repeats",
    "time_train_s", "time_train_s_min", "time_train_s_max",
    "time_val_s", "time_val_s_min", "time_val_s_max",
    "time_test_s", "time_test_s_min", "time_test_s_max",
    "time_s", "time_s_min", "time_s_max",
    "samples_per_second", "speedup", "speedup_min", "speedup_max", "speedup_train",
    "efficiency", "efficiency_train", "energy_j", "energy_j_min", "energy_j_max", "edp",
    "edp_norm", "test_accuracy", "test_accuracy_min", "test_accuracy_max",
    "energy_active_j", "energy_active_j_min", "energy_active_j_max", "edp_active",
    "edp_active_norm",
]


def _g(x, fmt="{:.4g}"):
    return "" if x is None else fmt.format(x)


def csv_row(v, baseline):
    """One variant as a study.csv row (numbers unformatted; empty for unknown)."""
    sp = v["speedup"].get(baseline) or {}
    row = {"variant": v["name"], "ranks": v["ranks"], "devices": v["devices"],
           "backend": v["backend"], "strategy": v["strategy"], "repeats": v["repeats_done"],
           "samples_per_second": (v["samples_per_second"] or {}).get("mean"),
           "speedup": sp.get("total"), "speedup_min": sp.get("total_min"),
           "speedup_max": sp.get("total_max"), "speedup_train": sp.get("train"),
           "efficiency": v["efficiency"], "efficiency_train": v["efficiency_train"],
           "edp": (v["edp"] or {}).get("mean"), "edp_norm": v["edp_norm"],
           "edp_active": (v["edp_active"] or {}).get("mean"),
           "edp_active_norm": v["edp_active_norm"]}
    for key in ("time_train_s", "time_val_s", "time_test_s", "time_s", "energy_j",
                "test_accuracy", "energy_active_j"):
        s = v[key] or {}
        row[key] = s.get("mean")
        row[key + "_min"] = s.get("min")
        row[key + "_max"] = s.get("max")
    return {k: ("" if row.get(k) is None else row[k]) for k in CSV_COLUMNS}


def _x(ratio):
    """A speedup with two decimals, or two significant digits below 0.1 (a CPU variant's
    speedup against a GPU is 0.0044x, not 0.00x)."""
    return f"{ratio:.2f}" if abs(ratio) >= 0.1 else f"{ratio:.2g}"


def _mmm(s, fmt="{:.3g}"):
    """mean [min, max]"""
    if not s:
        return "n/a"
    return f"{fmt.format(s['mean'])} [{fmt.format(s['min'])}, {fmt.format(s['max'])}]"


def markdown(doc):
    """study.md: the variants, the comparisons, accuracy, energy and the model."""
    vs = doc["variants"]
    base = doc["baselines"][0] if doc["baselines"] else None
    out = [f"# Study {doc['study']}", "",
           f"Config `{doc['config']}`, {doc['repeats']} repeats per variant; written "
           f"{doc['written']}. Figures are the mean over the repeats with [min, max]; times "
           "in seconds: train, validation and test phases as in metrics.csv and "
           "summary.json, total = their sum. Speedup = the baseline's mean total time over "
           "the variant's; efficiency = speedup / (devices / the baseline's devices).", ""]
    out += ["## Phase times", "",
            "| variant | ranks | devices | repeats | train s | validation s | test s | "
            "total s | samples/s |", "|---|---:|---:|---:|---|---|---|---|---:|"]
    for v in vs:
        resumed = f" ({v['resumed_repeats']} resumed)" if v["resumed_repeats"] else ""
        out.append(f"| {v['name']} | {v['ranks']} | {v['devices']} | {v['repeats_done']}"
                   f"{resumed} | {_mmm(v['time_train_s'])} | {_mmm(v['time_val_s'])} | "
                   f"{_mmm(v['time_test_s'])} | {_mmm(v['time_s'])} | "
                   f"{_g((v['samples_per_second'] or {}).get('mean'), '{:.0f}')} |")
    names = {v["name"] for v in vs}
    for b in doc["baselines"]:
        out += ["", f"## Speedup against {b}", ""]
        if b not in names:
            out.append(f"No run of the baseline {b} has finished: no speedup against it.")
            continue
        out += ["| variant | speedup (total) | speedup (training) | efficiency | "
                "efficiency (training) |", "|---|---|---:|---:|---:|"]
        for v in vs:
            sp = v["speedup"].get(b)
            if not sp:
                continue
            eff = v["efficiency"] if b == base else None
            efft = v["efficiency_train"] if b == base else None
            out.append(f"| {v['name']} | {_x(sp['total'])}x [{_x(sp['total_min'])}, "
                       f"{_x(sp['total_max'])}] | {_x(sp['train'])}x | "
                       f"{_g(eff and 100 * eff, '{:.1f}%') or '-'} | "
                       f"{_g(efft and 100 * efft, '{:.1f}%') or '-'} |")
    out += ["", "## Accuracy and energy", "",
            f"| variant | test accuracy | energy J | sources | EDP J s | EDP / {base} | "
            f"active J | active EDP / {base} |",
            "|---|---|---|---|---|---:|---|---:|"]
    reasons = set()
    unread = {}  # (sources, reason): the variants whose energy lacks those sources
    for v in vs:
        if v["energy_reason"]:
            reasons.add(v["energy_reason"])
        elif v["energy_j"]:
            by_reason = {}
            for source, why in sorted(v["energy_unread"].items()):
                by_reason.setdefault(why, []).append(source)
            for why, sources in by_reason.items():
                unread.setdefault((" and ".join(sources), why), []).append(v["name"])
        out.append(f"| {v['name']} | {_mmm(v['test_accuracy'], '{:.4f}')} | "
                   f"{_mmm(v['energy_j'])} | {', '.join(v['energy_sources']) or '-'} | "
                   f"{_mmm(v['edp'])} | {_g(v['edp_norm'], '{:.2f}') or 'n/a'} | "
                   f"{_mmm(v['energy_active_j'])} | "
                   f"{_g(v['edp_active_norm'], '{:.2f}') or 'n/a'} |")
    for r in sorted(reasons):
        out.append("")
        out.append(f"Energy n/a: {r}.")
    for (source, why), names in sorted(unread.items()):
        out.append("")
        out.append(f"Not in the energy of {', '.join(names)}: {source} ({why}).")
    if any(v["energy_j"] for v in vs):
        out.append("")
        out.append("The energy is that of the sources read on the nodes of the run, whichever "
                   "device trained: a CPU variant's includes the idle GPUs, a GPU variant's "
                   "leaves out the CPUs where RAPL could not be read. The active energy "
                   "leaves out the GPUs no rank used: it is the CPUs', the DRAM's and the "
                   "ranks' GPUs'.")
    out += ["", "Validation accuracy per epoch (mean [min, max]):", "",
            "| variant | " + " | ".join(f"epoch {e}" for e in _epochs(vs)) + " |",
            "|---|" + "---|" * len(_epochs(vs))]
    for v in vs:
        acc = v["val_accuracy_per_epoch"]
        cells = []
        for e in _epochs(vs):
            i = v["epochs"].index(e) if e in v["epochs"] else None
            if acc is None or i is None or acc["mean"][i] is None:
                cells.append("-")
            else:
                cells.append(f"{acc['mean'][i]:.4f} [{acc['min'][i]:.4f}, {acc['max'][i]:.4f}]")
        out.append(f"| {v['name']} | " + " | ".join(cells) + " |")
    out += model_markdown(doc.get("model"))
    out += ["", "## Plots", ""]
    for name, what in [("accuracy", "validation accuracy per epoch"),
                       ("phases", "phase times"), ("scaling", "speedup and efficiency"),
                       ("scaling_model", "the model's efficiency to many ranks"),
                       ("power", "power over time"), ("energy", "energy and EDP")]:
        out.append(f"![{what}](plots/{name}.png)")
    return "\n".join(out) + "\n"


def _epochs(vs):
    return sorted(set().union(*(v["epochs"] for v in vs))) if vs else []


def model_markdown(model):
    """The scaling model's section of study.md."""
    if not model:
        return ["", "## Scaling model", "",
                "No one-rank variant of this study has a finished run: the model has "
                "nothing to calibrate from."]
    c = model["compute"]
    out = ["", "## Scaling model", "",
           f"Calibrated on `{model['calibration']}`: {1e3 * c['step_s']:.3f} ms per step "
           f"alone, backward {100 * c['backward_fraction']:.0f}% of it, "
           f"{c['param_bytes'] / 1e6:.2f} MB of gradients; {c['slots_per_node']} compute "
           f"slots per node, {c['slots_per_rank']:.2f} per rank (docs/study.md gives the "
           "model)."]
    if model["measured_vs_predicted"]:
        out += ["", "| variant | ranks | ranks per node | network (fitted) | measured ms/step (median) | "
                "predicted ms/step | error |", "|---|---:|---:|---|---:|---:|---:|"]
        for m in model["measured_vs_predicted"]:
            n = m["network"]
            out.append(f"| {m['variant']} | {m['ranks']} | {m['ranks_per_node']} | "
                       f"{n['alpha_us']:.1f} us, {n['bandwidth_GBps']:.2f} GB/s | "
                       f"{1e3 * m['measured_step_s']:.3f} | {1e3 * m['predicted_step_s']:.3f} | "
                       f"{100 * m['error']:+.1f}% |")
    if model.get("note"):
        out += ["", model["note"] + "."]
    if model["predictions"]:
        n = model["network"]
        out += ["", f"Predicted on {n['name']} (alpha {n['alpha_us']:.2f} us, "
                f"{n['bandwidth_GBps']:.2f} GB/s), {model['ranks_per_node']} ranks per node "
                f"of {model['slots_per_node']} compute slots: efficiency (ms per step)", "",
                "| ranks | allreduce | allreduce, overlapped | average every "
                f"{model['average_every']} | async, {model['servers']} server(s) |",
                "|---:|---:|---:|---:|---:|"]
        rows = {}
        for p in model["predictions"]:
            key = p["strategy"] + ("+overlap" if p["overlap"] else "")
            rows.setdefault(p["ranks"], {})[key] = p
        for ranks in sorted(rows):
            cells = []
            for key in ("allreduce", "allreduce+overlap", "average", "async"):
                p = rows[ranks].get(key)
                cells.append(f"{100 * p['efficiency']:.1f}% ({1e3 * p['step_s']:.2f})"
                             if p else "-")
            out.append(f"| {ranks} | " + " | ".join(cells) + " |")
    return out


def write(out_dir, doc):
    """study.json, study.csv and study.md, each replaced whole."""
    def put(name, text):
        tmp = os.path.join(out_dir, name + ".tmp")
        with open(tmp, "w", newline="") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, name))

    put("study.json", json.dumps(finite_or_null(doc), indent=1, allow_nan=False) + "\n")
    base = doc["baselines"][0] if doc["baselines"] else None
    tmp = os.path.join(out_dir, "study.csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for v in doc["variants"]:
            w.writerow(csv_row(v, base))
    os.replace(tmp, os.path.join(out_dir, "study.csv"))
    put("study.md", markdown(doc))
