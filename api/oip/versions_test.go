package oip

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// versioned is a Backend serving the versioned entry "pcvr/" (version 3
// newest and ready, version 2 too, version 1 failed) and the plain model
// "pctr/". Infer records the paths it is asked for and answers y = x.
type versioned struct {
	mu    sync.Mutex
	asked []string
	// answeredBy, if set, is the version path that answers for the
	// entry's path (the router's choice, which may have changed since
	// NewestVersion was asked).
	answeredBy string
}

func (f *versioned) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
	f.mu.Lock()
	f.asked = append(f.asked, reqs[0].ModelPath)
	f.mu.Unlock()
	out := reqs[0].Inputs[0]
	out.Name = "y"
	res := actors.Result{ModelPath: reqs[0].ModelPath, ContentPath: reqs[0].ModelPath, Outputs: []servables.Tensor{out}}
	if f.answeredBy != "" && reqs[0].ModelPath == "pcvr/" {
		res.ContentPath = f.answeredBy
	}
	return []actors.Result{res}, nil
}
func (*versioned) ModelPaths() []string { return []string{"pcvr/", "pcvr/2/", "pcvr/3/", "pctr/"} }
func (*versioned) NewestVersion(parent string) (string, bool) {
	if parent == "pcvr/" {
		return "pcvr/3/", true
	}
	return "", false
}
func (*versioned) ModelMetadata(string) (servables.Metadata, string, bool) {
	return servables.Metadata{Runtime: "onnx", Inputs: []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 1}}},
		Outputs: []servables.TensorSpec{{Name: "y", DType: servables.Float32, Shape: []int64{-1, 1}}}}, "", true
}
func (*versioned) ModelServing(string) (actors.ModelServing, bool) {
	return actors.ModelServing{Replicas: 1, MaxBatchRows: 1}, true
}
func (*versioned) ModelStats(string) (actors.ModelStats, bool) {
	return actors.ModelStats{Inferences: 1}, true
}
func (*versioned) Status() actors.Status {
	return actors.Status{Models: []actors.ModelStatus{
		{Path: "pcvr/1/", State: actors.StateFailed, LastError: "bad CHECKSUM", VersionOf: "pcvr/", Version: 1},
		{Path: "pcvr/2/", State: actors.StateReady, VersionOf: "pcvr/", Version: 2},
		{Path: "pcvr/3/", State: actors.StateReady, VersionOf: "pcvr/", Version: 3},
		{Path: "pctr/", State: actors.StateReady}},
		Versioned: []actors.VersionedStatus{{Path: "pcvr/", Policy: modelconfig.VersionPolicy{Kind: modelconfig.VersionsLatest, Latest: 2},
			Found: []int64{1, 2, 3}, ServingVersion: 3, ServingPath: "pcvr/3/"}}}
}
func (*versioned) Ready() bool { return true }

func (f *versioned) lastAsked() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[len(f.asked)-1]
}

func TestOIPAddressesTheVersionsOfAVersionedEntry(t *testing.T) {
	const body = `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,1],"data":[0.5]}]}`
	for _, tc := range []struct {
		url, path, version string
	}{
		{"/v2/models/pcvr/infer", "pcvr/", "3"}, // the entry's path: whichever version is newest when it runs
		{"/v2/models/pcvr/versions/3/infer", "pcvr/3/", "3"},
		{"/v2/models/pcvr/versions/2/infer", "pcvr/2/", "2"},
		{"/v2/models/pctr/infer", "pctr/", "1"},
		{"/v2/models/pctr/versions/1/infer", "pctr/", "1"},
	} {
		f := &versioned{}
		code, got := restGet(t, f, "POST", tc.url, body)
		if code != 200 {
			t.Fatalf("%s: HTTP %d %s", tc.url, code, got)
		}
		var resp struct {
			Name    string `json:"model_name"`
			Version string `json:"model_version"`
		}
		if err := json.Unmarshal([]byte(got), &resp); err != nil {
			t.Fatal(err)
		}
		if f.lastAsked() != tc.path || resp.Version != tc.version || resp.Name != strings.TrimSuffix(tc.path[:4], "/") {
			t.Errorf("%s: ran on %s, answered %+v; want %s, version %s", tc.url, f.lastAsked(), resp, tc.path, tc.version)
		}
	}
	// Versions that are not served: not found, naming the model and version.
	for _, v := range []string{"1", "4", "abc", "-1", "99999999999999999999"} {
		code, got := restGet(t, &versioned{}, "POST", "/v2/models/pcvr/versions/"+v+"/infer", body)
		if want := `{"error":"Request for unknown model: 'pcvr' version ` + v + ` is not found"}`; code != 404 || got != want {
			t.Errorf("version %s: HTTP %d %s, want 404 %s", v, code, got, want)
		}
		if code, _ := restGet(t, &versioned{}, "GET", "/v2/models/pcvr/versions/"+v+"/ready", ""); code != 503 {
			t.Errorf("version %s ready: HTTP %d", v, code)
		}
	}
	// gRPC: model_version picks the version; none, the newest.
	g := &grpcService{b: &versioned{}}
	in := []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 1},
		Contents: &oippb.InferTensorContents{Fp32Contents: []float32{0.5}}}}
	for version, want := range map[string]string{"": "3", "2": "2"} {
		resp, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "pcvr", ModelVersion: version, Inputs: in})
		if err != nil || resp.GetModelVersion() != want {
			t.Errorf("gRPC version %q: %v, %v; want version %s", version, resp.GetModelVersion(), err, want)
		}
	}
	_, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "pcvr", ModelVersion: "1", Inputs: in})
	if st := grpcstatus.Convert(err); st.Code() != codes.NotFound || st.Message() != "Request for unknown model: 'pcvr' version 1 is not found" {
		t.Errorf("gRPC version 1: %v", err)
	}
}

