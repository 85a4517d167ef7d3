"""End-to-end cases of the training step's hot path: nothing in a step allocates on the
training thread (docs/architecture.md), checkpoint steps included, counted by an
LD_PRELOAD shim (alloc_shim.c) in real runs of every strategy and several models and
options.
"""
import glob
import os
import re
import shutil
import subprocess

from harness import ARGS, check, checkpoints, fail, fresh, summary, train

# name, config, ranks, settings. Every run trains EPOCHS epochs of val.h5 (5,000 rows) on
# the CPU, without validation or test sets; its steps end with the control all-reduce.
EPOCHS = 2
_RUNS = [
    # hpctrain's ring; checkpoints every 5 steps, copied by the training thread (small).
    ("ring_checkpoints", "configs/fashion_mnist_mlp.yaml", 2,
     ["checkpoint.every_steps=5", "checkpoint.keep=2"]),
    # MPI_Allreduce, AdamW, a model whose checkpoints the writer thread copies (> 8 MiB).
    ("mpi_adamw_writer_copies", "configs/fashion_mnist_mlp.yaml", 3,
     ["distributed.algorithm=mpi", "optimizer.name=adamw", "model.hidden=[1024]",
      "checkpoint.every_steps=7", "checkpoint.keep=1"]),
    # Parameter averaging, per-rank checkpoint arrays gathered to rank 0, two threads.
    ("average_cnn", "configs/fashion_mnist_cnn.yaml", 2,
     ["distributed.strategy=average", "run.threads=2", "checkpoint.every_steps=10",
      "checkpoint.keep=1"]),
    # float16 with loss scaling, micro-batches, clipping, skipped steps, step timing,
    # augmentation and rows read from the file as they are prefetched; 3 ranks.
    ("fp16_streamed_augmented", "configs/fashion_mnist_cnn_augment.yaml", 3,
     ["precision=fp16", "train.accumulate_steps=2", "optimizer.clip_grad_norm=1",
      "train.on_nonfinite=skip_step", "train.step_timing=true", "data.cache_mb=0",
      "checkpoint.every_steps=9", "checkpoint.keep=1"]),
    # Recurrent layers in bfloat16; batches shared by measured speed.
    ("lstm_bf16_balance", "configs/fashion_mnist_lstm.yaml", 2,
     ["precision=bf16", "distributed.balance=auto"]),
]
# A GPU's path on the CPU: memory staged as on a GPU (uploads, decoding, staged collectives
# and checkpoints) and the step recorded once, as a CUDA graph is, and replayed. The first
# RECORDED intervals record (two eager steps, then the recording) and may allocate.
RECORDED = 3
_GPU_PATH = ("staged_recorded_fp16", "configs/fashion_mnist_cnn.yaml", 2,
             ["cpu_ranks=[0,1]", "train.cuda_graph=on", "precision=fp16",
              "checkpoint.every_steps=5", "checkpoint.keep=1"])
# Strategy async (2 workers, 2 parameter servers): a step ends with each MPI_Isend (a
# worker's push to each server, a server's reply); an epoch ends a segment, whose
# collectives allocate, at no fixed count of sends.
_ASYNC = ("async_two_servers", "configs/fashion_mnist_mlp.yaml", 4,
          ["distributed.strategy=async", "distributed.parameter_servers=2"])


def _report(path):
    """(steps, {interval: (allocations, in MPI)}, [(interval, [stack lines])])."""
    steps, intervals, stacks = 0, {}, []
    with open(path) as f:
        for line in f:
            words = line.split()
            if words[0] == "steps":
                steps = int(words[1])
            elif words[0] == "interval":
                intervals[int(words[1])] = (int(words[3]), int(words[5]))
            elif words[0] == "stack":
                stacks.append((int(words[1]), []))
            elif stacks:
                stacks[-1][1].append(line.rstrip())
    return steps, intervals, stacks


def _symbolised(lines):
    """hpctrain's frames ("hpctrain(+0x1a2b)") as function names, where addr2line is."""
    binary = os.path.join(ARGS.build, "hpctrain")
    offsets = [m.group(1) for m in (re.search(r"/hpctrain\(\+(0x[0-9a-f]+)\)", x) for x in lines)
               if m]
    if not offsets or not shutil.which("addr2line"):
        return lines
    p = subprocess.run(["addr2line", "-f", "-C", "-e", binary] + offsets, capture_output=True,
                       text=True)
    return lines + p.stdout.splitlines()[::2]


