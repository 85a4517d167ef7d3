"""`hpctrain study STUDY.yaml`: runs every variant of a study R times, one after the other,
with mpiexec (or one srun step each inside a Slurm allocation), then measures the
all-reduce of each rank count, and writes study.json, study.csv, study.md and the plots
into the study directory. Run again, it keeps the finished runs and resumes the
unfinished one from its checkpoint. Before anything runs (and for --dry-run) it checks
each variant's training config with `hpctrain inspect`. docs/study.md describes the
files."""

import argparse
import datetime
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time

from hpctrain_tools import aggregate, report, scaling, studyfile
from hpctrain_tools.study_model import bench_algorithm, bench_bytes, build_model

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_STOPPED = 0, 1, 2, 75
MARKER = "study-run.json"
INSPECT_TIMEOUT_S = 300


class Stopped(Exception):
    """A signal asked the study to stop."""


def log(msg):
    print(f"study: {msg}", flush=True)


def launcher_prefix(study, ranks):
    """The launcher words for `ranks` ranks."""
    kind = study["launcher"]
    if kind == "auto":
        kind = "srun" if os.environ.get("SLURM_JOB_ID") else "mpiexec"
    if kind == "srun":
        return ["srun", f"--mpi={os.environ.get('HPCTRAIN_SRUN_MPI', 'pmi2')}", "--wait=60",
                "-n", str(ranks)]
    return ["mpiexec", "-n", str(ranks)]


def run_sets(study, variant, repeat, run_dir, cli_sets):
    """The --set list of one run: the driver's defaults, the study's, the variant's and the
    command line's (later ones win), then the run directory, which is the driver's, with
    the run's checkpoints in it (a checkpoint.dir of the config was every run's: the later
    runs resumed the first one's final model and trained nothing)."""
    sets = [f"run.seed={study['seed'] + repeat}", "train.step_timing=true",
            "checkpoint.at_epoch_end=true"]
    sets += study["set"] + variant["set"] + cli_sets
    # Quoted (a JSON string is a YAML one): a path with ' #' or ': ' stays one string.
    name = f"{study['name']}-{variant['name']}-r{repeat}"
    sets += [f"run.dir={json.dumps(run_dir, ensure_ascii=False)}",
             f"run.name={json.dumps(name, ensure_ascii=False)}", 'checkpoint.dir=""']
    return sets


def train_command(study, hpctrain, variant, repeat, run_dir, cli_sets):
    """The command of one run, as --dry-run prints it and the driver starts it."""
    cmd = launcher_prefix(study, variant["ranks"]) + [
        hpctrain, "train", study["config"], "--resume", "auto"]
    for s in run_sets(study, variant, repeat, run_dir, cli_sets):
        cmd += ["--set", s]
    return cmd


def inspect_error(hpctrain, config, sets, ranks=None):
    """None when `hpctrain inspect CONFIG --set ... [--ranks R]` accepts the training config
    (its keys, values and model, with the input shape read from data.train; and what a run
    on R ranks would refuse for that count), else (exit code, its error line)."""
    cmd = [hpctrain, "inspect", config] + ([] if ranks is None else ["--ranks", str(ranks)])
    for s in sets:
        cmd += ["--set", s]
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           errors="replace", timeout=INSPECT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return EXIT_FAILURE, f"hpctrain inspect gave no answer in {INSPECT_TIMEOUT_S} s"
    except OSError as e:
        return EXIT_FAILURE, f"cannot run {hpctrain} inspect: {e.strerror}"
    if p.returncode == 0:
        return None
    lines = [x.strip() for x in p.stderr.splitlines() if x.strip()]
    line = next((x for x in lines if x.startswith("error: ")),
                lines[-1] if lines else f"hpctrain inspect failed (exit {p.returncode})")
    return p.returncode, line.removeprefix("error: ")


