"""Turns a study's run directories into per-variant figures: phase times, speedup,
parallel efficiency, energy and EDP, accuracy per epoch, each as mean, min and max over
the repeats (docs/study.md says how each is defined)."""

import csv
import json
import math
import os


class RunError(Exception):
    """A run directory that cannot be read; the message names the file."""


def read_metrics(path):
    """metrics.csv as {epoch: row}, the last row of each epoch (a resumed run appends)."""
    rows = {}
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows[int(row["epoch"])] = {k: (float(v) if v not in ("", None) else None)
                                           for k, v in row.items() if k != "epoch"}
    except OSError as e:  # its message names the file again
        raise RunError(f"{path}: {e.strerror}") from e
    except KeyError as e:
        raise RunError(f"{path}: no column {e}") from e
    except ValueError as e:
        raise RunError(f"{path}: {e}") from e
    return dict(sorted(rows.items()))


def run_config(run_dir):
    """distributed.every, distributed.parameter_servers and energy.interval_ms from the
    run's resolved config.yaml (every key is there); None for each that cannot be read."""
    try:
        import yaml
        with open(os.path.join(run_dir, "config.yaml")) as f:
            c = yaml.safe_load(f) or {}
        d, e = c.get("distributed") or {}, c.get("energy") or {}
        return d.get("every"), d.get("parameter_servers"), e.get("interval_ms")
    except (OSError, ImportError, ValueError, AttributeError):
        return None, None, None


def read_run(run_dir):
    """One repeat: its summary.json and metrics.csv reduced to the figures a study needs.

    Phase times come from metrics.csv (each epoch's row, whichever process trained it) and
    the test time from summary.json. An epoch interrupted and resumed has the row of the
    process that finished it, which adds the figures its checkpoint carried
    (docs/contracts.md): each step kept counts once. The energy of a resumed repeat
    (summary.json's resumed_from) is its energy_whole_run, which likewise adds what its
    checkpoints carried. A figure that is null (hpctrain writes non-finite ones as null) or
    not finite counts as missing, never as 0."""
    spath = os.path.join(run_dir, "summary.json")
    try:
        with open(spath) as f:
            s = json.load(f)
    except OSError as e:  # its message names the file again
        raise RunError(f"{spath}: {e.strerror}") from e
    except ValueError as e:
        raise RunError(f"{spath}: not JSON ({e})") from e
    if not isinstance(s, dict):
        raise RunError(f"{spath}: expected a JSON object")
    epochs = read_metrics(os.path.join(run_dir, "metrics.csv"))
    if not epochs:
        raise RunError(f"{os.path.join(run_dir, 'metrics.csv')}: no epochs")
    train_s = sum(r["time_train_s"] or 0.0 for r in epochs.values())
    val_s = sum(r["time_val_s"] or 0.0 for r in epochs.values())
    resumed = s.get("resumed_from") is not None
    test_s = finite(s.get("time_test_s")) or 0.0  # null: no test set
    sps = finite(s.get("samples_per_second"))
    if resumed and not sps:
        # Resumed after its last epoch for the test phase alone, this process trained
        # nothing (0): the speed is that of the epochs, whichever process trained them.
        sps = epochs_speed(epochs)
    # A resumed repeat's energy is that of the whole run (what its checkpoints carried and
    # the last process's); its summary.json's "energy" is the last process's alone.
    energy = s.get("energy_whole_run" if resumed else "energy") or None
    every, servers, interval_ms = run_config(run_dir)
    reason = None
    total_j = energy.get("total_j") if energy else None
    edp = (energy or {}).get("edp") if resumed else s.get("edp")
    # The active devices (the CPUs, the DRAM and the GPUs the ranks use, not the idle ones).
    active_j = finite((energy or {}).get("active_j"))
    edp_active = (energy or {}).get("edp_active") if resumed else s.get("edp_active")
    if energy is None and (interval_ms == 0 or not resumed):
        reason = "energy sampling off (energy.interval_ms: 0)"
    elif energy is None:
        reason = "resumed, and its summary.json has no energy_whole_run (an earlier release's)"
    elif total_j is None:
        reason = "; ".join(sorted({energy[k] for k in ("cpu_reason", "dram_reason",
                                                        "gpu_reason") if energy.get(k)}))
    # The sources read and, for those not read, why: a total of the GPUs alone (no RAPL
    # in a virtual machine, say) is not the node's energy, and study.md says so.
    sources = [k for k in ENERGY_SOURCES if energy and finite(energy.get(f"{k}_j")) is not None]
    unread = {k: (energy or {}).get(f"{k}_reason") or "not read"
              for k in ENERGY_SOURCES if k not in sources}
    return {
        "dir": run_dir,
        "average_every": every,
        "servers": servers,
        "backend": s.get("backend"),
        "strategy": s.get("strategy"),
        "algorithm": s.get("algorithm"),
        "world_size": s.get("world_size"),
        "threads_per_rank": s.get("threads_per_rank"),
        "global_batch": s.get("global_batch"),
        "param_count": s.get("param_count"),
        "resumed": resumed,
        "time_train_s": train_s,
        "time_val_s": val_s,
        "time_test_s": test_s,
        "time_s": train_s + val_s + test_s,
        "samples_per_second": sps,
        "step_time_s": (s["global_batch"] / sps) if sps else None,
        "test_accuracy": finite(s.get("test_accuracy")),
        "energy_j": total_j,
        "energy_reason": reason,
        "energy_sources": sources,
        "energy_unread": unread,
        "edp": edp if total_j is not None else None,
        "energy_active_j": active_j,
        "edp_active": finite(edp_active) if active_j is not None else None,
        "step_phase_fractions": s.get("step_phase_fractions"),
        "step_phases_s": s.get("step_phases_s"),
        "cpu_load_per_rank": s.get("cpu_load_per_rank"),
        "epochs": epochs,
    }


