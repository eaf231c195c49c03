package sidecar

// The B&A sidecar's own PyTorch module tests (pytorch_v2_1_1, release
// 4.9.0), replayed through Grove's sidecar gRPC service over a real actor
// system and libtorch: each test registers the models the sidecar's test
// registers, as it registers them (one extension-less file keyed by the
// model path), sends the sidecar test's request bytes to Predict and
// checks the answer the sidecar's test expects. The models are Grove's
// stand-ins (testdata/models/make_models.py): the same names, inputs and
// outputs, with Grove's own weights, so outputs that depend on weights are
// checked against what torch computes for them (testdata/models/expected.json).
//
// What the sidecar answers and Grove does not (documented in README.md):
// Grove fills no metrics_list, and it serves a model that cannot be frozen
// unfrozen where the sidecar refuses it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
	"github.com/groveml/grove/transport/grpcserver"
)

// sidecarClient starts an actor system with the TorchScript runtime and no
// configured model, serves the sidecar's service over it on 127.0.0.1 and
// returns a client of it; everything stops with the test.
func sidecarClient(t *testing.T) sidecarpb.InferenceServiceClient {
	t.Helper()
	b := bucket.NewMemory("conformance", map[string][]byte{"model_config.json": []byte(`{"model_metadata":[]}`)})
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), MaxBatchRows: 64, IntraOpThreads: 1, Runtimes: servables.Registry{torch.Runtime{}},
		ParseWarmUp: ba.ParseOptions{}.ParseWarmUp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	for deadline := time.Now().Add(time.Minute); !sys.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("actor system not ready")
		}
	}
	g := grpcserver.New(grpcserver.Options{})
	Register(g, sys, ba.ParseOptions{}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return sidecarpb.NewInferenceServiceClient(conn)
}

// modelRequest is what the sidecar's PopulateRegisterModelRequest builds
// for a PyTorch test model: the model path, and the one file keyed by it.
func modelRequest(t *testing.T, name string) *sidecarpb.RegisterModelRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "models", name))
	if err != nil {
		t.Fatal(err)
	}
	return &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: name}, ModelFiles: map[string][]byte{name: b}}
}

func register(t *testing.T, c sidecarpb.InferenceServiceClient, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.RegisterModel(t.Context(), modelRequest(t, n)); err != nil {
			t.Fatalf("RegisterModel(%s): %v", n, err)
		}
	}
}

func predict(t *testing.T, c sidecarpb.InferenceServiceClient, req *sidecarpb.PredictRequest) string {
	t.Helper()
	resp, err := c.Predict(t.Context(), req)
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	return string(resp.GetOutput())
}

