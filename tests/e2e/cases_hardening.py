"""Non-finite values end to end: a NaN pixel in float32 data is exit 2 naming the file
and row; a learning rate that makes the model diverge stops the run (exit 1, one line
naming the step) with a summary.json that parses and no checkpoint of the diverged
parameters; with train.on_nonfinite: skip_step a step whose gradients are not finite is
left out and the run goes on. Then the other hardening cases: files, signals, bounds."""
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from harness import (
    ARGS, check, checkpoints, expect_ok, fresh, newest_step, one_error_line, rank_pids, run_dir,
    train, train_cmd)


def case_nan_pixel():
    import h5py  # Debian's python3-h5py (scripts/install-deps.sh)
    fresh("nan_pixel")
    os.makedirs(run_dir("nan_pixel"))
    path = os.path.join(run_dir("nan_pixel"), "float.h5")
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "synth", "--out", path,
                        "--n", "300", "--shape", "1x6x6", "--classes", "3", "--dtype", "float32"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"synth failed: {p.stderr}")
    with h5py.File(path, "r+") as f:
        f["images"][217, 0, 2, 3] = float("nan")
    rc, _, err = train("nan_pixel", 2, [f"data.train={path}", "data.val=", "data.test="])
    check(rc == 2, f"NaN pixel: exit {rc}, expected 2")
    one_error_line(err, path, "non-finite value (nan) at row 217")
    # inspect checks every sample and reports those training refuses (exit 0); chunks HDF5
    # cannot decode here are exit 2.
    with h5py.File(path, "r+") as f:
        f["images"][5, 0, 1, 1] = float("nan")
    for tool in ("hpctrain", "hpctrain-data"):
        p = subprocess.run([os.path.join(ARGS.build, tool), "inspect", path],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "not finite (training refuses them): 2, the first at row 5 "
              "(nan)" in p.stdout, f"{tool} inspect {path}: exit {p.returncode}, {p.stdout}")
    # Samples of 64M values (256 MB as floats each), mostly never written (HDF5's fill
    # value): read a part at a time, so the memory stays bounded whatever the shape (the first
    # 16 samples were read at once: a 2 KB file of a huge shape was std::bad_alloc, exit 1).
    big = os.path.join(run_dir("nan_pixel"), "big-samples.h5")
    with h5py.File(big, "w") as f:
        d = f.create_dataset("images", shape=(3, 4, 4000, 4000), dtype="f4",
                             chunks=(1, 1, 500, 4000))
        d[0, 0, 0, 0], d[0, 3, 100, 7] = -3, 9
        d[1, 3, 3999, 3999] = float("inf")
        d[2, 0, 5, 5] = d[2, 1, 5, 5] = float("nan")
        f["labels"] = [0, 1, 2]
        f.attrs["num_classes"] = 3
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], "
             "capture_output=True, text=True); print(p.returncode, resource.getrusage("
             "resource.RUSAGE_CHILDREN).ru_maxrss); print(p.stdout)")
    for tool in ("hpctrain", "hpctrain-data"):
        p = subprocess.run([sys.executable, "-c", probe, os.path.join(ARGS.build, tool),
                            "inspect", big], capture_output=True, text=True, timeout=300)
        rc, kib = (int(x) for x in p.stdout.split("\n", 1)[0].split())
        check(rc == 0 and "min -3, max 9" in p.stdout and
              "not finite (training refuses them): 2, the first at row 1 (inf)" in p.stdout,
              f"{tool} inspect of samples of 64M values: exit {rc}, {p.stdout[-600:]}")
        check(kib < 300 * 1024, f"{tool} inspect of samples of 64M values used {kib // 1024} MiB")
    lzf = os.path.join(run_dir("nan_pixel"), "lzf.h5")
    with h5py.File(f"{ARGS.data}/val.h5", "r") as src, h5py.File(lzf, "w") as f:
        f.create_dataset("images", data=src["images"][:64], chunks=(16, 1, 28, 28),
                         compression="lzf")
        f["labels"] = src["labels"][:64]
        f.attrs["num_classes"] = 10
    for file, words in ((lzf, "damaged or unsupported HDF5 data"),):
        for tool in ("hpctrain", "hpctrain-data"):
            p = subprocess.run([os.path.join(ARGS.build, tool), "inspect", file],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and words in p.stderr and file in p.stderr,
                  f"{tool} inspect {file}: exit {p.returncode}, {p.stderr}")
    # Streamed (data.cache_mb=0), the chunks are decoded on the prefetch threads, which
    # must not print HDF5's own error stack either (its printing is set per thread).
    rc, _, err = train("nan_pixel", 1, [f"data.train={lzf}", "data.val=", "data.test=",
                                        "data.cache_mb=0", "train.batch_size=16"])
    check(rc == 2 and "HDF5-DIAG" not in err, f"streamed lzf: exit {rc}, {err}")
    one_error_line(err, lzf, "damaged or unsupported HDF5 data")


