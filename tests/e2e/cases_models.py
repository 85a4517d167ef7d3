"""End-to-end cases of models and precisions: ResNet resume and eval, host-staged memory,
mixed precision, checkpoint evaluation, image folders, transfer learning.
"""
import json
import os
import random
import re
import shutil
import struct
import subprocess

from harness import (
    ARGS, DET, check, checkpoints, expect_ok, expect_staged, fresh, h5_values, hpctrain,
    kill_and_resume, metrics_rows, newest_step, one_error_line, run_dir, summary, train)


RESNET = "configs/fashion_mnist_resnet18.yaml"


def resnet_sets():
    # A width-4 ResNet-18 on the 5000 validation images: 39 steps per epoch on 2 ranks.
    return ["model.width=4", "train.epochs=2", f"data.train={ARGS.data}/val.h5",
            "run.deterministic=true", "checkpoint.every_seconds=0", "checkpoint.every_steps=10"]


def expect_eval_matches(name, ranks, config, ckpt, sets, want):
    """`hpctrain eval` of `ckpt` on `ranks` ranks (run directory `name`) exits 0 and finds
    the test accuracy `want` of the run that wrote it."""
    d = ARGS.data
    cmd = ["mpiexec", "-n", str(ranks), hpctrain(), "eval", config, "--checkpoint", ckpt] + sum(
        (["--set", x] for x in sets + [f"data.val={d}/val.h5", f"data.test={d}/test.h5",
                                       f"run.dir={run_dir(name)}"]), [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"eval: exit {p.returncode}")
    with open(os.path.join(run_dir(name), "eval.json")) as f:
        e = json.load(f)
    check(e["test_accuracy"] == want, f"eval {e['test_accuracy']} != the run's {want}")


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
    expect_eval_matches("rn_eval", 3, RESNET, ckpt, resnet_sets(), s["test_accuracy"])


def case_staged_memory_matches():
    """The trainer's path for device memory (batches, collectives and checkpoints staged
    through host buffers, HPCTRAIN_STAGE_CPU=1 on the CPU backend) gives the parameters of
    the in-place path: MLP with both strategies and on one rank (no collectives), with
    normalised and augmented inputs (staged: shifted and mirrored as stored bytes,
    normalised as the backend decodes them), and a ResNet with BatchNorm state. The staged
    runs time their step phases (train.step_timing), which must leave the parameters
    alone."""
    mlp = ["run.deterministic=true", "train.epochs=1", f"data.train={ARGS.data}/test.h5",
           "checkpoint.every_steps=20"]
    for label, ranks, sets, config in [
            ("mlp", 2, mlp, "configs/fashion_mnist_mlp.yaml"),
            ("mlp1", 1, mlp, "configs/fashion_mnist_mlp.yaml"),
            ("avg", 2, mlp + ["distributed.strategy=average", "distributed.every=4"],
             "configs/fashion_mnist_mlp.yaml"),
            ("aug", 2, mlp + ["data.normalize=given", "data.mean=[0.286]", "data.std=[0.353]",
                              "data.augment.flip=true", "data.augment.crop_padding=2"],
             "configs/fashion_mnist_mlp.yaml"),
            ("resnet", 2, resnet_sets() + ["train.epochs=1"], RESNET)]:
        fresh(f"plain_{label}")
        fresh(f"staged_{label}")
        a = expect_ok(f"plain_{label}", ranks, sets, config=config)
        # The staged run also times its step phases: the marks must not change the result.
        b = expect_staged(f"staged_{label}", ranks, sets + ["train.step_timing=true"],
                          config=config)
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
        fractions = b["step_phase_fractions"]
        check(a["step_phase_fractions"] is None and all(
            abs(fractions[k] - phases[k] / b["time_train_s"]) < 1e-6 for k in phases) and
            fractions["data_wait"] == b["data_wait_fraction"],
            f"{label}: step_phase_fractions {fractions}")


def case_recorded_steps_match_eager():
    """The step graphs of train.cuda_graph, recorded and replayed on the CPU
    (HPCTRAIN_RECORD_CPU=1: each operation of a recorded step kept with its pointers and
    arguments, as a CUDA graph keeps them) give the parameters of eager steps, bit for bit:
    the MLP (staged like a GPU's memory, and in place), the CNN in fp16 (loss scaling), the
    LSTM and a ResNet with BatchNorm state, one with its step phases timed. A value baked
    into a recording that should change between steps shows here. A recording that fails
    (HPCTRAIN_RECORD_CPU_REFUSE) makes auto run eagerly with the same parameters and on
    stop. Under balance auto each new batch size runs two eager steps before it is
    recorded. A model with dropout and train.cuda_graph on is exit 2, one line naming the
    key."""
    record = {"HPCTRAIN_RECORD_CPU": "1"}
    staged = dict(record, HPCTRAIN_STAGE_CPU="1")
    one = ["run.deterministic=true", "train.epochs=1", f"data.train={ARGS.data}/val.h5",
           "data.val=", "data.test=", "checkpoint.every_seconds=0"]
    mlp, cnn = "configs/fashion_mnist_mlp.yaml", "configs/fashion_mnist_cnn.yaml"
    eager_sha = {}
    for label, ranks, sets, config, env in [
            ("mlp", 2, one, mlp, staged),
            ("mlp_bf16_in_place", 1, one + ["precision=bf16"], mlp, record),
            ("cnn_fp16", 1, one + ["precision=fp16", "train.step_timing=true"], cnn, staged),
            ("lstm", 1, one, "configs/fashion_mnist_lstm.yaml", staged),
            ("resnet", 2, resnet_sets() + ["train.epochs=1", "data.val=", "data.test="], RESNET,
             staged)]:
        eager = expect_ok(f"eager_{label}", ranks, sets + ["train.cuda_graph=off"],
                          config=config, env=env)
        graph = expect_ok(f"graph_{label}", ranks, sets + ["train.cuda_graph=on"],
                          config=config, env=env)
        steps = graph["cuda_graph_steps"]
        check(eager["cuda_graph_steps"] is None and steps is not None and steps > 0,
              f"{label}: cuda_graph_steps {eager['cuda_graph_steps']} / {steps}")
        check(graph["params_sha256"] == eager["params_sha256"],
              f"{label}: {steps} replayed steps gave other parameters than eager ones")
        print(f"{label}: {steps} replayed steps, the parameters of eager steps")
        eager_sha[label] = eager["params_sha256"]
    # A recording that fails (its third operation refused, as one a CUDA graph cannot hold):
    # auto warns and runs every step eagerly, weights converted again, with the parameters
    # of eager steps; on stops with one line.
    bf16 = one + ["precision=bf16"]
    refused = dict(record, HPCTRAIN_RECORD_CPU_REFUSE="3")
    rc, _, err = train("graph_refused", 1, bf16 + ["train.cuda_graph=auto"], env=refused)
    s = summary("graph_refused")
    check(rc == 0 and s["cuda_graph_steps"] == 0, f"auto after a failed recording: exit {rc}, "
          f"cuda_graph_steps {s['cuda_graph_steps']}")
    check("recording a step failed; steps run eagerly" in err, "auto: no warning said why")
    check(s["params_sha256"] == eager_sha["mlp_bf16_in_place"],
          "auto after a failed recording gave other parameters than eager steps")
    rc, _, err = train("graph_refused_on", 1, bf16 + ["train.cuda_graph=on"], env=refused)
    check(rc == 1, f"on after a failed recording: exit {rc}, expected 1")
    one_error_line(err, "train.cuda_graph: on, but recording a step failed")
    # balance auto changes rank 0's batch between epochs: each new batch size gets two
    # eager steps (its plans made) before one is recorded.
    sets = one + ["run.deterministic=false", "train.epochs=3", "train.cuda_graph=on",
                  "distributed.balance=auto", "debug.slow_rank.rank=1",
                  "debug.slow_rank.factor=3"]
    rc, out, err = train("graph_balance", 2, sets, env=staged)
    check(rc == 0, f"balance auto with graphs: exit {rc}")
    log = out + err
    steps = int(re.search(r"(\d+) steps/epoch", log).group(1))
    batches = [64] + [int(b) for b in re.findall(r"next epoch's batches (\d+) \d+", log)]
    sizes = 1 + sum(a != b for a, b in zip(batches, batches[1:]))
    got = summary("graph_balance")["cuda_graph_steps"]
    check(got == 3 * steps - 2 * sizes,
          f"balance auto: {got} replayed steps, expected {3 * steps - 2 * sizes} (rank 0's "
          f"batches {batches}, {steps} steps per epoch)")
    print(f"balance auto: rank 0's batches {batches}, {got} replayed steps")
    path = os.path.join(run_dir("graph_dropout"), "dropout.yaml")
    fresh("graph_dropout")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("model:\n  preset: layers\n  layers:\n    - {type: dense, units: 16}\n"
                "    - {type: relu}\n    - {type: dropout, rate: 0.2}\n")
    rc, _, err = train("graph_dropout", 1, one + ["train.cuda_graph=on"], config=path,
                       env=record)
    check(rc == 2, f"dropout with train.cuda_graph on: exit {rc}, expected 2")
    one_error_line(err, "train.cuda_graph: on", "dropout")


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
    b = expect_staged("bf16_staged", 2, mlp)
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

    # Weights blown up by a huge learning rate overflow the forward pass itself: the loss is
    # not finite, which no loss scale can mend, and the run stops (exit 1) saying so.
    fresh("fp16_blowup")
    rc, out, err = train("fp16_blowup", 2, ["precision=fp16", "optimizer.lr=1e6", "train.epochs=2",
                                            f"data.train={ARGS.data}/test.h5", "data.val=",
                                            "data.test="])
    check(rc == 1 and "training diverged" in err, f"fp16 blow-up: exit {rc}, expected 1")

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
           f"run.dir={run_dir('evalout')}", "--set", "train.progress_seconds=1e-9"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"eval: exit {p.returncode}")
    # An evaluation pass shows its progress too (rank 0, at most every progress_seconds).
    check("  test  batch 1/" in p.stdout, "no progress line of the test pass")
    with open(os.path.join(run_dir("evalout"), "eval.json")) as f:
        e = json.load(f)
    check(e["test_accuracy"] == s["test_accuracy"], f"eval {e['test_accuracy']} != run's "
          f"{s['test_accuracy']}")
    check(e["params_sha256"] == s["params_sha256"], "eval loaded other parameters")
    # A checkpoint whose first bytes are damaged is reported as a corrupt checkpoint, not
    # read as a YAML config.
    damaged = os.path.join(run_dir("evalout"), "damaged.h5")
    shutil.copyfile(ckpt, damaged)
    with open(damaged, "r+b") as f:
        f.write(b"XXXX")
    p = subprocess.run([hpctrain(), "eval", damaged], capture_output=True, text=True)
    check(p.returncode == 2, f"eval of a damaged checkpoint: exit {p.returncode}")
    one_error_line(p.stderr, damaged, "checksum does not match (corrupt)")
    # A checkpoint of strategy average holds a copy per rank: eval scores their average, the
    # same model on 1 and on 3 ranks (on 3 each rank took its own copy before); its final
    # checkpoint, whose copies agree, gives the run's parameters exactly (a float average of
    # equal copies need not); and an async run's checkpoint evaluates on one rank.
    d_small = [f"data.train={d}/test.h5", "data.val=", f"data.test={d}/val.h5",
               "train.epochs=1"]
    fresh("evalavg")
    s = expect_ok("evalavg", 3, d_small + ["distributed.strategy=average",
                                           "distributed.every=3", "checkpoint.every_steps=50"])
    fresh("evalasync")
    a = expect_ok("evalasync", 2, d_small + ["distributed.strategy=async"])
    for run, ckpt_index, want_sha in (("evalavg", 0, None), ("evalavg", -1, s["params_sha256"]),
                                      ("evalasync", -1, a["params_sha256"])):
        ckpt = checkpoints(run)[ckpt_index]
        got = []
        for ranks in ((1, 3) if run == "evalavg" else (1,)):
            p = subprocess.run(["mpiexec", "-n", str(ranks), hpctrain(), "eval", run_dir(run),
                                "--checkpoint", ckpt], capture_output=True, text=True)
            check(p.returncode == 0, f"eval of {ckpt} on {ranks}: exit {p.returncode} {p.stderr}")
            with open(os.path.join(run_dir(run), "eval.json")) as f:
                got.append(json.load(f))
        check(len({(g["test_accuracy"], g["params_sha256"]) for g in got}) == 1,
              f"eval of {ckpt} differs between 1 and 3 ranks: {got}")
        check(want_sha is None or got[0]["params_sha256"] == want_sha,
              f"eval of the final {ckpt}: other parameters than the run's")


