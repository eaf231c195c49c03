#!/usr/bin/python3
"""Writes Grove's example model bucket (run with Debian's /usr/bin/python3, torch 1.13).

    /usr/bin/python3 examples/models/make_models.py [bucket_dir]   # default: examples/bucket

Models (TorchScript, torch.jit.script; and pctr_onnx/model.onnx, see export_onnx):
  pctr_v1/model.pt  the benchmark pCTR MLP of shared/bench/make_models.py (seed 7):
                    float32 x[batch, 64] -> sigmoid probability float32 [batch, 1]
  pctr_v2/model.pt  the same architecture with seed 8 (a second version of pctr)
  pcvr/model.pt     two inputs, tuple output:
                    float32 features[batch, 8], int64 category[batch, 1] (ids 0..15)
                    -> (probability float32 [batch, 1], logit float64 [batch, 1])
expected.json       for each model a fixed input and the outputs computed here in
                    inference mode, with dtypes and shapes, at full precision.

Deterministic: fixed seeds, fixed inputs, single-threaded torch, PYTHONHASHSEED=0
(the script re-executes itself to set it), so reruns give byte-identical files.
"""
import json
import os
import sys
from typing import Tuple

# TorchScript writes a module's __constants__ in set order, which depends on
# Python's string hash seed: pin it so that the .pt files are byte-identical.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

torch.set_num_threads(1)


class PCTR(torch.nn.Module):
    # Identical to shared/bench/make_models.py: the benchmark model.
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(64, 256); self.l2 = torch.nn.Linear(256, 128); self.l3 = torch.nn.Linear(128, 1)

    def forward(self, x):
        return torch.sigmoid(self.l3(torch.relu(self.l2(torch.relu(self.l1(x))))))


class PCVR(torch.nn.Module):
    """Features plus an embedded category id; returns (probability, logit as float64)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 4)
        self.l1 = torch.nn.Linear(8 + 4, 16)
        self.l2 = torch.nn.Linear(16, 1)

    def forward(self, features: torch.Tensor, category: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        e = self.emb(category.reshape(-1))
        h = torch.relu(self.l1(torch.cat([features, e], dim=1)))
        logit = self.l2(h)
        return torch.sigmoid(logit), logit.to(torch.float64)


DTYPES = {torch.float32: "FLOAT", torch.float64: "DOUBLE", torch.int8: "INT8",
          torch.int16: "INT16", torch.int32: "INT32", torch.int64: "INT64"}


def spec(name, t):
    return {"name": name, "datatype": DTYPES[t.dtype], "shape": list(t.shape), "data": t.flatten().tolist()}


def build(out, name, seed, cls):
    torch.manual_seed(seed)
    m = cls().eval()
    os.makedirs(os.path.join(out, name), exist_ok=True)
    torch.jit.script(m).save(os.path.join(out, name, "model.pt"))
    return m


# Everything above the model classes keeps its line count: TorchScript records
# the classes' source lines in the .pt files, whose checksums configs and tests
# use, so shifting them would change the files.


def export_onnx(m, x, path):
    """Exports module m to ONNX at path (deterministic: reruns give identical bytes).

    pctr_onnx/model.onnx is pctr_v1's module, the same weights, exported with
    opset 14 for servables/onnx: input "x" float32 [batch, 64] with a dynamic
    batch dimension, output "output_0" float32 [batch, 1], so that it answers as
    pctr_v1 does under the same tensor names. Its expected outputs are pctr_v1's
    entry in expected.json (same input, same weights). It is not listed in
    model_config.json.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["output_0"],
                      dynamic_axes={"x": {0: "batch"}, "output_0": {0: "batch"}},
                      opset_version=14, do_constant_folding=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "bucket")
    expected = {}

    # pctr: row 0 is the benchmark's reference input (linspace(-1, 1, 64)); row 1 is reversed.
    x = torch.stack([torch.linspace(-1, 1, 64), torch.linspace(1, -1, 64)])
    for name, seed in (("pctr_v1", 7), ("pctr_v2", 8)):
        m = build(out, name, seed, PCTR)
        with torch.inference_mode():
            y = m(x)
        expected[name] = {"inputs": [spec("x", x)], "outputs": [spec("output_0", y)]}
        if name == "pctr_v1":
            export_onnx(m, x, os.path.join(out, "pctr_onnx", "model.onnx"))

    m = build(out, "pcvr", 11, PCVR)
    features = torch.linspace(-2, 2, 3 * 8).reshape(3, 8)
    category = torch.tensor([[0], [7], [15]], dtype=torch.int64)
    with torch.inference_mode():
        prob, logit = m(features, category)
    expected["pcvr"] = {"inputs": [spec("features", features), spec("category", category)],
                        "outputs": [spec("output_0", prob), spec("output_1", logit)]}

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print("wrote", sorted(expected) + ["pctr_onnx"], "to", os.path.normpath(out))


if __name__ == "__main__":
    main()
