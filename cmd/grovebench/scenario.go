package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The servers under test. serverGroveLog is a second grove instance that
// logs every prediction (level FULL) to an embedded Kafka broker;
// serverGroveNoBatch a third one with dynamic batching off
// (--max-batch-rows 1); serverGroveNetHTTP one like the plain instance with
// --http-engine net/http, REST /v1/inference on Go's net/http server
// instead of the default's (http_engine auto: Grove's own h1 server on a
// plaintext listener, as grovebench's); serverGroveGRPC is the plain grove instance over OIP
// gRPC and serverGroveONNX the plain instance's ONNX copy of the model
// (pctr_onnx/, the same weights), over POST /v1/inference. serverFloor and
// serverFloorGRPC are the transport floor (floor.go): no model, a fixed
// answer, over HTTP and gRPC; serverFloorFwd the HTTP floor through a
// grpc-go proxy process (floor.go): what grove-fwd's hop would cost over gRPC.
// serverGroveDeep and serverGroveDeepNoBatch
// are grove and grove-nobatch serving the deep ranking model (deepPath),
// whose forward, unlike pctr's, costs more than the request carrying it.
const (
	serverGrove            = "grove"
	serverGroveNetHTTP     = "grove-nethttp"
	serverGroveGRPC        = "grove-grpc"
	serverGroveONNX        = "grove-onnx"
	serverGroveNoBatch     = "grove-nobatch"
	serverGroveLog         = "grove+log"
	serverGroveDeep        = "grove-deep"
	serverGroveDeepNoBatch = "grove-deep-nobatch"
	serverDirect           = "direct"
	serverFloor            = "floor"
	serverFloorGRPC        = "floor-grpc"
	serverFloorFwd         = "floor-fwd"
	serverBaseline         = "baseline"
)

// serverOrder is the order of the rows of one shape: the variants right
// after the plain grove row they are compared with.
var serverOrder = []string{serverGrove, serverGroveNetHTTP, serverGroveGRPC, serverGroveONNX, serverGroveNoBatch, serverGroveDeep, serverGroveDeepNoBatch,
	serverGroveLog, serverGroveEval, serverGroveTLS, serverGroveLocal, serverGroveFwd, serverDirect, serverFloor, serverFloorGRPC, serverFloorFwd, serverBaseline}

// knownServer says whether s names a server of --scenarios.
func knownServer(s string) bool { return slices.Contains(serverOrder, s) }

// onnxPath is the ONNX copy of the benchmark model in the bucket.
const onnxPath = "pctr_onnx/"

// deepPath is the dynamic-batching benchmark model (examples/bench) in the
// bucket: ~0.35 ms per forward at batch 1, ~1.7 ms at batch 64.
const deepPath = "rank_deep/"

// serverLabel is a server's name in the table.
func serverLabel(server string) string {
	switch server {
	case serverGroveLog:
		return "grove+log FULL"
	case serverGroveEval:
		return "grove+eval FULL"
	case serverGroveTLS:
		return "grove TLS+token"
	}
	return server
}

// defaultShapes are the scenarios run for grove and the baseline unless
// --scenarios says otherwise; predLogShapes those of grove+log and
// grpcShapes those of grove-grpc.
var (
	defaultShapes = []string{"b1c1", "b1c8", "b1c32", "b64c8"}
	predLogShapes = []string{"b1c32"}
	grpcShapes    = []string{"b1c1", "b1c32", "b64c8"}
	onnxShapes    = []string{"b1c1", "b1c32", "b64c8"}
	floorShapes   = []string{"b1c1", "b1c32"}
	// directShapes are where grove is compared with the direct server
	// (direct.go): what the actor layer costs.
	directShapes = []string{"b1c1", "b1c32"}
	// netHTTPShapes are grove-nethttp's: where it is compared with grove
	// and the floor, also interleaved (cpuab.go).
	netHTTPShapes = []string{"b1c1", "b1c32"}
	// batchingShape is where batching on and off are compared (target: 3x).
	batchingShape = "b1c64"
)

// defaultShapesOf is server's default scenarios ("" for grove and the baseline).
func defaultShapesOf(server string) []string {
	switch server {
	case serverGroveLog, serverGroveEval:
		return predLogShapes
	case serverGroveTLS:
		return tlsShapes
	case serverGroveLocal, serverGroveFwd, serverFloorFwd:
		return clusterShapes
	case serverGroveGRPC:
		return grpcShapes
	case serverGroveONNX:
		return onnxShapes
	case serverGroveNetHTTP:
		return netHTTPShapes
	case serverGroveNoBatch, serverGroveDeep, serverGroveDeepNoBatch:
		return []string{batchingShape}
	case serverFloor, serverFloorGRPC:
		return floorShapes
	case serverDirect:
		return directShapes
	}
	return defaultShapes
}

