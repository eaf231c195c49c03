#!/usr/bin/python3
"""Writes the files the servables sniffing tests read (torch 1.13).

    /usr/bin/python3 servables/testdata/make_sniff_testdata.py

checkpoint.pt is a torch.save state dict: a zip archive with data.pkl under
one top folder, but no code/ and no constants.pkl, so not TorchScript.
"""
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":  # byte-identical reruns
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

torch.save({"w": torch.arange(4, dtype=torch.float32)}, os.path.join(HERE, "checkpoint.pt"))
