package it

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// TestErrorsShownToCallersCarryNoServerPaths serves a file bucket holding
// a corrupt ONNX model, a corrupt TorchScript model and the path of a
// model that is not there, and registers a corrupt model through the
// sidecar's RegisterModel: what callers are told about them (the status
// document's last_error, the OIP repository index's reasons, OIP model
// ready and metadata over REST and gRPC, a B&A request to them,
// RegisterModel's gRPC status) names the model files by their paths in
// the bucket, with the runtime's reason, and carries no absolute server
// path: not the model cache, not the bucket's directory, nothing under
// /tmp/. grove's log keeps the full paths.
//
// Budget: 10 s.
func TestErrorsShownToCallersCarryNoServerPaths(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	cache := t.TempDir()
	b.Put(t, "ads/bad_onnx/model.onnx", []byte("this is not an ONNX model"))
	b.Put(t, "bad_pt/model.pt", []byte("PK\x03\x04 this is not a TorchScript archive"))
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	putConfig(t, b, modelEntry{Path: "ads/bad_onnx/"}, modelEntry{Path: "bad_pt/"}, modelEntry{Path: "missing/"}, modelEntry{Path: "pctr_v1/"})
	g := startOn(t, b, "--cache-dir", cache)

	// shown fails if what a caller was shown names a server path.
	shown := func(where, text string) {
		t.Helper()
		for _, p := range []string{cache, b.dir, "/tmp/", "file://"} {
			if strings.Contains(text, p) {
				t.Errorf("%s names the server path %s: %s", where, p, text)
			}
		}
	}
	wants := map[string][]string{
		"ads/bad_onnx/": {"ads/bad_onnx/model.onnx", "not a valid ONNX model"},
		"bad_pt/":       {"bad_pt/model.pt", "PytorchStreamReader failed"},
		"missing/":      {`no objects found under model path "missing/" in the bucket`},
	}
	st := g.status()
	for path, want := range wants {
		state, _, lastErr := st.model(path)
		if state != "failed" {
			t.Errorf("%s: state %q, want failed", path, state)
		}
		for _, w := range want {
			if !strings.Contains(lastErr, w) {
				t.Errorf("%s: last_error %q does not say %q", path, lastErr, w)
			}
		}
		shown("status last_error of "+path, lastErr)
	}
	shown("the status document's config error", st.Config.LastError)

	resp, err := client.Post(g.url+"/v2/repository/index", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	index := string(body)
	if !strings.Contains(index, "ads/bad_onnx/model.onnx: not a valid ONNX model") {
		t.Errorf("the repository index gives no reason naming the model file: %s", index)
	}
	shown("the OIP repository index", index)

	for _, route := range []string{"/v2/models/bad_pt/ready", "/v2/models/bad_pt", "/v2/models/missing/ready", "/v2/models/missing"} {
		code, body := g.get(route)
		if code == http.StatusOK {
			t.Errorf("GET %s answered 200 for a model that failed: %s", route, body)
		}
		shown("GET "+route, string(body))
	}
	_, ba, err := g.infer(batchJSON(itemJSON("bad_pt/", tensorJSON("FLOAT", []int64{1, 1}, []float64{1})),
		itemJSON("ads/bad_onnx/", tensorJSON("FLOAT", []int64{1, 1}, []float64{1}))))
	if err != nil || len(ba.Response) != 2 {
		t.Fatalf("B&A request to the failed models: %+v %v", ba, err)
	}
	for _, item := range ba.Response {
		if item.Error == nil {
			t.Fatalf("B&A answered %s without an error", item.ModelPath)
		}
		shown("the B&A answer for "+item.ModelPath, item.Error.Description)
	}

	ctx := withTimeout(t, 30*time.Second)
	oip := oippb.NewGRPCInferenceServiceClient(g.dial())
	if r, err := oip.ModelReady(ctx, &oippb.ModelReadyRequest{Name: "bad_pt"}); err != nil || r.Ready {
		t.Errorf("gRPC ModelReady(bad_pt) = %v, %v; want not ready", r, err)
	}
	if _, err := oip.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "bad_pt"}); err == nil {
		t.Error("gRPC ModelMetadata(bad_pt) answered for a model that failed")
	} else {
		shown("gRPC ModelMetadata", status.Convert(err).Message())
	}

	sidecar := sidecarpb.NewInferenceServiceClient(g.dial())
	_, err = sidecar.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "registered/broken/"},
		ModelFiles: map[string][]byte{"registered/broken/model.onnx": []byte("this is not an ONNX model either")}})
	if msg := status.Convert(err).Message(); err == nil || !strings.Contains(msg, "registered/broken/model.onnx: not a valid ONNX model") {
		t.Errorf("RegisterModel of a corrupt model = %v; want its reason naming registered/broken/model.onnx", err)
	} else {
		shown("RegisterModel's status", msg)
	}

	logs := g.logs.String()
	for _, p := range []string{"Load model from " + cache, "in file://" + b.dir} {
		if !strings.Contains(logs, p) {
			t.Errorf("grove's log does not keep the full path (%q)", p)
		}
	}
}
