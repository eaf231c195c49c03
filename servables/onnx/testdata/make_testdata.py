#!/usr/bin/python3
"""Writes the small ONNX models of servables/onnx's tests (Debian's /usr/bin/python3, torch 1.13).

    /usr/bin/python3 servables/onnx/testdata/make_testdata.py

mixed.onnx            two inputs of different dtypes, two outputs, names that are
                      not in positional order anywhere:
                      ids int64 [batch, 2], w float32 [batch, 1]
                      -> weighted float32 [batch, 2] = ids * w,
                         total float64 [batch] = sum of weighted over dim 1
scalar.onnx           a rank-0 input: x float32 [n], s float32 [] -> y float32 [n] = x * s
torch_half_out.onnx   a float16 output as torch exports it (and a bool one):
                      x float32 [batch, 4] -> positive bool [batch, 4], half float16 [batch, 4]
torch_half_in.onnx    a float16 input as torch exports it:
                      h float16 [batch, 4], x float32 [batch, 4] -> scaled float32 [batch, 4]
mask.onnx             bool and uint8 both ways:
                      mask bool [batch, 4], x uint8 [batch, 4]
                      -> masked bool [batch, 4] = mask AND (x > 3), next uint8 [batch, 4] = x + 1

The models torch cannot export (BFLOAT16, UINT16) are made by make_half.py.
The example pCTR model is examples/bucket/pctr_onnx/model.onnx, made by
examples/models/make_models.py. Reruns give byte-identical files.
"""
import os

import torch

here = os.path.dirname(os.path.abspath(__file__))


class Mixed(torch.nn.Module):
    def forward(self, ids, w):
        weighted = ids.to(torch.float32) * w
        return weighted, weighted.sum(dim=1).to(torch.float64)


class Scalar(torch.nn.Module):
    def forward(self, x, s):
        return x * s


class HalfOut(torch.nn.Module):
    def forward(self, x):
        return x > 0, x.to(torch.float16)


class HalfIn(torch.nn.Module):
    def forward(self, h, x):
        return x * h.to(torch.float32)


class Mask(torch.nn.Module):
    def forward(self, mask, x):
        return mask & (x > 3), x + 1


def export(m, args, name, inputs, outputs, dynamic):
    torch.onnx.export(m, args, os.path.join(here, name), input_names=inputs, output_names=outputs,
                      dynamic_axes=dynamic, opset_version=14)


def main():
    export(Mixed(), (torch.tensor([[1, 2]]), torch.tensor([[0.5]])), "mixed.onnx",
           ["ids", "w"], ["weighted", "total"], {"ids": {0: "batch"}, "w": {0: "batch"},
                                                 "weighted": {0: "batch"}, "total": {0: "batch"}})
    export(Scalar(), (torch.tensor([1.0, 2.0]), torch.tensor(3.0)), "scalar.onnx",
           ["x", "s"], ["y"], {"x": {0: "n"}, "y": {0: "n"}})
    export(HalfOut(), (torch.zeros(1, 4),), "torch_half_out.onnx",
           ["x"], ["positive", "half"], {"x": {0: "batch"}, "positive": {0: "batch"}, "half": {0: "batch"}})
    export(HalfIn(), (torch.ones(1, 4, dtype=torch.float16), torch.zeros(1, 4)), "torch_half_in.onnx",
           ["h", "x"], ["scaled"], {"h": {0: "batch"}, "x": {0: "batch"}, "scaled": {0: "batch"}})
    export(Mask(), (torch.ones(1, 4, dtype=torch.bool), torch.zeros(1, 4, dtype=torch.uint8)), "mask.onnx",
           ["mask", "x"], ["masked", "next"], {"mask": {0: "batch"}, "x": {0: "batch"},
                                               "masked": {0: "batch"}, "next": {0: "batch"}})
    print("wrote testdata to", here)


if __name__ == "__main__":
    main()
