#!/usr/bin/python3
"""Writes the two TorchScript models of it/compare_test.go (torch 1.13):

    /usr/bin/python3 it/testdata/compare/make_models.py

score.pt:         x [rows, k] float32 -> sigmoid(sum of each row) [rows, 1]
score_shifted.pt: the same plus 0.2, a challenger whose answers differ
                  from the champion's by a known shift.
Each is a few KB and has no weights.
"""
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":  # byte-identical reruns
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402


class Score(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x.sum(dim=1, keepdim=True))


class Shifted(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x.sum(dim=1, keepdim=True)) + 0.2


here = os.path.dirname(os.path.abspath(__file__))
for name, module in [("score.pt", Score()), ("score_shifted.pt", Shifted())]:
    torch.jit.script(module).save(os.path.join(here, name))
