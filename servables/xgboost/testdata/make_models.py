#!/usr/bin/python3
"""Makes the XGBoost models and expected predictions the Go tests compare
against, with Debian's python3-xgboost (1.7.4): run it with /usr/bin/python3
from this folder (or any: it writes beside itself).

For each case it trains a small model on random data with missing values
(NaN), saves it as <case>.json and <case>.ubj (Booster.save_model: JSON
and UBJSON), and writes <case>.expected.json: the input matrix (NaN
written as null) and Booster.predict's outputs on it, plain and with
output_margin=True, as float32 values widened to float64.

The categorical cases (cat_*) train with tree_method "hist" on a DMatrix
whose feature_types mark two features "c": one with 12 categories (split
by partition), one with 3 (one-hot splits, below max_cat_to_onehot 4).
Their test rows also hold values that are no category seen in training:
unseen codes, negative, fractional and huge values. Those named *_dense
have no missing value in training or test; cat_pruned's trees were
pruned after training, leaving leaves that were categorical splits.
missing_sentinel trains with
DMatrix(missing=-999); its expected file names "missing_value": -999,
which the Go test passes on as a model entry's missing_value does.

small_categorical.json is a small categorical model the parse tests edit;
refused_* are models the runtime refuses: the legacy binary format and a
gblinear booster (JSON and UBJSON).

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
    ("squarederror", {"objective": "reg:squarederror", "max_depth": 3}, 8, True),
    ("reg_logistic", {"objective": "reg:logistic", "max_depth": 3}, 8, False),
    ("binary_logistic", {"objective": "binary:logistic", "max_depth": 4, "base_score": 0.3}, 8, True),
    ("binary_logitraw", {"objective": "binary:logitraw", "max_depth": 3}, 8, False),
    ("multi_softprob", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, 6, True),
    ("multi_softmax", {"objective": "multi:softmax", "num_class": 3, "max_depth": 4}, 3, False),
    ("count_poisson", {"objective": "count:poisson", "max_depth": 3}, 8, False),
    ("rank_pairwise", {"objective": "rank:pairwise", "max_depth": 3}, 8, False),
    ("dart", {"objective": "reg:squarederror", "booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0, "max_depth": 3}, 10, False),
]

# The categorical cases: name, objective, rounds, missing values in
# training and test. Features 1 and 3 are categorical (CAT_TYPES).
CAT_CASES = [
    ("cat_binary_logistic", "binary:logistic", 8, True),
    ("cat_binary_logistic_dense", "binary:logistic", 8, False),
    ("cat_multi_softprob", "multi:softprob", 4, True),
    ("cat_multi_softprob_dense", "multi:softprob", 4, False),
]
CAT_TYPES = ["q", "c", "q", "c", "q"]
CAT_NAMES = ["bid", "domain", "ctr_7d", "device", "hour"]
SENTINEL = -999.0

# Values of the categorical features in test rows that are no category
# seen in training (feature 1 has 0..11, feature 3 0..2): XGBoost sends
# them the way of a category not in a split's set, and truncates a
# fraction (2.5 is category 2).
UNSEEN_1 = [12, 13, 31, 32, 33, 100, -1, -0.5, 2.5, 11.99, 1e9, 16777215, 16777216, -0.0]
UNSEEN_3 = [3, 4, -2, 1.5, 2.999, 64]


def write_expected(name, objective, booster, test_x, dtest, missing_value=None):
    """Writes <name>.expected.json: test_x and booster's outputs on dtest."""
    pred = booster.predict(dtest)
    margin = booster.predict(dtest, output_margin=True)
    out = {
        "objective": objective,
        "input": [[None if np.isnan(v) else float(v) for v in row] for row in test_x],
        "prediction": pred.astype(np.float64).ravel().tolist(),
        "prediction_shape": list(pred.shape),
        "margin": margin.astype(np.float64).ravel().tolist(),
        "margin_shape": list(margin.shape),
    }
    if missing_value is not None:
        out["missing_value"] = missing_value
    with open(os.path.join(HERE, name + ".expected.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


def save(booster, name):
    """Saves booster as <name>.json and <name>.ubj."""
    booster.save_model(os.path.join(HERE, name + ".json"))
    booster.save_model(os.path.join(HERE, name + ".ubj"))


def cat_data(rng, n, missing):
    x = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    x[:, 1] = rng.integers(0, 12, size=n)
    x[:, 3] = rng.integers(0, 3, size=n)
    if missing:
        x[rng.random(x.shape) < missing] = np.nan
    return x


def cat_labels(rng, x, objective, num_class=3):
    z = np.nan_to_num(x, nan=-1.0)
    score = (z[:, 0] + 1.5 * np.isin(z[:, 1], [1, 4, 5, 9]) - 1.0 * (z[:, 3] == 2)
             + 0.8 * z[:, 2] * (z[:, 1] > 6) - 1.2 * np.isnan(x[:, 1]) + 0.3 * rng.normal(size=len(z)))
    if objective.startswith("binary:"):
        return (score > 0.5).astype(np.float32)
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, num_class + 1)[1:-1])).astype(np.float32)


