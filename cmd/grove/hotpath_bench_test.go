package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/ba/batest"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/runtimes"
	"github.com/groveml/grove/transport/h1"
	"github.com/groveml/grove/transport/httpserver"
)

// BenchmarkServeInference measures one whole POST /v1/inference through
// the HTTP handler, the router and model actors and libtorch (pctr_v1,
// batch 1 and 64), without the network: its allocs/op are the
// allocations per request of Grove's hot path.
func BenchmarkServeInference(b *testing.B) {
	sys := startPCTR(b, nil)
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	api := httpserver.New(httpserver.Options{Logger: log, Registerer: reg})
	ba.Register(api, sys, ba.ParseOptions{})
	h := api.Handler()
	for _, rows := range []int{1, 64} {
		body := pctrBody(rows)
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			w := httptest.NewRecorder()
			serve := func() {
				w.Body.Reset()
				req := httptest.NewRequest(http.MethodPost, "/v1/inference", bytes.NewReader(body))
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body)
				}
			}
			for range 3 {
				serve() // TorchScript optimises on the second run
			}
			var resp struct {
				Response []struct {
					Tensors []json.RawMessage `json:"tensors"`
				} `json:"response"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Response) != 1 || len(resp.Response[0].Tensors) == 0 {
				b.Fatalf("answer %s: %v", w.Body, err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
		})
	}
}

// BenchmarkServeInferenceHTTP measures POST /v1/inference of one pctr_v1
// row through the whole server as grove serve runs it: each HTTP engine
// (engine=h1, the default, and engine=net/http) on
// a loopback listener (with grove serve's default timeouts), the API
// handler, the router and model actors and libtorch, driven by raw
// keep-alive HTTP/1.1 clients in this process (as grovebench's are: a
// prebuilt request written, the answer read, nothing allocated), one
// (conc=1) or 32 at once (conc=32). The body's numbers are written as
// grovebench writes them (float32 values in their shortest float64 form,
// as Python clients send them). Besides ns/op it reports cpu-ns/op, the
// process's CPU time per request, client included (getrusage); allocs/op
// are the server's allocations per request.
func BenchmarkServeInferenceHTTP(b *testing.B) {
	sys := startPCTR(b, nil)
	def := conf.DefaultServer()
	api := httpserver.New(httpserver.Options{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		MaxBodyBytes: def.MaxBodyBytes, ReadTimeout: def.HTTPReadTimeout, WriteTimeout: def.HTTPWriteTimeout,
		ReadHeaderTimeout: def.HTTPReadHeaderTimeout, IdleTimeout: def.HTTPIdleTimeout, MaxHeaderBytes: def.HTTPMaxHeaderBytes})
	ba.Register(api, sys, ba.ParseOptions{})
	b.Run("engine="+conf.HTTPEngineH1, func(b *testing.B) { serveRaw(b, api.NewH1Server(api.Handler(), nil), 1, 32) })
	b.Run("engine="+conf.HTTPEngineNetHTTP, func(b *testing.B) { serveRaw(b, api.NewHTTPServer(api.Handler(), nil), 1, 32) })
}

// BenchmarkDirectInferenceHTTP is BenchmarkServeInferenceHTTP on the
// server of grovebench's direct row: a plain handler, served by
// transport/h1, that parses the body with the B&A codec and calls the
// pctr_v1 servable itself, with no actors and none of httpserver's routes,
// limits, deadlines or metrics. BenchmarkServeInferenceHTTP/engine=h1 over
// this, at concurrency 1, is what those cost a request.
func BenchmarkDirectInferenceHTTP(b *testing.B) {
	dir := "../../examples/bucket/pctr_v1"
	files := []string{"model.pt"}
	rt, err := runtimesOf(runtimes.Libraries{}).Find(os.DirFS(dir), files)
	if err != nil {
		b.Fatal(err)
	}
	sv, err := rt.Load(context.Background(), dir, files, servables.LoadOptions{IntraOpThreads: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sv.Close() })
	h := batest.DirectHandler(sv)
	serveRaw(b, h1.New(h, h1.Options{ReadHeaderTimeout: 10 * time.Second}), 1)
}

// rawServer is an HTTP server serveRaw runs: net/http's or h1's.
type rawServer interface {
	Serve(net.Listener) error
	Close() error
}

// serveRaw serves srv on a loopback listener and runs a sub-benchmark of
// POST /v1/inference (clientBody) for each concurrency of concs, with raw
// clients (rawClient), reporting cpu-ns/op beside ns/op.
func serveRaw(b *testing.B, srv rawServer, concs ...int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	body := clientBody(b)
	req := fmt.Appendf(nil, "POST /v1/inference HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		ln.Addr(), len(body), body)
	for _, conc := range concs {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			clients := make(chan *rawClient, conc)
			for range conc {
				c, err := dialRaw(ln.Addr().String(), req)
				if err != nil {
					b.Fatal(err)
				}
				defer c.close()
				for range 3 {
					if err := c.do(); err != nil { // TorchScript optimises on the second run
						b.Fatal(err)
					}
				}
				clients <- c
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			if conc == 1 {
				c := <-clients
				for b.Loop() {
					if err := c.do(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism((conc + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					c := <-clients
					for pb.Next() {
						if err := c.do(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// clientBody is a B&A request of pctr_v1's first expected row, its
// numbers written as grovebench writes them (strconv's shortest float64
// form).
func clientBody(tb testing.TB) []byte {
	tb.Helper()
	raw, err := os.ReadFile("../../examples/bucket/expected.json")
	if err != nil {
		tb.Fatal(err)
	}
	var expected map[string]struct {
		Inputs []struct {
			Data []float64 `json:"data"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(raw, &expected); err != nil {
		tb.Fatal(err)
	}
	in := expected["pctr_v1"].Inputs
	if len(in) == 0 || len(in[0].Data) < 64 {
		tb.Fatalf("expected.json: no row of 64 pctr_v1 inputs")
	}
	vals := make([]string, 64)
	for i, v := range in[0].Data[:64] {
		vals[i] = `"` + strconv.FormatFloat(v, 'g', -1, 64) + `"`
	}
	return []byte(`{"request":[{"model_path":"pctr_v1/","tensors":[{"data_type":"FLOAT","tensor_shape":[1,64],"tensor_content":[` +
		strings.Join(vals, ",") + `]}]}]}`)
}

// rawClient sends one prebuilt HTTP/1.1 request at a time on a keep-alive
// connection and reads each answer without allocating.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	req  []byte
	body []byte
}

func dialRaw(addr string, req []byte) (*rawClient, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawClient{conn: conn, r: bufio.NewReaderSize(conn, 16<<10), req: req, body: make([]byte, 16<<10)}, nil
}

func (c *rawClient) close() { _ = c.conn.Close() }

// do sends the request and reads the answer, which must be a 200 with a
// Content-Length.
func (c *rawClient) do() error {
	if _, err := c.conn.Write(c.req); err != nil {
		return err
	}
	status, err := c.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("answer %q", status)
	}
	n := -1
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if name, val, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(name, []byte("Content-Length")) {
			if n, err = strconv.Atoi(string(bytes.TrimSpace(val))); err != nil {
				return err
			}
		}
	}
	if n < 0 || n > len(c.body) {
		return fmt.Errorf("answer of Content-Length %d", n)
	}
	_, err = io.ReadFull(c.r, c.body[:n])
	return err
}
