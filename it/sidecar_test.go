package it

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// dial connects to g's gRPC services.
func (g *grove) dial() *grpc.ClientConn {
	g.t.Helper()
	return g.dialAddr(g.grpc)
}

// dialModelWrites dials where g serves the sidecar's RegisterModel and
// DeleteModel: its admin gRPC listener when it has one, else its gRPC
// listener.
func (g *grove) dialModelWrites() *grpc.ClientConn {
	g.t.Helper()
	if g.adminGRPC != "" && g.adminGRPC != "off" {
		return g.dialAddr(g.adminGRPC)
	}
	return g.dialAddr(g.grpc)
}

// dialAddr dials addr in plaintext; the connection is closed when the
// test ends.
func (g *grove) dialAddr(addr string) *grpc.ClientConn {
	g.t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { conn.Close() })
	return conn
}

// grpcurl returns the path of the pinned grpcurl (scripts/tools.sh).
func grpcurl(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("grpcurl is not installed (make deps runs scripts/tools.sh): %v", err)
	}
	return p
}

// TestSidecarServiceServesABiddingServer drives the B&A inference sidecar
// gRPC service the way a bidding server does: Predict with the JSON batch
// (the same answer as POST /v1/inference) and with the proto batch,
// RegisterModel with files sent in the call, GetModelPaths and DeleteModel;
// the config's paths are not the registry's to change.
//
// Budget: 10 s.
func TestSidecarServiceServesABiddingServer(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	putConfig(t, b, modelEntry{Path: "pctr_v1/"})
	g := startGrove(t, b.URL(), nil)
	client := sidecarpb.NewInferenceServiceClient(g.dial())
	ctx := withTimeout(t, time.Minute)

	hc, err := healthpb.NewHealthClient(g.dial()).Check(ctx, &healthpb.HealthCheckRequest{Service: "privacy_sandbox.bidding_auction_servers.inference.InferenceService"})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hc, err)
	}

	// JSON Predict answers exactly what the REST API answers.
	body := batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))
	resp, err := client.Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
	if err != nil {
		t.Fatal(err)
	}
	code, rest, err := g.infer(body)
	if err != nil || code != 200 {
		t.Fatalf("REST: %d %v", code, err)
	}
	var viaGRPC baResponse
	if err := json.Unmarshal(resp.GetOutput(), &viaGRPC); err != nil {
		t.Fatalf("Predict output %s: %v", resp.GetOutput(), err)
	}
	checkOutputs(t, exp, "pctr_v1", viaGRPC, 0)
	restJSON, _ := json.Marshal(rest)
	grpcJSON, _ := json.Marshal(viaGRPC)
	if string(restJSON) != string(grpcJSON) {
		t.Errorf("Predict answered\n%s\nREST answered\n%s", grpcJSON, restJSON)
	}

	// Proto Predict: typed tensors in and out; a bad item fails alone.
	in := exp["pctr_v1"].Inputs[0]
	vals := make([]float32, len(in.Data))
	for i, v := range in.Data {
		vals[i] = float32(v)
	}
	presp, err := client.Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_ProtoInput{ProtoInput: &sidecarpb.BatchInferenceRequest{
		Request: []*sidecarpb.InferenceRequestProto{
			{ModelPath: "pctr_v1/", Tensors: []*sidecarpb.TensorProto{{DataType: sidecarpb.DataTypeProto_FLOAT, TensorShape: in.Shape,
				TensorContent: &sidecarpb.TensorContent{TensorContentFloat: vals}}}},
			{ModelPath: "nope/", Tensors: []*sidecarpb.TensorProto{{DataType: sidecarpb.DataTypeProto_FLOAT, TensorShape: []int64{1},
				TensorContent: &sidecarpb.TensorContent{TensorContentFloat: []float32{1}}}}},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	out := presp.GetProtoOutput().GetResponse()
	if len(out) != 2 || out[0].GetError() != nil || out[1].GetError().GetErrorType() != sidecarpb.ErrorProto_MODEL_NOT_FOUND {
		t.Fatalf("proto Predict: %v", presp)
	}
	got := out[0].GetTensors()[0].GetTensorContent().GetTensorContentFloat()
	want := exp["pctr_v1"].Outputs[0].Data
	gotF := make([]float64, len(got))
	for i, v := range got {
		gotF[i] = float64(v)
	}
	checkClose(t, "proto Predict output", gotF, want, 1e-5)

	// RegisterModel: the files travel in the call, keyed by full bucket path.
	reg := &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "registered/pctr_v2/"},
		ModelFiles: map[string][]byte{"registered/pctr_v2/model.pt": exampleModel(t, "pctr_v2")}}
	if _, err := client.RegisterModel(ctx, reg); err != nil {
		t.Fatalf("RegisterModel: %v", err)
	}
	if _, err := client.RegisterModel(ctx, reg); status.Code(err) != codes.AlreadyExists {
		t.Errorf("registering twice: %v, want AlreadyExists", err)
	}
	for _, c := range []struct {
		req  *sidecarpb.RegisterModelRequest
		code codes.Code
	}{
		{&sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "pctr_v1/"},
			ModelFiles: map[string][]byte{"pctr_v1/model.pt": exampleModel(t, "pctr_v2")}}, codes.FailedPrecondition},
		{&sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "x/"},
			ModelFiles: map[string][]byte{"y/model.pt": []byte("z")}}, codes.InvalidArgument},
		{&sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "bad/"},
			ModelFiles: map[string][]byte{"bad/model.pt": []byte("not a model")}}, codes.Internal},
		{&sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "warm/"},
			ModelFiles: map[string][]byte{"warm/model.pt": exampleModel(t, "pctr_v2")}, WarmUpBatchRequestJson: `{"request": [`}, codes.InvalidArgument},
		{&sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "/abs"},
			ModelFiles: map[string][]byte{"/abs": []byte("z")}}, codes.InvalidArgument},
	} {
		if _, err := client.RegisterModel(ctx, c.req); status.Code(err) != c.code {
			t.Errorf("RegisterModel(%s): %v, want %v", c.req.ModelSpec.ModelPath, err, c.code)
		}
	}
	paths, err := client.GetModelPaths(ctx, &sidecarpb.GetModelPathsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range paths.GetModelSpecs() {
		names = append(names, s.GetModelPath())
	}
	if !slices.Equal(names, []string{"pctr_v1/", "registered/pctr_v2/"}) {
		t.Errorf("GetModelPaths = %v", names)
	}
	_, viaREST, err := g.infer(batchJSON(requestFor(exp, "pctr_v2", "registered/pctr_v2/")))
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, exp, "pctr_v2", viaREST, 0)
	// A config poll does not evict a registered model.
	time.Sleep(1500 * time.Millisecond)
	if state, _, _ := g.status().model("registered/pctr_v2/"); state != "ready" {
		t.Errorf("registered model after a config poll: %q", state)
	}

	if _, err := client.DeleteModel(ctx, &sidecarpb.DeleteModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "pctr_v1/"}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("deleting a configured model: %v, want FailedPrecondition", err)
	}
	if _, err := client.DeleteModel(ctx, &sidecarpb.DeleteModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "registered/pctr_v2/"}}); err != nil {
		t.Fatalf("DeleteModel: %v", err)
	}
	if _, err := client.DeleteModel(ctx, &sidecarpb.DeleteModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "registered/pctr_v2/"}}); status.Code(err) != codes.NotFound {
		t.Errorf("deleting twice: %v, want NotFound", err)
	}
	_, viaREST, _ = g.infer(batchJSON(requestFor(exp, "pctr_v2", "registered/pctr_v2/")))
	if e := errorType(viaREST, 0); e != "MODEL_NOT_FOUND" {
		t.Errorf("after DeleteModel: %q, want MODEL_NOT_FOUND", e)
	}

	// grpcurl sees both services through reflection, with no .proto files.
	listing, err := exec.CommandContext(ctx, grpcurl(t), "-plaintext", g.grpc, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, listing)
	}
	for _, svc := range []string{"privacy_sandbox.bidding_auction_servers.inference.InferenceService", "grpc.health.v1.Health"} {
		if !strings.Contains(string(listing), svc) {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, listing)
		}
	}
	call, err := exec.CommandContext(ctx, grpcurl(t), "-plaintext", g.grpc,
		"privacy_sandbox.bidding_auction_servers.inference.InferenceService/GetModelPaths").CombinedOutput()
	if err != nil || !strings.Contains(string(call), `"modelPath": "pctr_v1/"`) {
		t.Errorf("grpcurl GetModelPaths: %v\n%s", err, call)
	}
}

