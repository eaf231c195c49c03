package it

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// expected is examples/bucket/expected.json: each model's fixed input and
// the outputs Python computed for it.
type expectedTensor struct {
	Name     string    `json:"name"`
	DataType string    `json:"datatype"`
	Shape    []int64   `json:"shape"`
	Data     []float64 `json:"data"`
}

type expectedModel struct {
	Inputs  []expectedTensor `json:"inputs"`
	Outputs []expectedTensor `json:"outputs"`
}

func loadExpected(t *testing.T) map[string]expectedModel {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]expectedModel
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func exampleModel(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", name, "model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checksumOf computes the model checksum of the seed (files in path order).
func checksumOf(files ...[]byte) string {
	var cat strings.Builder
	for _, f := range files {
		s := sha256.Sum256(f)
		cat.WriteString(hex.EncodeToString(s[:]))
	}
	s := sha256.Sum256([]byte(cat.String()))
	return hex.EncodeToString(s[:])
}

// modelEntry is one model_metadata entry.
type modelEntry struct {
	Path     string `json:"model_path"`
	Checksum string `json:"checksum,omitempty"`
	WarmUp   string `json:"warm_up_batch_request_json,omitempty"`
	GraceMs  int    `json:"eviction_grace_period_in_ms,omitempty"`
	// Serving options.
	Replicas int `json:"replicas,omitempty"`
	MaxRows  int `json:"max_batch_rows,omitempty"`
	DelayUs  int `json:"max_queue_delay_us,omitempty"`
	Threads  int `json:"intra_op_threads,omitempty"`
}

func putConfig(t *testing.T, b testBucket, entries ...modelEntry) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model_metadata": entries})
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "model_config.json", data)
}

// requestFor renders the B&A item for model name's expected input, sent to path.
func requestFor(exp map[string]expectedModel, name, path string) string {
	var tensors []string
	for _, in := range exp[name].Inputs {
		tensors = append(tensors, tensorJSON(in.DataType, in.Shape, in.Data))
	}
	return itemJSON(path, tensors...)
}

// checkOutputs fails unless item i of resp has model name's expected outputs.
func checkOutputs(t *testing.T, exp map[string]expectedModel, name string, resp baResponse, i int) {
	t.Helper()
	item := resp.Response[i]
	if item.Error != nil {
		t.Fatalf("item %d (%s): error %s: %s", i, name, item.Error.ErrorType, item.Error.Description)
	}
	want := exp[name].Outputs
	if len(item.Tensors) != len(want) {
		t.Fatalf("item %d (%s): %d output tensors, want %d", i, name, len(item.Tensors), len(want))
	}
	for j, w := range want {
		got := item.Tensors[j]
		if got.DataType != w.DataType {
			t.Errorf("item %d output %d: data_type %s, want %s", i, j, got.DataType, w.DataType)
		}
		checkClose(t, name+" output", got.TensorContent, w.Data, 1e-5)
	}
}

// matches reports whether item i of resp has model name's expected outputs.
func matches(exp map[string]expectedModel, name string, resp baResponse, i int) bool {
	if i >= len(resp.Response) || resp.Response[i].Error != nil || len(resp.Response[i].Tensors) == 0 {
		return false
	}
	got, want := resp.Response[i].Tensors[0].TensorContent, exp[name].Outputs[0].Data
	if len(got) != len(want) {
		return false
	}
	for k := range got {
		if d := got[k] - want[k]; d > 1e-5 || d < -1e-5 {
			return false
		}
	}
	return true
}

func errorType(resp baResponse, i int) string {
	if i >= len(resp.Response) || resp.Response[i].Error == nil {
		return ""
	}
	return resp.Response[i].Error.ErrorType
}

