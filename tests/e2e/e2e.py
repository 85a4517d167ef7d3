#!/usr/bin/env python3
"""End-to-end tests of the hpctrain CLI: whole training runs under mpiexec, their
outputs (summary.json, metrics.csv), and the failure paths (bad config, missing
data, a killed rank). One case per ctest entry: e2e.py CASE --build DIR --data DIR.
"""
import argparse
import csv
import glob
import gzip
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

ARGS = None


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def hpctrain():
    return os.path.join(ARGS.build, "hpctrain")


def run_dir(name):
    return os.path.join(ARGS.build, "e2e-runs", name)


def train_cmd(name, ranks, sets, config="configs/fashion_mnist_mlp.yaml", resume=None):
    d = ARGS.data
    cmd = ["mpiexec", "-n", str(ranks), hpctrain(), "train", config,
           "--set", f"data.train={d}/train.h5", "--set", f"data.val={d}/val.h5",
           "--set", f"data.test={d}/test.h5", "--set", f"run.dir={run_dir(name)}",
           "--set", "train.progress_seconds=0"]
    for s in sets:
        cmd += ["--set", s]
    if resume is not None:
        cmd += ["--resume", resume]
    return cmd


def train(name, ranks, sets, timeout=900, config="configs/fashion_mnist_mlp.yaml", resume=None,
          env=None):
    """Runs `mpiexec -n ranks hpctrain train` and returns (returncode, stdout, stderr);
    `env` adds environment variables."""
    cmd = train_cmd(name, ranks, sets, config, resume)
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    return p.returncode, p.stdout, p.stderr


def summary(name):
    with open(os.path.join(run_dir(name), "summary.json")) as f:
        return json.load(f)


def metrics_rows(name):
    with open(os.path.join(run_dir(name), "metrics.csv")) as f:
        return list(csv.DictReader(f))


def expect_ok(name, ranks, sets, **kw):
    rc, out, err = train(name, ranks, sets, **kw)
    check(rc == 0, f"{name}: exit code {rc}")
    return summary(name)


# --- happy paths -----------------------------------------------------------------

def case_mlp_allreduce_ring():
    s = expect_ok("mlp_ring", 2, [])
    for key in ["test_accuracy", "test_loss", "epochs_completed", "world_size", "backend",
                "strategy", "samples_per_second", "time_train_s", "time_val_s", "time_test_s",
                "data_wait_fraction", "resumed_from", "params_sha256"]:
        check(key in s, f"summary.json lacks {key}")
    check(s["world_size"] == 2 and s["epochs_completed"] == 5, "world size / epochs wrong")
    check(s["resumed_from"] is None, "resumed_from should be null")
    check(len(s["params_sha256"]) == 64, "params_sha256 is not a SHA-256 hex digest")
    check(s["test_accuracy"] >= 0.85, f"test accuracy {s['test_accuracy']:.4f} < 0.85")
    check(s["data_wait_fraction"] < 0.05,
          f"data wait {100 * s['data_wait_fraction']:.2f}% of training time >= 5%")
    rows = metrics_rows("mlp_ring")
    check(len(rows) == 5, f"metrics.csv has {len(rows)} rows, expected 5")
    losses = [float(r["train_loss"]) for r in rows]
    check(losses[-1] < losses[0], f"train loss did not decrease: {losses}")
    check(all(r["val_accuracy"] for r in rows), "a validation accuracy is missing")
    check(os.path.exists(os.path.join(run_dir("mlp_ring"), "config.yaml")), "config.yaml missing")


def case_mlp_average():
    s = expect_ok("mlp_average", 2, ["distributed.strategy=average", "distributed.every=8"])
    check(s["strategy"] == "average", "strategy not recorded")
    check(s["test_accuracy"] >= 0.84, f"test accuracy {s['test_accuracy']:.4f} < 0.84")


def case_mlp_mpi_three_ranks():
    # An odd world size with the MPI_Allreduce algorithm, 2 epochs.
    s = expect_ok("mlp_mpi3", 3, ["distributed.algorithm=mpi", "train.epochs=2"])
    check(s["world_size"] == 3 and s["algorithm"] == "mpi", "world size / algorithm wrong")
    check(s["test_accuracy"] >= 0.80, f"test accuracy {s['test_accuracy']:.4f} < 0.80")


