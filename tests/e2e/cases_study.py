"""End-to-end cases of `hpctrain study`: a small study stopped by a signal, then killed
with its whole process group, resumes each time without redoing finished runs, and plots
that fail are exit 1; bad study files, training keys and options are exit 2 with one line
naming the file and key (or the option) before anything runs."""
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

from harness import ARGS, FakeRapl, check, fail, hpctrain, one_error_line, run_dir, session

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_study(folder, text):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "study.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def small_study(folder):
    """Two variants of two repeats: `one` (1 rank) and `two` (2 ranks, rank 0 slowed so an
    epoch lasts about a second and a run can be caught between checkpoints)."""
    d = ARGS.data
    return write_study(folder, f"""
config: {REPO}/configs/fashion_mnist_mlp.yaml
repeats: 2
set: [data.train={d}/test.h5, data.val={d}/val.h5, "data.test=", train.epochs=3,
      run.threads=1, device=cpu, train.progress_seconds=0]
variants:
  - {{name: one, ranks: 1}}
  - {{name: two, ranks: 2, set: [debug.slow_rank.rank=0, debug.slow_rank.factor=40]}}
""")


def start(study, out, log, env=None):
    cmd = [hpctrain(), "study", study, "--out", out]
    print("+ " + " ".join(cmd), flush=True)
    return session(cmd, stdout=log, text=False, env=dict(os.environ, **(env or {})))


def wait_for_checkpoint(proc, folder, timeout=120):
    """Waits until `folder` holds a checkpoint while its run goes on."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if glob.glob(os.path.join(folder, "checkpoints", "ckpt-*.h5")) and \
                not os.path.exists(os.path.join(folder, "summary.json")):
            return
        if proc.poll() is not None:
            fail(f"the study ended (exit {proc.returncode}) before {folder} checkpointed")
        time.sleep(0.02)
    fail(f"no checkpoint in {folder} after {timeout} s")


def marker(folder):
    with open(os.path.join(folder, "study-run.json")) as f:
        return json.load(f)


def summary_of(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        return json.load(f)


def case_study_stop_kill_resume():
    """SIGTERM to the driver in the middle of a run: the ranks checkpoint, exit 75. Run
    again and SIGKILL the whole process group in a later run. The third start finishes:
    the runs that had finished are not run again, each interrupted run resumed from its
    checkpoint, and study.csv, study.md, study.json and the six plots are written. The
    energy of the resumed repeats (counters of a fake powercap folder, and two idle GPUs of a
    stand-in NVML) is the whole run's."""
    fake = FakeRapl("study_kill")
    try:
        stop_kill_resume(fake)
    finally:
        fake.close()


