"""End-to-end cases: training runs on the happy path, the CLI, and the failure paths of bad
input, missing data and a killed rank.
"""
import gzip
import json
import os
import shutil
import signal
import struct
import subprocess
import time

from harness import (
    ARGS, check, documented_names, expect_ok, fail, fresh, hpctrain, metrics_rows,
    one_error_line, rank_pids, run_dir, session, train, train_cmd)


def case_mlp_allreduce_ring():
    s = expect_ok("mlp_ring", 2, [])
    # The keys and columns docs/contracts.md promises, in its order.
    keys = documented_names("### summary.json")
    check(list(s) == keys, f"summary.json keys {list(s)}, documented {keys}")
    check(s["world_size"] == 2 and s["epochs_completed"] == 5, "world size / epochs wrong")
    check(s["resumed_from"] is None, "resumed_from should be null")
    check(len(s["params_sha256"]) == 64, "params_sha256 is not a SHA-256 hex digest")
    check(s["test_accuracy"] >= 0.85, f"test accuracy {s['test_accuracy']:.4f} < 0.85")
    check(s["data_wait_fraction"] < 0.05,
          f"data wait {100 * s['data_wait_fraction']:.2f}% of training time >= 5%")
    rows = metrics_rows("mlp_ring")
    columns = documented_names("### metrics.csv")
    check(list(rows[0]) == columns, f"metrics.csv columns {list(rows[0])}, documented {columns}")
    check(len(rows) == 5, f"metrics.csv has {len(rows)} rows, expected 5")
    losses = [float(r["train_loss"]) for r in rows]
    check(losses[-1] < losses[0], f"train loss did not decrease: {losses}")
    check(all(r["val_accuracy"] for r in rows), "a validation accuracy is missing")
    check(os.path.exists(os.path.join(run_dir("mlp_ring"), "config.yaml")), "config.yaml missing")
    # Each rank keeps at least part of a core busy, and no more than the node has.
    check(0.1 < s["cpu_load_per_rank"] <= os.cpu_count(), f"cpu load {s['cpu_load_per_rank']}")
    # Energy: each source a number, or null with a reason (never a made-up zero); the
    # samples file has its header.
    e = s["energy"]
    for src in ("cpu", "dram", "gpu"):
        check(isinstance(e[f"{src}_j"], float) or e.get(f"{src}_reason"),
              f"energy {src}: neither joules nor a reason: {e}")
    check((e["total_j"] is None) == (s["edp"] is None), f"edp {s['edp']} with total {e}")
    check((e["active_j"] is None) == (s["edp_active"] is None), f"edp_active with {e}")
    # No CPU or DRAM reading and no GPU in use (0 J): no energy of the active devices, not 0.
    if e["cpu_j"] is None and e["dram_j"] is None and not e["gpu_active_j"]:
        check(e["active_j"] is None, f"active_j of no reading: {e}")
    with open(os.path.join(run_dir("mlp_ring"), "power.csv")) as f:
        check(f.readline().strip() == "time_s,device,power_w,energy_j", "power.csv header")


def case_epoch_clocks_start_together():
    """Rank 0 alone writes each epoch's metrics.csv row (fsynced, here 2 s slow): the other
    ranks' clocks for the next epoch start with its, so the slow write is counted in no
    epoch's training or communication time (it was, on 2 ranks and not on 1, which biased
    speedup and efficiency against the one-rank baseline)."""
    shim = os.path.join(ARGS.build, "test-shims", "libht_fsync_shim.so")
    rc, _, _ = train("clocks", 2, [f"data.train={ARGS.data}/val.h5", "data.val=",
                                   "data.test=", "train.epochs=3",
                                   "checkpoint.at_epoch_end=false"],
                     env={"LD_PRELOAD": shim, "HT_SLOW_FSYNC_FILE": "metrics.csv"})
    check(rc == 0, f"exit {rc}")
    rows = metrics_rows("clocks")
    times = [float(r["time_train_s"]) for r in rows]
    comm = [float(r["comm_s"]) for r in rows]
    check(len(rows) == 3 and max(times[1:]) < 1.0,
          f"epochs after a 2 s row write took {times} s to train ({comm} s communicating)")


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


