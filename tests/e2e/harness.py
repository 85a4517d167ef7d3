"""The harness of the end-to-end tests: the options (--build, --data), running
`mpiexec -n k hpctrain train` with the test data and a run directory per case, reading
its outputs, and the checks every case file (cases_*.py) uses.
"""
import argparse
import csv
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

# Filled in by e2e.py's main before a case runs.
ARGS = argparse.Namespace(build=None, data=None, case=None)


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


_FRESH = set()  # run directory names emptied by this process


def fresh(name):
    shutil.rmtree(run_dir(name), ignore_errors=True)
    _FRESH.add(name)


def prepared(name):
    """Run directory `name` was set up by the case (or by the process that started it):
    its runs start in it as it is."""
    _FRESH.add(name)


def train_cmd(name, ranks, sets, config="configs/fashion_mnist_mlp.yaml", resume=None):
    """The command of a training run in run directory `name`. The first run of a name in
    this process starts from an empty directory, unless the case prepared it after fresh()
    or said so with prepared(): a run directory left by an earlier test run would make
    `train` find its run complete, and the case would check that run's outputs instead of
    this binary's."""
    if name not in _FRESH:
        fresh(name)
    d = ARGS.data
    cmd = ["mpiexec", "-n", str(ranks), hpctrain(), "train", config,
           "--set", f"data.train={d}/train.h5", "--set", f"data.val={d}/val.h5",
           "--set", f"data.test={d}/test.h5", "--set", f"run.dir={run_dir(name)}",
           "--set", "train.progress_seconds=0"]
    # HPCTRAIN_E2E_SETS (key=value ..., before the case's own): the cases with other
    # settings, such as train.cuda_graph=auto on a GPU machine.
    for s in os.environ.get("HPCTRAIN_E2E_SETS", "").split() + list(sets):
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
    # The output goes to files beside the run directory as it comes, so that a run cut short
    # (its timeout, a TERM to the case) still shows how far it got; the run is a session of
    # its own, whose ranks are killed with it.
    paths = [run_dir(name) + ".stdout", run_dir(name) + ".stderr"]
    os.makedirs(os.path.dirname(paths[0]), exist_ok=True)
    finished = False
    try:
        with open(paths[0], "w") as out, open(paths[1], "w") as err:
            p = session(cmd, stdout=out, stderr=err, env=dict(os.environ, **(env or {})))
            try:
                p.wait(timeout=timeout)
                finished = True
            except subprocess.TimeoutExpired:
                dump_stacks(f"{name}: over its {timeout} s")
                raise
            finally:
                if not finished:
                    end_sessions()
                    p.wait()
    finally:
        texts = []
        for path in paths:
            with open(path) if os.path.exists(path) else open(os.devnull) as f:
                texts.append(f.read())
        if not finished:
            print("(the run was cut short: its output so far follows)", file=sys.stderr)
        print(texts[0])
        print(texts[1], file=sys.stderr)
    return p.returncode, texts[0], texts[1]


def documented_names(heading):
    """The names in the first column of the first table after `heading` in
    docs/contracts.md (the outward contract), in order."""
    with open("docs/contracts.md") as f:
        lines = f.read().splitlines()
    names = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("|"):
            names += re.findall(r"`([^`]+)`", line.split("|")[1])
        elif names:
            break
    return names


def summary(name):
    with open(os.path.join(run_dir(name), "summary.json")) as f:
        return json.load(f)


def metrics_rows(name):
    with open(os.path.join(run_dir(name), "metrics.csv")) as f:
        return list(csv.DictReader(f))


def check_rows_match(name, ref):
    """metrics.csv of run `name`, stopped or killed and resumed, against that of the
    uninterrupted run `ref`: every epoch's loss, accuracy and samples (samples_per_second x
    time_train_s) are the whole epoch's, also for an epoch resumed in its middle, whose
    checkpoint carried its figures so far."""
    rows, want = metrics_rows(name), metrics_rows(ref)
    check([r["epoch"] for r in rows] == [w["epoch"] for w in want],
          f"{name}: epochs {[r['epoch'] for r in rows]} in metrics.csv")
    for r, w in zip(rows, want):
        for key in ("train_loss", "train_accuracy"):
            got, expected = float(r[key]), float(w[key])
            check(abs(got - expected) <= 1e-7 * abs(expected),
                  f"{name}: epoch {r['epoch']} {key} {got}, uninterrupted {expected}")
        got, expected = (float(x["samples_per_second"]) * float(x["time_train_s"])
                         for x in (r, w))
        check(abs(got - expected) < 0.5, f"{name}: epoch {r['epoch']} counted {got:.1f} "
              f"samples, the uninterrupted run {expected:.1f}")


def expect_ok(name, ranks, sets, **kw):
    rc, out, err = train(name, ranks, sets, **kw)
    check(rc == 0, f"{name}: exit code {rc}")
    return summary(name)


def expect_staged(name, ranks, sets, **kw):
    """expect_ok of a run with HPCTRAIN_STAGE_CPU=1, which must say that it took the path of
    device memory (a run that silently did not would compare the in-place path with itself)."""
    rc, out, _ = train(name, ranks, sets, env={"HPCTRAIN_STAGE_CPU": "1", **kw.pop("env", {})},
                       **kw)
    check(rc == 0, f"{name}: exit code {rc}")
    check("(memory staged as on a GPU)" in out, f"{name}: the run did not stage its memory")
    return summary(name)


def one_error_line(err, *needles):
    """stderr holds one error line, with each of `needles`, and nothing else but hpctrain's
    warnings and, for a job that ended with MPI_Abort (a failure at run time, exit 1),
    MPICH's banner saying so (no second line of the same error)."""
    lines = [l for l in err.splitlines() if l.strip() and "warning: " not in l and not (
        l.startswith("Abort(") and "application called MPI_Abort" in l)]
    check(len(lines) == 1 and "error" in lines[0].lower(),
          f"expected one error line, got {len(lines)}: {lines}")
    for n in needles:
        check(n in lines[0], f"error line lacks '{n}': {lines[0]}")


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


def checkpoints(name):
    return sorted(glob.glob(os.path.join(run_dir(name), "checkpoints", "ckpt-*.h5")))


def newest_step(name):
    files = checkpoints(name)
    return int(os.path.basename(files[-1])[5:17]) if files else -1


DET = ["run.deterministic=true", "train.epochs=4", "data.val=", "data.test="]


def uninterrupted_sha(name):
    """The parameters of an uninterrupted DET run, in run directory `name` (one per test:
    ctest -j runs tests side by side)."""
    fresh(name)
    return expect_ok(name, 2, DET + ["checkpoint.every_steps=40"])["params_sha256"]


def mpi_rank(pid):
    """The MPI rank of process `pid` (PMI_RANK in its environment), or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for e in env:
        if e.startswith(b"PMI_RANK="):
            return int(e[9:])
    return None


_SESSIONS = []  # processes started in sessions of their own (session())


def session(cmd, **popen_args):
    """Popen of `cmd` in a session of its own (so that a signal to the case's process group,
    a terminal's Ctrl-C, does not reach it); by default stdout and stderr together as text.
    Whatever of its process group still runs when the case ends, however it ends, is killed
    (end_sessions)."""
    popen_args = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True,
                  **popen_args}
    p = subprocess.Popen(cmd, start_new_session=True, **popen_args)
    _SESSIONS.append(p)
    return p


_JOB_COMMANDS = {"hpctrain", "mpiexec", "mpiexec.hydra", "hydra_pmi_proxy"}


def job_pids():
    """PIDs of the processes of the case's jobs still running (mpiexec, its proxies, the
    ranks): descendants of this process, by their command name."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(entry), comm))
    found, todo = [], [os.getpid()]
    while todo:
        for pid, comm in children.get(todo.pop(), []):
            todo.append(pid)
            if comm in _JOB_COMMANDS:
                found.append(pid)
    return sorted(found)


def dump_stacks(why):
    """With HPCTRAIN_E2E_STACKS, the path of eu-stack (device.sh sets it), prints every
    thread's stack of each process of the case's jobs still running to stderr: where a case
    that hangs is waiting. Without it, nothing."""
    tool = os.environ.get("HPCTRAIN_E2E_STACKS")
    if not tool:
        return
    pids = job_pids()
    if pids:
        print(f"== {why}: the stacks of the jobs still running follow", file=sys.stderr,
              flush=True)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        print(f"== stacks of pid {pid}: {cmdline}", file=sys.stderr, flush=True)
        try:
            subprocess.run([tool, "-p", str(pid)], stdout=sys.stderr, stderr=subprocess.STDOUT,
                           timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"({tool}: {e})", file=sys.stderr, flush=True)