def stop_kill_resume(fake):
    nvml = os.path.join(ARGS.build, "test-shims", "nvml")  # two idle GPUs
    env = {"HPCTRAIN_POWERCAP_ROOT": fake.root,
           "LD_LIBRARY_PATH": ":".join(filter(None, [nvml, os.environ.get("LD_LIBRARY_PATH")]))}
    folder = run_dir("study_kill")
    subprocess.run(["rm", "-rf", folder], check=True)
    study = small_study(folder)
    out = os.path.join(folder, "out")
    runs = os.path.join(out, "runs")
    with open(os.path.join(folder, "driver.log"), "ab") as log:
        p = start(study, out, log, env)
        wait_for_checkpoint(p, os.path.join(runs, "two", "r0"))
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=120)
        check(rc == 75, f"stopped study exit {rc}, expected 75")
        check(os.path.exists(os.path.join(runs, "two", "r0", "STOPPED")), "no STOPPED marker")
        done_one = {r: os.stat(os.path.join(runs, "one", r, "summary.json")).st_mtime_ns
                    for r in ("r0", "r1")}

        p = start(study, out, log, env)
        wait_for_checkpoint(p, os.path.join(runs, "two", "r1"))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=60)
        # Whatever outlived the group (a node failure takes everything) goes too.
        subprocess.run(["pkill", "-9", "-f", out], check=False)
        time.sleep(0.5)
        check(not os.path.exists(os.path.join(runs, "two", "r1", "summary.json")),
              "the killed run wrote a summary")

        p = start(study, out, log, env)
        rc = p.wait(timeout=600)
    with open(os.path.join(folder, "driver.log")) as f:
        print(f.read())
    check(rc == 0, f"resumed study exit {rc}")
    for r, mtime in done_one.items():
        now = os.stat(os.path.join(runs, "one", r, "summary.json")).st_mtime_ns
        check(now == mtime, f"finished run one/{r} ran again")
        check(marker(os.path.join(runs, "one", r))["attempts"] == 1, f"one/{r} attempts")
    wholes = []
    for r in ("r0", "r1"):
        d = os.path.join(runs, "two", r)
        m, s = marker(d), summary_of(d)
        check(m["attempts"] == 2 and m["exit_code"] == 0, f"two/{r}: marker {m}")
        check(s["resumed_from"] is not None, f"two/{r} did not resume from its checkpoint")
        check(s["epochs_completed"] == 3, f"two/{r}: {s['epochs_completed']} epochs")
        # Its energy: what its checkpoints carried (the killed or stopped process's up to
        # the last one) and the last process's.
        own, whole = s["energy"], s["energy_whole_run"]
        check(whole["total_j"] and whole["seconds"] > own["seconds"] and
              0.5 < whole["active_j"] / (44 * whole["seconds"]) < 1.5,
              f"two/{r}: the whole run's energy {whole}, the last process's {own}")
        wholes.append(whole)
    with open(os.path.join(out, "study.csv")) as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    check(sorted(rows) == ["one", "two"], f"study.csv variants {sorted(rows)}")
    check(rows["two"]["repeats"] == "2" and float(rows["one"]["speedup"]) == 1.0,
          f"study.csv rows {rows}")
    with open(os.path.join(out, "study.json")) as f:
        doc = json.load(f)
    two = doc["variants"][1]
    check(two["resumed_repeats"] == 2 and len(two["val_accuracy_per_epoch"]["mean"]) == 3,
          f"study.json variant two: {two['resumed_repeats']} resumed")
    for key, j in (("energy_j", "total_j"), ("energy_active_j", "active_j")):
        mean_j = sum(w[j] for w in wholes) / 2
        check(two["energy_reason"] is None and abs(two[key]["mean"] - mean_j) < 1e-6 * mean_j,
              f"study.json variant two: {key} {two[key]} ({two['energy_reason']}), the runs' "
              f"{mean_j}")
    # CPU variants: the GPUs idle, in the energy but not in that of the active devices.
    for v in doc["variants"]:
        check(0 < v["energy_active_j"]["max"] < v["energy_j"]["min"] and v["edp_active_norm"],
              f"study.json variant {v['name']}: energy {v['energy_j']}, active "
              f"{v['energy_active_j']}")
    with open(os.path.join(out, "study.md")) as f:
        check("(2 resumed)" in f.read(), "study.md does not say which repeats resumed")
    pngs = sorted(os.path.basename(x) for x in glob.glob(os.path.join(out, "plots", "*.png")))
    check(pngs == sorted(["accuracy.png", "phases.png", "scaling.png", "scaling_model.png",
                          "power.png", "energy.png"]), f"plots {pngs}")

    # Plots that cannot be drawn fail the study (exit 1, one line), after its tables.
    subprocess.run(["rm", "-rf", os.path.join(out, "plots"), os.path.join(out, "study.md")],
                   check=True)
    open(os.path.join(out, "plots"), "w").close()
    p = subprocess.run([hpctrain(), "study", study, "--out", out, "--report-only"],
                       capture_output=True, text=True, timeout=300)
    print(p.stderr, file=sys.stderr)
    check(p.returncode == 1, f"report with plots that fail: exit {p.returncode}, expected 1")
    one_error_line(p.stderr, "the plots failed", "plots: not a directory")
    check(os.path.exists(os.path.join(out, "study.md")), "no study.md when the plots failed")


