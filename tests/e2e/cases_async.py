"""End-to-end cases of strategy async (parameter servers): one worker is plain SGD, a
deterministic run is reproducible and survives kill -9 of a worker or a server, two
servers share the parameters, and impossible settings are exit 2 naming the key.
"""
import hashlib
import os
import random
import shutil
import signal
import subprocess
import time

import h5py

from harness import (ARGS, check, check_rows_match, checkpoints, expect_ok, fail, fresh, kill_and_resume,
                     metrics_rows, mpi_rank, newest_step, one_error_line, rank_pids, run_dir,
                     session, train, train_cmd)

ASYNC = ["distributed.strategy=async"]


def small():
    """Two epochs of the 10,000 test images, without evaluation."""
    return [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=2"]


def case_async_one_worker_is_sgd():
    """One worker and one server train exactly like one rank alone (the same batches in the
    same order, each push applied before the next pull): the same parameters bit for bit,
    with and without run.deterministic, and with every batch's rows read from the file
    (data.cache_mb 0) instead of from memory. One thread per rank in both: results are
    reproducible for a fixed thread count (docs/contracts.md), and one rank alone would
    otherwise get both cores where the worker gets one (on some CPUs the sums then differ
    in the last bit)."""
    sets = small() + ["run.deterministic=true", "run.threads=1"]
    fresh("async_one_rank")
    want = expect_ok("async_one_rank", 1, sets)["params_sha256"]
    for det, cache in (("true", 8192), ("false", 0)):
        fresh(f"async_1w_{det}")
        s = expect_ok(f"async_1w_{det}", 2, small() + ASYNC + [f"run.deterministic={det}",
                                                                f"data.cache_mb={cache}",
                                                                "run.threads=1"])
        check(s["strategy"] == "async" and s["async"]["workers"] == 1, "not 1 async worker")
        check(s["params_sha256"] == want, f"deterministic={det}: 1 worker differs from 1 rank")
        hist = s["async"]["staleness_per_epoch"]
        check(len(hist) == 2 and all(h[0] == 156 and sum(h) == 156 for h in hist),
              f"one worker's 156 pushes per epoch must all be fresh: {hist}")


def case_async_deterministic_kill9():
    """run.deterministic with 2 workers and 1 server (pull_every 2): two runs give the same
    parameters, and so do runs killed with kill -9 (a worker, then the server) at random
    steps and resumed with --resume auto."""
    sets = small() + ASYNC + ["run.deterministic=true", "distributed.pull_every=2",
                            "checkpoint.every_steps=20"]
    fresh("async_det_a")
    a = expect_ok("async_det_a", 3, sets)
    fresh("async_det_b")
    b = expect_ok("async_det_b", 3, sets)
    check(a["params_sha256"] == b["params_sha256"], "two deterministic async runs differ")
    stale = a["async"]["staleness_per_epoch"]
    check(all(sum(h) == 156 for h in stale), f"pushes per epoch: {stale}")
    check(any(h[1] > 0 for h in stale), f"no push was stale with 2 workers: {stale}")
    rng = random.Random(7)
    for victim in (0, 2):  # a worker, the server
        target = rng.randrange(60, 250)
        s = kill_and_resume(f"async_kill_{victim}", sets,
                            lambda n, t=target, v=victim: v if newest_step(n) >= t else None,
                            ranks=3)
        check(s["params_sha256"] == a["params_sha256"],
              f"rank {victim} killed near step {target}: parameters differ after resume")
        check_rows_match(f"async_kill_{victim}", "async_det_a")


def case_async_checkpoints_hold_their_step():
    """A model whose checkpoint snapshot is copied by the writer thread (parameters and
    velocity above 8 MiB): each checkpoint of a deterministic async run holds the state of
    its step, so two identical runs write identical checkpoints (the next segment's pulls
    and pushes wait for the copy)."""
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=1",
            "run.deterministic=true", "model.hidden=[1024,1024]", "checkpoint.every_steps=10",
            "checkpoint.keep=100", "run.threads=1"] + ASYNC
    contents = []
    for name in ("async_big_a", "async_big_b"):
        fresh(name)
        expect_ok(name, 3, sets)
        digests = {}
        for path in checkpoints(name):
            with h5py.File(path, "r") as f:
                digests[os.path.basename(path)] = [
                    hashlib.sha256(f[a][...].tobytes()).hexdigest()
                    for a in ("arrays/model/params", "arrays/optimizer/velocity")]
        contents.append(digests)
    check(len(contents[0]) >= 7, f"checkpoints: {sorted(contents[0])}")
    differ = sorted(c for c in contents[0] if contents[0][c] != contents[1].get(c))
    check(not differ, f"checkpoints of two identical runs differ: {differ}")