// Budget: 10 s.
func TestServesConfiguredModelsWithPythonOutputs(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	eachBucket(t, func(t *testing.T, b testBucket) {
		pctr, pcvr := exampleModel(t, "pctr_v1"), exampleModel(t, "pcvr")
		b.Put(t, "pctr_v1/model.pt", pctr)
		b.Put(t, "pcvr/model.pt", pcvr)
		putConfig(t, b,
			modelEntry{Path: "pctr_v1/", Checksum: checksumOf(pctr), WarmUp: batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))},
			modelEntry{Path: "pcvr/model.pt", Checksum: checksumOf(pcvr)})
		g := startOn(t, b)

		code, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"), requestFor(exp, "pcvr", "pcvr/model.pt")))
		if err != nil || code != http.StatusOK {
			t.Fatalf("infer: %d %v", code, err)
		}
		checkOutputs(t, exp, "pctr_v1", resp, 0)
		checkOutputs(t, exp, "pcvr", resp, 1)
		if got := resp.Response[1].Tensors[1].TensorShape; len(got) != 2 || got[0] != 3 || got[1] != 1 {
			t.Errorf("pcvr second output shape %v, want [3 1]", got)
		}

		_, body := g.get("/v1/models")
		if string(body) != `["pcvr/model.pt","pctr_v1/"]` && string(body) != `["pctr_v1/","pcvr/model.pt"]` {
			t.Errorf("/v1/models = %s", body)
		}
		st := g.status()
		if state, sum, _ := st.model("pctr_v1/"); state != "ready" || sum != checksumOf(pctr) {
			t.Errorf("status of pctr_v1/: state %q checksum %q", state, sum)
		}
	})
}

// Budget: 10 s.
func TestAddsModelListedLater(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
		putConfig(t, b, modelEntry{Path: "pctr_v1/"})
		g := startOn(t, b)

		_, resp, err := g.infer(batchJSON(requestFor(exp, "pcvr", "pcvr/")))
		if err != nil || errorType(resp, 0) != "MODEL_NOT_FOUND" {
			t.Fatalf("before it is listed, pcvr/ answered %+v %v; want MODEL_NOT_FOUND", resp, err)
		}
		b.Put(t, "pcvr/model.pt", exampleModel(t, "pcvr"))
		putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pcvr/"})
		g.waitFor("pcvr/ to be served", 20*time.Second, func() bool {
			_, resp, err := g.infer(batchJSON(requestFor(exp, "pcvr", "pcvr/")))
			return err == nil && matches(exp, "pcvr", resp, 0)
		})
		_, resp, _ = g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")))
		checkOutputs(t, exp, "pctr_v1", resp, 0)
	})
}

// Budget: 10 s.
func TestRemovedModelIsServedDuringGracePeriodThenNotFound(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
		b.Put(t, "pcvr/model.pt", exampleModel(t, "pcvr"))
		putConfig(t, b, modelEntry{Path: "pctr_v1/", GraceMs: 4000}, modelEntry{Path: "pcvr/"})
		g := startOn(t, b)

		putConfig(t, b, modelEntry{Path: "pcvr/"})
		g.waitFor("pctr_v1/ to start evicting", 10*time.Second, func() bool {
			state, _, _ := g.status().model("pctr_v1/")
			return state == "evicting"
		})
		removedAt := time.Now()
		_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")))
		if err != nil || !matches(exp, "pctr_v1", resp, 0) {
			t.Fatalf("during the grace period pctr_v1/ answered %+v %v", resp, err)
		}
		g.waitFor("pctr_v1/ to be evicted", 15*time.Second, func() bool {
			_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")))
			return err == nil && errorType(resp, 0) == "MODEL_NOT_FOUND"
		})
		if since := time.Since(removedAt); since < 2*time.Second {
			t.Errorf("evicted %v after the config change; the grace period is 4s", since)
		}
		_, resp, _ = g.infer(batchJSON(requestFor(exp, "pcvr", "pcvr/")))
		checkOutputs(t, exp, "pcvr", resp, 0)
	})
}

// load sends requests for pctr_v1/ from its workers until finish,
// counting the answers matching v1 or v2 and the failures.
type load struct {
	ok, v2, failed atomic.Int64
	firstFailure   atomic.Value
	workers
}

func startLoad(g *grove, exp map[string]expectedModel, n int) *load {
	return startObservedLoad(g, exp, n, nil)
}

// startObservedLoad is startLoad calling observe, if not nil, with the
// version (1 or 2) of each answer as it arrives.
func startObservedLoad(g *grove, exp map[string]expectedModel, n int, observe func(version int)) *load {
	l := &load{}
	body := batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))
	l.start(n, func(int, int) {
		code, resp, err := g.infer(body)
		version := 0
		switch {
		case err == nil && code == http.StatusOK && matches(exp, "pctr_v1", resp, 0):
			l.ok.Add(1)
			version = 1
		case err == nil && code == http.StatusOK && matches(exp, "pctr_v2", resp, 0):
			l.ok.Add(1)
			l.v2.Add(1)
			version = 2
		default:
			l.failed.Add(1)
			l.firstFailure.CompareAndSwap(nil, struct {
				code int
				resp baResponse
				err  error
			}{code, resp, err})
		}
		if observe != nil && version != 0 {
			observe(version)
		}
	})
	return l
}

