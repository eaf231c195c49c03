#!/usr/bin/python3
"""Writes examples/bucket/game_score/model.onnx, the ONNX model that serves
the ForestFlow score API's own gaming example (a String schema entry with
fields name, category and a Float64 one with hp, attack, defence):

    /usr/bin/python3 examples/models/make_game_model.py

Needs Debian's python3-onnx. The model, for N rows:

  inputs   String  STRING [N, 2]  (name, category)
           Float64 DOUBLE [N, 3]  (hp, attack, defence)
  outputs  score   DOUBLE [N, 1]  = 0.02*hp + 0.05*attack - 0.01*defence
                                    + BIAS[category] (0.0 for other categories)
           side    STRING [N, 1]  = SIDE[category] ("unknown" for others)

The category column is looked up with ONNX-ML's LabelEncoder (one lookup
into a FLOAT bias, cast to DOUBLE, one into a STRING side), the numbers go
through a MatMul. The name column is not used. Reruns give byte-identical
files.
"""
import os

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np

WEIGHTS = [0.02, 0.05, -0.01]
BIAS = {"human": 1.5, "monster": -0.5, "elf": 0.75}
SIDE = {"human": "friend", "elf": "friend", "monster": "foe"}

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "bucket", "game_score", "model.onnx")

nodes = [
    helper.make_node("Gather", ["String", "category_index"], ["category"], axis=1, name="category_column"),
    helper.make_node("LabelEncoder", ["category"], ["bias_f"], domain="ai.onnx.ml", name="bias_lookup",
                     keys_strings=list(BIAS), values_floats=list(BIAS.values()), default_float=0.0),
    helper.make_node("Cast", ["bias_f"], ["bias"], to=TensorProto.DOUBLE, name="bias_double"),
    helper.make_node("MatMul", ["Float64", "weights"], ["linear"], name="linear"),
    helper.make_node("Add", ["linear", "bias"], ["score"], name="score"),
    helper.make_node("LabelEncoder", ["category"], ["side"], domain="ai.onnx.ml", name="side_lookup",
                     keys_strings=list(SIDE), values_strings=list(SIDE.values()), default_string="unknown"),
]
graph = helper.make_graph(
    nodes,
    "game_score",
    inputs=[
        helper.make_tensor_value_info("String", TensorProto.STRING, ["N", 2]),
        helper.make_tensor_value_info("Float64", TensorProto.DOUBLE, ["N", 3]),
    ],
    outputs=[
        helper.make_tensor_value_info("score", TensorProto.DOUBLE, ["N", 1]),
        helper.make_tensor_value_info("side", TensorProto.STRING, ["N", 1]),
    ],
    initializer=[
        numpy_helper.from_array(np.array([1], dtype=np.int64), "category_index"),
        numpy_helper.from_array(np.array(WEIGHTS, dtype=np.float64).reshape(3, 1), "weights"),
    ],
)
model = helper.make_model(
    graph,
    producer_name="grove examples/models/make_game_model.py",
    opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 2)],
)
model.ir_version = 8
onnx.checker.check_model(model)
with open(out, "wb") as f:
    f.write(model.SerializeToString())
print("wrote", os.path.relpath(out))
