#!/usr/bin/python3
"""Writes the three TorchScript models of it/outcomes_test.go (torch 1.13):

    /usr/bin/python3 it/testdata/outcomes/make_models.py

Each takes x [rows, 2] float32, x[:, 1] being -1 or +1, and answers a click
probability [rows, 1]. The true probability is sigmoid(x0 + 1.2 x1 - 1).

truth.pt:  the true probability: the best model there is.
coarse.pt: the true probability averaged over x1 (it ignores x1, which is
           -1 or +1 with equal odds): calibrated, but less sharp.
high.pt:   1.5 times the true probability (at most 0.999): miscalibrated.
Each is a few KB and has no weights.
"""
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":  # byte-identical reruns
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402


class Truth(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x[:, 0:1] + 1.2 * x[:, 1:2] - 1.0)


class Coarse(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x[:, 0:1]
        return (torch.sigmoid(a + 1.2 - 1.0) + torch.sigmoid(a - 1.2 - 1.0)) / 2


class High(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1.5 * torch.sigmoid(x[:, 0:1] + 1.2 * x[:, 1:2] - 1.0), max=0.999)


here = os.path.dirname(os.path.abspath(__file__))
for name, module in [("truth.pt", Truth()), ("coarse.pt", Coarse()), ("high.pt", High())]:
    torch.jit.script(module).save(os.path.join(here, name))
