#!/usr/bin/python3
"""Writes the dynamic-batching benchmark model (run with Debian's /usr/bin/python3, torch 1.13).

    /usr/bin/python3 examples/models/make_rank_deep.py [dir]   # default: examples/bench

rank_deep/model.pt  a deep ranking MLP (TorchScript, torch.jit.script) whose forward
                    time is dominated by per-call work, as in real ranking models with
                    many layers: float32 x[batch, 64] -> Linear(64, 256), then the same
                    Linear(256, 256) + ReLU applied 16 times, then Linear(256, 1) and a
                    sigmoid -> float32 [batch, 1]. The hidden layer's weights are shared
                    so the file stays small (0.3 MiB); the compute is that of 16 layers.
                    At batch 1 one forward takes ~0.4 ms here, at batch 64 ~1.8 ms: a
                    batch of 64 costs 4x one row, not 64x, which is what dynamic
                    batching exists for (pctr, at 21 us per forward, is cheaper than
                    the HTTP request that carries it, so batching it gains little).
expected.json       rank_deep's outputs for the pctr_v1 reference input of
                    examples/bucket/expected.json, in that file's format.

Deterministic: seed 11, single-threaded torch, PYTHONHASHSEED=0.
"""
import json
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

torch.set_num_threads(1)


class RankDeep(torch.nn.Module):
    def __init__(self, width: int = 256, depth: int = 16):
        super().__init__()
        self.inp = torch.nn.Linear(64, width)
        self.hid = torch.nn.Linear(width, width)
        self.out = torch.nn.Linear(width, 1)
        self.depth = depth

    def forward(self, x):
        h = torch.relu(self.inp(x))
        for _ in range(self.depth):
            h = torch.relu(self.hid(h))
        return torch.sigmoid(self.out(h))


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "examples", "bench")
    torch.manual_seed(11)
    m = RankDeep().eval()
    # Scale the hidden weights so activations neither vanish nor explode over 16 layers.
    with torch.no_grad():
        m.hid.weight.mul_(1.6)
    os.makedirs(os.path.join(out, "rank_deep"), exist_ok=True)
    torch.jit.script(m).save(os.path.join(out, "rank_deep", "model.pt"))
    with open(os.path.join(root, "examples", "bucket", "expected.json")) as f:
        inp = json.load(f)["pctr_v1"]["inputs"][0]
    with torch.inference_mode():
        y = m(torch.tensor(inp["data"], dtype=torch.float32).reshape(inp["shape"]))
    outputs = [{"name": "output_0", "datatype": "FLOAT", "shape": list(y.shape), "data": y.flatten().tolist()}]
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"rank_deep": {"inputs": [inp], "outputs": outputs}}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