// Budget: 20 s.
func TestInPlaceUpdateUnderLoadFailsNoRequest(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	eachBucket(t, func(t *testing.T, b testBucket) {
		v1, v2 := exampleModel(t, "pctr_v1"), exampleModel(t, "pctr_v2")
		b.Put(t, "pctr_v1/model.pt", v1)
		putConfig(t, b, modelEntry{Path: "pctr_v1/", Checksum: checksumOf(v1), GraceMs: 500,
			WarmUp: batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))})
		g := startOn(t, b)

		l := startLoad(g, exp, 8)
		time.Sleep(500 * time.Millisecond)
		b.Put(t, "pctr_v1/model.pt", v2)
		putConfig(t, b, modelEntry{Path: "pctr_v1/", Checksum: checksumOf(v2), GraceMs: 500,
			WarmUp: batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))})
		g.waitFor("the v2 content to answer", 20*time.Second, func() bool { return l.v2.Load() > 50 })
		time.Sleep(time.Second) // past the old content's grace period, still under load
		l.finish()
		if n := l.failed.Load(); n != 0 {
			t.Fatalf("%d of %d requests failed during the in-place update; first: %+v", n, n+l.ok.Load(), l.firstFailure.Load())
		}
		t.Logf("%d requests during the update, %d answered by v2, none failed", l.ok.Load(), l.v2.Load())
		if _, sum, _ := g.status().model("pctr_v1/"); sum != checksumOf(v2) {
			t.Errorf("status checksum %s, want v2's %s", sum, checksumOf(v2))
		}
	})
}

// Budget: 10 s.
func TestChecksumMismatchKeepsOldContentServing(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		v1, v2 := exampleModel(t, "pctr_v1"), exampleModel(t, "pctr_v2")
		b.Put(t, "pctr_v1/model.pt", v1)
		putConfig(t, b, modelEntry{Path: "pctr_v1/", Checksum: checksumOf(v1)})
		g := startOn(t, b)

		// The config announces v2 but the bucket still has v1's bytes... then v2's bytes under a wrong checksum.
		wrong := checksumOf(v2, v2)
		b.Put(t, "pctr_v1/model.pt", v2)
		putConfig(t, b, modelEntry{Path: "pctr_v1/", Checksum: wrong})
		g.waitFor("the checksum mismatch to show in status", 15*time.Second, func() bool {
			_, _, lastErr := g.status().model("pctr_v1/")
			return strings.Contains(lastErr, "checksum")
		})
		state, sum, lastErr := g.status().model("pctr_v1/")
		if state != "ready" || sum != checksumOf(v1) {
			t.Errorf("after a rejected update: state %q checksum %q, want ready with v1's", state, sum)
		}
		if !strings.Contains(lastErr, "expected "+wrong) || !strings.Contains(lastErr, "actual "+checksumOf(v2)) {
			t.Errorf("last_error %q does not give expected and actual checksums", lastErr)
		}
		_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")))
		if err != nil || !matches(exp, "pctr_v1", resp, 0) {
			t.Fatalf("old content does not serve after a checksum mismatch: %+v %v", resp, err)
		}
	})
}

// Budget: 10 s.
func TestCorruptModelFileFailsOnlyThatModel(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
		b.Put(t, "broken/model.pt", []byte("PK\x03\x04 this is not a TorchScript archive"))
		putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "broken/"})
		g := startOn(t, b)

		state, _, lastErr := g.status().model("broken/")
		if state != "failed" || lastErr == "" {
			t.Errorf("broken/: state %q last_error %q, want failed with an error", state, lastErr)
		}
		_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "broken/"), requestFor(exp, "pctr_v1", "pctr_v1/")))
		if err != nil || errorType(resp, 0) != "MODEL_NOT_FOUND" {
			t.Fatalf("broken/ answered %+v %v, want MODEL_NOT_FOUND", resp, err)
		}
		checkOutputs(t, exp, "pctr_v1", resp, 1)
	})
}

