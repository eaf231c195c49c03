#!/usr/bin/python3
"""Writes the ONNX models of servables/onnx's tests that torch cannot export
(Debian's /usr/bin/python3 with python3-onnx; no torch needed):

    /usr/bin/python3 servables/onnx/testdata/make_half.py

half.onnx        FLOAT16 both ways:
                 h float16 [batch, 4], x float32 [batch, 4]
                 -> same float16 [batch, 4] = h, wide float32 [batch, 4] = h as float32,
                    narrow float16 [batch, 4] = x rounded to float16 (ONNX Runtime's Cast)
bfloat.onnx      BFLOAT16 both ways, as half.onnx:
                 b bfloat16 [batch, 2], x float32 [batch, 2]
                 -> same bfloat16, wide float32, narrow bfloat16
uint16_out.onnx  an output Grove cannot return beside one it can:
                 x float32 [batch, 4] -> y float32 [batch, 4] = x, w uint16 [batch, 4] = x as uint16
uint16_in.onnx   an input Grove cannot send:
                 u uint16 [batch, 4], x float32 [batch, 4] -> y float32 [batch, 4] = x + u

Reruns give byte-identical files.
"""
import os

from onnx import TensorProto, checker, helper, save

here = os.path.dirname(os.path.abspath(__file__))


def model(name, nodes, inputs, outputs):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    m = helper.make_model(graph, producer_name="grove-testdata", opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    checker.check_model(m)
    save(m, os.path.join(here, name + ".onnx"))


def io(name, elem, width):
    return helper.make_tensor_value_info(name, elem, ["batch", width])


def main():
    for name, elem, width in (("half", TensorProto.FLOAT16, 4), ("bfloat", TensorProto.BFLOAT16, 2)):
        src = "h" if elem == TensorProto.FLOAT16 else "b"
        model(name, [
            helper.make_node("Identity", [src], ["same"]),
            helper.make_node("Cast", [src], ["wide"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["x"], ["narrow"], to=elem),
        ], [io(src, elem, width), io("x", TensorProto.FLOAT, width)],
            [io("same", elem, width), io("wide", TensorProto.FLOAT, width), io("narrow", elem, width)])
    model("uint16_out", [
        helper.make_node("Identity", ["x"], ["y"]),
        helper.make_node("Cast", ["x"], ["w"], to=TensorProto.UINT16),
    ], [io("x", TensorProto.FLOAT, 4)], [io("y", TensorProto.FLOAT, 4), io("w", TensorProto.UINT16, 4)])
    model("uint16_in", [
        helper.make_node("Cast", ["u"], ["uf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "uf"], ["y"]),
    ], [io("u", TensorProto.UINT16, 4), io("x", TensorProto.FLOAT, 4)], [io("y", TensorProto.FLOAT, 4)])
    print("wrote testdata to", here)


if __name__ == "__main__":
    main()