func predictJSON(t *testing.T, c sidecarpb.InferenceServiceClient, body string) string {
	t.Helper()
	return predict(t, c, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
}

// The sidecar tests' requests, byte for byte (their layout included).
const (
	simpleRequest = `{
  "request" : [{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
}]
    }`
	simpleResponse = `{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[3.14]}]}]}`

	invalidTensorContentRequest = `{
  "request" : [{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["seven"]
    }
  ]
}]
    }`
	mismatchedInput = `{
  "request" : [{
    "model_path" : "e2e_model1",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
}]
    }`
)

// More of the sidecar tests' requests, byte for byte; their layouts differ
// from one another, as in the sidecar's test file.
const (
	// multipleInvalidInputs: two items: one for a model that is not registered, one with a value that does not convert.
	multipleInvalidInputs = `{
  "request" : [{
    "model_path" : "non_existent_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
    "tensor_content": ["3.14"]
    }
  ]
},
{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1, 2
      ],
      "tensor_content": ["seven", "2.718"]
    }
  ]
}]
    }`
	// validAndInvalidInputs: two items of the simple model, the second with a value that does not convert.
	validAndInvalidInputs = `{
  "request" : [{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
},
{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
    "tensor_content": ["seven"]
    }
  ]
}]
    }`
	// validAndInvalidParsingInputs: an item without model_path, a good item and one with a value that does not convert.
	validAndInvalidParsingInputs = `{
  "request" : [
  {
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
  },
  {
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
},
{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
    "tensor_content": ["seven"]
    }
  ]
}]
    }`
	// twoInvalidParsingInputs: an item without model_path and one with an unquoted number.
	twoInvalidParsingInputs = `{
  "request" : [
  {
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
  },
{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
    "tensor_content": [1.5]
    }
  ]
}]
    }`
	// invalidInputNoModelPath: an item without model_path.
	invalidInputNoModelPath = `{
  "request" : [
  {
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3.14"]
    }
  ]
  }]
}`
	// invalidInputModelPath: an item with an unquoted number.
	invalidInputModelPath = `{
  "request" : [
  {
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        1
      ],
      "tensor_content": [3.14]
    }
  ]
  }]
}`
)

// simpleTensor is one DOUBLE tensor of the simple model's requests, laid
// out as the sidecar's tests lay it out.
func simpleTensor(shape, content string) string {
	return `{
    "model_path" : "simple_model",
    "tensors" : [
    {
      "data_type": "DOUBLE",
      "tensor_shape": [
        ` + shape + `
      ],
      "tensor_content": [` + content + `]
    }
  ]
}`
}

func simpleBatch(items ...string) string {
	return "{\n  \"request\" : [" + strings.Join(items, ",\n") + "]\n    }"
}

func TestSidecarConformanceRegisterModel(t *testing.T) {
	c := sidecarClient(t)
	// RegisterModelWithEmtpyKeyReturnsInvalidArgument
	if _, err := c.RegisterModel(t.Context(), &sidecarpb.RegisterModelRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty request: %v, want INVALID_ARGUMENT", err)
	}
	// RegisterModelWithNoModelContentReturnsInvalidArgument
	if _, err := c.RegisterModel(t.Context(), &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "e2e_model1"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no model files: %v, want INVALID_ARGUMENT", err)
	}
	// An extension-less file that is no model says why.
	_, err := c.RegisterModel(t.Context(), &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "junk"},
		ModelFiles: map[string][]byte{"junk": []byte("not a model")}})
	if want := "unsupported runtime: no runtime accepts files junk, by extension or by content (runtimes in this build: torchscript)"; status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
		t.Errorf("junk: %v, want INVALID_ARGUMENT %q", err, want)
	}
	// RegisterModelOk, on an extension-less file recognised by its content.
	register(t, c, "simple_model")
	// RegisterModelWithExistingKeyReturnsAlreadyExists
	if _, err := c.RegisterModel(t.Context(), modelRequest(t, "simple_model")); status.Code(err) != codes.AlreadyExists {
		t.Errorf("second registration: %v, want ALREADY_EXISTS", err)
	}
	// RegisterModelWithFrozenModelReturnsOkStatus
	register(t, c, "frozen_model")
	paths, err := c.GetModelPaths(t.Context(), &sidecarpb.GetModelPathsRequest{})
	if err != nil || len(paths.GetModelSpecs()) != 2 {
		t.Errorf("GetModelPaths: %v %v", paths, err)
	}
}

func TestSidecarConformanceRegisterWithWarmUp(t *testing.T) {
	c := sidecarClient(t)
	// RegisterModelWithInavlidWarmupDataFail: a warm-up for another path.
	req := modelRequest(t, "e2e_model1")
	// As the sidecar's test sends it: another path, and no second FLOAT tensor.
	req.WarmUpBatchRequestJson = strings.Replace(variedInputsBatch2("e2e_model1_non_exist_path", g1, g2),
		","+variedInput("serving_default_double2:0", "FLOAT", "2, 10", g2), "", 1)
	if _, err := c.RegisterModel(t.Context(), req); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "Warm up request using different model path") {
		t.Errorf("warm-up for another path: %v, want INVALID_ARGUMENT", err)
	}
	// A warm-up with unquoted numbers is refused like a request.
	req.WarmUpBatchRequestJson = strings.Replace(variedInputsBatch2("e2e_model1", g1, g2), `["8", "6"]`, `[8, 6]`, 1)
	if _, err := c.RegisterModel(t.Context(), req); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "All numbers within the tensor_content must be enclosed in quotes") {
		t.Errorf("warm-up with unquoted numbers: %v, want INVALID_ARGUMENT", err)
	}
	// RegisterModelWithWarmupDataSuccess
	req.WarmUpBatchRequestJson = variedInputsBatch2("e2e_model1", g1, g2)
	if _, err := c.RegisterModel(t.Context(), req); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
}

