"""End-to-end cases of `hpctrain export` (docs/export.md).

export_matches_reference needs no PyTorch: tiny models of every preset and layer kind get
weights given by formulas, laid out as export_reference.json says (written once by
export_reference.py with PyTorch), and the export must hold those tensors under those
names and shapes, and hpctrain's logits must be PyTorch's to 1e-5. export_pytorch_matches_eval
trains ResNet-18, the MLP, the CNN and an LSTM on Fashion-MNIST for 16 steps and loads
their PyTorch exports (exit 77 without python3-torch). export_refusals: the failure paths.
"""
import glob
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import h5py
import numpy as np

from harness import ARGS, check, checkpoints, expect_ok, fresh, hpctrain, one_error_line, run_dir

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE = os.path.join(HERE, "export_reference.json")
MAX_DIFF = 1e-5
SKIP = 77
ROWS = 8  # per data file of the reference models: one training step of 8

# The reference models: data (kind, sample shape, classes or vocabulary) and model section.
REFERENCE_MODELS = {
    "mlp": (("uint8", (1, 4, 4), 3), {"preset": "mlp", "hidden": [6, 5]}),
    "cnn": (("float32", (1, 8, 8), 3), {"preset": "cnn"}),
    "resnet18": (("float16", (3, 16, 16), 4),
                 {"preset": "resnet18", "width": 2, "stem": "imagenet"}),
    "resnet34": (("float32", (1, 9, 7), 3), {"preset": "resnet34", "width": 2, "stem": "small"}),
    "conv_layers": (("float32", (2, 9, 9), 3), {"preset": "layers", "layers": [
        {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1, "bias": False},
        {"type": "batchnorm"}, {"type": "relu"},
        {"type": "maxpool", "kernel": 3, "stride": 2, "padding": 1},
        {"type": "basic_block", "name": "block", "filters": 6, "stride": 2},
        {"type": "avgpool", "kernel": 2, "stride": 1, "padding": 1},
        {"type": "conv2d", "filters": 3, "kernel": 2},
        {"type": "dropout", "rate": 0.3}, {"type": "global_avgpool"},
        {"type": "dense", "units": 5}, {"type": "relu"}]}),
    "gru_rows": (("float32", (1, 6, 7), 3), {"preset": "layers", "layers": [
        {"type": "gru", "units": 5, "layers": 2}, {"type": "batchnorm"},
        {"type": "flatten"}, {"type": "dense", "units": 4}, {"type": "relu"}]}),
    "char_lstm": (("tokens", 6, 7), {"preset": "layers", "layers": [
        {"type": "embedding", "dim": 4},
        {"type": "lstm", "units": 5, "layers": 2, "return_sequences": True},
        {"type": "dense", "units": 3, "per_step": True}]}),
}