def _counted_run(name, config, ranks, sets, step="control", env=None, data="val.h5"):
    """Trains with the shim on the CPU (`sets` say how) on `data`; returns (steps per epoch,
    [(report path, steps, intervals, stacks)]), one report per rank."""
    shim = os.path.join(ARGS.build, "test-shims", "libht_alloc_shim.so")
    check(os.path.exists(shim), f"{shim} was not built")
    fresh(name)
    base = os.path.join(ARGS.build, "e2e-runs", name + "-alloc")
    for old in glob.glob(base + ".*"):
        os.remove(old)
    rc, out, _ = train(name, ranks, [f"data.train={ARGS.data}/{data}", "data.val=",
                                     "data.test=", f"train.epochs={EPOCHS}"] + sets,
                       config=config, env={"LD_PRELOAD": shim, "HT_ALLOC_REPORT": base,
                                           "HT_ALLOC_STEP": step, **(env or {})})
    check(rc == 0, f"{name}: exit {rc}")
    check(not (env or {}).get("HPCTRAIN_STAGE_CPU") or "(memory staged as on a GPU)" in out,
          f"{name}: the run did not stage its memory")
    m = re.search(r"(\d+) steps/epoch", out)
    check(m is not None, f"{name}: no 'steps/epoch' in the output")
    reports = sorted(glob.glob(base + ".*"))
    check(len(reports) == ranks, f"{name}: {len(reports)} allocation reports for {ranks} ranks")
    if any("checkpoint.every_steps" in s for s in sets):
        check(len(checkpoints(name)) >= 1, f"{name}: no checkpoint was written")
    return int(m.group(1)), [(path,) + _report(path) for path in reports]


def _ours(intervals):
    """{interval: allocations outside MPI} of the intervals that have any."""
    return {i: a - mpi for i, (a, mpi) in intervals.items() if a > mpi}


def _fail_with_stacks(name, path, bad, stacks):
    lines = []
    for interval, frames in stacks:
        if interval in bad:
            lines += [f"stack of an allocation in interval {interval}:"] + _symbolised(frames)
    fail(f"{name}: {path}: the training thread allocated between steps (interval: "
         f"allocations) {bad}\n" + "\n".join(lines))


def case_step_allocates_nothing():
    """Between the end of one training step (its control all-reduce) and the end of the
    next, the training thread of every rank makes no heap allocation (malloc, calloc,
    realloc, the aligned ones; operator new comes through them), in steps that save a
    checkpoint as in the others: hpctrain's ring and MPI_Allreduce, parameter averaging, 16-bit
    precisions with loss scaling and skipped steps, micro-batches, clipping, streamed and
    augmented data, recurrent layers, balance auto; and a GPU's path on the CPU (memory
    staged as on a GPU, the step recorded and replayed as a CUDA graph is) after the steps
    that record. Not counted: the steps that end an epoch
    (metrics rows, rebalancing), other threads (readers, the checkpoint writer), and
    allocations made inside the MPI library or its transports (MPICH's all-reduce, reduce
    and gather allocate their own buffers). The shim must see the epoch ends' allocations,
    so that a shim that counts nothing cannot pass. Strategy async: at most two intervals
    that allocate per segment (one per epoch here; a segment's end may send between its
    allocations), where a deque of tickets allocated every 64 steps and the loader's
    request list grew for its first 64 (10 intervals in 215 sends)."""
    gpu_path = _GPU_PATH + (1 + RECORDED, {"HPCTRAIN_STAGE_CPU": "1", "HPCTRAIN_RECORD_CPU": "1"})
    for name, config, ranks, sets, first, env in [r + (1, None) for r in _RUNS] + [gpu_path]:
        if env is None:
            sets = ["device=cpu"] + sets
        per_epoch, reports = _counted_run(name, config, ranks, sets, env=env)
        if env is not None:
            replayed = summary(name)["cuda_graph_steps"]
            check(replayed and replayed > EPOCHS * per_epoch - 2 * RECORDED,
                  f"{name}: {replayed} steps replayed from the recording")
        epoch_ends = 0
        for path, steps, intervals, stacks in reports:
            check(steps == EPOCHS * per_epoch, f"{name}: {path} saw {steps} steps, expected "
                  f"{EPOCHS * per_epoch}")
            ours = _ours(intervals)
            epoch_ends += sum(1 for i in ours if i % per_epoch == 0)
            bad = {i: n for i, n in ours.items() if i % per_epoch != 0 and i >= first}
            if bad:
                _fail_with_stacks(name, path, bad, stacks)
            print(f"{name}: {path}: {steps} steps, no allocation within a step "
                  f"({sum(a for a, _ in intervals.values())} at epoch ends and in MPI)")
        check(epoch_ends > 0, f"{name}: the shim counted no allocation at any epoch's end "
              "(writing metrics.csv allocates): it is not counting")

    name, config, ranks, sets = _ASYNC
    # 10,000 rows: enough steps per worker for a deque's 64 (the case's docstring).
    per_epoch, reports = _counted_run(name, config, ranks, ["device=cpu"] + sets, step="isend",
                                      data="test.h5")
    # Each batch is pushed to both servers; how the batches divide between the workers is
    # up to their speed.
    sends = sum(steps for _, steps, _, _ in reports)
    check(sends >= 2 * EPOCHS * per_epoch, f"{name}: {sends} sends for {EPOCHS * per_epoch} "
          "batches pushed to 2 servers")
    for path, steps, intervals, stacks in reports:
        ours = _ours(intervals)
        check(ours, f"{name}: {path}: no allocation at any segment's end: the shim is not "
              "counting")
        if len(ours) > 2 * EPOCHS:
            _fail_with_stacks(name, path, ours, stacks)
        print(f"{name}: {path}: {steps} sends, allocations only in {len(ours)} intervals "
              f"(at most two per segment: {2 * EPOCHS})")