def case_eval_moved_run():
    """hpctrain eval RUN_DIR of a run moved elsewhere reads the checkpoints that moved with
    it, also when its checkpoint.dir is the run directory itself (it read the old place)."""
    fresh("evalmoved")
    moved = run_dir("evalmoved") + "-moved"
    shutil.rmtree(moved, ignore_errors=True)
    d = ARGS.data
    s = expect_ok("evalmoved", 1, [f"data.train={d}/test.h5", "data.val=",
                                   f"data.test={d}/val.h5", "train.epochs=1",
                                   f"checkpoint.dir={run_dir('evalmoved')}"])
    os.rename(run_dir("evalmoved"), moved)
    p = subprocess.run(["mpiexec", "-n", "1", hpctrain(), "eval", moved], capture_output=True,
                       text=True)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"eval of the moved run: exit {p.returncode}")
    with open(os.path.join(moved, "eval.json")) as f:
        e = json.load(f)
    check(e["params_sha256"] == s["params_sha256"], "eval of the moved run: other parameters")
    # run.dir of a run directory is that directory: another one is refused, not set aside.
    for setting in (f"run.dir={moved}-x", f"run={{dir: {moved}-x}}"):
        p = subprocess.run(["mpiexec", "-n", "1", hpctrain(), "eval", moved, "--set", setting],
                           capture_output=True, text=True)
        check(p.returncode == 2 and not os.path.exists(moved + "-x"),
              f"eval --set {setting}: exit {p.returncode}")
        one_error_line(p.stderr, "--set run.dir", moved)


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
    # A word that is an option's value is kept whole (--out --rgb wrote "--color=rgb"); an
    # option given twice is exit 2 (the last one was taken).
    tool = os.path.join(ARGS.build, "hpctrain-data")
    p = subprocess.run([tool, "images", root, "--out", "--rgb", "--size", "4x4"],
                       capture_output=True, text=True, cwd=os.path.dirname(out))
    check(p.returncode == 0 and os.path.exists(os.path.join(os.path.dirname(out), "--rgb")),
          f"images --out --rgb: exit {p.returncode}, {p.stderr}")
    p = subprocess.run([tool, "images", root, "--out", out, "--size", "4x4", "--size", "8x8"],
                       capture_output=True, text=True)
    check(p.returncode == 2 and p.stderr.startswith("images: --size is given twice") and
          len(p.stderr.splitlines()) == 1, f"images --size twice: exit {p.returncode}, {p.stderr}")
    s = expect_ok("images_train", 1, [f"data.train={out}", "data.val=", "data.test=",
                                      "train.batch_size=8", "train.epochs=10",
                                      "optimizer.lr=0.02", "model.hidden=[32]"])
    check(s["train_accuracy"] >= 0.9, f"train accuracy {s['train_accuracy']} < 0.9")


