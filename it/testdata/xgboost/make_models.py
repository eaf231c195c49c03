#!/usr/bin/python3
"""Writes the XGBoost models of it/xgboost_test.go that Grove must refuse,
with Debian's python3-xgboost (1.7.4):

    /usr/bin/python3 it/testdata/xgboost/make_models.py

Both are valid XGBoost JSON models (Booster.save_model) over the 20
features of the example bucket's pcvr_xgb, each with one thing the
xgboost runtime does not serve:
  gblinear.json  booster gblinear (objective binary:logistic)
  hinge.json     objective binary:hinge (booster gbtree, 5 trees)
Deterministic: reruns give byte-identical files.
"""
import os

import numpy as np
import xgboost as xgb

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(30)
x = rng.normal(size=(400, 20)).astype(np.float32)
y = (x[:, 0] + x[:, 1] * x[:, 2] + 0.5 * rng.normal(size=400) > 1).astype(np.float32)
dtrain = xgb.DMatrix(x, label=y)
for name, params, rounds in [
    ("gblinear.json", {"booster": "gblinear", "objective": "binary:logistic"}, 5),
    ("hinge.json", {"objective": "binary:hinge", "max_depth": 3, "tree_method": "exact"}, 5),
]:
    booster = xgb.train(dict(params, seed=1, nthread=1), dtrain, rounds)
    booster.save_model(os.path.join(here, name))
    print("wrote", os.path.relpath(os.path.join(here, name)))