func TestOIPListsTheVersionsOfAVersionedEntry(t *testing.T) {
	code, got := restGet(t, &versioned{}, "GET", "/v2/models/pcvr", "")
	if code != 200 || !strings.Contains(got, `"name":"pcvr","versions":["3","2"]`) {
		t.Errorf("metadata: HTTP %d %s", code, got)
	}
	resp, err := (&grpcService{b: &versioned{}}).ModelMetadata(t.Context(), &oippb.ModelMetadataRequest{Name: "pcvr"})
	if err != nil || strings.Join(resp.GetVersions(), ",") != "3,2" {
		t.Errorf("gRPC metadata versions %v (%v)", resp.GetVersions(), err)
	}
	// Statistics of every model: each version once, not the entry's path.
	code, got = restGet(t, &versioned{}, "GET", "/v2/models/stats", "")
	var stats oippb.ModelStatisticsResponse
	if err := protojson.Unmarshal([]byte(got), &stats); code != 200 || err != nil {
		t.Fatalf("stats: HTTP %d %s (%v)", code, got, err)
	}
	var listed []string
	for _, m := range stats.GetModelStats() {
		listed = append(listed, m.GetName()+"@"+m.GetVersion())
	}
	if strings.Join(listed, ",") != "pcvr@2,pcvr@3,pctr@1" {
		t.Errorf("stats of %v", listed)
	}
	code, got = restGet(t, &versioned{}, "POST", "/v2/repository/index", "{}")
	want := `[{"name":"pcvr","version":"1","state":"UNAVAILABLE","reason":"bad CHECKSUM"},{"name":"pcvr","version":"2","state":"READY"},{"name":"pcvr","version":"3","state":"READY"},{"name":"pctr","version":"1","state":"READY"}]`
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(got)); err != nil {
		t.Fatal(err)
	}
	if code != 200 || compact.String() != want {
		t.Errorf("repository index: HTTP %d\n got %s\nwant %s", code, compact.String(), want)
	}
}

func TestOIPModelConfigOfAVersionedEntryHasItsVersionPolicy(t *testing.T) {
	for url, want := range map[string]string{
		"/v2/models/pcvr/config":            `"version_policy":{"latest":{"num_versions":2}}`,
		"/v2/models/pcvr/versions/2/config": `"version_policy":{"latest":{"num_versions":2}}`,
		"/v2/models/pctr/config":            `"version_policy":{"all":{}}`,
	} {
		code, got := restGet(t, &versioned{}, "GET", url, "")
		if code != 200 || !strings.Contains(got, want) {
			t.Errorf("%s: HTTP %d, want %s in %s", url, code, want, got)
		}
	}
	if got := versionPolicy(modelconfig.VersionPolicy{Kind: modelconfig.VersionsSpecific, Versions: []int64{1, 3}}); fmt.Sprint(got.GetSpecific().GetVersions()) != "[1 3]" {
		t.Errorf("specific: %v", got)
	}
	if got := versionPolicy(modelconfig.VersionPolicy{Kind: modelconfig.VersionsAll}); got.GetAll() == nil {
		t.Errorf("all: %v", got)
	}
}

// The version an answer names is the one that ran the request: between
// resolving the entry's name (version 3 newest) and routing the request,
// the entry may have moved to another version.
func TestOIPNamesTheVersionThatAnswered(t *testing.T) {
	body := `{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0.5]}]}`
	code, got := restGet(t, &versioned{answeredBy: "pcvr/2/"}, "POST", "/v2/models/pcvr/infer", body)
	if code != 200 || !strings.Contains(got, `"model_version":"2"`) {
		t.Errorf("REST: HTTP %d %s, want model_version 2", code, got)
	}
	g := &grpcService{b: &versioned{answeredBy: "pcvr/2/"}}
	in := []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 1},
		Contents: &oippb.InferTensorContents{Fp32Contents: []float32{0.5}}}}
	resp, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "pcvr", Inputs: in})
	if err != nil || resp.GetModelVersion() != "2" {
		t.Errorf("gRPC: version %q, %v; want 2", resp.GetModelVersion(), err)
	}
}

// keptVersion is versioned with version 1 out of its policy past its
// grace period and kept loaded out of service (keep_previous_for), as
// actors' status shows it: evicting, with a kept content, served by no
// path.
type keptVersion struct{ versioned }

func (*keptVersion) Status() actors.Status {
	st := (&versioned{}).Status()
	st.Models[0] = actors.ModelStatus{Path: "pcvr/1/", State: actors.StateEvicting, VersionOf: "pcvr/", Version: 1,
		Kept: &actors.KeptStatus{Checksum: "c1", SizeBytes: 1 << 20}}
	return st
}

func TestOIPRepositoryIndexDoesNotListAKeptVersionReady(t *testing.T) {
	for _, ready := range []bool{false, true} {
		code, got := restGet(t, &keptVersion{}, "POST", "/v2/repository/index", fmt.Sprintf(`{"ready": %v}`, ready))
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(got)); code != 200 || err != nil {
			t.Fatalf("HTTP %d %s (%v)", code, got, err)
		}
		got = compact.String()
		if strings.Contains(got, `"name":"pcvr","version":"1"`) {
			t.Errorf("ready %v: version 1 answers no request (kept out of service), yet the index lists it: %s", ready, got)
		}
		if !strings.Contains(got, `"version":"3","state":"READY"`) {
			t.Errorf("ready %v: %s", ready, got)
		}
	}
	if code, got := restGet(t, &keptVersion{}, "GET", "/v2/models/pcvr/versions/1/ready", ""); code == 200 {
		t.Errorf("version 1 ready: HTTP %d %s", code, got)
	}
}