def run(cmd, env=None):
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    return p


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data):
    """CRC-32C (Castagnoli), as checkpoints store it (docs/formats.md)."""
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def uniform(n, seed):
    """n numbers in [0, 1) from splitmix64's mixer: integer arithmetic, the same anywhere."""
    with np.errstate(over="ignore"):
        x = np.arange(n, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


def formula_tensor(index, name, shape):
    """The values of tensor `index` of a reference model, as float32 of `shape`: uniform
    draws sized so that activations stay near 1 through deep models (weights with variance
    1 / fan-in, BatchNorm scales in [0.8, 1.2], running variances in [1, 1.8])."""
    u = uniform(math.prod(shape), index + 1)
    if name.endswith("running_var"):
        v = 1.0 + 0.8 * u
    elif name.endswith("running_mean"):
        v = 0.2 * (2 * u - 1)
    elif len(shape) == 1 and name.endswith(".weight"):  # BatchNorm's scale
        v = 0.8 + 0.4 * u
    elif len(shape) == 1:
        v = 0.1 * (2 * u - 1)
    else:
        v = (2 * u - 1) * math.sqrt(3.0 / math.prod(shape[1:]))
    return v.astype(np.float32).reshape(shape)


def write_data(path, data, phase):
    """A data file (docs/formats.md) of ROWS samples given by formulas."""
    kind, shape, classes = data
    with h5py.File(path, "w") as f:
        if kind == "tokens":
            i = np.arange(ROWS * (shape + 1)) + phase
            f["tokens"] = ((i * i + 3 * i) % classes).astype(np.int32).reshape(ROWS, shape + 1)
            f.attrs["vocab_size"] = np.int32(classes)
            return
        x = 0.5 + 0.5 * np.sin(0.37 * (np.arange(ROWS * math.prod(shape)) + phase))
        x = x.reshape((ROWS,) + shape)
        f["images"] = np.round(255 * x).astype(np.uint8) if kind == "uint8" else x.astype(kind)
        f["labels"] = (np.arange(ROWS) % classes).astype(np.int32)
        f.attrs["num_classes"] = np.int32(classes)


def decoded_inputs(path, kind):
    """The rows of a data file as hpctrain decodes them (core/sample_type.hpp)."""
    with h5py.File(path, "r") as f:
        if kind == "tokens":
            t = f["tokens"][()]
            return t[:, None, None, :-1].astype(np.float32)
        x = f["images"][()]
    if kind == "uint8":
        return x.astype(np.float32) * np.float32(1.0 / 255.0)
    return x.astype(np.float32)


def reference_folder(name):
    """The folder of reference model `name` in this case: each case its own, so that cases
    run side by side (ctest -j) do not delete each other's."""
    return os.path.join(ARGS.build, "e2e-runs", "export_ref", ARGS.case, name)


def prepare_reference_model(name):
    """Data, config and one training step of reference model `name`: (config, checkpoint)."""
    data, model = REFERENCE_MODELS[name]
    folder = reference_folder(name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    write_data(os.path.join(folder, "train.h5"), data, 0)
    write_data(os.path.join(folder, "test.h5"), data, 1000)
    config = {"run": {"name": name, "dir": os.path.join(folder, "run"), "threads": 1},
              "device": "cpu", "model": model,
              "data": {"train": os.path.join(folder, "train.h5"),
                       "test": os.path.join(folder, "test.h5")},
              "optimizer": {"name": "sgd", "lr": 0.01},
              "train": {"epochs": 1, "batch_size": ROWS, "progress_seconds": 0}}
    path = os.path.join(folder, "config.yaml")
    with open(path, "w") as f:
        json.dump(config, f)  # JSON is YAML
    p = run(["mpiexec", "-n", "1", hpctrain(), "train", path])
    check(p.returncode == 0, f"{name}: training exit {p.returncode}")
    ckpts = sorted(glob.glob(os.path.join(folder, "run", "checkpoints", "ckpt-*.h5")))
    return path, ckpts[-1]


def export(target, fmt, out, extra=(), env=None):
    if os.path.exists(out):
        os.unlink(out)
    return run([hpctrain(), "export", target, "--format", fmt, "--out", out] + list(extra),
               env=env)


def export_layers(config, checkpoint, out):
    p = export(config, "hdf5-layers", out, ["--checkpoint", checkpoint])
    check(p.returncode == 0, f"export of {checkpoint}: exit {p.returncode}")
    return out


def export_layout(path):
    """[name, array, offset, shape] of every tensor of an hdf5-layers export, in order."""
    with h5py.File(path, "r") as f:
        sets = f["state_dict"]
        return [[n, sets[n].attrs["array"], int(sets[n].attrs["offset"]), list(sets[n].shape)]
                for n in f.attrs["tensor_names"]]


def write_formula_checkpoint(source, path, layout):
    """Checkpoint `source` (its architecture and config) with model/params and model/state
    replaced by formula_tensor values placed as `layout` ([name, array, offset, shape])
    says, checksums and whole-file footer included (docs/formats.md)."""
    with h5py.File(source, "r") as f:
        attrs = dict(f.attrs)
        arrays = {a: np.full(f["arrays/" + a].shape, np.nan, np.float32)
                  for a in ("model/params", "model/state") if "arrays/" + a in f}
    for i, (name, array, offset, shape) in enumerate(layout):
        values = formula_tensor(i, name, shape).ravel()
        arrays[array][offset:offset + values.size] = values
    for a, v in arrays.items():
        check(not np.isnan(v).any(), f"{source}: the layout leaves values of {a} unset")
    write_checkpoint(path, attrs, arrays)


def write_checkpoint(path, attrs, arrays):
    """A checkpoint of root attributes `attrs` and float32 `arrays`, their checksums and the
    whole-file footer included (docs/formats.md), whatever the values say."""
    with h5py.File(path, "w") as f:
        for key, value in attrs.items():
            f.attrs[key] = value
        for a, v in arrays.items():
            d = f.create_dataset("arrays/" + a, data=v.astype("<f4"))
            d.attrs["crc32c"] = np.uint32(crc32c(v.astype("<f4").tobytes()))
    with open(path, "rb") as f:
        body = f.read()
    head = b"HTCKSUM1" + struct.pack("<QI", len(body), crc32c(body))
    with open(path, "ab") as f:
        f.write(head + struct.pack("<I", crc32c(head)))


def case_export_matches_reference():
    """Each reference model's export (formula weights) holds the reference's tensor names,
    shapes and values, its inputs decoded as hpctrain decodes them, and logits within 1e-5
    of PyTorch's, which export_reference.py recorded."""
    with open(REFERENCE) as f:
        reference = json.load(f)["models"]
    check(sorted(reference) == sorted(REFERENCE_MODELS),
          f"export_reference.json has models {sorted(reference)}: run export_reference.py")
    for name, (data, model) in REFERENCE_MODELS.items():
        want = reference[name]
        config, ckpt = prepare_reference_model(name)
        formula = os.path.join(reference_folder(name), "formula.h5")
        write_formula_checkpoint(ckpt, formula, want["tensors"])
        out = export_layers(config, formula, os.path.join(reference_folder(name), "layers.h5"))
        with h5py.File(out, "r") as f:
            check(f.attrs["format"] == "hpctrain-layers" and f.attrs["preset"] == model["preset"],
                  f"{name}: root attributes {dict(f.attrs)}")
            names = list(f.attrs["tensor_names"])
            check(names == [t[0] for t in want["tensors"]],
                  f"{name}: tensors {names}, reference {[t[0] for t in want['tensors']]}")
            for i, (n, _, _, shape) in enumerate(want["tensors"]):
                got = f["state_dict"][n][()]
                check(list(got.shape) == shape, f"{name}: {n} has shape {got.shape}, not {shape}")
                check(np.array_equal(got, formula_tensor(i, n, shape)), f"{name}: {n} values")
            inputs = f["reference/inputs"][()]
            logits = f["reference/logits"][()]
        expected = decoded_inputs(os.path.join(reference_folder(name), "test.h5"), data[0])
        check(np.array_equal(inputs, expected), f"{name}: reference inputs differ from the data")
        torch_logits = np.array(want["logits"], np.float64).reshape(want["logits_shape"])
        check(logits.shape == torch_logits.shape, f"{name}: logits shape {logits.shape}")
        diff = float(np.abs(logits - torch_logits).max())
        print(f"{name}: {len(names)} tensors match; max |hpctrain - PyTorch| logit {diff:.2g} "
              f"(largest logit {np.abs(torch_logits).max():.3g})")
        check(diff <= MAX_DIFF, f"{name}: logits differ from PyTorch's by {diff:.3g}")


def case_export_normalized_inputs():
    """A run with data.normalize exports input_mean and input_std, says so in
    input_preprocessing, and its reference inputs are normalised as the loader does it."""
    name = "mlp"
    config, ckpt = prepare_reference_model(name)
    with open(config) as f:
        c = json.load(f)
    c["data"].update({"normalize": "given", "mean": [0.4], "std": [0.2]})
    normalized = os.path.join(reference_folder(name), "normalized.yaml")
    with open(normalized, "w") as f:
        json.dump(c, f)
    out = export_layers(normalized, ckpt, os.path.join(reference_folder(name), "norm.h5"))
    with h5py.File(out, "r") as f:
        # The values applied: float32(mean) and float32(1 / std), as the sentence says.
        mean, std = f.attrs["input_mean"], f.attrs["input_std"]
        check(mean.shape == (1,) and np.float32(mean[0]) == np.float32(0.4) and
              np.float32(1 / std[0]) == np.float32(1 / 0.2), f"input_mean {mean}, input_std {std}")
        check("input_mean" in f.attrs["input_preprocessing"], "input_preprocessing says nothing")
        inputs = f["reference/inputs"][()]
    decoded = decoded_inputs(os.path.join(reference_folder(name), "test.h5"), "uint8")
    want = (decoded - np.float32(0.4)) * np.float32(1 / 0.2)
    check(np.array_equal(inputs, want), "reference inputs are not normalised as the loader does")


def small_fashion(folder, train_rows=2048, test_rows=1000):
    """The first rows of the fixture's training and test files: (train, test) paths."""
    os.makedirs(folder, exist_ok=True)
    out = []
    for part, rows in (("train", train_rows), ("test", test_rows)):
        path = os.path.join(folder, part + ".h5")
        with h5py.File(os.path.join(ARGS.data, part + ".h5"), "r") as src, \
                h5py.File(path, "w") as dst:
            dst["images"] = src["images"][:rows]
            dst["labels"] = src["labels"][:rows]
            dst.attrs["num_classes"] = src.attrs["num_classes"]
        out.append(path)
    return out


def small_sets(train, test, extra=()):
    return [f"data.train={train}", "data.val=", f"data.test={test}", "train.epochs=1",
            "train.batch_size=64", "run.deterministic=true"] + list(extra)


TORCH_MODELS = [  # name, config, extra --set, ONNX
    ("resnet18", "configs/fashion_mnist_resnet18.yaml", ["model.width=4"], True),
    ("mlp", "configs/fashion_mnist_mlp.yaml", [], True),
    ("cnn", "configs/fashion_mnist_cnn.yaml", [], True),
    ("lstm", "configs/fashion_mnist_lstm.yaml",
     ["model.layers=[{type: lstm, name: lstm, units: 16}]"], False),
]


def case_export_pytorch_matches_eval():
    """Models trained for 16 steps on 2048 Fashion-MNIST images, exported: each PyTorch
    module (hpctrain_tools.torch_models, loaded from the pytorch export with strict=True)
    gives hpctrain's logits on the reference inputs to 1e-5, and its accuracy on the 1000
    test images is the test_accuracy of `hpctrain eval` of the same checkpoint. The ONNX
    export of the feed-forward ones is written; the LSTM's is refused with exit 2. Reference
    logits 1e-3 off the module's make the conversion fail (exit 1)."""
    try:
        import torch
    except ImportError:
        print(f"SKIP: {sys.executable} has no torch (Debian: apt install python3-torch)")
        sys.exit(SKIP)
    sys.path.insert(0, os.path.join(REPO, "data-tools", "python"))
    from hpctrain_tools import torch_models

    train, test = small_fashion(run_dir("export_fmnist_data"))
    with h5py.File(test, "r") as f:
        images = torch.from_numpy(f["images"][()].astype(np.float32) * np.float32(1.0 / 255.0))
        labels = torch.from_numpy(f["labels"][()].astype(np.int64))
    for name, config, extra, onnx in TORCH_MODELS:
        run_name = f"export_{name}"
        fresh(run_name)
        expect_ok(run_name, 2, small_sets(train, test, extra), config=config)
        p = run(["mpiexec", "-n", "1", hpctrain(), "eval", run_dir(run_name)])
        check(p.returncode == 0, f"{name}: eval exit {p.returncode}")
        with open(os.path.join(run_dir(run_name), "eval.json")) as f:
            accuracy = json.load(f)["test_accuracy"]
        layers = os.path.join(run_dir(run_name), "model.h5")
        pt = os.path.join(run_dir(run_name), "model.pt")
        for fmt, out in (("hdf5-layers", layers), ("pytorch", pt)):
            p = export(run_dir(run_name), fmt, out)
            check(p.returncode == 0 and os.path.getsize(out) > 0, f"{name} {fmt}: {p.returncode}")
        with h5py.File(layers, "r") as f:
            model = torch_models.build_model(f.attrs["architecture"], f.attrs["preset"])
            inputs = torch.from_numpy(f["reference/inputs"][()])
            expected = torch.from_numpy(f["reference/logits"][()])
        model.load_state_dict(torch.load(pt), strict=True)
        model.eval()
        with torch.no_grad():
            diff = (model(inputs) - expected).abs().max().item()
            predicted = torch.cat([model(images[i:i + 250]).argmax(1)
                                   for i in range(0, len(images), 250)])
        torch_accuracy = (predicted == labels).double().mean().item()
        print(f"{name}: max |PyTorch - hpctrain| logit {diff:.2g}; test accuracy PyTorch "
              f"{torch_accuracy:.4f}, hpctrain eval {accuracy:.4f}")
        check(diff <= MAX_DIFF, f"{name}: PyTorch's logits differ by {diff:.3g}")
        check(abs(torch_accuracy - accuracy) < 1e-9, f"{name}: accuracies differ")
        onnx_out = os.path.join(run_dir(run_name), "model.onnx")
        p = export(run_dir(run_name), "onnx", onnx_out)
        if onnx:
            check(p.returncode == 0, f"{name} onnx: exit {p.returncode}")
            with open(onnx_out, "rb") as f:
                check(f.read(1) == b"\x08", f"{name}: {onnx_out} is not an ONNX model")
        else:
            check(p.returncode == 2 and not os.path.exists(onnx_out), f"{name} onnx not refused")
            one_error_line(p.stderr, "--format onnx", "lstm")
    # The conversion's own check: reference logits 1e-3 off the module's are exit 1.
    bad, out = (os.path.join(run_dir("export_mlp"), f) for f in ("bad.h5", "bad.pt"))
    shutil.copy(os.path.join(run_dir("export_mlp"), "model.h5"), bad)
    with h5py.File(bad, "r+") as f:
        f["reference/logits"][0, 0] += 1e-3
    p = run([sys.executable, "-m", "hpctrain_tools", "export", "--layers", bad, "--format",
             "pytorch", "--out", out],
            env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "data-tools", "python")))
    check(p.returncode == 1 and not os.path.exists(out), f"logits 1e-3 off: exit {p.returncode}")
    one_error_line(p.stderr, "differ from hpctrain's", "limit 1e-05")


