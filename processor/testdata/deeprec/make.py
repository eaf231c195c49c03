#!/usr/bin/python3
"""Writes the processor's C test data (processor/ctest), with Debian's
python3-torch and python3-onnx:

    /usr/bin/python3 processor/testdata/deeprec/make.py

Models, two versions of each (different weights), for x float32 [N, 4]:

  torch/V/model.pt    TorchScript, forward(x) = tanh(x @ W + b), output_0 [N, 3]
  onnx/V/model.onnx   ONNX, y = sigmoid(x @ W + b) [N, 2] and s = ReduceSum(x, axis 1) [N, 1]

Requests (serialized tensorflow.eas.PredictRequest, encoded here by hand
from predict.proto's field numbers, as a C caller would):

  req_b1.bin, req_b64.bin   inputs {"x": DT_FLOAT [1|64, 4]}, signature_name "serving_default"
  req_b1_y.bin              the same as req_b1.bin with output_filter ["y"]
  warm_up.bin               DeepRec's warm-up file: one PredictRequest, x of batch 2

Expected outputs, as Python computes them (float32, printed with 9
significant digits), one file per model, version and request:

  expected_<model>_v<V>_<b1|b64>.txt   "<output name> <n> v1 v2 ... vn" per output

Reruns give the same values (the TorchScript archives differ in their bytes).
"""
import os
import struct

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def array_float(values, shape):
    """An ArrayProto: dtype DT_FLOAT (1), array_shape, packed float_val."""
    dims = b"".join(varint(d) for d in shape)
    return (field(1, 0, varint(1)) + field(2, 2, field(1, 2, dims)) +
            field(3, 2, struct.pack("<%df" % len(values), *values)))


def predict_request(inputs, output_filter=(), signature="serving_default"):
    out = field(1, 2, signature.encode())
    for name, (values, shape) in sorted(inputs.items()):
        entry = field(1, 2, name.encode()) + field(2, 2, array_float(values, shape))
        out += field(2, 2, entry)
    for f in output_filter:
        out += field(3, 2, f.encode())
    return out


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def torch_model(version):
    torch.manual_seed(version)
    net = Net().eval()
    path = os.path.join(here, "torch", str(version), "model.pt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.jit.save(torch.jit.script(net), path)
    return lambda x: {"output_0": net(torch.from_numpy(x)).detach().numpy()}


def onnx_model(version):
    rng = np.random.default_rng(version)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["y"]),
        helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
    ]
    graph = helper.make_graph(
        nodes, "deeprec_test",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2]),
                 helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 1])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                     numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")])
    model = helper.make_model(graph, producer_name="grove processor/testdata/deeprec/make.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(here, "onnx", str(version), "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())

    def run(x):
        t = torch.from_numpy(x)
        return {"y": torch.sigmoid(t @ torch.from_numpy(w) + torch.from_numpy(b)).numpy(),
                "s": t.sum(dim=1, keepdim=True).numpy()}
    return run


def main():
    rng = np.random.default_rng(42)
    batches = {"b1": rng.uniform(-2, 2, (1, 4)).astype(np.float32),
               "b64": rng.uniform(-2, 2, (64, 4)).astype(np.float32)}
    for name, x in batches.items():
        with open(os.path.join(here, "req_%s.bin" % name), "wb") as f:
            f.write(predict_request({"x": (x.ravel().tolist(), x.shape)}))
    x = batches["b1"]
    with open(os.path.join(here, "req_b1_y.bin"), "wb") as f:
        f.write(predict_request({"x": (x.ravel().tolist(), x.shape)}, output_filter=["y"]))
    warm = np.full((2, 4), 0.5, dtype=np.float32)
    with open(os.path.join(here, "warm_up.bin"), "wb") as f:
        f.write(predict_request({"x": (warm.ravel().tolist(), warm.shape)}))
    for kind, make in (("torch", torch_model), ("onnx", onnx_model)):
        for version in (1, 2):
            run = make(version)
            for name, x in batches.items():
                outs = run(x)
                path = os.path.join(here, "expected_%s_v%d_%s.txt" % (kind, version, name))
                with open(path, "w") as f:
                    for out in sorted(outs):
                        vals = outs[out].astype(np.float32).ravel()
                        f.write("%s %d %s\n" % (out, len(vals), " ".join("%.9g" % v for v in vals)))
    print("wrote", os.path.relpath(here))


if __name__ == "__main__":
    main()