def case_bad_config():
    path = os.path.join(ARGS.build, "e2e-runs", "bad.yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("run:\n  name: bad\ndata:\n  train: x.h5\noptimizer:\n  momentun: 0.9\n")
    rc, out, err = train("bad", 2, [], config=path)
    check(rc == 2, f"bad key: exit {rc}, expected 2")
    one_error_line(err, "bad.yaml:6", "optimizer.momentun", "momentum")
    rc, out, err = train("bad", 1, [], config=f"{ARGS.data}/val.h5")  # a data file
    check(rc == 2, f"a data file for the config: exit {rc}, expected 2")
    one_error_line(err, "val.h5: an HDF5 file (data or a checkpoint), not a YAML config")
    # Ranks started with different configs (an MPMD launch): refused at start, not a job whose
    # ranks wait for each other until the watchdog ends it.
    fresh("mpmd")
    rank = [hpctrain(), "train", "configs/fashion_mnist_mlp.yaml",
            f"--set=run.dir={run_dir('mpmd')}", f"--set=data.train={ARGS.data}/val.h5",
            "--set=data.val=", "--set=data.test="]
    p = subprocess.run(["mpiexec", "-n", "1"] + rank + ["--set=train.epochs=1", ":", "-n", "2"]
                       + rank + ["--set=train.epochs=2"], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 2, f"ranks with different configs: exit {p.returncode}, expected 2")
    one_error_line(p.stderr, "rank 1's config differs from rank 0's", "train.epochs: 2 against 1")
    rc, out, err = train("bad2", 2, ["train.epochs=many"])
    check(rc == 2, f"bad override: exit {rc}, expected 2")
    one_error_line(err, "train.epochs")
    # device: cuda where no GPU is visible (or the build has no CUDA backend): exit 2.
    version = subprocess.run([hpctrain(), "--version"], capture_output=True, text=True).stdout
    check("CUDA devices" in version, "hpctrain --version: " + version)
    if "backends: cpu, cuda" in version:
        # The CUDA backend's module loads, its references to hpctrain resolved, GPU or not.
        check("CUDA backend: " in version and "cuDNN" in version,
              "the CUDA backend's module does not load: " + version)
        # The program without its module beside it says why, and still trains on the CPU:
        # a CPU rank never loads the CUDA backend.
        lone = os.path.join(ARGS.build, "e2e-runs", "lone_program")
        shutil.rmtree(lone, ignore_errors=True)
        os.makedirs(lone)
        shutil.copy(hpctrain(), lone)
        program = os.path.join(lone, "hpctrain")
        v = subprocess.run([program, "--version"], capture_output=True, text=True).stdout
        check("CUDA backend: lib/hpctrain/libhpctrain_cuda.so is not beside " +
              os.path.realpath(program) in v,
              "--version of a program without its module: " + v)
        cmd = train_cmd("lone_program_run", 1, ["device=cpu", "train.epochs=1",
                                                f"data.train={ARGS.data}/test.h5"])
        cmd[cmd.index(hpctrain())] = program
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"a CPU run without the CUDA module: exit {p.returncode}: "
                                 f"{p.stderr[-2000:]}")
    if "CUDA devices: 0" in version or "cuda" not in version.split("backends:")[1]:
        # What needs a GPU, asked for where there is none: exit 2 with one line saying so.
        for k, (sets, needle) in enumerate([
                (["device=cuda"], "fashion_mnist_mlp.yaml: device: cuda"),
                (["distributed.algorithm=nccl"], "distributed.algorithm: nccl"),
                (["precision=bf16", "layout=nhwc"],
                 "fashion_mnist_mlp.yaml: layout: nhwc needs a GPU"),
                (["rnn=cudnn"], "fashion_mnist_mlp.yaml: rnn: cudnn needs a GPU"),
                (["train.cuda_graph=on"],
                 "train.cuda_graph: on, but the cpu backend records no graphs")]):
            rc, out, err = train(f"bad_gpu{k}", 2, sets)
            check(rc == 2, f"{sets} without a GPU: exit {rc}, expected 2")
            one_error_line(err, needle)

def case_missing_data():
    rc, out, err = train("missing", 2, ["data.train=/nonexistent/train.h5"])
    check(rc == 2, f"missing file: exit {rc}, expected 2")
    one_error_line(err, "fashion_mnist_mlp.yaml: data.train: /nonexistent/train.h5: no such file")
    # A file that is there but refused names the config and the key too (it named the file
    # alone: "DIR: not an HDF5 file").
    rc, out, err = train("missing", 2, [f"data.val={ARGS.data}"])
    check(rc == 2, f"a directory as data.val: exit {rc}, expected 2")
    one_error_line(err, f"fashion_mnist_mlp.yaml: data.val: {ARGS.data}: not an HDF5 file")