def case_async_time_checkpoints_count_batches_once():
    """Checkpoints by time end segments in the middle of an epoch. With run.deterministic,
    a batch a worker trained after the segment's end was decided is not taken, and is
    trained again in the next segment: each epoch's loss and sample count still hold
    every batch once (samples_per_second x time_train_s is the epoch's 156 x 64 samples).
    Without run.deterministic, every batch handed out is taken, with the same count. One deterministic worker trains
    the same with checkpoints by time as without."""
    for det in ("true", "false"):
        name = f"async_time_ckpt_{det}"
        fresh(name)
        # worker 1 slowed: an epoch lasts a few seconds, several checkpoints fall in each
        expect_ok(name, 3, small() + ASYNC + [
            f"run.deterministic={det}", "checkpoint.every_seconds=0.1", "checkpoint.keep=1000",
            "debug.slow_rank.rank=1", "debug.slow_rank.factor=10"])
        steps = sorted(int(os.path.basename(p)[5:-3]) for p in checkpoints(name))
        mid = [x for x in steps if x % 156]
        check(len(mid) >= 3, f"deterministic={det}: checkpoints by time at steps {steps}")
        for row in metrics_rows(name):
            n = float(row["samples_per_second"]) * float(row["time_train_s"])
            check(abs(n - 156 * 64) < 0.5, f"deterministic={det}: epoch {row['epoch']} counted "
                  f"{n:.1f} samples, expected {156 * 64}")
    # One deterministic worker gives back the batches it had asked for ahead at each
    # segment's end, and asks for them again in the next (its reader once ran out of slots:
    # "prefetch queue read past its last batch"); it trains what it trains without them.
    runs = {}
    for name, extra in (("async_time_1w", ["checkpoint.every_seconds=0.1"]), ("async_1w", [])):
        fresh(name)
        runs[name] = expect_ok(name, 2, small() + ASYNC + [
            "run.deterministic=true", "checkpoint.keep=1000", "debug.slow_rank.rank=0",
            "debug.slow_rank.factor=10"] + extra)["params_sha256"]
    mid = [int(os.path.basename(p)[5:-3]) for p in checkpoints("async_time_1w")]
    check(len([x for x in mid if x % 156]) >= 3, f"one worker: checkpoints by time at {mid}")
    check(runs["async_time_1w"] == runs["async_1w"],
          "one deterministic worker: checkpoints by time changed the parameters")


