package it

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groveml/grove/api/oip/oippb"
)

// versionsLoad sends, from each worker in turn, the request kinds of a
// versioned entry pcvr_v/ (B&A and OIP REST and gRPC, by the entry's name
// and by version 2) until finish. It counts the answers by kind
// and the failures, and records when the entry's name first answered
// with pctr_v2's outputs (version 3) over B&A and over OIP.
type versionsLoad struct {
	mu       sync.Mutex
	answered map[string]int // kind -> answers; kind+"@v3" -> answers from version 3
	failures []string
	firstV3  map[string]time.Time
	failed   atomic.Int64
	workers
}

// versionKinds are the requests the load sends: the protocol and the name.
var versionKinds = []string{"ba pcvr_v/", "ba pcvr_v/2/", "oip pcvr_v", "oip pcvr_v/versions/2", "grpc pcvr_v", "grpc pcvr_v version 2"}

func startVersionsLoad(t *testing.T, g *grove, exp map[string]expectedModel, n int) *versionsLoad {
	l := &versionsLoad{answered: map[string]int{}, firstV3: map[string]time.Time{}}
	x := exp["pctr_v1"].Inputs[0]
	oipBody, err := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": x.Shape, "data": x.Data}}})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, len(x.Data))
	for i, v := range x.Data {
		vals[i] = float32(v)
	}
	grpcIn := []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: x.Shape, Contents: &oippb.InferTensorContents{Fp32Contents: vals}}}
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	// which tells the outputs of pctr_v1 (versions 1 and 2) from pctr_v2's (version 3).
	which := func(out []float64) string {
		for _, name := range []string{"pctr_v1", "pctr_v2"} {
			want := exp[name].Outputs[0].Data
			same := len(out) == len(want)
			for k := 0; same && k < len(want); k++ {
				same = out[k]-want[k] < 1e-5 && want[k]-out[k] < 1e-5
			}
			if same {
				return name
			}
		}
		return ""
	}
	send := func(kind string) (model, version string, err error) {
		switch kind {
		case "ba pcvr_v/", "ba pcvr_v/2/":
			code, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", strings.TrimPrefix(kind, "ba "))))
			if err != nil || code != http.StatusOK || len(resp.Response) != 1 || resp.Response[0].Error != nil || len(resp.Response[0].Tensors) == 0 {
				return "", "", fmt.Errorf("HTTP %d %+v %v", code, resp, err)
			}
			return which(resp.Response[0].Tensors[0].TensorContent), "", nil
		case "oip pcvr_v", "oip pcvr_v/versions/2":
			r, err := client.Post(g.url+"/v2/models/"+strings.TrimPrefix(kind, "oip ")+"/infer", "application/json", bytes.NewReader(oipBody))
			if err != nil {
				return "", "", err
			}
			defer r.Body.Close()
			var resp struct {
				Version string `json:"model_version"`
				Outputs []struct {
					Data []float64 `json:"data"`
				} `json:"outputs"`
			}
			if err := json.NewDecoder(r.Body).Decode(&resp); err != nil || r.StatusCode != http.StatusOK || len(resp.Outputs) == 0 {
				return "", "", fmt.Errorf("HTTP %d %+v %v", r.StatusCode, resp, err)
			}
			return which(resp.Outputs[0].Data), resp.Version, nil
		default:
			version := strings.TrimPrefix(strings.TrimPrefix(kind, "grpc pcvr_v"), " version ")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "pcvr_v", ModelVersion: version, Inputs: grpcIn})
			if err != nil || len(resp.GetRawOutputContents()) == 0 {
				return "", "", fmt.Errorf("gRPC %v %v", resp, err)
			}
			return which(fromRawLE(t, "FP32", resp.GetRawOutputContents()[0])), resp.GetModelVersion(), nil
		}
	}
	l.start(n, func(_, i int) {
		kind := versionKinds[i%len(versionKinds)]
		model, version, err := send(kind)
		pinned := strings.HasSuffix(kind, "2") || strings.HasSuffix(kind, "2/")
		// Version 2 answers with pctr_v1's outputs, and the entry's
		// name with version 2's or version 3's (OIP names it).
		switch {
		case err == nil && model == "pctr_v1" && (version == "" || version == "2"):
		case err == nil && !pinned && model == "pctr_v2" && (version == "" || version == "3"):
		default:
			if err == nil {
				err = fmt.Errorf("answered by %q, version %q", model, version)
			}
			l.failed.Add(1)
			l.mu.Lock()
			l.failures = append(l.failures, kind+": "+err.Error())
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		l.answered[kind]++
		if model == "pctr_v2" {
			l.answered[kind+"@v3"]++
			proto := strings.Fields(kind)[0]
			if _, seen := l.firstV3[proto]; !seen {
				l.firstV3[proto] = time.Now()
			}
		}
		l.mu.Unlock()
	})
	return l
}

func (l *versionsLoad) v3Answers(kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answered[kind+"@v3"]
}