func TestSidecarConformancePredictSimpleModel(t *testing.T) {
	c := sidecarClient(t)
	// PredictWithoutValidModelReturnsModelNotFoundJsonError
	if got, want := predictJSON(t, c, simpleRequest), `{"response":[{"model_path":"simple_model","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'simple_model' has not been registered"}}]}`; got != want {
		t.Errorf("before registration:\n%s\nwant\n%s", got, want)
	}
	register(t, c, "simple_model")
	for _, tc := range []struct{ name, body, want string }{
		{"PredictWithoutValidBatchRequestInputReturnsInputParsingJsonError", "",
			`{"response":[{"error":{"error_type":"INPUT_PARSING","description":"JSON Parse Error: The document is empty."}}]}`},
		{"PredictWithInvalidTensorContentReturnsInputParsingJsonError", invalidTensorContentRequest,
			`{"response":[{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model simple_model encounters tensor parsing error: Error in double conversion"}}]}`},
		{"PredictSimpleSuccess", simpleRequest, simpleResponse},
		{"PredictSimpleSuccessShape1x2", simpleBatch(simpleTensor("1, 2", `"3.14", "2.718"`)),
			`{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[1,2],"data_type":"DOUBLE","tensor_content":[3.14,2.718]}]}]}`},
		{"PredictSimpleBatchSize2Success", simpleBatch(simpleTensor("2, 1", `"3.14", "2.718"`)),
			`{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[2,1],"data_type":"DOUBLE","tensor_content":[3.14,2.718]}]}]}`},
		{"PredictSameModelSameBatchSizeMultipleRequestsSuccess", simpleBatch(simpleTensor("1", `"3.14"`), simpleTensor("1", `"2.718"`)),
			`{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[3.14]}]},` +
				`{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[2.718]}]}]}`},
		{"PredictSameModelVariedBatchSizesMultipleRequestsSuccess", simpleBatch(simpleTensor("2, 1", `"3.14", "1.00"`), simpleTensor("3, 1", `"2.718", "1.00", "1.00"`)),
			`{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[2,1],"data_type":"DOUBLE","tensor_content":[3.14,1.0]}]},` +
				`{"model_path":"simple_model","tensors":[{"tensor_shape":[3,1],"data_type":"DOUBLE","tensor_content":[2.718,1.0,1.0]}]}]}`},
		{"PredictMutilpleInvalidInputsReturnsJsonBatchErrors",
			multipleInvalidInputs,
			`{"response":[{"model_path":"non_existent_model","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'non_existent_model' has not been registered"}},` +
				`{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model simple_model encounters tensor parsing error: Error in double conversion"}}]}`},
		{"PredictBothValidAndInvalidInputsReturnsPartialResultsJsonResponse", validAndInvalidInputs,
			`{"response":[{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[3.14]}]},` +
				`{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model simple_model encounters tensor parsing error: Error in double conversion"}}]}`},
		{"PredictBothValidAndInvalidParsingInputsReturnsPartialResultsJsonResponse",
			validAndInvalidParsingInputs,
			`{"response":[{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}},` +
				`{"model_path":"simple_model","tensors":[{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[3.14]}]},` +
				`{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model simple_model encounters tensor parsing error: Error in double conversion"}}]}`},
		{"PredictTwoInvalidParsingInputs",
			twoInvalidParsingInputs,
			`{"response":[{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}},` +
				`{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"All numbers within the tensor_content must be enclosed in quotes"}}]}`},
		{"PredictInvalidInputNoModelPath", invalidInputNoModelPath,
			`{"response":[{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}}]}`},
		{"PredictInvalidInputModelPath", invalidInputModelPath,
			`{"response":[{"model_path":"simple_model","error":{"error_type":"INPUT_PARSING","description":"All numbers within the tensor_content must be enclosed in quotes"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := predictJSON(t, c, tc.body); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	// PredictConsentedRequestSuccess
	consented := &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(simpleRequest)}, IsConsented: true}
	if got := predict(t, c, consented); got != simpleResponse {
		t.Errorf("consented: %s", got)
	}
	// DeleteModelOk, then the model is not found.
	if _, err := c.DeleteModel(t.Context(), &sidecarpb.DeleteModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "simple_model"}}); err != nil {
		t.Fatal(err)
	}
	if got := predictJSON(t, c, simpleRequest); !strings.HasPrefix(got, `{"response":[{"model_path":"simple_model","error":{"error_type":"MODEL_NOT_FOUND","description"`) {
		t.Errorf("after DeleteModel: %s", got)
	}
	// DeleteNonExistentModelReturnsNotFound
	if _, err := c.DeleteModel(t.Context(), &sidecarpb.DeleteModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "simple_model"}}); status.Code(err) != codes.NotFound {
		t.Errorf("second DeleteModel: %v, want NOT_FOUND", err)
	}
}

// The e2e models' FLOAT features, as the sidecar's tests send them.
var (
	f1 = `"0.4313", "0.3381", "0.3103", "0.3150", "0.9595", "0.7862", "0.6386", "0.9695", "0.0469", "0.5807"`
	f2 = `"0.8201", "0.8321", "0.1021", "0.6779", "0.2152", "0.4805", "0.3957", "0.0825", "0.0230", "0.1711"`
	g1 = `
        "0.7862", "0.6386", "0.9695", "0.0469", "0.5807", "0.8201", "0.8321",
        "0.1021", "0.6779", "0.2152", "0.4805", "0.3957", "0.0825", "0.0230",
        "0.1711", "0.7269", "0.7287", "0.0651", "0.3122", "0.5082"
      `
	g2 = `
        "0.0677", "0.7817", "0.9529", "0.5884", "0.1285", "0.6166", "0.6815",
        "0.8959", "0.2340", "0.0520", "0.7197", "0.5311", "0.3371", "0.2905",
        "0.2422", "0.9047", "0.4137", "0.8606", "0.9463", "0.5633"
      `
)

// variedInput is one tensor of the e2e models' requests.
func variedInput(name, dtype, shape, content string) string {
	return `
    {
      "tensor_name": "` + name + `",
      "data_type": "` + dtype + `",
      "tensor_shape": [
        ` + shape + `
      ],
      "tensor_content": [` + content + `]
    }`
}

// variedItem is an item of an e2e model with five INT64 ids and two FLOAT
// feature vectors.
func variedItem(path string, ids [5]string, idShape, fShape, a, b string) string {
	var ts []string
	for i, id := range ids {
		ts = append(ts, variedInput(fmt.Sprintf("serving_default_int_input%d:0", i+1), "INT64", idShape, id))
	}
	ts = append(ts, variedInput("serving_default_double1:0", "FLOAT", fShape, a), variedInput("serving_default_double2:0", "FLOAT", fShape, b))
	return `{
    "model_path" : "` + path + `",
    "tensors" : [` + strings.Join(ts, ",") + `
  ]
}`
}

var batch2IDs = [5]string{`"8", "6"`, `"18", "11"`, `"9", "14"`, `"2", "1"`, `"10", "4"`}

func variedInputsBatch2(path, a, b string) string {
	return "{\n  \"request\" : [" + variedItem(path, batch2IDs, "2", "2, 10", a, b) + "]\n    }"
}

// expected returns the outputs torch computes for the named request
// (testdata/models/expected.json), float32 values widened to double.
func expected(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "models", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string][]float64
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	vals, ok := all[key]
	if !ok {
		t.Fatalf("no %s in expected.json", key)
	}
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// sameJSON reports whether two JSON documents have the same tokens in the
// same order (keys included), numbers compared by value: rapidjson's
// Grisu2 may write a double with another last digit than the shortest
// form, for the same value.
func sameJSON(a, b string) bool {
	da, db := json.NewDecoder(strings.NewReader(a)), json.NewDecoder(strings.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	for {
		ta, ea := da.Token()
		tb, eb := db.Token()
		if ea != nil || eb != nil {
			return errors.Is(ea, io.EOF) && errors.Is(eb, io.EOF)
		}
		na, aNum := ta.(json.Number)
		nb, bNum := tb.(json.Number)
		if aNum && bNum {
			fa, _ := na.Float64()
			fb, _ := nb.Float64()
			if fa != fb {
				return false
			}
			continue
		}
		if ta != tb {
			return false
		}
	}
}

func TestSidecarConformancePredictVariedInputs(t *testing.T) {
	c := sidecarClient(t)
	register(t, c, "e2e_model1", "e2e_model2", "mixed_inputs_mixed_outputs_model")
	// The answers are compared token by token, numbers by value.
	for _, tc := range []struct{ name, body, want string }{
		{"PredictVariedInputsBatchSize1Success",
			"{\n  \"request\" : [" + variedItem("e2e_model1", [5]string{`"8"`, `"6"`, `"18"`, `"11"`, `"9"`}, "1", "1, 10", f1, f2) + "]\n    }",
			`{"response":[{"model_path":"e2e_model1","tensors":[{"tensor_shape":[1,1],"data_type":"FLOAT","tensor_content":[` + expected(t, "e2e_model1_batch1") + `]}]}]}`},
		{"PredictVariedInputsBatchSize2Success", variedInputsBatch2("e2e_model1", g1, g2),
			`{"response":[{"model_path":"e2e_model1","tensors":[{"tensor_shape":[2,1],"data_type":"FLOAT","tensor_content":[` + expected(t, "e2e_model1_batch2") + `]}]}]}`},
		{"PredictVariedInputsMultipleModelsBatchSize1Success",
			"{\n  \"request\" : [" + variedItem("e2e_model1", batch2IDs, "2", "2, 10", g1, g2) + ",\n" + variedItem("e2e_model2", batch2IDs, "2", "2, 10", g2, g1) + "]\n    }",
			`{"response":[{"model_path":"e2e_model1","tensors":[{"tensor_shape":[2,1],"data_type":"FLOAT","tensor_content":[` + expected(t, "e2e_model1_batch2") + `]}]},` +
				`{"model_path":"e2e_model2","tensors":[{"tensor_shape":[2,1],"data_type":"FLOAT","tensor_content":[` + expected(t, "e2e_model2_batch2") + `]}]}]}`},
		{"PredictMixedInputsMixedOutputsSuccess", `{
  "request" : [{
    "model_path" : "mixed_inputs_mixed_outputs_model",
    "tensors" : [
    {
      "data_type": "INT64",
      "tensor_shape": [
        1
      ],
      "tensor_content": ["3"]
    },
    {
      "data_type": "FLOAT",
      "tensor_shape": [
        1, 3
      ],
      "tensor_content": ["0.0394", "1.7093", "-0.2127"]
    }
  ]
}]
    }`,
			`{"response":[{"model_path":"mixed_inputs_mixed_outputs_model","tensors":[{"tensor_shape":[1,4],"data_type":"FLOAT","tensor_content":[` + expected(t, "mixed_float") +
				`]},{"tensor_shape":[1,1],"data_type":"INT64","tensor_content":[0]}]}]}`},
		{"PredictReturnsModelExecutionJsonError", mismatchedInput,
			`{"response":[{"model_path":"e2e_model1","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model e2e_model1 encounters an exception during evaluation: invalid input: got 1 unnamed input tensors, the model takes 7 (unnamed inputs are taken in the model's order, named ones by name); the model's inputs are: a, b, c, d, e, f, g"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := predictJSON(t, c, tc.body); !sameJSON(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestSidecarConformanceConcurrency(t *testing.T) {
	c := sidecarClient(t)
	// RegisterSameModelWithMultipleThreads: one registration wins, the
	// others are told the model exists.
	const n = 8
	codesSeen := make([]codes.Code, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := c.RegisterModel(t.Context(), modelRequest(t, "simple_model"))
			codesSeen[i] = status.Code(err)
		})
	}
	wg.Wait()
	ok, exists := 0, 0
	for _, code := range codesSeen {
		switch code {
		case codes.OK:
			ok++
		case codes.AlreadyExists:
			exists++
		}
	}
	if ok != 1 || exists != n-1 {
		t.Errorf("registrations answered %v, want one OK and %d ALREADY_EXISTS", codesSeen, n-1)
	}
	// ThreadsMakingInferenceRequestAgainstSingleModel
	outs := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, err := c.Predict(t.Context(), &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(simpleRequest)}})
			if err == nil {
				outs[i] = string(resp.GetOutput())
			}
		})
	}
	wg.Wait()
	for i, out := range outs {
		if out != simpleResponse {
			t.Errorf("request %d: %s", i, out)
		}
	}
}
