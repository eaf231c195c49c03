#!/usr/bin/python3
"""Writes the example bucket's XGBoost models, with Debian's python3-xgboost
(1.7.4; make deps-bench installs it):

    /usr/bin/python3 examples/models/make_xgboost_model.py [bucket_dir]   # default: examples/bucket

Models (Booster.save_model("model.json"), XGBoost's JSON format):
  pcvr_xgb/model.json     a pCVR model: binary:logistic, 50 trees of depth 4
                          over 20 named features (FEATURES), trained on
                          synthetic impressions with about 10 % of the values
                          missing (NaN); input float32 [batch, 20] ->
                          prediction (the probability) and margin (the log-odds),
                          float32 [batch]
  pcvr_xgb_v2/model.json  a second version: the same features, 50 trees of
                          depth 5 trained on other impressions (another seed),
                          so that its answers differ from pcvr_xgb's
expected_xgboost.json     for each model a fixed input of 8 rows, 3 of them
                          with missing values (null in the JSON: NaN), and
                          Booster.predict's outputs on it, plain ("prediction")
                          and with output_margin=True ("margin"), float32
                          values widened to float64.

Deterministic (fixed seeds, one thread, the exact tree method): reruns give
byte-identical files.
"""
import json
import os
import sys

import numpy as np
import xgboost as xgb

FEATURES = [
    "bid_floor", "ctr_7d", "cvr_30d", "hour", "day_of_week",
    "slot_position", "ad_age_days", "user_sessions_7d", "user_clicks_30d", "user_conversions_90d",
    "price", "discount_pct", "page_depth", "dwell_s", "is_mobile",
    "geo_distance_km", "creative_ctr", "budget_left_pct", "landing_ms", "recency_h",
]


def impressions(rng, n, missing=0.1):
    """n rows of the 20 features, about `missing` of the values NaN."""
    x = np.column_stack([
        rng.gamma(2.0, 0.5, n),             # bid_floor
        rng.beta(2, 60, n),                 # ctr_7d
        rng.beta(2, 40, n),                 # cvr_30d
        rng.integers(0, 24, n),             # hour
        rng.integers(0, 7, n),              # day_of_week
        rng.integers(1, 9, n),              # slot_position
        rng.exponential(30, n),             # ad_age_days
        rng.poisson(6, n),                  # user_sessions_7d
        rng.poisson(3, n),                  # user_clicks_30d
        rng.poisson(0.4, n),                # user_conversions_90d
        rng.lognormal(3.5, 0.8, n),         # price
        rng.choice([0, 5, 10, 20, 30], n),  # discount_pct
        rng.integers(1, 12, n),             # page_depth
        rng.exponential(40, n),             # dwell_s
        rng.integers(0, 2, n),              # is_mobile
        rng.exponential(25, n),             # geo_distance_km
        rng.beta(2, 50, n),                 # creative_ctr
        rng.uniform(0, 100, n),             # budget_left_pct
        rng.lognormal(6.5, 0.5, n),         # landing_ms
        rng.exponential(48, n),             # recency_h
    ]).astype(np.float32)
    x[rng.random(x.shape) < missing] = np.nan
    return x


def converted(rng, x):
    """Conversion labels: a logistic model of a few features, about 8 % positive."""
    z = np.nan_to_num(x, nan=0.0)
    logit = (-3.2 + 25 * z[:, 2] + 0.6 * np.minimum(z[:, 9], 3) + 0.15 * z[:, 8] - 0.012 * z[:, 10]
             + 0.02 * z[:, 11] - 0.004 * z[:, 13] + 0.3 * z[:, 14] - 0.0015 * (z[:, 18] - 650)
             - 0.01 * z[:, 19] + 8 * z[:, 16])
    return (rng.random(len(z)) < 1 / (1 + np.exp(-logit))).astype(np.float32)


MODELS = [
    # name, seed, max_depth
    ("pcvr_xgb", 30, 4),
    ("pcvr_xgb_v2", 31, 5),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "bucket")
    test_x = impressions(np.random.default_rng(7), 8, missing=0.0)
    test_x[1, [1, 2]] = np.nan      # no click or conversion history
    test_x[4, 18] = np.nan          # landing page not measured
    test_x[6, :10] = np.nan         # half the features missing
    expected = {}
    for name, seed, depth in MODELS:
        rng = np.random.default_rng(seed)
        x = impressions(rng, 4000)
        dtrain = xgb.DMatrix(x, label=converted(rng, x), missing=np.nan, feature_names=FEATURES)
        params = {"objective": "binary:logistic", "max_depth": depth, "eta": 0.1, "seed": 1, "nthread": 1,
                  "tree_method": "exact", "eval_metric": "logloss"}
        booster = xgb.train(params, dtrain, 50)
        os.makedirs(os.path.join(out, name), exist_ok=True)
        booster.save_model(os.path.join(out, name, "model.json"))
        dtest = xgb.DMatrix(test_x, missing=np.nan, feature_names=FEATURES)
        pred = booster.predict(dtest)
        margin = booster.predict(dtest, output_margin=True)
        expected[name] = {
            "feature_names": FEATURES,
            "input": [[None if np.isnan(v) else float(v) for v in row] for row in test_x],
            "prediction": pred.astype(np.float64).ravel().tolist(),
            "margin": margin.astype(np.float64).ravel().tolist(),
        }
    with open(os.path.join(out, "expected_xgboost.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print("wrote", sorted(expected), "and expected_xgboost.json to", os.path.normpath(out))


if __name__ == "__main__":
    main()