def case_async_signal_stop_resume():
    """SIGTERM to one worker in the middle of an epoch: every worker stops taking batches,
    the servers' model is checkpointed at the cursor reached, the job exits 75; --resume
    auto continues from that step and finishes."""
    fresh("async_sig")
    sets = small() + ASYNC + ["train.epochs=3"]
    # worker 1 slowed: the epochs after the first last long enough for the signal
    p = subprocess.Popen(train_cmd("async_sig", 3, sets + ["debug.slow_rank.rank=1",
                                                           "debug.slow_rank.factor=3"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if " epoch 1/" in line:
            break
    pids = {mpi_rank(pid): pid for pid in rank_pids(run_dir("async_sig"))}
    os.kill(pids[1], signal.SIGTERM)
    out = p.stdout.read()
    p.wait(timeout=120)
    print(out)
    check(p.returncode == 75, f"exit {p.returncode} after SIGTERM to a worker, expected 75")
    stopped_at = newest_step("async_sig")
    check(156 <= stopped_at < 468, f"no checkpoint of the stop in epochs 2-3 ({stopped_at})")
    # A step is one worker's batch of 64 (156 per epoch): the checkpoint says so, and a copy
    # resumed by all-reduce on 2 ranks (78 steps of 128) goes on after the samples trained
    # (it took 3 x 64, counting the server, and skipped two thirds of the epoch's rest).
    with h5py.File(checkpoints("async_sig")[-1], "r") as f:
        check(f.attrs["global_batch"] == 64, f"global_batch {f.attrs['global_batch']}")
    fresh("async_sig_to_ring")
    shutil.copytree(os.path.join(run_dir("async_sig"), "checkpoints"),
                    os.path.join(run_dir("async_sig_to_ring"), "checkpoints"))
    rc, out, err = train("async_sig_to_ring", 2, small() + ["train.epochs=3"])
    step = min(-(-(stopped_at % 156) * 64 // 128), 77)  # ceil, and not past the epoch
    want = f"resuming at step {step} of epoch {stopped_at // 156 + 1}"
    check(rc == 0 and want in out, f"the async checkpoint resumed by all-reduce: exit {rc}, "
          f"expected '{want}': {out}")
    s = expect_ok("async_sig", 3, sets)
    check(s["resumed_from"] == stopped_at, f"resumed_from {s['resumed_from']} != {stopped_at}")
    check(s["epochs_completed"] == 3, f"epochs completed {s['epochs_completed']}")
    # SIGTERM to the server, which trains no batch: the signal waited for the segment's end,
    # the end of epoch 2 (step 312); a worker now takes it up from the server's next reply.
    for det in ("false", "true"):
        name = f"async_sig_server_{det}"
        fresh(name)
        p = subprocess.Popen(train_cmd(name, 3, sets + ["debug.slow_rank.rank=1",
                                                        "debug.slow_rank.factor=3",
                                                        f"run.deterministic={det}"]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            if " epoch 1/" in line:
                break
        os.kill({mpi_rank(pid): pid for pid in rank_pids(run_dir(name))}[2], signal.SIGTERM)
        out = p.stdout.read()
        p.wait(timeout=120)
        check(p.returncode == 75, f"exit {p.returncode} after SIGTERM to the server ({det})")
        stopped_at = newest_step(name)
        check(156 <= stopped_at < 250, f"deterministic {det}: stopped at step {stopped_at}, "
              f"not soon after the signal at 156:\n{out}")


def case_async_two_servers():
    """A checkpoint of 2 workers and 1 server resumes on 2 workers and 2 servers (the servers'
    slices and optimizer state come from the one stored copy); each server applies pushes
    and reports its load; the summary compares bytes moved with all-reduce and reports no
    step phases (asked for, but workers do not step together); it learns: each server's
    slice of the parameters moves after the resume (the checkpoint alone already scores
    above the accuracy threshold)."""
    sets = small() + ASYNC + ["distributed.pull_every=2", "optimizer.name=adamw",
                              "optimizer.lr=0.002", "checkpoint.at_epoch_end=true",
                              f"data.test={ARGS.data}/val.h5"]
    fresh("async_2s")
    expect_ok("async_2s", 3, sets + ["train.epochs=1"])
    with h5py.File(checkpoints("async_2s")[-1], "r") as f:
        before = f["/arrays/model/params"][:]
    s = expect_ok("async_2s", 4, sets + ["distributed.parameter_servers=2",
                                          "train.step_timing=true"])
    with h5py.File(checkpoints("async_2s")[-1], "r") as f:
        after = f["/arrays/model/params"][:]
    # The two servers hold the first and the second half of the arena (equal in bytes).
    n = len(after)
    for part, lo, hi in (("first", 0, n * 2 // 5), ("second", n * 3 // 5, n)):
        moved = float(abs(after[lo:hi] - before[lo:hi]).max())
        check(moved > 1e-4, f"the {part} server's slice did not move after the resume "
              f"(largest change {moved:.3g})")
    check(s["resumed_from"] == 156, f"resumed from {s['resumed_from']}, not epoch 1's end")
    check(s["step_phases_s"] is None and s["step_phase_fractions"] is None
          and s["cpu_load_per_rank"] is None,
          "step phases or CPU load reported under async, whose ranks do not step together")
    a = s["async"]
    check(a["workers"] == 2 and a["servers"] == 2, f"layout {a['workers']}+{a['servers']}")
    check([r["rank"] for r in a["server_reports"]] == [2, 3], "server ranks are not 2, 3")
    check(s["rank_batches"][2:] == [0, 0] and min(s["rank_batches"][:2]) > 0,
          f"rank_batches {s['rank_batches']}: the servers train no batch")
    check(all(r["pushes_per_second"] > 0 and r["pulls_per_second"] > 0
              for r in a["server_reports"]), f"a server did no work: {a['server_reports']}")
    check(a["bytes_per_sample"] > 0 and a["allreduce_bytes_per_sample"] > 0, "no byte counts")
    check(s["test_accuracy"] >= 0.75, f"test accuracy {s['test_accuracy']:.4f} < 0.75")
    # Killed in its test phase (no summary.json beside the final checkpoint): the rerun trains
    # no epoch and has no server figures (it failed at the servers' totals, exit 1).
    os.remove(os.path.join(run_dir("async_2s"), "summary.json"))
    t = expect_ok("async_2s", 4, sets + ["distributed.parameter_servers=2"])
    check(t["test_accuracy"] == s["test_accuracy"] and t["params_sha256"] == s["params_sha256"],
          "the test phase alone differs from the run's")
    a = t["async"]
    check(a["server_reports"] == [] and a["staleness_per_epoch"] == []
          and a["bytes_per_sample"] is None and a["servers"] == 2,
          f"server figures of a run that trained no epoch: {a}")


def case_async_bad_settings():
    """Servers >= ranks, a negative staleness, fp16, balance, accumulation and async keys
    under another strategy are exit 2 with one line naming the key; a worker that messages
    rarely is not taken for a hung one."""
    cases = [
        (2, ASYNC + ["distributed.parameter_servers=2"], "distributed.parameter_servers"),
        (3, ASYNC + ["distributed.max_staleness=-1"], "distributed.max_staleness"),
        (3, ASYNC + ["precision=fp16"], "precision"),
        (3, ASYNC + ["distributed.balance=auto"], "distributed.balance"),
        (3, ASYNC + ["train.accumulate_steps=2"], "train.accumulate_steps"),
        (3, ASYNC + ["train.batch_size_is=global"], "train.batch_size_is"),
        (2, ["distributed.push_every=2"], "distributed.push_every"),
    ]
    for i, (ranks, sets, key) in enumerate(cases):
        rc, _, err = train(f"async_bad_{i}", ranks, sets)
        check(rc == 2, f"{sets}: exit {rc}, expected 2")
        one_error_line(err, key)
    # Not bad: a worker that messages every 40 steps, each longer than timeout_seconds / 40
    # (slowed), is no hung peer: the server's watchdog allows 40 timeouts between messages.
    # Nor is the largest max_staleness, "never drop" (its histogram once had a bin per
    # possible staleness: 16 GiB): staleness 0 to 63, 64 or more, and dropped.
    fresh("async_rare")
    s = expect_ok("async_rare", 2, ASYNC + [
        f"data.train={ARGS.data}/val.h5", "data.val=", "data.test=", "train.epochs=1",
        "distributed.push_every=40", "distributed.pull_every=40",
        "distributed.max_staleness=2147483647",
        "distributed.timeout_seconds=1", "debug.slow_rank.rank=0", "debug.slow_rank.factor=60"])
    hist = s["async"]["staleness_per_epoch"]
    check(len(hist) == 1 and len(hist[0]) == 66 and hist[0][0] == sum(hist[0]) > 0,
          f"one worker's pushes by staleness: {hist}")


def case_async_hung_worker():
    """A worker that stops answering (SIGSTOP) in the second epoch ends the job through the
    watchdog of a rank waiting at the epoch's end: the other worker has trained the rest of
    the epoch's batches, the server waits for the stopped worker's last message. The message
    names where training had got to, not the step the segment (the epoch) began at. The
    55,000 training images make an epoch of 859 batches, some seconds long."""
    fresh("async_hung")
    p = session(train_cmd("async_hung", 3, ASYNC + [
        f"data.train={ARGS.data}/train.h5", "data.val=", "data.test=", "train.epochs=2",
        "distributed.timeout_seconds=10", "checkpoint.at_epoch_end=false"]))
    lines = []
    for line in p.stdout:  # wait until the first epoch has ended
        lines.append(line)
        if " epoch 1/2  train loss" in line:
            break
    ranks = {mpi_rank(pid): pid for pid in rank_pids(run_dir("async_hung"))}
    check(set(ranks) == {0, 1, 2}, f"expected ranks 0 to 2, found {ranks}:\n" + "".join(lines))
    time.sleep(0.5)
    os.kill(ranks[1], signal.SIGSTOP)
    try:
        out, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        fail("job still running 120 s after a worker hung")
    finally:
        for pid in ranks.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    out = "".join(lines) + out
    check(p.returncode != 0, f"exit {p.returncode} with a hung worker")
    found = [l for l in out.splitlines() if "has not finished after 10 s" in l]
    check(len(found) >= 1 and "asynchronous" in found[0], f"no watchdog message: {out}")
    step = int(found[0].split(" at step ")[1].split()[0])
    # The second epoch is the segment [859, 1718).
    check(859 < step <= 1718, f"the watchdog names step {step}, not where training got to: "
          + found[0])


def case_async_progress_counts_the_epoch():
    """The progress line's samples/s counts the epoch's batches since its start, over the
    segments that checkpoints by step end (it once counted the current segment's batches
    over the whole epoch's time, a rate falling with each segment)."""
    fresh("async_progress")
    rc, out, err = train("async_progress", 3, small() + ASYNC + [
        "checkpoint.every_steps=20", "checkpoint.keep=1", "train.progress_seconds=0.02"])
    check(rc == 0, f"exit {rc}: {err}")
    rates = {row["epoch"]: float(row["samples_per_second"])
             for row in metrics_rows("async_progress")}
    lines = [l for l in out.splitlines() if "samples/s  eta" in l]
    late = [l for l in lines if int(l.split(" step ")[1].split("/")[0]) > 60]
    check(late, f"no progress line after step 60: {lines}")
    for line in late:
        epoch = line.split(" epoch ")[1].split("/")[0]
        rate = float(line.split("samples/s")[0].split()[-1])
        check(rates[epoch] / 3 < rate < rates[epoch] * 3,
              f"progress at {rate:.0f} samples/s in an epoch of {rates[epoch]:.0f}: {line}")


def case_async_stop_on_a_server():
    """A stop signal that reaches a parameter server alone (workers that never pull get no
    reply to carry it) stops the workers at their next batch: the run stops inside the
    epoch, not at its end (it once waited for the segment's end)."""
    fresh("async_server_stop")
    p = session(train_cmd("async_server_stop", 3, ASYNC + [
        f"data.train={ARGS.data}/train.h5", "data.val=", "data.test=", "train.epochs=30",
        "distributed.pull_every=100000", "distributed.max_staleness=100000",
        "checkpoint.at_epoch_end=false"]))
    lines = []
    for line in p.stdout:  # the first epoch (859 batches) has ended
        lines.append(line)
        if " epoch 1/30  train loss" in line:
            break
    ranks = {mpi_rank(pid): pid for pid in rank_pids(run_dir("async_server_stop"))}
    check(set(ranks) == {0, 1, 2}, f"expected ranks 0 to 2, found {ranks}:\n" + "".join(lines))
    time.sleep(0.2)  # into the second epoch, some way before its end
    os.kill(ranks[2], signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        fail("job still running 120 s after its server got SIGTERM")
    out = "".join(lines) + out
    check(p.returncode == 75, f"exit {p.returncode}, expected 75:\n{out}")
    stopped = [l for l in out.splitlines() if "stopped by a signal at step" in l]
    check(stopped, f"no stop line:\n{out}")
    step = int(stopped[0].split(" at step ")[1].split()[0])
    check(step > 859 and step % 859, f"stopped at step {step}, an epoch's end: " + stopped[0])