def case_transfer_freeze():
    """model.init_from + model.freeze: the frozen base keeps the source's weights
    exactly, the head trains. A missing init_from is exit 2 for a fresh run; a run that
    resumes from its own checkpoint goes on without it (the source run may have pruned it)."""
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
    # Parameter averaging on 3 ranks leaves frozen layers as they are, to the bit: every
    # layer frozen, the source's parameters come out (the average of three equal copies,
    # (x + x + x) / 3, is not always x in float32).
    fresh("frozen_average")
    s = expect_ok("frozen_average", 3, ["train.epochs=1", "data.val=", "data.test=",
                                        f"model.init_from={src}",
                                        "model.freeze=[dense0, classifier]",
                                        "distributed.strategy=average"])
    check(s["params_sha256"] == summary("base")["params_sha256"],
          "averaging changed frozen parameters")
    rc, _, err = train("frozen_relu", 1, ["train.epochs=1", "model.freeze=[relu0]"])
    check(rc == 2, f"model.freeze of a layer without parameters: exit {rc}, expected 2")
    one_error_line(err, "model.freeze: layer 'relu0' has no parameters to freeze")
    missing = os.path.join(run_dir("tuned"), "nothing.h5")
    fresh("tuned_missing")
    rc, _, err = train("tuned_missing", 2, ["train.epochs=2", f"model.init_from={missing}"])
    check(rc == 2, f"model.init_from of a missing file: exit {rc}, expected 2")
    one_error_line(err, f"model.init_from: {missing}: no such checkpoint")
    rc, _, err = train("tuned_missing", 2, ["train.epochs=2", f"model.init_from={missing}"],
                       resume="never")
    check(rc == 2, f"--resume never with a missing model.init_from: exit {rc}, expected 2")
    tuned = summary("tuned")
    rc, out, err = train("tuned", 2, ["train.epochs=2", "checkpoint.every_steps=1000",
                                      "data.val=", f"model.init_from={missing}",
                                      "model.freeze=[dense0]"])
    check(rc == 0 and "resuming at step 0 of epoch 2" in out,
          f"resuming with model.init_from gone: exit {rc}: {err}")
    check(summary("tuned")["resumed_from"] == 429 and tuned["epochs_completed"] == 1,
          f"resumed from {summary('tuned')['resumed_from']}")