def idx_file(name, labels, classes):
    """e2e-runs/NAME.h5 of len(labels) 28x28 images, converted from IDX files written here by
    hpctrain-data idx --classes CLASSES."""
    prefix = os.path.join(ARGS.build, "e2e-runs", name)
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    n = len(labels)
    with gzip.open(prefix + "-images.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(range(256)) * (n * 784 // 256)
                + bytes(n * 784 % 256))
    with gzip.open(prefix + "-labels.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
    subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "idx", "--images",
                    prefix + "-images.gz", "--labels", prefix + "-labels.gz", "--out",
                    prefix + ".h5", "--classes", str(classes)], check=True)
    return prefix + ".h5"


def case_more_ranks_than_samples():
    out = idx_file("tiny", [1, 2], 10)
    rc, _, err = train("tiny", 3, [f"data.train={out}", "data.val=", "data.test="])
    check(rc == 2, f"3 ranks on 2 samples: exit {rc}, expected 2")
    one_error_line(err, out, "3 ranks")
    rc, _, err = train("tiny_batch", 1, [f"data.train={out}", "data.val=", "data.test="])
    check(rc == 2, f"batch 64 on 2 samples: exit {rc}, expected 2")
    one_error_line(err, f"train.batch_size: 64 on 1 rank is larger than the 2 samples of {out}")
    # A batch beyond what the plan's arithmetic takes (2^30) is the key's range, and one
    # within it but beyond the data is the data's size: exit 2, not an internal error.
    for batch, words in (("1073741825", "expected an integer <= 1073741824"),
                         ("1073741824", "is larger than the 2 samples")):
        rc, _, err = train("tiny_batch", 2, [f"data.train={out}", "data.val=", "data.test=",
                                             f"train.batch_size={batch}"])
        check(rc == 2, f"batch {batch}: exit {rc}, expected 2")
        one_error_line(err, "train.batch_size", words)
    # One class: nothing to learn (it trained to accuracy 1.0).
    one = idx_file("tiny1", [0] * 64, 1)
    rc, _, err = train("one_class", 1, [f"data.train={one}", "data.val=", "data.test="])
    check(rc == 2, f"a training file of one class: exit {rc}, expected 2")
    one_error_line(err, f"data.train: {one} has 1 class")


def case_killed_rank_ends_job():
    """kill -9 of one rank mid-training must end the whole job promptly."""
    fresh("killed")
    d = ARGS.data
    cmd = ["mpiexec", "-n", "2", hpctrain(), "train", "configs/fashion_mnist_mlp.yaml",
           "--set", f"data.train={d}/train.h5", "--set", "data.val=", "--set", "data.test=",
           "--set", f"run.dir={run_dir('killed')}", "--set", "train.epochs=50",
           "--set", "train.progress_seconds=0.5"]
    p = session(cmd)
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


