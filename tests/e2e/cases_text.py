"""Token data end to end: the repository's own documentation converted by `hpctrain-data
text` into character windows, a small character language model trained on 2 ranks (it
learns past a unigram model, kill -9 and --resume auto give the uninterrupted parameters),
`hpctrain generate` (deterministic for a seed), and bad token files (exit 2 naming the
file and row)."""
import glob
import json
import math
import os
import shutil
import subprocess
from collections import Counter

from harness import (
    ARGS, check, check_rows_match, checkpoints, expect_ok, fresh, hpctrain, kill_and_resume, newest_step,
    one_error_line, run_dir, train)

CONFIG = "configs/fortunes_char_lstm.yaml"
STEPS = 32


def text_data():
    """docs/*.md as character windows of STEPS + 1 ids: DIR/{train,val,test}.h5."""
    out = os.path.join(ARGS.build, "e2e-runs", "text_data")
    if os.path.exists(os.path.join(out, "test.h5")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(ARGS.build, "hpctrain-data"), "text", *sorted(glob.glob("docs/*.md")),
           "--out", out, "--seq-len", str(STEPS), "--val-fraction", "0.05",
           "--test-fraction", "0.05"]
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(p.stdout + p.stderr)
    check(p.returncode == 0, f"hpctrain-data text failed with exit {p.returncode}")
    return out


def unigram_nats():
    """The entropy of the documentation's characters: what a model that ignores the
    context can reach at best."""
    counts = Counter()
    for path in sorted(glob.glob("docs/*.md")):
        with open(path, encoding="utf-8") as f:
            counts.update(f.read())
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values())


def lm_sets(data, extra=()):
    return [f"data.train={data}/train.h5", f"data.val={data}/val.h5",
            f"data.test={data}/test.h5",
            "model.layers=[{type: embedding, name: embed, dim: 16},"
            " {type: lstm, name: lstm, units: 48, return_sequences: true}]",
            "train.batch_size=32", "train.epochs=3", "optimizer.lr=0.01",
            "run.deterministic=true", "checkpoint.every_steps=20", "checkpoint.every_seconds=0",
            "checkpoint.at_epoch_end=false", *extra]


def generate(checkpoint, data, seed, prompt="The ", length=80):
    cmd = [hpctrain(), "generate", CONFIG, "--checkpoint", checkpoint, "--prompt", prompt,
           "--length", str(length), "--seed", str(seed), "--temperature", "0.8",
           "--set", f"data.train={data}/train.h5", "--set", "model.layers=[{type: embedding,"
           " name: embed, dim: 16}, {type: lstm, name: lstm, units: 48, return_sequences: true}]"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"generate failed with exit {p.returncode}: {p.stderr}")
    return p.stdout


