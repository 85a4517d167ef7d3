"""The study file (STUDY.yaml): loading and checking. An error is one line naming the file
and the key, like hpctrain's config errors (exit 2)."""

import math
import os
import re

import yaml

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
TOP_KEYS = {"config", "repeats", "cooldown_seconds", "seed", "baselines", "set", "launcher",
            "variants", "model"}
VARIANT_KEYS = {"name", "ranks", "devices", "device", "strategy", "precision", "set"}
MODEL_KEYS = {"ranks_per_node", "max_ranks", "network", "average_every", "servers"}
NETWORK_KEYS = {"name", "alpha_us", "bandwidth_gbs"}


class StudyError(Exception):
    """A bad study file or option: the message is the whole line to print."""


def _int(path, key, value, lo):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise StudyError(f"{path}: {key}: expected an integer >= {lo}, got {value!r}")
    return value


def _num(path, key, value, lo):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < lo:
        raise StudyError(f"{path}: {key}: expected a finite number >= {lo}, got {value!r}")
    return float(value)


def _sets(path, key, value):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) and "=" in s for s in value):
        raise StudyError(f"{path}: {key}: expected a list of 'key.path=value' strings")
    return list(value)


def _choice(path, key, value, choices):
    if value not in choices:
        raise StudyError(f"{path}: {key}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def _unknown(path, where, mapping, allowed):
    for k in mapping:
        if k not in allowed:
            raise StudyError(f"{path}: {where}{k}: unknown key (allowed: "
                             f"{', '.join(sorted(allowed))})")


def load(path):
    """Reads and checks STUDY.yaml; returns a plain dict with every default filled in and
    `config` made absolute (it is relative to the study file)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise StudyError(f"{path}: cannot read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise StudyError(f"{path}: not UTF-8 text") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or "not valid YAML"
        raise StudyError(f"{path}: {where}{problem}") from e
    if not isinstance(doc, dict):
        raise StudyError(f"{path}: expected a mapping of study keys at the top")
    _unknown(path, "", doc, TOP_KEYS)
    if not isinstance(doc.get("config"), str) or not doc["config"]:
        raise StudyError(f"{path}: config: required, the training config file")
    config = os.path.join(os.path.dirname(os.path.abspath(path)), doc["config"])
    if not os.path.isfile(config):
        raise StudyError(f"{path}: config: {config}: no such file")
    study = {
        "path": os.path.abspath(path),
        "name": os.path.splitext(os.path.basename(path))[0],
        "config": config,
        "repeats": _int(path, "repeats", doc.get("repeats", 3), 1),
        "cooldown_seconds": _num(path, "cooldown_seconds", doc.get("cooldown_seconds", 0), 0),
        "seed": _int(path, "seed", doc.get("seed", 1), 0),
        "set": _sets(path, "set", doc.get("set")),
        "launcher": _choice(path, "launcher", doc.get("launcher", "auto"),
                            ["auto", "mpiexec", "srun"]),
    }
    variants = doc.get("variants")
    if not isinstance(variants, list) or not variants:
        raise StudyError(f"{path}: variants: required, a list of variants")
    out, names = [], set()
    for i, v in enumerate(variants):
        where = f"variants[{i}]."
        if not isinstance(v, dict):
            raise StudyError(f"{path}: variants[{i}]: expected a mapping")
        _unknown(path, where, v, VARIANT_KEYS)
        name = v.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise StudyError(f"{path}: {where}name: expected letters, digits, '_.+-', "
                             f"got {name!r}")
        if name in names:
            raise StudyError(f"{path}: {where}name: '{name}' is used twice")
        names.add(name)
        ranks = _int(path, where + "ranks", v.get("ranks", 1), 1)
        sets = []
        if "device" in v:
            sets.append("device=" + _choice(path, where + "device", v["device"],
                                            ["auto", "cpu", "cuda"]))
        if "strategy" in v:
            sets.append("distributed.strategy=" + _choice(
                path, where + "strategy", v["strategy"], ["allreduce", "average", "async"]))
        if "precision" in v:
            sets.append("precision=" + _choice(path, where + "precision", v["precision"],
                                               ["fp32", "tf32", "bf16", "fp16"]))
        out.append({
            "name": name,
            "ranks": ranks,
            "devices": _int(path, where + "devices", v.get("devices", ranks), 1),
            "device": v.get("device"),
            "set": sets + _sets(path, where + "set", v.get("set")),
        })
    study["variants"] = out
    baselines = doc.get("baselines", [out[0]["name"]])
    if not isinstance(baselines, list) or not baselines:
        raise StudyError(f"{path}: baselines: expected a list of variant names")
    for b in baselines:
        if not isinstance(b, str):
            raise StudyError(f"{path}: baselines: expected variant names, got {b!r}")
        if b not in names:
            raise StudyError(f"{path}: baselines: '{b}' is not a variant")
    study["baselines"] = baselines
    model = doc.get("model")
    model = {} if model is None else model
    if not isinstance(model, dict):
        raise StudyError(f"{path}: model: expected a mapping")
    _unknown(path, "model.", model, MODEL_KEYS)
    network = model.get("network", "measured")
    if network != "measured":
        if not isinstance(network, dict):
            raise StudyError(f"{path}: model.network: expected 'measured' or a mapping of "
                             "name, alpha_us, bandwidth_gbs")
        _unknown(path, "model.network.", network, NETWORK_KEYS)
        if not isinstance(network.get("name", "given"), str):
            raise StudyError(f"{path}: model.network.name: expected a string, "
                             f"got {network['name']!r}")
        network = {
            "name": network.get("name", "given"),
            "alpha_us": _num(path, "model.network.alpha_us", network.get("alpha_us"), 0),
            "bandwidth_gbs": _num(path, "model.network.bandwidth_gbs",
                                  network.get("bandwidth_gbs"), 1e-9),
        }
    study["model"] = {
        "ranks_per_node": (_int(path, "model.ranks_per_node", model["ranks_per_node"], 1)
                           if "ranks_per_node" in model else None),
        "max_ranks": _int(path, "model.max_ranks", model.get("max_ranks", 4096), 2),
        "average_every": _int(path, "model.average_every", model.get("average_every", 8), 1),
        "servers": _int(path, "model.servers", model.get("servers", 1), 1),
        "network": network,
    }
    return study
