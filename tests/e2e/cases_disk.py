"""A full disk, for real: a small tmpfs mounted in a mount namespace of the test's own
(`unshare --mount`, or with `--user --map-root-user` where only that is allowed). A training
run whose disk fills between checkpoints, and every `hpctrain-data` writer on a disk too
small for its output, must end with one error line naming the file and "No space left on
device", never crash, and leave no temporary file; the run's newest checkpoint stays loadable
and the run resumes from it once there is room. Where no namespace can be made the cases
exit 77 (ctest: skipped) and say why."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

from harness import (ARGS, check, fresh, one_error_line, prepared, rank_pids, run_dir, train,
                     train_cmd)

SKIP = 77


def in_tmpfs(case, size):
    """Runs e2e.py `case` with a tmpfs of `size` mounted on run_dir(case)/disk, in a mount
    namespace of its own; exits with its code (77 when no namespace can be made)."""
    fresh(case)
    disk = os.path.join(run_dir(case), "disk")
    os.makedirs(disk)
    script = ('mount -t tmpfs -o size="$1" tmpfs "$2" || exit 77; shift 2; exec "$@"')
    inner = [sys.executable, os.path.join(os.path.dirname(__file__), "e2e.py"), case + "_inner",
             "--build", ARGS.build, "--data", ARGS.data]
    for prefix in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        probe = subprocess.run(prefix + ["true"], capture_output=True)
        if probe.returncode != 0:
            continue
        p = subprocess.run(prefix + ["sh", "-c", script, "sh", size, disk] + inner, timeout=850)
        sys.exit(p.returncode)
    print("SKIP: no mount namespace could be made here (unshare --mount and unshare --user "
          "--map-root-user --mount both failed), so no tmpfs to fill")
    sys.exit(SKIP)


def no_temporaries(root):
    left = [p for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
            if p.endswith(".tmp")]
    check(not left, f"temporary files left: {left}")


def fill(path):
    """Writes zeros to `path` until the file system is full."""
    with open(path, "wb", buffering=0) as f:
        block = bytes(4096)
        try:
            while True:
                f.write(block)
        except OSError:
            pass


def case_full_disk_checkpoints():
    in_tmpfs("full_disk_checkpoints", "640k")


def case_full_disk_checkpoints_inner():
    name = "full_disk_checkpoints"
    prepared(name)  # in_tmpfs mounted the disk in it
    disk = os.path.join(run_dir(name), "disk")
    run = os.path.join(disk, "run")
    # Rank 0's steps are stretched (to about 1 ms), so that the run is still going when the
    # disk fills after its first checkpoint: unstretched, its 234 steps took 0.07 s and could
    # end before the filler did.
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", f"run.dir={run}",
            "model.hidden=[8]", "train.epochs=10", "checkpoint.every_steps=20",
            "checkpoint.keep=2", "debug.slow_rank.rank=0", "debug.slow_rank.factor=10"]
    # One rank alone (its exit, not MPI_Abort's: HDF5 crashed at exit closing the file whose
    # close had failed), then two; the second run's checkpoints are resumed below.
    for ranks in (1, 2):
        shutil.rmtree(run, ignore_errors=True)
        cmd = train_cmd(name, ranks, sets)
        print("+ " + " ".join(cmd), flush=True)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The manifest records ckpt-20 before its rename, and the next checkpoint is written
        # while the filler runs: wait for the manifest line and the file, and hold the ranks
        # (SIGSTOP) while the disk fills, so the first write to fail is a checkpoint's.
        manifest = os.path.join(run, "checkpoints", "hpctrain-checkpoints.txt")

        def recorded():
            try:
                with open(manifest) as f:
                    listed = "ckpt-000000000020.h5\t" in f.read()
                return listed and os.path.exists(os.path.join(os.path.dirname(manifest),
                                                              "ckpt-000000000020.h5"))
            except OSError:
                return False
        deadline = time.time() + 300
        while not recorded() and p.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        pids = rank_pids(run)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        filler = os.path.join(disk, "filler")
        fill(filler)
        if ranks == 1:  # room for a checkpoint file to be made, not for its arrays
            os.truncate(filler, os.path.getsize(filler) - 16384)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        out, err = p.communicate(timeout=600)
        print(out)
        print(err, file=sys.stderr)
        check(p.returncode == 1, f"{ranks} rank(s) on a full disk: exit {p.returncode}, expected 1")
        one_error_line(err, "No space left on device", os.path.join(run, "checkpoints", "ckpt-"))
        no_temporaries(run)
        kept = sorted(glob.glob(os.path.join(run, "checkpoints", "ckpt-*.h5")))
        check(kept, "no checkpoint survived the full disk")
        newest = int(os.path.basename(kept[-1])[5:17])
        os.remove(filler)
    for path in kept:
        q = subprocess.run([os.path.join(ARGS.build, "hpctrain"), "inspect", path],
                           capture_output=True, text=True, timeout=60)
        check(q.returncode == 0, f"{path} does not verify after the full disk:\n{q.stdout}")
    cmd = train_cmd(name, 2, sets, resume="auto")
    q = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(q.stdout, q.stderr)
    check(q.returncode == 0, f"resume after freeing the disk: exit {q.returncode}")
    check(f"resuming at step {newest}" in q.stdout or f"(step {newest}," in q.stdout,
          f"the resume did not start from the newest checkpoint (step {newest})")
    # The finished run extended on a disk with room for fewer than checkpoint.keep + 1 new
    # checkpoints: its own, which retention replaces, count as room. With no room at all
    # the start is refused (exit 2) before anything of the finished run is removed.
    more = [s for s in sets if not s.startswith("train.epochs=")] + ["train.epochs=11"]
    kept = sorted(glob.glob(os.path.join(run, "checkpoints", "ckpt-*.h5")))
    check(len(kept) == 2, f"checkpoint.keep=2, but {len(kept)} checkpoints: {kept}")
    size = os.path.getsize(kept[-1])
    fill(filler)
    q = subprocess.run(train_cmd(name, 2, more, resume="auto"), capture_output=True, text=True,
                       timeout=600)
    print(q.stdout, q.stderr)
    check(q.returncode == 2, f"no room on the disk: exit {q.returncode}, expected 2")
    one_error_line(q.stderr, "checkpoint.dir", "MiB free, but the 3 checkpoints of")
    check(os.path.exists(os.path.join(run, "summary.json")), "a refused start removed summary.json")
    os.remove(filler)
    st = os.statvfs(disk)
    with open(filler, "wb") as f:  # one and a half checkpoints free, and a little for logs
        f.write(bytes(st.f_bavail * st.f_frsize - size * 3 // 2 - 32768))
    q = subprocess.run(train_cmd(name, 2, more, resume="auto"), capture_output=True, text=True,
                       timeout=600)
    print(q.stdout, q.stderr)
    check(q.returncode == 0, f"extending the run with its own checkpoints to replace: exit "
          f"{q.returncode}")


def case_full_disk_data_writers():
    in_tmpfs("full_disk_data_writers", "96k")


def writer_commands(disk, work):
    """Each hpctrain-data command that writes files, with its outputs on `disk`."""
    d = ARGS.data
    src = "/usr/share/datasets/fashion-mnist"
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog\n" * 20000)
    folder = os.path.join(work, "images")
    for cls in ("a", "b"):
        os.makedirs(os.path.join(folder, cls), exist_ok=True)
        for i in range(40):
            # A binary PPM (P6) image of 32x32 pixels, which stb_image decodes.
            pixels = bytes((i * 37 + k * 11) % 256 for k in range(32 * 32 * 3))
            with open(os.path.join(folder, cls, f"{i}.ppm"), "wb") as f:
                f.write(b"P6 32 32 255\n" + pixels)
    return {
        "fashion-mnist": (["fashion-mnist", "--out", os.path.join(disk, "fm")], disk),
        "idx": (["idx", "--images", f"{src}/t10k-images-idx3-ubyte.gz", "--labels",
                 f"{src}/t10k-labels-idx1-ubyte.gz", "--out", os.path.join(disk, "idx.h5")],
                os.path.join(disk, "idx.h5")),
        "images": (["images", folder, "--out", os.path.join(disk, "img.h5"), "--size", "32x32"],
                   os.path.join(disk, "img.h5")),
        "synth": (["synth", "--out", os.path.join(disk, "s.h5"), "--n", "4000", "--shape",
                   "1x28x28", "--classes", "3"], os.path.join(disk, "s.h5")),
        "split": (["split", f"{d}/test.h5", "--ratios", "80,10,10", "--out-prefix",
                   os.path.join(disk, "sp")], os.path.join(disk, "sp-train.h5")),
        "shard": (["shard", f"{d}/test.h5", "--parts", "2", "--out-prefix",
                   os.path.join(disk, "sh")], os.path.join(disk, "sh-00000-of-00002.h5")),
        "text": (["text", text, "--out", os.path.join(disk, "t.h5"), "--seq-len", "16"],
                 os.path.join(disk, "t.h5")),
    }


def case_full_disk_data_writers_inner():
    name = "full_disk_data_writers"
    disk = os.path.join(run_dir(name), "disk")
    work = os.path.join(run_dir(name), "inputs")
    os.makedirs(work, exist_ok=True)
    for command, (args, named) in writer_commands(disk, work).items():
        cmd = [os.path.join(ARGS.build, "hpctrain-data")] + args
        print("+ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(p.stderr, file=sys.stderr)
        check(p.returncode == 1, f"{command} on a full disk: exit {p.returncode}, expected 1")
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(len(lines) == 1, f"{command}: expected one error line, got {lines}")
        check(named in lines[0] and "No space left on device" in lines[0],
              f"{command}: the line does not name {named} and the cause: {lines[0]}")
        files = [os.path.join(r, f) for r, _, fs in os.walk(disk) for f in fs]
        check(not files, f"{command} left files on the full disk: {files}")

    # stats adds attributes to a data file through a copy: on a full disk it fails with one
    # line and leaves the file as it was (in place, HDF5's flush left it unreadable).
    data = os.path.join(disk, "small.h5")
    tool = os.path.join(ARGS.build, "hpctrain-data")
    with h5py.File(data, "w") as f:  # small enough for the disk to hold twice
        f["images"] = (np.arange(200 * 16) % 251).astype(np.uint8).reshape(200, 1, 4, 4)
        f["labels"] = (np.arange(200) % 2).astype(np.int32)
    filler = os.path.join(disk, "filler")
    fill(filler)
    p = subprocess.run([tool, "stats", data], capture_output=True, text=True, timeout=60)
    print(p.stderr, file=sys.stderr)
    check(p.returncode == 1 and "No space left on device" in p.stderr and data in p.stderr,
          f"stats on a full disk: exit {p.returncode}")
    left = sorted(f for _, _, fs in os.walk(disk) for f in fs)
    check(left == ["filler", "small.h5"], f"stats on a full disk left {left}")
    with h5py.File(data, "r") as f:
        check("mean" not in f.attrs and f["images"].shape[0] == 200, "the data file changed")
    os.remove(filler)
    p = subprocess.run([tool, "stats", data], capture_output=True, text=True, timeout=60)
    with h5py.File(data, "r") as f:
        check(p.returncode == 0 and "mean" in f.attrs, f"stats with room: exit {p.returncode}")


def case_data_writers_keep_inputs():
    """No `hpctrain-data` writer replaces or deletes an input: an output named like an
    input, or whose temporary file OUT.tmp is an input's name, is exit 2 with one line
    before anything is written, the input left as it was; so is an output that names a
    directory, and stats given one file twice."""
    fresh("writers_keep_inputs")
    work = run_dir("writers_keep_inputs")
    os.makedirs(os.path.join(work, "adir"))
    src = "/usr/share/datasets/fashion-mnist"
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        subprocess.run(["cp", os.path.join(src, name), work], check=True)
    images = os.path.join(work, "t10k-images-idx3-ubyte.gz")
    labels = os.path.join(work, "t10k-labels-idx1-ubyte.gz")
    subprocess.run(["cp", images, os.path.join(work, "img.h5.tmp")], check=True)
    subprocess.run(["cp", f"{ARGS.data}/val.h5", os.path.join(work, "a.h5")], check=True)
    subprocess.run(["cp", f"{ARGS.data}/val.h5", os.path.join(work, "a.h5.tmp")], check=True)

    def sizes():
        return {f: os.path.getsize(os.path.join(work, f)) for f in sorted(os.listdir(work))
                if f != "adir"}
    before = sizes()
    tool = os.path.join(ARGS.build, "hpctrain-data")
    for args, needle in (
            (["idx", "--images", images, "--labels", labels, "--out", labels],
             "would overwrite the input file"),
            (["idx", "--images", os.path.join(work, "img.h5.tmp"), "--labels", labels, "--out",
              os.path.join(work, "img.h5")], "img.h5.tmp would replace the input file"),
            (["stats", os.path.join(work, "a.h5"), os.path.join(work, "a.h5.tmp")],
             "a.h5.tmp: is the name of the copy"),
            # One file by two names: its rows would count twice in the mean, stored.
            (["stats", os.path.join(work, "a.h5"), os.path.join(work, "adir", "..", "a.h5")],
             "is listed twice (also as"),
            (["synth", "--out", os.path.join(work, "adir"), "--n", "4", "--shape", "1x2x2",
              "--classes", "2"], "adir: is a directory"),
            (["synth", "--out", os.path.join(work, "a.h5", "x.h5"), "--n", "4", "--shape",
              "1x2x2", "--classes", "2"], "a.h5 is not a directory")):
        p = subprocess.run([tool] + args, capture_output=True, text=True, timeout=60)
        print(p.stderr, file=sys.stderr)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and needle in lines[0],
              f"{args}: exit {p.returncode} (expected 2), {lines} (expected one line with "
              f"'{needle}')")
        check(sizes() == before, f"{args[0]} changed the files: {sizes()} != {before}")
    check(os.listdir(os.path.join(work, "adir")) == [] and
          not os.path.exists(os.path.join(work, "adir.tmp")), "synth wrote into or beside adir")
    # A file that cannot be created where the checks saw a writable directory (/proc): exit
    # 1, one line naming it and why (it was HDF5's call, with no file name).
    p = subprocess.run([tool, "synth", "--out", "/proc/x.h5", "--n", "4", "--shape", "1x2x2",
                        "--classes", "2"], capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and
          "/proc/x.h5: cannot write: cannot create /proc/x.h5.tmp: " in lines[0],
          f"synth into /proc: exit {p.returncode}, {lines}")


def case_fsync_failures():
    """fsync failing (an I/O error, LD_PRELOAD of fsync_shim.c) at a checkpoint's commit.
    On the file: exit 1 with one line naming the checkpoint and the error, and neither the
    checkpoint nor its temporary file is left; likewise when recording it in the manifest
    fails (before the rename). On the directory after the rename: the
    complete checkpoint stays, recorded as the run's, so that --resume auto continues from
    it and retention deletes it in its time. The resume also removes the temporaries that
    writers killed while committing the run's own files (NAME.tmp.PID) left."""
    name = "fsync_failures"
    fresh(name)
    ckpt = os.path.join(os.path.abspath(run_dir(name)), "checkpoints")
    shim = os.path.join(ARGS.build, "test-shims", "libht_fsync_shim.so")
    check(os.path.exists(shim), f"{shim} was not built")
    sets = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "model.hidden=[8]",
            "train.epochs=2", "checkpoint.every_steps=20", "checkpoint.keep=1"]
    step20 = os.path.join(ckpt, "ckpt-000000000020.h5")

    rc, _, err = train(name, 2, sets, env={"LD_PRELOAD": shim, "HT_FAIL_FSYNC_FILE": "/ckpt-"})
    check(rc == 1, f"fsync of the checkpoint failing: exit {rc}, expected 1")
    one_error_line(err, step20, "fsync failed", "Input/output error")
    left = sorted(os.listdir(ckpt))
    check(not [f for f in left if f.startswith("ckpt-")], f"checkpoint files left: {left}")
    with open(os.path.join(ckpt, "hpctrain-checkpoints.txt")) as f:
        recorded = f.read()
    check(not recorded, f"the manifest still lists the checkpoint not committed: {recorded!r}")

    # The manifest's record failing: the checkpoint is not committed (no file that
    # retention would never delete).
    fresh(name)
    manifest = os.path.join(ckpt, "hpctrain-checkpoints.txt")
    rc, _, err = train(name, 2, sets, env={"LD_PRELOAD": shim,
                                           "HT_FAIL_FSYNC_FILE": "/hpctrain-checkpoints.txt"})
    check(rc == 1, f"fsync of the checkpoint manifest failing: exit {rc}, expected 1")
    one_error_line(err, manifest, "cannot record a checkpoint", "Input/output error")
    left = sorted(os.listdir(ckpt))
    check(not [f for f in left if f.startswith("ckpt-")], f"checkpoint files left: {left}")

    fresh(name)
    os.makedirs(ckpt)  # the shim fails this directory's fsyncs, not its parent's
    rc, _, err = train(name, 2, sets, env={"LD_PRELOAD": shim, "HT_FAIL_FSYNC_DIR": ckpt})
    check(rc == 1, f"fsync of the checkpoint directory failing: exit {rc}, expected 1")
    one_error_line(err, step20, "written, but syncing its directory failed", "fsync failed",
                   "Input/output error")
    check(os.path.exists(step20), "the committed checkpoint was removed")
    with open(os.path.join(ckpt, "hpctrain-checkpoints.txt")) as f:
        recorded = [line.split("\t")[0] for line in f]
    check(recorded == [os.path.basename(step20)], f"the manifest lists {recorded}")
    no_temporaries(run_dir(name))

    # What writers killed while committing the run's files left: the resume removes them.
    stale = [os.path.join(run_dir(name), f) for f in
             ("metrics.csv.tmp.4000001", "summary.json.tmp.4000002", "STOPPED.tmp.4000003")]
    for path in stale:
        with open(path, "w") as f:
            f.write("half")
    rc, out, _ = train(name, 2, sets, resume="auto")
    check(rc == 0, f"resume after the failed directory fsync: exit {rc}")
    check(not any(os.path.exists(p) for p in stale), "stale temporaries of the run's files "
          f"left: {[p for p in stale if os.path.exists(p)]}")
    check("resuming at step 20" in out or "(step 20," in out, "the resume did not start at "
          "step 20")
    check(not os.path.exists(step20), "retention (keep 1) did not delete the recorded "
          "checkpoint of step 20")
