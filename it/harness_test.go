// Package it holds Grove's integration tests: they build the real grove
// binary (with the fault-injection runtime compiled in), run it against
// buckets on the local disk, on fake-gcs-server and on gofakes3, and talk
// to it over HTTP like a client would.
package it

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// groveBin is the binary under test, built once by TestMain.
var groveBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(floodEnv); spec != "" {
		os.Exit(runFlooder(spec))
	}
	nextPort.Store(portFloor + rand.Int64N(portSpan))
	dir, err := os.MkdirTemp("", "grove-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	groveBin = filepath.Join(dir, "grove")
	build := exec.Command("go", "build", "-tags", "faultinject", "-o", groveBin, "./cmd/grove")
	build.Dir = repoRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building grove:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// grove is one running grove process.
type grove struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	grpc string // host:port of the gRPC services
	// adminGRPC is host:port of the admin gRPC listener ("off" without
	// --admin-grpc).
	adminGRPC string
	logs      *syncBuffer
	done      chan error
}

// freeAddr returns a loopback address nobody listens on. Its ports come
// from below the kernel's ephemeral range, one after another from a random
// start (nextPort), so that tests running in parallel never get the same
// one, and no client connection (whose local port the kernel picks from
// the ephemeral range; some tests open thousands) can take it between
// now and the moment grove binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		p := nextPort.Add(1)
		addr := fmt.Sprintf("127.0.0.1:%d", portFloor+(p-portFloor)%portSpan)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}

// The ports freeAddr hands out: portSpan of them from portFloor, below
// Linux's default ephemeral range (32768-60999).
const (
	portFloor = 20000
	portSpan  = 12000
)

// nextPort is the last port freeAddr tried; TestMain starts it at a random
// point of the range, so that two test processes (go test -count) rarely
// start together.
var nextPort atomic.Int64

// startGrove runs grove serve on bucketURL with a 1s poll interval and waits
// until it is ready. The process is stopped when the test ends.
func startGrove(t *testing.T, bucketURL string, env []string, args ...string) *grove {
	t.Helper()
	return startBinary(t, groveBin, "", append(os.Environ(), env...), bucketURL, args...)
}

// startBinary is startGrove for the grove binary bin, run in the working
// directory dir ("": this one) with exactly the environment env.
func startBinary(t *testing.T, bin, dir string, env []string, bucketURL string, args ...string) *grove {
	t.Helper()
	// Port 0: grove binds free ports itself and names them in its
	// "grove serving" line, so that tests running in parallel never race
	// for a port between choosing and binding it.
	all := append([]string{"serve", "--bucket", bucketURL, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--poll-interval", "1s",
		"--cache-dir", t.TempDir(), "--log-level", "debug"}, args...)
	cmd := exec.Command(bin, all...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Dir, cmd.Env = dir, env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &grove{t: t, cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("grove logs:\n%s", logs.String())
		}
	})
	g.waitFor("grove to name its listeners", 60*time.Second, func() bool {
		addrs, ok := servingAddrs(logs.String())
		g.url, g.grpc, g.adminGRPC = "http://"+addrs["http"], addrs["grpc"], addrs["admin_grpc"]
		return ok
	})
	g.waitFor("grove to be ready", 60*time.Second, func() bool {
		code, _ := g.get("/readyz")
		return code == http.StatusOK
	})
	return g
}

// servingAddrs reads the listeners' addresses (by name: http, grpc,
// admin_http, admin_grpc) from grove's "grove serving" log line, once it
// is in logs.
func servingAddrs(logs string) (map[string]string, bool) {
	i := strings.Index(logs, `msg="grove serving"`)
	if i < 0 {
		return nil, false
	}
	line, _, _ := strings.Cut(logs[i:], "\n")
	addrs := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			addrs[k] = v
		}
	}
	return addrs, addrs["http"] != ""
}

// stop sends SIGTERM and waits for the process to exit; it returns the exit error.
func (g *grove) stop() error {
	if g.cmd.ProcessState != nil {
		return nil
	}
	_ = g.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-g.done:
		g.done <- err
		return err
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		return fmt.Errorf("grove did not exit within 30s of SIGINT")
	}
}