LSTM = "configs/fashion_mnist_lstm.yaml"


def case_lstm_trains_resumes():
    """Sequential Fashion-MNIST with the LSTM config (smaller: 32 units, the 10,000 test
    images, 3 epochs, gradients clipped to norm 1): it learns, and kill -9 of a rank then
    --resume auto gives the parameters of the uninterrupted run; with parameter servers it
    learns too, and evaluating its checkpoint gives its own test accuracy."""
    sets = ["model.layers=[{type: lstm, name: lstm, units: 32}]", "train.epochs=3",
            f"data.train={ARGS.data}/test.h5", "run.deterministic=true",
            "checkpoint.every_steps=10", "optimizer.clip_grad_norm=1.0"]
    fresh("lstm_full")
    s = expect_ok("lstm_full", 2, sets, config=LSTM)
    check(s["test_accuracy"] >= 0.65, f"test accuracy {s['test_accuracy']:.4f} < 0.65")
    k = kill_and_resume("lstm_kill", sets, lambda n: 0 if newest_step(n) >= 30 else None,
                        config=LSTM)
    check(k["params_sha256"] == s["params_sha256"], "resumed LSTM parameters differ")
    # Parameter servers (2 workers, 1 server) train it too, and 2 ranks evaluating the
    # final checkpoint find the run's own test accuracy.
    sets_async = sets[:-1] + ["distributed.strategy=async", "checkpoint.at_epoch_end=true"]
    fresh("lstm_async")
    a = expect_ok("lstm_async", 3, sets_async, config=LSTM)
    check(a["test_accuracy"] >= 0.6, f"async test accuracy {a['test_accuracy']:.4f} < 0.6")
    ckpt = checkpoints("lstm_async")[-1]
    expect_eval_matches("lstm_eval", 2, LSTM, ckpt, sets_async, a["test_accuracy"])


