"""The study file (STUDY.yaml): loading and checking. An error is one line naming the file
and the key, like hpctrain's config errors (exit 2)."""

import json
import math
import os
import re

import yaml

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
TOP_KEYS = {"config", "repeats", "cooldown_seconds", "seed", "baselines", "set", "launcher",
            "variants", "model"}
MAX_REPEATS = 1000  # a study's runs are listed up front
MAX_COOLDOWN_S = 86400.0  # a day between runs
VARIANT_KEYS = {"name", "ranks", "devices", "device", "strategy", "precision", "set"}
MODEL_KEYS = {"ranks_per_node", "slots_per_node", "max_ranks", "network", "average_every",
              "servers"}
SEED_MAX = 2 ** 64 - 1  # run.seed's range
NETWORK_KEYS = {"name", "alpha_us", "bandwidth_gbs"}


MISSING = object()  # a required key left out


class StudyError(Exception):
    """A bad study file or option: the message is the whole line to print."""


def shown(value):
    """A value as YAML spells it, on one line: true, null, .nan, "a\\n", [1, x]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(k)}: {shown(v)}" for k, v in value.items()) + "}"
    return str(value)


def _int(path, key, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or \
            (hi is not None and value > hi):
        within = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise StudyError(f"{path}: {key}: expected an integer {within}, got {shown(value)}")
    return value


def _num(path, key, value, lo, hi=None):
    within = f">= {lo:g}" if hi is None else f"in [{lo:g}, {hi:g}]"
    if value is MISSING:
        raise StudyError(f"{path}: {key}: required, a finite number {within}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < lo or (hi is not None and value > hi):
        raise StudyError(f"{path}: {key}: expected a finite number {within}, "
                         f"got {shown(value)}")
    return float(value)


def _sets(path, key, value):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) and "=" in s for s in value):
        raise StudyError(f"{path}: {key}: expected a list of 'key.path=value' strings, "
                         f"got {shown(value)}")
    return list(value)


def _choice(path, key, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise StudyError(f"{path}: {key}: expected one of {', '.join(choices)}, "
                         f"got {shown(value)}")
    return value


def _unknown(path, where, mapping, allowed):
    for k in mapping:
        if k not in allowed:
            raise StudyError(f"{path}: {where}{k}: unknown key (allowed: "
                             f"{', '.join(sorted(allowed))})")


def _no_duplicates(path, node, where="", seen=None):
    """Refuses a key given twice in one mapping, at any depth, in the words of hpctrain's
    config loader: FILE:LINE: KEY: duplicate key (first given at line N)."""
    seen = set() if seen is None else seen
    if id(node) in seen:  # an alias of a node already checked
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            child = f"{where}.{name}" if where else str(name)
            if name is not None and name != "<<":
                if (key.tag, name) in first:
                    raise StudyError(f"{path}:{key.start_mark.line + 1}: {child}: duplicate key "
                                     f"(first given at line {first[(key.tag, name)]})")
                first[(key.tag, name)] = key.start_mark.line + 1
            _no_duplicates(path, value, child, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _no_duplicates(path, item, f"{where}[{i}]", seen)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading numbers as YAML 1.2 (and hpctrain's config reader) do:
    1e3, 2E-1 and 1.0e3 are numbers, where YAML 1.1 wants a dot and a signed exponent and
    reads them as strings (cooldown_seconds: 1e3 was "expected a finite number")."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _read(path):
    """The study file's YAML document, with no key given twice."""
    with open(path, encoding="utf-8") as f:
        loader = _Loader(f.read())
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _no_duplicates(path, node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load(path):
    """Reads and checks STUDY.yaml; returns a plain dict with every default filled in and
    `config` made absolute (it is relative to the study file)."""
    try:
        doc = _read(path)
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
    if doc.get("config") is None:
        raise StudyError(f"{path}: config: required, the training config file")
    if not isinstance(doc["config"], str) or not doc["config"]:
        raise StudyError(f"{path}: config: expected the training config file, "
                         f"got {shown(doc['config'])}")
    config = os.path.join(os.path.dirname(os.path.abspath(path)), doc["config"])
    if os.path.isdir(config):
        raise StudyError(f"{path}: config: {config}: is a directory")
    if not os.path.isfile(config):
        raise StudyError(f"{path}: config: {config}: no such file")
    study = {
        "file": path,  # as given, for messages
        "path": os.path.abspath(path),
        "name": os.path.splitext(os.path.basename(path))[0],
        "config": config,
        "repeats": _int(path, "repeats", doc.get("repeats", 3), 1, MAX_REPEATS),
        "cooldown_seconds": _num(path, "cooldown_seconds", doc.get("cooldown_seconds", 0), 0,
                                 MAX_COOLDOWN_S),
        "seed": _int(path, "seed", doc.get("seed", 1), 0),
        "set": _sets(path, "set", doc.get("set")),
        "launcher": _choice(path, "launcher", doc.get("launcher", "auto"),
                            ["auto", "mpiexec", "srun"]),
    }
    # Every repeat's run.seed must be in range, not only the first one's, which the
    # check of the training configs sees.
    if study["seed"] + study["repeats"] - 1 > SEED_MAX:
        raise StudyError(f"{path}: seed: expected seed + repeats - 1 <= {SEED_MAX} (repeat k "
                         f"runs with run.seed = seed + k), got {shown(study['seed'])} with "
                         f"repeats {study['repeats']}")
    variants = doc.get("variants", MISSING)
    if variants is MISSING:
        raise StudyError(f"{path}: variants: required, a list of variants")
    if not isinstance(variants, list) or not variants:
        raise StudyError(f"{path}: variants: expected a non-empty list of variants, "
                         f"got {shown(variants)}")
    out, names = [], set()
    for i, v in enumerate(variants):
        where = f"variants[{i}]."
        if not isinstance(v, dict):
            raise StudyError(f"{path}: variants[{i}]: expected a mapping, got {shown(v)}")
        _unknown(path, where, v, VARIANT_KEYS)
        name = v.get("name", MISSING)
        if name is MISSING:
            raise StudyError(f"{path}: {where}name: required, letters, digits, '_.+-'")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise StudyError(f"{path}: {where}name: expected letters, digits, '_.+-', "
                             f"got {shown(name)}")
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
        raise StudyError(f"{path}: baselines: expected a list of variant names, "
                         f"got {shown(baselines)}")
    for b in baselines:
        if not isinstance(b, str):
            raise StudyError(f"{path}: baselines: expected variant names, got {shown(b)}")
        if b not in names:
            raise StudyError(f"{path}: baselines: '{b}' is not a variant")
    study["baselines"] = baselines
    model = doc.get("model")
    model = {} if model is None else model
    if not isinstance(model, dict):
        raise StudyError(f"{path}: model: expected a mapping, got {shown(model)}")
    _unknown(path, "model.", model, MODEL_KEYS)
    network = model.get("network", "measured")
    if network != "measured":
        if not isinstance(network, dict):
            raise StudyError(f"{path}: model.network: expected 'measured' or a mapping of "
                             f"name, alpha_us, bandwidth_gbs, got {shown(network)}")
        _unknown(path, "model.network.", network, NETWORK_KEYS)
        if not isinstance(network.get("name", "given"), str):
            raise StudyError(f"{path}: model.network.name: expected a string, "
                             f"got {shown(network['name'])}")
        network = {
            "name": network.get("name", "given"),
            "alpha_us": _num(path, "model.network.alpha_us",
                             network.get("alpha_us", MISSING), 0),
            "bandwidth_gbs": _num(path, "model.network.bandwidth_gbs",
                                  network.get("bandwidth_gbs", MISSING), 1e-9),
        }
    study["model"] = {
        "ranks_per_node": (_int(path, "model.ranks_per_node", model["ranks_per_node"], 1)
                           if "ranks_per_node" in model else None),
        "slots_per_node": (_int(path, "model.slots_per_node", model["slots_per_node"], 1)
                           if "slots_per_node" in model else None),
        "max_ranks": _int(path, "model.max_ranks", model.get("max_ranks", 4096), 2),
        "average_every": _int(path, "model.average_every", model.get("average_every", 8), 1),
        "servers": _int(path, "model.servers", model.get("servers", 1), 1),
        "network": network,
    }
    return study
