#!/usr/bin/python3
"""Writes the seed corpus of FuzzParse and FuzzParseUBJSON (testdata/fuzz),
beside FuzzParse's hand-written seeds: run it with /usr/bin/python3 from
this folder (or any: it writes beside itself).

The seeds are tiny.json and small_categorical.json (make_models.py) as
they are and with one defect each, in JSON and in UBJSON as XGBoost's
UBJWriter lays it out (typed arrays for the trees' arrays, int64 lengths):
truncated files, cycles in child indices, out-of-range child and feature
indices, categorical tables that disagree, and UBJSON with counts and
lengths far beyond the data or containers nested without end. Each one
but the valid_* seeds must fail the load.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# The trees' arrays UBJWriter writes typed, and their types.
TYPED = {
    "left_children": "l", "right_children": "l", "parents": "l", "split_indices": "l",
    "categories": "l", "categories_nodes": "l", "categories_segments": "L", "categories_sizes": "L",
    "default_left": "U", "split_type": "U",
    "split_conditions": "d", "base_weights": "d", "loss_changes": "d", "sum_hessian": "d",
}
FORMATS = {"i": ">b", "U": ">B", "I": ">h", "l": ">i", "L": ">q", "d": ">f"}


def ubj_length(n):
    return b"L" + struct.pack(">q", n)


def ubj_int(v):
    for t, lo, hi in (("i", -128, 127), ("I", -32768, 32767), ("l", -2**31, 2**31 - 1)):
        if lo <= v <= hi:
            return t.encode() + struct.pack(FORMATS[t], v)
    return b"L" + struct.pack(">q", v)


def ubj(value, key=None):
    """value (decoded JSON) as UBJWriter writes it; key is its key."""
    if isinstance(value, dict):
        out = b"{"
        for k, v in value.items():
            out += ubj_length(len(k.encode())) + k.encode() + ubj(v, k)
        return out + b"}"
    if isinstance(value, list):
        t = TYPED.get(key)
        if t:
            out = b"[$" + t.encode() + b"#" + ubj_length(len(value))
            return out + b"".join(struct.pack(FORMATS[t], v) for v in value)
        return b"[#" + ubj_length(len(value)) + b"".join(ubj(v) for v in value)
    if isinstance(value, bool):
        return b"T" if value else b"F"
    if isinstance(value, int):
        return ubj_int(value)
    if isinstance(value, float):
        return b"d" + struct.pack(">f", value)
    if isinstance(value, str):
        return b"S" + ubj_length(len(value.encode())) + value.encode()
    return b"Z"


def go_bytes(data):
    """data as the go test fuzz v1 corpus writes a []byte."""
    out = []
    for c in data:
        ch = chr(c)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= c < 0x7f:
            out.append(ch)
        else:
            out.append("\\x%02x" % c)
    return 'go test fuzz v1\n[]byte("' + "".join(out) + '")\n'


def write(target, name, data):
    folder = os.path.join(HERE, "fuzz", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        f.write(go_bytes(data))


def edited(model, path, value):
    """A copy of model with the value at path (keys and indices) replaced."""
    out = json.loads(json.dumps(model))
    at = out
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return out


def main():
    with open(os.path.join(HERE, "tiny.json")) as f:
        tiny = json.load(f)
    with open(os.path.join(HERE, "small_categorical.json")) as f:
        small_cat = json.load(f)  # its bare NaN tokens read as nan
    tree = ["learner", "gradient_booster", "model", "trees", 0]
    seeds = {
        "valid_tiny": tiny,
        "valid_categorical": small_cat,
        "cycle_in_children": edited(edited(tiny, tree + ["left_children"], [1, 0, -1]), tree + ["right_children"], [2, 2, -1]),
        "child_out_of_range": edited(tiny, tree + ["right_children"], [2**31 - 1, -1, -1]),
        "feature_out_of_range": edited(tiny, tree + ["split_indices"], [-1, 0, 0]),
        "categorical_node_not_listed": edited(tiny, tree + ["split_type"], [1, 0, 0]),
        "categorical_sizes_disagree": edited(small_cat, tree + ["categories_sizes"], [3, 1]),
        "categorical_segment_past_end": edited(small_cat, tree + ["categories_segments"], [2]),
        "categorical_node_is_leaf": edited(small_cat, tree + ["categories_nodes"], [2]),
        "categorical_huge_category": edited(small_cat, tree + ["categories"], [0, 1, 2**31 - 1]),
        "categorical_negative_category": edited(small_cat, tree + ["categories"], [0, -5, 3]),
    }
    for name, model in seeds.items():
        binary = ubj(model)
        if name not in ("valid_tiny", "cycle_in_children"):  # hand-written JSON seeds have these
            write("FuzzParse", name + "_json", json.dumps(model, separators=(",", ":")).encode())
        write("FuzzParse", name + "_ubj", binary)
        write("FuzzParseUBJSON", name, binary)
    binary = ubj(tiny)
    write("FuzzParse", "truncated_ubj", binary[: len(binary) // 2])
    write("FuzzParseUBJSON", "truncated", binary[: len(binary) // 2])
    write("FuzzParseUBJSON", "truncated_in_typed_array", binary[: binary.index(b"split_conditions") + 30])
    # Counts and lengths far beyond the data.
    huge = b"L" + struct.pack(">q", 2**62)
    trees = b"trees[#" + ubj_length(1)
    assert trees in binary
    write("FuzzParseUBJSON", "huge_count", binary.replace(trees, b"trees[#" + huge))
    typed = b"split_conditions[$d#" + ubj_length(3)
    assert typed in binary
    write("FuzzParseUBJSON", "huge_typed_count", binary.replace(typed, b"split_conditions[$d#" + huge))
    name = b"SL" + struct.pack(">q", len("reg:squarederror")) + b"reg:squarederror"
    assert name in binary
    write("FuzzParseUBJSON", "huge_string_length", binary.replace(name, b"S" + huge + b"reg:squarederror"))
    write("FuzzParseUBJSON", "nested_without_end", b"{" + ubj_length(7) + b"learner{" + ubj_length(1) + b"x" + b"[" * 200)
    write("FuzzParseUBJSON", "negative_count", binary.replace(trees, b"trees[#i\xff"))


if __name__ == "__main__":
    main()