def case_ending_is_bounded():
    """A rank whose ending hangs once its work is done (MPI_Finalize never returns there, by
    finalize_shim.c) says so after distributed.timeout_seconds and exits with the run's code:
    the job ends with its outputs written, instead of holding its allocation until its time
    limit. Each rank in turn; the other's MPI_Finalize then waits for it, and is bounded
    alike: whichever bound ends first says so (once one rank has ended, mpiexec may end the
    other before its own bound does). Then a rank that never reaches the ranks' wait for each
    other before MPI_Finalize, and an exit handler that never returns, on rank 1.
    A rank ended inside MPI_Finalize or the ranks' wait leaves the job's code to mpiexec: 0,
    or, where it killed the other rank first, 1 or 9 (seen here since the ranks enter
    MPI_Finalize together and their bounds end within a millisecond): what the run's ranks
    say and write is checked, and that the job ends."""
    shim = os.path.join(ARGS.build, "test-shims", "libht_finalize_shim.so")
    sets = [f"data.train={ARGS.data}/val.h5", "data.val=", "data.test=", "train.epochs=1",
            "distributed.timeout_seconds=2"]
    for hung in ("0", "1"):
        t0 = time.time()
        rc, _, err = train(f"ending_{hung}", 2, sets, timeout=120,
                           env={"LD_PRELOAD": shim, "HT_HANG_FINALIZE_RANK": hung})
        took = time.time() - t0
        check(rc in (0, 1, 9), f"rank {hung} hung in MPI_Finalize: exit {rc}")
        check(took < 60, f"rank {hung} hung in MPI_Finalize: the job took {took:.0f} s")
        # MPI_Finalize is bounded by the timeout or 10 s, whichever is shorter.
        warned = [line for line in err.splitlines() if "still in MPI_Finalize" in line]
        check(any("warning: still in MPI_Finalize after 2 s" in line and "exit code 0" in line
                  for line in warned), f"rank {hung} hung in MPI_Finalize: no warning: {err}")
        check(os.path.exists(os.path.join(run_dir(f"ending_{hung}"), "summary.json")),
              "summary.json missing")
    # A rank that never reaches the others' wait at the end: each rank's wait is bounded.
    rc, _, err = train("ending_barrier", 2, sets, timeout=120,
                       env={"LD_PRELOAD": shim, "HT_HANG_BARRIER_RANK": "1"})
    check(rc in (0, 1, 9), f"rank 1 never reached the barrier: exit {rc}")
    check("warning: still waiting for the other ranks to end their work after 2 s "
          "(distributed.timeout_seconds), its work done: this rank ends now with exit code 0"
          in err, f"no warning of the wait: {err}")
    check(os.path.exists(os.path.join(run_dir("ending_barrier"), "summary.json")),
          "summary.json missing")
    rc, _, err = train("ending_exit", 2, sets, timeout=120,
                       env={"LD_PRELOAD": shim, "HT_HANG_AT_EXIT_RANK": "1"})
    check(rc == 0, f"rank 1 hung in an exit handler: exit {rc}, expected 0")
    check("[rank 1] warning: still in the libraries' exit handlers after 2 s" in err,
          f"no warning of rank 1: {err}")
    # A timeout past what the clocks hold is none: the ranks end as usual (a wait of 1e10 s
    # ended at once, and every rank cut its own ending short).
    rc, _, err = train("ending_never", 2, sets[:-1] + ["distributed.timeout_seconds=1e10"])
    check(rc == 0 and "still" not in err, f"timeout 1e10: exit {rc}: {err}")


def case_finalize_over_tcp():
    """MPICH 4.0's UCX transport closes its connections in MPI_Finalize and then waits for
    every rank without serving them: over TCP, a rank that entered MPI_Finalize later than
    another could wait for that one's acknowledgement until distributed.timeout_seconds
    (600 s; seen on a machine without UCX's cma transport, and here in about half the runs
    of UCX over TCP alone). The ranks now wait for each other just before it, which makes
    two ranks safe even when one enters MPI_Finalize a second late (finalize_shim.c): each
    of four such runs ends at once with exit 0."""
    shim = os.path.join(ARGS.build, "test-shims", "libht_finalize_shim.so")
    sets = [f"data.train={ARGS.data}/val.h5", "data.val=", "data.test=", "train.epochs=1"]
    for attempt in range(4):
        name = f"finalize_tcp_{attempt}"
        t0 = time.time()
        try:
            rc, _, err = train(name, 2, sets, timeout=30,
                               env={"LD_PRELOAD": shim, "HT_LATE_FINALIZE_RANK": "0",
                                    "UCX_TLS": "tcp"})
        except subprocess.TimeoutExpired:
            fail(f"run {attempt}: still ending 30 s after it started (MPI_Finalize over TCP)")
        check(rc == 0 and "still" not in err, f"run {attempt}: exit {rc}: {err}")
        check(time.time() - t0 < 20, f"run {attempt} took {time.time() - t0:.0f} s")
        check(os.path.exists(os.path.join(run_dir(name), "summary.json")),
              f"run {attempt}: summary.json missing")


