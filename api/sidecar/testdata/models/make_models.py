#!/usr/bin/python3
"""Writes the TorchScript models the sidecar conformance tests register (torch 1.13).

    /usr/bin/python3 api/sidecar/testdata/models/make_models.py

They stand in for the B&A PyTorch sidecar's own test models, with the same
names, inputs and outputs, and with Grove's own weights: the files carry no
extension, as the sidecar's tests register them ({"simple_model": <bytes>}).
expected.json holds what torch computes for the requests the tests send,
so the Go tests check Grove's answers against torch itself.
"""
import json
import os
import sys
from typing import Tuple

if os.environ.get("PYTHONHASHSEED") != "0":  # byte-identical reruns
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class Simple(torch.nn.Module):
    """Answers its one input unchanged, whatever its type and shape."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class E2E(torch.nn.Module):
    """Five INT64 ids of shape [n] and two FLOAT features of shape [n, 10] in,
    one FLOAT probability of shape [n, 1] out."""

    def __init__(self, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.nn.Parameter(torch.randn(32, 4, generator=g) * 0.1)
        self.w = torch.nn.Parameter(torch.randn(40, 1, generator=g) * 0.1)
        self.b = torch.nn.Parameter(torch.zeros(1))

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor,
                e: torch.Tensor, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        ids = torch.stack([a, b, c, d, e], dim=1) % 32
        x = torch.cat([self.emb[ids].flatten(1), f, g], dim=1)
        return torch.sigmoid(x @ self.w + self.b)


class Mixed(torch.nn.Module):
    """An INT64 [n] and a FLOAT [n, 3] in; a FLOAT [n, 4] and an INT64 [n, 1] out."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.w = torch.nn.Parameter(torch.randn(3, 4, generator=g))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return y @ self.w, (x % 3).view(-1, 1)


def save(module: torch.nn.Module, name: str, freeze: bool = False) -> torch.jit.ScriptModule:
    m = torch.jit.script(module.eval())
    if freeze:
        m = torch.jit.freeze(m)
    torch.jit.save(m, os.path.join(HERE, name))
    return m


def main() -> None:
    save(Simple(), "simple_model")
    save(Simple(), "frozen_model", freeze=True)
    e1 = save(E2E(1), "e2e_model1")
    e2 = save(E2E(2), "e2e_model2")
    mixed = save(Mixed(), "mixed_inputs_mixed_outputs_model")

    def ints(*v):
        return torch.tensor(v, dtype=torch.int64)

    def floats(v, rows):
        return torch.tensor([float(s) for s in v], dtype=torch.float32).view(rows, -1)

    f1 = ["0.4313", "0.3381", "0.3103", "0.3150", "0.9595", "0.7862", "0.6386", "0.9695", "0.0469", "0.5807"]
    f2 = ["0.8201", "0.8321", "0.1021", "0.6779", "0.2152", "0.4805", "0.3957", "0.0825", "0.0230", "0.1711"]
    g1 = ["0.7862", "0.6386", "0.9695", "0.0469", "0.5807", "0.8201", "0.8321", "0.1021", "0.6779", "0.2152",
          "0.4805", "0.3957", "0.0825", "0.0230", "0.1711", "0.7269", "0.7287", "0.0651", "0.3122", "0.5082"]
    g2 = ["0.0677", "0.7817", "0.9529", "0.5884", "0.1285", "0.6166", "0.6815", "0.8959", "0.2340", "0.0520",
          "0.7197", "0.5311", "0.3371", "0.2905", "0.2422", "0.9047", "0.4137", "0.8606", "0.9463", "0.5633"]
    with torch.no_grad():
        batch1 = e1(ints(8), ints(6), ints(18), ints(11), ints(9), floats(f1, 1), floats(f2, 1))
        batch2 = [ints(8, 6), ints(18, 11), ints(9, 14), ints(2, 1), ints(10, 4)]
        e1b2 = e1(*batch2, floats(g1, 2), floats(g2, 2))
        e2b2 = e2(*batch2, floats(g2, 2), floats(g1, 2))
        mf, mi = mixed(ints(3), floats(["0.0394", "1.7093", "-0.2127"], 1))
    expected = {
        "e2e_model1_batch1": batch1.flatten().tolist(),
        "e2e_model1_batch2": e1b2.flatten().tolist(),
        "e2e_model2_batch2": e2b2.flatten().tolist(),
        "mixed_float": mf.flatten().tolist(),
        "mixed_int": mi.flatten().tolist(),
    }
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