def check_configs(driver):
    """Checks each variant's training config with the --set list its first run will get,
    before anything runs (the later repeats differ in run.dir, run.name and run.seed,
    whose range the study file's check covers). Raises StudyError (exit 2) naming the
    study file and the variant, or --set where the command line's values alone make it
    fail; RuntimeError (exit 1) when hpctrain inspect fails otherwise."""
    study = driver.study
    # Under srun the allocation must hold the largest variant (its step failed only when
    # its turn came, after every run before it).
    tasks = os.environ.get("SLURM_NTASKS", "")
    biggest = max(study["variants"], key=lambda v: v["ranks"])
    if launcher_prefix(study, 1)[0] == "srun" and tasks.isdigit() and \
            biggest["ranks"] > int(tasks):
        raise studyfile.StudyError(
            f"{study['file']}: variant {biggest['name']} runs {biggest['ranks']} ranks, but "
            f"the allocation holds {tasks} tasks (SLURM_NTASKS): ask sbatch for --ntasks="
            f"{biggest['ranks']}")
    for i, v in enumerate(study["variants"]):
        d = driver.run_dir(v, 0)
        failed = inspect_error(driver.hpctrain, study["config"],
                               run_sets(study, v, 0, d, driver.cli_sets), v["ranks"])
        if driver.stop_signal:  # a terminal's Ctrl-C also ended the inspect (exit -2):
            return  # the driver stops before the first run (exit 75)
        if failed is None:
            continue
        rc, line = failed
        if rc != EXIT_USAGE:  # not a refusal: no use asking again which part is at fault
            raise RuntimeError(f"{study['file']}: variants[{i}] ({v['name']}): {line}")
        if driver.cli_sets and inspect_error(driver.hpctrain, study["config"],
                                             run_sets(study, v, 0, d, []), v["ranks"]) is None:
            where = "" if line.startswith("--set ") else "--set: "
        elif inspect_error(driver.hpctrain, study["config"], []) == failed:
            where = f"{study['file']}: config: "
        else:
            where = f"{study['file']}: variants[{i}] ({v['name']}): "
        raise studyfile.StudyError(where + line)


def training_words(cmd):
    """The launcher's `-n R` and the words of a run's command from `train` on, without its
    run.dir and run.name: what must not change for the run to be kept or resumed (the
    launcher, the binary's path and where the study directory lies may)."""
    out = []
    for i in range(len(cmd) - 1):
        if cmd[i] == "train" and cmd[i + 2:i + 4] == ["--resume", "auto"]:
            # Before the binary (cmd[i - 1]): the launcher, whose last -n is the ranks.
            n = [j for j in range(i - 2) if cmd[j] == "-n"]
            out = cmd[n[-1]:n[-1] + 2] if n else []
            cmd = cmd[i:]
            break
    for w in cmd:
        if out and out[-1] == "--set" and w.startswith(("run.dir=", "run.name=")):
            out.pop()
        else:
            out.append(w)
    return out


