package it

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
)

// cornersBucket serves the small ONNX models of servables/onnx's tests
// under the given paths (path → model file name in its testdata).
func cornersBucket(t *testing.T, models map[string]string) *dirBucket {
	t.Helper()
	b := newDirBucket(t)
	var entries []modelEntry
	for path, file := range models {
		data, err := os.ReadFile(filepath.Join(repoRoot(), "servables", "onnx", "testdata", file+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		b.Put(t, path+"model.onnx", data)
		entries = append(entries, modelEntry{Path: path})
	}
	putConfig(t, b, entries...)
	return b
}

// send posts body to path with the given headers ("" values are left out).
func (g *grove) send(t *testing.T, method, path string, body []byte, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.String()
}

func compress(t *testing.T, coding string, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	if coding == "gzip" {
		w = gzip.NewWriter(&out)
	} else {
		w = zlib.NewWriter(&out)
	}
	_, _ = w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Compressed request bodies against the real binary: gzip and deflate
// bodies are decoded for OIP (inference and the repository index) and B&A,
// a compression bomb is refused with 413 at max_body_bytes of decoded
// size, an unknown coding gets 415 naming it and a corrupt stream 400.
// Every REST handler reads its body with httpserver.ReadBody, whose own
// tests cover the codings in full.
//
// Budget: 10 s.
func TestCompressedRequestBodiesAreDecodedForOIPAndBA(t *testing.T) {
	t.Parallel()
	g := startGrove(t, cornersBucket(t, map[string]string{"mixed/": "mixed"}).URL(), nil, "--max-body-bytes", "65536")
	oip := []byte(`{"inputs":[{"name":"ids","datatype":"INT64","shape":[1,2],"data":[1,2]},{"name":"w","datatype":"FP32","shape":[1,1],"data":[0.5]}],"outputs":[{"name":"total"}]}`)
	for _, coding := range []string{"gzip", "deflate"} {
		code, body := g.send(t, "POST", "/v2/models/mixed/infer", compress(t, coding, oip), "Content-Encoding", coding, "Content-Type", "application/json")
		if code != 200 || !strings.Contains(body, `"name":"total","datatype":"FP64","shape":[1],"data":[1.5]`) {
			t.Errorf("OIP %s: %d %s", coding, code, body)
		}
	}
	if code, body := g.send(t, "POST", "/v2/repository/index", compress(t, "deflate", []byte(`{"ready": true}`)), "Content-Encoding", "deflate"); code != 200 || !strings.Contains(body, `"state": "READY"`) {
		t.Errorf("repository index, deflate: %d %s", code, body)
	}
	ba := []byte(`{"request":[{"model_path":"mixed/","tensors":[{"tensor_name":"ids","data_type":"INT64","tensor_shape":[1,2],"tensor_content":["1","2"]},` +
		`{"tensor_name":"w","data_type":"FLOAT","tensor_shape":[1,1],"tensor_content":["0.5"]}]}]}`)
	if code, body := g.send(t, "POST", "/v1/inference", compress(t, "gzip", ba), "Content-Encoding", "gzip"); code != 200 || !strings.Contains(body, "1.5") {
		t.Errorf("B&A gzip: %d %s", code, body)
	}
	bomb := compress(t, "gzip", append(append([]byte(nil), oip[:len(oip)-1]...), bytes.Repeat([]byte(" "), 64<<20)...))
	if code, body := g.send(t, "POST", "/v2/models/mixed/infer", bomb, "Content-Encoding", "gzip"); code != 413 || !strings.Contains(body, "exceeds the limit of 65536 bytes") {
		t.Errorf("gzip bomb of %d bytes: %d %s", len(bomb), code, body)
	}
	if code, body := g.send(t, "POST", "/v1/inference", bomb, "Content-Encoding", "gzip"); code != 413 {
		t.Errorf("B&A gzip bomb: %d %s", code, body)
	}
	if code, body := g.send(t, "POST", "/v2/models/mixed/infer", oip, "Content-Encoding", "br"); code != 415 || !strings.Contains(body, `unsupported content encoding \"br\"`) {
		t.Errorf("br: %d %s", code, body)
	}
	gz := compress(t, "gzip", oip)
	if code, body := g.send(t, "POST", "/v2/models/mixed/infer", gz[:len(gz)/2], "Content-Encoding", "gzip"); code != 400 || !strings.Contains(body, "corrupt compressed request body") {
		t.Errorf("truncated gzip: %d %s", code, body)
	}
	// And the server still answers plainly.
	if code, body := g.send(t, "POST", "/v2/models/mixed/infer", oip); code != 200 {
		t.Errorf("plain after all that: %d %s", code, body)
	}
}

// Model names ending in OIP path words, against the real binary: each
// gets its own metadata, readiness and inference.
//
// Budget: 10 s.
func TestModelNamesEndingInEndpointWordsReachTheirModel(t *testing.T) {
	t.Parallel()
	g := startGrove(t, cornersBucket(t, map[string]string{"a/ready/": "uint16_out", "x/versions/2/1/": "mask", "config/": "half", "m/infer/1/": "mixed", "m/infer/3/": "mixed"}).URL(), nil)
	for _, c := range []struct {
		method, path string
		body         string
		code         int
		has          string
	}{
		{"GET", "/v2/models/a/ready", "", 200, `"name":"a/ready","versions":["1"],"platform":"onnxruntime_onnx"`},
		{"GET", "/v2/models/a/ready/ready", "", 200, `{"name":"a/ready","ready":true}`},
		{"POST", "/v2/models/a/ready/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"y"}]}`, 200, `"model_name":"a/ready"`},
		{"GET", "/v2/models/x/versions/2", "", 200, `"name":"x/versions/2"`},
		{"GET", "/v2/models/x/versions/2/versions/1/ready", "", 200, `{"name":"x/versions/2","ready":true}`},
		{"GET", "/v2/models/config", "", 200, `"name":"config","versions":["1"]`},
		{"GET", "/v2/models/config/stats", "", 200, `"name":"config"`},
		{"GET", "/v2/models/m/infer", "", 200, `"name":"m/infer","versions":["3","1"]`},
		{"GET", "/v2/models/m/infer/versions/1/ready", "", 200, `"ready":true`},
		{"POST", "/v2/models/m/infer/versions/1/infer", `{"inputs":[{"name":"ids","datatype":"INT64","shape":[1,2],"data":[1,2]},{"name":"w","datatype":"FP32","shape":[1,1],"data":[2]}]}`,
			200, `"model_name":"m/infer","model_version":"1"`},
		{"POST", "/v2/models/m/infer", `{}`, 404, `unknown model: 'm'`},
		{"GET", "/v2/models/m/ready", "", 503, `{"name":"m","ready":false}`},
	} {
		code, body := g.send(t, c.method, c.path, []byte(c.body))
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, code, body, c.code, c.has)
		}
	}
}

// FLOAT16 and BFLOAT16 ONNX models over OIP REST (JSON numbers and binary
// data) and gRPC (raw contents); an output filter that leaves out an
// output Grove cannot convert succeeds; errors name OIP datatypes; the
// repository's load and unload are refused, naming the management API.
//
// Budget: 10 s.
func TestHalfFloatsOutputFiltersDatatypeNamesAndRepositoryCalls(t *testing.T) {
	t.Parallel()
	g := startGrove(t, cornersBucket(t, map[string]string{"half/": "half", "bfloat/": "bfloat", "wide/": "uint16_out"}).URL(), nil)

	// FP16: JSON numbers in, rounded to nearest even; out as the shortest
	// numbers that read back.
	req := `{"inputs":[{"name":"h","datatype":"FP16","shape":[1,4],"data":[0.1,65504,1.000488281250000000000001,-2.5]},` +
		`{"name":"x","datatype":"FP32","shape":[1,4],"data":[1.0004,70000,2049,0.33333334]}],"outputs":[{"name":"same"},{"name":"narrow","parameters":{"binary_data":true}}]}`
	code, body := g.send(t, "POST", "/v2/models/half/infer", []byte(req))
	if code != 200 || !strings.Contains(body, `{"name":"same","datatype":"FP16","shape":[1,4],"data":[0.1,6.55e+04,1.001,-2.5]}`) ||
		!strings.Contains(body, `{"name":"narrow","datatype":"FP16","shape":[1,4],"parameters":{"binary_data_size":8}}`) {
		t.Errorf("FP16 REST: %d %q", code, body)
	}
	if i := strings.LastIndex(body, "}"); i > 0 && len(body) == i+1+8 {
		raw := []byte(body[i+1:])
		got := []uint16{binary.LittleEndian.Uint16(raw), binary.LittleEndian.Uint16(raw[2:]), binary.LittleEndian.Uint16(raw[4:]), binary.LittleEndian.Uint16(raw[6:])}
		// 1.0004 → 1, 70000 → +Inf, 2049 → 2048 (ties to even), 0.33333334 → 0x3555.
		if want := []uint16{0x3c00, 0x7c00, 0x6800, 0x3555}; !slices.Equal(got, want) {
			t.Errorf("FP16 narrow by ONNX Runtime: %#04x, want %#04x", got, want)
		}
	} else {
		t.Errorf("FP16 binary output: %q", body)
	}
	if code, body := g.send(t, "POST", "/v2/models/half/infer", []byte(`{"inputs":[{"name":"h","datatype":"FP16","shape":[1,4],"data":[1,2,3,65520]},`+
		`{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`)); code != 400 || !strings.Contains(body, `data[3] = 65520 is out of range for FP16`) {
		t.Errorf("FP16 out of range: %d %s", code, body)
	}
	// BF16 in binary data.
	header := `{"inputs":[{"name":"b","datatype":"BF16","shape":[1,2],"parameters":{"binary_data_size":4}},{"name":"x","datatype":"FP32","shape":[1,2],"data":[257,0.1]}]}`
	code, body = g.send(t, "POST", "/v2/models/bfloat/infer", append([]byte(header), 0x80, 0x3f, 0xcd, 0x3d), "Inference-Header-Content-Length", strconv.Itoa(len(header)))
	if code != 200 || !strings.Contains(body, `"name":"same","datatype":"BF16","shape":[1,2],"data":[1,0.1]`) ||
		!strings.Contains(body, `"name":"narrow","datatype":"BF16","shape":[1,2],"data":[256,0.1]`) || !strings.Contains(body, `"name":"wide","datatype":"FP32","shape":[1,2],"data":[1,0.100097656]`) {
		t.Errorf("BF16 binary in: %d %s", code, body)
	}

	// gRPC: FP16 in raw_input_contents and raw_output_contents.
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	ctx := withTimeout(t, time.Minute)
	x := make([]byte, 16)
	binary.LittleEndian.PutUint32(x, 0x3f800000) // 1.0, then zeros
	res, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "half", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "h", Datatype: "FP16", Shape: []int64{1, 4}}, {Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{{0x00, 0x3c, 0x66, 0x2e, 0, 0, 0, 0x80}, x},
		Outputs:          []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "same"}, {Name: "wide"}}})
	if err != nil || len(res.GetOutputs()) != 2 || res.GetOutputs()[0].GetDatatype() != "FP16" ||
		!bytes.Equal(res.GetRawOutputContents()[0], []byte{0x00, 0x3c, 0x66, 0x2e, 0, 0, 0, 0x80}) {
		t.Errorf("gRPC FP16: %v %v", res, err)
	}
	if _, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "half", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "h", Datatype: "FP16", Shape: []int64{1, 4}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "FP16 data travel only in raw_input_contents") {
		t.Errorf("gRPC typed FP16: %v", err)
	}

	// Item 9: the UINT16 output w is left out, so y is answered.
	wide := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]`
	if code, body := g.send(t, "POST", "/v2/models/wide/infer", []byte(wide+`,"outputs":[{"name":"y"}]}`)); code != 200 || !strings.Contains(body, `"name":"y","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]`) {
		t.Errorf("outputs [y]: %d %s", code, body)
	}
	if code, body := g.send(t, "POST", "/v2/models/wide/infer", []byte(wide+`}`)); code != 500 || !strings.Contains(body, `output \"w\" is a tensor of UINT16; Grove returns tensors of FP32,`) {
		t.Errorf("every output: %d %s", code, body)
	}
	if res, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "wide", Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}},
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}); err != nil || len(res.GetOutputs()) != 1 {
		t.Errorf("gRPC outputs [y]: %v %v", res, err)
	}

	// OIP datatype names in the runtime's errors.
	if code, body := g.send(t, "POST", "/v2/models/wide/infer", []byte(`{"inputs":[{"name":"x","datatype":"FP64","shape":[1,4],"data":[1,2,3,4]}]}`)); code != 400 ||
		!strings.Contains(body, `input \"x\" is FP64, the model takes FP32 (x FP32 [-1 4])`) {
		t.Errorf("FP64 for FP32: %d %s", code, body)
	}
	if _, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "wide", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "INT64", Shape: []int64{1, 4},
		Contents: &oippb.InferTensorContents{Int64Contents: []int64{1, 2, 3, 4}}}}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `is INT64, the model takes FP32`) {
		t.Errorf("gRPC INT64 for FP32: %v", err)
	}

	// Item 10: load and unload are refused, saying what to do instead.
	for _, action := range []string{"load", "unload"} {
		code, body := g.send(t, "POST", "/v2/repository/models/half/"+action, []byte(`{}`))
		if code != 409 || !strings.Contains(body, "model repository "+action+" of model 'half' is refused") || !strings.Contains(body, "POST /servable") {
			t.Errorf("%s: %d %s", action, code, body)
		}
	}
	if code, _ := g.send(t, "GET", "/v2/models/half/ready", nil); code != 200 {
		t.Errorf("half is not ready after an unload: %d", code)
	}
}