def case_cli():
    h = subprocess.run([hpctrain(), "--help"], capture_output=True, text=True)
    check(h.returncode == 0 and "train CONFIG.yaml" in h.stdout, "hpctrain --help")
    h = subprocess.run([hpctrain(), "train", "--help"], capture_output=True, text=True)
    check(h.returncode == 0 and "--set" in h.stdout, "hpctrain train --help")
    # Under mpiexec a bad command line and --help come once, from rank 0, not once a rank.
    p = subprocess.run(["mpiexec", "-n", "2", hpctrain(), "train",
                        "configs/fashion_mnist_mlp.yaml", "--bogus"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 2, f"train --bogus on 2 ranks: exit {p.returncode}")
    one_error_line(p.stderr, "train: unknown option '--bogus'")
    p = subprocess.run(["mpiexec", "-n", "2", hpctrain(), "train", "--help"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and p.stdout.count("usage: ") == 1,
          f"train --help on 2 ranks: exit {p.returncode}, {p.stdout.count('usage: ')} usages")
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
    # A config's extension in capitals is a config's (it was taken for a data file).
    upper = os.path.join(ARGS.build, "e2e-runs", "MLP.YAML")
    os.makedirs(os.path.dirname(upper), exist_ok=True)
    shutil.copy("configs/fashion_mnist_mlp.yaml", upper)
    c = subprocess.run([hpctrain(), "inspect", upper, "--input", "1x28x28", "--classes", "10"],
                       capture_output=True, text=True)
    check(c.returncode == 0 and "152,650 parameters" in c.stdout, "inspect X.YAML: " + c.stderr)
    # an embedding's token data (its vocabulary, a label per step) only the data file gives
    c = subprocess.run([hpctrain(), "inspect", "configs/fortunes_char_lstm.yaml", "--input",
                        "16", "--classes", "95"], capture_output=True, text=True)
    one_error_line(c.stderr, "fortunes_char_lstm.yaml: model.layers: embedding", "without --input")
    check(c.returncode == 2, f"inspect --input of a model with an embedding: exit {c.returncode}")
    # an input whose model cannot fit in memory: exit 2, not std::bad_alloc
    for dims, words in (("100000x100000x100000", "more than 2^31"),
                        ("1x40000x40000", "needs at least")):
        c = subprocess.run([hpctrain(), "inspect", "configs/fashion_mnist_mlp.yaml", "--input",
                            dims, "--classes", "10"], capture_output=True, text=True)
        one_error_line(c.stderr, dims, words)
        check(c.returncode == 2, f"inspect with --input {dims}: exit {c.returncode}")
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
    # Out of range: one line giving the range.
    for opt, low, before in (("--classes", 2, []),
                             ("--batch", 1, ["--classes", "10", "--time"]),
                             ("--ranks", 1, ["--classes", "10"])):
        for value in (str(low - 1), "99999999999"):
            c = subprocess.run([hpctrain(), "inspect", "configs/fashion_mnist_mlp.yaml",
                                "--input", "1x28x28"] + before + [opt, value],
                               capture_output=True, text=True)
            check(c.returncode == 2, f"inspect {opt} {value}: exit {c.returncode}")
            one_error_line(c.stderr,
                           f"{opt}: expected an integer from {low} to 999999, got '{value}'")
    # A config read from a pipe (/dev/stdin, <(envsubst < t.yaml)) is read once: its text
    # was taken by the check for an HDF5 signature ("config file is empty").
    with open("configs/fashion_mnist_mlp.yaml") as f:
        c = subprocess.run([hpctrain(), "config", "/dev/stdin", "--get", "model.hidden"],
                           input=f.read(), capture_output=True, text=True)
    check(c.returncode == 0 and c.stdout.strip() == "[192]", "config from a pipe: " + c.stderr)
    # config --list: a line per key, with the layer types' keys and the strategies.
    c = subprocess.run([hpctrain(), "config", "--list"], capture_output=True, text=True)
    check(c.returncode == 0 and "\ntrain.epochs " in c.stdout
          and "model.layers[conv2d].kernel " in c.stdout and "allreduce, average" in c.stdout,
          "config --list: " + c.stdout + c.stderr)
    c = subprocess.run([hpctrain(), "config", "--lst"], capture_output=True, text=True)
    check(c.returncode == 2 and len(c.stderr.strip().splitlines()) == 1,
          "config with a bad option: " + c.stderr)
    # bench options: malformed or out of range is one line naming the option (--step-ms inf
    # waited forever; 4096abc was read as 4096; min above max measured nothing).
    unused = ["--dir", "bench-unused.tmp"]
    for args, option in ((["checkpoint", "--step-ms", "inf"] + unused, "--step-ms"),
                         (["checkpoint", "--bytes", "4096abc"] + unused, "--bytes"),
                         (["checkpoint", "--reps", "0"] + unused, "--reps"),
                         (["allreduce", "--min-bytes", "1000000", "--max-bytes", "1000"],
                          "--min-bytes"),
                         (["allreduce", "--min-bytes", "4097"], "--min-bytes"),
                         (["allreduce", "--chunk-bytes", "1001"], "--chunk-bytes")):
        c = subprocess.run([hpctrain(), "bench"] + args, capture_output=True, text=True,
                           timeout=30)
        check(c.returncode == 2 and len(c.stderr.strip().splitlines()) == 1
              and option in c.stderr, f"bench {' '.join(args)}: exit {c.returncode}, {c.stderr}")
        check(not os.path.exists("bench-unused.tmp"), "bench checkpoint made its directory")
    # init's --config without its NAME was called an unknown option.
    c = subprocess.run([hpctrain(), "init", "init-unused.tmp", "--config"], capture_output=True,
                       text=True, timeout=30)
    check(c.returncode == 2 and not os.path.exists("init-unused.tmp"), f"init --config: {c}")
    one_error_line(c.stderr, "--config needs a NAME")
    # A key or path holding a newline or an escape sequence: still one error line.
    for args in (["config", "configs/fashion_mnist_mlp.yaml", "--set", "run.na\nme=x"],
                 ["inspect", "/no\x1b[31m\nfile.h5"]):
        c = subprocess.run([hpctrain()] + args, capture_output=True, text=True, timeout=30)
        check(c.returncode == 2 and c.stderr.count("\n") == 1 and "\x1b" not in c.stderr,
              f"{args}: exit {c.returncode}, {c.stderr!r}")
    # An empty --checkpoint (an unset shell variable) meant the newest checkpoint, unsaid.
    for command in ("eval", "generate", "export"):
        c = subprocess.run([hpctrain(), command, "configs/fashion_mnist_mlp.yaml",
                            "--checkpoint="], capture_output=True, text=True, timeout=30)
        check(c.returncode == 2, f"{command} --checkpoint=: exit {c.returncode}")
        one_error_line(c.stderr, f"{command}: --checkpoint: expected a checkpoint path")
    # bench checkpoint writes in a folder of its own inside --dir and removes only that (it
    # removed --dir itself, with whatever the user kept there).
    fresh("cli")
    scratch = os.path.join(run_dir("cli"), "bench-scratch")
    os.makedirs(scratch)
    with open(os.path.join(scratch, "keep.txt"), "w") as f:
        f.write("mine\n")
    c = subprocess.run([hpctrain(), "bench", "checkpoint", "--bytes", "4096", "--reps", "1",
                        "--step-ms", "0", "--dir", scratch], capture_output=True, text=True,
                       timeout=120)
    check(c.returncode == 0 and os.listdir(scratch) == ["keep.txt"],
          f"bench checkpoint --dir: exit {c.returncode}, left {os.listdir(scratch)}, {c.stderr}")
    # ... and after a stop signal too (its folder was left, hundreds of MB), ending by it.
    p = subprocess.Popen([hpctrain(), "bench", "checkpoint", "--bytes", "4096", "--reps",
                          "100000", "--step-ms", "20", "--dir", scratch])
    time.sleep(1)
    p.send_signal(signal.SIGTERM)
    check(p.wait(timeout=60) == -signal.SIGTERM and os.listdir(scratch) == ["keep.txt"],
          f"bench checkpoint stopped: exit {p.returncode}, left {os.listdir(scratch)}")
    # A write that ends within the step (--step-ms 50) is timed, not 0 s; the file is JSON.
    out = os.path.join(run_dir("cli"), "bench-checkpoint.json")
    c = subprocess.run([hpctrain(), "bench", "checkpoint", "--bytes", "4096", "--reps", "2",
                        "--step-ms", "50", "--dir", scratch, "--out", out],
                       capture_output=True, text=True, timeout=120)
    check(c.returncode == 0, f"bench checkpoint --out: exit {c.returncode}, {c.stderr}")
    with open(out) as f:
        doc = json.load(f, parse_constant=lambda x: fail(f"{out} holds {x}"))
    check(all(t > 0 for t in doc["async_write_s"]), f"async writes timed {doc['async_write_s']}")
    check(doc["bytes"] == 4096 and isinstance(doc["bytes"], int), f"bytes: {doc['bytes']!r}")
    # A usage error's usage goes to stderr; an unknown option is called unknown (bench said
    # "needs a value"); a missing --format is called missing.
    for args, needle in ((["config"], "usage: hpctrain config"), ([], "usage: hpctrain <command>")):
        c = subprocess.run([hpctrain()] + args, capture_output=True, text=True, timeout=30)
        check(c.returncode == 2 and c.stdout == "" and needle in c.stderr,
              f"{args}: exit {c.returncode}, stdout {c.stdout[:80]!r}")
    for args, needle in ((["bench", "checkpoint", "--bogus"], "unknown option '--bogus'"),
                         (["bench", "allreduce", "--bogus"], "unknown option '--bogus'"),
                         (["bench", "checkpoint", "--bytes", "9"], "expected a multiple of 8"),
                         (["export", "configs/fashion_mnist_mlp.yaml", "--out", "x.h5"],
                          "export: --format F is required")):
        c = subprocess.run([hpctrain()] + args, capture_output=True, text=True, timeout=30)
        check(c.returncode == 2, f"{args}: exit {c.returncode}")
        one_error_line(c.stderr, needle)
    # A set-up error of bench allreduce, the same on every rank: one line (it was one per rank).
    c = subprocess.run(["mpiexec", "-n", "2", hpctrain(), "bench", "allreduce", "--algorithms",
                        "nccl", "--max-bytes", "8192"], capture_output=True, text=True,
                       timeout=60)
    check(c.returncode == 2, f"bench allreduce --algorithms nccl on CPU: exit {c.returncode}")
    one_error_line(c.stderr, "--algorithms: none of them applies here")
    # Outputs and --dir are checked before the benchmark: exit 2, nothing made.
    missing = os.path.join(run_dir("cli"), "missing", "deeper")
    for cmd, words in (
            (["bench", "checkpoint", "--bytes", "4096", "--dir", missing], "not a directory"),
            (["bench", "checkpoint", "--bytes", "4096", "--out", os.path.join(missing, "x.json")],
             "does not exist"),
            (["bench", "allreduce", "--max-bytes", "8192", "--out", scratch], "is a directory")):
        c = subprocess.run([hpctrain()] + cmd, capture_output=True, text=True, timeout=120)
        check(c.returncode == 2 and not c.stdout, f"{cmd}: exit {c.returncode}, {c.stdout}")
        one_error_line(c.stderr, words)
    check(not os.path.exists(os.path.dirname(missing)), "bench checkpoint made --dir")


def case_slurm_ids_in_summary():
    """summary.json's `slurm` holds the ids Slurm set for the job: the ids as integers, the
    job and cluster names as strings even when they are digits (a job named "42"). One rank
    started without mpiexec, as `srun` starts each (mpiexec would read the variables)."""
    fresh("slurm_ids")
    env = dict(os.environ, SLURM_JOB_ID="99", SLURM_RESTART_COUNT="1", SLURM_JOB_NAME="42",
               SLURM_CLUSTER_NAME="7")
    p = subprocess.run([hpctrain(), "train", "configs/fashion_mnist_mlp.yaml",
                        f"--set=run.dir={run_dir('slurm_ids')}", "--set=train.epochs=1",
                        f"--set=data.train={ARGS.data}/val.h5", "--set=data.val=",
                        "--set=data.test="], capture_output=True, text=True, timeout=120,
                       env=env)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    with open(os.path.join(run_dir("slurm_ids"), "summary.json")) as f:
        slurm = json.load(f)["slurm"]
    want = {"job_id": 99, "restart_count": 1, "job_name": "42", "cluster": "7"}
    check(slurm == want, f"summary.json slurm {slurm}, expected {want}")


def case_config_resolved():
    """`hpctrain config CONFIG [--set ...]` prints the config a run would use, and --get one
    key's value (jobs/launch.sh finds run.dir with it): defaults resolved, overrides
    applied, any YAML the loader takes (flow style, CRLF line ends, quotes holding '#');
    the printed config loads back to itself; data files need not exist; an unknown key
    or a bad config is exit 2 with one line."""
    def config(*args):
        return subprocess.run([hpctrain(), "config"] + list(args), capture_output=True,
                              text=True, timeout=60)
    mlp = "configs/fashion_mnist_mlp.yaml"
    for sets, want in (([], "runs/fashion_mnist_mlp"), (["--set", "run.name=x"], "runs/x"),
                       (["--set=run.dir=/a b/c", "--set", "data.train=/nonexistent.h5"],
                        "/a b/c")):
        c = config(mlp, *sets, "--get", "run.dir")
        check(c.returncode == 0 and c.stdout == want + "\n",
              f"config {sets} --get run.dir: exit {c.returncode}, {c.stdout!r} {c.stderr}")
    fresh("config_resolved")
    folder = run_dir("config_resolved")
    os.makedirs(folder)
    flow = os.path.join(folder, "flow.yaml")
    with open(flow, "w", newline="") as f:
        f.write('run: {name: n, dir: "d # not a comment"}\r\ndata: {train: none.h5}\r\n'
                'model: {preset: mlp}\r\n')
    for key, want in (("run.dir", "d # not a comment"), ("model.hidden", "[192]"),
                      ("distributed.strategy", "allreduce")):
        c = config(flow, "--get", key)
        check(c.returncode == 0 and c.stdout == want + "\n",
              f"config flow.yaml --get {key}: exit {c.returncode}, {c.stdout!r} {c.stderr}")
    c = config(flow, "--get", "optimizer")
    check(c.returncode == 0 and c.stdout.startswith("{name: sgd"), f"--get optimizer: {c.stdout}")
    whole = config(mlp, "--set", "train.epochs=7")
    check(whole.returncode == 0 and "epochs: 7" in whole.stdout, f"config: {whole.stderr}")
    again = os.path.join(folder, "again.yaml")
    with open(again, "w") as f:
        f.write(whole.stdout)
    c = config(again)
    body = [x for x in whole.stdout.splitlines() if not x.startswith("#")]
    check(c.returncode == 0 and [x for x in c.stdout.splitlines() if not x.startswith("#")]
          == body, "the printed config does not load back to itself")
    for args, needle in (([mlp, "--get", "run.nope"], "--get run.nope: no such key"),
                         ([mlp, "--get", "optimizer.beta1"], "does not apply to this config"),
                         ([mlp, "--get"], "'--get'"),
                         ([mlp, "--get", "run.dir", "--get", "run.name"], "'--get'"),
                         ([mlp, "--set", "train.epoch=2"], "train.epoch"),
                         ([os.path.join(folder, "none.yaml")], "none.yaml"),
                         (["--frob"], "expected --list, --markdown or CONFIG.yaml")):
        c = config(*args)
        check(c.returncode == 2 and not c.stdout, f"config {args}: exit {c.returncode}")
        one_error_line(c.stderr, needle)


def case_hybrid_cpu_and_gpu_ranks():
    """cpu_ranks among GPU ranks (the classic study's hybrid attempt): rank 0 on the GPU,
    rank 1 on the CPU, distributed.algorithm auto. The ranks agree on host collectives (a
    NCCL build hung here before), and the run ends. Skipped (77) without a CUDA device."""
    version = subprocess.run([hpctrain(), "--version"], capture_output=True, text=True).stdout
    if "cuda" not in version.split("backends:")[1] or "CUDA devices: 0" in version:
        print("SKIP: no CUDA device visible to hpctrain")
        raise SystemExit(77)
    s = expect_ok("hybrid", 2, ["device=cuda", "cpu_ranks=[1]", "train.epochs=1",
                                f"data.train={ARGS.data}/test.h5",
                                "distributed.timeout_seconds=60"])
    check(s["algorithm"] == "ring", f"hybrid ranks exchanged by {s['algorithm']}, not ring")


def case_cuda_graph_bit_identical():
    """train.cuda_graph on gives the parameters of eager steps, bit for bit (deterministic):
    the CNN on 1 GPU in float32 and on 2 ranks sharing it in bf16, and the LSTM (cuDNN's
    RNN where it runs) on 1 GPU in float32. Skipped (77) without a CUDA device."""
    version = subprocess.run([hpctrain(), "--version"], capture_output=True, text=True).stdout
    if "cuda" not in version.split("backends:")[1] or "CUDA devices: 0" in version:
        print("SKIP: no CUDA device visible to hpctrain")
        raise SystemExit(77)
    base = ["run.deterministic=true", "train.epochs=1", "device=cuda",
            f"data.train={ARGS.data}/test.h5", "checkpoint.every_seconds=0"]
    for ranks, precision, model in ((1, "fp32", "cnn"), (2, "bf16", "cnn"), (1, "fp32", "lstm")):
        sets = base + [f"precision={precision}"]
        config = f"configs/fashion_mnist_{model}.yaml"
        eager = expect_ok(f"graph_off_{model}_{ranks}", ranks, sets + ["train.cuda_graph=off"],
                          config=config)
        graph = expect_ok(f"graph_on_{model}_{ranks}", ranks, sets + ["train.cuda_graph=on"],
                          config=config)
        check(eager.get("cuda_graph_steps") is None, "cuda_graph_steps without graphs")
        check(graph["cuda_graph_steps"] > 0, f"no step replayed: {graph['cuda_graph_steps']}")
        check(graph["params_sha256"] == eager["params_sha256"],
              f"{model}, {ranks} rank(s), {precision}: graph steps gave other parameters than "
              "eager ones")