def config_sha256(path):
    """The SHA-256 of the training config's bytes, kept in each run's marker."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        raise studyfile.StudyError(f"{path}: cannot read: {e.strerror}") from e


def check_commands(driver, jobs, shown_out):
    """A run directory made by another command (the study file, a --set or the study
    directory changed) or from other contents of the training config is neither kept nor
    resumed: StudyError naming it, before anything runs."""
    config = driver.study["config"]
    digest = driver.config_digest = config_sha256(config)
    for v, r in jobs:
        d = driver.run_dir(v, r)
        m = driver.marker(d)
        if not m or "command" not in m:
            continue
        now = train_command(driver.study, driver.hpctrain, v, r, d, driver.cli_sets)
        state = "finished" if m.get("exit_code") == 0 else "started"
        if training_words(shlex.split(m["command"])) != training_words(now):
            other = f"with another command ({m['command']})"
        elif m.get("config_sha256", digest) != digest:  # (markers before it had none)
            other = f"when {config} held other contents"
        else:
            continue
        raise studyfile.StudyError(
            f"--out {shown_out}: {os.path.relpath(d, driver.out)} {state} {other}; use "
            "another --out, or remove that run directory to run it again with this one")


class Driver:
    """Runs the study's training runs and benchmarks as child processes."""

    def __init__(self, study, out_dir, hpctrain, cli_sets):
        self.study = study
        self.out = out_dir
        self.hpctrain = hpctrain
        self.cli_sets = cli_sets
        self.child = None
        self.stop_signal = None
        self.run_nothing = False  # --report-only
        self.config_digest = None  # the training config's at the start (check_commands)

    def on_signal(self, signum, _frame):
        """SIGTERM, SIGINT, SIGUSR1: the running training checkpoints and stops (SIGUSR1
        forwarded to the launcher, which passes it on to every rank)."""
        self.stop_signal = signum
        if self.child and self.child.poll() is None:
            log(f"signal {signal.Signals(signum).name}: asking the ranks to checkpoint and stop")
            self.child.send_signal(signal.SIGUSR1)

    def spawn(self, cmd, log_path):
        """Starts `cmd` with output to log_path; it gets SIGTERM should this driver die."""
        def die_with_parent():
            try:
                import ctypes
                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
            except (OSError, AttributeError):
                pass
        with open(log_path, "ab") as f:
            f.write(("$ " + shlex.join(cmd) + "\n").encode())
            f.flush()
            # A process group of its own: a terminal's Ctrl-C reaches only this driver,
            # which passes it on to the launcher as SIGUSR1, once; the launcher forwards it
            # to every rank.
            try:
                self.child = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                              preexec_fn=die_with_parent, start_new_session=True)
            except OSError as e:  # no launcher on PATH: one line, not a traceback
                f.write(f"cannot start {cmd[0]}: {e.strerror}\n".encode())
                raise RuntimeError(f"cannot start {cmd[0]}: {e.strerror} (see {log_path})") from e
        if self.stop_signal:  # it came while the child was being started: not passed on
            self.on_signal(self.stop_signal, None)
        try:
            while True:
                try:
                    return self.child.wait()
                except InterruptedError:
                    continue
        finally:
            self.child = None

    def run_dir(self, variant, repeat):
        return os.path.join(self.out, "runs", variant["name"], f"r{repeat}")

    def marker(self, run_dir):
        try:
            with open(os.path.join(run_dir, MARKER)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def write_marker(self, run_dir, m):
        tmp = os.path.join(run_dir, MARKER + ".tmp")
        with open(tmp, "w") as f:
            json.dump(m, f, indent=1)
        os.replace(tmp, os.path.join(run_dir, MARKER))

    def train(self, variant, repeat, index, total, cooldown):
        """One repeat of one variant. Returns True when it ran (False: already done)."""
        run_dir = self.run_dir(variant, repeat)
        m = self.marker(run_dir)
        if m and m.get("exit_code") == 0:
            return False
        os.makedirs(run_dir, exist_ok=True)
        if cooldown and self.study["cooldown_seconds"] > 0:
            log(f"cooling down {self.study['cooldown_seconds']:g} s")
            end = time.monotonic() + self.study["cooldown_seconds"]
            while not self.stop_signal and time.monotonic() < end:  # a stop ends it
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        if self.stop_signal:
            raise Stopped()
        cmd = train_command(self.study, self.hpctrain, variant, repeat, run_dir, self.cli_sets)
        digest = config_sha256(self.study["config"])
        self.config_digest = self.config_digest or digest
        if digest != self.config_digest:  # a study never mixes runs of two configs
            raise studyfile.StudyError(
                f"{shown_path(self.study['config'])}: changed since this study started (its "
                "runs so far trained on the earlier contents); restore it and run the same "
                "command again, or use another --out")
        m = m or {"variant": variant["name"], "repeat": repeat, "attempts": 0}
        m.update({"command": shlex.join(cmd), "config_sha256": digest,
                  "attempts": m["attempts"] + 1,
                  "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                  "exit_code": None})
        self.write_marker(run_dir, m)
        again = f" (attempt {m['attempts']})" if m["attempts"] > 1 else ""
        log(f"[{index}/{total}] {variant['name']} repeat {repeat + 1}: {variant['ranks']} "
            f"rank(s){again}")
        t0 = time.monotonic()
        rc = self.spawn(cmd, os.path.join(run_dir, "train.log"))
        if rc == 0 and (os.path.exists(os.path.join(run_dir, "STOPPED")) or
                        not os.path.exists(os.path.join(run_dir, "summary.json"))):
            rc = EXIT_STOPPED  # hydra may report 0 after forwarding a signal
        m["exit_code"] = rc
        m["wall_s"] = round(time.monotonic() - t0, 3)
        self.write_marker(run_dir, m)
        if rc == EXIT_STOPPED or self.stop_signal:
            raise Stopped()
        if rc != 0:
            raise RuntimeError(f"{variant['name']} repeat {repeat + 1} failed with exit {rc}; "
                               f"see {os.path.join(run_dir, 'train.log')}")
        log(f"  done in {m['wall_s']:.1f} s")
        return True

    def bench_file(self, device, algorithm, ranks, part=None):
        name = f"{device}-{algorithm}-{ranks}" + ("" if part is None else f".run{part}")
        return os.path.join(self.out, "allreduce", name + ".json")

    def bench_run(self, device, algorithm, ranks, max_bytes, part):
        """One `hpctrain bench allreduce` of one algorithm on `ranks` ranks, 4 KiB to
        `max_bytes`; kept once written, while the gradients' size stays (a model changed
        since is measured again). False when it failed."""
        path = self.bench_file(device, algorithm, ranks, part)
        if bench_sweep(path) == sweep_sizes(max_bytes):
            return True
        if self.run_nothing:
            log(f"no all-reduce measurement of {ranks} {device} ranks (--report-only runs "
                "nothing): no model for them")
            return False
        os.makedirs(os.path.dirname(path), exist_ok=True)
        log(f"measuring the all-reduce on {ranks} {device} ranks ({part + 1} of 2)")
        cmd = launcher_prefix(self.study, ranks) + [
            self.hpctrain, "bench", "allreduce", "--min-bytes", str(BENCH_MIN_BYTES),
            "--max-bytes", str(max_bytes), "--iters", "20", "--reps", "5", "--device", device,
            "--algorithms", algorithm, "--out", path + ".tmp"]
        rc = self.spawn(cmd, os.path.join(self.out, "allreduce", "bench.log"))
        if self.stop_signal:
            raise Stopped()
        if rc != 0:
            log(f"  bench allreduce failed (exit {rc}); no model for {ranks} ranks")
            return False
        os.replace(path + ".tmp", path)
        return True

    def bench(self, device, algorithm, ranks, max_bytes):
        """The model's all-reduce figures for `ranks` ranks: two benchmark runs, the first
        right after the variant's training runs and the second at the end of the study, so
        that a slow spell of the machine is unlikely to catch both; each size keeps its
        faster time (other work on the node only ever slows a run down). None on failure."""
        runs = []
        for part in (0, 1):
            if not self.bench_run(device, algorithm, ranks, max_bytes, part):
                return None
            with open(self.bench_file(device, algorithm, ranks, part)) as f:
                runs.append(json.load(f))
        best = runs[0]
        for p, q in zip(best["points"], runs[1]["points"]):
            if q["time_s"] < p["time_s"]:
                p.update(q)
        best["runs"] = len(runs)
        path = self.bench_file(device, algorithm, ranks)
        with open(path + ".tmp", "w") as f:
            json.dump(best, f, indent=1)
        os.replace(path + ".tmp", path)
        return path

    def bench_after_variant(self, variant):
        """The first benchmark run for a multi-rank variant whose repeats have all finished,
        where the study has a one-rank variant (without one there is no model to use it)."""
        if variant["ranks"] < 2 or all(v["ranks"] > 1 for v in self.study["variants"]):
            return
        d = self.run_dir(variant, self.study["repeats"] - 1)
        m = self.marker(d)
        if not m or m.get("exit_code") != 0:
            return
        try:
            r = aggregate.read_run(d)
        except aggregate.RunError:
            return  # the report leaves it out and says so; bench() at the end measures
        self.bench_run(r["backend"], bench_algorithm(r["algorithm"]), variant["ranks"],
                       bench_bytes(r["param_count"]), 0)


BENCH_MIN_BYTES = 4096


def sweep_sizes(max_bytes):
    """The message sizes `hpctrain bench allreduce --min-bytes 4096 --max-bytes M` times."""
    sizes, b = [], BENCH_MIN_BYTES
    while b <= max_bytes:
        sizes.append(b)
        b *= 2
    return sizes


def bench_sweep(path):
    """The sizes a kept benchmark file holds, in order; None where it cannot be read."""
    try:
        with open(path) as f:
            return [p["bytes"] for p in json.load(f)["points"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_runs(driver):
    """The finished repeats of every variant, read from their run directories. A finished
    repeat that cannot be read (its summary.json or metrics.csv removed or damaged since)
    is left out of the report, with a line naming the file: one bad repeat does not cost
    the report of all the others, whose repeat counts show what is missing."""
    out = []
    for v in driver.study["variants"]:
        runs = []
        for r in range(driver.study["repeats"]):
            d = driver.run_dir(v, r)
            m = driver.marker(d)
            if m and m.get("exit_code") == 0:
                try:
                    runs.append(aggregate.read_run(d))
                except aggregate.RunError as e:
                    log(f"left out of the report: {v['name']} repeat {r + 1}: {e}")
        out.append((v, runs))
    return out


def plot_python():
    """An interpreter with matplotlib: this one, else the system's; None if neither."""
    for exe in (sys.executable, "/usr/bin/python3"):
        if exe and os.path.exists(exe) and subprocess.run(
                [exe, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return exe
    return None


def make_plots(out_dir):
    """Runs the plotting module on the study directory; prints what it wrote. Returns None,
    or the error line of a plotting that failed (no matplotlib: plots skipped, None)."""
    exe = plot_python()
    if exe is None:
        log("plots skipped: no python3 with matplotlib (Debian: apt install python3-matplotlib)")
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([exe, "-m", "hpctrain_tools.plots", "study", out_dir], env=env,
                       stderr=subprocess.PIPE, text=True, errors="replace")
    if p.returncode == 0:
        return None
    lines = [x.strip() for x in p.stderr.splitlines() if x.strip()]
    why = lines[-1].removeprefix("error: ") if lines else "no message"
    return f"the plots failed (exit {p.returncode}: {why})"


def cuda_device_count(hpctrain):
    """CUDA devices hpctrain sees (from `hpctrain --version`); 0 on failure."""
    try:
        text = subprocess.run([hpctrain, "--version"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    marker = "CUDA devices: "
    if marker in text:
        digits = text.split(marker, 1)[1].split(")")[0].strip()
        return int(digits) if digits.isdigit() else 0
    return 0


def shown_path(path):
    """`path` relative to the working directory when it lies under it, else absolute."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def write_outputs(driver, plots, pairs):
    """Aggregates the finished runs (read_runs' `pairs`) and writes study.json, study.csv,
    study.md (and plots). Returns None, or the error line of plots that failed."""
    study = driver.study
    variants, raw = [], []
    for v, runs in pairs:
        if runs:
            variants.append(aggregate.summarise_variant(v, runs))
            raw.append(runs)
    aggregate.add_comparisons(variants, study["baselines"])
    for v, runs in zip(variants, raw):
        v["runs"] = [os.path.relpath(r["dir"], driver.out) for r in runs]
    model = build_model(driver, variants, raw, cuda_device_count(driver.hpctrain))
    doc = {"study": study["name"], "study_file": shown_path(study["path"]),
           "config": shown_path(study["config"]),
           "repeats": study["repeats"], "baselines": study["baselines"],
           "written": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "variants": variants, "model": model}
    report.write(driver.out, doc)
    log(f"wrote {os.path.join(driver.out, 'study.md')}, study.csv, study.json")
    return make_plots(driver.out) if plots else None


def check_out(out, shown, make):
    """--out: a directory, or a path under one (make: the directory is made now, and must
    be writable); else StudyError."""
    up = out
    while not os.path.lexists(up):
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise studyfile.StudyError(f"--out {shown}: " + (
            "not a directory" if up == out else f"{shown_path(up)} is not a directory"))
    if not make:
        return
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise studyfile.StudyError(f"--out {shown}: cannot create: {e.strerror}") from e
    if not os.access(out, os.W_OK | os.X_OK):
        raise studyfile.StudyError(f"--out {shown}: not writable")


def main(argv):
    ap = scaling.OneLineParser(
        prog="hpctrain study",
        description="Run a scaling study: every variant of STUDY.yaml R times, then the "
                    "table, the scaling model and the plots (docs/study.md).")
    ap.add_argument("study", metavar="STUDY.yaml")
    ap.add_argument("--out", help="the study directory (default studies/<study file name>)")
    ap.add_argument("--set", action="append", default=[], metavar="key.path=value",
                    help="a config key for every variant's runs (repeatable)")
    ap.add_argument("--hpctrain", default="hpctrain", help=argparse.SUPPRESS)
    ap.add_argument("--dry-run", action="store_true",
                    help="check every variant's config, then print each run's command "
                         "(done or to run); run nothing")
    ap.add_argument("--report-only", action="store_true",
                    help="write the table, model and plots from the finished runs; run nothing")
    ap.add_argument("--no-plots", action="store_true", help="write no PNG files")
    a = ap.parse_args(argv)
    pairs = None
    try:
        study = studyfile.load(a.study)
        for s in a.set:
            if "=" not in s:
                raise studyfile.StudyError(f"--set {s}: expected key.path=value")
        shown_out = a.out or os.path.join("studies", study["name"])
        out = os.path.abspath(shown_out)
        check_out(out, shown_out, make=False)
        driver = Driver(study, out, a.hpctrain, a.set)
        driver.run_nothing = a.report_only
        stops = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
        if not a.dry_run:  # before the checks, which take a while: a signal stops cleanly
            for sig in stops:
                signal.signal(sig, driver.on_signal)
        # hpctrain started this driver with them blocked: one sent before now waited.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        jobs = [(v, r) for v in study["variants"] for r in range(study["repeats"])]
        report_only = a.report_only and not a.dry_run
        if not report_only:
            check_configs(driver)
        # --report-only too: the report's headers (config, --set) are this command's.
        check_commands(driver, jobs, shown_out)
        if report_only:
            pairs = read_runs(driver)
            if not any(runs for _, runs in pairs):
                raise studyfile.StudyError(f"--out {shown_out}: no run of the study has "
                                           "finished there; nothing to report")
        if not a.dry_run:
            check_out(out, shown_out, make=True)
    except studyfile.StudyError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    if a.dry_run:
        for v, r in jobs:
            d = driver.run_dir(v, r)
            m = driver.marker(d)
            state = "done" if m and m.get("exit_code") == 0 else "to run"
            print(f"{state}: {shlex.join(train_command(study, a.hpctrain, v, r, d, a.set))}")
        return EXIT_OK
    try:
        if driver.stop_signal:
            raise Stopped()
        if not a.report_only:
            log(f"{len(study['variants'])} variants x {study['repeats']} repeats into {out}")
            ran = False
            for i, (v, r) in enumerate(jobs, 1):
                ran = driver.train(v, r, i, len(jobs), cooldown=ran) or ran
                if r == study["repeats"] - 1:
                    driver.bench_after_variant(v)
        failed = write_outputs(driver, not a.no_plots,
                               read_runs(driver) if pairs is None else pairs)
        if failed:
            print(f"error: {failed}; study.md, study.csv and study.json are written "
                  f"(`hpctrain plot study {shown_out}` draws the plots again)", file=sys.stderr)
            return EXIT_FAILURE
    except Stopped:
        log("stopped on a signal; run the same command again to resume")
        return EXIT_STOPPED
    except studyfile.StudyError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (RuntimeError, aggregate.RunError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK
