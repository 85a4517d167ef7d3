#!/usr/bin/env python3
"""PyTorch peer of `hpctrain inspect CONFIG --time` on the CPU: the step time (forward,
cross-entropy loss, backward; no optimizer) of configs/fashion_mnist_resnet18.yaml's model,
a ResNet-18 of width --width (16: 16-32-64-128 channels) with torchvision's block layout
(3x3 convolutions without bias, BatchNorm, ReLU; 1x1 projection shortcuts), the small stem
(3x3 convolution, BatchNorm, ReLU) or the ImageNet one (7x7/2 convolution, BatchNorm,
ReLU, 3x3/2 max pooling). Median of --steps steps after --warmup; prints
"step at batch B: T ms" as inspect does.

  bench/pytorch_resnet_step.py --input 1x28x28 --stem small --threads 2
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


def resnet18(c, width, stem, classes):
    if stem == "small":
        layers = [nn.Conv2d(c, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    else:
        layers = [nn.Conv2d(c, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                  nn.MaxPool2d(3, 2, 1)]
    cin = width
    for stage, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
        layers += [Block(cin, cout, 1 if stage == 0 else 2), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", default="1x28x28", help="CxHxW")
    p.add_argument("--stem", choices=("small", "imagenet"), default="small")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    c, h, w = (int(v) for v in a.input.lower().split("x"))
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = resnet18(c, a.width, a.stem, a.classes)
    model.train()
    x = torch.rand(a.batch, c, h, w)
    y = torch.randint(0, a.classes, (a.batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    params = sum(q.numel() for q in model.parameters())
    print(f"step at batch {a.batch}: {1e3 * statistics.median(times):.3f} ms "
          f"({params} parameters, torch {torch.__version__}, {a.threads} threads)")


if __name__ == "__main__":
    main()
