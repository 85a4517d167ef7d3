#!/usr/bin/env python3
"""Turns the logs of `bench/gpu/device.sh resnet` (its logs.tar.gz,
unpacked) into one JSON record: per shape and precision, hpctrain's images/s
(last epoch of each run; median over the runs) against PyTorch's (median window), the
ratio, joules per training image on each side where the energy was read, the model FLOP
utilisation of each (training FLOPs = 3 x the forward FLOPs `hpctrain inspect` counts,
against the card's dense peak for the precision; inspect's count includes BatchNorm and the
residual additions, 0.14% above the convolutions and dense layer alone for ResNet-34), and the step breakdown of the timed
runs (tf32, bf16); with the logs of `device.sh lstm` too, the LSTM's samples/s per engine
and precision against PyTorch's nn.LSTM. Logs of several calls may be put in one folder
(runs renamed apart, pytorch.jsonl lines appended): each side's median run counts.

  python3 bench/gpu/summarize.py LOGS_DIR --device "NVIDIA H100 80GB HBM3" \
      --command "bench/gpu/device.sh env tests resnet" --out bench/results/x.json
"""
import argparse
import csv
import glob
import json
import os
import statistics
import subprocess
import time


# Dense peak TFLOP/s of the SXM cards by precision (NVIDIA's H100 and H200 data sheets: the
# same GH100 chip; fp32 without tensor cores).
PEAK_TFLOPS = {"H100": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
               "H200": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}}
# The classes device.sh gives each shape.
CLASSES = {"3x224x224": 1000, "1x148x197": 9}