// TestRegisteredPathListedInConfigTakesTheConfigContent registers a model
// and then lists its path in the config: the config wins.
//
// Budget: 10 s.
func TestRegisteredPathListedInConfigTakesTheConfigContent(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "m/model.pt", exampleModel(t, "pctr_v1"))
	putConfig(t, b)
	g := startGrove(t, b.URL(), nil)
	client := sidecarpb.NewInferenceServiceClient(g.dial())
	ctx := withTimeout(t, time.Minute)
	if _, err := client.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "m/"},
		ModelFiles: map[string][]byte{"m/model.pt": exampleModel(t, "pctr_v2")}}); err != nil {
		t.Fatal(err)
	}
	_, resp, _ := g.infer(batchJSON(requestFor(exp, "pctr_v2", "m/")))
	checkOutputs(t, exp, "pctr_v2", resp, 0)
	putConfig(t, b, modelEntry{Path: "m/"})
	g.waitFor("the config's content to replace the registered one", 20*time.Second, func() bool {
		_, resp, _ := g.infer(batchJSON(requestFor(exp, "pctr_v1", "m/")))
		return matches(exp, "pctr_v1", resp, 0)
	})
	if _, err := client.DeleteModel(ctx, &sidecarpb.DeleteModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "m/"}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("deleting the now configured model: %v, want FailedPrecondition", err)
	}
}