// Budget: 10 s.
func TestFailingWarmUpRejectsContent(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
		b.Put(t, "pcvr/model.pt", exampleModel(t, "pcvr"))
		badWarmUp := batchJSON(itemJSON("pcvr/", tensorJSON("FLOAT", []int64{1, 3}, []float64{1, 2, 3})))
		putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pcvr/", WarmUp: badWarmUp})
		g := startOn(t, b)

		state, _, lastErr := g.status().model("pcvr/")
		if state != "failed" || !strings.Contains(lastErr, "warm") {
			t.Errorf("pcvr/ with a failing warm-up: state %q last_error %q", state, lastErr)
		}
		_, resp, _ := g.infer(batchJSON(requestFor(exp, "pcvr", "pcvr/"), requestFor(exp, "pctr_v1", "pctr_v1/")))
		if errorType(resp, 0) != "MODEL_NOT_FOUND" {
			t.Errorf("pcvr/ answered %+v, want MODEL_NOT_FOUND", resp.Response[0])
		}
		checkOutputs(t, exp, "pctr_v1", resp, 1)

		// Fixing the warm-up request loads the model on a later poll.
		putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pcvr/", WarmUp: batchJSON(requestFor(exp, "pcvr", "pcvr/"))})
		g.waitFor("pcvr/ to load with a good warm-up", 20*time.Second, func() bool {
			state, _, _ := g.status().model("pcvr/")
			return state == "ready"
		})
	})
}

// Budget: 10 s.
func TestBrokenConfigKeepsPreviousConfig(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
		putConfig(t, b, modelEntry{Path: "pctr_v1/"})
		g := startOn(t, b)

		b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"`))
		g.waitFor("the broken config to be reported", 15*time.Second, func() bool { return g.status().Config.LastError != "" })
		_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")))
		if err != nil || !matches(exp, "pctr_v1", resp, 0) {
			t.Fatalf("with a broken config pctr_v1/ answered %+v %v", resp, err)
		}
		_, metrics := g.get("/metrics")
		if !strings.Contains(string(metrics), "grove_config_errors_total") {
			t.Error("/metrics has no grove_config_errors_total")
		}

		b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/", "checksumm": "x"}]}`))
		g.waitFor("the unknown field to be reported", 15*time.Second, func() bool {
			return strings.Contains(g.status().Config.LastError, "checksumm")
		})
		putConfig(t, b, modelEntry{Path: "pctr_v1/"})
		g.waitFor("a good config to clear the error", 15*time.Second, func() bool { return g.status().Config.LastError == "" })
	})
}

// Budget: 10 s.
func TestPanicInModelRestartsOnlyThatModel(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	onDir(t, func(t *testing.T, b testBucket) {
		b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
		b.Put(t, "chaos/model.faulty", []byte(`{"panic_on": 13}`))
		putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "chaos/"})
		g := startOn(t, b)

		l := startLoad(g, exp, 4)
		crash := batchJSON(itemJSON("chaos/", tensorJSON("FLOAT", []int64{1, 2}, []float64{1, 13})))
		_, resp, err := g.infer(crash)
		if err != nil || errorType(resp, 0) != "MODEL_EXECUTION" || !strings.Contains(resp.Response[0].Error.Description, "panic") {
			t.Fatalf("the panicking request answered %+v %v, want a MODEL_EXECUTION error naming the panic", resp, err)
		}
		g.waitFor("chaos/ to answer again after its restart", 10*time.Second, func() bool {
			_, resp, err := g.infer(batchJSON(itemJSON("chaos/", tensorJSON("FLOAT", []int64{1, 2}, []float64{1, 2}))))
			return err == nil && errorType(resp, 0) == "" && len(resp.Response[0].Tensors) == 1
		})
		time.Sleep(200 * time.Millisecond)
		l.finish()
		if n := l.failed.Load(); n != 0 || l.ok.Load() == 0 {
			t.Fatalf("pctr_v1/ under load while chaos/ crashed: %d ok, %d failed; first: %+v", l.ok.Load(), n, l.firstFailure.Load())
		}
		for _, m := range g.status().Models {
			if m.Path == "chaos/" && m.Crashes != 1 {
				t.Errorf("chaos/ crashes = %d, want 1", m.Crashes)
			}
		}
	})
}