def case_diverging_lr_stops():
    fresh("diverge")
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "optimizer.lr=1e20",
            "checkpoint.every_steps=1", "train.epochs=3"]
    rc, out, err = train("diverge", 2, sets)
    check(rc == 1, f"diverging run: exit {rc}, expected 1")
    one_error_line(err, "training diverged", "not finite by step", "optimizer.lr")
    with open(os.path.join(run_dir("diverge"), "summary.json")) as f:
        s = json.load(f)  # valid JSON: no NaN
    check(s["train_loss"] is None, f"summary train_loss {s['train_loss']}, expected null")
    check(s["epochs_completed"] == 0, f"epochs_completed {s['epochs_completed']}")
    with open(os.path.join(run_dir("diverge"), "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 1 and rows[0]["train_loss"] == "", f"metrics.csv rows: {rows}")
    # Step 1's parameters were finite (its loss was): that checkpoint is kept; every later
    # one would hold the diverged parameters and is not written.
    names = [os.path.basename(c) for c in checkpoints("diverge")]
    check(names == ["ckpt-000000000001.h5"], f"checkpoints: {names}")
    shutil.rmtree(run_dir("diverge"), ignore_errors=True)
    # Strategy async has no per-step check: the run ends at the end of the segment (here
    # the first checkpoint by steps), not after an epoch of non-finite parameters whose
    # every checkpoint was refused with a warning.
    fresh("diverge_async")
    rc, out, err = train("diverge_async", 3, sets[:-2] + [
        "checkpoint.every_steps=20", "train.epochs=3", "distributed.strategy=async"])
    check(rc == 1, f"diverging async run: exit {rc}, expected 1")
    one_error_line(err, "training diverged", "not finite by step 20 (epoch 1)")
    check("not written" not in err and not checkpoints("diverge_async"),
          f"async: checkpoints {checkpoints('diverge_async')}, {err}")
    shutil.rmtree(run_dir("diverge_async"), ignore_errors=True)


def case_nonfinite_skip_step():
    """debug.nonfinite_steps makes rank 0's logits NaN at steps 3 and 10. With stop (the
    default) the run ends at step 3 naming it, with the checkpoints from before. With
    skip_step, on 2 ranks, both steps are left out on every rank (they check the same summed
    gradients, so their parameters stay alike), the loss stays finite, and the run
    finishes; a learning rate, or an fp16 loss scale, that leaves every step of an epoch
    non-finite still stops it; strategy average refuses skip_step."""
    base = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=1",
            "run.deterministic=true", "debug.nonfinite_steps=[3, 10]"]
    fresh("nf_stop")
    rc, _, err = train("nf_stop", 2, base + ["checkpoint.every_steps=1"])
    check(rc == 1, f"stop: exit {rc}, expected 1")
    one_error_line(err, "training diverged", "not finite by step 4 (epoch 1)")
    names = [os.path.basename(c) for c in checkpoints("nf_stop")]
    check(names[-1] == "ckpt-000000000003.h5", f"stop: checkpoints {names}")

    fresh("nf_skip")
    rc, out, err = train("nf_skip", 2, base + ["train.on_nonfinite=skip_step"])
    check(rc == 0, f"skip_step: exit {rc}: {err}")
    check(re.search(r"\b2 of \d+ step\(s\) of this epoch skipped", err + out),
          f"skip_step: no warning: {err}")
    with open(os.path.join(run_dir("nf_skip"), "summary.json")) as f:
        s = json.load(f)
    check(s["skipped_steps"] == 2, f"skipped_steps {s['skipped_steps']}, expected 2")
    check(s["train_loss"] is not None and s["loss_scale"] is None,
          f"train_loss {s['train_loss']}, loss_scale {s['loss_scale']}")
    check(s["epochs_completed"] == 1, f"epochs_completed {s['epochs_completed']}")
    # The same run without the poisoned steps trains on them: other parameters.
    fresh("nf_clean")
    clean = [a for a in base if not a.startswith("debug.")] + ["train.on_nonfinite=skip_step"]
    rc, _, err = train("nf_clean", 2, clean)
    check(rc == 0, f"clean: exit {rc}: {err}")
    with open(os.path.join(run_dir("nf_clean"), "summary.json")) as f:
        c = json.load(f)
    check(c["skipped_steps"] == 0 and c["params_sha256"] != s["params_sha256"],
          f"clean run: skipped {c['skipped_steps']}, same parameters as the skipping run")

    fresh("nf_all")
    rc, _, err = train("nf_all", 2, base[:-1] + ["train.on_nonfinite=skip_step",
                                                 "optimizer.lr=1e20", "train.epochs=3"])
    check(rc == 1, f"every step skipped: exit {rc}, expected 1")
    one_error_line(err, "training diverged", "every step of the epoch", "skipped (epoch 2)")
    with open(os.path.join(run_dir("nf_all"), "summary.json")) as f:
        a = json.load(f)
    check(a["epochs_completed"] == 1 and a["train_loss"] is None,
          f"every step skipped: epochs_completed {a['epochs_completed']}, "
          f"train_loss {a['train_loss']}")
    # fp16 too: with skip_step a loss scale that overflows every step of an epoch stops the
    # run (it trained 3 epochs on unchanged parameters and exited 0).
    fresh("nf_fp16")
    rc, _, err = train("nf_fp16", 2, base[:-1] + [  # 4 steps an epoch: too few to back off
        "train.on_nonfinite=skip_step", "precision=fp16", "train.epochs=3",
        f"data.train={ARGS.data}/val.h5", "train.batch_size=512",
        "train.loss_scale.initial=1e30"])
    check(rc == 1, f"fp16, every step skipped: exit {rc}, expected 1")
    one_error_line(err, "training diverged", "every step of the epoch")
    # Strategy average sums no gradients: its ranks could not skip alike (they hung).
    rc, _, err = train("nf_avg", 2, base + ["train.on_nonfinite=skip_step",
                                            "distributed.strategy=average"])
    check(rc == 2, f"skip_step under average: exit {rc}, expected 2")
    one_error_line(err, "train.on_nonfinite: skip_step is not available with", "average")
    for name in ("nf_stop", "nf_skip", "nf_clean", "nf_all", "nf_fp16", "nf_avg"):
        shutil.rmtree(run_dir(name), ignore_errors=True)


def case_symlink_and_foreign_files():
    """A symbolic link planted where a checkpoint's temporary file goes, and one where
    power.csv goes: the file they point to is untouched, and the checkpoint and the samples
    are written as files of their own. Files in the
    checkpoint directory that the run did not write (files named like a checkpoint, a
    note that a line of the manifest gives to another run) all survive retention. A run of another run
    directory given that checkpoint.dir afterwards is refused (exit 2): it would resume the
    first run's final checkpoint as its own, or write over its files. So is a symbolic link
    where a run's lock file goes, and a directory where its metrics.csv goes."""
    fresh("symlink")
    ckdir = os.path.join(run_dir("symlink"), "checkpoints")
    os.makedirs(ckdir)
    victim = os.path.join(run_dir("symlink"), "victim.txt")
    with open(victim, "w") as f:
        f.write("precious\n")
    link = os.path.join(ckdir, "ckpt-000000000010.h5.tmp")
    os.symlink(victim, link)
    power = os.path.join(run_dir("symlink"), "power.csv")  # written as samples come
    os.symlink(victim, power)
    foreign = {"ckpt-000000000003.h5": "not a checkpoint\n", "notes.txt": "mine\n",
               "ckpt-000000000005.h5": "copied in by hand\n"}
    for name, text in foreign.items():
        with open(os.path.join(ckdir, name), "w") as f:
            f.write(text)
    with open(os.path.join(ckdir, "hpctrain-checkpoints.txt"), "w") as f:
        f.write("notes.txt\t/elsewhere/other-run\n")  # not a checkpoint's name: ignored
    rc, _, _ = train("symlink", 2, [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=",
                                    "train.epochs=1", "checkpoint.every_steps=10",
                                    "checkpoint.keep=2"])
    check(rc == 0, f"exit {rc}")
    with open(victim) as f:
        check(f.read() == "precious\n", "the link's target was overwritten")
    check(not os.path.lexists(link), "the planted link is still there")
    check(not os.path.islink(power), "power.csv is still the planted link")
    with open(os.path.join(run_dir("symlink"), "summary.json")) as f:
        written = json.load(f)["checkpoints_written"]
    check(written == 8, f"{written} checkpoints written, expected 8 (steps 10 to 70 and 78)")
    names = sorted(os.listdir(ckdir))
    check(names == ["ckpt-000000000003.h5", "ckpt-000000000005.h5", "ckpt-000000000070.h5",
                    "ckpt-000000000078.h5", "hpctrain-checkpoints.txt", "hpctrain.lock",
                    "notes.txt"],
          f"checkpoint directory after retention: {names}")
    for name, text in foreign.items():
        with open(os.path.join(ckdir, name)) as f:
            check(f.read() == text, f"{name} changed")
    # A directory where one of the run's files goes: refused at start (exit 2 naming it),
    # before the earlier run's summary is removed (power.csv's was found at the first epoch).
    for name in ("metrics.csv", "power.csv"):
        fresh("dir_for_file")
        os.makedirs(os.path.join(run_dir("dir_for_file"), name))
        rc, _, err = train("dir_for_file", 1, [f"data.train={ARGS.data}/val.h5", "data.val=",
                                               "data.test=", "train.epochs=1"])
        check(rc == 2, f"{name} a directory: exit {rc}, expected 2")
        one_error_line(err, "run.dir: ", f"{name} is not a file")
    # The power samples are the training process's: a resume with sampling off leaves none
    # of the run before it (nor of a node it no longer has).
    fresh("power_resume")
    sets = [f"data.train={ARGS.data}/val.h5", "data.val=", "data.test=", "train.epochs=1"]
    expect_ok("power_resume", 1, sets)
    stale = os.path.join(run_dir("power_resume"), "power-othernode.csv")
    with open(stale, "w") as f:
        f.write("time_s,device,power_w,energy_j\n")
    check(os.path.exists(os.path.join(run_dir("power_resume"), "power.csv")), "no power.csv")
    expect_ok("power_resume", 1, sets[:-1] + ["train.epochs=2", "energy.interval_ms=0"])
    left = [n for n in os.listdir(run_dir("power_resume")) if n.startswith("power")]
    check(not left, f"power samples of the run before: {left}")
    fresh("symlink_other")
    rc, _, err = train("symlink_other", 1, [f"data.train={ARGS.data}/test.h5", "data.val=",
                                            "data.test=", "train.epochs=1",
                                            f"checkpoint.dir={ckdir}"])
    check(rc == 2, f"a run of another run directory in that checkpoint.dir: exit {rc}")
    one_error_line(err, f"checkpoint.dir: {ckdir} holds checkpoints of another run (",
                   run_dir("symlink") + " wrote ckpt-000000000078.h5")
    check(sorted(os.listdir(ckdir)) == names, "the refused run changed the checkpoint directory")
    # A symbolic link where the run's lock goes: refused, the file it points to untouched
    # (the holder's line truncated it).
    fresh("symlink_other")
    os.makedirs(run_dir("symlink_other"))
    os.symlink(victim, os.path.join(run_dir("symlink_other"), "hpctrain.lock"))
    rc, _, err = train("symlink_other", 1, [f"data.train={ARGS.data}/test.h5", "data.val=",
                                            "data.test=", "train.epochs=1"])
    check(rc == 2, f"a symbolic link as the run's lock: exit {rc}")
    one_error_line(err, "run.dir: cannot open", "hpctrain.lock: it is a symbolic link")
    with open(victim) as f:
        check(f.read() == "precious\n", "the lock's link target was overwritten")
    shutil.rmtree(run_dir("symlink_other"), ignore_errors=True)


def case_checkpoint_dir_checked_at_start():
    """A checkpoint directory that cannot be created, or without room for checkpoint.keep + 1
    checkpoints, is found at start-up (exit 2 naming checkpoint.dir), not at the first
    checkpoint; a run directory that cannot be created is exit 2 naming run.dir."""
    fresh("ckdir")
    os.makedirs(run_dir("ckdir"))
    blocker = os.path.join(run_dir("ckdir"), "a-file")
    with open(blocker, "w") as f:
        f.write("x\n")
    base = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=1",
            "checkpoint.every_steps=1000"]
    rc, _, err = train("ckdir", 2, base + [f"checkpoint.dir={blocker}/checkpoints"])
    check(rc == 2, f"uncreatable checkpoint.dir: exit {rc}, expected 2")
    one_error_line(err, "checkpoint.dir", "cannot create it")
    rc, _, err = train("ckdir", 2, base + [f"run.dir={blocker}/run"])
    check(rc == 2, f"uncreatable run.dir: exit {rc}, expected 2")
    one_error_line(err, "run.dir", "cannot create it")
    # A keep beyond what the run writes asks no room for more (8 checkpoints here, at most);
    # one within it (a checkpoint a millisecond for 10^8 epochs) does.
    fresh("ckdir_keep")
    rc, _, err = train("ckdir_keep", 2, base + ["checkpoint.keep=2000000000",
                                                "checkpoint.every_steps=10"])
    check(rc == 0, f"keep 2e9 for a run that writes 8 checkpoints: exit {rc}: {err}")
    rc, _, err = train("ckdir", 2, base + ["checkpoint.keep=2000000000", "train.epochs=100000000",
                                           "checkpoint.every_seconds=0.001"])
    check(rc == 2, f"no room for keep + 1 checkpoints: exit {rc}, expected 2")
    one_error_line(err, "checkpoint.dir", "MiB free, but the 2000000001 checkpoints of")
    # A link where the manifest goes failed the first checkpoint (exit 1, mid-training).
    manifest = os.path.join(run_dir("ckdir"), "checkpoints", "hpctrain-checkpoints.txt")
    os.makedirs(os.path.dirname(manifest), exist_ok=True)
    os.symlink(blocker, manifest)
    rc, _, err = train("ckdir", 2, base + ["checkpoint.every_steps=10"])
    check(rc == 2, f"manifest a symbolic link: exit {rc}, expected 2")
    one_error_line(err, "checkpoint.dir", "hpctrain-checkpoints.txt there is a symbolic link")
    with open(blocker) as f:
        check(f.read() == "x\n", "the link's target changed")