def case_model_refusals():
    """Models that cannot be built are exit 2 with one line naming the config and the key:
    a conv2d filter past INT_MAX weights (it segfaulted), a buffer the memory check does not
    count that cannot be allocated (std::bad_alloc, exit 1), an init_from that is no
    checkpoint, a batch of 1 at which a batchnorm has one value per channel; and init_from
    does not load a layer of equal size but other shapes. inspect --ranks finds what a run
    on that many ranks refuses for the count."""
    d = run_dir("refusals")
    os.makedirs(d, exist_ok=True)
    small = [f"data.train={ARGS.data}/test.h5", "data.val=", "data.test=", "train.epochs=1",
             "run.threads=1", "device=cpu", "checkpoint.every_steps=1000"]

    def config(name, layers, extra=""):
        path = os.path.join(d, name + ".yaml")
        with open(path, "w") as f:
            f.write("model:\n  preset: layers\n  layers:\n"
                    + "".join(f"    - {l}\n" for l in layers) + extra)
        return path

    big = config("patch", ["{type: conv2d, filters: 65536, kernel: 1}",
                           "{type: conv2d, name: c2, filters: 1, kernel: 1024, padding: 512}"])
    # (inspect showed it as 1 parameter; on 1x1x1 samples training segfaulted)
    p = subprocess.run([hpctrain(), "inspect", big, "--input", "1x1x1", "--classes", "10",
                        "--set", f"data.train={ARGS.data}/test.h5"],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 2, f"a filter of 2^36 weights: exit {p.returncode}, expected 2")
    one_error_line(p.stderr, "patch.yaml: model: layer c2: ", "more than 2147483647")

    # The workspace of 1024x1024 filters over 1053x1053 outputs: terabytes, refused by the
    # allocator for certain under a 4 GiB address-space limit.
    ws = config("workspace", ["{type: conv2d, filters: 4, kernel: 1024, padding: 1024}"])
    p = subprocess.run(["bash", "-c", 'ulimit -v 4000000 && exec "$@"', "bash", hpctrain(),
                        "inspect", ws, "--set", f"data.train={ARGS.data}/test.h5"],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 2, f"a workspace past memory: exit {p.returncode}, expected 2: "
                             f"{p.stderr[-500:]}")
    one_error_line(p.stderr, "workspace.yaml: model: cannot allocate the workspace of layer "
                             "conv2d0")

    rc, _, err = train("refuse_init", 1, small + [f"model.init_from={ARGS.data}/test.h5"],
                       config=config("init", ["{type: dense, units: 8}"]))
    check(rc == 2, f"init_from a data file: exit {rc}, expected 2")
    one_error_line(err, "init.yaml: model.init_from: ", "not an hpctrain checkpoint")

    # 8 3x3 filters on 1 channel and 8 1x1 filters on 9 channels: 80 parameters each.
    pool = "{type: global_avgpool}"
    expect_ok("shape_src", 1, small, config=config(
        "src", ["{type: conv2d, name: c, filters: 8, kernel: 3, padding: 1}", pool]))
    src = checkpoints("shape_src")[-1]
    rc, out, err = train("shape_dst", 1, small + [f"model.init_from={src}"], config=config(
        "dst", ["{type: conv2d, name: a, filters: 9, kernel: 1}",
                "{type: conv2d, name: c, filters: 8, kernel: 1}", pool]))
    check(rc == 0, f"init_from with a layer of other shapes: exit {rc}")
    check("loaded classifier; newly initialised a, c (shape differs)" in out + err,
          "the conv2d of other shapes was not reported newly initialised: " + (out + err)[-800:])

    # A batch of 1 per rank where a batchnorm sees one value per channel: nothing before it
    # trains (refused on the rank of that batch: 4 samples over 3 ranks are 2, 1, 1).
    bn = config("bn", ["{type: dense, units: 8}", "{type: batchnorm, name: norm}"])
    rc, _, err = train("refuse_bn", 3, small + ["train.batch_size=4", "train.batch_size_is=global"],
                       config=bn)
    check(rc == 2, f"batchnorm on batches of 1: exit {rc}, expected 2")
    one_error_line(err, "bn.yaml: train.batch_size: rank 1 trains on batches of 1 sample, at "
                   "which layer norm (batchnorm) normalises one value per channel")
    # --ranks: what a run on that many ranks would refuse (a study checks each variant so;
    # a one-rank async variant failed only when its turn came, after the runs before it).
    mlp = ["inspect", "configs/fashion_mnist_mlp.yaml", "--set",
           f"data.train={ARGS.data}/test.h5"]
    for sets, ranks, words in (
            (["distributed.strategy=async"], "2", None),
            (["distributed.strategy=async"], "1", "distributed.parameter_servers: 1 leaves no"),
            (["train.batch_size=6000"], "2", "train.batch_size: 6000 on 2 ranks is larger than "
             "the 10000 samples"),
            ([], "10001", "10000 samples cannot be shared by 10001 ranks")):
        c = subprocess.run([hpctrain()] + mlp + [x for s in sets for x in ("--set", s)] +
                           ["--ranks", ranks], capture_output=True, text=True)
        if words is None:
            check(c.returncode == 0, f"inspect --ranks {ranks} {sets}: " + c.stderr)
        else:
            check(c.returncode == 2, f"inspect --ranks {ranks} {sets}: exit {c.returncode}")
            one_error_line(c.stderr, words)