def epochs_speed(epochs):
    """The samples trained in metrics.csv's epochs over their training seconds; None when
    a row lacks either."""
    seconds = [r.get("time_train_s") for r in epochs.values()]
    speeds = [r.get("samples_per_second") for r in epochs.values()]
    if any(finite(x) is None for x in seconds + speeds) or sum(seconds) <= 0:
        return None
    return sum(t * v for t, v in zip(seconds, speeds)) / sum(seconds) or None


ENERGY_SOURCES = ("cpu", "dram", "gpu")  # summary.json energy's <source>_j, <source>_reason


def finite(x):
    """x when it is a finite number, else None."""
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def stats(values):
    """{mean, median, min, max} of the numbers in `values` (None and non-finite entries
    left out); None if none."""
    v = sorted(x for x in map(finite, values) if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    median = v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2
    return {"mean": sum(v) / len(v), "median": median, "min": v[0], "max": v[-1]}


def per_epoch(runs, key):
    """Mean, min and max of one metrics.csv column per epoch over the repeats; None when
    no repeat has the column (e.g. no validation set)."""
    epochs = sorted(set().union(*(r["epochs"].keys() for r in runs)))
    out = {"mean": [], "min": [], "max": []}
    for e in epochs:
        s = stats([r["epochs"].get(e, {}).get(key) for r in runs])
        for k in out:
            out[k].append(s[k] if s else None)
    if all(x is None for x in out["mean"]):
        return None
    return out


def summarise_variant(variant, runs):
    """The figures of one variant over its finished repeats (before speedups). RunError
    for a repeat that ran another number of ranks than the variant (summary.json's
    world_size): its figures are not the variant's."""
    for r in runs:
        if r["world_size"] is not None and r["world_size"] != variant["ranks"]:
            raise RunError(f"{os.path.join(r['dir'], 'summary.json')}: world_size "
                           f"{r['world_size']}, but variant {variant['name']} runs "
                           f"{variant['ranks']} ranks")
    fractions = [r["step_phase_fractions"] for r in runs
                 if isinstance(r["step_phase_fractions"], dict)]
    phase = None
    if fractions:  # a null phase is unavailable: left out of its mean, like other figures
        phase = {k: (stats(f.get(k) for f in fractions) or {}).get("mean")
                 for k in fractions[0]}
    reasons = [r["energy_reason"] for r in runs if r["energy_reason"]]
    measured = next((r for r in runs if r["energy_j"] is not None), None)
    first = runs[0]
    return {
        "name": variant["name"],
        "ranks": variant["ranks"],
        "devices": variant["devices"],
        "device": variant.get("device") or first["backend"],
        "backend": first["backend"],
        "strategy": first["strategy"],
        "algorithm": first["algorithm"],
        "average_every": first["average_every"],
        "servers": first["servers"],
        "threads_per_rank": first["threads_per_rank"],
        "global_batch": first["global_batch"],
        "param_count": first["param_count"],
        "repeats_done": len(runs),
        "resumed_repeats": sum(1 for r in runs if r["resumed"]),
        "time_train_s": stats(r["time_train_s"] for r in runs),
        "time_val_s": stats(r["time_val_s"] for r in runs),
        "time_test_s": stats(r["time_test_s"] for r in runs),
        "time_s": stats(r["time_s"] for r in runs),
        "step_time_s": stats(r["step_time_s"] for r in runs),
        "samples_per_second": stats(r["samples_per_second"] for r in runs),
        "test_accuracy": stats(r["test_accuracy"] for r in runs),
        "energy_j": stats(r["energy_j"] for r in runs),
        "energy_reason": reasons[0] if reasons and all(r["energy_j"] is None for r in runs)
        else None,
        "energy_sources": measured["energy_sources"] if measured else [],
        "energy_unread": measured["energy_unread"] if measured else {},
        "edp": stats(r["edp"] for r in runs),
        "energy_active_j": stats(r["energy_active_j"] for r in runs),
        "edp_active": stats(r["edp_active"] for r in runs),
        "step_phase_fractions": phase,
        "cpu_load_per_rank": stats(r["cpu_load_per_rank"] for r in runs),
        "epochs": sorted(set().union(*(r["epochs"].keys() for r in runs))),
        "val_accuracy_per_epoch": per_epoch(runs, "val_accuracy"),
        "train_accuracy_per_epoch": per_epoch(runs, "train_accuracy"),
        "val_loss_per_epoch": per_epoch(runs, "val_loss"),
        "train_loss_per_epoch": per_epoch(runs, "train_loss"),
    }


def add_comparisons(variants, baselines):
    """Speedup against every baseline (total time and training time), parallel efficiency
    and EDP (of all devices, and of the active ones) normalised against the first
    baseline, in place. Speedup = the baseline's mean
    time over the variant's mean time; its min/max use the variant's max/min time.
    Efficiency = speedup / (devices / the baseline's devices)."""
    by_name = {v["name"]: v for v in variants}
    for v in variants:
        v["speedup"] = {}
        for b_name in baselines:
            b = by_name.get(b_name)
            if b is None or not v["time_s"] or not b["time_s"]:
                continue
            bt, vt = b["time_s"]["mean"], v["time_s"]
            v["speedup"][b_name] = {
                "total": bt / vt["mean"], "total_min": bt / vt["max"], "total_max": bt / vt["min"],
                "train": b["time_train_s"]["mean"] / v["time_train_s"]["mean"],
            }
        first = by_name.get(baselines[0]) if baselines else None
        sp = v["speedup"].get(baselines[0]) if baselines else None
        if first is None or sp is None:
            v["efficiency"] = v["efficiency_train"] = None
        else:
            scale = v["devices"] / first["devices"]
            v["efficiency"] = sp["total"] / scale
            v["efficiency_train"] = sp["train"] / scale
        for key in ("edp", "edp_active"):
            if first and v[key] and first[key] and first[key]["mean"]:
                v[key + "_norm"] = v[key]["mean"] / first[key]["mean"]
            else:
                v[key + "_norm"] = None
    return variants
