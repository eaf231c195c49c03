package it

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Budget: 15 s.
func TestBadInputGetsClearErrorsAndServerKeepsServing(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	putConfig(t, b, modelEntry{Path: "pctr_v1/"})
	g := startGrove(t, b.URL(), nil, "--max-body-bytes", "100000")

	for _, tc := range []struct {
		name, body string
		code       int
		errType    string
		contains   string
	}{
		{"malformed JSON", `{"request":[`, 400, "INPUT_PARSING", "JSON Parse Error"},
		{"not a batch", `[1,2]`, 400, "INPUT_PARSING", "Missing request"},
		{"body over the limit", `{"request":[],"pad":"` + strings.Repeat("x", 100001) + `"}`, 413, "INPUT_PARSING", "limit"},
		{"zero dimension", batchJSON(itemJSON("pctr_v1/", `{"data_type":"FLOAT","tensor_shape":[0,64],"tensor_content":[]}`)), 200, "INPUT_PARSING", "greater than 0"},
		{"negative dimension", batchJSON(itemJSON("pctr_v1/", `{"data_type":"FLOAT","tensor_shape":[-1],"tensor_content":["1"]}`)), 200, "INPUT_PARSING", "greater than 0"},
		{"shape product overflow", batchJSON(itemJSON("pctr_v1/", `{"data_type":"FLOAT","tensor_shape":[4294967296,4294967296,4294967296],"tensor_content":["1"]}`)), 200, "INPUT_PARSING", ""},
		{"content does not fill the shape", batchJSON(itemJSON("pctr_v1/", `{"data_type":"FLOAT","tensor_shape":[2,64],"tensor_content":["1"]}`)), 200, "INPUT_PARSING", "Mismatch"},
		{"unknown dtype", batchJSON(itemJSON("pctr_v1/", `{"data_type":"float","tensor_shape":[1],"tensor_content":["1"]}`)), 200, "INPUT_PARSING", "data_type"},
		{"value out of range", batchJSON(itemJSON("pctr_v1/", `{"data_type":"INT8","tensor_shape":[1],"tensor_content":["300"]}`)), 200, "INPUT_PARSING", "int8"},
		{"wrong shape for the model", batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", []int64{1, 3}, []float64{1, 2, 3}))), 200, "", ""},
		{"unknown model", batchJSON(itemJSON("nope/", tensorJSON("FLOAT", []int64{1}, []float64{1}))), 200, "MODEL_NOT_FOUND", "nope/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, resp, err := g.infer(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("HTTP %d, want %d", code, tc.code)
			}
			if len(resp.Response) == 0 || resp.Response[0].Error == nil {
				t.Fatalf("no error in %+v", resp)
			}
			e := resp.Response[0].Error
			if tc.errType != "" && e.ErrorType != tc.errType {
				t.Errorf("error_type %s (%s), want %s", e.ErrorType, e.Description, tc.errType)
			}
			if !strings.Contains(e.Description, tc.contains) {
				t.Errorf("description %q does not mention %q", e.Description, tc.contains)
			}
		})
	}
	_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")))
	if err != nil || !matches(exp, "pctr_v1", resp, 0) {
		t.Fatalf("after bad input pctr_v1/ answered %+v %v", resp, err)
	}
}

// Budget: 10 s.
func TestUnloadableModelsAreRejectedWithReasons(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "tf/saved_model.pb", []byte("not really a graph"))
	b.Put(t, "tf/variables/variables.index", []byte("x"))
	b.Put(t, "big/model.pt", make([]byte, 300_000))
	b.Put(t, "txt/notes.txt", []byte("hello"))
	putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "tf/"}, modelEntry{Path: "big/"}, modelEntry{Path: "txt/"}, modelEntry{Path: "missing/"})
	g := startGrove(t, b.URL(), nil, "--max-model-bytes", "250000")

	st := g.status()
	for path, want := range map[string]string{
		"tf/":      "TensorFlow runtime not available in this build",
		"big/":     "250000",
		"txt/":     "no runtime",
		"missing/": "no objects",
	} {
		state, _, lastErr := st.model(path)
		if state != "failed" || !strings.Contains(lastErr, want) {
			t.Errorf("%s: state %q, last_error %q; want failed mentioning %q", path, state, lastErr, want)
		}
	}
	if state, _, _ := st.model("pctr_v1/"); state != "ready" {
		t.Errorf("pctr_v1/ is %q next to the failed models, want ready", state)
	}
	code, _ := g.get("/readyz")
	if code != http.StatusOK {
		t.Errorf("/readyz = %d with some models failed; readiness means the first reconcile finished", code)
	}
}

// Budget: 25 s.
func TestChecksumCommandMatchesTheSeedPipeline(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"examples/bucket/pctr_v1/", "examples/bucket/pcvr/model.pt", "examples/bucket"} {
		path := filepath.Join(repoRoot(), p)
		pipeline := exec.Command("bash", "-c", `find "$1" -type f -exec sha256sum {} \; | sort -k 2 | awk '{print $1}' | tr -d '\n' | sha256sum | awk '{print $1}'`, "_", path)
		pipeline.Env = append(pipeline.Environ(), "LC_ALL=C")
		want, err := pipeline.Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(groveBin, "checksum", path).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("grove checksum %s = %s, the seed's pipeline gives %s", p, got, want)
		}
	}
}

// Budget: 15 s.
func TestFullModelQueueFailsFastWith429(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "slow/model.faulty", []byte(`{"delay_ms": 300}`))
	putConfig(t, b, modelEntry{Path: "slow/"})
	g := startGrove(t, b.URL(), nil, "--model-queue-size", "2")

	body := batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1})))
	type answer struct {
		code int
		resp baResponse
		took time.Duration
	}
	answers := make(chan answer, 8)
	send := func() {
		start := time.Now()
		code, resp, _ := g.infer(body)
		answers <- answer{code, resp, time.Since(start)}
	}
	// The first request runs before the others arrive: a request counts
	// against the queue until the model actor takes it, so one not taken
	// yet would leave a single place for the others.
	go send()
	g.waitFor("the first request running", 10*time.Second, func() bool {
		return g.metricValue("grove_model_inflight", `{model="slow/"}`) == 1 && g.metricValue("grove_model_queue_depth", `{model="slow/"}`) == 0
	})
	for range 7 {
		go send()
	}
	// A refusal is fast: it comes before the one request running (300 ms)
	// could have finished and freed a place.
	const fast = 300 * time.Millisecond
	ok, overloaded := 0, 0
	for range 8 {
		a := <-answers
		switch {
		case a.code == http.StatusOK && errorType(a.resp, 0) == "":
			ok++
		case a.code == http.StatusTooManyRequests && strings.Contains(a.resp.Response[0].Error.Description, "overloaded"):
			overloaded++
			if a.took >= fast {
				t.Errorf("refused as overloaded after %v, want at once (under %v, the model's delay)", a.took, fast)
			}
		default:
			t.Errorf("unexpected answer %d %+v", a.code, a.resp)
		}
	}
	// One request runs and two wait; the other five are refused at once.
	if ok < 3 || overloaded == 0 || ok+overloaded != 8 {
		t.Errorf("%d served, %d refused as overloaded; want 3 served and the rest refused", ok, overloaded)
	}
}
