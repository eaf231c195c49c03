package it

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/metadata"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/tracing/tracingtest"
)

// pctrBucket is a bucket serving examples' pctr_v1 alone.
func pctrBucket(t *testing.T) *dirBucket {
	t.Helper()
	model, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_v1", "model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", model)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}]}`))
	return b
}

// TestTracesExportedOverOTLP runs the grove binary with
// OTEL_EXPORTER_OTLP_ENDPOINT naming an OTLP/HTTP receiver in the test,
// calls it over B&A (HTTP and the sidecar's gRPC) and OIP (gRPC) with a
// caller's traceparent, stops it, and checks the span trees that reached
// the receiver: the spans the batch processor still held are exported at
// shutdown.
//
// Budget: 10 s.
func TestTracesExportedOverOTLP(t *testing.T) {
	t.Parallel()
	b := pctrBucket(t)
	rcv := tracingtest.HTTP(t)
	// A long export delay: nothing is exported before the shutdown.
	g := startGrove(t, b.URL(), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint, "OTEL_SERVICE_NAME=grove-it",
		"OTEL_BSP_SCHEDULE_DELAY=600000", "OTEL_TRACES_SAMPLER=parentbased_always_off"})
	if !strings.Contains(g.logs.String(), `"tracing on"`) && !strings.Contains(g.logs.String(), "tracing on") {
		t.Errorf("no 'tracing on' log line")
	}

	const httpTrace, grpcTrace, callerSpan = "11111111111111111111111111111111", "22222222222222222222222222222222", "00f067aa0ba902b7"
	body := batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", []int64{2, 64}, make([]float64, 128))))
	req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/inference", strings.NewReader(body))
	req.Header.Set("traceparent", "00-"+httpTrace+"-"+callerSpan+"-01")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	// Not sampled by the caller (and the root sampler is always_off): no spans.
	req, _ = http.NewRequest(http.MethodPost, g.url+"/v1/inference", strings.NewReader(body))
	req.Header.Set("traceparent", "00-33333333333333333333333333333333-"+callerSpan+"-00")
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("unsampled call: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	ctx := metadata.AppendToOutgoingContext(withTimeout(t, time.Minute), "traceparent", "00-"+grpcTrace+"-"+callerSpan+"-01")
	if _, err := oippb.NewGRPCInferenceServiceClient(g.dial()).ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "pctr_v1",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 64},
			Contents: &oippb.InferTensorContents{Fp32Contents: make([]float32, 64)}}}}); err != nil {
		t.Fatal(err)
	}
	const sidecarTrace = "44444444444444444444444444444444"
	ctx = metadata.AppendToOutgoingContext(withTimeout(t, time.Minute), "traceparent", "00-"+sidecarTrace+"-"+callerSpan+"-01")
	if resp, err := sidecarpb.NewInferenceServiceClient(g.dial()).Predict(ctx, &sidecarpb.PredictRequest{
		InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}}); err != nil || !strings.Contains(string(resp.GetOutput()), "tensor_content") {
		t.Fatalf("sidecar Predict: %v %s", err, resp.GetOutput())
	}
	time.Sleep(200 * time.Millisecond) // nothing is exported before the shutdown
	if n := len(rcv.Spans()); n != 0 {
		t.Errorf("%d spans exported before the shutdown with a 10-minute export delay", n)
	}
	if err := g.stop(); err != nil {
		t.Fatalf("grove exit: %v", err)
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []tracingtest.Span) bool {
		return len(tracingtest.Trace(s, httpTrace)) >= 5 && len(tracingtest.Trace(s, grpcTrace)) >= 5 && len(tracingtest.Trace(s, sidecarTrace)) >= 5
	})
	if n := len(tracingtest.Trace(spans, "33333333333333333333333333333333")); n != 0 {
		t.Errorf("%d spans of a trace the caller did not sample", n)
	}
	check := func(traceID, server string, want ...string) {
		tr := tracingtest.Trace(spans, traceID)
		srv := tracingtest.Named(tr, server)
		if len(srv) != 1 || srv[0].ParentID != callerSpan || srv[0].Kind != tracepb.Span_SPAN_KIND_SERVER || srv[0].Service != "grove-it" {
			t.Fatalf("no server span %q continuing the caller's span:\n%s", server, tracingtest.Tree(tr))
		}
		for _, name := range want {
			s := tracingtest.Named(tr, name)
			if len(s) != 1 || s[0].ParentID != srv[0].SpanID {
				t.Errorf("%s: want one %q span, child of the server span:\n%s", server, name, tracingtest.Tree(tr))
			}
		}
		if bs := tracingtest.Named(tr, "batch"); len(bs) == 1 && (bs[0].Attrs["grove.model.path"] != "pctr_v1/" || bs[0].Attrs["grove.outcome"] != "ok" || bs[0].Attrs["grove.batch.rows"] == "") {
			t.Errorf("%s: batch span attributes %v", server, bs[0].Attrs)
		}
	}
	check(httpTrace, "POST /v1/inference", "decode", "queue", "batch", "encode")
	check(grpcTrace, "inference.GRPCInferenceService/ModelInfer", "decode", "queue", "batch", "encode")
	check(sidecarTrace, "privacy_sandbox.bidding_auction_servers.inference.InferenceService/Predict", "decode", "queue", "batch", "encode")
}