def case_char_lm_trains_resumes_generates():
    data = text_data()
    sets = lm_sets(data)
    fresh("char_lm_full")
    s = expect_ok("char_lm_full", 2, sets, config=CONFIG)
    unigram = unigram_nats()
    print(f"val loss {s['val_loss']:.4f} nats per character; unigram entropy {unigram:.4f}")
    check(s["val_loss"] < unigram - 0.3,
          f"val loss {s['val_loss']:.4f} is not clearly below the unigram {unigram:.4f}")
    k = kill_and_resume("char_lm_kill", sets, lambda n: 1 if newest_step(n) >= 40 else None,
                        config=CONFIG)
    check(k["params_sha256"] == s["params_sha256"], "resumed language model parameters differ")
    check_rows_match("char_lm_kill", "char_lm_full")

    ckpt = checkpoints("char_lm_full")[-1]
    a, b, c = (generate(ckpt, data, seed) for seed in (7, 7, 8))
    print(a)
    check(a == b, "generate with the same seed printed different text")
    check(a != c, "generate with another seed printed the same text")
    check(a.startswith("The ") and len(a) == len("The ") + 80 + 1,
          f"generate printed {len(a)} characters, expected the prompt, 80 more and a newline")

    # Parameter servers (2 workers, 1 server) train it too, and 3 ranks evaluating its final
    # checkpoint find the run's own test figures.
    sets_async = lm_sets(data, ["distributed.strategy=async", "optimizer.clip_grad_norm=0",
                                "checkpoint.at_epoch_end=true",
                                "train.epochs=2"])
    fresh("char_lm_async")
    a = expect_ok("char_lm_async", 3, sets_async, config=CONFIG)
    check(a["val_loss"] < unigram, f"async val loss {a['val_loss']:.4f} >= unigram {unigram:.4f}")
    fresh("char_lm_eval")
    cmd = ["mpiexec", "-n", "3", hpctrain(), "eval", CONFIG, "--checkpoint",
           checkpoints("char_lm_async")[-1]] + sum(
        (["--set", x] for x in sets_async + [f"run.dir={run_dir('char_lm_eval')}"]), [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"eval: exit {p.returncode}")
    with open(os.path.join(run_dir("char_lm_eval"), "eval.json")) as f:
        e = json.load(f)
    check(e["test_accuracy"] == a["test_accuracy"],
          f"eval accuracy {e['test_accuracy']} != the run's {a['test_accuracy']}")
    check(abs(e["test_loss"] - a["test_loss"]) < 1e-6 * a["test_loss"],
          f"eval loss {e['test_loss']} != the run's {a['test_loss']}")


def case_char_lm_bad_tokens():
    """A token id >= vocab_size in the training file: exit 2, one line naming the file and
    its row; a model that cannot predict every step of a next-token file: exit 2 naming
    return_sequences; generate with a character outside the vocabulary: exit 2."""
    import h5py  # Debian's python3-h5py (scripts/install-deps.sh)
    data = text_data()
    bad = os.path.join(run_dir("char_lm_bad"), "bad.h5")
    fresh("char_lm_bad")
    os.makedirs(run_dir("char_lm_bad"), exist_ok=True)
    shutil.copy(os.path.join(data, "train.h5"), bad)
    with h5py.File(bad, "r+") as f:
        vocab = int(f.attrs["vocab_size"])
        f["tokens"][5, 3] = vocab
    sets = lm_sets(data, [f"data.train={bad}"])
    rc, _, err = train("char_lm_bad", 2, sets, config=CONFIG)
    check(rc == 2, f"bad token: exit {rc}, expected 2")
    one_error_line(err, bad, f"token {vocab} at row 5, column 3")

    fresh("char_lm_last_step")
    last = lm_sets(data, ["model.layers=[{type: embedding, dim: 8}, {type: lstm, units: 8}]"])
    rc, _, err = train("char_lm_last_step", 2, last, config=CONFIG)
    check(rc == 2, f"last-step model on next tokens: exit {rc}, expected 2")
    one_error_line(err, "next tokens per sample", "return_sequences: true")

    fresh("char_lm_images")
    images = lm_sets(data, [f"data.train={ARGS.data}/test.h5", f"data.val={ARGS.data}/val.h5",
                            f"data.test={ARGS.data}/test.h5"])
    rc, _, err = train("char_lm_images", 2, images, config=CONFIG)
    check(rc == 2, f"embedding on images: exit {rc}, expected 2")
    one_error_line(err, "embedding 'embed' needs token data")

    p = subprocess.run([hpctrain(), "generate", CONFIG, "--checkpoint", bad, "--prompt", "\u2603",
                        "--set", f"data.train={data}/train.h5"], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 2, f"generate with an unknown character: exit {p.returncode}")
    one_error_line(p.stderr, "\u2603", "not in the vocabulary")
    # a control character is shown escaped: the message stays one line
    p = subprocess.run([hpctrain(), "generate", CONFIG, "--checkpoint", bad, "--prompt",
                        "a\x01\n", "--set", f"data.train={data}/train.h5"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 2, f"generate with a control character: exit {p.returncode}")
    one_error_line(p.stderr, "'\\x01' is not in the vocabulary")
    # One target per window (--seq-len 1) would read as a file of labelled sequences.
    p = subprocess.run([os.path.join(ARGS.build, "hpctrain-data"), "text", "docs/formats.md",
                        "--out", os.path.join(run_dir("char_lm_bad"), "t1.h5"), "--seq-len",
                        "1"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--seq-len: expected an integer in [2, " in p.stderr,
          f"text --seq-len 1: exit {p.returncode}, {p.stderr}")
