"""A DeepRec / PAI-EAS style client of Grove's POST /api/predict/{model}.

Usage: client.py PB_DIR BASE_URL EXPECTED_JSON

PB_DIR holds deeprec/predict_pb2.py, generated at test time by protoc from
api/deeprec/proto/deeprec/predict.proto (tensorflow.eas, DeepRec's wire format).
For each case it builds a PredictRequest from the example models' known
inputs (examples/bucket/expected.json), posts it serialized with
Content-Type application/x-protobuf, parses the PredictResponse and checks
every output against the expected values to 1e-5. It also fetches each
model's signature JSON (GET, and POST with an empty body) and checks that
a bad request gets a 400 naming the problem. It prints one line per check
and exits 1 on the first failure. Only Debian's python3 and
python3-protobuf are needed.
"""
import json
import sys
import urllib.error
import urllib.request

sys.path.insert(0, sys.argv[1])
from deeprec import predict_pb2  # noqa: E402

base, expected = sys.argv[2], json.load(open(sys.argv[3]))


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def call(model, body, method="POST"):
    req = urllib.request.Request(base + "/api/predict/" + model, data=body, method=method,
                                 headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def request_of(example, output_filter=()):
    req = predict_pb2.PredictRequest(signature_name="serving_default")
    for t in example["inputs"]:
        a = req.inputs[t["name"]]
        a.array_shape.dim.extend(t["shape"])
        if t["datatype"] == "FLOAT":
            a.dtype = predict_pb2.DT_FLOAT
            a.float_val.extend(t["data"])
        elif t["datatype"] == "INT64":
            a.dtype = predict_pb2.DT_INT64
            a.int64_val.extend(int(v) for v in t["data"])
        else:
            fail("input type " + t["datatype"])
    req.output_filter.extend(output_filter)
    return req


def check(model, example, output_filter=()):
    status, ctype, body = call(model, request_of(expected[example], output_filter).SerializeToString())
    if status != 200 or ctype != "application/x-protobuf":
        fail("%s: %d %s %r" % (model, status, ctype, body[:300]))
    resp = predict_pb2.PredictResponse()
    resp.ParseFromString(body)
    want = [o for o in expected[example]["outputs"] if not output_filter or o["name"] in output_filter]
    if sorted(resp.outputs.keys()) != sorted(o["name"] for o in want):
        fail("%s: outputs %s, want %s" % (model, sorted(resp.outputs.keys()), [o["name"] for o in want]))
    for o in want:
        a = resp.outputs[o["name"]]
        if o["datatype"] == "FLOAT":
            dtype, got = predict_pb2.DT_FLOAT, list(a.float_val)
        else:
            dtype, got = predict_pb2.DT_DOUBLE, list(a.double_val)
        if a.dtype != dtype or list(a.array_shape.dim) != o["shape"] or len(got) != len(o["data"]):
            fail("%s: output %s is %s %s with %d values" % (model, o["name"], a.dtype, list(a.array_shape.dim), len(got)))
        worst = max(abs(g - w) for g, w in zip(got, o["data"]))
        if worst > 1e-5:
            fail("%s: output %s differs from Python's by %g" % (model, o["name"], worst))
        print("ok %s %s %s max|diff| %.2g" % (model, o["name"], list(a.array_shape.dim), worst))


check("pctr_v1", "pctr_v1")
check("pctr_v1/", "pctr_v1")
check("pctr_onnx", "pctr_v1")
check("pcvr", "pcvr")
check("pcvr/", "pcvr", ["output_1"])

for method, body in (("GET", None), ("POST", b"")):
    status, ctype, sig = call("pctr_onnx", body, method)
    doc = json.loads(sig)
    if status != 200 or ctype != "application/json" or doc != {
            "signature_name": "serving_default",
            "inputs": [{"name": "x", "shape": [-1, 64], "type": "DT_FLOAT"}],
            "outputs": [{"name": "output_0", "shape": [-1, 1], "type": "DT_FLOAT"}]}:
        fail("signature by %s: %d %s %s" % (method, status, ctype, sig))
    print("ok signature by", method)

bad = request_of(expected["pctr_v1"])
del bad.inputs["x"].float_val[5:]
status, ctype, body = call("pctr_v1", bad.SerializeToString())
if status != 400 or b'array_shape [2 64] holds 128 elements, float_val has 5' not in body:
    fail("short input: %d %r" % (status, body))
print("ok short input refused:", body.decode().strip())