def case_checkpoint_flip_sample():
    """tests/fuzz/checkpoint_flip_sweep.py on a sample: 120 single-byte flips of a checkpoint
    are each refused by inspect (exit 2, within 5 s), and --resume auto from 2 of them falls
    back to the previous checkpoint and ends with the uninterrupted parameters. (Every byte:
    bench/results/checkpoint_flip_sweep.json.)"""
    p = subprocess.run([sys.executable, "tests/fuzz/checkpoint_flip_sweep.py", "--build",
                        ARGS.build, "--data", ARGS.data, "--sample", "120", "--resumes", "2"],
                       capture_output=True, text=True, timeout=800)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"flip sweep: exit {p.returncode}")


def handles_sigusr1(pid):
    """Whether process `pid` has installed a handler for SIGUSR1 (its SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16) & (1 << (signal.SIGUSR1 - 1)) != 0
    except OSError:
        pass
    return False


def case_signal_during_startup():
    """SIGUSR1 to a rank during start-up (before MPI is up and the data is read): the rank
    keeps it, training stops at its first step with a checkpoint and the STOPPED marker,
    and exits 75, instead of dying without either."""
    fresh("early_signal")
    p = subprocess.Popen(train_cmd("early_signal", 2, ["train.epochs=1"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline, sent = time.time() + 60, False
    while not sent and time.time() < deadline and p.poll() is None:
        for pid in rank_pids(run_dir("early_signal")):
            if handles_sigusr1(pid) and not os.path.exists(
                    os.path.join(run_dir("early_signal"), "metrics.csv")):
                os.kill(pid, signal.SIGUSR1)
                sent = True
                break
        time.sleep(0.001)
    out, _ = p.communicate(timeout=300)
    print(out)
    check(sent, "no rank to signal during start-up")
    marker = os.path.join(run_dir("early_signal"), "STOPPED")
    check(p.returncode in (0, 75) and os.path.exists(marker),
          f"exit {p.returncode} after an early SIGUSR1 and no STOPPED marker")
    # At its first step (the epoch has 429): a few steps of slack for a slow poll.
    check(1 <= newest_step("early_signal") <= 5,
          f"the stop's checkpoint is at step {newest_step('early_signal')}, not the first")


def case_damaged_data_hang_is_bounded():
    """A data file that sends HDF5 1.10 into an endless loop (found by tests/fuzz/: a damaged
    global heap under a string attribute) ends the run through the watchdog, which watches
    opening the data files: a failure with the phase named, not a job hung until its limit.
    `inspect` of it (both programs) gives up at its --timeout."""
    fresh("hang")
    path = os.path.join("tests", "fuzz", "hdf5", "global-heap-loop.h5")
    t0 = time.time()
    rc, _, err = train("hang", 1, [f"data.train={path}", "data.val=", "data.test=",
                                   "distributed.timeout_seconds=3"], timeout=300)
    elapsed = time.time() - t0
    # MPI_Abort(1): mpiexec reports a failure, not always as 1.
    check(rc not in (0, 2, 75), f"exit {rc}, expected a failure")
    check(elapsed < 120, f"the watchdog took {elapsed:.0f} s")
    one_error_line(err, "start-up (opening the data files", "distributed.timeout_seconds")
    # The same damage in the checkpoint to resume from, written in format 1 (no whole-file
    # checksum to refuse it first): rank 0 loops reading it while rank 1 waits.
    import h5py  # Debian's python3-h5py (scripts/install-deps.sh)
    small = [f"data.train={ARGS.data}/val.h5", "data.val=", "data.test=", "model.hidden=[8]"]
    check(train("hang", 1, small + ["train.epochs=1"])[0] == 0, "the run to damage failed")
    ckpt = checkpoints("hang")[-1]
    with open(ckpt, "rb") as f:
        data = f.read()
    check(data[-24:-16] == b"HTCKSUM1", "no checksum footer")
    with open(ckpt, "wb") as f:
        f.write(data[:-24])
    with h5py.File(ckpt, "r+") as f:
        f.attrs["format_version"] = f.attrs["format_version"].dtype.type(1)
    with open(ckpt, "r+b") as f:
        f.seek(open(ckpt, "rb").read().find(b"GCOL") + 8)  # the global heap's size
        f.write(b"\xff")
    t0 = time.time()
    rc, _, err = train("hang", 2, small + ["train.epochs=2", "distributed.timeout_seconds=3"],
                       timeout=300)
    elapsed = time.time() - t0
    check(rc not in (0, 2, 75) and elapsed < 120, f"damaged checkpoint: exit {rc}, {elapsed:.0f} s")
    one_error_line(err, "start-up (reading the checkpoint to resume from)")
    # inspect has a deadline of its own (--timeout, 60 s by default).
    for program in ("hpctrain", "hpctrain-data"):
        t0 = time.time()
        p = subprocess.run([os.path.join(ARGS.build, program), "inspect", path, "--timeout", "2"],
                           capture_output=True, text=True, timeout=120)
        elapsed = time.time() - t0
        check(p.returncode == 1, f"{program} inspect: exit {p.returncode}, expected 1")
        check(elapsed < 60, f"{program} inspect took {elapsed:.0f} s")
        one_error_line(p.stderr, path, "no answer after 2 s", "--timeout")


def case_library_crash_names_the_file():
    """A file on which HDF5 1.10 itself crashes (found by tests/fuzz/: a variable-length
    string attribute whose global-heap entry is damaged; HDF5's memcpy faults): the process
    still dies of the signal, but first prints one line naming the file."""
    path = os.path.join("tests", "fuzz", "hdf5", "vlen-string-crash.h5")
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain"), "inspect", path],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV),
          f"exit {p.returncode}: HDF5 no longer crashes on this file? {p.stderr[-500:]}")
    # UCX (under MPICH) prints its backtrace after it: only the first line is ours.
    lines = [l for l in p.stderr.splitlines() if l.startswith("error:")]
    check(len(lines) == 1 and f"fatal signal SIGSEGV while reading {path} (a damaged file" in
          lines[0], f"error lines: {lines}")


def case_bounds_refused_at_start():
    """A model or a prefetch queue that cannot fit in the node's memory, and absurd thread or
    queue counts, are refused at start-up with exit 2 naming what to change, before anything
    is allocated (no std::bad_alloc, no OOM killer, no long stall)."""
    fresh("bounds")
    base = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=1"]
    t0 = time.time()
    rc, _, err = train("bounds", 2, base + ["model.hidden=[100000,100000]"])
    check(rc == 2, f"a model of 10^10 parameters: exit {rc}, expected 2")
    one_error_line(err, "needs at least", "GiB of memory per rank", "model", "train.batch_size")
    check(time.time() - t0 < 60, "the refusal took more than a minute")
    import h5py
    huge = os.path.join(run_dir("bounds"), "huge.h5")  # 2^40 rows declared, none stored
    os.makedirs(run_dir("bounds"), exist_ok=True)
    with h5py.File(huge, "w") as f:
        f.create_dataset("images", shape=(2**40, 1, 28, 28), dtype="u1", chunks=(1, 1, 28, 28))
        f.create_dataset("labels", shape=(2**40,), dtype="i4", chunks=(4096,))
        f.attrs["num_classes"] = 10
    rc, _, err = train("bounds", 2, base + [f"data.train={huge}"])
    check(rc == 2, f"2^40 rows: exit {rc}, expected 2")  # their order alone is 4 TiB a rank
    one_error_line(err, "needs at least", "GiB of memory per rank")
    for key, value in (("run.threads", "100000"), ("data.prefetch_threads", "100000"),
                       ("data.prefetch_depth", "100000")):
        rc, _, err = train("bounds", 1, base + [f"{key}={value}"])
        check(rc == 2, f"{key}={value}: exit {rc}, expected 2")
        one_error_line(err, key)
    # The prefetch queues hold float32 samples (3 loaders x 1025 batches of 256: 2.4 GB of
    # uint8 Fashion-MNIST), against an address space of 1.5 GB (ulimit -v): they were
    # counted as 0.2 GB of stored bytes, and the run died of std::bad_alloc (exit 1).
    import resource
    cmd = train_cmd("bounds", 1, base + [f"data.val={ARGS.data}/val.h5",
                                         f"data.test={ARGS.data}/val.h5",
                                         "train.batch_size=256", "data.prefetch_depth=1024"])
    limit = 1500 << 20
    p = subprocess.run(cmd[3:], capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    check(p.returncode == 2, f"prefetch queues past ulimit -v: exit {p.returncode}, expected 2")
    one_error_line(p.stderr, "needs at least 2.3 GiB", "data 2.3 GiB", "(ulimit -v)")


def case_fifo_data_and_checkpoint_refused():
    """A FIFO given as a data file or a checkpoint (to train, inspect, eval, export,
    generate) is refused at once (exit 2): opening it
    would wait for a writer forever. A FIFO named like a checkpoint is skipped by resume."""
    fresh("fifo")
    os.makedirs(run_dir("fifo"))
    fifo = os.path.join(run_dir("fifo"), "data.h5")
    os.mkfifo(fifo)
    base = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=1"]
    rc, _, err = train("fifo", 1, base + [f"data.train={fifo}"], timeout=120)
    check(rc == 2, f"a FIFO as data.train: exit {rc}, expected 2")
    one_error_line(err, fifo, "not a regular file")
    # As the target of eval, export and generate too (they waited for a writer forever).
    for tool in (["hpctrain", "inspect"], ["hpctrain-data", "inspect"], ["hpctrain", "eval"],
                 ["hpctrain", "export", "--format", "hdf5-layers", "--out", fifo + ".out"],
                 ["hpctrain", "generate", "--prompt", "a"]):
        p = subprocess.run([os.path.join(ARGS.build, tool[0]), tool[1], fifo] + tool[2:],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2, f"{' '.join(tool)} on a FIFO: exit {p.returncode}, expected 2")
        check("not a regular file" in p.stderr, f"{' '.join(tool)}: {p.stderr}")
    rc, _, _ = train("fifo", 1, base + ["checkpoint.every_steps=50"])
    check(rc == 0, f"exit {rc}")
    ckdir = os.path.join(run_dir("fifo"), "checkpoints")
    os.mkfifo(os.path.join(ckdir, "ckpt-000000099999.h5"))
    rc, out, _ = train("fifo", 1, base + ["checkpoint.every_steps=50", "train.epochs=2"],
                       resume="auto", timeout=120)
    check(rc == 0, f"resume beside a FIFO named like a checkpoint: exit {rc}")
    check("resuming at step" in out, "did not resume from the newest real checkpoint")


def case_closed_stdout():
    """The reader of a run's stdout goes away after the first line (a dead log pipe, `|
    head -1`): the run ignores SIGPIPE and finishes, exit 0, with its summary and
    checkpoints, and no temporary file (SIGPIPE killed it half-way into a checkpoint)."""
    name = "closed_stdout"
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "model.hidden=[8]",
            "train.epochs=3", "checkpoint.every_steps=5", "train.progress_seconds=0"]
    cmd = train_cmd(name, 1, sets)[3:]  # without mpiexec, whose own SIGPIPE ends a job
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait(timeout=300)
    print(first, err)
    check(rc == 0, f"a run whose stdout closed: exit {rc}, expected 0")
    check(os.path.exists(os.path.join(run_dir(name), "summary.json")), "no summary.json")
    left = [f for f in os.listdir(os.path.join(run_dir(name), "checkpoints"))
            if f.endswith(".tmp")]
    check(not left, f"temporary files left: {left}")
