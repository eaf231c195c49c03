#!/usr/bin/python3
"""Writes the release-gate test models of it/gates_test.go (Debian's /usr/bin/python3, torch 1.13).

    /usr/bin/python3 it/testdata/gates/make_models.py   # writes next to this script

Three small TorchScript scorers, float32 x[batch, 4] -> float32 [batch, 1],
y = l2(relu(l1(x))) with no squashing, so that a shift of the output stays a
shift:
  champion/model.pt  the weights of seed 11.
  agree/model.pt     another model that answers exactly as the champion: l1's
                     weights and bias doubled and l2's weights halved. Scaling
                     by 2 is exact in floating point and relu(2z) = 2 relu(z),
                     so every product, and so every output, is the champion's
                     bit for bit, from different weights (a different file).
  shifted/model.pt   the champion with 0.2 added to l2's bias: every output is
                     the champion's plus 0.2 (to float32 rounding, ~1e-7).

Deterministic: fixed seed, single-threaded torch, PYTHONHASHSEED=0 (the script
re-executes itself to set it), so reruns give byte-identical files.
"""
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

torch.set_num_threads(1)


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 8)
        self.l2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def save(m, out, name):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    torch.jit.script(m.eval()).save(os.path.join(out, name, "model.pt"))


def main():
    out = os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(11)
    champion = Scorer()
    agree, shifted = Scorer(), Scorer()
    with torch.no_grad():
        agree.load_state_dict(champion.state_dict())
        agree.l1.weight.mul_(2)
        agree.l1.bias.mul_(2)
        agree.l2.weight.mul_(0.5)
        shifted.load_state_dict(champion.state_dict())
        shifted.l2.bias.add_(0.2)
    x = torch.tensor([[0.5, -1.0, 2.0, 0.25], [1.0, 1.0, -0.5, 3.0]])
    with torch.inference_mode():
        c, a, s = champion(x), agree(x), shifted(x)
    assert torch.equal(c, a), (c, a)
    assert torch.allclose(s - c, torch.full_like(c, 0.2), atol=1e-6), (s - c)
    for name, m in (("champion", champion), ("agree", agree), ("shifted", shifted)):
        save(m, out, name)
    print("champion", c.flatten().tolist(), "shifted - champion", (s - c).flatten().tolist())


if __name__ == "__main__":
    main()
