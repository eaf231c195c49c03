#!/usr/bin/python3
"""Makes the benchmark models of the XGBoost runtime with Debian's
python3-xgboost (1.7.4): binary:logistic over 100 features, trained on
synthetic data with one value in ten missing (NaN) so that the trees are
nearly full.

    make_bench_models.py 100x6 OUT.json    # 100 trees of depth 6
    make_bench_models.py 1000x8 OUT.json   # 1,000 trees of depth 8

The 100x6 model is checked in beside this script (bench_100x6.json, used
by the Go benchmarks); the 1000x8 one, about 30 MB of JSON, is made by
`make bench` (bench-xgboost) into .cache/xgboost when it is missing. Both are the same
bytes on every run: the data comes from a seeded generator and XGBoost
trains on one thread (hist, seeded).
"""
import os
import sys

import numpy as np
import xgboost as xgb

N_FEATURES = 100

# name: (trees, depth, training rows, max_bin). The rows and bins are
# chosen for trees close to full (the mean 100x6 tree has about 125 of
# 127 nodes, the mean 1000x8 tree about 440 of 511) at a training cost of
# well under a minute of CPU for the larger model.
MODELS = {
    "100x6": (100, 6, 20000, 256),
    "1000x8": (1000, 8, 10000, 16),
}


def train(trees, depth, rows, max_bin):
    rng = np.random.default_rng(30)
    x = rng.normal(size=(rows, N_FEATURES)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    z = np.nan_to_num(x, nan=0.0)
    w = rng.normal(size=N_FEATURES)
    score = 0.3 * (z @ w) + np.sin(3 * z[:, 0]) * z[:, 1] + z[:, 2] * z[:, 3] + rng.normal(size=rows)
    y = (score > 0).astype(np.float32)
    params = {
        "objective": "binary:logistic",
        "max_depth": depth,
        "eta": 0.1,
        "min_child_weight": 0,
        "tree_method": "hist",
        "max_bin": max_bin,
        "seed": 1,
        "nthread": 1,
    }
    return xgb.train(params, xgb.DMatrix(x, label=y, missing=np.nan), trees)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in MODELS:
        sys.exit("usage: make_bench_models.py {%s} OUT.json" % "|".join(MODELS))
    out = sys.argv[2]
    booster = train(*MODELS[sys.argv[1]])
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp.json"
    booster.save_model(tmp)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