def case_export_refusals():
    """Exit 2 with one line naming the file or option: an unknown format, no --out or one
    in a missing directory, an --out that exists (replaced with --force), a damaged
    checkpoint (as TARGET and as --checkpoint), another model's checkpoint, one with a
    short parameter array (eval and train --resume on 2 ranks too), a run without
    checkpoints, and --format pytorch where python3 has no torch (the temporary file
    removed, nothing written). A checkpoint as TARGET exports with its stored config."""
    folder = run_dir("export_refusals")
    fresh("export_refusals")
    train, test = small_fashion(os.path.join(folder, "data"), 256, 64)
    expect_ok("export_refusals", 1, small_sets(train, test))
    run_folder = run_dir("export_refusals")
    out = os.path.join(folder, "out.h5")

    p = export(run_folder, "tflite", out)
    check(p.returncode == 2, f"unknown format: exit {p.returncode}")
    one_error_line(p.stderr, "--format", "tflite")
    p = run([hpctrain(), "export", run_folder, "--format", "hdf5-layers"])
    check(p.returncode == 2, f"no --out: exit {p.returncode}")
    one_error_line(p.stderr, "--out")
    p = export(run_folder, "hdf5-layers", os.path.join(folder, "missing", "out.h5"))
    check(p.returncode == 2, f"--out in a missing directory: exit {p.returncode}")
    one_error_line(p.stderr, os.path.join(folder, "missing"))

    with open(out, "w") as f:
        f.write("keep me")
    p = run([hpctrain(), "export", run_folder, "--format", "hdf5-layers", "--out", out])
    check(p.returncode == 2, f"existing --out: exit {p.returncode}")
    one_error_line(p.stderr, out, "--force")
    with open(out) as f:
        check(f.read() == "keep me", "an existing --out was changed")
    p = run([hpctrain(), "export", run_folder, "--format", "hdf5-layers", "--out", out, "--force"])
    check(p.returncode == 0 and h5py.is_hdf5(out), f"--force: exit {p.returncode}")
    p = export(checkpoints("export_refusals")[-1], "hdf5-layers", out)  # its stored config
    check(p.returncode == 0 and h5py.is_hdf5(out), f"a checkpoint as TARGET: exit {p.returncode}")
    # --force never replaces what the export reads: the checkpoint, the config or a data
    # file (the test set was replaced by the export).
    config_file = os.path.join(run_folder, "config.yaml")
    for target in (checkpoints("export_refusals")[-1], config_file, test, train):
        with open(target, "rb") as f:
            before = f.read()
        p = run([hpctrain(), "export", run_folder, "--format", "hdf5-layers", "--out", target,
                 "--force"])
        check(p.returncode == 2, f"--out {target} --force: exit {p.returncode}")
        one_error_line(p.stderr, target, "which the export reads")
        with open(target, "rb") as f:
            check(f.read() == before, f"--out --force replaced {target}")
    # Reference inputs from a test set of another shape: exit 2 as eval says it (the
    # export read past the end of its buffer and wrote what it found there).
    odd = os.path.join(folder, "odd.h5")
    with h5py.File(odd, "w") as f:
        f["images"] = np.zeros((20, 1, 8, 8), np.uint8)
        f["labels"] = np.arange(20, dtype=np.int32) % 10
        f.attrs["num_classes"] = 10
    p = run([hpctrain(), "export", run_folder, "--format", "hdf5-layers", "--out", out, "--force",
             "--set", f"data.test={odd}"])
    check(p.returncode == 2, f"a test set of 1x8x8: exit {p.returncode}")
    one_error_line(p.stderr, odd, "data.test samples are 1x8x8, but data.train samples are 1x28x28")

    damaged = os.path.join(folder, "damaged.h5")
    shutil.copy(checkpoints("export_refusals")[-1], damaged)
    with open(damaged, "r+b") as f:
        f.seek(os.path.getsize(damaged) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    for args in ([damaged], [run_folder, "--checkpoint", damaged]):
        p = export(args[0], "hdf5-layers", out, args[1:])
        check(p.returncode == 2 and not os.path.exists(out), f"damaged: exit {p.returncode}")
        one_error_line(p.stderr, damaged, "checksum")

    # Checksums that match over arrays another tool got wrong: exit 2 naming the file and
    # the array, on every rank (eval on 2 ranks, resuming a run), not a crash or a hang.
    short = os.path.join(folder, "short.h5")
    with h5py.File(checkpoints("export_refusals")[-1], "r") as f:
        attrs = dict(f.attrs)
        arrays = {"model/params": f["arrays/model/params"][:100]}
    write_checkpoint(short, attrs, arrays)
    for cmd in (["mpiexec", "-n", "2", hpctrain(), "eval", short, "--set",
                 f"run.dir={folder}/short_eval"],
                ["mpiexec", "-n", "2", hpctrain(), "train", os.path.join(run_folder, "config.yaml"),
                 "--resume", short, "--set", f"run.dir={folder}/short_train", "--set",
                 'checkpoint.dir=""']):  # its own: the run's checkpoint.dir is another run's
        p = run(cmd)
        check(p.returncode == 2, f"{' '.join(cmd[3:5])} of a short parameter array: exit "
                                 f"{p.returncode}")
        one_error_line(p.stderr, short, "model/params", "holds 100 values")

    other = "export_refusals_other"
    fresh(other)
    expect_ok(other, 1, small_sets(train, test, ["model.hidden=[7]"]))
    p = export(run_folder, "hdf5-layers", out, ["--checkpoint", checkpoints(other)[-1]])
    check(p.returncode == 2, f"another model's checkpoint: exit {p.returncode}")
    one_error_line(p.stderr, checkpoints(other)[-1], "not the one")

    shutil.rmtree(os.path.join(run_dir(other), "checkpoints"))
    p = export(run_dir(other), "hdf5-layers", out)
    check(p.returncode == 2, f"no checkpoint: exit {p.returncode}")
    one_error_line(p.stderr, "checkpoint.dir")

    # A python3 without torch first on PATH (-S: no site packages), not re-started under
    # /usr/bin/python3: one line naming python3-torch and hdf5-layers.
    bin_dir, tmp = os.path.join(folder, "bin"), os.path.join(folder, "tmp")
    os.makedirs(bin_dir)
    os.makedirs(tmp)
    with open(os.path.join(bin_dir, "python3"), "w") as f:
        f.write(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    os.chmod(os.path.join(bin_dir, "python3"), 0o755)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], TMPDIR=tmp,
               HPCTRAIN_TOOLS_REEXEC="1")
    pt = os.path.join(folder, "model.pt")
    p = export(run_folder, "pytorch", pt, env=env)
    check(p.returncode == 2 and not os.path.exists(pt), f"no torch: exit {p.returncode}")
    one_error_line(p.stderr, "python3-torch", "hdf5-layers")
    left = os.listdir(tmp) + [f for f in os.listdir(folder) if f.endswith(".tmp")]
    check(left == [], f"temporary files left: {left}")

    # SIGTERM to hpctrain alone while its python3 works: python3 gets it too, hpctrain
    # fails naming the signal, and its temporary file goes.
    pid_file = os.path.join(folder, "python3.pid")
    with open(os.path.join(bin_dir, "python3"), "w") as f:
        f.write(f'#!/bin/sh\necho $$ > {pid_file}\nexec sleep 120\n')
    p = subprocess.Popen([hpctrain(), "export", run_folder, "--format", "pytorch", "--out", pt],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not os.path.exists(pid_file) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    check(os.path.exists(pid_file), "the stand-in python3 did not start")
    child = int(open(pid_file).read())
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    check(p.returncode != 0 and "signal 15" in err, f"SIGTERM: exit {p.returncode}: {err}")
    deadline = time.time() + 10
    while os.path.exists(f"/proc/{child}") and time.time() < deadline:
        time.sleep(0.05)
    check(not os.path.exists(f"/proc/{child}"), "python3 outlived the SIGTERM to hpctrain")
    left = [f for f in os.listdir(folder) if f.endswith(".tmp")]
    check(left == [] and not os.path.exists(pt), f"after SIGTERM: left {left}")
