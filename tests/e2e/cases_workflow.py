"""A user's workflow across runs: the trained model is always left in the run directory
and `eval RUN_DIR` reproduces the run's figures; running a finished run's command again
does not train; metrics.csv has every epoch once after a kill and a resume.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import time

import h5py
import numpy as np

from harness import (ARGS, DET, check, checkpoints, expect_ok, fresh, hpctrain, kill_and_resume,
                     metrics_rows, newest_step, one_error_line, run_dir, session, summary,
                     train, train_cmd)


def eval_run(target, ranks=2, extra=()):
    """`hpctrain eval TARGET` on `ranks` ranks; returns its eval.json (in run.dir)."""
    cmd = ["mpiexec", "-n", str(ranks), hpctrain(), "eval", target, *extra]
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(p.stdout + p.stderr)
    check(p.returncode == 0, f"eval {target} failed with exit {p.returncode}")
    return p.stdout


def eval_json(name):
    with open(os.path.join(run_dir(name), "eval.json")) as f:
        return json.load(f)


def synth(path, n, shape, classes):
    if os.path.exists(path):
        return
    subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "synth", "--out", path, "--n",
                    str(n), "--shape", shape, "--classes", str(classes), "--threads", "1"],
                   check=True, capture_output=True, timeout=300)


def small_data(name, shape, classes, train_rows=96, test_rows=40):
    """Small synthetic train/test files of `shape` in the run directory's sibling
    folder (one per case: ctest -j runs cases side by side)."""
    d = os.path.join(ARGS.build, "e2e-runs", name + "_data")
    os.makedirs(d, exist_ok=True)
    synth(os.path.join(d, "train.h5"), train_rows, shape, classes)
    synth(os.path.join(d, "test.h5"), test_rows, shape, classes)
    return d


def text_windows(name):
    d = os.path.join(ARGS.build, "e2e-runs", name + "_text")
    if not os.path.exists(os.path.join(d, "test.h5")):
        subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "text", "docs/contracts.md",
                        "--out", d, "--seq-len", "32", "--val-fraction", "0.1",
                        "--test-fraction", "0.1"], check=True, capture_output=True, timeout=300)
    return d


def case_final_model_every_config():
    """Every shipped training config, with the checkpoint cadence off, ends
    with its final model in the run directory, and `eval RUN_DIR` (on another number of
    ranks) gives the run's test accuracy exactly. `inspect CONFIG --set=k=v` validates
    each config with the run's keys first (--set=, as train takes it). Every shipped study
    file passes `study --dry-run` (each variant's config checked) on data that exists."""
    studies = sorted(glob.glob("configs/study_*.yaml"))
    check(len(studies) >= 3, f"expected the shipped study files, found {studies}")
    for study in studies:
        name = "final_" + os.path.basename(study)[:-5]
        fresh(name)
        p = subprocess.run([hpctrain(), "study", study, "--dry-run", "--out", run_dir(name),
                            "--set", f"data.train={ARGS.data}/val.h5", "--set", "data.val=",
                            "--set", "data.test="], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"study {study} --dry-run: exit {p.returncode}: {p.stderr}")
    configs = sorted(c for c in glob.glob("configs/*.yaml")
                     if not os.path.basename(c).startswith("study_"))
    check(len(configs) >= 6, f"expected the shipped configs, found {configs}")
    for config in configs:
        base = os.path.basename(config)[:-5]
        name = "final_" + base
        fresh(name)
        if "char" in base:
            d = text_windows(name)
        elif "seed" in base:  # ResNet-34 at 148x197: two steps of 2 x 8 images
            d = small_data(name, "1x148x197", 9, train_rows=32, test_rows=16)
        else:
            d = small_data(name, "1x28x28", 10)
        sets = [f"data.train={d}/train.h5", "data.val=", f"data.test={d}/test.h5",
                "train.epochs=1", "train.batch_size=8", "checkpoint.every_seconds=0",
                "checkpoint.at_epoch_end=false"]
        i = subprocess.run([hpctrain(), "inspect", config] + [f"--set={s}" for s in sets],
                           capture_output=True, text=True, timeout=300)
        check(i.returncode == 0, f"inspect {config} --set=...: exit {i.returncode}: {i.stderr}")
        rc, _, err = train(name, 2, sets, config=config)
        check(rc == 0, f"{config}: training failed with exit {rc}: {err[-2000:]}")
        s = summary(name)
        check(len(checkpoints(name)) == 1,
              f"{config}: expected the final checkpoint alone, found {checkpoints(name)}")
        eval_run(run_dir(name), ranks=3)
        e = eval_json(name)
        check(e["test_accuracy"] == s["test_accuracy"],
              f"{config}: eval of the run directory gave test accuracy {e['test_accuracy']}, "
              f"the run {s['test_accuracy']}")
        check(e["params_sha256"] == s["params_sha256"],
              f"{config}: eval loaded other parameters than the run ended with")
        print(f"{config}: final checkpoint kept; eval test accuracy {e['test_accuracy']}")


def case_eval_beside_training():
    """eval and export of a run directory while its training writes a checkpoint every step
    and keeps one (checkpoint.keep 1): each reads the newest checkpoint. A file pruned after
    the directory was listed was skipped as damaged: 1 eval in 3 found no valid checkpoint
    (exit 2), and export read the file it had chosen a second time, after its pruning."""
    name = "beside"
    fresh(name)
    p = session(train_cmd(name, 1, ["train.epochs=1000", "data.val=", "checkpoint.every_steps=1",
                                    "checkpoint.keep=1", "run.threads=1"]),
                stdout=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not checkpoints(name) and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    check(p.poll() is None and checkpoints(name), "the training run wrote no checkpoint")
    out = os.path.join(run_dir(name), "model.h5")
    failed = []
    for i in range(24):
        cmd = [hpctrain(), "eval", run_dir(name)] if i % 2 == 0 else \
            [hpctrain(), "export", run_dir(name), "--format", "hdf5-layers", "--out", out, "--force"]
        c = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if c.returncode != 0:
            failed.append(f"{cmd[1]}: exit {c.returncode}: {c.stderr.strip()[-300:]}")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
    check(not failed, f"{len(failed)} of 24 beside training failed: {failed[:2]}")


def case_checkpoint_waits_warned():
    """A checkpoint every step of a small model: the steps wait for the writes, most of the
    epoch, and the run says so once (it slowed down without a word); not so without them."""
    sets = ["train.epochs=2", "data.val=", "data.test=", "train.batch_size=32", "run.threads=1"]
    rc, _, err = train("waits", 1, sets + ["checkpoint.every_steps=1", "checkpoint.keep=1"])
    warned = [x for x in err.splitlines() if "checkpoints held training back" in x]
    check(rc == 0 and len(warned) == 1 and "checkpoint less often" in warned[0],
          f"checkpoints every step: exit {rc}, warnings {warned}")
    rc, _, err = train("no_waits", 1, sets + ["checkpoint.every_steps=0"])
    check(rc == 0 and "held training back" not in err, f"no checkpoints: exit {rc}, {err}")


def case_rerun_finished_and_stopped():
    """A run stopped by SIGUSR1 and resumed to the end leaves its final model, which
    `eval RUN_DIR` and `eval CHECKPOINT` evaluate to the run's test accuracy; the same
    command again exits 0 at once without training or touching metrics.csv; more epochs
    continue from the final state, each epoch once in metrics.csv; a start refused on
    another rank than 0 leaves the finished run's files as they were; a longer run removes the
    finished run's summary.json when it starts."""
    name = "rerun"
    fresh(name)
    sets = ["train.epochs=3", "run.deterministic=true", "data.val="]
    p = subprocess.Popen(train_cmd(name, 2, sets + ["debug.slow_rank.rank=1",
                                                     "debug.slow_rank.factor=3"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if " epoch 1/" in line:
            p.send_signal(signal.SIGUSR1)
            break
    out = p.stdout.read()
    p.wait(timeout=300)
    print(out)
    check(os.path.exists(os.path.join(run_dir(name), "STOPPED")), "SIGUSR1 did not stop the run")
    rc, out, _ = train(name, 2, sets)
    check(rc == 0 and "resuming at step" in out, f"resume failed (exit {rc})")
    s = summary(name)
    check([r["epoch"] for r in metrics_rows(name)] == ["1", "2", "3"],
          f"metrics.csv epochs after stop and resume: {[r['epoch'] for r in metrics_rows(name)]}")
    eval_run(run_dir(name), ranks=1)
    check(eval_json(name)["test_accuracy"] == s["test_accuracy"],
          f"eval RUN_DIR {eval_json(name)['test_accuracy']} != run {s['test_accuracy']}")
    final = checkpoints(name)[-1]
    eval_run(final, ranks=3, extra=[f"--set=run.dir={run_dir(name)}"])  # the one-word form
    check(eval_json(name)["test_accuracy"] == s["test_accuracy"], "eval CHECKPOINT differs")

    with open(os.path.join(run_dir(name), "metrics.csv")) as f:
        metrics_before = f.read()
    t0 = time.time()
    rc, out, _ = train(name, 2, sets)
    took = time.time() - t0
    check(rc == 0 and "already complete" in out, f"re-run of a finished run: exit {rc}")
    check(" epoch 1/" not in out and "epoch 3/" not in out, "the finished run trained again")
    check(took < 20, f"the finished run's re-run took {took:.1f} s")
    with open(os.path.join(run_dir(name), "metrics.csv")) as f:
        check(f.read() == metrics_before, "the re-run changed metrics.csv")
    check(summary(name) == s, "the re-run changed summary.json")
    # train.epochs lowered since: complete too, said so (it read "at epoch 3 of 2").
    rc, out, _ = train(name, 2, sets + ["train.epochs=2"])
    check(rc == 0 and "final checkpoint is at epoch 3, past train.epochs (2)" in out,
          f"re-run with fewer epochs: exit {rc}")
    check(summary(name) == s, "the re-run with fewer epochs changed summary.json")
    # Killed in its test phase (the final checkpoint written, no summary.json): the rerun
    # runs the test phase alone, and says so (it said "resuming at step 0 of epoch 4").
    os.remove(os.path.join(run_dir(name), "summary.json"))
    rc, out, _ = train(name, 2, sets)
    check(rc == 0 and "resuming after the last epoch: the test phase only" in out and
          " epoch 3/" not in out, f"the test phase alone: exit {rc}:\n{out}")
    check(summary(name)["params_sha256"] == s["params_sha256"], "the test phase changed the model")

    rc, out, _ = train(name, 2, ["train.epochs=4", "run.deterministic=true", "data.val="])
    check(rc == 0 and "epoch 4/4" in out and "epoch 3/4" not in out,
          f"train.epochs=4 after a finished 3-epoch run: exit {rc}")
    epochs = [r["epoch"] for r in metrics_rows(name)]
    check(epochs == ["1", "2", "3", "4"], f"metrics.csv epochs after one more: {epochs}")

    # A start refused on another rank than 0 (a label outside the 10 classes in rank 1's part
    # of the test file) leaves the finished run's files as they were: it removed the summary
    # and STOPPED once rank 0's own checks had passed, before rank 1 read its rows.
    bad = os.path.join(ARGS.build, "e2e-runs", "rerun-bad-test.h5")
    shutil.copyfile(f"{ARGS.data}/test.h5", bad)
    with h5py.File(bad, "a") as f:
        f["labels"][9000] = 10
    marker = os.path.join(run_dir(name), "STOPPED")
    with open(marker, "w") as f:
        f.write("step 1\ncheckpoint x\n")
    files = {n: open(os.path.join(run_dir(name), n), "rb").read()
             for n in ("summary.json", "config.yaml", "metrics.csv", "STOPPED")}
    rc, _, err = train(name, 2, ["train.epochs=5", "run.deterministic=true", "data.val=",
                                 f"data.test={bad}"])
    os.remove(bad)
    check(rc == 2 and "label 10 at row 9000" in err, f"a bad label in rank 1's rows: exit {rc}")
    for n, before in files.items():
        path = os.path.join(run_dir(name), n)
        check(os.path.exists(path) and open(path, "rb").read() == before,
              f"the refused start changed or removed {n}")
    os.remove(marker)

    # A longer run removes the finished run's summary.json as it starts: stopped after its
    # own final checkpoint, it must not pass for finished when resumed.
    # A slowed rank keeps epoch 6 long enough for the signal to arrive within it.
    sets = ["train.epochs=6", "run.deterministic=true", "data.val="]
    p = subprocess.Popen(train_cmd(name, 2, sets + ["debug.slow_rank.rank=1",
                                                     "debug.slow_rank.factor=3"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if " epoch 5/" in line:
            p.send_signal(signal.SIGUSR1)
            break
    print(p.communicate(timeout=300)[0])
    # MPICH's mpiexec sometimes reports 0 for the ranks' 75 after forwarding a signal.
    check(p.returncode in (0, 75) and os.path.exists(os.path.join(run_dir(name), "STOPPED")),
          f"the stopped 6-epoch run: exit {p.returncode} and no STOPPED marker")
    check(not os.path.exists(os.path.join(run_dir(name), "summary.json")),
          "the 4-epoch run's summary.json outlived the start of the 6-epoch run")
    rc, out, _ = train(name, 2, sets)
    check(rc == 0 and "already complete" not in out and summary(name)["epochs_completed"] == 6,
          f"resuming the 6-epoch run: exit {rc}")


def case_final_checkpoint_before_test():
    """The final checkpoint is committed before the test phase starts, so that a run killed
    during its test resumes for the test alone: with the final checkpoint's fsync held
    (fsync_shim.c), no test line comes while it is held (killed there, nothing of the run
    was committed, and the rerun trains and tests it again)."""
    name = "final_before_test"
    fresh(name)
    held = "ckpt-000000000039.h5.tmp"  # 5,000 rows in batches of 128: 39 steps
    sets = [f"data.train={ARGS.data}/val.h5", "data.val=", f"data.test={ARGS.data}/test.h5",
            "train.epochs=1"]
    env = dict(os.environ, LD_PRELOAD=os.path.join(ARGS.build, "test-shims",
                                                   "libht_fsync_shim.so"),
               HT_STALL_FSYNC_FILE=held)
    p = session(train_cmd(name, 2, sets), env=env)
    path = os.path.join(run_dir(name), "checkpoints", held)
    deadline = time.time() + 120
    while not os.path.exists(path) and p.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    check(os.path.exists(path), "the final checkpoint's write did not start")
    time.sleep(3)  # the test phase of 10,000 rows takes a fraction of that
    os.killpg(p.pid, signal.SIGKILL)
    out = p.communicate(timeout=60)[0]
    print(out)
    check(" epoch 1/1" in out and "test loss" not in out,
          "the test phase ran while the final checkpoint was being written")
    rc, out, _ = train(name, 2, sets)
    check(rc == 0 and "test loss" in out, f"the rerun: exit {rc}")


def case_metrics_once_after_kill():
    """kill -9 after an epoch's row was written but before that epoch's checkpoint:
    the resumed run repeats the epoch, and metrics.csv still has each epoch once. A
    checkpoint due at an epoch's last step comes after the epoch's row."""
    name = "metrics_kill"
    fresh(name)
    # A checkpoint every 600 steps (429 per epoch on 2 ranks): the first, at step 600, is
    # in epoch 2; the kill comes after epoch 2's row (step 858), before step 1200.
    sets = ["train.epochs=3", "run.deterministic=true", "data.val=", "data.test=",
            "checkpoint.every_steps=600"]
    p = session(train_cmd(name, 2, sets + ["debug.slow_rank.rank=1", "debug.slow_rank.factor=3"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while p.poll() is None and time.time() < deadline:
        # The step-600 checkpoint is committed by the writer thread after its fsync, in
        # no fixed order with epoch 2's row (only the save at step 1200 waits for it):
        # wait for both.
        if checkpoints(name) and os.path.exists(os.path.join(run_dir(name), "metrics.csv")) \
                and len(metrics_rows(name)) >= 2:
            os.killpg(p.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    p.wait(timeout=120)
    rows = [r["epoch"] for r in metrics_rows(name)]
    check(rows == ["1", "2"], f"before the resume metrics.csv has epochs {rows}")
    check(len(checkpoints(name)) == 1, f"expected the step-600 checkpoint, {checkpoints(name)}")
    rc, out, _ = train(name, 2, sets)
    check(rc == 0 and "resuming at step 171 of epoch 2" in out, f"resume: exit {rc}")
    rows = [r["epoch"] for r in metrics_rows(name)]
    check(rows == ["1", "2", "3"], f"metrics.csv epochs after kill -9 and resume: {rows}")

    # A checkpoint due at an epoch's last step is committed after the epoch's validation
    # and row: killed as soon as it is there, the row is there too, and the resumed run
    # (which starts the next epoch) loses no row.
    name = "metrics_epoch_end"
    fresh(name)
    # 78 steps per epoch on 2 ranks; a long validation (55,000 rows) after each.
    sets = ["train.epochs=2", "run.deterministic=true", f"data.train={ARGS.data}/test.h5",
            f"data.val={ARGS.data}/train.h5", "data.test=", "checkpoint.every_steps=78"]
    p = session(train_cmd(name, 2, sets), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, rows = time.time() + 300, None
    while p.poll() is None and time.time() < deadline:
        if checkpoints(name):
            os.killpg(p.pid, signal.SIGKILL)
            rows = [r["epoch"] for r in metrics_rows(name)]
            break
        time.sleep(0.001)
    p.wait(timeout=120)
    # The checkpoint is renamed into place by the writer thread after its fsync, which on a
    # slow disk can take longer than epoch 2: its row may be there too, epoch 1's must be.
    check(rows is not None and rows[:1] == ["1"],
          f"metrics.csv when the epoch-end checkpoint appeared: {rows}")
    # Killed before the run's last checkpoint (step 156): else the resume has nothing to do.
    check(newest_step(name) == 78, f"killed at step {newest_step(name)}, not at epoch 1's end")
    rc, out, _ = train(name, 2, sets)
    check(rc == 0, f"resume: exit {rc}")
    check("resuming at step 0 of epoch 2" in out,
          "the resume from the epoch-end checkpoint does not start epoch 2")
    rows = [r["epoch"] for r in metrics_rows(name)]
    check(rows == ["1", "2"], f"metrics.csv epochs after the resume: {rows}")


def case_sharded_data_same_params():
    """Training on the 3 shards `hpctrain-data shard` cut from the training file (a glob)
    gives the parameters of training on the file itself, on 3 ranks whose shards cross the
    file boundaries; a file of another shape among them is exit 2 naming it."""
    d = os.path.join(ARGS.build, "e2e-runs", "shards_data")
    os.makedirs(d, exist_ok=True)
    prefix = os.path.join(d, "train")
    if not os.path.exists(prefix + "-00002-of-00003.h5"):
        subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "shard",
                        f"{ARGS.data}/train.h5", "--parts", "3", "--out-prefix", prefix],
                       check=True, capture_output=True, timeout=300)
    sets = ["run.deterministic=true", "train.epochs=2", "data.val=", "train.batch_size=50"]
    fresh("shards_whole")
    rc, _, _ = train("shards_whole", 3, sets)
    check(rc == 0, f"training on the whole file: exit {rc}")
    fresh("shards_glob")
    rc, out, _ = train("shards_glob", 3, sets + [f"data.train={prefix}-*-of-00003.h5"])
    check(rc == 0, f"training on the shards: exit {rc}")
    whole, shards = summary("shards_whole"), summary("shards_glob")
    check(whole["params_sha256"] == shards["params_sha256"],
          "the shards gave other parameters than the file they were cut from")
    check(whole["test_accuracy"] == shards["test_accuracy"], "other test accuracy")
    print(f"3 shards, 3 ranks: params_sha256 {shards['params_sha256'][:16]}... as the whole file")

    odd = os.path.join(d, "odd.h5")
    synth(odd, 8, "1x14x14", 10)
    fresh("shards_odd")
    listed = f"data.train=[{prefix}-00000-of-00003.h5, {odd}]"
    rc, _, err = train("shards_odd", 2, sets + [listed])
    check(rc == 2, f"a file of another shape among the training files: exit {rc}, expected 2")
    check(f"{odd}: not part of the same data set" in err and err.count("error:") == 1,
          f"expected one error line naming {odd}:\n{err}")
    rc, _, err = train("shards_odd", 2, sets + [f"data.train={d}/nothing-*.h5"])
    check(rc == 2 and "matches no file" in err, f"a glob matching nothing: exit {rc}\n{err}")


def case_augment_normalize_kill_resume():
    """Normalisation from `hpctrain-data stats` attributes (auto) and flip + crop
    augmentation: a kill -9 and --resume auto end with the uninterrupted run's parameters;
    the augmentation changes them; normalize: auto without the attributes and a mean per
    channel that does not fit are exit 2 naming the file or the key."""
    d = os.path.join(ARGS.build, "e2e-runs", "augment_data")
    os.makedirs(d, exist_ok=True)
    train_file = os.path.join(d, "train.h5")
    if not os.path.exists(train_file):
        shutil.copyfile(f"{ARGS.data}/train.h5", train_file + ".part")
        os.replace(train_file + ".part", train_file)
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "stats", train_file],
                       capture_output=True, text=True, timeout=300)
    print(p.stdout + p.stderr)
    check(p.returncode == 0 and "channel 0: mean 0.28" in p.stdout, "hpctrain-data stats failed")
    flat = os.path.join(d, "flat.h5")  # every pixel the same: std 0, which training refuses
    with h5py.File(flat, "w") as f:  # (77 in 300 rows: E[x^2] - E[x]^2 gave 5e-8, stored)
        f["images"] = np.full((300, 1, 28, 28), 77, np.uint8)
        f["labels"] = np.arange(300, dtype=np.int32) % 2
        f.attrs["num_classes"] = 2
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "stats", flat],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and "channel 0" in p.stderr and
          "std 0" in p.stderr, f"stats of a flat file: exit {p.returncode}, {p.stderr}")
    with h5py.File(flat, "r") as f:
        check("std" not in f.attrs, "stats stored std 0")
    # Stored statistics that training refuses (a mean without a std, three values for one
    # channel) are what stats replaces: it reads the file regardless.
    for name, attrs in (("half", {"mean": [0.5]}),
                        ("three", {"mean": [0.1] * 3, "std": [1.0] * 3})):
        path = os.path.join(d, name + ".h5")
        with h5py.File(path, "w") as f:
            f["images"] = np.arange(4 * 28 * 28, dtype=np.uint8).reshape(4, 1, 28, 28)
            f["labels"] = np.arange(4, dtype=np.int32) % 2
            f.attrs["num_classes"] = 2
            f.attrs.update(attrs)
        p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "stats", path],
                           capture_output=True, text=True, timeout=60)
        with h5py.File(path, "r") as f:
            stored = {k: list(f.attrs[k]) for k in ("mean", "std") if k in f.attrs}
        check(p.returncode == 0 and len(stored.get("mean", [])) == 1 and
              len(stored.get("std", [])) == 1,
              f"stats over {attrs}: exit {p.returncode}, {p.stderr}, stored {stored}")
    aug = DET + [f"data.train={train_file}", "data.normalize=auto", "data.augment.flip=true",
                 "data.augment.crop_padding=2", "checkpoint.every_steps=40"]
    fresh("augment_full")
    want = expect_ok("augment_full", 2, aug)["params_sha256"]
    fresh("augment_off")
    plain = expect_ok("augment_off", 2, DET + [f"data.train={train_file}",
                                               "checkpoint.every_steps=40"])["params_sha256"]
    check(plain != want, "the augmentation changed nothing")
    s = kill_and_resume("augment_kill", aug, lambda n: 1 if newest_step(n) >= 500 else None)
    check(s["params_sha256"] == want, "kill -9 and resume with augmentation: parameters differ")

    fresh("augment_bad")
    rc, _, err = train("augment_bad", 2, ["data.normalize=auto"])
    check(rc == 2, f"normalize auto without attributes: exit {rc}")
    one_error_line(err, "train.h5: has no mean and std attributes")
    rc, _, err = train("augment_bad", 2, ["data.normalize=given", "data.mean=[0.1, 0.2]",
                                          "data.std=[0.3, 0.3]"])
    check(rc == 2, f"two means for one channel: exit {rc}")
    one_error_line(err, "data.mean and data.std: 2 and 2 values for 1-channel")
    # 1/std overflows float32: the inputs would be infinite (a NaN model, once).
    rc, _, err = train("augment_bad", 2, ["data.normalize=given", "data.mean=[0.5]",
                                          "data.std=[1e-50]"])
    check(rc == 2, f"data.std 1e-50: exit {rc}")
    one_error_line(err, "data.std", "std 1e-50", "1/std")