// defaultSpec is the default of --scenarios.
func defaultSpec() string {
	spec := strings.Join(defaultShapes, ",")
	for _, s := range netHTTPShapes {
		spec += "," + serverGroveNetHTTP + "/" + s
	}
	for _, s := range grpcShapes {
		spec += "," + serverGroveGRPC + "/" + s
	}
	for _, s := range onnxShapes {
		spec += "," + serverGroveONNX + "/" + s
	}
	spec += "," + serverGrove + "/" + batchingShape + "," + serverGroveNoBatch + "/" + batchingShape
	spec += "," + serverGroveDeep + "/" + batchingShape + "," + serverGroveDeepNoBatch + "/" + batchingShape
	for _, s := range predLogShapes {
		spec += "," + serverGroveLog + "/" + s + "," + serverGroveEval + "/" + s
	}
	for _, s := range tlsShapes {
		spec += "," + serverGroveTLS + "/" + s
	}
	for _, s := range clusterShapes {
		spec += "," + serverGroveLocal + "/" + s + "," + serverGroveFwd + "/" + s + "," + serverFloorFwd + "/" + s
	}
	for _, s := range directShapes {
		spec += "," + serverDirect + "/" + s
	}
	for _, s := range floorShapes {
		spec += "," + serverFloor + "/" + s + "," + serverFloorGRPC + "/" + s
	}
	return spec
}

// scenario is one measured configuration: a server, the rows per request
// and the number of concurrent closed-loop clients.
type scenario struct {
	Server string `json:"server"`
	Batch  int    `json:"batch"`
	Conc   int    `json:"concurrency"`
}

var shapeRE = regexp.MustCompile(`^b([0-9]+)c([0-9]+)$`)