def case_determinism():
    sets = ["run.deterministic=true", "train.epochs=1", f"data.train={ARGS.data}/test.h5"]
    a = expect_ok("det_a", 2, sets)
    b = expect_ok("det_b", 2, sets)
    check(a["params_sha256"] == b["params_sha256"],
          f"same config gave different parameters: {a['params_sha256']} vs {b['params_sha256']}")
    c = expect_ok("det_c", 2, sets + ["run.seed=2"])
    check(c["params_sha256"] != a["params_sha256"], "a different seed gave the same parameters")


# --- failure paths ---------------------------------------------------------------

def one_error_line(err, *needles):
    lines = [l for l in err.splitlines() if "error" in l.lower()]
    check(len(lines) == 1, f"expected one error line, got {len(lines)}: {lines}")
    for n in needles:
        check(n in lines[0], f"error line lacks '{n}': {lines[0]}")


def case_bad_config():
    path = os.path.join(ARGS.build, "e2e-runs", "bad.yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("run:\n  name: bad\ndata:\n  train: x.h5\noptimizer:\n  momentun: 0.9\n")
    rc, out, err = train("bad", 2, [], config=path)
    check(rc == 2, f"bad key: exit {rc}, expected 2")
    one_error_line(err, "bad.yaml:6", "optimizer.momentun", "momentum")
    rc, out, err = train("bad2", 2, ["train.epochs=many"])
    check(rc == 2, f"bad override: exit {rc}, expected 2")
    one_error_line(err, "train.epochs")
    # device: cuda where no GPU is visible (or the build has no CUDA backend): exit 2.
    version = subprocess.run([hpctrain(), "--version"], capture_output=True, text=True).stdout
    check("CUDA devices" in version, "hpctrain --version: " + version)
    if "CUDA devices: 0" in version or "cuda" not in version.split("backends:")[1]:
        rc, out, err = train("bad3", 2, ["device=cuda"])
        check(rc == 2, f"device: cuda without a GPU: exit {rc}, expected 2")
        one_error_line(err, "device: cuda")
        rc, out, err = train("bad4", 2, ["distributed.algorithm=nccl"])
        check(rc == 2, f"algorithm nccl on the CPU backend: exit {rc}, expected 2")
        one_error_line(err, "distributed.algorithm: nccl")
        rc, out, err = train("bad5", 2, ["precision=bf16", "layout=nhwc"])
        check(rc == 2, f"layout nhwc on the CPU backend: exit {rc}, expected 2")
        one_error_line(err, "layout: nhwc needs a GPU")


def case_missing_data():
    rc, out, err = train("missing", 2, ["data.train=/nonexistent/train.h5"])
    check(rc == 2, f"missing file: exit {rc}, expected 2")
    one_error_line(err, "/nonexistent/train.h5")


def write_idx(prefix, n, labels):
    with gzip.open(prefix + "-images.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(range(256)) * (n * 784 // 256)
                + bytes(n * 784 % 256))
    with gzip.open(prefix + "-labels.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))


def case_more_ranks_than_samples():
    prefix = os.path.join(ARGS.build, "e2e-runs", "tiny")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    write_idx(prefix, 2, [1, 2])
    out = prefix + ".h5"
    subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "idx", "--images",
                    prefix + "-images.gz", "--labels", prefix + "-labels.gz", "--out", out,
                    "--classes", "10"], check=True)
    rc, _, err = train("tiny", 3, [f"data.train={out}", "data.val=", "data.test="])
    check(rc == 2, f"3 ranks on 2 samples: exit {rc}, expected 2")
    one_error_line(err, out, "3 ranks")
    rc, _, err = train("tiny_batch", 1, [f"data.train={out}", "data.val=", "data.test="])
    check(rc == 2, f"batch 64 on 2 samples: exit {rc}, expected 2")
    one_error_line(err, "train.batch_size")