// Budget: 10 s.
func TestSigtermDrainsInFlightRequestsAndExitsZero(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "slow/model.faulty", []byte(`{"delay_ms": 1500}`))
	putConfig(t, b, modelEntry{Path: "slow/"})
	g := startGrove(t, b.URL(), nil)

	type answer struct {
		code int
		resp baResponse
		err  error
	}
	// Once SIGINT arrives the listeners close at once, so a new GET
	// /readyz cannot tell readiness from a closed port. The readiness a
	// load balancer sees while grove drains is watched instead on a gRPC
	// health stream opened before the signal: it must say NOT_SERVING
	// while the in-flight request is still running.
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := healthpb.NewHealthClient(g.dial()).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The stream follows readiness every 100 ms: it may open on
	// NOT_SERVING just after /readyz turned 200.
	for {
		r, err := watch.Recv()
		if err != nil {
			t.Fatalf("gRPC health before SIGINT: %v, want SERVING", err)
		}
		if r.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	notServing := make(chan error, 1)
	go func() {
		for {
			r, err := watch.Recv()
			if err != nil {
				notServing <- err
				return
			}
			if r.Status == healthpb.HealthCheckResponse_NOT_SERVING {
				notServing <- nil
				return
			}
		}
	}()

	done := make(chan answer, 1)
	go func() {
		code, resp, err := g.infer(batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{7}))))
		done <- answer{code, resp, err}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := g.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case err := <-notServing:
		if err != nil {
			t.Errorf("gRPC health stream ended without NOT_SERVING while draining: %v", err)
		}
		a = <-done
	case a = <-done:
		t.Error("readiness still SERVING when the in-flight request was answered: not off while draining")
	}
	stopWatch()
	if a.err != nil || a.code != http.StatusOK || errorType(a.resp, 0) != "" {
		t.Fatalf("in-flight request during drain: %d %+v %v", a.code, a.resp, a.err)
	}
	select {
	case err := <-g.done:
		g.done <- err
		if err != nil {
			t.Fatalf("grove exited with %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("grove did not exit after draining")
	}
}

// TestServingOptionsChangeUnderLoadFailsNoRequest serves pctr_v1 with two
// replicas, a batching delay and two intra-op threads, then changes them in
// the config under load: the model reloads with the new options and no
// request fails. (grove runs with --pprof, whose paths must not clash with
// the contract routes.)
//
// Budget: 10 s.
func TestServingOptionsChangeUnderLoadFailsNoRequest(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	v1 := exampleModel(t, "pctr_v1")
	b.Put(t, "pctr_v1/model.pt", v1)
	entry := modelEntry{Path: "pctr_v1/", GraceMs: 500, Replicas: 2, MaxRows: 16, DelayUs: 300, Threads: 2,
		WarmUp: batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))}
	putConfig(t, b, entry)
	g := startOn(t, b, "--pprof")
	if code, body := g.get("/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(string(body), "serve") {
		t.Errorf("GET /debug/pprof/cmdline with --pprof: %d %q", code, body)
	}
	replicas := func() int {
		for _, m := range g.status().Models {
			if m.Path == "pctr_v1/" && m.State == "ready" {
				return m.Replicas
			}
		}
		return 0
	}
	if n := replicas(); n != 2 {
		t.Fatalf("status says %d replicas, want 2", n)
	}
	l := startLoad(g, exp, 8)
	time.Sleep(500 * time.Millisecond)
	entry.Replicas, entry.DelayUs, entry.Threads = 3, 0, 1
	putConfig(t, b, entry)
	g.waitFor("3 replicas", 20*time.Second, func() bool { return replicas() == 3 })
	time.Sleep(time.Second) // past the old content's grace period, still under load
	l.finish()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed while the serving options changed; first: %+v", n, n+l.ok.Load(), l.firstFailure.Load())
	}
	t.Logf("%d requests while the serving options changed, none failed", l.ok.Load())

	entry.Replicas = 65
	putConfig(t, b, entry)
	g.waitFor("the bad config to be rejected", 10*time.Second, func() bool {
		return strings.Contains(g.status().Config.LastError, "model_metadata[0].replicas: 65 is out of range 0..64")
	})
	if n := replicas(); n != 3 {
		t.Errorf("after a rejected config: %d replicas, want the previous 3", n)
	}
}
