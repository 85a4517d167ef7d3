"""End-to-end cases of data files taken together: shards that keep the statistics of the
file they were cut from, validation files whose labels name other classes than the
training file's, file names that look like globs, and each rank training its own part.
"""
import os
import shutil
import subprocess

from harness import ARGS, check, expect_ok, fresh, one_error_line, run_dir, train


def tool(*args):
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data")] + list(args),
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"hpctrain-data {' '.join(args)}: exit {p.returncode}: {p.stderr}")


def case_data_files_agree():
    """Shards of a file with `hpctrain-data stats` train with data.normalize: auto as the
    file does (shard dropped mean and std: exit 2); a validation file whose class_names
    number the classes otherwise than data.train's is exit 2 naming it and the label (it
    trained, and its accuracy counted its "fox" as "dog"); a data file named with a glob's
    characters ("fold[1].h5") is that file ("matches no file")."""
    import h5py
    d = os.path.join(ARGS.build, "e2e-runs", "data_agree")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    whole = os.path.join(d, "fold[1].h5")
    shutil.copyfile(f"{ARGS.data}/test.h5", whole)
    tool("stats", whole)
    tool("shard", whole, "--parts", "3", "--out-prefix", os.path.join(d, "part"))
    sets = ["run.deterministic=true", "train.epochs=1", "data.val=", "data.test=",
            "data.normalize=auto", "checkpoint.every_seconds=0"]
    fresh("data_whole")
    a = expect_ok("data_whole", 2, sets + [f"data.train={whole}"])
    fresh("data_parts")
    b = expect_ok("data_parts", 2, sets + [f"data.train={d}/part-*-of-00003.h5"])
    check(a["params_sha256"] == b["params_sha256"],
          "the shards trained to other parameters than the file they were cut from")

    names = [f"class{k}" for k in range(10)]
    val = os.path.join(d, "val.h5")
    shutil.copyfile(f"{ARGS.data}/val.h5", val)
    with h5py.File(whole, "a") as f:
        f.attrs["class_names"] = names
    with h5py.File(val, "a") as f:
        f.attrs["class_names"] = names[:3] + names[4:] + ["class3"]  # class3 moved last
    fresh("data_val")
    rc, _, err = train("data_val", 2, sets + [f"data.train={whole}", f"data.val={val}"])
    check(rc == 2, f"a validation file labelling other classes: exit {rc}, expected 2")
    one_error_line(err, val, "data.val label 3 is 'class4'", "data.train's label 3 is 'class3'")
    check(not os.path.exists(os.path.join(run_dir("data_val"), "summary.json")),
          "the refused run wrote a summary")


def case_ranks_train_their_shards():
    """Each rank trains its own part of the file: a file whose first half is class 0 (black
    images) and second half class 1 (white) trains, on 3 ranks (parts of 171, 171 and 170
    rows, one part across the classes) and on 2, a model that tells the two apart on a test
    file of both (accuracy 1). Ranks that all read one part, or the same rows, see a single
    class and score 0.5."""
    import h5py
    import numpy as np
    d = os.path.join(ARGS.build, "e2e-runs", "shards_data")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, rows in (("train.h5", 512), ("test.h5", 100)):
        labels = (np.arange(rows) >= rows // 2).astype(np.int32)
        with h5py.File(os.path.join(d, name), "w") as f:
            f["images"] = np.repeat(labels.astype(np.uint8) * 255, 16).reshape(rows, 1, 4, 4)
            f["labels"] = labels
    for ranks in (3, 2):
        name = f"shards_{ranks}"
        fresh(name)
        s = expect_ok(name, ranks, [f"data.train={d}/train.h5", "data.val=",
                                    f"data.test={d}/test.h5", "train.batch_size=16",
                                    "train.epochs=3", "model.hidden=[8]",
                                    "checkpoint.every_seconds=0"])
        check(s["test_accuracy"] == 1.0, f"{ranks} ranks: test accuracy {s['test_accuracy']} "
              "on a file whose halves are one class each (0.5: the ranks read the same part)")
