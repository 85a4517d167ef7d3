#!/usr/bin/env python3
"""Writes tests/e2e/export_reference.json, which the e2e case export_matches_reference
checks hpctrain's exports against without PyTorch:

  /usr/bin/python3 tests/e2e/export_reference.py --build build-cpu
  (needs python3-torch, h5py and a built hpctrain; writes the file beside this script)

For each model of cases_export.REFERENCE_MODELS: one training step gives a checkpoint of
the right architecture; its export gives the tensors' names, arrays, offsets and shapes;
a copy of the checkpoint with formula values (cases_export.formula_tensor) laid out so is
exported again, loaded into hpctrain_tools.torch_models' module, and PyTorch's logits on
the export's reference inputs, computed in float64, must lie within 1e-5 of hpctrain's.
The file records the layout and PyTorch's logits (9 significant digits).
"""
import argparse
import json
import os
import sys

import h5py
import torch

import cases_export
import harness


def reference_json(torch_version, models):
    """The file's text: JSON with one line per tensor, so that a diff shows what changed."""
    parts = []
    for name, m in models.items():
        tensors = ",\n".join("    " + json.dumps(t) for t in m["tensors"])
        parts.append(f'  {json.dumps(name)}: {{\n'
                     f'   "logits_shape": {json.dumps(m["logits_shape"])},\n'
                     f'   "logits": {json.dumps(m["logits"])},\n'
                     f'   "tensors": [\n{tensors}\n   ]}}')
    head = ('{"generated_by": "tests/e2e/export_reference.py", '
            f'"torch": {json.dumps(torch_version)},\n "models": {{\n')
    return head + ",\n".join(parts) + "\n }\n}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the build folder with hpctrain")
    harness.ARGS.build = ap.parse_args().build
    sys.path.insert(0, os.path.join(cases_export.REPO, "data-tools", "python"))
    from hpctrain_tools import torch_models

    models = {}
    for name in cases_export.REFERENCE_MODELS:
        config, ckpt = cases_export.prepare_reference_model(name)
        folder = cases_export.reference_folder(name)
        trained = cases_export.export_layers(config, ckpt, os.path.join(folder, "trained.h5"))
        layout = cases_export.export_layout(trained)
        formula = os.path.join(folder, "formula.h5")
        cases_export.write_formula_checkpoint(ckpt, formula, layout)
        out = cases_export.export_layers(config, formula, os.path.join(folder, "layers.h5"))
        model, _ = torch_models.load_export(out)
        with h5py.File(out, "r") as f:
            inputs = torch.from_numpy(f["reference/inputs"][()]).double()
            hpctrain_logits = torch.from_numpy(f["reference/logits"][()]).double()
        with torch.no_grad():
            logits = model.double()(inputs)
        diff = (logits - hpctrain_logits).abs().max().item()
        print(f"{name}: max |hpctrain - PyTorch| {diff:.3g}", file=sys.stderr)
        if not diff <= cases_export.MAX_DIFF:
            sys.exit(f"{name}: hpctrain's logits differ from PyTorch's by {diff:.3g}")
        models[name] = {"tensors": layout, "logits_shape": list(logits.shape),
                        "logits": [float(f"{x:.9g}") for x in logits.flatten().tolist()]}
    with open(cases_export.REFERENCE, "w") as f:
        f.write(reference_json(torch.__version__.split("+")[0], models))
    print(f"wrote {cases_export.REFERENCE}")


if __name__ == "__main__":
    main()