func (g *grove) waitFor(what string, timeout time.Duration, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-g.done:
			g.done <- err
			g.t.Fatalf("grove exited (%v) while waiting for %s\n%s", err, what, g.logs.String())
		default:
		}
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.t.Fatalf("timed out after %v waiting for %s", timeout, what)
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (g *grove) get(path string) (int, []byte) {
	resp, err := client.Get(g.url + path)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// baResponse is the B&A batch response.
type baResponse struct {
	Response []struct {
		ModelPath string `json:"model_path"`
		Tensors   []struct {
			TensorName    string    `json:"tensor_name"`
			TensorShape   []int64   `json:"tensor_shape"`
			DataType      string    `json:"data_type"`
			TensorContent []float64 `json:"tensor_content"`
		} `json:"tensors"`
		Error *struct {
			ErrorType   string `json:"error_type"`
			Description string `json:"description"`
		} `json:"error"`
	} `json:"response"`
}

// infer posts a B&A batch request and decodes the answer.
func (g *grove) infer(body string) (int, baResponse, error) {
	var out baResponse
	resp, err := client.Post(g.url+"/v1/inference", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, out, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return resp.StatusCode, out, fmt.Errorf("decoding %q: %w", b, err)
	}
	return resp.StatusCode, out, nil
}

// status fetches /v1/status.
func (g *grove) status() statusDoc {
	g.t.Helper()
	_, b := g.get("/v1/status")
	var st statusDoc
	if err := json.Unmarshal(b, &st); err != nil {
		g.t.Fatalf("decoding status %q: %v", b, err)
	}
	return st
}

type statusDoc struct {
	Ready  bool `json:"ready"`
	Config struct {
		Source    string `json:"source"`
		LastError string `json:"last_error"`
		Models    int    `json:"models"`
	} `json:"config"`
	Models []struct {
		Path      string `json:"model_path"`
		State     string `json:"state"`
		Checksum  string `json:"checksum"`
		Runtime   string `json:"runtime"`
		LastError string `json:"last_error"`
		Crashes   int64  `json:"crashes"`
		Served    int64  `json:"served"`
		GraceMs   *int64 `json:"grace_remaining_ms"`
		Replicas  int    `json:"replicas"`
		// MemoryBytes is the RSS growth its load measured.
		MemoryBytes int64 `json:"memory_bytes"`
	} `json:"models"`
}

func (s statusDoc) model(path string) (state, checksum, lastErr string) {
	for _, m := range s.Models {
		if m.Path == path {
			return m.State, m.Checksum, m.LastError
		}
	}
	return "", "", ""
}

// tensorJSON renders one B&A request tensor with string contents.
func tensorJSON(dtype string, shape []int64, data []float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"data_type":%q,"tensor_shape":[`, dtype)
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteString(`],"tensor_content":[`)
	for i, v := range data {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(strconv.FormatFloat(v, 'g', -1, 64)))
	}
	b.WriteString("]}")
	return b.String()
}

// itemJSON renders one request item.
func itemJSON(path string, tensors ...string) string {
	return fmt.Sprintf(`{"model_path":%q,"tensors":[%s]}`, path, strings.Join(tensors, ","))
}

func batchJSON(items ...string) string {
	return `{"request":[` + strings.Join(items, ",") + `]}`
}

// checkClose fails unless got and want agree to tol.
func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := got[i] - want[i]; d > tol || d < -tol {
			t.Fatalf("%s[%d] = %v, want %v (±%v)", what, i, got[i], want[i], tol)
		}
	}
}

// withTimeout is a context for one test step.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// workers runs a load generator's request loop on its goroutines until
// finish: the skeleton the load generators of these tests share.
type workers struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// start runs step(w, i) on n goroutines, w = 0..n-1, with i = w, w+1, ...
// counting the requests each has sent, until finish.
func (ws *workers) start(n int, step func(w, i int)) {
	ws.stop = make(chan struct{})
	for w := range n {
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			for i := w; ; i++ {
				select {
				case <-ws.stop:
					return
				default:
				}
				step(w, i)
			}
		}()
	}
}

// finish stops the loops and waits for their requests; it may be called again.
func (ws *workers) finish() {
	ws.once.Do(func() { close(ws.stop) })
	ws.wg.Wait()
}
