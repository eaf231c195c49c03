#!/usr/bin/python3
"""Makes the XGBoost models and expected predictions the Go tests compare
against, with Debian's python3-xgboost (1.7.4): run it with /usr/bin/python3
from this folder (or any: it writes beside itself).

For each case it trains a small model on random data with missing values
(NaN), saves it as <case>.json (Booster.save_model), and writes
<case>.expected.json: the input matrix (NaN written as null) and
Booster.predict's outputs on it, plain and with output_margin=True, as
float32 values widened to float64.

The benchmark models are make_bench_models.py's.
"""
import json
import os

import numpy as np
import xgboost as xgb

HERE = os.path.dirname(os.path.abspath(__file__))
N_FEATURES = 5
FEATURE_NAMES = ["age", "bid", "ctr_7d", "slot", "hour"]


def data(rng, n, n_features, missing=0.1):
    x = rng.normal(size=(n, n_features)).astype(np.float32)
    x[rng.random(x.shape) < missing] = np.nan
    return x


def labels(rng, x, objective, num_class=3):
    z = np.nan_to_num(x, nan=0.0)
    score = z[:, 0] - 0.5 * z[:, 1] + z[:, 2] * z[:, 3] + 0.3 * rng.normal(size=len(z))
    if objective.startswith("binary:") or objective == "reg:logistic":
        return (score > 0).astype(np.float32)
    if objective.startswith("multi:"):
        return np.digitize(score, np.quantile(score, np.linspace(0, 1, num_class + 1)[1:-1])).astype(np.float32)
    if objective == "count:poisson":
        return rng.poisson(np.exp(0.5 * np.tanh(score))).astype(np.float32)
    return score.astype(np.float32)


CASES = [
    # name, params, rounds, feature names
    ("squarederror", {"objective": "reg:squarederror", "max_depth": 3}, 20, True),
    ("reg_logistic", {"objective": "reg:logistic", "max_depth": 3}, 15, False),
    ("binary_logistic", {"objective": "binary:logistic", "max_depth": 4, "base_score": 0.3}, 25, True),
    ("binary_logitraw", {"objective": "binary:logitraw", "max_depth": 3}, 10, False),
    ("multi_softprob", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, 12, True),
    ("multi_softmax", {"objective": "multi:softmax", "num_class": 3, "max_depth": 4}, 10, False),
    ("count_poisson", {"objective": "count:poisson", "max_depth": 3}, 30, False),
    ("rank_pairwise", {"objective": "rank:pairwise", "max_depth": 3}, 10, False),
    ("dart", {"objective": "reg:squarederror", "booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0, "max_depth": 3}, 15, False),
]


def refused(rng):
    """Writes the models the runtime refuses: the same small model as UBJSON
    and in the legacy binary format, a gblinear model and one with a
    categorical split."""
    x = data(rng, 100, N_FEATURES)
    y = labels(rng, x, "reg:squarederror")
    small = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(x, label=y), 2)
    small.save_model(os.path.join(HERE, "refused_ubjson.ubj"))
    small.save_model(os.path.join(HERE, "refused_legacy.model"))
    linear = xgb.train({"booster": "gblinear", "nthread": 1}, xgb.DMatrix(x, label=y), 2)
    linear.save_model(os.path.join(HERE, "refused_gblinear.json"))
    xc = x.copy()
    xc[:, 0] = rng.integers(0, 4, size=len(xc))
    ycat = np.where(xc[:, 0] == 2, 3.0, 0.0) + 0.1 * rng.normal(size=len(xc))
    dcat = xgb.DMatrix(xc, label=ycat, feature_types=["c", "q", "q", "q", "q"], enable_categorical=True)
    cat = xgb.train({"max_depth": 2, "nthread": 1, "tree_method": "hist"}, dcat, 2)
    cat.save_model(os.path.join(HERE, "refused_categorical.json"))


def main():
    rng = np.random.default_rng(30)
    test_x = data(rng, 40, N_FEATURES, missing=0.2)
    test_x[0, :] = np.nan  # a row with every value missing
    for name, params, rounds, named in CASES:
        x = data(rng, 400, N_FEATURES)
        y = labels(rng, x, params["objective"])
        dtrain = xgb.DMatrix(x, label=y, missing=np.nan, feature_names=FEATURE_NAMES if named else None)
        if params["objective"].startswith("rank:"):
            dtrain.set_group([40] * 10)
        params = dict(params, eta=0.3, seed=1, nthread=1, tree_method="exact")
        booster = xgb.train(params, dtrain, rounds)
        model_path = os.path.join(HERE, name + ".json")
        booster.save_model(model_path)
        dtest = xgb.DMatrix(test_x, missing=np.nan, feature_names=FEATURE_NAMES if named else None)
        pred = booster.predict(dtest)
        margin = booster.predict(dtest, output_margin=True)
        out = {
            "objective": params["objective"],
            "input": [[None if np.isnan(v) else float(v) for v in row] for row in test_x],
            "prediction": pred.astype(np.float64).ravel().tolist(),
            "prediction_shape": list(pred.shape),
            "margin": margin.astype(np.float64).ravel().tolist(),
            "margin_shape": list(margin.shape),
        }
        with open(os.path.join(HERE, name + ".expected.json"), "w") as f:
            json.dump(out, f)
            f.write("\n")
    refused(rng)


if __name__ == "__main__":
    main()