// TestVersionedDirectoryGainsAVersionUnderLoad is issue 16's proof of
// versions: a versioned entry (latest 2) over pcvr_v/1/ and pcvr_v/2/
// gains version 3 while requests keep coming over B&A and OIP (REST and
// gRPC), by the entry's name and by version 2. None fails; the entry's
// name moves to version 3 once it is ready, version 2 keeps answering,
// version 1 is gone after its grace period.
//
// Budget: 10 s.
func TestVersionedDirectoryGainsAVersionUnderLoad(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	v12, v3 := exampleModel(t, "pctr_v1"), exampleModel(t, "pctr_v2")
	b.Put(t, "pcvr_v/1/model.pt", v12)
	b.Put(t, "pcvr_v/2/CHECKSUM", []byte(checksumOf(v12)+"\n"))
	b.Put(t, "pcvr_v/2/model.pt", v12)
	const graceMs = 1500
	config := fmt.Sprintf(`{"model_metadata": [{"model_path": "pcvr_v/", "version_policy": {"latest": {"num_versions": 2}},
	  "eviction_grace_period_in_ms": %d, "warm_up_batch_request_json": %q}]}`, graceMs, batchJSON(requestFor(exp, "pctr_v1", "pcvr_v/")))
	b.Put(t, "model_config.json", []byte(config))
	g := startOn(t, b)
	if code, body := g.get("/v1/models"); code != 200 || string(body) != `["pcvr_v/","pcvr_v/1/","pcvr_v/2/"]` {
		t.Fatalf("/v1/models before version 3: %d %s", code, body)
	}

	l := startVersionsLoad(t, g, exp, 6)
	time.Sleep(time.Second)
	// Version 3 is uploaded: its CHECKSUM first, then its files.
	uploaded := time.Now()
	b.Put(t, "pcvr_v/3/CHECKSUM", []byte(checksumOf(v3)+"\n"))
	b.Put(t, "pcvr_v/3/model.pt", v3)
	g.waitFor("the entry's name to answer from version 3 over B&A, REST and gRPC", 60*time.Second, func() bool {
		return l.v3Answers("ba pcvr_v/") > 20 && l.v3Answers("oip pcvr_v") > 20 && l.v3Answers("grpc pcvr_v") > 20
	})
	g.waitFor("version 1 to be gone after its grace period", 30*time.Second, func() bool {
		state, _, _ := g.status().model("pcvr_v/1/")
		return state == ""
	})
	time.Sleep(500 * time.Millisecond) // still under load
	l.finish()

	l.mu.Lock()
	answered, failures := l.answered, l.failures
	firstBA, firstOIP, firstGRPC := l.firstV3["ba"].Sub(uploaded), l.firstV3["oip"].Sub(uploaded), l.firstV3["grpc"].Sub(uploaded)
	l.mu.Unlock()
	total := 0
	for _, k := range versionKinds {
		total += answered[k]
	}
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed while version 3 arrived; first: %s", n, int64(total)+n, failures[0])
	}
	t.Logf("%d requests, none failed: %v", total, answered)
	t.Logf("version 3 from upload to first answer by the entry's name: B&A %v, OIP REST %v, OIP gRPC %v",
		firstBA.Round(time.Millisecond), firstOIP.Round(time.Millisecond), firstGRPC.Round(time.Millisecond))
	for _, k := range []string{"ba pcvr_v/2/", "oip pcvr_v/versions/2", "grpc pcvr_v version 2"} {
		if answered[k] == 0 || answered[k+"@v3"] != 0 {
			t.Errorf("%s: %d answers, %d from version 3; want version 2's only", k, answered[k], answered[k+"@v3"])
		}
	}

	// Version 1 is gone, by every name.
	code, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pcvr_v/1/")))
	if err != nil || code != 200 || errorType(resp, 0) != "MODEL_NOT_FOUND" {
		t.Errorf("B&A pcvr_v/1/ after its grace period: %d %+v %v", code, resp, err)
	}
	code, _, body := oipPost(t, g, "/v2/models/pcvr_v/versions/1/infer", []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,64],"data":[`+strings.TrimSuffix(strings.Repeat("0,", 64), ",")+`]}]}`), -1)
	if code != 404 || !strings.Contains(string(body), "Request for unknown model: 'pcvr_v' version 1 is not found") {
		t.Errorf("OIP versions/1 after its grace period: %d %s", code, body)
	}
	if code, body := g.get("/v1/models"); code != 200 || string(body) != `["pcvr_v/","pcvr_v/2/","pcvr_v/3/"]` {
		t.Errorf("/v1/models: %d %s", code, body)
	}
	if code, body := g.get("/v2/models/pcvr_v"); code != 200 || !strings.Contains(string(body), `"versions":["3","2"]`) {
		t.Errorf("OIP metadata: %d %s", code, body)
	}
	// The status lists the versions and the one the entry serves.
	_, raw := g.get("/v1/status")
	var st struct {
		Models []struct {
			Path      string `json:"model_path"`
			State     string `json:"state"`
			VersionOf string `json:"version_of"`
			Version   int64  `json:"version"`
			Checksum  string `json:"checksum"`
		} `json:"models"`
		Versioned []struct {
			Path    string  `json:"model_path"`
			Found   []int64 `json:"versions_found"`
			Serving int64   `json:"serving_version"`
		} `json:"versioned"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v %+v", st.Models, st.Versioned)
	want := fmt.Sprintf("[{Path:pcvr_v/2/ State:ready VersionOf:pcvr_v/ Version:2 Checksum:%s} {Path:pcvr_v/3/ State:ready VersionOf:pcvr_v/ Version:3 Checksum:%s}] [{Path:pcvr_v/ Found:[1 2 3] Serving:3}]",
		checksumOf(v12), checksumOf(v3))
	if got != want {
		t.Errorf("status\n got %s\nwant %s", got, want)
	}
}