def end_sessions():
    """Kills the process groups of session(), whether or not their leader has exited (a rank
    may outlive mpiexec): a case that failed, or was cut short by a timeout's TERM, leaves no
    ranks behind (on a GPU machine they would go on using the GPU under the next
    measurement)."""
    for p in _SESSIONS:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_and_resume(name, sets, should_kill, config="configs/fashion_mnist_mlp.yaml", ranks=2,
                    env=None):
    """Starts a run on `ranks` ranks, kill -9s the rank should_kill(name) names when it
    names one, then resumes with --resume auto until it finishes; returns the final
    summary; `env` adds environment variables to the killed run. The resumed run must
    have trained the steps after the checkpoint and no more
    (samples_per_second x time_train_s; not under async, whose workers count batches):
    a resume that started over from step 0 would give the same parameters in
    deterministic mode."""
    fresh(name)
    p = session(train_cmd(name, ranks, sets, config), env=dict(os.environ, **(env or {})))
    victim = None
    deadline = time.time() + 300
    while p.poll() is None and time.time() < deadline:
        victim = should_kill(name)
        if victim is not None:
            pids = {mpi_rank(pid): pid for pid in rank_pids(run_dir(name))}
            if victim in pids and len(pids) == ranks:
                os.kill(pids[victim], signal.SIGKILL)
                break
        time.sleep(0.002)
    out, _ = p.communicate(timeout=120)
    check(victim is not None and p.returncode != 0,
          f"{name}: the run was not killed (exit {p.returncode}):\n{out}")
    committed = newest_step(name)
    print(f"{name}: killed rank {victim}; newest committed checkpoint: step {committed}")
    rc, out, err = train(name, ranks, sets, config=config, resume="auto")
    check(rc == 0, f"{name}: resumed run failed with exit {rc}")
    check(f"(step {committed}," in out and ("resuming at step" in out or
                                          "resuming after the last epoch" in out),
          f"{name}: did not resume from step {committed}")
    s = summary(name)
    m = re.search(r"(\d+) steps/epoch", out)
    if s["strategy"] != "async":
        check(m is not None, f"{name}: no 'steps/epoch' in the resumed run's output")
        left = s["epochs_completed"] * int(m.group(1)) - committed
        trained = s["samples_per_second"] * s["time_train_s"]
        check(abs(trained - left * s["global_batch"]) < 1,
              f"{name}: the resumed run trained {trained:.1f} samples, not the {left} steps "
              f"of {s['global_batch']} after step {committed}")
    return s


def h5_values(path, dataset, start, count):
    out = subprocess.run(["h5dump", "-d", dataset, "-s", str(start), "-c", str(count), "-y",
                          "-w", "0", path], capture_output=True, text=True, check=True).stdout
    body = out[out.index("DATA {"):]
    return [float(x) for x in body[body.index("{") + 1:body.index("}")].replace(",", " ").split()]


class FakeRapl:
    """A powercap class folder (for HPCTRAIN_POWERCAP_ROOT) of the case's own (`name`) whose
    package and DRAM counters count at fixed powers of wall-clock time: a thread replaces
    each counter file every 10 ms (a rename, so a reader sees one whole value)."""

    def __init__(self, name, watts=(40.0, 4.0)):
        root = os.path.join(ARGS.build, "e2e-runs", f"powercap-{name}")
        self.root, self.watts, self.t0 = root, watts, time.monotonic()
        shutil.rmtree(root, ignore_errors=True)
        self.zones = [os.path.join(root, z) for z in ("intel-rapl:0", "intel-rapl:0:0")]
        for zone, name in zip(self.zones, ("package-0", "dram")):
            os.makedirs(zone)
            for f, text in (("name", name), ("max_energy_range_uj", "262143328850")):
                with open(os.path.join(zone, f), "w") as out:
                    out.write(text + "\n")
        self._write()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _write(self):
        elapsed = time.monotonic() - self.t0
        for zone, w in zip(self.zones, self.watts):
            tmp = os.path.join(zone, ".energy_uj")
            with open(tmp, "w") as out:
                out.write(f"{int(w * elapsed * 1e6)}\n")
            os.replace(tmp, os.path.join(zone, "energy_uj"))

    def _run(self):
        while not self.stop.wait(0.01):
            self._write()

    def close(self):
        self.stop.set()
        self.thread.join()
