"""`hpctrain export --format pytorch|onnx`: the hpctrain program writes an hdf5-layers export
to a temporary file and runs `python3 -m hpctrain_tools export --layers FILE --format F
--out OUT`. This builds the model's PyTorch module (torch_models), loads the exported
tensors with strict=True, checks its logits on the file's reference inputs against
hpctrain's (at most MAX_DIFF apart, relative for logits above 1) and writes
torch.save(state_dict) or an ONNX model.
Exit codes as hpctrain's: 2 for what the user can change (a layer name PyTorch refuses, a
model ONNX cannot express), 1 when the module does not reproduce hpctrain's logits."""
import argparse
import copy
import os
import sys

import torch

from hpctrain_tools import torch_models

MAX_DIFF = 1e-5


def _error(message, code):
    print(f"error: hpctrain export: {message}", file=sys.stderr)
    return code


def _write_atomic(out, write):
    """write(path) to out + '.tmp', renamed to out when complete."""
    temp = out + ".tmp"
    if os.path.lexists(temp):
        os.unlink(temp)
    try:
        write(temp)
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temp, out)
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise


def main(argv):
    ap = argparse.ArgumentParser(prog="hpctrain export",
                                 description="Convert an hdf5-layers export (docs/export.md).")
    ap.add_argument("--layers", required=True, help="the hdf5-layers file")
    ap.add_argument("--format", required=True, choices=["pytorch", "onnx"])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    import h5py  # after argparse: --help works without it

    try:
        with h5py.File(args.layers, "r") as f:
            inputs = torch.from_numpy(f["reference/inputs"][()])
            expected = torch.from_numpy(f["reference/logits"][()])
            architecture = f.attrs["architecture"]
            preset = f.attrs["preset"]
    except (OSError, KeyError) as e:
        return _error(f"{args.layers}: not an hdf5-layers export ({e})", 2)
    try:
        model = torch_models.build_model(architecture, preset)
    except ValueError as e:
        return _error(str(e), 2)
    if args.format == "onnx" and any(isinstance(m, (torch.nn.LSTM, torch.nn.GRU))
                                     for m in model.modules()):
        # torch's exporter writes an LSTM or GRU whose initial state has the batch size
        # of the example input, and warns that other batch sizes may fail in ONNX runtimes.
        return _error(f"{args.out}: --format onnx is for feed-forward models; this one has an "
                      "lstm or gru layer (use --format pytorch or hdf5-layers)", 2)
    model.load_state_dict(torch_models.export_state_dict(args.layers, model), strict=True)
    model.eval()
    # The module's exact logits (float64) against hpctrain's float32 ones: MAX_DIFF apart at
    # most, relative to the logit above 1 (float32's spacing near 100 is 7.6e-6).
    with torch.no_grad():
        exact = copy.deepcopy(model).double()(inputs.double())
    gap = (exact - expected.double()).abs()
    worst = gap.max().item()
    if not (gap / expected.double().abs().clamp(min=1)).max().item() <= MAX_DIFF:
        return _error(f"the PyTorch module's logits differ from hpctrain's by up to {worst:.3g} "
                      f"(limit {MAX_DIFF:g}, relative for logits above 1) on the "
                      f"{len(inputs)} reference inputs", 1)

    if args.format == "pytorch":
        _write_atomic(args.out, lambda path: torch.save(model.state_dict(), path))
    else:
        _write_atomic(args.out, lambda path: torch.onnx.export(
            model, inputs, path, input_names=["input"], output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}))
    print(f"wrote {args.out} ({args.format}; logits within {worst:.2g} of hpctrain's on "
          f"{len(inputs)} reference inputs)")
    return 0