def cat_test(rng, missing):
    """Test rows for the categorical models: ordinary rows, then rows whose
    categorical features hold values seen in no training row."""
    x = cat_data(rng, 30, 0.2 if missing else 0)
    edge = cat_data(rng, len(UNSEEN_1), 0)
    edge[:, 1] = UNSEEN_1
    edge[:, 3] = [UNSEEN_3[i % len(UNSEEN_3)] for i in range(len(edge))]
    x = np.vstack([x, edge]).astype(np.float32)
    if missing:
        x[0, :] = np.nan
    return x


def categorical(rng):
    """Writes the categorical cases and missing_sentinel."""
    for name, objective, rounds, missing in CAT_CASES:
        x = cat_data(rng, 600, 0.1 if missing else 0)
        y = cat_labels(rng, x, objective)
        params = {"objective": objective, "max_depth": 3, "eta": 0.3, "seed": 1, "nthread": 1, "tree_method": "hist"}
        if objective.startswith("multi:"):
            params["num_class"] = 3
        dtrain = xgb.DMatrix(x, label=y, feature_types=CAT_TYPES, feature_names=CAT_NAMES, enable_categorical=True)
        booster = xgb.train(params, dtrain, rounds)
        save(booster, name)
        test_x = cat_test(rng, missing)
        dtest = xgb.DMatrix(test_x, feature_types=CAT_TYPES, feature_names=CAT_NAMES, enable_categorical=True)
        write_expected(name, objective, booster, test_x, dtest)

    # Missing values written as SENTINEL (and some NaN, missing too), in a
    # numeric and a categorical feature alike.
    x = cat_data(rng, 600, 0.1)
    y = cat_labels(rng, x, "binary:logistic")
    x[np.isnan(x) & (rng.random(x.shape) < 0.8)] = SENTINEL
    params = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "seed": 1, "nthread": 1, "tree_method": "hist"}
    dtrain = xgb.DMatrix(x, label=y, missing=SENTINEL, feature_types=CAT_TYPES, enable_categorical=True)
    booster = xgb.train(params, dtrain, 8)
    save(booster, "missing_sentinel")
    test_x = cat_test(rng, True)
    test_x[np.isnan(test_x) & (rng.random(test_x.shape) < 0.8)] = SENTINEL
    test_x[1, 0] = np.float32(SENTINEL) + np.float32(0.0001)  # near the sentinel: a value
    dtest = xgb.DMatrix(test_x, missing=SENTINEL, feature_types=CAT_TYPES, enable_categorical=True)
    write_expected("missing_sentinel", "binary:logistic", booster, test_x, dtest, missing_value=SENTINEL)


def pruned(rng):
    """Writes cat_pruned: a categorical model whose trees XGBoost's pruner
    cut back afterwards (process_type "update", updater "prune", a larger
    gamma), as a user prunes a trained model. A categorical split it turns
    into a leaf keeps its split_type 1 and its categories in the file."""
    x = cat_data(rng, 600, 0.1)
    y = cat_labels(rng, x, "binary:logistic")
    params = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.3, "seed": 1, "nthread": 1, "tree_method": "hist",
              "max_cat_to_onehot": 1}
    dtrain = xgb.DMatrix(x, label=y, feature_types=CAT_TYPES, feature_names=CAT_NAMES, enable_categorical=True)
    booster = xgb.train(params, dtrain, 4)
    booster = xgb.train(dict(params, process_type="update", updater="prune", gamma=2.0), dtrain, 4, xgb_model=booster)
    save(booster, "cat_pruned")
    test_x = cat_test(rng, True)
    dtest = xgb.DMatrix(test_x, feature_types=CAT_TYPES, feature_names=CAT_NAMES, enable_categorical=True)
    write_expected("cat_pruned", "binary:logistic", booster, test_x, dtest)


def refused(rng):
    """Writes the models the runtime refuses (a small model in the legacy
    binary format, a gblinear model as JSON and UBJSON) and
    small_categorical.json, a two-tree model with categorical splits."""
    x = data(rng, 100, N_FEATURES)
    y = labels(rng, x, "reg:squarederror")
    small = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(x, label=y), 2)
    small.save_model(os.path.join(HERE, "refused_legacy.model"))
    linear = xgb.train({"booster": "gblinear", "nthread": 1}, xgb.DMatrix(x, label=y), 2)
    save(linear, "refused_gblinear")
    xc = x.copy()
    xc[:, 0] = rng.integers(0, 4, size=len(xc))
    ycat = np.where(xc[:, 0] == 2, 3.0, 0.0) + 0.1 * rng.normal(size=len(xc))
    dcat = xgb.DMatrix(xc, label=ycat, feature_types=["c", "q", "q", "q", "q"], enable_categorical=True)
    cat = xgb.train({"max_depth": 2, "nthread": 1, "tree_method": "hist"}, dcat, 2)
    cat.save_model(os.path.join(HERE, "small_categorical.json"))


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
        save(booster, name)
        dtest = xgb.DMatrix(test_x, missing=np.nan, feature_names=FEATURE_NAMES if named else None)
        write_expected(name, params["objective"], booster, test_x, dtest)
    refused(rng)
    # The categorical cases draw from a generator of their own, as they
    # always have, so that their models stay what they are.
    categorical(np.random.default_rng(3001))
    pruned(np.random.default_rng(3002))


if __name__ == "__main__":
    main()