// TestTraceContinuesAcrossAClusterForward runs two cluster nodes, each
// exporting to the test's OTLP receiver, with one model of one copy: the
// node without it forwards, and the serving node continues the trace
// under the forward span.
//
// Budget: 15 s.
func TestTraceContinuesAcrossAClusterForward(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putClusterModels(t, b, []clusterModel{{"pctr_v1/", "pctr_v1/model.pt", "pctr_v1", true, 1}})
	rcv := tracingtest.HTTP(t)
	etcd := etcdtest.Start(t)
	nodes := map[string]*grove{}
	for _, name := range []string{"node-a", "node-b"} {
		nodes[name] = startGrove(t, b.URL(), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint, "OTEL_SERVICE_NAME=" + name},
			"--cluster-etcd-endpoints", etcd.Addr, "--cluster-node-name", name, "--cluster-advertise", freeAddr(t),
			"--cluster-lease-ttl", clusterLeaseTTL.String(), "--memory-budget-bytes", "4000000000", "--insecure-no-auth")
	}
	body := batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", []int64{1, 64}, make([]float64, 64))))
	served := func(g *grove) bool {
		code, out, err := g.infer(body)
		return err == nil && code == http.StatusOK && len(out.Response) == 1 && out.Response[0].Error == nil
	}
	for _, g := range nodes {
		g.waitFor("pctr_v1 served through the cluster", time.Minute, func() bool { return served(g) })
	}
	traces := map[string]string{"node-a": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "node-b": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	const callerSpan = "00f067aa0ba902b7"
	for name, g := range nodes {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/inference", strings.NewReader(body))
		req.Header.Set("traceparent", "00-"+traces[name]+"-"+callerSpan+"-01")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", name, resp.StatusCode)
		}
	}
	for _, g := range nodes {
		if err := g.stop(); err != nil {
			t.Fatalf("grove exit: %v", err)
		}
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []tracingtest.Span) bool {
		return len(tracingtest.Named(tracingtest.Trace(s, traces["node-a"]), "POST /v1/inference")) == 1 &&
			len(tracingtest.Named(tracingtest.Trace(s, traces["node-b"]), "POST /v1/inference")) == 1 &&
			len(tracingtest.Named(s, "grove.cluster.v1.Forward/Predict")) >= 1
	})
	forwarded := 0
	for name, id := range traces {
		tr := tracingtest.Trace(spans, id)
		fw := tracingtest.Named(tr, "forward")
		if len(fw) == 0 {
			continue // this node serves the model itself
		}
		forwarded++
		srv := tracingtest.Named(tr, "POST /v1/inference")[0]
		remote := tracingtest.Named(tr, "grove.cluster.v1.Forward/Predict")
		if len(fw) != 1 || fw[0].ParentID != srv.SpanID || fw[0].Service != name || fw[0].Attrs["grove.outcome"] != "ok" {
			t.Fatalf("%s: the forward span is not the server span's child:\n%s", name, tracingtest.Tree(tr))
		}
		if len(remote) != 1 || remote[0].ParentID != fw[0].SpanID || remote[0].Service == name || remote[0].Kind != tracepb.Span_SPAN_KIND_SERVER ||
			fw[0].Attrs["grove.cluster.node"] != remote[0].Service {
			t.Fatalf("%s: the serving node does not continue the trace under the forward span:\n%s", name, tracingtest.Tree(tr))
		}
		for _, child := range []string{"queue", "batch"} {
			if s := tracingtest.Named(tr, child); len(s) != 1 || s[0].ParentID != remote[0].SpanID || s[0].Service != remote[0].Service {
				t.Errorf("%s: want one %s span on the serving node, child of its server span:\n%s", name, child, tracingtest.Tree(tr))
			}
		}
	}
	if forwarded != 1 {
		t.Fatalf("%d nodes forwarded, want 1:\n%s", forwarded, tracingtest.Tree(spans))
	}
}

// TestTraceExportFailuresAreLogged points grove at an OTLP endpoint where
// nothing listens: requests are answered as usual, and the failed exports
// are logged as warnings.
//
// Budget: 10 s.
func TestTraceExportFailuresAreLogged(t *testing.T) {
	t.Parallel()
	b := pctrBucket(t)
	g := startGrove(t, b.URL(), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + freeAddr(t), "OTEL_EXPORTER_OTLP_TIMEOUT=300",
		"OTEL_BSP_SCHEDULE_DELAY=50"})
	code, out, err := g.infer(batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", []int64{1, 64}, make([]float64, 64)))))
	if err != nil || code != http.StatusOK || len(out.Response) != 1 || out.Response[0].Error != nil {
		t.Fatalf("HTTP %d %+v: %v", code, out, err)
	}
	g.waitFor("the failed export logged", 20*time.Second, func() bool {
		return strings.Contains(g.logs.String(), "tracing: exporting spans")
	})
}
