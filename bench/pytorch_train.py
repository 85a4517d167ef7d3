#!/usr/bin/env python3
"""PyTorch baseline for bench/train_throughput.sh.

Trains the same model as one of hpctrain's presets with the same data-parallel
recipe, on CPU:

  * --model mlp (configs/fashion_mnist_mlp.yaml):
      Linear(784, 192) -> ReLU -> Linear(192, 10);
    --model cnn (configs/fashion_mnist_cnn.yaml), input [1, 28, 28]:
      Conv2d(1, 32, 3, padding 1) -> ReLU -> MaxPool2d(2)
      -> Conv2d(32, 64, 3, padding 1) -> ReLU -> MaxPool2d(2)
      -> Flatten -> Linear(3136, 128) -> ReLU -> Linear(128, 10),
    every layer with a bias, as hpctrain's layers;
    --model lstm (configs/fashion_mnist_lstm.yaml): nn.LSTM(28, 128) over the 28 rows
      of each image, the last step's h into Linear(128, 10);
  * cross-entropy, SGD lr 0.05 momentum 0.9 (or --optimizer adamw: torch.optim.AdamW,
    its default betas and eps, with --lr and --weight-decay), constant learning rate
    (the benchmark sets hpctrain's schedule to constant too);
  * WORLD ranks: with WORLD > 1 each rank is started by torch.multiprocessing with
    MASTER_ADDR/MASTER_PORT set here (no torchrun) and wraps the model in
    DistributedDataParallel over gloo, which averages the gradients after every
    step (gradient_as_bucket_view=True, PyTorch's own option to skip a copy); with
    WORLD = 1 it is one plain process, no torch.distributed at all;
  * per-rank batch B (default 64); rank r trains on its contiguous shard of the
    training set (hpctrain's shard_for_rank), reshuffled every epoch by an index
    permutation within the shard; floor(N / WORLD / B) full batches per epoch,
    the last partial batch dropped (what hpctrain does: 429 steps for 55000
    samples, 2 ranks, batch 64; 859 for 1 rank).

PyTorch gets its best case: the shard is preloaded into memory as one float32
tensor scaled to [0, 1] (no DataLoader, no per-step conversion), glibc's malloc
keeps the per-step activations in its heap (see keep_allocations_in_heap), the
cnn runs channels-last, and each rank runs `--threads` intra-op threads.

Only the training loop is timed (after a barrier, excluding process start, data
loading, model construction and DDP setup); the time of the slowest rank counts,
as in hpctrain's summary.json. Prints one JSON line on stdout:
  samples_per_second = global samples trained / max over ranks of the loop time.

  python3 bench/pytorch_train.py --model mlp --data data/fashion-mnist/train.h5 --world 2 --threads 1
  python3 bench/pytorch_train.py --model cnn --data data/fashion-mnist/train.h5 --world 1 --threads 2
"""
import argparse
import ctypes
import gzip
import json
import os
import queue
import socket
import sys
import time

