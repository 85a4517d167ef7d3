#!/usr/bin/env python3
"""PyTorch baseline for bench/gpu/resnet_throughput.sh: training images/s of ResNet-18/34.

The same network as hpctrain's preset (torchvision's ResNet, its first convolution
taking C channels, K classes), SGD with momentum, cross-entropy, on one GPU. PyTorch
gets its best case: the batches live on the GPU already (a few distinct random
batches, rotated, so nothing is timed on one cached input), cuDNN's autotuner is on
(torch.backends.cudnn.benchmark), and for bf16 the model runs channels_last under
autocast (float32 master weights), PyTorch's recommended mixed-precision recipe.

--precision fp32: float32 throughout, TF32 off; tf32: float32 tensors, TF32 tensor
cores allowed in matrix products and convolutions; bf16: autocast to bfloat16 with
channels_last, or with NCHW tensors under --nchw (hpctrain's layout: how much of the
bf16 figure the layout is worth); fp32 and tf32 take channels_last under --nhwc (hpctrain's
layout nhwc); fp16: autocast to float16 with channels_last and
dynamic loss scaling (torch.amp.GradScaler), as hpctrain's precision fp16.

Energy: where NVML is importable (nvidia-ml-py), the GPU's energy counter is read around
the timed windows: joules_per_image is the GPU's energy over the windows per image
trained (the whole board, as hpctrain's energy.gpu_j).

Timing: --warmup steps first, then --reps windows of --steps steps each, every window
between two device synchronisations; prints one JSON line with the median window's
images/s and every window's figure. --profile-step instead runs one step after the
warm-up between cudaProfilerStart and cudaProfilerStop (for `ncu --profile-from-start
off`), forward, loss and backward only, as `hpctrain inspect --time` profiles.

  python3 bench/gpu/pytorch_resnet.py --model resnet34 --shape 3x224x224 --classes 1000 \
      --batch 128 --precision bf16
"""
import argparse
import json
import statistics
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("resnet18", "resnet34"), default="resnet34")
    p.add_argument("--shape", default="3x224x224", help="sample shape CxHxW")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), default="fp32")
    p.add_argument("--nchw", action="store_true", help="bf16 or fp16 without channels_last")
    p.add_argument("--nhwc", action="store_true", help="fp32 or tf32 with channels_last")
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--steps", type=int, default=20, help="steps per timed window")
    p.add_argument("--reps", type=int, default=5, help="timed windows")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--profile-step", action="store_true",
                   help="after the warm-up, one forward+backward step for a profiler; no timing")
    a = p.parse_args()
    try:
        a.c, a.h, a.w = (int(v) for v in a.shape.lower().split("x"))
    except ValueError:
        p.error(f"--shape: expected CxHxW, got {a.shape!r}")
    return a


def gpu_energy_reader():
    """A function returning the GPU's energy counter in joules, or None without NVML."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception:  # no module, no driver, or a board without the counter
        return None
    return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0


def main():
    a = parse_args()
    import torch
    import torch.nn as nn
    import torchvision

    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(1)

    model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    if a.c != 3:
        model.conv1 = nn.Conv2d(a.c, 64, kernel_size=7, stride=2, padding=3, bias=False)
    model = model.to(dev)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    channels_last = not a.nchw if half is not None else a.nhwc
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = nn.CrossEntropyLoss()

    batches = []
    for _ in range(4):
        x = torch.rand(a.batch, a.c, a.h, a.w, device=dev).to(memory_format=memory_format)
        y = torch.randint(0, a.classes, (a.batch,), device=dev)
        batches.append((x, y))

    scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")

    def step(i, update=True):
        x, y = batches[i % len(batches)]
        with torch.autocast("cuda", dtype=half or torch.float32, enabled=half is not None):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if update:
            scaler.step(opt)
            scaler.update()

    model.train()
    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    if a.profile_step:
        torch.cuda.profiler.start()
        step(a.warmup, update=False)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(json.dumps({"tool": "pytorch", "profiled_step": True, "precision": a.precision,
                          "channels_last": channels_last, "shape": a.shape}))
        return
    energy = gpu_energy_reader()
    joules0 = energy() if energy else None
    rates = []
    for r in range(a.reps):
        t0 = time.perf_counter()
        for i in range(a.steps):
            step(i)
        torch.cuda.synchronize()
        rates.append(a.steps * a.batch / (time.perf_counter() - t0))
    joules = energy() - joules0 if energy else None
    print(json.dumps({
        "tool": "pytorch", "model": a.model, "shape": a.shape, "classes": a.classes,
        "batch": a.batch, "precision": a.precision,
        "channels_last": channels_last,
        "images_per_second": statistics.median(rates),
        "windows": [round(v, 1) for v in rates],
        "joules_per_image": joules / (a.reps * a.steps * a.batch) if joules else None,
        "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
