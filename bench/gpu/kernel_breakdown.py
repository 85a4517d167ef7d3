#!/usr/bin/env python3
"""GPU time of one training step by kind of kernel, side by side for several programs.

Reads Nsight Compute's raw CSV pages (one per program, each profiling exactly one
step: `ncu --profile-from-start off --metrics gpu__time_duration.sum` around
`hpctrain inspect --time` or `bench/gpu/pytorch_resnet.py --profile-step`, exported
with `ncu -i REPORT --csv --page raw --print-units base`), sums each kernel's
duration into a kind (convolution forward / backward data / backward filter, batch
normalisation, pooling, element-wise, ...; by name, first matching pattern wins), and
prints one table with a column per program, then each program's costliest kernels.

  kernel_breakdown.py hpctrain=ncu_hpctrain.csv pytorch=ncu_pytorch.csv [--top 15]

Kernels run one at a time under the profiler, so the sum is the GPU's busy time for the
step without overlap; its ratio between programs is the comparison, not its absolute.
"""
import argparse
import csv
import re
import sys

METRIC = "gpu__time_duration.sum"
UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
         "ms": 1e-3, "second": 1.0, "s": 1.0}

# (kind, pattern over the kernel's name), first match wins: cuDNN's convolution kernels
# name their pass (fprop / dgrad / wgrad) and contain "gemm" too, so they come first;
# "conv" is not "convert" (hpctrain's casts of weights and gradients are conversions).
KINDS = [
    ("conv forward", r"fprop|conv(?!ert).*fwd|fwd.*conv(?!ert)|implicit_convolve"),
    ("conv backward data", r"dgrad|bwd_data|backward_data"),
    ("conv backward filter", r"wgrad|bwd_filter|backward_filter|filter_grad"),
    ("conv other", r"conv(?!ert)|winograd|fft|implicit_gemm"),
    ("batch norm", r"batch_?norm|\bbn_|welford|merge_statistics|merge_sums|backward_sums|"
                   r"backward_dx|apply_kernel|inference_coefficients|bn_param_grads"),
    ("pooling", r"pool"),
    ("loss", r"softmax|xent|cross_entropy|nll_loss|log_softmax"),
    ("optimizer", r"sgd|multi_tensor|foreach|unscale|loss_scale|adam"),
    ("dense (gemm)", r"gemm|cublas|cutlass|matmul|xmma|nvjet"),
    ("layout / conversion", r"transpose|convert|nchwtonhwc|nhwctonchw|copy|cast|to_copy"),
    ("element-wise", r"elementwise|binary_kernel|relu|threshold|add|mul|fill|unary"),
    ("reduction", r"reduce|sum_rows|sum_channels"),
]


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def number(text):
    return float(text.replace(",", ""))


def read_kernels(path):
    """[(kernel name, seconds)] from an ncu raw CSV page."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    for h, row in enumerate(rows):
        if "Kernel Name" in row and METRIC in row:
            break
    else:
        raise ValueError(f"{path}: no header with 'Kernel Name' and {METRIC} (ncu raw CSV?)")
    header = rows[h]
    name_col, metric_col = header.index("Kernel Name"), header.index(METRIC)
    scale, body = 1e-9, rows[h + 1:]
    if body and body[0][metric_col].strip().lower() in UNITS:  # the units row
        scale = UNITS[body[0][metric_col].strip().lower()]
        body = body[1:]
    kernels = []
    for row in body:
        if len(row) <= max(name_col, metric_col):
            continue
        try:
            kernels.append((row[name_col], number(row[metric_col]) * scale))
        except ValueError:
            continue
    if not kernels:
        raise ValueError(f"{path}: no kernel rows (was anything profiled between the "
                         "profiler start and stop?)")
    return kernels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="LABEL=CSV")
    p.add_argument("--top", type=int, default=15, help="costliest kernels listed per program")
    a = p.parse_args()
    programs = []
    for item in a.inputs:
        label, sep, path = item.partition("=")
        if not sep:
            p.error(f"expected LABEL=CSV, got {item!r}")
        try:  # a program whose profile failed leaves the others' columns
            programs.append((label, read_kernels(path)))
        except (OSError, ValueError) as e:
            print(f"{label}: {e}", file=sys.stderr)
    if not programs:
        return 1

    kinds = [k for k, _ in KINDS] + ["other"]
    sums = {label: {k: [0.0, 0] for k in kinds} for label, _ in programs}
    for label, kernels in programs:
        for name, seconds in kernels:
            entry = sums[label][kind_of(name)]
            entry[0] += seconds
            entry[1] += 1
    width = max(12, *(len(label) for label, _ in programs))
    print(f"{'kind':22}" + "".join(f"{label:>{width + 8}}" for label, _ in programs))
    print(f"{'':22}" + "".join(f"{'ms':>{width}} {'calls':>7}" for _ in programs))
    for k in kinds:
        if all(sums[label][k][1] == 0 for label, _ in programs):
            continue
        print(f"{k:22}" + "".join(f"{1e3 * sums[label][k][0]:>{width}.3f} {sums[label][k][1]:>7}"
                                  for label, _ in programs))
    print(f"{'total':22}" + "".join(
        f"{1e3 * sum(v[0] for v in sums[label].values()):>{width}.3f} "
        f"{sum(v[1] for v in sums[label].values()):>7}" for label, _ in programs))
    for label, kernels in programs:
        by_name = {}
        for name, seconds in kernels:
            entry = by_name.setdefault(name, [0.0, 0])
            entry[0] += seconds
            entry[1] += 1
        print(f"\n{label}: costliest kernels (ms, calls, kind)")
        for name, (seconds, calls) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:a.top]:
            print(f"  {1e3 * seconds:9.3f} {calls:5}  {kind_of(name):20}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
