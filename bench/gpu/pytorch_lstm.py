#!/usr/bin/env python3
"""PyTorch baseline for the `lstm` stage of bench/gpu/device.sh: training samples/s of
configs/fashion_mnist_lstm.yaml's network (nn.LSTM over the 28 rows of a 28x28 image, its
last h into nn.Linear(units, 10)) on one GPU, through cuDNN's RNN kernels.

PyTorch gets its best case: a few distinct random batches already on the GPU, rotated;
SGD with momentum, cross-entropy. --precision fp32 (TF32 off), tf32 (TF32 allowed) or
bf16 (autocast). Timing: --warmup steps, then --reps windows of --steps steps, each
window between two device synchronisations; prints one JSON line with the median
window's samples/s (and tokens/s: samples x 28 steps).

  python3 bench/gpu/pytorch_lstm.py --batch 64 --units 128 --precision fp32
"""
import argparse
import json
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--units", type=int, default=128)
    p.add_argument("--steps-per-sample", type=int, default=28, help="sequence length")
    p.add_argument("--features", type=int, default=28)
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=50, help="steps per timed window")
    p.add_argument("--reps", type=int, default=5, help="timed windows")
    a = p.parse_args()

    import torch
    import torch.nn as nn

    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    dev = torch.device("cuda")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(a.features, a.units, batch_first=True)
            self.fc = nn.Linear(a.units, 10)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.fc(out[:, -1, :])

    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    xs = [torch.rand(a.batch, a.steps_per_sample, a.features, device=dev) for _ in range(4)]
    ys = [torch.randint(0, 10, (a.batch,), device=dev) for _ in range(4)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = loss_fn(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    windows = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        for i in range(a.steps):
            step(i)
        torch.cuda.synchronize()
        windows.append(a.steps * a.batch / (time.perf_counter() - t0))
    med = statistics.median(windows)
    print(json.dumps({"side": "pytorch", "model": "lstm", "precision": a.precision,
                      "batch": a.batch, "units": a.units, "samples_per_second": round(med, 1),
                      "tokens_per_second": round(med * a.steps_per_sample, 1),
                      "windows": [round(w, 1) for w in windows], "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()}))


if __name__ == "__main__":
    main()
