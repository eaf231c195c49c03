#!/usr/bin/python3
"""Writes the tiny TorchScript models the servables/torch tests load (torch 1.13).

    /usr/bin/python3 servables/torch/testdata/make_testdata.py

Each model is a few KB and has no weights; the corrupt file is fixed pseudo-random bytes.
"""
import os
import random
import sys
from typing import Dict, List, Optional, Tuple

if os.environ.get("PYTHONHASHSEED") != "0":  # byte-identical reruns
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402


class Double(torch.nn.Module):
    """x * 2, keeping x's dtype (any of float32, float64, int8, int16, int32, int64)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class Add(torch.nn.Module):
    """Two inputs that must broadcast."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


class Optional2(torch.nn.Module):
    """One required and one optional input."""

    def forward(self, x: torch.Tensor, y: Optional[torch.Tensor] = None) -> torch.Tensor:
        if y is None:
            return x + 100
        return x + y


class Pair(torch.nn.Module):
    """A tuple; the second element is a transposed (non-contiguous) view."""

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x.t()


class ListOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        return [x, x * 3]


class DictOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        return {"y": x}


class StrOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> str:
        return "hello"


class NestedOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        return x, (x, x)


class BoolOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x > 0


class EmptyOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:0]


class Raise(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() < 0):
            raise ValueError("grove test: negative sum")
        return x


class Heavy(torch.nn.Module):
    """Elementwise work that ATen splits across intra-op threads on large inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(4):
            x = torch.sin(torch.exp(torch.sigmoid(x)))
        return x


class HalfOut(torch.nn.Module):
    """An output dtype Grove does not return."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.half()


class Mask(torch.nn.Module):
    """bool and uint8 both ways: mask bool [N, 4], x uint8 [N, 4]
    -> (mask & (x > 3) bool [N, 4], x + 1 uint8 [N, 4])."""

    def forward(self, mask: torch.Tensor, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return mask & (x > 3), x + 1


class Sub(torch.nn.Module):
    """a - b: the order of the inputs matters, so binding them by name shows."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b


class Linear(torch.nn.Module):
    """x float32 [N, 4] @ a fixed [4, 2] matrix: a caller sending another width gets
    libtorch's "mat1 and mat2 shapes cannot be multiplied"."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(8, dtype=torch.float32).reshape(4, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(x, self.w)


MODELS = {"double": Double, "add": Add, "optional": Optional2, "pair": Pair, "list": ListOut,
          "dict": DictOut, "str": StrOut, "nested": NestedOut, "bool": BoolOut, "empty": EmptyOut,
          "raise": Raise, "heavy": Heavy, "half": HalfOut, "mask": Mask,
          "sub": Sub, "linear": Linear}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, cls in MODELS.items():
        torch.jit.script(cls().eval()).save(os.path.join(here, name + ".pt"))
    rnd = random.Random(0)
    with open(os.path.join(here, "corrupt.pt"), "wb") as f:
        f.write(bytes(rnd.randrange(256) for _ in range(2048)))
    print("wrote", len(MODELS) + 1, "files to", here)


if __name__ == "__main__":
    main()