PROG = "pytorch_train.py"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("mlp", "cnn", "lstm"), required=True,
                   help="hpctrain preset to reproduce")
    p.add_argument("--data", default="data/fashion-mnist/train.h5",
                   help="hpctrain-data HDF5 training file (datasets images [N,1,28,28] uint8, "
                        "labels [N]), or a directory of Fashion-MNIST IDX .gz files "
                        "(all 60000 training rows then)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="per-rank batch size")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--world", type=int, default=1, help="number of ranks")
    p.add_argument("--hidden", type=int, default=192, help="hidden units of --model mlp")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9, help="SGD's momentum")
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=0, help="MASTER_PORT (0: a free port)")
    a = p.parse_args(argv)
    for name in ("epochs", "batch", "threads", "world", "hidden"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    return a


def load_train(path):
    """Returns (images uint8 [N, 1, 28, 28], labels int64 [N]) as numpy arrays."""
    import numpy as np
    if os.path.isdir(path):
        with gzip.open(os.path.join(path, "train-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
        with gzip.open(os.path.join(path, "train-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
        return images, labels
    try:
        import h5py
    except ImportError:
        sys.exit(f"{PROG}: reading {path} needs h5py (Debian: apt-get install python3-h5py), "
                 "or pass --data with a directory of Fashion-MNIST IDX .gz files")
    with h5py.File(path, "r") as f:
        images = f["images"][...]
        labels = f["labels"][...].astype(np.int64)
    return images, labels


def shard_for_rank(n, rank, size):
    """hpctrain's shard_for_rank: contiguous, the first n % size ranks one larger."""
    base, extra = divmod(n, size)
    begin = base * rank + min(rank, extra)
    return begin, base + (1 if rank < extra else 0)


def keep_allocations_in_heap():
    """Makes glibc's malloc serve blocks up to 32 MiB from its heap and keep freed memory.

    By default blocks above the mmap threshold (128 KiB, raised only when such a block
    of at most 32 MiB is freed) get fresh pages from mmap, which are faulted in and
    zeroed on every use: the cnn's activations (6.4 MB for the first convolution at
    batch 64) are then remapped every step, and PyTorch trained about half as many
    samples/s (1400 against 3000 here). Fixed thresholds do what tcmalloc or jemalloc,
    which PyTorch's CPU tuning guide recommends, would do.
    """
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        ok = False
    if not ok:
        sys.exit(f"{PROG}: mallopt failed: this baseline needs glibc")


def RowLstm(features, units, num_classes, steps):
    """configs/fashion_mnist_lstm.yaml: the image's rows as steps, nn.LSTM, the last
    step's h into the classifier."""
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(features, units, batch_first=True)
            self.fc = nn.Linear(units, num_classes)

        def forward(self, x):
            out, _ = self.lstm(x.reshape(x.shape[0], steps, features))
            return self.fc(out[:, -1, :])

    return Net()


def build_model(a, sample_shape, num_classes=10):
    """The network of hpctrain's preset a.model for samples of shape sample_shape:
    [features] for the mlp, [C, H, W] for the cnn."""
    import torch.nn as nn
    if a.model == "mlp":
        return nn.Sequential(nn.Linear(sample_shape[0], a.hidden), nn.ReLU(),
                             nn.Linear(a.hidden, num_classes))
    c, h, w = sample_shape
    if a.model == "lstm":
        return RowLstm(w, 128, num_classes, steps=c * h)
    return nn.Sequential(
        nn.Conv2d(c, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * (h // 4) * (w // 4), 128), nn.ReLU(),
        nn.Linear(128, num_classes))


def train_rank(rank, a, port, results):
    """Trains one rank; rank 0 puts the result dict into `results`."""
    import torch
    import torch.nn as nn

    distributed = a.world > 1
    keep_allocations_in_heap()
    torch.set_num_threads(a.threads)
    if distributed:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=a.world)

    # Data: this rank's shard, preloaded as float32 in [0, 1]; flat rows for the mlp.
    images, labels = load_train(a.data)
    n = images.shape[0]
    begin, count = shard_for_rank(n, rank, a.world)
    steps = n // a.world // a.batch  # hpctrain's steps_per_epoch: full batches only
    if steps < 1:
        raise SystemExit(f"--batch {a.batch} is larger than a rank's shard ({n // a.world})")
    x = torch.from_numpy(images[begin:begin + count].copy()).float().div_(255.0)
    if a.model == "mlp":
        x = x.reshape(count, -1)
    y = torch.from_numpy(labels[begin:begin + count].copy())

    # Model: identical initial parameters on every rank (DDP also broadcasts rank 0's).
    # The cnn runs channels_last (NHWC): on a 2-core AMD EPYC VM, torch 1.13 (oneDNN 2.6),
    # 2 threads, batch 64, it trained about 10% more samples/s than the default NCHW.
    # With one input channel the NCHW images are already NHWC: only the weights change.
    torch.manual_seed(a.seed)
    model = build_model(a, tuple(x.shape[1:]))
    if a.model == "cnn":
        model = model.to(memory_format=torch.channels_last)
    param_count = sum(p.numel() for p in model.parameters())
    # gradient_as_bucket_view: gradients live in DDP's all-reduce bucket (no copy in
    # and out of it); zero_grad keeps them there (set_to_none=False).
    net = DDP(model, gradient_as_bucket_view=True) if distributed else model
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum,
                              weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed * 1000 + rank)

    loss_sum = torch.zeros(())
    if distributed:
        dist.barrier()
    t0 = time.perf_counter()
    for _epoch in range(a.epochs):
        order = torch.randperm(count, generator=gen)
        for step in range(steps):
            idx = order[step * a.batch:(step + 1) * a.batch]
            xb = x.index_select(0, idx)
            yb = y.index_select(0, idx)
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(net(xb), yb)
            loss.backward()  # with DDP, the gradients are all-reduced (averaged) here
            opt.step()
            loss_sum += loss.detach()
    elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    loss_sum = loss_sum.double().reshape(1)
    if distributed:
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        dist.all_reduce(loss_sum)
    if rank == 0:
        samples = a.epochs * steps * a.batch * a.world
        results.put({
            "framework": "pytorch-ddp" if distributed else "pytorch",
            "torch_version": torch.__version__,
            "backend": "gloo" if distributed else None,
            "model": a.model,
            "param_count": param_count,
            "world_size": a.world,
            "threads_per_rank": a.threads,
            "batch_per_rank": a.batch,
            "global_batch": a.batch * a.world,
            "train_rows": int(n),
            "epochs": a.epochs,
            "steps_per_epoch": steps,
            "samples": samples,
            "time_train_s": elapsed.item(),
            "samples_per_second": samples / elapsed.item(),
            "mean_train_loss": loss_sum.item() / (a.epochs * steps * a.world),
        })
    if distributed:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse_args()
    if not os.path.exists(a.data):
        sys.exit(f"{PROG}: {a.data}: no such file or directory")
    # Before torch is imported here and in the spawned ranks: no oversubscription
    # from OpenMP/MKL pools beyond --threads.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    if a.world == 1:
        results = queue.SimpleQueue()
        train_rank(0, a, 0, results)
    else:
        import torch.multiprocessing as mp
        results = mp.get_context("spawn").SimpleQueue()
        mp.spawn(train_rank, args=(a, a.port or free_port(), results), nprocs=a.world, join=True)
    if results.empty():
        sys.exit(f"{PROG}: rank 0 reported no result")
    print(json.dumps(results.get()), flush=True)


if __name__ == "__main__":
    main()
