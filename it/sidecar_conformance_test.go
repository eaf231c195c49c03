package it

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// sidecarModel reads a stand-in of the B&A sidecar's test models
// (api/sidecar/testdata/models, extension-less files).
func sidecarModel(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "api", "sidecar", "testdata", "models", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postRaw posts a B&A batch request and returns the answer's bytes.
func (g *grove) postRaw(body string) (int, string) {
	g.t.Helper()
	resp, err := client.Post(g.url+"/v1/inference", "application/json", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// simpleItem is an item of the sidecar tests' simple model (DOUBLE, shape [1]).
func simpleItem(path, content string) string {
	return `{"model_path":"` + path + `","tensors":[{"data_type":"DOUBLE","tensor_shape":[1],"tensor_content":[` + content + `]}]}`
}

const quotesError = `{"error_type":"INPUT_PARSING","description":"All numbers within the tensor_content must be enclosed in quotes"}`

// TestSidecarConformanceOfTheBinary checks the four differences the B&A
// sidecar's own PyTorch tests found, against the grove binary, on the
// sidecar's gRPC service and POST /v1/inference alike: an extension-less
// TorchScript file registered as {"simple_model": <bytes>} loads (and an
// extension-less ONNX file in the bucket too); unquoted numbers are
// INPUT_PARSING; an item's failures answer in the sidecar's order; and
// TorchScript outputs carry no tensor_name (ONNX outputs keep theirs).
//
// Budget: 10 s.
func TestSidecarConformanceOfTheBinary(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	onnxModel, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_onnx", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "models/pctr", onnxModel) // a B&A bucket's extension-less model file
	putConfig(t, b, modelEntry{Path: "models/pctr"})
	g := startGrove(t, b.URL(), nil)
	c := sidecarpb.NewInferenceServiceClient(g.dial())
	ctx := withTimeout(t, 2*time.Minute)
	if state, _, lastErr := g.status().model("models/pctr"); state != "ready" {
		t.Fatalf("extension-less ONNX model: %s %s", state, lastErr)
	}

	_, err = c.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "simple_model"},
		ModelFiles: map[string][]byte{"simple_model": sidecarModel(t, "simple_model")}})
	if err != nil {
		t.Fatalf("RegisterModel of an extension-less TorchScript file: %v", err)
	}
	// A warm-up with unquoted numbers is refused before anything loads.
	_, err = c.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "frozen_model"},
		ModelFiles:             map[string][]byte{"frozen_model": sidecarModel(t, "frozen_model")},
		WarmUpBatchRequestJson: batchJSON(simpleItem("frozen_model", `1.5`))})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "All numbers within the tensor_content must be enclosed in quotes") {
		t.Errorf("warm-up with unquoted numbers: %v, want INVALID_ARGUMENT", err)
	}

	predict := func(body string) string {
		resp, err := c.Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
		if err != nil {
			t.Fatalf("Predict: %v", err)
		}
		return string(resp.GetOutput())
	}
	for _, tc := range []struct{ name, body, want string }{
		{"TorchScript outputs carry no tensor_name", batchJSON(simpleItem("simple_model", `"3.14"`)),
			`{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[3.14]}]}]}`},
		{"unquoted numbers", batchJSON(simpleItem("simple_model", `3.14`)),
			`{"response":[{"model_path":"simple_model","error":` + quotesError + `}]}`},
		{"unquoted numbers before the model lookup", batchJSON(simpleItem("not_registered", `3.14`)),
			`{"response":[{"model_path":"not_registered","error":` + quotesError + `}]}`},
		{"the model lookup before the conversion", batchJSON(simpleItem("not_registered", `"seven"`)),
			`{"response":[{"model_path":"not_registered","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'not_registered' has not been registered"}}]}`},
		{"the conversion for a registered model", batchJSON(simpleItem("simple_model", `"seven"`)),
			`{"response":[{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model simple_model encounters tensor parsing error: Error in double conversion"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := predict(tc.body); got != tc.want {
				t.Errorf("Predict answered\n%s\nwant\n%s", got, tc.want)
			}
			if code, got := g.postRaw(tc.body); code != 200 || got != tc.want {
				t.Errorf("POST /v1/inference answered %d\n%s\nwant\n%s", code, got, tc.want)
			}
		})
	}

	// The ONNX model's outputs have names of their own, and keep them.
	code, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "models/pctr")))
	if err != nil || code != 200 {
		t.Fatalf("ONNX: %d %v", code, err)
	}
	checkOutputs(t, exp, "pctr_v1", resp, 0)
	if name := resp.Response[0].Tensors[0].TensorName; name != "output_0" {
		t.Errorf("ONNX output tensor_name %q, want the model's output_0", name)
	}
}

// TestSidecarConformanceAcceptsUnquotedNumbersWhenSet checks the server
// setting ba_accept_unquoted_numbers: numbers pass in requests on both
// APIs and in warm-ups, and an unregistered model is then MODEL_NOT_FOUND.
//
// Budget: 10 s.
func TestSidecarConformanceAcceptsUnquotedNumbersWhenSet(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putConfig(t, b)
	g := startGrove(t, b.URL(), nil, "--ba-accept-unquoted-numbers")
	c := sidecarpb.NewInferenceServiceClient(g.dial())
	ctx := withTimeout(t, 2*time.Minute)
	_, err := c.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "simple_model"},
		ModelFiles:             map[string][]byte{"simple_model": sidecarModel(t, "simple_model")},
		WarmUpBatchRequestJson: batchJSON(simpleItem("simple_model", `1.5`))})
	if err != nil {
		t.Fatalf("RegisterModel with an unquoted warm-up: %v", err)
	}
	for body, want := range map[string]string{
		batchJSON(simpleItem("simple_model", `3.14`)):   `{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[3.14]}]}]}`,
		batchJSON(simpleItem("not_registered", `3.14`)): `{"response":[{"model_path":"not_registered","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'not_registered' has not been registered"}}]}`,
	} {
		resp, err := c.Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
		if err != nil || string(resp.GetOutput()) != want {
			t.Errorf("Predict: %v\n%s\nwant\n%s", err, resp.GetOutput(), want)
		}
		if code, got := g.postRaw(body); code != 200 || got != want {
			t.Errorf("POST /v1/inference: %d\n%s\nwant\n%s", code, got, want)
		}
	}
}
