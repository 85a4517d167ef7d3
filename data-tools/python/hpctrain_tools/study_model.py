"""The scaling model of `hpctrain study` (docs/study.md, "The scaling model"): compute
calibrated on a one-rank variant, the network on `hpctrain bench allreduce` at each
measured rank count, predictions to many ranks. The driver (study.py) measures; this
module only reads what it measured."""

import json
import os

from hpctrain_tools import scaling


def bench_algorithm(algorithm):
    """The bench allreduce algorithm that measures a run's `algorithm`."""
    return algorithm if algorithm in ("ring", "mpi", "nccl") else "ring"


def bench_bytes(param_count):
    """The largest benchmark message: twice the gradients, a power of two, >= 64 KiB."""
    return 1 << max(16, int(8 * param_count - 1).bit_length())


def node_slots(backend, cuda_devices):
    """Compute slots of this node: GPUs for the CUDA backend, else CPU cores."""
    if backend == "cuda":
        return max(1, cuda_devices)
    cpus = os.environ.get("SLURM_CPUS_ON_NODE")
    if cpus and cpus.isdigit():
        return int(cpus)
    return len(os.sched_getaffinity(0))


def build_model(driver, variants, raw, cuda_devices):
    """Calibrates the scaling model from the study's runs: compute from a one-rank variant,
    the network from `hpctrain bench allreduce` at each measured rank count. Returns the
    model dict of study.json, or None when the study has no one-rank variant."""
    mcfg = driver.study["model"]
    nodes = int(os.environ.get("SLURM_NNODES", "1") or 1)
    measured = []
    # Compute from a one-rank variant of a backend that multi-rank variants ran on (the
    # classic study's 1 GPU, not its CPU: the model covers that backend's variants only).
    multi = {v["backend"] for v, runs in zip(variants, raw) if runs and v["ranks"] > 1}
    ones = [(v, r) for v, r in zip(variants, raw) if r and v["ranks"] == 1 and v["step_time_s"]]
    if not ones:
        return None
    cv, cruns = next((c for c in ones if c[0]["backend"] in multi), ones[0])
    # Each repeat's own fraction (summary.json: its backward seconds over its training
    # seconds, both of the process that wrote it, so a resumed repeat's too).
    fractions = [r["step_phase_fractions"]["backward"] for r in cruns
                 if (r["step_phase_fractions"] or {}).get("backward") is not None]
    backward = sum(fractions) / len(fractions) if fractions else 0.6
    slots = node_slots(cv["backend"], cuda_devices)
    per_rank = cv["threads_per_rank"] if cv["backend"] == "cpu" else 1
    # A CPU rank occupies the cores its process keeps busy alone (compute and input threads),
    # as measured; a GPU rank its GPU.
    slots_per_rank = 1
    if cv["backend"] == "cpu":
        load = cv["cpu_load_per_rank"]
        slots_per_rank = load["median"] if load else cv["threads_per_rank"]
    comp = scaling.Compute(step_s=cv["step_time_s"]["median"], backward_fraction=backward,
                           param_bytes=4.0 * cv["param_count"], slots_per_node=slots,
                           slots_per_rank=slots_per_rank)
    max_bytes = bench_bytes(cv["param_count"])
    networks = {}
    for v, runs in zip(variants, raw):
        if not runs or v["ranks"] < 2 or v["backend"] != cv["backend"]:
            continue
        algo = bench_algorithm(v["algorithm"])
        path = driver.bench(v["backend"], algo, v["ranks"], max_bytes)
        if not path:
            continue
        with open(path) as f:
            pts = json.load(f)["points"]
        net = scaling.fit_ring([dict(p, algorithm="ring") for p in pts], v["ranks"],
                               f"{algo} all-reduce measured on {v['ranks']} ranks")
        networks[v["ranks"]] = net
        rpn = -(-v["ranks"] // nodes)
        # A variant with other threads per rank than the calibration: perfect thread scaling.
        ratio = (v["threads_per_rank"] / cv["threads_per_rank"]) if v["backend"] == "cpu" else 1
        vcomp = scaling.Compute(**dict(comp.__dict__, slots_per_rank=slots_per_rank * ratio,
                                       step_s=comp.step_s / ratio))
        # The layout the variant ran with (its config.yaml), else the model section's.
        layout = scaling.Layout(average_every=v["average_every"] or mcfg["average_every"],
                                servers=v["servers"] or mcfg["servers"])
        p = scaling.predict(vcomp, net, v["ranks"], v["strategy"] if v["strategy"] in (
            "allreduce", "average", "async") else "allreduce", v["algorithm"] == "nccl", rpn,
            layout, allreduce_s=scaling.measured_time(pts, comp.param_bytes))
        meas = v["step_time_s"]["median"]
        if v["strategy"] == "async":
            meas = meas * (v["ranks"] - layout.servers)  # one round: every worker one step
        measured.append({"variant": v["name"], "ranks": v["ranks"], "strategy": v["strategy"],
                         "ranks_per_node": rpn, "measured_step_s": meas,
                         "predicted_step_s": p["step_s"], "predicted_compute_s": p["compute_s"],
                         "error": p["step_s"] / meas - 1,
                         "predicted_speedup": p["samples_per_step"] * comp.step_s / p["step_s"],
                         "predicted_efficiency":
                             p["samples_per_step"] * comp.step_s / p["step_s"] / v["ranks"],
                         "network": net.as_dict()})
    given = mcfg["network"]
    if given == "measured":
        if not networks:
            return {"calibration": cv["name"], "compute": comp.as_dict(), "network": None,
                    "measured_vs_predicted": measured, "predictions": [],
                    "note": "no multi-rank variant measured: no network to extrapolate with"}
        # The largest rank count whose ranks fit their node's slots (GPUs, or CPU cores for
        # each rank's threads): an oversubscribed node's latency says little about a network.
        fitting = [r for r in networks if -(-r // nodes) * per_rank <= slots] or list(networks)
        net = networks[max(fitting)]
    else:
        net = scaling.Network(given["name"], given["alpha_us"] * 1e-6,
                              1e-9 / given["bandwidth_gbs"])
    # The predicted allocation's nodes: model.slots_per_node's, else this node's.
    pslots = mcfg["slots_per_node"] or slots
    rpn = mcfg["ranks_per_node"] or max(1, int(pslots // max(1, per_rank)))
    layout = scaling.Layout(average_every=mcfg["average_every"], servers=mcfg["servers"])
    preds = scaling.prediction_table(scaling.Compute(**dict(comp.__dict__,
                                                            slots_per_node=pslots)),
                                     net, scaling.powers_of_two(2, mcfg["max_ranks"]), rpn,
                                     layout)
    return {"calibration": cv["name"], "compute": comp.as_dict(), "network": net.as_dict(),
            "ranks_per_node": rpn, "slots_per_node": pslots,
            "average_every": layout.average_every,
            "servers": layout.servers, "measured_vs_predicted": measured,
            "predictions": preds}