def case_study_bad_files():
    """A study file with a mistake (in its own keys or in the training keys it passes on)
    is exit 2 with one line naming the file and the key, and runs nothing; so is a bad
    option. --dry-run checks the same and prints the commands that would run."""
    folder = run_dir("study_bad")
    subprocess.run(["rm", "-rf", folder], check=True)
    # The example config with the test data (its own data/ paths exist only once the
    # quick start has run), so that only the mistake under test can fail the check.
    os.makedirs(folder)
    with open(os.path.join(REPO, "configs", "fashion_mnist_mlp.yaml")) as f:
        text = f.read().replace("data/fashion-mnist", ARGS.data)
    check(ARGS.data in text, "the example config names no data/fashion-mnist file")
    with open(os.path.join(folder, "mlp.yaml"), "w") as f:
        f.write(text)
    cfg = f"config: {os.path.join(folder, 'mlp.yaml')}\n"
    cases = [
        ("variants: [{name: a}]\n", "config"),
        (cfg + "variants: [{name: a, ranks: 0}]\n", "variants[0].ranks"),
        (cfg + "variants: [{name: a}, {name: a}]\n", "variants[1].name"),
        (cfg + "variants: [{name: a, device: tpu}]\n", "variants[0].device"),
        (cfg + "variants: [{name: a}]\nbaselines: [b]\n", "baselines"),
        (cfg + "variants: [{name: a}]\nrepeat: 3\n", "repeat"),
        (cfg + "variants: [{name: a, set: [epochs]}]\n", "variants[0].set"),
        (cfg + "variants: [{name: a}]\nmodel: {network: {alpha_us: 1}}\n",
         "model.network.bandwidth_gbs"),
        (cfg + "variants: [{name: a}\n", "line"),
    ]
    # The training keys and the training config, checked by `hpctrain inspect` before any
    # run starts, and by --dry-run (train.yaml: a config with a mistake, beside the study).
    inspected = len(cases)
    cases += [
        (cfg + "set: [train.epoch=2]\nvariants: [{name: a}]\n",
         "variants[0] (a): --set train.epoch: unknown key"),
        (cfg + "variants: [{name: a}, {name: b, set: [train.batch_size=0]}]\n",
         "variants[1] (b): --set train.batch_size"),
        ("config: train.yaml\nvariants: [{name: a}]\n", "config: "),
        (cfg + "repeats: 1\nrepeats: 2\nvariants: [{name: a}]\n",
         ":3: repeats: duplicate key (first given at line 2)"),
        (cfg + "variants: [{name: a, ranks: true}]\n", "variants[0].ranks: expected an "
         "integer >= 1, got true"),
        (cfg + "variants: [{ranks: 2}]\n", "variants[0].name: required"),
    ]
    for i, (text, key) in enumerate(cases):
        study = write_study(os.path.join(folder, str(i)), text)
        with open(os.path.join(folder, str(i), "train.yaml"), "w") as f:
            f.write("train: {epochs: 1, epoch: 2}\n")
        for extra in ([], ["--dry-run"]) if inspected <= i < inspected + 3 else ([],):
            p = subprocess.run([hpctrain(), "study", study, "--out", os.path.join(folder, "out")]
                               + extra, capture_output=True, text=True, timeout=120)
            print(p.stderr, file=sys.stderr)
            check(p.returncode == 2 and not p.stdout,
                  f"case {i} ({key}) {extra}: exit {p.returncode}, expected 2; {p.stdout}")
            one_error_line(p.stderr, study, key)
            check(not os.path.exists(os.path.join(folder, "out")), f"case {i} created its output")

    # A stop signal at once, while Python starts (a Slurm warning at the start of a job):
    # exit 75, to be requeued; it killed the driver (138) before its handlers were set.
    study = write_study(os.path.join(folder, "early"), cfg + "variants: [{name: a}]\n")
    for attempt in range(3):
        p = subprocess.Popen([hpctrain(), "study", study, "--out", os.path.join(folder, "o2")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 30
        while time.time() < deadline:  # once hpctrain has become Python, before its imports
            try:
                with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                    if b"hpctrain_tools" in f.read():
                        break
            except OSError:
                break
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=120)
        check(p.returncode == 75, f"SIGUSR1 at start, try {attempt}: exit {p.returncode}: {err}")

    # A good study with a bad option: the command line's --set, an --out that cannot be a
    # directory, a report with no finished run. --dry-run prints the commands that run.
    study = small_study(folder)
    afile = os.path.join(folder, "afile")
    open(afile, "w").close()
    empty = os.path.join(folder, "empty")
    for args, needle in ([["--set", "train.epoch=1", "--out", empty],
                          "--set train.epoch: unknown key"],
                         [["--out", afile], f"--out {afile}: not a directory"],
                         [["--out", "/proc/nope"], "--out /proc/nope: cannot create"],
                         [["--out", empty, "--report-only"],
                          f"--out {empty}: no run of the study has finished"]):
        p = subprocess.run([hpctrain(), "study", study] + args, capture_output=True, text=True,
                           timeout=120)
        print(p.stderr, file=sys.stderr)
        check(p.returncode == 2, f"{args}: exit {p.returncode}, expected 2")
        one_error_line(p.stderr, needle)
    check(not os.path.exists(empty), "--report-only made its --out")
    p = subprocess.run([hpctrain(), "study", study, "--dry-run", "--out", empty],
                       capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    check(p.returncode == 0 and len(lines) == 4, f"--dry-run: exit {p.returncode}: {p.stdout}")
    check(all(x.startswith("to run: ") and " train " in x and " --resume auto --set " in x
              for x in lines), f"--dry-run printed {lines}")
    check(not os.path.exists(empty), "--dry-run made its --out")
