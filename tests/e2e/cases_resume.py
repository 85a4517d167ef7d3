"""End-to-end cases of checkpoints: kill -9 and signals in the middle of a run, corrupt
checkpoints, other world sizes, refusals, a hung rank, Adam's state.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import time

from harness import (
    ARGS, DET, FakeRapl, check, check_rows_match, checkpoints, expect_ok, fail, fresh, h5_values,
    hpctrain, kill_and_resume, metrics_rows, newest_step, one_error_line, rank_pids, run_dir, session, train,
    train_cmd, uninterrupted_sha)


def case_kill9_resume_bit_identical():
    """kill -9 of a rank at random steps, and once while a checkpoint is being
    written (held in its fsync, so the kill cannot come after its commit), then --resume
    auto: the final parameters equal an uninterrupted run's, and the killed write's
    temporary file is gone."""
    want = uninterrupted_sha("det_full_kill9")
    rng = random.Random(1234)
    total = 4 * 429
    for i in range(3):
        target = rng.randrange(60, total - 200)
        victim = rng.randrange(2)
        s = kill_and_resume(f"kill9_{i}", DET + ["checkpoint.every_steps=40"],
                            lambda n: victim if newest_step(n) >= target else None)
        check(s["params_sha256"] == want, f"kill at ~step {target}: parameters differ")
        check(s["resumed_from"] is not None, "resumed_from not recorded")
        check_rows_match(f"kill9_{i}", "det_full_kill9")

    # Rank 0 writes checkpoints: killed while the one of step 105 is half written, held in
    # its file's fsync (fsync_shim.c), after the manifest recorded it.
    held = "ckpt-000000000105.h5.tmp"

    def during_write(n):
        return 0 if os.path.exists(os.path.join(run_dir(n), "checkpoints", held)) else None
    shim = os.path.join(ARGS.build, "test-shims", "libht_fsync_shim.so")
    s = kill_and_resume("kill9_write", DET + ["checkpoint.every_steps=5"], during_write,
                        env={"LD_PRELOAD": shim, "HT_STALL_FSYNC_FILE": held})
    check(s["resumed_from"] == 100, f"resumed from step {s['resumed_from']}, not 100 (the "
          "newest checkpoint committed before the one killed in its write)")
    check(s["params_sha256"] == want, "kill during a checkpoint write: parameters differ")
    check(not os.path.exists(os.path.join(run_dir("kill9_write"), "checkpoints", held)),
          f"the resumed run left the killed write's {held}")


def case_adam():
    """AdamW trains the MLP to the target, with its moments and step count in the
    checkpoints; kill -9 and resume reproduce the uninterrupted run bit for bit, also with
    per-rank moments (strategy average); an SGD checkpoint goes on under Adam, warning that
    Adam's state starts from zero."""
    adam = ["optimizer.name=adamw", "optimizer.lr=0.002", "optimizer.weight_decay=0.01"]
    fresh("adam")
    s = expect_ok("adam", 2, adam + ["checkpoint.every_steps=1000"])
    check(s["test_accuracy"] >= 0.86, f"AdamW test accuracy {s['test_accuracy']:.4f} < 0.86")
    ckpt = [c for c in checkpoints("adam") if c.endswith("000001000.h5")]
    check(len(ckpt) == 1, f"no checkpoint of step 1000: {checkpoints('adam')}")
    check(h5_values(ckpt[0], "/arrays/optimizer/adam_step", 0, 1) == [1000.0],
          "the checkpoint's Adam step count is not 1000")
    check(any(v != 0 for v in h5_values(ckpt[0], "/arrays/optimizer/adam_v", 0, 2000)),
          "the checkpoint's second moments are all zero")

    for label, extra in (("allreduce", []), ("average", ["distributed.strategy=average"])):
        sets = DET + adam + extra + ["checkpoint.every_steps=40"]
        full = f"adam_{label}_full"
        fresh(full)
        want = expect_ok(full, 2, sets)["params_sha256"]
        k = kill_and_resume(f"adam_{label}_kill", sets,
                            lambda n: 1 if newest_step(n) >= 600 else None)
        check(k["params_sha256"] == want, f"adam {label}: resumed parameters differ")

    # The per-rank moments of strategy average, resumed on 3 ranks under allreduce: every
    # rank starts from the ranks' average, with no state missing.
    fresh("adam_average_to_3")
    shutil.copytree(os.path.join(run_dir("adam_average_full"), "checkpoints"),
                    os.path.join(run_dir("adam_average_to_3"), "checkpoints"))
    rc, out, err = train("adam_average_to_3", 3, DET + adam + ["train.epochs=5"])
    check(rc == 0 and "resuming at step 0 of epoch 5" in out, f"average -> 3 ranks: exit {rc}")
    check("checkpoint has no" not in out + err, "average -> 3 ranks: Adam state missing")

    # SGD's last checkpoint, resumed with Adam: the parameters carry over, Adam's state
    # starts from zero, with a warning per array.
    fresh("sgd_base")
    expect_ok("sgd_base", 2, DET + ["train.epochs=1", "checkpoint.every_steps=1000"])
    fresh("sgd_to_adam")
    rc, out, err = train("sgd_to_adam", 2, DET + adam + ["train.epochs=2"],
                         resume=checkpoints("sgd_base")[-1])
    check(rc == 0 and "resuming at step 0 of epoch 2" in out, f"sgd -> adam resume: exit {rc}")
    check("checkpoint has no optimizer/adam_m" in out + err, "sgd -> adam: no warning")


def case_signal_stop_resume():
    """SIGINT (Ctrl-C) to mpiexec, which forwards it: the ranks checkpoint and exit 75;
    resuming finishes with the uninterrupted parameters (SIGUSR1 to mpiexec: case
    rerun_finished_and_stopped). Then SIGTERM straight to one rank (as Slurm sends
    at a time limit): the ranks agree, checkpoint and exit 75."""
    want = uninterrupted_sha("det_full_signal")
    fresh("sigstop")
    p = session(train_cmd("sigstop", 2, DET + ["checkpoint.every_steps=1000"]))
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(run_dir("sigstop"), "metrics.csv")):
        check(time.time() < deadline and p.poll() is None, "training did not start")
        time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    print(out)
    # Every rank exits 75, but MPICH's mpiexec (hydra 4.0.2) sometimes reports 0
    # after forwarding a signal; the STOPPED marker is the reliable record.
    marker = os.path.join(run_dir("sigstop"), "STOPPED")
    check(p.returncode in (0, 75) and os.path.exists(marker),
          f"exit {p.returncode} after SIGINT and no STOPPED marker")
    check("stopped by a signal" in out, "no stop message")
    stopped_at = newest_step("sigstop")
    check(stopped_at > 0 and stopped_at % 1000 != 0, f"no signal checkpoint ({stopped_at})")
    s = expect_ok("sigstop", 2, DET + ["checkpoint.every_steps=1000"])  # --resume auto default
    check(not os.path.exists(marker), "STOPPED marker left after the resumed run")
    check(s["resumed_from"] == stopped_at, f"resumed_from {s['resumed_from']} != {stopped_at}")
    check(s["params_sha256"] == want, "resumed parameters differ from the uninterrupted run")
    check_rows_match("sigstop", "det_full_signal")

    fresh("sigterm")
    p = session(train_cmd("sigterm", 2, DET))
    for line in p.stdout:
        if " epoch 1/" in line:
            break
    os.kill(rank_pids(run_dir("sigterm"))[1], signal.SIGTERM)
    out = p.stdout.read()
    p.wait(timeout=120)
    print(out)
    check(p.returncode == 75, f"exit {p.returncode} after SIGTERM to a rank, expected 75")
    check(newest_step("sigterm") > 429, "no checkpoint after SIGTERM")


def case_signal_during_validation():
    """SIGINT to mpiexec during an epoch's validation. With train.stop_validation_seconds 0
    the pass ends at the next batch: the epoch's row has no validation figures, and the
    ranks commit a checkpoint of the epoch's end and exit 75 without training a step of the
    next epoch; the resumed run trains the epochs left. With a limit longer than the pass,
    the pass is finished, its figures kept, and the ranks stop at the epoch's end too."""
    # A small training set and a large validation set: the pass takes seconds.
    sets = [f"data.train={ARGS.data}/val.h5", f"data.val={ARGS.data}/train.h5", "data.test=",
            "train.epochs=3", "model.hidden=[2048,2048]", "train.progress_seconds=0.2"]

    def stop_in_validation(name, limit):
        fresh(name)
        p = session(train_cmd(name, 2, sets + [f"train.stop_validation_seconds={limit}"]))
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "  validation  batch " in line:
                p.send_signal(signal.SIGINT)
                break
        out = "".join(lines) + p.communicate(timeout=120)[0]
        print(out)
        steps = int(re.search(r"(\d+) steps/epoch", out).group(1))
        check(p.returncode in (0, 75) and os.path.exists(os.path.join(run_dir(name), "STOPPED")),
              f"{name}: exit {p.returncode} after SIGINT during validation and no STOPPED")
        check(newest_step(name) == steps, f"{name}: stop checkpoint at step "
              f"{newest_step(name)}, not at the end of epoch 1 (step {steps})")
        rows = metrics_rows(name)
        check([r["epoch"] for r in rows] == ["1"], f"{name}: metrics.csv after the stop: {rows}")
        return out, rows[0], steps

    out, row, steps = stop_in_validation("sigval_cut", 0)
    check("validation of epoch 1 cut short by a stop signal" in out and row["val_loss"] == ""
          and float(row["time_val_s"]) == 0, f"validation not cut short: {row}")
    s = expect_ok("sigval_cut", 2, sets + ["train.stop_validation_seconds=0"])
    check(s["resumed_from"] == steps and s["epochs_completed"] == 3, f"resumed run: {s}")
    rows = metrics_rows("sigval_cut")
    check([r["val_loss"] != "" for r in rows] == [False, True, True],
          f"validation figures per epoch after the resume: {rows}")

    out, row, _ = stop_in_validation("sigval_finished", 1000)
    check("cut short" not in out and row["val_loss"] != "",
          f"a pass shorter than the limit was not finished: {row}")


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def case_corrupt_checkpoints():
    fresh("corrupt")
    expect_ok("corrupt", 2, ["train.epochs=1", "checkpoint.every_steps=100",
                             "checkpoint.keep=10", "data.val=", "data.test="])
    files = checkpoints("corrupt")
    check(len(files) == 5, f"expected 5 checkpoints, got {files}")
    newest, second, third = files[-1], files[-2], files[-3]
    flip_byte(newest, os.path.getsize(newest) // 2)
    with open(second, "r+b") as f:
        f.truncate(os.path.getsize(second) // 2)
    for bad in (newest, second):
        rc, _, err = train("corrupt", 2, ["train.epochs=2", "data.val=", "data.test="],
                           resume=bad)
        check(rc == 2, f"--resume {bad}: exit {rc}, expected 2")
        one_error_line(err, bad)
        i = subprocess.run([hpctrain(), "inspect", bad], capture_output=True, text=True)
        check(i.returncode == 2, f"inspect of corrupt {bad}: exit {i.returncode}")
    # Recognised as a checkpoint by its checksum footer under any name, damaged or not.
    renamed = os.path.join(run_dir("corrupt"), "renamed.h5")
    shutil.copyfile(newest, renamed)
    i = subprocess.run([hpctrain(), "inspect", renamed], capture_output=True, text=True)
    check(i.returncode == 2 and "whole-file checksum does not match" in i.stderr,
          f"inspect of a damaged checkpoint named renamed.h5: exit {i.returncode}, {i.stderr}")
    rc, out, err = train("corrupt", 2, ["train.epochs=2", "data.val=", "data.test="],
                         resume="auto")
    check(rc == 0, f"--resume auto with corrupt newest checkpoints: exit {rc}")
    check(err.count("skipping it for an older checkpoint") == 2, "corrupt files not reported")
    check("loaded checkpoint " + third in out, "did not fall back to the newest valid checkpoint")


def case_resume_other_world_sizes():
    """A 2-rank run's checkpoint resumed on 1 and on 3 ranks trains on (its parameters move,
    with a learning rate above 0 in epochs 3 to 5: the checkpoint alone already scores above
    the target) and reaches the target."""
    fresh("ws2")
    expect_ok("ws2", 2, ["train.epochs=2", "checkpoint.every_steps=200"])
    first = 20000  # of the parameters (the first layer's)
    resumed = h5_values(checkpoints("ws2")[-1], "/arrays/model/params", 0, first)
    for ranks in (1, 3):
        name = f"ws2_to_{ranks}"
        fresh(name)
        shutil.copytree(os.path.join(run_dir("ws2"), "checkpoints"),
                        os.path.join(run_dir(name), "checkpoints"))
        s = expect_ok(name, ranks, ["train.epochs=5", "checkpoint.every_steps=200"])
        check(s["world_size"] == ranks and s["resumed_from"] == 858, f"{name}: {s}")
        check(s["epochs_completed"] == 5, f"{name}: epochs {s['epochs_completed']}")
        check(s["test_accuracy"] >= 0.85, f"{name}: test accuracy {s['test_accuracy']} < 0.85")
        rows = metrics_rows(name)
        check([int(r["epoch"]) for r in rows] == [3, 4, 5] and
              all(float(r["lr"]) > 0 for r in rows[:2]), f"{name}: metrics rows {rows}")
        final = h5_values(checkpoints(name)[-1], "/arrays/model/params", 0, first)
        moved = max(abs(x - y) for x, y in zip(resumed, final))
        check(moved > 1e-3, f"{name}: the parameters did not move after the resume "
              f"(largest change {moved:.3g})")


def case_retention_after_resume():
    """After a resume on other ranks the job's checkpoints count other steps. Its first commit
    deletes the run's files numbered above it, so checkpoint.keep keeps the job's own and a
    rerun finds its final state; a mid-epoch cursor rounded up to the epoch's end still gets
    the epoch's row."""
    small = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=",
             "checkpoint.every_steps=50", "checkpoint.keep=1"]  # 156 steps/epoch on 1 rank
    def steps(name):
        return [int(os.path.basename(f)[5:17]) for f in checkpoints(name)]
    fresh("keep1")
    expect_ok("keep1", 1, small + ["train.epochs=2"])
    check(steps("keep1") == [312], f"1 rank kept {steps('keep1')}")
    s = expect_ok("keep1", 2, small + ["train.epochs=3"])  # 78 steps/epoch
    check(s["resumed_from"] == 312 and steps("keep1") == [234], f"2 ranks kept {steps('keep1')}")
    rc, out, _ = train("keep1", 2, small + ["train.epochs=3"])
    check(rc == 0 and "already complete" in out, f"rerun: exit {rc}: {out}")
    # Moved with its checkpoints, the run still owns them: retention replaces step 234 (the
    # manifest named the old absolute path, so it stayed beside the new one).
    fresh("keep1moved")
    os.rename(run_dir("keep1"), run_dir("keep1moved"))
    s = expect_ok("keep1moved", 2, small + ["train.epochs=4"])
    check(s["resumed_from"] == 234 and steps("keep1moved") == [312],
          f"moved run kept {steps('keep1moved')}")
    # Step 155 of 156 on 1 rank: 155 x 64 samples are step 77.5 of 78 on 2 ranks.
    fresh("round_up")
    expect_ok("round_up", 1, small + ["train.epochs=1", "checkpoint.every_steps=155",
                                      "checkpoint.keep=2"])
    os.remove(checkpoints("round_up")[-1])  # the epoch's end, 156
    rc, out, _ = train("round_up", 2, small + ["train.epochs=2", "checkpoint.keep=2"])
    check(rc == 0 and "resuming at step 77 of epoch 1" in out, f"exit {rc}: {out}")
    rows = [r["epoch"] for r in metrics_rows("round_up")]
    check(rows == ["1", "2"], f"metrics.csv epochs {rows}")


def case_resume_refusals():
    fresh("refuse")
    expect_ok("refuse", 1, ["train.epochs=1", "checkpoint.every_steps=200", "data.val=",
                            "data.test=", f"data.train={ARGS.data}/test.h5"])
    sets = ["train.epochs=2", "data.val=", "data.test=", f"data.train={ARGS.data}/test.h5"]
    rc, _, err = train("refuse", 1, sets + ["model.hidden=[100]"])
    check(rc == 2, f"resume with another model: exit {rc}, expected 2")
    one_error_line(err, "cannot resume a different model", "layer dense0")
    rc, _, err = train("refuse", 1, sets, resume="never")
    check(rc == 2, f"--resume never over old checkpoints: exit {rc}, expected 2")
    one_error_line(err, "fashion_mnist_mlp.yaml: checkpoint.dir: ", "--resume never starts fresh",
                   "--resume auto")
    # the training data file itself as the checkpoint (open already as data.train)
    data = f"{ARGS.data}/test.h5"
    rc, _, err = train("refuse", 2, sets, resume=data)
    check(rc == 2, f"--resume of the data file: exit {rc}, expected 2")
    one_error_line(err, data, "not an hpctrain checkpoint", "a data file")

    # --resume auto:PATH (the job scripts' restart of a run given --resume PATH): PATH while
    # the run has no checkpoint of its own, then its own newest.
    given = checkpoints("refuse")[-1]
    fresh("refuse_else")
    rc, _, err = train("refuse_else", 1, sets, resume="auto:")
    check(rc == 2, f"--resume auto: with no path: exit {rc}, expected 2")
    # An error in the command line itself is a bare line (--set -h came with a time).
    rc, _, err = train("refuse_else", 1, ["-h"])
    check(rc == 2 and err.strip() == "error: --set -h: expected key.path=value",
          f"--set -h: exit {rc}, {err!r}")
    s = expect_ok("refuse_else", 1, sets, resume=f"auto:{given}")
    check(s["resumed_from"] == newest_step("refuse"),
          f"auto:PATH without checkpoints of its own resumed from {s['resumed_from']}")
    own = newest_step("refuse_else")
    s = expect_ok("refuse_else", 1, sets[1:] + ["train.epochs=3"], resume=f"auto:{given}")
    check(s["resumed_from"] == own, f"auto:PATH resumed from {s['resumed_from']}, not its own {own}")


def case_resume_checks_epoch_and_rank_arrays():
    """A checkpoint resumed over data of fewer steps per epoch (same ranks and batch)
    resumes at the new epoch's last step, which still ends with its validation, metrics row
    and checkpoint (it counted the old steps into later epochs and trained nothing). A
    per-rank checkpoint (strategy average) whose rank 1 array is short or missing, its
    checksums made to match, is exit 2 naming the array (a heap overflow, map::at or a
    half-zero state before), as is one without model/state for a model with state."""
    import h5py
    from cases_export import write_checkpoint
    small = ["model.hidden=[32]", "train.epochs=1", "data.test="]
    fresh("epoch_steps_full")
    expect_ok("epoch_steps_full", 2, DET + small + ["checkpoint.every_steps=300",
                                                    "checkpoint.keep=10"])
    at300 = [c for c in checkpoints("epoch_steps_full") if c.endswith("000000300.h5")]
    check(len(at300) == 1, f"no step-300 checkpoint: {checkpoints('epoch_steps_full')}")
    fresh("epoch_steps_fewer")
    rc, out, _ = train("epoch_steps_fewer", 2, DET + small + [f"data.train={ARGS.data}/val.h5"],
                       resume=at300[0])
    check(rc == 0 and "resuming at step 38 of epoch 1" in out, f"fewer steps: exit {rc}")
    check(len(metrics_rows("epoch_steps_fewer")) == 1, "fewer steps: no metrics row for epoch 1")
    check(checkpoints("epoch_steps_fewer"), "fewer steps: no checkpoint at the epoch's end")

    fresh("rank_arrays")
    sets = DET + small + [f"data.train={ARGS.data}/test.h5", "distributed.strategy=average"]
    expect_ok("rank_arrays", 2, sets)
    with h5py.File(checkpoints("rank_arrays")[-1], "r") as f:
        attrs = dict(f.attrs)
        arrays = {}
        f["arrays"].visititems(lambda name, d: arrays.__setitem__(name, d[()])
                               if isinstance(d, h5py.Dataset) else None)
    name = "rank00001/optimizer/velocity"
    check(name in arrays, f"no {name} in {sorted(arrays)}")
    for label, change in (("short", lambda a: a.__setitem__(name, a[name][:10])),
                          ("missing", lambda a: a.pop(name))):
        crafted = os.path.join(run_dir("rank_arrays"), f"{label}.h5")
        changed = dict(arrays)
        change(changed)
        write_checkpoint(crafted, attrs, changed)
        fresh(f"rank_arrays_{label}")
        rc, _, err = train(f"rank_arrays_{label}", 2, sets, resume=crafted)
        check(rc == 2, f"{label} {name}: exit {rc}, expected 2")
        one_error_line(err, crafted, name)

    # A model with state (BatchNorm) from a checkpoint without model/state: exit 2 naming
    # it (exit 1 on every rank, naming no file, and a launcher's restarts into it, before).
    fresh("no_state")
    sets = DET + small[1:] + [f"data.train={ARGS.data}/test.h5", "model.preset=layers",
                          "model.layers=[{type: dense, units: 16}, {type: batchnorm}]"]
    expect_ok("no_state", 2, sets)
    with h5py.File(checkpoints("no_state")[-1], "r") as f:
        attrs = dict(f.attrs)
        arrays = {n: f["arrays/model/" + n][()] for n in f["arrays/model"]}
    check("state" in arrays, f"no model/state in {sorted(arrays)}")
    crafted = os.path.join(run_dir("no_state"), "no_state.h5")
    write_checkpoint(crafted, attrs, {"model/" + n: v for n, v in arrays.items() if n != "state"})
    fresh("no_state_resumed")
    rc, _, err = train("no_state_resumed", 2, sets, resume=crafted)
    check(rc == 2, f"a checkpoint without model/state: exit {rc}, expected 2")
    one_error_line(err, crafted, "array 'model/state' is missing")


def case_watchdog_hung_rank():
    """A rank that stops answering (SIGSTOP) makes the others abort after the
    collective timeout instead of waiting forever. A SIGTERM to the rank left waiting
    cannot stop it with a checkpoint: 5 s on, it says where it waits and for how long the
    stop may wait."""
    fresh("hung")
    p = session(train_cmd("hung", 2, ["train.epochs=50", "data.val=", "data.test=",
                                      "distributed.timeout_seconds=10"]))
    lines = []
    for line in p.stdout:  # wait until training is under way
        lines.append(line)
        if " epoch 1/" in line:
            break
    ranks = rank_pids(run_dir("hung"))
    # 10 s, not less: the watchdog also bounds start-up, whose fsyncs are slow on some disks
    check(len(ranks) == 2, f"expected 2 ranks, found {ranks}; the job printed:\n" + "".join(lines))
    os.kill(ranks[1], signal.SIGSTOP)
    os.kill(ranks[0], signal.SIGTERM)
    t0 = time.time()
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("job still running 60 s after a rank hung")
    finally:
        for pid in ranks:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    out = "".join(lines) + out
    print(out)
    check(p.returncode != 0, "job reported success with a hung rank")
    check("has not finished after 10 s" in out, "no watchdog message")
    check(re.search(r"SIGTERM came \d+ s ago, and this rank is still in .* at step \d+ "
                    r"\(for \d+ s\): the stop waits for it", out) is not None,
          "no word of the stop that the waiting rank could not act on")
    print(f"job ended {time.time() - t0:.1f} s after the rank hung")
    # A step that does not end (here one rank alone, slowed 10000 times) is watched as a
    # whole, not only its collectives: a reader or the device that never delivers.
    t0 = time.time()
    rc, _, err = train("hung_step", 1, ["train.epochs=1", "data.val=", "data.test=",
                                        f"data.train={ARGS.data}/test.h5",
                                        "distributed.timeout_seconds=2", "debug.slow_rank.rank=0",
                                        "debug.slow_rank.factor=10000"], timeout=300)
    check(rc not in (0, 2, 75) and time.time() - t0 < 60, f"slow step: exit {rc}")
    one_error_line(err, "training step (data, compute and device work) at step",
                   "has not finished after 2 s")


def case_run_dir_in_use():
    """A second training run given the run directory of one still running waits 10 s for
    its lock (hpctrain.lock), then ends with exit 2 naming the holder, and the first goes
    on; after a kill -9 of the first, a run started at once gets the lock."""
    name = "in_use"
    fresh(name)
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "train.epochs=2000",
            "checkpoint.at_epoch_end=false"]
    first = session(train_cmd(name, 2, sets), stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    lock = os.path.join(run_dir(name), "hpctrain.lock")
    deadline = time.time() + 120
    while time.time() < deadline and first.poll() is None and not (
            os.path.exists(lock) and open(lock).read().endswith("\n")):
        time.sleep(0.05)
    check(first.poll() is None, f"the first run ended (exit {first.returncode})")
    holder = open(lock).read().strip()
    print("lock:", holder)
    # Meanwhile a run of another run directory given the first's checkpoint.dir (a sweep
    # whose config names one): that directory has a lock of its own.
    shared = os.path.join(run_dir(name), "checkpoints")
    fresh(name + "_other")
    third = subprocess.Popen(train_cmd(name + "_other", 1, sets + [f"checkpoint.dir={shared}"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    rc, _, err = train(name, 2, sets)
    waited = time.time() - t0
    check(rc == 2 and waited >= 10, f"second run: exit {rc} after {waited:.1f} s")
    one_error_line(err, run_dir(name), "is in use by another training run", holder.split(",")[1])
    _, err = third.communicate(timeout=120)
    check(third.returncode == 2, f"a run sharing checkpoint.dir: exit {third.returncode}")
    one_error_line(err, f"checkpoint.dir: {shared} is in use by another training run",
                   holder.split(",")[1], "another checkpoint.dir")
    check(first.poll() is None, "the second run stopped the first")
    for pid in rank_pids(run_dir(name)):
        os.kill(pid, signal.SIGKILL)
    first.wait(timeout=60)
    rc, _, _ = train(name, 2, sets[:2] + ["train.epochs=1"], resume="never")
    check(rc == 0, f"a run started at once after the kill -9: exit {rc}")


def _carried_energy(path):
    """train/energy_so_far of a checkpoint: (known, {source: joules or None}, seconds)."""
    v = h5_values(path, "/arrays/train/energy_so_far", 0, 15)
    joules = {s: (v[1 + 3 * i] + v[2 + 3 * i]) if v[3 + 3 * i] == 1 else None
              for i, s in enumerate(("cpu", "dram", "gpu", "gpu_active"))}
    return v[0] == 1, joules, v[13] + v[14]


def case_energy_carried_across_resume():
    """Each checkpoint carries the run's energy so far, taken by a sample at the checkpoint
    (a power.csv row of that moment), and the run that finishes a resumed one reports the
    whole run's in summary.json energy_whole_run: what was carried plus its own. A run resumed
    for its test phase alone reports what the final checkpoint carried; a part trained with
    sampling off makes the whole run's energy unknown, with the reason. The GPUs (two, of a
    stand-in NVML) are idle in a CPU run: not in its active devices' energy."""
    fake = FakeRapl("energy_carry")
    nvml = os.path.join(ARGS.build, "test-shims", "nvml")
    env = {"HPCTRAIN_POWERCAP_ROOT": fake.root,
           "LD_LIBRARY_PATH": ":".join(filter(None, [nvml, os.environ.get("LD_LIBRARY_PATH")]))}
    try:
        sets = DET + ["checkpoint.every_steps=100"]
        fresh("energy_carry")
        p = session(train_cmd("energy_carry", 2, sets), env=dict(os.environ, **env))
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(run_dir("energy_carry"), "metrics.csv")):
            check(time.time() < deadline and p.poll() is None, "training did not start")
            time.sleep(0.01)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        print(p.communicate(timeout=120)[0])
        check(os.path.exists(os.path.join(run_dir("energy_carry"), "STOPPED")), "no STOPPED")
        with open(os.path.join(run_dir("energy_carry"), "power.csv")) as f:
            rows = [line.strip().split(",") for line in f][1:]
        seconds_before = 0
        for path in checkpoints("energy_carry"):
            known, joules, seconds = _carried_energy(path)
            check(known and None not in joules.values() and joules["gpu_active"] == 0,
                  f"{path}: carried {known} {joules}")
            check(seconds > seconds_before, f"{path}: {seconds} s after {seconds_before} s")
            seconds_before = seconds
            # A sample of the checkpoint's moment: its power.csv rows have these joules.
            at = {r[1]: float(r[3]) for r in rows if abs(float(r[0]) - seconds) < 6e-4}
            check(abs(at.get("cpu0", -1) - joules["cpu"]) < 1.1e-3 and
                  abs(at.get("dram0", -1) - joules["dram"]) < 1.1e-3 and
                  abs(at.get("gpu0", -1) + at.get("gpu1", -1) - joules["gpu"]) < 2.1e-3,
                  f"{path}: carried {joules} at {seconds} s; power.csv then: {at}")
            check(joules["cpu"] > 0, f"{path}: {joules} in {seconds} s of counters at 40 W")
        _, carried, carried_s = _carried_energy(checkpoints("energy_carry")[-1])
        stopped_at = newest_step("energy_carry")

        s = expect_ok("energy_carry", 2, sets, env=env)
        check(s["resumed_from"] == stopped_at, f"resumed from {s['resumed_from']}, not "
              f"{stopped_at}")
        own, whole = s["energy"], s["energy_whole_run"]
        for src in ("cpu", "dram", "gpu", "gpu_active"):
            check(abs(whole[f"{src}_j"] - (carried[src] + own[f"{src}_j"])) < 1e-6 * whole[
                f"{src}_j"] + 1e-9, f"{src}: whole run {whole}, carried {carried}, own {own}")
        # The active devices: the CPUs and DRAM; the GPUs no rank uses are left out.
        for e in (own, whole):
            check(e["gpu_active_j"] == 0 and e["gpu_j"] > 0 and
                  abs(e["active_j"] - e["cpu_j"] - e["dram_j"]) <= 1e-6 * e["active_j"] and
                  abs(e["total_j"] - e["active_j"] - e["gpu_j"]) <= 1e-6 * e["total_j"],
                  f"active and idle devices: {e}")
        check(abs(s["edp_active"] - own["active_j"] * own["seconds"]) <= 1e-6 * s["edp_active"],
              f"edp_active {s['edp_active']} of {own}")
        check(abs(whole["seconds"] - (carried_s + own["seconds"])) < 1e-6 * whole["seconds"],
              f"seconds: whole run {whole['seconds']}, carried {carried_s}, own {own['seconds']}")
        for edp, j in (("edp", "total_j"), ("edp_active", "active_j")):
            check(abs(whole[edp] - whole[j] * whole["seconds"]) <= 1e-6 * whole[edp],
                  f"whole run's {edp}: {whole}")
        # Joules, not microjoules: the counters' powers (the thread that advances them may
        # lag behind under load).
        check(0.5 < whole["active_j"] / (44 * whole["seconds"]) < 1.5, f"whole run {whole}")

        # The test phase alone: the energy the final checkpoint carried.
        os.remove(os.path.join(run_dir("energy_carry"), "summary.json"))
        t = expect_ok("energy_carry", 2, sets, env=env)
        check(t["energy"] is None, f"a test phase alone has energy {t['energy']}")
        for key in ("cpu_j", "dram_j", "gpu_j", "active_j", "seconds"):
            check(abs(t["energy_whole_run"][key] - whole[key]) <= 1e-9 * whole[key],
                  f"{key}: {t['energy_whole_run']} after the test phase alone, {whole} before")

        # A part without sampling: the whole run's energy is unknown, saying why.
        one = [f"data.train={ARGS.data}/val.h5", "data.val=", "data.test="]
        fresh("energy_part_off")
        expect_ok("energy_part_off", 1, one + ["train.epochs=1", "energy.interval_ms=0"], env=env)
        s = expect_ok("energy_part_off", 1, one + ["train.epochs=2"], env=env)
        check(s["energy"]["cpu_j"] is not None, f"this run's energy {s['energy']}")
        w = s["energy_whole_run"]
        check(w["total_j"] is None and "carries no energy" in w["cpu_reason"],
              f"whole run after a part without sampling: {w}")
        s = expect_ok("energy_part_off", 1, one + ["train.epochs=3", "energy.interval_ms=0"],
                      env=env)
        check(s["energy"] is None and s["energy_whole_run"] is None,
              f"a run without sampling: {s['energy']}, {s['energy_whole_run']}")
    finally:
        fake.close()
