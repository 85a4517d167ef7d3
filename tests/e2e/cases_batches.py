"""End-to-end cases of how a step's samples are shared: micro-batches that add up to one
large batch, a global batch shared by an odd number of ranks, a slowed rank, and the
errors of impossible settings.
"""
import os

from harness import (
    ARGS, check, checkpoints, expect_ok, fresh, h5_values, one_error_line, run_dir, train)


def case_accumulate_matches_large_batch():
    """train.accumulate_steps 4 with batch 32 takes the same samples as batch 128 and sums
    the same gradients: after 20 steps the parameters agree within float32 rounding."""
    common = ["run.deterministic=true", "train.epochs=1", f"data.train={ARGS.data}/test.h5",
              "data.val=", "data.test=", "checkpoint.every_steps=20", "checkpoint.keep=10"]
    fresh("accum_128")
    fresh("accum_4x32")
    expect_ok("accum_128", 1, common + ["train.batch_size=128"])
    s = expect_ok("accum_4x32", 1, common + ["train.batch_size=32", "train.accumulate_steps=4"])
    check(s["global_batch"] == 128, f"global batch {s['global_batch']}, expected 128")
    ckpt = "checkpoints/ckpt-000000000020.h5"
    n = 784 * 192 + 192 + 192 * 10 + 10
    a = h5_values(os.path.join(run_dir("accum_128"), ckpt), "/arrays/model/params", 0, n)
    b = h5_values(os.path.join(run_dir("accum_4x32"), ckpt), "/arrays/model/params", 0, n)
    worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
    moved = max(abs(x - y) for x, y in zip(a, h5_values(
        os.path.join(run_dir("accum_128"), "checkpoints/ckpt-000000000040.h5"),
        "/arrays/model/params", 0, n)))
    print(f"largest difference after 20 steps: {worst:.3g} (one step moves up to {moved:.3g})")
    check(worst < 1e-5, f"parameters differ by {worst:.3g} after 20 steps")
    check(moved > 1e-3, "the parameters did not move between checkpoints")


def case_global_batch_three_ranks():
    """train.batch_size_is global shares 128 samples over 3 ranks (43, 43, 42); a slowed
    rank only takes longer; impossible settings are exit 2 naming the key."""
    fresh("global3")
    s = expect_ok("global3", 3, ["train.batch_size=128", "train.batch_size_is=global",
                                 "train.epochs=1", "optimizer.lr_scaling=linear",
                                 "debug.slow_rank.rank=2", "debug.slow_rank.factor=2"])
    check(s["global_batch"] == 128 and s["world_size"] == 3, "global batch / world size wrong")
    check(s["test_accuracy"] >= 0.80, f"test accuracy {s['test_accuracy']:.4f} < 0.80")
    rc, _, err = train("global_bad", 3, ["train.batch_size=2", "train.batch_size_is=global"])
    check(rc == 2, f"a global batch of 2 over 3 ranks: exit {rc}")
    one_error_line(err, "train.batch_size: 2 is smaller than the 3 ranks")
    rc, _, err = train("slow_bad", 2, ["debug.slow_rank.rank=5", "debug.slow_rank.factor=3"])
    check(rc == 2, f"slowing rank 5 of 2: exit {rc}")
    one_error_line(err, "debug.slow_rank.rank: 5 is not a rank")


def case_balance_auto_uneven_ranks():
    """distributed.balance auto with rank 1 slowed 5x: the fast rank takes the larger batch
    after the first epoch, the plan is kept in checkpoints and a resumed run starts from it;
    a weight for a device no rank has, and cpu_ranks naming no rank, are exit 2; a rank of
    cpu_ranks runs with layout nhwc (the GPU ranks' layout)."""
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "train.epochs=2",
            "distributed.balance=auto", "debug.slow_rank.rank=1", "debug.slow_rank.factor=5",
            "checkpoint.at_epoch_end=true"]
    fresh("balance_auto")
    s = expect_ok("balance_auto", 2, sets)
    b = s["rank_batches"]
    check(len(b) == 2 and sum(b) == 128 and b[0] > b[1] >= 16,
          f"rank batches {b}: the fast rank 0 should take more of the 128")
    check(s["test_accuracy"] >= 0.78, f"test accuracy {s['test_accuracy']:.4f} < 0.78")
    kept = h5_values(checkpoints("balance_auto")[-1], "/arrays/train/batches", 0, 2)
    check(kept == [float(x) for x in b], f"checkpoint keeps batches {kept}, the run had {b}")
    rc, out, _ = train("balance_auto", 2, sets[:2] + ["train.epochs=3"] + sets[3:],
                       resume="auto")
    check(rc == 0 and "resuming at step 0 of epoch 3" in out, f"resumed run: exit {rc}")
    # One step per epoch once the last is given up leaves none to time: refused (it never
    # balanced, saying nothing).
    rc, _, err = train("balance_bad", 2, [f"data.train={ARGS.data}/test.h5",
                                          "distributed.balance=auto", "train.batch_size=2500"])
    check(rc == 2, f"balance auto with one step per epoch: exit {rc}")
    one_error_line(err, "distributed.balance: auto times", "leaves one step per epoch")
    rc, _, err = train("balance_bad", 2, ["distributed.balance=weights",
                                          "distributed.cuda_weight=12", "device=cpu"])
    check(rc == 2, f"a GPU weight on CPU ranks: exit {rc}")
    one_error_line(err, "distributed.cuda_weight: 12 is given, but no rank computes on cuda")
    rc, _, err = train("cpu_ranks_bad", 2, ["cpu_ranks=[0, 2]"])
    check(rc == 2, f"cpu_ranks naming rank 2 of 2: exit {rc}")
    one_error_line(err, "cpu_ranks: 2 is not a rank of the 2 of this job")
    # layout nhwc is the GPU ranks' layout: a rank of cpu_ranks computes NCHW (it was refused
    # as if no GPU were visible), as its rnn steps.
    fresh("cpu_ranks_nhwc")
    expect_ok("cpu_ranks_nhwc", 1, ["cpu_ranks=[0]", "precision=bf16", "layout=nhwc",
                                    f"data.train={ARGS.data}/val.h5", "data.val=", "data.test=",
                                    "train.epochs=1"])