def forward_flops(hpctrain, shape):
    """FLOPs of one sample's forward pass of configs/seed_resnet34.yaml at `shape`."""
    out = subprocess.run([hpctrain, "inspect", "configs/seed_resnet34.yaml", "--input", shape,
                          "--classes", str(CLASSES[shape])], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("total:") and "MFLOPs forward per sample" in line:
            return float(line.split("MFLOPs forward")[0].split(",")[-1]) * 1e6
    return None


def median_energy(runs):
    """Median joules per training sample of the runs' summary.json energy, or None."""
    values = []
    for run in runs:
        with open(run + ".summary.json") as f:
            energy = json.load(f).get("energy") or {}
        if energy.get("joules_per_sample") is not None:
            values.append(energy["joules_per_sample"])
    return statistics.median(values) if values else None


def last_epoch_rate(run):
    with open(run + ".metrics.csv") as f:
        return float(list(csv.DictReader(f))[-1]["samples_per_second"])


def finished_runs(logs, pattern):
    """The runs (paths without the suffix) whose files match `pattern` + ".metrics.csv" and
    that finished: a summary.json and at least one epoch in metrics.csv. A run that a step
    timeout or DEADLINE cut short is left out, not fatal."""
    runs = []
    for path in sorted(glob.glob(os.path.join(logs, pattern + ".metrics.csv"))):
        run = path[: -len(".metrics.csv")]
        with open(path) as f:
            epochs = list(csv.DictReader(f))
        if epochs and os.path.exists(run + ".summary.json"):
            runs.append(run)
    return runs


def median_process(runs, key):
    """The PyTorch process whose runs[i][key] is the median; of an even number, the faster
    of the middle two, so that a slow process cannot flatter hpctrain. None for none."""
    runs = sorted(runs, key=lambda r: r[key])
    return runs[len(runs) // 2] if runs else None


def lstm_results(logs, refs):
    """hpctrain's LSTM runs of `device.sh lstm` per engine and precision, against the median
    PyTorch process of that precision."""
    out = []
    for engine in ("cudnn", "steps"):
        for precision in ("fp32", "tf32", "bf16"):
            runs = finished_runs(logs, f"lstm_1gpu_{engine}_{precision}_rep*")
            if not runs:
                continue
            rates = [last_epoch_rate(r) for r in runs]
            ref = median_process(refs.get(precision, []), "samples_per_second")
            entry = {"engine": engine, "precision": precision,
                     "hpctrain_samples_per_second": round(statistics.median(rates), 1),
                     "hpctrain_runs": [round(v, 1) for v in rates],
                     "hpctrain_tokens_per_second": round(28 * statistics.median(rates)),
                     "hpctrain_joules_per_sample": median_energy(runs),
                     "pytorch_samples_per_second": ref and ref["samples_per_second"],
                     "pytorch_tokens_per_second": ref and ref["tokens_per_second"],
                     "pytorch_windows": ref and ref["windows"]}
            if ref:
                entry["ratio"] = round(statistics.median(rates) / ref["samples_per_second"], 3)
            out.append(entry)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs")
    p.add_argument("--device", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--date", default=time.strftime("%Y-%m-%d"))
    p.add_argument("--out", required=True)
    p.add_argument("--hpctrain", default="build/hpctrain", help="for the FLOP count")
    a = p.parse_args()
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in a.device), None)

    # PyTorch's runs in the other layout than its default for the precision (channels_last
    # for bf16 and fp16, NCHW for fp32 and tf32) apart, as "bf16_nchw" or "tf32_nhwc":
    # hpctrain's runs of those names are set against them. Where the logs hold several
    # PyTorch processes of one shape and precision (runs of several calls put together), the
    # median one counts (median_process) and each one's figure is kept.
    pytorch, lstm_ref = {}, {}
    jsonl = os.path.join(a.logs, "pytorch.jsonl")
    lines = []
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            lines = f.read().splitlines()
    for line in lines:
        if not line.startswith("{"):  # a skipped step's note or an error's last line
            continue
        r = json.loads(line)
        if r.get("model") == "lstm":
            lstm_ref.setdefault(r["precision"], []).append(r)
            continue
        usual = r["channels_last"] == (r["precision"] in ("bf16", "fp16"))
        other = "" if usual else "_nhwc" if r["channels_last"] else "_nchw"
        pytorch.setdefault((r["shape"], r["precision"] + other), []).append(r)
    for key, runs in pytorch.items():
        pytorch[key] = dict(median_process(runs, "images_per_second"), processes=sorted(
            round(r["images_per_second"], 1) for r in runs))
    results = []
    # The shapes either side ran: a shape whose PyTorch process failed keeps its runs.
    shapes = {s for s, _ in pytorch} | {
        os.path.basename(r)[len("resnet34_"):].split("_")[0]
        for r in glob.glob(os.path.join(a.logs, "resnet34_*_rep*.metrics.csv"))}
    for shape in sorted(shapes):
        # bf16_nchw: hpctrain's bf16 with layout nchw, against PyTorch's NCHW bf16 (tf32_nhwc
        # likewise).
        flops = forward_flops(a.hpctrain, shape) if shape in CLASSES else None
        # The precisions device.sh names, then any other run names (bf16_graph: bf16 with
        # train.cuda_graph on, against PyTorch's bf16).
        named = {os.path.basename(r)[len(f"resnet34_{shape}_"):].rsplit("_rep", 1)[0]
                 for r in glob.glob(os.path.join(a.logs, f"resnet34_{shape}_*_rep*.metrics.csv"))}
        order = ["fp32", "tf32", "tf32_nhwc", "bf16", "bf16_nchw", "fp16"]
        for precision in order + sorted(named - set(order)):
            runs = finished_runs(a.logs, f"resnet34_{shape}_{precision}_rep*")
            rates = [last_epoch_rate(r) for r in runs]
            other = "_nchw" if "_nchw" in precision else "_nhwc" if "_nhwc" in precision else ""
            ref = pytorch.get((shape, precision.split("_")[0] + other))
            if not runs and not ref:
                continue
            layout = None
            if runs:
                with open(runs[0] + ".summary.json") as f:
                    layout = json.load(f).get("layout")
            entry = {"shape": shape, "precision": precision, "layout": layout, "batch": 128,
                     "hpctrain_images_per_second": statistics.median(rates) if rates else None,
                     "hpctrain_runs": [round(v, 1) for v in rates],
                     "pytorch_images_per_second": ref and round(ref["images_per_second"], 1),
                     "pytorch_windows": ref and ref["windows"],
                     "pytorch_processes": ref and ref["processes"],
                     "pytorch_channels_last": ref and ref["channels_last"]}
            if precision == "bf16" and (shape, "bf16_nchw") in pytorch:
                entry["pytorch_nchw_images_per_second"] = round(
                    pytorch[(shape, "bf16_nchw")]["images_per_second"], 1)
            entry["hpctrain_joules_per_image"] = median_energy(runs) if runs else None
            entry["pytorch_joules_per_image"] = ref and ref.get("joules_per_image")
            p_peak = peak and peak[precision.split("_")[0]]
            if flops and p_peak:
                def mfu(images_per_second):
                    return round(3 * flops * images_per_second / (p_peak * 1e12), 4)
                if rates:
                    entry["hpctrain_mfu"] = mfu(statistics.median(rates))
                if ref:
                    entry["pytorch_mfu"] = mfu(ref["images_per_second"])
            if rates and ref:
                entry["ratio"] = round(statistics.median(rates) / ref["images_per_second"], 3)
            elif not rates:
                entry["note"] = "no hpctrain runs of this precision in the logs"
            results.append(entry)
        for precision in ("tf32", "bf16"):
            timed = os.path.join(a.logs, f"resnet34_{shape}_{precision}_timed.summary.json")
            if not os.path.exists(timed):
                continue
            with open(timed) as f:
                phases = json.load(f).get("step_phases_s")
            if not phases:
                continue
            total = sum(phases.values())
            results.append({"shape": shape, "precision": precision,
                            "step_phases_fraction": {k: round(v / total, 4)
                                                     for k, v in phases.items()},
                            "step_phases_s": phases})
    lstm = lstm_results(a.logs, lstm_ref)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    any_ref = next(iter(pytorch.values()), {})
    record = {
        "benchmark": "ResNet-34 training throughput, one GPU, hpctrain vs PyTorch",
        "device": a.device, "date": a.date, "command": a.command, "commit": commit,
        "pytorch": any_ref.get("torch"), "cudnn_pytorch": any_ref.get("cudnn"),
        "method": "hpctrain: 3 epochs of 25 steps on synth uint8 data read from HDF5 "
                  "through the prefetch queue, images/s of the last epoch, median over runs "
                  "(precisions interleaved); PyTorch: torchvision resnet34, batches resident "
                  "on the GPU, cudnn.benchmark, 15 warm-up steps then the median of 5 "
                  "windows of 20 steps; SGD momentum 0.9 on both sides; joules per image: "
                  "hpctrain's energy.joules_per_sample (the run's epochs, GPU and CPU sources "
                  "read), PyTorch's GPU energy over its timed windows (NVML); MFU: 3 x forward "
                  "FLOPs (2 per multiply-add) x images/s over the card's dense peak",
        "results": results}
    if lstm:
        record["lstm"] = {
            "benchmark": "configs/fashion_mnist_lstm.yaml (LSTM 128 over 28 rows, batch 64), one "
                         "GPU, hpctrain (rnn: cudnn and steps) vs PyTorch nn.LSTM (cuDNN)",
            "method": "hpctrain: samples/s of the last of 2 epochs of Fashion-MNIST read from "
                      "HDF5, median over runs; PyTorch: bench/gpu/pytorch_lstm.py, random "
                      "batches resident on the GPU, median of 5 windows; tokens/s = samples/s "
                      "x 28",
            "results": lstm}
    with open(a.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    for r in lstm:
        print(f"lstm {r['engine']} {r['precision']}: hpctrain {r['hpctrain_samples_per_second']} "
              f"vs PyTorch {r['pytorch_samples_per_second']} samples/s -> {r.get('ratio', '-')}")
    for r in results:
        if "batch" in r:  # a throughput entry (not a step breakdown)
            print(f"{r['shape']:>10} {r['precision']}: hpctrain {r['hpctrain_images_per_second']}"
                  f" vs PyTorch {r['pytorch_images_per_second']} -> {r.get('ratio', '-')}; MFU "
                  f"{r.get('hpctrain_mfu', '-')} vs {r.get('pytorch_mfu', '-')}; J/image "
                  f"{r.get('hpctrain_joules_per_image')} vs {r.get('pytorch_joules_per_image')}")


if __name__ == "__main__":
    main()