// parseScenarios parses the --scenarios flag: comma-separated entries, each
// "bNcM" (grove and the baseline), "grove/bNcM", "baseline/bNcM" or
// "grove+log/bNcM" (one server), or "grove" / "baseline" / "grove+log"
// alone (that server's default scenarios; "all" is grove's and the
// baseline's). The result is ordered by shape in order of first appearance,
// then grove, grove+log, baseline, so the rows of one shape run and print
// next to each other.
func parseScenarios(spec string) ([]scenario, error) {
	type shape struct{ batch, conc int }
	var shapes []shape
	want := map[shape]map[string]bool{}
	add := func(server, s string) error {
		m := shapeRE.FindStringSubmatch(s)
		if m == nil {
			return fmt.Errorf("bad scenario %q: want bNcM, e.g. b1c8 for batch 1 at concurrency 8", s)
		}
		b, err1 := strconv.Atoi(m[1])
		c, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || b < 1 || c < 1 || b > 100000 || c > 10000 {
			return fmt.Errorf("bad scenario %q: batch and concurrency must be positive (and sane)", s)
		}
		k := shape{b, c}
		if want[k] == nil {
			want[k] = map[string]bool{}
			shapes = append(shapes, k)
		}
		if server == "" {
			want[k][serverGrove], want[k][serverBaseline] = true, true
		} else {
			want[k][server] = true
		}
		return nil
	}
	for _, e := range strings.Split(spec, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		server, s, found := strings.Cut(e, "/")
		if !found {
			server, s = "", e
			if knownServer(e) || e == "all" {
				server, s = e, ""
			}
		}
		if server == "all" {
			server = ""
		}
		if server != "" && !knownServer(server) {
			return nil, fmt.Errorf("bad scenario %q: unknown server %q (want one of %s)", e, server, strings.Join(serverOrder, ", "))
		}
		if s == "" {
			for _, d := range defaultShapesOf(server) {
				if err := add(server, d); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(server, s); err != nil {
			return nil, err
		}
	}
	var out []scenario
	for _, k := range shapes {
		for _, server := range serverOrder {
			if want[k][server] {
				out = append(out, scenario{Server: server, Batch: k.batch, Conc: k.conc})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenarios in %q", spec)
	}
	return out, nil
}

// withoutServer returns scenarios less those of server.
func withoutServer(scenarios []scenario, server string) []scenario {
	var out []scenario
	for _, s := range scenarios {
		if s.Server != server {
			out = append(out, s)
		}
	}
	return out
}

// endpoint is how to talk to one running server.
type endpoint struct {
	server  string
	api     string // e.g. "POST /v1/inference", for the table
	baseURL string // http://127.0.0.1:PORT
	url     string // the inference URL
	// body renders a request of batch copies of row.
	body func(row []float64, batch int) []byte
	// rowsBody renders a request of the given rows (for the check request).
	rowsBody func(rows [][]float64) []byte
	// outputs extracts the per-row outputs from a response body.
	outputs func(body []byte) ([]float64, error)
	// okMarker must appear in a successful response body; errMarker must not.
	okMarker, errMarker []byte
	// grpc, if set, is the gRPC target the load goes to instead of url;
	// grpcAddr is a grove instance's gRPC listen address.
	grpc     *grpcTarget
	grpcAddr string
	// pid is the server's process, for its CPU use (0: unknown).
	pid int
	// tlsConf, if set, is the client TLS configuration of an https URL;
	// headers are extra request header lines (the bearer token).
	tlsConf *tls.Config
	headers []string
}

func groveEndpoint(baseURL string) *endpoint {
	return groveEndpointFor(serverGrove, baseURL)
}

// groveEndpointFor is grove's endpoint for a grove instance named server
// (serverGrove or serverGroveLog).
func groveEndpointFor(server, baseURL string) *endpoint {
	return &endpoint{
		server: server, api: "POST /v1/inference", baseURL: baseURL, url: baseURL + "/v1/inference",
		body:      func(row []float64, batch int) []byte { return groveBody(repeat(row, batch)) },
		rowsBody:  groveBody,
		outputs:   groveOutputs,
		okMarker:  []byte(`"tensors"`),
		errMarker: []byte(`"error_type"`),
	}
}

// netHTTPAPI is grove-nethttp's API column: REST on Go's net/http server.
const netHTTPAPI = "POST /v1/inference (net/http server)"

// netHTTPArgs are grove-nethttp's extra grove serve arguments:
// --grove-args, as the plain grove gets them, then --http-engine net/http
// (last, so that it holds over an --http-engine in --grove-args).
func netHTTPArgs(groveArgs []string) []string {
	return append(append([]string{}, groveArgs...), "--http-engine", "net/http")
}

func baselineEndpoint(baseURL string) *endpoint {
	return &endpoint{
		server: serverBaseline, api: "POST /predict", baseURL: baseURL, url: baseURL + "/predict",
		body:     func(row []float64, batch int) []byte { return baselineBody(repeat(row, batch)) },
		rowsBody: baselineBody,
		outputs:  baselineOutputs,
		okMarker: []byte(`"outputs"`),
	}
}

func repeat(row []float64, n int) [][]float64 {
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = row
	}
	return rows
}

// fmtNum renders a float exactly (shortest round-trip form), as both servers get it.
func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// groveBody renders a B&A batch request: one pctr_v1 item with one FLOAT
// tensor of shape [len(rows), 64], numbers as strings.
func groveBody(rows [][]float64) []byte { return groveBodyFor(modelPath, rows) }

// groveBodyFor is groveBody for the model at path.
func groveBodyFor(path string, rows [][]float64) []byte {
	var b bytes.Buffer
	width := 0
	if len(rows) > 0 {
		width = len(rows[0])
	}
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"data_type":"FLOAT","tensor_shape":[%d,%d],"tensor_content":[`,
		path, len(rows), width)
	first := true
	for _, r := range rows {
		for _, v := range r {
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteByte('"')
			b.WriteString(fmtNum(v))
			b.WriteByte('"')
		}
	}
	b.WriteString("]}]}]}")
	return b.Bytes()
}

// baselineBody renders the baseline's request: {"inputs": [[64 floats], ...]}.
func baselineBody(rows [][]float64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"inputs":[`)
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j, v := range r {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(fmtNum(v))
		}
		b.WriteByte(']')
	}
	b.WriteString("]}")
	return b.Bytes()
}

// groveOutputs extracts the first tensor of the first response item.
func groveOutputs(body []byte) ([]float64, error) {
	var r struct {
		Response []struct {
			Tensors []struct {
				TensorContent []json.RawMessage `json:"tensor_content"`
			} `json:"tensors"`
			Error json.RawMessage `json:"error"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	if len(r.Response) != 1 {
		return nil, fmt.Errorf("%d response items, want 1", len(r.Response))
	}
	item := r.Response[0]
	if len(item.Error) > 0 && string(item.Error) != "null" {
		return nil, fmt.Errorf("error item: %s", item.Error)
	}
	if len(item.Tensors) == 0 {
		return nil, fmt.Errorf("no tensors in the response item")
	}
	var out []float64
	for _, raw := range item.Tensors[0].TensorContent {
		// Numbers, or numbers in strings as in requests: accept both.
		s := strings.Trim(string(raw), `"`)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("tensor_content value %s: %v", raw, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// baselineOutputs extracts {"outputs": [...]}.
func baselineOutputs(body []byte) ([]float64, error) {
	var r struct {
		Outputs []float64 `json:"outputs"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	return r.Outputs, nil
}

// loadExpected reads pctr_v1's input rows and expected outputs from expected.json.
func loadExpected(path string) (rows [][]float64, want []float64, err error) {
	return loadExpectedModel(path, strings.TrimSuffix(modelPath, "/"))
}

// loadExpectedModel reads the input rows ([N,64]) and expected outputs of
// the model name (e.g. "pctr_v2") from expected.json.
func loadExpectedModel(path, name string) (rows [][]float64, want []float64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	type tensor struct {
		Shape []int     `json:"shape"`
		Data  []float64 `json:"data"`
	}
	var doc map[string]struct {
		Inputs  []tensor `json:"inputs"`
		Outputs []tensor `json:"outputs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	m, ok := doc[name]
	if !ok || len(m.Inputs) != 1 || len(m.Outputs) < 1 {
		return nil, nil, fmt.Errorf("%s: no %s entry with one input and an output", path, name)
	}
	in := m.Inputs[0]
	if len(in.Shape) != 2 || in.Shape[0] < 1 || in.Shape[1] != 64 || len(in.Data) != in.Shape[0]*in.Shape[1] {
		return nil, nil, fmt.Errorf("%s: %s input shape %v with %d values, want [N,64]", path, name, in.Shape, len(in.Data))
	}
	for i := 0; i < in.Shape[0]; i++ {
		rows = append(rows, in.Data[i*64:(i+1)*64])
	}
	if len(m.Outputs[0].Data) != len(rows) {
		return nil, nil, fmt.Errorf("%s: %d outputs for %d rows", path, len(m.Outputs[0].Data), len(rows))
	}
	return rows, m.Outputs[0].Data, nil
}

// deepEndpoint is the endpoint of deepPath on the grove instance at
// baseURL, named server, checked against examples/bench/expected.json.
func deepEndpoint(ctx context.Context, server, baseURL, root string, timeout time.Duration) (*endpoint, error) {
	rows, want, err := loadExpectedModel(filepath.Join(root, "examples", "bench", "expected.json"), strings.TrimSuffix(deepPath, "/"))
	if err != nil {
		return nil, err
	}
	ep := groveEndpointFor(server, baseURL)
	ep.api = "POST /v1/inference (" + deepPath + ")"
	ep.body = func(row []float64, batch int) []byte { return groveBodyFor(deepPath, repeat(row, batch)) }
	ep.rowsBody = func(rows [][]float64) []byte { return groveBodyFor(deepPath, rows) }
	if err := checkAnswer(ctx, ep, rows, want, timeout); err != nil {
		return nil, fmt.Errorf("check request: %w", err)
	}
	return ep, nil
}

// checkAnswer sends all expected.json rows in one request and compares the
// outputs with the expected ones, so a server that answers fast but wrongly
// is caught before it is measured.
func checkAnswer(ctx context.Context, ep *endpoint, rows [][]float64, want []float64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(ep.rowsBody(rows)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range ep.headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(name, strings.TrimSpace(value))
	}
	client := http.DefaultClient
	if ep.tlsConf != nil {
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: ep.tlsConf.Clone()}}
		defer client.CloseIdleConnections()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, clip(body, 300))
	}
	got, err := ep.outputs(body)
	if err != nil {
		return fmt.Errorf("%v in %s", err, clip(body, 300))
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d: %s", len(got), len(want), clip(body, 300))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-4 {
			return fmt.Errorf("output %d = %v, want %v (±1e-4)", i, got[i], want[i])
		}
	}
	return nil
}

// clip shortens b for messages.
func clip(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// scenarioSpec is the load of batch rows of row at concurrency conc on
// ep, for warmup plus duration.
func scenarioSpec(ep *endpoint, row []float64, batch, conc int, warmup, duration time.Duration, o options) loadSpec {
	spec := loadSpec{url: ep.url, tlsConf: ep.tlsConf, headers: ep.headers, okMarker: ep.okMarker, errMarker: ep.errMarker,
		batch: batch, conc: conc, warmup: warmup, duration: duration, timeout: o.timeout}
	if ep.grpc != nil {
		spec.newCall = ep.grpc.caller(row, batch, o.timeout, o.grpcGo)
	} else {
		spec.body = ep.body(row, batch)
	}
	return spec
}