def rank_pids(marker):
    """PIDs of hpctrain rank processes whose command line contains `marker`."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        if comm == "hpctrain" and marker in cmdline:
            pids.append(int(pid))
    return sorted(pids)


def case_killed_rank_ends_job():
    """kill -9 of one rank mid-training must end the whole job promptly."""
    d = ARGS.data
    cmd = ["mpiexec", "-n", "2", hpctrain(), "train", "configs/fashion_mnist_mlp.yaml",
           "--set", f"data.train={d}/train.h5", "--set", "data.val=", "--set", "data.test=",
           "--set", f"run.dir={run_dir('killed')}", "--set", "train.epochs=50",
           "--set", "train.progress_seconds=0.5"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    # Wait until training is under way (a progress line), then kill one rank.
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stdout.readline()
        if "step" in line:
            break
    ranks = rank_pids(run_dir("killed"))
    check(len(ranks) == 2, f"expected 2 rank processes, found {ranks}")
    os.kill(ranks[-1], signal.SIGKILL)
    t0 = time.time()
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("job still running 60 s after a rank was killed")
    check(p.returncode != 0, "job reported success after a rank was killed")
    print(f"job ended {time.time() - t0:.1f} s after the kill, exit {p.returncode}")


def case_cli():
    h = subprocess.run([hpctrain(), "--help"], capture_output=True, text=True)
    check(h.returncode == 0 and "train CONFIG.yaml" in h.stdout, "hpctrain --help")
    h = subprocess.run([hpctrain(), "train", "--help"], capture_output=True, text=True)
    check(h.returncode == 0 and "--set" in h.stdout, "hpctrain train --help")
    u = subprocess.run([hpctrain(), "frobnicate"], capture_output=True, text=True)
    check(u.returncode == 2 and "frobnicate" in u.stderr, "unknown command should exit 2")
    i = subprocess.run([hpctrain(), "inspect", os.path.join(ARGS.data, "test.h5")],
                       capture_output=True, text=True)
    check(i.returncode == 0 and "10000" in i.stdout and "Ankle boot" in i.stdout,
          "inspect output: " + i.stdout + i.stderr)
    m = subprocess.run([hpctrain(), "inspect", "/nonexistent.h5"], capture_output=True, text=True)
    check(m.returncode == 2 and "/nonexistent.h5" in m.stderr, "inspect of a missing file")
    # inspect CONFIG: shapes from the data file, or from --input/--classes.
    c = subprocess.run([hpctrain(), "inspect", "configs/fashion_mnist_resnet18.yaml", "--set",
                        f"data.train={ARGS.data}/test.h5"], capture_output=True, text=True)
    check(c.returncode == 0 and "input 1x28x28" in c.stdout and "701,178 parameters" in c.stdout
          and "layer4.1.conv2" in c.stdout, "inspect CONFIG: " + c.stdout + c.stderr)
    c = subprocess.run([hpctrain(), "inspect", "configs/seed_resnet34.yaml", "--input",
                        "1x148x197", "--classes", "9"], capture_output=True, text=True)
    check(c.returncode == 0 and "21,283,017 parameters" in c.stdout,
          "inspect of the ResNet-34 config: " + c.stdout + c.stderr)
    c = subprocess.run([hpctrain(), "inspect", "configs/seed_resnet34.yaml", "--input", "1x0x3",
                        "--classes", "9"], capture_output=True, text=True)
    check(c.returncode == 2 and "--input" in c.stderr, "inspect with a bad --input: " + c.stderr)
    # inspect --time: the CNN timed layer by layer on the config's device.
    c = subprocess.run([hpctrain(), "inspect", "configs/fashion_mnist_cnn.yaml", "--input",
                        "1x28x28", "--classes", "10", "--time", "--batch", "8"],
                       capture_output=True, text=True)
    check(c.returncode == 0 and "fwd_ms" in c.stdout and "step at batch 8" in c.stdout,
          "inspect --time: " + c.stdout + c.stderr)
    c = subprocess.run([hpctrain(), "inspect", "configs/fashion_mnist_cnn.yaml", "--batch", "8"],
                       capture_output=True, text=True)
    check(c.returncode == 2 and "--batch goes with --time" in c.stderr,
          "inspect --batch without --time: " + c.stderr)


# --- checkpoints, resume, failures -------------------------------------------------

def checkpoints(name):
    return sorted(glob.glob(os.path.join(run_dir(name), "checkpoints", "ckpt-*.h5")))


def newest_step(name):
    files = checkpoints(name)
    return int(os.path.basename(files[-1])[5:17]) if files else -1


def fresh(name):
    shutil.rmtree(run_dir(name), ignore_errors=True)


DET = ["run.deterministic=true", "train.epochs=4", "data.val=", "data.test="]


def uninterrupted_sha(name):
    """The parameters of an uninterrupted DET run, in run directory `name` (one per test:
    ctest -j runs tests side by side)."""
    fresh(name)
    return expect_ok(name, 2, DET + ["checkpoint.every_steps=40"])["params_sha256"]


def kill_and_resume(name, sets, should_kill, config="configs/fashion_mnist_mlp.yaml"):
    """Starts a run, kill -9s one rank when should_kill(name) says so, then resumes
    with --resume auto until it finishes; returns the final summary."""
    fresh(name)
    p = subprocess.Popen(train_cmd(name, 2, sets, config), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    victim = None
    deadline = time.time() + 300
    while p.poll() is None and time.time() < deadline:
        victim = should_kill(name)
        if victim is not None:
            ranks = rank_pids(run_dir(name))
            if len(ranks) == 2:
                os.kill(ranks[victim], signal.SIGKILL)
                break
        time.sleep(0.002)
    out, _ = p.communicate(timeout=120)
    check(victim is not None and p.returncode != 0,
          f"{name}: the run was not killed (exit {p.returncode}):\n{out}")
    committed = newest_step(name)
    print(f"{name}: killed rank {victim}; newest committed checkpoint: step {committed}")
    rc, out, err = train(name, 2, sets, config=config, resume="auto")
    check(rc == 0, f"{name}: resumed run failed with exit {rc}")
    check(f"(step {committed}," in out and "resuming at step" in out,
          f"{name}: did not resume from step {committed}")
    return summary(name)


def case_kill9_resume_bit_identical():
    """kill -9 of a rank at random steps, and once while a checkpoint is being
    written, then --resume auto: the final parameters equal an uninterrupted run's."""
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

    def during_write(n):
        # Rank 0 writes checkpoints: kill it while a later one is half written.
        tmp = glob.glob(os.path.join(run_dir(n), "checkpoints", "*.tmp"))
        return 0 if tmp and newest_step(n) >= 100 else None
    s = kill_and_resume("kill9_write", DET + ["checkpoint.every_steps=5"], during_write)
    check(s["params_sha256"] == want, "kill during a checkpoint write: parameters differ")


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
    """SIGUSR1 to mpiexec: the ranks checkpoint and exit 75; resuming finishes with
    the uninterrupted parameters. Then SIGTERM straight to one rank (as Slurm sends
    at a time limit): the ranks agree, checkpoint and exit 75."""
    want = uninterrupted_sha("det_full_signal")
    fresh("sigstop")
    p = subprocess.Popen(train_cmd("sigstop", 2, DET + ["checkpoint.every_steps=1000"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(run_dir("sigstop"), "metrics.csv")):
        check(time.time() < deadline and p.poll() is None, "training did not start")
        time.sleep(0.01)
    p.send_signal(signal.SIGUSR1)
    out, _ = p.communicate(timeout=120)
    print(out)
    # Every rank exits 75, but MPICH's mpiexec (hydra 4.0.2) sometimes reports 0
    # after forwarding a signal; the STOPPED marker is the reliable record.
    marker = os.path.join(run_dir("sigstop"), "STOPPED")
    check(p.returncode in (0, 75) and os.path.exists(marker),
          f"exit {p.returncode} after SIGUSR1 and no STOPPED marker")
    check("stopped by a signal" in out, "no stop message")
    stopped_at = newest_step("sigstop")
    check(stopped_at > 0 and stopped_at % 1000 != 0, f"no signal checkpoint ({stopped_at})")
    s = expect_ok("sigstop", 2, DET + ["checkpoint.every_steps=1000"])  # --resume auto default
    check(not os.path.exists(marker), "STOPPED marker left after the resumed run")
    check(s["resumed_from"] == stopped_at, f"resumed_from {s['resumed_from']} != {stopped_at}")
    check(s["params_sha256"] == want, "resumed parameters differ from the uninterrupted run")

    fresh("sigterm")
    p = subprocess.Popen(train_cmd("sigterm", 2, DET), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("epoch 1/"):
            break
    os.kill(rank_pids(run_dir("sigterm"))[1], signal.SIGTERM)
    out = p.stdout.read()
    p.wait(timeout=120)
    print(out)
    check(p.returncode == 75, f"exit {p.returncode} after SIGTERM to a rank, expected 75")
    check(newest_step("sigterm") > 429, "no checkpoint after SIGTERM")


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
    rc, out, err = train("corrupt", 2, ["train.epochs=2", "data.val=", "data.test="],
                         resume="auto")
    check(rc == 0, f"--resume auto with corrupt newest checkpoints: exit {rc}")
    check(err.count("skipping it for an older checkpoint") == 2, "corrupt files not reported")
    check("loaded checkpoint " + third in out, "did not fall back to the newest valid checkpoint")


def case_resume_other_world_sizes():
    """A 2-rank run's checkpoint resumed on 1 and on 3 ranks reaches the target."""
    fresh("ws2")
    expect_ok("ws2", 2, ["train.epochs=2", "checkpoint.every_steps=200"])
    for ranks in (1, 3):
        name = f"ws2_to_{ranks}"
        fresh(name)
        shutil.copytree(os.path.join(run_dir("ws2"), "checkpoints"),
                        os.path.join(run_dir(name), "checkpoints"))
        s = expect_ok(name, ranks, ["train.epochs=5", "checkpoint.every_steps=200"])
        check(s["world_size"] == ranks and s["resumed_from"] == 858, f"{name}: {s}")
        check(s["epochs_completed"] == 5, f"{name}: epochs {s['epochs_completed']}")
        check(s["test_accuracy"] >= 0.85, f"{name}: test accuracy {s['test_accuracy']} < 0.85")


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
    one_error_line(err, "--resume auto")


def case_watchdog_hung_rank():
    """A rank that stops answering (SIGSTOP) makes the others abort after the
    collective timeout instead of waiting forever."""
    fresh("hung")
    p = subprocess.Popen(train_cmd("hung", 2, ["train.epochs=50", "data.val=", "data.test=",
                                               "distributed.timeout_seconds=3"]),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    lines = []
    for line in p.stdout:  # wait until training is under way
        lines.append(line)
        if line.startswith("epoch 1/"):
            break
    ranks = rank_pids(run_dir("hung"))
    check(len(ranks) == 2, f"expected 2 ranks, found {ranks}")
    os.kill(ranks[1], signal.SIGSTOP)
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
    check("has not finished after 3 s" in out, "no watchdog message")
    print(f"job ended {time.time() - t0:.1f} s after the rank hung")


RESNET = "configs/fashion_mnist_resnet18.yaml"


def resnet_sets():
    # A width-4 ResNet-18 on the 5000 validation images: 39 steps per epoch on 2 ranks.
    return ["model.width=4", "train.epochs=2", f"data.train={ARGS.data}/val.h5",
            "run.deterministic=true", "checkpoint.every_seconds=0", "checkpoint.every_steps=10"]


def case_resnet_resume_eval():
    """ResNet (BatchNorm statistics as model state): kill -9 and resume reproduces the
    parameters; the final checkpoint holds the statistics, and evaluating it on 3 ranks
    gives the run's own test accuracy."""
    fresh("rn_full")
    s = expect_ok("rn_full", 2, resnet_sets(), config=RESNET)
    losses = [float(r["train_loss"]) for r in metrics_rows("rn_full")]
    check(losses[-1] < losses[0], f"train loss did not decrease: {losses}")
    check(s["test_accuracy"] >= 0.6, f"test accuracy {s['test_accuracy']:.4f} < 0.6")
    k = kill_and_resume("rn_kill", resnet_sets(),
                        lambda n: 1 if newest_step(n) >= 30 else None, config=RESNET)
    check(k["params_sha256"] == s["params_sha256"], "resumed ResNet parameters differ")
    ckpt = checkpoints("rn_full")[-1]
    i = subprocess.run([hpctrain(), "inspect", ckpt], capture_output=True, text=True)
    check(i.returncode == 0 and "model/state" in i.stdout, "no model/state in " + i.stdout)
    d = ARGS.data
    cmd = ["mpiexec", "-n", "3", hpctrain(), "eval", RESNET, "--checkpoint", ckpt] + sum(
        (["--set", x] for x in resnet_sets() + [f"data.val={d}/val.h5", f"data.test={d}/test.h5",
                                                 f"run.dir={run_dir('rn_eval')}"]), [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"eval: exit {p.returncode}")
    with open(os.path.join(run_dir("rn_eval"), "eval.json")) as f:
        e = json.load(f)
    check(e["test_accuracy"] == s["test_accuracy"],
          f"eval {e['test_accuracy']} != the run's {s['test_accuracy']}")


def case_staged_memory_matches():
    """The trainer's path for device memory (batches, collectives and checkpoints staged
    through host buffers, HPCTRAIN_STAGE_CPU=1 on the CPU backend) gives the parameters of
    the in-place path: MLP with both strategies and on one rank (no collectives), and a
    ResNet with BatchNorm state. The staged runs time their step phases
    (train.step_timing), which must leave the parameters alone."""
    staged = {"HPCTRAIN_STAGE_CPU": "1"}
    mlp = ["run.deterministic=true", "train.epochs=1", f"data.train={ARGS.data}/test.h5",
           "checkpoint.every_steps=20"]
    for label, ranks, sets, config in [
            ("mlp", 2, mlp, "configs/fashion_mnist_mlp.yaml"),
            ("mlp1", 1, mlp, "configs/fashion_mnist_mlp.yaml"),
            ("avg", 2, mlp + ["distributed.strategy=average", "distributed.every=4"],
             "configs/fashion_mnist_mlp.yaml"),
            ("resnet", 2, resnet_sets() + ["train.epochs=1"], RESNET)]:
        fresh(f"plain_{label}")
        fresh(f"staged_{label}")
        a = expect_ok(f"plain_{label}", ranks, sets, config=config)
        # The staged run also times its step phases: the marks must not change the result.
        b = expect_ok(f"staged_{label}", ranks, sets + ["train.step_timing=true"],
                      config=config, env=staged)
        check(a["params_sha256"] == b["params_sha256"], f"{label}: staged run differs")
        check(a["test_accuracy"] == b["test_accuracy"], f"{label}: staged accuracy differs")
        phases = b["step_phases_s"]
        check(a["step_phases_s"] is None and sorted(phases) == sorted(
            ["forward", "backward", "exchange", "optimizer", "between_steps"]),
            f"{label}: step_phases_s {a['step_phases_s']} / {phases}")
        # Each phase is the slowest rank's, so only each one is bounded by the train time.
        check(phases["forward"] > 0 and phases["backward"] > 0 and
              max(phases.values()) <= b["time_train_s"],
              f"{label}: step phases {phases} vs time_train_s {b['time_train_s']}")


def case_mixed_precision():
    """bf16 and fp16 (on the CPU: 16-bit activations, float32 master weights) train the MLP
    and the ResNet to the float32 targets. fp16's loss scaler, started far too high, skips
    steps and backs off; its state is in the checkpoints, so kill -9 and resume reproduce
    the uninterrupted parameters."""
    for name in ("bf16_mlp", "bf16_resnet"):
        fresh(name)
    s = expect_ok("bf16_mlp", 2, ["precision=bf16"])
    check(s["precision"] == "bf16" and s["loss_scale"] is None and s["skipped_steps"] is None,
          f"bf16 summary: precision {s['precision']}, loss scale {s['loss_scale']}")
    check(s["test_accuracy"] >= 0.85, f"bf16 MLP test accuracy {s['test_accuracy']:.4f} < 0.85")
    r = expect_ok("bf16_resnet", 2, resnet_sets() + ["precision=bf16"], config=RESNET)
    check(r["test_accuracy"] >= 0.6, f"bf16 ResNet test accuracy {r['test_accuracy']:.4f} < 0.6")
    # The path of a GPU (stored bytes staged into device slots, decoded there into bf16;
    # collectives staged through host memory) gives the same parameters.
    mlp = ["precision=bf16", "run.deterministic=true", "train.epochs=1",
           f"data.train={ARGS.data}/test.h5"]
    fresh("bf16_plain")
    fresh("bf16_staged")
    a = expect_ok("bf16_plain", 2, mlp)
    b = expect_ok("bf16_staged", 2, mlp, env={"HPCTRAIN_STAGE_CPU": "1"})
    check(a["params_sha256"] == b["params_sha256"], "bf16: the staged run's parameters differ")

    fp16 = DET + ["precision=fp16", "train.loss_scale.initial=1e12",
                  "train.loss_scale.growth_interval=50", "checkpoint.every_steps=40"]
    fresh("fp16_full")
    f = expect_ok("fp16_full", 2, fp16)
    check(f["precision"] == "fp16" and 0 < f["skipped_steps"] < 200 and f["loss_scale"] < 1e12,
          f"fp16: {f['skipped_steps']} skipped steps, final loss scale {f['loss_scale']}")
    losses = [float(row["train_loss"]) for row in metrics_rows("fp16_full")]
    check(losses[-1] < 0.45, f"fp16 train loss {losses}")
    k = kill_and_resume("fp16_kill", fp16, lambda n: 1 if newest_step(n) >= 400 else None)
    check(k["params_sha256"] == f["params_sha256"], "fp16: resumed parameters differ")

    # A run whose every step overflows (weights blown up by a huge learning rate) says so.
    fresh("fp16_blowup")
    rc, out, err = train("fp16_blowup", 2, ["precision=fp16", "optimizer.lr=1e6", "train.epochs=2",
                                            f"data.train={ARGS.data}/test.h5", "data.val=",
                                            "data.test="])
    check(rc == 0 and "every step of this epoch overflowed" in out + err,
          "fp16: no warning when every step overflowed")

    # Checkpoints hold float32 values only, so they move between precisions: fp16's last
    # one goes on in bf16, and that one in fp16 again (a fresh loss scale, with a warning).
    fresh("fp16_to_bf16")
    rc, out, err = train("fp16_to_bf16", 2, DET + ["precision=bf16", "train.epochs=5",
                                                    "checkpoint.every_steps=40"],
                         resume=checkpoints("fp16_full")[-1])
    check(rc == 0 and "resuming at step 0 of epoch 5" in out, f"fp16 -> bf16 resume: exit {rc}")
    fresh("bf16_to_fp16")
    rc, out, err = train("bf16_to_fp16", 2, DET + ["precision=fp16", "train.epochs=6"],
                         resume=checkpoints("fp16_to_bf16")[-1])
    check(rc == 0 and "resuming at step 0 of epoch 6" in out and "no loss scale" in out + err,
          f"bf16 -> fp16 resume: exit {rc}")


def case_eval_checkpoint():
    """hpctrain eval on another world size reproduces the run's final test accuracy."""
    fresh("evalsrc")
    s = expect_ok("evalsrc", 2, ["train.epochs=1", "checkpoint.every_steps=1000"])
    ckpt = checkpoints("evalsrc")[-1]
    d = ARGS.data
    cmd = ["mpiexec", "-n", "3", hpctrain(), "eval", "configs/fashion_mnist_mlp.yaml",
           "--checkpoint", ckpt, "--set", f"data.train={d}/train.h5", "--set",
           f"data.val={d}/val.h5", "--set", f"data.test={d}/test.h5", "--set",
           f"run.dir={run_dir('evalout')}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"eval: exit {p.returncode}")
    with open(os.path.join(run_dir("evalout"), "eval.json")) as f:
        e = json.load(f)
    check(e["test_accuracy"] == s["test_accuracy"], f"eval {e['test_accuracy']} != run's "
          f"{s['test_accuracy']}")
    check(e["params_sha256"] == s["params_sha256"], "eval loaded other parameters")


def write_bmp(path, width, height, pixel):
    """A 24-bit BMP whose pixel (x, y) is pixel(x, y) -> (r, g, b)."""
    row = (width * 3 + 3) // 4 * 4
    data = bytearray()
    for y in range(height - 1, -1, -1):  # bottom-up
        line = bytearray()
        for x in range(width):
            r, g, b = pixel(x, y)
            line += bytes([b, g, r])
        data += line + bytes(row - len(line))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    with open(path, "wb") as f:
        f.write(header + info + data)


def case_image_folder_trains():
    """hpctrain-data images on a folder with a corrupt file, a non-image file and mixed
    sizes converts the rest, reports the skips, and the result trains."""
    root = os.path.join(ARGS.build, "e2e-runs", "images")
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(5)
    patterns = {  # three classes a model can tell apart: stripes, a bright centre, a ramp
        "stripes": lambda x, y, w, h: 255 if (x * 8 // w) % 2 == 0 else 0,
        "spot": lambda x, y, w, h: 255 if abs(x - w / 2) < w / 4 and abs(y - h / 2) < h / 4 else 0,
        "ramp": lambda x, y, w, h: int(255 * y / h),
    }
    for name, fn in patterns.items():
        os.makedirs(os.path.join(root, name))
        for i in range(40):
            w, h = rng.choice([(20, 24), (32, 30), (17, 17)])
            noise = rng.randrange(40)
            write_bmp(os.path.join(root, name, f"{i:03d}.bmp"), w, h,
                      lambda x, y: (min(255, fn(x, y, w, h) + noise),) * 3)
    with open(os.path.join(root, "spot", "broken.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + bytes(20))  # a truncated PNG
    with open(os.path.join(root, "ramp", "notes.txt"), "w") as f:
        f.write("not an image\n")
    out = os.path.join(ARGS.build, "e2e-runs", "images.h5")
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "images", root, "--out", out,
                        "--size", "16x16", "--gray", "--seed", "1"],
                       capture_output=True, text=True)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"images: exit {p.returncode}")
    check("skipped 2 of 122 files" in p.stdout + p.stderr, "skip count not reported")
    check("broken.png" in p.stderr and "notes.txt" in p.stderr, "skipped files not named")
    s = expect_ok("images_train", 1, [f"data.train={out}", "data.val=", "data.test=",
                                      "train.batch_size=8", "train.epochs=10",
                                      "optimizer.lr=0.02", "model.hidden=[32]"])
    check(s["train_accuracy"] >= 0.9, f"train accuracy {s['train_accuracy']} < 0.9")


def h5_values(path, dataset, start, count):
    out = subprocess.run(["h5dump", "-d", dataset, "-s", str(start), "-c", str(count), "-y",
                          "-w", "0", path], capture_output=True, text=True, check=True).stdout
    body = out[out.index("DATA {"):]
    return [float(x) for x in body[body.index("{") + 1:body.index("}")].replace(",", " ").split()]


def case_transfer_freeze():
    """model.init_from + model.freeze: the frozen base keeps the source's weights
    exactly, the head trains."""
    fresh("base")
    expect_ok("base", 2, ["train.epochs=1", "checkpoint.every_steps=1000", "data.val=",
                          "data.test="])
    src = checkpoints("base")[-1]
    fresh("tuned")
    s = expect_ok("tuned", 2, ["train.epochs=1", "checkpoint.every_steps=1000", "data.val=",
                               f"model.init_from={src}", "model.freeze=[dense0]"])
    check(s["test_accuracy"] >= 0.80, f"fine-tuned accuracy {s['test_accuracy']}")
    dst = checkpoints("tuned")[-1]
    ds = "/arrays/model/params"
    check(h5_values(src, ds, 0, 50) == h5_values(dst, ds, 0, 50), "frozen dense0 changed")
    head = 784 * 192 + 192  # the classifier starts after dense0
    check(h5_values(src, ds, head, 50) != h5_values(dst, ds, head, 50), "classifier did not train")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--build", required=True)
    ap.add_argument("--data", required=True)
    ARGS = ap.parse_args()
    fn = globals().get("case_" + ARGS.case)
    if fn is None:
        fail("no such case: " + ARGS.case)
    fn()
    print("PASS: " + ARGS.case)


if __name__ == "__main__":
    main()
