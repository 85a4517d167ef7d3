#!/usr/bin/env python3
"""PyTorch DDP baseline for bench/mlp_throughput.sh.

Trains the same model as hpctrain's `mlp` preset (configs/fashion_mnist_mlp.yaml)
with the same data-parallel recipe, on CPU with the gloo backend:

  * Linear(784, 192) -> ReLU -> Linear(192, 10), cross-entropy,
    SGD lr 0.05 momentum 0.9 (constant);
  * WORLD ranks (default 2), each started by torch.multiprocessing with
    MASTER_ADDR/MASTER_PORT set here (no torchrun);
  * per-rank batch B (default 64); rank r trains on its contiguous shard of the
    training set (hpctrain's shard_for_rank), reshuffled every epoch by an index
    permutation within the shard; floor(N / WORLD / B) full batches per epoch,
    the last partial batch dropped (what hpctrain does: 429 steps for 55000
    samples, 2 ranks, batch 64);
  * gradients averaged over ranks by DDP's all-reduce after every step
    (gradient_as_bucket_view=True, PyTorch's own option to skip a copy).

PyTorch gets its best case: the shard is preloaded into memory as one float32
tensor scaled to [0, 1] (no DataLoader, no per-step conversion), and each rank
runs `--threads` intra-op threads (default 1: 2 ranks on 2 cores, like
hpctrain's 1 thread per rank).

Only the training loop is timed (after a barrier, excluding process start, data
loading, model construction and DDP setup); the time of the slowest rank counts,
as in hpctrain's summary.json. Prints one JSON line on stdout:
  samples_per_second = global samples trained / max over ranks of the loop time.

  python3 bench/pytorch_ddp_mlp.py --data /tmp/fm/train.h5 --epochs 2
"""
import argparse
import gzip
import json
import os
import socket
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/fashion-mnist/train.h5",
                   help="hpctrain-data HDF5 training file (datasets images [N,1,28,28] uint8, "
                        "labels [N]), or a directory of Fashion-MNIST IDX .gz files "
                        "(all 60000 training rows then)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="per-rank batch size")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--world", type=int, default=2, help="number of ranks")
    p.add_argument("--hidden", type=int, default=192)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=0, help="MASTER_PORT (0: a free port)")
    a = p.parse_args(argv)
    for name in ("epochs", "batch", "threads", "world", "hidden"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    return a


def load_train(path):
    """Returns (images uint8 [N, 784], labels int64 [N]) as numpy arrays."""
    import numpy as np
    if os.path.isdir(path):
        with gzip.open(os.path.join(path, "train-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
        with gzip.open(os.path.join(path, "train-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
        return images, labels
    try:
        import h5py
    except ImportError:
        sys.exit("pytorch_ddp_mlp.py: reading " + path + " needs h5py "
                 "(Debian: apt-get install python3-h5py), or pass --data with a directory "
                 "of Fashion-MNIST IDX .gz files")
    with h5py.File(path, "r") as f:
        images = f["images"][...]
        labels = f["labels"][...].astype(np.int64)
    return images.reshape(images.shape[0], -1), labels


def shard_for_rank(n, rank, size):
    """hpctrain's shard_for_rank: contiguous, the first n % size ranks one larger."""
    base, extra = divmod(n, size)
    begin = base * rank + min(rank, extra)
    return begin, base + (1 if rank < extra else 0)


def worker(rank, a, port, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)

    # Data: this rank's shard, preloaded as float32 in [0, 1].
    images, labels = load_train(a.data)
    n = images.shape[0]
    begin, count = shard_for_rank(n, rank, a.world)
    steps = n // a.world // a.batch  # hpctrain's steps_per_epoch: full batches only
    if steps < 1:
        raise SystemExit(f"--batch {a.batch} is larger than a rank's shard ({n // a.world})")
    x = torch.from_numpy(images[begin:begin + count].copy()).float().div_(255.0).contiguous()
    y = torch.from_numpy(labels[begin:begin + count].copy())
    in_features = x.shape[1]

    # Model: identical initial parameters on every rank (DDP also broadcasts rank 0's).
    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(in_features, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 10))
    # gradient_as_bucket_view: gradients live in DDP's all-reduce bucket (no copy in
    # and out of it); zero_grad keeps them there (set_to_none=False).
    ddp = DDP(model, gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed * 1000 + rank)

    loss_sum = torch.zeros(())
    dist.barrier()
    t0 = time.perf_counter()
    for _epoch in range(a.epochs):
        order = torch.randperm(count, generator=gen)
        for step in range(steps):
            idx = order[step * a.batch:(step + 1) * a.batch]
            xb = x.index_select(0, idx)
            yb = y.index_select(0, idx)
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(ddp(xb), yb)
            loss.backward()  # DDP all-reduces (averages) the gradients here
            opt.step()
            loss_sum += loss.detach()
    elapsed = time.perf_counter() - t0

    t = torch.tensor([elapsed], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    lsum = loss_sum.clone().double().reshape(1)
    dist.all_reduce(lsum)
    if rank == 0:
        samples = a.epochs * steps * a.batch * a.world
        results.put({
            "framework": "pytorch-ddp",
            "torch_version": torch.__version__,
            "backend": "gloo",
            "world_size": a.world,
            "threads_per_rank": a.threads,
            "batch_per_rank": a.batch,
            "global_batch": a.batch * a.world,
            "train_rows": int(n),
            "epochs": a.epochs,
            "steps_per_epoch": steps,
            "samples": samples,
            "time_train_s": t.item(),
            "samples_per_second": samples / t.item(),
            "mean_train_loss": lsum.item() / (a.epochs * steps * a.world),
        })
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse_args()
    if not os.path.exists(a.data):
        sys.exit(f"pytorch_ddp_mlp.py: {a.data}: no such file or directory")
    # Before torch is imported here and in the spawned ranks: no oversubscription
    # from OpenMP/MKL pools beyond --threads.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = a.port or free_port()
    mp.spawn(worker, args=(a, port, results), nprocs=a.world, join=True)
    if results.empty():
        sys.exit("pytorch_ddp_mlp.py: rank 0 reported no result")
    print(json.dumps(results.get()), flush=True)


if __name__ == "__main__":
    main()
